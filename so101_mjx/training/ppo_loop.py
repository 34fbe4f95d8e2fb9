"""The PPO training loop, owned so that a run can stop at a checkpoint and resume exactly.

:func:`train` is ``brax.training.agents.ppo.train.train`` (brax 0.14.2) for the options the presets
use, with the same key splitting, the same jitted epoch (``pmap`` over the local devices) and the
same update order, so a fresh run gives Brax's params bitwise (tests/training/test_train.py). Everything
else is Brax's: networks and inference (``ppo_networks``), the loss (``ppo_losses.compute_ppo_loss``),
gradients (``gradients.gradient_update_fn``), acting (``acting.generate_unroll``, ``acting.Evaluator``),
the observation normalizer (``running_statistics``) and ``TrainingState``.

What the loop adds: after every epoch it hands ``checkpoint_fn`` a :class:`LoopState`, everything
the rest of the run depends on — the training state (params, Adam moments, normalizer, env steps),
the env states of the rollout, the loop's RNG key and the evaluator's key — and ``restore`` starts a
run from such a state. A run resumed from the checkpoint at step ``s`` re-runs the eval at ``s``
and continues as the uninterrupted run does, bitwise (tests/training/test_resume.py; on backend ``c``, and
on ``mjx`` as far as XLA is deterministic on the device).

Across processes (``jax.distributed``), one difference from Brax: Brax folds each process's index
into its key, so its env keys depend on how the devices are split among processes. Here every
process takes its devices' rows of the keys one process with all the devices would split, and
checkpoints gather every process's env states: a run on P processes of D devices equals one
process with P * D devices (bitwise for two devices; with more, the all-reduce's summation order
may differ), and its checkpoints resume on either. Process 0 evaluates and writes the checkpoints.

Not supported (the presets use none of them): vision, pixel augmentation, Brax's
``randomization_fn`` (randomize the env instead), ``num_resets_per_eval``, the adaptive-KL learning
rate, ``bootstrap_on_timeout``, the distributional critic, training-metric logging. Exact resume
needs the same total device count.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Self

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from brax.training import acting, gradients, pmap, types
from brax.training.acme import running_statistics, specs
from brax.training.agents.ppo import losses as ppo_losses, networks as ppo_networks
from brax.training.agents.ppo.train import TrainingState
from jax import Array
from jax.experimental import multihost_utils

from so101_mjx.errors import InputError
from so101_mjx.training.finite import check_finite, strip_weak_type

AXIS = "i"  # Brax's pmap axis name
EXTRA_FIELDS = ("truncation", "episode_metrics", "episode_done")
Params = tuple[Any, Any, Any]  # (normalizer, policy, value), as Brax's ppo.train returns them


def unpmap(tree: Any) -> Any:
    """The first device's copy of every leaf of a device-replicated ``tree`` (as Brax's loop reads it)."""
    return jax.tree_util.tree_map(lambda x: x.addressable_shards[0].data.squeeze(0), tree)


def device_sharding(devices: list[jax.Device]) -> jax.sharding.NamedSharding:
    """Axis 0 split over ``devices`` (the pmap axis :data:`AXIS`): how the epoch holds its states."""
    return jax.sharding.NamedSharding(jax.sharding.Mesh(np.asarray(devices), (AXIS,)), jax.sharding.PartitionSpec(AXIS))


def replicate(tree: Any, devices: list[jax.Device]) -> Any:
    """One copy of every leaf of ``tree`` per device, stacked on a new leading axis sharded over ``devices``."""
    stacked = jax.tree_util.tree_map(lambda leaf: jnp.stack([jnp.asarray(leaf)] * len(devices)), tree)
    return jax.device_put(stacked, device_sharding(devices))


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The loop's sizes (see :func:`train`'s arguments); ``steps_per_epoch``: training steps per epoch."""

    num_envs: int
    batch_size: int
    num_minibatches: int
    unroll_length: int
    num_updates_per_batch: int
    steps_per_epoch: int

    @property
    def env_steps_per_training_step(self) -> int:
        return self.batch_size * self.unroll_length * self.num_minibatches


