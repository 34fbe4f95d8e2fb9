"""Inverse kinematics: iterative (LM, pseudoinverse), analytic, the solver interface, learned, paths.

This package's own names are those of :mod:`so101_mjx.ik.iterative` (the jitted LM / pseudoinverse
IK and the top-down grasp helpers), so ``from so101_mjx.ik import levenberg_marquardt`` keeps working.
"""

from so101_mjx.ik.analytic_solver import AnalyticSolverCfg, SO101AnalyticSolver
from so101_mjx.ik.base import compute_batch_ik
from so101_mjx.ik.config import RobotCfg, SolverCfg
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
from so101_mjx.ik.pytorch_solver import PytorchSolver, PytorchSolverCfg, SO101SolverCfg
from so101_mjx.ik.seed_sampler import QposSeedSampler, QposSeedSelSampler
from so101_mjx.ik.solver import SO101Solver

__all__ = [
    "APPROACH_AXIS", "DOWN", "GRASP_JAW_ANGLE", "JAW_AXIS", "ORIENTATION_WEIGHT", "ROLL_JOINT", "TOP_DOWN_JAW_DIRECTION",
    "grasp_point_offset", "ik_step", "joint_limits", "levenberg_marquardt", "pseudoinverse", "task_error", "top_down_seed",
    "SolverCfg", "RobotCfg", "PytorchSolver", "PytorchSolverCfg", "SO101SolverCfg", "SO101Solver", "AnalyticSolverCfg",
    "SO101AnalyticSolver", "QposSeedSampler", "QposSeedSelSampler", "compute_batch_ik",
]

# The differential, Pinocchio, Pink and neural solvers (Pinocchio and Pink are imported when a solver is built).
from so101_mjx.ik.differential import DifferentialSolver, DifferentialSolverCfg
from so101_mjx.ik.neural import NeuralIKSolver, NeuralIKSolverCfg
from so101_mjx.ik.pink_solver import PinkSolver, PinkSolverCfg
from so101_mjx.ik.pinocchio_solver import PinocchioSolver, PinocchioSolverCfg

__all__ += ["DifferentialSolver", "DifferentialSolverCfg", "NeuralIKSolver", "NeuralIKSolverCfg", "PinkSolver",
            "PinkSolverCfg", "PinocchioSolver", "PinocchioSolverCfg"]
