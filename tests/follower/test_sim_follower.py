"""SimFollower (issue 33, item 2): so101_follower's features and units, a round trip through
send_action / get_observation, lerobot's max_relative_target rule, and clear errors."""

import json
import time

import numpy as np
import pytest

from so101_mjx.follower import FEATURE_KEYS, SimFollower, SimFollowerConfig, clamp_relative
from so101_mjx.follower.sim import DeviceAlreadyConnectedError, DeviceNotConnectedError
from so101_mjx.robot import motors

# so101_follower's features in lerobot 0.6.1 (SOFollower._motors_ft, _cameras_ft)
FOLLOWER_MOTORS = ["shoulder_pan.pos", "shoulder_lift.pos", "elbow_flex.pos", "wrist_flex.pos",
                   "wrist_roll.pos", "gripper.pos"]
SIZE = dict(camera_height=48, camera_width=64)


@pytest.fixture(scope="module")
def follower():
    f = SimFollower(SimFollowerConfig(**SIZE))
    f.connect()
    yield f
    f.disconnect()


def test_features_are_the_followers(follower):
    assert list(FEATURE_KEYS) == FOLLOWER_MOTORS
    assert follower.action_features == dict.fromkeys(FOLLOWER_MOTORS, float)
    assert (follower.observation_features
            == {**dict.fromkeys(FOLLOWER_MOTORS, float), "front": (48, 64, 3), "wrist": (48, 64, 3)})
    obs = follower.get_observation()
    assert list(obs) == list(follower.observation_features)
    assert all(isinstance(obs[k], float) for k in FOLLOWER_MOTORS)
    for cam in ("front", "wrist"):
        assert obs[cam].shape == (48, 64, 3) and obs[cam].dtype == np.uint8 and obs[cam].std() > 0
    assert follower.is_calibrated and follower.calibrate() is None


def test_round_trip_moves_the_motors_in_degrees(follower):
    follower.reset(3)
    start = follower.get_observation()
    action = {k: start[k] for k in FOLLOWER_MOTORS}
    action["wrist_roll.pos"] += 30.0  # no gravity load on the roll: it settles on its target
    action["gripper.pos"] = 60.0
    for _ in range(30):  # one second at 30 Hz
        sent = follower.send_action(action)
    assert sent == action
    obs = follower.get_observation()
    assert abs(obs["wrist_roll.pos"] - action["wrist_roll.pos"]) < 1.0
    assert abs(obs["gripper.pos"] - 60.0) < 2.0
    # the measured positions are the joints in the follower's units
    q = np.asarray(follower.env.data.qpos)[[*follower.env.env.arm.qpos_ids, follower.env.env.arm.gripper_qpos]]
    expected = motors.to_motor(q, follower.env.env.arm.motor_ranges, "degrees")
    np.testing.assert_allclose([obs[k] for k in FOLLOWER_MOTORS], expected, atol=1e-4)


def test_range_units_and_max_relative_target():
    config = SimFollowerConfig(use_degrees=False, max_relative_target=5.0, camera_names=(), seed=1)
    with SimFollower(config) as f:
        np.testing.assert_allclose(f.limits, [[-100, 100]] * 5 + [[0, 100]], atol=1e-12)
        present = f.present_position()
        far = dict(zip(FOLLOWER_MOTORS, [90.0, -90.0, 90.0, -90.0, 90.0, 95.0], strict=True))
        sent = f.send_action(far)
        np.testing.assert_allclose([sent[k] for k in FOLLOWER_MOTORS],
                                   present + np.clip(np.asarray(list(far.values())) - present, -5, 5))
        assert f.get_observation().keys() == set(FOLLOWER_MOTORS)


def test_clamp_relative_follows_lerobots_rule():
    present, goal = np.zeros(6), np.asarray([10.0, -10, 1, -1, 3, 7])
    np.testing.assert_array_equal(clamp_relative(goal, present, 2.0), [2, -2, 1, -1, 2, 2])
    per_motor = dict(zip(motors.MOTORS, [1.0, 20, 20, 0.5, 20, 20], strict=True))
    np.testing.assert_array_equal(clamp_relative(goal, present, per_motor), [1, -10, 1, -0.5, 3, 7])
    np.testing.assert_array_equal(clamp_relative(goal, present, None), goal)


