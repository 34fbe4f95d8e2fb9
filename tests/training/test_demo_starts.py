"""Demonstration-seeded starts (so101_mjx.training.demo_starts, TrainingEnv's starts/start_prob)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.envs import make
from so101_mjx.envs.wrappers import TrainingEnv
from so101_mjx.training import ppo, presets as tconfig
from so101_mjx.training.demo_starts import scripted_bank
from so101_mjx.training.presets.pick_place import PLACE_TRAIN_CONFIG

EPISODE = 100


@pytest.fixture(scope="module")
def env():
    return make("SO101PickPlace-v0", backend="c", **{**PLACE_TRAIN_CONFIG, "episode_length": EPISODE})


@pytest.fixture(scope="module")
def bank(env):
    return scripted_bank(env, jax.random.PRNGKey(0), episodes=8)


def nearest(obs, bank) -> np.ndarray:
    """Per obs row, the max-abs distance to the nearest bank observation."""
    return np.abs(np.asarray(obs)[:, None] - np.asarray(bank.obs)[None]).max(-1).min(-1)


@pytest.mark.slow
def test_bank_holds_non_terminal_states_of_successful_scripted_episodes(env, bank):
    n = bank.obs.shape[0]
    assert 8 * 20 < n <= 8 * EPISODE  # the controller places in ~50 steps: 8 successes, many states each
    assert not np.asarray(bank.info.succeed).any() and not np.asarray(bank.done).any()
    # the bank spans the whole task: states before the lift and states after it
    carried = np.asarray(bank.info.task["was_carried"])
    assert 0.2 < carried.mean() < 0.9
    stepped = jax.eval_shape(lambda keys: jax.vmap(env.step)(jax.vmap(env.reset)(keys), jnp.zeros((1, 4))),
                             jax.random.split(jax.random.PRNGKey(0), 1))  # traced only: its tree, not its values
    assert jax.tree.structure(bank) == jax.tree.structure(stepped)


@pytest.mark.slow
def test_bank_is_subsampled_to_max_states(env):
    small = scripted_bank(env, jax.random.PRNGKey(0), episodes=2, max_states=10)
    assert small.obs.shape[0] == 10


@pytest.mark.slow
def test_start_prob_one_starts_every_world_from_the_bank(env, bank):
    train_env = TrainingEnv(env, EPISODE, starts=bank, start_prob=1.0)
    keys = jax.random.split(jax.random.PRNGKey(1), 16)
    state = jax.jit(train_env.reset)(keys)
    plain = jax.jit(TrainingEnv(env, EPISODE).reset)(keys)
    assert nearest(state.obs, bank).max() == 0.0
    # the episode's own counters and RNG are the fresh reset's
    np.testing.assert_array_equal(state.info.steps, 0)
    np.testing.assert_array_equal(state.info.truncation, 0)
    np.testing.assert_array_equal(state.info.rng, plain.info.rng)
    np.testing.assert_array_equal(state.info.nonfinite_actions, 0)
    # a bank state steps on as the env does (the grasped block keeps its reward terms)
    stepped = jax.jit(train_env.step)(state, jnp.zeros((16, 4)))
    assert np.isfinite(np.asarray(stepped.reward)).all() and float(jnp.mean(stepped.reward)) > 0.2


def test_start_prob_zero_is_the_plain_env(env, bank):
    keys = jax.random.split(jax.random.PRNGKey(2), 8)
    a = jax.jit(TrainingEnv(env, EPISODE, starts=bank, start_prob=0.0).reset)(keys)
    b = jax.jit(TrainingEnv(env, EPISODE).reset)(keys)
    jax.tree.map(np.testing.assert_array_equal, a, b)


def test_start_prob_is_the_fraction_of_seeded_resets(env, bank):
    state = jax.jit(TrainingEnv(env, EPISODE, starts=bank,
                                start_prob=0.25).reset)(jax.random.split(jax.random.PRNGKey(3), 400))
    seeded = nearest(state.obs, bank) == 0.0
    assert 0.17 < seeded.mean() < 0.33  # binomial(400, 0.25): ±4.5 sigma


@pytest.mark.slow
def test_auto_reset_draws_from_the_bank(env, bank):
    train_env = TrainingEnv(env, 2, starts=bank, start_prob=1.0)  # every episode ends after 2 steps
    state = jax.jit(train_env.reset)(jax.random.split(jax.random.PRNGKey(4), 8))
    step = jax.jit(train_env.step)
    for _ in range(2):
        state = step(state, jnp.zeros((8, 4)))
    np.testing.assert_array_equal(state.done, 1)
    assert nearest(state.obs, bank).max() == 0.0  # the next episode starts from the bank


@pytest.mark.parametrize("prob", [-0.1, 1.5, float("nan")])
def test_bad_start_prob_is_a_value_error(env, bank, prob):
    with pytest.raises(ValueError, match="start_prob"):
        TrainingEnv(env, EPISODE, starts=bank, start_prob=prob)
    with pytest.raises(ValueError, match="demo_start_prob"):
        dataclasses.replace(tconfig.preset("SO101PickPlace-v0", "tiny"), demo_start_prob=prob)


def test_start_prob_without_a_bank_is_a_value_error(env):
    with pytest.raises(ValueError, match="bank"):
        TrainingEnv(env, EPISODE, start_prob=0.5)


@pytest.mark.slow
def test_no_successful_demonstration_is_a_value_error():
    env = make("SO101PickPlace-v0", backend="c", **{**PLACE_TRAIN_CONFIG, "episode_length": 5})  # too short to place
    with pytest.raises(ValueError, match="solved none of 2 episodes"):
        scripted_bank(env, jax.random.PRNGKey(0), episodes=2)


@pytest.mark.slow  # a training run
def test_training_with_demo_starts_evaluates_from_the_normal_reset(tmp_path, monkeypatch):
    """A tiny run with demo starts: the bank reaches the training env, never the evaluator's."""
    from so101_mjx.training import ppo_loop as loop

    wrapped = {}
    real = loop.train

    def spy(environment, *, wrap_env_fn, wrap_eval_env_fn, **kwargs):
        wrapped["train"] = wrap_env_fn(environment, episode_length=EPISODE)
        wrapped["eval"] = wrap_eval_env_fn(environment, episode_length=EPISODE)
        return real(environment, wrap_env_fn=wrap_env_fn, wrap_eval_env_fn=wrap_eval_env_fn, **kwargs)

    monkeypatch.setattr(loop, "train", spy)
    preset = dataclasses.replace(
        tconfig.preset("SO101PickPlace-v0", "tiny"), episode_length=EPISODE, demo_start_prob=0.5, demo_start_episodes=4
    )
    jax.config.update("jax_enable_x64", False)  # training runs in float32, the library default
    try:
        last, metrics = ppo.train("SO101PickPlace-v0", "tiny", preset, tmp_path / "run", backend="c")
    finally:
        jax.config.update("jax_enable_x64", True)
    assert wrapped["train"].env.start_prob == 0.5 and wrapped["train"].env.starts.obs.shape[0] > 0
    assert wrapped["eval"].env.starts is None
    assert np.isfinite(metrics["eval/episode_reward"])
    assert last.is_dir()
