"""``so101-mjx bench env``: batched env-steps/s vs raw ``mujoco.rollout`` and the reference env.

Figures from the same process, medians of ``--repeats`` runs:

- ours: jitted ``vmap(env.step)`` (IK + ``n_substeps`` physics + reward/obs) at each batch size;
  on backend ``c``, once per host loop (``mujoco.batch`` and our own thread pool) unless ``--loop``;
- raw MuJoCo C: ``mujoco.rollout`` and ``mujoco.batch.Batch.step`` over the same scene, batch and
  substeps with ctrl held (no IK, no Python per step): the ceiling for backend ``c``; all of these
  timed in alternation, ratios the medians of the per-round ratios;
- reference: ``lerobot_env_so101``'s gym env stepping one world in Python (when installed).

``--cost`` adds what XLA says about one jitted ``vmap(env.step)`` at each ``--cost-batch``
(compiled on abstract inputs, so nothing runs at those sizes): flops and bytes accessed, buffer
sizes, and the worlds that fit a 16 GB and an 80 GB card at that per-world footprint.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable
from typing import Any, cast

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array
from mujoco import batch as mj_batch, rollout

from so101_mjx import _progress
from so101_mjx.benchmarks import check_batches, compile_cost, interleaved_times, median_time, print_table
from so101_mjx.envs import make
from so101_mjx.envs.rollout import check_memory, placement_config
from so101_mjx.sim.physics import C_LOOPS, CPhysics
from so101_mjx.validation import reference

CARDS_GB = (16, 80)


def env_runner(env, batch: int, steps: int) -> tuple[Callable[[], Array], float]:
    """(a call running ``steps`` jitted env steps of ``batch`` worlds with random actions, seconds of
    the first jit of reset + step, their first runs included)."""
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

    return run, compile_s


def env_rate(env, batch: int, steps: int, repeats: int) -> tuple[float, float]:
    """(env-steps/s, seconds of the first jit of reset + step, their first runs included)."""
    run, compile_s = env_runner(env, batch, steps)
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
        rows.append([batch, c["lower_s"], c["compile_s"], c["compile_cpu_s"], c["flops"] / batch,
                     c["bytes_accessed"] / batch, c["argument_bytes"] / 2**20, c["temp_bytes"] / 2**20,
                     c["total_bytes"] / 2**20, per_world / 1024, *fits])
    return rows


def _initial_states(model: mujoco.MjModel, batch: int, spec: mujoco.mjtState) -> np.ndarray:
    """(batch, state size): the model's default state after ``mj_forward``, once per world."""
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    state0 = np.zeros(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, data, state0, spec)
    return np.tile(state0, (batch, 1))


