"""Camera images of batched worlds with MuJoCo Warp's ray-traced batch renderer (backend ``mjx``).

:class:`WarpBatchRenderer` is :class:`so101_mjx.render.batch.BatchRenderer`'s counterpart for the jitted
MJX envs: the frames are computed on the JAX device (a GPU; Warp's CPU device works too, slowly)
by ``mujoco.mjx.render`` — no host callback. It needs ``mujoco_warp`` and ``warp-lang``
(``pip install "so101-mjx[warp]"``). Only the render model's kinematics are evaluated (MuJoCo Warp's
forward pass with contacts and constraints disabled), at float32, whatever the physics backend's impl.

Differences to the C renderer (OpenGL rasterization), measured in ``docs/DESIGN.md`` (State): a ray tracer
with its own lighting model (no headlight haze, no fog, a black background), marker sites drawn
as opaque geoms (copies on mocap bodies, :func:`so101_mjx.render.batch.render_model`), optional shadows.
MuJoCo Warp's render context fixes each camera's rays when it is made, so a per-world focal length
(``cam_fovy``, the visual randomization's ``camera_zoom``) is applied to the traced frame instead: a
bilinear resample about the image centre by the focal lengths' ratio (a zoom-out repeats the edge pixels).

MuJoCo Warp's render context holds buffers for a fixed number of worlds, so a renderer keeps one
context per batch size it meets (made when a call is traced). It serves one level of ``vmap`` (the
env's batch) or an explicit leading batch axis; nested ``vmap`` over it is not supported.
"""

from __future__ import annotations

import copy
import importlib.util
import math

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.render.batch import check_camera, marker_body
from so101_mjx.render.camera import CameraSpec, camera_setup
from so101_mjx.render.distortion import remap_jax

WARP_INSTALL = 'pip install "so101-mjx[warp]"  (mujoco-warp and warp-lang)'


def warp_available() -> bool:
    """Whether MuJoCo Warp and warp-lang can be imported."""
    return all(importlib.util.find_spec(m) is not None for m in ("mujoco_warp", "warp"))


