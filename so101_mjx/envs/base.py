"""The env contract shared by every task.

An env is a pair of pure functions, ``reset(rng) -> State`` and ``step(state, action) -> State``,
for ONE world; batch them with ``jax.vmap`` (see :mod:`so101_mjx.envs.wrappers`). Physics runs
through a :class:`~so101_mjx.sim.physics.Physics` backend, so the same task code steps thousands of
MJX worlds on an accelerator or MuJoCo C worlds on a CPU. The arm's control and observation
pieces are :class:`~so101_mjx.envs.arm.SO101Arm`'s (``env.arm``).
"""

from __future__ import annotations

import abc
import copy
import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, cast

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array

from so101_mjx import _checks as checks
from so101_mjx.envs.arm import JointMode, SO101Arm
from so101_mjx.envs.config import ArmConfig, whole_substeps
from so101_mjx.errors import InputError
from so101_mjx.render import latency, visual_randomization
from so101_mjx.robot import motors
from so101_mjx.robot.scenes import actuator_ids, load_model
from so101_mjx.sim import randomization, servo
from so101_mjx.sim.physics import CPhysics, Physics, PhysicsState, make_physics
from so101_mjx.sim.state import Info, State


class SO101Env(abc.ABC):
    """Base SO-101 env: model, backend, the arm (``self.arm``), and the shared reset/step skeleton.

    A task is one subclass in one file (see docs/DESIGN.md, "Adding a task"). It declares, as
    class attributes, its registry ``name``, ``instruction``, ``config_class``, ``scene``, ``observation_layout``,
    render ``markers``, ``reference_env`` and ``fixed_reset``, and implements
    :meth:`sample_initial`, :meth:`reset_to`, :meth:`task_observation`, :meth:`success`,
    :meth:`reward_terms` (and optionally :meth:`update_task`, :meth:`terminated`,
    :meth:`task_metrics`, :meth:`scripted_controller`). :meth:`reset` and :meth:`step` are shared.
    """

    # -- the task declaration ---------------------------------------------------------------
    name: ClassVar[str]  # registry and gymnasium id, e.g. "SO101PickCube-v0"
    instruction: ClassVar[str]  # the task in one sentence (recorded datasets' language instruction)
    config_class: ClassVar[type[ArmConfig]]
    scene: ClassVar[str]  # scenes/<scene>.xml
    observation_layout: ClassVar[tuple[tuple[str, int], ...]]  # environment_state entries: (name, size), in order
    # scene site -> task entry holding its world position (3,), drawn when rendering
    markers: ClassVar[dict[str, str]] = {}
    reference_env: ClassVar[str | None] = None  # the lerobot_env_so101 class this task mirrors
    # reset_to arguments of the reference's fixed initial state
    fixed_reset: ClassVar[dict[str, tuple[float, ...]]] = {}
    terminate_on_success: ClassVar[bool] = True
    # config fields the demonstrator needs to succeed, set wherever it runs by name (record, rollout)
    demonstrator_config: ClassVar[dict[str, Any]] = {}
    # export metadata
    action_layout: ClassVar[str] = "[dx, dy, dz] in [-1, 1] (x action_scale metres), grasp in [0, 1] (0 closed)"

    def __init__(self, config: ArmConfig | None = None, backend: str | None = None, *,
                 model: mujoco.MjModel | None = None, **physics_kwargs):
        """``model``: a compiled variant of the task's ``scene`` (same joints, sites and named geoms)
        to simulate instead of it, used as given (a copy; ``config.jaw_pads`` is not applied to it)."""
        config = self.default_config() if config is None else config
        if not isinstance(config, self.config_class):
            raise InputError(f"config must be a {self.config_class.__name__} for {self.name}, got "
                             f"{type(config).__name__}")
        config.validate()
        self.config = config
        self.mj_model = load_model(self.scene, jaw_pads=config.jaw_pads) if model is None else copy.copy(model)
        self.mj_model.opt.timestep = config.physics_dt
        if config.servo_model is not None:
            servo.set_position_loop(self.mj_model, config.servo_model, actuator_ids(self.mj_model, motors.MOTORS))
        self.physics: Physics = make_physics(backend, self.mj_model, **physics_kwargs)
        joint = config.control_mode == "joint"
        control_dt, physics_dt = config.periods()
        self.arm = SO101Arm(
            self.mj_model, self.physics, top_down_ik=config.top_down_ik, action_scale=config.action_scale,
            n_substeps=whole_substeps(control_dt, physics_dt) if joint else int(control_dt // physics_dt),
            ik_solver=config.ik_solver, home_position=config.home_position, cartesian_bounds=config.cartesian_bounds,
            servo_model=config.servo_model,
            joint_mode=JointMode(config.joint_units, config.relative_joint_targets, config.max_relative_target,
                                 config.calibration) if joint else None,
        )
        self.reward_scales = {k: float(v) for k, v in self.reward_weights().items() if v}
        self.cameras = self._cameras() if config.image_obs else None

    def _cameras(self) -> dict:
        """A batch renderer per ``pixels/<camera>`` entry: MuJoCo C in host processes (backend c),
        MuJoCo Warp on the JAX device (backend mjx); ``config.camera_specs`` replace their cameras."""
        from so101_mjx.render.batch import BatchRenderer, camera_names, render_model
        from so101_mjx.render.camera import camera_setup

        markers, size, specs = tuple(self.markers), self.config.image_size, dict(self.config.camera_specs or ())
        make: Callable[[str], Any]  # a BatchRenderer or a WarpBatchRenderer of the camera
        if self.physics.name == "mjx":
            from so101_mjx.render.warp import WARP_INSTALL, WarpBatchRenderer, warp_available

            visual = self.config.visual_randomization
            if visual is not None and visual.scenery:
                raise InputError("visual_randomization's textures, backdrop and distractors render with MuJoCo C only "
                                 "(backend 'c'), not on backend 'mjx' (MuJoCo Warp)")
            if not warp_available():
                raise InputError(f"image_obs=True on backend 'mjx' renders with MuJoCo Warp, which is not installed: "
                                 f"{WARP_INSTALL}; or use backend 'c' (MuJoCo C renders on the CPU threads)")
            model = render_model(self.scene, self.config.image_quality, marker_geoms=markers)
            make = lambda c: WarpBatchRenderer(model, size, size, c, markers=markers, spec=specs.get(c))  # noqa: E731
        else:
            model = render_model(self.scene, self.config.image_quality, visual=self.config.visual_randomization)
            make = lambda c: BatchRenderer(model, size, size, c, markers=markers,  # noqa: E731
                                           workers=cast(CPhysics, self.physics).nthread, spec=specs.get(c))
        names = camera_names(model)
        unknown = [c for c in self.config.image_cameras if c not in names]
        if unknown:
            raise InputError(f"image_cameras must be cameras of the {self.scene} scene {names}, got {unknown}")
        for c, spec in specs.items():  # one model holding every user camera: visual randomization draws around it
            model = camera_setup(model, c, spec, size, size)[0]
        return {c: make(c) for c in self.config.image_cameras}

    @classmethod
    def default_config(cls) -> ArmConfig:
        """The task's defaults (the reference's, where it mirrors one)."""
        return cls.config_class()

    # -- what a task implements ---------------------------------------------------------------
    @abc.abstractmethod
    def sample_initial(self, rng: Array, dtype) -> dict[str, Array]:
        """The :meth:`reset_to` arguments :meth:`reset` draws (block position, target, ...)."""

    @abc.abstractmethod
    def reset_to(self, rng: Array, **fixed: Array) -> State:
        """Initial state with the given quantities (keyword names are the task's); the rest sampled from ``rng``."""

    @abc.abstractmethod
    def task_observation(self, physics: PhysicsState, info: Info) -> dict[str, Array]:
        """The ``environment_state`` entries, by the names of :attr:`observation_layout`."""

    @abc.abstractmethod
    def success(self, physics: PhysicsState, info: Info) -> Array:
        """Bool (): the task's success criterion after a step."""

    @abc.abstractmethod
    def reward_weights(self) -> dict[str, float]:
        """Scale of each named reward term under this config (terms with scale 0 are not computed)."""

    @abc.abstractmethod
    def reward_terms(self, physics: PhysicsState, info: Info, success: Array) -> dict[str, Array]:
        """Unscaled reward terms, for the names in :attr:`reward_scales`."""

    def update_task(self, physics: PhysicsState, info: Info) -> dict[str, Array]:
        """Task entries after a physics step (e.g. whether the block was ever lifted); default unchanged."""
        return info.task

    def terminated(self, physics: PhysicsState, info: Info) -> Array:
        """Bool (): a failure that ends the episode (e.g. the block left the workspace); default never."""
        return jnp.zeros((), bool)

    def task_metrics(self, physics: PhysicsState, info: Info) -> dict[str, Array]:
        """Extra per-step metrics (float32 scalars); default none."""
        return {}

    def scripted_controller(self) -> tuple[Callable, Callable] | None:
        """``(init(state) -> cs, act(cs, state) -> (cs, action (4,)))`` of the task's scripted
        controller (single world), or None when it has none."""
        return None

    def scripted_criterion(self, obs: Array) -> tuple[str, Array] | None:
        """``(description, bool (...,))``: what the scripted controller achieves, judged from final
        observations ``obs`` (..., obs_size), when that is not the task's success; None when it is."""
        return None

    def demonstrator(self) -> tuple[Callable, Callable] | None:
        """``(init, act)`` like :meth:`scripted_controller`, of a controller that aims at the task's
        own success (demonstration-seeded starts draw from its episodes): the scripted controller,
        unless a task's reference controller stops short of success (PickCube's)."""
        return self.scripted_controller()

    def reference_initial(self, np_random: np.random.Generator) -> dict[str, Any] | None:
        """The :meth:`reset_to` arguments the reference env draws from its ``np_random`` at reset,
        in its order (the gym env's ``reset(seed)`` then places them as the reference does; it
        asks only tasks with a ``reference_env``), or None."""
        return None

    # -- the shared reset / step --------------------------------------------------------------
    def reset(self, rng: Array) -> State:
        """Initial state of one world: :meth:`sample_initial` then :meth:`reset_to`."""
        rng, key = jax.random.split(rng)
        return self.reset_to(rng, **self.sample_initial(key, jnp.result_type(float)))

    def fixed_inputs(self, **values: Any) -> tuple[dict[str, Array], Array]:
        """:meth:`reset_to`'s ``values`` as float arrays (:func:`fixed_array`, shaped as :attr:`fixed_reset`'s),
        and how many were replaced (int32 ()). Known values (outside jit) must be finite; a traced
        value with a NaN or inf component is replaced whole by :attr:`fixed_reset`'s and counted:
        :meth:`start` adds the count to ``nonfinite_actions``, and NaN never reaches the state."""
        out, replaced = {}, jnp.zeros((), jnp.int32)
        for name, value in values.items():
            fallback = np.asarray(self.fixed_reset[name])
            x = fixed_array(name, value, fallback.shape)
            bad = ~jnp.all(jnp.isfinite(x))
            out[name], replaced = jnp.where(bad, jnp.asarray(fallback, x.dtype), x), replaced + bad.astype(jnp.int32)
        return out, replaced

    def start(self, rng: Array, qpos: Array, params: dict[str, Array] | None, task: Callable[[PhysicsState], dict],
              nonfinite: Array | int = 0) -> State:
        """Initial :class:`State` from the scene ``qpos`` (nq,) (arm set home by the arm), this
        episode's model ``params`` and ``task(physics) -> task entries``; zero reward and metrics;
        ``nonfinite_actions`` starts at ``nonfinite`` (the non-finite inputs :meth:`fixed_inputs` replaced)."""
        if self.config.visual_randomization is not None:
            rng, key = jax.random.split(rng)
        physics, info = self.arm.init(rng, qpos, params)
        info = info.replace(task=task(physics),
                            nonfinite_actions=info.nonfinite_actions + jnp.asarray(nonfinite, jnp.int32))
        if self.config.visual_randomization is not None:
            assert self.cameras is not None  # visual randomization needs image_obs (config.validate)
            render_model = next(iter(self.cameras.values())).model
            info = info.replace(render_params=visual_randomization.sample(
                render_model, self.config.visual_randomization, key, qpos.dtype))
        zero = jnp.zeros((), jnp.float32)
        metrics = {**self._metrics(info, info.succeed, dict.fromkeys(self.reward_scales, zero)),
                   **self.task_metrics(physics, info)}
        dtype = qpos.dtype
        obs, info = self._delayed(self.observation(physics, info), info, reset=True)
        return State(physics, obs, jnp.zeros((), dtype), jnp.zeros((), dtype), metrics, info)

    def step(self, state: State, action: Array) -> State:
        """Advance one control step with ``action`` (4,) = [dx, dy, dz, grasp], or in joint mode (6,) motor targets."""
        physics, info = self.arm.control(state.physics, state.info, action)
        info = info.replace(task=self.update_task(physics, info))
        success = self.success(physics, info)
        info = info.replace(succeed=success)
        dtype = physics.qpos.dtype
        terms = {k: self.reward_scales[k] * v.astype(dtype)
                 for k, v in self.reward_terms(physics, info, success).items()}
        reward = sum(terms.values(), jnp.zeros((), dtype))
        done = self.terminated(physics, info)
        if self.terminate_on_success:
            done = done | success
        metrics = {**self._metrics(info, success, terms), **self.task_metrics(physics, info)}
        obs, info = self._delayed(self.observation(physics, info), info, reset=False)
        return State(physics, obs, reward, done.astype(dtype), metrics, info)

    def _delayed(self, obs: Array | dict[str, Array], info: Info, reset: bool) -> tuple[Array | dict[str, Array], Info]:
        """Camera latency (``camera_specs``' ``latency`` > 0): each such camera's pixels come out of its
        frame queue in ``info.frames`` (filled with the reset's frame at reset) and the new frame goes in."""
        lags = {c: s.latency for c, s in self.config.camera_specs or () if s.latency}
        if not lags:
            return obs, info
        obs, frames = dict(cast(dict[str, Array], obs)), {}  # camera latency: image_obs, a dict
        for c, lag in lags.items():
            if reset:
                queue = latency.fill(obs[f"pixels/{c}"], lag)
            else:
                assert info.frames is not None  # the reset filled the queues
                queue = info.frames[c]
            obs[f"pixels/{c}"], frames[c] = latency.push(queue, obs[f"pixels/{c}"])
        return obs, info.replace(frames=frames)

    def observation(self, physics: PhysicsState, info: Info) -> Array | dict[str, Array]:
        """Flat observation (obs_size,): agent_pos (14; joint mode: 6) then the task's entries in layout order.

        With ``image_obs``: ``{"agent_pos": (14,) or (6,), "pixels/<camera>": (H, W, 3) uint8 for each of
        ``config.image_cameras``, "state": (obs_size,)}``,
        ``state`` being the flat observation (privileged: for teachers and critics; the reference's
        pixel envs expose only the other two).
        """
        entries = self.task_observation(physics, info)
        flat = jnp.concatenate([self.arm.agent_pos(physics), *(entries[name] for name, _ in self.observation_layout)])
        if self.cameras is None:
            return flat
        markers = jnp.stack(list(self.marker_positions(info).values())) if self.markers else None
        draw = info.render_params
        params = visual_randomization.render_arrays(
            draw, {k: v for k, v in (info.model_params or {}).items() if k.startswith("geom_")})
        pixels = {f"pixels/{c}": visual_randomization.apply_image(r.jax_render(physics.qpos, markers, params), draw,
                                                                    visual_randomization.state_salt(physics.qpos, i))
                  for i, (c, r) in enumerate(self.cameras.items())}
        return {"agent_pos": flat[:self.agent_pos_size], **pixels, "state": flat}

    @staticmethod
    def _metrics(info: Info, success: Array, terms: dict[str, Array]) -> dict[str, Array]:
        return {
            "nonfinite_actions": info.nonfinite_actions.astype(jnp.float32), "success": success.astype(jnp.float32),
            **{f"reward/{k}": v.astype(jnp.float32) for k, v in terms.items()},
        }

    # -- properties ------------------------------------------------------------------------------
    @property
    def dt(self) -> float:
        """Control period in seconds."""
        return self.config.periods()[0]

    @property
    def n_substeps(self) -> int:
        """Physics steps per control step, ``control_dt // physics_dt`` as the reference."""
        return self.arm.n_substeps

    @property
    def action_size(self) -> int:
        """4 ([dx, dy, dz, grasp]), or 6 motor targets in joint mode."""
        return self.arm.action_size

    @property
    def agent_pos_size(self) -> int:
        """Size of ``agent_pos``, the observation's first entries: 14, or 6 in joint mode."""
        return sum(size for _, size in self.arm.agent_pos_layout)

    def observation_slices(self) -> dict[str, slice]:
        """Where each named entry (agent_pos's, then the task's) sits in the flat observation."""
        out, start = {}, 0
        for name, size in (*self.arm.agent_pos_layout, *self.observation_layout):
            out[name] = slice(start, start + size)
            start += size
        return out

    @classmethod
    def task_obs_size(cls) -> int:
        """Size of the task's entries (``environment_state``), the same in every config."""
        return sum(size for _, size in cls.observation_layout)

    def obs_size(self) -> int:
        """Flat observation size: ``agent_pos`` plus the task's entries."""
        return self.agent_pos_size + self.task_obs_size()

    @property
    def observation_size(self) -> int | dict[str, tuple[int, ...]]:
        """Flat observation size; with ``image_obs`` the shape of each entry (Brax's convention)."""
        if self.cameras is None:
            return self.obs_size()
        size = self.config.image_size
        pixels = {f"pixels/{c}": (size, size, 3) for c in self.cameras}
        return {"agent_pos": (self.agent_pos_size,), **pixels, "state": (self.obs_size(),)}

    @property
    def backend(self) -> str:
        return self.physics.name

    @property
    def episode_length(self) -> int:
        return self.config.episode_length

    def marker_positions(self, info: Info) -> dict[str, Array]:
        """World positions (3,) of this task's render markers, by scene site name."""
        return {site: info.task[key] for site, key in self.markers.items()}

    def sample_params(self, rng: Array, dtype) -> dict[str, Array] | None:
        """This episode's randomized model arrays, or None without ``config.randomization``."""
        if self.config.randomization is None:
            return None
        return randomization.sample(self.mj_model, self.config.randomization, rng, dtype)


def layout_text(layout: tuple[tuple[str, int], ...]) -> str:
    """``(("block_pos", 3), ("goal", 3))`` -> ``"block_pos (3), goal (3)"`` (export metadata, docs)."""
    return ", ".join(f"{name} ({size})" for name, size in layout)


def fixed_array(name: str, value: Any, shape: tuple[int, ...]) -> Array:
    """A :meth:`SO101Env.reset_to` argument as a float array of ``shape``; ValueError naming it when it
    is not real numbers (complex, bool, text, objects), has another shape or, known (outside jit), is
    not finite. Integer or Python input becomes the default float dtype; float arrays keep theirs.
    A traced value's entries are known only at run time: :meth:`SO101Env.fixed_inputs` replaces them."""
    if not checks.is_traced(value):
        checks.real_array(f"reset_to: {name}", value, shape, finite=True)
    x = jnp.asarray(value)
    if x.dtype.kind not in "iuf":
        raise InputError(f"reset_to: {name} must be real numbers (not complex or bool), got {x.dtype}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    if x.shape != shape:
        raise InputError(f"reset_to: {name} must have shape {shape}, got {x.shape}")
    return x


def asdict(config: Any) -> dict[str, Any]:
    """Config dataclass as a JSON-ready dict (nested dataclasses too); ``make(**asdict(c))`` rebuilds it."""
    return dataclasses.asdict(config)


def block_qpos_adr(model: mujoco.MjModel, joint: str = "block") -> int:
    return int(model.joint(joint).qposadr[0])


def block_dof_adr(model: mujoco.MjModel, joint: str = "block") -> int:
    return int(model.joint(joint).dofadr[0])


def as_qpos0(model: mujoco.MjModel, dtype) -> Array:
    return jnp.asarray(np.asarray(model.qpos0), dtype)
