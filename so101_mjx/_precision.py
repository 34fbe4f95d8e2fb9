"""JAX's global float64 switch, set for a block and restored after it: library functions that need one
precision (the sysid fit in float64, evaluations and benchmarks in the precision asked for) never leave it
changed for their caller."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax


@contextlib.contextmanager
def x64(enabled: bool) -> Iterator[None]:
    """``jax_enable_x64`` set to ``enabled`` inside the block, restored to the caller's setting after it."""
    previous = jax.config.jax_enable_x64  # type: ignore[attr-defined, unused-ignore]  # typed from jax 0.12 on
    jax.config.update("jax_enable_x64", enabled)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", previous)
