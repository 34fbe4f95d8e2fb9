"""The SAC training loop (off-policy), owned so that a run can stop at a checkpoint and resume exactly.

The algorithm is Brax's SAC (``brax.training.agents.sac``, brax 0.14.2): twin Q networks with a
Polyak-averaged target (``tau``), a learned entropy temperature (target entropy −½·action_size,
Adam at 3e-4), a tanh-normal policy, uniform replay, ``grad_updates_per_step`` gradient steps per
env step of all ``num_envs`` worlds. Everything but the loop is Brax's: the losses
(``sac_losses.make_losses``), the inference function (``sac_networks.make_inference_fn``), the
replay buffer (``replay_buffers.UniformSamplingQueue``), acting (``acting.actor_step``,
``acting.Evaluator``), gradients and the observation normalizer. Brax's own ``sac.train`` stops at
``jax.device_put_replicated`` under jax ≥ 0.10 and keeps its replay buffer out of reach of a
checkpoint; this loop runs jitted on one device and hands ``checkpoint_fn`` everything the rest of
the run depends on (:class:`LoopState`: the training state, the env states, the replay buffer and
both keys), so ``restore`` continues a run bitwise (tests/training/test_sac.py).

One process, one device: with several devices it uses the first (SAC's update is sequential; a
second device would only shard the env step). The checkpoint's replay buffer is
``max_replay_size × (2·obs_size + action_size + 3)`` float32.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Self

import flax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from brax.training import acting, gradients, replay_buffers, types
from brax.training.acme import running_statistics, specs
from brax.training.agents.sac import losses as sac_losses, networks as sac_networks
from brax.training.agents.sac.train import TrainingState
from jax import Array

from so101_mjx import _checks as checks
from so101_mjx.training.finite import check_finite, strip_weak_type
from so101_mjx.training.preset import check_sac_sizes, sac_schedule

ALPHA_LEARNING_RATE = 3e-4  # Brax's
Params = tuple[Any, Any, Any]  # (normalizer, policy, q): what the checkpoints hold


@flax.struct.dataclass
class LoopState:
    """The training loop between two epochs, as host arrays.

    ``training``: Brax's SAC ``TrainingState``. ``env``: the env states (num_envs, ...).
    ``buffer``: the replay buffer's ``ReplayBufferState``. ``key``: the loop's key, uint32 (2,).
    ``eval_key``: the evaluator's key before the eval at this step, uint32 (2,).
    """

    if TYPE_CHECKING:  # flax.struct.dataclass adds it at runtime

        def replace(self, **changes: Any) -> Self: ...

    training: TrainingState
    env: Any
    buffer: Any
    key: Array | np.ndarray  # device arrays in the loop, host arrays as checkpoint_fn and restore see them
    eval_key: Array | np.ndarray


def buffer_bytes(rows: int, obs_size: int, action_size: int) -> int:
    """Bytes of a replay buffer of ``rows`` transitions: obs, next obs, action, reward, discount, truncation,
    float32."""
    return rows * (2 * obs_size + action_size + 3) * 4


def check_memory(rows: int, obs_size: int, action_size: int) -> None:
    """InputError naming the memory a replay buffer of ``rows`` transitions needs unless it fits the
    device's memory and the host's (every checkpoint copies it to the host)."""
    what = f"a replay buffer of {rows:,} transitions x {2 * obs_size + action_size + 3} float32"
    setting, parameters = f"max_replay_size (default: num_timesteps) = {rows:,}", ("num_timesteps",)
    checks.fits_memory(setting, buffer_bytes(rows, obs_size, action_size), what, device=True, parameters=parameters)
    checks.fits_memory(setting, buffer_bytes(rows, obs_size, action_size),
                       what + ", copied to the host at every checkpoint", parameters=parameters)


def _initial_training_state(sac_network: Any, optimizers: dict[str, Any], key: Array, obs_size: int) -> TrainingState:
    """Fresh networks (target Q = Q), optimizer states, log α = 0 and normalizer, as Brax makes them."""
    key_policy, key_q = jax.random.split(key)
    log_alpha = jnp.asarray(0.0, dtype=jnp.float32)
    policy_params = sac_network.policy_network.init(key_policy)
    q_params = sac_network.q_network.init(key_q)
    return TrainingState(
        policy_optimizer_state=optimizers["policy"].init(policy_params), policy_params=policy_params,
        q_optimizer_state=optimizers["q"].init(q_params), q_params=q_params,
        target_q_params=jax.tree_util.tree_map(jnp.array, q_params),  # a copy: both are donated
        gradient_steps=types.UInt64(hi=0, lo=0), env_steps=types.UInt64(hi=0, lo=0),
        alpha_optimizer_state=optimizers["alpha"].init(log_alpha), alpha_params=log_alpha,
        normalizer_params=running_statistics.init_state(specs.Array((obs_size,), jnp.dtype("float32"))),
    )


def _sgd_step_fn(sac_network: Any, optimizers: dict[str, Any], action_size: int, discounting: float,
                 reward_scaling: float, tau: float) -> Callable:
    """One gradient step of Brax's SAC, in its order: temperature, critic, actor, then the target update."""
    alpha_loss, critic_loss, actor_loss = sac_losses.make_losses(sac_network, reward_scaling, discounting, action_size)
    alpha_update = gradients.gradient_update_fn(alpha_loss, optimizers["alpha"], pmap_axis_name=None)
    critic_update = gradients.gradient_update_fn(critic_loss, optimizers["q"], pmap_axis_name=None)
    actor_update = gradients.gradient_update_fn(actor_loss, optimizers["policy"], pmap_axis_name=None)

    def sgd_step(carry: tuple[TrainingState, Array], transitions: types.Transition):
        ts, key = carry
        key, key_alpha, key_critic, key_actor = jax.random.split(key, 4)
        a_loss, alpha_params, alpha_state = alpha_update(
            ts.alpha_params, ts.policy_params, ts.normalizer_params, transitions, key_alpha,
            optimizer_state=ts.alpha_optimizer_state)
        alpha = jnp.exp(ts.alpha_params)
        c_loss, q_params, q_state = critic_update(
            ts.q_params, ts.policy_params, ts.normalizer_params, ts.target_q_params, alpha, transitions, key_critic,
            optimizer_state=ts.q_optimizer_state)
        p_loss, policy_params, policy_state = actor_update(
            ts.policy_params, ts.normalizer_params, ts.q_params, alpha, transitions, key_actor,
            optimizer_state=ts.policy_optimizer_state)
        target = jax.tree_util.tree_map(lambda x, y: x * (1 - tau) + y * tau, ts.target_q_params, q_params)
        ts = ts.replace(
            policy_optimizer_state=policy_state, policy_params=policy_params, q_optimizer_state=q_state,
            q_params=q_params, target_q_params=target, gradient_steps=ts.gradient_steps + 1,
            alpha_optimizer_state=alpha_state, alpha_params=alpha_params)
        metrics = {"critic_loss": c_loss, "actor_loss": p_loss, "alpha_loss": a_loss, "alpha": jnp.exp(alpha_params)}
        return (ts, key), metrics

    return sgd_step