class WarpBatchRenderer:
    """(B, H, W, 3) uint8 images of B worlds from one camera, rendered by MuJoCo Warp.

    ``model``: a render model (:func:`so101_mjx.render.batch.render_model`) that carries each of
    ``markers`` (site names) as a mocap geom (``marker_geoms=markers``). ``shadows``: ray-traced
    shadows (default: the model's shadow-map setting, i.e. render quality "shadowed"/"full").
    ``spec``: the user's camera (:class:`~so101_mjx.render.camera.CameraSpec`) in place of the model's
    ``camera``: Warp traces its pinhole render, bent on the device by the same remap as the C workers'.
    """

    def __init__(self, model: mujoco.MjModel, height: int = 64, width: int = 64, camera: str = "front",
                 markers: tuple[str, ...] = (), shadows: bool | None = None, spec: CameraSpec | None = None):
        if not warp_available():
            raise ImportError(f"the MJX batch renderer needs MuJoCo Warp: {WARP_INSTALL}")
        from mujoco import mjx

        self.height = checks.integer("height", height, ge=1, le=4096)
        self.width = checks.integer("width", width, ge=1, le=4096)
        check_camera(model, camera)
        model, self._draw_size, self._remap = camera_setup(model, camera, spec, self.height, self.width)
        mocap = []
        for name in markers:
            body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, marker_body(name))
            if body < 0 or model.body_mocapid[body] < 0:
                raise InputError(f"marker {name!r} has no mocap body {marker_body(name)!r}: "
                                 f"build the model with render_model(..., marker_geoms={tuple(markers)!r})")
            mocap.append(int(model.body_mocapid[body]))
        self.model, self.camera, self.markers = model, camera, tuple(markers)
        self._camera_id = (camera if isinstance(camera, int)
                           else mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera))
        self.shadows = model.vis.quality.shadowsize > 0 if shadows is None else bool(shadows)
        kinematic = copy.copy(model)
        kinematic.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
        self._mjx = mjx
        self._mjx_model = mjx.put_model(kinematic, impl="warp")
        self._data = mjx.make_data(kinematic, impl="warp")
        self._mocap = np.asarray(mocap, np.int32)
        self._contexts: dict[int, object] = {}
        self._render = jax.custom_batching.custom_vmap(self._unbatched)
        self._render.def_vmap(self._vmap_rule)

    def _context(self, nworld: int):
        """The render context for ``nworld`` worlds (made on first use; Warp fixes its world count)."""
        if nworld not in self._contexts:
            self._contexts[nworld] = self._mjx.create_render_context(
                self.model, nworld=nworld, cam_res=self._draw_size[::-1], cam_active=[self.camera],
                render_rgb=True, render_depth=False, use_textures=True, use_shadows=self.shadows)
        return self._contexts[nworld]

    def _frames(self, qpos: jax.Array, marker_pos: jax.Array, params: dict[str, jax.Array]) -> jax.Array:
        """Frames (N, H, W, 3) uint8 of N worlds: ``qpos`` (N, nq), ``marker_pos`` (N, M, 3), params (N, ...)."""
        mjx, rc = self._mjx, self._context(qpos.shape[0]).pytree()
        params = dict(params)
        fovy = params.pop("cam_fovy", None)  # the context's rays are fixed: the focal length is applied below
        params.pop("cam_intrinsic", None)

        def one(q, markers, p):
            model = self._mjx_model.replace(**p) if p else self._mjx_model
            data = self._data.replace(qpos=q)
            if len(self._mocap):
                data = data.replace(mocap_pos=data.mocap_pos.at[self._mocap].set(markers))
            data = mjx.refit_bvh(model, mjx.forward(model, data), rc)
            rgb, _, _ = mjx.render(model, data, rc)
            return mjx.get_rgb(rc, 0, rgb)

        rgb = jax.vmap(one)(qpos.astype(jnp.float32), marker_pos.astype(jnp.float32),
                            {k: v.astype(jnp.float32) for k, v in params.items()})
        frames = jnp.round(rgb * 255.0).astype(jnp.uint8)
        if fovy is not None:
            half = math.radians(float(self.model.cam_fovy[self._camera_id])) / 2
            frames = zoomed(frames,
                            math.tan(half) / jnp.tan(jnp.deg2rad(fovy[:, self._camera_id].astype(jnp.float32)) / 2))
        return frames if self._remap is None else remap_jax(self._remap, frames)

    def _unbatched(self, qpos, marker_pos, params):
        return self._frames(qpos[None], marker_pos[None], jax.tree.map(lambda x: x[None], params))[0]

    def _vmap_rule(self, axis_size, in_batched, qpos, marker_pos, params):
        spread = lambda x, batched: x if batched else jnp.broadcast_to(x, (axis_size, *x.shape))  # noqa: E731
        args = jax.tree.map(spread, (qpos, marker_pos, params), tuple(in_batched))
        return self._frames(*args), True

    def _arguments(self, qpos, marker_pos, params):
        """Checked and padded arguments: per-world geom arrays of the physics model get the marker geoms' rows."""
        batch = qpos.shape[:-1]
        marker_pos = jnp.zeros((*batch, 0, 3), qpos.dtype) if marker_pos is None or not self.markers else marker_pos
        padded = {}
        for k, v in (params or {}).items():
            full = np.asarray(getattr(self.model, k))
            rows = full.shape[0] - v.shape[len(batch)]
            if rows < 0:
                raise InputError(f"params[{k!r}] has {v.shape[len(batch)]} rows, the render model {full.shape[0]}")
            if rows:  # a physics-model geom array: the marker geoms keep the render model's values
                v = jnp.concatenate([v, jnp.broadcast_to(jnp.asarray(full[-rows:], v.dtype),
                                                         (*batch, *full[-rows:].shape))], axis=len(batch))
            padded[k] = v
        return marker_pos, padded

    def jax_render(self, qpos: jax.Array, marker_pos: jax.Array | None = None,
                   params: dict[str, jax.Array] | None = None) -> jax.Array:
        """Frames (..., H, W, 3) uint8: ``qpos`` (..., nq), ``marker_pos`` (..., len(markers), 3) m,
        ``params`` (..., *shape) per-world model arrays by field name; jit-safe, one level of vmap."""
        marker_pos, params = self._arguments(qpos, marker_pos, params)
        batch = qpos.shape[:-1]
        if not batch:
            return self._render(qpos, marker_pos, params)
        flat = lambda x: x.reshape(math.prod(batch), *x.shape[len(batch):])  # noqa: E731 (-1 fails on 0 markers)
        frames = self._frames(flat(qpos), flat(marker_pos), jax.tree.map(flat, params))
        return frames.reshape(*batch, *frames.shape[1:])

    def render(self, qpos: np.ndarray, marker_pos: np.ndarray | None = None,
               params: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """:meth:`jax_render` of a host batch: ``qpos`` (B, nq) -> (B, H, W, 3) uint8 numpy."""
        q = jnp.asarray(np.asarray(qpos, np.float32).reshape(-1, self.model.nq))
        values = {k: jnp.asarray(v) for k, v in (params or {}).items()}
        markers = None if marker_pos is None else jnp.asarray(marker_pos, jnp.float32)
        return np.asarray(self.jax_render(q, markers, values))

    def close(self) -> None:
        """Drop the render contexts (their device buffers go with them)."""
        self._contexts.clear()


def zoomed(frames: jax.Array, factor: jax.Array) -> jax.Array:
    """``frames`` (N, H, W, 3) uint8 with each world's focal length scaled by ``factor`` (N,): output pixel x
    samples the frame at ``c + (x - c) / factor`` about the centre ``c`` (bilinear, edges repeated)."""

    def resample(x: jax.Array, axis: int) -> jax.Array:
        n = x.shape[axis]
        centre = (n - 1) / 2
        source = centre + (jnp.arange(n, dtype=jnp.float32)[None] - centre) / factor[:, None]  # (N, n)
        source = jnp.clip(source, 0.0, n - 1.0)
        low = jnp.floor(source).astype(jnp.int32)
        high, weight = jnp.minimum(low + 1, n - 1), source - low
        shape = [len(factor), 1, 1, 1]
        shape[axis] = n
        take = lambda i: jnp.take_along_axis(x, i.reshape(shape), axis=axis)  # noqa: E731
        w = weight.reshape(shape)
        return take(low) * (1 - w) + take(high) * w

    out = resample(resample(frames.astype(jnp.float32), 1), 2)
    return jnp.clip(jnp.round(out), 0, 255).astype(jnp.uint8)