@pytest.mark.slow
def test_bad_actions_name_the_key_and_change_nothing(follower):
    follower.reset(4)
    good = {k: follower.get_observation()[k] for k in FOLLOWER_MOTORS}
    before = np.asarray(follower.env.data.qpos).copy()
    bad = [
        ({**good, "elbow.pos": 0.0}, r"unknown \['elbow.pos'\]"),
        ({k: v for k, v in good.items() if k != "gripper.pos"}, r"missing \['gripper.pos'\]"),
        ({**good, "wrist_flex.pos": float("nan")}, r"action\['wrist_flex.pos'\] must be a finite number"),
        ({**good, "elbow_flex.pos": "10"}, r"action\['elbow_flex.pos'\]"),
        ({**good, "shoulder_pan.pos": 500.0}, r"shoulder_pan.pos = 500 not in \[-110, 110\]"),
        ([0.0] * 6, "must be a dict"),
    ]
    for action, message in bad:
        with pytest.raises(ValueError, match=message):
            follower.send_action(action)
    np.testing.assert_array_equal(np.asarray(follower.env.data.qpos), before)


def test_clip_mode_clips_to_the_motor_range():
    with SimFollower(SimFollowerConfig(camera_names=(), out_of_range="clip")) as f:
        action = {**dict.fromkeys(FOLLOWER_MOTORS, 0.0), "shoulder_pan.pos": 500.0, "gripper.pos": -3.0}
        sent = f.send_action(action)
        assert sent["shoulder_pan.pos"] == 110.0 and sent["gripper.pos"] == 0.0


def test_connection_errors_and_config_checks():
    f = SimFollower(SimFollowerConfig(camera_names=()))
    with pytest.raises(DeviceNotConnectedError):
        f.get_observation()
    with pytest.raises(DeviceNotConnectedError):
        f.send_action({})
    with pytest.raises(ValueError, match=r"camera_names: \['top'\] not in"):
        SimFollower(SimFollowerConfig(camera_names=("top",))).connect()
    for kwargs, message in [({"task": "SO101Fly-v0"}, "SO101Fly"),
                            ({"max_relative_target": -1.0}, "max_relative_target"),
                            ({"max_relative_target": {"gripper": 1.0}}, "max_relative_target as a dict"),
                            ({"fps": 0}, "fps"), ({"out_of_range": "wrap"}, "out_of_range"),
                            ({"camera_names": "front"}, "camera_names"),
                            ({"reset_after_steps": 0}, "reset_after_steps")]:
        with pytest.raises(ValueError, match=message):
            SimFollowerConfig(**kwargs)
    with pytest.raises(ValueError, match="physics"):  # 7 Hz does not divide the physics rate
        SimFollower(SimFollowerConfig(camera_names=(), fps=7)).connect()


@pytest.mark.parametrize("kwargs, message", [
    ({"fps": 7}, r"fps must divide the physics rate 1 / physics_dt = 480 Hz .*one of \[1, 2, 3, .*, 480\], got 7"),
    ({"fps": 10**6}, "fps must divide the physics rate .* got 1000000"),
    ({"fps": 10, "task_options": {"physics_dt": 0.003}},
     "fps must divide the physics rate 1 / physics_dt = 333.333 Hz"),
    ({"camera_height": 10**6}, "camera_height must be an int >= 1 and <= 8192"),
    ({"camera_width": 10**5}, "camera_width must be an int >= 1 and <= 8192"),
    ({"task_options": {"reward_typ": "dense"}}, r"task_options: unknown config field\(s\) \['reward_typ'\]"),
    ({"task_options": {"reward_type": "sometimes"}}, "task_options: reward_type must be one of"),
    ({"task_options": {"servo_model": {"voltage_sag": {"per_torque": 1e300}}}},
     "task_options: servo_model.voltage_sag.per_torque"),
    ({"image_quality": "best"}, r"image_quality must be one of \('fast', 'shadowed', 'full'\), got 'best'"),
])
def test_bad_values_fail_at_construction_not_at_connect(kwargs, message):
    """What connect() would refuse (the rate, the task's config) and what it would try to allocate (a frame's
    size) is refused by the config itself: the lerobot plugin's config (``--robot.<field>``) is one."""
    with pytest.raises(ValueError, match=message):
        SimFollowerConfig(camera_names=(), **kwargs)


