"""The follower's motor units: joint angles in radians <-> lerobot's calibrated motor values.

A real SO-101 driven by lerobot (``SO101Follower``) reads and takes its six motors
(:data:`MOTORS`) in normalized units fixed by its calibration (lerobot's ``MotorNormMode``):

- arm motors, ``"degrees"`` (``use_degrees=True``, lerobot's default): degrees from the middle of
  the calibrated range, ``(raw - (min + max) / 2) * 360 / 4095``;
- arm motors, ``"range_m100_100"`` (``use_degrees=False``): the calibrated range mapped linearly
  onto [-100, 100];
- the gripper, always ``RANGE_0_100``: the calibrated range mapped onto [0, 100] (0 closed).

Here the MJCF joint range of each joint stands for the calibrated range (the SO-101 model's
ranges are the arm's mechanical ones, symmetric about 0 for all joints but ``wrist_roll``), so
``degrees = (q - mid) * 180 / pi`` with ``mid`` the range's centre, and the linear maps use
``[lower, upper]``. Arrays are ``(..., 6)`` in :data:`MOTORS` order.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import Array

from so101_mjx.errors import InputError

MOTORS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
FEATURE_NAMES = tuple(f"{motor}.pos" for motor in MOTORS)  # a follower's action and state feature names
JOINT_UNITS = ("degrees", "range_m100_100")  # the arm motors' unit conventions (the gripper's is 0..100)
GRIPPER_SPAN = 100.0  # the gripper's RANGE_0_100


def _gain_offset(ranges: np.ndarray, units: str) -> tuple[np.ndarray, np.ndarray]:
    """``(gain, offset)`` (6,) with ``value = gain * q + offset`` for joint ``ranges`` (6, 2) rad."""
    if units not in JOINT_UNITS:
        raise InputError(f"joint_units must be one of {JOINT_UNITS}, got {units!r}")
    lower, upper = np.asarray(ranges, np.float64).T
    if units == "degrees":
        gain = np.full(6, 180.0 / np.pi)
        offset = -gain * (lower + upper) / 2
    else:
        gain = 200.0 / (upper - lower)
        offset = -100.0 - gain * lower
    gain[5] = GRIPPER_SPAN / (upper[5] - lower[5])
    offset[5] = -gain[5] * lower[5]
    return gain, offset


def to_motor(q: Array, ranges: np.ndarray, units: str) -> Array:
    """Joint angles (..., 6) rad -> motor values (..., 6) in ``units`` (the gripper in 0..100); a numpy
    array stays one (host code keeps float64 whatever JAX's precision)."""
    gain, offset = _gain_offset(ranges, units)
    if isinstance(q, np.ndarray):
        return q * gain + offset
    return q * jnp.asarray(gain, q.dtype) + jnp.asarray(offset, q.dtype)


def from_motor(value: Array, ranges: np.ndarray, units: str) -> Array:
    """Motor values (..., 6) in ``units`` -> joint angles (..., 6) rad (the inverse of :func:`to_motor`;
    numpy stays numpy)."""
    gain, offset = _gain_offset(ranges, units)
    if isinstance(value, np.ndarray):
        return (value - offset) / gain
    return (value - jnp.asarray(offset, value.dtype)) / jnp.asarray(gain, value.dtype)


def joint_ranges(model) -> np.ndarray:
    """The MJCF ranges (6, 2) rad of the six motors' joints (:data:`MOTORS` order) of an SO-101 ``model``."""
    return model.jnt_range[[model.joint(name).id for name in MOTORS]].copy()


def motor_limits(ranges: np.ndarray, units: str) -> np.ndarray:
    """The joint ``ranges`` (6, 2) rad as motor values (6, 2): ``[lower, upper]`` per motor."""
    gain, offset = _gain_offset(ranges, units)
    return np.asarray(ranges, np.float64) * gain[:, None] + offset[:, None]

