"""Arm evaluation interface: spec, containers, gripper mapping and chunk interpolation."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.station.interface import (
    SO101_SPEC,
    MotorizedArm_ActionChunk,
    MotorizedArm_ArmType,
    MotorizedArm_GripperType,
    MotorizedArm_JointPose,
    MotorizedArm_Observation,
    MotorizedArmSpec,
    gripper_ctrl_to_open_fraction,
    gripper_open_fraction_to_ctrl,
    interpolate_chunk,
)

CTRLRANGE = (-0.17453, 1.74533)
YAM_HANDLE = MotorizedArmSpec("yam_6dof", "i2rt_teaching_handle", 30, 100)


def f32(*values):
    return np.asarray(values, dtype=np.float32)


def observation(n_arm=5, n_grip=1, **overrides):
    fields = dict(
        timestamp=1.5,
        joint_angle_q=np.zeros(n_arm, np.float32),
        joint_angle_vel_dq=np.zeros(n_arm, np.float32),
        joint_torque=np.full(n_arm, np.nan, np.float32),
        joint_temperature=np.full(n_arm, np.nan, np.float32),
        gripper_pos=np.full(n_grip, 0.5, np.float32),
        gripper_vel=np.zeros(n_grip, np.float32),
        gripper_torque=np.full(n_grip, np.nan, np.float32),
        gripper_temperature=np.full(n_grip, np.nan, np.float32),
    )
    return MotorizedArm_Observation(**{**fields, **overrides})


def chunk(horizon=4, n_arm=5):
    q = np.arange(horizon * n_arm, dtype=np.float32).reshape(horizon, n_arm)
    g = np.linspace(0, 1, horizon, dtype=np.float32)[:, None]
    return MotorizedArm_ActionChunk(q, g)


# --- enums and spec -------------------------------------------------------------------------


def test_enum_values_and_dofs():
    assert MotorizedArm_ArmType("yam_6dof").n_dof == 6
    assert MotorizedArm_ArmType("so101_5dof").n_dof == 5
    assert MotorizedArm_GripperType("i2rt_linear_gripper_1dof").n_dof == 1
    assert MotorizedArm_GripperType("so101_jaw_1dof").n_dof == 1
    assert not MotorizedArm_GripperType.I2RT_teaching_handle.actuated
    assert MotorizedArm_GripperType.SO101_jaw_1DoF.actuated


def test_spec_properties():
    assert (SO101_SPEC.n_arm_dof, SO101_SPEC.n_gripper_dof, SO101_SPEC.actuated_width) == (5, 1, 6)
    assert SO101_SPEC.gripper_actuated and (SO101_SPEC.refresh_rate, SO101_SPEC.control_rate) == (10, 10)
    assert YAM_HANDLE.arm is MotorizedArm_ArmType.YAM_6DoF  # string values coerced to members
    assert (YAM_HANDLE.gripper_actuated, YAM_HANDLE.actuated_width) == (False, 6)
    with pytest.raises(dataclasses.FrozenInstanceError):
        SO101_SPEC.control_rate = 20


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(arm="ur5"), "arm"),
        (dict(arm=MotorizedArm_GripperType.SO101_jaw_1DoF), "arm"),
        (dict(gripper="claw"), "gripper"),
        (dict(refresh_rate=0), "refresh_rate"),
        (dict(refresh_rate=10.0), "refresh_rate"),
        (dict(control_rate=-5), "control_rate"),
        (dict(control_rate=True), "control_rate"),
    ],
)
def test_spec_rejects_bad_fields(kwargs, field):
    args = dict(arm="so101_5dof", gripper="so101_jaw_1dof", refresh_rate=10, control_rate=10) | kwargs
    with pytest.raises(ValueError, match=f"^{field} "):
        MotorizedArmSpec(**args)


# --- observation ----------------------------------------------------------------------------


def test_observation_valid_and_validates():
    obs = observation()
    obs.validate(SO101_SPEC)
    assert isinstance(obs.timestamp, float)
    observation(n_arm=6).validate(MotorizedArmSpec("yam_6dof", "i2rt_linear_gripper_1dof", 30, 100))


@pytest.mark.parametrize(
    "field, value, needle",
    [
        ("joint_angle_q", np.zeros(5, np.float64), "dtype float32"),
        ("joint_angle_vel_dq", [0.0] * 5, "np.ndarray"),
        ("joint_torque", np.zeros((5, 1), np.float32), "rank 1"),
        ("joint_temperature", np.zeros(4, np.float32), "as joint_angle_q"),
        ("gripper_vel", np.zeros(2, np.float32), "as gripper_pos"),
        ("gripper_temperature", np.zeros((), np.float32), "rank 1"),
        ("gripper_torque", np.zeros(1, np.float16), "dtype float32"),
        ("gripper_pos", f32(1.5), r"\[0, 1\]"),
        ("gripper_pos", f32(-0.1), r"\[0, 1\]"),
    ],
)
def test_observation_rejects_dtype_rank_dof(field, value, needle):
    with pytest.raises(ValueError, match=f"^{field} .*{needle}"):
        observation(**{field: value})


@pytest.mark.parametrize("field", ["joint_angle_q", "joint_angle_vel_dq", "gripper_pos"])
def test_observation_accepts_nan_rejects_inf_in_position_channels(field):
    """Seed 003: "Unmeasured channels are NaN" (positions too); inf is never a measurement."""
    n = 1 if field.startswith("gripper") else 5
    observation(**{field: np.full(n, np.nan, np.float32)})
    with pytest.raises(ValueError, match=f"^{field} must be finite or NaN"):
        observation(**{field: np.full(n, np.inf, np.float32)})


@pytest.mark.parametrize("timestamp", [float("nan"), float("inf"), "1.0", True])
def test_observation_rejects_bad_timestamp(timestamp):
    with pytest.raises(ValueError, match="^timestamp "):
        observation(timestamp=timestamp)


@pytest.mark.parametrize("field", ["joint_torque", "joint_temperature", "gripper_torque", "gripper_vel"])
def test_observation_rejects_inf_everywhere(field):
    n = 1 if field.startswith("gripper") else 5
    with pytest.raises(ValueError, match=f"^{field} must be finite or NaN"):
        observation(**{field: np.full(n, np.inf, np.float32)})


def test_gripper_vel_nan_only_for_unactuated_gripper():
    obs = observation(n_arm=6, gripper_vel=f32(np.nan))
    obs.validate(YAM_HANDLE)
    with pytest.raises(ValueError, match="^gripper_vel must be finite"):
        obs.validate(MotorizedArmSpec("yam_6dof", "i2rt_linear_gripper_1dof", 30, 100))


def test_observation_validate_rejects_spec_mismatch():
    with pytest.raises(ValueError, match="^joint_angle_q .*n_arm_dof = 6"):
        observation().validate(YAM_HANDLE)
    with pytest.raises(ValueError, match="^gripper_pos .*n_gripper_dof = 1"):
        observation(n_grip=2).validate(SO101_SPEC)


# --- joint pose -----------------------------------------------------------------------------


def test_joint_pose_checks():
    pose = MotorizedArm_JointPose(np.zeros(5, np.float32), f32(1.0))
    pose.validate(SO101_SPEC)
    with pytest.raises(ValueError, match="^joint_angle_q .*n_arm_dof"):
        pose.validate(YAM_HANDLE)
    with pytest.raises(ValueError, match="^gripper_pos .*0, 1"):
        MotorizedArm_JointPose(np.zeros(5, np.float32), f32(2.0))
    with pytest.raises(ValueError, match="^joint_angle_q must be finite"):
        MotorizedArm_JointPose(f32(0, 0, np.nan, 0, 0), f32(0.0))
    with pytest.raises(ValueError, match="^gripper_pos .*rank 1"):
        MotorizedArm_JointPose(np.zeros(5, np.float32), np.zeros((1, 1), np.float32))


# --- action chunk ---------------------------------------------------------------------------


def test_chunk_indexing():
    c = chunk(horizon=4)
    assert c.horizon == len(c) == 4
    np.testing.assert_array_equal(c[-1].joint_angle_q, c.joint_angle_q[3])
    np.testing.assert_array_equal(c[-4].joint_angle_q, c.joint_angle_q[0])
    np.testing.assert_array_equal(c[1].gripper_pos, c.gripper_pos[1])
    assert isinstance(c[0], MotorizedArm_JointPose)
    for bad in (4, -5):
        with pytest.raises(IndexError):
            c[bad]
    with pytest.raises(TypeError):
        c[1:2]
    assert [pose.joint_angle_q[0] for pose in c] == [0, 5, 10, 15]  # iteration stops at IndexError


@pytest.mark.parametrize(
    "q, g, needle",
    [
        (np.zeros((3, 5), np.float64), np.zeros((3, 1), np.float32), "^joint_angle_q .*dtype float32"),
        (np.zeros(5, np.float32), np.zeros((1, 1), np.float32), "^joint_angle_q .*rank 2"),
        (np.zeros((3, 5), np.float32), np.zeros(3, np.float32), "^gripper_pos .*rank 2"),
        (np.zeros((3, 5), np.float32), np.zeros((2, 1), np.float32), "^gripper_pos .*horizon"),
        (np.zeros((0, 5), np.float32), np.zeros((0, 1), np.float32), "^joint_angle_q .*horizon >= 1"),
        (np.full((2, 5), np.nan, np.float32), np.zeros((2, 1), np.float32), "^joint_angle_q must be finite"),
        (np.zeros((2, 5), np.float32), np.full((2, 1), 1.01, np.float32), r"^gripper_pos .*\[0, 1\]"),
    ],
)
def test_chunk_rejects(q, g, needle):
    with pytest.raises(ValueError, match=needle):
        MotorizedArm_ActionChunk(q, g)


def test_chunk_validate():
    c = chunk(horizon=4)
    c.validate(SO101_SPEC, horizon=4)
    with pytest.raises(ValueError, match="^joint_angle_q .*horizon = 8"):
        c.validate(SO101_SPEC, horizon=8)
    with pytest.raises(ValueError, match="^joint_angle_q .*n_arm_dof = 6"):
        c.validate(YAM_HANDLE, horizon=4)
    g2 = MotorizedArm_ActionChunk(c.joint_angle_q, np.zeros((4, 2), np.float32))
    with pytest.raises(ValueError, match="^gripper_pos .*n_gripper_dof = 1"):
        g2.validate(SO101_SPEC, horizon=4)


# --- gripper mapping ------------------------------------------------------------------------


def test_gripper_mapping():
    lo, hi = CTRLRANGE
    frac = np.array([-0.5, 0.0, 0.25, 1.0, 2.0])
    ctrl = gripper_open_fraction_to_ctrl(frac, CTRLRANGE)
    np.testing.assert_allclose(ctrl, lo + np.clip(frac, 0, 1) * (hi - lo), rtol=0, atol=1e-12)
    assert ctrl[1] == lo and ctrl[3] == hi  # 0 = closed = low end
    np.testing.assert_allclose(gripper_ctrl_to_open_fraction(ctrl, CTRLRANGE), np.clip(frac, 0, 1), atol=1e-12)
    np.testing.assert_array_equal(gripper_ctrl_to_open_fraction(np.array([lo - 1, hi + 1]), CTRLRANGE), [0, 1])
    # per-world ctrlranges (batched models)
    ranges = np.array([CTRLRANGE, (0.0, 2.0)])
    np.testing.assert_allclose(gripper_open_fraction_to_ctrl(np.array([0.5, 0.5]), ranges), [(lo + hi) / 2, 1.0])


def test_gripper_mapping_matches_model(model):
    ctrlrange = model.actuator_ctrlrange[model.actuator("gripper").id]
    np.testing.assert_allclose(ctrlrange, CTRLRANGE, atol=1e-5)
    assert gripper_open_fraction_to_ctrl(0.0, ctrlrange) == ctrlrange[0]


# --- interpolation --------------------------------------------------------------------------


def linear_chunk(horizon, dof, dtype):
    i = np.arange(horizon)[:, None]
    return (0.3 + 0.7 * i + 0.1 * np.arange(dof)[None, :]).astype(dtype)


@pytest.mark.parametrize("dtype, tol", [(np.float32, 1e-6), (np.float64, 1e-13)])
@pytest.mark.parametrize("chunk_rate, control_rate", [(10, 10), (10, 50), (5, 30), (30, 10)])
def test_interpolation_exact_on_linear_signal(dtype, tol, chunk_rate, control_rate):
    horizon = 6
    targets = linear_chunk(horizon, 3, dtype)
    ticks = np.arange(int((horizon - 1) / chunk_rate * control_rate) + 1)
    t = (ticks / control_rate).astype(dtype)  # rounded tick times must land on their tick
    out = interpolate_chunk(targets, chunk_rate, control_rate, t[:, None])[:, 0, :]
    assert out.dtype == dtype
    row = ticks * chunk_rate / control_rate
    expected = 0.3 + 0.7 * row[:, None] + 0.1 * np.arange(3)[None, :]
    np.testing.assert_allclose(out, expected, rtol=0, atol=tol)
    assert float(out[-1, 0] - out[0, 0]) > 0.5  # really moved along the chunk


def test_interpolation_holds_between_ticks_and_at_both_ends():
    targets = linear_chunk(4, 2, np.float64)  # rows at 0, 0.1, 0.2, 0.3 s
    def at(t):
        return np.asarray(interpolate_chunk(targets, 10, 20, t))

    np.testing.assert_array_equal(at(-1.0), targets[0])
    np.testing.assert_array_equal(at(-1e-9), targets[0])
    np.testing.assert_array_equal(at(0.3), targets[-1])
    np.testing.assert_array_equal(at(10.0), targets[-1])
    np.testing.assert_allclose(at(0.05), (targets[0] + targets[1]) / 2, atol=1e-15)  # tick 1 of 20 Hz
    np.testing.assert_array_equal(at(0.07), at(0.05))  # held until the next control tick
    np.testing.assert_array_equal(at(0.09999), at(0.1))  # 2e-4 of a period early: tick 2
    np.testing.assert_array_equal(at(0.099), at(0.05))  # 2e-2 of a period early: still tick 1
    single = targets[:1]
    np.testing.assert_array_equal(interpolate_chunk(single, 10, 20, 0.2), targets[0])


def test_interpolation_vmaps_and_broadcasts(rng):
    batch, horizon, dof = 7, 5, 6
    targets = rng.normal(size=(batch, horizon, dof)).astype(np.float32)
    t = rng.uniform(-0.1, 0.6, size=batch)
    per_chunk = np.stack([interpolate_chunk(targets[b], 10, 30, t[b]) for b in range(batch)])
    vmapped = jax.vmap(interpolate_chunk, in_axes=(0, None, None, 0))(targets, 10, 30, t)
    np.testing.assert_array_equal(vmapped, per_chunk)
    np.testing.assert_array_equal(interpolate_chunk(targets, 10, 30, t), per_chunk)
    jitted = jax.jit(jax.vmap(interpolate_chunk, in_axes=(0, None, None, 0)))(targets, 10, 30, t)
    np.testing.assert_allclose(jitted, per_chunk, rtol=0, atol=1e-6)  # XLA fusion may differ by 1 ulp
    assert not np.allclose(per_chunk[0], per_chunk[1])
    # traced rates (e.g. per-world control rates) are fine too
    rates = jax.vmap(interpolate_chunk, in_axes=(0, 0, None, 0))(targets, jnp.full(batch, 10.0), 30, t)
    np.testing.assert_allclose(rates, per_chunk, atol=1e-6)
