"""CartesianAdapter (issue 33, item 3): a Cartesian-mode policy on a follower. From the state the
training env is in, the adapter's observation and motor targets are the env's own."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import so101_mjx
from so101_mjx.follower.cartesian import CartesianAdapter
from so101_mjx.robot import motors

CONFIG = {"top_down_ik": True, "jaw_pads": True, "random_block_position": True, "action_scale": 0.04}


@pytest.mark.slow
def test_observation_and_targets_are_the_envs_own():
    adapter = CartesianAdapter("SO101PickCube-v0", CONFIG, "degrees")
    env = so101_mjx.make("SO101PickCube-v0", "c", **CONFIG)
    state = env.reset(jax.random.PRNGKey(3))
    arm = env.arm
    q = jnp.concatenate([state.physics.qpos[arm.qpos_ids], state.physics.qpos[arm.gripper_qpos, None]])
    measured = np.asarray(motors.to_motor(q, arm.motor_ranges, "degrees"), np.float64)
    agent = adapter.agent_pos(measured)
    truth = np.asarray(arm.agent_pos(state.physics))
    np.testing.assert_allclose(agent[:5], truth[:5], atol=1e-9)  # joint angles
    np.testing.assert_array_equal(agent[5:10], 0.0)  # no history yet (the reset's velocities are 0 too)
    np.testing.assert_allclose(agent[5:10], truth[5:10], atol=1e-9)
    np.testing.assert_allclose(agent[10], truth[10], atol=1e-6)  # the jaw command as a pose
    np.testing.assert_allclose(agent[11:], truth[11:], atol=1e-6)  # FK = the ee sensor at rest
    for action in ([1.0, 0.0, -0.5, 0.0], [0.0, 0.0, 0.0, 1.0], [-0.3, 0.7, 0.2, 0.4]):
        adapter.reset()
        a = jnp.asarray(action, state.physics.qpos.dtype)
        arm_q, jaw, _ = arm.cartesian_targets(state.physics, state.info, a)
        arm_q = jnp.clip(arm_q, arm.ctrl_range[:, 0], arm.ctrl_range[:, 1])
        expected = motors.to_motor(jnp.concatenate([arm_q, jaw[None]]), arm.motor_ranges, "degrees")
        np.testing.assert_allclose(adapter.targets(measured, np.asarray(action)), expected, atol=1e-6)


def test_velocity_is_the_finite_difference_and_the_jaw_command_is_remembered():
    adapter = CartesianAdapter("SO101PickCube-v0", CONFIG, "range_m100_100")
    first = np.asarray([0.0, 10, -10, 5, 0, 50])
    adapter.agent_pos(first)
    adapter.targets(first, np.asarray([0.0, 0, 0, 0.0]))  # close the jaw
    second = first + [2.0, 0, 0, 0, 0, 0]
    agent = adapter.agent_pos(second)
    gain = 200.0 / np.diff(adapter.arm.motor_ranges[0])[0]  # motor units per radian
    np.testing.assert_allclose(agent[5], 2.0 / gain / adapter.dt, rtol=1e-5)
    assert agent[10] == -1.0  # gripper_pose of a closed jaw command


def test_a_calibrated_follower_is_read_and_driven_in_its_units():
    """With the follower's calibration the adapter reads its motor values as that arm's angles, and sends the
    targets in its units: the same angles as without one."""
    from so101_mjx.robot.calibration import Calibration

    nominal = CartesianAdapter("SO101PickCube-v0", CONFIG, "degrees")
    ranges = nominal.arm.motor_ranges
    near = Calibration.nominal(ranges)
    calibration = Calibration(tuple(v + 25 for v in near.range_min), tuple(v - 15 for v in near.range_max))
    adapter = CartesianAdapter("SO101PickCube-v0", CONFIG, "degrees", calibration)
    q = np.asarray([0.1, -0.3, 0.4, 0.2, -0.5, 0.3])
    agent = adapter.agent_pos(motors.to_motor(q, ranges, "degrees", calibration))
    np.testing.assert_allclose(agent, nominal.agent_pos(motors.to_motor(q, ranges, "degrees")), atol=1e-6)
    action = np.asarray([0.5, -0.2, 0.1, 0.7])
    calibrated = adapter.targets(motors.to_motor(q, ranges, "degrees", calibration), action)
    expected = nominal.targets(motors.to_motor(q, ranges, "degrees"), action)
    np.testing.assert_allclose(motors.from_motor(calibrated, ranges, "degrees", calibration),
                               motors.from_motor(expected, ranges, "degrees"), atol=1e-6)