@flax.struct.dataclass
class LoopState:
    """The training loop between two epochs, as host arrays.

    ``training``: Brax's ``TrainingState`` (one copy; it is replicated over devices).
    ``env``: the rollout's env states, leading axes (devices of all processes, envs per device).
    ``key``: the loop's key (the next epoch's keys are split from it), uint32 (2,).
    ``eval_key``: the evaluator's key before the eval at this step, uint32 (2,).
    """

    if TYPE_CHECKING:  # flax.struct.dataclass adds it at runtime

        def replace(self, **changes: Any) -> Self: ...

    training: TrainingState
    env: Any
    key: Array | np.ndarray  # device arrays in the loop, host arrays as checkpoint_fn and restore see them
    eval_key: Array | np.ndarray


def training_epoch_fn(env: Any, make_policy: Callable, update_fn: Callable, sizes: Sizes,
                      learning_rate: float) -> Callable:
    """Brax's jitted PPO epoch, ``pmap``-ed over the local devices: ``sizes.steps_per_epoch`` training
    steps, each an unroll of every env then ``num_updates_per_batch`` passes of minibatch SGD.

    ``(training_state, env_state, keys) -> (training_state, env_state, mean loss metrics)``; it
    donates its first two arguments.
    """

    def minibatch_step(carry, data: types.Transition, normalizer_params):
        optimizer_state, params, key = carry
        key, key_loss = jax.random.split(key)
        (_, metrics), params, optimizer_state = update_fn(
            params, normalizer_params, data, key_loss, optimizer_state=optimizer_state
        )
        metrics["learning_rate"] = jnp.array(learning_rate)
        return (optimizer_state, params, key), metrics

    def sgd_step(carry, unused_t, data: types.Transition, normalizer_params):
        optimizer_state, params, key = carry
        key, key_perm, key_grad = jax.random.split(key, 3)

        def convert_data(x):
            x = jax.random.permutation(key_perm, x)
            return jnp.reshape(x, (sizes.num_minibatches, -1) + x.shape[1:])

        shuffled_data = jax.tree_util.tree_map(convert_data, data)
        (optimizer_state, params, _), metrics = jax.lax.scan(
            functools.partial(minibatch_step, normalizer_params=normalizer_params),
            (optimizer_state, params, key_grad), shuffled_data, length=sizes.num_minibatches,
        )
        return (optimizer_state, params, key), metrics

    def training_step(carry, unused_t):
        training_state, state, key = carry
        key_sgd, key_generate_unroll, new_key = jax.random.split(key, 3)
        policy = make_policy((training_state.normalizer_params, training_state.params.policy,
                              training_state.params.value))

        def unroll(carry, unused_t):
            current_state, current_key = carry
            current_key, next_key = jax.random.split(current_key)
            next_state, data = acting.generate_unroll(
                env, current_state, policy, current_key, sizes.unroll_length, extra_fields=EXTRA_FIELDS
            )
            return (next_state, next_key), data

        (state, _), data = jax.lax.scan(
            unroll, (state, key_generate_unroll), (), length=sizes.batch_size * sizes.num_minibatches // sizes.num_envs
        )
        # Leading dimensions (batch_size * num_minibatches, unroll_length).
        data = jax.tree_util.tree_map(lambda x: jnp.swapaxes(x, 1, 2), data)
        data = jax.tree_util.tree_map(lambda x: jnp.reshape(x, (-1,) + x.shape[2:]), data)
        normalizer_params = running_statistics.update(
            training_state.normalizer_params, data.observation, pmap_axis_name=AXIS, until_count=None
        )
        (optimizer_state, params, _), metrics = jax.lax.scan(
            functools.partial(sgd_step, data=data, normalizer_params=normalizer_params),
            (training_state.optimizer_state, training_state.params, key_sgd), (), length=sizes.num_updates_per_batch,
        )
        new_training_state = TrainingState(
            optimizer_state=optimizer_state, params=params, normalizer_params=normalizer_params,
            env_steps=training_state.env_steps + sizes.env_steps_per_training_step,
        )
        return (new_training_state, state, new_key), metrics

    def training_epoch(training_state, state, key):
        (training_state, state, _), loss_metrics = jax.lax.scan(
            training_step, (training_state, state, key), (), length=sizes.steps_per_epoch
        )
        return training_state, state, jax.tree_util.tree_map(jnp.mean, loss_metrics)

    return jax.pmap(training_epoch, axis_name=AXIS, donate_argnums=(0, 1))


