"""``PinkSolver``: task-space IK with Pink's QP (the EmbodiChain solver interface's ``PinkSolver``).

Needs the ``pink`` extra (``pip install "so101-mjx[pink]"``: pin, pin-pink and the daqp QP solver),
imported when a solver is built. The Pinocchio model is the one of
:class:`~so101_mjx.ik.solvers.pinocchio_solver.PinocchioSolver`.

Each target is solved from its seed by repeated ``pink.solve_ik`` steps over the tasks: by default
one ``FrameTask`` on the end link (orientation cost 0 with ``is_only_position_constraint``), or the
config's ``variable_input_tasks`` (exactly one FrameTask, whose target each call sets) and
``fixed_input_tasks`` (e.g. :class:`~so101_mjx.ik.solvers.pink_tasks.NullSpacePostureTask`, whose target
:meth:`PinkSolver.update_null_space_joint_targets` sets). Adaptive damping: a step that lowers the
frame tasks' objective (or ties it and lowers the posture's) is accepted and the damping shrinks
by ``damping_decay``; otherwise the step is halved (backtracking, at most ``max_backtracks``
times) and the damping grows by ``damping_growth`` up to ``max_damping``. ``stagnation_iterations``
iterations in a row without ``stagnation_tolerance`` of improvement end the solve.
``fail_on_joint_limit_violation`` is Pink's safety break; iterates are projected into the limits.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import jax.numpy as jnp
import numpy as np

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.ik.solvers.chain_solver import CfgSolver
from so101_mjx.ik.solvers.pinocchio_solver import PinocchioChain, PinocchioIterationCfg, import_optional

LOGGER = logging.getLogger(__name__)


@dataclass
class PinkSolverCfg(PinocchioIterationCfg):
    """Configuration of :class:`PinkSolver` (the EmbodiChain solver interface's ``PinkSolverCfg``); see the module
    docstring.

    ``solver_type`` defaults to ``"daqp"`` (the ``pink`` extra's QP solver; the interface's default,
    ``"osqp"``, works where osqp is installed).
    """

    solver_class: ClassVar[type | None] = None  # set below

    class_type: str = "PinkSolver"
    variable_input_tasks: list | None = None
    fixed_input_tasks: list | None = None
    show_ik_warnings: bool = True
    fail_on_joint_limit_violation: bool = True
    solver_type: str = "daqp"
    stagnation_tolerance: float = 1e-10
    stagnation_iterations: int = 8
    max_backtracks: int = 4
    damping_growth: float = 10.0
    damping_decay: float = 0.5
    max_damping: float = 1e6

    def __post_init__(self) -> None:
        super().__post_init__()
        r, i = checks.real, checks.integer
        self.stagnation_iterations = i("stagnation_iterations", self.stagnation_iterations, ge=1)
        self.max_backtracks = i("max_backtracks", self.max_backtracks, ge=0)
        self.stagnation_tolerance = r("stagnation_tolerance", self.stagnation_tolerance, ge=0)
        self.damping_growth = r("damping_growth", self.damping_growth, gt=1)
        self.damping_decay = r("damping_decay", self.damping_decay, gt=0, le=1)
        self.max_damping = r("max_damping", self.max_damping, ge=self.damp)
        for name in ("show_ik_warnings", "fail_on_joint_limit_violation"):
            setattr(self, name, checks.flag(name, getattr(self, name)))
        if not isinstance(self.solver_type, str) or not self.solver_type:
            raise InputError(f"solver_type must be the name of a QP solver (e.g. 'daqp'), got {self.solver_type!r}")
        for name in ("variable_input_tasks", "fixed_input_tasks"):
            if getattr(self, name) is not None and (isinstance(getattr(self, name), str)
                                                    or not isinstance(getattr(self, name), Sequence)):
                raise InputError(f"{name} must be None or a list of pink tasks, got {getattr(self, name)!r}")


class PinkSolver(PinocchioChain, CfgSolver):
    """Pink IK of the TCP, one target at a time; FK, Jacobian, TCP and limits as
    :class:`~so101_mjx.ik.solvers.solver.SO101Solver`'s. See the module docstring.

    Attributes: ``pink_cfg`` (the ``pink.Configuration``), ``tasks`` (variable then fixed),
    ``variable_input_tasks``, ``fixed_input_tasks``, ``init_qpos`` (default seed: zeros within the limits).
    """

    cfg_class = PinkSolverCfg

    def __init__(self, cfg: PinkSolverCfg | None = None, device=None, **kwargs: Any) -> None:
        super().__init__(cfg, device, **kwargs)
        self._init_pinocchio("PinkSolver", "pink")
        self.pink = import_optional("pink", "pink", "PinkSolver")
        from so101_mjx.ik.solvers.pink_tasks import NullSpacePostureTask

        qpsolvers = import_optional("qpsolvers", "pink", "PinkSolver")
        if self.cfg.solver_type not in qpsolvers.available_solvers:
            raise InputError(f"solver_type must be an installed QP solver {sorted(qpsolvers.available_solvers)}, "
                             f"got {self.cfg.solver_type!r}")
        self._sync_limits()
        self.init_qpos = np.clip(np.zeros(self.dof), self._lower, self._upper)
        self.pink_cfg = self.pink.Configuration(self.pin_model, self.pin_data, self.init_qpos[self._to_pin])
        if self.cfg.variable_input_tasks is None:
            self.variable_input_tasks = [self.pink.tasks.FrameTask(
                self._cfg.site, position_cost=1.0,
                orientation_cost=0.0 if self.cfg.is_only_position_constraint else 1.0)]
        else:
            self.variable_input_tasks = list(self.cfg.variable_input_tasks)
        self.fixed_input_tasks = list(self.cfg.fixed_input_tasks or [])
        self.tasks = self.variable_input_tasks + self.fixed_input_tasks
        frames = [t for t in self.variable_input_tasks if isinstance(t, self.pink.tasks.FrameTask)]
        if len(frames) != 1:
            raise InputError(f"variable_input_tasks must hold exactly one pink FrameTask (others go to "
                             f"fixed_input_tasks), got {len(frames)}")
        self._target_task = frames[0]
        for task in self.tasks:
            if isinstance(task, NullSpacePostureTask):
                task.set_target(self.init_qpos[self._to_pin])
            else:
                task.set_target_from_configuration(self.pink_cfg)
        self._posture_class = NullSpacePostureTask

    def set_iteration_params(self, *args, **kwargs) -> bool:
        """:class:`SO101Solver`'s (pos_eps, rot_eps, max_iterations, dt, damp, num_samples,
        is_only_position_constraint); the default frame task's orientation cost follows the last."""
        if not super().set_iteration_params(*args, **kwargs):
            return False
        if self.cfg.variable_input_tasks is None:
            self._target_task.set_orientation_cost(0.0 if self.is_only_position_constraint else 1.0)
        return True

    # -- limits ------------------------------------------------------------------------------

    def _sync_limits(self) -> None:
        """Copy the solver's limits into the Pinocchio model Pink reads."""
        self.pin_model.lowerPositionLimit[:] = self._lower[self._to_pin]
        self.pin_model.upperPositionLimit[:] = self._upper[self._to_pin]

    def set_qpos_limits(self, lower_qpos_limits, upper_qpos_limits) -> bool:
        """Set the limits (n,) each, intersected with the model's, and give them to Pink. InputError for
        limits that are not finite, not (n,), or with lower > upper (as the interface's Pink solver)."""
        lo, hi = (np.asarray(x, np.float64) for x in (lower_qpos_limits, upper_qpos_limits))
        if (lo.shape != (self.dof,) or hi.shape != (self.dof,)
                or not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))) or np.any(lo > hi)):
            raise InputError(f"qpos limits must be finite ({self.dof},) arrays with lower <= upper, got {lo} and {hi}")
        lo, hi = np.maximum(lo, self._robot_lower), np.minimum(hi, self._robot_upper)
        if np.any(lo > hi):
            raise InputError(f"qpos limits {lo}, {hi}: empty intersection with the model's limits")
        self._set_limits(lo, hi)
        return True

    def _set_limits(self, lower_qpos_limits, upper_qpos_limits) -> None:
        super()._set_limits(lower_qpos_limits, upper_qpos_limits)
        if hasattr(self, "pin_model"):  # also update_with_robot_limit's way in
            self._sync_limits()

    @staticmethod
    def reorder_array(input_array, reordering_array) -> np.ndarray:
        """``input_array`` at the indices ``reordering_array`` (source index per output slot)."""
        return np.asarray(input_array)[np.asarray(reordering_array, dtype=int)]

    def update_null_space_joint_targets(self, current_qpos) -> None:
        """Set every null-space posture task's target to ``current_qpos`` (n,) (the solver's joint order)."""
        q = np.asarray(current_qpos, np.float64)
        if q.shape != (self.dof,) or not np.all(np.isfinite(q)):
            raise InputError(f"current_qpos must be a finite vector of shape ({self.dof},), got {q.shape}")
        for task in self.tasks:
            if isinstance(task, self._posture_class):
                task.set_target(q[self._to_pin])

    # -- solving -----------------------------------------------------------------------------

    def _metrics(self) -> tuple[float, float, float, float]:
        """Frame tasks' objective, posture tasks' (null-space gradient) objective, and the target
        frame task's position and orientation errors (norms of its weighted parts)."""
        primary = secondary = pos_err = rot_err = 0.0
        for task in self.tasks:
            error = np.asarray(task.compute_error(self.pink_cfg), np.float64)
            cost = 1.0 if task.cost is None else np.asarray(task.cost, np.float64)
            weighted = cost * float(task.gain) * error
            if isinstance(task, self.pink.tasks.FrameTask):
                primary += 0.5 * float(weighted @ weighted)
            elif isinstance(task, self._posture_class):
                gradient = np.asarray(task.compute_jacobian(self.pink_cfg), np.float64).T @ weighted
                secondary += 0.5 * float(gradient @ gradient)
            if task is self._target_task:
                active = np.broadcast_to(cost, error.shape) > 0
                pos_err = float(np.linalg.norm(error[:3][active[:3]]))
                rot_err = float(np.linalg.norm(error[3:][active[3:]]))
        return primary, secondary, pos_err, rot_err

    def _converged(self, pos_err: float, rot_err: float) -> bool:
        return pos_err <= self._cfg.pos_eps and (self.is_only_position_constraint or rot_err <= self._cfg.rot_eps)

    def _current_q(self) -> np.ndarray:
        return np.asarray(self.pink_cfg.q)[self._from_pin]

    def _set_q(self, q_pin: np.ndarray) -> None:
        self.pink_cfg.update(np.clip(q_pin, self.pin_model.lowerPositionLimit, self.pin_model.upperPositionLimit))

    def _try_step(self, base: np.ndarray, primary: float, secondary: float,
                  damping: float) -> tuple[bool, float, float]:
        """Backtracking from ``base`` (Pinocchio order): (accepted, improvement, damping after)."""
        c, dt = self.cfg, self._cfg.dt
        floor = min(c.max_damping, max(self._damp, float(np.sqrt(np.finfo(float).eps))))
        for backtrack in range(c.max_backtracks + 1):
            try:
                velocity = self.pink.solve_ik(self.pink_cfg, self.tasks, dt, solver=c.solver_type, damping=damping,
                                              safety_break=c.fail_on_joint_limit_violation)
            except Exception:
                self.pink_cfg.update(base)
                raise
            self._set_q(self.pin.integrate(self.pin_model, base, velocity * dt * 0.5**backtrack))
            cand_primary, cand_secondary, _, _ = self._metrics()
            gain = primary - cand_primary
            tied = abs(gain) <= np.finfo(float).eps * max(1.0, abs(primary))
            if gain > 0 or (tied and cand_secondary < secondary):
                return True, max(0.0, gain), max(floor, damping * c.damping_decay)
            self.pink_cfg.update(base)
            damping = min(max(damping * c.damping_growth, floor), c.max_damping)
        return False, 0.0, damping

    def _solve_one(self, target: np.ndarray, seed: np.ndarray) -> tuple[bool, np.ndarray]:
        """One (4, 4) TCP target from ``seed`` (n,): (converged, joints)."""
        c = self.cfg
        self._target_task.set_target(self.pin.SE3(target @ np.linalg.inv(self._tcp)))
        self._set_q(seed[self._to_pin])
        damping = min(c.max_damping, max(self._damp, float(np.sqrt(np.finfo(float).eps))))
        stagnant = 0
        for _ in range(self._cfg.iterations):
            primary, secondary, pos_err, rot_err = self._metrics()
            if self._converged(pos_err, rot_err):
                return True, self._current_q()
            accepted, gain, damping = self._try_step(np.asarray(self.pink_cfg.q).copy(), primary, secondary, damping)
            stagnant = stagnant + 1 if not accepted or gain <= c.stagnation_tolerance else 0
            if stagnant >= c.stagnation_iterations:
                break
        return self._converged(*self._metrics()[2:]), self._current_q()

    def _inputs(self, target_xpos, qpos_seed) -> tuple[np.ndarray, np.ndarray]:
        """Targets (N, 4, 4) and seeds (N, n), checked (the seed shapes of :meth:`get_ik`)."""
        targets = np.asarray(target_xpos, np.float64)
        targets = targets[None] if targets.shape == (4, 4) else targets
        if targets.ndim != 3 or targets.shape[1:] != (4, 4) or not np.all(np.isfinite(targets)):
            raise InputError(f"target_xpos must be finite with shape (4, 4) or (N, 4, 4), got {np.shape(target_xpos)}")
        n = targets.shape[0]
        seeds = np.asarray(self.init_qpos if qpos_seed is None else qpos_seed, np.float64)
        seeds = seeds[:, 0] if seeds.ndim == 3 and seeds.shape[1] == 1 else seeds
        if seeds.shape not in ((self.dof,), (1, self.dof), (n, self.dof)) or not np.all(np.isfinite(seeds)):
            raise InputError(f"qpos_seed must be finite with shape ({self.dof},), (1, {self.dof}), ({n}, {self.dof}) "
                             f"or ({n}, 1, {self.dof}), got {seeds.shape}")
        return targets, np.broadcast_to(seeds, (n, self.dof)).copy()

    def get_ik(self, target_xpos, qpos_seed=None, return_all_solutions: bool = False, **kwargs: Any):
        """Solve TCP targets (4, 4) or (N, 4, 4) one after the other from ``qpos_seed`` ((n,), (1, n),
        (N, n) or (N, 1, n); default ``init_qpos``).

        Returns success (N,) and joints (N, 1, n); a target that does not converge (or whose QP
        fails, logged with ``show_ik_warnings``) returns its seed. ``return_all_solutions`` is
        accepted and returns the one local solution.
        """
        targets, seeds = self._inputs(target_xpos, qpos_seed)
        success, solutions = np.zeros(len(targets), bool), seeds.copy()
        for k, (target, seed) in enumerate(zip(targets, seeds)):
            try:
                success[k], q = self._solve_one(target, seed)
            except Exception as err:  # the QP solver's or Pink's (e.g. its safety break): this target fails
                if self.cfg.show_ik_warnings:
                    LOGGER.warning("Pink IK failed for target %d (%s: %s); returning its seed", k,
                                   type(err).__name__, err)
                continue
            if success[k]:
                solutions[k] = q
            elif self.cfg.show_ik_warnings:
                LOGGER.warning("Pink IK did not converge for target %d; returning its seed", k)
        if return_all_solutions:
            LOGGER.warning("return_all_solutions=True is not supported by PinkSolver; returning one local "
                           "solution per target")
        return jnp.asarray(success), jnp.asarray(solutions)[:, None, :]


PinkSolverCfg.solver_class = PinkSolver
