"""PPO networks: Brax's MLPs with a tanh-normal policy, and their deterministic inference function.

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
