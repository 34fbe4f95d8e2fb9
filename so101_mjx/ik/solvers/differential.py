"""``DifferentialSolver``: batched differential IK of the TCP (the EmbodiChain solver interface's
``DifferentialSolver``).

Each iteration maps the TCP's task-space error through an inverse of the geometric Jacobian
(``ik_method``): ``"pinv"`` (pseudoinverse, gain ``k_val``), ``"svd"`` (pseudoinverse dropping
singular values below ``min_singular_value``), ``"trans"`` (transpose, gain ``k_val``) or ``"dls"``
(damped least squares, ``lambda_val``). ``command_type="position"`` tracks the TCP position with the
Jacobian's linear rows; ``"pose"`` tracks position and the world-frame rotation error (a 5-DoF arm
reaches only the poses its chain allows; elsewhere the step is the least-squares compromise).

As an action space (teleoperation, policies): :meth:`DifferentialSolver.set_command` takes a
``(num_envs, action_dim)`` command, absolute or relative to the current TCP pose
(``use_relative_mode``), and ``get_ik(None, qpos_seed=current_qpos, jacobian=J)`` returns the joint
targets that move towards it (``max_iterations=1``: one differential step, the simulator's Jacobian).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import partial
from typing import ClassVar, Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.ik import iterative as ik, pose as P
from so101_mjx.ik.solvers.chain_config import ChainCfg
from so101_mjx.ik.solvers.chain_solver import CfgSolver
from so101_mjx.robot import rotations as R

IK_METHODS = ("pinv", "svd", "trans", "dls")
COMMAND_TYPES = ("position", "pose")
DEFAULT_IK_PARAMS = {"pinv": {"k_val": 1.0}, "svd": {"k_val": 1.0, "min_singular_value": 1e-5},
                     "trans": {"k_val": 1.0}, "dls": {"lambda_val": 0.01}}


def delta_joint_pos(jacobian: Array, delta_pose: Array, method: str, params: dict) -> Array:
    """Joint displacement (..., n) for a task-space error ``delta_pose`` (..., m) through the
    Jacobian (..., m, n) by ``method`` (one of :data:`IK_METHODS`) with its ``params``."""
    err = delta_pose[..., None]
    jt = jnp.swapaxes(jacobian, -1, -2)
    if method == "pinv":
        return params["k_val"] * (jnp.linalg.pinv(jacobian) @ err)[..., 0]
    if method == "svd":
        u, s, vh = jnp.linalg.svd(jacobian, full_matrices=False)
        s_inv = jnp.where(s > params["min_singular_value"], 1 / jnp.where(s > 0, s, 1), 0)
        pinv = jnp.swapaxes(vh, -1, -2) @ (s_inv[..., None] * jnp.swapaxes(u, -1, -2))
        return params["k_val"] * (pinv @ err)[..., 0]
    if method == "trans":
        return params["k_val"] * (jt @ err)[..., 0]
    if method == "dls":
        m = jacobian.shape[-2]
        gram = jacobian @ jt + params["lambda_val"] ** 2 * jnp.eye(m, dtype=jacobian.dtype)
        return (jt @ jnp.linalg.solve(gram, err))[..., 0]
    raise InputError(f"ik_method must be one of {IK_METHODS}, got {method!r}")


@dataclass
class DifferentialSolverCfg(ChainCfg):
    """Configuration of :class:`DifferentialSolver` (the EmbodiChain solver interface's ``DifferentialSolverCfg``).

    Attributes (beyond :class:`~so101_mjx.ik.solvers.config.SolverCfg`'s):
        pos_eps: metres, rot_eps: Frobenius norm of the rotation-matrix difference: convergence.
        max_iterations: differential steps per :meth:`DifferentialSolver.get_ik` at most.
        is_only_position_constraint: converge on position alone.
        command_type: ``"position"`` (x, y, z) or ``"pose"`` (x, y, z, qx, qy, qz, qw).
        use_relative_mode: commands are offsets from the current TCP pose (pose: (dx, dy, dz, rotation vector)).
        ik_method: one of :data:`IK_METHODS`; ik_params: its parameters, merged over :data:`DEFAULT_IK_PARAMS`.
        clamp_to_limits: keep every iterate within the joint limits (the interface's solver does not;
            False restores that: joints may leave the limits).
    """

    solver_class: ClassVar[type | None] = None  # set below

    class_type: str = "DifferentialSolver"
    pos_eps: float = 5e-4
    rot_eps: float = 5e-4
    max_iterations: int = 1000
    is_only_position_constraint: bool = False
    command_type: Literal["position", "pose"] = "pose"
    use_relative_mode: bool = False
    ik_method: Literal["pinv", "svd", "trans", "dls"] = "pinv"
    ik_params: dict | None = field(default=None)
    clamp_to_limits: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.ik_method not in IK_METHODS:
            raise InputError(f"ik_method must be one of {IK_METHODS}, got {self.ik_method!r}")
        if self.command_type not in COMMAND_TYPES:
            raise InputError(f"command_type must be one of {COMMAND_TYPES}, got {self.command_type!r}")
        self.ik_params = _ik_params(self.ik_method, self.ik_params)
        self.pos_eps = checks.real("pos_eps", self.pos_eps, gt=0)
        self.rot_eps = checks.real("rot_eps", self.rot_eps, gt=0)
        self.max_iterations = checks.integer("max_iterations", self.max_iterations, ge=1)
        for name in ("is_only_position_constraint", "use_relative_mode", "clamp_to_limits"):
            setattr(self, name, checks.flag(name, getattr(self, name)))

    def solver_kwargs(self) -> dict:
        return dict(pos_eps=self.pos_eps, rot_eps=self.rot_eps, iterations=self.max_iterations, seed_selection=False,
                    approach_axis=None if self.is_only_position_constraint else ik.APPROACH_AXIS)

    # the EmbodiChain solver interface's signature, num_envs first: a positional device would be num_envs here
    def init_solver(self, num_envs: int = 1, device=None, **kwargs) -> DifferentialSolver:  # type: ignore[override]
        """A :class:`DifferentialSolver` for ``num_envs`` environments on ``device`` (default the CPU)."""
        return DifferentialSolver(self, num_envs=num_envs, device="cpu" if device is None else device, **kwargs)


def _ik_params(method: str, params) -> dict:
    """``params`` over the method's defaults, each a finite number (gains and thresholds >= 0)."""
    if params is not None and not isinstance(params, dict):
        raise InputError(f"ik_params must be None or a dict, got {params!r}")
    merged = {**DEFAULT_IK_PARAMS[method], **(params or {})}
    unknown = set(merged) - set(DEFAULT_IK_PARAMS[method])
    if unknown:
        raise InputError(f"ik_params for ik_method {method!r} takes {sorted(DEFAULT_IK_PARAMS[method])}, got "
                         f"{sorted(unknown)}")
    return {k: checks.real(f"ik_params[{k!r}]", v, ge=0) for k, v in merged.items()}


@dataclass(frozen=True)
class _Static:
    """The compile-time part of a differential solve."""

    site: str
    position_command: bool  # track position only (linear Jacobian rows)
    position_converge: bool  # converge on position only
    method: str
    params: tuple[tuple[str, float], ...]
    pos_eps: float
    rot_eps: float
    max_iterations: int
    clamp: bool
    given_jacobian: bool


def _tcp(kin, st: _Static, q: Array, tcp: Array) -> tuple[Array, Array, Array]:
    """TCP position (..., 3), rotation (..., 3, 3) and [linear; angular] Jacobian (..., 6, n) at ``q``."""
    p, rot, jacp, jacr = kin.site_kinematics(q, st.site, tcp[:3, 3])
    return p, rot @ tcp[:3, :3], jnp.concatenate([jacp, jacr], -2)


@partial(jax.jit, static_argnums=(0, 1))
def _solve(kin, st: _Static, pos, rot, finite, seed, jac0, lower, upper, tcp):
    """Differential steps from ``seed`` (..., n) towards TCP ``pos`` (..., 3) / ``rot`` (..., 3, 3).

    A world stops (keeps its joints) once converged; the loop ends when all have or after
    ``max_iterations``. ``jac0`` (..., 6, n), if ``st.given_jacobian``, replaces the first step's
    Jacobian. Returns success (...) and joints (..., n).
    """
    params = dict(st.params)

    def converged(q):
        p, r, _ = _tcp(kin, st, q, tcp)
        ok = jnp.linalg.norm(p - pos, axis=-1) < st.pos_eps
        if not st.position_converge:
            ok &= jnp.linalg.norm(r - rot, axis=(-2, -1)) < st.rot_eps
        return ok

    def step(carry):
        i, q, done = carry
        p, r, jac = _tcp(kin, st, q, tcp)
        if st.given_jacobian:
            jac = jnp.where(i == 0, jac0, jac)
        if st.position_command:
            dq = delta_joint_pos(jac[..., :3, :], pos - p, st.method, params)
        else:
            dq = delta_joint_pos(jac, jnp.concatenate([pos - p, R.rotation_error(r, rot)], -1), st.method, params)
        new = q + dq
        if st.clamp:
            new = jnp.clip(new, lower, upper)
        new = jnp.where(jnp.all(jnp.isfinite(new), -1, keepdims=True), new, q)
        q = jnp.where(done[..., None], q, new)
        return i + 1, q, done | (converged(q) & finite)

    def more(carry):
        i, _, done = carry
        return (i < st.max_iterations) & ~jnp.all(done)

    done0 = jnp.zeros(finite.shape, bool) | ~finite  # a non-finite target never moves its seed
    _, q, done = jax.lax.while_loop(more, step, (0, seed, done0))
    return done & finite, q


class DifferentialSolver(CfgSolver):
    """Differential IK of the TCP for ``num_envs`` environments (the EmbodiChain solver interface's
    ``DifferentialSolver``).

    Args:
        cfg: :class:`DifferentialSolverCfg` (None = its defaults).
        num_envs: rows of the command buffers ``ee_pos_des`` (num_envs, 3), ``ee_quat_des``
            (num_envs, 4) ``xyzw`` and the last command (num_envs, action_dim).
        device: JAX device or platform string.
    """

    cfg_class = DifferentialSolverCfg

    def __init__(self, cfg: DifferentialSolverCfg | None = None, num_envs: int = 1, device=None, **kwargs):
        super().__init__(cfg, device, **kwargs)
        self.num_envs = checks.integer("num_envs", num_envs, ge=1)
        self._resize(self.num_envs)

    @property
    def action_dim(self) -> int:
        """Command size: 3 for positions, 6 for relative poses (dx, dy, dz, rotation vector), 7 for
        absolute poses (x, y, z, qx, qy, qz, qw)."""
        if self.cfg.command_type == "position":
            return 3
        return 6 if self.cfg.use_relative_mode else 7

    def _resize(self, n: int) -> None:
        self.ee_pos_des = jnp.zeros((n, 3))
        self.ee_quat_des = jnp.tile(jnp.asarray([0.0, 0.0, 0.0, 1.0]), (n, 1))
        self._command = jnp.zeros((n, self.action_dim))

    def reset(self, env_ids=None) -> None:
        """Zero the desired position and command and set the desired orientation to identity for
        ``env_ids`` (integer indices; None = all)."""
        n = self._command.shape[0]
        ids = np.arange(n) if env_ids is None else np.asarray(env_ids)
        if ids.dtype.kind not in "iu" or ids.ndim > 1 or np.any((ids < -n) | (ids >= n)):
            raise InputError(f"env_ids must be None or integer indices in [0, {n}), got {env_ids!r}")
        self.ee_pos_des = self.ee_pos_des.at[ids].set(0.0)
        self.ee_quat_des = self.ee_quat_des.at[ids].set(jnp.asarray([0.0, 0.0, 0.0, 1.0]))
        self._command = self._command.at[ids].set(0.0)

    def set_command(self, command, ee_pos=None, ee_quat=None) -> bool:
        """Set the desired TCP pose from ``command`` (B, action_dim); the buffers follow B.

        Position commands keep the orientation ``ee_quat`` (B, 4) ``xyzw``, relative ones add to the
        current ``ee_pos`` (B, 3); relative pose commands rotate ``ee_quat`` by their world-frame
        rotation vector. Returns False, with a warning, when a pose the mode needs is missing.
        """
        cmd = jnp.asarray(command)
        if cmd.ndim != 2 or cmd.shape[1] != self.action_dim:
            raise InputError(f"command must have shape (num_envs, {self.action_dim}), got {cmd.shape}")
        if not jnp.issubdtype(cmd.dtype, jnp.floating):
            cmd = cmd.astype(jnp.result_type(float))
        relative, position = self.cfg.use_relative_mode, self.cfg.command_type == "position"
        need = (("ee_quat", "ee_pos") if position and relative else ("ee_quat",) if position
                else ("ee_pos", "ee_quat") if relative else ())
        missing = [name for name, v in (("ee_pos", ee_pos), ("ee_quat", ee_quat)) if name in need and v is None]
        if missing:
            warnings.warn(f"set_command: {' and '.join(missing)} required for {'relative ' if relative else ''}"
                          f"{self.cfg.command_type} commands; command ignored", stacklevel=2)
            return False
        if cmd.shape[0] != self._command.shape[0]:
            self._resize(cmd.shape[0])
        self._command = cmd
        pos = None if ee_pos is None else jnp.broadcast_to(jnp.asarray(ee_pos, cmd.dtype), (cmd.shape[0], 3))
        quat = None if ee_quat is None else jnp.broadcast_to(jnp.asarray(ee_quat, cmd.dtype), (cmd.shape[0], 4))
        if position and relative:
            assert pos is not None and quat is not None  # both in `need`, checked above
            self.ee_pos_des, self.ee_quat_des = pos + cmd, quat
        elif position:
            assert quat is not None  # in `need`, checked above
            self.ee_pos_des, self.ee_quat_des = cmd, quat
        elif relative:
            assert pos is not None and quat is not None  # both in `need`, checked above
            self.ee_pos_des, self.ee_quat_des = P.apply_delta_pose(pos, quat, cmd)
        else:
            self.ee_pos_des, self.ee_quat_des = cmd[:, :3], cmd[:, 3:7]
        return True

    def get_ik(self, target_xpos=None, qpos_seed=None, return_all_solutions: bool = False, jacobian=None, **kwargs):
        """Joint targets moving the TCP to ``target_xpos`` by up to ``max_iterations`` differential steps.

        Args:
            target_xpos: (..., 4, 4) TCP poses, (..., 3) positions (position only), or None = the
                pose of the last :meth:`set_command` (num_envs rows). A pose target becomes the
                desired pose ``ee_pos_des`` / ``ee_quat_des`` when its batch is (B,).
            qpos_seed: current joints (..., n); default zeros. A non-finite entry counts as 0.
            return_all_solutions: not supported (a warning; the one solution is returned).
            jacobian: (..., 6, n) TCP Jacobian at ``qpos_seed`` (e.g. the simulator's) for the first
                step; later steps use the chain's at the current joints.

        Returns:
            success (...) (converged within ``pos_eps``/``rot_eps``, finite target) and joints (..., n).
        """
        if return_all_solutions:
            warnings.warn("return_all_solutions=True is not supported by DifferentialSolver; "
                          "returning the one solution", stacklevel=2)
        pos, rot, position_only = self._target(target_xpos)
        dt = pos.dtype
        seed = jnp.zeros(self.dof, dt) if qpos_seed is None else self._q(qpos_seed).astype(dt)
        seed = jnp.where(jnp.isfinite(seed), seed, 0.0)
        batch = self._broadcast(pos.shape[:-1], seed.shape[:-1], None if jacobian is None else jnp.shape(jacobian)[:-2])
        jac0 = jnp.zeros((*batch, 6, self.dof), dt) if jacobian is None else jnp.asarray(jacobian, dt)
        if jac0.shape[-2:] != (6, self.dof):
            raise InputError(f"jacobian must have shape (..., 6, {self.dof}), got {jac0.shape}")
        finite = jnp.all(jnp.isfinite(pos), -1) & jnp.all(jnp.isfinite(rot), (-2, -1))
        seed_pose = self.get_fk(seed)
        pos = jnp.where(finite[..., None], pos, seed_pose[..., :3, 3])
        rot = jnp.where(finite[..., None, None], rot, seed_pose[..., :3, :3])
        cfg, it = self.cfg, self._cfg  # the iteration parameters live in the base (set_iteration_params)
        st = _Static(it.site, position_only or cfg.command_type == "position",
                     position_only or self.is_only_position_constraint, cfg.ik_method,
                     tuple(sorted(cfg.ik_params.items())),
                     it.pos_eps, it.rot_eps, it.iterations, cfg.clamp_to_limits, jacobian is not None)
        b = lambda x, tail: jnp.broadcast_to(x, (*batch, *tail))  # noqa: E731
        with jax.default_device(self.device):
            return _solve(self.kin, st, b(pos, (3,)), b(rot, (3, 3)), b(finite, ()), b(seed, (self.dof,)),
                          b(jac0, (6, self.dof)), jnp.asarray(self._lower, dt), jnp.asarray(self._upper, dt),
                          jnp.asarray(self._tcp, dt))

    def _target(self, target_xpos) -> tuple[Array, Array, bool]:
        """Target positions (..., 3), rotations (..., 3, 3) and whether only the position is given."""
        if target_xpos is None:
            return self.ee_pos_des, P.quat_to_matrix(self.ee_quat_des), False
        t = jnp.asarray(target_xpos)
        if not jnp.issubdtype(t.dtype, jnp.floating):
            t = t.astype(jnp.result_type(float))
        if t.ndim >= 1 and t.shape[-1] == 3 and not (t.ndim >= 2 and t.shape[-2:] == (4, 4)):
            return t, jnp.broadcast_to(jnp.eye(3, dtype=t.dtype), (*t.shape[:-1], 3, 3)), True
        if t.ndim < 2 or t.shape[-2:] != (4, 4):
            raise InputError(f"target_xpos must have shape (..., 4, 4), (..., 3) or be None, got {t.shape}")
        if t.ndim == 3:
            self.ee_pos_des, self.ee_quat_des = t[:, :3, 3], P.matrix_to_quat(t[:, :3, :3])
        return t[..., :3, 3], t[..., :3, :3], False

    @staticmethod
    def _broadcast(*shapes) -> tuple[int, ...]:
        try:
            return jnp.broadcast_shapes(*(s for s in shapes if s is not None))
        except ValueError as err:
            raise InputError(f"target_xpos, qpos_seed and jacobian batches {[s for s in shapes if s is not None]} "
                             "do not broadcast") from err


DifferentialSolverCfg.solver_class = DifferentialSolver
