"""PPO across two processes joined by ``jax.distributed`` (``so101-mjx train --num-processes 2``),
each with one CPU device, all-reducing through gloo on localhost.

The run equals one process with two devices, bitwise: the same keys per device (every process
takes its devices' rows of one split) and a two-term all-reduce. Only process 0 writes the run
directory; its checkpoints gather both processes' env states, so a resume of the two-process run
continues exactly, and the same checkpoint resumes in one process with two devices. (A
multi-process step holds no Orbax copy of the params: Orbax saves collectively across processes.)
"""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from so101_mjx.training import checkpoint
from tests.training.test_multidevice import two_devices

TRAIN = ["train", "--env", "SO101Reach-v0", "--preset", "tiny", "--seed", "3"]


def so101_mjx(env: dict[str, str], *args: str) -> str:
    # half the compile time
    env = env | {"XLA_FLAGS": f"{env.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()}
    result = subprocess.run([sys.executable, "-m", "so101_mjx", *TRAIN, *args], env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def one_device() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (checkpoint.KILL_ENV, "XLA_FLAGS")}
    env["JAX_PLATFORMS"] = "cpu"
    return env


def arrays(step_dir) -> dict[str, np.ndarray]:
    """The step's params and training state (what resume, export and eval read), by file and name."""
    out = {}
    for name in (checkpoint.PARAMS_FILE, checkpoint.STATE_FILE):
        with np.load(step_dir / name) as data:
            out |= {f"{name} {key}": data[key] for key in data.files}
    return out


def assert_same_run(a, b) -> None:
    assert [int(p.name) for p in checkpoint.steps(a)] == [int(p.name) for p in checkpoint.steps(b)] == [128, 256]
    for x, y in zip(checkpoint.steps(a), checkpoint.steps(b)):
        assert checkpoint.load(x)[0] == checkpoint.load(y)[0]
        left, right = arrays(x), arrays(y)
        assert left.keys() == right.keys()
        for name in left:
            np.testing.assert_array_equal(left[name], right[name], err_msg=f"{x.name}: {name}")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple:
    """The same tiny run trained with two devices in one process and in two processes of one device each."""
    root = tmp_path_factory.mktemp("multiprocess")
    two, procs = root / "two-devices", root / "two-processes"
    so101_mjx(two_devices(), "--out", str(two))
    out = so101_mjx(one_device(), "--num-processes", "2", "--out", str(procs))
    return two, procs, out


@pytest.mark.slow  # two training runs (~40 s)
def test_two_processes_equal_two_devices(runs):
    two, procs, out = runs
    assert "final JAX eval" in out  # process 0 reports
    assert sorted(p.name for p in procs.iterdir()) == sorted(p.name for p in two.iterdir())
    # both processes' env states
    assert arrays(checkpoint.steps(procs)[-1])[f"{checkpoint.STATE_FILE} .env.obs"].shape == (2, 4, 20)
    assert_same_run(two, procs)


@pytest.mark.soak  # two more training runs (~40 s) after the fixture's
def test_a_two_process_checkpoint_resumes_in_either_layout(runs, tmp_path):
    two, procs = (shutil.copytree(run, tmp_path / run.name) for run in runs[:2])
    shutil.rmtree(checkpoint.steps(procs)[-1])  # as if killed after the first checkpoint
    so101_mjx(one_device(), "--num-processes", "2", "--out", str(procs), "--resume")
    assert_same_run(two, procs)

    shutil.rmtree(checkpoint.steps(two)[-1])  # a two-process checkpoint resumed by one process with two devices
    shutil.copytree(checkpoint.steps(procs)[0], checkpoint.steps(two)[0], dirs_exist_ok=True)
    so101_mjx(two_devices(), "--out", str(two), "--resume")
    assert_same_run(two, procs)


def test_the_train_command_imports_without_starting_jax():
    """``jax.distributed.initialize`` must run before JAX starts a backend: importing the command
    and listing the tasks and presets (what ``run`` does before it) start none."""
    code = ("import jax._src.xla_bridge as xb\n"
            "import so101_mjx.training.ppo as ppo\n"
            "from so101_mjx.training import presets\n"
            "presets.preset('SO101PickCube-v0', 'cpu')\n"
            "assert not xb.backends_are_initialized(), 'a JAX backend started at import'\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]


def test_bad_process_flags_are_one_error_line(capsys, tmp_path):
    from so101_mjx import cli
    from tests.conftest import one_error_line

    base = [*TRAIN, "--out", str(tmp_path / "run")]
    assert cli.main([*base, "--num-processes", "2", "--process-id", "2", "--coordinator", "127.0.0.1:1234"]) == 2
    one_error_line(capsys, "--process-id must be in [0, --num-processes=2), got 2")
    assert cli.main([*base, "--num-processes", "2", "--process-id", "0"]) == 2
    one_error_line(capsys, "--process-id and --coordinator go together")
    assert cli.main([*base, "--num-processes", "2", "--process-id", "1", "--coordinator", "localhost"]) == 2
    one_error_line(capsys, "--coordinator must be HOST:PORT", "'localhost'")
    assert not (tmp_path / "run").exists()
