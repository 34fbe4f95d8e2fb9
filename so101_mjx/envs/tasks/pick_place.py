"""SO101PickPlace-v0: carry the block onto a goal on the table and let go.

Semantics of lerobot_env_so101 0.4.0 ``SO101PickPlaceGymEnv``: observation ``agent_pos`` (14) +
block (3) + goal (3); success = the block rose > 3 cm above its reset height at some step, rests
within 3 cm (xy) of the goal, the jaw joint is more than half open and the block moves slower
than 1 cm/s; reward = success (sparse, the default); terminated on success or when the block
leaves the workspace. Defaults: top-down IK and jaw pads on.

Extension (not in the reference; opt-in): ``reward_type="dense"`` is a staged reward for
training, each stage a term in [0, 1] gated by the one before (:data:`STAGED_WEIGHTS`): ``reach``
(grasp point to the block), ``grasp`` (:meth:`~so101_mjx.envs.block.BlockTask.grasped`), ``lift`` (while grasped, up
to :data:`CARRY_HEIGHT`), ``carry`` (once carried, block to the goal in xy), ``place`` (at the
goal, lowered to the table), ``release`` (placed, jaw open) and ``success``. Success itself is
the reference's criterion either way.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from so101_mjx.envs import scripted
from so101_mjx.envs.block import BlockConfig, BlockTask
from so101_mjx.sim.state import State

SAMPLING_BOUNDS = ((0.15, -0.1), (0.3, 0.1))
FIXED_BLOCK_XY = (0.25, 0.0)
FIXED_GOAL_XY = (0.20, 0.08)
MIN_GOAL_DISTANCE = 0.08
WORKSPACE_XY = ((0.08, -0.2), (0.4, 0.2))
PLACE_SUCCESS_DISTANCE = 0.03
MIN_CARRY_RISE = 0.03
PLACE_MAX_BLOCK_SPEED = 0.01
PLACE_OPEN_FRACTION = 0.5
# rejection-sampling rounds (the reference redraws without limit): all 16 fail with probability up to
# ~1.2e-3 (block at the box centre, 0.66 of the box within 8 cm); the goal is then the first draw, nearer
_GOAL_TRIES = 16
CARRY_HEIGHT = 0.04  # m above the reset height where the staged reward's lift term saturates
STAGE_SHARPNESS = 10.0  # 1/m: distance terms are 1 − tanh(sharpness · d)
PLACED_HEIGHT = 0.005  # m above the reset height below which the block counts as on the table
STAGED_WEIGHTS = {"reach": 0.1, "grasp": 0.2, "lift": 0.3, "carry": 0.5, "place": 0.5, "release": 0.5, "success": 1.0}


def sample_goal_xy(rng: Array, block_xy: Array, bounds, fixed_xy, random: bool, min_distance: float = MIN_GOAL_DISTANCE,
                   tries: int = _GOAL_TRIES) -> Array:
    """A goal (2,) m uniform in ``bounds`` ((lo, hi), each (2,)), redrawn until ≥ ``min_distance``
    from ``block_xy`` (2,) (``tries`` rounds drawn at once, jit-safe); ``fixed_xy`` unless ``random``."""
    dtype = block_xy.dtype
    if not random:
        return jnp.asarray(fixed_xy, dtype)
    lo, hi = (jnp.asarray(b, dtype) for b in bounds)
    candidates = jax.random.uniform(rng, (tries, 2), dtype, lo, hi)
    return candidates[jnp.argmax(jnp.linalg.norm(candidates - block_xy, axis=-1) >= min_distance)]


def staged_terms(*, reach: Array, grasped: Array, rise: Array, carried: Array, target_xy: Array, at_target: Array,
                 above: Array, placed: Array, opening: Array, success: Array,
                 lift_height: float | Array) -> dict[str, Array]:
    """The staged pick-and-place terms of :data:`STAGED_WEIGHTS`, each () in [0, 1].

    ``reach``: grasp point to block (m); ``grasped``, ``carried`` (the block was lifted, a latch),
    ``at_target`` (over the target in the plane), ``placed`` (there and lowered), ``success``: 0/1
    floats; ``rise``: block height over its reset height (m); ``target_xy``: block to target in the
    plane (m); ``above``: block height over its resting height at the target (m); ``opening``: jaw
    open fraction; ``lift_height``: the rise (m) at which ``lift`` saturates and ``place`` starts.
    """
    closeness = lambda d: 1.0 - jnp.tanh(STAGE_SHARPNESS * d)  # noqa: E731
    return {
        "reach": closeness(reach),
        "grasp": grasped,
        "lift": grasped * jnp.clip(rise / lift_height, 0.0, 1.0),
        "carry": carried * closeness(target_xy),
        "place": carried * at_target * (1.0 - jnp.clip(above / lift_height, 0.0, 1.0)),
        "release": placed * jnp.clip(opening, 0.0, 1.0),
        "success": success,
    }


@dataclasses.dataclass(frozen=True)
class PickPlaceConfig(BlockConfig):
    # PickCube's grasp_reward: PickPlace's dense reward has a grasp stage of its own; saved configs hold it at 0
    retired: ClassVar[dict[str, Any]] = {"grasp_reward": 0.0}

    top_down_ik: bool = True
    jaw_pads: bool = True
    episode_length: int = 300


class PickPlace(BlockTask):
    """Pick and place; see the module docstring."""

    name = "SO101PickPlace-v0"
    instruction = "Pick up the block and place it on the goal."
    config_class = PickPlaceConfig
    config: PickPlaceConfig
    scene = "pick_place"
    observation_layout = (("block_pos", 3), ("goal", 3))
    markers = {"goal": "goal"}
    reference_env = "SO101PickPlaceGymEnv"
    fixed_reset = {"block_xy": FIXED_BLOCK_XY, "goal_xy": FIXED_GOAL_XY}
    sampling_bounds = SAMPLING_BOUNDS
    fixed_block_xy = FIXED_BLOCK_XY

    def sample_goal_xy(self, rng: Array, block_xy: Array) -> Array:
        """Uniform in the sampling box, resampled until ≥ 8 cm from the block (fixed when not random)."""
        return sample_goal_xy(rng, block_xy, SAMPLING_BOUNDS, FIXED_GOAL_XY, self.config.random_block_position)

    def reference_initial(self, np_random) -> dict:
        """The reference's draws: block, then goal redrawn until ≥ 8 cm from the block."""
        if not self.config.random_block_position:
            return dict(self.fixed_reset)
        block_xy, goal_xy = np_random.uniform(*SAMPLING_BOUNDS), np_random.uniform(*SAMPLING_BOUNDS)
        while np.linalg.norm(goal_xy - block_xy) < MIN_GOAL_DISTANCE:
            goal_xy = np_random.uniform(*SAMPLING_BOUNDS)
        return {"block_xy": block_xy, "goal_xy": goal_xy}

    def reset_to(self, rng: Array, *, block_xy: Array, goal_xy: Array | None = None) -> State:  # type: ignore[override]
        """Reset with the block at ``block_xy`` (2,) and the goal at ``goal_xy`` (2,) (sampled when None)."""
        return self.start_with_goal(rng, block_xy, goal_xy, self.sample_goal_xy,
                                    lambda _, goal: {"goal": goal, "was_carried": jnp.zeros((), bool)})

    def task_observation(self, physics, info) -> dict[str, Array]:
        return {"block_pos": self.block_pos(physics), "goal": info.task["goal"]}

    def update_task(self, physics, info) -> dict:
        rose = self.block_pos(physics)[2] - info.task["z_init"] > MIN_CARRY_RISE
        return {**info.task, "was_carried": info.task["was_carried"] | rose}

    def success(self, physics, info) -> Array:
        block = self.block_pos(physics)
        return (
            info.task["was_carried"]
            & (jnp.linalg.norm(block[:2] - info.task["goal"][:2]) < PLACE_SUCCESS_DISTANCE)
            & (self.arm.jaw_opening(physics) > PLACE_OPEN_FRACTION)
            & (self.block_speed(physics) < PLACE_MAX_BLOCK_SPEED)
        )

    def reward_weights(self) -> dict[str, float]:
        return {"success": 1.0} if self.config.reward_type == "sparse" else dict(STAGED_WEIGHTS)

    def reward_terms(self, physics, info, success: Array) -> dict[str, Array]:
        if self.config.reward_type == "sparse":
            return {"success": success}
        dtype = physics.qpos.dtype
        block, goal, task = self.block_pos(physics), info.task["goal"], info.task
        grasp_point = self.grasp_point(physics)
        height = block[2] - task["z_init"]
        carried = task["was_carried"].astype(dtype)
        at_goal = (jnp.linalg.norm(block[:2] - goal[:2]) < PLACE_SUCCESS_DISTANCE).astype(dtype)
        return staged_terms(
            reach=jnp.linalg.norm(grasp_point - block), grasped=self.grasped(physics, grasp_point).astype(dtype),
            rise=height, carried=carried, target_xy=jnp.linalg.norm(block[:2] - goal[:2]), at_target=at_goal,
            above=height, placed=carried * at_goal * (height < PLACED_HEIGHT).astype(dtype),
            opening=self.arm.jaw_opening(physics), success=success, lift_height=CARRY_HEIGHT,
        )

    def terminated(self, physics, info) -> Array:
        """The block left :data:`WORKSPACE_XY`."""
        xy = self.block_pos(physics)[:2]
        lo, hi = (jnp.asarray(b, xy.dtype) for b in WORKSPACE_XY)
        return jnp.any(xy < lo) | jnp.any(xy > hi)

    def scripted_controller(self):
        """The reference's ``PickPlaceController``: hover, descend, close, lift, traverse, lower, open, retreat."""
        scale = self.config.action_scale
        return (
            lambda s: scripted.pick_place_init(self.block_pos(s.physics)),
            lambda cs, s: scripted.pick_place_act(cs, self.arm.ik_point(s.physics), self.block_pos(s.physics),
                                                  s.info.task["goal"], scale),
        )
