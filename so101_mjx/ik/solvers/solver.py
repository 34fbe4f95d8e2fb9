"""Batched multi-start IK for the SO-101: the ``PytorchSolver`` role of the EmbodiChain solver interface.

:class:`SO101Solver` runs damped least squares (:mod:`so101_mjx.ik.solvers.multistart`) with a tool centre
point (TCP), joint limits, multi-start seeding and solution selection:

- targets: (..., 3) TCP positions, or (..., 4, 4) TCP poses in the chain root's frame. With
  ``is_only_position_constraint`` (``approach_axis=None``, the SO-101 default) a pose's rotation is
  ignored. Otherwise a pose's full rotation is solved and checked (roll included: success needs
  the rotation within ``rot_eps``; 5 DoF reach only some 6-D poses, the others fail), and for
  (..., 3) targets the TCP axis ``approach_axis`` is pointed along ``approach_dir`` (top-down
  grasping; the roll about it is then free).
- seeds: slot 0 is the caller's seed; the other ``num_samples - 1`` slots are SELIK-style database
  entries (scrambled-Halton joint samples and their FK) nearest each target (with ``seed_k_max``: the
  ``seed_k_max`` nearest, re-ranked by predicted joint-space correction); with ``seed_selection=False`` the first Halton
  samples. The database is rebuilt lazily whenever the limits, the TCP or the constraint mode change.
- selection among the valid candidates: ``"nearest"`` to the seed (weighted by ``ik_nearest_weight``) or
  ``"manipulability"`` (largest Yoshikawa √det(Jv Jvᵀ)).
- validity: position error < ``pos_eps`` (and tilt < ``rot_eps`` with an approach axis), joints within limits
  and a finite target. Non-finite targets or seeds never produce NaN joints.

Bad input: constructor arguments raise ``ValueError`` naming the argument, as does a ``seed_db_size``
whose database, or its distances to a batch of targets, would not fit the machine's memory; the
EmbodiChain boolean setters (``set_qpos_limits``, ``set_ik_nearest_weight``, ``set_iteration_params``) warn
and return False instead. Target values are never raised on (they may be traced, and one bad pose
should not sink a batch): a (4, 4) target that is not an SE(3) pose (rotation not orthonormal with
det +1 to ``max(1e-6, 100·eps)``, last row not [0, 0, 0, 1], or non-finite) is solved like a
non-finite one: ``success`` False and the seed returned.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.ik import iterative as ik
from so101_mjx.ik.solvers import multistart
from so101_mjx.ik.solvers.base import BaseSolver, in_root_frame, on_device as _on_device
from so101_mjx.ik.solvers.config import check_tcp, resolve_device
from so101_mjx.ik.solvers.multistart import SolveConfig, as_vector, is_se3, pose_tolerance, solve, tcp_fk, tcp_jacobian
from so101_mjx.robot.kinematics import Kinematics
from so101_mjx.robot.scenes import ARM_JOINTS, EE_SITE, load_model

__all__ = ["SO101Solver", "is_se3", "pose_tolerance"]
DAMP_FLOOR = 1e-9  # EmbodiChain's numerical floor of the damping: damp = 0 solves with this
ITERATION_PARAMS = ("pos_eps", "rot_eps", "max_iterations", "dt", "damp", "num_samples", "is_only_position_constraint")


def _refused(what: str, err: InputError) -> bool:
    warnings.warn(f"{what} not changed: {err}", stacklevel=3)
    return False


class SO101Solver(BaseSolver):
    """Multi-start damped least-squares IK of one site's TCP on the SO-101 arm (jitted, batched).

    Args:
        model: MjModel holding the arm (default: the ``so101`` scene).
        joints: the solved hinge joints, in order. root: the chain's root body.
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
        seed_k_max: entries fetched per target and re-ranked by predicted correction; None: the nearest
            (docs/ik.md#seeds).
        user_qpos_limits: (2, n) limits intersected with the model's joint ranges.
        pos_eps: metres, rot_eps: radians: success thresholds.
        damping: >= 0 (0 solves with the 1e-9 floor); dt > 0: step length (1 = full LM steps);
        iterations, tolerance, orientation_weight: as :func:`so101_mjx.ik.iterative.levenberg_marquardt`.
        device: JAX device or platform string (None = JAX's default, or a device a subclass set).
    """

    def __init__(
        self,
        model: mujoco.MjModel | None = None,
        *,
        joints: tuple[str, ...] = ARM_JOINTS,
        root: str = "base",
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
        seed_k_max: int | None = None,
        user_qpos_limits=None,
        pos_eps: float = 1e-3,
        rot_eps: float = 0.05,
        orientation_weight: float = ik.ORIENTATION_WEIGHT,
        damping: float = 1e-3,
        iterations: int = 30,
        tolerance: float = 1e-4,
        dt: float = 1.0,
        device=None,
    ):
        if device is not None or not hasattr(self, "device"):
            self.device = resolve_device(device)
        model = load_model("so101") if model is None else model
        if not isinstance(model, mujoco.MjModel):
            raise InputError(f"model must be a mujoco.MjModel or None, got {type(model).__name__} "
                             "(a config builds its solver with cfg.init_solver() or PytorchSolver(cfg))")
        self.kin = in_root_frame(Kinematics.from_model(model, joints, root))  # FK and targets in the root link's frame
        self.kin.site_id(site)
        if not isinstance(selection, str) or selection not in multistart.SELECTIONS:
            raise InputError(f"selection must be one of {multistart.SELECTIONS}, got {selection!r}")
        if isinstance(approach_axis, bool) or approach_axis not in (None, 0, 1, 2):
            raise InputError(f"approach_axis must be None, 0, 1 or 2, got {approach_axis!r}")
        self.seed_selection = checks.flag("seed_selection", seed_selection)
        self.seed_db_size = checks.integer("seed_db_size", seed_db_size, ge=1)
        checks.fits_memory(f"seed_db_size = {self.seed_db_size}", self.seed_db_size * multistart.DB_ENTRY_BYTES,
                           "its FK database")
        self.num_samples = self._check_samples(num_samples)
        d = as_vector(approach_dir, "approach_dir", 3)
        if not (np.all(np.isfinite(d)) and np.any(d != 0)):
            raise InputError(f"approach_dir must be a finite nonzero direction, got {d}")
        self.approach_dir = d / np.linalg.norm(d)
        r = checks.real
        self._damp = r("damping", damping, ge=0)
        self._cfg = SolveConfig(
            site, approach_axis, r("orientation_weight", orientation_weight, ge=0), max(self._damp, DAMP_FLOOR),
            checks.integer("iterations", iterations, ge=1), r("tolerance", tolerance, gt=0),
            r("pos_eps", pos_eps, gt=0),
            r("rot_eps", rot_eps, gt=0), selection, r("seed_rot_scale", seed_rot_scale, ge=0), r("dt", dt, gt=0),
            None if seed_k_max is None else checks.integer("seed_k_max", seed_k_max, ge=1))
        self._robot_lower, self._robot_upper = ik.joint_limits(model, joints)
        self._lower, self._upper = self._robot_lower, self._robot_upper
        if user_qpos_limits is not None:
            user = np.asarray(user_qpos_limits, dtype=np.float64)
            if user.shape != (2, self.dof):
                raise InputError(f"user_qpos_limits must have shape (2, {self.dof}), got {user.shape}")
            self._set_limits(np.maximum(user[0], self._lower), np.minimum(user[1], self._upper))
        self._weight = np.ones(self.dof)
        if ik_nearest_weight is not None:
            self._set_weight(ik_nearest_weight)
        self._tcp = np.eye(4)
        if tcp is not None:
            self.set_tcp(tcp)
        self._db: tuple[np.ndarray, np.ndarray] | None = None

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

    @property
    def is_only_position_constraint(self) -> bool:
        """True when only the TCP position is constrained (no approach axis)."""
        return self._cfg.approach_axis is None

    def _check_samples(self, num_samples) -> int:
        """``num_samples`` as an int in [1, seed_db_size + 1] (the seed plus database starts)."""
        return checks.integer("num_samples", num_samples, ge=1, le=self.seed_db_size + 1)

    def get_iteration_params(self) -> dict:
        """``pos_eps``, ``rot_eps``, ``max_iterations``, ``dt``, ``damp`` (as set; 0 solves with the
        1e-9 floor), ``num_samples`` and ``is_only_position_constraint``."""
        c = self._cfg
        return {"pos_eps": c.pos_eps, "rot_eps": c.rot_eps, "max_iterations": c.iterations, "dt": c.dt,
                "damp": self._damp, "num_samples": self.num_samples,
                "is_only_position_constraint": self.is_only_position_constraint}

    def set_iteration_params(self, pos_eps: float = 5e-4, rot_eps: float = 5e-4, max_iterations: int = 1000,
                             dt: float = 0.1, damp: float = 1e-6, num_samples: int = 30,
                             is_only_position_constraint: bool = False) -> bool:
        """Set every iteration parameter (EmbodiChain's defaults); True if all are valid and set, else
        False (with a warning naming the bad one) and nothing changes. ``is_only_position_constraint=False``
        constrains the approach axis too (``approach_axis`` as set, else the TCP x axis)."""
        try:
            r = checks.real
            values: dict[str, Any] = dict(
                pos_eps=r("pos_eps", pos_eps, gt=0), rot_eps=r("rot_eps", rot_eps, gt=0),
                iterations=checks.integer("max_iterations", max_iterations, ge=1, le=2**31 - 1),
                dt=r("dt", dt, gt=0), damping=max(r("damp", damp, ge=0), DAMP_FLOOR))
            samples = self._check_samples(num_samples)
            position_only = self._check_constraint(checks.flag("is_only_position_constraint",
                                                               is_only_position_constraint))
        except InputError as err:
            return _refused("iteration parameters", err)
        axis = None if position_only else (ik.APPROACH_AXIS if self._cfg.approach_axis is None
                                           else self._cfg.approach_axis)
        if axis != self._cfg.approach_axis:
            self._db = None
        self._cfg = dataclasses.replace(self._cfg, approach_axis=axis, **values)
        self._damp, self.num_samples = float(damp), samples
        return True

    def _check_constraint(self, position_only: bool) -> bool:
        """The constraint mode this solver can take (all here; subclasses with a fixed mode refuse the other)."""
        return position_only

    # -- TCP, limits, weights ------------------------------------------------------------------
    def set_tcp(self, xpos) -> None:
        """Set the (4, 4) SE(3) TCP transform in the site frame; ValueError if not finite SE(3)."""
        self._tcp, self._db = check_tcp(xpos), None

    def get_tcp(self) -> np.ndarray:
        """The (4, 4) TCP transform in the site frame."""
        return self._tcp.copy()

    def get_qpos_limits(self) -> dict[str, list[float]]:
        """Current limits: ``{"lower_qpos_limits": [...], "upper_qpos_limits": [...]}`` (radians)."""
        return {"lower_qpos_limits": self._lower.tolist(), "upper_qpos_limits": self._upper.tolist()}

    def _set_limits(self, lower_qpos_limits, upper_qpos_limits) -> None:
        lo = as_vector(lower_qpos_limits, "lower_qpos_limits", self.dof)
        hi = as_vector(upper_qpos_limits, "upper_qpos_limits", self.dof)
        if np.any(np.isnan(lo)) or np.any(np.isnan(hi)) or np.any(lo > hi):
            raise InputError(f"qpos limits must satisfy lower <= upper, got lower={lo}, upper={hi}")
        self._lower, self._upper, self._db = lo, hi, None

    def set_qpos_limits(self, lower_qpos_limits, upper_qpos_limits) -> bool:
        """Replace the limits, (n,) each: True, or False (with a warning) for invalid limits, left unchanged."""
        try:
            self._set_limits(lower_qpos_limits, upper_qpos_limits)
        except (InputError, TypeError) as err:
            return _refused("qpos limits", InputError(str(err)))
        return True

    def update_with_robot_limit(self, robot_qpos_limits) -> None:
        """Intersect the limits with the robot's (n, 2) ``[lower, upper]`` limits; InputError if invalid."""
        rl = np.asarray(robot_qpos_limits, dtype=np.float64)
        if rl.shape != (self.dof, 2):
            raise InputError(f"robot_qpos_limits must have shape ({self.dof}, 2), got {rl.shape}")
        self._set_limits(np.maximum(self._lower, rl[:, 0]), np.minimum(self._upper, rl[:, 1]))

    def get_default_qpos_seed(self) -> np.ndarray:
        """The joint-range midpoint (n,) (0 for an unbounded joint)."""
        mid = 0.5 * (self._lower + self._upper)
        return np.where(np.isfinite(mid), mid, 0.0)

    def get_ik_nearest_weight(self) -> np.ndarray:
        """The (n,) nearest-selection weights."""
        return self._weight.copy()

    def _set_weight(self, ik_weight, joint_ids=None) -> None:
        ids = np.arange(self.dof) if joint_ids is None else np.asarray(joint_ids)
        if ids.dtype.kind not in "iu" or ids.ndim != 1 or np.any((ids < -self.dof) | (ids >= self.dof)):
            raise InputError(f"joint_ids must be None or integer indices in [0, {self.dof}), got {joint_ids!r}")
        w = as_vector(ik_weight, "ik_weight", len(ids))
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise InputError(f"ik_weight must be finite and non-negative, got {w}")
        weight = self._weight.copy()
        weight[ids] = w
        self._weight = weight

    def set_ik_nearest_weight(self, ik_weight, joint_ids=None) -> bool:
        """Set the nearest-selection weights, all (n,) or those of ``joint_ids``: True, or False (with a
        warning) for invalid weights or indices, left unchanged."""
        try:
            self._set_weight(ik_weight, joint_ids)
        except (InputError, TypeError) as err:
            return _refused("ik_nearest_weight", InputError(str(err)))
        return True

    # -- kinematics ------------------------------------------------------------------------------
    def _q(self, qpos) -> Array:
        q = jnp.asarray(qpos)
        if q.ndim < 1 or q.shape[-1] != self.dof:
            raise InputError(f"qpos must have shape (..., {self.dof}), got {q.shape}")
        return self.kin.check_q(q)

    @_on_device
    def get_fk(self, qpos) -> Array:
        """TCP pose (..., 4, 4) in the world frame for joint angles ``qpos`` (..., n)."""
        q = self._q(qpos)
        return tcp_fk(self.kin, self._cfg.site, q, jnp.asarray(self._tcp, q.dtype))

    @_on_device
    def get_all_fk(self, qpos) -> list[Array]:
        """Poses (..., 4, 4) of the links from the root to the end link: each body on the chain, then
        the end site's frame (no TCP) unless it is the last body's own frame."""
        q = self._q(qpos)
        xpos, xrot = self.kin.forward(q)
        s = self.kin.site_id(self._cfg.site)
        chain: list[int] = []
        b = self.kin.site_body[s]
        while b >= 0:
            chain.insert(0, b)
            b = self.kin.body_parent[b]
        frames = [(xpos[..., b, :], xrot[..., b, :, :]) for b in chain]
        if np.any(self.kin.site_pos[s] != 0) or np.any(self.kin.site_rot[s] != np.eye(3)):
            frames.append(self.kin.site_pose(q, self._cfg.site))
        bottom = jnp.broadcast_to(jnp.asarray([0, 0, 0, 1], q.dtype), (*q.shape[:-1], 1, 4))
        return [jnp.concatenate([jnp.concatenate([r, p[..., None]], -1), bottom], -2) for p, r in frames]

    @_on_device
    def get_jacobian(self, qpos, locations=None, jac_type: str = "full") -> Array:
        """Geometric Jacobian of the TCP origin, or of ``locations`` (3,)/(..., 3) in the TCP frame.

        Returns (..., 6, n) ``[linear; angular]`` for ``"full"``, (..., 3, n) for ``"trans"``/``"rot"``.
        """
        if jac_type not in multistart.JAC_TYPES:
            raise InputError(f"jac_type must be one of {multistart.JAC_TYPES}, got {jac_type!r}")
        q = self._q(qpos)
        tcp = jnp.asarray(self._tcp, q.dtype)
        offset = tcp[:3, 3]
        if locations is not None:
            loc = jnp.asarray(locations, q.dtype)
            if loc.ndim < 1 or loc.shape[-1] != 3:
                raise InputError(f"locations must have shape (3,) or (..., 3), got {loc.shape}")
            offset = offset + loc @ tcp[:3, :3].T
        jac = tcp_jacobian(self.kin, self._cfg.site, q, offset)
        return {"full": jac, "trans": jac[..., :3, :], "rot": jac[..., 3:, :]}[jac_type]

    # -- inverse kinematics ----------------------------------------------------------------------
    def _database(self) -> tuple[np.ndarray, np.ndarray]:
        """Scrambled-Halton joint samples (N, n) within the limits and their retrieval keys (N, 3 or 6)."""
        if self._db is None:
            q = multistart.halton_samples(self._lower, self._upper, self.seed_db_size)
            with jax.ensure_compile_time_eval():  # concrete even when get_ik is being traced
                pose = np.asarray(self.get_fk(q))
            key = pose[:, :3, 3]
            if self._cfg.approach_axis is not None:
                key = np.concatenate([key, self._cfg.seed_rot_scale * pose[:, :3, self._cfg.approach_axis]], -1)
            self._db = (q, key)
        return self._db

    @_on_device
    def get_ik(self, target, qpos_seed=None, num_samples: int | None = None, return_all_solutions: bool = False):
        """Solve IK for TCP ``target`` (..., 3) positions or (..., 4, 4) poses.

        Args:
            qpos_seed: (n,) or (..., n) starts of slot 0 and reference of the nearest selection;
                default :meth:`get_default_qpos_seed`.
            num_samples: starts per target (default ``self.num_samples``).
            return_all_solutions: return every candidate instead of the selected one.

        Returns:
            ``(success (...), qpos (..., n))``, or with ``return_all_solutions``
            ``(valid (..., K), qpos (..., K, n))`` ordered best first (K = num_samples). One (4, 4)
            pose is a batch of one (the interface's ``(num_envs,)``): ``(1,)`` and ``(1, n)``.
        """
        t = jnp.asarray(target)
        if not jnp.issubdtype(t.dtype, jnp.floating):
            t = t.astype(jnp.result_type(float))
        t, rot = (t[None] if t.shape == (4, 4) else t), None  # one pose is one environment: (1,) and (1, n)
        if t.ndim >= 2 and t.shape[-2:] == (4, 4):
            # not a pose: solved as non-finite
            pos = jnp.where(is_se3(t, pose_tolerance(t.dtype))[..., None], t[..., :3, 3], jnp.nan)
            axis = self._cfg.approach_axis
            direction = t[..., :3, axis] if axis is not None else jnp.zeros_like(pos)
            rot = None if axis is None else t[..., :3, :3]
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
            raise InputError(f"qpos_seed batch {seed.shape[:-1]} does not broadcast with target batch "
                             f"{pos.shape[:-1]}") from err
        k = self._check_samples(self.num_samples if num_samples is None else num_samples)
        if self.seed_selection:  # the retrieval: each target's distance to every database entry
            checks.fits_memory(f"seed_db_size = {self.seed_db_size} for targets {batch}",
                               math.prod(batch) * self.seed_db_size * multistart.RETRIEVAL_BYTES, "distances")
        db_q, db_key = self._database()
        starts = jnp.asarray(db_q[: k - 1], dt)
        valid, q = solve(
            self.kin, self._cfg, jnp.broadcast_to(pos, (*batch, 3)), jnp.broadcast_to(direction, (*batch, 3)),
            jnp.broadcast_to(seed, (*batch, self.dof)), jnp.asarray(self._lower, dt), jnp.asarray(self._upper, dt),
            jnp.asarray(self._tcp[:3, 3], dt), jnp.asarray(self._tcp[:3, :3], dt), jnp.asarray(self._weight, dt),
            starts, jnp.asarray(db_q, dt) if self.seed_selection else None,
            jnp.asarray(db_key, dt) if self.seed_selection else None,
            None if rot is None else jnp.broadcast_to(rot, (*batch, 3, 3)))
        return (valid, q) if return_all_solutions else (valid[..., 0], q[..., 0, :])
