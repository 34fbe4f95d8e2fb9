"""MJX-vs-CPU parity harness: ``so101-mjx parity [--x64] [--episodes N] [--json out.json]``.

Identical initial states and action sequences go through (a) backend ``mjx``, (b) backend ``c``,
(c) the gymnasium env (:mod:`so101_mjx.gym`) and (d) lerobot_env_so101 0.4.0 when installed, with
noslip off (our scenes have none, MJX lacks it) and on (the reference's default). Reported:

- a table of max |deviation| from backend ``c`` per quantity (IK target, ctrl, qpos, qvel, obs,
  reward, success) over the first 1, 10, 50, 200 control steps of three open-loop episodes:
  ``reach/waypoints`` (contact-free), ``pick_cube/random`` (block resting on the floor, arm
  moving) and ``pick_place/scripted`` (grasp, carry, place);
- one control step from identical physics states (every state of each ``c`` trajectory),
  ``mjx`` vs ``c``, max |dqpos|, |dqvel|;
- the scripted pick-and-place closed loop over N random seeds on ``mjx`` and ``c``: success
  rates and per-episode outcome agreement.

Everything runs in float32 unless ``--x64``; the contract (docs/backends.md, docs/DESIGN.md) is stated in float64.
"""

from __future__ import annotations

import copy
import dataclasses
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array

from so101_mjx import _progress
from so101_mjx.envs.rollout import check_memory, run_episodes
from so101_mjx.sim.physics import BACKENDS, make_physics
from so101_mjx.validation import reference

HORIZONS = (1, 10, 50, 200)
AGREEMENT_STEPS = 300  # control steps of the closed-loop episodes (and the least of the scripted trajectory)
QUANTITIES = ("ik_target", "ctrl", "qpos", "qvel", "obs", "reward", "success")
OTHER_BACKENDS = tuple(b for b in BACKENDS if b != "c")  # each compared with backend c


@dataclasses.dataclass(frozen=True)
class Episode:
    """An open-loop episode: task, config overrides, fixed initial state and actions (T, 4)."""

    label: str
    task: str
    config: dict[str, Any]
    actions: np.ndarray


# --- open-loop episodes ------------------------------------------------------------------------------
def make_episodes(n_steps: int, seed: int = 0) -> list[Episode]:
    """The three open-loop episodes of the table (fixed block / goal positions, fixed targets)."""
    from so101_mjx.envs import make
    from so101_mjx.envs.tasks.reach import TARGET_BOUNDS

    rng = np.random.default_rng(seed)
    # Reach: a piecewise-linear path through random waypoints inside the target box, at most one
    # action unit per step: the arm stays above the floor (contact-free).
    reach_cfg = {"action_scale": 0.01}
    start = np.asarray(make("SO101Reach-v0", "c", **reach_cfg).reset(jax.random.PRNGKey(0)).info.ik_target)
    path = [start]
    while len(path) <= n_steps:
        goal = rng.uniform(*TARGET_BOUNDS)
        n = int(np.ceil(np.abs(goal - path[-1]).max() / reach_cfg["action_scale"]))
        path += list(path[-1] + np.linspace(0, 1, n + 1)[1:, None] * (goal - path[-1]))
    reach = np.diff(np.asarray(path[: n_steps + 1]), axis=0) / reach_cfg["action_scale"]
    reach = np.concatenate([reach, rng.uniform(0, 1, (n_steps, 1))], axis=1)

    pick = np.concatenate([rng.uniform(-1, 1, (n_steps, 3)), rng.uniform(0, 1, (n_steps, 1))], axis=1)

    place_cfg = {"action_scale": 0.025}
    env = make("SO101PickPlace-v0", "c", **place_cfg)
    scripted = run_episodes(env, "scripted", jax.random.PRNGKey(0), 1, max(n_steps, AGREEMENT_STEPS), trajectory=True)
    place = np.asarray(scripted["actions"][0, :n_steps])
    return [
        Episode("reach/waypoints", "SO101Reach-v0", reach_cfg, reach),
        Episode("pick_cube/random", "SO101PickCube-v0", {"action_scale": 0.025, "reward_type": "dense"}, pick),
        Episode("pick_place/scripted", "SO101PickPlace-v0", place_cfg, place),
    ]