def timed(training_epoch: Callable, sizes: Sizes) -> Callable:
    """``training_epoch`` returning Brax's ``training/`` metrics: the loss means, ``sps`` and the summed
    ``walltime``."""
    walltime = 0.0

    def epoch(training_state, env_state, key):
        nonlocal walltime
        t = time.time()
        training_state, env_state = strip_weak_type((training_state, env_state))
        training_state, env_state, metrics = strip_weak_type(training_epoch(training_state, env_state, key))
        metrics = jax.tree_util.tree_map(jnp.mean, metrics)
        jax.tree_util.tree_map(lambda x: x.block_until_ready(), metrics)
        epoch_time = time.time() - t
        walltime += epoch_time
        sps = sizes.steps_per_epoch * sizes.env_steps_per_training_step / epoch_time
        return training_state, env_state, {"training/sps": sps, "training/walltime": walltime,
                                           **{f"training/{name}": value for name, value in metrics.items()}}

    return epoch


def check_sizes(num_timesteps: int, num_envs: int, batch_size: int, num_minibatches: int, devices: int) -> None:
    """InputError unless :func:`train` can run these sizes on ``devices`` devices (all processes')."""
    if num_timesteps <= 0:
        raise InputError(f"num_timesteps must be > 0, got {num_timesteps}")
    if batch_size * num_minibatches % num_envs:
        raise InputError(f"batch_size * num_minibatches must be a multiple of num_envs, got {batch_size}, "
                         f"{num_minibatches}, {num_envs}")
    if num_envs % devices:
        raise InputError(f"num_envs ({num_envs}) must be a multiple of the device count ({devices})")


def local_rows(num_local: int) -> slice:
    """This process's rows of an array with one row per device of all processes (process-major)."""
    return slice(jax.process_index() * num_local, (jax.process_index() + 1) * num_local)


def all_processes(env_state: Any) -> Any:
    """Every process's env states, leading axis (devices of all processes, ...); a collective: every process calls
    it."""
    if jax.process_count() == 1:
        return env_state
    return multihost_utils.process_allgather(env_state, tiled=True)


def _reset(env: Any, key: Array, num_envs: int, devices: list[jax.Device], use_pmap: bool) -> Any:
    """This process's share of ``num_envs`` env states (all processes'), leading axes (local devices, envs per
    device)."""
    keys = jax.random.split(key, num_envs)
    keys = jnp.reshape(keys, (len(devices) * jax.process_count(), -1) + keys.shape[1:])[local_rows(len(devices))]
    if len(devices) > 1 or use_pmap:
        return jax.pmap(env.reset, axis_name=AXIS)(keys)
    return jax.jit(jax.vmap(env.reset))(keys)


def _initial_training_state(ppo_network: Any, optimizer: Any, key_policy: Array, key_value: Array,
                            obs: Any) -> TrainingState:
    """Fresh networks, optimizer state and observation normalizer, as Brax's ``ppo.train`` makes them."""
    init_params = ppo_losses.PPONetworkParams(
        policy=ppo_network.policy_network.init(key_policy), value=ppo_network.value_network.init(key_value)
    )
    obs_spec = jax.tree_util.tree_map(lambda x: specs.Array(x.shape[-1:], jnp.dtype("float32")), obs)
    return TrainingState(
        optimizer_state=optimizer.init(init_params),
        params=init_params,
        normalizer_params=running_statistics.init_state(obs_spec, std_eps=0.0, mode="welford"),
        env_steps=types.UInt64(hi=0, lo=0),
    )


