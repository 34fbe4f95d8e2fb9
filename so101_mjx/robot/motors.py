"""The follower's motor units: joint angles in radians <-> lerobot's calibrated motor values.

A real SO-101 driven by lerobot (``SO101Follower``) reads and takes its six motors
(:data:`MOTORS`) in normalized units fixed by its calibration (lerobot's ``MotorNormMode``):

- arm motors, ``"degrees"`` (``use_degrees=True``, lerobot's default): degrees from the middle of
  the calibrated range, ``(raw - (min + max) / 2) * 360 / 4095``;
- arm motors, ``"range_m100_100"`` (``use_degrees=False``): the calibrated range mapped linearly
  onto [-100, 100];
- the gripper, always ``RANGE_0_100``: the calibrated range mapped onto [0, 100] (0 closed).

Without a calibration the MJCF joint range of each joint stands for the calibrated range (the SO-101
model's ranges are the arm's mechanical ones, symmetric about 0 for all joints but ``wrist_roll``), so
``degrees = (q - mid) * 180 / pi`` with ``mid`` the range's centre, and the linear maps use
``[lower, upper]``. With a real follower's :class:`~so101_mjx.robot.calibration.Calibration` the
angle becomes raw counts, ``zero_counts + q * 4096 / (2 pi)``, and those follow lerobot's own
normalization with the file's ``range_min`` / ``range_max`` (``max_res`` 4095 in degrees; in the
range modes ``drive_mode`` 1 mirrors the value, as lerobot's ``_normalize``). Every map is affine
(``value = gain * q + offset``): inside the calibrated range it equals lerobot's, outside it goes on
linearly where lerobot clamps (the motors stop at the range's ends: :func:`motor_limits`). Arrays
are ``(..., 6)`` in :data:`MOTORS` order.
"""

from __future__ import annotations

from typing import overload

import jax.numpy as jnp
import numpy as np
from jax import Array

from so101_mjx.errors import InputError
from so101_mjx.robot.calibration import COUNTS_PER_TURN, MAX_COUNT, MOTORS, Calibration

FEATURE_NAMES = tuple(f"{motor}.pos" for motor in MOTORS)  # a follower's action and state feature names
JOINT_UNITS = ("degrees", "range_m100_100")  # the arm motors' unit conventions (the gripper's is 0..100)
GRIPPER_SPAN = 100.0  # the gripper's RANGE_0_100
RAD_COUNTS = COUNTS_PER_TURN / (2 * np.pi)  # raw encoder counts per radian


