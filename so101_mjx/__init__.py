"""so101_mjx: massively parallel JAX/MJX simulation of the SO-101 arm.

Pure-functional task envs running as thousands of MJX worlds on an accelerator or at MuJoCo C
speed on a CPU, jitted IK, Brax PPO training, and a CPU MuJoCo path kept numerically comparable.

``import so101_mjx`` imports neither JAX nor MuJoCo: ``so101_mjx.make``, ``Kinematics``,
``load_model``, ``scene_path``, ``ARM_JOINTS`` and ``ROBOT_JOINTS`` load their modules on first
use (so :mod:`so101_mjx.training.policy`'s numpy runner works without JAX). The compatibility
shims (:mod:`so101_mjx._compat`) are installed by :mod:`so101_mjx.sim.physics`, which every env imports.
"""

import os as _os
import sys as _sys

if _sys.platform.startswith("linux") and not _os.environ.get("DISPLAY"):
    # Headless Linux: EGL (GPU drivers, or Mesa's software EGL). Must be set before mujoco's GL
    # context module is imported; an explicit MUJOCO_GL (e.g. osmesa) wins.
    _os.environ.setdefault("MUJOCO_GL", "egl")

__version__ = "0.1.0"

_LAZY = {
    "make": "so101_mjx.envs",
    "Kinematics": "so101_mjx.robot.kinematics",
    "load_model": "so101_mjx.robot.scenes",
    "scene_path": "so101_mjx.robot.scenes",
    "ARM_JOINTS": "so101_mjx.robot.scenes",
    "ROBOT_JOINTS": "so101_mjx.robot.scenes",
}

__all__ = ["ARM_JOINTS", "ROBOT_JOINTS", "Kinematics", "__version__", "load_model", "make", "scene_path"]


def __getattr__(name: str):
    """The names of ``_LAZY``, imported from their modules on first use."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'so101_mjx' has no attribute {name!r}")
