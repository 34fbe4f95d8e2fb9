"""Each command's most likely failures on a user's machine: a missing file (through ``cli.main``, which
the console script calls), and, run as a user runs them (a subprocess), no display, no GL backend, a
MUJOCO_GL that mujoco rejects. Each ends with one error line on stderr and a non-zero exit; no
traceback, and nothing written into the working directory."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys

import pytest

HEADLESS = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}

MISSING_FILES = [
    (["replay", "missing.onnx"], "policy not found"),
    (["eval", "missing_run"], "checkpoint not found"),
    (["export", "missing_run", "--out", "p.onnx"], "checkpoint not found"),
    (["deploy", "missing.onnx"], "policy not found"),
    (["sysid", "missing_dataset"], "missing_dataset"),
    (["distill", "missing.onnx", "--out", "student"], "not found"),
    (["record", "--env", "SO101PickCube-v0", "--out", "data", "--episodes", "1", "--policy", "missing.onnx"],
     "policy not found"),
    (["eval", "p.onnx", "--servo-model", "missing.json"], "missing.json"),
]


def _run(argv: list[str], cwd, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-m", "so101_mjx", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def _assert_one_line(out: subprocess.CompletedProcess, status: int, text: str) -> None:
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == status, out.stderr
    assert "Traceback" not in out.stderr and len(lines) == 1, out.stderr
    assert lines[0].startswith("so101-mjx ") and text in lines[0], lines[0]


@pytest.mark.parametrize("argv, text", MISSING_FILES, ids=lambda v: v[0] if isinstance(v, list) else None)
def test_a_missing_file_is_one_line_for_every_command(tmp_path, monkeypatch, capsys, argv, text):
    from so101_mjx import cli

    monkeypatch.chdir(tmp_path)
    status = cli.main(argv)  # an exception here is the traceback a user would see
    err = capsys.readouterr().err
    assert "unrecognized arguments" not in err, f"{argv}: a command without that option: {err}"
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and text in lines[-1], (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("value, text", [("foo", "MUJOCO_GL must be one of"), ("osmesa", "libOSMesa")])
def test_a_mujoco_gl_that_mujoco_rejects_is_one_line(tmp_path, value, text):
    if value == "osmesa" and ctypes.util.find_library("OSMesa"):
        pytest.skip("libOSMesa is installed here")
    _assert_one_line(_run(["info"], tmp_path, {**HEADLESS, "MUJOCO_GL": value}), 1, text)


@pytest.mark.slow
def test_rendering_without_a_display_or_gl_is_one_line(tmp_path):
    """MUJOCO_GL=glfw renders through a window system: with no display, a video is one line saying so."""
    out = _run(["rollout", "--num-envs", "1", "--steps", "1", "--video", "v.mp4"], tmp_path,
               {**HEADLESS, "MUJOCO_GL": "glfw"})
    _assert_one_line(out, 1, "no display: use MUJOCO_GL=egl")
    assert not (tmp_path / "v.mp4").exists()
