"""The jitted kernels of :class:`~so101_mjx.ik.solvers.solver.SO101Solver`: TCP FK and Jacobian, and the
multi-start damped least-squares solve with database seeds and candidate selection.

A solve step is ``q ← q + dt · (clip(q + dq) − q)`` with ``dq`` the damped least-squares step of
:func:`so101_mjx.ik.iterative.ik_step` (``dt = 1``: exactly :func:`~so101_mjx.ik.iterative.levenberg_marquardt`);
the step stays within the limits (a convex combination of two points inside them) and a converged
problem stays frozen. Database seeds: the entries nearest each target; with ``k_max``, the ``k_max``
nearest re-ranked by the predicted correction of one least-squares step
(:func:`so101_mjx.ik.solvers.seed_sampler.correction`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from scipy.stats import qmc

from so101_mjx.errors import InputError
from so101_mjx.ik import iterative as ik
from so101_mjx.ik.solvers.seed_sampler import correction, nearest
from so101_mjx.robot import rotations as R
from so101_mjx.robot.kinematics import Kinematics

SELECTIONS = ("nearest", "manipulability")
JAC_TYPES = ("full", "trans", "rot")
_POSE_ATOL = 1e-6  # SE(3) check: |RᵀR − I| and last-row tolerance (float64; 100·eps in float32)
# per database entry (float64, XLA's buffers): its FK; one target's distances, top-k
DB_ENTRY_BYTES, RETRIEVAL_BYTES = 1024, 12


@dataclass(frozen=True)
class SolveConfig:
    """The static (compile-time) part of a solve."""

    site: str
    approach_axis: int | None
    orientation_weight: float
    damping: float
    iterations: int
    tolerance: float
    pos_eps: float
    rot_eps: float
    selection: str
    seed_rot_scale: float
    dt: float = 1.0
    k_max: int | None = None


def _approach_axis_world(kin: Kinematics, q: Array, cfg: SolveConfig, tcp_rot: Array) -> Array:
    """World direction (..., 3) of the TCP frame's approach axis."""
    return (kin.site_pose(q, cfg.site)[1] @ tcp_rot)[..., :, cfg.approach_axis]


def is_se3(t: Array, atol: float) -> Array:
    """(...) bool: ``t`` (..., 4, 4) is finite with an orthonormal det +1 rotation and last row [0, 0, 0, 1]."""
    rot = t[..., :3, :3]
    gram = jnp.swapaxes(rot, -1, -2) @ rot
    last = jnp.asarray([0, 0, 0, 1], t.dtype)
    return (jnp.all(jnp.isfinite(t), (-2, -1)) & jnp.all(jnp.abs(gram - jnp.eye(3, dtype=t.dtype)) <= atol, (-2, -1))
            & (jnp.linalg.det(rot) > 0) & jnp.all(jnp.abs(t[..., 3, :] - last) <= atol, -1))


def pose_tolerance(dtype) -> float:
    """The SE(3) check's tolerance for targets of ``dtype``: ``max(1e-6, 100·eps)``."""
    return max(_POSE_ATOL, 100 * float(jnp.finfo(dtype).eps))


def manipulability(kin: Kinematics, q: Array, site: str, offset: Array) -> Array:
    """Yoshikawa manipulability √det(Jv Jvᵀ) (...) of the translational Jacobian."""
    jacp = kin.jacobian(q, site, offset)[0]
    return jnp.sqrt(jnp.maximum(jnp.linalg.det(jacp @ jnp.swapaxes(jacp, -1, -2)), 0))


@partial(jax.jit, static_argnums=(0, 1))
def tcp_fk(kin: Kinematics, site: str, q: Array, tcp: Array) -> Array:
    """TCP poses (..., 4, 4) of joint angles q (..., n); tcp (4, 4) in the site frame."""
    pos, rot = kin.site_pose(q, site)
    top = jnp.concatenate([rot @ tcp[:3, :3], (pos + rot @ tcp[:3, 3])[..., None]], -1)
    return jnp.concatenate([top, jnp.broadcast_to(tcp[3], (*top.shape[:-2], 1, 4))], -2)


@partial(jax.jit, static_argnums=(0, 1))
def tcp_jacobian(kin: Kinematics, site: str, q: Array, offset: Array) -> Array:
    """[linear; angular] Jacobian (..., 6, n) of the site-frame point ``offset`` (3,) or (..., 3)."""
    return jnp.concatenate(kin.jacobian(q, site, offset), -2)


def _least_squares(kin, cfg: SolveConfig, q0, pos, direction, task: dict, lower, upper) -> Array:
    """``cfg.iterations`` damped least-squares steps of length ``cfg.dt`` (see the module docstring)."""
    args = dict(approach_dir=direction, damping=cfg.damping, tolerance=cfg.tolerance, lower=lower, upper=upper, **task)
    if cfg.dt == 1.0:
        return ik.levenberg_marquardt(kin, q0, pos, iterations=cfg.iterations, **args)
    q0 = jnp.broadcast_to(q0, jnp.broadcast_shapes(q0.shape, pos.shape[:-1] + q0.shape[-1:]))

    def body(_, q):
        return q + cfg.dt * (ik.ik_step(kin, q, pos, **args) - q)

    return jax.lax.fori_loop(0, cfg.iterations, body, q0)


