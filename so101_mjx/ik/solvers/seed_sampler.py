"""Multi-start IK seeds: uniform (:class:`QposSeedSampler`) and SELIK-style retrieval from an FK
database (:class:`QposSeedSelSampler`), as the solver interface's samplers (the EmbodiChain solver interface's Seed
Selection).

The database holds scrambled-Sobol joint samples within the limits and their FK poses. A target's
``k_max`` nearest entries under the pose metric ``|Δp|² + (rot_scale·θ)²`` (θ approximated by the
chordal distance of the rotations, ``‖ΔR‖_F / √2``) are fetched, then, given a Jacobian, re-ranked
by the length of the predicted joint-space correction ``‖pinv(J) e‖`` (position rows and
``rot_scale``-weighted rotation rows) and the best kept. :func:`nearest` and :func:`correction`
are the jitted pieces :class:`~so101_mjx.ik.solvers.solver.SO101Solver` shares.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from scipy.stats import qmc

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.ik.solvers.config import resolve_device


def nearest(db_key: Array, key: Array, k: int) -> Array:
    """Indices (..., k) of the ``k`` rows of ``db_key`` (N, m) nearest each ``key`` (..., m), nearest first."""
    dist = jnp.sum((key[..., None, :] - db_key) ** 2, -1)
    return jax.lax.top_k(-dist, k)[1]


def correction(err: Array, jac: Array) -> Array:
    """Length (...) of the least-squares joint step ``pinv(jac) err`` for ``err`` (..., m), ``jac`` (..., m, n)."""
    step = jnp.einsum("...ij,...j->...i", jnp.linalg.pinv(jac), err)
    return jnp.linalg.norm(step, axis=-1)


def _rotvec(rot: Array) -> Array:
    """Rotation vector (..., 3) of rotation matrices (..., 3, 3): angle in [0, π] about the axis
    (the axis of a half turn is not recovered; the ranking only needs the angle there)."""
    v = 0.5 * jnp.stack([rot[..., 2, 1] - rot[..., 1, 2], rot[..., 0, 2] - rot[..., 2, 0],
                         rot[..., 1, 0] - rot[..., 0, 1]], -1)
    s = jnp.linalg.norm(v, axis=-1)
    angle = jnp.arctan2(s, 0.5 * (jnp.trace(rot, axis1=-2, axis2=-1) - 1))
    return v * jnp.where(s > 1e-12, angle / jnp.where(s > 1e-12, s, 1), 1)[..., None]


def _pose_key(pose: Array, rot_scale: float) -> Array:
    """Retrieval keys (..., 12) of poses (..., 4, 4): position and the scaled, flattened rotation."""
    rot = pose[..., :3, :3].reshape(*pose.shape[:-2], 9)
    return jnp.concatenate([pose[..., :3, 3], rot_scale / np.sqrt(2) * rot], -1)


class QposSeedSampler:
    """Uniform multi-start seeds within the joint limits.

    Args:
        num_samples: seeds per target (including the caller's seed).
        dof: degrees of freedom.
        device: JAX device of the returned seeds (None = JAX's default; see
            :func:`~so101_mjx.ik.solvers.config.resolve_device`).
        use_caller_seed: slot 0 of each target's seeds is the caller's seed.
        sobol_seed: seed of the random draws (and of the database's scramble in the subclass).
    """

    def __init__(self, num_samples: int, dof: int, device=None, *, use_caller_seed: bool = True, sobol_seed: int = 0):
        self.num_samples = checks.integer("num_samples", num_samples, ge=1)
        self.dof = checks.integer("dof", dof, ge=1)
        self.device = resolve_device(device)
        self.use_caller_seed = checks.flag("use_caller_seed", use_caller_seed)
        self.sobol_seed = checks.integer("sobol_seed", sobol_seed, ge=0)
        self._rng = np.random.default_rng(self.sobol_seed)

    def _inputs(self, qpos_seed, lower_limits, upper_limits, batch_size) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Checked ``(seed (B, dof), lower (dof,), upper (dof,))``; infinite bounds become ±π."""
        batch_size = checks.integer("batch_size", batch_size, ge=1)
        seed = np.asarray(qpos_seed, np.float64)
        if seed.shape not in ((self.dof,), (batch_size, self.dof)):
            raise InputError(f"qpos_seed must have shape ({self.dof},) or ({batch_size}, {self.dof}), got {seed.shape}")
        lo, hi = (np.asarray(x, np.float64) for x in (lower_limits, upper_limits))
        if lo.shape != (self.dof,) or hi.shape != (self.dof,) or np.any(np.isnan(lo + hi)) or np.any(lo > hi):
            raise InputError(f"lower_limits and upper_limits must be ({self.dof},) with lower <= upper, got {lo}, {hi}")
        return (np.broadcast_to(seed, (batch_size, self.dof)), np.where(np.isfinite(lo), lo, -np.pi),
                np.where(np.isfinite(hi), hi, np.pi))

    def _uniform(self, shape: tuple[int, ...], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        return lo + self._rng.random((*shape, self.dof)) * (hi - lo)

    def _assemble(self, seed: np.ndarray, drawn) -> Array:
        """(B·num_samples, dof) target-major: each target's caller seed (if used), then its ``drawn`` (B, m, dof)."""
        parts = [seed[:, None, :], drawn] if self.use_caller_seed else [drawn]
        out = jnp.concatenate([jnp.asarray(p) for p in parts], 1)
        return jax.device_put(out.reshape(-1, self.dof), self.device)

    def sample(self, qpos_seed, lower_limits, upper_limits, batch_size: int, target_xpos=None) -> Array:
        """(batch_size·num_samples, dof) seeds, target-major, slot 0 the caller's unless ``use_caller_seed=False``;
        the others uniform within the limits. ``target_xpos`` is not used here."""
        seed, lo, hi = self._inputs(qpos_seed, lower_limits, upper_limits, batch_size)
        return self._assemble(seed, self._uniform((len(seed), self.num_samples - self.use_caller_seed), lo, hi))


class QposSeedSelSampler(QposSeedSampler):
    """SELIK-style seeds retrieved from a forward-kinematics database (see the module docstring).

    Args:
        num_samples, dof, device, use_caller_seed, sobol_seed: as :class:`QposSeedSampler`.
        fk_fn: batched FK (N, dof) -> (N, 4, 4) in the frame and with the TCP of the targets.
        jacobian_fn: optional batched Jacobian (N, dof) -> (N, 6, dof) ``[linear; angular]`` of the
            same frame; given, the retrieved entries are re-ranked by predicted correction.
        db_size: database entries. rot_scale: metres per radian of the rotation block (>= 0).
        k_max: nearest entries fetched before re-ranking.
    """

    def __init__(self, num_samples: int, dof: int, device=None, *, fk_fn: Callable[[Array], Array],
                 jacobian_fn: Callable[[Array], Array] | None = None, db_size: int = 20000, rot_scale: float = 0.2,
                 k_max: int = 200, use_caller_seed: bool = True, sobol_seed: int = 0):
        super().__init__(num_samples, dof, device, use_caller_seed=use_caller_seed, sobol_seed=sobol_seed)
        if not callable(fk_fn) or (jacobian_fn is not None and not callable(jacobian_fn)):
            raise InputError("fk_fn must be callable, and jacobian_fn callable or None")
        self.fk_fn, self.jacobian_fn = fk_fn, jacobian_fn
        self.db_size = checks.integer("db_size", db_size, ge=1)
        self.rot_scale = checks.real("rot_scale", rot_scale, ge=0)
        self.k_max = checks.integer("k_max", k_max, ge=1)
        self._db: tuple[np.ndarray, np.ndarray, Array, Array] | None = None  # lower, upper, q, keys

    @property
    def database_size(self) -> int:
        """Entries of the built database, 0 before the first target-aware :meth:`sample`."""
        return 0 if self._db is None else int(self._db[2].shape[0])

    def _database(self, lo: np.ndarray, hi: np.ndarray) -> tuple[Array, Array]:
        """The database for limits (lo, hi), rebuilt when they change: joints (N, dof), keys (N, 12)."""
        if self._db is None or not (np.array_equal(self._db[0], lo) and np.array_equal(self._db[1], hi)):
            with warnings.catch_warnings():  # any db_size: the first db_size points of the sequence
                warnings.filterwarnings("ignore", "The balance properties of Sobol", UserWarning)
                unit = qmc.Sobol(d=self.dof, scramble=True, seed=self.sobol_seed).random(self.db_size)
            q = jax.device_put(jnp.asarray(lo + unit * (hi - lo)), self.device)
            pose = jnp.asarray(self.fk_fn(q))
            if pose.shape != (self.db_size, 4, 4):
                raise InputError(f"fk_fn must map ({self.db_size}, {self.dof}) joints to ({self.db_size}, 4, 4) poses, "
                                 f"got {pose.shape}")
            self._db = (lo.copy(), hi.copy(), q, _pose_key(pose, self.rot_scale))
        return self._db[2], self._db[3]

    def _rerank(self, target: Array, cand: Array) -> Array:
        """``cand`` (B, k, dof) ordered by predicted correction toward ``target`` (B, 4, 4)."""
        assert self.jacobian_fn is not None  # sample() reranks only with a Jacobian
        b, k = cand.shape[:2]
        flat = cand.reshape(b * k, self.dof)
        pose = jnp.asarray(self.fk_fn(flat)).reshape(b, k, 4, 4)
        jac = jnp.asarray(self.jacobian_fn(flat)).reshape(b, k, 6, self.dof)
        rot_err = _rotvec(target[:, None, :3, :3] @ jnp.swapaxes(pose[..., :3, :3], -1, -2))
        err = jnp.concatenate([target[:, None, :3, 3] - pose[..., :3, 3], self.rot_scale * rot_err], -1)
        jac = jnp.concatenate([jac[..., :3, :], self.rot_scale * jac[..., 3:, :]], -2)
        order = jnp.argsort(correction(err, jac), axis=-1)
        return jnp.take_along_axis(cand, order[..., None], 1)

    def sample(self, qpos_seed, lower_limits, upper_limits, batch_size: int, target_xpos=None) -> Array:
        """(batch_size·num_samples, dof) seeds, target-major, slot 0 the caller's unless ``use_caller_seed=False``.

        With ``target_xpos`` (batch_size, 4, 4) the other slots are database entries (nearest, re-ranked
        when a Jacobian is given); a shortfall (database smaller than the seeds wanted, or more wanted
        than ``k_max``) is filled with uniform draws within the limits. Without it, as :class:`QposSeedSampler`.
        """
        if target_xpos is None:
            return super().sample(qpos_seed, lower_limits, upper_limits, batch_size)
        seed, lo, hi = self._inputs(qpos_seed, lower_limits, upper_limits, batch_size)
        target = jnp.asarray(target_xpos)
        if target.shape != (len(seed), 4, 4) or not jnp.issubdtype(target.dtype, jnp.floating):
            raise InputError(f"target_xpos must be floating with shape ({len(seed)}, 4, 4), got {target.dtype} "
                             f"{target.shape}")
        want = self.num_samples - self.use_caller_seed
        db_q, db_key = self._database(lo, hi)
        k = min(self.k_max, self.db_size)
        cand = db_q[nearest(db_key, _pose_key(target.astype(db_key.dtype), self.rot_scale), k)]
        if self.jacobian_fn is not None:
            cand = self._rerank(target.astype(db_key.dtype), cand)
        cand = cand[:, :want]
        fill = self._uniform((len(seed), want - cand.shape[1]), lo, hi)
        return self._assemble(seed, jnp.concatenate([cand, jnp.asarray(fill, cand.dtype)], 1))
