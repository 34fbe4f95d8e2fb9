"""Training presets: PPO (:class:`Preset`) or SAC (:class:`SacPreset`) hyperparameters, network sizes and the
task's training env config; env variants (:class:`Variant`: joint mode, 30 Hz, servo ranges) laid over them."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Callable
from typing import Any, ClassVar

from so101_mjx.errors import InputError, ParameterError

MAX_EPOCH_UPDATES = 2**31 - 1  # training steps per epoch: the length of a lax.scan, an int32
MAX_INT32 = 2**31 - 1  # a SAC replay buffer's positions are int32: rows + one insert of every world stay below


def _int(value: Any, low: int) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= low


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


_POSITIVE_INT = (lambda v: _int(v, 1), "an integer >= 1")
_POSITIVE_REAL = (lambda v: _real(v) and v > 0, "a finite number > 0")
_LAYERS = (lambda v: isinstance(v, (tuple, list)) and all(_int(n, 1) for n in v), "a tuple of integers >= 1")
# Field -> (accepts(value), what is allowed); checked in __post_init__. _COMMON for both algorithms.
_COMMON: dict[str, tuple[Callable[[Any], bool], str]] = {
    **dict.fromkeys(("num_timesteps", "num_envs", "batch_size", "num_eval_envs", "demo_start_episodes"), _POSITIVE_INT),
    "num_evals": (lambda v: _int(v, 2), "an integer >= 2 (checkpoints are written at each eval)"),
    "episode_length": (lambda v: v is None or _int(v, 1), "None or an integer >= 1"),
    "learning_rate": _POSITIVE_REAL,
    "discounting": (lambda v: _real(v) and 0 < v <= 1, "a number in (0, 1]"),
    "reward_scaling": _POSITIVE_REAL,
    "success_bonus": (_real, "a finite number"),
    "demo_start_prob": (lambda v: _real(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "policy_hidden_layer_sizes": _LAYERS,
    "value_hidden_layer_sizes": _LAYERS,
}
_PPO = {
    **dict.fromkeys(("num_minibatches", "unroll_length", "num_updates_per_batch"), _POSITIVE_INT),
    "entropy_cost": (lambda v: _real(v) and v >= 0, "a finite number >= 0"),
    "gae_lambda": (lambda v: _real(v) and 0 <= v <= 1, "a number in [0, 1]"),
    "clipping_epsilon": _POSITIVE_REAL,
    "max_grad_norm": (lambda v: v is None or _POSITIVE_REAL[0](v), "None or a finite number > 0"),
}
_SAC = {
    "grad_updates_per_step": _POSITIVE_INT,
    "tau": (lambda v: _real(v) and 0 < v <= 1, "a number in (0, 1]"),
    "min_replay_size": (lambda v: _int(v, 0), "an integer >= 0"),
    "max_replay_size": (lambda v: v is None or _int(v, 1), "None (num_timesteps) or an integer >= 1"),
}


MAX_NOISE_SIGMA = 1.0  # largest observation_noise standard deviation, in the entry's units


def parse_observation_noise(noise: Any) -> dict[str, tuple[float, float]]:
    """``{entry: (bias sigma, step sigma)}`` from a dict of pairs (JSON lists accepted); InputError naming the entry."""
    if not isinstance(noise, dict) or not all(isinstance(k, str) for k in noise):
        raise InputError(f"observation_noise must map observation entries to (bias sigma, step sigma), got {noise!r}")
    out = {}
    for name, pair in noise.items():
        if (not isinstance(pair, (tuple, list)) or len(pair) != 2
                or not all(_real(v) and 0 <= v <= MAX_NOISE_SIGMA for v in pair)):
            raise InputError(f"observation_noise[{name!r}] must be (bias sigma, step sigma), two numbers in "
                             f"[0, {MAX_NOISE_SIGMA}], got {pair!r}")
        out[name] = (float(pair[0]), float(pair[1]))
    return out


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingPreset:
    """What both algorithms' presets hold: sizes, rewards, demonstration starts, networks and env overrides.

    An invalid field (e.g. ``num_timesteps`` < 1, a NaN learning rate) raises ValueError naming it.
    """

    algo: ClassVar[str]
    _rules: ClassVar[dict[str, tuple[Callable[[Any], bool], str]]] = {}
    num_timesteps: int
    num_envs: int
    batch_size: int
    learning_rate: float = 3e-4
    discounting: float = 0.97
    reward_scaling: float = 1.0
    normalize_observations: bool = True
    num_evals: int = 10
    num_eval_envs: int = 128
    episode_length: int | None = None  # overrides env_config's episode_length when set
    policy_hidden_layer_sizes: tuple[int, ...] = (64, 64)
    value_hidden_layer_sizes: tuple[int, ...] = (128, 128)  # PPO's value network; SAC's Q networks
    activation: str = "swish"  # a name in brax.training.networks.ACTIVATION
    success_bonus: float = 0.0  # reward added when an episode ends in success (train.envs.BraxAdapter)
    # training resets that start along the scripted controller's successful episodes (training.demo_starts)
    demo_start_prob: float = 0.0
    demo_start_episodes: int = 256  # scripted episodes the bank of starts is drawn from
    # observation entry -> (bias sigma, step sigma) the training envs observe it off by (training.observation_noise)
    observation_noise: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    env_config: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, (ok, allowed) in {**_COMMON, **self._rules}.items():
            if not ok(getattr(self, name)):
                raise InputError(f"{name} must be {allowed}, got {getattr(self, name)!r}")
        object.__setattr__(self, "observation_noise", parse_observation_noise(self.observation_noise))

    @property
    def total_steps(self) -> int:
        """Env steps the loop actually runs (``num_timesteps`` rounded up to whole epochs)."""
        raise NotImplementedError

    def loop_kwargs(self) -> dict[str, Any]:
        """The fields the algorithm's ``train`` takes directly."""
        skip = {f.name for f in dataclasses.fields(TrainingPreset)} - {
            "num_timesteps", "num_envs", "batch_size", "learning_rate", "discounting", "reward_scaling",
            "normalize_observations", "num_evals", "num_eval_envs"}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip}

    def env_overrides(self) -> dict[str, Any]:
        """Env config overrides, ``episode_length`` included."""
        extra = {} if self.episode_length is None else {"episode_length": self.episode_length}
        return {**self.env_config, **extra}

    def network(self) -> dict[str, Any]:
        """Arguments of :func:`so101_mjx.training.networks.network_factory` (and ``sac_network_factory``)."""
        return {
            "policy_hidden_layer_sizes": list(self.policy_hidden_layer_sizes),
            "value_hidden_layer_sizes": list(self.value_hidden_layer_sizes),
            "activation": self.activation,
        }

    def asdict(self) -> dict[str, Any]:
        return {"algo": self.algo, **dataclasses.asdict(self)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Preset(TrainingPreset):
    """Arguments of ``brax.training.agents.ppo.train`` (:mod:`so101_mjx.training.ppo_loop`) plus the common fields."""

    algo: ClassVar[str] = "ppo"
    _rules: ClassVar[dict[str, tuple[Callable[[Any], bool], str]]] = _PPO
    num_minibatches: int
    unroll_length: int = 10
    num_updates_per_batch: int = 4
    entropy_cost: float = 1e-2
    gae_lambda: float = 0.95
    clipping_epsilon: float = 0.3
    max_grad_norm: float | None = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.batch_size * self.num_minibatches) % self.num_envs:
            raise InputError(f"batch_size * num_minibatches must be a multiple of num_envs, got {self}")
        updates = self.steps_per_epoch // (self.batch_size * self.num_minibatches * self.unroll_length)
        if updates > MAX_EPOCH_UPDATES:
            raise InputError(f"num_timesteps {self.num_timesteps} over {self.num_evals - 1} epochs makes {updates:,} "
                             f"training steps per epoch, more than a jitted loop counts ({MAX_EPOCH_UPDATES:,}): lower "
                             "num_timesteps or raise num_evals")

    @property
    def steps_per_epoch(self) -> int:
        """Env steps between two evals (and checkpoints), as ``ppo.train`` rounds them."""
        per_update = self.batch_size * self.num_minibatches * self.unroll_length
        updates = -(-self.num_timesteps // ((self.num_evals - 1) * per_update))
        return updates * per_update

    @property
    def total_steps(self) -> int:
        return (self.num_evals - 1) * self.steps_per_epoch


def sac_schedule(num_timesteps: int, num_envs: int, min_replay_size: int, num_evals: int) -> tuple[int, int]:
    """``(prefill actor steps, actor steps per epoch)`` of a SAC run, as Brax's ``sac.train`` rounds
    them; an actor step is one env step of every world. The run ends after ``num_evals − 1`` epochs."""
    prefill = -(-min_replay_size // num_envs)
    per_epoch = -(-(num_timesteps - prefill * num_envs) // ((num_evals - 1) * num_envs))
    return prefill, per_epoch


def check_sac_sizes(num_timesteps: int, num_envs: int, min_replay_size: int, max_replay_size: int | None) -> None:
    """InputError unless a SAC run can have these sizes."""
    if min_replay_size >= num_timesteps:
        raise InputError(f"min_replay_size ({min_replay_size}) must be below num_timesteps ({num_timesteps}): no "
                         "training would happen")
    if max_replay_size is not None and max_replay_size < max(min_replay_size, num_envs):
        raise InputError(f"max_replay_size ({max_replay_size}) must hold min_replay_size ({min_replay_size}) "
                         f"and one env step of every world ({num_envs})")
    rows = max_replay_size or num_timesteps
    if rows > MAX_INT32 - num_envs:
        raise ParameterError(f"max_replay_size (default: num_timesteps) must be at most {MAX_INT32 - num_envs:,} (the "
                             f"replay buffer's positions are int32), got {rows:,}: lower num_timesteps or set "
                             "max_replay_size", "num_timesteps")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SacPreset(TrainingPreset):
    """Arguments of :func:`so101_mjx.training.sac_loop.train` (Brax's ``sac.train``'s) plus the common fields.

    ``batch_size``: transitions per gradient step; ``grad_updates_per_step``: gradient steps per env
    step of all ``num_envs`` worlds (the update-to-data ratio is ``grad_updates_per_step / num_envs``).
    """

    algo: ClassVar[str] = "sac"
    _rules: ClassVar[dict[str, tuple[Callable[[Any], bool], str]]] = _SAC
    batch_size: int = 256
    grad_updates_per_step: int = 1
    tau: float = 0.005
    min_replay_size: int = 8192
    max_replay_size: int | None = None
    policy_hidden_layer_sizes: tuple[int, ...] = (256, 256)
    value_hidden_layer_sizes: tuple[int, ...] = (256, 256)
    activation: str = "relu"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_sac_sizes(self.num_timesteps, self.num_envs, self.min_replay_size, self.max_replay_size)
        per_epoch = sac_schedule(self.num_timesteps, self.num_envs, self.min_replay_size, self.num_evals)[1]
        if per_epoch > MAX_EPOCH_UPDATES:
            raise InputError(f"num_timesteps {self.num_timesteps:,} over {self.num_evals - 1} epochs makes "
                             f"{per_epoch:,} training steps per epoch, more than a jitted loop counts "
                             f"({MAX_EPOCH_UPDATES:,}): lower num_timesteps or raise num_evals")

    @property
    def total_steps(self) -> int:
        prefill, per_epoch = sac_schedule(self.num_timesteps, self.num_envs, self.min_replay_size, self.num_evals)
        return (prefill + (self.num_evals - 1) * per_epoch) * self.num_envs


# The block tasks' PPO recipe: 20-step unrolls, 4 passes per batch, learning rate 5e-4, entropy 1e-2,
# discounting 0.97, 128x3 policy and 256x3 value MLPs, a success bonus of 50 and half of the training
# resets from scripted states. BLOCK_CPU: 256 worlds of backend c on a 2-core CPU, 8 minibatches of 256;
# BLOCK_CPU_FAST: BLOCK_CPU with twice the gradient steps per env step (4 minibatches, 8 passes over each batch);
# BLOCK_GPU: 4,096 worlds of MJX, 32 minibatches of 1,024, no demonstration starts. A task sets its length,
# its env config and what it changes.
BLOCK_CPU = Preset(
    num_timesteps=1, num_envs=256, batch_size=256, num_minibatches=8, unroll_length=20, num_updates_per_batch=4,
    learning_rate=5e-4, entropy_cost=1e-2, discounting=0.97, success_bonus=50.0, demo_start_prob=0.5,
    policy_hidden_layer_sizes=(128, 128, 128), value_hidden_layer_sizes=(256, 256, 256),
)
BLOCK_CPU_FAST = dataclasses.replace(BLOCK_CPU, num_minibatches=4, num_updates_per_batch=8)
BLOCK_GPU = dataclasses.replace(BLOCK_CPU, num_envs=4096, batch_size=1024, num_minibatches=32, num_evals=20,
                                demo_start_prob=0.0)


def tiny(**env_config: Any) -> Preset:
    """A seconds-long run with 8 worlds and 8-unit networks (the tests' preset), with ``env_config``."""
    return Preset(
        num_timesteps=2 * 8 * 4 * 4, num_envs=8, batch_size=8, num_minibatches=4, unroll_length=4,
        num_updates_per_batch=1, num_evals=3, num_eval_envs=4, episode_length=8,
        policy_hidden_layer_sizes=(8,), value_hidden_layer_sizes=(8,), env_config=env_config,
    )


def tiny_sac(**env_config: Any) -> SacPreset:
    """SAC's :func:`tiny`: 8 worlds, 8-unit networks, a 64-transition prefill."""
    return SacPreset(
        num_timesteps=3 * 64, num_envs=8, batch_size=16, grad_updates_per_step=2, min_replay_size=64, num_evals=3,
        num_eval_envs=4, episode_length=8, policy_hidden_layer_sizes=(8,), value_hidden_layer_sizes=(8,),
        env_config=env_config,
    )


# Preset fields bound to the control period, which a variant may set: the discount per step, the unroll
# and the success bonus (about reward / (1 - discounting)) follow the horizon in steps.
HORIZON_FIELDS = ("discounting", "unroll_length", "success_bonus")


@dataclasses.dataclass(frozen=True)
class Variant:
    """A named env variant (``so101-mjx train --env-config NAME``): env config entries laid over any preset's,
    and the horizon-bound preset fields (:data:`HORIZON_FIELDS`) a change of control period needs."""

    config: dict[str, Any]
    horizon: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.horizon) - set(HORIZON_FIELDS))
        if unknown:
            raise InputError(f"a variant sets only the horizon fields {list(HORIZON_FIELDS)}, got {unknown}")

    def apply(self, preset: TrainingPreset) -> TrainingPreset:
        """``preset`` with this variant's env config over its own and its horizon fields (where ``preset`` has them)."""
        horizon = {k: v for k, v in self.horizon.items() if hasattr(preset, k)}
        return dataclasses.replace(preset, env_config={**preset.env_config, **self.config}, **horizon)


@dataclasses.dataclass(frozen=True)
class Renamed:
    """A preset name from when presets named env variants too: now ``preset`` with ``variant`` and these
    ``length`` fields (``num_timesteps``, ``num_evals``), the same run as before."""

    preset: str
    variant: str
    length: dict[str, Any] = dataclasses.field(default_factory=dict)

    def spelling(self) -> str:
        """The same run as a preset, its env config and its length fields."""
        fields = "".join(f", {k}={v!r}" for k, v in self.length.items())
        return f"preset {self.preset!r} with env_config {self.variant!r}{fields}"
