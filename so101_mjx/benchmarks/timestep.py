"""``so101-mjx bench timestep``: what a coarser physics step changes, per task, against the
reference's 2 ms (the first ``--physics-dt``), on backend ``c``.

For each physics step ``dt`` (the control period, 0.1 s in Cartesian mode, must be a whole number of
them):

- ``scripted``: the success rate of the task's demonstrator where it has one (PickCube: pick and lift),
  else of its scripted controller, closed loop, over ``--episodes`` random placements, in the env
  config of the task's default training preset (what a policy would train on);
- ``arm 1 step`` / ``arm episode`` (rad) and ``objects episode`` (m): the actions the controller took
  at the baseline step, replayed open loop from the same resets at ``dt``: the largest deviation of
  the arm's joints after the first control step and over the episodes (up to each one's end at the
  baseline step), and of the task's object state (``environment_state``: block and goal positions);
- ``env-steps/s`` and ``speedup``: control steps per second of that open-loop replay (jitted, compiled
  before it is timed), and their ratio against the baseline step in the same run (simulated time per
  wall second).
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from so101_mjx import _progress
from so101_mjx.benchmarks import print_table
from so101_mjx.envs import make, names
from so101_mjx.envs.base import SO101Env
from so101_mjx.envs.rollout import placement_config, run_episodes
from so101_mjx.training import presets


def _replay(env: SO101Env, reset_keys: jax.Array, actions: jax.Array) -> tuple[tuple[np.ndarray, np.ndarray], float]:
    """Arm joint angles (B, T, 5) and object state (B, T, n) of ``actions`` (B, T, A) from
    ``env.reset(reset_keys)``, and control steps per second of a second, timed run."""
    arm, agent = env.arm.qpos_ids, env.agent_pos_size

    def one(key, acts):
        def body(state, action):
            state = env.step(state, action)
            return state, (state.physics.qpos[arm], state.obs[agent:])

        return jax.lax.scan(body, env.reset(key), acts)[1]

    fn = jax.jit(jax.vmap(one))
    jax.block_until_ready(fn(reset_keys, actions))  # compiles
    start = time.perf_counter()
    out = jax.block_until_ready(fn(reset_keys, actions))
    joints, objects = (np.asarray(a) for a in out)
    return (joints, objects), actions.shape[0] * actions.shape[1] / (time.perf_counter() - start)


def study(name: str, physics_dts: list[float], episodes: int, seed: int = 0) -> list[dict]:
    """One row per physics step of ``physics_dts`` (the first is the baseline); see the module docstring."""
    rng = jax.random.PRNGKey(seed)
    reset_keys = jax.vmap(lambda k: jax.random.split(k)[1])(jax.random.split(rng, episodes))  # run_episodes' resets
    config = {**presets.preset(name).env_config, **placement_config(name, True)}
    rows: list[dict] = []
    for dt in physics_dts:
        env = make(name, "c", physics_dt=dt, **config)
        policy = "demonstrator" if env.demonstrator() is not None else "scripted"
        out = run_episodes(env, policy, rng, episodes, trajectory=not rows)  # the baseline's actions are replayed
        if not rows:
            actions, length = out["actions"], np.asarray(out["length"])
        (arm, objects), rate = _replay(env, reset_keys, actions)
        if not rows:
            base_arm, base_objects, base_rate = arm, objects, rate
        live = np.arange(arm.shape[1])[None, :] < np.maximum(length, 1)[:, None]  # (B, T) up to each end
        d_arm = np.abs(arm - base_arm).max(-1)
        d_obj = np.abs(objects - base_objects).max(-1) if objects.shape[-1] else np.zeros_like(d_arm)
        rows.append({"task": name, "physics_dt": dt, "substeps": env.n_substeps,
                     "scripted": float(np.mean(out["success"])),
                     "arm_1_step": float(d_arm[:, 0].max()), "arm_episode": float(np.where(live, d_arm, 0).max()),
                     "objects_episode": float(np.where(live, d_obj, 0).max()), "env_steps_per_s": rate,
                     "speedup": rate / base_rate})
    return rows


def bench(env: str | None, physics_dt: list[float], episodes: int, seed: int = 0) -> None:
    """Print :func:`study`'s rows of the task ``env`` (None: every registered task) for the physics steps
    ``physics_dt`` (s; the first is the baseline), ``episodes`` scripted episodes each."""
    tasks = names() if env is None else [env]
    rows = []
    for task in tasks:
        _progress.phase(f"bench timestep: {task}, {len(physics_dt)} physics steps x {episodes} episodes")
        rows += study(task, physics_dt, episodes, seed)
    print(f"physics step study, backend c, {jnp.result_type(float).name}, {episodes} scripted episodes per row; "
          f"deviations against {physics_dt[0] * 1000:g} ms (the same actions, the same resets)")
    print_table(["task", "dt ms", "substeps", "scripted", "arm 1 step rad", "arm episode rad", "objects episode m",
                 "env-steps/s", "speedup"],
                [[r["task"], r["physics_dt"] * 1000, r["substeps"], r["scripted"], r["arm_1_step"], r["arm_episode"],
                  r["objects_episode"], r["env_steps_per_s"], r["speedup"]] for r in rows])
