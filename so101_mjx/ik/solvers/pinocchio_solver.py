"""``PinocchioSolver``: damped-least-squares IK on Pinocchio (the EmbodiChain solver interface's ``PinocchioSolver``).

Needs the ``pinocchio`` extra (``pip install "so101-mjx[pinocchio]"``), imported when a solver is
built, so ``import so101_mjx.ik`` works without it.

The Pinocchio model is built from the solver's MuJoCo model (the SO-101 MJCF, or the config's
``urdf_path`` as MuJoCo loads it): the chain's bodies, hinge axes and anchors, joint ranges,
inertias and sites, with the joints outside the solved chain (the gripper) fixed at ``qpos0``.
Its FK equals :class:`~so101_mjx.robot.kinematics.Kinematics`' to round-off.

Each target is solved from the seed, then from up to ``num_samples - 1`` further starts drawn
uniformly within the limits, until one converges: ``q ← clip(q ⊕ dt·v)`` (iterates are kept within
the limits, as :class:`~so101_mjx.ik.solvers.pink_solver.PinkSolver` keeps them; the interface's solver lets
them leave and then finds no whole-turn equivalent within the limits) with
``v = -Jᵀ(JJᵀ + damp·I)⁻¹e``, ``e`` the SE(3) log error of the end frame (``log6``, local frame),
or with ``is_only_position_constraint`` the world position error and the Jacobian's linear rows
(a 5-DoF arm cannot hold the orientation fixed while it moves, which the interface's fixed-
rotation error asks). A converged ``q`` is moved by whole turns into the limits, nearest the seed
(:meth:`PinocchioSolver.qpos_to_limits`); without such a ``q`` the next start is tried.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, ClassVar

import jax.numpy as jnp
import mujoco
import numpy as np

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.ik import iterative as ik
from so101_mjx.ik.solvers.chain_config import ChainCfg
from so101_mjx.ik.solvers.chain_solver import CfgSolver
from so101_mjx.ik.solvers.multistart import SolveConfig
from so101_mjx.robot import rotations as R
from so101_mjx.robot.kinematics import Kinematics


def import_optional(module: str, extra: str, who: str):
    """``importlib.import_module(module)``, or ImportError naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"{who} needs {module!r}: pip install \"so101-mjx[{extra}]\"") from err


def _se3(pin, rot, pos):
    return pin.SE3(np.asarray(rot, np.float64), np.asarray(pos, np.float64))


def pinocchio_model(model: mujoco.MjModel, joints: tuple[str, ...], root: str = "base"):
    """A ``pinocchio.Model`` of the chain below body ``root``: a revolute joint per name in ``joints``
    (in the model's tree order, with its range), other hinges fixed at ``qpos0``, a BODY frame per
    body and an OP_FRAME per site (named as in MuJoCo), inertias appended to their joints."""
    pin = import_optional("pinocchio", "pinocchio", "the Pinocchio model")
    pm = pin.Model()
    root_id, solved = model.body(root).id, set(joints)
    # placed so that the root link's frame is the model's origin (FK in its frame)
    parent = model.body_parentid[root_id]
    root_frame = _se3(pin, R.quat_to_mat_np(model.body_quat[root_id]), model.body_pos[root_id])
    where = {parent: (0, root_frame.inverse())}  # body -> (joint, frame)
    for b in range(model.nbody):
        if b != root_id and root_id not in _ancestors(model, b):
            continue
        jid, frame = where[model.body_parentid[b]]
        frame = frame * _se3(pin, R.quat_to_mat_np(model.body_quat[b]), model.body_pos[b])
        for j in range(model.body_jntadr[b], model.body_jntadr[b] + model.body_jntnum[b]):
            if model.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE:
                raise InputError(f"body {model.body(b).name!r}: only hinge joints are supported")
            anchor, axis = _se3(pin, np.eye(3), model.jnt_pos[j]), model.jnt_axis[j]
            if model.joint(j).name in solved:
                lo, hi = model.jnt_range[j] if model.jnt_limited[j] else (-np.inf, np.inf)
                jid = pm.addJoint(jid, pin.JointModelRevoluteUnaligned(axis), frame * anchor, model.joint(j).name,
                                  np.full(1, np.inf), np.full(1, np.inf), np.full(1, lo), np.full(1, hi))
                frame = anchor.inverse()
            else:  # held at qpos0
                turn = _se3(pin, pin.AngleAxis(model.qpos0[model.jnt_qposadr[j]], axis).matrix(), np.zeros(3))
                frame = frame * anchor * turn * anchor.inverse()
        where[b] = (jid, frame)
        _add_body(pin, pm, model, b, jid, frame)
    missing = solved - {pm.names[i] for i in range(1, pm.njoints)}
    if missing:
        raise InputError(f"joints {sorted(missing)} are not hinges below {root!r}")
    return pm


