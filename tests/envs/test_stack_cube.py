"""SO101StackCube-v0: scene, resets, the success criterion clause by clause, the staged dense
reward along the scripted episode, termination, randomization and the scripted controller."""

import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.envs import make, scripted
from so101_mjx.envs.base import block_dof_adr, block_qpos_adr
from so101_mjx.envs.rollout import run_episodes
from so101_mjx.envs.tasks.pick_place import (
    FIXED_BLOCK_XY,
    FIXED_GOAL_XY,
    MIN_GOAL_DISTANCE,
    SAMPLING_BOUNDS,
    STAGED_WEIGHTS,
)
from so101_mjx.envs.tasks.stack_cube import BOTTOM, HOLD_STAGES
from so101_mjx.robot.gripper import open_fraction_to_ctrl
from so101_mjx.training.presets.stack_cube import PRESETS

NAME = "SO101StackCube-v0"
HALF = 0.02  # the 4 cm block's half size
BLOCK_XY, BOTTOM_XY = (0.22, -0.05), (0.28, 0.04)


@pytest.fixture(scope="module")
def env():
    return make(NAME, "c", reward_type="dense")


def arranged(env, top_offset=(0.0, 0.0, 0.0), jaw=1.0, top_vel=0.0, bottom_vel=0.0):
    """(physics, info) with the bottom block at BOTTOM_XY on the table and the top block stacked on
    it plus ``top_offset`` (m), jaw joint at open fraction ``jaw``, x speeds (m/s) of the blocks."""
    s = env.reset_to(jax.random.PRNGKey(0), block_xy=BLOCK_XY, bottom_xy=BOTTOM_XY)
    m, arm = env.mj_model, env.arm
    top = np.asarray([*BOTTOM_XY, 3 * HALF]) + np.asarray(top_offset)  # resting on the bottom block
    qpos = s.physics.qpos.at[block_qpos_adr(m) : block_qpos_adr(m) + 3].set(top)
    qpos = qpos.at[arm.gripper_qpos].set(open_fraction_to_ctrl(jaw, arm.gripper_range))
    qvel = s.physics.qvel.at[block_dof_adr(m)].set(top_vel).at[block_dof_adr(m, BOTTOM)].set(bottom_vel)
    ctrl = s.physics.ctrl.at[arm.gripper_actuator].set(open_fraction_to_ctrl(jaw, arm.gripper_range))
    return env.physics.init(qpos, qvel, ctrl), s.info


def test_the_two_blocks_are_the_same_block():
    m = make(NAME, "c").mj_model
    top, bottom = m.geom("block").id, m.geom(BOTTOM).id
    for field in ("geom_size", "geom_friction", "geom_contype", "geom_conaffinity", "geom_type"):
        np.testing.assert_array_equal(getattr(m, field)[top], getattr(m, field)[bottom], err_msg=field)
    np.testing.assert_array_equal(m.body_mass[m.body("block").id], m.body_mass[m.body(BOTTOM).id])
    assert not np.array_equal(m.geom_rgba[top], m.geom_rgba[bottom])
    assert m.geom_contype[top] & m.geom_conaffinity[bottom]  # they collide with each other


def test_random_resets_are_apart_in_the_sampling_box_and_fixed_ones_fixed():
    env = make(NAME, "c", random_block_position=True)
    at = env.observation_slices()
    obs = np.asarray(jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), 256)).obs)
    top, bottom = obs[:, at["block_pos"]], obs[:, at["bottom_block_pos"]]
    lo, hi = np.asarray(SAMPLING_BOUNDS)
    for block in (top, bottom):
        assert (block[:, :2] >= lo).all() and (block[:, :2] <= hi).all()
        np.testing.assert_allclose(block[:, 2], HALF, atol=1e-6)
    assert (np.linalg.norm(top[:, :2] - bottom[:, :2], axis=1) >= MIN_GOAL_DISTANCE).all()
    assert np.ptp(bottom[:, 0]) > 0.1 and np.ptp(top[:, 1]) > 0.15
    fixed = make(NAME, "c").reset(jax.random.PRNGKey(5)).obs
    np.testing.assert_allclose(fixed[at["block_pos"]], [*FIXED_BLOCK_XY, HALF], atol=1e-6)
    np.testing.assert_allclose(fixed[at["bottom_block_pos"]], [*FIXED_GOAL_XY, HALF], atol=1e-6)


