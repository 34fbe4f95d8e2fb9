"""gymnasium envs on MuJoCo C: a drop-in for lerobot_env_so101 0.4.0.

``import so101_mjx.gym`` registers ``so101_mjx/<name>`` for every registered task
(``so101_mjx/SO101PickCube-v0``, ``so101_mjx/SO101PickPlace-v0``, ...; truncated at the task's
``episode_length``), each as a class named like the reference's (``SO101PickCubeGymEnv``). A
lerobot_env_so101 user switches by changing the import and the env id::

    import gymnasium as gym
    import so101_mjx.gym  # noqa: F401
    env = gym.make("so101_mjx/SO101PickPlace-v0", action_scale=0.025)

Each env steps ONE world of the functional env (:mod:`so101_mjx.envs`) on backend ``c``, with its
``reset``/``step`` jitted once per instance: rewards, IK, observations and sanitization are that
code, not a second implementation. The functional env runs in float64 when JAX x64 is enabled and
in float32 otherwise; observations are float32 like the reference's.

Scenario code written against the reference works: ``reset(seed=s)`` places the block (and goal)
where lerobot_env_so101's ``reset(seed=s)`` does; ``env._model``, ``env._data`` (writable: edits
of qpos, qvel, ctrl reach the simulation on the next ``step()``), ``_target_ee_pos`` (settable),
``_gripper_ctrl_id``, ``_arm_ctrl_ids``, ``_arm_dof_ids``, ``_ee_site_id``, ``_z_init``,
``_goal_pos``, ``_was_carried`` are there. Differences: non-finite actions hold the pose (see
:mod:`so101_mjx.envs.arm`) instead of reaching MuJoCo; ``render_mode`` is ``"rgb_array"`` only;
mocap and actuator activations are not part of the functional state.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from gymnasium import spaces

from so101_mjx.robot import gripper
from so101_mjx import _checks as checks
from so101_mjx.envs.arm import AGENT_POS_SIZE
from so101_mjx.envs import registry
from so101_mjx.envs.base import layout_text
from so101_mjx.envs.registry import NAMESPACE, make
from so101_mjx.errors import InputError
from so101_mjx.render.frames import FrameRenderer
from so101_mjx.robot.scenes import ARM_JOINTS, EE_SITE
from so101_mjx.sim.state import State
MAX_FRAME_SIZE = 8192  # pixels per side of an offscreen frame
CAMERA = "front"


@dataclasses.dataclass(frozen=True)
class GymRenderingSpec:
    """Offscreen frame size in pixels; ``render()`` always uses the ``front`` camera, as the reference."""

    height: int = 128
    width: int = 128
    camera_id: str | int = -1  # accepted for API compatibility; the reference ignores it too
    mode: str = "rgb_array"

    def __post_init__(self) -> None:
        for name in ("height", "width"):
            object.__setattr__(self, name, checks.integer(f"render_spec.{name}", getattr(self, name), ge=1, le=MAX_FRAME_SIZE))
        if self.mode != "rgb_array":
            raise InputError(f"render_spec.mode must be 'rgb_array', got {self.mode!r}")


def normalized_to_ctrl(norm: float | np.ndarray, ctrlrange) -> np.ndarray:
    """Jaw command in [0, 1] (0 closed, 1 open; clipped) -> gripper ctrl [rad]: ``lo + n·(hi − lo)``."""
    return gripper.open_fraction_to_ctrl(np.asarray(norm), np.asarray(ctrlrange))


def ctrl_to_normalized(ctrl: float | np.ndarray, ctrlrange) -> np.ndarray:
    """Gripper ctrl or jaw angle [rad] -> open fraction ``(ctrl − lo) / (hi − lo)``, NOT clipped (as the reference)."""
    return gripper.ctrl_to_open_fraction(np.asarray(ctrl), np.asarray(ctrlrange), clip=False)


class SO101MjxGymEnv(gymnasium.Env):
    """One world of a registered functional env on MuJoCo C, with the reference's gym API.

    Args:
        name: registry name (``SO101PickCube-v0``, ...).
        seed: seeds ``random_state`` (as the reference; episodes are seeded by ``reset(seed=...)``).
        render_spec: frame size of ``render()`` and of ``pixels.front``.
        render_mode: ``"rgb_array"``.
        image_obs: replace ``environment_state`` by ``pixels.front`` (H, W, 3) uint8.
        **config: task config overrides with the reference's names (``action_scale``,
            ``control_dt``, ``physics_dt``, ``reward_type``, ``random_block_position``,
            ``top_down_ik``, ``jaw_pads``); ValueError naming an invalid field (of these, of
            ``seed``: int in [0, 2**32 - 1], ``image_obs``: bool, ``render_spec``).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}
    task: str = ""

    def __init__(
        self,
        seed: int = 0,
        render_spec: GymRenderingSpec = GymRenderingSpec(),
        render_mode: str = "rgb_array",
        image_obs: bool = False,
        **config: Any,
    ):
        if render_mode not in self.metadata["render_modes"]:
            raise InputError(f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}")
        if not isinstance(render_spec, GymRenderingSpec):
            raise InputError(f"render_spec must be a GymRenderingSpec, got {render_spec!r}")
        seed = checks.integer("seed", seed, ge=0, le=2**32 - 1)
        image_obs = checks.flag("image_obs", image_obs)
        self.env = make(self.task, backend="c", **config)
        self._dtype = jnp.result_type(float)  # float64 under jax_enable_x64, else float32
        self._reset_fn = jax.jit(self.env.reset)
        self._step_fn = jax.jit(self.env.step)
        self._ik_point = jax.jit(self.env.arm.ik_point)
        self.render_mode = render_mode
        self.image_obs = image_obs
        self._render_spec = render_spec
        self._random = np.random.RandomState(seed)
        self._renderer: FrameRenderer | None = None
        self._mjdata = mujoco.MjData(self.env.mj_model)
        self._synced: tuple[np.ndarray, ...] | None = None  # the MjData fields as last written from the state
        self._reset_to_fn = jax.jit(self.env.reset_to)
        self.metadata = {**self.metadata, "render_fps": int(np.round(1.0 / self.env.dt))}

        state = self._reset_fn(jax.random.PRNGKey(seed))
        self._state: State = state
        env_size = self.env.observation_size - AGENT_POS_SIZE
        agent = spaces.Box(-np.inf, np.inf, (AGENT_POS_SIZE,), np.float32)
        if image_obs:
            front = spaces.Box(0, 255, (render_spec.height, render_spec.width, 3), np.uint8)
            self.observation_space = spaces.Dict({"pixels": spaces.Dict({"front": front}), "agent_pos": agent})
        else:
            env_box = spaces.Box(-np.inf, np.inf, (env_size,), np.float32)
            self.observation_space = spaces.Dict({"agent_pos": agent, "environment_state": env_box})
        self.action_space = spaces.Box(
            np.asarray([-1, -1, -1, 0], np.float32), np.asarray([1, 1, 1, 1], np.float32), dtype=np.float32
        )

    # -- gymnasium API --------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """New episode. For a task mirroring the reference, block (and goal) are drawn from
        ``np_random`` exactly as lerobot_env_so101's ``reset(seed)`` draws them (same seed, same
        positions); a JAX key drawn after them seeds the rest (randomization). Other tasks draw
        everything from that key."""
        super().reset(seed=seed)
        fixed = self.env.reference_initial(self.np_random) if self.env.reference_env else None
        key = jax.random.PRNGKey(self.np_random.integers(0, 2**31 - 1))
        if fixed is None:
            return self.reset_to(self._reset_fn(key))
        return self.reset_to(self._reset_to_fn(key, **{k: jnp.asarray(v, self._dtype) for k, v in fixed.items()}))

    def reset_to(self, state: State) -> tuple[dict, dict]:
        """Start an episode from an exact functional state (e.g. ``self.env.reset_to(key, block_xy=...)``)."""
        self._set_state(state)
        return self._observation(), {}

    def step(self, action) -> tuple[dict, float, bool, bool, dict]:
        """One control step with ``action`` (4,) = [dx, dy, dz, grasp]; ValueError for another shape.

        ``info``: ``succeed`` (the reference's key) and ``is_success`` (the key lerobot-eval reads)."""
        action = checks.real_array("action", action, (4,), layout=" = [dx, dy, dz, grasp]")  # NaN/inf: held and counted
        self._read_back()
        self._set_state(self._step_fn(self._state, jnp.asarray(action, self._dtype)))
        s = self._state
        succeed = bool(s.info.succeed)
        return self._observation(), float(s.reward), bool(s.done), False, {"succeed": succeed, "is_success": succeed}

    def render(self) -> np.ndarray:
        """(height, width, 3) uint8 frame from the ``front`` camera, goal/target marker drawn.

        Needs an offscreen GL backend (``import so101_mjx`` defaults MUJOCO_GL to egl).
        """
        if self._renderer is None:
            model = self.env.mj_model
            model.vis.global_.offwidth = max(model.vis.global_.offwidth, self._render_spec.width)
            model.vis.global_.offheight = max(model.vis.global_.offheight, self._render_spec.height)
            self._renderer = FrameRenderer(model, self._render_spec.height, self._render_spec.width, CAMERA)
        self._read_back()
        markers = {site: np.asarray(pos) for site, pos in self.env.marker_positions(self._state.info).items()}
        return self._renderer.frame(np.asarray(self._state.physics.qpos), markers)

    def close(self) -> None:
        """Release the GL context, if one was opened."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    # -- reference properties -------------------------------------------------------------------
    @property
    def task_description(self) -> str:
        """The task's instruction (what ``so101-mjx record`` writes as the dataset's task; lerobot-eval
        passes it to language-conditioned policies)."""
        return self.env.instruction

    @property
    def state(self) -> State:
        """The functional env's current state."""
        return self._state

    @property
    def model(self) -> mujoco.MjModel:
        return self.env.mj_model

    @property
    def data(self) -> mujoco.MjData:
        """The current state as a ``MjData`` after ``mj_forward``; writable, as the reference's.

        Edits of ``qpos``, ``qvel``, ``ctrl``, ``qacc_warmstart`` or ``time`` reach the simulation
        on the next :meth:`step` (or :meth:`render`), which reads them back into :attr:`state`
        (sensors re-evaluated with ``mj_forward``); other fields (mocap, act) are not part of the
        functional state. Its sensors are evaluated at the current qpos, whereas ``agent_pos``'s
        ee_pos, as the reference's, is one physics step stale.
        """
        if self._synced is None:
            p, d = self._state.physics, self._mjdata
            d.qpos[:], d.qvel[:], d.ctrl[:], d.qacc_warmstart[:] = p.qpos, p.qvel, p.ctrl, p.qacc_warmstart
            d.time = float(p.time)
            mujoco.mj_forward(self.env.mj_model, d)
            self._synced = self._data_fields()
        return self._mjdata

    # the reference's private names, for scenario code written against lerobot_env_so101
    _model = model
    _data = data

    @property
    def _target_ee_pos(self) -> np.ndarray:
        """The Cartesian IK target (3,) world metres; settable, as the reference's attribute."""
        return np.asarray(self._state.info.ik_target, np.float64)

    @_target_ee_pos.setter
    def _target_ee_pos(self, value) -> None:
        target = checks.real_array("_target_ee_pos", value, (3,), finite=True, layout=" (world metres)")
        self._state = self._state.replace(info=self._state.info.replace(ik_target=jnp.asarray(target, self._dtype)))

    @property
    def _gripper_ctrl_id(self) -> int:
        return int(self.env.arm.gripper_actuator)

    @property
    def _arm_ctrl_ids(self) -> np.ndarray:
        return np.asarray(self.env.arm.actuator_ids)

    @property
    def _arm_dof_ids(self) -> np.ndarray:
        """The arm joints' ids (the reference indexes qpos with them: hinge ids equal qpos addresses here)."""
        return np.asarray([self.env.mj_model.joint(n).id for n in ARM_JOINTS])

    @property
    def _ee_site_id(self) -> int:
        return int(self.env.mj_model.site(EE_SITE).id)

    def __getattr__(self, name: str) -> Any:
        """The reference's task attributes from the task entries: ``_z_init``, ``_was_carried``, and
        ``_<marker>_pos`` (``_goal_pos``)."""
        state = self.__dict__.get("_state")
        if state is not None and name.startswith("_"):
            key = name[1:]
            if key in state.info.task:
                return np.asarray(state.info.task[key])
            if key.endswith("_pos") and key[:-4] in self.env.markers.values():
                return np.asarray(state.info.task[key[:-4]], np.float64)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    @property
    def ik_point_pos(self) -> np.ndarray:
        """World position (3,) of the point the action moves (grasp point with ``top_down_ik``)."""
        return np.asarray(self._ik_point(self._state.physics), np.float64)

    @property
    def control_dt(self) -> float:
        return self.env.config.control_dt

    @property
    def physics_dt(self) -> float:
        return self.env.config.physics_dt

    @property
    def random_state(self) -> np.random.RandomState:
        return self._random

    # -- internals ------------------------------------------------------------------------------
    def _set_state(self, state: State) -> None:
        self._state = state
        self._synced = None

    def _data_fields(self) -> tuple[np.ndarray, ...]:
        d = self._mjdata
        return tuple(np.array(x, copy=True) for x in (d.qpos, d.qvel, d.ctrl, d.qacc_warmstart, d.time))

    def _read_back(self) -> None:
        """Copy edits of :attr:`data` made since it was last written back into :attr:`state`."""
        if self._synced is None or all(np.array_equal(a, b) for a, b in zip(self._data_fields(), self._synced)):
            return
        d, dtype = self._mjdata, self._dtype
        mujoco.mj_forward(self.env.mj_model, d)
        qpos = jnp.asarray(d.qpos, dtype)
        physics = self._state.physics.replace(
            qpos=qpos, qvel=jnp.asarray(d.qvel, dtype), ctrl=jnp.asarray(d.ctrl, dtype),
            qacc_warmstart=jnp.asarray(d.qacc_warmstart, dtype), time=jnp.asarray(d.time, dtype),
            sensordata=jnp.asarray(d.sensordata, dtype), kin_qpos=qpos,
        )
        self._state = self._state.replace(physics=physics)
        self._synced = self._data_fields()

    def _observation(self) -> dict:
        obs = np.asarray(self._state.obs, np.float32)
        if self.image_obs:
            return {"pixels": {"front": self.render()}, "agent_pos": obs[:AGENT_POS_SIZE]}
        return {"agent_pos": obs[:AGENT_POS_SIZE], "environment_state": obs[AGENT_POS_SIZE:]}