def initial_state(env):
    """The task's fixed initial state (``fixed_reset``: the reference's fixed block / goal, Reach's target)."""
    return env.reset_to(jax.random.PRNGKey(0), **env.fixed_reset)


def _record(s) -> dict[str, jax.Array]:
    p = s.physics
    return {
        "ik_target": s.info.ik_target, "ctrl": p.ctrl, "qpos": p.qpos, "qvel": p.qvel, "obs": s.obs,
        "reward": s.reward, "success": s.info.succeed.astype(p.qpos.dtype),
    }


def run_functional(env, actions: np.ndarray):
    """Trajectory of a functional env: (records {quantity: (T, ...)}, physics states (T+1, ...))."""
    s0 = initial_state(env)

    @jax.jit
    def rollout(s0, actions):
        def body(s, a):
            s = env.step(s, a)
            return s, (_record(s), s.physics)

        _, (rec, phys) = jax.lax.scan(body, s0, actions)
        return rec, jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), s0.physics, phys)

    rec, phys = rollout(s0, jnp.asarray(actions, s0.obs.dtype))
    return jax.tree.map(np.asarray, rec), phys


def run_gym(ep: Episode, actions: np.ndarray) -> dict[str, np.ndarray]:
    """The same episode through the gymnasium env (float32 observations)."""
    from so101_mjx.gym import ENV_CLASSES

    env = ENV_CLASSES[ep.task](**ep.config)
    env.reset_to(initial_state(env.env))
    out: list[dict[str, Any]] = []
    for a in actions:
        obs, reward, _, _, info = env.step(a)
        rec = {k: np.asarray(v) for k, v in _record(env.state).items()}
        out.append({**rec, "obs": np.concatenate([obs["agent_pos"], obs["environment_state"]]), "reward": reward,
                    "success": float(info["succeed"])})
    env.close()
    return {k: np.stack([o[k] for o in out]) for k in QUANTITIES}


def run_reference(ep: Episode, actions: np.ndarray, noslip: bool) -> dict[str, np.ndarray] | None:
    """The same episode through lerobot_env_so101 (None when not installed or no such task)."""
    if not reference.available() or ep.task not in reference.mirrored():
        return None
    env = reference.make_reference_env(ep.task, ep.config)
    if not noslip:
        env.model.opt.noslip_iterations = 0
    env.reset(seed=0)  # fixed block (and goal) positions, as initial_state
    out = []
    for a in actions:
        obs, reward, _, _, info = env.step(np.asarray(a))
        d = env.data
        out.append({
            "ik_target": env._target_ee_pos.copy(), "ctrl": d.ctrl.copy(), "qpos": d.qpos.copy(), "qvel": d.qvel.copy(),
            "obs": np.concatenate([obs["agent_pos"], obs["environment_state"]]), "reward": reward,
            "success": float(info["succeed"]),
        })
    return {k: np.stack([o[k] for o in out]) for k in QUANTITIES}


def horizon_deviation(a: dict, b: dict, horizons=HORIZONS) -> dict[str, list[float]]:
    """max |a − b| per quantity over the first h steps, for each h (NaN past the episode)."""
    out = {}
    for q in QUANTITIES:
        err = np.abs(np.asarray(a[q], np.float64) - np.asarray(b[q], np.float64)).reshape(len(a[q]), -1).max(axis=1)
        out[q] = [float(err[:h].max()) if h <= len(err) else float("nan") for h in horizons]
    return out


CONTACT_CLASSES = ("contact-free", "block on floor", "arm in contact")


