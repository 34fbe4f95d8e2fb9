"""The ``so101_mjx`` lerobot ``EnvConfig``: ``--env.type=so101_mjx --env.task=SO101PickCube-v0``.

Imported by the package only when lerobot is installed. Everything task-specific (gym id,
features, fps, episode length, gym kwargs) comes from :func:`lerobot_env_so101_mjx.spec.task_spec`;
that module, and with it JAX and MuJoCo, is imported when an ``so101_mjx`` config is built, not
when lerobot merely discovers the plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lerobot.configs import FeatureType, PolicyFeature
from lerobot.envs.configs import EnvConfig

if TYPE_CHECKING:
    from lerobot_env_so101_mjx.spec import TaskSpec


@EnvConfig.register_subclass("so101_mjx")
@dataclass
class SO101MjxEnv(EnvConfig):
    """An so101_mjx task as a lerobot env (gym id ``so101_mjx/<task>``, MuJoCo C, one world each).

    ``None`` fields take the task's value at construction: ``fps`` (1 / control_dt),
    ``episode_length``, ``action_scale``, and ``random_block_position`` / ``reward_type`` where the
    task has them; ``observation_height`` / ``observation_width`` the gym env's frame size (pixels).
    ``image_obs`` observes ``pixels.<camera>`` (observation_height, observation_width, 3) for each of ``cameras``
    (comma-separated: ``front``, or ``front,wrist`` as a follower's cameras) instead of ``environment_state``, drawn
    from the ``image_quality`` render model (``full``, the scene as shipped; ``shadowed``; ``fast``), through the
    user's cameras of ``camera_specs`` (``wrist=menagerie_wrist,front=front.json``: pose, lens, latency). Actions are
    (4,) ``[dx, dy, dz, grasp]``, grasp in [0, 1]; with ``control_mode=joint`` the follower's six motor targets in
    ``joint_units`` (``degrees`` or ``range_m100_100``; the gripper 0..100), and ``observation.state`` the six motor
    positions, at 30 fps: what ``lerobot-record`` records on a real SO-101. ``vector``: step the
    worlds together in one :class:`~so101_mjx.gym.vector.SO101VectorEnv` (its frames, with ``image_obs``, drawn for
    all worlds in one call of the render workers; ``False``: lerobot's own vector env of gym envs, one world each).
    """

    task: str | None = "SO101PickCube-v0"
    fps: int | None = None
    episode_length: int | None = None
    image_obs: bool = False
    cameras: str = "front"
    image_quality: str = "full"
    camera_specs: str = ""
    observation_height: int | None = None
    observation_width: int | None = None
    action_scale: float | None = None
    random_block_position: bool | None = None
    reward_type: str | None = None
    control_mode: str | None = None
    joint_units: str | None = None
    vector: bool = True

    def __post_init__(self) -> None:
        spec = self._spec()
        self.task, self.fps, self.episode_length = spec.task, spec.fps, spec.episode_length
        self.observation_height, self.observation_width = spec.frame_size
        for key, value in spec.task_options.items():
            setattr(self, key, value)
        self.features = {key: PolicyFeature(type=FeatureType[kind], shape=shape)
                         for key, (kind, shape) in spec.features.items()}
        self.features_map = dict(spec.features_map)

    def _spec(self) -> TaskSpec:
        """The task's lerobot view from the current field values (ValueError naming a bad field)."""
        from lerobot_env_so101_mjx.spec import task_spec  # imported on use: loads JAX and MuJoCo

        return task_spec(
            self.task,
            image_obs=self.image_obs,
            cameras=self.cameras,
            image_quality=self.image_quality,
            camera_specs=self.camera_specs,
            observation_height=self.observation_height,
            observation_width=self.observation_width,
            fps=self.fps,
            episode_length=self.episode_length,
            action_scale=self.action_scale,
            random_block_position=self.random_block_position,
            reward_type=self.reward_type,
            control_mode=self.control_mode,
            joint_units=self.joint_units,
        )

    def create_envs(self, n_envs: int, use_async_envs: bool = False) -> dict[str, dict[int, Any]]:
        """lerobot >= 0.6's hook behind ``make_env``: one :class:`~so101_mjx.gym.vector.SO101VectorEnv` of ``n_envs``
        worlds stepped together in this process (``use_async_envs`` has nothing to spread); with ``vector=False``,
        lerobot's vector env of gym envs."""
        if not self.vector:
            return super().create_envs(n_envs, use_async_envs)
        from so101_mjx.gym.vector import SO101VectorEnv  # imported on use: loads JAX and MuJoCo

        spec = self._spec()
        return {self.type: {0: SO101VectorEnv(spec.task, n_envs, **spec.vector_kwargs)}}

    @property
    def package_name(self) -> str:
        """``so101_mjx.gym``: lerobot imports it when ``gym_id`` is not registered yet."""
        return self._spec().package_name

    @property
    def gym_id(self) -> str:
        """``so101_mjx/<task>`` (the base class would build ``<package_name>/<task>``)."""
        return self._spec().gym_id

    @property
    def gym_kwargs(self) -> dict[str, Any]:
        """``gym.make`` kwargs: image_obs, render_spec, the task options, max_episode_steps."""
        return dict(self._spec().gym_kwargs)