@pytest.mark.parametrize("kwargs, expected", [
    ({}, True),
    ({"top_offset": (0.019, 0.0, 0.0)}, True),
    ({"top_offset": (0.0, -0.021, 0.0)}, False),  # xy beyond half a block
    ({"top_offset": (0.0, 0.0, 0.004)}, True),
    ({"top_offset": (0.0, 0.0, 0.006)}, False),  # z beyond 5 mm of the stacked height
    ({"top_offset": (0.0, 0.0, -0.006)}, False),
    ({"jaw": 0.55}, True),
    ({"jaw": 0.45}, False),  # gripper not released
    ({"top_vel": 0.009}, True),
    ({"top_vel": 0.011}, False),  # top block moving
    ({"bottom_vel": -0.011}, False),  # bottom block moving
])
def test_success_needs_every_clause(env, kwargs, expected):
    physics, info = arranged(env, **kwargs)
    assert bool(env.success(physics, info)) is expected


def test_a_block_left_on_the_stack_settles_into_success(env):
    """Let go 1 mm above the stack: the box-box contact holds it, it comes to rest and the episode ends in success."""
    physics, info = arranged(env, (0.0, 0.0, 0.001))
    s = env.reset_to(jax.random.PRNGKey(0), block_xy=BLOCK_XY, bottom_xy=BOTTOM_XY).replace(physics=physics, info=info)
    step, hits = jax.jit(env.step), []
    for _ in range(5):
        s = step(s, jnp.asarray([0.0, 0.0, 0.0, 1.0]))
        hits.append(bool(s.info.succeed))
    assert hits[-1] and float(s.done) == 1.0, hits
    assert bool(env.placed(s.physics, s.info))


def test_dense_reward_is_bounded_gated_and_complete_on_a_released_stack(env):
    s = env.reset_to(jax.random.PRNGKey(0), block_xy=BLOCK_XY, bottom_xy=BOTTOM_XY)
    # a block floating over the stack, never lifted by the arm nor held, earns nothing past reach
    physics, info = arranged(env, (0.0, 0.0, 0.02))
    terms = env.reward_terms(physics, info, env.success(physics, info))
    assert set(terms) == set(STAGED_WEIGHTS) and all(0 <= float(v) <= 1 for v in terms.values())
    assert all(float(terms[k]) == 0 for k in ("grasp", "lift", "carry", "place", "release", "success")), terms
    # once lifted (the latch), the released stack completes carry, place, release and success
    physics, info = arranged(env)
    info = info.replace(task={**info.task, "was_lifted": jnp.asarray(True)})
    terms = env.reward_terms(physics, info, env.success(physics, info))
    np.testing.assert_allclose([float(terms[k]) for k in ("carry", "place", "release", "success")], 1.0, atol=1e-6)
    # a placed block pays grasp and lift as if held: letting go does not cost them
    np.testing.assert_allclose([float(terms["grasp"]), float(terms["lift"])],
                               [1.0, 2 * HALF / (2 * HALF + 0.01)], atol=1e-3)
    # holding a placed block forever pays less than finishing (discounted, with the bonus)
    cpu = PRESETS["cpu"]
    assert sum(STAGED_WEIGHTS[k] for k in HOLD_STAGES) / (1 - cpu.discounting) < cpu.success_bonus
    assert (make(NAME, "c").reward_scales == {"success": 1.0}
            and s.metrics.keys() >= {f"reward/{k}" for k in STAGED_WEIGHTS})


def test_opening_on_the_stack_only_adds_from_the_first_commanded_step(env):
    """The jaw still closed on the placed block: commanding it open adds release and costs nothing."""
    physics, info = arranged(env, jaw=0.3)
    info = info.replace(task={**info.task, "was_lifted": jnp.asarray(True)})
    commanded = lambda frac: physics.replace(  # noqa: E731
        ctrl=physics.ctrl.at[env.arm.gripper_actuator].set(open_fraction_to_ctrl(frac, env.arm.gripper_range)))
    closed, opened = commanded(0.0), commanded(1.0)
    held, letting_go = (env.reward_terms(p, info, env.success(p, info)) for p in (closed, opened))
    assert not bool(env.success(opened, info))  # the jaw has not opened yet: no success
    assert float(held["release"]) == 0 and float(letting_go["release"]) == 1
    for k in set(HOLD_STAGES) - {"release"}:
        assert float(letting_go[k]) == float(held[k]) > 0, k