class SevenDofToFourDofAdapter(gymnasium.ActionWrapper):
    """Accept 7-dim ``[dx, dy, dz, drx, dry, drz, grasp]`` actions; the rotation deltas are dropped.

    As lerobot_env_so101's adapter: warns once at construction, ValueError unless the wrapped
    env's action space is a 4-dim Box.
    """

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        warnings.warn(
            "SevenDofToFourDofAdapter discards the rotation deltas (drx, dry, drz) of 7-dim actions: "
            "the SO-101 IK controls end-effector position only.",
            stacklevel=2,
        )
        native = env.action_space
        if not isinstance(native, spaces.Box) or native.shape != (4,):
            raise InputError(f"SevenDofToFourDofAdapter expects a wrapped env with a 4-dim Box action space, got {native}")
        low = np.insert(native.low, (3, 3, 3), -1.0).astype(np.float32)
        high = np.insert(native.high, (3, 3, 3), 1.0).astype(np.float32)
        self.action_space = spaces.Box(low, high, dtype=np.float32)

    def action(self, action) -> np.ndarray:
        """[dx, dy, dz, drx, dry, drz, grasp] (7,) -> [dx, dy, dz, grasp] (4,)."""
        action = checks.real_array("action", action, (7,), layout=" = [dx, dy, dz, drx, dry, drz, grasp]")
        return action[[0, 1, 2, 6]].astype(np.float32)


