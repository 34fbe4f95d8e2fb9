"""Lens distortion as a post-process: a pinhole render bent by OpenCV's plumb-bob model.

A renderer draws a pinhole image; a real lens bends it. For every output (distorted) pixel centre
``(u, v)``, :func:`build` finds the undistorted normalized point ``(x, y)`` (``cv2.undistortPoints``,
iterated to convergence and checked by projecting back with ``cv2.projectPoints``) and the pixel
of a pinhole render that shows it: ``(fx x + cx', fy y + cy')``. The pinhole render keeps the
lens's focal lengths (the same pixel density at the image centre) and is made as large as the
sampled points need plus a pixel each side, so barrel distortion never samples outside it.

The resulting :class:`Remap` is bilinear with fixed-point weights (1/:data:`SUBPIXEL` px, integer
arithmetic, as OpenCV's ``remap``), so :func:`remap_numpy` (the C renderer's worker processes) and
:func:`remap_jax` (a jittable gather on MuJoCo Warp's frames) give bitwise the same frames from the
same map. This module imports only numpy at load (render workers import it without JAX); building
a map needs OpenCV (``pip install "so101-mjx[camera]"``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import cast

import numpy as np

from so101_mjx.errors import InputError

SUBPIXEL = 128  # bilinear positions in 1/128 px
_BITS = 2 * int(math.log2(SUBPIXEL))  # the four weights sum to SUBPIXEL**2 = 2**_BITS
MAX_WIDEN = 4  # the pinhole render is at most this many times the output's width and height
ROUND_TRIP_PX = 1e-3  # px: largest error of undistort-then-distort over the image


@dataclasses.dataclass(frozen=True, eq=False)
class Remap:
    """Bilinear resampling of (..., *source, C) uint8 frames to (..., *shape, C).

    ``index`` (4, H*W) int32: the flat source pixel of each corner; ``weight`` (4, H*W) int32,
    summing to ``SUBPIXEL**2`` per output pixel."""

    source: tuple[int, int]  # (height, width) px of the pinhole render
    shape: tuple[int, int]  # (height, width) px of the output
    index: np.ndarray
    weight: np.ndarray


def _cv2():
    try:
        import cv2
    except ImportError:
        raise InputError('lens distortion needs OpenCV: pip install "so101-mjx[camera]"') from None
    return cv2


def undistorted(fx: float, fy: float, cx: float, cy: float, dist: tuple[float, ...], width: int,
                height: int) -> np.ndarray:
    """Undistorted normalized points (H, W, 2) of each distorted pixel centre (OpenCV: centres at integers)."""
    cv2 = _cv2()
    k, d = np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1]], np.float64), np.asarray(dist, np.float64)
    v, u = np.mgrid[0:height, 0:width]
    pixels = np.stack([u, v], -1).reshape(-1, 1, 2).astype(np.float64)
    criteria = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 200, 1e-12)
    xy = cv2.undistortPoints(pixels, k, d, criteria=criteria).reshape(-1, 2)
    back, _ = cv2.projectPoints(np.c_[xy, np.ones(len(xy))], np.zeros(3), np.zeros(3), k, d)
    error = float(np.abs(back.reshape(-1, 2) - pixels.reshape(-1, 2)).max())
    if not error < ROUND_TRIP_PX:
        raise InputError(f"camera.dist_coeffs {list(dist)} cannot be inverted over the {width}x{height} image "
                         f"(the lens model folds over: {error:.3g} px round-trip error)")
    return xy.reshape(height, width, 2)


def bilinear(map_x: np.ndarray, map_y: np.ndarray, source: tuple[int, int]) -> Remap:
    """The :class:`Remap` sampling a ``source`` (height, width) image at ``map_x``, ``map_y`` (H, W) px."""
    h, w = source
    ix, ax = np.divmod(np.rint(map_x.reshape(-1) * SUBPIXEL).astype(np.int64), SUBPIXEL)
    iy, ay = np.divmod(np.rint(map_y.reshape(-1) * SUBPIXEL).astype(np.int64), SUBPIXEL)
    x0, x1 = np.clip(ix, 0, w - 1), np.clip(ix + 1, 0, w - 1)
    y0, y1 = np.clip(iy, 0, h - 1), np.clip(iy + 1, 0, h - 1)
    index = np.stack([y0 * w + x0, y0 * w + x1, y1 * w + x0, y1 * w + x1]).astype(np.int32)
    bx, by = SUBPIXEL - ax, SUBPIXEL - ay
    weight = np.stack([bx * by, ax * by, bx * ay, ax * ay]).astype(np.int32)
    return Remap(cast(tuple[int, int], tuple(source)), (map_x.shape[0], map_x.shape[1]), index, weight)


def build(fx: float, fy: float, cx: float, cy: float, dist: tuple[float, ...], width: int,
          height: int) -> tuple[Remap, tuple[float, float, float, float], tuple[int, int]]:
    """``(remap, pinhole intrinsics (fx, fy, cx', cy') px, pinhole (height, width) px)`` of a lens
    ``fx, fy, cx, cy`` (px, OpenCV) with distortion ``dist`` (k1, k2, p1, p2, k3) drawing ``width`` x ``height``."""
    xy = undistorted(fx, fy, cx, cy, dist, width, height)
    (x0, y0), (x1, y1) = xy.reshape(-1, 2).min(0), xy.reshape(-1, 2).max(0)
    cx_r, cy_r = 1.0 - fx * x0, 1.0 - fy * y0  # every sample at least 1 px inside
    w_r, h_r = math.ceil(fx * (x1 - x0)) + 3, math.ceil(fy * (y1 - y0)) + 3
    if w_r > MAX_WIDEN * width or h_r > MAX_WIDEN * height:
        raise InputError(f"camera.dist_coeffs {list(dist)} bend too much: the {width}x{height} image needs a "
                         f"{w_r}x{h_r} pinhole render (at most {MAX_WIDEN}x the image)")
    remap = bilinear(fx * xy[..., 0] + cx_r, fy * xy[..., 1] + cy_r, (h_r, w_r))
    return remap, (fx, fy, cx_r, cy_r), (h_r, w_r)


def remap_numpy(remap: Remap, frames: np.ndarray) -> np.ndarray:
    """(..., *remap.source, C) uint8 -> (..., *remap.shape, C) uint8, in numpy."""
    flat = frames.reshape(*frames.shape[:-3], -1, frames.shape[-1])
    acc = sum(flat[..., remap.index[k], :].astype(np.int32) * remap.weight[k][:, None] for k in range(4))
    out = (acc + (1 << (_BITS - 1))) >> _BITS
    return out.astype(np.uint8).reshape(*frames.shape[:-3], *remap.shape, frames.shape[-1])


def remap_jax(remap: Remap, frames):
    """:func:`remap_numpy` as a jittable gather: (..., *remap.source, C) uint8 -> (..., *remap.shape, C) uint8."""
    import jax.numpy as jnp

    flat = frames.reshape(*frames.shape[:-3], -1, frames.shape[-1])
    acc = sum(jnp.take(flat, remap.index[k], axis=-2).astype(jnp.int32) * remap.weight[k][:, None] for k in range(4))
    out = (acc + (1 << (_BITS - 1))) >> _BITS
    return out.astype(jnp.uint8).reshape(*frames.shape[:-3], *remap.shape, frames.shape[-1])
