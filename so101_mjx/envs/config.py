"""The config every task shares (:class:`ArmConfig`): rates, control mode, IK, observation and randomization options."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

from so101_mjx import _checks as checks
from so101_mjx.envs.arm import CARTESIAN_BOUNDS, HOME_POSITION, IK_SOLVERS
from so101_mjx.errors import InputError
from so101_mjx.render import camera, visual_randomization
from so101_mjx.render.frames import check_quality
from so101_mjx.robot import calibration as calib
from so101_mjx.robot.motors import JOINT_UNITS
from so101_mjx.sim import randomization, servo

MAX_SUBSTEPS = 10_000  # physics steps per control step (20 s of simulated time at physics_dt 2 ms)
MAX_EPISODE_LENGTH = 2**31 - 1  # control steps; step counters are int32
MAX_IMAGE_SIZE = 1024  # px, the scenes' offscreen buffer
CONTROL_MODES = ("cartesian", "joint")
CARTESIAN_DEFAULTS = {"control_dt": 0.1, "physics_dt": 0.002}  # the reference's
JOINT_DEFAULTS = {"control_dt": 1 / 30, "physics_dt": 1 / 480}  # lerobot-record's 30 fps; 16 physics steps each


def whole_substeps(control_dt: float, physics_dt: float) -> int:
    """``n = control_dt / physics_dt`` when it is a whole number (to 1e-9), else InputError naming both
    rates (joint mode: a control tick runs whole physics steps, as the station's ticks do)."""
    ratio = control_dt / physics_dt
    n = round(ratio)
    if n < 1 or abs(ratio - n) > 1e-9 * n:
        raise InputError(f"the control rate 1 / control_dt = {1 / control_dt:g} Hz must divide the physics rate "
                         f"1 / physics_dt = {1 / physics_dt:g} Hz (a whole number of physics steps per control step)")
    return n


@dataclasses.dataclass(frozen=True)
class ArmConfig:
    """Fields shared by every SO-101 task; names and defaults as the reference ``SO101GymEnv``."""

    # fields an earlier version of a task's config had, with the one value they could hold there: a saved config
    # (run.json) with that value still loads, without the field; another value is refused naming it
    retired: ClassVar[dict[str, Any]] = {}

    control_dt: float | None = None  # s; None: 0.1 (the reference's) in Cartesian mode, 1/30 in joint mode
    physics_dt: float | None = None  # s; None: 0.002 (the reference's) in Cartesian mode, 1/480 in joint mode
    action_scale: float = 1.0
    home_position: tuple[float, ...] = HOME_POSITION  # rad, the five arm joints (and their targets) at reset
    # m, [[min x, y, z], [max x, y, z]] of the IK target
    cartesian_bounds: tuple[tuple[float, ...], ...] = CARTESIAN_BOUNDS
    top_down_ik: bool = False
    ik_solver: str = "lm"  # extension: "analytic" (top-down only) for the closed-form IK instead of the reference's LM
    jaw_pads: bool = False
    image_obs: bool = False
    image_size: int = 64  # px, height = width of pixels/front when image_obs
    # the camera's render model: "fast", "shadowed" or "full" (so101_mjx.render.batch.render_model)
    image_quality: str = "fast"
    image_cameras: tuple[str, ...] = ("front",)  # with image_obs, one pixels/<camera> entry each: "front", "wrist"
    episode_length: int = 100
    randomization: randomization.Randomization | None = None  # per-episode domain randomization
    # per-episode lighting, colours, camera poses (image_obs)
    visual_randomization: visual_randomization.VisualRandomization | None = None
    # with image_obs, the user's cameras (render.camera): image camera -> a camera file's path or name, a CameraSpec or
    # its dict form (pose, intrinsics, lens distortion, latency in control ticks); None: the scene's cameras as they are
    camera_specs: tuple[tuple[str, camera.CameraSpec], ...] | None = None
    # extension, the real follower's action space (envs.arm, "Joint mode"): "cartesian" (the reference's
    # [dx, dy, dz, grasp]) or "joint" (six motor targets in lerobot's follower units)
    control_mode: str = "cartesian"
    joint_units: str = "degrees"  # joint mode: the arm motors' units, "degrees" or "range_m100_100" (robot.motors)
    # joint mode: the motor units follow a real follower's lerobot calibration (robot.calibration): a file's path,
    # a Calibration or its dict form; None: the MJCF joint ranges stand for it
    calibration: calib.Calibration | None = None
    relative_joint_targets: bool = False  # joint mode: actions are offsets from the measured motor positions
    max_relative_target: float | None = None  # joint mode: largest |target - measured| per motor, in motor units
    # the STS3215 servos between targets and physics (sim.servo); None: ideal
    servo_model: servo.ServoModel | None = None

    def __post_init__(self) -> None:
        self.validate()

    def periods(self) -> tuple[float, float]:
        """``(control_dt, physics_dt)`` in s, as :meth:`validate` filled them in (a built config has both)."""
        assert self.control_dt is not None and self.physics_dt is not None  # validate() sets both
        return self.control_dt, self.physics_dt

    def validate(self) -> None:
        """Raise ValueError naming the first invalid field; store plain Python values (JSON-ready).

        Runs at construction (``dataclasses.replace`` and ``make`` included) and again in the env.
        """
        set_ = object.__setattr__
        if self.control_mode not in CONTROL_MODES:
            raise InputError(f"control_mode must be one of {CONTROL_MODES}, got {self.control_mode!r}")
        joint = self.control_mode == "joint"
        for name in ("physics_dt", "control_dt"):
            default = JOINT_DEFAULTS[name] if joint else CARTESIAN_DEFAULTS[name]
            set_(self, name,
                 checks.real(name, default if getattr(self, name) is None else getattr(self, name), gt=0, unit=" s"))
        control_dt, physics_dt = self.periods()
        if not control_dt >= physics_dt:
            raise InputError(f"physics_dt ({physics_dt}) must not exceed control_dt ({control_dt})")
        substeps = control_dt // physics_dt
        if substeps > MAX_SUBSTEPS:
            raise InputError(f"control_dt / physics_dt = {substeps:.3g} physics substeps per control step; at most "
                             f"{MAX_SUBSTEPS} allowed (control_dt={control_dt}, physics_dt={physics_dt})")
        if joint:
            whole_substeps(control_dt, physics_dt)
        if self.joint_units not in JOINT_UNITS:
            raise InputError(f"joint_units must be one of {JOINT_UNITS}, got {self.joint_units!r}")
        set_(self, "relative_joint_targets", checks.flag("relative_joint_targets", self.relative_joint_targets))
        if self.max_relative_target is not None:
            set_(self, "max_relative_target", checks.real("max_relative_target", self.max_relative_target, gt=0))
        if (self.relative_joint_targets or self.max_relative_target is not None) and not joint:
            raise InputError("relative_joint_targets and max_relative_target apply to control_mode='joint' only")
        set_(self, "calibration", calib.parse(self.calibration))
        if self.calibration is not None and not joint:
            raise InputError("calibration (the motor units' calibration) applies to control_mode='joint' only")
        scale = checks.real("action_scale", self.action_scale)
        if not scale > 0:
            raise InputError(f"action_scale must be positive (m of IK-target motion per unit action), got {scale!r}")
        set_(self, "action_scale", scale)
        home = checks.real_array("home_position", self.home_position, (len(HOME_POSITION),), finite=True,
                                 layout=" (arm joint angles, rad)")
        set_(self, "home_position", tuple(home.tolist()))
        bounds = checks.real_array("cartesian_bounds", self.cartesian_bounds, (2, 3), finite=True,
                                   layout=" = [[min x, y, z], [max x, y, z]] (m)")
        if np.any(bounds[0] > bounds[1]):
            raise InputError(f"cartesian_bounds must have min <= max on every axis, got {bounds.tolist()}")
        set_(self, "cartesian_bounds", tuple(tuple(row) for row in bounds.tolist()))
        if self.ik_solver not in IK_SOLVERS or (self.ik_solver == "analytic" and not self.top_down_ik):
            raise InputError(f"ik_solver must be one of {IK_SOLVERS} ('analytic' needs top_down_ik=True), got "
                             f"{self.ik_solver!r}")
        for name in ("top_down_ik", "jaw_pads", "image_obs"):
            set_(self, name, checks.flag(name, getattr(self, name)))
        set_(self, "episode_length", checks.integer("episode_length", self.episode_length, ge=1, le=MAX_EPISODE_LENGTH))
        set_(self, "randomization", randomization.parse(self.randomization))
        set_(self, "servo_model", servo.parse(self.servo_model))
        set_(self, "image_size", checks.integer("image_size", self.image_size, ge=1, le=MAX_IMAGE_SIZE))
        check_quality(self.image_quality)
        cameras = self.image_cameras
        if (not isinstance(cameras, (tuple, list)) or not cameras or len(set(cameras)) != len(cameras)
                or not all(isinstance(c, str) and c for c in cameras)):
            raise InputError(f"image_cameras must be a non-empty tuple of distinct camera names, got {cameras!r}")
        set_(self, "image_cameras", tuple(cameras))
        set_(self, "visual_randomization", visual_randomization.parse(self.visual_randomization))
        if self.visual_randomization is not None:
            checks.needs_image_obs("visual_randomization", self.image_obs)
        set_(self, "camera_specs", camera.parse_specs(self.camera_specs, self.image_cameras))
        if self.camera_specs is not None:
            checks.needs_image_obs("camera_specs", self.image_obs)
