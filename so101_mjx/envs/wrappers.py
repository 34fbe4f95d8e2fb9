"""Batched training wrapper: vmap, episode length and truncation, auto-reset.

:class:`TrainingEnv` makes a single-world env a batched, Brax-compatible env (the interface
``brax.training.agents.ppo.train`` drives: ``reset(keys (B, 2))``, ``step(state, actions (B, 4))``,
``observation_size``, ``action_size``, ``info.steps``, ``info.truncation``). Unlike Brax's
AutoResetWrapper, which restarts every world from the state it was first reset to, a finished
world restarts from a *fresh* ``reset`` with a new key, so block and target positions keep being
sampled; the reset runs only on steps where some world finished.

Optionally (``starts``, ``start_prob``; see :mod:`so101_mjx.training.demo_starts`) a reset starts,
with probability ``start_prob``, from a state drawn from a bank of states instead.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import Array

from so101_mjx.envs.base import SO101Env
from so101_mjx.errors import InputError
from so101_mjx.sim.state import State


class TrainingEnv:
    """Batched env over ``env`` with ``episode_length`` control steps (``action_repeat`` per action)."""

    def __init__(self, env: SO101Env, episode_length: int | None = None, action_repeat: int = 1,
                 starts: State | None = None, start_prob: float = 0.0):
        self.env = env
        self.episode_length = int(episode_length or env.episode_length)
        self.action_repeat = int(action_repeat)
        if self.episode_length < 1 or self.action_repeat < 1:
            raise InputError(f"episode_length and action_repeat must be >= 1, got {self.episode_length}, "
                             f"{self.action_repeat}")
        if not 0.0 <= start_prob <= 1.0:
            raise InputError(f"start_prob must be in [0, 1], got {start_prob!r}")
        if start_prob > 0 and (starts is None or starts.done.shape[0] == 0):
            raise InputError("start_prob > 0 needs a non-empty bank of starts (states with one leading axis)")
        self.starts, self.start_prob = (starts, float(start_prob)) if start_prob > 0 else (None, 0.0)

    @property
    def observation_size(self) -> int | dict[str, tuple[int, ...]]:
        return self.env.observation_size

    @property
    def action_size(self) -> int:
        return self.env.action_size

    @property
    def backend(self) -> str:
        return self.env.backend

    @property
    def unwrapped(self) -> SO101Env:
        return self.env

    def reset(self, rng: Array) -> State:
        """``rng`` (B, 2) keys -> batched state with ``steps`` and ``truncation`` zeroed."""
        state = jax.vmap(self.env.reset)(rng)
        zeros = jnp.zeros_like(state.done)
        state = state.replace(info=state.info.replace(steps=jnp.zeros(zeros.shape, jnp.int32), truncation=zeros))
        return self._seeded(state, rng)

    def step(self, state: State, action: Array) -> State:
        """Step every world; finished worlds (terminated or at ``episode_length``) restart fresh.

        The returned state keeps the finishing step's reward, done and metrics; its physics, obs
        and task info are those of the new episode.
        """
        assert state.info.steps is not None  # set by reset
        steps = jnp.where(state.done > 0, 0, state.info.steps)
        state = state.replace(done=jnp.zeros_like(state.done))

        def one(s, _):
            n = jax.vmap(self.env.step)(s, action)
            return n, n.reward

        state, rewards = jax.lax.scan(one, state, None, length=self.action_repeat)
        steps = steps + self.action_repeat
        at_limit = steps >= self.episode_length
        truncation = jnp.where(at_limit, 1 - state.done, 0).astype(state.done.dtype)
        done = jnp.where(at_limit, 1, state.done).astype(state.done.dtype)
        state = state.replace(
            reward=jnp.sum(rewards, axis=0), done=done, info=state.info.replace(steps=steps, truncation=truncation)
        )
        return jax.lax.cond(jnp.any(done > 0), self._auto_reset, lambda s: s, state)

    def _auto_reset(self, state: State) -> State:
        keys = jax.vmap(jax.random.split)(state.info.rng)
        fresh = jax.vmap(self.env.reset)(keys[:, 0])
        # the wrapper's own entries (steps, truncation) belong to the finished episode's step
        fresh = self._seeded(
            fresh.replace(info=fresh.info.replace(steps=state.info.steps,
                                                  truncation=state.info.truncation)), keys[:, 0])
        done = state.done > 0
        state = select_worlds(done, fresh, state)
        return state.replace(info=state.info.replace(rng=jnp.where(done[:, None], fresh.info.rng, keys[:, 1])))

    def _seeded(self, fresh: State, rng: Array) -> State:
        """``fresh`` reset states (B,) where, with probability ``start_prob`` each (drawn from keys
        derived from ``rng`` (B, 2)), physics, obs and task info are those of a uniformly drawn bank
        state; the episode counters, RNG and non-finite-action count stay the fresh reset's, and so do the
        task entries the env draws per episode (its ``episode_entries``, e.g. an observation noise's)."""
        if self.starts is None:
            return fresh
        bank = self.starts
        keys = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, 0x5EED)))(rng)
        use = jax.vmap(lambda k: jax.random.bernoulli(k, self.start_prob))(keys[:, 0])
        drawn = jax.tree.map(
            lambda x: x[jax.vmap(lambda k: jax.random.randint(k, (), 0, bank.done.shape[0]))(keys[:, 1])], bank)
        own = {"rng": fresh.info.rng, "steps": fresh.info.steps, "truncation": fresh.info.truncation,
               "nonfinite_actions": fresh.info.nonfinite_actions,
               "task": {**drawn.info.task, **{k: fresh.info.task[k] for k in getattr(self.env, "episode_entries", ())}}}
        return select_worlds(use, drawn.replace(info=drawn.info.replace(**own)), fresh)


def select_worlds(mask: Array, new: State, old: State) -> State:
    """``old`` (B,) with physics, obs and info taken from ``new`` where ``mask`` (B,) bool (in ``old``'s
    dtypes); reward, done and metrics stay ``old``'s."""

    def pick(a, b):
        return jnp.where(mask.reshape(mask.shape + (1,) * (b.ndim - mask.ndim)), a.astype(b.dtype), b)

    return old.replace(physics=jax.tree.map(pick, new.physics, old.physics), obs=jax.tree.map(pick, new.obs, old.obs),
                       info=jax.tree.map(pick, new.info, old.info))


def wrap_for_brax(env: SO101Env, episode_length: int, action_repeat: int = 1, randomization_fn=None,
                  starts: State | None = None, start_prob: float = 0.0) -> TrainingEnv:
    """``wrap_env_fn`` for ``brax.training.agents.ppo.train``.

    Domain randomization is configured on the env itself (sampled at every reset, so it is
    re-drawn per episode on both backends); Brax's model-level ``randomization_fn`` is refused.
    """
    if randomization_fn is not None:
        raise InputError("randomization_fn is not supported: configure domain randomization on the env")
    return TrainingEnv(env, episode_length, action_repeat, starts, start_prob)
