"""so101_mjx: massively parallel JAX/MJX simulation of the SO-101 arm.

Pure-functional task envs running as thousands of MJX worlds on an accelerator or at MuJoCo C
speed on a CPU, jitted IK, Brax PPO training, and a CPU MuJoCo path kept numerically comparable.

The public names below load their modules on first use, so ``import so101_mjx`` imports neither
JAX nor MuJoCo (and :mod:`so101_mjx.training.policy`'s numpy runner works without JAX)::

    env = so101_mjx.make("SO101PickCube-v0")          # an env: reset(rng) / step(state, action)
    policy = so101_mjx.load_policy("runs/pick")       # a trained policy: .jax_fn, .numpy_fn, .make_env()
    kin = so101_mjx.Kinematics(so101_mjx.load_model("so101"))

Subsystems: :mod:`~so101_mjx.robot`, :mod:`~so101_mjx.ik`, :mod:`~so101_mjx.dynamics`,
:mod:`~so101_mjx.sim`, :mod:`~so101_mjx.render`, :mod:`~so101_mjx.envs`, :mod:`~so101_mjx.training`,
:mod:`~so101_mjx.data`, :mod:`~so101_mjx.validation`, :mod:`~so101_mjx.station`; gymnasium ids in
:mod:`so101_mjx.gym`; the command line in :mod:`so101_mjx.cli`.
"""

import os as _os
import sys as _sys
from typing import TYPE_CHECKING

if _sys.platform.startswith("linux") and not _os.environ.get("DISPLAY"):
    # Headless Linux: EGL (GPU drivers, or Mesa's software EGL). Must be set before mujoco's GL
    # context module is imported; an explicit MUJOCO_GL (e.g. osmesa) wins.
    _os.environ.setdefault("MUJOCO_GL", "egl")

__version__ = "0.1.0"

# public name -> the module that defines it (imported on first use)
_LAZY = {
    "make": "so101_mjx.envs.registry",
    "names": "so101_mjx.envs.registry",
    "register": "so101_mjx.envs.registry",
    "default_config": "so101_mjx.envs.registry",
    "SO101Env": "so101_mjx.envs.base",
    "ArmConfig": "so101_mjx.envs.config",
    "State": "so101_mjx.sim.state",
    "Info": "so101_mjx.sim.state",
    "run_episodes": "so101_mjx.envs.rollout",
    "load_policy": "so101_mjx.training.policies",
    "Kinematics": "so101_mjx.robot.kinematics",
    "Calibration": "so101_mjx.robot.calibration",
    "load_calibration": "so101_mjx.robot.calibration",
    "load_model": "so101_mjx.robot.scenes",
    "scene_path": "so101_mjx.robot.scenes",
    "ARM_JOINTS": "so101_mjx.robot.scenes",
    "ROBOT_JOINTS": "so101_mjx.robot.scenes",
    "SO101Solver": "so101_mjx.ik.solvers.solver",
    "SO101AnalyticSolver": "so101_mjx.ik.solvers.analytic_solver",
    "SO101LearnedSolver": "so101_mjx.ik.solvers.learned_seeds",
    "JaxBackend": "so101_mjx.dynamics.backend",
    "MujocoBackend": "so101_mjx.dynamics.mujoco_backend",
    "PinocchioBackend": "so101_mjx.dynamics.pinocchio_backend",
    "SolverCfg": "so101_mjx.ik.solvers.config",
    "PytorchSolver": "so101_mjx.ik.solvers.jax_solver",
    "PytorchSolverCfg": "so101_mjx.ik.solvers.jax_solver",
    "DifferentialSolver": "so101_mjx.ik.solvers.differential",
    "PinocchioSolver": "so101_mjx.ik.solvers.pinocchio_solver",
    "PinkSolver": "so101_mjx.ik.solvers.pink_solver",
    "NeuralIKSolver": "so101_mjx.ik.solvers.neural_policy",
    "InputError": "so101_mjx.errors",
}

__all__ = [
    "ARM_JOINTS", "ArmConfig", "Calibration", "DifferentialSolver", "Info", "InputError", "JaxBackend",
    "Kinematics", "MujocoBackend", "NeuralIKSolver", "PinkSolver", "PinocchioBackend", "PinocchioSolver",
    "PytorchSolver", "PytorchSolverCfg", "ROBOT_JOINTS", "SO101AnalyticSolver", "SO101Env", "SO101LearnedSolver",
    "SO101Solver", "SolverCfg", "State", "__version__", "default_config", "load_calibration", "load_model",
    "load_policy", "make", "names", "register", "run_episodes", "scene_path",
]

if TYPE_CHECKING:  # the static face of the lazy names, for type checkers and IDEs
    from so101_mjx.dynamics.backend import JaxBackend
    from so101_mjx.dynamics.mujoco_backend import MujocoBackend
    from so101_mjx.dynamics.pinocchio_backend import PinocchioBackend
    from so101_mjx.envs.base import SO101Env
    from so101_mjx.envs.config import ArmConfig
    from so101_mjx.envs.registry import default_config, make, names, register
    from so101_mjx.envs.rollout import run_episodes
    from so101_mjx.errors import InputError
    from so101_mjx.ik.solvers.analytic_solver import SO101AnalyticSolver
    from so101_mjx.ik.solvers.config import SolverCfg
    from so101_mjx.ik.solvers.differential import DifferentialSolver
    from so101_mjx.ik.solvers.jax_solver import PytorchSolver, PytorchSolverCfg
    from so101_mjx.ik.solvers.learned_seeds import SO101LearnedSolver
    from so101_mjx.ik.solvers.neural_policy import NeuralIKSolver
    from so101_mjx.ik.solvers.pink_solver import PinkSolver
    from so101_mjx.ik.solvers.pinocchio_solver import PinocchioSolver
    from so101_mjx.ik.solvers.solver import SO101Solver
    from so101_mjx.robot.calibration import Calibration, load_calibration
    from so101_mjx.robot.kinematics import Kinematics
    from so101_mjx.robot.scenes import ARM_JOINTS, ROBOT_JOINTS, load_model, scene_path
    from so101_mjx.sim.state import Info, State
    from so101_mjx.training.policies import load_policy


def __getattr__(name: str):
    """The names of ``_LAZY``, imported from their modules on first use."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'so101_mjx' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