def _loop_fns(env: Any, make_policy: Callable, sgd_step: Callable, buffer: Any, num_envs: int,
              grad_updates_per_step: int, prefill_steps: int, epoch_steps: int) -> tuple[Callable, Callable]:
    """``(prefill, epoch)``, jitted, each ``(training_state, env_state, buffer_state, key) -> (...)``:
    ``prefill`` acts ``prefill_steps`` times with the initial policy; ``epoch`` runs ``epoch_steps``
    training steps (act once, then ``grad_updates_per_step`` gradient steps on fresh samples) and
    returns their mean metrics as well."""

    def experience(ts: TrainingState, env_state: Any, buffer_state: Any, key: Array):
        policy = make_policy((ts.normalizer_params, ts.policy_params))
        env_state, transitions = acting.actor_step(env, env_state, policy, key, extra_fields=("truncation",))
        ts = ts.replace(normalizer_params=running_statistics.update(ts.normalizer_params, transitions.observation),
                        env_steps=ts.env_steps + num_envs)
        return ts, env_state, buffer.insert(buffer_state, transitions)

    def prefill(ts, env_state, buffer_state, key):
        def act(carry, _):
            ts, env_state, buffer_state, key = carry
            key, step_key = jax.random.split(key)
            return (*experience(ts, env_state, buffer_state, step_key), key), ()

        return jax.lax.scan(act, (ts, env_state, buffer_state, key), (), length=prefill_steps)[0][:3]

    def training_step(carry, _):
        ts, env_state, buffer_state, key = carry
        key, experience_key, training_key = jax.random.split(key, 3)
        ts, env_state, buffer_state = experience(ts, env_state, buffer_state, experience_key)
        buffer_state, transitions = buffer.sample(buffer_state)
        transitions = jax.tree_util.tree_map(
            lambda x: jnp.reshape(x, (grad_updates_per_step, -1) + x.shape[1:]), transitions)
        (ts, _), metrics = jax.lax.scan(sgd_step, (ts, training_key), transitions)
        return (ts, env_state, buffer_state, key), metrics

    def epoch(ts, env_state, buffer_state, key):
        (ts, env_state, buffer_state, _), metrics = jax.lax.scan(
            training_step, (ts, env_state, buffer_state, key), (), length=epoch_steps)
        metrics = jax.tree_util.tree_map(jnp.mean, metrics)
        return ts, env_state, buffer_state, {**metrics, "buffer_size": buffer.size(buffer_state)}

    return jax.jit(prefill, donate_argnums=(0, 1, 2)), jax.jit(epoch, donate_argnums=(0, 1, 2))


