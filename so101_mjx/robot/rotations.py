"""Rotation maths of the package, one formula per map, over any leading batch axes.

Conventions are MuJoCo's:

- quaternions are ``(w, x, y, z)``, scalar first, unit norm (inputs are not normalized unless a
  function says so); :func:`mat_to_quat` returns the one with ``w >= 0``;
- ``quat_mul(a, b)`` is the Hamilton product ``a ⊗ b``: rotation ``b`` first, then ``a``;
- a rotation matrix (..., 3, 3) holds the frame's axes as columns (``world = R @ local``);
- a rotation vector (..., 3) is axis × angle, radians, angle in [0, π];
- roll-pitch-yaw are URDF's fixed axes: ``R = Rz(yaw) Ry(pitch) Rx(roll)``.

The JAX functions are jit/vmap/grad-safe and keep the inputs' dtype (float32 or float64); their
formulas are MuJoCo's where MuJoCo has one (``mju_quat2Mat``, ``mju_mulQuat``, the operand order
of ``mju_mat2Quat``'s diagonal terms). The ``*_np`` functions are host code: float64 NumPy
through MuJoCo C itself (``mju_quat2Mat``, ``mju_mat2Quat``, ``mju_mulQuat``), looped over the
leading axes. :func:`rpy_to_mat` / :func:`mat_to_rpy` are scalar host functions (the URDF writer's).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from so101_mjx.errors import InputError

_SMALL = 1e-12  # below this |sin(θ/2)| (or θ) a rotation vector is taken to first order
_RPY_TOL = 1e-14  # the roll-pitch-yaw of mat_to_rpy must rebuild its rotation to this


def _quat_to_mat(w: Array, x: Array, y: Array, z: Array) -> Array:
    row0 = jnp.stack([w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)], -1)
    row1 = jnp.stack([2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)], -1)
    row2 = jnp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z], -1)
    return jnp.stack([row0, row1, row2], -2)


def quat_to_mat(quat: ArrayLike) -> Array:
    """Rotation matrices (..., 3, 3) of unit quaternions (..., 4) ``wxyz`` (``mju_quat2Mat``'s formula)."""
    return _quat_to_mat(*jnp.moveaxis(jnp.asarray(quat), -1, 0))


def mat_to_quat(rot: ArrayLike) -> Array:
    """Unit quaternions (..., 4) ``wxyz`` with ``w >= 0`` of rotation matrices (..., 3, 3) (Shepperd's method)."""
    m = jnp.asarray(rot)
    m00, m01, m02 = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    m10, m11, m12 = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    m20, m21, m22 = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    # Four scaled candidates (w, x, y, z); the one with the largest diagonal term is well conditioned.
    cands = jnp.stack([
        jnp.stack([1 + m00 + m11 + m22, m21 - m12, m02 - m20, m10 - m01], -1),
        jnp.stack([m21 - m12, 1 + m00 - m11 - m22, m01 + m10, m02 + m20], -1),
        jnp.stack([m02 - m20, m01 + m10, 1 - m00 + m11 - m22, m12 + m21], -1),
        jnp.stack([m10 - m01, m02 + m20, m12 + m21, 1 - m00 - m11 + m22], -1),
    ], -2)  # fmt: skip
    best = jnp.argmax(jnp.stack([m00 + m11 + m22, m00, m11, m22], -1), -1)
    quat = jnp.take_along_axis(cands, best[..., None, None], -2)[..., 0, :]
    quat = quat / jnp.linalg.norm(quat, axis=-1, keepdims=True)
    return jnp.where(quat[..., :1] < 0, -quat, quat)


def quat_mul(a: ArrayLike, b: ArrayLike) -> Array:
    """Hamilton products ``a ⊗ b`` (..., 4) of quaternions ``wxyz`` (``mju_mulQuat``'s formula)."""
    aw, ax, ay, az = jnp.moveaxis(jnp.asarray(a), -1, 0)
    bw, bx, by, bz = jnp.moveaxis(jnp.asarray(b), -1, 0)
    return jnp.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                      aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], -1)


def axis_angle_to_quat(axis: ArrayLike, angle: ArrayLike) -> Array:
    """Unit quaternions (..., 4) ``wxyz`` of ``angle`` (...) radians about unit axes (..., 3) (broadcast)."""
    half = 0.5 * jnp.asarray(angle)
    xyz = jnp.asarray(axis) * jnp.sin(half)[..., None]
    return jnp.concatenate([jnp.broadcast_to(jnp.cos(half)[..., None], (*xyz.shape[:-1], 1)), xyz], -1)


