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

from so101_mjx.envs import scripted
from so101_mjx.envs.base import SO101Env, as_qpos0
from so101_mjx.envs.config import ArmConfig
from so101_mjx.sim.state import State

TARGET_BOUNDS = ((0.15, -0.15, 0.05), (0.35, 0.15, 0.25))
FIXED_TARGET = (0.25, 0.05, 0.15)  # the parity harness's fixed initial target
SUCCESS_DISTANCE = 0.01
CLOSE_SHARPNESS = 20.0


@dataclasses.dataclass(frozen=True)
class ReachConfig(ArmConfig):
    action_scale: float = 0.05
    episode_length: int = 50



class Reach(SO101Env):
    """Reach a random target; see the module docstring."""

    name = "SO101Reach-v0"
    instruction = "Move the gripper to the target."
    config_class = ReachConfig
    scene = "reach"
    observation_layout = (("target", 3), ("target - ee_pos", 3))
    markers = {"target": "target"}
    fixed_reset = {"target": FIXED_TARGET}
    terminate_on_success = False

    def sample_initial(self, rng: Array, dtype) -> dict[str, Array]:
        lo, hi = (jnp.asarray(b, dtype) for b in TARGET_BOUNDS)
        return {"target": jax.random.uniform(rng, (3,), dtype, lo, hi)}

    def reset_to(self, rng: Array, *, target: Array) -> State:  # type: ignore[override]
        """Reset with the target at ``target`` (3,) world metres."""
        fixed, nonfinite = self.fixed_inputs(target=target)
        target = fixed["target"]
        rng, key = jax.random.split(rng)
        return self.start(rng, as_qpos0(self.mj_model, target.dtype), self.sample_params(key, target.dtype),
                          lambda _: {"target": target}, nonfinite)

    def distance(self, physics, info) -> Array:
        return jnp.linalg.norm(info.task["target"] - self.arm.ee_pos(physics))

    def task_observation(self, physics, info) -> dict[str, Array]:
        target = info.task["target"]
        return {"target": target, "target - ee_pos": target - self.arm.ee_pos(physics)}

    def success(self, physics, info) -> Array:
        return self.distance(physics, info) < SUCCESS_DISTANCE

    def reward_weights(self) -> dict[str, float]:
        return {"close": 1.0, "success": 1.0}

    def reward_terms(self, physics, info, success: Array) -> dict[str, Array]:
        return {"close": jnp.exp(-CLOSE_SHARPNESS * self.distance(physics, info)), "success": success}

    def task_metrics(self, physics, info) -> dict[str, Array]:
        return {"distance": self.distance(physics, info).astype(jnp.float32)}

    def scripted_controller(self):
        """A proportional reacher toward the target, jaw open."""
        scale = self.config.action_scale
        return (lambda s: jnp.zeros(()),
                lambda cs, s: (cs, scripted.reach(s.info.task["target"], self.arm.ee_pos(s.physics), scale)))
