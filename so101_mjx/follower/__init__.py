"""The real arm's language: a simulated SO-101 follower with lerobot's robot API, the action checks
a follower applies (:mod:`so101_mjx.follower.actions`), the deploy loop that runs an exported
policy through that API (:mod:`so101_mjx.follower.deploy`; Cartesian-mode policies through
:mod:`so101_mjx.follower.cartesian`) and keyboard teleop (:mod:`so101_mjx.follower.teleop`).
Nothing here imports lerobot; the ``lerobot_robot_so101_mjx`` plugin wraps :class:`SimFollower`
as lerobot's ``Robot``."""

from so101_mjx.follower.actions import FEATURE_KEYS, clamp_relative, motor_targets
from so101_mjx.follower.sim import SimFollower, SimFollowerConfig

__all__ = ["FEATURE_KEYS", "SimFollower", "SimFollowerConfig", "clamp_relative", "motor_targets"]