def _epochs(epoch: Callable, evaluator: acting.Evaluator, state: LoopState, env_steps_per_epoch: int,
            total_steps: int, first_eval: bool, progress_fn: Callable,
            checkpoint_fn: Callable) -> tuple[LoopState, dict]:
    """Epochs until ``total_steps`` env steps; after each, a checkpoint, then an eval. ``first_eval``:
    evaluate once before the first epoch (step 0, or the eval the restored checkpoint precedes)."""
    ts, env_state, buffer_state, key = state.training, state.env, state.buffer, state.key
    step, walltime, metrics = int(ts.env_steps), 0.0, {}
    if first_eval:
        metrics = evaluator.run_evaluation(_params(ts), training_metrics={})
        progress_fn(step, metrics)
    while step < total_steps:
        epoch_key, key = jax.random.split(key)
        start = time.time()
        ts, env_state, buffer_state, training = strip_weak_type(epoch(ts, env_state, buffer_state, epoch_key))
        training = jax.device_get(training)
        walltime += time.time() - start
        step = int(ts.env_steps)
        training = {"sps": env_steps_per_epoch / (time.time() - start), "walltime": walltime, **training}
        state = LoopState(ts, env_state, buffer_state, key, evaluator._key)  # brax 0.14.2: no public accessor
        host = jax.device_get(state)
        check_finite(step, host.replace(env=()))  # training state and replay buffer
        checkpoint_fn(step, _params(ts), host)
        metrics = evaluator.run_evaluation(_params(ts), {f"training/{k}": v for k, v in training.items()})
        progress_fn(step, metrics)
    return state, metrics


def _params(ts: TrainingState) -> Params:
    """Host copies of ``(normalizer, policy, q)``."""
    return jax.device_get((ts.normalizer_params, ts.policy_params, ts.q_params))


