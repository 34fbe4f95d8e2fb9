"""SO101PickCube-v0: lift the block 10 cm while the gripper stays within 5 cm of it.

Semantics of lerobot_env_so101 0.4.0 ``SO101PickCubeGymEnv``: observation ``agent_pos`` (14) +
block position (3); sparse reward = success, or dense = 0.3·exp(-20·‖block − ee‖) +
0.7·clip(lift / 0.1, 0, 1); terminated on success or when the block leaves the sampling box
grown by 5 cm. Reset: arm at home, jaw command closed (ctrl 0), block at (0.3, 0) or uniform in
the sampling box.

Extension (not in the reference; off by default): ``grasp_reward`` > 0 adds that much dense
reward on every step where :meth:`~so101_mjx.envs.block.BlockTask.grasped` holds, a contact-free grasp proxy that the
training presets use to make closing on the block discoverable.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax import Array

from so101_mjx import _checks as checks
from so101_mjx.envs import scripted
from so101_mjx.envs.block import BlockConfig, BlockTask
from so101_mjx.errors import InputError
from so101_mjx.sim.state import State

SAMPLING_BOUNDS = ((0.2, -0.1), (0.4, 0.1))
FIXED_BLOCK_XY = (0.3, 0.0)
LIFT_SUCCESS_HEIGHT = 0.1
SUCCESS_DISTANCE = 0.05
DEMO_LIFT_HEIGHT = 0.13  # metres above the grasp height the demonstrator lifts to (> LIFT_SUCCESS_HEIGHT)
DENSE_CLOSE_WEIGHT, DENSE_LIFT_WEIGHT, DENSE_CLOSE_SHARPNESS = 0.3, 0.7, 20.0


@dataclasses.dataclass(frozen=True)
class PickCubeConfig(BlockConfig):
    grasp_reward: float = 0.0  # extension: dense reward per step while grasped (0 = the reference's)

    def validate(self) -> None:
        super().validate()
        reward = checks.real("grasp_reward", self.grasp_reward)
        if not reward >= 0:
            raise InputError(f"grasp_reward must be >= 0 (a finite reward per step), got {self.grasp_reward!r}")
        object.__setattr__(self, "grasp_reward", reward)
        if self.grasp_reward and self.reward_type != "dense":
            raise InputError("grasp_reward adds to the dense reward; it needs reward_type='dense', got "
                             f"{self.reward_type!r}")


class PickCube(BlockTask):
    """Pick the block up; see the module docstring."""

    name = "SO101PickCube-v0"
    instruction = "Pick up the block."
    config_class = PickCubeConfig
    config: PickCubeConfig
    scene = "pick_cube"
    observation_layout = (("block_pos", 3),)
    reference_env = "SO101PickCubeGymEnv"
    demonstrator_config = {"top_down_ik": True}  # with the reference's IK the jaw does not come down square
    fixed_reset = {"block_xy": FIXED_BLOCK_XY}
    sampling_bounds = SAMPLING_BOUNDS
    fixed_block_xy = FIXED_BLOCK_XY

    # -- reset ------------------------------------------------------------------------------------
    def reference_initial(self, np_random) -> dict:
        if not self.config.random_block_position:
            return dict(self.fixed_reset)
        return {"block_xy": np_random.uniform(*self.sampling_bounds)}

    def reset_to(self, rng: Array, *, block_xy: Array) -> State:  # type: ignore[override]
        """Reset with the block centre at ``block_xy`` (2,) metres on the table."""
        fixed, nonfinite = self.fixed_inputs(block_xy=block_xy)
        block_xy = fixed["block_xy"]
        rng, key = jax.random.split(rng)
        return self.start_with_block(rng, block_xy, self.sample_params(key, block_xy.dtype), {}, nonfinite)

    # -- task quantities -------------------------------------------------------------------------
    def task_observation(self, physics, info) -> dict[str, Array]:
        return {"block_pos": self.block_pos(physics)}

    def success(self, physics, info) -> Array:
        block, ee = self.block_pos(physics), self.arm.ee_pos(physics)
        return (jnp.linalg.norm(block - ee) < SUCCESS_DISTANCE) & (block[2] - info.task["z_init"] > LIFT_SUCCESS_HEIGHT)

    # -- reward, termination ---------------------------------------------------------------------
    def reward_weights(self) -> dict[str, float]:
        if self.config.reward_type == "sparse":
            return {"success": 1.0}
        return {"close": DENSE_CLOSE_WEIGHT, "lift": DENSE_LIFT_WEIGHT, "grasp": self.config.grasp_reward}

    def reward_terms(self, physics, info, success: Array) -> dict[str, Array]:
        if self.config.reward_type == "sparse":
            return {"success": success}
        block, ee = self.block_pos(physics), self.arm.ee_pos(physics)
        terms = {
            "close": jnp.exp(-DENSE_CLOSE_SHARPNESS * jnp.linalg.norm(block - ee)),
            "lift": jnp.clip((block[2] - info.task["z_init"]) / LIFT_SUCCESS_HEIGHT, 0.0, 1.0),
        }
        if "grasp" in self.reward_scales:
            terms["grasp"] = self.grasped(physics)
        return terms

    def terminated(self, physics, info) -> Array:
        """The block left the sampling box grown by 5 cm (the reference's rule)."""
        return self.left_sampling_box(physics)

    def scripted_controller(self):
        """The reference's reach-and-close (hover, descend, close; it does not lift)."""
        scale, at = self.config.action_scale, self.observation_slices()
        act = lambda cs, s: (  # noqa: E731
            cs, scripted.reach_close(self.arm.ee_pos(s.physics), s.obs[at["block_pos"]], scale))
        return (lambda s: jnp.zeros(()), act)

    def scripted_criterion(self, obs: Array) -> tuple[str, Array] | None:
        """The reach-and-close closes on the block and does not lift it: its own success, judged from
        ``obs`` (..., obs_size). None in joint mode, whose agent_pos has no ee_pos."""
        at = self.observation_slices()
        if "ee_pos" not in at:
            return None
        closed = scripted.is_reach_close_success(obs[..., at["ee_pos"]], obs[..., at["block_pos"]],
                                                 obs[..., at["gripper_pose"]])
        return "scripted reach-and-close success (gripper closed within 5 cm of the block)", closed

    def demonstrator(self):
        """Pick and lift: the pick-and-place controller with its goal at the block, lifting
        ``DEMO_LIFT_HEIGHT`` above the grasp height (past the 10 cm success height). It needs
        ``top_down_ik=True`` (the training presets'; 80 % of normal resets succeed there at
        ``action_scale`` 0.04): with the reference's default IK the jaw does not come down square."""
        scale = self.config.action_scale
        return (
            lambda s: scripted.pick_place_init(self.block_pos(s.physics)),
            lambda cs, s: scripted.pick_place_act(
                cs, self.arm.ik_point(s.physics), self.block_pos(s.physics), self.block_pos(s.physics), scale,
                DEMO_LIFT_HEIGHT
            ),
        )
