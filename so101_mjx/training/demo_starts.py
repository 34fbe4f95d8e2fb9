"""Demonstration-seeded starts: training episodes that begin part-way along a scripted solution.

Sparse-to-staged tasks (PickPlace, StackCube) make PPO explore a long chain (reach, grasp, lift,
carry, lower, release) before it sees the later rewards. With ``demo_start_prob`` p > 0, a training
reset starts, with probability p, from a state drawn uniformly from a *bank*: every non-terminal
state along the task's demonstrator's **successful** episodes (``SO101Env.demonstrator``: the
scripted controller, or for PickCube a pick-and-lift one; from the task's normal
reset, under the run's env config). The rest start from the normal reset. Opt-in
(``Preset.demo_start_prob``; 0 by default) and training only: evaluation, export and replay
always reset normally.

:func:`scripted_bank` builds the bank; :class:`~so101_mjx.envs.wrappers.TrainingEnv` (``starts``,
``start_prob``) draws from it. A bank state keeps the physics, observation and task bookkeeping of
its step (block height at reset, goal, ``was_carried``, this episode's model params); its episode
counters, RNG and non-finite-action count are the fresh reset's.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from so101_mjx import _checks as checks
from so101_mjx.envs.rollout import run_episodes
from so101_mjx.errors import InputError
from so101_mjx.sim.state import State

MAX_BANK = 4096  # states kept (subsampled uniformly): the bank is a constant of the jitted step


def scripted_bank(env, rng: Array, episodes: int = 256, max_states: int = MAX_BANK) -> State:
    """States (M,) along the successful episodes of ``env``'s demonstrator.

    Runs ``episodes`` worlds for one episode each from ``env.reset``; keeps the states after each
    step before the episode's last (the last one is terminal), then at most ``max_states`` of them,
    chosen without replacement with ``rng``. ValueError when no episode succeeds (the bank would be
    empty: the task's controller does not solve it under this config).
    """
    checks.integer("episodes", episodes, ge=1)
    checks.integer("max_states", max_states, ge=1)
    run_key, pick_key = jax.random.split(rng)
    out = run_episodes(env, "demonstrator", run_key, episodes, trajectory=True)
    success, length = np.asarray(out["success"]), np.asarray(out["length"])
    steps = np.arange(out["actions"].shape[1])
    keep = success[:, None] & (steps[None, :] < length[:, None] - 1)  # (B, T)
    if not keep.any():
        raise InputError(f"demo starts: the demonstrator of {env.name} solved none of {episodes} episodes "
                         "under this env config, so there is no demonstration to start from")
    index = np.flatnonzero(keep.reshape(-1))
    if len(index) > max_states:
        index = np.sort(np.asarray(jax.random.choice(pick_key, index, (max_states,), replace=False)))
    return jax.tree.map(lambda x: jnp.asarray(np.asarray(x).reshape(-1, *x.shape[2:])[index]), out["states"])
