"""Seed 003 rows checked from the interface's text: unmeasured observation channels are NaN (joint
positions, velocities and the gripper opening included), and the chunk interpolation refuses a chunk
without rows and a rate that is not positive."""

import numpy as np
import pytest

from so101_mjx.station.interface import MotorizedArm_Observation, MotorizedArmSpec, interpolate_chunk, sample_chunk

SO101 = MotorizedArmSpec(30, 30)


def _observation(**overrides) -> MotorizedArm_Observation:
    n, g = SO101.n_arm_dof, SO101.n_gripper_dof
    fields = dict(timestamp=0.0, joint_angle_q=np.zeros(n, np.float32), joint_angle_vel_dq=np.zeros(n, np.float32),
                  joint_torque=np.zeros(n, np.float32), joint_temperature=np.zeros(n, np.float32),
                  gripper_pos=np.full(g, 0.5, np.float32), gripper_vel=np.zeros(g, np.float32),
                  gripper_torque=np.zeros(g, np.float32), gripper_temperature=np.zeros(g, np.float32))
    return MotorizedArm_Observation(**{**fields, **overrides})


def test_unmeasured_channels_are_nan():
    """MotorizedArm_Observation: "One observation tick of a single arm. Unmeasured channels are NaN."."""
    q = np.array([0.1, np.nan, 0.2, np.nan, 0.0], np.float32)
    obs = _observation(joint_angle_q=q, joint_angle_vel_dq=np.full(5, np.nan, np.float32),
                       gripper_pos=np.full(1, np.nan, np.float32))
    obs.validate(SO101)
    assert np.isnan(obs.joint_angle_q[1]) and np.isnan(obs.gripper_pos).all()
    for field, n in (("joint_angle_q", 5), ("joint_angle_vel_dq", 5), ("gripper_pos", 1)):
        with pytest.raises(ValueError, match=f"^{field} must be finite or NaN"):
            _observation(**{field: np.full(n, -np.inf, np.float32)})


def test_interpolation_refuses_an_empty_chunk_and_non_positive_rates():
    """MotorizedArmSpec.control_rate: lower-rate chunks are interpolated up by the station: a chunk
    needs a row (not zeros = every joint to 0 rad) and both rates must be > 0 (not NaN targets)."""
    rows = np.arange(10, dtype=np.float32).reshape(2, 5)
    np.testing.assert_allclose(np.asarray(interpolate_chunk(rows, 10.0, 20.0, 0.05)), 0.5 * (rows[0] + rows[1]))
    with pytest.raises(ValueError, match="targets must have shape .*horizon >= 1"):
        interpolate_chunk(np.zeros((0, 5), np.float32), 10.0, 30.0, 0.0)
    with pytest.raises(ValueError, match="targets must have shape .*horizon >= 1"):
        sample_chunk(np.zeros((0, 5), np.float32), 0.0)
    for kwargs, name in ((dict(chunk_rate_hz=10.0, control_rate_hz=0.0), "control_rate_hz"),
                         (dict(chunk_rate_hz=0.0, control_rate_hz=30.0), "chunk_rate_hz"),
                         (dict(chunk_rate_hz=float("nan"), control_rate_hz=30.0), "chunk_rate_hz"),
                         (dict(chunk_rate_hz=10.0, control_rate_hz=-30.0), "control_rate_hz")):
        with pytest.raises(ValueError, match=f"^{name} must be a finite rate > 0 Hz"):
            interpolate_chunk(rows, t=0.0, **kwargs)
