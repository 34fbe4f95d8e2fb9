"""SO101PushCube-v0: success clauses, termination, the closed jaw, resets, dense terms, the scripted push."""

import time

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from so101_mjx.envs import make
from so101_mjx.envs.base import block_dof_adr, block_qpos_adr
from so101_mjx.envs.rollout import run_episodes
from so101_mjx.envs.tasks import push_cube as pc

NAME = "SO101PushCube-v0"
GOAL_XY = (0.25, 0.05)


@pytest.fixture(scope="module")
def env():
    return make(NAME, "c")


def _block_state(env, offset_xy=(0.0, 0.0), dz=0.0, velocity=(0.0, 0.0, 0.0), start_xy=None):
    """Reset with the goal at GOAL_XY and the block ``offset_xy`` from it (or at ``start_xy``), then the
    block's physics moved to goal + ``offset_xy``, raised ``dz`` and given linear ``velocity`` (m/s)."""
    goal = np.asarray(GOAL_XY)
    block_xy = goal + np.asarray(offset_xy)
    s = env.reset_to(jax.random.PRNGKey(0), block_xy=start_xy if start_xy is not None else block_xy, goal_xy=goal)
    adr, dof = block_qpos_adr(env.mj_model), block_dof_adr(env.mj_model)
    qpos = s.physics.qpos.at[adr : adr + 3].set(jnp.asarray([*block_xy, float(s.info.task["z_init"]) + dz]))
    qvel = s.physics.qvel.at[dof : dof + 3].set(jnp.asarray(velocity))
    return s.replace(physics=env.physics.init(qpos, qvel, s.physics.ctrl))


@pytest.mark.parametrize(
    "field, value, words",
    [("reward_type", "shaped", "reward_type must be one of"),
     ("random_block_position", "yes", "random_block_position must be True or False")],
)
def test_bad_config_names_the_field(field, value, words):
    with pytest.raises(ValueError, match=words):
        make(NAME, "c", **{field: value})


@pytest.mark.parametrize(
    "kwargs, success",
    [
        (dict(offset_xy=(0.02, 0.0)), True),  # 2 cm from the goal centre, flat, at rest
        (dict(offset_xy=(0.0, -0.028), dz=0.002), True),  # 2 mm up is still resting
        (dict(offset_xy=(0.035, 0.0)), False),  # outside the 3 cm disc
        (dict(offset_xy=(0.0, 0.0), dz=0.005), False),  # tipped / lifted 5 mm: not resting on the table
        (dict(offset_xy=(0.01, 0.0), velocity=(0.0, 0.02, 0.0)), False),  # sliding at 2 cm/s
    ],
)
def test_success_needs_every_clause(env, kwargs, success):
    s = _block_state(env, **kwargs)
    assert bool(env.success(s.physics, s.info)) is success
    assert not bool(env.terminated(s.physics, s.info))


def test_a_resting_block_in_the_disc_ends_the_episode_with_success(env):
    s = jax.jit(env.step)(_block_state(env, offset_xy=(0.015, 0.01)), jnp.zeros(4))
    assert bool(s.info.succeed) and float(s.done) == 1.0 and float(s.reward) == 1.0


def test_lifting_or_leaving_the_workspace_terminates_without_success(env):
    lifted = _block_state(env, dz=0.025)
    assert bool(env.lifted(lifted.physics, lifted.info)) and bool(env.terminated(lifted.physics, lifted.info))
    assert not bool(env.success(lifted.physics, lifted.info))
    lo, hi = pc.SAMPLING_BOUNDS
    outside = _block_state(env, offset_xy=(hi[0] + 0.06 - GOAL_XY[0], 0.0))
    assert not bool(env.lifted(outside.physics, outside.info)) and bool(env.terminated(outside.physics, outside.info))


def test_the_jaw_is_held_closed(env):
    step = jax.jit(env.step)
    s = env.reset(jax.random.PRNGKey(0))
    closed = float(env.arm.gripper_range[0])
    for a in ([0.0, 0.0, 0.1, 1.0], [0.0, 0.0, 0.0, 0.7], [0.0, 0.0, 0.0, np.nan]):
        s = step(s, jnp.asarray(a))
        assert float(s.physics.ctrl[env.arm.gripper_actuator]) == pytest.approx(closed, abs=1e-12)
    assert int(s.info.nonfinite_actions) == 1
    assert float(env.arm.jaw_opening(s.physics)) < 0.02


def test_pusher_is_the_closed_fingertips_centre(env):
    s, step = env.reset(jax.random.PRNGKey(0)), jax.jit(env.step)
    for _ in range(5):
        s = step(s, jnp.asarray([-0.05, 0.02, -0.05, 1.0]))
    data = mujoco.MjData(env.mj_model)
    data.qpos[:] = np.asarray(s.physics.qpos)
    mujoco.mj_forward(env.mj_model, data)
    tips = np.mean([data.geom_xpos[env.mj_model.geom(g).id] for g in pc.PUSHER_TIPS], axis=0)
    np.testing.assert_allclose(np.asarray(env.pusher_pos(s.physics)), tips, atol=1e-3)  # the jaw settles within ~1 mrad


