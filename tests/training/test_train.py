"""PPO training CLI: logs, checkpoints, the loop equal to Brax's ppo.train, corrupt checkpoints, user errors
(exact resume after SIGKILL: tests/training/test_resume.py).

Training runs in float32 (the library default; the test session enables x64 globally).
"""

import shutil
from pathlib import Path

import jax
import numpy as np
import pytest

from so101_mjx import cli
from so101_mjx.errors import InputError
from so101_mjx.training import checkpoint, presets
from so101_mjx.training.progress import EVAL_KEYS, read_csv

ENV = "SO101Reach-v0"


@pytest.fixture(scope="module")
def float32():
    jax.config.update("jax_enable_x64", False)
    yield
    jax.config.update("jax_enable_x64", True)


def train_args(out: Path, *extra: str) -> list[str]:
    return ["train", "--env", ENV, "--preset", "tiny", "--seed", "3", "--out", str(out), *extra]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, float32) -> Path:
    out = tmp_path_factory.mktemp("tiny") / "run"
    assert cli.main(train_args(out, "--export")) == 0
    return out


@pytest.mark.slow
def test_tiny_run_writes_csv_png_tensorboard_and_checkpoints(tiny_run):
    preset = presets.preset(ENV, "tiny")
    rows = read_csv(tiny_run / "metrics.csv")
    assert [r["step"] for r in rows] == [k * preset.steps_per_epoch for k in range(preset.num_evals)]
    assert all(np.isfinite(r["eval_reward"]) and 0 <= r["eval_success"] <= 1 for r in rows)
    assert (tiny_run / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    assert any((tiny_run / "tb").iterdir())
    saved = checkpoint.steps(tiny_run)
    assert [int(p.name) for p in saved] == [r["step"] for r in rows[1:]]
    run = checkpoint.read_run(saved[-1])
    assert (run["env"], run["obs_size"], run["step"]) == (ENV, 20, preset.total_steps)
    assert run["env_config"]["episode_length"] == preset.episode_length
    assert (tiny_run / "policy.onnx").is_file() and (tiny_run / "policy.npz").is_file()
    assert all((p / checkpoint.PARAMS_FILE).is_file() and (p / checkpoint.STATE_FILE).is_file() for p in saved)
    assert not any((tiny_run / checkpoint.CHECKPOINTS / checkpoint.STAGING).iterdir())  # nothing left staged


@pytest.mark.slow
def test_fresh_run_equals_brax_ppo_train(tiny_run, float32, monkeypatch):
    """so101_mjx.training.ppo_loop reproduces brax's ppo.train: the same params at every checkpoint and the same evals,
    bitwise."""
    import functools

    from brax.training.agents.ppo import train as ppo_train

    from so101_mjx.training.ppo_loop import replicate

    # brax 0.14.2's ppo.train calls jax.device_put_replicated, which jax 0.10 removed: for this call only
    monkeypatch.setattr(jax, "device_put_replicated", replicate, raising=False)

    from so101_mjx.training import brax_env as envs, networks

    preset = presets.preset(ENV, "tiny")
    env = envs.make_env(ENV, preset.env_overrides(), "c")
    params, evals = {}, {}
    ppo_train.train(
        environment=env, wrap_env_fn=functools.partial(envs.wrap_env_fn, success_bonus=preset.success_bonus),
        episode_length=env.episode_length, network_factory=networks.network_factory(**preset.network()), seed=3,
        deterministic_eval=True, use_pmap_on_reset=False,
        progress_fn=lambda step, metrics: evals.__setitem__(int(step), metrics),
        policy_params_fn=lambda step, make_policy, p: params.__setitem__(int(step), p),
        **preset.loop_kwargs(),
    )
    saved = checkpoint.steps(tiny_run)
    assert [int(p.name) for p in saved] == sorted(params)[1:]
    for step_dir in saved:
        ours, theirs = jax.tree.leaves(checkpoint.load(step_dir)[1]), jax.tree.leaves(params[int(step_dir.name)])
        assert len(ours) == len(theirs) == 14
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    rows = read_csv(tiny_run / "metrics.csv")
    assert [r["step"] for r in rows] == sorted(evals)
    for row in rows:
        for column, key in EVAL_KEYS.items():
            assert row[column] == float(evals[int(row["step"])][key]), (row["step"], column)


def test_rerun_is_refused_and_a_finished_run_is_not_retrained(tiny_run, float32, capsys):
    assert cli.main(train_args(tiny_run)) == 2  # no silent overwrite
    assert "pass --resume" in capsys.readouterr().err
    assert cli.main(train_args(tiny_run, "--resume")) == 0
    assert "already trained 256 of 256 steps" in capsys.readouterr().out


@pytest.fixture
def run_copy(tiny_run, tmp_path) -> Path:
    """A copy of the tiny run's directory, its last checkpoint to be damaged."""
    copy = tmp_path / "run"
    shutil.copytree(tiny_run, copy, ignore=shutil.ignore_patterns("tb"))
    return copy


@pytest.mark.parametrize("damage", ["empty", "garbage"])
def test_corrupt_checkpoint_is_one_error_line(run_copy, damage, float32, capsys):
    last = checkpoint.steps(run_copy)[-1]
    for name in (checkpoint.PARAMS_FILE, checkpoint.STATE_FILE):
        (last / name).write_bytes(b"" if damage == "empty" else b"PK\x03\x04not a zip file" * 50)
    assert cli.main(["export", str(run_copy)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{last / checkpoint.PARAMS_FILE}: unreadable checkpoint file" in err and len(err.splitlines()) == 1
    (run_copy / "metrics.csv").unlink()  # the final eval row is missing: --resume restores the state
    assert cli.main(train_args(run_copy, "--resume")) == 2
    err = capsys.readouterr().err.strip()
    assert f"{last / checkpoint.STATE_FILE}: unreadable checkpoint file" in err and len(err.splitlines()) == 1


def test_a_step_without_params_npz_is_one_line(run_copy):
    """so101_mjx reads params.npz only (the Orbax files are for Brax's tools): without it, one line naming it."""
    last = checkpoint.steps(run_copy)[-1]
    (last / checkpoint.PARAMS_FILE).unlink()
    with pytest.raises(InputError, match="unreadable checkpoint file") as err:
        checkpoint.load(last)
    assert str(last / checkpoint.PARAMS_FILE) in str(err.value) and len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "--env", "SO101Nope-v0"], "unknown env"),
        (["train", "--env", ENV, "--preset", "huge"], "unknown preset"),
        (["export", "/nonexistent/run"], "not found"),
    ],
)
def test_user_errors_are_one_line(argv, message, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_resume_with_another_env_is_refused(tiny_run, float32, capsys):
    argv = ["train", "--env", "SO101PickCube-v0", "--preset", "tiny", "--out", str(tiny_run), "--resume"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "obs_size 20 vs 17" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_replay_runs_the_export_in_the_gym_env(tiny_run, float32, capsys):
    assert cli.main(["replay", str(tiny_run / "policy.npz"), "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert "success rate" in out and "(CPU MuJoCo, gymnasium)" in out
    assert cli.main(["replay", str(tiny_run / "policy.onnx"), "--env", "SO101PickCube-v0", "--episodes", "1"]) == 2
    assert "expects observations of size 20" in capsys.readouterr().err


@pytest.mark.parametrize("env_name, name", [(e, p) for e, presets in presets.PRESETS.items() for p in presets])
def test_every_preset_builds_its_env(env_name, name):
    """Each preset's env overrides are valid config (ValueErrors would surface only at train time)."""
    from so101_mjx.training import brax_env as envs

    preset = presets.preset(env_name, name)
    env = envs.make_env(env_name, preset.env_overrides(), "c")
    actions = 6 if env.config.control_mode == "joint" else 4  # the six motors, or [dx, dy, dz, grasp]
    assert (env.action_size, env.episode_length) == (actions, preset.episode_length or env.config.episode_length)
    assert preset.total_steps >= preset.num_timesteps


def test_replay_in_the_reference_env(tmp_path, capsys):
    """--reference runs the policy in lerobot_env_so101's own env, given the config fields it knows."""
    pytest.importorskip("lerobot_env_so101")
    from so101_mjx.training.policy import NumpyPolicy, PolicyWeights

    rng = np.random.default_rng(0)
    weights = PolicyWeights(
        mean=np.zeros(17, np.float32), std=np.ones(17, np.float32), activation="tanh",
        kernels=(0.1 * rng.normal(size=(17, 8)).astype(np.float32), 0.1 * rng.normal(size=(8, 8)).astype(np.float32)),
        biases=(np.zeros(8, np.float32), np.zeros(8, np.float32)),
    )
    env_config = {"top_down_ik": True, "jaw_pads": True, "reward_type": "dense", "grasp_reward": 0.25,
                  "episode_length": 5}
    meta = {"env": "SO101PickCube-v0", "env_config": env_config, "obs_size": 17,
            "action_map": {"scale": [1.0, 1.0, 1.0, 0.5], "offset": [0.0, 0.0, 0.0, 0.5]}}
    NumpyPolicy(weights, meta, meta["action_map"]["scale"], meta["action_map"]["offset"]).save(tmp_path / "policy.npz")
    assert cli.main(["replay", str(tmp_path / "policy.npz"), "--reference", "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert "lerobot_env_so101 SO101PickCubeGymEnv" in out and "mean episode length 5.0" in out
    assert cli.main(["replay", str(tmp_path / "policy.npz"), "--reference", "--env", "SO101Reach-v0"]) == 2
    assert "lerobot_env_so101 has no SO101Reach-v0" in capsys.readouterr().err


def test_a_resumed_run_rewrites_its_csv_with_integer_steps(tmp_path):
    """Resuming rewrites metrics.csv up to the resumed step: its steps stay integers ("256", not "256.0")."""
    from so101_mjx.training.progress import CSV_FILE, Recorder

    first = Recorder(tmp_path, total_steps=768)
    for step in (0, 256, 512):
        first(step, {"eval/episode_reward": 1.0})
    first.close("run")
    Recorder(tmp_path, total_steps=768, resume_step=512).close("resumed")
    lines = (tmp_path / CSV_FILE).read_text().splitlines()
    assert [line.split(",")[0] for line in lines] == ["step", "0", "256"]
    assert [row["step"] for row in read_csv(tmp_path / CSV_FILE)] == [0, 256]
    assert all(isinstance(row["step"], int) for row in read_csv(tmp_path / CSV_FILE))