def _ancestors(model: mujoco.MjModel, b: int) -> set[int]:
    out = set()
    while b > 0:
        b = model.body_parentid[b]
        out.add(b)
    return out


def _add_body(pin, pm, model: mujoco.MjModel, b: int, jid: int, frame) -> None:
    """Body ``b``'s BODY frame, its sites' OP_FRAMEs and its inertia on joint ``jid`` at ``frame``."""
    fid = pm.addFrame(pin.Frame(model.body(b).name, jid, frame, pin.FrameType.BODY))
    for s in np.flatnonzero(model.site_bodyid == b):
        site_frame = _se3(pin, R.quat_to_mat_np(model.site_quat[s]), model.site_pos[s])
        pm.addFrame(pin.Frame(model.site(s).name, jid, fid, frame * site_frame, pin.FrameType.OP_FRAME))
    rot = R.quat_to_mat_np(model.body_iquat[b])
    inertia = pin.Inertia(model.body_mass[b], model.body_ipos[b], rot @ np.diag(model.body_inertia[b]) @ rot.T)
    pm.appendBodyToJoint(jid, inertia, frame)


@dataclass
class PinocchioIterationCfg(ChainCfg):
    """The fields :class:`PinocchioSolverCfg` and ``PinkSolverCfg`` share (the EmbodiChain solver interface), checked at
    construction.

    Attributes (beyond :class:`~so101_mjx.ik.solvers.config.SolverCfg`'s):
        mesh_path: the URDF's mesh directory (kept for the interface; the kinematics need no meshes).
        pos_eps: metres, rot_eps: radians (norms of the log error's parts): convergence.
        max_iterations: steps per start; dt: step scale; damp: DLS damping (0 = the 1e-9 floor).
        is_only_position_constraint: solve the TCP position only.
    """

    mesh_path: str | None = None
    pos_eps: float = 5e-4
    rot_eps: float = 5e-4
    max_iterations: int = 1000
    dt: float = 0.1
    damp: float = 1e-6
    is_only_position_constraint: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        r = checks.real
        self.pos_eps, self.rot_eps, self.dt = (r("pos_eps", self.pos_eps, gt=0), r("rot_eps", self.rot_eps, gt=0),
                                               r("dt", self.dt, gt=0))
        self.damp = r("damp", self.damp, ge=0)
        self.max_iterations = checks.integer("max_iterations", self.max_iterations, ge=1)
        self.is_only_position_constraint = checks.flag("is_only_position_constraint", self.is_only_position_constraint)

    def solver_kwargs(self) -> dict:
        return dict(pos_eps=self.pos_eps, rot_eps=self.rot_eps, iterations=self.max_iterations, dt=self.dt,
                    damping=self.damp, seed_selection=False,
                    approach_axis=None if self.is_only_position_constraint else ik.APPROACH_AXIS)


