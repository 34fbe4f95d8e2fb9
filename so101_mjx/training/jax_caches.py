"""Releasing what JAX's pmap keeps of a finished training run.

``jax.pmap`` (JAX >= 0.8, built on ``shard_map``) stages each function through a cache that is
weakly keyed on the function but whose entry holds the function itself, so neither ever goes: every
pmapped epoch, the env it closes over and that env's physics (MuJoCo's batch threads) would stay
alive for the life of the process, about 250 MB and two threads per run of ``train``. A run drops
the entries it added when it ends (:func:`released_pmap_traces`); entries of other code stay.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any


def _pmap_traces() -> Any:
    """The pmap staging cache's weak-keyed dict, or None where this JAX has none."""
    try:
        from jax._src import pmap
    except ImportError:
        return None
    clear = getattr(getattr(pmap, "_cached_shard_map", None), "cache_clear", None)
    entries = getattr(clear, "__self__", None)
    return entries if isinstance(entries, weakref.WeakKeyDictionary) else None


@contextlib.contextmanager
def released_pmap_traces() -> Iterator[None]:
    """Drop, on exit, the pmap staging entries added inside the block (compiled programs of the
    functions pmapped there are freed with them; a later call of such a function traces again)."""
    entries = _pmap_traces()
    before = weakref.WeakSet(entries.keys()) if entries is not None else None
    try:
        yield
    finally:
        if entries is not None and before is not None:
            for key in [k for k in list(entries.keys()) if k not in before]:
                entries.pop(key, None)