def axis_angle_to_mat(axis: ArrayLike, angle: ArrayLike) -> Array:
    """Rotation matrices (..., 3, 3) of ``angle`` (...) radians about unit axes (..., 3): MuJoCo's hinge
    rotation, ``quat_to_mat(axis_angle_to_quat(axis, angle))`` without building the quaternion array
    (XLA fuses, and so rounds, the same as the kinematics always did)."""
    axis, half = jnp.asarray(axis), 0.5 * jnp.asarray(angle)
    w, s = jnp.cos(half), jnp.sin(half)
    return _quat_to_mat(w, axis[..., 0] * s, axis[..., 1] * s, axis[..., 2] * s)


def quat_to_rotvec(quat: ArrayLike) -> Array:
    """Rotation vectors (..., 3) (angle in [0, π]) of unit quaternions (..., 4) ``wxyz``: the log map."""
    q = jnp.asarray(quat)
    q = jnp.where(q[..., :1] < 0, -q, q)
    w, v = q[..., 0], q[..., 1:]
    s = jnp.linalg.norm(v, axis=-1)
    safe = jnp.where(s > _SMALL, s, 1.0)
    scale = jnp.where(s > _SMALL, 2 * jnp.arctan2(s, w) / safe, 2.0)
    return v * scale[..., None]


def rotvec_to_quat(rotvec: ArrayLike) -> Array:
    """Unit quaternions (..., 4) ``wxyz`` of rotation vectors (..., 3) radians: the exp map."""
    rotvec = jnp.asarray(rotvec)
    angle = jnp.linalg.norm(rotvec, axis=-1, keepdims=True)
    safe = jnp.where(angle > _SMALL, angle, 1.0)
    axis_scale = jnp.where(angle > _SMALL, jnp.sin(0.5 * angle) / safe, 0.5)
    return jnp.concatenate([jnp.cos(0.5 * angle), rotvec * axis_scale], -1)


def rotation_error(rot_current: Array, rot_target: Array) -> Array:
    """World-frame rotation vectors (..., 3) taking ``rot_current`` onto ``rot_target`` (..., 3, 3):
    ``log(R_target @ R_currentᵀ)``, matching the angular rows of the geometric Jacobian."""
    return quat_to_rotvec(mat_to_quat(rot_target @ jnp.swapaxes(rot_current, -1, -2)))


def rotation_angle(rot_a: Array, rot_b: Array) -> Array:
    """Angles (...) in [0, π] radians between rotations (..., 3, 3)."""
    return jnp.linalg.norm(rotation_error(rot_a, rot_b), axis=-1)


def skew(v: ArrayLike) -> Array:
    """Cross-product matrices (..., 3, 3) of vectors (..., 3): ``skew(v) @ x == v × x``."""
    v = jnp.asarray(v)
    z = jnp.zeros_like(v[..., 0])
    return jnp.stack(
        [jnp.stack([z, -v[..., 2], v[..., 1]], -1), jnp.stack([v[..., 2], z, -v[..., 0]], -1),
         jnp.stack([-v[..., 1], v[..., 0], z], -1)], -2)  # fmt: skip


def rotate_about(axis: ArrayLike, angle: ArrayLike, v: Array) -> Array:
    """Vectors ``v`` (..., 3) rotated by ``angle`` (...) radians about the unit ``axis`` (3,) (Rodrigues)."""
    k = jnp.asarray(axis, v.dtype)
    c, s = jnp.cos(angle)[..., None], jnp.sin(angle)[..., None]
    return v * c + jnp.cross(k, v) * s + k * jnp.sum(k * v, -1, keepdims=True) * (1 - c)


def _safe_norm(x: Array) -> Array:
    """Euclidean norm over the last axis whose gradient is zero (not NaN) at x = 0."""
    sq = jnp.sum(x * x, axis=-1)
    nonzero = sq > 0
    return jnp.where(nonzero, jnp.sqrt(jnp.where(nonzero, sq, 1)), 0)


