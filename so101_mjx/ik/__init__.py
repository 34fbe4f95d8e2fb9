"""Inverse kinematics of the SO-101: the envs' jitted IK, and the solver suite.

- :mod:`so101_mjx.ik.iterative`: the jitted Levenberg-Marquardt / pseudoinverse IK on the
  kinematic chain and the top-down grasp helpers (the envs' and the gym envs' IK);
- :mod:`so101_mjx.ik.analytic`: the closed form of the SO-101's TCP position, approach pitch and
  wrist roll (``ik_solver="analytic"``);
- :mod:`so101_mjx.ik.solvers`: the EmbodiChain solver interface and its solvers.

Names load on first use, so an env importing ``so101_mjx.ik.iterative`` loads no solver module:
``from so101_mjx.ik import levenberg_marquardt`` and ``from so101_mjx.ik import SO101Solver`` both
work. A module path of the suite from before ``solvers/`` existed (such as ``ik.solver``) fails
with an error naming its new place.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from so101_mjx._moved import moved

ITERATIVE = ("APPROACH_AXIS", "DOWN", "GRASP_JAW_ANGLE", "JAW_AXIS", "ORIENTATION_WEIGHT", "ROLL_JOINT",
             "TOP_DOWN_JAW_DIRECTION", "grasp_point_offset", "ik_step", "joint_limits", "levenberg_marquardt",
             "pseudoinverse", "task_error", "top_down_seed")
SOLVERS = ("AnalyticSolverCfg", "BaseSolver", "ChainCfg", "DifferentialSolver", "DifferentialSolverCfg", "JaxSolver",
           "JaxSolverCfg",
           "NeuralIKSolver", "NeuralIKSolverCfg", "PinkSolver", "PinkSolverCfg", "PinocchioSolver",
           "PinocchioSolverCfg",
           "PytorchSolver", "PytorchSolverCfg", "QposSeedSampler", "QposSeedSelSampler", "RobotCfg",
           "SO101AnalyticSolver",
           "SO101LearnedSolver", "SO101Solver", "SO101SolverCfg", "SolverCfg", "compute_batch_ik")
_LAZY = {**dict.fromkeys(ITERATIVE, "so101_mjx.ik.iterative"), **dict.fromkeys(SOLVERS, "so101_mjx.ik.solvers")}
# old module -> its place in the suite
MOVED = {"base": "solvers.base", "config": "solvers.config", "solver": "solvers.solver",
         "multistart": "solvers.multistart",
         "seed_sampler": "solvers.seed_sampler", "chain_solver": "solvers.chain_solver",
         "analytic_solver": "solvers.analytic_solver",
         "pinocchio_solver": "solvers.pinocchio_solver", "pink_solver": "solvers.pink_solver",
         "pink_tasks": "solvers.pink_tasks",
         "differential": "solvers.differential", "path": "solvers.path", "pytorch_solver": "solvers.jax_solver",
         "neural": "solvers.neural_policy", "learned": "solvers.learned_seeds"}

__all__ = [
    "APPROACH_AXIS", "AnalyticSolverCfg", "BaseSolver", "ChainCfg", "DOWN", "DifferentialSolver",
    "DifferentialSolverCfg", "GRASP_JAW_ANGLE", "JAW_AXIS", "JaxSolver", "JaxSolverCfg", "NeuralIKSolver",
    "NeuralIKSolverCfg", "ORIENTATION_WEIGHT", "PinkSolver", "PinkSolverCfg", "PinocchioSolver", "PinocchioSolverCfg",
    "PytorchSolver", "PytorchSolverCfg", "QposSeedSampler", "QposSeedSelSampler", "ROLL_JOINT", "RobotCfg",
    "SO101AnalyticSolver", "SO101LearnedSolver", "SO101Solver", "SO101SolverCfg", "SolverCfg",
    "TOP_DOWN_JAW_DIRECTION", "compute_batch_ik", "grasp_point_offset", "ik_step", "joint_limits",
    "levenberg_marquardt", "pseudoinverse", "task_error", "top_down_seed",
]

if TYPE_CHECKING:
    from so101_mjx.ik.iterative import (
        APPROACH_AXIS,
        DOWN,
        GRASP_JAW_ANGLE,
        JAW_AXIS,
        ORIENTATION_WEIGHT,
        ROLL_JOINT,
        TOP_DOWN_JAW_DIRECTION,
        grasp_point_offset,
        ik_step,
        joint_limits,
        levenberg_marquardt,
        pseudoinverse,
        task_error,
        top_down_seed,
    )
    from so101_mjx.ik.solvers import (
        AnalyticSolverCfg,
        BaseSolver,
        ChainCfg,
        DifferentialSolver,
        DifferentialSolverCfg,
        JaxSolver,
        JaxSolverCfg,
        NeuralIKSolver,
        NeuralIKSolverCfg,
        PinkSolver,
        PinkSolverCfg,
        PinocchioSolver,
        PinocchioSolverCfg,
        PytorchSolver,
        PytorchSolverCfg,
        QposSeedSampler,
        QposSeedSelSampler,
        RobotCfg,
        SO101AnalyticSolver,
        SO101LearnedSolver,
        SO101Solver,
        SO101SolverCfg,
        SolverCfg,
        compute_batch_ik,
    )


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


moved(__name__, MOVED)
