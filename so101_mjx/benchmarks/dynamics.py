"""``so101-mjx bench dynamics``: batched M, C, g, ID, FD and regressor (JaxBackend) vs MuJoCo C per call."""

from __future__ import annotations

import contextlib
import functools

import jax
import jax.numpy as jnp
import numpy as np

from so101_mjx import _precision, _progress
from so101_mjx.benchmarks import check_batches, median_time, print_table
from so101_mjx.dynamics.backend import DynamicsBackend, JaxBackend
from so101_mjx.dynamics.mujoco_backend import MujocoBackend

QUANTITIES = ("M", "C", "g", "ID", "FD", "regressor")


def evaluators(backend: DynamicsBackend, q, v, a, tau) -> dict:
    """One zero-argument call per quantity (its inputs bound)."""
    return {
        "M": lambda: backend.compute_mass_matrix(q),
        "C": lambda: backend.compute_coriolis_matrix(q, v),
        "g": lambda: backend.compute_gravity_vector(q),
        "ID": lambda: backend.compute_inverse_dynamics(q, v, a),
        "FD": lambda: backend.compute_forward_dynamics(q, v, tau),
        "regressor": lambda: backend.compute_regressor(q, v, a),
    }


def mujoco_rates(backend: MujocoBackend, q, v, a, tau, repeats: int) -> dict[str, float]:
    """Evaluations/s of each quantity, one configuration per call from a Python loop."""
    calls = [evaluators(backend, *x) for x in zip(q, v, a, tau)]

    def each(k: str) -> list[object]:
        return [c[k]() for c in calls]

    return {k: len(q) / median_time(functools.partial(each, k), repeats) for k in QUANTITIES}


def sample(jb: JaxBackend, mb: MujocoBackend, n: int,
           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``n`` random (q, v, a, tau): configurations within the limits, v ~ N(0, 2), a ~ N(0, 5), tau = ID(q, v, a)
    (MuJoCo C)."""
    q, v, a = jb.random_configuration(rng, (n,)), rng.normal(0, 2, (n, jb.nv)), rng.normal(0, 5, (n, jb.nv))
    return q, v, a, np.stack([mb.compute_inverse_dynamics(*x) for x in zip(q, v, a)])


def jax_rates(jb: JaxBackend, inputs: tuple[np.ndarray, ...], dtype, repeats: int,
              quantities: tuple[str, ...] = QUANTITIES) -> dict[str, float]:
    """Evaluations/s of each of ``quantities`` on the whole batch ``inputs`` = (q, v, a, tau) at once."""
    calls = evaluators(jb, *(jnp.asarray(x, dtype) for x in inputs))
    return {k: len(inputs[0]) / median_time(calls[k], repeats) for k in quantities}


def bench(batch: list[int], repeats: int, samples: int, x64: bool = False) -> None:
    """Print evaluations/s of each quantity at each of the ``batch`` sizes against MuJoCo C on ``samples``
    configurations (the median of ``repeats`` timed runs), in float64 with ``x64``; ParameterError naming ``batch``
    when the largest would not fit the device."""
    with _precision.x64(True) if x64 else contextlib.nullcontext():  # float64 asked for: restored after
        dtype = jnp.float64 if x64 else jnp.float32
        check_batches(batch, 49152,
                      "configuration (the Coriolis matrix, the largest quantity, in float64: XLA's buffers)")
        jb, mb = JaxBackend(), MujocoBackend()
        rng = np.random.default_rng(0)
        _progress.phase(f"bench dynamics: MuJoCo C baseline on {samples} configurations")
        c_rate = mujoco_rates(mb, *sample(jb, mb, samples, rng), repeats)
        rows = []
        for n in batch:
            _progress.phase(f"bench dynamics: batch {n}")
            rates = jax_rates(jb, sample(jb, mb, n, rng), dtype, repeats)
            rows += [[k, n, rates[k], c_rate[k], rates[k] / c_rate[k], rates[k] / c_rate["M"]] for k in QUANTITIES]
        print(f"JaxBackend on {jax.default_backend()}, {jnp.dtype(dtype).name}; MuJoCo C = MujocoBackend, one "
              f"configuration per call from Python (mj_makeM+mj_fullM, mj_rne, mj_inverse, mj_forward)")
        print_table(["quantity", "batch", "evals/s", "mujoco_c/s", "ratio", "vs C mass matrix/s"], rows)
