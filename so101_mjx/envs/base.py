"""The env contract and the SO-101 arm control shared by every task.

An env is a pair of pure functions, ``reset(rng) -> State`` and ``step(state, action) -> State``,
for ONE world; batch them with ``jax.vmap`` (see :mod:`so101_mjx.envs.wrappers`). Physics runs
through a :class:`~so101_mjx.physics.Physics` backend, so the same task code steps thousands of
MJX worlds on an accelerator or MuJoCo C worlds on a CPU.

Action semantics are those of lerobot_env_so101 0.4.0 (``SO101GymEnv.apply_action``): the
action ``[dx, dy, dz, grasp]`` moves an IK target by ``action_scale`` metres per unit, clipped
to ``CARTESIAN_BOUNDS``; a near-zero delta (‖a[:3]‖ < 1e-6) holds the current pose; ``grasp`` is
an absolute jaw command in [0, 1] (0 closed); one Levenberg–Marquardt IK per control step sets
the arm's position actuators; ``control_dt // physics_dt`` physics substeps follow.

Non-finite actions never reach the physics: a NaN/inf position delta counts as zero (hold),
a NaN/inf grasp keeps the previous jaw command; ``metrics["nonfinite_actions"]`` counts them.
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

from so101_mjx import checks, ik, randomization
from so101_mjx.interface import gripper_open_fraction_to_ctrl
from so101_mjx.kinematics import Kinematics
from so101_mjx.physics import Physics, PhysicsState, make_physics
from so101_mjx.scenes import ARM_JOINTS, EE_SITE, GRIPPER_JOINT, actuator_ids, joint_dof_ids, joint_qpos_ids, load_model

HOME_POSITION = (0.0, 0.0, 0.0, 0.0, 0.0)
CARTESIAN_BOUNDS = ((0.1, -0.3, 0.0), (0.5, 0.3, 0.4))
ZERO_ACTION_TOLERANCE = 1e-6
IK_DAMPING = 0.1
IK_ITERATIONS = 20
IK_TOLERANCE = 1e-4
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
    """Base SO-101 env: model, backend, IK control. Tasks implement reset/step on top."""

    scene = "pick_cube"

    def __init__(self, config: ArmConfig, backend: str | None = None, **physics_kwargs):
        config.validate()
        self.config = config
        self.mj_model = load_model(self.scene, jaw_pads=config.jaw_pads)
        self.mj_model.opt.timestep = config.physics_dt
        self.physics: Physics = make_physics(backend, self.mj_model, **physics_kwargs)
        self.kin = Kinematics.from_model(self.mj_model, ARM_JOINTS)
        m = self.mj_model
        self._arm_qpos = joint_qpos_ids(m)
        self._arm_dofs = joint_dof_ids(m)
        self._arm_act = actuator_ids(m)
        self._gripper_act = m.actuator(GRIPPER_JOINT).id
        self._gripper_qpos = m.joint(GRIPPER_JOINT).qposadr[0]
        self._gripper_range = m.actuator_ctrlrange[self._gripper_act].copy()
        self._actuator_qpos = m.jnt_qposadr[m.actuator_trnid[:, 0]]
        self._actuator_dof = m.jnt_dofadr[m.actuator_trnid[:, 0]]
        self._arm_ctrl_range = m.actuator_ctrlrange[self._arm_act].copy()
        self._joint_lower, self._joint_upper = ik.joint_limits(m)
        self._ik_offset = ik.grasp_point_offset(m) if config.top_down_ik else None
        self.n_substeps = int(config.control_dt // config.physics_dt)

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
    def action_size(self) -> int:
        return 4

    @property
    def observation_size(self) -> int:
        return int(self.reset(jax.random.PRNGKey(0)).obs.shape[-1])

    @property
    def backend(self) -> str:
        return self.physics.name

    @property
    def episode_length(self) -> int:
        return self.config.episode_length

    # -- shared arm logic -----------------------------------------------------------------
    def arm_qpos(self, physics: PhysicsState) -> Array:
        return physics.qpos[..., self._arm_qpos]

    def ik_point(self, physics: PhysicsState) -> Array:
        """World position (3,) of the point the action moves, at the last kinematics evaluation."""
        return self.kin.point(physics.kin_qpos[..., self._arm_qpos], EE_SITE, self._ik_offset)

    def ee_pos(self, physics: PhysicsState) -> Array:
        """``gripperframe`` position (3,) from the ``so101/ee_pos`` sensor."""
        return self.physics.sensor(physics, "so101/ee_pos")

    def gripper_ctrl(self, grasp: Array) -> Array:
        """Jaw command in [0, 1] (clipped; 0 closed) -> gripper ctrl in radians."""
        return gripper_open_fraction_to_ctrl(grasp, self._gripper_range).astype(grasp.dtype)

    def gripper_pose(self, ctrl: Array) -> Array:
        """Gripper ctrl -> [-1, 1] (-1 closed), the observation's ``gripper_pose``."""
        lo, hi = self._gripper_range
        return 2 * (ctrl - lo) / (hi - lo) - 1

    def jaw_opening(self, physics: PhysicsState) -> Array:
        """Gripper joint position mapped to [0, 1] like the command (0 closed)."""
        lo, hi = self._gripper_range
        return (physics.qpos[..., self._gripper_qpos] - lo) / (hi - lo)

    def agent_pos(self, physics: PhysicsState) -> Array:
        """[qpos (5), qvel (5), gripper_pose, ee_pos (3)], shape (14,)."""
        return jnp.concatenate([
            physics.qpos[..., self._arm_qpos],
            physics.qvel[..., self._arm_dofs],
            self.gripper_pose(physics.ctrl[..., self._gripper_act])[..., None],
            self.ee_pos(physics),
        ], axis=-1)

    def sample_params(self, rng: Array, dtype) -> dict[str, Array] | None:
        """This episode's randomized model arrays, or None without ``config.randomization``."""
        if self.config.randomization is None:
            return None
        return randomization.sample(self.mj_model, self.config.randomization, rng, dtype)

    def init_arm(self, qpos: Array, params: dict[str, Array] | None = None) -> tuple[PhysicsState, dict[str, Array]]:
        """Reset-time physics (arm at HOME, jaw ctrl 0, at rest) and the arm's info entries.

        ``params`` (from :meth:`sample_params`) are kept in ``info["model_params"]`` and applied
        on every step of the episode.
        """
        dtype = qpos.dtype
        home = jnp.asarray(HOME_POSITION, dtype)
        qpos = qpos.at[self._arm_qpos].set(home)
        ctrl = jnp.zeros(self.mj_model.nu, dtype).at[self._arm_act].set(home)
        physics = self.physics.init(qpos, jnp.zeros(self.mj_model.nv, dtype), ctrl)
        info = {
            "ik_target": self.ik_point(physics),
            "last_action_zero": jnp.zeros((), bool),
            "nonfinite_actions": jnp.zeros((), jnp.int32),
        }
        if params is not None:
            info["model_params"] = params
        return physics, info

    def control(self, state: State, action: Array) -> tuple[PhysicsState, dict[str, Array]]:
        """Apply one action: IK target update, gripper command, IK, ``n_substeps`` of physics."""
        physics, info = state.physics, state.info
        dtype = physics.qpos.dtype
        action = jnp.asarray(action, dtype)
        if action.shape != (4,):
            raise ValueError(f"action must have shape (4,) = [dx, dy, dz, grasp], got {action.shape}")
        finite = jnp.isfinite(action)
        raw = jnp.where(finite[:3], action[:3], 0.0)
        is_zero = jnp.linalg.norm(raw) < ZERO_ACTION_TOLERANCE
        snap = is_zero & ~info["last_action_zero"]
        target = jnp.where(snap, self.ik_point(physics), info["ik_target"] + jnp.where(is_zero, 0.0, raw * self.config.action_scale))
        lo, hi = (jnp.asarray(b, dtype) for b in CARTESIAN_BOUNDS)
        target = jnp.clip(target, lo, hi)

        gripper = jnp.where(finite[3], self.gripper_ctrl(action[3]), physics.ctrl[self._gripper_act])
        q_arm = self.arm_qpos(physics)
        lower, upper = jnp.asarray(self._joint_lower, dtype), jnp.asarray(self._joint_upper, dtype)
        if self.config.top_down_ik:
            seed = ik.top_down_seed(self.kin, q_arm, lower, upper, frames_q=physics.kin_qpos[self._arm_qpos])
            q_ik = ik.levenberg_marquardt(
                self.kin, seed, target, offset=self._ik_offset, approach_axis=ik.APPROACH_AXIS,
                damping=IK_DAMPING, iterations=IK_ITERATIONS, tolerance=IK_TOLERANCE, lower=lower, upper=upper,
            )
        else:
            q_ik = ik.levenberg_marquardt(
                self.kin, q_arm, target, damping=IK_DAMPING, iterations=IK_ITERATIONS, tolerance=IK_TOLERANCE,
                lower=lower, upper=upper,
            )
        physics = self.actuate(physics, q_ik, gripper, info.get("model_params"))
        info = {
            **info,
            "ik_target": target,
            "last_action_zero": is_zero,
            "nonfinite_actions": info["nonfinite_actions"] + jnp.any(~finite).astype(jnp.int32),
        }
        return physics, info

    def actuate(self, physics: PhysicsState, arm_q: Array, gripper_ctrl: Array, params: dict[str, Array] | None = None) -> PhysicsState:
        """Hold arm targets ``arm_q`` (5,) rad (clipped to the ctrl ranges) and ``gripper_ctrl`` rad
        for ``n_substeps`` physics steps (with per-world model ``params`` if given)."""
        arm = jnp.clip(arm_q, self._arm_ctrl_range[:, 0], self._arm_ctrl_range[:, 1])
        ctrl = physics.ctrl.at[self._arm_act].set(arm).at[self._gripper_act].set(gripper_ctrl)
        return self.physics.step(physics, ctrl, self.n_substeps, params)

    def actuator_force(self, physics: PhysicsState) -> Array:
        """Position-actuator forces (nu,) N·m at the current state: clip(kp·(ctrl − q) − kv·q̇, forcerange)."""
        m = self.mj_model
        dtype = physics.qpos.dtype
        q = physics.qpos[..., self._actuator_qpos]
        v = physics.qvel[..., self._actuator_dof]
        force = (jnp.asarray(m.actuator_gainprm[:, 0], dtype) * physics.ctrl + jnp.asarray(m.actuator_biasprm[:, 1], dtype) * q
                 + jnp.asarray(m.actuator_biasprm[:, 2], dtype) * v)
        return jnp.clip(force, m.actuator_forcerange[:, 0], m.actuator_forcerange[:, 1])



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
