""":class:`SO101Mjx`: :class:`so101_mjx.follower.SimFollower` as a lerobot ``Robot``."""

from __future__ import annotations

from typing import Any

from lerobot.robots.robot import Robot
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

from lerobot_robot_so101_mjx.config_so101_mjx import SO101MjxConfig
from so101_mjx.follower import SimFollower


class SO101Mjx(Robot):
    """A simulated ``so101_follower``: same ``observation_features`` and ``action_features``, and
    ``send_action`` returns the action actually sent (after ``max_relative_target`` and range clamping)."""

    config_class = SO101MjxConfig
    name = "so101_mjx"

    def __init__(self, config: SO101MjxConfig):
        super().__init__(config)
        self.config = config
        self.sim = SimFollower(config)
        self.cameras = dict.fromkeys(config.camera_names)  # lerobot-record counts them (image writer threads)

    @property
    def observation_features(self) -> dict:
        return self.sim.observation_features

    @property
    def action_features(self) -> dict:
        return self.sim.action_features

    @property
    def is_connected(self) -> bool:
        return self.sim.is_connected

    @property
    def is_calibrated(self) -> bool:
        return True

    def connect(self, calibrate: bool = True) -> None:
        if self.is_connected:
            raise DeviceAlreadyConnectedError(f"{self} already connected")
        self.sim.connect(calibrate)

    def calibrate(self) -> None:
        """Nothing to do: the simulated motors follow ``calibration`` (a follower's file), else the joint ranges."""

    def configure(self) -> None:
        """Nothing to do."""

    def _check(self) -> None:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected.")

    def get_observation(self) -> dict[str, Any]:
        self._check()
        return self.sim.get_observation()

    def send_action(self, action: dict[str, Any]) -> dict[str, Any]:
        self._check()
        return self.sim.send_action(action)

    def disconnect(self) -> None:
        self._check()
        self.sim.disconnect()
