"""Camera latency in control ticks.

A camera with ``latency`` L (:attr:`so101_mjx.render.camera.CameraSpec.latency`) shows at control
step t the frame rendered at step t - L; before any older frame exists, the reset's frame stands
for them. In the functional envs the queue of the L frames rendered since is jitted arrays, oldest
first: :func:`fill` starts it at reset, :func:`push` adds the new frame and returns the one that
comes out (one world's arrays; the envs ``vmap`` over worlds). The host-side envs (the gym env, the
simulated follower) keep the states to draw instead, in a :class:`History`.
"""

from __future__ import annotations

import collections
from typing import Any

import jax.numpy as jnp
from jax import Array


def fill(frame: Array, latency: int) -> Array:
    """A queue (latency, *frame.shape) holding ``frame`` (e.g. (H, W, 3) uint8) ``latency`` times."""
    return jnp.broadcast_to(frame, (latency, *frame.shape))


def push(queue: Array, frame: Array) -> tuple[Array, Array]:
    """``(the oldest frame, the queue with it dropped and frame appended)``: ``queue`` (L, ...), ``frame`` (...)."""
    return queue[0], jnp.concatenate([queue[1:], frame[None]], axis=0)


class History:
    """The values of the last ``depth + 1`` control ticks (host side): :meth:`start` at reset, :meth:`push`
    after each step, :meth:`ago` ``(k)`` the value ``k`` ticks back (the reset's while fewer have passed)."""

    def __init__(self, depth: int):
        self._items: collections.deque[Any] = collections.deque(maxlen=depth + 1)

    def start(self, item: Any) -> None:
        self._items.clear()
        self._items.append(item)

    def push(self, item: Any) -> None:
        self._items.append(item)

    def ago(self, ticks: int) -> Any:
        return self._items[max(0, len(self._items) - 1 - ticks)]