def test_dense_reward_climbs_with_the_scripted_stages(env):
    """Mean dense reward per controller phase rises through hover, descend, close, lift, traverse, lower, open."""
    env = make(NAME, "c", reward_type="dense", action_scale=0.025)
    init, act = env.scripted_controller()
    step, act = jax.jit(env.step), jax.jit(act)
    s = env.reset_to(jax.random.PRNGKey(0), block_xy=BLOCK_XY, bottom_xy=BOTTOM_XY)
    cs, by_phase, lifted = init(s), {}, []
    for _ in range(env.episode_length):
        cs, a = act(cs, s)
        s = step(s, a)
        by_phase.setdefault(int(cs.phase), []).append(float(s.reward))
        for k, scale in STAGED_WEIGHTS.items():
            assert 0 <= s.metrics[f"reward/{k}"] <= np.float32(scale)  # metrics are float32
        lifted.append(bool(s.info.task["was_lifted"]))
        if s.done:
            break
    assert bool(s.info.succeed)
    phases = sorted(by_phase)
    assert (phases[:7] == [scripted.HOVER, scripted.DESCEND, scripted.CLOSE, scripted.LIFT, scripted.TRAVERSE,
                           scripted.LOWER, scripted.OPEN])
    means = [np.mean(by_phase[p]) for p in phases]
    assert all(b > a for a, b in zip(means, means[1:])), means
    assert float(s.reward) == max(r for rs in by_phase.values() for r in rs)
    # the lift latch turns on once during the episode and stays on
    first = lifted.index(True)
    assert 0 < first and all(lifted[first:]), lifted


def test_a_block_leaving_the_workspace_terminates(env):
    s = env.reset_to(jax.random.PRNGKey(0), block_xy=BLOCK_XY, bottom_xy=BOTTOM_XY)
    assert not bool(env.terminated(s.physics, s.info))
    for joint in ("block", BOTTOM):
        adr = block_qpos_adr(env.mj_model, joint)
        physics = env.physics.init(s.physics.qpos.at[adr].set(0.45), s.physics.qvel, s.physics.ctrl)
        assert bool(env.terminated(physics, s.info)), joint


def test_randomization_scales_both_blocks_alike():
    env = make(NAME, "c", randomization={"block_size": (1.25, 1.25), "block_mass": (0.5, 2.0)})
    s = env.reset(jax.random.PRNGKey(1))
    at, p, m = env.observation_slices(), s.info.model_params, env.mj_model
    g, g2, b, b2 = m.geom("block").id, m.geom(BOTTOM).id, m.body("block").id, m.body(BOTTOM).id
    np.testing.assert_allclose(p["geom_size"][g2], 1.25 * m.geom_size[g], rtol=1e-12)
    np.testing.assert_array_equal(p["body_mass"][b2], p["body_mass"][b])
    assert float(p["body_mass"][b]) != pytest.approx(m.body_mass[b])
    np.testing.assert_allclose([s.obs[at["block_pos"]][2], s.obs[at["bottom_block_pos"]][2]], 0.025, atol=1e-6)
    np.testing.assert_allclose(env.stacked_pos(s.physics, s.info)[2], 0.025 + 0.05, atol=1e-6)


@pytest.mark.parametrize("field, value",
                         [("reward_type", "shaped"), ("reward_type", 1), ("random_block_position", "yes")])
def test_bad_task_config_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        make(NAME, "c", **{field: value})


def scripted_success(n: int) -> float:
    env = make(NAME, "c", action_scale=scripted.DEFAULT_ACTION_SCALE, random_block_position=True)
    return float(np.mean(run_episodes(env, "scripted", jax.random.PRNGKey(7), n, stop_when_done=True)["success"]))


@pytest.mark.soak  # the 256-placement test below asserts the same (slow)
def test_scripted_controller_stacks_32_random_placements():
    assert scripted_success(32) >= 0.95


@pytest.mark.slow
@pytest.mark.optimized
def test_scripted_controller_stacks_256_random_placements():
    assert scripted_success(256) >= 0.95


@pytest.mark.slow
@pytest.mark.optimized
def test_one_mjx_step_matches_c_with_both_blocks_on_the_floor():
    c_env, mjx_env = make(NAME, "c"), make(NAME, "mjx")
    action = jnp.asarray([0.3, -0.2, -0.5, 0.0])
    start = time.perf_counter()
    # an eager MJX reset: ~75 s of dispatch
    m = jax.jit(mjx_env.step)(jax.jit(mjx_env.reset)(jax.random.PRNGKey(0)), action)
    jax.block_until_ready(m)
    print(f"mjx first jit + step: {time.perf_counter() - start:.1f} s")
    c = jax.jit(c_env.step)(c_env.reset(jax.random.PRNGKey(0)), action)
    assert bool(jnp.all(jnp.isfinite(m.physics.qpos)))
    np.testing.assert_allclose(m.obs, c.obs, rtol=0, atol=1e-9)