def raw_rollout_runner(model: mujoco.MjModel, batch: int, n_substeps: int,
                       stack: contextlib.ExitStack) -> Callable[[], object]:
    """A call of ``mujoco.rollout`` on all threads: ``n_substeps`` physics steps of ``batch`` worlds
    from the model's default state, ctrl held (its thread pool lives as long as ``stack``)."""
    nthread = os.cpu_count() or 1
    states = _initial_states(model, batch, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    ctrl = np.zeros((batch, n_substeps, model.nu))
    runner = stack.enter_context(rollout.Rollout(nthread=nthread))
    datas = [mujoco.MjData(model) for _ in range(nthread)]
    return lambda: runner.rollout(model, datas, states, ctrl)


def raw_batch_runner(model: mujoco.MjModel, batch: int, n_substeps: int) -> Callable[[], None]:
    """The same as :func:`raw_rollout_runner` through ``mujoco.batch.Batch.step``."""
    sims = mj_batch.Batch(model, nsim=batch, nthread=os.cpu_count() or 1)
    states = _initial_states(model, batch, mujoco.mjtState.mjSTATE_INTEGRATION)

    def run():
        sims.state[:] = states
        sims.step(nstep=n_substeps)

    return run


def batch_rows(envs: dict[str | None, Any], batch: int, steps: int, repeats: int) -> list[list[Any]]:
    """One row per env of ``envs`` (by backend c loop): its rate and the raw baselines', all timed in
    alternation, ratios as medians of the per-round ratios."""
    model, n_substeps = next(iter(envs.values())).mj_model, next(iter(envs.values())).n_substeps
    with contextlib.ExitStack() as stack:
        runners = [env_runner(env, batch, steps) for env in envs.values()]
        raw = [raw_rollout_runner(model, batch, n_substeps, stack), raw_batch_runner(model, batch, n_substeps)]
        times = interleaved_times([*raw, *(run for run, _ in runners)], repeats)
    (rollout_s, batch_s), env_s = times[:2], times[2:]
    rate = lambda seconds, n: n / statistics.median(seconds)  # noqa: E731
    per_round = lambda base, seconds: statistics.median(steps * b / t for b, t in zip(base, seconds))  # noqa: E731
    rows: list[list[Any]] = []
    for loop, seconds, (_, compile_s) in zip(envs, env_s, runners):
        rows.append([batch, loop or "n/a", rate(seconds, batch * steps), rate(seconds, batch * steps * n_substeps),
                     rate(rollout_s, batch), rate(batch_s, batch), per_round(rollout_s, seconds),
                     per_round(batch_s, seconds), compile_s])
    return rows


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


def bench(name: str, batch: list[int], steps: int, repeats: int, *, backend: str | None = None, loop: str | None = None,
          ik_solver: str | None = None, reference_env: bool = True, cost_batch: list[int] | None = None) -> None:
    """Print env-steps/s of the env ``name`` on ``backend`` (None: the default) at each of the ``batch`` sizes,
    ``steps`` control steps per timed run (medians of ``repeats``), against raw MuJoCo C and, with
    ``reference_env``, the reference env; on backend c per host ``loop`` (None: each of ``C_LOOPS``).
    ``ik_solver``: the env's (None: the task's). With ``cost_batch``, XLA's cost and memory analysis at those batch
    sizes too. ParameterError naming ``batch`` when the largest would not fit the device."""
    placement = placement_config(name, random_positions=True)  # block tasks: random blocks at the scripted scale
    config = {"action_scale": 0.025, **placement} if placement else {}
    if ik_solver:
        config["ik_solver"] = ik_solver
    start = time.perf_counter()
    env = make(name, backend=backend, **config, **({"loop": loop} if loop else {}))
    make_s = time.perf_counter() - start
    loops = ([loop] if loop else list(C_LOOPS)) if env.backend == "c" else [None]
    # a loop is named on backend c only (its physics a CPhysics); another backend's one env serves loop None
    envs = {lp: env if lp is None or lp == cast(CPhysics, env.physics).loop
            else make(name, backend="c", loop=lp, **config) for lp in loops}
    check_memory(env, max(batch), steps, True, f"batch {max(batch)}", ("batch",))
    state_size = mujoco.mj_stateSize(env.mj_model, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    check_batches(batch, 8 * env.n_substeps * (state_size + env.mj_model.nsensordata + env.mj_model.nu),
                  "world of the raw mujoco.rollout (float64 states, sensors and ctrl of each substep)")
    ref_config = {**config, "top_down_ik": env.config.top_down_ik, "jaw_pads": env.config.jaw_pads}
    if reference_env:
        _progress.phase(f"bench env: {name} reference env")
    ref = reference_rate(name, ref_config) if reference_env else None
    rows: list[list[Any]] = []
    for n in batch:
        _progress.phase(f"bench env: batch {n}")
        rows += [row + ([ref, row[2] / ref] if ref else ["n/a", "n/a"]) for row in batch_rows(envs, n, steps, repeats)]
    cache_dir = jax.config.jax_compilation_cache_dir  # type: ignore[attr-defined, unused-ignore]  # typed in jax 0.12
    print(f"{name}, backend {env.backend}, ik_solver {env.config.ik_solver}, {env.n_substeps} substeps per env step, "
          f"JAX {jax.default_backend()}, "
          f"{os.cpu_count()} CPU threads; make (put_model for mjx) {make_s:.2f} s; "
          "persistent compilation cache: "
          f"{cache_dir or 'off (set JAX_COMPILATION_CACHE_DIR)'}")
    print_table(
        ["batch", "c loop", "env-steps/s", "physics/s", "raw rollout env-steps/s", "raw batch env-steps/s",
         "vs raw rollout", "vs raw batch", "first jit s", "reference env-steps/s", "vs reference"],
        rows,
    )
    if cost_batch:
        _progress.phase(f"bench env: compiling for XLA's cost analysis, batch {', '.join(map(str, cost_batch))}")
        print(f"\nXLA on {jax.default_backend()}, one jitted vmap(env.step), float32 (compiled on abstract "
              "inputs, not run); flops/bytes: XLA's static count, each loop body (substeps, solver, IK) ONCE; MiB: "
              "buffers of the call")
        print_table(
            ["batch", "lower s", "compile s", "compile cpu s", "flops/world", "bytes acc./world",
             "args MiB", "temp MiB", "total MiB", "KiB/world", *(f"worlds in {gb} GB" for gb in CARDS_GB)],
            cost_rows(env, cost_batch),
        )
