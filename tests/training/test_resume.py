"""Exact resume after SIGKILL: a run killed at three moments and resumed with ``--resume`` each time
ends with the uninterrupted run's checkpoints bitwise (params, Adam moments, normalizer, env steps,
env states, keys) and its ``metrics.csv`` except the wall-clock columns.

Every run is a subprocess, ``python -m so101_mjx train`` (float32, backend ``c``, the tiny preset with 4
evals: epochs end at 128, 256 and 384 env steps), killed by :func:`so101_mjx.training.checkpoint.kill_point`
(``SO101_MJX_KILL_AT=<point>:<step>``). The subprocesses compile at XLA's backend optimization level
0, which halves their compile time; the uninterrupted reference run is compiled the same way and
runs in parallel with the first killed one.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from so101_mjx.training import checkpoint
from so101_mjx.training.progress import COLUMNS, CSV_FILE, PNG_FILE, WALL_CLOCK_COLUMNS, read_csv

ENV = "SO101Reach-v0"
TIMEOUT_S = 600


def command(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "so101_mjx", "train", "--env", ENV, "--preset", "tiny", "--seed", "3",
            "--num-evals", "4", "--backend", "c", "--out", str(out), *extra]


def environment(kill: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != checkpoint.KILL_ENV}
    env["JAX_PLATFORMS"] = "cpu"
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()
    return env | ({checkpoint.KILL_ENV: kill} if kill else {})


def train(cwd: Path, out: Path, kill: str | None, *extra: str) -> None:
    result = subprocess.run(command(out, *extra), cwd=cwd, env=environment(kill), capture_output=True, text=True,
                            timeout=TIMEOUT_S)
    assert result.returncode == (-signal.SIGKILL if kill else 0), result.stdout[-2000:] + result.stderr[-3000:]


def saved_steps(run_dir: Path) -> list[int]:
    return [int(p.name) for p in checkpoint.steps(run_dir)]


def csv_steps(run_dir: Path) -> list[int]:
    return [int(r["step"]) for r in read_csv(run_dir / CSV_FILE)]


def saved_arrays(step_dir: Path) -> dict[str, np.ndarray]:
    arrays = {}
    for name in (checkpoint.PARAMS_FILE, checkpoint.STATE_FILE):
        with np.load(step_dir / name) as data:
            arrays |= {f"{name} {key}": data[key] for key in data.files}
    return arrays


@pytest.mark.slow  # five training runs (~85 s)
@pytest.mark.optimized
def test_killed_and_resumed_run_equals_the_uninterrupted_run(tmp_path):
    reference_dir = tmp_path / "reference"
    reference = subprocess.Popen(command(reference_dir), env=environment(), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
    out = Path("run")  # relative, as users type it
    run_dir = tmp_path / out
    try:
        # 1. Orbax has renamed its directory of step 256; params.npz, training_state.npz, run.json unwritten.
        train(tmp_path, out, "orbax:256")
        assert saved_steps(run_dir) == [128] and csv_steps(run_dir) == [0, 128]
        staged = run_dir / checkpoint.CHECKPOINTS / checkpoint.STAGING / f"{256:012d}"
        assert staged.is_dir() and not (staged / checkpoint.RUN_FILE).exists()
        # 2. Resumed at 128 (its eval re-run); killed in the epoch to 384: computed, nothing of it written.
        train(tmp_path, out, "train:384", "--resume")
        assert saved_steps(run_dir) == [128, 256] and csv_steps(run_dir) == [0, 128, 256]
        # 3. Resumed at 256, whose eval row exists: rewritten, not duplicated. Killed after the last
        #    checkpoint, before its eval row.
        train(tmp_path, out, "checkpoint:384", "--resume")
        assert saved_steps(run_dir) == [128, 256, 384] and csv_steps(run_dir) == [0, 128, 256]
        # 4. Resumed at the last checkpoint: its eval row and the learning curve are still written.
        train(tmp_path, out, None, "--resume")
    finally:
        stdout, stderr = reference.communicate(timeout=TIMEOUT_S)
    assert reference.returncode == 0, stdout[-2000:] + stderr[-3000:]

    assert saved_steps(run_dir) == saved_steps(reference_dir) == [128, 256, 384]
    for step_dir, reference_step in zip(checkpoint.steps(run_dir), checkpoint.steps(reference_dir)):
        assert checkpoint.read_run(step_dir) == checkpoint.read_run(reference_step)
        got, expected = saved_arrays(step_dir), saved_arrays(reference_step)
        assert got.keys() == expected.keys()
        state = {k.split(" ", 1)[1] for k in got if k.startswith(checkpoint.STATE_FILE)}
        assert {".key", ".eval_key", ".env.obs", ".training.env_steps.lo", ".training.normalizer_params.mean"} <= state
        assert any(".mu." in k for k in state) and any(".nu." in k for k in state)  # Adam's moments
        for key in expected:
            np.testing.assert_array_equal(got[key], expected[key], err_msg=f"{step_dir.name} {key}")
    same = [c for c in COLUMNS if c not in WALL_CLOCK_COLUMNS]
    rows, reference_rows = read_csv(run_dir / CSV_FILE), read_csv(reference_dir / CSV_FILE)
    assert [[r[c] for c in same] for r in rows] == [[r[c] for c in same] for r in reference_rows]
    assert [int(r["step"]) for r in rows] == [0, 128, 256, 384]
    assert (run_dir / PNG_FILE).read_bytes()[:4] == b"\x89PNG"
