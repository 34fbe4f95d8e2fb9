"""Functional envs: construction errors, reference semantics, sanitization, determinism."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.envs import make, names

REF_KW = dict(action_scale=0.025)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(name="SO101Nope-v0"), "unknown env"),
        (dict(backend="gpu"), "backend must be one of"),
        (dict(action_scale=0.0), "action_scale must be positive"),
        (dict(reward_type="shaped"), "reward_type must be one of"),
        (dict(reward_type="dense", grasp_reward=-1.0), "grasp_reward must be >= 0"),
        (dict(grasp_reward=0.25), "grasp_reward adds to the dense reward"),
        (dict(physics_dt=0.2), r"physics_dt \(0.2\) must not exceed control_dt"),
        (dict(image_obs=True, image_size=0), "image_size must be"),
        (dict(actionscale=1.0), r"unknown config field\(s\) \['actionscale'\]"),
    ],
)
def test_make_rejects_invalid_config(kwargs, field):
    name = kwargs.pop("name", "SO101PickCube-v0")
    with pytest.raises(ValueError, match=field):
        make(name, **kwargs)


def test_registry_names():
    assert {"SO101PickCube-v0", "SO101PickPlace-v0", "SO101Reach-v0"} <= set(names()) and names() == sorted(names())
    assert make("so101_mjx/SO101Reach-v0", backend="c").observation_size == 20


def _ref_env(name, **kw):
    """The reference env with noslip off: our scenes have none (MJX lacks it)."""
    import lerobot_env_so101 as ref

    cls = {"SO101PickCube-v0": ref.SO101PickCubeGymEnv, "SO101PickPlace-v0": ref.SO101PickPlaceGymEnv}[name]
    env = cls(**kw)
    env.model.opt.noslip_iterations = 0
    return env


def _actions(rng, n):
    fixed = [[0, 0, 1, 1], [0.5, 0.3, 0.5, 1], [0, 0, 0, 1], [0, 0, 0, 0.5], [-0.5, 0.2, 0.4, 0.5],
             [2.0, -3.0, 0.1, 1.5]]
    return np.array(fixed + [np.r_[rng.uniform(-1, 1, 3), rng.uniform(0, 1)] for _ in range(n - len(fixed))])


@pytest.mark.parametrize(
    "name, kw",
    [
        ("SO101PickCube-v0", dict(top_down_ik=False, jaw_pads=False)),
        ("SO101PickCube-v0", dict(top_down_ik=True, jaw_pads=True, reward_type="dense")),
        ("SO101PickPlace-v0", dict()),
    ],
)
def test_first_steps_match_reference(name, kw, rng):
    """Backend c, float64, same initial state and actions: ≤ 1e-9 before any contact of the arm."""
    ref = _ref_env(name, **REF_KW, **kw)
    ref_obs, _ = ref.reset(seed=0)
    env = make(name, backend="c", **REF_KW, **kw)
    block_xy = jnp.asarray(ref.data.jnt("block").qpos[:2])
    state = env.reset_to(jax.random.PRNGKey(0), block_xy=block_xy)
    assert state.obs.dtype == jnp.float64
    flat = lambda o: np.concatenate([o["agent_pos"], o["environment_state"]])  # noqa: E731
    np.testing.assert_allclose(state.obs, flat(ref_obs), atol=1e-7)  # reference obs are float32
    step = jax.jit(env.step)
    for a in _actions(rng, 15):
        state = step(state, jnp.asarray(a))
        obs, reward, terminated, _, info = ref.step(a)
        d = ref.data
        np.testing.assert_allclose(state.info["ik_target"], ref._target_ee_pos, rtol=0, atol=1e-9)
        np.testing.assert_allclose(state.physics.ctrl, d.ctrl, rtol=0, atol=1e-9)
        np.testing.assert_allclose(state.physics.qpos, d.qpos, rtol=0, atol=1e-9)
        np.testing.assert_allclose(state.physics.qvel, d.qvel, rtol=0, atol=1e-9)
        np.testing.assert_allclose(state.obs.astype(np.float32), flat(obs), rtol=2e-7, atol=1e-9)
        assert float(state.reward) == pytest.approx(reward, abs=1e-9)
        assert bool(state.info["succeed"]) == info["succeed"] and bool(state.done) == terminated


def test_reference_noslip_changes_contact_free_motion(rng):
    """Documented difference: the reference's noslip_iterations=5 also acts on joint frictionloss."""
    import lerobot_env_so101 as ref

    with_noslip = ref.SO101PickCubeGymEnv(**REF_KW)
    with_noslip.reset(seed=0)
    env = make("SO101PickCube-v0", backend="c", **REF_KW)
    state = env.reset_to(jax.random.PRNGKey(0), block_xy=jnp.asarray([0.3, 0.0]))
    a = np.array([0.0, 0.0, 1.0, 1.0])
    state = env.step(state, jnp.asarray(a))
    with_noslip.step(a)
    dev = np.abs(np.asarray(state.physics.qpos) - with_noslip.data.qpos).max()
    print(f"one control step, reference noslip on vs ours: max |dqpos| = {dev:.3g}")
    assert 1e-9 < dev < 1e-3


