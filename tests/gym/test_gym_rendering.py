"""Rendering (seed 000, GymRenderingSpec and render()): camera_id honoured in render() and image_obs,
mode "human" accepted; render_mode="human" opens MuJoCo's passive viewer, synced every step, and
render() returns the frame as the reference's does (run for real under Xvfb with GLFW; without a
display: tests/gym/test_gym_headless.py)."""

import os
import shutil
import subprocess
import sys

import mujoco
import numpy as np
import pytest

import so101_mjx.gym as sgym


@pytest.fixture(scope="module")
def gl() -> None:
    try:
        mujoco.Renderer(mujoco.MjModel.from_xml_string("<mujoco/>"), 8, 8).close()
    except Exception:
        pytest.skip(f"no offscreen GL backend works here (MUJOCO_GL={os.environ.get('MUJOCO_GL')!r}; try "
                    "egl or osmesa)")


def _frame(camera, image_obs=False):
    env = sgym.SO101PickCubeGymEnv(render_spec=sgym.GymRenderingSpec(height=32, width=40, camera_id=camera),
                                   image_obs=image_obs)
    obs, _ = env.reset(seed=0)
    frame = env.render()
    if image_obs:
        np.testing.assert_array_equal(obs["pixels"]["front"], frame)
    env.close()
    return frame


@pytest.mark.slow
def test_camera_id_is_honoured(gl):
    """Seed 000, GymRenderingSpec.camera_id: -1 the free camera, a name or number a fixed one; the default renders
    front."""
    front = _frame(None)
    assert front.shape == (32, 40, 3) and front.dtype == np.uint8
    np.testing.assert_array_equal(_frame("front"), front)
    front_id = sgym.SO101PickCubeGymEnv().model.camera("front").id
    np.testing.assert_array_equal(_frame(front_id), front)
    assert np.abs(_frame(-1).astype(int) - front).max() > 0
    assert np.abs(_frame("wrist", image_obs=True).astype(int) - front).max() > 0


def test_rendering_spec_accepts_human_and_checks_cameras():
    """Seed 000, GymRenderingSpec(mode: "rgb_array" | "human"); an unknown camera is an error naming the model's
    cameras."""
    assert sgym.GymRenderingSpec(mode="human").mode == "human"
    with pytest.raises(ValueError, match="render_spec.mode must be one of"):
        sgym.GymRenderingSpec(mode="depth")
    for bad in (True, -2, "", 1.5):
        with pytest.raises(ValueError, match="render_spec.camera_id must be"):
            sgym.SO101GymEnv(render_spec=sgym.GymRenderingSpec(camera_id=bad))
    with pytest.raises(ValueError, match=r"render_spec.camera_id must be -1 .* cameras \['front'"):
        sgym.SO101GymEnv(render_spec=sgym.GymRenderingSpec(camera_id="top"))


HUMAN = """
import jax
jax.config.update("jax_enable_x64", True)
import so101_mjx.gym as sgym
env = sgym.SO101PickCubeGymEnv(render_mode="human", action_scale=0.025)
env.reset(seed=0)
viewer = env._human_viewer
assert viewer is not None and viewer.is_running()
for _ in range(5):
    env.step([0.0, 0.0, 0.5, 1.0])
frame = env.render()
assert frame.shape == (128, 128, 3) and frame.any() and viewer.is_running()
env.close()
assert env._human_viewer is None
print("viewer opened, stepped and closed")
"""


@pytest.mark.slow
def test_human_mode_opens_steps_and_closes_the_viewer():
    """Seed 000, render_mode="human": MuJoCo's passive viewer opens, follows the steps, render() returns
    the frame, and the viewer closes, under Xvfb with GLFW."""
    if os.environ.get("DISPLAY"):
        prefix = []
    elif shutil.which("xvfb-run"):
        prefix = ["xvfb-run", "-a"]
    else:
        pytest.skip("render_mode='human' needs a display: neither DISPLAY nor xvfb-run (Debian: xvfb) is available")
    env = {**os.environ, "MUJOCO_GL": "glfw"}
    out = subprocess.run([*prefix, sys.executable, "-c", HUMAN], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "viewer opened, stepped and closed" in out.stdout, out.stdout + out.stderr


def test_scene_is_what_render_draws(gl):
    """``scene()``: copies of the joint positions and the task's marker positions (PickPlace's goal), which a
    FrameRenderer draws into the frame ``render()`` returns."""
    from so101_mjx.render.frames import FrameRenderer

    env = sgym.SO101PickPlaceGymEnv(render_spec=sgym.GymRenderingSpec(height=32, width=40))
    env.reset(seed=1)
    qpos, markers = env.scene()
    np.testing.assert_array_equal(qpos, env.data.qpos)
    assert qpos is not env.data.qpos and list(markers) == ["goal"] and markers["goal"].shape == (3,)
    np.testing.assert_allclose(markers["goal"], env.goal_pos)
    renderer = FrameRenderer(env.model, 32, 40, "front")
    try:
        np.testing.assert_array_equal(renderer.frame(qpos, markers), env.render())
    finally:
        renderer.close()
        env.close()
