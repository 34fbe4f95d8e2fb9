"""``SO101AnalyticSolver``: closed-form IK with the ``BaseSolver`` surface of :class:`SO101Solver`.

Every branch of :func:`so101_mjx.ik.analytic.solve` (pan forward/back × elbow up/down) is checked
against the joint limits and ranked by ``ik_nearest_weight`` distance to the seed (or, with
``selection="manipulability"``, by the TCP's Yoshikawa manipulability), then FK-
verified: all of them by the chain's FK for poses and ``return_all_solutions``; for a single
answer to a position, the chosen one by the geometry's own FK (:func:`~so101_mjx.ik.analytic.forward`,
equal to the chain's to round-off: the closed form is exact where a branch exists, and the check
guards round-off).
Invalid slots hold the seed clipped to the limits. No iterations for positions, so no convergence
failures: a target is solved exactly (to round-off) or reported unreachable.

Targets:
- (..., 3) TCP positions: the approach axis (the TCP x axis, along the wrist roll) at ``pitch``
  (default π/2, top-down; per target with ``get_ik(..., pitch=)``), the wrist roll taken from
  the seed;
- (..., 4, 4) TCP poses: position, the approach axis's elevation and the roll of the jaw about
  the approach axis are honoured; the approach's azimuth follows the pan (5 DoF). Both in-plane
  pitches with that elevation are tried (approach pointing away from or toward the base), and a
  candidate is valid only if its approach's horizontal component points the target's way. The
  roll couples to the pan through the TCP's offset from the roll axis: a fixed-point step and
  ``ROLL_ITERATIONS`` Newton steps solve it per branch.

``supports_continuous_batch_ik`` is True: ``get_ik(return_all_solutions=True)`` gives (M, K)
validity and (M, K, 5) candidates for :meth:`select_continuous_ik_path`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.ik import analytic as analytic_ik
from so101_mjx.ik.solvers import path as ik_path
from so101_mjx.ik.solvers.chain_config import ChainCfg, solver_arguments
from so101_mjx.ik.solvers.multistart import SELECTIONS, manipulability
from so101_mjx.ik.solvers.solver import SO101Solver, is_se3, pose_tolerance
from so101_mjx.robot import rotations as R

_INVALID = 1e9  # selection cost step: above any weighted squared joint distance
ROLL_ITERATIONS = 10  # Newton steps on a pose's wrist roll, after one fixed-point step from the seed's
ROLL_STEP = 0.5  # radians: the largest Newton step on the roll (tames the steep pan near the pan axis)
# radians (float64; 1000 eps in float32): a branch whose jaw misses the pose's by more is not a solution
ROLL_TOL = 1e-9


def _pitch_of(axis: Array) -> Array:
    """Elevation (...) below the horizontal of unit vectors (..., 3), radians in [-π/2, π/2]."""
    return jnp.arctan2(-axis[..., 2], jnp.sqrt(axis[..., 0] ** 2 + axis[..., 1] ** 2))


class PitchedSolver(SO101Solver):
    """Base of the solvers of (TCP position, approach pitch) targets, closed-form and learned
    (:class:`so101_mjx.ik.solvers.learned_seeds.SO101LearnedSolver`): the pitch, the arm geometry of the TCP
    (:class:`~so101_mjx.ik.analytic.ArmGeometry`) and continuous path selection.

    Args:
        model: MjModel holding the arm (default: the ``so101`` scene).
        pitch: default approach pitch of (..., 3) targets, radians: the in-plane angle of the
            approach axis below the arm's forward horizontal (π/2 points down, beyond π/2 back
            toward the base; :func:`~so101_mjx.ik.analytic.pitch_of`).
        approach_axis: must be 0 (the TCP x axis, along the wrist roll).
        Other arguments as :class:`SO101Solver` (tcp, ik_nearest_weight, user_qpos_limits, ...).
    """

    def __init__(self, model: mujoco.MjModel | None = None, *, pitch: float = np.pi / 2, approach_axis: int = 0,
                 **kwargs):
        pitch = checks.real("pitch", pitch)
        if approach_axis != 0 or isinstance(approach_axis, bool):
            raise InputError(f"approach_axis must be 0 (the TCP x axis, along the wrist roll), got {approach_axis!r}")
        super().__init__(model, approach_axis=0, seed_selection=False, **kwargs)
        self.pitch = pitch
        self._geometry_for: bytes | None = None

    def _targets(
        self, target, qpos_seed, pitch
    ) -> tuple[Array | np.ndarray, bool, Array | np.ndarray, Array | np.ndarray]:
        """``get_ik``'s arguments, checked: ``(target, pose, seed, pitch)``, all of the target's floating dtype.

        ``target`` (..., 3) or (..., 4, 4) (``pose``); ``qpos_seed`` (..., n), default :meth:`get_default_qpos_seed`;
        ``pitch`` (...), default ``self.pitch``, only with (..., 3) targets. Batches must broadcast.
        """
        t = _floating(target)
        t = t[None] if t.shape == (4, 4) else t  # one pose is one environment: results (1,) and (1, n)
        pose = t.ndim >= 2 and t.shape[-2:] == (4, 4)
        if not pose and not (t.ndim >= 1 and t.shape[-1] == 3):
            raise InputError(f"target must have shape (..., 3) or (..., 4, 4), got {t.shape}")
        if pose and pitch is not None:
            raise InputError("pitch is for (..., 3) targets; a (..., 4, 4) pose's approach axis gives its pitch")
        seed = _floating(self.get_default_qpos_seed() if qpos_seed is None else qpos_seed, t.dtype)
        if seed.ndim < 1 or seed.shape[-1] != self.dof:
            raise InputError(f"qpos_seed must have shape ({self.dof},) or (..., {self.dof}), got {seed.shape}")
        # a NaN/inf seed entry falls back to the default seed's, as SO101Solver's
        xp = jnp if isinstance(seed, jax.Array) else np
        seed = xp.where(xp.isfinite(seed), seed, self.get_default_qpos_seed().astype(seed.dtype))
        pitch = _floating(self.pitch if pitch is None else pitch, t.dtype)
        batch = t.shape[:-2] if pose else t.shape[:-1]
        try:
            jnp.broadcast_shapes(batch, seed.shape[:-1], pitch.shape)
        except ValueError as err:
            raise InputError(f"target batch {batch}, qpos_seed batch {seed.shape[:-1]} and pitch shape {pitch.shape} "
                             "do not broadcast") from err
        return t, pose, seed, pitch

    @property
    def supports_continuous_batch_ik(self) -> bool:
        return True

    def _geometry(self) -> analytic_ik.ArmGeometry:
        key = self._tcp.tobytes()
        if self._geometry_for != key:
            self._geom = analytic_ik.ArmGeometry.from_kinematics(self.kin, self._cfg.site, self._tcp[:3, 3])
            self._geometry_for = key
        return self._geom

    def select_continuous_ik_path(self, valid, candidates, qpos_seed, threshold: float = 0.5):
        """(B, N) validity and (B, N, 5) joints moving continuously from ``qpos_seed`` (B, 5) through
        (B, N, K) ``valid`` / (B, N, K, 5) ``candidates``; also (B, N) jump flags. See
        :mod:`so101_mjx.ik.solvers.path`."""
        return ik_path.select_continuous_path(jnp.asarray(valid), jnp.asarray(candidates), jnp.asarray(qpos_seed),
                                              jnp.asarray(self._weight), threshold)

    _select_continuous_ik_path = select_continuous_ik_path  # EmbodiChain's protected hook name


class SO101AnalyticSolver(PitchedSolver):
    """Closed-form IK of the TCP; see the module docstring.

    Args:
        model: MjModel (default: the ``so101`` scene) or an :class:`AnalyticSolverCfg`.
        device: JAX device or platform string.
        pos_eps: metres (default 1e-6); a candidate whose FK misses the target by more is invalid.
        rot_eps: radians (rotation-matrix entries, default 1e-6); pose candidates beyond it are not exact.
        selection: ``"nearest"`` (weighted joint distance to the seed) or ``"manipulability"`` (the
            valid branch with the largest Yoshikawa √det(Jv Jvᵀ) of the TCP, nearest on ties).
        Other arguments as :class:`PitchedSolver`.
    """

    def __init__(self, model: mujoco.MjModel | AnalyticSolverCfg | None = None, device=None, **kwargs):
        cfg = model if isinstance(model, AnalyticSolverCfg) else None
        model, kwargs = solver_arguments(model, kwargs)
        kwargs = {"pos_eps": 1e-6, "rot_eps": 1e-6, **kwargs}
        super().__init__(model, device=device, num_samples=len(analytic_ik.BRANCHES), **kwargs)
        self.cfg = cfg

    def get_ik(self, target, qpos_seed=None, num_samples: int | None = None, return_all_solutions: bool = False,
               pitch=None):
        """Solve ``target`` (..., 3) or (..., 4, 4); returns ``(success (...), qpos (..., 5))`` or, with
        ``return_all_solutions``, ``(valid (..., K), qpos (..., K, 5))`` best first (K = 4, or 8 for poses).
        One (4, 4) pose is a batch of one: ``(1,)`` and ``(1, 5)``.

        ``pitch``: approach pitch (...) radians per (..., 3) target (as the constructor's), broadcast
        with the targets (default ``self.pitch``; a non-finite pitch is a failure, as a non-finite
        target); not for poses, whose approach axis gives it. A NaN or inf entry of ``qpos_seed``
        falls back to :meth:`get_default_qpos_seed`'s (as :class:`SO101Solver`'s): the joints returned are
        always finite. ``num_samples`` is not used (the branches are enumerated).
        """
        t, pose, seed, pitch = self._targets(target, qpos_seed, pitch)
        dt = t.dtype
        limits = (np.asarray(x, dt) for x in (self._lower, self._upper, self._weight, self._tcp))
        return _solve(self.kin, self._geometry(), self._cfg.site, pose, self._cfg.pos_eps, self._cfg.rot_eps,
                      bool(return_all_solutions), self._cfg.selection, t, pitch, seed, *limits)


@dataclass
class AnalyticSolverCfg(ChainCfg):
    """Config of :class:`SO101AnalyticSolver`: the base fields, ``pitch`` (radians), ``pos_eps``,
    ``rot_eps`` and ``ik_solution_selection`` (``"nearest"`` or ``"manipulability"``)."""

    class_type: str = "SO101AnalyticSolver"
    pitch: float = np.pi / 2
    pos_eps: float = 1e-6
    rot_eps: float = 1e-6
    ik_solution_selection: str = "nearest"

    def __post_init__(self) -> None:
        super().__post_init__()
        (checks.real("pitch", self.pitch), checks.real("pos_eps", self.pos_eps, gt=0),
         checks.real("rot_eps", self.rot_eps, gt=0))
        if self.ik_solution_selection not in SELECTIONS:
            raise InputError(f"ik_solution_selection must be one of {SELECTIONS}, got {self.ik_solution_selection!r}")

    def solver_kwargs(self) -> dict:
        return dict(pitch=self.pitch, pos_eps=self.pos_eps, rot_eps=self.rot_eps, selection=self.ik_solution_selection)


AnalyticSolverCfg.solver_class = SO101AnalyticSolver


def _floating(x, dtype=None) -> Array | np.ndarray:
    """``x`` as a floating array of ``dtype`` (default: its own, or JAX's default float): JAX arrays
    and tracers stay JAX, anything else becomes NumPy (no device round trip before the jitted solve)."""
    if not isinstance(x, jax.Array):
        x = np.asarray(x)
    if dtype is None:
        dtype = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else jnp.result_type(float)
    dtype = jax.dtypes.canonicalize_dtype(dtype)
    return x if x.dtype == dtype else x.astype(dtype)


def _feasible(exists: Array, q: Array, lower: Array, upper: Array) -> Array:
    """(..., K): the branch exists, has finite joints ``q`` (..., K, 5) and is within the limits."""
    return exists & jnp.all((q >= lower) & (q <= upper), -1) & jnp.all(jnp.isfinite(q), -1)


def _reaches(kin, site: str, tcp: Array, q: Array, pos: Array, pos_eps: float) -> tuple[Array, Array]:
    """FK of ``q`` (..., K, 5): (..., K) TCP within ``pos_eps`` of ``pos`` (..., 3), site rotations (..., K, 3, 3)."""
    fk_pos, fk_rot = kin.site_pose(q, site)
    point = fk_pos + jnp.einsum("...ij,j->...i", fk_rot, tcp[:3, 3])
    return jnp.linalg.norm(point - pos[..., None, :], axis=-1) < pos_eps, fk_rot


def _pose_roll(kin, geom, site: str, q: Array, site_rot: Array) -> Array:
    """Wrist roll (...) turning the jaw axis (site z) of ``q`` (..., 5), at the reference roll, onto that
    of ``site_rot`` (..., 3, 3) about the approach axis (site x)."""
    rot0 = kin.site_pose(q.at[..., 4].set(float(geom.qpos0[4])), site)[1]
    axis, jaw0 = rot0[..., :, 0], rot0[..., :, 2]
    jaw = site_rot[..., :, 2] - jnp.sum(site_rot[..., :, 2] * axis, -1, keepdims=True) * axis
    angle = R.signed_angle(jaw0, jaw, axis)
    approach0 = np.array([np.cos(geom.approach_angle), 0.0, np.sin(geom.approach_angle)])
    return float(geom.qpos0[4]) + float(np.sign(geom.roll_axis @ approach0)) * angle


def _pose_branches(kin, geom, site: str, pos: Array, site_rot: Array, seed_roll: Array):
    """All branches for pose targets: (..., 8) existence and (..., 8, 5) joints (2 pitches × 4 branches).

    Each branch's roll solves "the jaw lands on the pose's jaw" (:func:`_pose_roll`). The roll moves
    the pan only through the TCP's offset from the roll axis (millimetres against the reach), so
    the jaw's roll at the seed roll's pan (one fixed-point step) starts near the root; Newton steps
    of at most ``ROLL_STEP`` finish it (within ~2 cm of the pan axis the pan turns fast with the
    roll, and about 1 % of uniform joint samples' poses are missed there).
    """
    elevation = _pitch_of(site_rot[..., :, 0])
    pitches = jnp.stack([elevation, jnp.pi - elevation], -1)  # (..., 2): away from / toward the base
    rot = site_rot[..., None, None, :, :]

    def branches(roll):  # (..., pitch, branch): branch b solved with its own roll
        return analytic_ik.solve_each(geom, pos[..., None, :], pitches, roll)

    def jaw_roll(roll):
        return _pose_roll(kin, geom, site, branches(roll)[1], rot)

    def residual(roll):  # wrapped jaw-angle error of each branch at its roll
        return analytic_ik.wrap(jaw_roll(roll) - roll)

    def newton(_, roll):  # on each branch's roll (the pan moves with the roll)
        g, dg = jax.jvp(residual, (roll,), (jnp.ones_like(roll),))
        step = g / jnp.where(jnp.abs(dg) > 1e-6, dg, -1.0)
        return analytic_ik.wrap(roll - jnp.clip(step, -ROLL_STEP, ROLL_STEP))

    start = jaw_roll(jnp.broadcast_to(seed_roll[..., None, None], (*pitches.shape, len(analytic_ik.BRANCHES))))
    roll = jax.lax.fori_loop(0, ROLL_ITERATIONS, newton, start)
    exists, q = branches(roll)
    exists &= jnp.abs(residual(roll)) < max(ROLL_TOL, 1000 * float(jnp.finfo(pos.dtype).eps))
    return exists.reshape(*exists.shape[:-2], -1), q.reshape(*q.shape[:-3], -1, 5), elevation


@partial(jax.jit, static_argnums=(0, 1, 2, 3, 4, 5, 6, 7))
def _solve(kin, geom, site, pose, pos_eps, rot_eps, all_solutions, selection, target, pitch, seed, lower,
           upper, weight, tcp):
    """Validity (..., K) and candidates (..., K, 5), valid first, each group best first by ``selection``
    (nearest, or largest manipulability); or without ``all_solutions`` the best valid candidate:
    (...) and (..., 5). Invalid slots hold the seed clipped to the limits.

    Position targets without ``all_solutions`` FK-check only the chosen branch, by
    :func:`~so101_mjx.ik.analytic.forward`: the closed form is exact where a branch exists, so the
    check guards round-off, not the choice.
    """
    batch = jnp.broadcast_shapes(target.shape[:-2] if pose else target.shape[:-1], seed.shape[:-1], pitch.shape)
    target = jnp.broadcast_to(target, batch + target.shape[-2 if pose else -1:])
    seed = jnp.broadcast_to(seed, (*batch, seed.shape[-1]))
    fallback = jnp.clip(seed, lower, upper)[..., None, :]
    inexact = False
    if pose:
        pos, site_rot = target[..., :3, 3], target[..., :3, :3] @ tcp[:3, :3].T
        exists, q, elevation = _pose_branches(kin, geom, site, pos, site_rot, seed[..., 4])
        ok, fk_rot = _reaches(kin, site, tcp, q, pos, pos_eps)
        ok &= _feasible(exists, q, lower, upper) & jnp.all(jnp.isfinite(pos), -1)[..., None]
        fk_axis = fk_rot[..., :, 0]
        approach = site_rot[..., None, :, 0]
        # Among valid branches, those reproducing the whole rotation first (5 DoF: not always one).
        inexact = jnp.max(jnp.abs(fk_rot - site_rot[..., None, :, :]), (-2, -1)) > rot_eps
        ok &= jnp.sum(fk_axis[..., :2] * approach[..., :2], -1) >= -1e-9  # the target's horizontal sense
        ok &= jnp.abs(_pitch_of(fk_axis) - elevation[..., None]) < rot_eps
        ok &= is_se3(target, pose_tolerance(target.dtype))[..., None]  # a non-pose (zero, skewed, NaN) is never solved
    else:
        pos, pitch = target, jnp.broadcast_to(pitch, batch)
        exists, q = analytic_ik.solve(geom, pos, pitch, seed[..., 4])
        ok = _feasible(exists, q, lower, upper) & (jnp.all(jnp.isfinite(pos), -1) & jnp.isfinite(pitch))[..., None]
        if all_solutions:
            ok &= _reaches(kin, site, tcp, q, pos, pos_eps)[0]
    cost = jnp.sum(weight * (q - seed[..., None, :]) ** 2, -1)
    if selection == "manipulability":  # the best-conditioned branch; the nearest among equal scores
        score = manipulability(kin, jnp.where(ok[..., None], q, fallback), site, tcp[:3, 3])
        cost = jnp.lexsort((cost, -score), axis=-1).argsort(-1).astype(cost.dtype)
    if all_solutions:
        # Valid and exact, then valid, each nearest first; then the invalid ones.
        order = jnp.lexsort((cost, inexact & ok, ~ok), axis=-1)
        ok, q = jnp.take_along_axis(ok, order, -1), jnp.take_along_axis(q, order[..., None], -2)
        return ok, jnp.where(ok[..., None], q, fallback)
    best = jnp.argmin(jnp.where(ok, cost + _INVALID * inexact, 2 * _INVALID), -1)[..., None]
    ok, q = jnp.take_along_axis(ok, best, -1)[..., 0], jnp.take_along_axis(q, best[..., None], -2)[..., 0, :]
    if not pose:  # the geometry's own FK: measured 12-17x cheaper than the chain's, the same to round-off
        ok &= jnp.linalg.norm(analytic_ik.forward(geom, q) - pos, axis=-1) < pos_eps
    return ok, jnp.where(ok[..., None], q, fallback[..., 0, :])
