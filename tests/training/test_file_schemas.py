"""Hand-edited training files give one line naming the file, the field, what was found and what is
allowed: policy .npz arrays, ``run.json``, ``metrics.csv``, ``distill.json`` (copies of
``tests/fixtures/v0.1.0``'s tiny PickCube run, or a tiny random pixel student)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import one_error_line

from so101_mjx import cli
from so101_mjx.errors import InputError
from so101_mjx.training import checkpoint, pixel_policy, policies, progress

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "v0.1.0" / "pick_cube_run"
STEP = "checkpoints/000000000256"
RESUME = ["train", "--env", "SO101PickCube-v0", "--preset", "tiny", "--num-timesteps", "512", "--resume", "--out"]


@pytest.fixture
def run(tmp_path) -> Path:
    return shutil.copytree(FIXTURE, tmp_path / "run")


def edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps(edit(data)))


# -- policy .npz --------------------------------------------------------------------------------
@pytest.mark.parametrize(("key", "change", "message"), [
    ("mean", lambda a: a.astype(str), "mean must be a float32 array, got <U"),
    ("std", lambda a: a + 0j, "std must be a float32 array, got complex"),
    ("bias_0", lambda a: a.astype(object), "not an exported so101_mjx policy"),  # a pickled array: never unpickled
    ("metadata", lambda a: np.asarray("{not json"), "not an exported so101_mjx policy"),
])
@pytest.mark.parametrize("command", ["eval", "replay"])
def test_an_edited_policy_npz_is_one_line(tmp_path, key, change, message, command, capsys):
    with np.load(FIXTURE / "policy.npz") as z:
        arrays = dict(z)
    arrays[key] = change(arrays[key])
    np.savez(tmp_path / "policy.npz", **arrays)
    assert cli.main([command, str(tmp_path / "policy.npz"), "--episodes", "1"]) == 2
    one_error_line(capsys, "policy.npz", message)


# -- run.json -----------------------------------------------------------------------------------
def without(key):
    return lambda run: {k: v for k, v in run.items() if k != key}


def network(**fields):
    return lambda run: {**run, "network": {**run["network"], **fields}}


RUN_EDITS = {
    "no_step": (without("step"), "metadata field 'step' must be an int >= 0, got nothing"),
    "zero_layer": (network(policy_hidden_layer_sizes=[0]), "'network.policy_hidden_layer_sizes' must be a list"),
    "string_layers": (network(value_hidden_layer_sizes="8"), "'network.value_hidden_layer_sizes' must be a list"),
    "extra_network_field": (network(dropout=0.1), "unknown metadata field(s) ['network.dropout']"),
    "list": (lambda run: [run], "the top level must be a dict (a JSON object), got list"),
    "obs_size_string": (lambda run: {**run, "obs_size": "17"},
                        "metadata field 'obs_size' must be an int >= 1, got str"),
    "normalize_string": (lambda run: {**run, "normalize_observations": "yes"},
                         "'normalize_observations' must be true or false"),
}


@pytest.mark.parametrize("case", sorted(RUN_EDITS))
def test_an_edited_run_json_is_one_line_for_export_eval_and_resume(run, tmp_path, case, float32, capsys):
    edit, message = RUN_EDITS[case]
    edit_json(run / STEP / "run.json", edit)
    for argv in (["export", str(run), "--out", str(tmp_path / "p.onnx")], ["eval", str(run), "--episodes", "1"],
                 [*RESUME, str(run)]):
        assert cli.main(argv) == 2, argv
        one_error_line(capsys, f"{run / STEP / 'run.json'}: ", message)
    assert not (tmp_path / "p.onnx").exists()


def test_a_run_json_that_is_not_json_is_one_line(run, capsys):
    (run / STEP / "run.json").write_text('{"env": "SO101PickCube-v0",')
    assert cli.main(["eval", str(run), "--episodes", "1"]) == 2
    one_error_line(capsys,
                   "run.json: not valid JSON (Expecting property name enclosed in double quotes at line 1, column 28)")


# -- metrics.csv --------------------------------------------------------------------------------
HEADER = ",".join(progress.COLUMNS)
CSV_EDITS = {
    "extra_column": (HEADER + ",note\n0,1.0,2.0,0.5,0.0,8,first\n", "the header must be the columns"),
    "extra_value": (HEADER + "\n0,1.0,2.0,0.5,0.0,8,9\n", "line 2 holds 7 values, expected 6"),
    "missing_column": ("step,wall_s\n0,1.0\n", "the header must be the columns"),
    "text_value": (HEADER + "\n0,1.0,fast,0.5,0.0,8\n", "line 2, column 'steps_per_s' holds 'fast'; expected a number"),
    "fractional_step": (HEADER + "\n0.5,1.0,2.0,0.5,0.0,8\n",
                        "line 2, column 'step' holds '0.5'; expected a whole number"),
}


@pytest.mark.parametrize("case", sorted(CSV_EDITS))
def test_an_edited_metrics_csv_is_one_line_before_resume_writes(run, case, float32, capsys):
    text, message = CSV_EDITS[case]
    (run / "metrics.csv").write_text(text)
    before = (run / "run.json").read_bytes()
    assert cli.main([*RESUME, str(run)]) == 2
    one_error_line(capsys, "metrics.csv: ", message)
    assert (run / "metrics.csv").read_text() == text and (run / "run.json").read_bytes() == before
    with pytest.raises(InputError, match="metrics.csv"):
        progress.read_csv(run / "metrics.csv")


def test_a_written_metrics_csv_reads_back(tmp_path):
    (tmp_path / "metrics.csv").write_text(HEADER + "\n256.0,1.5,,0.25,0.0,8\n")
    (row,) = progress.read_csv(tmp_path / "metrics.csv")
    assert row["step"] == 256 and isinstance(row["step"], int) and np.isnan(row["steps_per_s"])


# -- distill.json -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def student(tmp_path_factory) -> Path:
    from so101_mjx.training import distill

    out = tmp_path_factory.mktemp("distill")
    net = pixel_policy.PixelStudent(channels=(4, 6, 5), hidden=16)
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, 36, 36, 3), jnp.uint8), jnp.zeros((1, 14)))
    distill.save(out, params, {"teacher": "t.onnx", "env": "SO101PickCube-v0",
                               "env_config": {"image_obs": True, "image_size": 36, "episode_length": 3}})
    return out


DISTILL_EDITS = {
    "no_image_size": (lambda m: {**m, "env_config": {"image_obs": True}},
                      "field 'env_config.image_size' must be an int >= 1, got nothing"),
    "image_size_text": (lambda m: {**m, "env_config": {"image_size": "36"}},
                        "field 'env_config.image_size' must be an int >= 1, got str"),
    "other_image_size": (lambda m: {**m, "env_config": {"image_size": 64}}, "image_size 64 gives 4x4x5 conv features"),
    "too_small": (lambda m: {**m, "env_config": {"image_size": 20}}, "image_size 20 gives 0x0x5 conv features"),
    "no_env": (without("env"), "field 'env' must be a string, got nothing"),
    "list": (lambda m: [m], "the top level must be a dict"),
}


@pytest.mark.parametrize("case", sorted(DISTILL_EDITS))
def test_an_edited_distill_json_is_one_line(student, tmp_path, case, capsys):
    edit, message = DISTILL_EDITS[case]
    run = shutil.copytree(student, tmp_path / "run")
    edit_json(run / "distill.json", edit)
    assert cli.main(["export", str(run), "--out", str(tmp_path / "s.onnx")]) == 2
    one_error_line(capsys, "distill.json: " if "conv features" not in message else "student.npz: ", message)
    with pytest.raises(InputError, match=r"distill.json|student.npz"):
        policies.load(run / "student.npz")


def test_checkpoint_read_run_names_the_file(run):
    edit_json(run / STEP / "run.json", without("env"))
    with pytest.raises(InputError,
                       match=r"run.json: metadata field 'env' must be a string, got nothing \(the field is missing\)"):
        checkpoint.read_run(run / STEP)
