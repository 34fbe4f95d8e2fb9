"""Joint mode under a real follower's calibration (issue 46, item 1): the env config's ``calibration`` (a file's
path, a Calibration or its dict form), the units it gives the actions and observations, and the gym env's."""

import dataclasses
import json

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import so101_mjx.gym  # noqa: F401  (registers the gymnasium ids)
from so101_mjx.envs import make
from so101_mjx.errors import InputError
from so101_mjx.robot import motors
from so101_mjx.robot.calibration import Calibration
from tests.robot.test_calibration import FILE  # a follower's file as lerobot writes it

NAME = "SO101PickCube-v0"


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    file = tmp_path_factory.mktemp("calibration") / "my_follower.json"
    file.write_text(json.dumps(FILE, indent=4))
    return file


def _targets(env, n: int, seed: int) -> np.ndarray:
    """``n`` random joint targets (n, 6) rad inside the motor limits."""
    ranges = env.arm.motor_ranges
    limits = env.arm.joint_mode.from_motor(env.arm.joint_mode.limits(ranges).T, ranges).T  # (6, 2) rad, either order
    low, high = limits.min(1), limits.max(1)
    return np.random.default_rng(seed).uniform(low + 0.1 * (high - low), high - 0.1 * (high - low), (n, 6))


@pytest.mark.parametrize("units", ["degrees", "range_m100_100"])
def test_a_trajectory_in_calibrated_units_reads_back_as_its_joint_angles(path, units):
    """Targets sent in the follower's units under calibration A move the arm as the same angles sent
    without one; the motor positions the env reports, read back under A, are its joint angles."""
    calibrated = make(NAME, "c", control_mode="joint", joint_units=units, calibration=str(path))
    nominal = make(NAME, "c", control_mode="joint", joint_units=units)
    assert calibrated.config.calibration.source == str(path)
    ranges = calibrated.arm.motor_ranges
    targets = jnp.asarray(_targets(calibrated, 12, 0))

    def run(env, cal):
        def tick(s, q):
            s = env.step(s, motors.to_motor(q, ranges, units, cal))
            return s, (s.obs[:6], env.arm.motor_q(s.physics))

        return jax.jit(lambda s: jax.lax.scan(tick, s, targets)[1])(env.reset(jax.random.PRNGKey(0)))

    (reported, q), (_, q_nominal) = run(calibrated, calibrated.config.calibration), run(nominal, None)
    np.testing.assert_allclose(q, q_nominal, rtol=0, atol=1e-9)  # the same angles on the arm
    assert np.ptp(np.asarray(q), axis=0).min() > 0.05  # every motor moved
    back = motors.from_motor(np.asarray(reported), ranges, units, calibrated.config.calibration)
    np.testing.assert_allclose(back, q, rtol=0, atol=1e-6)


def test_targets_beyond_the_calibrated_range_stop_at_its_end():
    narrow = Calibration(range_min=(1500,) * 5 + (1950,), range_max=(2600,) * 6)  # inside the MJCF ranges
    env = make(NAME, "c", control_mode="joint", calibration=narrow)
    limits = env.arm.joint_mode.limits(env.arm.motor_ranges)
    s = env.step(env.reset(jax.random.PRNGKey(0)), jnp.asarray(limits[:, 1] + 50.0))
    held = np.asarray(s.physics.ctrl)[env.arm.motor_ctrl_ids]
    np.testing.assert_allclose(held, (np.asarray(narrow.range_max) - 2047) * 2 * np.pi / 4096, rtol=0, atol=1e-12)
    low, high = env.arm.action_bounds()
    np.testing.assert_array_equal(np.stack([low, high], 1), limits)


def test_without_a_calibration_the_env_is_bitwise_as_before():
    env = make(NAME, "c", control_mode="joint")
    assert env.config.calibration is None and env.arm.joint_mode.calibration is None
    s = env.reset(jax.random.PRNGKey(1))
    s = env.step(s, s.obs[:6] + 3.0)
    q = env.arm.motor_q(s.physics)
    today = motors.to_motor(q, env.arm.motor_ranges, "degrees")
    np.testing.assert_array_equal(np.asarray(s.obs[:6]), np.asarray(today))


def test_the_config_takes_a_path_a_calibration_or_its_dict_form(path):
    env = make(NAME, "c", control_mode="joint", calibration=path)
    again = make(NAME, "c", **dataclasses.asdict(env.config))  # run.json's form
    assert again.config.calibration == env.config.calibration and isinstance(again.config.calibration, Calibration)
    from_dict = make(NAME, "c", control_mode="joint", calibration=FILE)  # lerobot's JSON form
    assert from_dict.config.calibration == env.config.calibration
    assert "calibrated follower" in env.arm.action_layout


@pytest.mark.parametrize("options, words", [
    ({"calibration": "{path}"}, "calibration (the motor units' calibration) applies to control_mode='joint' only"),
    ({"control_mode": "joint", "calibration": "{path}.absent"}, ".absent is missing"),
    ({"control_mode": "joint", "calibration": 3}, "calibration must be None, the path of a lerobot calibration file"),
])
def test_a_bad_calibration_option_is_refused(path, options, words):
    options = {k: v.format(path=path) if isinstance(v, str) else v for k, v in options.items()}
    with pytest.raises(InputError, match=words.replace("(", r"\(").replace(")", r"\)")):
        make(NAME, "c", **options)


def test_the_gym_env_takes_a_calibration(path):
    env = gymnasium.make(f"so101_mjx/{NAME}", control_mode="joint", calibration=str(path))
    try:
        obs, _ = env.reset(seed=0)
        inner = env.unwrapped.env
        assert inner.config.calibration.source == str(path)
        q = np.asarray(env.unwrapped.data.qpos)[[*inner.arm.qpos_ids, inner.arm.gripper_qpos]]
        expected = motors.to_motor(q, inner.arm.motor_ranges, "degrees", inner.config.calibration)
        np.testing.assert_allclose(obs["agent_pos"][:6], expected, rtol=0, atol=1e-4)
        low, high = env.action_space.low, env.action_space.high
        limits = inner.arm.joint_mode.limits(inner.arm.motor_ranges).astype(np.float32)
        np.testing.assert_array_equal(np.stack([low, high], 1), limits)
    finally:
        env.close()