def test_a_lighter_render_model_draws_the_same_scene_as_the_batch_renderer():
    """With ``image_quality`` the follower's frames come from the render model a camera policy is trained on: at
    ``fast`` the batch renderer's frame of the same state, and not the full scene's."""
    from so101_mjx.render.batch import BatchRenderer, render_model

    frames = {}
    for quality in ("fast", "full"):
        with SimFollower(SimFollowerConfig(camera_names=("front",), image_quality=quality, **SIZE)) as follower:
            frames[quality] = follower.get_observation()["front"]
            qpos = np.asarray(follower.env.data.qpos)
            scene = follower.env.env.scene
    renderer = BatchRenderer(render_model(scene, "fast"), 48, 64, "front", workers=1)
    try:
        batch = renderer.render(qpos[None])[0]
    finally:
        renderer.close()
    np.testing.assert_array_equal(frames["fast"], batch)
    assert np.abs(frames["fast"].astype(int) - frames["full"]).mean() > 1.0


def test_the_frame_size_bound_is_the_gym_envs():
    from so101_mjx.follower.sim import MAX_CAMERA_SIZE
    from so101_mjx.gym.mujoco_env import MAX_FRAME_SIZE

    assert MAX_CAMERA_SIZE == MAX_FRAME_SIZE
    assert SimFollowerConfig(camera_names=(), fps=60, task_options={"reward_type": "dense"}).fps == 60


def test_reset_after_steps_and_real_time_pacing():
    config = SimFollowerConfig(camera_names=(), reset_after_steps=3, real_time=True, fps=30)
    with SimFollower(config) as f:
        with pytest.raises(DeviceAlreadyConnectedError):
            f.connect()
        start = time.perf_counter()  # before the reset that starts the motor clock the pacing follows
        f.reset()
        home = f.present_position()
        action = dict(zip(FOLLOWER_MOTORS, home + [20, 0, 0, 0, 20, 0], strict=True))
        for _ in range(2):
            f.send_action(action)
        assert time.perf_counter() - start >= 2 / 30  # never ahead of the wall clock
        assert not np.allclose(f.present_position(), home)
        f.send_action(action)  # the third action ends the episode: a fresh scene
        np.testing.assert_allclose(f.present_position(), home, atol=1e-6)


def test_a_calibrated_follower_reads_and_takes_that_arms_units(tmp_path):
    """``calibration``: a real follower's lerobot file; the motors read and take its units (robot.calibration)."""
    from so101_mjx.robot.calibration import load_calibration

    data = {m: {"id": i + 1, "drive_mode": 0, "homing_offset": 0, "range_min": 700 + 40 * i,
                "range_max": 3300 - 30 * i} for i, m in enumerate(motors.MOTORS)}
    path = tmp_path / "my_follower.json"
    path.write_text(json.dumps(data))
    calibration = load_calibration(path)
    with SimFollower(SimFollowerConfig(camera_names=(), calibration=str(path), out_of_range="clip")) as f:
        arm = f.env.env.arm
        assert f.env.env.config.calibration == calibration
        np.testing.assert_allclose(f.limits, motors.motor_limits(arm.motor_ranges, "degrees", calibration), atol=0)
        action = {**f.get_observation(), "wrist_roll.pos": 20.0}
        for _ in range(30):
            f.send_action(action)
        obs = f.get_observation()
        q = np.asarray(f.env.data.qpos)[[*arm.qpos_ids, arm.gripper_qpos]]
        expected = motors.to_motor(q, arm.motor_ranges, "degrees", calibration)
        np.testing.assert_allclose([obs[k] for k in FOLLOWER_MOTORS], expected, atol=1e-4)
        assert abs(obs["wrist_roll.pos"] - 20.0) < 1.0
    with pytest.raises(ValueError, match=r"my_follower.json: shoulder_pan.range_min must be a whole encoder count"):
        path.write_text(json.dumps({**data, "shoulder_pan": {**data["shoulder_pan"], "range_min": -5}}))
        SimFollowerConfig(calibration=str(path))
    with pytest.raises(ValueError, match="task_options must be a dict of the task's config fields other than"):
        SimFollowerConfig(task_options={"calibration": str(path)})
