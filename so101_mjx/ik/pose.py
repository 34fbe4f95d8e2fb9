"""Rigid-pose helpers of the differential and neural solvers (JAX, any leading batch axes).

Quaternions are ``(x, y, z, w)`` (the solver interface's convention, scalar last) and come out
with ``w >= 0``. Rotation errors are rotation vectors (axis × angle, radians) in the world frame:
``rotvec(R_target @ R_currentᵀ)``, the rotation that takes the current frame onto the target's,
matching the angular rows of the geometric Jacobian.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import Array

_SMALL = 1e-12  # below this |sin(θ/2)| a rotation vector is 2·(x, y, z) (first order)


def matrix_to_quat(rot: Array) -> Array:
    """Unit quaternions (..., 4) ``xyzw`` with ``w >= 0`` of rotation matrices (..., 3, 3) (Shepperd's method)."""
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
    ], -2)
    best = jnp.argmax(jnp.stack([m00 + m11 + m22, m00, m11, m22], -1), -1)
    wxyz = jnp.take_along_axis(cands, best[..., None, None], -2)[..., 0, :]
    wxyz = wxyz / jnp.linalg.norm(wxyz, axis=-1, keepdims=True)
    wxyz = jnp.where(wxyz[..., :1] < 0, -wxyz, wxyz)
    return jnp.concatenate([wxyz[..., 1:], wxyz[..., :1]], -1)


def quat_to_matrix(quat: Array) -> Array:
    """Rotation matrices (..., 3, 3) of quaternions (..., 4) ``xyzw`` (normalized first)."""
    q = jnp.asarray(quat)
    x, y, z, w = jnp.moveaxis(q / jnp.linalg.norm(q, axis=-1, keepdims=True), -1, 0)
    return jnp.stack([
        jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
        jnp.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
        jnp.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
    ], -2)


def quat_to_rotvec(quat: Array) -> Array:
    """Rotation vectors (..., 3) (angle in [0, π]) of unit quaternions (..., 4) ``xyzw``."""
    q = jnp.where(quat[..., 3:] < 0, -quat, quat)
    v, w = q[..., :3], q[..., 3]
    s = jnp.linalg.norm(v, axis=-1)
    safe = jnp.where(s > _SMALL, s, 1.0)
    scale = jnp.where(s > _SMALL, 2 * jnp.arctan2(s, w) / safe, 2.0)
    return v * scale[..., None]


def rotvec_to_quat(rotvec: Array) -> Array:
    """Unit quaternions (..., 4) ``xyzw`` of rotation vectors (..., 3) radians."""
    angle = jnp.linalg.norm(rotvec, axis=-1, keepdims=True)
    safe = jnp.where(angle > _SMALL, angle, 1.0)
    axis_scale = jnp.where(angle > _SMALL, jnp.sin(0.5 * angle) / safe, 0.5)
    return jnp.concatenate([rotvec * axis_scale, jnp.cos(0.5 * angle)], -1)


def quat_mul(a: Array, b: Array) -> Array:
    """Hamilton products ``a ⊗ b`` (..., 4) of quaternions ``xyzw`` (rotation ``b`` first, then ``a``)."""
    ax, ay, az, aw = jnp.moveaxis(a, -1, 0)
    bx, by, bz, bw = jnp.moveaxis(b, -1, 0)
    return jnp.stack([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                      aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz], -1)


def rotation_error(rot_current: Array, rot_target: Array) -> Array:
    """World-frame rotation vectors (..., 3) taking ``rot_current`` onto ``rot_target`` (..., 3, 3)."""
    return quat_to_rotvec(matrix_to_quat(rot_target @ jnp.swapaxes(rot_current, -1, -2)))


def rotation_angle(rot_a: Array, rot_b: Array) -> Array:
    """Angles (...) in [0, π] radians between rotations (..., 3, 3)."""
    return jnp.linalg.norm(rotation_error(rot_a, rot_b), axis=-1)


def apply_delta_pose(pos: Array, quat: Array, delta: Array) -> tuple[Array, Array]:
    """Poses displaced by ``delta`` (..., 6): ``pos + delta[:3]`` and the world-frame rotation vector
    ``delta[3:]`` applied before ``quat`` (..., 4) ``xyzw``; returns positions (..., 3), quaternions (..., 4)."""
    return pos + delta[..., :3], quat_mul(rotvec_to_quat(delta[..., 3:]), quat)


def pos_quat(pose: Array) -> Array:
    """``[x, y, z, qx, qy, qz, qw]`` (..., 7) of (..., 4, 4) poses."""
    return jnp.concatenate([pose[..., :3, 3], matrix_to_quat(pose[..., :3, :3])], -1)
