"""``--robot.type=so101_mjx``: the simulated follower's lerobot config (fields as
:class:`so101_mjx.follower.SimFollowerConfig`, plus lerobot's ``id`` and ``calibration_dir``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lerobot.robots.config import RobotConfig


@RobotConfig.register_subclass("so101_mjx")
@dataclass
class SO101MjxConfig(RobotConfig):
    """A simulated SO-101 follower: ``so101_follower``'s features, the ``task``'s scene.

    ``camera_names`` (not ``cameras``: the cameras are the scene's, not lerobot camera configs)
    lists the rendered cameras, each ``camera_height`` x ``camera_width`` (``shadows`` off renders faster
    on a software GL); ``real_time`` paces
    ``send_action`` to the wall clock; ``out_of_range`` is ``"error"`` or ``"clip"``;
    ``reset_after_steps`` resets the scene every that many actions.
    """

    task: str = "SO101PickCube-v0"
    use_degrees: bool = True
    max_relative_target: float | dict[str, float] | None = None
    camera_names: list[str] = field(default_factory=lambda: ["front", "wrist"])
    camera_height: int = 480
    camera_width: int = 640
    shadows: bool = True
    fps: int = 30
    real_time: bool = True
    out_of_range: str = "error"
    reset_after_steps: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        self.sim_config()  # bad values fail here, naming the field

    def sim_config(self):
        """The :class:`so101_mjx.follower.SimFollowerConfig` of these fields."""
        from so101_mjx.follower import SimFollowerConfig

        return SimFollowerConfig(
            task=self.task, use_degrees=self.use_degrees, max_relative_target=self.max_relative_target,
            camera_names=tuple(self.camera_names), camera_height=self.camera_height, camera_width=self.camera_width,
            shadows=self.shadows, fps=self.fps, real_time=self.real_time, out_of_range=self.out_of_range,
            reset_after_steps=self.reset_after_steps, seed=self.seed)
