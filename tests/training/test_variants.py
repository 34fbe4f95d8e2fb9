"""Presets by axis: a preset holds hyperparameters (and its task's training env config), an env variant
(``--env-config NAME|JSON``) lays joint mode, 30 Hz or servo ranges over any preset, and the former
preset names that crossed both axes still give the very run they named."""

import dataclasses
import json
import pathlib
import warnings

import pytest
from conftest import one_error_line

from so101_mjx import cli
from so101_mjx.cli import train
from so101_mjx.cli.main import build_parser
from so101_mjx.training import presets

# Every preset as it resolved when presets named env variants too (each field, env config included).
NAMED = json.loads((pathlib.Path(__file__).parent / "data" / "named_presets.json").read_text())
FORMER = [(env, old) for env, table in presets.RENAMED.items() for old in table]
VARIANT_KEYS = {"control_mode", "control_dt", "physics_dt", "relative_joint_targets",
                "max_relative_target", "servo_model"}


ADDED_SINCE = {"observation_noise": {}}  # preset fields added after the snapshot, at their defaults


def _fields(preset) -> dict:
    fields = json.loads(json.dumps(preset.asdict(), default=list))
    return {k: v for k, v in fields.items() if ADDED_SINCE.get(k, object()) != v}


@pytest.mark.parametrize("env, name", [(env, name) for env, table in NAMED.items() for name in table])
def test_every_name_gives_the_preset_it_gave(env, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        assert _fields(presets.preset(env, name)) == NAMED[env][name]


@pytest.mark.parametrize("env, old", FORMER)
def test_a_former_name_warns_with_a_spelling_that_gives_the_same_run(env, old):
    with pytest.warns(FutureWarning, match=f"preset '{old}' of {env} is now preset ") as said:
        former_name, former, former_variant = presets.resolve(env, old)
    spelling = train.spelling(said[0].message.renamed).split()  # the command line's spelling of the same run
    args = build_parser().parse_args(["train", "--env", env, *spelling])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new spelling warns of nothing
        name, preset, spec = presets.resolve(env, args.preset, None, args.env_config)
    overrides = {"num_timesteps": args.num_timesteps, "num_evals": args.num_evals}
    assert dataclasses.replace(preset, **{k: v for k, v in overrides.items() if v is not None}) == former
    assert name == former_name == presets.RENAMED[env][old].preset
    assert spec == former_variant == presets.RENAMED[env][old].variant


@pytest.mark.parametrize("env", sorted(presets.PRESETS))
def test_presets_hold_no_env_variant(env):
    for name, preset in presets.PRESETS[env].items():
        assert not VARIANT_KEYS & set(preset.env_config), f"{env} {name}: {preset.env_config}"


def test_a_variant_lays_its_fields_over_any_preset():
    base = presets.preset("SO101PickCube-v0", "cpu")
    varied = presets.resolve("SO101PickCube-v0", "cpu", env_config="joint-30hz")[1]
    assert varied.env_config == {**base.env_config, **presets.VARIANTS["SO101PickCube-v0"]["joint-30hz"].config}
    assert (varied.discounting, varied.unroll_length, varied.num_timesteps) == (0.99, 30, base.num_timesteps)
    custom = presets.resolve("SO101PushCube-v0", "tiny", env_config={"control_mode": "joint"})[1]
    assert custom.env_config["control_mode"] == "joint"


@pytest.mark.parametrize("env", sorted(presets.PRESETS))
def test_every_task_has_the_coarse_physics_step_variant(env):
    """``--env-config 5ms``: the preset with a 5 ms physics step, the control period unchanged."""
    base = presets.preset(env)
    varied = presets.resolve(env, env_config="5ms")[1]
    assert varied.env_config == {**base.env_config, "physics_dt": 0.005}
    assert dataclasses.replace(varied, env_config=base.env_config) == base


def test_an_unknown_variant_is_one_line_naming_the_choices(capsys):
    assert cli.main(["train", "--env", "SO101PickCube-v0", "--preset", "tiny", "--env-config", "joint-60hz"]) == 2
    one_error_line(capsys, "unknown env config 'joint-60hz'", "'joint-30hz'")
    assert cli.main(["train", "--env", "SO101PickCube-v0", "--preset", "joint", "--env-config", "joint"]) == 2
    one_error_line(capsys, "preset 'joint' is now --preset fast --env-config joint")

# a run records its variant: tests/follower/test_deploy.py::test_the_run_records_its_variant (its trained run)
