"""The PPO training loop, owned so that a run can stop at a checkpoint and resume exactly.

:func:`train` is ``brax.training.agents.ppo.train.train`` (brax 0.14.2) for the options the presets
use, with the same key splitting, the same jitted epoch (``pmap`` over the local devices) and the
same update order, so a fresh run gives Brax's params bitwise (tests/test_train.py). Everything
else is Brax's: networks and inference (``ppo_networks``), the loss (``ppo_losses.compute_ppo_loss``),
gradients (``gradients.gradient_update_fn``), acting (``acting.generate_unroll``, ``acting.Evaluator``),
the observation normalizer (``running_statistics``) and ``TrainingState``.

What the loop adds: after every epoch it hands ``checkpoint_fn`` a :class:`LoopState`, everything
the rest of the run depends on — the training state (params, Adam moments, normalizer, env steps),
the env states of the rollout, the loop's RNG key and the evaluator's key — and ``restore`` starts a
run from such a state. A run resumed from the checkpoint at step ``s`` re-runs the eval at ``s``
and continues as the uninterrupted run does, bitwise (tests/test_resume.py; on backend ``c``, and
on ``mjx`` as far as XLA is deterministic on the device).

Not supported (the presets use none of them): vision, pixel augmentation, Brax's
``randomization_fn`` (randomize the env instead), ``num_resets_per_eval``, the adaptive-KL learning
rate, ``bootstrap_on_timeout``, the distributional critic, training-metric logging. Exact resume
needs a single process (``jax.process_count() == 1``) and the same local device count.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from brax.training import acting, gradients, pmap, types
from brax.training.acme import running_statistics, specs
from brax.training.agents.ppo import losses as ppo_losses
from brax.training.agents.ppo import networks as ppo_networks
from brax.training.agents.ppo.train import TrainingState, _strip_weak_type, _unpmap

AXIS = "i"  # Brax's pmap axis name
EXTRA_FIELDS = ("truncation", "episode_metrics", "episode_done")
Params = tuple[Any, Any, Any]  # (normalizer, policy, value), as Brax's ppo.train returns them


@flax.struct.dataclass
class LoopState:
    """The training loop between two epochs, as host arrays.

    ``training``: Brax's ``TrainingState`` (one copy; it is replicated over devices).
    ``env``: the rollout's env states, leading axes (local devices, envs per device).
    ``key``: the loop's key (the next epoch's keys are split from it), uint32 (2,).
    ``eval_key``: the evaluator's key before the eval at this step, uint32 (2,).
    """

    training: TrainingState
    env: Any
    key: np.ndarray
    eval_key: np.ndarray


def train(
    environment: Any,
    *,
    num_timesteps: int,
    episode_length: int,
    wrap_env_fn: Callable[..., Any],
    network_factory: Callable[..., ppo_networks.PPONetworks],
    seed: int = 0,
    num_envs: int = 1,
    batch_size: int = 32,
    num_minibatches: int = 16,
    unroll_length: int = 10,
    num_updates_per_batch: int = 2,
    learning_rate: float = 1e-4,
    entropy_cost: float = 1e-4,
    discounting: float = 0.9,
    gae_lambda: float = 0.95,
    clipping_epsilon: float = 0.3,
    max_grad_norm: float | None = None,
    reward_scaling: float = 1.0,
    normalize_observations: bool = False,
    num_evals: int = 1,
    num_eval_envs: int = 128,
    deterministic_eval: bool = False,
    use_pmap_on_reset: bool = True,
    max_devices_per_host: int | None = None,
    progress_fn: Callable[[int, dict[str, Any]], None] = lambda step, metrics: None,
    checkpoint_fn: Callable[[int, Params, LoopState], None] = lambda step, params, state: None,
    restore: Callable[[LoopState], LoopState] | None = None,
    wrap_eval_env_fn: Callable[..., Any] | None = None,
) -> tuple[Callable, Params, dict[str, Any]]:
    """PPO as ``ppo.train`` (same arguments and defaults), plus exact checkpoints and resume.

    ``checkpoint_fn(step, params, state)`` runs after every epoch, before that step's eval;
    ``progress_fn(step, metrics)`` after every eval (step 0, or the restored step, first).
    ``restore(template)`` maps a fresh :class:`LoopState` (host arrays, the shapes this run needs)
    to the state to continue from. ``wrap_eval_env_fn`` wraps the evaluator's env (default:
    ``wrap_env_fn``; training-only reset changes such as demonstration starts stay out of the
    eval with a separate one). Returns ``(make_policy, params, last eval metrics)``.
    Epochs run until ``env_steps`` reaches ``(num_evals - 1)`` epochs of Brax's epoch size.
    """
    if num_timesteps <= 0:
        raise ValueError(f"num_timesteps must be > 0, got {num_timesteps}")
    if batch_size * num_minibatches % num_envs:
        raise ValueError(f"batch_size * num_minibatches must be a multiple of num_envs, got {batch_size}, {num_minibatches}, {num_envs}")
    process_count, process_id = jax.process_count(), jax.process_index()
    devices = jax.local_devices()[: max_devices_per_host or None]
    if num_envs % (len(devices) * process_count):
        raise ValueError(f"num_envs ({num_envs}) must be a multiple of the device count ({len(devices) * process_count})")
    if restore is not None and process_count > 1:
        raise ValueError("resume needs a single process (exact resume saves only this process's env states)")
    env_step_per_training_step = batch_size * unroll_length * num_minibatches
    num_evals_after_init = max(num_evals - 1, 1)
    num_training_steps_per_epoch = int(np.ceil(num_timesteps / (num_evals_after_init * env_step_per_training_step)))
    total_steps = num_evals_after_init * num_training_steps_per_epoch * env_step_per_training_step

    # Keys exactly as ppo.train splits them.
    global_key, local_key = jax.random.split(jax.random.PRNGKey(seed))
    local_key = jax.random.fold_in(local_key, process_id)
    local_key, key_env, eval_key = jax.random.split(local_key, 3)
    key_policy, key_value = jax.random.split(global_key)

    env = wrap_env_fn(environment, episode_length=episode_length, action_repeat=1, randomization_fn=None)
    key_envs = jax.random.split(key_env, num_envs // process_count)
    key_envs = jnp.reshape(key_envs, (len(devices), -1) + key_envs.shape[1:])
    if len(devices) > 1 or use_pmap_on_reset:
        env_state = jax.pmap(env.reset, axis_name=AXIS)(key_envs)
    else:
        env_state = jax.jit(jax.vmap(env.reset))(key_envs)
    obs_shape = jax.tree_util.tree_map(lambda x: x.shape[2:], env_state.obs)

    normalize = running_statistics.normalize if normalize_observations else (lambda x, y: x)
    ppo_network = network_factory(obs_shape, env.action_size, preprocess_observations_fn=normalize)
    make_policy = ppo_networks.make_inference_fn(ppo_network)
    optimizer = optax.adam(learning_rate=learning_rate)
    if max_grad_norm is not None:
        optimizer = optax.chain(optax.clip_by_global_norm(max_grad_norm), optimizer)
    loss_fn = functools.partial(
        ppo_losses.compute_ppo_loss, ppo_network=ppo_network, entropy_cost=entropy_cost, discounting=discounting,
        reward_scaling=reward_scaling, gae_lambda=gae_lambda, clipping_epsilon=clipping_epsilon,
        normalize_advantage=True, vf_coefficient=0.5, clipping_epsilon_value=None, use_distributional_critic=False,
    )
    update_fn = gradients.gradient_update_fn(loss_fn, optimizer, pmap_axis_name=AXIS, has_aux=True)

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
            return jnp.reshape(x, (num_minibatches, -1) + x.shape[1:])

        shuffled_data = jax.tree_util.tree_map(convert_data, data)
        (optimizer_state, params, _), metrics = jax.lax.scan(
            functools.partial(minibatch_step, normalizer_params=normalizer_params),
            (optimizer_state, params, key_grad), shuffled_data, length=num_minibatches,
        )
        return (optimizer_state, params, key), metrics

    def training_step(carry, unused_t):
        training_state, state, key = carry
        key_sgd, key_generate_unroll, new_key = jax.random.split(key, 3)
        policy = make_policy((training_state.normalizer_params, training_state.params.policy, training_state.params.value))

        def unroll(carry, unused_t):
            current_state, current_key = carry
            current_key, next_key = jax.random.split(current_key)
            next_state, data = acting.generate_unroll(
                env, current_state, policy, current_key, unroll_length, extra_fields=EXTRA_FIELDS
            )
            return (next_state, next_key), data

        (state, _), data = jax.lax.scan(
            unroll, (state, key_generate_unroll), (), length=batch_size * num_minibatches // num_envs
        )
        # Leading dimensions (batch_size * num_minibatches, unroll_length).
        data = jax.tree_util.tree_map(lambda x: jnp.swapaxes(x, 1, 2), data)
        data = jax.tree_util.tree_map(lambda x: jnp.reshape(x, (-1,) + x.shape[2:]), data)
        normalizer_params = running_statistics.update(
            training_state.normalizer_params, data.observation, pmap_axis_name=AXIS, until_count=None
        )
        (optimizer_state, params, _), metrics = jax.lax.scan(
            functools.partial(sgd_step, data=data, normalizer_params=normalizer_params),
            (training_state.optimizer_state, training_state.params, key_sgd), (), length=num_updates_per_batch,
        )
        new_training_state = TrainingState(
            optimizer_state=optimizer_state, params=params, normalizer_params=normalizer_params,
            env_steps=training_state.env_steps + env_step_per_training_step,
        )
        return (new_training_state, state, new_key), metrics

    def training_epoch(training_state, state, key):
        (training_state, state, _), loss_metrics = jax.lax.scan(
            training_step, (training_state, state, key), (), length=num_training_steps_per_epoch
        )
        return training_state, state, jax.tree_util.tree_map(jnp.mean, loss_metrics)

    training_epoch = jax.pmap(training_epoch, axis_name=AXIS, donate_argnums=(0, 1))
    training_walltime = 0.0

    def training_epoch_with_timing(training_state, env_state, key):
        nonlocal training_walltime
        t = time.time()
        training_state, env_state = _strip_weak_type((training_state, env_state))
        training_state, env_state, metrics = _strip_weak_type(training_epoch(training_state, env_state, key))
        metrics = jax.tree_util.tree_map(jnp.mean, metrics)
        jax.tree_util.tree_map(lambda x: x.block_until_ready(), metrics)
        epoch_time = time.time() - t
        training_walltime += epoch_time
        sps = num_training_steps_per_epoch * env_step_per_training_step / epoch_time
        metrics = {"training/sps": sps, "training/walltime": training_walltime,
                   **{f"training/{name}": value for name, value in metrics.items()}}
        return training_state, env_state, metrics

    init_params = ppo_losses.PPONetworkParams(
        policy=ppo_network.policy_network.init(key_policy), value=ppo_network.value_network.init(key_value)
    )
    obs_spec = jax.tree_util.tree_map(lambda x: specs.Array(x.shape[-1:], jnp.dtype("float32")), env_state.obs)
    training_state = TrainingState(
        optimizer_state=optimizer.init(init_params),
        params=init_params,
        normalizer_params=running_statistics.init_state(obs_spec, std_eps=0.0, mode="welford"),
        env_steps=types.UInt64(hi=0, lo=0),
    )
    training_state = jax.device_put_replicated(training_state, devices)
    if restore is not None:  # the template has the dtypes a checkpoint saves (e.g. float32, not Python floats)
        state = restore(jax.device_get(LoopState(_unpmap(training_state), env_state, local_key, eval_key)))
        training_state = jax.device_put_replicated(state.training, devices)
        env_state, local_key, eval_key = state.env, state.key, state.eval_key
    # The env states as the epoch returns them (sharded over the local devices along axis 0), so
    # that every epoch, the first included and a restored one, runs the same executable: one compile.
    mesh = jax.sharding.Mesh(np.asarray(devices), (AXIS,))
    env_state = jax.device_put(env_state, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(AXIS)))

    eval_env = (wrap_eval_env_fn or wrap_env_fn)(environment, episode_length=episode_length, action_repeat=1, randomization_fn=None)
    evaluator = acting.Evaluator(
        eval_env, functools.partial(make_policy, deterministic=deterministic_eval), num_eval_envs=num_eval_envs,
        episode_length=episode_length, action_repeat=1, key=eval_key,
    )

    def inference_params(training_state) -> Params:
        """Host copies: device arrays would tag the evaluator's state with the pmap mesh (a recompile)."""
        params = (training_state.normalizer_params, training_state.params.policy, training_state.params.value)
        return jax.device_get(_unpmap(params))

    current_step = int(_unpmap(training_state.env_steps))
    metrics = {}
    if process_id == 0 and num_evals > 1:  # the first eval: step 0, or the eval the restored checkpoint precedes
        metrics = evaluator.run_evaluation(inference_params(training_state), training_metrics={})
        progress_fn(current_step, metrics)

    while current_step < total_steps:
        epoch_key, local_key = jax.random.split(local_key)
        epoch_keys = jax.random.split(epoch_key, len(devices))
        training_state, env_state, training_metrics = training_epoch_with_timing(training_state, env_state, epoch_keys)
        current_step = int(_unpmap(training_state.env_steps))
        if process_id != 0:
            continue
        params = inference_params(training_state)
        # evaluator._key is the key its next run_evaluation splits (brax 0.14.2, pinned).
        state = LoopState(_unpmap(training_state), env_state, local_key, evaluator._key)
        checkpoint_fn(current_step, params, jax.device_get(state))
        metrics = evaluator.run_evaluation(params, training_metrics)
        progress_fn(current_step, metrics)

    pmap.assert_is_replicated(training_state)
    params = inference_params(training_state)
    pmap.synchronize_hosts()
    return make_policy, params, metrics
