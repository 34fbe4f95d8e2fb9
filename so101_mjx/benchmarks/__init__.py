"""Benchmarks behind ``so101-mjx bench``: each reports a ratio against a baseline timed in the same run."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import jax


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


def print_table(headers: list[str], rows: list[list[object]]) -> None:
    """Print a plain aligned table."""
    cells = [headers] + [[f"{c:.4g}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for k, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
        if k == 0:
            print("  ".join("-" * w for w in widths))
