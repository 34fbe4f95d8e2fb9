"""Arm evaluation interface: arm spec, observation / joint pose / action chunk containers.

Reproduces ``se3labs.interface.eval.arm`` (the arm evaluation interface) so code written against it runs on
the SO-101 unchanged, and adds the SO-101 members, the SO-101 gripper mapping and the chunk
interpolation the station applies.

Conventions (as in ``se3labs.interface.eval.arm``): containers hold ``np.float32`` arrays; joint angles in rad,
velocities in rad/s, torques in N*m, temperatures in degC; ``gripper_pos`` is an open
fraction in [0, 1] (0 = fully closed, 1 = fully open); action targets are absolute joint
positions. Invalid containers raise ``ValueError`` naming the field, at construction and again
in ``validate(spec)`` (arrays can be edited in place after construction; the station validates
every container where it enters the simulation).

NaN marks an unmeasured channel (that interface: "Unmeasured channels are NaN") and is the only
non-finite value accepted anywhere (``inf`` is always rejected):

- always finite: ``timestamp`` and every action / joint pose value (targets reach the motors);
- may be NaN: every observation channel, ``joint_angle_q``, ``joint_angle_vel_dq`` and
  ``gripper_pos`` (otherwise in [0, 1]) included;
- ``gripper_vel`` may be NaN at construction; ``validate`` rejects NaN there unless the spec's
  gripper is not actuated (the teaching handle reports an opening only).
"""

from __future__ import annotations

import dataclasses
import inspect
import numbers
from enum import Enum

import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.robot import gripper as gripper_mapping

__all__ = [
    "SO101_SPEC",
    "MotorizedArmSpec",
    "MotorizedArm_ActionChunk",
    "MotorizedArm_ArmType",
    "MotorizedArm_GripperType",
    "MotorizedArm_JointPose",
    "MotorizedArm_Observation",
    "gripper_ctrl_to_open_fraction",
    "gripper_open_fraction_to_ctrl",
    "interpolate_chunk",
    "sample_chunk",
]


class MotorizedArm_ArmType(Enum):
    """Arm model; ``n_dof`` is its number of arm joints (gripper excluded)."""

    YAM_6DoF = "yam_6dof"
    SO101_5DoF = "so101_5dof"

    @property
    def n_dof(self) -> int:
        return _ARM_DOF[self]


class MotorizedArm_GripperType(Enum):
    """Gripper model; ``n_dof`` channels of ``gripper_pos``, ``actuated`` if it takes targets."""

    I2RT_linear_gripper_1DoF = "i2rt_linear_gripper_1dof"
    I2RT_teaching_handle = "i2rt_teaching_handle"
    SO101_jaw_1DoF = "so101_jaw_1dof"

    @property
    def n_dof(self) -> int:
        return 1

    @property
    def actuated(self) -> bool:
        return self is not MotorizedArm_GripperType.I2RT_teaching_handle


_ARM_DOF = {MotorizedArm_ArmType.YAM_6DoF: 6, MotorizedArm_ArmType.SO101_5DoF: 5}


