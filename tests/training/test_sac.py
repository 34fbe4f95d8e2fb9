"""SAC (:mod:`so101_mjx.training.sac_loop`, ``so101-mjx train --algo sac``): a run's files, the replay
buffer in its checkpoints, exact resume, the export equal to the policy SAC acts with, preset and
flag errors. Float32 (the library default), backend ``c``, the ``tiny-sac`` preset.
"""

import dataclasses
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest
from conftest import one_error_line

from so101_mjx import cli
from so101_mjx.errors import InputError
from so101_mjx.training import checkpoint, presets
from so101_mjx.training.preset import SacPreset
from so101_mjx.training.progress import WALL_CLOCK_COLUMNS, read_csv
from tests.training.test_poisoned_weights import digest
from tests.training.test_resume import saved_arrays

ENV = "SO101PickCube-v0"
EVALS = 4


def train_args(out: Path, *extra: str) -> list[str]:
    return ["train", "--env", ENV, "--algo", "sac", "--preset", "tiny-sac", "--seed", "2", "--num-evals", str(EVALS),
            "--backend", "c", "--out", str(out), *extra]


@pytest.fixture(scope="module")
def sac_run(tmp_path_factory):
    """The tiny-sac run, exported; float32 JAX (the library's default) for the tests that use it."""
    jax.config.update("jax_enable_x64", False)
    try:
        out = tmp_path_factory.mktemp("sac") / "run"
        assert cli.main(train_args(out, "--export")) == 0
        yield out
    finally:
        jax.config.update("jax_enable_x64", True)


@pytest.mark.slow
def test_sac_run_checkpoints_every_epoch_with_its_replay_buffer(sac_run):
    preset = dataclasses.replace(presets.preset(ENV, "tiny-sac"), num_evals=EVALS)
    rows = read_csv(sac_run / "metrics.csv")
    steps = [int(p.name) for p in checkpoint.steps(sac_run)]
    prefill = preset.min_replay_size
    assert [r["step"] for r in rows] == [0, *steps] and steps[-1] == preset.total_steps >= preset.num_timesteps
    assert np.diff(steps).tolist() == [steps[1] - steps[0]] * (EVALS - 2) and steps[0] > prefill
    run = checkpoint.read_run(checkpoint.resolve(sac_run))
    assert (run["algo"], run["preset"], run["preset_config"]["algo"]) == ("sac", "tiny-sac", "sac")
    last = checkpoint.resolve(sac_run)
    state = saved_arrays(last)
    buffer = state["training_state.npz .buffer.data"]
    flat = 2 * run["obs_size"] + run["action_size"] + 3  # obs, next obs, action, reward, discount, truncation
    assert buffer.shape == (preset.num_timesteps, flat)  # max_replay_size None: num_timesteps
    # A full buffer is a queue: the oldest transitions leave, the insert position stays at its size.
    assert int(state["training_state.npz .buffer.insert_position"]) == min(preset.total_steps, preset.num_timesteps)
    assert np.all(np.any(buffer != 0, axis=1))
    assert int(state["training_state.npz .training.gradient_steps.lo"]) == \
        (preset.total_steps - prefill) // preset.num_envs * preset.grad_updates_per_step
    assert (last / "sac_network_config.json").is_file()  # Brax's SAC checkpoint format beside params.npz
    assert (sac_run / "policy.onnx").is_file() and (sac_run / "policy.npz").is_file()


@pytest.mark.slow
def test_sac_resume_equals_the_uninterrupted_run(sac_run, tmp_path):
    """A run resumed from its second-to-last checkpoint ends with the last checkpoint bitwise (params,
    Adam moments, temperature, target Q, replay buffer, env states, keys) and the same eval rows."""
    copy = tmp_path / "run"
    shutil.copytree(sac_run, copy)
    last = checkpoint.resolve(copy)
    shutil.rmtree(last)
    assert cli.main(train_args(copy, "--resume")) == 0
    expected, resumed = saved_arrays(checkpoint.resolve(sac_run)), saved_arrays(checkpoint.resolve(copy))
    assert expected.keys() == resumed.keys()
    for name, value in expected.items():
        np.testing.assert_array_equal(resumed[name], value, err_msg=name)

    def evals(run_dir):
        return [{k: v for k, v in row.items() if k not in WALL_CLOCK_COLUMNS}
                for row in read_csv(run_dir / "metrics.csv")]

    assert evals(copy) == evals(sac_run)


