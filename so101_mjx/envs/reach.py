"""SO101Reach-v0: bring ``gripperframe`` to a random target; a fast-learning smoke-test task.

Same arm control as the pick tasks (position IK on ``gripperframe``). Observation ``agent_pos``
(14) + target (3) + target − ee (3); reward = exp(−20·d) + 1[d < 1 cm] with d = ‖target − ee‖ in
metres; success = d < 1 cm; no termination (episodes are truncated at ``episode_length``, and the
arm is rewarded for holding the target).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax import Array

from so101_mjx.envs.base import ArmConfig, State, SO101Env, as_qpos0, default_metrics

TARGET_BOUNDS = ((0.15, -0.15, 0.05), (0.35, 0.15, 0.25))
SUCCESS_DISTANCE = 0.01
CLOSE_SHARPNESS = 20.0


@dataclasses.dataclass(frozen=True)
class ReachConfig(ArmConfig):
    action_scale: float = 0.05
    episode_length: int = 50


def default_config() -> ReachConfig:
    return ReachConfig()


class Reach(SO101Env):
    """Reach a random target; see the module docstring."""

    scene = "reach"
    markers = {"target": "target"}

    def __init__(self, config: ReachConfig | None = None, backend: str | None = None, **physics_kwargs):
        super().__init__(config or default_config(), backend, **physics_kwargs)

    def reset_with_target(self, rng: Array, target: Array) -> State:
        rng, key = jax.random.split(rng)
        physics, info = self.arm.init(as_qpos0(self.mj_model, target.dtype), self.sample_params(key, target.dtype))
        info = {**info, "rng": rng, "target": target, "succeed": jnp.zeros((), bool)}
        metrics = {**default_metrics(info), "success": jnp.zeros((), jnp.float32), "distance": self.distance(physics, info).astype(jnp.float32)}
        dtype = target.dtype
        return State(physics, self.observation(physics, info), jnp.zeros((), dtype), jnp.zeros((), dtype), metrics, info)

    def reset(self, rng: Array) -> State:
        rng, key = jax.random.split(rng)
        dtype = jnp.result_type(float)
        lo, hi = (jnp.asarray(b, dtype) for b in TARGET_BOUNDS)
        return self.reset_with_target(rng, jax.random.uniform(key, (3,), dtype, lo, hi))

    def distance(self, physics, info) -> Array:
        return jnp.linalg.norm(info["target"] - self.arm.ee_pos(physics))

    def observation(self, physics, info) -> Array:
        return jnp.concatenate([self.arm.agent_pos(physics), info["target"], info["target"] - self.arm.ee_pos(physics)])

    def step(self, state: State, action: Array) -> State:
        physics, info = self.arm.control(state.physics, state.info, action)
        d = self.distance(physics, info)
        success = d < SUCCESS_DISTANCE
        info = {**info, "succeed": success}
        reward = jnp.exp(-CLOSE_SHARPNESS * d) + success.astype(d.dtype)
        metrics = {**default_metrics(info), "success": success.astype(jnp.float32), "distance": d.astype(jnp.float32)}
        return State(physics, self.observation(physics, info), reward, jnp.zeros_like(reward), metrics, info)
