"""``so101-mjx record`` killed at random moments (fixed seeds; SIGINT, SIGTERM, SIGKILL), then resumed:
after every kill the dataset is readable by an independent reader (rows equal ``info.json``'s totals,
no duplicate index, video frames equal data frames) and by ``--resume``, and the resumed recording
ends with the episodes of an uninterrupted one.

A SIGKILL that lands inside a commit's renames (after its manifest, a window of a few renames)
leaves a commit the next writer finishes: there the independent read waits for ``--resume``.
``-m slow`` kills one recording twice (SIGTERM, SIGKILL); ``-m soak`` kills one 20 times.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("imageio_ffmpeg")

from tests.data.dataset_reader import assert_consistent, read_parquets

ROOT = Path(__file__).resolve().parents[2]
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)


def command(out: Path, episodes: int, resume: bool) -> list[str]:
    return [sys.executable, "-m", "so101_mjx", "record", "--env", "SO101Reach-v0", "--episodes", str(episodes),
            "--num-envs", "2",
            "--image-size", "16", "--image-quality", "fast", "--seed", "5", "--out", str(out), *(["--resume"] * resume)]


def environment() -> dict[str, str]:
    env = ({k: v for k, v in os.environ.items() if k != "SO101_MJX_KILL_AT"}
           | {"JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)})
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()
    return env


def episodes_in(out: Path) -> int:
    """The dataset's episodes once a commit a kill cut short is finished (as the next writer does)."""
    import json

    from so101_mjx._files import recover

    if out.is_dir():
        recover(out)
    info = out / "meta/info.json"
    return json.loads(info.read_text())["total_episodes"] if info.is_file() else 0


def killed_recording(out: Path, episodes: int, sig: int, delay: float) -> None:
    """Record (or resume) up to ``episodes`` episodes; ``delay`` s after one is kept, send ``sig``."""
    have = episodes_in(out)
    proc = subprocess.Popen(command(out, episodes - have, have > 0), env=environment(), cwd=ROOT,
                            stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stderr:
            if line.startswith("record: "):
                break
        time.sleep(delay)
        proc.send_signal(sig)
        proc.communicate(timeout=300)
    finally:
        proc.kill()
        proc.wait()


def check_after_kill(out: Path) -> None:
    if not (out / "meta/info.json").is_file():
        return  # killed before its first commit: nothing there yet
    if (out / ".staging/MANIFEST.json").is_file():
        return  # killed inside a commit's renames: finished by the next writer
    assert_consistent(out, staging_ok=True)


def finish(out: Path, episodes: int) -> None:
    have = episodes_in(out)
    if have < episodes:
        done = subprocess.run(command(out, episodes - have, have > 0), env=environment(), cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    assert assert_consistent(out)["total_episodes"] == episodes


def run_trials(tmp_path: Path, episodes: int, trials: list[tuple[int, float]]) -> None:
    """Kill a recording of ``episodes`` episodes once per trial (signal, delay s), then finish it and
    compare it with an uninterrupted recording (run alongside)."""
    out, reference = tmp_path / "ds", tmp_path / "reference"
    uninterrupted = subprocess.Popen(command(reference, episodes, False), env=environment(), cwd=ROOT,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for sig, delay in trials:
            assert episodes_in(out) < episodes, "every kill must land before the recording ends"
            killed_recording(out, episodes, sig, delay)
            check_after_kill(out)
        finish(out, episodes)
        assert uninterrupted.wait(timeout=600) == 0, uninterrupted.stderr.read()[-3000:]
    finally:
        uninterrupted.kill()
        uninterrupted.communicate()
    ours, theirs = (read_parquets(p, "data") for p in (out, reference))
    for name in ("observation.state", "action", "episode_index", "index"):
        np.testing.assert_allclose(np.asarray(ours.column(name).to_pylist(), float),
                                   np.asarray(theirs.column(name).to_pylist(), float), atol=1e-5, err_msg=name)


@pytest.mark.slow  # five recordings (~60 s); the default suite injects the damage: tests/data/test_dataset_check.py
def test_record_killed_by_sigterm_and_sigkill_then_resumed(tmp_path):
    run_trials(tmp_path, 40, [(signal.SIGTERM, 0.1), (signal.SIGKILL, 0.1)])


@pytest.mark.soak
def test_record_killed_at_20_random_points(tmp_path):
    """SIGINT, SIGTERM and SIGKILL in turn, each at a random moment after an episode was kept."""
    rng = np.random.default_rng(2026)
    run_trials(tmp_path, 1500, [(SIGNALS[i % 3], float(rng.uniform(0, 1.5))) for i in range(20)])
