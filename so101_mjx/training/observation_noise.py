"""Training-time observation noise: a state policy that tolerates an imperfect estimate of what it observes.

A student that estimates the block's position from camera frames (``distill --student estimator``) hands its
teacher a position that errs by about a centimetre, mostly as a bias that lasts the episode. A teacher trained on
the exact position loses most episodes to such a bias (docs/pixels.md). :class:`ObservationNoise` trains the
teacher on what the student will give it: each named entry of the flat observation is observed off by a bias drawn
at every reset and held for the episode, plus fresh noise at every step (Gaussian, per component, standard
deviations in the entry's units: metres for ``block_pos``).

Training only (``Preset.observation_noise``, ``so101-mjx train --observation-noise``): the training and the
evaluation envs of the run observe the noise; export, ``eval`` and replay observe the exact entries. The physics,
rewards and success are those of the exact state. The bias and the noise key ride in the state's task entries
(:data:`BIAS`, :data:`KEY`), so they survive the auto-reset and demonstration starts of
:class:`~so101_mjx.envs.wrappers.TrainingEnv`; a demonstration start takes its own reset's draws
(:attr:`ObservationNoise.episode_entries`), so no two episodes share a bias or a noise sequence.
"""

from __future__ import annotations

from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from so101_mjx.errors import InputError
from so101_mjx.sim.state import State
from so101_mjx.training.preset import parse_observation_noise

BIAS, KEY = "observation_bias", "observation_noise_key"  # task entries: (obs_size,) bias, (2,) uint32 key


class ObservationNoise:
    """``env`` (one world, flat observations) observing the entries of ``noise`` off by a per-episode bias and per-step
    noise; every other attribute is ``env``'s."""

    # task entries drawn afresh for every episode: a demonstration start keeps its reset's, not the bank state's
    # (whose scripted episode's draws other bank states share), from the first step on
    episode_entries = (BIAS, KEY)

    def __init__(self, env, noise: dict[str, Any]):
        noise = parse_observation_noise(noise)
        if env.config.image_obs:
            raise InputError("observation_noise applies to flat (state) observations; the env has image_obs=True")
        slices = env.observation_slices()
        unknown = sorted(set(noise) - set(slices))
        if unknown:
            raise InputError(f"observation_noise: unknown observation entries {unknown}; {env.name} has {list(slices)}")
        self.env = env
        self._bias_sigma, self._step_sigma = np.zeros(env.obs_size()), np.zeros(env.obs_size())
        for name, (bias, step) in noise.items():
            self._bias_sigma[slices[name]], self._step_sigma[slices[name]] = bias, step

    def __getattr__(self, name: str) -> Any:
        if name == "env":  # not set yet (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.env, name)

    def reset(self, rng: Array) -> State:
        rng, bias_key, step_key = jax.random.split(rng, 3)
        state = self.env.reset(rng)
        obs = cast(Array, state.obs)  # flat: image_obs is refused
        bias = jnp.asarray(self._bias_sigma, obs.dtype) * jax.random.normal(bias_key, obs.shape, obs.dtype)
        return self._observed(state.replace(info=state.info.replace(task={**state.info.task, BIAS: bias,
                                                                           KEY: step_key})))

    def step(self, state: State, action: Array) -> State:
        return self._observed(self.env.step(state, action))

    def _observed(self, state: State) -> State:
        """``state`` with its observation moved by the episode's bias and a fresh draw of noise (task entries)."""
        task, obs = state.info.task, cast(Array, state.obs)
        key, draw = jax.random.split(task[KEY])
        noise = jnp.asarray(self._step_sigma, obs.dtype) * jax.random.normal(draw, obs.shape, obs.dtype)
        return state.replace(obs=obs + task[BIAS] + noise, info=state.info.replace(task={**task, KEY: key}))
