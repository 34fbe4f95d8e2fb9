"""Envs for training: the policy-to-env action map and the Brax adapter around :class:`TrainingEnv`.

Brax's tanh-normal policy (PPO's and SAC's) acts in [-1, 1]^n. :func:`action_map` maps that box affinely onto the
env's :meth:`~so101_mjx.envs.arm.SO101Arm.action_bounds`: in Cartesian mode ``[dx, dy, dz]`` stay in
[-1, 1] and the jaw command ``grasp = 0.5·a + 0.5`` lands in [0, 1] (0 closed); in joint mode each
motor's [-1, 1] spans its limits (or ±the relative bound). Training, the JAX inference function and
the exported ONNX / numpy policies all apply this same map (the run's ``action_map``): exported
policies output env actions.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from brax.envs.base import Wrapper
from jax import Array

from so101_mjx.envs import make
from so101_mjx.envs.base import SO101Env
from so101_mjx.envs.wrappers import wrap_for_brax
from so101_mjx.sim.state import State


def action_map(env: SO101Env) -> tuple[np.ndarray, np.ndarray]:
    """``(scale, offset)`` float32 (action_size,): env action = ``scale · a + offset`` for a policy action a in [-1,
    1]."""
    low, high = env.arm.action_bounds()
    return ((high - low) / 2).astype(np.float32), ((high + low) / 2).astype(np.float32)


def to_env_action(action: Array, scale: np.ndarray, offset: np.ndarray) -> Array:
    """Policy action in [-1, 1]^n -> env action, ``scale · action + offset`` (last axis; :func:`action_map`)."""
    return action * jnp.asarray(scale, action.dtype) + jnp.asarray(offset, action.dtype)


def make_env(name: str, env_config: dict, backend: str | None = None) -> SO101Env:
    """The registered env with the run's config overrides."""
    return make(name, backend=backend, **env_config)


class BraxAdapter(Wrapper):
    """What ``ppo.train`` needs on top of :class:`~so101_mjx.envs.wrappers.TrainingEnv`.

    Maps policy actions with :func:`to_env_action` and ``action_map`` (the env's :func:`action_map`); adds
    ``metrics["final_success"]`` (success at an episode's last step: Brax's evaluator sums metrics over the episode, so
    this sum is the episode's success). Brax's loop keeps and extends ``state.info`` as a dict: the adapter's states
    carry the env's :class:`~so101_mjx.sim.state.Info` as ``info["env"]`` next to the entries PPO's
    unroll and evaluator read, ``steps``, ``truncation``, ``episode_done`` and ``episode_metrics`` (training-metric
    logging is not used; the metrics stay empty).

    ``success_bonus`` is added to the reward of a step that ends an episode in success. The pick
    tasks terminate on success, which with a positive dense reward forfeits the rest of the
    episode's reward: without a bonus worth about ``reward / (1 − discounting)``, PPO learns to
    hover just short of success.
    """

    def __init__(self, env, action_map: tuple[np.ndarray, np.ndarray], success_bonus: float = 0.0):
        super().__init__(env)  # Brax's Wrapper: observation_size, action_size, backend and unwrapped pass through
        self.success_bonus = success_bonus
        self.action_map = action_map
        self._metric_keys = tuple(jax.eval_shape(env.reset, jax.random.split(jax.random.PRNGKey(0), 1)).metrics)

    def reset(self, rng: Array) -> State:
        return self._annotate(self.env.reset(rng))

    def step(self, state: State, action: Array) -> State:
        # The wrapped env scans over action repeats: hand it back its own metrics structure
        # (without ours and those of Brax's EvalWrapper).
        state = state.replace(metrics={k: state.metrics[k] for k in self._metric_keys}, info=state.info["env"])
        return self._annotate(self.env.step(state, to_env_action(action, *self.action_map)))

    def _annotate(self, state: State) -> State:
        final_success = state.metrics["success"] * (state.done > 0)
        metrics = {**state.metrics, "final_success": final_success}
        info: dict[str, Any] = {"env": state.info, "steps": state.info.steps, "truncation": state.info.truncation,
                "episode_done": state.done, "episode_metrics": {}}
        reward = state.reward + self.success_bonus * final_success.astype(state.reward.dtype)
        return state.replace(reward=reward, metrics=metrics, info=info)


def wrap_env_fn(
    env: SO101Env, episode_length: int, action_repeat: int = 1, randomization_fn=None, success_bonus: float = 0.0,
    starts: State | None = None, start_prob: float = 0.0,
) -> BraxAdapter:
    """``wrap_env_fn`` for ``ppo.train`` (bind ``success_bonus`` and the demonstration starts,
    :mod:`so101_mjx.training.demo_starts`, with functools.partial)."""
    wrapped = wrap_for_brax(env, episode_length, action_repeat, randomization_fn, starts, start_prob)
    return BraxAdapter(wrapped, action_map(env), success_bonus)
