"""Benchmarks behind ``so101-mjx bench``: each reports a ratio against a baseline timed in the same run."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax

from so101_mjx import _checks as checks


def median_time(fn: Callable[[], object], repeats: int = 5, min_time: float = 0.2) -> float:
    """Median seconds per call of ``fn`` over ``repeats`` timed runs (each repeated to last ``min_time``).

    ``fn`` is called once first (compilation, warm-up); JAX outputs are blocked on.
    """
    jax.block_until_ready(fn())
    samples = []
    for _ in range(repeats):
        n, start = 0, time.perf_counter()
        while True:
            jax.block_until_ready(fn())
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        samples.append(elapsed / n)
    return statistics.median(samples)


def interleaved_times(fns: list[Callable[[], object]], repeats: int = 5) -> list[list[float]]:
    """Seconds of each call of each of ``fns``, ``repeats`` rounds that call every fn once in turn
    (after one warm-up call each), so that a machine's drift weighs on all of them alike."""
    for fn in fns:
        jax.block_until_ready(fn())
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, out in zip(fns, times):
            start = time.perf_counter()
            jax.block_until_ready(fn())
            out.append(time.perf_counter() - start)
    return times


def print_table(headers: list[str], rows: Sequence[Sequence[object]]) -> None:
    """Print a plain aligned table."""
    cells = [headers] + [[f"{c:.4g}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for k, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))


def compile_cost(fn: Callable, *args: Any) -> tuple[Any, dict[str, float]]:
    """``jax.jit(fn)`` lowered and compiled for ``args`` (arrays or ``jax.ShapeDtypeStruct``s: nothing runs).

    Returns the compiled executable and XLA's figures: ``lower_s``/``compile_s`` (wall seconds),
    ``compile_cpu_s`` (process CPU seconds, robust to a shared CPU), ``flops`` and ``bytes_accessed``
    (XLA's static cost analysis: every loop body counted ONCE, not times its trip count), and the
    buffer sizes in bytes: ``argument_bytes``, ``output_bytes``, ``temp_bytes``, ``total_bytes``
    (their sum, outputs aliasing arguments counted once).
    """
    start = time.perf_counter()
    lowered = jax.jit(fn).lower(*args)
    lower_s = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()
    compiled = lowered.compile()
    figures = {"lower_s": lower_s, "compile_s": time.perf_counter() - start, "compile_cpu_s": time.process_time() - cpu}
    cost = compiled.cost_analysis()
    cost = (cost[0] if cost else {}) if isinstance(cost, list) else (cost or {})
    figures["flops"] = float(cost.get("flops", float("nan")))
    figures["bytes_accessed"] = float(cost.get("bytes accessed", float("nan")))
    mem = compiled.memory_analysis()
    if mem is not None:
        figures["argument_bytes"] = float(mem.argument_size_in_bytes)
        figures["output_bytes"] = float(mem.output_size_in_bytes)
        figures["temp_bytes"] = float(mem.temp_size_in_bytes)
        figures["total_bytes"] = float(mem.argument_size_in_bytes + mem.output_size_in_bytes - mem.alias_size_in_bytes
                                       + mem.temp_size_in_bytes)
    return compiled, figures


def check_batches(batches: list[int], per_item: float, what: str) -> None:
    """ParameterError naming ``batch`` when its largest batch, at ``per_item`` bytes each (``what``), would not
    fit the device's memory (:func:`so101_mjx._checks.fits_memory`)."""
    checks.fits_memory(f"batch {max(batches)}", max(batches) * per_item, f"{per_item:,.0f} B per {what}", device=True,
                       parameters=("batch",))


def peak_device_bytes() -> int | None:
    """Peak bytes in use on the default device so far (``memory_stats()``), or None where unreported (CPU)."""
    stats = jax.devices()[0].memory_stats()
    return None if not stats or "peak_bytes_in_use" not in stats else int(stats["peak_bytes_in_use"])