@pytest.mark.slow
def test_sac_export_equals_the_policy_sac_acts_with(sac_run):
    """Exports read SAC's policy as PPO's: the ONNX/numpy policy equals Brax's SAC inference function
    (deterministic)."""
    from brax.training.acme import running_statistics
    from brax.training.agents.sac import networks as sac_networks

    from so101_mjx.training import networks
    from so101_mjx.training.brax_env import to_env_action
    from so101_mjx.training.policy import NumpyPolicy

    run, params = checkpoint.load(sac_run)
    network = networks.sac_network_factory(**run["network"])(
        run["obs_size"], run["action_size"], preprocess_observations_fn=running_statistics.normalize)
    brax_policy = sac_networks.make_inference_fn(network)(params[:2], deterministic=True)
    normalizer = params[0]  # observations like the ones it has seen
    obs = (normalizer.mean
           + normalizer.std * np.random.default_rng(0).normal(size=(512, run["obs_size"]))).astype(np.float32)
    scale, offset = (np.asarray(run["action_map"][k], np.float32) for k in ("scale", "offset"))
    expected = np.asarray(to_env_action(brax_policy(obs, None)[0], scale, offset))
    assert np.ptp(expected, axis=0).min() > 1e-3  # actions vary
    np.testing.assert_allclose(np.asarray(checkpoint.inference_fn(run, params)(obs)), expected, rtol=0, atol=1e-6)
    np.testing.assert_allclose(NumpyPolicy.load(sac_run / "policy.npz")(obs), expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("argv, message", [
    (["train", "--env", ENV, "--algo", "sac", "--preset", "tiny"],
     "'tiny' of SO101PickCube-v0 is a ppo preset, not sac"),
    (["train", "--env", ENV, "--algo", "ppo", "--preset", "tiny-sac"], "is a sac preset, not ppo"),
    (["train", "--env", "SO101Reach-v0", "--algo", "sac"], "SO101Reach-v0 has no 'sac' preset"),
    (["train", "--env", ENV, "--preset", "tiny-sac", "--num-processes", "2"],
     "SAC (preset 'tiny-sac') trains in one process"),
    (["train", "--env", ENV, "--algo", "td3"], "invalid choice: 'td3'"),
])
def test_sac_flag_errors_are_one_line(argv, message, capsys):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("field, value, message", [
    ("grad_updates_per_step", 0, "grad_updates_per_step must be an integer >= 1"),
    ("tau", 0.0, "tau must be a number in (0, 1]"),
    ("tau", float("nan"), "tau must be a number in (0, 1]"),
    ("min_replay_size", 1000, "min_replay_size (1000) must be below num_timesteps (1000)"),
    ("max_replay_size", 4, "max_replay_size (4) must hold min_replay_size (64)"),
    ("batch_size", 0, "batch_size must be an integer >= 1"),
])
def test_sac_preset_fields_are_checked(field, value, message):
    fields = {"num_timesteps": 1000, "num_envs": 8, "min_replay_size": 64, field: value}
    with pytest.raises(InputError) as err:
        SacPreset(**fields)
    assert message in str(err.value)


@pytest.mark.slow
def test_resuming_a_sac_run_with_ppo_is_refused(sac_run, tmp_path, capsys):
    copy = tmp_path / "run"
    shutil.copytree(sac_run, copy)
    argv = ["train", "--env", ENV, "--preset", "tiny", "--seed", "2", "--num-evals", str(EVALS), "--out",
            str(copy), "--resume"]
    assert cli.main(argv) == 2
    assert "algo 'sac' vs 'ppo'" in capsys.readouterr().err


# -- resumes of edited or poisoned SAC states --------------------------------------------------------
def resumable_copy(sac_run: Path, tmp_path: Path, keep: int) -> Path:
    """A copy of the run with only its first ``keep`` checkpoints (the resume continues from the last kept)."""
    copy = shutil.copytree(sac_run, tmp_path / "run", ignore=shutil.ignore_patterns("tb"))
    for step_dir in checkpoint.steps(copy)[keep:]:
        shutil.rmtree(step_dir)
    return copy


def edit_state(step_dir: Path, changes: dict) -> None:
    """Rewrite ``training_state.npz`` of ``step_dir``: array ``name`` becomes ``changes[name](arrays)`` (same dtype)."""
    file = step_dir / checkpoint.STATE_FILE
    with np.load(file) as z:
        arrays = dict(z)
    np.savez(file,
             **{**arrays, **{name: np.asarray(change(arrays), arrays[name].dtype) for name, change in changes.items()}})


@pytest.mark.slow
def test_a_sac_run_gone_non_finite_stops_before_writing_that_step(sac_run, tmp_path, capsys):
    """A replay buffer of 3e38 (finite: it loads) makes the update non-finite: exit 1, one line, nothing published."""
    copy = resumable_copy(sac_run, tmp_path, keep=1)
    first = checkpoint.steps(copy)[0]
    edit_state(first, {".buffer.data": lambda a: np.full_like(a[".buffer.data"], 3e38)})
    assert cli.main(train_args(copy, "--resume")) == 1
    one_error_line(capsys, "the training state went non-finite (NaN or inf)", "stopped before writing this step")
    assert checkpoint.steps(copy) == [first] and not any((copy / "checkpoints" / ".staging").glob("*/params.npz"))
    # the re-run eval of the resumed step only
    assert [r["step"] for r in read_csv(copy / "metrics.csv")][-1] == int(first.name)


@pytest.mark.parametrize("change, message", [
    ({".buffer.insert_position": lambda a: -5},
     ".buffer.insert_position must be in [0, 192] (the replay buffer's size), got -5"),
    ({".buffer.insert_position": lambda a: 2**31 - 1}, ".buffer.insert_position must be in [0, 192]"),
    ({".buffer.sample_position": lambda a: a[".buffer.insert_position"] + 1},
     ".buffer.sample_position must be in [0, insert_position = 160], got 161"),
])
@pytest.mark.slow
def test_replay_buffer_positions_outside_it_are_refused_on_resume(sac_run, tmp_path, change, message, capsys):
    copy = resumable_copy(sac_run, tmp_path, keep=2)
    edit_state(checkpoint.steps(copy)[-1], change)
    before = digest(copy)
    assert cli.main(train_args(copy, "--resume")) == 2
    one_error_line(capsys, checkpoint.STATE_FILE, message)
    assert digest(copy) == before  # refused before anything is written


@pytest.mark.slow  # test_sac_resume_equals_the_uninterrupted_run resumes a SAC run in the default suite
def test_sac_resume_with_more_timesteps_grows_the_replay_buffer(sac_run, tmp_path, capsys):
    """As PPO's, a SAC run resumes with a larger --num-timesteps: its replay buffer (num_timesteps
    transitions) grows, the transitions so far kept; a smaller one is refused naming the buffer."""
    copy = resumable_copy(sac_run, tmp_path, keep=3)
    last = checkpoint.steps(copy)[-1]
    with np.load(last / checkpoint.STATE_FILE) as z:
        before = z[".buffer.data"]
    assert cli.main(train_args(copy, "--resume", "--num-timesteps", "384")) == 0
    state = saved_arrays(checkpoint.resolve(copy))
    buffer = state["training_state.npz .buffer.data"]
    assert checkpoint.steps(copy)[-1] != last and buffer.shape == (384, before.shape[1])
    assert int(state["training_state.npz .buffer.insert_position"]) == 384 and np.all(np.any(buffer != 0, axis=1))
    capsys.readouterr()
    shutil.rmtree(checkpoint.steps(copy)[-1])
    assert cli.main(train_args(copy, "--resume", "--num-timesteps", "128")) == 2
    one_error_line(capsys, "the replay buffer holds 384 transitions, this run's 128",
                   "max_replay_size transitions (default: --num-timesteps)", "of at least 384")


@pytest.mark.parametrize("steps, message", [
    ("3000000000", "max_replay_size (default: --num-timesteps) must be at most 2,147,483,639 (the replay buffer's "
                   "positions are int32), got 3,000,000,000"),
    ("1000000000000", "must be at most 2,147,483,639"),
    ("100000000",
     "max_replay_size (default: --num-timesteps) = 100,000,000 needs about 15.3 GiB (a replay buffer of 100,000,000 "
                  "transitions x 41 float32); this machine has 1.0 GiB of RAM"),
])
def test_a_sac_replay_buffer_too_large_is_refused_before_it_is_allocated(steps, message, tmp_path, monkeypatch, capsys):
    from so101_mjx import _checks

    monkeypatch.setattr(_checks, "machine_memory", lambda device=False: (2**30, "RAM"))  # never allocate for real
    assert cli.main(train_args(tmp_path / "run", "--num-timesteps", steps)) == 2
    one_error_line(capsys, message)
    assert not (tmp_path / "run").exists()
