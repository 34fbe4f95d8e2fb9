"""Joint-mode control's settings (:class:`JointMode`): the motor units, relative targets, their clamp, and the
follower calibration the units follow."""

from __future__ import annotations

import dataclasses

import numpy as np
from jax import Array

from so101_mjx.robot import calibration as calib, motors


@dataclasses.dataclass(frozen=True)
class JointMode:
    """Joint-mode control: ``units`` of the arm motors (:data:`~so101_mjx.robot.motors.JOINT_UNITS`),
    ``relative`` targets (offsets from the measured positions), ``max_relative`` (motor units, or None),
    and the real follower's ``calibration`` the units follow (:mod:`so101_mjx.robot.calibration`; None:
    the MJCF joint ranges stand for it)."""

    units: str = "degrees"
    relative: bool = False
    max_relative: float | None = None
    calibration: calib.Calibration | None = None

    @classmethod
    def of(cls, config: dict) -> JointMode | None:
        """The joint mode of an env config as a dict (run metadata), or None in Cartesian mode."""
        if config.get("control_mode", "cartesian") != "joint":
            return None
        return cls(config.get("joint_units", "degrees"), config.get("relative_joint_targets", False),
                   config.get("max_relative_target"), calib.parse(config.get("calibration")))

    @property
    def _units_text(self) -> str:
        calibrated = "" if self.calibration is None else " of the calibrated follower"
        return f"{self.units}{calibrated}; the gripper 0..100, 0 closed"

    @property
    def action_layout(self) -> str:
        """Joint-mode actions in words (export metadata)."""
        what = "offsets from the measured positions" if self.relative else "targets"
        return f"{list(motors.MOTORS)} {what} ({self._units_text})"

    @property
    def agent_pos_text(self) -> str:
        """Joint mode's ``agent_pos`` in words (export metadata)."""
        return f"agent_pos[0:6] = measured {list(motors.MOTORS)} ({self._units_text})"

    def to_motor(self, q: Array, ranges: np.ndarray) -> Array:
        """Joint angles (..., 6) rad -> motor values (..., 6) (:func:`~so101_mjx.robot.motors.to_motor`)."""
        return motors.to_motor(q, ranges, self.units, self.calibration)

    def from_motor(self, value: Array, ranges: np.ndarray) -> Array:
        """Motor values (..., 6) -> joint angles (..., 6) rad (:func:`~so101_mjx.robot.motors.from_motor`)."""
        return motors.from_motor(value, ranges, self.units, self.calibration)

    def limits(self, ranges: np.ndarray) -> np.ndarray:
        """The joint ``ranges`` (6, 2) rad as motor values (6, 2) (:func:`~so101_mjx.robot.motors.motor_limits`)."""
        return motors.motor_limits(ranges, self.units, self.calibration)