def gain_offset(ranges: np.ndarray, units: str,
                 calibration: Calibration | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(gain, offset)`` (6,) with ``value = gain * q + offset`` for joint ``ranges`` (6, 2) rad, or under
    ``calibration`` (:func:`_calibrated`)."""
    if units not in JOINT_UNITS:
        raise InputError(f"joint_units must be one of {JOINT_UNITS}, got {units!r}")
    if calibration is not None:
        return _calibrated(units, calibration)
    lower, upper = np.asarray(ranges, np.float64).T
    return _span_map(units, lower, upper, 180.0 / np.pi)


def _span_map(units: str, low: np.ndarray, high: np.ndarray, degrees_per_unit: float) -> tuple[np.ndarray, np.ndarray]:
    """``(gain, offset)`` (6,) with ``value = gain * x + offset`` for ``x`` in the units of the spans
    ``[low, high]`` (6,): degrees from the span's middle, or the span onto [-100, 100]; the gripper's span
    onto [0, 100]."""
    if units == "degrees":
        gain = np.full(6, degrees_per_unit)
        offset = -gain * (low + high) / 2
    else:
        gain = 200.0 / (high - low)
        offset = -100.0 - gain * low
    gain[5] = GRIPPER_SPAN / (high[5] - low[5])
    offset[5] = -gain[5] * low[5]
    return gain, offset


def _calibrated(units: str, calibration: Calibration) -> tuple[np.ndarray, np.ndarray]:
    """``(gain, offset)`` (6,) of rad -> raw counts (``zero_counts + q * RAD_COUNTS``) -> lerobot's value:
    degrees ``(counts - mid) * 360 / 4095`` with ``mid`` the middle of ``[range_min, range_max]``; that
    range onto [-100, 100] (arm motors, ``range_m100_100``) or [0, 100] (the gripper), mirrored
    (``-value``, ``100 - value``) by ``drive_mode`` 1, which lerobot ignores in degrees."""
    low, high = np.asarray(calibration.range_min, np.float64), np.asarray(calibration.range_max, np.float64)
    arm = np.arange(len(MOTORS)) < 5
    per_count, at_zero = _span_map(units, low, high, 360.0 / MAX_COUNT)
    mirrored = (np.asarray(calibration.drive_mode) == 1) & ~(arm & (units == "degrees"))
    per_count = np.where(mirrored, -per_count, per_count)  # value = per_count * counts + at_zero
    at_zero = np.where(mirrored, np.where(arm, 0.0, GRIPPER_SPAN) - at_zero, at_zero)
    return per_count * RAD_COUNTS, per_count * np.asarray(calibration.zero_counts, np.float64) + at_zero


@overload
def to_motor(q: np.ndarray, ranges: np.ndarray, units: str, calibration: Calibration | None = None) -> np.ndarray: ...
@overload
def to_motor(q: Array, ranges: np.ndarray, units: str, calibration: Calibration | None = None) -> Array: ...
def to_motor(q: np.ndarray | Array, ranges: np.ndarray, units: str,
             calibration: Calibration | None = None) -> np.ndarray | Array:
    """Joint angles (..., 6) rad -> motor values (..., 6) in ``units`` (the gripper in 0..100), under a
    follower's ``calibration`` when given (else ``ranges`` stand for it); a numpy array stays one (host
    code keeps float64 whatever JAX's precision)."""
    gain, offset = gain_offset(ranges, units, calibration)
    if isinstance(q, np.ndarray):
        return q * gain + offset
    return q * jnp.asarray(gain, q.dtype) + jnp.asarray(offset, q.dtype)


@overload
def from_motor(value: np.ndarray, ranges: np.ndarray, units: str,
               calibration: Calibration | None = None) -> np.ndarray: ...
@overload
def from_motor(value: Array, ranges: np.ndarray, units: str, calibration: Calibration | None = None) -> Array: ...
def from_motor(value: np.ndarray | Array, ranges: np.ndarray, units: str,
               calibration: Calibration | None = None) -> np.ndarray | Array:
    """Motor values (..., 6) in ``units`` -> joint angles (..., 6) rad (the inverse of :func:`to_motor`;
    numpy stays numpy)."""
    gain, offset = gain_offset(ranges, units, calibration)
    if isinstance(value, np.ndarray):
        return (value - offset) / gain
    return (value - jnp.asarray(offset, value.dtype)) / jnp.asarray(gain, value.dtype)


def joint_ranges(model) -> np.ndarray:
    """The MJCF ranges (6, 2) rad of the six motors' joints (:data:`MOTORS` order) of an SO-101 ``model``."""
    return model.jnt_range[[model.joint(name).id for name in MOTORS]].copy()


def motor_limits(ranges: np.ndarray, units: str, calibration: Calibration | None = None) -> np.ndarray:
    """The joint ``ranges`` (6, 2) rad as motor values (6, 2): ``[lower, upper]`` per motor; under a
    ``calibration``, the part of them inside its ``[range_min, range_max]`` (where the motors stop)."""
    gain, offset = gain_offset(ranges, units, calibration)
    limits = np.asarray(ranges, np.float64) * gain[:, None] + offset[:, None]
    if calibration is None:
        return limits
    counts = np.stack([calibration.range_min, calibration.range_max], axis=1).astype(np.float64)
    reach = (counts - np.asarray(calibration.zero_counts)[:, None]) / RAD_COUNTS * gain[:, None] + offset[:, None]
    limits, reach = np.sort(limits, axis=1), np.sort(reach, axis=1)
    return np.stack([np.maximum(limits[:, 0], reach[:, 0]), np.minimum(limits[:, 1], reach[:, 1])], axis=1)

