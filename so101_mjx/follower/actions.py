"""A follower's actions as lerobot's ``SO101Follower`` takes them: ``{"<motor>.pos": value}`` for the
six motors (:data:`so101_mjx.robot.motors.MOTORS`), in the follower's units (degrees or -100..100 for
the arm, 0..100 for the gripper), checked and clamped here before they reach a simulated or real arm.

- :func:`motor_targets`: the dict as a (6,) array; a ValueError naming the key for unknown or
  missing keys, non-numbers and NaN/inf, and (``out_of_range="error"``) targets outside the motor
  range; ``out_of_range="clip"`` clips them to it instead.
- :func:`clamp_relative`: lerobot's ``max_relative_target`` rule (``ensure_safe_goal_position``):
  each goal within ``max_relative_target`` motor units of the present position, one value for all
  motors or one per motor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.robot.motors import FEATURE_NAMES, MOTORS

FEATURE_KEYS = FEATURE_NAMES  # a follower's action and state features
OUT_OF_RANGE = ("error", "clip")


def as_dict(values: np.ndarray) -> dict[str, float]:
    """(6,) motor values -> ``{"<motor>.pos": float}``."""
    return {key: float(v) for key, v in zip(FEATURE_KEYS, values, strict=True)}


def motor_targets(action: Any, limits: np.ndarray, out_of_range: str = "error") -> np.ndarray:
    """The follower action ``action`` as motor targets (6,) float64 within ``limits`` (6, 2).

    ValueError naming the offending key: not a mapping, unknown or missing keys, a value that is not a
    finite real number, or (``out_of_range="error"``) a target outside its motor's range."""
    if out_of_range not in OUT_OF_RANGE:
        raise InputError(f"out_of_range must be one of {OUT_OF_RANGE}, got {out_of_range!r}")
    if not isinstance(action, Mapping):
        raise InputError(f"action must be a dict with the keys {list(FEATURE_KEYS)}, got {type(action).__name__}")
    unknown = sorted(set(action) - set(FEATURE_KEYS), key=str)
    missing = [key for key in FEATURE_KEYS if key not in action]
    if unknown or missing:
        raise InputError(f"action keys must be {list(FEATURE_KEYS)}: unknown {unknown}, missing {missing}")
    goal = np.asarray([checks.real(f"action[{key!r}]", action[key]) for key in FEATURE_KEYS])
    outside = (goal < limits[:, 0]) | (goal > limits[:, 1])
    if np.any(outside) and out_of_range == "error":
        bad = [f"{key} = {g:.6g} not in [{lo:.6g}, {hi:.6g}]"
               for key, g, (lo, hi), o in zip(FEATURE_KEYS, goal, limits, outside, strict=True) if o]
        raise InputError(f"action targets outside the motor ranges: {'; '.join(bad)} (out_of_range='clip' clips them)")
    return np.clip(goal, limits[:, 0], limits[:, 1])


def check_max_relative(value: Any) -> float | dict[str, float] | None:
    """``max_relative_target`` as lerobot takes it: None, a positive number, or a positive number per motor."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        if set(value) != set(MOTORS):
            raise InputError(f"max_relative_target as a dict must have the keys {list(MOTORS)}, got "
                             f"{sorted(value, key=str)}")
        return {m: checks.real(f"max_relative_target[{m!r}]", value[m], gt=0) for m in MOTORS}
    return checks.real("max_relative_target", value, gt=0)


def clamp_relative(goal: np.ndarray, present: np.ndarray,
                   max_relative_target: float | dict[str, float] | None) -> np.ndarray:
    """``goal`` (6,) moved to within ``max_relative_target`` of ``present`` (6,) per motor (None: unchanged)."""
    if max_relative_target is None:
        return goal
    cap = (np.asarray([max_relative_target[m] for m in MOTORS]) if isinstance(max_relative_target, Mapping)
           else np.full(len(MOTORS), float(max_relative_target)))
    return present + np.clip(goal - present, -cap, cap)
