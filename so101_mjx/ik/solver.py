"""Batched multi-start IK for the SO-101, shaped like EmbodiChain's ``BaseSolver``.

:class:`SO101Solver` wraps :func:`so101_mjx.ik.iterative.levenberg_marquardt` with a tool centre point
(TCP), joint limits, multi-start seeding and solution selection:

- targets: (..., 3) TCP positions, or (..., 4, 4) TCP poses in the chain root's (world) frame. A 5-DOF arm
  cannot track a full orientation, so a pose's rotation is ignored, except that with ``approach_axis`` set
  its column ``approach_axis`` becomes the approach direction; (..., 3) targets with ``approach_axis`` use
  the fixed ``approach_dir`` (top-down grasping).
- seeds: slot 0 is the caller's seed; the other ``num_samples - 1`` slots are the entries of a SELIK-style
  database (scrambled-Halton joint samples and their FK) nearest to each target, or with ``seed_selection=False``
  the first Halton samples. The database is rebuilt lazily whenever the limits or the TCP change.
- selection among the valid candidates: ``"nearest"`` to the seed (weighted by ``ik_nearest_weight``) or
  ``"manipulability"`` (largest Yoshikawa √det(Jv Jvᵀ)).
- validity: position error < ``pos_eps`` (and tilt < ``rot_eps`` with an approach axis), joints within limits
  and a finite target. Non-finite targets or seeds never produce NaN joints.

Bad input: constructor and setter arguments raise ``ValueError`` naming the argument, as does a ``seed_db_size``
whose database, or its distances to a batch of targets, would not fit the machine's memory. Target values are
never raised on (they may be traced, and one bad pose should not sink a batch): a (4, 4) target that is not an
SE(3) pose (rotation not orthonormal with det +1 to ``max(1e-6, 100·eps)``, last row not [0, 0, 0, 1], or
non-finite; e.g. a zero matrix) is solved like a non-finite one: ``success`` False and the seed returned.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array
from scipy.stats import qmc

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.ik import iterative as ik
from so101_mjx.robot.kinematics import Kinematics
from so101_mjx.robot.scenes import ARM_JOINTS, EE_SITE, load_model

SELECTIONS = ("nearest", "manipulability")
JAC_TYPES = ("full", "trans", "rot")
_POSE_ATOL = 1e-6  # SE(3) check: |RᵀR − I| and last-row tolerance (float64; 100·eps in float32)
DB_ENTRY_BYTES, RETRIEVAL_BYTES = 1024, 12  # per database entry (float64, XLA's buffers): its FK; one target's distances, top-k


@dataclass(frozen=True)
class _Config:
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


def _approach_axis_world(kin: Kinematics, q: Array, cfg: _Config, tcp_rot: Array) -> Array:
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


def _tilt(axis: Array, direction: Array) -> Array:
    """Angle (...) in radians between two unit vectors (..., 3)."""
    return jnp.arctan2(jnp.linalg.norm(jnp.cross(axis, direction), axis=-1), jnp.sum(axis * direction, -1))


def _manipulability(kin: Kinematics, q: Array, site: str, offset: Array) -> Array:
    """Yoshikawa manipulability √det(Jv Jvᵀ) (...) of the translational Jacobian."""
    jacp = kin.jacobian(q, site, offset)[0]
    return jnp.sqrt(jnp.maximum(jnp.linalg.det(jacp @ jnp.swapaxes(jacp, -1, -2)), 0))


@partial(jax.jit, static_argnums=(0, 1))
def _fk(kin: Kinematics, site: str, q: Array, tcp: Array) -> Array:
    """TCP poses (..., 4, 4) of joint angles q (..., n); tcp (4, 4) in the site frame."""
    pos, rot = kin.site_pose(q, site)
    top = jnp.concatenate([rot @ tcp[:3, :3], (pos + rot @ tcp[:3, 3])[..., None]], -1)
    return jnp.concatenate([top, jnp.broadcast_to(tcp[3], (*top.shape[:-2], 1, 4))], -2)


@partial(jax.jit, static_argnums=(0, 1))
def _jacobian(kin: Kinematics, site: str, q: Array, offset: Array) -> Array:
    """[linear; angular] Jacobian (..., 6, n) of the site-frame point ``offset`` (3,) or (..., 3)."""
    return jnp.concatenate(kin.jacobian(q, site, offset), -2)


@partial(jax.jit, static_argnums=(0, 1))
def _solve(kin, cfg, pos, direction, seed, lower, upper, tcp_pos, tcp_rot, weight, starts, db_q, db_key):
    """Multi-start LM: pos, direction (..., 3); seed (..., n); starts (K - 1, n) fixed starts,
    replaced by the K - 1 database entries (db_q (N, n), db_key (N, 3 or 6)) nearest each target.

    Returns validity (..., K) and candidates (..., K, n), best first.
    """
    top = cfg.approach_axis is not None
    finite = jnp.all(jnp.isfinite(pos), -1) & jnp.all(jnp.isfinite(direction), -1)
    midpoint = jnp.where(jnp.isfinite(lower + upper), 0.5 * (lower + upper), 0)
    seed = jnp.where(jnp.isfinite(seed), seed, midpoint)
    # A non-finite target becomes the seed's own pose: the solve freezes at once on the seed.
    pos = jnp.where(finite[..., None], pos, kin.point(seed, cfg.site, tcp_pos))
    if top:
        direction = jnp.where(finite[..., None], direction, _approach_axis_world(kin, seed, cfg, tcp_rot))
    if db_q is None or starts.shape[0] == 0:
        others = jnp.broadcast_to(starts, (*pos.shape[:-1], *starts.shape))
    else:
        key = jnp.concatenate([pos, cfg.seed_rot_scale * direction], -1) if top else pos
        dist = jnp.sum((key[..., None, :] - db_key) ** 2, -1)
        others = db_q[jax.lax.top_k(-dist, starts.shape[0])[1]]
    q0 = jnp.concatenate([seed[..., None, :], others], -2)
    q = ik.levenberg_marquardt(
        kin, q0, pos[..., None, :], site=cfg.site, offset=tcp_pos, approach_axis=cfg.approach_axis,
        approach_dir=direction[..., None, :], orientation_weight=cfg.orientation_weight, rotation=tcp_rot,
        damping=cfg.damping, iterations=cfg.iterations, tolerance=cfg.tolerance, lower=lower, upper=upper,
    )
    err = jnp.linalg.norm(kin.point(q, cfg.site, tcp_pos) - pos[..., None, :], axis=-1)
    valid = (err < cfg.pos_eps) & jnp.all((q >= lower) & (q <= upper), -1) & finite[..., None]
    if top:
        valid &= _tilt(_approach_axis_world(kin, q, cfg, tcp_rot), direction[..., None, :]) < cfg.rot_eps
    if cfg.selection == "nearest":
        cost = jnp.sum(weight * (q - seed[..., None, :]) ** 2, -1)
    else:
        cost = -_manipulability(kin, q, cfg.site, tcp_pos)
    # Valid candidates first, by cost; then the invalid ones by position error.
    order = jnp.lexsort((jnp.where(valid, cost, err), ~valid), axis=-1)
    return jnp.take_along_axis(valid, order, -1), jnp.take_along_axis(q, order[..., None], -2)


def _as_vector(value, name: str, n: int) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.shape != (n,):
        raise InputError(f"{name} must have shape ({n},), got {arr.shape}")
    return arr


class SO101Solver:
    """Multi-start Levenberg–Marquardt IK of one site's TCP on the SO-101 arm (jitted, batched).

    Args:
        model: MjModel holding the arm (default: the ``so101`` scene).
        joints: the solved hinge joints, in order.
        site: the end-effector site; the TCP is given in its frame.
        tcp: (4, 4) SE(3) TCP transform in the site frame (default identity).
        approach_axis: TCP axis (0, 1, 2) to point along the approach direction; None =
            position only (the SO-101 default).
        approach_dir: (3,) world approach direction for (..., 3) targets.
        num_samples: starts per target, including the caller's seed.
        selection: ``"nearest"`` or ``"manipulability"``.
        ik_nearest_weight: (n,) non-negative per-joint weights of the nearest selection.
        seed_selection: retrieve starts from the FK database (else fixed Halton samples).
        seed_db_size: entries of the FK database; retrieval costs O(batch · seed_db_size) memory.
        seed_rot_scale: metres per unit of approach-direction distance in the retrieval metric.
        user_qpos_limits: (2, n) limits intersected with the model's joint ranges.
        pos_eps: metres, rot_eps: radians: success thresholds. Remaining arguments: the LM
            parameters of :func:`so101_mjx.ik.iterative.levenberg_marquardt`.
    """

    def __init__(
        self,
        model: mujoco.MjModel | None = None,
        *,
        joints: tuple[str, ...] = ARM_JOINTS,
        site: str = EE_SITE,
        tcp=None,
        approach_axis: int | None = None,
        approach_dir=ik.DOWN,
        num_samples: int = 16,
        selection: str = "nearest",
        ik_nearest_weight=None,
        seed_selection: bool = True,
        seed_db_size: int = 4096,
        seed_rot_scale: float = 0.2,
        user_qpos_limits=None,
        pos_eps: float = 1e-3,
        rot_eps: float = 0.05,
        orientation_weight: float = ik.ORIENTATION_WEIGHT,
        damping: float = 1e-3,
        iterations: int = 30,
        tolerance: float = 1e-4,
    ):
        model = load_model("so101") if model is None else model
        self.kin = Kinematics.from_model(model, joints)
        self.kin.site_id(site)
        if not isinstance(selection, str) or selection not in SELECTIONS:
            raise InputError(f"selection must be one of {SELECTIONS}, got {selection!r}")
        if isinstance(approach_axis, bool) or approach_axis not in (None, 0, 1, 2):
            raise InputError(f"approach_axis must be None, 0, 1 or 2, got {approach_axis!r}")
        self.seed_selection = checks.flag("seed_selection", seed_selection)
        self.seed_db_size = checks.integer("seed_db_size", seed_db_size, ge=1)
        checks.fits_memory(f"seed_db_size = {self.seed_db_size}", self.seed_db_size * DB_ENTRY_BYTES, "its FK database")
        self.num_samples = self._check_samples(num_samples)
        d = _as_vector(approach_dir, "approach_dir", 3)
        if not (np.all(np.isfinite(d)) and np.any(d != 0)):
            raise InputError(f"approach_dir must be a finite nonzero direction, got {d}")
        self.approach_dir = d / np.linalg.norm(d)
        r = checks.real
        self._cfg = _Config(
            site, approach_axis, r("orientation_weight", orientation_weight, ge=0), r("damping", damping, gt=0),
            checks.integer("iterations", iterations, ge=1), r("tolerance", tolerance, gt=0), r("pos_eps", pos_eps, gt=0),
            r("rot_eps", rot_eps, gt=0), selection, r("seed_rot_scale", seed_rot_scale, ge=0))
        self._robot_lower, self._robot_upper = ik.joint_limits(model, joints)
        self._lower, self._upper = self._robot_lower, self._robot_upper
        if user_qpos_limits is not None:
            user = np.asarray(user_qpos_limits, dtype=np.float64)
            if user.shape != (2, self.dof):
                raise InputError(f"user_qpos_limits must have shape (2, {self.dof}), got {user.shape}")
            self.set_qpos_limits(np.maximum(user[0], self._lower), np.minimum(user[1], self._upper))
        self._weight = np.ones(self.dof)
        if ik_nearest_weight is not None:
            self.set_ik_nearest_weight(ik_nearest_weight)
        self._tcp = np.eye(4)
        if tcp is not None:
            self.set_tcp(tcp)
        self._db = None

    @classmethod
    def top_down(cls, model: mujoco.MjModel | None = None, **kwargs) -> SO101Solver:
        """The reference's top-down grasp task: TCP at the jaw-pad midpoint, its x axis pointing down."""
        model = load_model("so101") if model is None else model
        tcp = np.eye(4)
        tcp[:3, 3] = ik.grasp_point_offset(model, kwargs.get("site", EE_SITE))
        return cls(model, tcp=tcp, approach_axis=ik.APPROACH_AXIS, **kwargs)

    @property
    def dof(self) -> int:
        return self.kin.nq

    @property
    def selection(self) -> str:
        return self._cfg.selection

    def _check_samples(self, num_samples) -> int:
        """``num_samples`` as an int in [1, seed_db_size + 1] (the seed plus database starts)."""
        return checks.integer("num_samples", num_samples, ge=1, le=self.seed_db_size + 1)

    # -- TCP, limits, weights ------------------------------------------------------------------
    def set_tcp(self, xpos) -> None:
        """Set the (4, 4) SE(3) TCP transform in the site frame; ValueError if not finite SE(3)."""
        t = np.asarray(xpos, dtype=np.float64)
        if t.shape != (4, 4) or not np.all(np.isfinite(t)) or not is_se3(t, _POSE_ATOL):
            raise InputError(f"tcp must be a finite (4, 4) SE(3) transform (orthonormal rotation, det +1, last row "
                             f"[0, 0, 0, 1]), got shape {t.shape}: {t.tolist() if t.size <= 16 else '...'}")
        self._tcp, self._db = t.copy(), None

    def get_tcp(self) -> np.ndarray:
        """The (4, 4) TCP transform in the site frame."""
        return self._tcp.copy()

    def get_qpos_limits(self) -> dict[str, list[float]]:
        """Current limits: ``{"lower_qpos_limits": [...], "upper_qpos_limits": [...]}`` (radians)."""
        return {"lower_qpos_limits": self._lower.tolist(), "upper_qpos_limits": self._upper.tolist()}

    def set_qpos_limits(self, lower_qpos_limits, upper_qpos_limits) -> bool:
        """Replace the limits, (n,) each. Returns True; invalid limits raise InputError (never silently ignored)."""
        lo = _as_vector(lower_qpos_limits, "lower_qpos_limits", self.dof)
        hi = _as_vector(upper_qpos_limits, "upper_qpos_limits", self.dof)
        if np.any(np.isnan(lo)) or np.any(np.isnan(hi)) or np.any(lo > hi):
            raise InputError(f"qpos limits must satisfy lower <= upper, got lower={lo}, upper={hi}")
        self._lower, self._upper, self._db = lo, hi, None
        return True

    def update_with_robot_limit(self, robot_qpos_limits) -> None:
        """Intersect the limits with the robot's (n, 2) ``[lower, upper]`` limits."""
        rl = np.asarray(robot_qpos_limits, dtype=np.float64)
        if rl.shape != (self.dof, 2):
            raise InputError(f"robot_qpos_limits must have shape ({self.dof}, 2), got {rl.shape}")
        self.set_qpos_limits(np.maximum(self._lower, rl[:, 0]), np.minimum(self._upper, rl[:, 1]))

    def get_default_qpos_seed(self) -> np.ndarray:
        """The joint-range midpoint (n,) (0 for an unbounded joint)."""
        mid = 0.5 * (self._lower + self._upper)
        return np.where(np.isfinite(mid), mid, 0.0)

    def get_ik_nearest_weight(self) -> np.ndarray:
        return self._weight.copy()

    def set_ik_nearest_weight(self, ik_weight, joint_ids=None) -> bool:
        """Set the nearest-selection weights, all (n,) or those of ``joint_ids``. Returns True."""
        ids = np.arange(self.dof) if joint_ids is None else np.asarray(joint_ids)
        w = _as_vector(ik_weight, "ik_weight", len(ids))
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise InputError(f"ik_weight must be finite and non-negative, got {w}")
        weight = self._weight.copy()
        weight[ids] = w
        self._weight = weight
        return True

    # -- kinematics ------------------------------------------------------------------------------

    def _q(self, qpos) -> Array:
        q = jnp.asarray(qpos)
        if q.ndim < 1 or q.shape[-1] != self.dof:
            raise InputError(f"qpos must have shape (..., {self.dof}), got {q.shape}")
        return self.kin.check_q(q)

    def get_fk(self, qpos) -> Array:
        """TCP pose (..., 4, 4) in the world frame for joint angles ``qpos`` (..., n)."""
        q = self._q(qpos)
        return _fk(self.kin, self._cfg.site, q, jnp.asarray(self._tcp, q.dtype))

    def get_jacobian(self, qpos, locations=None, jac_type: str = "full") -> Array:
        """Geometric Jacobian of the TCP origin, or of ``locations`` (3,)/(..., 3) in the TCP frame.

        Returns (..., 6, n) ``[linear; angular]`` for ``"full"``, (..., 3, n) for ``"trans"``/``"rot"``.
        """
        if jac_type not in JAC_TYPES:
            raise InputError(f"jac_type must be one of {JAC_TYPES}, got {jac_type!r}")
        q = self._q(qpos)
        tcp = jnp.asarray(self._tcp, q.dtype)
        offset = tcp[:3, 3]
        if locations is not None:
            loc = jnp.asarray(locations, q.dtype)
            if loc.ndim < 1 or loc.shape[-1] != 3:
                raise InputError(f"locations must have shape (3,) or (..., 3), got {loc.shape}")
            offset = offset + loc @ tcp[:3, :3].T
        jac = _jacobian(self.kin, self._cfg.site, q, offset)
        return {"full": jac, "trans": jac[..., :3, :], "rot": jac[..., 3:, :]}[jac_type]

    # -- inverse kinematics ----------------------------------------------------------------------

    def _database(self) -> tuple[np.ndarray, np.ndarray]:
        """Scrambled-Halton joint samples (N, n) within the limits and their retrieval keys (N, 3 or 6)."""
        if self._db is None:
            lo = np.where(np.isfinite(self._lower), self._lower, -np.pi)
            hi = np.where(np.isfinite(self._upper), self._upper, np.pi)
            q = lo + qmc.Halton(d=self.dof, scramble=True, seed=0).random(self.seed_db_size) * (hi - lo)
            with jax.ensure_compile_time_eval():  # concrete even when get_ik is being traced
                pose = np.asarray(self.get_fk(q))
            key = pose[:, :3, 3]
            if self._cfg.approach_axis is not None:
                key = np.concatenate([key, self._cfg.seed_rot_scale * pose[:, :3, self._cfg.approach_axis]], -1)
            self._db = (q, key)
        return self._db

    def get_ik(self, target, qpos_seed=None, num_samples: int | None = None, return_all_solutions: bool = False):
        """Solve IK for TCP ``target`` (..., 3) positions or (..., 4, 4) poses.

        Args:
            qpos_seed: (n,) or (..., n) starts of slot 0 and reference of the nearest selection;
                default :meth:`get_default_qpos_seed`.
            num_samples: starts per target (default ``self.num_samples``).
            return_all_solutions: return every candidate instead of the selected one.

        Returns:
            ``(success (...), qpos (..., n))``, or with ``return_all_solutions``
            ``(valid (..., K), qpos (..., K, n))`` ordered best first (K = num_samples).
        """
        t = jnp.asarray(target)
        if not jnp.issubdtype(t.dtype, jnp.floating):
            t = t.astype(jnp.result_type(float))
        if t.ndim >= 2 and t.shape[-2:] == (4, 4):
            pos = jnp.where(is_se3(t, pose_tolerance(t.dtype))[..., None], t[..., :3, 3], jnp.nan)  # not a pose: solved as non-finite
            axis = self._cfg.approach_axis
            direction = t[..., :3, axis] if axis is not None else jnp.zeros_like(pos)
        elif t.ndim >= 1 and t.shape[-1] == 3:
            pos, direction = t, jnp.broadcast_to(jnp.asarray(self.approach_dir, t.dtype), t.shape)
        else:
            raise InputError(f"target must have shape (..., 3) or (..., 4, 4), got {t.shape}")
        dt = pos.dtype
        seed = jnp.asarray(self.get_default_qpos_seed() if qpos_seed is None else qpos_seed, dt)
        if seed.ndim < 1 or seed.shape[-1] != self.dof:
            raise InputError(f"qpos_seed must have shape ({self.dof},) or (..., {self.dof}), got {seed.shape}")
        try:
            batch = jnp.broadcast_shapes(pos.shape[:-1], seed.shape[:-1])
        except ValueError as err:
            raise InputError(f"qpos_seed batch {seed.shape[:-1]} does not broadcast with target batch {pos.shape[:-1]}") from err
        k = self._check_samples(self.num_samples if num_samples is None else num_samples)
        if self.seed_selection:  # the retrieval: each target's distance to every database entry
            checks.fits_memory(f"seed_db_size = {self.seed_db_size} for targets {batch}", np.prod(batch) * self.seed_db_size * RETRIEVAL_BYTES, "distances")
        db_q, db_key = self._database()
        starts = jnp.asarray(db_q[: k - 1], dt)
        valid, q = _solve(
            self.kin, self._cfg, jnp.broadcast_to(pos, (*batch, 3)), jnp.broadcast_to(direction, (*batch, 3)),
            jnp.broadcast_to(seed, (*batch, self.dof)), jnp.asarray(self._lower, dt), jnp.asarray(self._upper, dt),
            jnp.asarray(self._tcp[:3, 3], dt), jnp.asarray(self._tcp[:3, :3], dt), jnp.asarray(self._weight, dt),
            starts, jnp.asarray(db_q, dt) if self.seed_selection else None,
            jnp.asarray(db_key, dt) if self.seed_selection else None,
        )
        return (valid, q) if return_all_solutions else (valid[..., 0], q[..., 0, :])
