"""``--robot.type=so101_mjx``: the simulated follower's lerobot config, the fields of
:class:`so101_mjx.follower.SimFollowerConfig` (``--robot.<field>``) plus lerobot's ``id`` and
``calibration_dir``, as lerobot's own followers combine ``RobotConfig`` with their config."""

from __future__ import annotations

from dataclasses import dataclass

from lerobot.robots.config import RobotConfig

from so101_mjx.follower import SimFollowerConfig


@RobotConfig.register_subclass("so101_mjx")
@dataclass
class SO101MjxConfig(RobotConfig, SimFollowerConfig):
    """A simulated SO-101 follower: ``so101_follower``'s features, the ``task``'s scene.

    ``camera_names`` (not ``cameras``: the cameras are the scene's, not lerobot camera configs)
    lists the rendered cameras; ``real_time`` is on by default here (lerobot's loops run at the
    robot's pace). Bad values fail at construction, naming the field.
    """

    real_time: bool = True

    def __post_init__(self) -> None:
        RobotConfig.__post_init__(self)
        SimFollowerConfig.__post_init__(self)
