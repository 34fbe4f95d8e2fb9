"""Rendering never hangs and leaves nothing behind: a stopped render worker fails the call after the
timeout (then fresh workers), an unclosed renderer prints nothing at exit, and ffmpeg writes any file name."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from so101_mjx.errors import InputError
from so101_mjx.render import batch as pixels
from so101_mjx.render.frames import write_video

ROOT = Path(__file__).resolve().parents[2]
SIZE = 32


@pytest.fixture(scope="module")
def fast_model():
    return pixels.render_model("pick_place", "fast")


def test_a_stopped_worker_times_out_then_fresh_workers_render(fast_model):
    q = np.tile(fast_model.qpos0, (4, 1))
    renderer = pixels.BatchRenderer(fast_model, SIZE, SIZE, workers=2, timeout=2)
    stopped = None
    try:
        first = renderer.render(q)
        stopped = renderer._workers[1].process
        os.kill(stopped.pid, signal.SIGSTOP)
        start = time.monotonic()
        with pytest.raises(RuntimeError,
                           match=rf"render worker \(pid {stopped.pid}\) sent nothing for 2 s: stopped or hung"):
            renderer.render(q)
        assert time.monotonic() - start < 20
        assert not renderer._workers and stopped.poll() is not None  # killed with the others
        np.testing.assert_array_equal(renderer.render(q), first)
    finally:
        if stopped is not None and stopped.poll() is None:
            os.kill(stopped.pid, signal.SIGKILL)
        renderer.close()


def test_the_timeout_comes_from_the_argument_or_the_environment(fast_model, monkeypatch):
    monkeypatch.delenv(pixels.TIMEOUT_ENV, raising=False)
    assert pixels.BatchRenderer(fast_model, SIZE, SIZE, workers=1).timeout == pixels.RENDER_TIMEOUT_S
    monkeypatch.setenv(pixels.TIMEOUT_ENV, "7.5")
    assert pixels.BatchRenderer(fast_model, SIZE, SIZE, workers=1).timeout == 7.5
    assert pixels.BatchRenderer(fast_model, SIZE, SIZE, workers=1, timeout=3).timeout == 3
    for bad in ("0", "soon", "nan"):
        monkeypatch.setenv(pixels.TIMEOUT_ENV, bad)
        with pytest.raises(InputError, match=pixels.TIMEOUT_ENV):
            pixels.BatchRenderer(fast_model, SIZE, SIZE, workers=1)
    with pytest.raises(InputError, match="timeout must be a finite number > 0"):
        pixels.BatchRenderer(fast_model, SIZE, SIZE, workers=1, timeout=-1)


@pytest.mark.slow
def test_interpreter_exit_after_a_gym_render_prints_nothing():
    """An env rendered and never closed: its GL context is freed before module teardown, so MuJoCo's
    ``GLContext.__del__`` prints no TypeError at exit."""
    code = ("import gymnasium as gym, so101_mjx.gym; env = gym.make('so101_mjx/SO101Reach-v0'); env.reset(seed=0); "
            "assert env.render().shape == (128, 128, 3)")
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Exception ignored" not in result.stderr and "Error" not in result.stderr, result.stderr


@pytest.mark.parametrize("name", ["a:b.mp4", "x#y.mp4"])
def test_ffmpeg_writes_file_names_it_could_read_as_a_protocol(name, tmp_path, monkeypatch):
    pytest.importorskip("imageio_ffmpeg")
    monkeypatch.chdir(tmp_path)
    write_video([np.zeros((16, 16, 3), np.uint8)] * 3, name, fps=10)
    assert (tmp_path / name).stat().st_size > 0
