"""Compatibility shims: the newest JAX for brax, and one MJX precision fix.

- brax 0.14.2's PPO calls ``jax.device_put_replicated``, which JAX 0.10 removed (``ppo.train``
  then dies with AttributeError). :func:`install` supplies a drop-in built on ``jax.device_put``
  of the stacked tree onto a ``NamedSharding`` over a 1-D device mesh whose axis is named ``'i'``
  (the replacement JAX's pmap migration guide describes). It does nothing when the attribute
  exists, so older JAX keeps its own implementation.
- mujoco-mjx 3.17.0 integrates free-joint (and ball-joint) orientations with a ``math.norm``
  that treats any angular velocity whose components are all within 1e-8 rad/s of zero
  (``jnp.allclose`` default tolerance) as exactly zero: a resting block's orientation is then
  never integrated, while MuJoCo C integrates it. The ~1e-12 rad orientation drift this leaves
  is amplified by the stiff floor contact into ~1e-8 differences of qvel within one control
  step, breaking the mjx-vs-c parity contract. :func:`install` replaces
  ``mujoco.mjx._src.math.quat_integrate`` (looked up at call time by MJX's integrator) with
  :func:`quat_integrate`, MuJoCo C's ``mju_quatIntegrate`` (zero rotation only below
  ``mjMINVAL`` = 1e-15) written gradient-safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from mujoco.mjx._src import math as mjx_math

MJMINVAL = 1e-15  # MuJoCo C's mjMINVAL: below it, mju_normalize3 treats a vector as zero
MJX_QUAT_INTEGRATE = mjx_math.quat_integrate  # mujoco-mjx's own, kept for comparison


def device_put_replicated(x: Any, devices: Sequence[jax.Device]) -> Any:
    """Stack ``len(devices)`` copies of every leaf of ``x`` along a new leading axis, one per device."""
    mesh = jax.sharding.Mesh(np.asarray(devices), ("i",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("i"))
    stacked = jax.tree.map(lambda leaf: jnp.stack([jnp.asarray(leaf)] * len(devices)), x)
    return jax.device_put(stacked, sharding)


def quat_integrate(quat: Array, vel: Array, dt: Array) -> Array:
    """Orientation ``quat`` (4,) advanced by angular velocity ``vel`` (3,) rad/s for ``dt`` s.

    MuJoCo C's ``mju_quatIntegrate``: rotate by ``dt·|vel|`` about ``vel/|vel|`` (no rotation when
    ``|vel|`` < 1e-15), then renormalize. Safe to differentiate at ``vel = 0``.
    """
    norm_sq = jnp.sum(vel * vel)
    moving = norm_sq >= MJMINVAL**2
    norm = jnp.sqrt(jnp.where(moving, norm_sq, 1.0))
    axis = jnp.where(moving, vel / norm, jnp.zeros_like(vel))
    rotation = mjx_math.axis_angle_to_quat(axis, jnp.where(moving, dt * norm, 0.0))
    return mjx_math.normalize(mjx_math.quat_mul(quat, rotation))


def install() -> bool:
    """Install both shims (see the module docstring).

    Returns True if ``jax.device_put_replicated`` was missing and is now ours; the MJX
    orientation fix is installed on every call (idempotent).
    """
    mjx_math.quat_integrate = quat_integrate
    if hasattr(jax, "device_put_replicated"):
        return False
    jax.device_put_replicated = device_put_replicated
    return True