def gym_class_name(name: str) -> str:
    """``SO101PickCube-v0`` -> ``SO101PickCubeGymEnv`` (the reference's class names)."""
    return name.split("-v")[0] + "GymEnv"


def gym_class(name: str) -> type[SO101MjxGymEnv]:
    """The gymnasium class of a registered env: :class:`SO101MjxGymEnv` bound to it, with one
    ``<entry>_pos`` property per render marker (``goal_pos``, ``target_pos``)."""
    task = registry.task(name)
    props = {f"{key}_pos": _marker_property(key) for key in task.markers.values()}
    doc = f"``{NAMESPACE}{task.name}``: environment_state = {layout_text(task.observation_layout)}."
    return type(gym_class_name(task.name), (SO101MjxGymEnv,), {"task": task.name, "__doc__": doc, "__module__": __name__, **props})


def _marker_property(key: str) -> property:
    return property(lambda self: np.asarray(self._state.info.task[key], np.float64), doc=f"World position (3,) of the task's {key}.")


ENV_CLASSES: dict[str, type[SO101MjxGymEnv]] = {}  # task name -> its gymnasium class, for every registered task


def _add(task: type) -> None:
    """Give a registered task its gymnasium class (also a module attribute: ``SO101PickCubeGymEnv``, ...) and id."""
    cls = ENV_CLASSES[task.name] = gym_class(task.name)
    globals()[cls.__name__] = cls
    env_id = NAMESPACE + task.name
    if env_id not in gymnasium.registry:
        gymnasium.register(id=env_id, entry_point=f"{__name__}:{cls.__name__}", max_episode_steps=task.default_config().episode_length)


registry.on_register(_add)  # the built-in tasks now, any task registered later then
