"""``SO101AnalyticSolver``: closed-form IK with the ``BaseSolver`` surface of :class:`SO101Solver`.

Every branch of :func:`so101_mjx.analytic_ik.solve` (pan forward/back × elbow up/down) is FK-
verified, checked against the joint limits, and ranked by ``ik_nearest_weight`` distance to the
seed; invalid slots hold the seed clipped to the limits. No iterations, so no convergence
failures: a target is solved exactly (to round-off) or reported unreachable.

Targets:
- (..., 3) TCP positions: the approach axis (the TCP x axis, along the wrist roll) at
  ``pitch`` below the horizontal (default π/2, top-down), the wrist roll taken from the seed;
- (..., 4, 4) TCP poses: position, the approach axis's elevation and the roll of the jaw about
  the approach axis are honoured; the approach's azimuth follows the pan (5 DoF). Both in-plane
  pitches with that elevation are tried (approach pointing away from or toward the base), and a
  candidate is valid only if its approach's horizontal component points the target's way.

``supports_continuous_batch_ik`` is True: ``get_ik(return_all_solutions=True)`` gives (M, K)
validity and (M, K, 5) candidates for :meth:`select_continuous_ik_path`.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array

from so101_mjx import analytic_ik, ik_path
from so101_mjx.solvers import SO101Solver, is_se3, pose_tolerance

_INVALID = 1e9  # selection cost step: above any weighted squared joint distance
ROLL_ITERATIONS = 6  # Newton steps on a pose's wrist roll (the pan, hence the jaw, moves with the roll)
ROLL_STARTS = (0.0, np.pi / 2, np.pi, -np.pi / 2)  # Newton starts, offsets from the seed's roll
ROLL_TOL = 1e-9  # radians: a branch whose jaw misses the pose's by more is not a solution


def _pitch_of(axis: Array) -> Array:
    """Elevation (...) below the horizontal of unit vectors (..., 3), radians in [-π/2, π/2]."""
    return jnp.arctan2(-axis[..., 2], jnp.sqrt(axis[..., 0] ** 2 + axis[..., 1] ** 2))


class SO101AnalyticSolver(SO101Solver):
    """Closed-form IK of the TCP; see the module docstring.

    Args:
        model: MjModel holding the arm (default: the ``so101`` scene).
        pitch: approach pitch (radians below the horizontal) for (..., 3) targets.
        pos_eps: metres; a candidate whose FK misses the target by more is invalid.
        Other arguments as :class:`SO101Solver` (tcp, ik_nearest_weight, user_qpos_limits, ...).
    """

    def __init__(self, model: mujoco.MjModel | None = None, *, pitch: float = np.pi / 2, pos_eps: float = 1e-6,
                 rot_eps: float = 1e-6, approach_axis: int = 0, **kwargs):
        if not np.isfinite(pitch):
            raise ValueError(f"pitch must be a finite angle in radians, got {pitch!r}")
        if approach_axis != 0:
            raise ValueError(f"approach_axis must be 0 (the TCP x axis, along the wrist roll), got {approach_axis!r}")
        super().__init__(model, approach_axis=0, pos_eps=pos_eps, rot_eps=rot_eps, seed_selection=False,
                         num_samples=len(analytic_ik.BRANCHES), **kwargs)
        self.pitch = float(pitch)
        self._geometry_for: bytes | None = None

    @property
    def supports_continuous_batch_ik(self) -> bool:
        return True

    def _geometry(self) -> analytic_ik.ArmGeometry:
        key = self._tcp.tobytes()
        if self._geometry_for != key:
            self._geom = analytic_ik.ArmGeometry.from_kinematics(self.kin, self._cfg.site, self._tcp[:3, 3])
            self._geometry_for = key
        return self._geom

    def get_ik(self, target, qpos_seed=None, num_samples: int | None = None, return_all_solutions: bool = False):
        """Solve ``target`` (..., 3) or (..., 4, 4); returns ``(success (...), qpos (..., 5))`` or, with
        ``return_all_solutions``, ``(valid (..., K), qpos (..., K, 5))`` best first (K = 4, or 8 for poses).
        ``num_samples`` is not used (the branches are enumerated)."""
        t = jnp.asarray(target)
        if not jnp.issubdtype(t.dtype, jnp.floating):
            t = t.astype(jnp.result_type(float))
        pose = t.ndim >= 2 and t.shape[-2:] == (4, 4)
        if not pose and not (t.ndim >= 1 and t.shape[-1] == 3):
            raise ValueError(f"target must have shape (..., 3) or (..., 4, 4), got {t.shape}")
        dt = t.dtype
        seed = jnp.asarray(self.get_default_qpos_seed() if qpos_seed is None else qpos_seed, dt)
        if seed.ndim < 1 or seed.shape[-1] != self.dof:
            raise ValueError(f"qpos_seed must have shape ({self.dof},) or (..., {self.dof}), got {seed.shape}")
        batch = jnp.broadcast_shapes(t.shape[:-2] if pose else t.shape[:-1], seed.shape[:-1])
        args = (jnp.broadcast_to(t, (*batch, *(t.shape[-2:] if pose else (3,)))), jnp.broadcast_to(seed, (*batch, self.dof)),
                jnp.asarray(self._lower, dt), jnp.asarray(self._upper, dt), jnp.asarray(self._weight, dt),
                jnp.asarray(self._tcp, dt))
        return _solve(self.kin, self._geometry(), self._cfg.site, pose, self.pitch, self._cfg.pos_eps,
                      self._cfg.rot_eps, bool(return_all_solutions), *args)

    def select_continuous_ik_path(self, valid, candidates, qpos_seed, threshold: float = 0.5):
        """(B, N) validity and (B, N, 5) joints moving continuously from ``qpos_seed`` (B, 5) through
        (B, N, K) ``valid`` / (B, N, K, 5) ``candidates``; also (B, N) jump flags. See :mod:`so101_mjx.ik_path`."""
        return ik_path.select_continuous_path(jnp.asarray(valid), jnp.asarray(candidates), jnp.asarray(qpos_seed),
                                              jnp.asarray(self._weight), threshold)

    _select_continuous_ik_path = select_continuous_ik_path  # EmbodiChain's protected hook name


def _limited(exists: Array, q: Array, lower: Array, upper: Array, seed: Array) -> tuple[Array, Array]:
    """``exists`` and within the limits; invalid slots of ``q`` (..., K, 5) hold the seed (..., 5) clipped."""
    ok = exists & jnp.all((q >= lower) & (q <= upper), -1) & jnp.all(jnp.isfinite(q), -1)
    return ok, jnp.where(ok[..., None], q, jnp.clip(seed, lower, upper)[..., None, :])


def _pose_roll(kin, geom, site: str, q: Array, site_rot: Array) -> Array:
    """Wrist roll (...) turning the jaw axis (site z) of ``q`` (..., 5), at the reference roll, onto that
    of ``site_rot`` (..., 3, 3) about the approach axis (site x)."""
    rot0 = kin.site_pose(q.at[..., 4].set(float(geom.qpos0[4])), site)[1]
    axis, jaw0 = rot0[..., :, 0], rot0[..., :, 2]
    jaw = site_rot[..., :, 2] - jnp.sum(site_rot[..., :, 2] * axis, -1, keepdims=True) * axis
    angle = jnp.arctan2(jnp.sum(jnp.cross(jaw0, jaw) * axis, -1), jnp.sum(jaw0 * jaw, -1))
    approach0 = np.array([np.cos(geom.approach_angle), 0.0, np.sin(geom.approach_angle)])
    return float(geom.qpos0[4]) + float(np.sign(geom.roll_axis @ approach0)) * angle


def _pose_branches(kin, geom, site: str, pos: Array, site_rot: Array, seed_roll: Array):
    """All branches for pose targets: (..., 8) existence and (..., 8, 5) joints (2 pitches × 4 branches).

    Each branch's roll solves "the jaw lands on the pose's jaw" by Newton from ``ROLL_STARTS``
    offsets of the seed's roll, keeping the start that converges best.
    """
    elevation = _pitch_of(site_rot[..., :, 0])
    pitches = jnp.stack([elevation, jnp.pi - elevation], -1)[..., None, :, None]  # away from / toward the base
    starts = jnp.asarray(ROLL_STARTS, pos.dtype)[:, None, None]
    roll = analytic_ik.wrap(seed_roll[..., None, None, None] + starts) + jnp.zeros(pitches.shape[:-1] + (len(analytic_ik.BRANCHES),), pos.dtype)
    rot = site_rot[..., None, None, None, :, :]

    def branches(roll):  # (..., start, pitch, branch): branch b solved with its own roll
        exists, q = analytic_ik.solve(geom, pos[..., None, None, None, :], pitches, roll)
        return jnp.diagonal(exists, 0, -2, -1), jnp.moveaxis(jnp.diagonal(q, 0, -3, -2), -1, -2)

    def residual(roll):  # wrapped jaw-angle error of each branch at its roll
        return analytic_ik.wrap(_pose_roll(kin, geom, site, branches(roll)[1], rot) - roll)

    def newton(_, roll):  # on each branch's roll (the pan moves with the roll)
        g, dg = jax.jvp(residual, (roll,), (jnp.ones_like(roll),))
        return analytic_ik.wrap(roll - g / jnp.where(jnp.abs(dg) > 1e-6, dg, -1.0))

    roll = jax.lax.fori_loop(0, ROLL_ITERATIONS, newton, roll)
    exists, q = branches(roll)
    miss = jnp.where(exists, jnp.abs(residual(roll)), jnp.inf)
    best = jnp.argmin(miss, -3)[..., None, :, :]  # the start that converged best, per pitch and branch
    exists = jnp.take_along_axis(exists & (miss < ROLL_TOL), best, -3)[..., 0, :, :]
    q = jnp.take_along_axis(q, best[..., None], -4)[..., 0, :, :, :]
    return exists.reshape(*exists.shape[:-2], -1), q.reshape(*q.shape[:-3], -1, 5), elevation


@partial(jax.jit, static_argnums=(0, 1, 2, 3, 4, 5, 6, 7))
def _solve(kin, geom, site, pose, pitch, pos_eps, rot_eps, all_solutions, target, seed, lower, upper, weight, tcp):
    """Validity (..., K) and candidates (..., K, 5), valid first, each group nearest first; or
    without ``all_solutions`` the nearest valid candidate: (...) and (..., 5)."""
    if pose:
        pos, site_rot = target[..., :3, 3], target[..., :3, :3] @ tcp[:3, :3].T
        exists, q, elevation = _pose_branches(kin, geom, site, pos, site_rot, seed[..., 4])
        ok, q = _limited(exists, q, lower, upper, seed)
        fk_rot = kin.site_pose(q, site)[1]
        fk_axis = fk_rot[..., :, 0]
        approach = site_rot[..., None, :, 0]
        # Among valid branches, those reproducing the whole rotation first (5 DoF: not always one).
        inexact = jnp.max(jnp.abs(fk_rot - site_rot[..., None, :, :]), (-2, -1)) > rot_eps
        ok &= jnp.sum(fk_axis[..., :2] * approach[..., :2], -1) >= -1e-9  # the target's horizontal sense
        ok &= jnp.abs(_pitch_of(fk_axis) - elevation[..., None]) < rot_eps
        ok &= is_se3(target, pose_tolerance(target.dtype))[..., None]  # a non-pose (zero, skewed, NaN) is never solved
    else:
        pos = target
        inexact = jnp.zeros(target.shape[:-1] + (len(analytic_ik.BRANCHES),), bool)
        exists, q = analytic_ik.solve(geom, pos, jnp.full(pos.shape[:-1], pitch, pos.dtype), seed[..., 4])
        ok, q = _limited(exists, q, lower, upper, seed)
    err = jnp.linalg.norm(kin.point(q, site, tcp[:3, 3]) - pos[..., None, :], axis=-1)
    ok &= (err < pos_eps) & jnp.all(jnp.isfinite(pos), -1)[..., None]
    # Valid and exact, then valid, each nearest first; then the invalid ones, least missing first.
    cost = jnp.sum(weight * (q - seed[..., None, :]) ** 2, -1)
    if not all_solutions:
        best = jnp.argmin(jnp.where(ok, cost + _INVALID * inexact, 2 * _INVALID + err), -1)
        return jnp.take_along_axis(ok, best[..., None], -1)[..., 0], jnp.take_along_axis(q, best[..., None, None], -2)[..., 0, :]
    order = jnp.lexsort((jnp.where(ok, cost, err), inexact & ok, ~ok), axis=-1)
    return jnp.take_along_axis(ok, order, -1), jnp.take_along_axis(q, order[..., None], -2)