def test_resets_random_in_the_box_or_fixed():
    lo, hi = (np.asarray(b) for b in pc.SAMPLING_BOUNDS)
    keys = jax.random.split(jax.random.PRNGKey(0), 256)
    random = make(NAME, "c", random_block_position=True, randomization={"block_size": (0.8, 1.2)})
    s = jax.jit(jax.vmap(random.reset))(keys)
    at = random.observation_slices()
    block, goal = np.asarray(s.obs[:, at["block_pos"]]), np.asarray(s.obs[:, at["goal"]])
    for xy in (block[:, :2], goal[:, :2]):
        assert (xy >= lo).all() and (xy <= hi).all()
    assert (np.linalg.norm(block[:, :2] - goal[:, :2], axis=1) >= pc.MIN_GOAL_DISTANCE).all()
    np.testing.assert_allclose(goal[:, 2], np.asarray(s.info.task["z_init"]), atol=1e-4)  # each episode's half height
    assert np.ptp(goal[:, 2]) > 0.005
    fixed = jax.jit(jax.vmap(make(NAME, "c").reset))(keys[:8])
    np.testing.assert_allclose(fixed.obs[:, at["block_pos"]][:, :2],
                               np.broadcast_to(pc.FIXED_BLOCK_XY, (8, 2)), atol=1e-6)
    np.testing.assert_allclose(fixed.obs[:, at["goal"]][:, :2], np.broadcast_to(pc.FIXED_GOAL_XY, (8, 2)), atol=1e-12)


def test_dense_terms():
    dense = make(NAME, "c", reward_type="dense")
    assert dense.reward_scales == pc.DENSE_WEIGHTS and make(NAME, "c").reward_scales == {"success": 1.0}
    start = np.asarray(GOAL_XY) + [0.0, -0.1]
    halfway = _block_state(dense, offset_xy=(0.0, -0.05), start_xy=start)
    terms = dense.reward_terms(halfway.physics, halfway.info, jnp.zeros((), bool))
    assert float(terms["push"]) == pytest.approx(0.5, abs=1e-6)
    at_reset = dense.reset_to(jax.random.PRNGKey(0), block_xy=start, goal_xy=GOAL_XY)
    far = dense.reward_terms(at_reset.physics, at_reset.info, jnp.zeros((), bool))
    assert float(far["push"]) == pytest.approx(0.0, abs=1e-6)
    behind = np.r_[start - [0.0, pc.CONTACT_OFFSET], float(at_reset.info.task["z_init"])]  # the goal is +y of the block
    distance = np.linalg.norm(np.asarray(dense.pusher_pos(at_reset.physics)) - behind)
    assert float(far["reach"]) == pytest.approx(np.exp(-pc.REACH_SHARPNESS * distance), rel=1e-9)


def test_controller_replans_off_the_line_and_retreats_at_the_goal():
    cs = pc.PushState(jnp.asarray(pc.PUSH, jnp.int32), jnp.asarray(0.02))
    block, goal = jnp.asarray([0.25, 0.0, 0.02]), jnp.asarray([0.25, 0.1, 0.02])
    on_line = jnp.asarray([0.25, -0.035, pc.PUSH_HEIGHT])
    nxt, a = pc.push_act(cs, on_line, block, goal, 0.025)
    assert int(nxt.phase) == pc.PUSH and float(a[1]) > 0.3 and float(a[3]) == 0.0  # pushes +y, jaw closed
    nxt, a = pc.push_act(cs, on_line.at[0].add(0.015), block, goal, 0.025)
    assert int(nxt.phase) == pc.RISE and float(a[2]) > 0.3  # drifted off the line: lift and replan
    nxt, a = pc.push_act(cs, on_line, block, block.at[1].add(0.005), 0.025)
    assert int(nxt.phase) == pc.RETREAT and float(a[1]) < 0.0  # at the goal: back away from the block


def scripted_success(num_envs: int) -> float:
    env = make(NAME, "c", action_scale=0.025, random_block_position=True)
    out = run_episodes(env, "scripted", jax.random.PRNGKey(0), num_envs, stop_when_done=True)
    return float(np.mean(np.asarray(out["success"])))


@pytest.mark.soak  # the 256-placement test below asserts the same (slow)
def test_scripted_push_succeeds_on_32_random_placements():
    assert scripted_success(32) >= 0.95


@pytest.mark.slow
@pytest.mark.optimized
def test_scripted_push_succeeds_on_256_random_placements():
    assert scripted_success(256) >= 0.95


@pytest.mark.slow
@pytest.mark.optimized
def test_one_mjx_step_matches_c():
    c_env, mjx_env = make(NAME, "c"), make(NAME, "mjx")
    # eager: ~75 s of dispatch
    action, s = jnp.asarray([0.3, -0.2, -0.5, 1.0]), jax.jit(mjx_env.reset)(jax.random.PRNGKey(0))
    start = time.perf_counter()
    m = jax.block_until_ready(jax.jit(mjx_env.step)(s, action))
    print(f"mjx first jit + step: {time.perf_counter() - start:.1f} s")
    c = jax.jit(c_env.step)(c_env.reset(jax.random.PRNGKey(0)), action)
    np.testing.assert_allclose(m.obs, c.obs, rtol=0, atol=1e-9)
