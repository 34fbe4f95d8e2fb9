"""The simulated station the station tests build, and random action chunks for it (a module, not a
conftest.py: one here would shadow the root conftest, which tests import as ``conftest``)."""

import numpy as np

from so101_mjx.station.interface import MotorizedArm_ActionChunk, MotorizedArmSpec
from so101_mjx.station.sim_station import SimStation

REFRESH_RATE, CONTROL_RATE = 25, 50  # Hz


def make_station() -> SimStation:
    """PickCube's station at 25 Hz observations and 50 Hz control (the spec's two-argument form)."""
    return SimStation("SO101PickCube-v0", MotorizedArmSpec(REFRESH_RATE, CONTROL_RATE))


def random_chunk(rng: np.random.Generator, horizon: int = 6) -> MotorizedArm_ActionChunk:
    """``horizon`` rows of joint targets in [-0.4, 0.4] rad and gripper targets in [0, 1], float32."""
    q = rng.uniform(-0.4, 0.4, (horizon, 5)).astype(np.float32)
    return MotorizedArm_ActionChunk(q, rng.uniform(0, 1, (horizon, 1)).astype(np.float32))