def contact_classes(model: mujoco.MjModel, phys, ctrls: np.ndarray | Array, n_substeps: int) -> np.ndarray:
    """Index into :data:`CONTACT_CLASSES` of each control step (T,) from states ``phys[:-1]``:
    the contacts MuJoCo C makes while stepping it (none; block–floor plane–box contacts only; or
    any contact of the arm — jaws, pads or links on the block, box–box — or of the arm on the floor)."""
    data = mujoco.MjData(model)
    floor = model.geom("floor").id
    block = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "block")  # -1 in the reach scene
    qpos, qvel, warm = (np.asarray(x, np.float64) for x in (phys.qpos, phys.qvel, phys.qacc_warmstart))
    out = np.zeros(len(ctrls), int)
    for i, ctrl in enumerate(np.asarray(ctrls, np.float64)):
        data.qpos[:], data.qvel[:], data.qacc_warmstart[:], data.ctrl[:] = qpos[i], qvel[i], warm[i], ctrl
        for _ in range(n_substeps):
            mujoco.mj_step(model, data)
            pairs = {tuple(sorted(g)) for g in data.contact.geom[: data.ncon]}
            if any(p != (floor, block) for p in pairs):
                out[i] = 2
                break
            out[i] = max(out[i], 1 if pairs else 0)
    return out


def one_step_deviation(env, phys, ctrls: np.ndarray | Array, tolerance: float | None = None,
                       backend: str = "mjx") -> dict[str, dict[str, float]]:
    """From every state of a ``c`` trajectory, one control step with the same ctrl on ``c`` and ``backend``.

    ``tolerance``: the Newton solver's ``opt.tolerance`` for this comparison (None: the scene's,
    1e-8). With a positive tolerance each backend stops iterating when its improvement drops below
    it, and rounding decides on which iteration; 0 runs both for exactly ``opt.iterations``
    iterations ("same iterations", the contract's condition). Returns, per contact class of
    :func:`contact_classes` present, ``{"states", "qpos", "qvel"}`` (max |backend − c|).
    """
    model = copy.copy(env.mj_model)
    if tolerance is not None:
        model.opt.tolerance = tolerance
    n = env.n_substeps
    states = jax.tree.map(lambda x: x[:-1], phys)
    ctrls = jnp.asarray(ctrls, states.qpos.dtype)
    nxt = [jax.jit(jax.vmap(lambda p, u, b=b: b.step(p, u, n)))(states, ctrls)
           for b in (make_physics("c", model), make_physics(backend, model))]
    err = {k: np.abs(np.asarray(getattr(nxt[0], k) - getattr(nxt[1], k))).max(axis=-1) for k in ("qpos", "qvel")}
    classes = contact_classes(model, states, ctrls, n)
    return {
        name: {"states": int((classes == c).sum()), **{k: float(e[classes == c].max()) for k, e in err.items()}}
        for c, name in enumerate(CONTACT_CLASSES) if (classes == c).any()
    }


def _log(msg: str) -> None:
    _progress.write(f"[parity {time.strftime('%H:%M:%S')}] {msg}", sys.stderr)  # above the bar on a terminal


def compare_episode(ep: Episode, with_mjx: bool = True) -> dict[str, Any]:
    """All comparisons of one episode against backend ``c``."""
    from so101_mjx.envs import make

    _log(f"{ep.label}: {len(ep.actions)} steps")

    c_env = make(ep.task, "c", **ep.config)
    c_rec, c_phys = run_functional(c_env, ep.actions)
    rows, one_step = {}, None
    for backend in OTHER_BACKENDS if with_mjx else ():
        rows[backend] = horizon_deviation(run_functional(make(ep.task, backend, **ep.config), ep.actions)[0], c_rec)
        one_step = {
            "same iterations": one_step_deviation(c_env, c_phys, c_rec["ctrl"], tolerance=0.0, backend=backend),
            "scene tolerance": one_step_deviation(c_env, c_phys, c_rec["ctrl"], backend=backend),
        }
    rows["gym"] = horizon_deviation(run_gym(ep, ep.actions), c_rec)
    for noslip in (False, True):
        ref = run_reference(ep, ep.actions, noslip)
        if ref is not None:
            rows[f"reference noslip {'on' if noslip else 'off'}"] = horizon_deviation(ref, c_rec)
    return {"rows": rows, "one_step_mjx_vs_c": one_step}


