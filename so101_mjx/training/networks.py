"""Networks: Brax's MLPs with a tanh-normal policy (PPO's with a value network, SAC's with twin Q
networks), and their deterministic inference function.

The policy network is the same module under both algorithms (``hidden_<i>`` layers, output loc and
scale): exports, evals and replays read a SAC checkpoint's policy as they read PPO's.

:func:`inference_fn` is Brax's own deterministic policy followed by
:func:`~so101_mjx.training.brax_env.to_env_action`: the reference that the exports (:mod:`so101_mjx.training.policy`,
:mod:`so101_mjx.training.export`) are checked against.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from brax.training import networks as brax_networks
from brax.training.acme import running_statistics
from brax.training.agents.ppo import networks as ppo_networks
from brax.training.agents.sac import networks as sac_networks
from jax import Array

from so101_mjx.errors import InputError
from so101_mjx.training.brax_env import to_env_action


def network_factory(policy_hidden_layer_sizes, value_hidden_layer_sizes, activation: str) -> Callable:
    """``network_factory`` for ``ppo.train`` (checkpointable: activation by registered name)."""
    if activation not in brax_networks.ACTIVATION:
        raise InputError(f"activation must be one of {sorted(brax_networks.ACTIVATION)}, got {activation!r}")
    return functools.partial(
        ppo_networks.make_ppo_networks,
        policy_hidden_layer_sizes=tuple(policy_hidden_layer_sizes),
        value_hidden_layer_sizes=tuple(value_hidden_layer_sizes),
        activation=brax_networks.ACTIVATION[activation],
    )


def sac_network_factory(policy_hidden_layer_sizes, value_hidden_layer_sizes, activation: str) -> Callable:
    """``network_factory`` for :func:`so101_mjx.training.sac_loop.train`: PPO's policy network
    (:func:`network_factory`) and Brax's twin Q network with ``value_hidden_layer_sizes``."""
    network_factory(policy_hidden_layer_sizes, value_hidden_layer_sizes, activation)  # checks the activation
    return functools.partial(_sac_networks, policy_hidden_layer_sizes=tuple(policy_hidden_layer_sizes),
                             value_hidden_layer_sizes=tuple(value_hidden_layer_sizes), activation=activation)


def _sac_networks(observation_size: int, action_size: int, preprocess_observations_fn: Callable = lambda x, _: x, *,
                  policy_hidden_layer_sizes: tuple[int, ...], value_hidden_layer_sizes: tuple[int, ...],
                  activation: str) -> sac_networks.SACNetworks:
    ppo = network_factory(policy_hidden_layer_sizes, value_hidden_layer_sizes, activation)(
        observation_size, action_size, preprocess_observations_fn=preprocess_observations_fn)
    q_network = brax_networks.make_q_network(observation_size, action_size, preprocess_observations_fn,
                                             hidden_layer_sizes=value_hidden_layer_sizes,
                                             activation=brax_networks.ACTIVATION[activation])
    return sac_networks.SACNetworks(ppo.policy_network, q_network, ppo.parametric_action_distribution)


def inference_fn(
    factory: Callable, obs_size: int, action_map: dict[str, list[float]], normalize_observations: bool, params: Any
) -> Callable[[Array], Array]:
    """Brax's deterministic inference function followed by :func:`to_env_action` with the run's
    ``action_map`` (``{"scale", "offset"}``, one entry per action component): obs -> env action."""
    normalize = running_statistics.normalize if normalize_observations else (lambda x, _: x)
    scale, offset = (np.asarray(action_map[k], np.float32) for k in ("scale", "offset"))
    network = factory(obs_size, len(scale), preprocess_observations_fn=normalize)
    policy = ppo_networks.make_inference_fn(network)(params, deterministic=True)
    return jax.jit(lambda obs: to_env_action(policy(obs, None)[0], scale, offset))