def angle_between(a: Array, b: Array) -> Array:
    """Angles (...) in [0, π] radians between unit vectors (..., 3): ``atan2(|a × b|, a · b)`` (its
    gradient is NaN at ``a ∥ b``: a value for thresholds; :func:`rotvec_between` is gradient-safe)."""
    return jnp.arctan2(jnp.linalg.norm(jnp.cross(a, b), axis=-1), jnp.sum(a * b, -1))


def signed_angle(a: Array, b: Array, axis: Array) -> Array:
    """Angles (...) in (-π, π] radians turning ``a`` onto ``b`` (..., 3) about ``axis`` (..., 3),
    for ``a``, ``b`` normal to the unit ``axis``: ``atan2((a × b) · axis, a · b)``."""
    return jnp.arctan2(jnp.sum(jnp.cross(a, b) * axis, -1), jnp.sum(a * b, -1))


def rotvec_between(a: Array, b: Array, eps: float) -> Array:
    """Rotation vectors (..., 3) of the shortest rotation taking unit vectors ``a`` onto ``b`` (..., 3):
    ``a × b`` scaled to the angle (stays proportional to it past 90°); ``a × b`` itself while
    ``|a × b| <= eps`` (first order). Gradient-safe at ``a ∥ b``."""
    axis = jnp.cross(a, b)
    sin = _safe_norm(axis)
    turned = sin > eps
    angle = jnp.arctan2(sin, jnp.sum(a * b, -1))
    return axis * jnp.where(turned, angle / jnp.where(turned, sin, 1), 1)[..., None]


def quat_to_mat_np(quat: ArrayLike) -> np.ndarray:
    """Rotation matrices (..., 3, 3) float64 of quaternions (..., 4) ``wxyz``, by MuJoCo C's ``mju_quat2Mat``."""
    q = np.asarray(quat, np.float64)
    out = np.empty((*q.shape[:-1], 9))
    for i in np.ndindex(q.shape[:-1]):
        mujoco.mju_quat2Mat(out[i], q[i])
    return out.reshape(*q.shape[:-1], 3, 3)


def mat_to_quat_np(rot: ArrayLike) -> np.ndarray:
    """Unit quaternions (..., 4) float64 ``wxyz`` with ``w >= 0`` of rotation matrices (..., 3, 3),
    by MuJoCo C's ``mju_mat2Quat``."""
    m = np.asarray(rot, np.float64)
    out = np.empty((*m.shape[:-2], 4))
    for i in np.ndindex(m.shape[:-2]):
        mujoco.mju_mat2Quat(out[i], m[i].reshape(9))
    return np.where(out[..., :1] < 0, -out, out)


def quat_mul_np(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Hamilton products ``a ⊗ b`` (..., 4) float64 of quaternions ``wxyz``, by MuJoCo C's ``mju_mulQuat``."""
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    out = np.empty(a.shape)
    for i in np.ndindex(a.shape[:-1]):
        mujoco.mju_mulQuat(out[i], a[i], b[i])
    return out


def rpy_to_mat(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """Rotation matrix (3, 3) of URDF roll-pitch-yaw (radians): ``Rz(yaw) Ry(pitch) Rx(roll)``."""
    cr, sr, cp, sp = math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch)
    cy, sy = math.cos(yaw), math.sin(yaw)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])  # fmt: skip


def mat_to_rpy(rot: np.ndarray) -> tuple[float, float, float]:
    """URDF roll-pitch-yaw (radians) of a rotation matrix (3, 3), to round-off also at pitch ±π/2.

    Two candidates (the general one, and yaw = 0 for the gimbal lock); the one rebuilding ``rot``
    better is returned. InputError if neither rebuilds it to 1e-14 (``rot`` is not a rotation).
    """
    pitch = math.atan2(-rot[2, 0], math.hypot(rot[0, 0], rot[1, 0]))
    candidates = [(math.atan2(rot[2, 1], rot[2, 2]), pitch, math.atan2(rot[1, 0], rot[0, 0])),
                  (math.atan2(-rot[1, 2], rot[1, 1]), pitch, 0.0)]
    errors = [np.max(np.abs(rpy_to_mat(*c) - rot)) for c in candidates]
    best = int(np.argmin(errors))
    if errors[best] > _RPY_TOL:
        raise InputError(f"not a rotation matrix (rebuilt to {errors[best]:.1e}): {np.asarray(rot).tolist()}")
    return candidates[best]