def train(
    environment: Any, *, num_timesteps: int, episode_length: int, wrap_env_fn: Callable[..., Any],
    network_factory: Callable[..., sac_networks.SACNetworks], seed: int = 0, num_envs: int = 1,
    batch_size: int = 256, grad_updates_per_step: int = 1, learning_rate: float = 1e-4, discounting: float = 0.9,
    tau: float = 0.005, reward_scaling: float = 1.0, normalize_observations: bool = False, min_replay_size: int = 0,
    max_replay_size: int | None = None, num_evals: int = 1, num_eval_envs: int = 128, deterministic_eval: bool = False,
    progress_fn: Callable[[int, dict[str, Any]], None] = lambda step, metrics: None,
    checkpoint_fn: Callable[[int, Params, LoopState], None] = lambda step, params, state: None,
    restore: Callable[[LoopState], LoopState] | None = None,
    wrap_eval_env_fn: Callable[..., Any] | None = None,
) -> tuple[Callable, Params, dict[str, Any]]:
    """SAC with Brax's ``sac.train`` arguments and defaults, plus exact checkpoints and resume.

    ``checkpoint_fn(step, params, state)`` runs after every epoch, before that step's eval;
    ``progress_fn(step, metrics)`` after every eval. ``restore(template)`` maps a fresh
    :class:`LoopState` (host arrays) to the state to continue from. ``wrap_eval_env_fn`` wraps the
    evaluator's env (default ``wrap_env_fn``). Returns ``(make_policy, params, last eval metrics)``,
    params ``(normalizer, policy, q)``.
    """
    check_sac_sizes(num_timesteps, num_envs, min_replay_size, max_replay_size)
    prefill_steps, epoch_steps = sac_schedule(num_timesteps, num_envs, min_replay_size, num_evals)
    total_steps = (prefill_steps + max(num_evals - 1, 1) * epoch_steps) * num_envs
    device = jax.local_devices()[0]
    global_key, local_key = jax.random.split(jax.random.PRNGKey(seed))
    local_key, buffer_key, env_key, eval_key = jax.random.split(local_key, 4)

    env = wrap_env_fn(environment, episode_length=episode_length, action_repeat=1, randomization_fn=None)
    obs_size, action_size = env.observation_size, env.action_size
    check_memory(max_replay_size or num_timesteps, obs_size, action_size)
    normalize = running_statistics.normalize if normalize_observations else (lambda x, _: x)
    sac_network = network_factory(obs_size, action_size, preprocess_observations_fn=normalize)
    acting_policy = sac_networks.make_inference_fn(sac_network)  # of (normalizer, policy)

    def make_policy(params: Params, deterministic: bool = False):
        return acting_policy(params[:2], deterministic)

    optimizers = {"alpha": optax.adam(ALPHA_LEARNING_RATE), "policy": optax.adam(learning_rate),
                  "q": optax.adam(learning_rate)}
    dummy_obs, dummy_action = jnp.zeros((obs_size,)), jnp.zeros((action_size,))
    buffer = replay_buffers.UniformSamplingQueue(
        max_replay_size=max_replay_size or num_timesteps, sample_batch_size=batch_size * grad_updates_per_step,
        dummy_data_sample=types.Transition(
            observation=dummy_obs, action=dummy_action, reward=0.0, discount=0.0, next_observation=dummy_obs,
            extras={"state_extras": {"truncation": 0.0}, "policy_extras": {}}))
    sgd_step = _sgd_step_fn(sac_network, optimizers, action_size, discounting, reward_scaling, tau)
    prefill, epoch = _loop_fns(env, acting_policy, sgd_step, buffer, num_envs, grad_updates_per_step,
                               prefill_steps, epoch_steps)

    with jax.default_device(device):
        state = LoopState(
            _initial_training_state(sac_network, optimizers, global_key, obs_size),
            jax.jit(env.reset)(jax.random.split(env_key, num_envs)), buffer.init(buffer_key), local_key, eval_key)
        state = strip_weak_type(state)
        if restore is not None:
            state = jax.device_put(restore(jax.device_get(state)), device)
        eval_env = (wrap_eval_env_fn or wrap_env_fn)(environment, episode_length=episode_length, action_repeat=1,
                                                     randomization_fn=None)
        evaluator = acting.Evaluator(
            eval_env, functools.partial(make_policy, deterministic=deterministic_eval), num_eval_envs=num_eval_envs,
            episode_length=episode_length, action_repeat=1, key=state.eval_key)
        first_eval = num_evals > 1
        if restore is None:
            if first_eval:
                progress_fn(0, evaluator.run_evaluation(_params(state.training), training_metrics={}))
                first_eval = False
            prefill_key, key = jax.random.split(state.key)
            state = state.replace(key=key, **dict(zip(("training", "env", "buffer"), strip_weak_type(
                prefill(state.training, state.env, state.buffer, prefill_key)))))
        state, metrics = _epochs(epoch, evaluator, state, epoch_steps * num_envs, total_steps, first_eval,
                                 progress_fn, checkpoint_fn)
    return make_policy, _params(state.training), metrics