@partial(jax.jit, static_argnums=(0, 1))
def solve(kin, cfg, pos, direction, seed, lower, upper, tcp_pos, tcp_rot, weight, starts, db_q, db_key,
          target_rot=None):
    """Multi-start least squares: pos, direction (..., 3); seed (..., n); starts (K - 1, n) fixed starts,
    replaced by K - 1 database entries (db_q (N, n), db_key (N, 3 or 6)) near each target, re-ranked.
    ``target_rot`` (..., 3, 3): the TCP's world rotation, solved and checked in full (roll included;
    the approach ``direction`` then only keys the database); None = the approach axis alone, if any.

    Returns validity (..., K) and candidates (..., K, n), best first.
    """
    top, full = cfg.approach_axis is not None, target_rot is not None
    finite = jnp.all(jnp.isfinite(pos), -1) & jnp.all(jnp.isfinite(direction), -1)
    midpoint = jnp.where(jnp.isfinite(lower + upper), 0.5 * (lower + upper), 0)
    seed = jnp.where(jnp.isfinite(seed), seed, midpoint)
    # A non-finite target becomes the seed's own pose: the solve freezes at once on the seed.
    pos = jnp.where(finite[..., None], pos, kin.point(seed, cfg.site, tcp_pos))
    if top:
        direction = jnp.where(finite[..., None], direction, _approach_axis_world(kin, seed, cfg, tcp_rot))
    task = dict(site=cfg.site, offset=tcp_pos, approach_axis=None if full else cfg.approach_axis,
                orientation_weight=cfg.orientation_weight, rotation=tcp_rot)
    if full:
        finite &= jnp.all(jnp.isfinite(target_rot), (-2, -1))
        target_rot = jnp.where(finite[..., None, None], target_rot, kin.site_pose(seed, cfg.site)[1] @ tcp_rot)
        task["target_rotation"] = target_rot[..., None, :, :]
    if db_q is None or starts.shape[0] == 0:
        others = jnp.broadcast_to(starts, (*pos.shape[:-1], *starts.shape))
    else:
        key = jnp.concatenate([pos, cfg.seed_rot_scale * direction], -1) if top else pos
        m = starts.shape[0]
        cand = db_q[nearest(db_key, key, m if cfg.k_max is None else max(m, min(cfg.k_max, db_q.shape[0])))]
        if cfg.k_max is None or cand.shape[-2] == m:
            others = cand
        else:
            err, jac = ik.task_error(kin, cand, pos[..., None, :], approach_dir=direction[..., None, :], **task)
            order = jnp.argsort(correction(err, jac), axis=-1)[..., :m]
            others = jnp.take_along_axis(cand, order[..., None], -2)
    q0 = jnp.concatenate([seed[..., None, :], others], -2)
    q = _least_squares(kin, cfg, q0, pos[..., None, :], direction[..., None, :], task, lower, upper)
    err = jnp.linalg.norm(kin.point(q, cfg.site, tcp_pos) - pos[..., None, :], axis=-1)
    valid = (err < cfg.pos_eps) & jnp.all((q >= lower) & (q <= upper), -1) & finite[..., None]
    if full:
        valid &= R.rotation_angle(kin.site_pose(q, cfg.site)[1] @ tcp_rot, target_rot[..., None, :, :]) < cfg.rot_eps
    elif top:
        valid &= R.angle_between(_approach_axis_world(kin, q, cfg, tcp_rot), direction[..., None, :]) < cfg.rot_eps
    if cfg.selection == "nearest":
        cost = jnp.sum(weight * (q - seed[..., None, :]) ** 2, -1)
    else:
        cost = -manipulability(kin, q, cfg.site, tcp_pos)
    # Valid candidates first, by cost; then the invalid ones by position error.
    order = jnp.lexsort((jnp.where(valid, cost, err), ~valid), axis=-1)
    return jnp.take_along_axis(valid, order, -1), jnp.take_along_axis(q, order[..., None], -2)


def halton_samples(lower: np.ndarray, upper: np.ndarray, n: int) -> np.ndarray:
    """``n`` scrambled-Halton joint samples (n, len(lower)) within [lower, upper] (an infinite bound: ±π), seed 0."""
    lo = np.where(np.isfinite(lower), lower, -np.pi)
    hi = np.where(np.isfinite(upper), upper, np.pi)
    return lo + qmc.Halton(d=len(lo), scramble=True, seed=0).random(n) * (hi - lo)


def as_vector(value, name: str, n: int) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (n,):
        raise InputError(f"{name} must have shape ({n},), got {arr.shape}")
    return arr


