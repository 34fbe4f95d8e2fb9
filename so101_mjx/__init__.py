"""so101_mjx: massively parallel JAX/MJX simulation of the SO-101 arm.

Pure-functional task envs running as thousands of MJX worlds on an accelerator or at MuJoCo C
speed on a CPU, jitted IK, Brax PPO training, and a CPU MuJoCo path kept numerically comparable.
"""

import os as _os
import sys as _sys

if _sys.platform.startswith("linux") and not _os.environ.get("DISPLAY"):
    # Headless Linux: EGL (GPU drivers, or Mesa's software EGL). Must be set before mujoco's GL
    # context module is imported; an explicit MUJOCO_GL (e.g. osmesa) wins.
    _os.environ.setdefault("MUJOCO_GL", "egl")

from so101_mjx import compat as _compat  # noqa: E402
from so101_mjx.kinematics import Kinematics  # noqa: E402
from so101_mjx.scenes import ARM_JOINTS, ROBOT_JOINTS, load_model, scene_path  # noqa: E402

__version__ = "0.1.0"

_compat.install()

__all__ = ["ARM_JOINTS", "ROBOT_JOINTS", "Kinematics", "__version__", "load_model", "make", "scene_path"]


def __getattr__(name: str):
    """``so101_mjx.make`` is :func:`so101_mjx.envs.make`, imported on first use (keeps ``import so101_mjx`` light)."""
    if name == "make":
        from so101_mjx.envs import make

        return make
    raise AttributeError(f"module 'so101_mjx' has no attribute {name!r}")