def _learner(ppo_network: Any, learning_rate: float, max_grad_norm: float | None,
             **loss: float) -> tuple[Any, Callable]:
    """``(optimizer, update_fn)``: Adam (after gradient clipping when ``max_grad_norm``) on Brax's
    PPO loss of ``ppo_network`` with ``loss``'s coefficients, its gradients averaged over the devices."""
    optimizer = optax.adam(learning_rate=learning_rate)
    if max_grad_norm is not None:
        optimizer = optax.chain(optax.clip_by_global_norm(max_grad_norm), optimizer)
    loss_fn = functools.partial(
        ppo_losses.compute_ppo_loss, ppo_network=ppo_network, **loss, normalize_advantage=True, vf_coefficient=0.5,
        clipping_epsilon_value=None, use_distributional_critic=False,
    )
    return optimizer, gradients.gradient_update_fn(loss_fn, optimizer, pmap_axis_name=AXIS, has_aux=True)


def _epochs(epoch: Callable, evaluator: acting.Evaluator, training_state: TrainingState, env_state: Any,
            key: Array | np.ndarray, total_steps: int, num_devices: int, first_eval: bool, progress_fn: Callable,
            checkpoint_fn: Callable) -> tuple[TrainingState, dict[str, Any]]:
    """Epochs from the current step to ``total_steps``; after each, a checkpoint and an eval (process 0
    only; every process takes part in gathering the env states). ``first_eval``: evaluate once before the first
    epoch."""
    current_step = int(unpmap(training_state.env_steps))
    metrics = {}
    if first_eval:  # the first eval: step 0, or the eval the restored checkpoint precedes
        metrics = evaluator.run_evaluation(_inference_params(training_state), training_metrics={})
        progress_fn(current_step, metrics)
    while current_step < total_steps:
        epoch_key, key = jax.random.split(key)
        epoch_keys = jax.random.split(epoch_key, num_devices * jax.process_count())[local_rows(num_devices)]
        training_state, env_state, training_metrics = epoch(training_state, env_state, epoch_keys)
        current_step = int(unpmap(training_state.env_steps))
        params = _inference_params(training_state)
        # Brax's Evaluator has no public accessor for the key its next run_evaluation splits
        # (brax 0.14.2, pinned): ``_key`` is read here only, to checkpoint it.
        state = LoopState(unpmap(training_state), all_processes(env_state), key, evaluator._key)
        # every process: each holds the same training state
        check_finite(current_step, jax.device_get(state.replace(env=())))
        if jax.process_index() != 0:
            continue
        checkpoint_fn(current_step, params, jax.device_get(state))
        metrics = evaluator.run_evaluation(params, training_metrics)
        progress_fn(current_step, metrics)
    return training_state, metrics


def _inference_params(training_state) -> Params:
    """Host copies: device arrays would tag the evaluator's state with the pmap mesh (a recompile)."""
    params = (training_state.normalizer_params, training_state.params.policy, training_state.params.value)
    return jax.device_get(unpmap(params))


