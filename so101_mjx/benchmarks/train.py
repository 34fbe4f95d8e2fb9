"""``so101-mjx bench train``: the PPO loop's env-steps/s against the raw env rate, in one run.

Three rates at the preset's ``num_envs`` worlds and env config, all after their first jit:

- raw env: jitted ``vmap(env.step)`` with random actions (what ``bench env`` measures);
- collection: Brax's ``acting.generate_unroll`` of ``unroll_length`` steps with the preset's policy
  network through the training wrappers (auto-reset, action map), jitted: the acting half of PPO;
- PPO: the training loop's own ``training/sps`` (collection + GAE + SGD of one epoch, evals and
  checkpoints excluded), the median of ``--epochs`` epochs after a first, compiling one.

The ratio PPO / raw env is the loop's efficiency; collection / raw env isolates the wrappers and
the policy, so the SGD share is what remains.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
import time
from collections.abc import Callable
from typing import cast

import jax
import jax.numpy as jnp
from brax.training import acting
from brax.training.acme import running_statistics, specs
from brax.training.agents.ppo import networks as ppo_networks

from so101_mjx import _progress
from so101_mjx.benchmarks import median_time, print_table
from so101_mjx.benchmarks.env import env_rate
from so101_mjx.training import brax_env, networks, ppo_loop, presets
from so101_mjx.training.ppo import demo_starts


def collection_rate(train_env, preset: presets.Preset, repeats: int) -> float:
    """Env-steps/s of one jitted ``generate_unroll`` (the preset's policy, fresh params)."""
    state = jax.jit(train_env.reset)(jax.random.split(jax.random.PRNGKey(0), preset.num_envs))
    obs_size = state.obs.shape[-1]
    net = networks.network_factory(**preset.network())((obs_size,), train_env.action_size,
                                                       preprocess_observations_fn=running_statistics.normalize)
    params = (running_statistics.init_state(specs.Array((obs_size,), jnp.float32)),
              net.policy_network.init(jax.random.PRNGKey(0)), net.value_network.init(jax.random.PRNGKey(1)))
    policy = ppo_networks.make_inference_fn(net)(params)
    unroll = jax.jit(lambda s, key: acting.generate_unroll(train_env, s, policy, key, preset.unroll_length,
                                                           extra_fields=ppo_loop.EXTRA_FIELDS)[0].obs)
    return (preset.num_envs * preset.unroll_length
            / median_time(lambda: unroll(state, jax.random.PRNGKey(2)), repeats, 0.0))


def ppo_rates(env, preset: presets.Preset, epochs: int, updates: int, wrap) -> tuple[list[float], float]:
    """The loop's ``training/sps`` of each epoch after the first, and the first epoch's seconds (compile included)."""
    per_update = preset.batch_size * preset.num_minibatches * preset.unroll_length
    timed = dataclasses.replace(preset, num_timesteps=(epochs + 1) * updates * per_update, num_evals=epochs + 2,
                                num_eval_envs=1)
    rates, marks = [], [time.perf_counter()]

    def progress(step: int, metrics: dict) -> None:
        if "training/sps" in metrics:
            rates.append(float(metrics["training/sps"]))
            marks.append(time.perf_counter())

    ppo_loop.train(env, wrap_env_fn=wrap, episode_length=env.episode_length,
                   network_factory=networks.network_factory(**preset.network()),
               progress_fn=progress, use_pmap_on_reset=False, **timed.loop_kwargs())
    return rates[1:], marks[1] - marks[0]


def bench(env_name: str, preset_name: str, backend: str | None, epochs: int, updates_per_epoch: int,
          repeats: int) -> None:
    """Print the PPO loop's env-steps/s of ``env_name``'s preset ``preset_name`` on ``backend`` (None: the default)
    over ``epochs`` epochs of ``updates_per_epoch`` updates, against the raw env and collection rates (medians of
    ``repeats`` timed runs)."""
    preset = cast(presets.Preset, presets.preset(env_name, preset_name, "ppo"))  # the PPO loop's rates: a Preset
    env = brax_env.make_env(env_name, preset.env_overrides(), backend)
    wrap: Callable[..., brax_env.BraxAdapter] = functools.partial(
        brax_env.wrap_env_fn, success_bonus=preset.success_bonus, **demo_starts(env, preset, 0))
    _progress.phase(f"bench train: {env_name} raw env")
    raw, _ = env_rate(env, preset.num_envs, preset.unroll_length, repeats)
    _progress.phase("bench train: collection")
    collect = collection_rate(wrap(env, episode_length=env.episode_length), preset, repeats)
    _progress.phase(f"bench train: PPO, {epochs} epochs of {updates_per_epoch} updates")
    rates, first_s = ppo_rates(env, preset, epochs, updates_per_epoch, wrap)
    ppo = statistics.median(rates)
    steps_per_epoch = updates_per_epoch * preset.batch_size * preset.num_minibatches * preset.unroll_length
    print(f"{env_name} preset {preset_name}, backend {env.backend}, {preset.num_envs} worlds, "
          f"JAX {jax.default_backend()}; PPO: {epochs} epochs of {updates_per_epoch} updates "
          f"({steps_per_epoch:,} env steps each), "
          f"first epoch (compile) {first_s:.1f} s; PPO per epoch {', '.join(f'{r:.0f}' for r in rates)} env-steps/s")
    print_table(
        ["raw env env-steps/s", "collection env-steps/s", "PPO env-steps/s", "collection / raw", "PPO / raw"],
        [[raw, collect, ppo, collect / raw, ppo / raw]],
    )