@pytest.mark.parametrize("name", names())
def test_nonfinite_actions_are_sanitized_and_counted(name):
    env = make(name, backend="c", action_scale=0.025)
    step = jax.jit(env.step)
    state = env.reset(jax.random.PRNGKey(1))
    bad = [[np.nan, 0, 0, 1], [np.inf, -np.inf, 0, np.nan], [0.2, 0.1, -0.3, 0.5], [np.nan] * 4]
    for a in bad:
        before = state
        state = step(state, jnp.asarray(a))
        assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(state)
                   if jnp.issubdtype(x.dtype, jnp.floating))
        if np.isnan(a[3]):
            assert float(state.physics.ctrl[5]) == float(before.physics.ctrl[5])
    assert int(state.info["nonfinite_actions"]) == 3
    assert float(state.metrics["nonfinite_actions"]) == 3.0
    with pytest.raises(ValueError, match=r"action must have shape \(4,\)"):
        env.step(state, jnp.zeros(3))


def test_same_rng_bitwise_identical_trajectories():
    env = make("SO101PickCube-v0", backend="c", random_block_position=True, action_scale=0.025)
    reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))

    def rollout(seed):
        keys = jax.random.split(jax.random.PRNGKey(seed), 8)
        s = reset(keys)
        out = [s.obs]
        for k in range(5):
            s = step(s, jax.random.uniform(jax.random.PRNGKey(100 + k), (8, 4), minval=-1, maxval=1))
            out.append(s.obs)
        return np.stack(out)

    a, b, c = rollout(3), rollout(3), rollout(4)
    np.testing.assert_array_equal(a, b)
    assert np.abs(a - c).max() > 1e-3


@pytest.mark.slow
def test_batched_equals_single(rng):
    """vmapped worlds equal single worlds to round-off (XLA may vectorize reductions differently)."""
    env = make("SO101PickPlace-v0", backend="c", random_block_position=True, action_scale=0.025)
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    acts = jnp.asarray(rng.uniform(-1, 1, (4, 4)))
    batched = jax.jit(jax.vmap(env.step))(jax.jit(jax.vmap(env.reset))(keys), acts)
    reset, step = jax.jit(env.reset), jax.jit(env.step)  # compiled once for the four worlds
    for i in range(4):
        single = step(reset(keys[i]), acts[i])
        np.testing.assert_allclose(batched.obs[i], single.obs, rtol=0, atol=1e-12)


def test_random_resets_respect_distributions():
    env = make("SO101PickPlace-v0", backend="c", random_block_position=True)
    s = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), 256))
    block, goal = np.asarray(s.obs[:, 14:17]), np.asarray(s.info["goal"])
    assert (block[:, :2] >= [0.15, -0.1]).all() and (block[:, :2] <= [0.3, 0.1]).all()
    assert (np.linalg.norm(block[:, :2] - goal[:, :2], axis=1) >= 0.08).all()
    np.testing.assert_allclose(block[:, 2], 0.02, atol=1e-6)


@pytest.mark.slow
def test_grasp_proxy_and_reward_follow_the_scripted_grasp():
    """``grasped`` holds while the closed jaws hold the block (and not before); grasp_reward adds to dense."""
    from so101_mjx.envs import scripted

    kw = dict(top_down_ik=True, jaw_pads=True, reward_type="dense", action_scale=0.04)
    env, shaped = make("SO101PickCube-v0", "c", **kw), make("SO101PickCube-v0", "c", grasp_reward=0.25, **kw)
    s = env.reset(jax.random.PRNGKey(3))
    cs = scripted.pick_place_init(env.block_pos(s.physics))
    step, shaped_step, grasped = jax.jit(env.step), jax.jit(shaped.step), []
    for _ in range(30):  # hover, descend, close, lift (goal = the block: the carry would stay put)
        cs, a = scripted.pick_place_act(cs, env.arm.ik_point(s.physics), env.block_pos(s.physics),
                                        env.block_pos(s.physics), 0.04)
        nxt = step(s, a)
        grasped.append(bool(env.grasped(nxt.physics)))
        with_grasp = shaped_step(s, a)
        assert float(with_grasp.reward - nxt.reward) == pytest.approx(0.25 * grasped[-1], abs=1e-12)
        assert float(with_grasp.metrics["reward/grasp"]) == pytest.approx(0.25 * grasped[-1], abs=1e-7)
        s = nxt
    assert not any(grasped[:10]) and all(grasped[-8:]), grasped
    assert float(env.block_pos(s.physics)[2] - s.info["z_init"]) > 0.05  # lifted while held


@pytest.mark.slow
def test_analytic_ik_option_reaches_its_targets_and_places():
    from so101_mjx.envs.rollout import run_episodes
    from so101_mjx.robot.scenes import EE_SITE

    with pytest.raises(ValueError, match="'analytic' needs top_down_ik=True"):
        make("SO101PickCube-v0", "c", ik_solver="analytic")
    with pytest.raises(ValueError, match="ik_solver must be one of"):
        make("SO101PickPlace-v0", "c", ik_solver="newton")
    env = make("SO101PickPlace-v0", "c", action_scale=0.025, random_block_position=True, ik_solver="analytic")
    s = env.reset(jax.random.PRNGKey(0))
    target = jnp.asarray([0.25, 0.05, 0.08])  # over the table, reachable straight down
    q = jax.jit(env.arm.solve_ik)(s.physics, target)
    np.testing.assert_allclose(env.arm.kin.point(q, EE_SITE, env.arm.ik_offset), target, atol=1e-9)
    far = jax.jit(env.arm.solve_ik)(s.physics, jnp.asarray([0.9, 0.0, 0.1]))  # out of reach: hold
    np.testing.assert_array_equal(far, s.physics.ctrl[env.arm.actuator_ids])
    out = run_episodes(env, "scripted", jax.random.PRNGKey(1), 16, 300, stop_when_done=True)
    assert float(np.mean(out["success"])) == 1.0
