"""Inverse kinematics: iterative (LM, pseudoinverse), analytic, the solver interface, learned, paths.

This package's own names are those of :mod:`so101_mjx.ik.iterative` (the jitted LM / pseudoinverse
IK and the top-down grasp helpers), so ``from so101_mjx.ik import levenberg_marquardt`` keeps working.
"""

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

__all__ = [
    "APPROACH_AXIS", "DOWN", "GRASP_JAW_ANGLE", "JAW_AXIS", "ORIENTATION_WEIGHT", "ROLL_JOINT", "TOP_DOWN_JAW_DIRECTION",
    "grasp_point_offset", "ik_step", "joint_limits", "levenberg_marquardt", "pseudoinverse", "task_error", "top_down_seed",
]
