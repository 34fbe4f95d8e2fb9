"""gymnasium's ``check_env`` through ``gym.make`` (so every declared render mode, ``human`` included,
is made), on a machine without a display with ``MUJOCO_GL=egl``: on a task the reference has and one
it has not (every registered id: a soak); and on one id with ``MUJOCO_GL`` unset (the GL
backend is chosen before any task code runs). Human mode
then warns once that no window can open and renders offscreen, as the reference renders; the process goes on and writes
nothing into its working directory."""

import os
import subprocess
import sys

import pytest

CHECK_EVERY_ID = """
import sys
import warnings
import gymnasium as gym
from gymnasium.utils.env_checker import check_env
import so101_mjx.gym
from so101_mjx.envs import names
from so101_mjx.envs.rollout import placement_config

ids = names() if len(sys.argv) < 2 else sys.argv[1:]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for name in ids:
        env = gym.make("so101_mjx/" + name, render_mode="human", **placement_config(name, True))
        env.reset(seed=0)
        frame = env.render()
        assert frame.shape == (128, 128, 3) and frame.dtype.name == "uint8" and frame.any(), name
        env.step(env.action_space.sample())
        check_env(env.unwrapped)
        env.close()
no_window = [str(w.message) for w in caught if "no window can open" in str(w.message)]
assert len(no_window) == 1, no_window
print("checked", len(ids), "ids;", no_window[0])
"""


@pytest.mark.parametrize("mujoco_gl, ids", [
    ("egl", ["SO101PickCube-v0", "SO101StackCube-v0"]),
    # every id headless in human mode (34 s): a soak; the default run checks every id with check_env
    # (tests/gym/test_gym.py) and this headless path on two ids
    pytest.param("egl", [], marks=pytest.mark.soak, id="egl-every-id"),
    (None, ["SO101PickCube-v0"]),
])
def test_check_env_passes_without_a_display(tmp_path, mujoco_gl, ids):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MUJOCO_GL")}
    if mujoco_gl:
        env["MUJOCO_GL"] = mujoco_gl
    out = subprocess.run([sys.executable, "-P", "-c", CHECK_EVERY_ID, *ids], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "checked" in out.stdout and "no display" in out.stdout, out.stdout
    assert list(tmp_path.iterdir()) == []  # no MUJOCO_LOG.TXT or anything else
