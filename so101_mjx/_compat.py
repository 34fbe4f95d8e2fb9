"""Compatibility shims: one MJX precision fix, and quiet MuJoCo output. Nothing here patches JAX
(the PPO loop replicates its state with its own :func:`so101_mjx.training.ppo_loop.replicate`).

- mujoco-mjx 3.17.0 integrates free-joint (and ball-joint) orientations with a ``math.norm``
  that treats any angular velocity whose components are all within 1e-8 rad/s of zero
  (``jnp.allclose`` default tolerance) as exactly zero: a resting block's orientation is then
  never integrated, while MuJoCo C integrates it. The ~1e-12 rad orientation drift this leaves
  is amplified by the stiff floor contact into ~1e-8 differences of qvel within one control
  step, breaking the mjx-vs-c parity contract. :func:`install_mjx` (run when an MJX backend is
  built) replaces ``mujoco.mjx._src.math.quat_integrate`` (looked up at call time by MJX's integrator) with
  :func:`quat_integrate`, MuJoCo C's ``mju_quatIntegrate`` (zero rotation only below
  ``mjMINVAL`` = 1e-15) written gradient-safe.
- mujoco-mjx 3.17.0 prints ``Failed to import warp: ...`` and ``Failed to import mujoco_warp: ...``
  on stdout whenever ``mujoco.mjx`` is imported without Warp. The library imports this module
  before ``mujoco.mjx`` (:mod:`so101_mjx.sim.physics` and ``so101-mjx info`` do; ``import
  so101_mjx`` imports neither), and it captures exactly those lines (any other output of the
  import passes through) into :data:`WARP_IMPORT_ERRORS`;
  :func:`install_mjx` makes MJX's check before ``impl="warp"`` raise a RuntimeError quoting them, so
  they are shown when the Warp implementation is asked for.
- MuJoCo C writes its warnings (``Nan, Inf or huge value in QACC ...``) to stdout and to
  ``MUJOCO_LOG.TXT`` in the working directory unless a user warning handler is set. :func:`install`
  sets one (unless another is already set) that logs them on the ``so101_mjx.mujoco`` logger at
  WARNING level (stderr when logging is unconfigured). The bindings' trampoline acquires the GIL, so
  warnings from ``mj_step`` on backend ``c``'s worker threads are logged the same way.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys

import jax.numpy as jnp
import mujoco
from jax import Array

WARP_IMPORT_PREFIXES = ("Failed to import warp:", "Failed to import mujoco_warp:")
LOGGER = logging.getLogger("so101_mjx.mujoco")


def _import_mjx_quietly() -> list[str]:
    """Import ``mujoco.mjx``; return the Warp import failures it printed, pass its other stdout through."""
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        import mujoco.mjx  # noqa: F401
    lines = captured.getvalue().splitlines(keepends=True)
    sys.stdout.write("".join(line for line in lines if not line.startswith(WARP_IMPORT_PREFIXES)))
    return [line.strip() for line in lines if line.startswith(WARP_IMPORT_PREFIXES)]


WARP_IMPORT_ERRORS = _import_mjx_quietly()  # empty when Warp imported, or when mjx was imported before us

from mujoco.mjx._src import io as mjx_io, math as mjx_math  # noqa: E402

MJX_CHECK_WARP_INSTALLED = mjx_io._check_warp_installed  # mujoco-mjx's own
MJMINVAL = 1e-15  # MuJoCo C's mjMINVAL: below it, mju_normalize3 treats a vector as zero
MJX_QUAT_INTEGRATE = mjx_math.quat_integrate  # mujoco-mjx's own, kept for comparison


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


def check_warp_installed() -> None:
    """MJX's check before ``impl="warp"``; RuntimeError quoting :data:`WARP_IMPORT_ERRORS` if there are any."""
    if WARP_IMPORT_ERRORS:
        raise RuntimeError(f"the Warp implementation of MJX is unavailable: {'; '.join(WARP_IMPORT_ERRORS)}")
    MJX_CHECK_WARP_INSTALLED()


def log_mujoco_warning(message: str) -> None:
    """MuJoCo's user warning handler: ``message`` to the ``so101_mjx.mujoco`` logger."""
    LOGGER.warning("%s", message)


def install_mjx() -> None:
    """The MJX fixes (quaternion integration, the Warp check); done when an MJX backend is built (idempotent)."""
    mjx_math.quat_integrate = quat_integrate
    mjx_io._check_warp_installed = check_warp_installed


def install() -> None:
    """Install the MuJoCo warning handler (done when :mod:`so101_mjx.sim.physics` is imported;
    idempotent; another warning handler is kept). The MJX fixes are :func:`install_mjx`'s."""
    if mujoco.get_mju_user_warning() is None:
        mujoco.set_mju_user_warning(log_mujoco_warning)
