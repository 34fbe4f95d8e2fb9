"""Compatibility shims for the newest JAX.

brax 0.14.2's PPO calls ``jax.device_put_replicated``, which JAX 0.10 removed (``ppo.train``
then dies with AttributeError). :func:`install` supplies a drop-in built on ``jax.device_put``
of the stacked tree onto a ``NamedSharding`` over a 1-D device mesh whose axis is named ``'i'``
(the replacement JAX's pmap migration guide describes). It does nothing when the attribute
exists, so older JAX keeps its own implementation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def device_put_replicated(x: Any, devices: Sequence[jax.Device]) -> Any:
    """Stack ``len(devices)`` copies of every leaf of ``x`` along a new leading axis, one per device."""
    mesh = jax.sharding.Mesh(np.asarray(devices), ("i",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("i"))
    stacked = jax.tree.map(lambda leaf: jnp.stack([jnp.asarray(leaf)] * len(devices)), x)
    return jax.device_put(stacked, sharding)


def install() -> bool:
    """Add ``jax.device_put_replicated`` if this JAX lacks it. Returns True if it was installed."""
    if hasattr(jax, "device_put_replicated"):
        return False
    jax.device_put_replicated = device_put_replicated
    return True
