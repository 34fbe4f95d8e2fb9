"""Jitted batched episodes, and ``so101-mjx rollout``.

:func:`run_episodes` runs ``num_envs`` worlds for one episode each (``lax.scan`` over control
steps, every world vmapped) and reports per-world outcomes: an episode ends at its first
``done`` (terminated) or at the last step; its success is ``info.succeed`` at that step.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from so101_mjx import _checks as checks, _progress
from so101_mjx.envs import SO101Env, State, default_config, make, scripted, task
from so101_mjx.errors import InputError
from so101_mjx.render.frames import check_video_path, render_trajectory

POLICIES = ("scripted", "demonstrator", "random", "zero")


def policy_fns(env: SO101Env, policy: str | Callable[[Array], Array]) -> tuple[Callable, Callable]:
    """``(init(state) -> cs, act(cs, state, key) -> (cs, action))`` for a named policy or an obs->action fn."""
    if callable(policy):
        return (lambda s: jnp.zeros(()), lambda cs, s, key: (cs, policy(s.obs)))
    if policy in ("scripted", "demonstrator"):
        init, act = scripted.controller_for(env, demonstrator=policy == "demonstrator")
        return lambda s: init(_flat(s)), lambda cs, s, key: act(cs, _flat(s))
    if policy == "random":
        lo, hi = env.arm.action_bounds()
        return (lambda s: jnp.zeros(()),
                lambda cs, s, key: (cs, jax.random.uniform(key, lo.shape, s.physics.qpos.dtype, lo, hi)))
    if policy == "zero":
        return (lambda s: jnp.zeros(()), lambda cs, s, key: (cs, env.arm.hold_action(s.physics)))
    raise InputError(f"policy must be one of {POLICIES} or a callable, got {policy!r}")


def _flat(state: State) -> State:
    """``state`` observing the flat observation (an ``image_obs`` env's dict holds it as ``"state"``):
    what the scripted controllers read."""
    return state.replace(obs=state.obs["state"]) if isinstance(state.obs, dict) else state


def run_episodes(
    env: SO101Env, policy: str | Callable, rng: Array, num_envs: int, steps: int | None = None,
    trajectory: bool = False, stop_when_done: bool = False, setting: str | None = None,
    progress: Callable[[int, int], None] | None = None, parameters: tuple[str, ...] = ("num_envs",),
) -> dict[str, Array]:
    """One episode in each of ``num_envs`` worlds (jitted).

    Returns ``success`` (B,) bool, ``returns`` (B,), ``length`` (B,) int, ``final_obs`` (B, obs)
    (at each episode's end) and, with ``trajectory``, ``states`` (every State after its step) and
    ``actions`` (B, T, 4), axes (B, T). ``stop_when_done`` (without ``trajectory``) scans in
    chunks of :data:`CHUNK_STEPS` and stops once every episode has ended: same results, less
    compute when episodes terminate early; ``progress(steps, ended)`` is then called after each chunk
    with the steps run and the episodes ended so far. ParameterError naming ``setting`` (default
    ``num_envs = N``; of ``parameters``) when the worlds would not fit the machine's memory (:func:`check_memory`).
    """
    steps = int(steps or env.episode_length)
    check_memory(env, num_envs, steps, trajectory, setting, parameters)
    init, act = policy_fns(env, policy)
    keys = jax.random.split(rng, num_envs)
    if not stop_when_done or trajectory:
        return _episodes(env, init, act, steps, trajectory)(keys)
    start, body = _episode_fns(env, init, act)
    advance = jax.jit(jax.vmap(lambda carry, keys: jax.lax.scan(body, carry, keys)[0]))
    carry, step_keys = jax.jit(jax.vmap(start, in_axes=(0, None)), static_argnums=1)(keys, steps)
    for t in range(0, steps, CHUNK_STEPS):
        carry = advance(carry, step_keys[:, t : t + CHUNK_STEPS])
        ended = int(jnp.sum(carry.ended))
        if progress is not None:
            progress(min(t + CHUNK_STEPS, steps), ended)
        if ended == num_envs:
            break
    return carry.outcome()


CHUNK_STEPS = 25


def check_memory(env: SO101Env, num_envs: int, steps: int, trajectory: bool, setting: str | None = None,
                 parameters: tuple[str, ...] = ("num_envs",)) -> None:
    """ParameterError naming ``setting`` (default ``num_envs = N``; of ``parameters``) unless the episodes' arrays
    fit the device's memory.

    Estimate: per world, its State twice (the step's input and output) plus, with ``trajectory``,
    one State and one action per step; XLA's buffer sizes for a PickPlace rollout match it within
    a few percent (its temporaries are a few bytes per world).
    """
    state = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(jax.eval_shape(env.reset, jax.random.PRNGKey(0))))
    per_step = (state + 4 * np.dtype(jnp.result_type(float)).itemsize) if trajectory else 0
    what = f"{state} B of State per world" + (f" and {per_step} B per step of the {steps}-step trajectory"
                                              if trajectory else "")
    checks.fits_memory(setting or f"num_envs = {num_envs}", num_envs * (2 * state + steps * per_step), what,
                       device=True, parameters=parameters)


class _Episode(NamedTuple):
    """One world's episode so far (a pytree: the scan carry)."""

    state: State
    controller: Any  # the policy's own state
    ended: Array  # () bool: a done was seen
    success: Array  # () bool: info.succeed at the episode's last step
    returns: Array  # ()
    length: Array  # () int32
    final_obs: Any  # (obs_size,) at the episode's last step (a dict with image_obs)

    def outcome(self) -> dict[str, Array]:
        return {"success": self.success, "returns": self.returns, "length": self.length, "final_obs": self.final_obs}


def _episode_fns(env: SO101Env, init, act):
    """Single-world ``start(key, steps) -> (_Episode, per-step keys (steps, 2))`` and the scan
    body ``(_Episode, key) -> (_Episode, (state, action))``."""

    def start(key, steps):
        key, reset_key = jax.random.split(key)
        state = env.reset(reset_key)
        false = jnp.zeros((), bool)
        episode = _Episode(state, init(state), false, false, jnp.zeros((), state.reward.dtype),
                           jnp.zeros((), jnp.int32), state.obs)
        return episode, jax.random.split(key, steps)

    def body(ep: _Episode, key):
        cs, action = act(ep.controller, ep.state, key)
        state = env.step(ep.state, action)
        live = ~ep.ended
        ep = _Episode(
            state, cs, ep.ended | (state.done > 0),
            jnp.where(live, state.info.succeed, ep.success),
            ep.returns + jnp.where(live, state.reward, 0.0),
            ep.length + live.astype(jnp.int32),
            jax.tree.map(lambda new, old: jnp.where(live, new, old), state.obs, ep.final_obs),
        )
        return ep, (state, action)

    return start, body


def _episodes(env: SO101Env, init, act, steps: int, trajectory: bool):
    """Jitted ``keys (B, 2) -> outcomes`` running all ``steps`` in one scan."""
    start, body = _episode_fns(env, init, act)

    def one(key):
        episode, keys = start(key, steps)
        if not trajectory:
            body_no_traj = lambda ep, k: (body(ep, k)[0], None)  # noqa: E731
            return jax.lax.scan(body_no_traj, episode, keys)[0].outcome()
        episode, (states, actions) = jax.lax.scan(body, episode, keys)
        return {**episode.outcome(), "states": states, "actions": actions}

    return jax.jit(jax.vmap(one))


def placement_config(name: str, random_positions: bool) -> dict:
    """``{"random_block_position": random_positions}`` for tasks whose config has that field, else ``{}``."""
    if "random_block_position" in {f.name for f in dataclasses.fields(default_config(name))}:
        return {"random_block_position": random_positions}
    return {}


def task_config(name: str, action_scale: float, random_positions: bool, policy: str | None = None) -> dict:
    """Config overrides for rollouts: the scripted controllers' action scale, random placements and, for
    ``policy`` ``"demonstrator"``, the config it needs (the task's ``demonstrator_config``)."""
    needs = task(name).demonstrator_config if policy == "demonstrator" else {}
    return {"action_scale": action_scale, **placement_config(name, random_positions), **needs}


def default_policy(env: SO101Env) -> str:
    """``scripted`` when the task has a scripted controller, else ``zero``."""
    return "scripted" if env.scripted_controller() is not None else "zero"


def rollout(env_name: str, num_envs: int = 64, steps: int | None = None, *, backend: str | None = None,
            policy: str | None = None, action_scale: float | None = None, random_positions: bool = True, seed: int = 0,
            video: str | None = None) -> dict[str, Array]:
    """One episode of ``steps`` control steps (default: the env's episode length) in each of ``num_envs`` worlds of
    ``env_name`` under ``policy`` (default: :func:`default_policy`), compiled ahead of time, then run and timed;
    prints the success rate and env-steps/s and, with ``video``, renders world 0 there (MuJoCo C). Returns
    :func:`run_episodes`'s outcomes (with ``video``, the trajectory too)."""
    if video:
        check_video_path(video)
    scale = scripted.DEFAULT_ACTION_SCALE if action_scale is None else action_scale
    env = make(env_name, backend=backend, **task_config(env_name, scale, random_positions, policy))
    steps = env.episode_length if steps is None else steps
    check_memory(env, num_envs, steps, video is not None, f"num_envs {num_envs} with steps {steps}",
                 ("num_envs", "steps"))
    policy = policy or default_policy(env)
    init, act = policy_fns(env, policy)
    fn = _episodes(env, init, act, steps, trajectory=video is not None)
    keys = jax.random.split(jax.random.PRNGKey(seed), num_envs)
    start = time.perf_counter()
    _progress.phase(f"rollout: compiling {num_envs} worlds x {steps} steps of {env_name} on {env.backend}")
    compiled = fn.lower(keys).compile()  # ahead of time: the episodes run once, timed on their own
    first = time.perf_counter() - start
    _progress.phase(f"rollout: running ({first:.0f} s to compile)")
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(keys))
    elapsed = time.perf_counter() - start
    success = np.asarray(out["success"])
    print(f"{env_name} backend={env.backend} policy={policy} worlds={num_envs} steps={steps}")
    print(f"  success rate {success.mean():.3f} ({success.sum()}/{success.size}), mean return "
          f"{float(np.mean(out['returns'])):.3f}")
    criterion = env.scripted_criterion(out["final_obs"]) if policy == "scripted" else None
    if criterion is not None:
        print(f"  {criterion[0]}: {float(np.mean(criterion[1])):.3f}")
    print(f"  compile {first:.1f} s; run {elapsed:.2f} s: "
          f"{num_envs * steps / elapsed:,.0f} env-steps/s, {num_envs * steps * env.n_substeps / elapsed:,.0f} "
          "physics steps/s")
    if video:
        Path(video).parent.mkdir(parents=True, exist_ok=True)
        states = out["states"]
        markers = {site: np.asarray(pos[0, 0]) for site, pos in env.marker_positions(states.info).items()}
        _progress.phase(f"rollout: rendering world 0's {steps} frames into {video}")
        render_trajectory(env, np.asarray(states.physics.qpos[0]), video, fps=round(1 / env.dt), site_pos=markers)
        print(f"  video of world 0: {video}")
    return out
