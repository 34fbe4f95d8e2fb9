"""The env contract shared by every task.

An env is a pair of pure functions, ``reset(rng) -> State`` and ``step(state, action) -> State``,
for ONE world; batch them with ``jax.vmap`` (see :mod:`so101_mjx.envs.wrappers`). Physics runs
through a :class:`~so101_mjx.physics.Physics` backend, so the same task code steps thousands of
MJX worlds on an accelerator or MuJoCo C worlds on a CPU. The arm's control and observation
pieces are :class:`~so101_mjx.arm.SO101Arm`'s (``env.arm``).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from flax import struct
from jax import Array

from so101_mjx import checks, randomization
from so101_mjx.arm import SO101Arm
from so101_mjx.physics import Physics, PhysicsState, make_physics
from so101_mjx.scenes import load_model

MAX_ACTION_SCALE = 1.0  # m of IK-target motion per unit action
MAX_SUBSTEPS = 10_000  # physics steps per control step (20 s of simulated time at physics_dt 2 ms)
MAX_EPISODE_LENGTH = 2**31 - 1  # control steps; step counters are int32


@struct.dataclass
class State:
    """One world's env state (leading batch axes when vmapped)."""

    physics: PhysicsState
    obs: Array  # (obs_size,) flat: agent_pos (14) then environment_state
    reward: Array  # ()
    done: Array  # () float 0/1: terminated
    metrics: dict[str, Array]
    info: dict[str, Any]  # ik_target (3,), last_action_zero, grasp, succeed, rng, task entries


@dataclasses.dataclass(frozen=True)
class ArmConfig:
    """Fields shared by every SO-101 task; names and defaults as the reference ``SO101GymEnv``."""

    control_dt: float = 0.1
    physics_dt: float = 0.002
    action_scale: float = 1.0
    top_down_ik: bool = False
    jaw_pads: bool = False
    image_obs: bool = False
    episode_length: int = 100
    randomization: randomization.Randomization | None = None  # per-episode domain randomization

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first invalid field; store plain Python values (JSON-ready).

        Runs at construction (``dataclasses.replace`` and ``make`` included) and again in the env.
        """
        set_ = object.__setattr__
        set_(self, "physics_dt", checks.real("physics_dt", self.physics_dt, gt=0, unit=" s"))
        set_(self, "control_dt", checks.real("control_dt", self.control_dt, gt=0, unit=" s"))
        if not self.control_dt >= self.physics_dt:
            raise ValueError(f"physics_dt ({self.physics_dt}) must not exceed control_dt ({self.control_dt})")
        substeps = self.control_dt // self.physics_dt
        if substeps > MAX_SUBSTEPS:
            raise ValueError(f"control_dt / physics_dt = {substeps:.3g} physics substeps per control step; at most "
                             f"{MAX_SUBSTEPS} allowed (control_dt={self.control_dt}, physics_dt={self.physics_dt})")
        scale = checks.real("action_scale", self.action_scale)
        if not 0 < scale <= MAX_ACTION_SCALE:
            raise ValueError(f"action_scale must be positive and at most {MAX_ACTION_SCALE} m per unit action "
                             f"(the reference's default; a unit action then already spans the workspace), got {scale!r}")
        set_(self, "action_scale", scale)
        for name in ("top_down_ik", "jaw_pads", "image_obs"):
            set_(self, name, checks.flag(name, getattr(self, name)))
        set_(self, "episode_length", checks.integer("episode_length", self.episode_length, ge=1, le=MAX_EPISODE_LENGTH))
        set_(self, "randomization", randomization.parse(self.randomization))
        if self.image_obs:
            raise ValueError(
                "image_obs=True is not available in the jitted envs (no batched renderer); "
                "use the gymnasium env so101_mjx/... which renders pixels.front on MuJoCo C"
            )


class SO101Env(abc.ABC):
    """Base SO-101 env: model, backend, the arm (``self.arm``). Tasks implement reset/step on top."""

    scene = "pick_cube"
    markers: dict[str, str] = {}  # scene site -> info entry holding its world position (3,), drawn when rendering

    def __init__(self, config: ArmConfig, backend: str | None = None, **physics_kwargs):
        config.validate()
        self.config = config
        self.mj_model = load_model(self.scene, jaw_pads=config.jaw_pads)
        self.mj_model.opt.timestep = config.physics_dt
        self.physics: Physics = make_physics(backend, self.mj_model, **physics_kwargs)
        self.arm = SO101Arm(self.mj_model, self.physics, top_down_ik=config.top_down_ik, action_scale=config.action_scale,
                            n_substeps=int(config.control_dt // config.physics_dt))

    # -- contract -------------------------------------------------------------------------
    @abc.abstractmethod
    def reset(self, rng: Array) -> State:
        """Initial state of one world."""

    @abc.abstractmethod
    def step(self, state: State, action: Array) -> State:
        """Advance one control step with ``action`` (4,) = [dx, dy, dz, grasp]."""

    @property
    def dt(self) -> float:
        """Control period in seconds."""
        return self.config.control_dt

    @property
    def n_substeps(self) -> int:
        """Physics steps per control step, ``control_dt // physics_dt`` as the reference."""
        return self.arm.n_substeps

    @property
    def action_size(self) -> int:
        return 4

    @property
    def observation_size(self) -> int:
        return int(jax.eval_shape(self.reset, jax.random.PRNGKey(0)).obs.shape[-1])

    @property
    def backend(self) -> str:
        return self.physics.name

    @property
    def episode_length(self) -> int:
        return self.config.episode_length

    def marker_positions(self, info) -> dict[str, Array]:
        """World positions (3,) of this task's render markers, by scene site name."""
        return {site: info[key] for site, key in self.markers.items()}

    # -- shared task logic ----------------------------------------------------------------
    def sample_params(self, rng: Array, dtype) -> dict[str, Array] | None:
        """This episode's randomized model arrays, or None without ``config.randomization``."""
        if self.config.randomization is None:
            return None
        return randomization.sample(self.mj_model, self.config.randomization, rng, dtype)


def default_metrics(state_info: dict[str, Array]) -> dict[str, Array]:
    """Metrics every task reports."""
    return {"nonfinite_actions": state_info["nonfinite_actions"].astype(jnp.float32)}


def asdict(config: Any) -> dict[str, Any]:
    """Config dataclass as a JSON-ready dict (nested dataclasses too); ``make(**asdict(c))`` rebuilds it."""
    return dataclasses.asdict(config)


def block_qpos_adr(model: mujoco.MjModel) -> int:
    return int(model.joint("block").qposadr[0])


def block_dof_adr(model: mujoco.MjModel) -> int:
    return int(model.joint("block").dofadr[0])


def as_qpos0(model: mujoco.MjModel, dtype) -> Array:
    return jnp.asarray(np.asarray(model.qpos0), dtype)
