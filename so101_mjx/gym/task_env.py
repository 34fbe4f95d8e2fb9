"""The task envs: one gymnasium class per registered task, on :class:`~so101_mjx.gym.so101_env.SO101GymEnv`.

Each class (``SO101PickCubeGymEnv``, ``SO101PickPlaceGymEnv``, ...) has the reference's gym API:
``reset(seed)``, ``step``, its observation (``agent_pos`` (14) and ``environment_state``, or
``pixels.front`` with ``image_obs``, or one frame per camera of ``image_cameras``), and the reference's task
attributes (``reward_type``, ``_z_init``, ``_goal_pos``, ``_compute_reward()``, ...). Rewards, success and
termination are the functional task's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces

from so101_mjx import _checks as checks
from so101_mjx.envs import registry
from so101_mjx.envs.base import layout_text
from so101_mjx.envs.registry import NAMESPACE
from so101_mjx.envs.tasks.pick_cube import LIFT_SUCCESS_HEIGHT, PickCube
from so101_mjx.errors import InputError
from so101_mjx.gym.compiled import reset_draws
from so101_mjx.gym.mujoco_env import CAMERA, GymRenderingSpec
from so101_mjx.gym.so101_env import CARTESIAN_BOUNDS, HOME_POSITION, SO101GymEnv


def _config_field(field: str):
    return lambda env: getattr(env.env.config, field)


# the reference's task attributes that are not task entries: name -> reader, for the tasks that have it
REFERENCE_ATTRIBUTES = {
    "reward_type": _config_field("reward_type"),
    "_random_block_position": _config_field("random_block_position"),
    "_block_z": lambda env: np.float64(env.env._block_z),
    "_block_dof_adr": lambda env: int(env.env._block_dof),
    "_gripper_qpos_adr": lambda env: int(env.env.arm.gripper_qpos),
    "_z_success": lambda env: np.asarray(env.state.info.task["z_init"]) + LIFT_SUCCESS_HEIGHT
    if isinstance(env.env, PickCube) else None,
}


# The reference's positional parameters after ``seed`` (lerobot_env_so101 0.4.0's task constructors);
# tasks without a reference env take the common ones.
COMMON_POSITIONAL = ("control_dt", "physics_dt", "render_spec", "render_mode", "image_obs")
REFERENCE_POSITIONAL = {
    "SO101PickCube-v0": (*COMMON_POSITIONAL, "reward_type", "random_block_position", "action_scale",
                         "top_down_ik", "jaw_pads"),
    "SO101PickPlace-v0": (*COMMON_POSITIONAL, "random_block_position", "action_scale", "top_down_ik", "jaw_pads"),
}


def named_arguments(cls_name: str, order: tuple[str, ...], args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``args`` named by ``order`` and merged into ``kwargs``; TypeError (as Python's own) for too many
    positional arguments or one given twice."""
    if len(args) > len(order):
        raise TypeError(f"{cls_name}() takes at most {len(order) + 1} positional arguments (seed, {', '.join(order)}), "
                        f"got {len(args) + 1}")
    named = dict(zip(order, args))
    twice = sorted(set(named) & set(kwargs))
    if twice:
        raise TypeError(f"{cls_name}() got multiple values for argument {twice[0]!r}")
    return {**kwargs, **named}


