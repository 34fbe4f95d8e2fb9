"""The solver interface's shared surface (the EmbodiChain solver interface's ``BaseSolver``) over a solver's own
``get_fk`` and ``get_ik``: batch adapters, buffer reservation, the continuous-path capability and the batched IK
entry that checks it (EmbodiChain's ``compute_batch_ik(..., continuous=True)``), and a context manager.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
from jax import Array

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.robot.kinematics import Kinematics


def on_device(method):
    """Run ``method`` with the solver's ``device`` as JAX's default (arrays it creates live there)."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with jax.default_device(self.device):
            return method(self, *args, **kwargs)
    return wrapper


def in_root_frame(kin: Kinematics) -> Kinematics:
    """``kin`` with every pose in its root body's frame (the root at the origin, identity rotation):
    the interface's FK results and IK targets are chain-root relative. InputError if a joint moves the root."""
    if kin.body_joint[0] != -1:
        raise InputError(f"root_link_name {kin.body_names[0]!r} must be a link no joint moves (FK and targets are "
                         "in its frame)")
    rot = kin.body_rot[0].T
    return dataclasses.replace(kin, root_pos=-(rot @ kin.body_pos[0]), root_rot=rot)


def compute_batch_ik(solver, target_xpos, qpos_seed=None, continuous: bool = False, **kwargs) -> tuple[Array, Array]:
    """Batched IK of (B, N) targets for any solver of the interface.

    Args:
        solver: a solver with ``get_ik`` (and, for ``continuous``, ``supports_continuous_batch_ik``
            True and ``_select_continuous_ik_path``).
        target_xpos: (B, N, 4, 4) poses (or (B, N, 3) positions where the solver takes them); without
            ``continuous`` every solver's ``get_ik`` solves the B·N targets as one batch.
        qpos_seed: (B, DOF) initial joints (default the solver's default seed).
        continuous: pick each row's candidates along a continuous joint path from ``qpos_seed``;
            checked against the capability before anything is solved (InputError if unsupported).
        **kwargs: passed to ``get_ik``.

    Returns:
        success (B, N) and joints (B, N, DOF).
    """
    if continuous and not getattr(solver, "supports_continuous_batch_ik", False):
        raise InputError(f"continuous=True: {type(solver).__name__} does not support continuous batch IK "
                         "(supports_continuous_batch_ik is False); use continuous=False")
    t = jnp.asarray(target_xpos)
    if t.ndim not in (3, 4) or t.shape[2:] not in ((4, 4), (3,)):
        raise InputError(f"target_xpos must have shape (B, N, 4, 4) or (B, N, 3), got {t.shape}")
    seed = solver.get_default_qpos_seed() if qpos_seed is None else qpos_seed
    seed = jnp.broadcast_to(jnp.asarray(seed), (t.shape[0], jnp.shape(seed)[-1]))
    if not continuous:  # every solver: its get_ik on the flattened (B·N) targets, each row's seed repeated
        (b, n), dof = t.shape[:2], seed.shape[-1]
        ok, q = solver.get_ik(t.reshape(b * n, *t.shape[2:]), qpos_seed=jnp.repeat(seed, n, axis=0), **kwargs)
        return jnp.reshape(jnp.asarray(ok), (b, n)), jnp.reshape(jnp.asarray(q), (b, n, dof))
    valid, cand = solver.get_ik(t, qpos_seed=seed[:, None, :], return_all_solutions=True, **kwargs)
    return tuple(solver._select_continuous_ik_path(valid, cand, seed)[:2])


class BaseSolver:
    """Mixin of EmbodiChain's ``BaseSolver`` methods that follow from ``get_fk`` / ``get_ik``."""

    @property
    def supports_continuous_batch_ik(self) -> bool:
        """Whether ``get_ik(return_all_solutions=True)`` candidates support continuous path selection
        (False here; solvers with consistent candidate branches override it)."""
        return False

    if TYPE_CHECKING:  # provided by the solver class (declared for the checker only: no method shadowed at run time)

        def get_fk(self, qpos: Any) -> Array: ...

        def get_ik(self, *args: Any, **kwargs: Any) -> Any: ...

    def get_fk_batch(self, qpos) -> Array:
        """TCP poses (..., 4, 4) in the chain root's frame for joints ``qpos`` (..., dof), any leading axes."""
        return self.get_fk(qpos)

    def get_ik_batch(self, target_xpos, qpos_seed=None) -> tuple[Array, Array]:
        """IK of (..., 4, 4) root-frame TCP poses with the solver's selection: success (...) and joints
        (..., dof), no candidate axis. ``qpos_seed``: (dof,) or seeds with the targets' leading axes."""
        t = jnp.asarray(target_xpos)
        if t.ndim < 2 or t.shape[-2:] != (4, 4):
            raise InputError(f"target_xpos must have shape (..., 4, 4), got {t.shape}")
        ok, q = self.get_ik(t, qpos_seed=qpos_seed)
        # one pose: get_ik's batch of one dropped
        batch = () if t.ndim == 2 and jnp.shape(ok) == (1,) else jnp.shape(ok)
        return jnp.reshape(ok, batch), jnp.reshape(q, (*batch, jnp.shape(q)[-1]))

    def prepare_buffers(self, max_batch: int) -> None:
        """Declare the largest flattened target count (seeds included) to be solved, an int >= 1.

        JAX solvers hold no scratch storage between calls (XLA allocates each call's buffers), so
        nothing is reserved; the value is checked and kept as ``max_batch``."""
        self.max_batch = checks.integer("max_batch", max_batch, ge=1)

    def compute_batch_ik(self, target_xpos, qpos_seed=None, continuous: bool = False, **kwargs) -> tuple[Array, Array]:
        """:func:`compute_batch_ik` with this solver."""
        return compute_batch_ik(self, target_xpos, qpos_seed, continuous, **kwargs)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb) -> None:
        return None
