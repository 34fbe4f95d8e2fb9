"""``so101-mjx train`` killed at random moments (fixed seeds; SIGINT, SIGTERM, SIGKILL), then resumed:
after every kill ``metrics.csv`` and every published checkpoint are readable, and the resumed run ends
with the uninterrupted run's checkpoints bitwise (tests/training/test_resume.py kills at chosen points).

One SIGTERM (``-m slow``) and 12 kills compared with an uninterrupted run (``-m soak``); kills at
chosen points: tests/training/test_resume.py (``-m slow``).
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from so101_mjx.training import checkpoint
from so101_mjx.training.progress import CSV_FILE, read_csv
from tests.training.test_resume import TIMEOUT_S, command, environment, saved_arrays, saved_steps

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)


def killed_run(out: Path, sig: int, delay: float) -> None:
    """Start (or resume) the run; ``delay`` s after its first progress line, send ``sig``."""
    resume = ["--resume"] if checkpoint.steps(out) else []
    proc = subprocess.Popen(command(out, *resume), env=environment(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        for line in proc.stdout:
            if "step" in line and "%]" in line:
                break
        time.sleep(delay)
        proc.send_signal(sig)
        proc.communicate(timeout=TIMEOUT_S)
    finally:
        proc.kill()
        proc.wait()


def check_readable(out: Path) -> None:
    steps = [r["step"] for r in read_csv(out / CSV_FILE)]
    assert steps == sorted(set(steps))
    for step_dir in checkpoint.steps(out):
        checkpoint.read_run(step_dir)
        saved_arrays(step_dir)


def run_trials(tmp_path: Path, trials: list[tuple[int, float]], compare: bool) -> None:
    out, reference = tmp_path / "run", tmp_path / "reference"
    uninterrupted = subprocess.Popen(command(reference), env=environment(), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True) \
        if compare else None
    try:
        for sig, delay in trials:
            killed_run(out, sig, delay)
            check_readable(out)
        done = subprocess.run(command(out, *(["--resume"] if checkpoint.steps(out) else [])), env=environment(),
                              capture_output=True, text=True, timeout=TIMEOUT_S)
        assert done.returncode == 0, done.stderr[-3000:]
        check_readable(out)
        if uninterrupted is not None:
            assert uninterrupted.wait(timeout=TIMEOUT_S) == 0, uninterrupted.stderr.read()[-3000:]
    finally:
        if uninterrupted is not None:
            uninterrupted.kill()
            uninterrupted.communicate()
    assert saved_steps(out) == [128, 256, 384]
    if compare:
        final_ours, final_theirs = (saved_arrays(checkpoint.steps(d)[-1]) for d in (out, reference))
        assert final_ours.keys() == final_theirs.keys()
        for key in final_theirs:
            np.testing.assert_array_equal(final_ours[key], final_theirs[key], err_msg=key)


@pytest.mark.slow  # kills at chosen points: tests/training/test_resume.py
def test_train_killed_by_sigterm_then_resumed(tmp_path):
    run_trials(tmp_path, [(signal.SIGTERM, 0.5)], compare=False)


@pytest.mark.soak
def test_train_killed_at_12_random_points(tmp_path):
    rng = np.random.default_rng(2026)
    run_trials(tmp_path, [(SIGNALS[i % 3], float(rng.uniform(0, 4))) for i in range(12)], compare=True)
