"""The simulator as an SO-101 follower: lerobot's robot API on one world of a task in joint mode.

:class:`SimFollower` has ``SO101Follower``'s features (``"<motor>.pos"`` floats in the follower's
units, one ``(height, width, 3)`` entry per camera, ``front`` and ``wrist`` by default) and methods
(``connect``, ``calibrate`` (nothing to do: always calibrated), ``configure``, ``get_observation``,
``send_action`` returning the action actually sent after clamping, ``disconnect``). Each
``send_action`` runs one control period of the task's gym env (:mod:`so101_mjx.gym`, backend ``c``)
with the six targets in absolute joint mode; with ``real_time`` it then waits until the wall clock
has caught up with the simulated time, else it runs as fast as it can. The scene resets at
``connect``, on :meth:`SimFollower.reset`, and every ``reset_after_steps`` actions when set
(set it to ``fps * (episode_time_s + reset_time_s)`` to give each ``lerobot-record`` episode a
fresh scene). The ``lerobot_robot_so101_mjx`` plugin wraps it as lerobot's ``Robot``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from so101_mjx import _checks as checks
from so101_mjx.envs import registry
from so101_mjx.errors import InputError
from so101_mjx.follower.actions import (
    FEATURE_KEYS,
    OUT_OF_RANGE,
    as_dict,
    check_max_relative,
    clamp_relative,
    motor_targets,
)
from so101_mjx.render import camera
from so101_mjx.render.frames import check_quality
from so101_mjx.robot import calibration as calib

if TYPE_CHECKING:  # the gym env pulls in JAX: imported only when connecting
    from so101_mjx.gym.task_env import SO101MjxGymEnv
    from so101_mjx.render.rig import CameraRig

# the config fields the follower sets itself (joint mode's); relative targets and clamps are the caller's
JOINT_FIELDS = ("control_mode", "joint_units", "calibration", "control_dt", "relative_joint_targets",
                "max_relative_target")
MAX_CAMERA_SIZE = 8192  # pixels per side of a camera frame (the gym envs' MAX_FRAME_SIZE)

class DeviceNotConnectedError(ConnectionError):
    """A call that needs a connected follower on one that is not (lerobot raises its own of the same name)."""


class DeviceAlreadyConnectedError(ConnectionError):
    """``connect`` on a connected follower."""


@dataclasses.dataclass
class SimFollowerConfig:
    """A simulated follower.

    Attributes:
        task: the registered task whose scene and objects are simulated (``so101_mjx.envs.names()``).
        use_degrees: arm motors in degrees (lerobot's default), else -100..100; the gripper 0..100.
        calibration: the path of a real follower's lerobot calibration file (``~/.cache/huggingface/lerobot/
            calibration/robots/so101_follower/<id>.json``, or from Python a loaded
            :class:`~so101_mjx.robot.calibration.Calibration`) whose units the motors take
            (docs/calibration.md), or None: the model's joint ranges stand for the calibration.
        max_relative_target: motor units per action (one number, or one per motor name), or None.
        camera_names: cameras of the scene rendered into each observation (``front``, ``wrist``).
        camera_specs: the user's cameras in place of the scene's, by camera name: a camera file
            (JSON/YAML), a shipped camera's name, or a :class:`~so101_mjx.render.camera.CameraSpec` or its
            dict, with its pose, lens and ``latency`` (an observation shows the frame of ``latency``
            actions back; docs/camera_calibration.md); None: the scene's cameras as they are.
        camera_height, camera_width: pixels of each camera frame (1 to 8192).
        shadows: render the lights' shadows (a software GL renders a frame about 4x faster without).
        image_quality: the cameras' render model (:func:`so101_mjx.render.batch.render_model`): ``"full"``, the
            scene as shipped, or ``"shadowed"`` / ``"fast"``, the lighter meshes a camera policy is trained on
            (``"fast"`` draws no shadows).
        fps: control rate in Hz; the physics rate (``physics_dt``, 480 Hz by default) must be a whole multiple of it.
        real_time: pace ``send_action`` to the wall clock; else as fast as possible.
        out_of_range: ``"error"`` (a ValueError naming the motor) or ``"clip"`` (to the motor range).
        reset_after_steps: reset the scene after this many actions (None: never on its own).
        seed: the first reset's seed (each later reset takes the next one).
        task_options: more of the task's config fields (``reward_type``, ``random_block_position``, ...).

    Bad values raise InputError (a ValueError) naming the field at construction, not at ``connect()``.
    """

    task: str = "SO101PickCube-v0"
    use_degrees: bool = True
    calibration: str | None = None
    max_relative_target: float | dict[str, float] | None = None
    camera_names: tuple[str, ...] = ("front", "wrist")
    camera_specs: dict[str, Any] | None = None
    camera_height: int = 480
    camera_width: int = 640
    shadows: bool = True
    image_quality: str = "full"
    fps: int = 30
    real_time: bool = False
    out_of_range: str = "error"
    reset_after_steps: int | None = None
    seed: int = 0
    task_options: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.task = registry.canonical(self.task)
        if not isinstance(self.task_options, dict) or set(self.task_options) & set(JOINT_FIELDS):
            raise InputError(f"task_options must be a dict of the task's config fields other than {JOINT_FIELDS}, "
                             f"got {self.task_options!r}")
        checks.flag("use_degrees", self.use_degrees)
        self._calibration = calib.parse(self.calibration)  # read and checked once, here
        self.max_relative_target = check_max_relative(self.max_relative_target)
        if isinstance(self.camera_names, str) or not all(isinstance(c, str) for c in self.camera_names):
            raise InputError(f"camera_names must be a list of camera names, got {self.camera_names!r}")
        self.camera_names = tuple(self.camera_names)
        self._camera_specs = dict(camera.parse_specs(self.camera_specs, self.camera_names, "camera_names") or ())
        checks.integer("camera_height", self.camera_height, ge=1, le=MAX_CAMERA_SIZE)
        checks.integer("camera_width", self.camera_width, ge=1, le=MAX_CAMERA_SIZE)
        checks.integer("fps", self.fps, ge=1), checks.flag("shadows", self.shadows)
        check_quality(self.image_quality)
        checks.flag("real_time", self.real_time)
        if self.out_of_range not in OUT_OF_RANGE:
            raise InputError(f"out_of_range must be one of {OUT_OF_RANGE}, got {self.out_of_range!r}")
        if self.reset_after_steps is not None:
            checks.integer("reset_after_steps", self.reset_after_steps, ge=1)
        checks.integer("seed", self.seed, ge=0, le=2**32 - 1)
        self._check_task()

    def _check_task(self) -> None:
        """InputError, now rather than at ``connect()``, for ``task_options`` the task's config refuses or an
        ``fps`` that does not divide the physics rate."""
        cls = registry.task(self.task)
        try:
            config, _ = registry.split_options(cls, "c", {**self.task_options, "control_mode": "joint",
                                                          "joint_units": self.joint_units,
                                                          # the physics rate alone
                                                          "control_dt": self.task_options.get("physics_dt")})
        except InputError as err:
            raise InputError(f"task_options: {err}") from None
        rate = 1.0 / config.periods()[1]
        if abs(rate / self.fps - round(rate / self.fps)) > 1e-9 * rate or self.fps > rate:
            whole = abs(rate - round(rate)) < 1e-9
            allowed = f": one of {[f for f in range(1, round(rate) + 1) if round(rate) % f == 0]}" if whole else ""
            raise InputError(f"fps must divide the physics rate 1 / physics_dt = {rate:g} Hz of {self.task} "
                             f"in joint mode (a whole number of physics steps per action){allowed}, got {self.fps}")
        try:
            registry.split_options(cls, "c", self.env_config())
        except InputError as err:
            raise InputError(f"task_options with fps={self.fps}: {err}") from None

    @property
    def joint_units(self) -> str:
        return "degrees" if self.use_degrees else "range_m100_100"

    def env_config(self) -> dict[str, Any]:
        """The task's gym-env options: absolute joint mode in these units at ``fps``."""
        return {**self.task_options, "control_mode": "joint", "joint_units": self.joint_units,
                "calibration": self._calibration, "control_dt": 1.0 / self.fps}


