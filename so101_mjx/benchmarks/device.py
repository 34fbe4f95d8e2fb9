"""``so101-mjx bench device [--smoke]``: the prepared accelerator check, written as JSON + markdown.

Sections, in order, each with a deadline (cumulative shares of ``--budget-s``, default 480 s, so the
whole check ends in 8 minutes); a section that fails or runs out of time is recorded in the JSON
and the next one runs:

- ``env``: env-steps/s and physics-steps/s of PickCube and PickPlace on backend ``mjx`` (impl
  ``jax``, and ``warp`` when mujoco_warp is installed) at ``--worlds``, random and scripted actions.
  One compiled program per (env, impl, worlds) resets and runs ``--steps`` control steps; it
  computes both policies every step and a traced flag picks one, so both share one compile. Per
  program: first-jit seconds (lower + compile), XLA's buffer sizes, peak device memory so far.
- ``pixels``: env-steps/s of PickCube with ``image_obs=True`` (64×64 ``shadowed`` front camera;
  MuJoCo Warp's batch renderer on backend ``mjx``) at ``--pixel-worlds``, random and scripted actions;
  skipped on ``mjx`` without mujoco_warp.
- ``ik``: LM IK solves/s (:mod:`so101_mjx.benchmarks.ik`) at 65,536 and 1,048,576 targets.
- ``dynamics``: M, C, g, ID, FD, regressor evaluations/s (:mod:`so101_mjx.benchmarks.dynamics`) at 65,536.
- ``reach_ppo``: PPO on SO101Reach-v0 for 5M env steps (the ``gpu`` preset): success, wall time.
- ``pickcube_ppo``: PickCube's ``gpu`` preset, stopped at the remaining budget: success curve so far.

PPO runs ``train.ppo.train`` in a child process, killed at its deadline (its ``metrics.csv`` is
the curve so far). ``--smoke`` runs everything at tiny sizes (``tiny`` presets) on whatever
backend is available, so the script is tested on CPU.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np

from so101_mjx._files import atomic_write
from so101_mjx.benchmarks import compile_cost, dynamics as dynamics_bench, ik as ik_bench, peak_device_bytes
from so101_mjx.envs import make, rollout, scripted
from so101_mjx.errors import ParameterError
from so101_mjx.render.warp import warp_available
from so101_mjx.sim.physics import default_backend

ENVS = ("SO101PickCube-v0", "SO101PickPlace-v0")
POLICIES = ("random", "scripted")
# Cumulative deadlines as shares of the budget; what a section leaves unused goes to the next one.
DEADLINES = {"env": 0.30, "pixels": 0.38, "ik": 0.42, "dynamics": 0.47, "reach_ppo": 0.72, "pickcube_ppo": 0.97}
ANCHORS = (
    "MuJoCo Playground PandaPickCube: trains in ~3 min on an RTX 4090 (20M steps, 2048 envs); "
    "~64k env-steps/s state-only at 1024 envs",
    "MuJoCo Warp: ~1.98M steps/s on a contact-rich scene at 8192 worlds",
)


@dataclasses.dataclass(frozen=True)
class Sizes:
    """What one run measures."""

    worlds: tuple[int, ...]
    pixel_worlds: tuple[int, ...]
    steps: int  # control steps per env program
    ik_targets: tuple[int, ...]
    dynamics_batch: int
    dynamics_quantities: tuple[str, ...]
    reach_steps: int | None  # PPO env steps for Reach (None: the preset's own)
    preset: str  # PPO preset of both runs
    repeats: int


FULL = Sizes((1024, 4096, 16384), (1024, 4096), 25, (65_536, 1_048_576), 65_536, dynamics_bench.QUANTITIES,
             5_000_000, "gpu", 3)
SMOKE = Sizes((2,), (2,), 2, (64,), 16, ("M", "FD"), None, "tiny", 1)


def env_program(env, steps: int) -> Callable:
    """``program(keys (B, 2), scripted () bool) -> {success, length}``: reset and ``steps`` control steps per world."""
    init, act_scripted = rollout.policy_fns(env, "scripted")
    _, act_random = rollout.policy_fns(env, "random")

    def program(keys, use_scripted):
        def act(cs, state, key):
            cs, a = act_scripted(cs, state, key)
            return cs, jnp.where(use_scripted, a, act_random(cs, state, key)[1])

        start, body = rollout._episode_fns(env, init, act)

        def one(key):
            episode, step_keys = start(key, steps)
            return jax.lax.scan(lambda ep, k: (body(ep, k)[0], None), episode, step_keys)[0].outcome()

        out = jax.vmap(one)(keys)
        return {"success": jnp.mean(out["success"]), "length": jnp.mean(out["length"])}

    return program


def measure_env(env, worlds: int, steps: int) -> dict[str, Any]:
    """First-jit seconds, XLA buffer sizes, env-/physics-steps/s per policy of one env program."""
    keys = jax.random.split(jax.random.PRNGKey(0), worlds)
    flag = jax.ShapeDtypeStruct((), jnp.bool_)
    compiled, cost = compile_cost(env_program(env, steps), jax.ShapeDtypeStruct(keys.shape, keys.dtype), flag)
    row: dict[str, Any] = {"first_jit_s": cost["lower_s"] + cost["compile_s"],
                           "xla_total_bytes": cost.get("total_bytes")}
    jax.block_until_ready(compiled(keys, jnp.asarray(False)))  # first run: device module loading
    for policy in POLICIES:
        start = time.perf_counter()
        out = jax.block_until_ready(compiled(keys, jnp.asarray(policy == "scripted")))
        seconds = time.perf_counter() - start
        row[policy] = {"env_steps_per_s": worlds * steps / seconds,
                       "physics_steps_per_s": worlds * steps * env.n_substeps / seconds,
                       "success": float(out["success"]), "seconds": seconds}
    row["peak_device_bytes"] = peak_device_bytes()
    return row


def env_section(sizes: Sizes, backend: str, deadline: float) -> dict[str, Any]:
    impls = (("jax", "warp") if warp_available() else ("jax",)) if backend == "mjx" else ("-",)
    bases: dict[str, Any] = {}  # one env per task (its default impl), rebuilt for the other impl
    envs: dict[tuple[str, str], Any] = {}
    rows, last = [], None  # (worlds, first-jit s, run s) of the last program measured: the time estimate
    for name in ENVS:
        for impl in impls:
            for worlds in sizes.worlds:
                row: dict[str, Any] = {"env": name, "impl": impl, "worlds": worlds}
                rows.append(row)
                estimate = 0.0 if last is None else last[1] + last[2] * max(1.0, worlds / last[0])
                if time.perf_counter() + estimate > deadline:
                    row["status"] = "skipped (time budget)"
                    continue
                start = time.perf_counter()
                try:
                    if name not in bases:
                        bases[name] = make(name, backend=backend,
                                           **rollout.task_config(name, scripted.DEFAULT_ACTION_SCALE, True))
                    if (name, impl) not in envs:
                        base = bases[name]
                        same = impl in ("-", getattr(base.physics, "impl", "-"))
                        envs[name, impl] = base if same else type(base)(base.config, backend, impl=impl)
                    row |= measure_env(envs[name, impl], worlds, sizes.steps) | {"status": "ok"}
                    last = (worlds, row["first_jit_s"], time.perf_counter() - start - row["first_jit_s"])
                except Exception as err:  # recorded, the next program runs
                    row["status"] = f"failed: {type(err).__name__}: {err}"
                    row["traceback"] = traceback.format_exc(limit=6)
    n_substeps = {name: env.n_substeps for (name, _), env in envs.items()}
    return {"backend": backend, "steps": sizes.steps, "n_substeps": n_substeps, "rows": rows}


def pixels_section(sizes: Sizes, backend: str, deadline: float) -> dict[str, Any]:
    """PickCube env-steps/s with 64×64 camera frames in the observation."""
    if backend == "mjx" and not warp_available():
        return {"status": "skipped: image_obs on mjx needs mujoco_warp (pip install 'so101-mjx[warp]')"}
    config = rollout.task_config("SO101PickCube-v0", scripted.DEFAULT_ACTION_SCALE, True)
    env = make("SO101PickCube-v0", backend=backend, image_obs=True, image_size=64, image_quality="shadowed", **config)
    rows = []
    for worlds in sizes.pixel_worlds:
        row = {"env": env.name, "worlds": worlds, "image": "64x64 shadowed front"}
        rows.append(row)
        if time.perf_counter() > deadline:
            row["status"] = "skipped (time budget)"
            continue
        try:
            row |= measure_env(env, worlds, sizes.steps) | {"status": "ok"}
        except Exception as err:  # recorded, the next size runs
            row["status"] = f"failed: {type(err).__name__}: {err}"
            row["traceback"] = traceback.format_exc(limit=6)
    return {"backend": backend, "steps": sizes.steps, "rows": rows}


def ik_section(sizes: Sizes, deadline: float) -> dict[str, Any]:
    from so101_mjx.ik import iterative as ik
    from so101_mjx.robot.kinematics import Kinematics
    from so101_mjx.robot.scenes import ARM_JOINTS, load_model

    model = load_model("pick_cube")
    kin = Kinematics.from_model(model, ARM_JOINTS)
    lo, hi = ik.joint_limits(model)
    targets = ik_bench.random_targets(kin, lo, hi, max(sizes.ik_targets))
    rows = []
    for n in sizes.ik_targets:
        if time.perf_counter() > deadline:
            rows.append({"batch": n, "status": "skipped (time budget)"})
            continue
        rows += [r | {"status": "ok"}
                 for r in ik_bench.jax_rates(kin, lo, hi, targets, [n], jnp.float32, sizes.repeats)]
    return {"rows": rows}


def dynamics_section(sizes: Sizes, deadline: float) -> dict[str, Any]:
    from so101_mjx.dynamics.backend import JaxBackend
    from so101_mjx.dynamics.mujoco_backend import MujocoBackend

    jb, mb = JaxBackend(), MujocoBackend()
    inputs = dynamics_bench.sample(jb, mb, sizes.dynamics_batch, np.random.default_rng(0))
    rates: dict[str, float] = {}
    skipped: list[str] = []
    for k in sizes.dynamics_quantities:
        if time.perf_counter() > deadline:
            skipped.append(k)
            continue
        rates |= dynamics_bench.jax_rates(jb, inputs, jnp.float32, sizes.repeats, (k,))
    return ({"batch": sizes.dynamics_batch, "evals_per_s": rates}
            | ({"skipped (time budget)": skipped} if skipped else {}))


def _train_child(env_name: str, preset_name: str, preset, out: str, backend: str) -> None:
    from so101_mjx.training import ppo

    ppo.train(env_name, preset_name, preset, Path(out), backend=backend, seed=0)


def ppo_run(env_name: str, preset_name: str, preset, out: Path, backend: str, timeout: float) -> dict[str, Any]:
    """``train.ppo.train`` in a spawned child, killed after ``timeout`` s; the eval curve it wrote."""
    from so101_mjx.training.progress import CSV_FILE, read_csv

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # the child shares the device with this process
    child = multiprocessing.get_context("spawn").Process(target=_train_child,
                                                         args=(env_name, preset_name, preset, str(out), backend))
    start = time.perf_counter()
    with mock.patch.dict(os.environ, {"PYTHONSAFEPATH": "1"}):  # the child never imports from the working directory
        child.start()
    child.join(max(timeout, 0.0))
    stopped = child.is_alive()
    if stopped:
        child.kill()
        child.join()
    rows = read_csv(out / CSV_FILE) if (out / CSV_FILE).exists() else []
    curve = [{"step": int(r["step"]), "wall_s": r["wall_s"], "eval_success": r["eval_success"]} for r in rows]
    return {
        "status": "stopped at the time budget" if stopped
        else ("ok" if child.exitcode == 0 else f"failed: exit code {child.exitcode}"),
        "env": env_name, "preset": preset_name, "planned_steps": preset.total_steps, "num_envs": preset.num_envs,
        "wall_s": time.perf_counter() - start, "curve": curve,
        "final_success": curve[-1]["eval_success"] if curve else None, "steps_done": curve[-1]["step"] if curve else 0,
    }


def ppo_presets(sizes: Sizes) -> dict[str, Any]:
    """The Reach and PickCube presets of the two runs (derived from ``train.config``)."""
    from so101_mjx.training import presets

    reach, pick = (cast(presets.Preset, presets.preset(env, sizes.preset, "ppo"))  # algo "ppo": a Preset
                   for env in ("SO101Reach-v0", "SO101PickCube-v0"))
    if sizes.reach_steps is not None:  # as few epochs (2-10) as come closest to reach_steps
        candidates = [dataclasses.replace(reach, num_timesteps=sizes.reach_steps, num_evals=k + 1)
                      for k in range(2, 11)]
        reach = min(candidates, key=lambda p: (p.total_steps, -p.num_evals))
    if sizes.preset != "tiny":  # epochs of two PPO updates: several evals before the budget stops the run
        per_update = pick.batch_size * pick.num_minibatches * pick.unroll_length
        pick = dataclasses.replace(pick, num_evals=-(-pick.num_timesteps // (2 * per_update)) + 1)
    return {"SO101Reach-v0": reach, "SO101PickCube-v0": pick}


def bench(out: str | Path, budget_s: float, *, smoke: bool = False, backend: str | None = None,
          worlds: list[int] | None = None, pixel_worlds: list[int] | None = None,
          steps: int | None = None) -> dict[str, Any]:
    """Run every section within ``budget_s`` wall seconds at :data:`FULL` sizes (:data:`SMOKE` with ``smoke``;
    ``worlds``, ``pixel_worlds`` and ``steps`` replace theirs) on ``backend`` (None: mjx; with ``smoke``, the
    default backend), writing device.json, device.md and the PPO runs under ``out``; returns the JSON's result.
    ParameterError naming ``out`` when it holds an earlier run."""
    sizes = SMOKE if smoke else FULL
    sizes = dataclasses.replace(sizes, worlds=tuple(worlds or sizes.worlds),
                                pixel_worlds=tuple(pixel_worlds or sizes.pixel_worlds), steps=steps or sizes.steps)
    backend = backend or (default_backend() if smoke else "mjx")
    out = Path(out)
    for run_dir in (out / "reach_ppo", out / "pickcube_ppo"):
        if run_dir.is_dir() and any(run_dir.iterdir()):
            raise ParameterError(f"out: {str(run_dir)!r} holds an earlier run; give an empty or new out", "out")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    deadline = {k: t0 + share * budget_s for k, share in DEADLINES.items()}
    device = jax.devices()[0]
    result: dict[str, Any] = {
        "device": str(device), "device_kind": device.device_kind, "platform": device.platform, "smoke": smoke,
        "budget_s": budget_s, "jax": jax.__version__, "warp_installed": warp_available(),
        "sizes": dataclasses.asdict(sizes), "anchors": list(ANCHORS), "sections": {},
    }
    presets = ppo_presets(sizes)
    sections = {
        "env": lambda: env_section(sizes, backend, deadline["env"]),
        "pixels": lambda: pixels_section(sizes, backend, deadline["pixels"]),
        "ik": lambda: ik_section(sizes, deadline["ik"]),
        "dynamics": lambda: dynamics_section(sizes, deadline["dynamics"]),
        "reach_ppo": lambda: ppo_run("SO101Reach-v0", sizes.preset, presets["SO101Reach-v0"],
                                     out / "reach_ppo", backend, deadline["reach_ppo"] - time.perf_counter()),
        "pickcube_ppo": lambda: ppo_run("SO101PickCube-v0", sizes.preset, presets["SO101PickCube-v0"],
                                        out / "pickcube_ppo", backend, deadline["pickcube_ppo"] - time.perf_counter()),
    }
    for name, section in sections.items():
        start = time.perf_counter()
        print(f"bench device: {name} ({deadline[name] - start:.0f} s left for it)", flush=True)
        try:
            record: dict[str, Any] = section() if start < deadline[name] else {"status": "skipped (time budget)"}
            record.setdefault("status", "ok")
        except Exception as err:  # recorded, the next section runs
            record = {"status": f"failed: {type(err).__name__}: {err}", "traceback": traceback.format_exc(limit=8)}
        record["seconds"] = time.perf_counter() - start
        record["peak_device_bytes"] = peak_device_bytes()
        result["sections"][name] = record
        atomic_write(out / "device.json", json.dumps(result, indent=1, default=float))
    result["total_s"] = time.perf_counter() - t0
    atomic_write(out / "device.json", json.dumps(result, indent=1, default=float))
    atomic_write(out / "device.md", markdown(result))
    print(markdown(result))
    print(f"bench device: {out / 'device.json'}, {out / 'device.md'} ({result['total_s']:.0f} s)")
    return result


def _num(x: float | None, digits: int = 3) -> str:
    """``1,234,567`` above 1000, 3 significant digits below; ``n/a`` for None."""
    if x is None:
        return "n/a"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.{digits}g}"


def _gib(x: float | None) -> str:
    return "n/a" if x is None else f"{x / 2**30:.2f}"


def markdown(result: dict[str, Any]) -> str:
    """The accelerator tables (docs/benchmarks.md, "GPU"), filled from one run's JSON."""
    s = result["sections"]
    lines = [f"Device: {result['device_kind']} ({result['platform']}), JAX {result['jax']}, total "
             f"{result.get('total_s', 0):.0f} s{' (smoke sizes)' if result['smoke'] else ''}.", ""]
    env = s.get("env", {})
    substeps = ", ".join(f"{k.removeprefix('SO101')} {v}" for k, v in env.get("n_substeps", {}).items()) or "?"
    lines += [f"Env throughput (backend {env.get('backend', '?')}, reset + {env.get('steps', '?')} control steps "
              f"per program, physics substeps per control step: {substeps}):", "",
              "| env | impl | worlds | policy | env-steps/s | physics-steps/s | first jit s | XLA buffers GiB | peak "
              "device GiB | status |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in env.get("rows", []):
        for policy in POLICIES:
            p = r.get(policy, {})
            lines.append(f"| {r['env']} | {r['impl']} | {r['worlds']:,} | {policy} | "
                         f"{_num(p.get('env_steps_per_s'))} | {_num(p.get('physics_steps_per_s'))} | "
                         f"{_num(r.get('first_jit_s'))} | {_gib(r.get('xla_total_bytes'))} | "
                         f"{_gib(r.get('peak_device_bytes'))} | {r['status'].splitlines()[0][:80]} |")
    if "rows" not in env:
        lines.append(f"| env section: {env.get('status', 'not run')} |||||||||")
    pix = s.get("pixels", {})
    lines += ["", f"Pixel observations (PickCube, backend {pix.get('backend', '?')}, 64×64 shadowed front camera): "
              + (pix.get("status", "not run") if "rows" not in pix else ""), ""]
    if "rows" in pix:
        lines += ["| worlds | policy | env-steps/s | first jit s | peak device GiB | status |",
                  "|---|---|---|---|---|---|"]
        for r in pix["rows"]:
            for policy in POLICIES:
                lines.append(f"| {r['worlds']:,} | {policy} | {_num(r.get(policy, {}).get('env_steps_per_s'))} | "
                             f"{_num(r.get('first_jit_s'))} | {_gib(r.get('peak_device_bytes'))} | "
                             f"{r['status'].splitlines()[0][:80]} |")
    lines += ["", "| IK targets | solves/s | success < 1 mm |", "|---|---|---|"]
    for r in s.get("ik", {}).get("rows", []):
        lines.append(f"| {r['batch']:,} | {_num(r.get('solves_per_s'))} | {_num(r.get('success'))} |")
    dyn = s.get("dynamics", {})
    rates = dyn.get("evals_per_s", {})
    lines += ["",
              f"Dynamics at batch {dyn.get('batch', '?')}: " + (", ".join(f"{k} {_num(v)}/s" for k, v in rates.items())
                                                                   or dyn.get("status", "not run"))]
    lines += ["", "| PPO run | preset | envs | steps done / planned | final eval success | wall s | status |",
              "|---|---|---|---|---|---|---|"]
    for key in ("reach_ppo", "pickcube_ppo"):
        r = s.get(key, {})
        done = f"{r.get('steps_done', 0):,} / {r.get('planned_steps', 0):,}"
        lines.append(f"| {r.get('env', key)} | {r.get('preset', '?')} | {r.get('num_envs', '?')} | {done} | "
                     f"{_num(r.get('final_success'))} | {_num(r.get('wall_s'))} | "
                     f"{r.get('status', 'not run').splitlines()[0][:80]} |")
    curve = s.get("pickcube_ppo", {}).get("curve", [])
    if curve:
        lines += ["", "PickCube eval success so far (env steps: success): "
                  + ", ".join(f"{c['step']:,}: {_num(c['eval_success'])}" for c in curve)]
    lines += ["", "Anchors: " + "; ".join(result["anchors"]) + "."]
    return "\n".join(lines) + "\n"
