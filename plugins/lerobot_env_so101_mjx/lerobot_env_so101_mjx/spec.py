"""What lerobot needs to know about an so101_mjx task, derived from the task registry.

:func:`task_spec` turns the plugin's config values into the gym id, the module whose import
registers it, the features (policy inputs and outputs, with shapes from the task's observation
layout), their map to lerobot's keys and the ``gym.make`` kwargs. A pure function of its
arguments; it imports neither lerobot nor torch, so CI tests it without them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import so101_mjx.gym as so101_gym
from so101_mjx import _checks as checks
from so101_mjx.envs import registry
from so101_mjx.envs.arm import agent_pos_layout
from so101_mjx.render.frames import check_quality

# Task config fields the plugin forwards to gym.make, each where the task's config has it.
TASK_OPTIONS = ("action_scale", "random_block_position", "reward_type", "control_mode", "joint_units")
PIXELS_KEY = f"pixels/{so101_gym.CAMERA}"  # the gym env's nested observation pixels.front
# lerobot's key names (lerobot.utils.constants ACTION, OBS_STATE, OBS_ENV_STATE, OBS_IMAGES),
# spelled out so this module needs no lerobot; the lerobot test checks them against lerobot's.
LEROBOT_KEYS = {
    "action": "action",
    "agent_pos": "observation.state",
    "environment_state": "observation.environment_state",
    PIXELS_KEY: f"observation.images.{so101_gym.CAMERA}",
}


def lerobot_key(key: str) -> str:
    """lerobot's name of an env feature key: :data:`LEROBOT_KEYS`, and ``pixels/<camera>`` ->
    ``observation.images.<camera>`` for every camera."""
    return LEROBOT_KEYS.get(key, f"observation.images.{key.removeprefix('pixels/')}")


def camera_list(cameras: Any) -> tuple[str, ...]:
    """``cameras`` as a tuple of names: a comma-separated string (``"front,wrist"``, as lerobot's own env configs
    spell camera lists) or a sequence of names; ValueError naming the field for an empty or repeated list."""
    names = tuple(c.strip() for c in cameras.split(",")) if isinstance(cameras, str) else tuple(cameras or ())
    if not names or not all(isinstance(c, str) and c for c in names) or len(set(names)) != len(names):
        raise ValueError(f"cameras must be distinct camera names, comma-separated (e.g. 'front,wrist'), got "
                         f"{cameras!r}")
    return names


def camera_files(value: Any, cameras: tuple[str, ...]) -> dict[str, Any]:
    """``camera_specs`` as ``{camera: camera file or name}``: a comma-separated string of ``camera=file`` pairs
    (``"wrist=menagerie_wrist,front=front.json"``) or a mapping, each camera one of ``cameras`` and each file read
    and checked now (:func:`so101_mjx.render.camera.parse_specs`); ValueError naming the field."""
    from so101_mjx.render import camera

    if value is None or value == "":
        return {}
    if isinstance(value, str):
        pairs = [item.split("=", 1) for item in value.split(",")]
        if not all(len(pair) == 2 and pair[0].strip() and pair[1].strip() for pair in pairs):
            raise ValueError(f"camera_specs must be comma-separated camera=file pairs (e.g. "
                             f"'wrist=menagerie_wrist,front=front.json'), got {value!r}")
        value = {name.strip(): file.strip() for name, file in pairs}
    camera.parse_specs(value, cameras, field="cameras")  # reads and checks every file
    return dict(value)


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """One task's lerobot view. ``features`` maps env keys to ``(FeatureType name, shape)``:
    ``action`` (4,) (joint mode: the six motor targets (6,)), ``agent_pos`` (14,) (joint mode: the six motor
    positions (6,)), then ``environment_state`` (task's size,) or ``pixels/<camera>`` (height, width, 3) uint8
    pixels, one per camera."""

    task: str  # canonical registry name
    gym_id: str
    package_name: str  # the module whose import registers gym_id
    fps: int  # control steps per second, 1 / control_dt
    frame_size: tuple[int, int]  # (height, width) pixels of render() and of each camera of pixels
    episode_length: int  # control steps before truncation
    task_options: dict[str, Any]  # TASK_OPTIONS the task has, with their values (defaults filled)
    features: dict[str, tuple[str, tuple[int, ...]]]
    features_map: dict[str, str]
    gym_kwargs: dict[str, Any]
    # SO101VectorEnv's keyword arguments: the task options, episode length, frame size and image_obs
    vector_kwargs: dict[str, Any]


def task_spec(
    task: str,
    *,
    image_obs: bool = False,
    cameras: str | tuple[str, ...] = so101_gym.CAMERA,
    image_quality: str = "full",
    camera_specs: str | dict[str, Any] | None = None,
    observation_height: int | None = None,
    observation_width: int | None = None,
    fps: int | None = None,
    episode_length: int | None = None,
    **task_options: Any,
) -> TaskSpec:
    """The lerobot view of registered task ``task`` (``SO101PickCube-v0`` or ``so101_mjx/...``).

    Args:
        image_obs: observe ``pixels/<camera>`` (observation_height, observation_width, 3) for each of ``cameras``
            instead of ``environment_state``.
        cameras: the cameras of ``pixels`` with ``image_obs``: ``"front"`` (the reference's), ``"front,wrist"``.
        image_quality: the model frames are drawn from: ``"full"`` (the scene as shipped), ``"shadowed"`` or
            ``"fast"`` (lighter meshes, what camera policies here train on).
        camera_specs: the user's cameras among ``cameras`` (pose, lens, latency): ``"wrist=menagerie_wrist,
            front=front.json"`` (camera files or the names of shipped ones) or a mapping.
        observation_height, observation_width: frame size in pixels (render and pixels.front);
            None for the gym env's default (``GymRenderingSpec``).
        fps: None or the task's control rate in Hz (lerobot records it; it is not a setting).
        episode_length: control steps per episode; None for the task's.
        task_options: values for :data:`TASK_OPTIONS`; None (or absent) for the task's default.

    Raises ValueError naming the field for an unknown task, a bad value, an option the task does
    not have, or an fps other than the task's.
    """
    try:
        name = registry.canonical(task)
    except ValueError as e:
        raise ValueError(f"task must be one of {registry.names()} (optionally prefixed {registry.NAMESPACE!r}), "
                         f"got {task!r}") from e
    unknown = sorted(set(task_options) - set(TASK_OPTIONS))
    if unknown:
        raise ValueError(f"unknown task option(s) {unknown}; expected some of {list(TASK_OPTIONS)}")
    image_obs = checks.flag("image_obs", image_obs)
    cameras = camera_list(cameras)
    check_quality(image_quality)
    if cameras != (so101_gym.CAMERA,) and not image_obs:
        raise ValueError(f"cameras {list(cameras)} are the frames of image_obs: set image_obs=true, or leave cameras "
                         "unset")
    specs = camera_files(camera_specs, cameras)
    if specs and not image_obs:
        raise ValueError("camera_specs sets the cameras of image_obs: set image_obs=true, or leave camera_specs unset")
    frame = so101_gym.GymRenderingSpec()  # the gym env's default frame size
    limit = so101_gym.MAX_FRAME_SIZE
    height = checks.integer("observation_height", frame.height if observation_height is None else observation_height,
                            ge=1, le=limit)
    width = checks.integer("observation_width", frame.width if observation_width is None else observation_width,
                           ge=1, le=limit)

    default = registry.default_config(name)
    fields = {f.name for f in dataclasses.fields(default)}
    given = {k: v for k, v in task_options.items() if v is not None}
    absent = sorted(set(given) - fields)
    if absent:
        raise ValueError(f"{name} has no option(s) {absent} (its config has no such field); leave them unset")
    if episode_length is not None:
        given["episode_length"] = episode_length
    # validates (ValueError naming the field); another control_mode takes its own default rates
    config, _ = registry.split_options(registry.task(name), None, given)

    rate = round(1.0 / config.control_dt)
    if fps is not None and fps != rate:
        raise ValueError(f"fps must be None or {name}'s control rate {rate} Hz (1 / control_dt), got {fps!r}")

    options = {k: getattr(config, k) for k in TASK_OPTIONS if k in fields}
    joint = config.control_mode == "joint"
    state_size = sum(size for _, size in agent_pos_layout(config.control_mode))
    features: dict[str, tuple[str, tuple[int, ...]]] = {"action": ("ACTION", (6 if joint else 4,)),
                                                        "agent_pos": ("STATE", (state_size,))}
    if image_obs:
        features.update({f"pixels/{camera}": ("VISUAL", (height, width, 3)) for camera in cameras})
    else:
        features["environment_state"] = ("ENV", (registry.task(name).task_obs_size(),))
    frames = {"image_cameras": cameras} if cameras != (so101_gym.CAMERA,) else {}
    frames.update({"image_quality": image_quality} if image_quality != "full" else {})
    frames.update({"camera_specs": specs} if specs else {})
    gym_kwargs = {
        "image_obs": image_obs,
        **frames,
        "render_spec": so101_gym.GymRenderingSpec(height=height, width=width),
        **options,
        "max_episode_steps": config.episode_length,
    }
    return TaskSpec(
        task=name,
        gym_id=registry.NAMESPACE + name,
        package_name=so101_gym.__name__,
        fps=rate,
        frame_size=(height, width),
        episode_length=config.episode_length,
        task_options=options,
        features=features,
        features_map={key: lerobot_key(key) for key in features},
        gym_kwargs=gym_kwargs,
        vector_kwargs={**options, "episode_length": config.episode_length, "render_size": (height, width),
                       "image_obs": image_obs, **frames},
    )