@dataclasses.dataclass(frozen=True, init=False)
class MotorizedArmSpec:
    """Hardware spec of one arm.

    ``MotorizedArmSpec(refresh_rate, control_rate)`` is the interface's form and
    describes the SO-101 (``arm="so101_5dof"``, ``gripper="so101_jaw_1dof"``, keywords to change
    them). ``MotorizedArmSpec(arm, gripper, refresh_rate, control_rate)``, arm and gripper first,
    is also accepted: a first positional argument that is an arm type or its string value selects
    that order.

    Attributes:
        arm, gripper: the arm and gripper models (an enum member or its string value).
        refresh_rate: observation publishing rate, [Hz], int > 0.
        control_rate: rate at which joint position targets reach the motors, [Hz], int > 0;
            chunks at another rate are interpolated to it (``interpolate_chunk``).
    """

    arm: MotorizedArm_ArmType
    gripper: MotorizedArm_GripperType
    refresh_rate: int
    control_rate: int

    def __init__(self, *args, **kwargs) -> None:
        arm_first = bool(args) and isinstance(args[0], (str, MotorizedArm_ArmType))
        try:
            bound = (_SPEC_ARM_FIRST if arm_first else _SPEC_RATES_FIRST).bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"MotorizedArmSpec(refresh_rate, control_rate, *, arm=..., gripper=...): {err}") from None
        bound.apply_defaults()
        for name, value in bound.arguments.items():
            object.__setattr__(self, name, value)
        self.__post_init__()

    def __post_init__(self) -> None:
        for name, kind in (("arm", MotorizedArm_ArmType), ("gripper", MotorizedArm_GripperType)):
            value = getattr(self, name)
            try:
                object.__setattr__(self, name, kind(value))
            except ValueError:
                allowed = [m.value for m in kind]
                raise InputError(f"{name} must be a {kind.__name__} (one of {allowed}), got {value!r}") from None
        for name in ("refresh_rate", "control_rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
                raise InputError(f"{name} must be an int > 0 [Hz], got {value!r}")
            object.__setattr__(self, name, int(value))

    @property
    def n_arm_dof(self) -> int:
        return self.arm.n_dof

    @property
    def n_gripper_dof(self) -> int:
        return self.gripper.n_dof

    @property
    def gripper_actuated(self) -> bool:
        return self.gripper.actuated

    @property
    def actuated_width(self) -> int:
        """Number of commanded channels: arm joints, plus the gripper's if it is actuated."""
        return self.n_arm_dof + (self.n_gripper_dof if self.gripper_actuated else 0)


_SPEC_RATES_FIRST = inspect.signature(lambda refresh_rate, control_rate, *, arm=MotorizedArm_ArmType.SO101_5DoF,
                                       gripper=MotorizedArm_GripperType.SO101_jaw_1DoF: None)  # fmt: skip
_SPEC_ARM_FIRST = inspect.signature(lambda arm, gripper, refresh_rate, control_rate: None)

SO101_SPEC = MotorizedArmSpec(refresh_rate=10, control_rate=10)
"""The simulated SO-101: the task envs' control step is 0.1 s, and each step sets one position
target and publishes one observation, so both rates are 10 Hz."""


# --- validation helpers ---------------------------------------------------------------------


def _check_array(name: str, value: object, rank: int, finite: bool) -> np.ndarray:
    """Check an np.float32 array of the given rank; no inf, and no NaN if ``finite``."""
    if not isinstance(value, np.ndarray):
        raise InputError(f"{name} must be an np.ndarray of float32, got {type(value).__name__}")
    if value.dtype != np.float32:
        raise InputError(f"{name} must have dtype float32, got {value.dtype}")
    if value.ndim != rank:
        raise InputError(f"{name} must have rank {rank}, got shape {value.shape}")
    if np.isinf(value).any() or (finite and np.isnan(value).any()):
        allowed = "finite" if finite else "finite or NaN (unmeasured)"
        raise InputError(f"{name} must be {allowed}, got {value}")
    return value


def _check_spec(spec: object) -> None:
    if not isinstance(spec, MotorizedArmSpec):
        raise InputError(f"spec must be a MotorizedArmSpec, got {spec!r}")


def _check_fraction(name: str, value: np.ndarray) -> None:
    if ((value < 0.0) | (value > 1.0)).any():
        raise InputError(f"{name} must be an open fraction in [0, 1] (0 = closed), got {value}")


def _check_dim(name: str, value: np.ndarray, axis: int, expected: int, what: str) -> None:
    if value.shape[axis] != expected:
        raise InputError(f"{name} must have {what} = {expected} entries on axis {axis}, got shape {value.shape}")


def _check_shared(names: tuple[str, ...], arrays: tuple[np.ndarray, ...], axis: int, what: str) -> None:
    for name, array in zip(names[1:], arrays[1:]):
        _check_dim(name, array, axis, arrays[0].shape[axis], f"{what} (as {names[0]})")


# --- containers -----------------------------------------------------------------------------

_JOINT_FIELDS = ("joint_angle_q", "joint_angle_vel_dq", "joint_torque", "joint_temperature")
_GRIPPER_FIELDS = ("gripper_pos", "gripper_vel", "gripper_torque", "gripper_temperature")


@dataclasses.dataclass(frozen=True, eq=False)
class MotorizedArm_Observation:
    """One observation tick of a single arm; unmeasured channels are NaN (see module docstring).

    Attributes:
        timestamp: monotonic capture time on the station clock, [s], finite.
        joint_angle_q, joint_angle_vel_dq, joint_torque, joint_temperature: (n_arm_dof,)
            float32 in rad, rad/s, N*m, degC.
        gripper_pos: (n_gripper_dof,) float32 open fraction in [0, 1]; 0 = closed.
        gripper_vel: (n_gripper_dof,) float32 opening velocity, [1/s] (open fraction per s).
        gripper_torque, gripper_temperature: (n_gripper_dof,) float32 in N*m, degC.
    """

    timestamp: float
    joint_angle_q: np.ndarray
    joint_angle_vel_dq: np.ndarray
    joint_torque: np.ndarray
    joint_temperature: np.ndarray
    gripper_pos: np.ndarray
    gripper_vel: np.ndarray
    gripper_torque: np.ndarray
    gripper_temperature: np.ndarray

    def __post_init__(self) -> None:
        ts = self.timestamp
        if isinstance(ts, bool) or not isinstance(ts, numbers.Real) or not np.isfinite(ts):
            raise InputError(f"timestamp must be a finite number of seconds, got {ts!r}")
        object.__setattr__(self, "timestamp", float(ts))
        for fields in (_JOINT_FIELDS, _GRIPPER_FIELDS):
            arrays = tuple(
                _check_array(name, getattr(self, name), rank=1, finite=False) for name in fields
            )
            _check_shared(fields, arrays, axis=0, what="dof")
        _check_fraction("gripper_pos", self.gripper_pos)

    def validate(self, spec: MotorizedArmSpec) -> None:
        """Re-check the values (arrays may have been edited in place since construction), bind
        n_arm_dof / n_gripper_dof to ``spec``; an actuated gripper must report its velocity.

        Raises:
            ValueError: naming the first invalid or mismatching field.
        """
        _check_spec(spec)
        self.__post_init__()
        _check_dim("joint_angle_q", self.joint_angle_q, 0, spec.n_arm_dof, "n_arm_dof")
        _check_dim("gripper_pos", self.gripper_pos, 0, spec.n_gripper_dof, "n_gripper_dof")
        if spec.gripper_actuated and np.isnan(self.gripper_vel).any():
            raise InputError(f"gripper_vel must be finite for the actuated gripper {spec.gripper.value!r}")


@dataclasses.dataclass(frozen=True, eq=False)
class MotorizedArm_JointPose:
    """One absolute joint configuration of a single arm.

    Attributes:
        joint_angle_q: (n_arm_dof,) float32 absolute joint positions, [rad], finite.
        gripper_pos: (n_gripper_dof,) float32 open fraction in [0, 1]; 0 = closed.
    """

    joint_angle_q: np.ndarray
    gripper_pos: np.ndarray

    def __post_init__(self) -> None:
        _check_array("joint_angle_q", self.joint_angle_q, rank=1, finite=True)
        _check_array("gripper_pos", self.gripper_pos, rank=1, finite=True)
        _check_fraction("gripper_pos", self.gripper_pos)

    def validate(self, spec: MotorizedArmSpec) -> None:
        """Re-check the values (see :meth:`MotorizedArm_Observation.validate`) and bind the dims to
        ``spec``; ``ValueError`` naming the invalid or mismatching field."""
        _check_spec(spec)
        self.__post_init__()
        _check_dim("joint_angle_q", self.joint_angle_q, 0, spec.n_arm_dof, "n_arm_dof")
        _check_dim("gripper_pos", self.gripper_pos, 0, spec.n_gripper_dof, "n_gripper_dof")


@dataclasses.dataclass(frozen=True, eq=False)
class MotorizedArm_ActionChunk:
    """A horizon of absolute joint position targets for a single arm.

    Row i is the target i / rate seconds after the chunk's reference timestamp (rate and
    timestamp are carried by the enclosing station chunk; see ``interpolate_chunk``).

    Attributes:
        joint_angle_q: (horizon, n_arm_dof) float32 absolute joint targets, [rad], finite.
        gripper_pos: (horizon, n_gripper_dof) float32 open fractions in [0, 1]; 0 = closed.
    """

    joint_angle_q: np.ndarray
    gripper_pos: np.ndarray

    def __post_init__(self) -> None:
        q = _check_array("joint_angle_q", self.joint_angle_q, rank=2, finite=True)
        g = _check_array("gripper_pos", self.gripper_pos, rank=2, finite=True)
        if q.shape[0] < 1:
            raise InputError(f"joint_angle_q must have horizon >= 1 rows, got shape {q.shape}")
        _check_shared(("joint_angle_q", "gripper_pos"), (q, g), axis=0, what="horizon")
        _check_fraction("gripper_pos", g)

    @property
    def horizon(self) -> int:
        return self.joint_angle_q.shape[0]

    def __len__(self) -> int:
        return self.horizon

    def __getitem__(self, index: int) -> MotorizedArm_JointPose:
        """Row ``index`` as a joint pose (views, not copies); negative indices count from the end.

        Raises:
            IndexError: if ``index`` is outside [-horizon, horizon).
            TypeError: if ``index`` is not an integer.
        """
        if isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise TypeError(f"chunk index must be an int, got {type(index).__name__}")
        if not -self.horizon <= index < self.horizon:
            raise IndexError(f"chunk index {index} out of range for horizon {self.horizon}")
        return MotorizedArm_JointPose(self.joint_angle_q[index], self.gripper_pos[index])

    def validate(self, spec: MotorizedArmSpec, horizon: int) -> None:
        """Re-check the values (see :meth:`MotorizedArm_Observation.validate`) and bind the dims to
        ``spec`` and ``horizon``; ``ValueError`` naming the invalid or mismatching field."""
        _check_spec(spec)
        self.__post_init__()
        _check_dim("joint_angle_q", self.joint_angle_q, 0, horizon, "horizon")
        _check_dim("joint_angle_q", self.joint_angle_q, 1, spec.n_arm_dof, "n_arm_dof")
        _check_dim("gripper_pos", self.gripper_pos, 1, spec.n_gripper_dof, "n_gripper_dof")


# --- SO-101 gripper mapping -----------------------------------------------------------------


gripper_open_fraction_to_ctrl = gripper_mapping.open_fraction_to_ctrl  # open fraction in [0, 1] -> gripper ctrl [rad]
# gripper ctrl or jaw angle [rad] -> open fraction, clipped
gripper_ctrl_to_open_fraction = gripper_mapping.ctrl_to_open_fraction


# --- chunk interpolation --------------------------------------------------------------------

_TICK_TOLERANCE = 1e-3
"""A time within this fraction of a control period before a tick counts as that tick."""


def interpolate_chunk(
    targets: ArrayLike, chunk_rate_hz: ArrayLike, control_rate_hz: ArrayLike, t: ArrayLike
) -> Array:
    """Target sent to the motors at time ``t`` while a chunk is being executed.

    Scheme: row i of ``targets`` is the target at i / chunk_rate_hz seconds after the chunk's
    reference timestamp. Targets reach the motors only at control ticks k / control_rate_hz,
    so ``t`` is first floored to its control tick (zero-order hold between ticks; a ``t``
    within 1e-3 of a period before a tick counts as that tick, absorbing rounding of
    ``k / control_rate_hz``). At the tick time ``tau`` the target is the linear interpolation
    between the two rows bracketing ``tau * chunk_rate_hz``; before 0 it holds row 0, after
    (horizon - 1) / chunk_rate_hz it holds the last row. Rows are weighted by the hat function
    ``max(0, 1 - |s - i|)`` and summed elementwise (no matmul, so no reduced-precision dot on
    accelerators); a chunk with one row is held throughout.

    Pure and jit/vmap-safe; numpy inputs work too, so the CPU station and the batched JAX
    path share this one implementation.

    Args:
        targets: (..., horizon, dof) absolute targets (e.g. joint angles [rad], open fractions); horizon >= 1.
        chunk_rate_hz: rate of the chunk's rows, [Hz], finite > 0 (ValueError otherwise, when not traced); broadcasts
            with ``t``.
        control_rate_hz: rate at which targets are sent, [Hz], finite > 0 (likewise); broadcasts with ``t``.
        t: (...) seconds since the chunk's reference timestamp; broadcasts with targets[..., 0, 0].

    Returns:
        (..., dof) interpolated targets, in the dtype of ``targets``.
    """
    for name, rate in (("chunk_rate_hz", chunk_rate_hz), ("control_rate_hz", control_rate_hz)):
        if not checks.is_traced(rate) and not np.all(np.isfinite(rate) & (np.asarray(rate) > 0)):
            raise InputError(f"{name} must be a finite rate > 0 Hz, got {rate!r}")
    tick = jnp.floor(jnp.asarray(t) * control_rate_hz + _TICK_TOLERANCE)
    return sample_chunk(targets, tick * chunk_rate_hz / control_rate_hz)


def sample_chunk(targets: ArrayLike, row: ArrayLike) -> Array:
    """Targets at fractional row ``row``: linear between the two bracketing rows, row 0 before 0,
    the last row after ``horizon - 1`` (the hat-function weighting of :func:`interpolate_chunk`).

    Args:
        targets: (..., horizon, dof) absolute targets.
        row: (...) fractional row index, e.g. seconds after the reference timestamp times the
            chunk rate; broadcasts with targets[..., 0, 0].

    Returns:
        (..., dof) targets, in the dtype of ``targets``.
    """
    targets = jnp.asarray(targets)
    horizon = targets.shape[-2] if targets.ndim >= 2 else 0
    if horizon < 1:
        raise InputError(f"targets must have shape (..., horizon >= 1, dof): a chunk needs a row, got {targets.shape}")
    row = jnp.clip(jnp.asarray(row), 0.0, horizon - 1)
    weights = jnp.maximum(0.0, 1.0 - jnp.abs(row[..., None] - jnp.arange(horizon)))
    return jnp.sum(weights.astype(targets.dtype)[..., None] * targets, axis=-2)
