"""A training preset: PPO hyperparameters, network sizes and env overrides (:class:`Preset`)."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable
from typing import Any

from so101_mjx.errors import InputError

MAX_EPOCH_UPDATES = 2**31 - 1  # training steps per epoch: the length of a lax.scan, an int32


def _int(value: Any, low: int) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= low


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


_POSITIVE_INT = (lambda v: _int(v, 1), "an integer >= 1")
_POSITIVE_REAL = (lambda v: _real(v) and v > 0, "a finite number > 0")
_LAYERS = (lambda v: isinstance(v, (tuple, list)) and all(_int(n, 1) for n in v), "a tuple of integers >= 1")
# Preset field -> (accepts(value), what is allowed); checked in Preset.__post_init__.
_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    **dict.fromkeys(("num_timesteps", "num_envs", "batch_size", "num_minibatches", "unroll_length",
                     "num_updates_per_batch", "num_eval_envs"), _POSITIVE_INT),
    "num_evals": (lambda v: _int(v, 2), "an integer >= 2 (checkpoints are written at each eval)"),
    "episode_length": (lambda v: v is None or _int(v, 1), "None or an integer >= 1"),
    "learning_rate": _POSITIVE_REAL,
    "entropy_cost": (lambda v: _real(v) and v >= 0, "a finite number >= 0"),
    "discounting": (lambda v: _real(v) and 0 < v <= 1, "a number in (0, 1]"),
    "gae_lambda": (lambda v: _real(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "clipping_epsilon": _POSITIVE_REAL,
    "max_grad_norm": (lambda v: v is None or _POSITIVE_REAL[0](v), "None or a finite number > 0"),
    "reward_scaling": _POSITIVE_REAL,
    "success_bonus": (_real, "a finite number"),
    "demo_start_prob": (lambda v: _real(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "demo_start_episodes": _POSITIVE_INT,
    "policy_hidden_layer_sizes": _LAYERS,
    "value_hidden_layer_sizes": _LAYERS,
}


@dataclasses.dataclass(frozen=True)
class Preset:
    """Arguments of ``brax.training.agents.ppo.train`` plus network sizes and env overrides.

    An invalid field (e.g. ``num_timesteps`` < 1, a NaN learning rate) raises ValueError naming it.
    """

    num_timesteps: int
    num_envs: int
    batch_size: int
    num_minibatches: int
    unroll_length: int = 10
    num_updates_per_batch: int = 4
    learning_rate: float = 3e-4
    entropy_cost: float = 1e-2
    discounting: float = 0.97
    gae_lambda: float = 0.95
    clipping_epsilon: float = 0.3
    max_grad_norm: float | None = 1.0
    reward_scaling: float = 1.0
    normalize_observations: bool = True
    num_evals: int = 10
    num_eval_envs: int = 128
    episode_length: int | None = None  # overrides env_config's episode_length when set
    policy_hidden_layer_sizes: tuple[int, ...] = (64, 64)
    value_hidden_layer_sizes: tuple[int, ...] = (128, 128)
    activation: str = "swish"  # a name in brax.training.networks.ACTIVATION
    success_bonus: float = 0.0  # reward added when an episode ends in success (train.envs.BraxAdapter)
    # training resets that start along the scripted controller's successful episodes (training.demo_starts)
    demo_start_prob: float = 0.0
    demo_start_episodes: int = 256  # scripted episodes the bank of starts is drawn from
    env_config: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, (ok, allowed) in _RULES.items():
            if not ok(getattr(self, name)):
                raise InputError(f"{name} must be {allowed}, got {getattr(self, name)!r}")
        if (self.batch_size * self.num_minibatches) % self.num_envs:
            raise InputError(f"batch_size * num_minibatches must be a multiple of num_envs, got {self}")
        updates = self.steps_per_epoch // (self.batch_size * self.num_minibatches * self.unroll_length)
        if updates > MAX_EPOCH_UPDATES:
            raise InputError(f"num_timesteps {self.num_timesteps} over {self.num_evals - 1} epochs makes {updates:,} training steps per epoch, "
                             f"more than a jitted loop counts ({MAX_EPOCH_UPDATES:,}): lower num_timesteps or raise num_evals")

    @property
    def steps_per_epoch(self) -> int:
        """Env steps between two evals (and checkpoints), as ``ppo.train`` rounds them."""
        per_update = self.batch_size * self.num_minibatches * self.unroll_length
        updates = -(-self.num_timesteps // ((self.num_evals - 1) * per_update))
        return updates * per_update

    @property
    def total_steps(self) -> int:
        """Env steps ``ppo.train`` actually runs (``num_timesteps`` rounded up to whole epochs)."""
        return (self.num_evals - 1) * self.steps_per_epoch

    def ppo_kwargs(self) -> dict[str, Any]:
        """The fields ``ppo.train`` takes directly."""
        skip = {"policy_hidden_layer_sizes", "value_hidden_layer_sizes", "activation", "env_config", "episode_length",
                "success_bonus", "demo_start_prob", "demo_start_episodes"}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip}

    def env_overrides(self) -> dict[str, Any]:
        """Env config overrides, ``episode_length`` included."""
        extra = {} if self.episode_length is None else {"episode_length": self.episode_length}
        return {**self.env_config, **extra}

    def network(self) -> dict[str, Any]:
        """Arguments of :func:`so101_mjx.training.networks.network_factory`."""
        return {
            "policy_hidden_layer_sizes": list(self.policy_hidden_layer_sizes),
            "value_hidden_layer_sizes": list(self.value_hidden_layer_sizes),
            "activation": self.activation,
        }

    def asdict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def tiny(**env_config: Any) -> Preset:
    """A seconds-long run with 8 worlds and 8-unit networks (the tests' preset), with ``env_config``."""
    return Preset(
        num_timesteps=2 * 8 * 4 * 4, num_envs=8, batch_size=8, num_minibatches=4, unroll_length=4,
        num_updates_per_batch=1, num_evals=3, num_eval_envs=4, episode_length=8,
        policy_hidden_layer_sizes=(8,), value_hidden_layer_sizes=(8,), env_config=env_config,
    )
