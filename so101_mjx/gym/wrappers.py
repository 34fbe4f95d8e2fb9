"""The reference's action adapter and gripper mappings (lerobot_env_so101 0.4.0 ``wrappers``, ``gripper``)."""

from __future__ import annotations

import warnings
from typing import cast

import gymnasium
import numpy as np
from gymnasium import spaces

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.robot import gripper


def normalized_to_ctrl(norm: float | np.ndarray, ctrlrange) -> np.ndarray:
    """Jaw command in [0, 1] (0 closed, 1 open; clipped) -> gripper ctrl [rad]: ``lo + n·(hi − lo)``."""
    ctrl = gripper.open_fraction_to_ctrl(np.asarray(norm), np.asarray(ctrlrange))
    return cast(np.ndarray, ctrl)  # numpy in: numpy out


def ctrl_to_normalized(ctrl: float | np.ndarray, ctrlrange) -> np.ndarray:
    """Gripper ctrl or jaw angle [rad] -> open fraction ``(ctrl − lo) / (hi − lo)``, NOT clipped (as the reference)."""
    frac = gripper.ctrl_to_open_fraction(np.asarray(ctrl), np.asarray(ctrlrange), clip=False)
    return cast(np.ndarray, frac)  # numpy in: numpy out


class SevenDofToFourDofAdapter(gymnasium.ActionWrapper):
    """Accept 7-dim ``[dx, dy, dz, drx, dry, drz, grasp]`` actions; the rotation deltas are dropped.

    As lerobot_env_so101's adapter: warns once at construction, ValueError unless the wrapped
    env's action space is a 4-dim Box.
    """

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        warnings.warn(
            "SevenDofToFourDofAdapter discards the rotation deltas (drx, dry, drz) of 7-dim actions: "
            "the SO-101 IK controls end-effector position only.",
            stacklevel=2,
        )
        native = env.action_space
        if not isinstance(native, spaces.Box) or native.shape != (4,):
            raise InputError("SevenDofToFourDofAdapter expects a wrapped env with a 4-dim Box action space, "
                             f"got {native}")
        low = np.insert(native.low, (3, 3, 3), -1.0).astype(np.float32)
        high = np.insert(native.high, (3, 3, 3), 1.0).astype(np.float32)
        self.action_space = spaces.Box(low, high, dtype=np.float32)

    def action(self, action) -> np.ndarray:
        """[dx, dy, dz, drx, dry, drz, grasp] (7,) -> [dx, dy, dz, grasp] (4,)."""
        action = checks.real_array("action", action, (7,), layout=" = [dx, dy, dz, drx, dry, drz, grasp]")
        return action[[0, 1, 2, 6]].astype(np.float32)
