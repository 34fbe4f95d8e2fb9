"""The training state's leaves, as both training loops (:mod:`~so101_mjx.training.ppo_loop`,
:mod:`~so101_mjx.training.sac_loop`) keep them: strongly typed, so an epoch never recompiles, and checked
finite after every epoch."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array


def strip_weak_type(tree: Any) -> Any:
    """``tree`` with weakly typed leaves made strong, so an epoch never recompiles for a weak type."""

    def strong(leaf: Any) -> Array:
        x = jnp.asarray(leaf)
        return jnp.astype(x, x.dtype)

    return jax.tree_util.tree_map(strong, tree)


class NonFiniteError(RuntimeError):
    """An epoch made the training state non-finite (NaN or inf): the run stops before that step is written."""


def check_finite(step: int, tree: Any) -> None:
    """:class:`NonFiniteError` naming ``step`` and the first leaf of ``tree`` (host arrays) holding a NaN or inf."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        leaf = np.asarray(leaf)
        if leaf.dtype.kind == "f" and not np.isfinite(leaf).all():
            raise NonFiniteError(f"step {step:,}: the training state went non-finite (NaN or inf) in "
                                 f"{jax.tree_util.keystr(path)}; stopped before writing this step (try a lower "
                                 "learning rate, or resume from an earlier checkpoint)")