class SimFollower:
    """A simulated ``so101_follower`` (see the module docstring)."""

    name = "so101_mjx"

    def __init__(self, config: SimFollowerConfig | None = None):
        self.config = SimFollowerConfig() if config is None else config
        if not isinstance(self.config, SimFollowerConfig):  # (the lerobot plugin's config is one)
            raise InputError(f"config must be a SimFollowerConfig, got {type(self.config).__name__}")
        self.env: SO101MjxGymEnv | None = None
        self._rig: CameraRig | None = None
        self._obs: dict[str, np.ndarray] = {}
        self.info: dict[str, Any] = {}  # the task's info after the last action (``succeed``, ...)
        self.terminated = False  # the task ended the episode at the last action (success or failure)
        self._steps = self._resets = 0
        self._clock = 0.0

    # -- features ------------------------------------------------------------------------------------
    @property
    def observation_features(self) -> dict[str, type | tuple]:
        size = (self.config.camera_height, self.config.camera_width, 3)
        return {**dict.fromkeys(FEATURE_KEYS, float), **dict.fromkeys(self.config.camera_names, size)}

    @property
    def action_features(self) -> dict[str, type]:
        return dict.fromkeys(FEATURE_KEYS, float)

    # -- connection ----------------------------------------------------------------------------------
    @property
    def is_connected(self) -> bool:
        return self.env is not None

    @property
    def is_calibrated(self) -> bool:
        return True

    def calibrate(self) -> None:
        """Nothing to do: the simulated motors follow the config's ``calibration``, else the model's joint ranges."""

    def configure(self) -> None:
        """Nothing to do: the simulated motors' gains are the model's."""

    def connect(self, calibrate: bool = True) -> None:
        """Build the task's env in joint mode and its cameras, then reset the scene."""
        if self.is_connected:
            raise DeviceAlreadyConnectedError(f"{self.name} is already connected")
        from so101_mjx.gym.task_env import gym_class  # the gym env pulls in JAX: only when connecting
        from so101_mjx.render.rig import CameraRig, frames_model

        env = gym_class(self.config.task)(self.config.seed, **self.config.env_config())
        cameras = [env._model.camera(i).name for i in range(env._model.ncam)]
        unknown = [c for c in self.config.camera_names if c not in cameras]
        if unknown:
            env.close()
            raise InputError(f"camera_names: {unknown} not in the {self.config.task} scene's cameras {cameras}")
        joint_mode = env.env.arm.joint_mode
        assert joint_mode is not None  # env_config() asks for joint mode
        self.limits = joint_mode.limits(env.env.arm.motor_ranges)
        height, width, specs = self.config.camera_height, self.config.camera_width, self.config._camera_specs
        try:
            model = frames_model(env._model, env.env.scene, self.config.image_quality, height, width)
            self._rig = CameraRig(model, {c: (c, specs.get(c)) for c in self.config.camera_names}, height, width,
                                  self.config.shadows)
            self._rig.open()  # the GL contexts now: a failure shows at connect
        except InputError as err:
            env.close()
            raise InputError(f"camera_specs: {err}") from None
        self.env = env
        self.reset(self.config.seed)

    def disconnect(self) -> None:
        env = self._connected()
        if self._rig is not None:
            self._rig.close()
        self._rig = None
        env.close()
        self.env = None

    def _connected(self) -> SO101MjxGymEnv:
        """The env; DeviceNotConnectedError when not connected."""
        if self.env is None:  # not is_connected
            raise DeviceNotConnectedError(f"{self.name} is not connected: call connect() first")
        return self.env

    # -- the loop ------------------------------------------------------------------------------------
    def reset(self, seed: int | None = None) -> None:
        """A fresh scene (the task's reset with ``seed``, default the next seed) and motor clock."""
        env = self._connected()
        seed = self.config.seed + self._resets if seed is None else checks.integer("seed", seed, ge=0, le=2**32 - 1)
        self._obs, self.info = env.reset(seed=seed)
        self.terminated = False
        self._resets, self._steps, self._clock = self._resets + 1, 0, time.perf_counter()
        if self._rig is not None:  # the states the cameras draw (a lagged camera draws an older one)
            self._rig.start(env.scene())

    def present_position(self) -> np.ndarray:
        """The six measured motor positions (6,) in the follower's units."""
        self._connected()
        return np.asarray(self._obs["agent_pos"][: len(FEATURE_KEYS)], np.float64)

    def environment_state(self) -> np.ndarray:
        """The task's object state (the gym env's ``environment_state``), which a real follower cannot provide."""
        self._connected()
        return np.asarray(self._obs["environment_state"], np.float32)

    def get_observation(self) -> dict[str, Any]:
        """``{"<motor>.pos": float}`` measured positions and one uint8 frame per camera."""
        obs: dict[str, Any] = as_dict(self.present_position())
        if self._rig is not None:
            obs.update(self._rig.frames(self._connected().scene()))
        return obs

    def send_action(self, action: dict[str, Any]) -> dict[str, float]:
        """Check ``action`` (:func:`~so101_mjx.follower.actions.motor_targets`), clamp it to
        ``max_relative_target`` of the present positions, run one control period with it, and return it."""
        env = self._connected()
        goal = motor_targets(action, self.limits, self.config.out_of_range)
        goal = clamp_relative(goal, self.present_position(), self.config.max_relative_target)
        self._obs, _, self.terminated, _, self.info = env.step(goal)
        self._steps += 1
        if self._rig is not None:
            self._rig.push(env.scene())
        if self.config.real_time:
            time.sleep(max(0.0, self._clock + self._steps / self.config.fps - time.perf_counter()))
        if self.config.reset_after_steps is not None and self._steps >= self.config.reset_after_steps:
            self.reset()
        return as_dict(goal)

    def __enter__(self) -> SimFollower:
        self.connect()
        return self

    def __exit__(self, *exc) -> None:
        if self.is_connected:
            self.disconnect()
