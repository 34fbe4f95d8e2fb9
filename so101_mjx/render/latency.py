"""Camera latency in control ticks: a fixed-length queue of frames, as pure jittable functions.

A camera with ``latency`` L (:attr:`so101_mjx.render.camera.CameraSpec.latency`) shows at control
step t the frame rendered at step t - L. The queue holds the L frames rendered since, oldest first:
:func:`fill` starts it at reset (before any older frame exists, the reset's frame stands for
them), :func:`push` adds the new frame and returns the one that comes out. One world's arrays; the
envs ``vmap`` over worlds.
"""

from __future__ import annotations

import jax.numpy as jnp
from jax import Array


def fill(frame: Array, latency: int) -> Array:
    """A queue (latency, *frame.shape) holding ``frame`` (e.g. (H, W, 3) uint8) ``latency`` times."""
    return jnp.broadcast_to(frame, (latency, *frame.shape))


def push(queue: Array, frame: Array) -> tuple[Array, Array]:
    """``(the oldest frame, the queue with it dropped and frame appended)``: ``queue`` (L, ...), ``frame`` (...)."""
    return queue[0], jnp.concatenate([queue[1:], frame[None]], axis=0)
