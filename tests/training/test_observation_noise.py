"""Training-time observation noise (so101_mjx.training.observation_noise, Preset.observation_noise)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.envs import make
from so101_mjx.envs.wrappers import TrainingEnv
from so101_mjx.errors import InputError
from so101_mjx.training import presets
from so101_mjx.training.observation_noise import BIAS, KEY, ObservationNoise
from so101_mjx.training.preset import parse_observation_noise

WORLDS, LENGTH = 8, 4


@pytest.fixture(scope="module")
def env():
    return make("SO101PickCube-v0", backend="c", episode_length=LENGTH)


def offsets(env, noise: dict, steps: int = 3) -> np.ndarray:
    """(steps + 1, WORLDS, obs_size): observed minus exact observation after the reset and each step (zero actions;
    the episodes end after LENGTH steps and restart)."""
    batched = TrainingEnv(ObservationNoise(env, noise), LENGTH)
    state = jax.jit(batched.reset)(jax.random.split(jax.random.PRNGKey(3), WORLDS))
    step = jax.jit(batched.step)
    out = []
    for i in range(steps + 1):
        if i:
            state = step(state, jnp.zeros((WORLDS, env.action_size)))
        out.append(np.asarray(state.obs - jax.vmap(env.observation)(state.physics, state.info)))
    return np.stack(out)


def test_a_bias_moves_only_its_entry_and_lasts_the_episode(env):
    at = env.observation_slices()["block_pos"]
    moved = offsets(env, {"block_pos": (0.01, 0.0)})
    assert np.all(moved[..., :at.start] == 0) and np.all(moved[..., at.stop:] == 0)
    assert 0.003 < np.std(moved[0, :, at]) < 0.03  # sigma 1 cm, 24 draws
    np.testing.assert_allclose(moved[1:], moved[:1].repeat(3, axis=0), atol=1e-6)  # the same within an episode
    assert np.all(np.any(moved[0, :, at] != moved[0, :1, at], axis=-1)[1:])  # another draw in every world


def test_the_bias_is_drawn_again_after_an_auto_reset(env):
    moved = offsets(env, {"block_pos": (0.01, 0.0)}, steps=LENGTH + 1)
    at = env.observation_slices()["block_pos"]
    assert np.all(np.abs(moved[LENGTH, :, at] - moved[0, :, at]) > 0)  # step LENGTH restarts every world


def test_demonstration_starts_draw_their_own_bias_and_noise(env):
    """Bank states of one episode share its draws; a start from them takes its own reset's."""
    noisy = ObservationNoise(env, {"block_pos": (0.01, 0.01)})
    first = noisy.reset(jax.random.PRNGKey(0))
    bank = jax.tree.map(lambda *x: jnp.stack(x), first, noisy.step(first, jnp.zeros(env.action_size)))
    assert np.array_equal(bank.info.task[BIAS][0], bank.info.task[BIAS][1])  # one episode's bias
    keys = jax.random.split(jax.random.PRNGKey(5), WORLDS)
    state = jax.jit(TrainingEnv(noisy, LENGTH, starts=bank, start_prob=1.0).reset)(keys)
    fresh = jax.vmap(noisy.reset)(keys)
    assert all(np.any(np.all(np.asarray(bank.physics.qpos) == q, axis=-1)) for q in np.asarray(state.physics.qpos))
    np.testing.assert_array_equal(state.info.task[KEY], fresh.info.task[KEY])
    np.testing.assert_allclose(state.info.task[BIAS], fresh.info.task[BIAS], rtol=1e-12, atol=1e-15)  # jit round-off
    assert len({tuple(b) for b in np.asarray(state.info.task[BIAS])}) == WORLDS


def test_step_noise_is_fresh_at_every_step(env):
    at = env.observation_slices()["block_pos"]
    moved = offsets(env, {"block_pos": (0.0, 0.01)})
    assert np.all(np.abs(np.diff(moved[..., at], axis=0)) > 0)


def test_zero_sigmas_observe_the_exact_state(env):
    assert np.all(offsets(env, {"block_pos": (0.0, 0.0)}) == 0)


@pytest.mark.parametrize("noise, words", [
    ({"block": (0.01, 0.0)}, "unknown observation entries ['block']"),
    ({"block_pos": (0.01,)}, "observation_noise['block_pos'] must be (bias sigma, step sigma)"),
    ({"block_pos": (-0.01, 0.0)}, "two numbers in [0, 1.0]"),
    ({"block_pos": (float("nan"), 0.0)}, "two numbers in [0, 1.0]"),
    ([0.01, 0.0], "observation_noise must map observation entries"),
])
def test_bad_noise_is_refused_naming_the_entry(env, noise, words):
    with pytest.raises(InputError) as err:
        ObservationNoise(env, noise)
    assert words in str(err.value)


def test_a_preset_checks_its_noise_and_keeps_it_json_ready():
    preset = presets.PRESETS["SO101PickCube-v0"]["tiny"]
    noisy = dataclasses.replace(preset, observation_noise={"block_pos": [0.005, 0.003]})
    assert noisy.observation_noise == {"block_pos": (0.005, 0.003)} == parse_observation_noise(noisy.asdict()[
        "observation_noise"])
    with pytest.raises(InputError, match="observation_noise"):
        dataclasses.replace(preset, observation_noise={"block_pos": [2.0, 0.0]})


def test_image_observations_are_refused():
    with pytest.raises(InputError, match="flat"):
        ObservationNoise(make("SO101PickCube-v0", backend="c", image_obs=True, image_size=8), {"block_pos": (0.01, 0)})