class SO101MjxGymEnv(SO101GymEnv):
    """One world of a registered task on MuJoCo C, with the reference's gym API.

    Args:
        seed: seeds ``random_state`` (as the reference; episodes are seeded by ``reset(seed)``).
        *args: the reference's positional parameters after ``seed``, in its order: ``control_dt``,
            ``physics_dt``, ``render_spec``, ``render_mode``, ``image_obs``, then the task's own
            (PickCube: ``reward_type``, ``random_block_position``, ``action_scale``, ``top_down_ik``,
            ``jaw_pads``; PickPlace the same without ``reward_type``).
        render_spec: frame size and camera of ``render()`` and of ``pixels.front``.
        render_mode: ``"rgb_array"`` or ``"human"`` (MuJoCo's passive viewer, synced every step).
        image_obs: replace ``environment_state`` by ``pixels.front`` (H, W, 3) uint8.
        camera_spec: the user's camera in place of the render camera's own pose and lens, for
            :meth:`render` and ``pixels.front``: a camera file (JSON/YAML), a shipped camera's name,
            a :class:`~so101_mjx.render.camera.CameraSpec` or its dict (:mod:`so101_mjx.render.camera`).
            Its ``latency`` L delays ``pixels.front`` by L steps (the reset's frame until then);
            :meth:`render` shows the current state.
        image_cameras: extension, the cameras of ``pixels`` with ``image_obs``, e.g. ``("front", "wrist")``: one
            entry (H, W, 3) uint8 per camera, named after it, at ``render_spec``'s size; None or ``("front",)``
            (the default): ``pixels.front`` from the render camera, as the reference.
        camera_specs: extension, the user's cameras for ``image_cameras`` by name (camera files, names or specs
            as ``camera_spec``, each with its own latency); ``camera_spec`` still sets the render camera's.
        image_quality: extension, the model frames are drawn from (:func:`so101_mjx.render.rig.frames_model`):
            ``"full"`` (the default: the scene as shipped, the reference's frames), or the lighter ``"shadowed"``
            and ``"fast"`` that camera policies train on (:class:`~so101_mjx.envs.config.ArmConfig`'s
            ``image_quality``); for :meth:`render` and ``pixels``.
        xml_path, home_position, cartesian_bounds: as :class:`SO101GymEnv` (xml_path None: the task's scene).
        **config: task config overrides with the reference's names (``action_scale``,
            ``control_dt``, ``physics_dt``, ``reward_type``, ``random_block_position``,
            ``top_down_ik``, ``jaw_pads``) and backend options (``nthread``); ValueError naming an
            invalid field.
    """

    task: ClassVar[str] = ""

    def __init__(self, seed: int = 0, *args: Any, xml_path: str | Path | None = None, home_position=HOME_POSITION,
                 cartesian_bounds=CARTESIAN_BOUNDS, **config: Any):
        order = REFERENCE_POSITIONAL.get(self.task, COMMON_POSITIONAL)
        config = named_arguments(type(self).__name__, order, args, config)
        render_spec = config.pop("render_spec", GymRenderingSpec())
        render_mode, image_obs = config.pop("render_mode", "rgb_array"), config.pop("image_obs", False)
        frames = {k: config.pop(k, None) for k in ("camera_spec", "image_cameras", "camera_specs")}
        quality = config.pop("image_quality", "full")
        self._setup(registry.task(self.task), xml_path, seed, render_spec, render_mode, image_obs, home_position,
                    cartesian_bounds, config)
        self._set_cameras(quality, **frames)
        agent = spaces.Box(-np.inf, np.inf, (self.env.agent_pos_size,), np.float32)
        spec = self._render_specs
        if self.image_obs:
            frame = spaces.Box(0, 255, (spec.height, spec.width, 3), np.uint8)
            pixels = spaces.Dict(dict.fromkeys(self._rig.cameras, frame))
            self.observation_space = spaces.Dict({"pixels": pixels, "agent_pos": agent})
        else:
            env_box = spaces.Box(-np.inf, np.inf, (self.env.task_obs_size(),), np.float32)
            self.observation_space = spaces.Dict({"agent_pos": agent, "environment_state": env_box})

    def _set_cameras(self, quality: str, camera_spec: Any, image_cameras: Any, camera_specs: Any) -> None:
        """Check the frame options, choose the model frames are drawn from (``image_quality``), and set up the
        cameras of ``pixels`` (:class:`~so101_mjx.render.rig.CameraRig`) and their frame history."""
        from so101_mjx.render import camera, rig

        if camera_spec is not None:
            if self._render_camera == -1:
                raise InputError("camera_spec replaces a camera of the scene: render_spec.camera_id must "
                                 "name one, not -1")
            try:
                self._camera_spec = camera.parse(camera_spec)
                self._camera_spec.check_body(self._model)
            except InputError as err:
                raise InputError(f"camera_spec: {err}") from None
        if camera_specs is None and image_cameras in (None, (CAMERA,), [CAMERA]):  # the reference's pixels.front:
            cameras = {CAMERA: (self._render_camera, self._camera_spec)}  # the render camera's frames
        else:
            checks.needs_image_obs("image_cameras and camera_specs", self.image_obs)
            cameras = self._pixel_cameras((CAMERA,) if image_cameras is None else image_cameras, camera_specs)
        spec = self._render_specs
        self._frames_model = rig.frames_model(self._model, self.env.scene, quality, spec.height, spec.width)
        self._rig = rig.CameraRig(self._frames_model, cameras if self.image_obs else {}, spec.height, spec.width)
        self._remember(start=True)

    def _pixel_cameras(self, image_cameras: Any, camera_specs: Any) -> dict[str, tuple[str | int, Any]]:
        """``pixels``' cameras from ``image_cameras`` (scene camera names) and ``camera_specs`` (camera -> spec);
        ``camera_spec``, the render camera's, applies where that camera is one of them."""
        from so101_mjx.render import camera, rig

        image_cameras = rig.check_cameras(self._model, image_cameras)
        specs = dict(camera.parse_specs(camera_specs, image_cameras) or ())
        render = self._render_camera if isinstance(self._render_camera, str) else self._model.camera(
            self._render_camera).name
        if self._camera_spec is not None and render in image_cameras:
            if render in specs:
                raise InputError(f"camera_spec and camera_specs[{render!r}] both set the {render!r} camera: give one")
            specs[render] = self._camera_spec
        return {name: (name, specs.get(name)) for name in image_cameras}

    def _remember(self, start: bool) -> None:
        """Keep the current scene for the lagged cameras of ``pixels`` (only where there is a lag)."""
        if self._rig.lagged:
            (self._rig.start if start else self._rig.push)(self.scene())

    def close(self) -> None:
        """Release the cameras of ``pixels``, the renderer and the viewer."""
        rig = self.__dict__.get("_rig")
        if rig is not None:
            rig.close()
        super().close()

    # -- gymnasium API --------------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[dict, dict]:
        """New episode (``seed`` positional or keyword; other keywords, e.g. ``options``, are ignored,
        as the reference). For a task mirroring the reference, block (and goal) are drawn from
        ``np_random`` exactly as lerobot_env_so101's ``reset(seed)`` draws them (same seed, same
        positions); a JAX key drawn after them seeds the rest (randomization). Other tasks draw
        everything from that key. The arm then goes to ``home_position`` (:meth:`reset_robot`)."""
        super().reset(seed=seed)
        seed, fixed = reset_draws(self.env, self.np_random)
        key = jax.random.PRNGKey(seed)
        if fixed is None:
            self._set_state(self._compiled.reset(key))
        else:
            self._set_state(self._compiled.reset_to(key, **{k: jnp.asarray(v, self._dtype) for k, v in fixed.items()}))
        self.reset_robot()
        self._remember(start=True)
        if self.render_mode == "human":
            self._sync_viewer()
        return self._compute_observation(), {}

    def reset_to(self, state) -> tuple[dict, dict]:
        """Start an episode from an exact functional state (e.g. ``self.env.reset_to(key, block_xy=...)``)."""
        self._set_state(state)
        self._remember(start=True)
        return self._observation(), {}

    def step(self, action) -> tuple[dict, float, bool, bool, dict]:
        """One control step with ``action`` (4,) = [dx, dy, dz, grasp] (:meth:`apply_action`).

        ``terminated``: success, or the task's failure (the block left the area). ``info``:
        ``succeed`` (the reference's key) and ``is_success`` (the key lerobot-eval reads)."""
        self.apply_action(action)
        self._remember(start=False)
        s = self._state
        succeed = bool(s.info.succeed)
        return self._observation(), float(s.reward), bool(s.done), False, {"succeed": succeed, "is_success": succeed}

    # -- the reference's task methods -----------------------------------------------------------
    def _compute_observation(self) -> dict:
        """The observation of the current state (edits of :attr:`data` included)."""
        self._read_back()
        self._state = self._state.replace(obs=self._compiled.observe(self._state.physics, self._state.info))
        return self._observation()

    def _compute_reward(self) -> float:
        """The task's reward at the current state."""
        self._read_back()
        return float(self._compiled.evaluate(self._state.physics, self._state.info)[1])

    def _is_success(self) -> bool:
        """The task's success criterion at the current state."""
        self._read_back()
        return bool(self._compiled.evaluate(self._state.physics, self._state.info)[0])

    @property
    def task_description(self) -> str:
        """The task's instruction (what ``so101-mjx record`` writes as the dataset's task; lerobot-eval
        passes it to language-conditioned policies)."""
        return self.env.instruction

    def __getattr__(self, name: str) -> Any:
        """The reference's task attributes: task entries (``_z_init``, ``_was_carried``),
        ``_<marker>_pos`` (``_goal_pos``) and :data:`REFERENCE_ATTRIBUTES` where the task has them."""
        state = self.__dict__.get("_state")
        if state is not None:
            key = name[1:]
            if name.startswith("_") and key in state.info.task:
                return np.asarray(state.info.task[key])
            if name.startswith("_") and key.endswith("_pos") and key[:-4] in self.env.markers.values():
                return np.asarray(state.info.task[key[:-4]], np.float64)
            if name in REFERENCE_ATTRIBUTES:
                try:
                    value = REFERENCE_ATTRIBUTES[name](self)
                except AttributeError:
                    value = None
                if value is not None:
                    return value
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    # -- internals ------------------------------------------------------------------------------
    def _marker_positions(self) -> dict[str, np.ndarray]:
        return {site: np.asarray(pos) for site, pos in self.env.marker_positions(self._state.info).items()}

    def _observation(self) -> dict:
        obs = np.asarray(self._state.obs, np.float32)
        if self.image_obs:  # each camera's frame of the state its latency back
            return {"pixels": self._rig.frames(self.scene()), "agent_pos": obs[:self.env.agent_pos_size]}
        return {"agent_pos": obs[:self.env.agent_pos_size], "environment_state": obs[self.env.agent_pos_size:]}


def gym_class_name(name: str) -> str:
    """``SO101PickCube-v0`` -> ``SO101PickCubeGymEnv`` (the reference's class names)."""
    return name.split("-v")[0] + "GymEnv"


def gym_class(name: str) -> type[SO101MjxGymEnv]:
    """The gymnasium class of a registered env: :class:`SO101MjxGymEnv` bound to it, with one
    ``<entry>_pos`` property per render marker (``goal_pos``, ``target_pos``)."""
    task = registry.task(name)
    props = {f"{key}_pos": _marker_property(key) for key in task.markers.values()}
    doc = f"``{NAMESPACE}{task.name}``: environment_state = {layout_text(task.observation_layout)}."
    return type(gym_class_name(task.name), (SO101MjxGymEnv,),
                {"task": task.name, "__doc__": doc, "__module__": __package__, **props})


def _marker_property(key: str) -> property:
    return property(lambda self: np.asarray(self._state.info.task[key], np.float64),
                    doc=f"World position (3,) of the task's {key}.")
