"""Pure-functional SO-101 task envs: the env contract, the arm, one file per task, the registry, training wrappers."""

from so101_mjx._moved import moved
from so101_mjx.envs.base import SO101Env
from so101_mjx.envs.registry import default_config, make, names, register, task
from so101_mjx.sim.state import Info, State

__all__ = ["Info", "SO101Env", "State", "default_config", "make", "names", "register", "task"]

moved("so101_mjx", {"envs.servo": "sim.servo"})
