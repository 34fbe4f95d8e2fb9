"""Reward terms: the reference's rewards unchanged by default, staged dense rewards climb in order."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.envs import make, scripted
from so101_mjx.envs.tasks.pick_place import STAGED_WEIGHTS


def _scripted_episode(env, seed: int, steps: int = 300):
    init, act = scripted.controller_for(env)
    step, act = jax.jit(env.step), jax.jit(act)
    s = env.reset(jax.random.PRNGKey(seed))
    cs, out = init(s), []
    for _ in range(steps):
        cs, a = act(cs, s)
        s = step(s, a)
        out.append(s)
        if bool(s.done):
            break
    return out


def test_pick_place_sparse_is_the_default_and_the_reference():
    env = make("SO101PickPlace-v0", "c", action_scale=0.025)
    assert env.config.reward_type == "sparse" and env.reward_scales == {"success": 1.0}
    states = _scripted_episode(env, 0)
    rewards = np.asarray([float(s.reward) for s in states])
    np.testing.assert_array_equal(rewards, [float(s.info.succeed) for s in states])
    assert rewards[-1] == 1.0 and rewards[:-1].sum() == 0.0


def test_pick_place_staged_reward_climbs_its_stages_in_order():
    env = make("SO101PickPlace-v0", "c", action_scale=0.025, reward_type="dense", random_block_position=True)
    states = _scripted_episode(env, 5)
    assert bool(states[-1].info.succeed)
    terms = {k: np.asarray([float(s.metrics[f"reward/{k}"]) / STAGED_WEIGHTS[k] for s in states])
             for k in STAGED_WEIGHTS}
    first = {k: int(np.argmax(v > 0.5)) if (v > 0.5).any() else None for k, v in terms.items()}
    assert None not in first.values(), first
    order = ["reach", "grasp", "lift", "carry", "place", "release", "success"]
    assert [first[k] for k in order] == sorted(first[k] for k in order), first
    assert all(((v >= -1e-6) & (v <= 1 + 1e-6)).all() for v in terms.values())  # float32 metrics / weight
    total = np.asarray([float(s.reward) for s in states])
    np.testing.assert_allclose(total, sum(terms[k] * w for k, w in STAGED_WEIGHTS.items()), rtol=1e-6)


def test_pick_place_has_no_grasp_reward_and_loads_saved_configs_that_hold_it_at_zero():
    """PickPlace's dense reward has a grasp stage of its own: its config has no ``grasp_reward``; a saved config
    holding PickCube's default (0.0) still loads, any other value is refused naming the field."""
    env = make("SO101PickPlace-v0", "c", reward_type="dense", grasp_reward=0.0)
    assert env.config == make("SO101PickPlace-v0", "c", reward_type="dense").config
    assert "grasp_reward" not in {f.name for f in dataclasses.fields(env.config)}
    with pytest.raises(ValueError, match=r"grasp_reward is not a field of SO101PickPlace-v0's config \(it could "
                                         r"only be 0.0\), got 0.25"):
        make("SO101PickPlace-v0", "c", reward_type="dense", grasp_reward=0.25)


def test_pick_cube_dense_reward_is_the_reference_formula():
    env = make("SO101PickCube-v0", "c", reward_type="dense", action_scale=0.025)
    s = env.reset(jax.random.PRNGKey(0))
    n = jax.jit(env.step)(s, jnp.asarray([0.5, 0.2, -0.4, 1.0]))
    block, ee = np.asarray(env.block_pos(n.physics)), np.asarray(env.arm.ee_pos(n.physics))
    lift = np.clip((block[2] - float(n.info.task["z_init"])) / 0.1, 0, 1)
    assert float(n.reward) == pytest.approx(0.3 * np.exp(-20 * np.linalg.norm(block - ee)) + 0.7 * lift, abs=1e-12)
