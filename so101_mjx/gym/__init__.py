"""gymnasium envs on MuJoCo C: a drop-in for lerobot_env_so101 0.4.0.

``import so101_mjx.gym`` registers ``so101_mjx/<name>`` for every registered task
(``so101_mjx/SO101PickCube-v0``, ``so101_mjx/SO101PickPlace-v0``, ...; truncated at the task's
``episode_length``), each as a class named like the reference's (``SO101PickCubeGymEnv``). A
lerobot_env_so101 user switches by changing the import and the env id::

    import gymnasium as gym
    import so101_mjx.gym  # noqa: F401
    env = gym.make("so101_mjx/SO101PickPlace-v0", action_scale=0.025)

The reference's classes are here under their names: :class:`MujocoGymEnv` (model, data, frames,
viewer), :class:`SO101GymEnv` (the robot's control; instantiated directly, the robot-only env),
:class:`GymRenderingSpec`, :class:`SevenDofToFourDofAdapter`, the gripper mappings and
:func:`solve_ik` (its ``ik_control.solve_ik``). Each task env steps ONE world of the functional
env (:mod:`so101_mjx.envs`) on backend ``c``, jitted once per instance: rewards, IK, observations
and sanitization are that code, not a second implementation. The functional env runs in float64
when JAX x64 is enabled and in float32 otherwise; observations are float32 like the reference's.

Scenario code written against the reference works: ``reset(seed)`` places the block (and goal)
where lerobot_env_so101's does; ``env._model``, ``env._data`` (writable: edits of qpos, qvel, ctrl
reach the simulation on the next ``step()``), ``_target_ee_pos`` (settable) and the reference's
other private attributes are there. Differences: non-finite actions hold the pose (see
:mod:`so101_mjx.envs.arm`) instead of reaching MuJoCo; ``render_mode="human"`` also opens MuJoCo's
viewer where a display allows (without one it warns once and renders offscreen only); mocap and
actuator activations are not part of the functional state.
"""

from __future__ import annotations

import gymnasium

from so101_mjx.envs import registry
from so101_mjx.envs.base import SO101Env
from so101_mjx.envs.registry import NAMESPACE
from so101_mjx.gym.ik_control import solve_ik
from so101_mjx.gym.mujoco_env import CAMERA, MAX_FRAME_SIZE, GymRenderingSpec, MujocoGymEnv
from so101_mjx.gym.so101_env import CARTESIAN_BOUNDS, HOME_POSITION, SO101GymEnv
from so101_mjx.gym.task_env import SO101MjxGymEnv, gym_class, gym_class_name
from so101_mjx.gym.wrappers import SevenDofToFourDofAdapter, ctrl_to_normalized, normalized_to_ctrl

__all__ = [
    "CAMERA", "CARTESIAN_BOUNDS", "ENV_CLASSES", "HOME_POSITION", "MAX_FRAME_SIZE", "GymRenderingSpec", "MujocoGymEnv",
    "SO101GymEnv", "SO101MjxGymEnv", "SevenDofToFourDofAdapter", "ctrl_to_normalized", "gym_class", "gym_class_name",
    "normalized_to_ctrl", "solve_ik",
]

ENV_CLASSES: dict[str, type[SO101MjxGymEnv]] = {}  # task name -> its gymnasium class, for every registered task


def _add(task: type[SO101Env]) -> None:
    """Give a registered task its gymnasium class (also a package attribute: ``SO101PickCubeGymEnv``, ...) and id."""
    cls = ENV_CLASSES[task.name] = gym_class(task.name)
    globals()[cls.__name__] = cls
    env_id = NAMESPACE + task.name
    if env_id not in gymnasium.registry:
        gymnasium.register(id=env_id, entry_point=f"{__name__}:{cls.__name__}",
                           max_episode_steps=task.default_config().episode_length)


registry.on_register(_add)  # the built-in tasks now, any task registered later then