@dataclass
class PinocchioSolverCfg(PinocchioIterationCfg):
    """Configuration of :class:`PinocchioSolver` (the EmbodiChain solver interface's ``PinocchioSolverCfg``): the
    :class:`PinocchioIterationCfg` fields and ``num_samples``, starts per target (the seed, then
    uniform samples within the limits)."""

    solver_class: ClassVar[type | None] = None  # set below

    class_type: str = "PinocchioSolver"
    num_samples: int = 30

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mesh_path is not None and not isinstance(self.mesh_path, str):
            raise InputError(f"mesh_path must be None or a directory path, got {self.mesh_path!r}")
        self.num_samples = checks.integer("num_samples", self.num_samples, ge=1)

    def solver_kwargs(self) -> dict:
        return {**super().solver_kwargs(), "num_samples": self.num_samples}


class PinocchioChain:
    """The Pinocchio model of a :class:`~so101_mjx.ik.solvers.chain_solver.CfgSolver`'s chain (mixin)."""

    # set by the CfgSolver it is mixed into
    model: mujoco.MjModel | None
    kin: Kinematics
    cfg: Any
    _cfg: SolveConfig

    def _init_pinocchio(self, who: str, extra: str) -> None:
        """Set ``pin``, ``pin_model``, ``pin_data``, ``end_frame_id`` and the joint order map."""
        self.pin = import_optional("pinocchio", extra, who)
        self.pin_model = pinocchio_model(self.model, self.kin.joints, self.cfg.root_link_name)
        self.pin_data = self.pin_model.createData()
        self.end_frame_id = self.pin_model.getFrameId(self._cfg.site, self.pin.FrameType.OP_FRAME)  # the site
        order = [self.pin_model.names[i] for i in range(1, self.pin_model.njoints)]
        self._to_pin = np.asarray([self.kin.joints.index(n) for n in order])  # Pinocchio's q = ours[_to_pin]
        self._from_pin = np.argsort(self._to_pin)  # ours = Pinocchio's[_from_pin]

    def _end_pose(self, q: np.ndarray):
        """The end frame's pose (pin.SE3) at joints ``q`` (n,) in the solver's order."""
        self.pin.framesForwardKinematics(self.pin_model, self.pin_data, q[self._to_pin])
        return self.pin_data.oMf[self.end_frame_id]


