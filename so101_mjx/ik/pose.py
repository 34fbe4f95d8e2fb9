"""Poses of the solver interface (JAX, any leading batch axes): quaternions ``(x, y, z, w)``.

The EmbodiChain solver interface puts the scalar last; these helpers turn its quaternions into
:mod:`so101_mjx.robot.rotations`' ``(w, x, y, z)`` and back (quaternions come out with ``w >= 0``).
Rotation errors and angles between rotation matrices are ``rotations.rotation_error`` /
``rotations.rotation_angle``.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import Array

from so101_mjx.robot import rotations as R


def _xyzw(wxyz: Array) -> Array:
    return jnp.concatenate([wxyz[..., 1:], wxyz[..., :1]], -1)


def matrix_to_quat(rot: Array) -> Array:
    """Unit quaternions (..., 4) ``xyzw`` with ``w >= 0`` of rotation matrices (..., 3, 3)."""
    return _xyzw(R.mat_to_quat(rot))


def quat_to_matrix(quat: Array) -> Array:
    """Rotation matrices (..., 3, 3) of quaternions (..., 4) ``xyzw`` (normalized first)."""
    # Not rotations.quat_to_mat (MuJoCo's w² + x² - y² - z² diagonal): this 1 - 2(y² + z²) form rounds
    # differently, and the differential solver's commanded rotations keep their bits.
    q = jnp.asarray(quat)
    x, y, z, w = jnp.moveaxis(q / jnp.linalg.norm(q, axis=-1, keepdims=True), -1, 0)
    return jnp.stack([
        jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
        jnp.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
        jnp.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
    ], -2)


def apply_delta_pose(pos: Array, quat: Array, delta: Array) -> tuple[Array, Array]:
    """Poses displaced by ``delta`` (..., 6): ``pos + delta[:3]`` and the world-frame rotation vector
    ``delta[3:]`` applied before ``quat`` (..., 4) ``xyzw``; returns positions (..., 3), quaternions (..., 4)."""
    wxyz = jnp.concatenate([quat[..., 3:], quat[..., :3]], -1)
    return pos + delta[..., :3], _xyzw(R.quat_mul(R.rotvec_to_quat(delta[..., 3:]), wxyz))


def pos_quat(pose: Array) -> Array:
    """``[x, y, z, qx, qy, qz, qw]`` (..., 7) of (..., 4, 4) poses."""
    return jnp.concatenate([pose[..., :3, 3], matrix_to_quat(pose[..., :3, :3])], -1)
