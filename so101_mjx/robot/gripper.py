"""The SO-101 gripper mappings, once for every consumer: the jaw command / open fraction in [0, 1]
(0 closed) to the gripper ctrl in radians and back, and the observation's ``gripper_pose`` in [-1, 1].

Each takes numpy or JAX arrays (any leading axes) and answers in kind: numpy in, numpy out (float64
stays float64); JAX in (jit/vmap-safe), JAX out. The formulas are lerobot_env_so101 0.4.0's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike


def _namespace(*xs: ArrayLike):
    """``jax.numpy`` when any input is a JAX array (or tracer), else ``numpy`` (float64 stays float64)."""
    return jnp if any(isinstance(x, jax.Array) for x in xs) else np


def open_fraction_to_ctrl(frac: ArrayLike, ctrlrange: ArrayLike) -> Array:
    """Open fraction / jaw command (...,) -> gripper ctrl (...,) [rad]: ``lo + clip(frac, 0, 1)·(hi − lo)``.

    ``ctrlrange`` is (..., 2) = (lo, hi); the jaw closes at ``lo``. The reference's formula.
    numpy in, numpy out; JAX in (jit/vmap-safe), JAX out.
    """
    xp = _namespace(frac, ctrlrange)
    r = xp.asarray(ctrlrange)
    lo, hi = r[..., 0], r[..., 1]
    return lo + xp.clip(frac, 0.0, 1.0) * (hi - lo)


def ctrl_to_open_fraction(ctrl: ArrayLike, ctrlrange: ArrayLike, clip: bool = True) -> Array:
    """Gripper ctrl or jaw joint angle (...,) [rad] -> open fraction ``(ctrl − lo) / (hi − lo)``,
    clipped to [0, 1] unless ``clip=False`` (the reference's ``ctrl_to_normalized`` does not clip)."""
    xp = _namespace(ctrl, ctrlrange)
    r = xp.asarray(ctrlrange)
    lo, hi = r[..., 0], r[..., 1]
    frac = (xp.asarray(ctrl) - lo) / (hi - lo)
    return xp.clip(frac, 0.0, 1.0) if clip else frac


def ctrl_to_gripper_pose(ctrl: ArrayLike, ctrlrange: ArrayLike) -> Array:
    """Gripper ctrl -> the observation's ``gripper_pose`` in [-1, 1] (-1 closed), not clipped."""
    return 2 * ctrl_to_open_fraction(ctrl, ctrlrange, clip=False) - 1
