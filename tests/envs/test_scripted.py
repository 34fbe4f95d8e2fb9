"""The JAX scripted controllers pick the reference controllers' actions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.envs import make, rollout, scripted
from so101_mjx.envs.rollout import run_episodes


@pytest.mark.slow
def test_pick_place_matches_reference_controller():
    """Every step of a closed-loop episode: same phase and action as PickPlaceController."""
    ref_scripted = pytest.importorskip("lerobot_env_so101.scripted.pick_place")
    env = make("SO101PickPlace-v0", "c", action_scale=0.025, random_block_position=True)
    ref = ref_scripted.PickPlaceController(action_scale=0.025)
    s = env.reset(jax.random.PRNGKey(2))
    cs = scripted.pick_place_init(env.block_pos(s.physics))
    act = jax.jit(lambda cs, s: scripted.pick_place_act(cs, env.arm.ik_point(s.physics), env.block_pos(s.physics),
                                                        s.info["goal"], 0.025))
    step = jax.jit(env.step)
    phases = set()
    for _ in range(300):
        cs, a = act(cs, s)
        a_ref = ref.act(np.asarray(env.arm.ik_point(s.physics)), np.asarray(env.block_pos(s.physics)),
                        np.asarray(s.info["goal"]))
        assert int(cs.phase) == ref.phase.value - 1
        np.testing.assert_allclose(a, a_ref, rtol=1e-7, atol=1e-7)  # the reference returns float32
        phases.add(int(cs.phase))
        s = step(s, jnp.asarray(a_ref, jnp.float64))
        if bool(s.done):
            break
    assert bool(s.info["succeed"]) and set(range(7)) <= phases  # HOVER .. OPEN all exercised


def test_reach_close_matches_reference(rng):
    ref = pytest.importorskip("lerobot_env_so101.scripted.reach_close")
    for _ in range(200):
        obs = np.r_[rng.uniform(-1, 1, 10), rng.uniform(-1, 1), rng.uniform(0.1, 0.4, 3), rng.uniform(0.1, 0.4, 3)]
        if rng.uniform() < 0.3:  # near the goal: the close branch
            obs[11:14] = obs[14:17] + [0, 0, 0.03] + rng.uniform(-0.004, 0.004, 3)
        o = jnp.asarray(obs)
        np.testing.assert_allclose(scripted.reach_close(o[11:14], o[14:17], 0.025),
                                   ref.scripted_reach_close(obs, 0.025), atol=1e-6)
        assert bool(scripted.is_reach_close_success(o[11:14], o[14:17], o[10:11])) == ref.is_reach_close_success(obs)


def test_reach_close_success_is_judged_per_world():
    """A batch (B, ...) gives B verdicts, each the single world's (the distance is per world, not over the batch)."""
    ee = jnp.asarray([[0.3, 0.0, 0.05], [0.3, 0.0, 0.05], [0.3, 0.0, 0.2]])
    block = jnp.asarray([[0.3, 0.0, 0.02]] * 3)
    grip = jnp.asarray([[-1.0], [1.0], [-1.0]])
    batched = np.asarray(scripted.is_reach_close_success(ee, block, grip))
    assert batched.tolist() == [True, False, False]
    assert [bool(scripted.is_reach_close_success(e, b, g)) for e, b, g in zip(ee, block, grip)] == batched.tolist()


@pytest.mark.parametrize("name, expected", [("SO101PickPlace-v0", 1.0), ("SO101Reach-v0", 0.9)])
@pytest.mark.slow
def test_batched_scripted_success(name, expected):
    """A small batched closed-loop check (the 256-seed figures are in docs/tasks.md)."""
    config = {"action_scale": 0.025, "random_block_position": True} if "Pick" in name else {}
    out = run_episodes(make(name, "c", **config), "scripted", jax.random.PRNGKey(0), 8)
    assert float(np.mean(out["success"])) >= expected


@pytest.mark.slow
def test_stop_when_done_gives_the_same_outcomes():
    """Chunked episodes that stop once all have ended report exactly what the full scan reports."""
    env = make("SO101PickPlace-v0", "c", action_scale=0.025, random_block_position=True)
    full = run_episodes(env, "scripted", jax.random.PRNGKey(1), 8, 160)
    early = run_episodes(env, "scripted", jax.random.PRNGKey(1), 8, 160, stop_when_done=True)
    assert bool(np.all(full["success"]))  # all end early, so the early path really stops early
    for k in full:
        np.testing.assert_array_equal(np.asarray(early[k]), np.asarray(full[k]), err_msg=k)


