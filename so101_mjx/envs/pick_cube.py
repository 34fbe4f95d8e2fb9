"""SO101PickCube-v0: lift the block 10 cm while the gripper stays within 5 cm of it.

Semantics of lerobot_env_so101 0.4.0 ``SO101PickCubeGymEnv``: observation ``agent_pos`` (14) +
block position (3); sparse reward = success, or dense = 0.3·exp(-20·‖block − ee‖) +
0.7·clip(lift / 0.1, 0, 1); terminated on success or when the block leaves the sampling box
grown by 5 cm. Reset: arm at home, jaw command closed (ctrl 0), block at (0.3, 0) or uniform in
the sampling box.

Extension (not in the reference; off by default): ``grasp_reward`` > 0 adds that much dense
reward on every step where :meth:`PickCube.grasped` holds, a contact-free grasp proxy that the
training presets use to make closing on the block discoverable.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax import Array

from so101_mjx import checks, ik
from so101_mjx.arm import ctrl_to_open_fraction
from so101_mjx.envs.base import ArmConfig, State, SO101Env, as_qpos0, block_qpos_adr, default_metrics
from so101_mjx.scenes import EE_SITE

SAMPLING_BOUNDS = ((0.2, -0.1), (0.4, 0.1))
FIXED_BLOCK_XY = (0.3, 0.0)
BLOCK_OUT_OF_BOUNDS_MARGIN = 0.05
LIFT_SUCCESS_HEIGHT = 0.1
SUCCESS_DISTANCE = 0.05
DENSE_CLOSE_WEIGHT, DENSE_LIFT_WEIGHT, DENSE_CLOSE_SHARPNESS = 0.3, 0.7, 20.0
REWARD_TYPES = ("sparse", "dense")
GRASP_COMMAND_CLOSED = 0.1  # jaw command (0 closed, 1 open) below which the jaw is told to close
GRASP_MIN_OPENING = 0.15  # jaw opening (same scale) the block keeps when held: ~0.30 for the 4 cm block
GRASP_MAX_DISTANCE = 0.02  # metres from the grasp point (top-down IK point) to the block centre


@dataclasses.dataclass(frozen=True)
class PickCubeConfig(ArmConfig):
    reward_type: str = "sparse"
    random_block_position: bool = False
    grasp_reward: float = 0.0  # extension: dense reward per step while grasped (0 = the reference's)

    def validate(self) -> None:
        super().validate()
        if not isinstance(self.reward_type, str) or self.reward_type not in REWARD_TYPES:
            raise ValueError(f"reward_type must be one of {REWARD_TYPES}, got {self.reward_type!r}")
        object.__setattr__(self, "random_block_position", checks.flag("random_block_position", self.random_block_position))
        reward = checks.real("grasp_reward", self.grasp_reward)
        if not reward >= 0:
            raise ValueError(f"grasp_reward must be >= 0 (a finite reward per step), got {self.grasp_reward!r}")
        object.__setattr__(self, "grasp_reward", reward)
        if self.grasp_reward and self.reward_type != "dense":
            raise ValueError(f"grasp_reward adds to the dense reward; it needs reward_type='dense', got {self.reward_type!r}")


def default_config() -> PickCubeConfig:
    return PickCubeConfig()


class PickCube(SO101Env):
    """Pick the block up; see the module docstring."""

    sampling_bounds = SAMPLING_BOUNDS
    fixed_block_xy = FIXED_BLOCK_XY

    def __init__(self, config: PickCubeConfig | None = None, backend: str | None = None, **physics_kwargs):
        super().__init__(config or default_config(), backend, **physics_kwargs)
        self._block_adr = block_qpos_adr(self.mj_model)
        self._block_z = float(self.mj_model.geom("block").size[2])
        self._grasp_offset = ik.grasp_point_offset(self.mj_model)

    def sample_block_xy(self, rng: Array, dtype) -> Array:
        lo, hi = (jnp.asarray(b, dtype) for b in self.sampling_bounds)
        if self.config.random_block_position:
            return jax.random.uniform(rng, (2,), dtype, lo, hi)
        return jnp.asarray(self.fixed_block_xy, dtype)

    def block_pos(self, state_physics) -> Array:
        return self.physics.sensor(state_physics, "block_pos")

    def block_half_height(self, params: dict | None, dtype) -> Array:
        """Block half-size in z (metres): the model's, or this episode's randomized one."""
        if params is None:
            return jnp.asarray(self._block_z, dtype)
        return params["geom_size"][self.mj_model.geom("block").id, 2]

    def reset_with_block(self, rng: Array, block_xy: Array, extra_info: dict | None = None, params: dict | None = None) -> State:
        """Reset with the block at ``block_xy`` (2,) — the seam parity tests use.

        ``params``: this episode's randomized model arrays (sampled from ``rng`` when None and
        the config randomizes).
        """
        dtype = block_xy.dtype
        if params is None:
            rng, key = jax.random.split(rng)
            params = self.sample_params(key, dtype)
        block_z = self.block_half_height(params, dtype)
        qpos = as_qpos0(self.mj_model, dtype)
        qpos = qpos.at[self._block_adr : self._block_adr + 3].set(jnp.concatenate([block_xy, block_z[None]]))
        physics, info = self.arm.init(qpos, params)
        block = self.block_pos(physics)
        info = {**info, "rng": rng, "z_init": block[2], "succeed": jnp.zeros((), bool), **(extra_info or {})}
        obs = self.observation(physics, info)
        metrics = {**default_metrics(info), "success": jnp.zeros((), jnp.float32)}
        return State(physics, obs, jnp.zeros((), dtype), jnp.zeros((), dtype), metrics, info)

    def reset(self, rng: Array) -> State:
        rng, key = jax.random.split(rng)
        return self.reset_with_block(rng, self.sample_block_xy(key, jnp.result_type(float)))

    def environment_state(self, physics, info) -> Array:
        return self.block_pos(physics)

    def observation(self, physics, info) -> Array:
        return jnp.concatenate([self.arm.agent_pos(physics), self.environment_state(physics, info)])

    def success(self, physics, info) -> Array:
        block, ee = self.block_pos(physics), self.arm.ee_pos(physics)
        return (jnp.linalg.norm(block - ee) < SUCCESS_DISTANCE) & (block[2] - info["z_init"] > LIFT_SUCCESS_HEIGHT)

    def grasped(self, physics) -> Array:
        """Bool (): the jaw is commanded closed but held open by something, with the block centre
        within ``GRASP_MAX_DISTANCE`` of the grasp point (a proxy that needs no contact data)."""
        command = ctrl_to_open_fraction(physics.ctrl[self.arm.gripper_actuator], self.arm.gripper_range)
        grasp_point = self.arm.kin.point(self.arm.joint_q(physics), EE_SITE, self._grasp_offset)
        near = jnp.linalg.norm(grasp_point - self.block_pos(physics)) < GRASP_MAX_DISTANCE
        return (command < GRASP_COMMAND_CLOSED) & (self.arm.jaw_opening(physics) > GRASP_MIN_OPENING) & near

    def reward(self, physics, info, success: Array) -> Array:
        if self.config.reward_type == "sparse":
            return success.astype(physics.qpos.dtype)
        block, ee = self.block_pos(physics), self.arm.ee_pos(physics)
        close = jnp.exp(-DENSE_CLOSE_SHARPNESS * jnp.linalg.norm(block - ee))
        lift = jnp.clip((block[2] - info["z_init"]) / LIFT_SUCCESS_HEIGHT, 0.0, 1.0)
        reward = DENSE_CLOSE_WEIGHT * close + DENSE_LIFT_WEIGHT * lift
        if self.config.grasp_reward:
            reward = reward + self.config.grasp_reward * self.grasped(physics).astype(reward.dtype)
        return reward

    def out_of_bounds(self, physics, info) -> Array:
        xy = self.block_pos(physics)[:2]
        lo = jnp.asarray(self.sampling_bounds[0], xy.dtype) - BLOCK_OUT_OF_BOUNDS_MARGIN
        hi = jnp.asarray(self.sampling_bounds[1], xy.dtype) + BLOCK_OUT_OF_BOUNDS_MARGIN
        return jnp.any(xy < lo) | jnp.any(xy > hi)

    def update_info(self, physics, info) -> dict:
        """Task bookkeeping after the physics step (PickPlace tracks the carry)."""
        return info

    def step(self, state: State, action: Array) -> State:
        physics, info = self.arm.control(state.physics, state.info, action)
        info = self.update_info(physics, info)
        success = self.success(physics, info)
        info = {**info, "succeed": success}
        done = success | self.out_of_bounds(physics, info)
        metrics = {**default_metrics(info), "success": success.astype(jnp.float32)}
        return State(
            physics, self.observation(physics, info), self.reward(physics, info, success),
            done.astype(physics.qpos.dtype), metrics, info,
        )