class PinocchioSolver(PinocchioChain, CfgSolver):
    """IK by damped least squares on a Pinocchio model of the chain; FK, Jacobian, TCP and limits
    as :class:`~so101_mjx.ik.solvers.solver.SO101Solver`'s. See the module docstring.

    Attributes: ``pin`` (the module), ``pin_model`` / ``pin_data``, ``end_frame_id``. The iteration
    parameters are :class:`SO101Solver`'s (``get_iteration_params`` / ``set_iteration_params``).
    """

    cfg_class = PinocchioSolverCfg

    def __init__(self, cfg: PinocchioSolverCfg | None = None, device=None, **kwargs):
        super().__init__(cfg, device, **kwargs)
        self._init_pinocchio("PinocchioSolver", "pinocchio")
        self._rng = np.random.default_rng(0)

    def qpos_to_limits(self, q, joint_seed) -> np.ndarray:
        """``q`` (n,) with each joint moved by whole turns (2π) into the limits, minimizing the
        ``ik_nearest_weight``-weighted absolute distance to ``joint_seed`` (n,); an empty array
        if some joint has no turn within its limits."""
        q, seed = np.asarray(q, np.float64), np.asarray(joint_seed, np.float64)
        out = np.empty_like(q)
        for i, (x, lo, hi) in enumerate(zip(q, self._lower, self._upper)):
            if not (np.isfinite(lo) and np.isfinite(hi)):
                out[i] = x if lo <= x <= hi else np.nan
                continue
            turns = np.arange(np.ceil((lo - x) / (2 * np.pi)), np.floor((hi - x) / (2 * np.pi)) + 1)
            values = x + 2 * np.pi * turns
            values = values[(values >= lo) & (values <= hi)]
            if values.size == 0:
                return np.empty(0)
            out[i] = values[np.argmin(np.abs(values - seed[i]))]
        return np.empty(0) if np.any(np.isnan(out)) else out

    def _step(self, q: np.ndarray, goal) -> tuple[bool, np.ndarray]:
        """One DLS step from ``q`` towards the end-frame pose ``goal``: (converged at q, next q)."""
        pin, model, data = self.pin, self.pin_model, self.pin_data
        current = self._end_pose(q)
        qp = q[self._to_pin]
        it = self._cfg
        if self.is_only_position_constraint:
            err = current.translation - goal.translation
            if np.linalg.norm(err) < it.pos_eps:
                return True, q
            jac = pin.computeFrameJacobian(model, data, qp, self.end_frame_id,
                                           pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)[:3]
        else:
            error_pose = current.actInv(goal)
            err = pin.log6(error_pose).vector
            if np.linalg.norm(err[:3]) < it.pos_eps and np.linalg.norm(err[3:]) < it.rot_eps:
                return True, q
            jac = -pin.Jlog6(error_pose.inverse()) @ pin.computeFrameJacobian(model, data, qp, self.end_frame_id,
                                                                             pin.ReferenceFrame.LOCAL)
        gram = jac @ jac.T + it.damping * np.eye(jac.shape[0])  # damp = 0: the 1e-9 floor
        v = -(jac.T @ np.linalg.solve(gram, err))
        step = pin.integrate(model, qp, v * it.dt)[self._from_pin]
        return False, np.clip(step, self._lower, self._upper)

    def _solve_one(self, target: np.ndarray, seed: np.ndarray) -> tuple[bool, np.ndarray]:
        """One (4, 4) TCP target from ``seed`` (n,), then from random starts: (success, joints)."""
        if not (np.all(np.isfinite(target)) and np.all(np.isfinite(seed))):
            return False, seed
        goal = self.pin.SE3(target @ np.linalg.inv(self._tcp))
        lo, hi = (np.where(np.isfinite(self._lower), self._lower, -np.pi),
                  np.where(np.isfinite(self._upper), self._upper, np.pi))
        starts = [seed] + list(self._rng.uniform(lo, hi, (self.num_samples - 1, self.dof)))
        for q in starts:
            for _ in range(self._cfg.iterations + 1):
                converged, q_next = self._step(q, goal)
                if converged:
                    limited = self.qpos_to_limits(q, seed)
                    if limited.size:
                        return True, limited
                    break
                q = q_next
        return False, seed

    def get_ik(self, target_xpos, qpos_seed=None, qvel_seed=None, return_all_solutions: bool = False, **kwargs):
        """Solve (4, 4) or (N, 4, 4) TCP targets from ``qpos_seed`` ((n,) or (N, n); default
        :meth:`get_default_qpos_seed`). ``qvel_seed`` is not used; ``return_all_solutions`` returns
        the one solution as well.

        Returns ``(success, qpos)``: (N,) and (N, n), (1,) and (1, n) for one (4, 4) target; a target
        without a solution (or not finite) returns its seed.
        """
        t = np.asarray(target_xpos, np.float64)
        if t.shape[-2:] != (4, 4) or t.ndim not in (2, 3):
            raise InputError(f"target_xpos must have shape (4, 4) or (N, 4, 4), got {t.shape}")
        targets = t.reshape(-1, 4, 4)
        seed = np.asarray(self.get_default_qpos_seed() if qpos_seed is None else qpos_seed, np.float64)
        if seed.shape not in ((self.dof,), (targets.shape[0], self.dof)):
            raise InputError(f"qpos_seed must have shape ({self.dof},) or ({targets.shape[0]}, {self.dof}), got "
                             f"{seed.shape}")
        seeds = np.broadcast_to(seed, (targets.shape[0], self.dof))
        results = [self._solve_one(x, s) for x, s in zip(targets, seeds)]
        success = jnp.asarray([r[0] for r in results])
        qpos = jnp.asarray(np.stack([r[1] for r in results]))
        return success, qpos


PinocchioSolverCfg.solver_class = PinocchioSolver
