"""The base of every block task: a block (free joint ``block``) resting on the table, grasped from above.

:class:`BlockConfig` holds the fields every block task shares (reward type, random placements);
:class:`BlockTask` the quantities they share: the block's reset placement (fixed, or uniform in
the task's ``sampling_bounds``), its position, half height (the episode's, under randomization)
and speed, the top-down grasp point and a contact-free grasp proxy. Each block task
(PickCube, PickPlace, PushCube, StackCube) subclasses :class:`BlockTask` directly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import ClassVar

import jax
import jax.numpy as jnp
from jax import Array

from so101_mjx import _checks as checks
from so101_mjx.envs.base import SO101Env, as_qpos0, block_dof_adr, block_qpos_adr
from so101_mjx.envs.config import ArmConfig
from so101_mjx.errors import InputError
from so101_mjx.ik import iterative as ik
from so101_mjx.robot.scenes import EE_SITE
from so101_mjx.sim.state import State

REWARD_TYPES = ("sparse", "dense")
BLOCK_OUT_OF_BOUNDS_MARGIN = 0.05  # m the block may leave the sampling box by before the episode fails
GRASP_COMMAND_CLOSED = 0.1  # jaw command (0 closed, 1 open) below which the jaw is told to close
GRASP_MIN_OPENING = 0.15  # jaw opening (same scale) the block keeps when held: ~0.30 for the 4 cm block
GRASP_MAX_DISTANCE = 0.02  # metres from the grasp point (top-down IK point) to the block centre


@dataclasses.dataclass(frozen=True)
class BlockConfig(ArmConfig):
    """Fields of every block task: the reward type and whether placements are random."""

    reward_type: str = "sparse"
    random_block_position: bool = False

    def validate(self) -> None:
        super().validate()
        if not isinstance(self.reward_type, str) or self.reward_type not in REWARD_TYPES:
            raise InputError(f"reward_type must be one of {REWARD_TYPES}, got {self.reward_type!r}")
        object.__setattr__(self, "random_block_position",
                           checks.flag("random_block_position", self.random_block_position))


class BlockTask(SO101Env):
    """A task with the block ``block`` on the table; see the module docstring."""

    sampling_bounds: ClassVar[tuple[tuple[float, float], tuple[float, float]]]  # (lo, hi) of the block's reset xy, m
    fixed_block_xy: ClassVar[tuple[float, float]]  # the block's xy without random placements, m
    config: BlockConfig

    def __init__(self, config: BlockConfig | None = None, backend: str | None = None, **physics_kwargs):
        super().__init__(config, backend, **physics_kwargs)
        self._block_adr = block_qpos_adr(self.mj_model)
        self._block_dof = block_dof_adr(self.mj_model)
        self._block_z = float(self.mj_model.geom("block").size[2])
        self._grasp_offset = ik.grasp_point_offset(self.mj_model)

    # -- reset ------------------------------------------------------------------------------------
    def sample_initial(self, rng: Array, dtype) -> dict[str, Array]:
        lo, hi = (jnp.asarray(b, dtype) for b in self.sampling_bounds)
        if self.config.random_block_position:
            return {"block_xy": jax.random.uniform(rng, (2,), dtype, lo, hi)}
        return {"block_xy": jnp.asarray(self.fixed_block_xy, dtype)}

    def start_with_block(self, rng: Array, block_xy: Array, params: dict | None, task: dict[str, Array],
                         nonfinite: Array | int = 0) -> State:
        """Initial state with the block resting at ``block_xy``; task entries ``z_init`` plus ``task``
        (``nonfinite``: as :meth:`~so101_mjx.envs.base.SO101Env.start`'s)."""
        dtype = block_xy.dtype
        block_z = self.block_half_height(params, dtype)
        qpos = as_qpos0(self.mj_model, dtype)
        qpos = qpos.at[self._block_adr : self._block_adr + 3].set(jnp.concatenate([block_xy, block_z[None]]))
        return self.start(rng, qpos, params, lambda physics: {"z_init": self.block_pos(physics)[2], **task}, nonfinite)

    def start_with_goal(self, rng: Array, block_xy: Array, goal_xy: Array | None,
                        sample_goal_xy: Callable[[Array, Array], Array],
                        task: Callable[[Array, Array], dict[str, Array]]) -> State:
        """``reset_to`` of a task with a goal on the table: the block at ``block_xy`` (2,) m, the goal
        at ``goal_xy`` (2,) m (``sample_goal_xy(key, block_xy)`` when None) at the block's resting
        height; ``task(block_xy (2,), goal (3,))`` gives the task entries besides ``z_init``."""
        fixed, nonfinite = self.fixed_inputs(block_xy=block_xy, **({} if goal_xy is None else {"goal_xy": goal_xy}))
        block_xy = fixed["block_xy"]
        rng, key, params_key = jax.random.split(rng, 3)
        goal_xy = sample_goal_xy(key, block_xy) if goal_xy is None else fixed["goal_xy"].astype(block_xy.dtype)
        params = self.sample_params(params_key, block_xy.dtype)
        goal = jnp.concatenate([goal_xy, self.block_half_height(params, block_xy.dtype)[None]])
        return self.start_with_block(rng, block_xy, params, task(block_xy, goal), nonfinite)

    # -- the block and the grasp ------------------------------------------------------------------
    def block_pos(self, state_physics) -> Array:
        return self.physics.sensor(state_physics, "block_pos")

    def block_half_height(self, params: dict | None, dtype) -> Array:
        """Block half-size in z (metres): the model's, or this episode's randomized one."""
        if params is None:
            return jnp.asarray(self._block_z, dtype)
        return params["geom_size"][self.mj_model.geom("block").id, 2]

    def block_speed(self, physics) -> Array:
        """Linear speed of the block (m/s, ())."""
        return jnp.linalg.norm(physics.qvel[self._block_dof : self._block_dof + 3])

    def grasp_point(self, physics) -> Array:
        """World position (3,) of the jaw-pad midpoint (the top-down grasp point) at the current joints."""
        return self.arm.kin.point(self.arm.joint_q(physics), EE_SITE, self._grasp_offset)

    def grasped(self, physics, grasp_point: Array | None = None) -> Array:
        """Bool (): the jaw is commanded closed but held open by something, with the block centre
        within ``GRASP_MAX_DISTANCE`` of the grasp point (a proxy that needs no contact data).
        ``grasp_point``: :meth:`grasp_point`, when the caller has it already."""
        command = self.arm.jaw_command(physics)
        grasp_point = self.grasp_point(physics) if grasp_point is None else grasp_point
        near = jnp.linalg.norm(grasp_point - self.block_pos(physics)) < GRASP_MAX_DISTANCE
        return (command < GRASP_COMMAND_CLOSED) & (self.arm.jaw_opening(physics) > GRASP_MIN_OPENING) & near

    def left_sampling_box(self, physics) -> Array:
        """Bool (): the block left the sampling box grown by ``BLOCK_OUT_OF_BOUNDS_MARGIN``."""
        xy = self.block_pos(physics)[:2]
        lo = jnp.asarray(self.sampling_bounds[0], xy.dtype) - BLOCK_OUT_OF_BOUNDS_MARGIN
        hi = jnp.asarray(self.sampling_bounds[1], xy.dtype) + BLOCK_OUT_OF_BOUNDS_MARGIN
        return jnp.any(xy < lo) | jnp.any(xy > hi)
