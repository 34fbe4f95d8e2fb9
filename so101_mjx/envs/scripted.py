"""Scripted controllers as pure JAX functions, usable in batched rollouts and as demonstrations.

Ports of lerobot_env_so101 0.4.0's ``scripted.reach_close`` (stateless, from the flat
observation) and ``scripted.pick_place.PickPlaceController`` (phases hover → descend → close →
lift → traverse → lower → open → retreat, same constants), plus a proportional reacher for
SO101Reach-v0. Each task binds its controller to its state in ``scripted_controller()``;
:func:`controller_for` returns that ``(init, act)`` pair over :class:`~so101_mjx.sim.state.State`;
``act`` is single-world (``jax.vmap`` it).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jax import Array

from so101_mjx.errors import InputError

DEFAULT_ACTION_SCALE = 0.025  # metres per action unit the reference controllers are tuned for
REFERENCE_CONTROL_DT = 0.1  # s, the control period the controllers are tuned for (the reference's)
GRIPPER_OPEN, GRIPPER_CLOSED = 1.0, 0.0

# reach-and-close
REACH_CLOSE_HOVER, XY_ALIGN_TOLERANCE, GRASP_Z_OFFSET, REACH_CLOSE_TOLERANCE = 0.06, 0.01, 0.03, 0.005
GRIPPER_CLOSED_THRESHOLD, REACH_CLOSE_SUCCESS_DISTANCE = 0.5, 0.05

# pick-and-place
HOVER_HEIGHT, LIFT_HEIGHT, GRASP_HEIGHT, RELEASE_CLEARANCE = 0.07, 0.06, 0.015, 0.002
GOAL_TOLERANCE, CAREFUL_SPEED = 0.004, 0.4
CLOSE_STEPS, OPEN_STEPS, PHASE_TIMEOUT_STEPS = 10, 8, 60
HOVER, DESCEND, CLOSE, LIFT, TRAVERSE, LOWER, OPEN, RETREAT, DONE = range(9)
_IS_HOLD = np.asarray([p in (CLOSE, OPEN) for p in range(9)])
_HOLD_STEPS = np.asarray([CLOSE_STEPS if p == CLOSE else OPEN_STEPS if p == OPEN else 0 for p in range(9)])
_IS_CAREFUL = np.asarray([p in (DESCEND, LIFT, LOWER) for p in range(9)])
_GRIPPER = np.asarray([GRIPPER_CLOSED if p in (CLOSE, LIFT, TRAVERSE, LOWER) else GRIPPER_OPEN for p in range(9)])


def reach_close(ee_pos: Array, block_pos: Array, action_scale: float = DEFAULT_ACTION_SCALE) -> Array:
    """PickCube's observed ``ee_pos`` (3,) and ``block_pos`` (3,) -> action (4,): hover over the block, descend,
    close."""
    ee, block, dtype = ee_pos, block_pos, ee_pos.dtype
    goal = block + jnp.asarray([0.0, 0.0, GRASP_Z_OFFSET], dtype)
    at_goal = jnp.linalg.norm(ee - goal) < REACH_CLOSE_TOLERANCE
    aligned = jnp.linalg.norm(ee[:2] - block[:2]) <= XY_ALIGN_TOLERANCE
    target = jnp.where(aligned, goal, block + jnp.asarray([0.0, 0.0, REACH_CLOSE_HOVER], dtype))
    delta = jnp.clip((target - ee) / action_scale, -1.0, 1.0)
    move = jnp.concatenate([delta, jnp.asarray([GRIPPER_OPEN], dtype)])
    return jnp.where(at_goal, jnp.asarray([0.0, 0.0, 0.0, GRIPPER_CLOSED], dtype), move)


def is_reach_close_success(ee_pos: Array, block_pos: Array, gripper_pose: Array) -> Array:
    """Gripper closed (``gripper_pose`` (..., 1) < -0.5) within 5 cm of the block (``ee_pos``, ``block_pos`` (..., 3)),
    per world (...)."""
    near = jnp.linalg.norm(ee_pos - block_pos, axis=-1) < REACH_CLOSE_SUCCESS_DISTANCE
    return near & (jnp.squeeze(gripper_pose, -1) < -GRIPPER_CLOSED_THRESHOLD)


@struct.dataclass
class PickPlaceState:
    phase: Array  # () int32, HOVER..DONE
    steps_in_phase: Array  # () int32
    table_z: Array  # () block centre height at the first call, metres


def pick_place_init(block_pos: Array) -> PickPlaceState:
    """Controller state at the start of an episode (block position (3,) from the reset obs)."""
    return PickPlaceState(jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32), block_pos[2])


def _phase_targets(grasp: Array, block: Array, goal: Array, table_z: Array, lift_height: float) -> Array:
    """Grasp-point targets (9, 3) of every phase (hold phases: unused)."""
    lift_z = table_z + GRASP_HEIGHT + lift_height
    at = lambda xy, z: jnp.concatenate([xy, jnp.reshape(z, (1,))])  # noqa: E731
    carried = grasp + goal - block
    return jnp.stack([
        at(block[:2], table_z + HOVER_HEIGHT),  # HOVER
        at(block[:2], table_z + GRASP_HEIGHT),  # DESCEND
        grasp,  # CLOSE
        at(grasp[:2], lift_z),  # LIFT
        at(carried[:2], lift_z),  # TRAVERSE
        carried + jnp.asarray([0.0, 0.0, RELEASE_CLEARANCE], grasp.dtype),  # LOWER
        grasp,  # OPEN
        at(grasp[:2], table_z + HOVER_HEIGHT),  # RETREAT
        grasp,  # DONE
    ])


def pick_place_act(
    cs: PickPlaceState, grasp_pos: Array, block_pos: Array, goal_pos: Array, action_scale: float = DEFAULT_ACTION_SCALE,
    lift_height: float = LIFT_HEIGHT,
) -> tuple[PickPlaceState, Array]:
    """Advance the phase while its goal is met, then return the next action (4,).

    ``grasp_pos`` is the point the action moves (the env's IK point), all positions (3,) metres;
    ``lift_height`` (metres) is how far above the grasp height the block is carried.
    """
    targets = _phase_targets(grasp_pos, block_pos, goal_pos, cs.table_z, lift_height)

    def settle(_, carry):
        phase, steps, settled, delta = carry
        error = targets[phase] - grasp_pos
        limit = jnp.where(jnp.asarray(_IS_CAREFUL)[phase], CAREFUL_SPEED, 1.0)
        move = jnp.clip(error / action_scale, -limit, limit)
        finished = jnp.where(
            jnp.asarray(_IS_HOLD)[phase],
            steps >= jnp.asarray(_HOLD_STEPS)[phase],
            (jnp.linalg.norm(error) < GOAL_TOLERANCE) | (steps >= PHASE_TIMEOUT_STEPS),
        )
        active = ~settled & (phase != DONE)
        delta = jnp.where(active & ~finished, jnp.where(jnp.asarray(_IS_HOLD)[phase], 0.0, move), delta)
        advance = active & finished
        settled = settled | (active & ~finished)
        return phase + advance, jnp.where(advance, 0, steps), settled, delta

    init = (cs.phase, cs.steps_in_phase, jnp.zeros((), bool), jnp.zeros(3, grasp_pos.dtype))
    phase, steps, _, delta = jax.lax.fori_loop(0, DONE + 1, settle, init)
    delta = jnp.where(phase == DONE, 0.0, delta)
    action = jnp.concatenate([delta, jnp.asarray(_GRIPPER)[phase][None].astype(delta.dtype)])
    return PickPlaceState(phase, steps + 1, cs.table_z), action


def reach(target: Array, ee_pos: Array, action_scale: float) -> Array:
    """Proportional reacher for SO101Reach-v0: full-speed-limited step toward the target, jaw open."""
    delta = jnp.clip((target - ee_pos) / action_scale, -1.0, 1.0)
    return jnp.concatenate([delta, jnp.asarray([GRIPPER_OPEN], delta.dtype)])


@struct.dataclass
class PacedState:
    inner: object  # the controller's own state
    tick: Array  # () int32, control steps since the start
    action: Array  # (4,) the controller's last Cartesian action


def paced(init: Callable, act: Callable, ticks: int) -> tuple[Callable, Callable]:
    """A controller tuned for :data:`REFERENCE_CONTROL_DT` run at a control period ``ticks`` times
    shorter: it acts every ``ticks`` steps and its IK-target motion ``[dx, dy, dz]`` is spread evenly
    over them (each step moves 1/``ticks`` of it), the jaw command held. Its phases, holds and
    timeouts keep their durations in seconds, and the IK target follows the same path in time."""

    def paced_init(state) -> PacedState:
        cs = init(state)
        action = jax.eval_shape(act, cs, state)[1]  # the action's shape and dtype, not computed
        return PacedState(cs, jnp.zeros((), jnp.int32), jnp.zeros(action.shape, action.dtype))

    def paced_act(cs: PacedState, state) -> tuple[PacedState, Array]:
        fresh = act(cs.inner, state)
        due = cs.tick % ticks == 0
        inner, action = jax.tree.map(lambda new, old: jnp.where(due, new, old), fresh, (cs.inner, cs.action))
        return PacedState(inner, cs.tick + 1, action), action.at[:3].divide(ticks)

    return paced_init, paced_act


@struct.dataclass
class JointModeState:
    """A Cartesian controller's state in joint mode, with the IK target its actions move: kept from step to
    step as the Cartesian mode keeps it (restarted at the measured grasp point, it would leave the arm
    short by its sag)."""

    inner: object  # the controller's own state
    ik_target: Array  # (3,) m, the Cartesian IK target its actions move (the Cartesian mode keeps it in Info)
    last_action_zero: Array  # () bool, the last action's delta was zero (Info's field of that name)


def controller_for(env, demonstrator: bool = False) -> tuple[Callable, Callable]:
    """``(init(state) -> cs, act(cs, state) -> (cs, action))`` of an env's scripted controller
    (:meth:`~so101_mjx.envs.base.SO101Env.scripted_controller`, single world), or with
    ``demonstrator`` of the one that aims at its success (:meth:`~so101_mjx.envs.base.SO101Env.demonstrator`);
    ValueError if it has none. At a control period shorter than :data:`REFERENCE_CONTROL_DT` the
    controller is :func:`paced` (e.g. joint mode's 30 Hz: it acts every 3 steps). In joint mode, ``act``
    returns the joint targets of the controller's Cartesian action
    (:meth:`~so101_mjx.envs.arm.SO101Arm.cartesian_as_joint`), the IK target kept in its state."""
    fns: tuple[Callable, Callable] | None = env.demonstrator() if demonstrator else env.scripted_controller()
    if fns is None:
        raise InputError(f"{env.name} has no {'demonstrator' if demonstrator else 'scripted controller'}")
    ticks = max(1, round(REFERENCE_CONTROL_DT / env.config.control_dt))
    if ticks > 1:
        fns = paced(*fns, ticks)
    if env.arm.joint_mode is None:
        return fns
    init, act = fns

    def joint_init(state) -> JointModeState:
        return JointModeState(init(state), state.info.ik_target, state.info.last_action_zero)

    def joint_act(cs: JointModeState, state) -> tuple[JointModeState, Array]:
        inner, action = act(cs.inner, state)
        info = state.info.replace(ik_target=cs.ik_target, last_action_zero=cs.last_action_zero)
        joint, info = env.arm.cartesian_as_joint(state.physics, info, action)
        return JointModeState(inner, info.ik_target, info.last_action_zero), joint

    return joint_init, joint_act
