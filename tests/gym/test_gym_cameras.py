"""The gym env's frame options: ``image_cameras`` (one ``pixels`` entry per camera, as a follower's cameras),
``camera_specs`` (each camera's own lens and latency) and ``image_quality`` (the render model of the frames)."""

import numpy as np
import pytest

from so101_mjx.errors import InputError
from so101_mjx.gym.mujoco_env import GymRenderingSpec
from so101_mjx.gym.task_env import gym_class
from so101_mjx.render.frames import FrameRenderer
from so101_mjx.render.rig import frames_model

SIZE = GymRenderingSpec(height=32, width=40)
ACTION = np.array([0.5, 0.5, 0.0, 1.0])


def _env(**kwargs):
    return gym_class("SO101PickCube-v0")(0, render_spec=SIZE, image_obs=True, **kwargs)


def test_image_cameras_give_one_frame_per_camera_of_the_quality_asked():
    env = _env(image_cameras=("front", "wrist"), image_quality="fast")
    try:
        space = env.observation_space["pixels"]
        assert list(space) == ["front", "wrist"] and space["wrist"].shape == (32, 40, 3)
        obs, _ = env.reset(seed=1)
        assert env.observation_space.contains(obs)
        model = frames_model(env.model, env.env.scene, "fast", 32, 40)
        assert model.vis.quality.shadowsize == 0 and model.nmesh == env.model.nmesh  # the light meshes, no shadows
        for camera in ("front", "wrist"):
            renderer = FrameRenderer(model, 32, 40, camera, shadows=False)
            np.testing.assert_array_equal(obs["pixels"][camera], renderer.frame(*env.scene()), err_msg=camera)
            renderer.close()
        assert not np.array_equal(obs["pixels"]["front"], obs["pixels"]["wrist"])
        np.testing.assert_array_equal(env.render(), obs["pixels"]["front"])  # render() draws at the same quality
    finally:
        env.close()


def test_the_default_frames_are_the_scene_as_shipped():
    """No frame option: ``pixels.front`` is the render camera's frame of the physics model (the reference's)."""
    env, fast = _env(), _env(image_quality="fast")
    try:
        obs, _ = env.reset(seed=2)
        assert list(env.observation_space["pixels"]) == ["front"]
        renderer = FrameRenderer(env.model, 32, 40, "front")
        np.testing.assert_array_equal(obs["pixels"]["front"], renderer.frame(*env.scene()))
        renderer.close()
        assert not np.array_equal(fast.reset(seed=2)[0]["pixels"]["front"], obs["pixels"]["front"])
    finally:
        env.close(), fast.close()


def test_each_camera_lags_by_its_own_latency():
    lens = {"fovy": 70.0}
    env = _env(image_cameras=("front", "wrist"), image_quality="fast", camera_specs={"wrist": {**lens, "latency": 1}})
    now = _env(image_cameras=("front", "wrist"), image_quality="fast", camera_specs={"wrist": lens})
    try:
        late, _ = env.reset(seed=3)
        current, _ = now.reset(seed=3)
        seen = [current]
        for _ in range(2):
            late, *_ = env.step(ACTION)
            current, *_ = now.step(ACTION)
            seen.append(current)
        np.testing.assert_array_equal(late["pixels"]["front"], seen[-1]["pixels"]["front"])  # no latency
        np.testing.assert_array_equal(late["pixels"]["wrist"], seen[-2]["pixels"]["wrist"])  # one step back
        assert not np.array_equal(seen[-1]["pixels"]["wrist"], seen[-2]["pixels"]["wrist"])  # the arm moved
    finally:
        env.close(), now.close()


@pytest.mark.parametrize("kwargs, message", [
    ({"image_cameras": ("front", "nope")}, r"image_cameras must be distinct cameras of the scene \['front'"),
    ({"image_cameras": ("front", "front")}, "image_cameras must be distinct"),
    ({"image_cameras": "front"}, "image_cameras must be distinct"),
    ({"image_quality": "ultra"}, "image_quality must be one of"),
    ({"image_cameras": ("wrist",), "camera_specs": {"front": {"fovy": 30.0}}}, "camera_specs names"),
    ({"image_cameras": ("front",), "camera_spec": {"fovy": 30.0}, "camera_specs": {"front": {"fovy": 31.0}}},
     "camera_spec and camera_specs"),
    ({"image_cameras": ("front", "wrist"), "image_obs": False}, "need image_obs=True"),
])
def test_bad_frame_options_are_refused_naming_the_field(kwargs, message):
    with pytest.raises(InputError, match=message):
        gym_class("SO101PickCube-v0")(0, **{"render_spec": SIZE, "image_obs": True, **kwargs})