def outcome_agreement(n_episodes: int, n_steps: int = AGREEMENT_STEPS, seed: int = 0) -> dict[str, float]:
    """Scripted pick-and-place on random seeds, ``mjx`` vs ``c``: success rates and agreement."""
    from so101_mjx.envs import make

    cfg = {"action_scale": 0.025, "random_block_position": True}
    _log(f"scripted pick-and-place closed loop, {n_episodes} seeds, backends c and mjx")
    key = jax.random.PRNGKey(seed)
    succ = {b: np.asarray(run_episodes(make("SO101PickPlace-v0", b, **cfg), "scripted", key, n_episodes, n_steps,
                                       stop_when_done=True)["success"])
            for b in ("c", "mjx")}
    return {
        "episodes": n_episodes,
        "success_rate_c": float(succ["c"].mean()),
        "success_rate_mjx": float(succ["mjx"].mean()),
        "outcome_agreement": float((succ["c"] == succ["mjx"]).mean()),
    }


def format_table(results: dict[str, Any]) -> str:
    """Fixed-width text table of :func:`run_all`'s results."""
    hs = results["horizons"]
    lines = [f"dtype {results['dtype']}; max |x − x_c| over the first h control steps", ""]
    head = f"{'episode':22s} {'vs c':20s} {'quantity':10s}" + "".join(f"{'h=' + str(h):>10s}" for h in hs)
    lines += [head, "-" * len(head)]
    for label, ep in results["episodes"].items():
        for pair, devs in ep["rows"].items():
            for q, vals in devs.items():
                lines.append(f"{label:22s} {pair:20s} {q:10s}" + "".join(f"{v:10.2e}" for v in vals))
    lines.append("")
    lines.append("one control step from identical states, mjx vs c: max |dqpos|, |dqvel| by contact class")
    for label, ep in results["episodes"].items():
        for mode, by_class in (ep["one_step_mjx_vs_c"] or {}).items():
            for cls, d in by_class.items():
                lines.append(f"  {label:22s} {mode:16s} {cls:17s} {d['states']:4d} states: qpos {d['qpos']:.2e}  qvel "
                             f"{d['qvel']:.2e}")
    if "contact_rich" in results:
        o = results["contact_rich"]
        lines.append(
            f"scripted pick-and-place, {o['episodes']} seeds: success c {o['success_rate_c']:.3f}, "
            f"mjx {o['success_rate_mjx']:.3f}, outcome agreement {o['outcome_agreement']:.3f}"
        )
    return "\n".join(lines)


def run_all(n_episodes: int, n_steps: int = max(HORIZONS)) -> dict[str, Any]:
    """Every comparison; ``n_episodes`` = 0 skips the closed-loop outcome agreement. InputError first
    when the episodes of ``n_episodes`` or ``n_steps`` would not fit the machine's memory."""
    from so101_mjx.envs import make

    env = make("SO101PickPlace-v0", "c")
    check_memory(env, n_episodes, AGREEMENT_STEPS, False, f"n_episodes {n_episodes}", ("n_episodes",))
    check_memory(env, 1, max(n_steps, AGREEMENT_STEPS), True, f"n_steps {n_steps}", ("n_steps",))
    open_loop = make_episodes(n_steps)
    episodes = {ep.label: compare_episode(ep) for ep in _progress.each(open_loop, len(open_loop), "parity", "episode")}
    results = {"dtype": str(jnp.result_type(float)), "horizons": [h for h in HORIZONS if h <= n_steps],
               "episodes": episodes}
    if n_episodes:
        results["contact_rich"] = outcome_agreement(n_episodes)
    return results
