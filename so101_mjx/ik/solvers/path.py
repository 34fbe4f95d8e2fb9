"""Continuous selection of IK candidates along a path (EmbodiChain's continuous batch IK).

Given K candidates per waypoint, choose one per waypoint so that the joint path moves
continuously: a dynamic programme (Viterbi) over the waypoints minimizing, lexicographically,
first the number of steps whose largest joint move exceeds ``threshold``, then the sum of
weighted squared joint moves. Where a continuous choice exists it is therefore found; steps
that must jump are flagged. A waypoint with no valid candidate is reported invalid and holds the
previous joints. A candidate with a non-finite joint is invalid, whatever its flag says: a path
reported valid holds finite joints.

Shapes: validity (B, N, K), candidates (B, N, K, DOF), seed (B, DOF) → validity (B, N), joints
(B, N, DOF), jumps (B, N) (True where the move into that waypoint exceeds ``threshold``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import Array

from so101_mjx.errors import InputError

JUMP_PENALTY = 1e6  # per jump: larger than any sum of squared moves of joints within ±π


def _move_cost(prev: Array, nxt: Array, weight: Array, threshold: float) -> Array:
    """Cost (..., K_prev, K_next) of moving from each ``prev`` (..., K, D) to each ``nxt`` (..., K, D)."""
    delta = nxt[..., None, :, :] - prev[..., :, None, :]
    squared = jnp.sum(weight * delta**2, -1)
    return squared + JUMP_PENALTY * (jnp.max(jnp.abs(delta), -1) > threshold)


def select_continuous_path(
    valid: Array, candidates: Array, seed: Array, weight: Array | None = None, threshold: float = 0.5,
) -> tuple[Array, Array, Array]:
    """One candidate per waypoint; see the module docstring. ``threshold`` in radians (> 0)."""
    if not threshold > 0:
        raise InputError(f"threshold must be a positive number of radians, got {threshold!r}")
    if (candidates.ndim != 4 or valid.shape != candidates.shape[:3]
            or seed.shape != (candidates.shape[0], candidates.shape[3])):
        raise InputError(f"expected valid (B, N, K), candidates (B, N, K, DOF), seed (B, DOF); got {valid.shape}, "
                         f"{candidates.shape}, {seed.shape}")
    if candidates.dtype.kind != "f" or valid.dtype.kind not in "biu":
        raise InputError(f"expected bool valid and float candidates, got {valid.dtype} and {candidates.dtype}")
    valid = valid.astype(bool) & jnp.all(jnp.isfinite(candidates), -1)
    dt = candidates.dtype
    w = jnp.ones(candidates.shape[-1], dt) if weight is None else jnp.asarray(weight, dt)
    inf = jnp.asarray(jnp.inf, dt)
    # Waypoint-major for the scan: (N, B, K, ...).
    valid_t, cand_t = jnp.swapaxes(valid, 0, 1), jnp.swapaxes(candidates, 0, 1)
    k = candidates.shape[2]
    start = _move_cost(seed[:, None, :], cand_t[0], w, threshold)[:, 0, :]  # (B, K)
    cost0 = jnp.where(valid_t[0], start, inf)
    any0 = jnp.any(valid_t[0], -1)
    held0 = jnp.where(any0[:, None, None], cand_t[0], seed[:, None, :])  # (B, K, D) joints of each state
    cost0 = jnp.where(any0[:, None], cost0, jnp.zeros_like(cost0))

    def forward(carry, inputs):
        cost, held = carry
        ok, cand = inputs
        total = cost[..., :, None] + _move_cost(held, cand, w, threshold)  # (B, K_prev, K_next)
        back = jnp.argmin(total, -2)
        best = jnp.where(ok, jnp.min(total, -2), inf)
        some = jnp.any(ok, -1)
        # No valid candidate here: every state carries on unchanged (held joints, same cost).
        back = jnp.where(some[:, None], back, jnp.arange(k))
        cost = jnp.where(some[:, None], best, cost)
        held = jnp.where(some[:, None, None], cand, held)
        return (cost, held), (back, held)

    (cost, _), (backs, helds) = jax.lax.scan(forward, (cost0, held0), (valid_t[1:], cand_t[1:]))
    helds = jnp.concatenate([held0[None], helds], 0)  # (N, B, K, D)
    last = jnp.argmin(cost, -1)  # (B,)

    def backward(state, back):
        return jnp.take_along_axis(back, state[:, None], -1)[:, 0], state

    first, states = jax.lax.scan(backward, last, backs, reverse=True)
    states = jnp.concatenate([first[None], states], 0)  # (N, B)
    joints = jnp.take_along_axis(helds, states[:, :, None, None], 2)[:, :, 0]  # (N, B, D)
    ok = jnp.take_along_axis(valid_t, states[:, :, None], 2)[:, :, 0]
    previous = jnp.concatenate([seed[None], joints[:-1]], 0)
    jumps = ok & (jnp.max(jnp.abs(joints - previous), -1) > threshold)
    return jnp.swapaxes(ok, 0, 1), jnp.swapaxes(joints, 0, 1), jnp.swapaxes(jumps, 0, 1)
