"""Pure-functional SO-101 task envs: one file per task, a registry, training wrappers."""

from so101_mjx.envs.base import State, SO101Env
from so101_mjx.envs.registry import default_config, make, names

__all__ = ["SO101Env", "State", "default_config", "make", "names"]
