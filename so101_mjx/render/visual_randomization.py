"""Visual domain randomization: per-episode lighting, colours and camera poses of the rendered frames.

A :class:`VisualRandomization` (``config.visual_randomization``, with ``image_obs=True``) changes
only what the cameras see, never the physics: every reset draws, per world,

- ``light_intensity``: one scale factor per light of its diffuse colour (uniform in a range),
- ``light_shift``: each light's position moved by up to this many metres along each axis,
- ``colour_shift``: every material's RGB and the RGB of every geom drawn in its own colour moved by
  up to this much per channel (of 1), clipped to [0, 1] (the arm's materials, the floor's texture
  tint, the blocks, the goal marker),
- ``camera_shift``: each camera's position moved by up to this many metres along each axis,
- ``camera_tilt``: each camera turned by an angle uniform in [0, tilt] radians about a uniformly
  random axis (in its parent body's frame).

The drawn arrays (:data:`FIELDS`, shaped as in the render model) live in
``state.info.render_params``; the batch renderer writes them into its per-thread model before
drawing each world (:class:`so101_mjx.render.batch.BatchRenderer`). Defaults randomize nothing;
:data:`STANDARD` is a moderate set for training camera policies.
"""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError

FIELDS = ("light_diffuse", "light_pos", "mat_rgba", "geom_rgba", "cam_pos", "cam_quat")
MAX_INTENSITY = 10.0  # largest light scale factor
MAX_SHIFT = 0.5  # m: largest light / camera position offset
MAX_TILT = float(np.pi / 4)  # rad: largest camera rotation
# MuJoCo draws a geom with a material in the material's colour unless its own rgba differs from this default
DEFAULT_GEOM_RGBA = np.array([0.5, 0.5, 0.5, 1.0], np.float32)


@dataclasses.dataclass(frozen=True)
class VisualRandomization:
    """Ranges of the per-episode visual changes; the defaults leave the scene as modelled."""

    light_intensity: tuple[float, float] = (1.0, 1.0)  # scale factor of each light's diffuse
    light_shift: float = 0.0  # m per axis
    colour_shift: float = 0.0  # per RGB channel, of 1
    camera_shift: float = 0.0  # m per axis
    camera_tilt: float = 0.0  # rad

    def __post_init__(self) -> None:
        """Check every field (naming it) and store plain floats (lists from JSON accepted)."""
        pair = checks.range_pair("visual_randomization.light_intensity", self.light_intensity, lowest=0, highest=MAX_INTENSITY)
        object.__setattr__(self, "light_intensity", pair)
        for name, top in (("light_shift", MAX_SHIFT), ("colour_shift", 1.0), ("camera_shift", MAX_SHIFT), ("camera_tilt", MAX_TILT)):
            object.__setattr__(self, name, checks.real(f"visual_randomization.{name}", getattr(self, name), ge=0, le=top))


STANDARD = VisualRandomization(light_intensity=(0.6, 1.4), light_shift=0.2, colour_shift=0.1, camera_shift=0.01, camera_tilt=0.05)


def parse(value: VisualRandomization | dict | str | None) -> VisualRandomization | None:
    """A config's ``visual_randomization``: None, a :class:`VisualRandomization`, its dict form, or
    (command lines) ``"standard"`` (:data:`STANDARD`) or a JSON object of its fields."""
    if value is None or isinstance(value, VisualRandomization):
        return value
    if isinstance(value, str):
        if value == "standard":
            return STANDARD
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            raise InputError(f"visual_randomization must be 'standard' or a JSON object of {_names()}, got {value!r}") from err
    if isinstance(value, dict):
        return checks.dataclass_from_dict(VisualRandomization, "visual_randomization", value)
    raise InputError(f"visual_randomization must be None, a VisualRandomization, its dict form or 'standard', got {value!r}")


def _names() -> list[str]:
    return [f.name for f in dataclasses.fields(VisualRandomization)]


def sample(model: mujoco.MjModel, config: VisualRandomization, rng: Array, dtype) -> dict[str, Array]:
    """One world's render arrays (keys :data:`FIELDS`, shapes as in ``model``), finite for any key."""
    k = jax.random.split(rng, 7)
    c = lambda x: jnp.asarray(np.asarray(x), dtype)  # noqa: E731
    shift = lambda key, shape, s: jax.random.uniform(key, shape, dtype, -s, s)  # noqa: E731
    lo, hi = config.light_intensity
    rgb = lambda key, rgba: rgba.at[:, :3].set(jnp.clip(rgba[:, :3] + shift(key, (len(rgba), 3), config.colour_shift), 0.0, 1.0))  # noqa: E731
    geom_rgba = c(model.geom_rgba)
    shown = ~((model.geom_matid >= 0) & np.all(model.geom_rgba == DEFAULT_GEOM_RGBA, axis=-1))  # else the material's colour shows
    quat = c(model.cam_quat)
    axis = jax.random.normal(k[5], (len(quat), 3), dtype)
    axis = axis / jnp.maximum(jnp.linalg.norm(axis, axis=-1, keepdims=True), 1e-9)
    half = 0.5 * jax.random.uniform(k[6], (len(quat), 1), dtype, 0.0, config.camera_tilt)
    turn = jnp.concatenate([jnp.cos(half), jnp.sin(half) * axis], axis=-1)
    turned = jax.vmap(_quat_mul)(turn, quat)
    return {
        "light_diffuse": c(model.light_diffuse) * jax.random.uniform(k[0], (model.nlight, 1), dtype, lo, hi),
        "light_pos": c(model.light_pos) + shift(k[1], (model.nlight, 3), config.light_shift),
        "mat_rgba": rgb(k[2], c(model.mat_rgba)),
        "geom_rgba": jnp.where(shown[:, None], rgb(k[3], geom_rgba), geom_rgba),
        "cam_pos": c(model.cam_pos) + shift(k[4], (model.ncam, 3), config.camera_shift),
        "cam_quat": turned / jnp.linalg.norm(turned, axis=-1, keepdims=True),
    }


def _quat_mul(a: Array, b: Array) -> Array:
    """Hamilton product of two (w, x, y, z) quaternions (4,): rotation ``b`` then ``a``."""
    w1, v1, w2, v2 = a[0], a[1:], b[0], b[1:]
    return jnp.concatenate([(w1 * w2 - v1 @ v2)[None], w1 * v2 + w2 * v1 + jnp.cross(v1, v2)])
