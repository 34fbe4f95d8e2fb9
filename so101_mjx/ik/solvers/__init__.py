"""The IK solver suite: the EmbodiChain solver interface (``BaseSolver``, ``SolverCfg``, FK, IK,
Jacobians, TCP, limits, multi-start seeds) for the SO-101 and any URDF arm.

Solvers (docs/ik.md says when to use which): :class:`SO101Solver` / ``PytorchSolver`` (JAX, batched
multi-start LM), :class:`SO101AnalyticSolver` (closed form), :class:`DifferentialSolver`,
:class:`PinocchioSolver`, :class:`PinkSolver`, :class:`NeuralIKSolver` (a trained policy iterated)
and :class:`~so101_mjx.ik.solvers.learned_seeds.SO101LearnedSolver` (a learned seed, refined). The
envs' own IK is :mod:`so101_mjx.ik.iterative` and :mod:`so101_mjx.ik.analytic`, outside this suite.
"""

from so101_mjx.ik.solvers.analytic_solver import AnalyticSolverCfg, SO101AnalyticSolver
from so101_mjx.ik.solvers.base import BaseSolver, compute_batch_ik
from so101_mjx.ik.solvers.chain_config import ChainCfg
from so101_mjx.ik.solvers.config import RobotCfg, SolverCfg
from so101_mjx.ik.solvers.differential import DifferentialSolver, DifferentialSolverCfg
from so101_mjx.ik.solvers.jax_solver import JaxSolver, JaxSolverCfg, PytorchSolver, PytorchSolverCfg, SO101SolverCfg
from so101_mjx.ik.solvers.learned_seeds import SO101LearnedSolver
from so101_mjx.ik.solvers.neural_policy import NeuralIKSolver, NeuralIKSolverCfg
from so101_mjx.ik.solvers.pink_solver import PinkSolver, PinkSolverCfg
from so101_mjx.ik.solvers.pinocchio_solver import PinocchioSolver, PinocchioSolverCfg
from so101_mjx.ik.solvers.seed_sampler import QposSeedSampler, QposSeedSelSampler
from so101_mjx.ik.solvers.solver import SO101Solver

__all__ = [
    "AnalyticSolverCfg", "BaseSolver", "ChainCfg", "DifferentialSolver", "DifferentialSolverCfg", "JaxSolver",
    "JaxSolverCfg",
    "NeuralIKSolver", "NeuralIKSolverCfg", "PinkSolver", "PinkSolverCfg", "PinocchioSolver", "PinocchioSolverCfg",
    "PytorchSolver", "PytorchSolverCfg", "QposSeedSampler", "QposSeedSelSampler", "RobotCfg", "SO101AnalyticSolver",
    "SO101LearnedSolver", "SO101Solver", "SO101SolverCfg", "SolverCfg", "compute_batch_ik",
]
