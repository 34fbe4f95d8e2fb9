"""so101_mjx: massively parallel JAX/MJX simulation of the SO-101 arm.

Pure-functional task envs running as thousands of MJX worlds on an accelerator or at MuJoCo C
speed on a CPU, jitted IK, Brax PPO training, and a CPU MuJoCo path kept numerically comparable.
"""

from so101_mjx import compat as _compat
from so101_mjx.kinematics import Kinematics
from so101_mjx.scenes import ARM_JOINTS, ROBOT_JOINTS, load_model, scene_path

__version__ = "0.1.0"

_compat.install()

__all__ = ["ARM_JOINTS", "ROBOT_JOINTS", "Kinematics", "__version__", "load_model", "scene_path"]
