"""``PytorchSolverCfg`` / ``PytorchSolver`` (also ``JaxSolverCfg`` / ``JaxSolver``): the JAX
:class:`~so101_mjx.ik.solvers.solver.SO101Solver` under the EmbodiChain solver interface's names,
built from a config. The interface calls its batched solver "PyTorch"; this one is JAX throughout.

The interface's batched damped least squares with ``is_only_position_constraint=True`` for the SO-101 is
the role :class:`SO101Solver` plays; ``PytorchSolver(cfg, device)`` and ``cfg.init_solver(device)``
build it from a :class:`PytorchSolverCfg` (also named ``SO101SolverCfg``). Defaults are the SO-101's
(EmbodiChain's iteration defaults are those of ``set_iteration_params``). FK results and IK targets are
in the root link's frame; the root may be any link no solved joint moves.
"""

from __future__ import annotations

from dataclasses import dataclass

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.ik import iterative as ik
from so101_mjx.ik.solvers.chain_config import ChainCfg, solver_arguments
from so101_mjx.ik.solvers.multistart import SELECTIONS
from so101_mjx.ik.solvers.solver import SO101Solver


@dataclass
class PytorchSolverCfg(ChainCfg):
    """Config of :class:`PytorchSolver` (the EmbodiChain solver interface's ``PytorchSolverCfg``): the base fields, and

    Attributes:
        pos_eps: metres, rot_eps: radians: convergence (validity) thresholds.
        max_iterations, dt, damp: least-squares steps, step length, damping (0 keeps the 1e-9 floor).
        is_only_position_constraint: constrain the TCP position only (the SO-101's default); False adds
            the TCP axis ``approach_axis`` (the 5 DoF leave the roll about it free).
        num_samples: starts per target. ik_solution_selection: ``"nearest"`` or ``"manipulability"``.
        enable_seed_selection, seed_db_size, seed_rot_scale, seed_k_max: database seeds (``seed_k_max`` None: unranked).
        approach_axis, tolerance, orientation_weight: ours, as :class:`SO101Solver`'s arguments.
    """

    class_type: str = "PytorchSolver"
    pos_eps: float = 1e-3
    rot_eps: float = 0.05
    max_iterations: int = 30
    dt: float = 1.0
    damp: float = 1e-3
    is_only_position_constraint: bool = True
    num_samples: int = 16
    ik_solution_selection: str = "nearest"
    enable_seed_selection: bool = True
    seed_db_size: int = 4096
    seed_rot_scale: float = 0.2
    seed_k_max: int | None = None
    approach_axis: int = ik.APPROACH_AXIS
    tolerance: float = 1e-4
    orientation_weight: float = ik.ORIENTATION_WEIGHT

    def __post_init__(self) -> None:
        super().__post_init__()
        r, i = checks.real, checks.integer
        r("pos_eps", self.pos_eps, gt=0), r("rot_eps", self.rot_eps, gt=0), r("dt", self.dt, gt=0)
        r("damp", self.damp, ge=0), r("seed_rot_scale", self.seed_rot_scale, ge=0), r("tolerance", self.tolerance, gt=0)
        r("orientation_weight", self.orientation_weight, ge=0)
        i("max_iterations", self.max_iterations, ge=1), i("num_samples", self.num_samples, ge=1)
        i("seed_db_size", self.seed_db_size, ge=1)
        if self.seed_k_max is not None:
            i("seed_k_max", self.seed_k_max, ge=1)
        checks.flag("is_only_position_constraint", self.is_only_position_constraint)
        checks.flag("enable_seed_selection", self.enable_seed_selection)
        if self.ik_solution_selection not in SELECTIONS:
            raise InputError(f"ik_solution_selection must be one of {SELECTIONS}, got {self.ik_solution_selection!r}")
        if self.approach_axis not in (0, 1, 2) or isinstance(self.approach_axis, bool):
            raise InputError(f"approach_axis must be 0, 1 or 2, got {self.approach_axis!r}")

    def solver_kwargs(self) -> dict:
        return dict(pos_eps=self.pos_eps, rot_eps=self.rot_eps, iterations=self.max_iterations, dt=self.dt,
                    damping=self.damp, approach_axis=None if self.is_only_position_constraint else self.approach_axis,
                    num_samples=self.num_samples, selection=self.ik_solution_selection,
                    seed_selection=self.enable_seed_selection, seed_db_size=self.seed_db_size,
                    seed_rot_scale=self.seed_rot_scale, seed_k_max=self.seed_k_max, tolerance=self.tolerance,
                    orientation_weight=self.orientation_weight)


class PytorchSolver(SO101Solver):
    """:class:`SO101Solver` built the solver interface's way: ``PytorchSolver(cfg, device)``.

    Args:
        cfg: :class:`PytorchSolverCfg` (None = its defaults); kept as ``self.cfg``.
        device: JAX device or platform string (None = JAX's default device).
        **kwargs: further :class:`SO101Solver` arguments, overriding the config's.
    """

    def __init__(self, cfg: PytorchSolverCfg | None = None, device=None, **kwargs):
        cfg = PytorchSolverCfg() if cfg is None else cfg
        if not isinstance(cfg, PytorchSolverCfg):
            raise InputError(f"cfg must be a PytorchSolverCfg, got {type(cfg).__name__}")
        model, kwargs = solver_arguments(cfg, kwargs)
        super().__init__(model, device=device, **kwargs)
        self.cfg = cfg


PytorchSolverCfg.solver_class = PytorchSolver
SO101SolverCfg = JaxSolverCfg = PytorchSolverCfg
JaxSolver = PytorchSolver
