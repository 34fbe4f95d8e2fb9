"""The user's camera in the host-side envs: the gym env's ``camera_spec`` (``render()`` and
``pixels.front``) and the simulated follower's ``camera_specs`` (its observation frames): the
file's lens replaces the scene camera's, and ``latency`` delays the observed frames by steps."""

import numpy as np
import pytest

from so101_mjx.errors import InputError
from so101_mjx.follower import FEATURE_KEYS, SimFollower, SimFollowerConfig
from so101_mjx.gym.mujoco_env import GymRenderingSpec
from so101_mjx.gym.task_env import gym_class

SIZE = GymRenderingSpec(height=48, width=64)
NARROW = {"fovy": 25.0}  # the front camera with a longer lens than the scene's (its pose kept)
ACTION = np.array([0.5, 0.5, 0.0, 1.0])


def _env(**kwargs):
    return gym_class("SO101PickCube-v0")(0, render_spec=SIZE, image_obs=True, **kwargs)


def test_the_gym_envs_camera_spec_changes_render_and_pixels_alike():
    plain, narrow = _env(), _env(camera_spec=NARROW)
    try:
        a, _ = plain.reset(seed=1)
        b, _ = narrow.reset(seed=1)
        assert not np.array_equal(a["pixels"]["front"], b["pixels"]["front"])
        np.testing.assert_array_equal(b["pixels"]["front"], narrow.render())  # no latency: the same frame
        assert narrow._viewer.model.cam_fovy[narrow._model.camera("front").id] == 25.0
    finally:
        plain.close(), narrow.close()


@pytest.mark.slow
def test_the_gym_envs_pixels_lag_by_the_cameras_latency():
    env = _env(camera_spec={**NARROW, "latency": 2})
    try:
        obs, _ = env.reset(seed=2)
        shown = [env.render()]  # render() draws the current state
        pixels = [obs["pixels"]["front"]]
        for _ in range(4):
            obs, *_ = env.step(ACTION)
            shown.append(env.render()), pixels.append(obs["pixels"]["front"])
        assert not np.array_equal(shown[0], shown[3])  # the arm moved: a real comparison
        for t, frame in enumerate(pixels):
            np.testing.assert_array_equal(frame, shown[max(0, t - 2)], err_msg=f"step {t}")
        obs, _ = env.reset(seed=2)  # a reset starts the lag again
        np.testing.assert_array_equal(obs["pixels"]["front"], shown[0])
    finally:
        env.close()


@pytest.mark.parametrize("kwargs, message", [
    ({"camera_spec": "missing.json"}, "camera_spec: camera file not found: missing.json"),
    ({"camera_spec": {"fovy": 25.0, "body": "no_such_body"}}, "camera_spec: .*no_such_body"),
    ({"camera_spec": NARROW, "render_spec": GymRenderingSpec(camera_id=-1)},
     "render_spec.camera_id must name one, not -1"),
])
def test_a_bad_camera_spec_is_refused_at_construction(kwargs, message):
    with pytest.raises(InputError, match=message):
        gym_class("SO101PickCube-v0")(0, **kwargs)


def _frames(config: SimFollowerConfig, steps: int) -> list[np.ndarray]:
    """The front frame after connect and after each of ``steps`` actions that move the elbow."""
    with SimFollower(config) as f:
        action = dict(zip(FEATURE_KEYS, f.present_position() + [0, 0, 15, 0, 0, 0], strict=True))
        frames = [f.get_observation()["front"]]
        for _ in range(steps):
            f.send_action(action)
            frames.append(f.get_observation()["front"])
    return frames


def test_the_followers_camera_specs_set_the_lens_and_the_latency():
    base = dict(camera_names=("front",), camera_height=48, camera_width=64, shadows=False)
    scene = _frames(SimFollowerConfig(**base), 0)[0]
    now = _frames(SimFollowerConfig(**base, camera_specs={"front": NARROW}), 3)
    late = _frames(SimFollowerConfig(**base, camera_specs={"front": {**NARROW, "latency": 1}}), 3)
    assert not np.array_equal(scene, now[0])  # the file's lens, not the scene's
    assert not np.array_equal(now[0], now[3])
    for t, frame in enumerate(late):
        np.testing.assert_array_equal(frame, now[max(0, t - 1)], err_msg=f"action {t}")


def test_the_followers_camera_specs_name_its_cameras():
    with pytest.raises(InputError,
                       match=r"camera_specs names \['wrist'\], which are not among camera_names \['front'\]"):
        SimFollowerConfig(camera_names=("front",), camera_specs={"wrist": NARROW})
    with pytest.raises(InputError, match=r"camera_specs\['front'\]: camera file not found"):
        SimFollowerConfig(camera_names=("front",), camera_specs={"front": "missing.yaml"})