def train(
    environment: Any, *, num_timesteps: int, episode_length: int, wrap_env_fn: Callable[..., Any],
    network_factory: Callable[..., ppo_networks.PPONetworks], seed: int = 0, num_envs: int = 1, batch_size: int = 32,
    num_minibatches: int = 16, unroll_length: int = 10, num_updates_per_batch: int = 2, learning_rate: float = 1e-4,
    entropy_cost: float = 1e-4, discounting: float = 0.9, gae_lambda: float = 0.95, clipping_epsilon: float = 0.3,
    max_grad_norm: float | None = None, reward_scaling: float = 1.0, normalize_observations: bool = False,
    num_evals: int = 1, num_eval_envs: int = 128, deterministic_eval: bool = False, use_pmap_on_reset: bool = True,
    max_devices_per_host: int | None = None,
    progress_fn: Callable[[int, dict[str, Any]], None] = lambda step, metrics: None,
    checkpoint_fn: Callable[[int, Params, LoopState], None] = lambda step, params, state: None,
    restore: Callable[[LoopState], LoopState] | None = None,
    wrap_eval_env_fn: Callable[..., Any] | None = None,
) -> tuple[Callable, Params, dict[str, Any]]:
    """PPO as ``ppo.train`` (same arguments and defaults), plus exact checkpoints and resume.

    ``checkpoint_fn(step, params, state)`` runs after every epoch (in process 0), before that step's eval;
    ``progress_fn(step, metrics)`` after every eval (step 0, or the restored step, first).
    ``restore(template)`` maps a fresh :class:`LoopState` (host arrays, the shapes this run needs)
    to the state to continue from. ``wrap_eval_env_fn`` wraps the evaluator's env (default:
    ``wrap_env_fn``; training-only reset changes such as demonstration starts stay out of the
    eval with a separate one). Returns ``(make_policy, params, last eval metrics)``.
    Epochs run until ``env_steps`` reaches ``(num_evals - 1)`` epochs of Brax's epoch size.
    """
    process_count, process_id = jax.process_count(), jax.process_index()
    devices = jax.local_devices()[: max_devices_per_host or None]
    check_sizes(num_timesteps, num_envs, batch_size, num_minibatches, len(devices) * process_count)
    num_evals_after_init = max(num_evals - 1, 1)
    epoch_steps = int(np.ceil(num_timesteps / (num_evals_after_init * batch_size * unroll_length * num_minibatches)))
    sizes = Sizes(num_envs, batch_size, num_minibatches, unroll_length, num_updates_per_batch, epoch_steps)
    total_steps = num_evals_after_init * sizes.steps_per_epoch * sizes.env_steps_per_training_step

    # Keys as ppo.train splits them, but for the process index Brax folds in: every process folds in
    # process 0's and takes its devices' rows of each split (see the module docstring).
    local_key: Array | np.ndarray  # a restored state's: host arrays
    eval_key: Array | np.ndarray
    global_key, local_key = jax.random.split(jax.random.PRNGKey(seed))
    local_key = jax.random.fold_in(local_key, 0)
    local_key, key_env, eval_key = jax.random.split(local_key, 3)
    key_policy, key_value = jax.random.split(global_key)

    env = wrap_env_fn(environment, episode_length=episode_length, action_repeat=1, randomization_fn=None)
    env_state = _reset(env, key_env, num_envs, devices, use_pmap_on_reset)
    obs_shape = jax.tree_util.tree_map(lambda x: x.shape[2:], env_state.obs)
    normalize = running_statistics.normalize if normalize_observations else (lambda x, y: x)
    ppo_network = network_factory(obs_shape, env.action_size, preprocess_observations_fn=normalize)
    optimizer, update_fn = _learner(
        ppo_network, learning_rate, max_grad_norm, entropy_cost=entropy_cost, discounting=discounting,
        reward_scaling=reward_scaling, gae_lambda=gae_lambda, clipping_epsilon=clipping_epsilon,
    )
    make_policy = ppo_networks.make_inference_fn(ppo_network)
    epoch = timed(training_epoch_fn(env, make_policy, update_fn, sizes, learning_rate), sizes)

    training_state = replicate(_initial_training_state(ppo_network, optimizer, key_policy, key_value,
                                                       env_state.obs), devices)
    if restore is not None:  # the template has the dtypes a checkpoint saves (e.g. float32, not Python floats)
        state = restore(jax.device_get(LoopState(unpmap(training_state), all_processes(env_state),
                                                 local_key, eval_key)))
        training_state = replicate(state.training, devices)
        env_state = jax.tree_util.tree_map(lambda x: x[local_rows(len(devices))], state.env)
        local_key, eval_key = state.key, state.eval_key
    # The env states as the epoch returns them (sharded over the local devices along axis 0), so
    # that every epoch, the first included and a restored one, runs the same executable: one compile.
    env_state = jax.device_put(env_state, device_sharding(devices))

    eval_env = (wrap_eval_env_fn or wrap_env_fn)(environment, episode_length=episode_length, action_repeat=1,
                                                 randomization_fn=None)
    evaluator = acting.Evaluator(
        eval_env, functools.partial(make_policy, deterministic=deterministic_eval), num_eval_envs=num_eval_envs,
        episode_length=episode_length, action_repeat=1, key=eval_key,
    )
    training_state, metrics = _epochs(
        epoch, evaluator, training_state, env_state, local_key, total_steps, len(devices),
        process_id == 0 and num_evals > 1, progress_fn, checkpoint_fn,
    )
    pmap.assert_is_replicated(training_state)
    params = _inference_params(training_state)
    pmap.synchronize_hosts()
    return make_policy, params, metrics