@pytest.mark.slow
def test_pick_cube_demonstrator_lifts_where_the_reference_controller_only_closes():
    """PickCube's reference controller closes on the block; its demonstrator (pick and lift) succeeds."""
    env = make("SO101PickCube-v0", "c", top_down_ik=True, jaw_pads=True, random_block_position=True, action_scale=0.04)
    keys = jax.random.PRNGKey(3)
    lifted = run_episodes(env, "demonstrator", keys, 8, stop_when_done=True)
    closed = run_episodes(env, "scripted", keys, 8, stop_when_done=True)
    assert float(np.mean(lifted["success"])) >= 0.5 and not np.any(closed["success"])


def test_a_rollout_of_the_demonstrator_runs_in_the_config_it_needs():
    """``rollout --policy demonstrator`` sets the task's ``demonstrator_config`` (PickCube's top-down IK), under
    which it lifts; the other policies keep the reference's IK."""
    assert rollout.task_config("SO101PickCube-v0", 0.025, True, "demonstrator")["top_down_ik"] is True
    assert "top_down_ik" not in rollout.task_config("SO101PickCube-v0", 0.025, True, "scripted")
    out = rollout.rollout("SO101PickCube-v0", num_envs=16, policy="demonstrator", backend="c")
    assert float(np.mean(out["success"])) >= 0.5


@pytest.mark.parametrize("name", ["SO101PickPlace-v0", "SO101StackCube-v0", "SO101PushCube-v0", "SO101Reach-v0"])
def test_demonstrator_is_the_scripted_controller_where_that_aims_at_success(name):
    """Where the scripted controller aims at success, the demonstrator is it: the same first action from a random
    reset."""
    env = make(name, "c", random_block_position=True) if name != "SO101Reach-v0" else make(name, "c")
    s = env.reset(jax.random.PRNGKey(4))
    (init, act), (demo_init, demo_act) = env.scripted_controller(), env.demonstrator()
    np.testing.assert_array_equal(np.asarray(act(init(s), s)[1]), np.asarray(demo_act(demo_init(s), s)[1]))


def test_paced_controller_acts_every_ticks_steps_and_spreads_its_motion():
    """scripted.paced: the controller acts at steps 0, 3, 6, ...; each step moves a third of its delta,
    the jaw command held."""
    def act(cs, state):
        return cs + 1, jnp.asarray([3.0, -6.0, 0.0, 0.0]) * (cs + 1)

    init, paced_act = scripted.paced(lambda state: jnp.zeros(()), act, 3)
    cs, actions = init(None), []
    for _ in range(7):
        cs, action = paced_act(cs, None)
        actions.append(np.asarray(action))
    np.testing.assert_allclose(np.stack(actions)[:, :2], [[1, -2]] * 3 + [[2, -4]] * 3 + [[3, -6]])
    assert int(cs.inner) == 3  # the controller's state advanced three times in seven steps


@pytest.mark.slow
def test_scripted_controllers_keep_their_timing_at_30_hz():
    """At a 30 Hz control rate the reference's 10 Hz PickPlace controller (paced) still places the block."""
    env = make("SO101PickPlace-v0", "c", control_dt=1 / 30, physics_dt=1 / 480, top_down_ik=True, jaw_pads=True,
               action_scale=0.025, episode_length=260)
    out = run_episodes(env, "scripted", jax.random.PRNGKey(0), 4, stop_when_done=True)
    assert bool(np.all(out["success"])), out["length"]


def test_only_pick_cube_judges_its_scripted_controller_by_its_own_criterion():
    """PickCube's reach-and-close does not lift: the task reports what it does achieve (a task hook,
    not a name check in the rollout); other tasks and joint mode report nothing extra."""
    import numpy as np

    from so101_mjx.envs import make, names

    cube = make("SO101PickCube-v0", "c")
    obs = np.zeros((3, cube.obs_size()))
    description, closed = cube.scripted_criterion(obs)
    assert "reach-and-close" in description and closed.shape == (3,)
    assert make("SO101PickCube-v0", "c", control_mode="joint").scripted_criterion(np.zeros((1, 40))) is None
    for name in names():
        if name != "SO101PickCube-v0":
            env = make(name, "c")
            assert env.scripted_criterion(np.zeros((1, env.obs_size()))) is None
