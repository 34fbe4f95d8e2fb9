"""Simulated station: joint-space chunk replay on the CPU env and in the batched JAX path."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.station.interface import (
    MotorizedArm_ActionChunk,
    MotorizedArm_ArmType,
    MotorizedArm_GripperType,
    MotorizedArm_JointPose,
    MotorizedArmSpec,
)
from so101_mjx.station.sim_station import SimStation, chunk_ticks, run_chunks
from tests.station.shared import make_station, random_chunk


@pytest.fixture(scope="module")
def station():
    return make_station()


SPEC = MotorizedArmSpec(MotorizedArm_ArmType.SO101_5DoF, MotorizedArm_GripperType.SO101_jaw_1DoF, refresh_rate=25,
                        control_rate=50)


def test_observation_channels(station):
    obs = station.reset(seed=0)
    assert obs.joint_angle_q.shape == (5,) and obs.gripper_pos.shape == (1,)
    assert np.isnan(obs.joint_temperature).all() and np.isnan(obs.gripper_temperature).all()
    assert np.isfinite(obs.joint_torque).all() and 0.0 <= obs.gripper_pos[0] <= 1.0
    home = MotorizedArm_JointPose(np.zeros(5, np.float32), np.zeros(1, np.float32))
    held = station.walk_to(home, duration=0.2)[-1]
    assert abs(float(held.joint_torque[1])) > 0.01  # the servo holds shoulder_lift against gravity


def test_walk_to_reaches_pose(station):
    station.reset(seed=0)
    target = MotorizedArm_JointPose(np.array([0.3, -0.2, 0.4, 0.2, 0.1], np.float32), np.array([0.8], np.float32))
    published = station.walk_to(target, duration=1.0)
    assert len(published) == 25  # 50 ticks at 50 Hz, every 2nd published
    np.testing.assert_allclose(station.targets[-1], np.r_[target.joint_angle_q, target.gripper_pos], atol=1e-6)
    assert np.all(np.diff([o.timestamp for o in published]) > 0)
    published += station.walk_to(target, duration=1.0)  # settle
    # P-only servos sag under gravity (the reference's ~17 mm); the pose is reached to within 0.1 rad.
    np.testing.assert_allclose(published[-1].joint_angle_q, target.joint_angle_q, atol=0.1)


def test_cpu_and_batched_chunk_replay_same_targets(station, rng):
    chunk_rate = 10.0
    chunks = [random_chunk(rng) for _ in range(3)]
    cpu_targets = []
    for c in chunks:
        station.reset(seed=0)
        station.execute(c, chunk_rate)
        cpu_targets.append(np.stack(station.targets))
    n = chunk_ticks(chunk_rate, SPEC.control_rate, 6)
    assert n == 26 and all(t.shape == (n, 6) for t in cpu_targets)
    env = station.env
    physics = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(0), 3)).physics
    arm = jnp.stack([jnp.asarray(c.joint_angle_q) for c in chunks])
    grip = jnp.stack([jnp.asarray(c.gripper_pos) for c in chunks])
    _, targets, _ = jax.jit(run_chunks, static_argnums=(0, 5))(env, physics, arm, grip, chunk_rate, n)
    for b in range(3):
        np.testing.assert_allclose(np.asarray(targets[:, b]), cpu_targets[b], atol=1e-6)
        # rows land exactly on ticks 0, 5, 10, ...: the chunk itself, and linear in between
        np.testing.assert_allclose(cpu_targets[b][::5],
                                   np.c_[chunks[b].joint_angle_q, chunks[b].gripper_pos], atol=1e-6)


def test_chunk_validation(station):
    station.reset(seed=0)
    bad = MotorizedArm_ActionChunk(np.zeros((4, 6), np.float32), np.zeros((4, 1), np.float32))
    with pytest.raises(ValueError, match="joint_angle_q"):
        station.execute(bad, 10.0)
    with pytest.raises(ValueError, match="refresh_rate"):
        SimStation(spec=MotorizedArmSpec(MotorizedArm_ArmType.SO101_5DoF,
                                         MotorizedArm_GripperType.SO101_jaw_1DoF, 30, 50))
