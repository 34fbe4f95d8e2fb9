"""Visual domain randomization: per-episode lighting, colours, camera poses and lenses, and image effects.

A :class:`VisualRandomization` (``config.visual_randomization``, with ``image_obs=True``) changes
only what the cameras see, never the physics: every reset draws, per world,

- ``light_intensity``: one scale factor per light of its diffuse colour (uniform in a range),
- ``light_shift``: each light's position moved by up to this many metres along each axis,
- ``colour_shift``: every material's RGB and the RGB of every geom drawn in its own colour moved by
  up to this much per channel (of 1), clipped to [0, 1] (the arm's materials, the floor's texture
  tint, the blocks, the goal marker),
- ``camera_shift``: each camera's position moved by up to this many metres along each axis,
- ``camera_tilt``: each camera turned by an angle uniform in [0, tilt] radians about a uniformly
  random axis (in its parent body's frame),
- ``camera_zoom``: each camera's focal length (``cam_fovy``'s tangent, or ``cam_intrinsic``'s fx, fy)
  scaled by a factor uniform in [1 - zoom, 1 + zoom];

and, on the rendered frames (:func:`apply_image`, in JAX: the same on every renderer),

- ``exposure``: one brightness gain per episode (uniform in a range),
- ``white_balance``: a gain per colour channel uniform in [1 - w, 1 + w],
- ``blur``: a Gaussian blur of standard deviation uniform in [0, blur] px (a 5-tap separable kernel),
- ``noise``: per-pixel Gaussian noise of this standard deviation (of full scale), drawn anew each frame
  (from the episode's key and the frame's state);

and, with scenery the render model gains (:func:`add_scenery`; the physics model never has it),

- ``textures``: the floor (and the backdrop) drawn with one of :data:`TEXTURES` (procedural: checkers,
  speckles, tiles, a gradient), tinted by a colour uniform in [0.4, 1] per channel, repeated 1 to 8 times,
- ``backdrop``: a wall behind the table, across the front camera's view (:data:`BACKDROP`),
- ``distractors``: this many collision-free objects (boxes, cylinders and spheres of 1 to 3.5 cm half size,
  random colours and yaw) standing on the floor beside the task's region (:data:`DISTRACTOR_STRIPS`),
  never inside :data:`CLEAR_REGION`, where every task's blocks and goals are.

The model arrays (:data:`FIELDS`, shaped as in the render model) and the image effects' (:data:`IMAGE`)
live in ``state.info.render_params``; the batch renderer writes the model arrays into its per-thread
model before drawing each world (:class:`so101_mjx.render.batch.BatchRenderer`). Defaults randomize
nothing, and a field left at its default draws nothing (its frames are bitwise as without it);
:data:`STANDARD` is a moderate set for training camera policies, :data:`WIDE` a wider one with the lens
and image effects of real rigs, :data:`CLUTTERED` is :data:`WIDE` with textures, a backdrop and six
distractors.
"""

from __future__ import annotations

import dataclasses
import json
from typing import cast

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError

SCENERY_FIELDS = ("geom_matid", "mat_texrepeat", "geom_pos", "geom_quat", "geom_size")  # drawn with scenery only
FIELDS = ("light_diffuse", "light_pos", "mat_rgba", "geom_rgba", "cam_pos", "cam_quat", "cam_fovy", "cam_intrinsic",
          *SCENERY_FIELDS)
IMAGE = ("image_gain", "image_blur", "image_noise", "image_key")  # the image effects' draws (apply_image)
MAX_ZOOM = 0.5  # largest relative focal length change
MAX_BLUR = 3.0  # px: largest blur standard deviation
BLUR_TAPS = 2  # the blur kernel's half width (px)
MAX_INTENSITY = 10.0  # largest light scale factor
MAX_SHIFT = 0.5  # m: largest light / camera position offset
MAX_TILT = float(np.pi / 4)  # rad: largest camera rotation
# MuJoCo draws a geom with a material in the material's colour unless its own rgba differs from this default
DEFAULT_GEOM_RGBA = np.array([0.5, 0.5, 0.5, 1.0], np.float32)
MAX_DISTRACTORS = 16
SCENERY = "vr_"  # the name prefix of everything add_scenery adds to a render model
_B, _M = mujoco.mjtBuiltin, mujoco.mjtMark
# the procedural textures of the floor and the backdrop: (builtin, rgb1, rgb2, mark, mark rgb, random)
TEXTURES = (
    (_B.mjBUILTIN_CHECKER, (0.25, 0.25, 0.25), (0.75, 0.75, 0.75), _M.mjMARK_NONE, (0, 0, 0), 0.0),  # checkers
    (_B.mjBUILTIN_CHECKER, (0.55, 0.35, 0.2), (0.7, 0.5, 0.3), _M.mjMARK_RANDOM, (0.3, 0.2, 0.1), 0.2),  # speckled
    (_B.mjBUILTIN_FLAT, (0.8, 0.8, 0.8), (0.8, 0.8, 0.8), _M.mjMARK_RANDOM, (0.2, 0.2, 0.2), 0.05),  # speckles
    (_B.mjBUILTIN_FLAT, (0.9, 0.9, 0.85), (0.9, 0.9, 0.85), _M.mjMARK_EDGE, (0.3, 0.3, 0.3), 0.0),  # tiles
    (_B.mjBUILTIN_GRADIENT, (0.9, 0.9, 0.9), (0.3, 0.3, 0.3), _M.mjMARK_NONE, (0, 0, 0), 0.0),  # a gradient
    (_B.mjBUILTIN_FLAT, (0.6, 0.6, 0.6), (0.6, 0.6, 0.6), _M.mjMARK_CROSS, (0.95, 0.95, 0.95), 0.0),  # crosses
)
TEXTURE_SIZE = 256  # px per side
SCENERY_TURN = (float(np.cos(0.05)), 0.0, 0.0, float(np.sin(0.05)))  # a scenery geom's modelled turn: 0.1 rad of yaw
TINT = (0.4, 1.0)  # a texture's tint per RGB channel
TEXREPEAT = (1.0, 8.0)  # a texture's repeats over its geom
BACKDROP = {"pos": (-0.45, 0.0, 0.5), "size": (0.01, 1.2, 0.5)}  # m: a thin box standing behind the arm's base
# m, xy boxes [[min x, y], [max x, y]] kept free of distractors: every task's block and goal sampling region with
# about 5 cm to spare, and the arm's base
CLEAR_REGION = ((0.10, -0.17), (0.45, 0.17))
# m, the xy boxes distractors stand in (one drawn uniformly per distractor, then a point uniform in it): beside the
# clear region on either side, and between it and the front camera
DISTRACTOR_STRIPS = (((-0.05, 0.20), (0.55, 0.35)), ((-0.05, -0.35), (0.55, -0.20)), ((0.48, -0.17), (0.6, 0.17)))
DISTRACTOR_SIZE = (0.01, 0.035)  # m, half sizes
DISTRACTOR_SHAPES = (mujoco.mjtGeom.mjGEOM_BOX, mujoco.mjtGeom.mjGEOM_CYLINDER, mujoco.mjtGeom.mjGEOM_SPHERE)


@dataclasses.dataclass(frozen=True)
class VisualRandomization:
    """Ranges of the per-episode visual changes; the defaults leave the scene as modelled."""

    light_intensity: tuple[float, float] = (1.0, 1.0)  # scale factor of each light's diffuse
    light_shift: float = 0.0  # m per axis
    colour_shift: float = 0.0  # per RGB channel, of 1
    camera_shift: float = 0.0  # m per axis
    camera_tilt: float = 0.0  # rad
    camera_zoom: float = 0.0  # relative focal length change
    exposure: tuple[float, float] = (1.0, 1.0)  # brightness gain of the frames
    white_balance: float = 0.0  # relative gain change per colour channel
    blur: float = 0.0  # px: largest Gaussian blur standard deviation
    noise: float = 0.0  # per-pixel Gaussian noise standard deviation, of full scale
    textures: bool = False  # the floor's (and backdrop's) texture, tint and repeats drawn per episode
    backdrop: bool = False  # a textured wall behind the table
    distractors: int = 0  # collision-free objects beside the task's region

    def __post_init__(self) -> None:
        """Check every field (naming it) and store plain floats (lists from JSON accepted)."""
        for name in ("light_intensity", "exposure"):
            pair = checks.range_pair(f"visual_randomization.{name}", getattr(self, name), lowest=0,
                                     highest=MAX_INTENSITY)
            object.__setattr__(self, name, pair)
        for name, top in (("light_shift", MAX_SHIFT), ("colour_shift", 1.0), ("camera_shift", MAX_SHIFT),
                          ("camera_tilt", MAX_TILT),
                          ("camera_zoom", MAX_ZOOM), ("white_balance", 1.0), ("blur", MAX_BLUR), ("noise", 1.0)):
            object.__setattr__(self, name,
                               checks.real(f"visual_randomization.{name}", getattr(self, name), ge=0, le=top))
        for name in ("textures", "backdrop"):
            object.__setattr__(self, name, checks.flag(f"visual_randomization.{name}", getattr(self, name)))
        object.__setattr__(self, "distractors", checks.integer("visual_randomization.distractors", self.distractors,
                                                               ge=0, le=MAX_DISTRACTORS))

    @property
    def scenery(self) -> bool:
        """Whether the render model gains scenery (:func:`add_scenery`): textures, a backdrop or distractors."""
        return self.textures or self.backdrop or self.distractors > 0

    @property
    def image_effects(self) -> bool:
        """Whether any image effect is drawn (:func:`apply_image` changes the frames)."""
        return self.exposure != (1.0, 1.0) or self.white_balance > 0 or self.blur > 0 or self.noise > 0


STANDARD = VisualRandomization(light_intensity=(0.6, 1.4), light_shift=0.2, colour_shift=0.1, camera_shift=0.01,
                               camera_tilt=0.05)
# STANDARD widened, with the focal length, exposure, white balance, blur and sensor noise of real USB cameras
WIDE = VisualRandomization(light_intensity=(0.4, 1.6), light_shift=0.3, colour_shift=0.2, camera_shift=0.02,
                           camera_tilt=0.08,
                           camera_zoom=0.05, exposure=(0.7, 1.3), white_balance=0.1, blur=1.0, noise=0.02)
CLUTTERED = dataclasses.replace(WIDE, textures=True, backdrop=True, distractors=6)
LEVELS = {"standard": STANDARD, "wide": WIDE, "cluttered": CLUTTERED}


def parse(value: VisualRandomization | dict | str | None) -> VisualRandomization | None:
    """A config's ``visual_randomization``: None, a :class:`VisualRandomization`, its dict form, or
    (command lines) a level's name (:data:`LEVELS`: ``"standard"``, ``"wide"``) or a JSON object of its fields."""
    if value is None or isinstance(value, VisualRandomization):
        return value
    if isinstance(value, str):
        if value in LEVELS:
            return LEVELS[value]
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            raise InputError(f"visual_randomization must be one of {list(LEVELS)} or a JSON object of {_names()}, "
                             f"got {value!r}") from err
    if isinstance(value, dict):
        return checks.dataclass_from_dict(VisualRandomization, "visual_randomization", value)
    raise InputError("visual_randomization must be None, a VisualRandomization, its dict form or one of "
                     f"{list(LEVELS)}, got {value!r}")


def _names() -> list[str]:
    return [f.name for f in dataclasses.fields(VisualRandomization)]


def add_scenery(spec: mujoco.MjSpec, config: VisualRandomization | None) -> None:
    """Add ``config``'s scenery to a render model's ``spec``: with ``textures`` or ``backdrop`` a material per
    :data:`TEXTURES`; with ``backdrop`` the wall :data:`BACKDROP`; ``distractors`` geoms, all collision-free, on
    a static body appended to the world body, all named with the :data:`SCENERY` prefix. Nothing without scenery."""
    if config is None or not config.scenery:
        return
    if config.textures or config.backdrop:
        for k, (builtin, rgb1, rgb2, mark, markrgb, random) in enumerate(TEXTURES):
            spec.add_texture(name=f"{SCENERY}texture{k}", type=mujoco.mjtTexture.mjTEXTURE_2D, builtin=builtin,
                             rgb1=rgb1, rgb2=rgb2, mark=mark, markrgb=markrgb, random=random,
                             width=TEXTURE_SIZE, height=TEXTURE_SIZE)
            material = spec.add_material(name=f"{SCENERY}material{k}", texuniform=True, texrepeat=(2.0, 2.0))
            material.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = f"{SCENERY}texture{k}"
    # a body of its own, the last: its geoms come after every geom of the scene, whose ids stay the physics model's.
    # Massless, and each geom off its body's frame in position and turn (SCENERY_TURN), so the compiler marks no
    # geom frame as its body's (geom_sameframe 0): the drawn geom_pos and geom_quat then take effect.
    scenery = spec.worldbody.add_body(name=f"{SCENERY}scenery")
    common = {"contype": 0, "conaffinity": 0, "density": 0.0, "quat": SCENERY_TURN}
    if config.backdrop:
        scenery.add_geom(name=f"{SCENERY}backdrop", type=mujoco.mjtGeom.mjGEOM_BOX, material=f"{SCENERY}material0",
                         **common, **BACKDROP)
    for i in range(config.distractors):
        scenery.add_geom(name=f"{SCENERY}distractor{i}", type=DISTRACTOR_SHAPES[i % len(DISTRACTOR_SHAPES)],
                         size=(DISTRACTOR_SIZE[1],) * 3, pos=(0.0, 0.5, DISTRACTOR_SIZE[1]), rgba=(0.8, 0.2, 0.2, 1.0),
                         **common)


def _scenery(model: mujoco.MjModel, config: VisualRandomization, rng: Array, dtype,
             draw: dict[str, Array]) -> dict[str, Array]:
    """``draw`` with the scenery's arrays (``geom_matid``, ``mat_texrepeat``, ``mat_rgba``, ``geom_pos``,
    ``geom_quat``, ``geom_size``, ``geom_rgba``) drawn from ``rng``; InputError when ``model`` lacks the scenery."""
    def ids(kind: mujoco.mjtObj, names: list[str]) -> np.ndarray:
        found = np.array([mujoco.mj_name2id(model, kind, n) for n in names], np.int32)
        if (found < 0).any():
            raise InputError(f"the render model lacks the visual randomization's scenery {names}: build it with "
                             "render_model(..., visual=config)")
        return found

    k = jax.random.split(rng, 9)
    out = dict(draw)
    if config.textures or config.backdrop:
        materials = ids(mujoco.mjtObj.mjOBJ_MATERIAL, [f"{SCENERY}material{i}" for i in range(len(TEXTURES))])
        tint = jax.random.uniform(k[0], (len(materials), 3), dtype, *TINT)
        out["mat_rgba"] = out["mat_rgba"].at[materials, :3].set(tint)
        repeat = jax.random.uniform(k[1], (len(materials), 1), dtype, *TEXREPEAT)
        out["mat_texrepeat"] = jnp.asarray(model.mat_texrepeat, dtype).at[materials].set(repeat)
        textured = ((["floor"] if config.textures else []) + ([f"{SCENERY}backdrop"] if config.backdrop else []))
        geoms = ids(mujoco.mjtObj.mjOBJ_GEOM, textured)
        chosen = jax.random.choice(k[2], materials, (len(geoms),))
        out["geom_matid"] = jnp.asarray(model.geom_matid, jnp.int32).at[geoms].set(chosen)
    if config.distractors:
        geoms = ids(mujoco.mjtObj.mjOBJ_GEOM, [f"{SCENERY}distractor{i}" for i in range(config.distractors)])
        n = len(geoms)
        strips = jnp.asarray(np.asarray(DISTRACTOR_STRIPS), dtype)[jax.random.randint(k[3], (n,), 0,
                                                                                       len(DISTRACTOR_STRIPS))]
        xy = strips[:, 0] + jax.random.uniform(k[4], (n, 2), dtype) * (strips[:, 1] - strips[:, 0])
        size = jax.random.uniform(k[5], (n, 3), dtype, *DISTRACTOR_SIZE)
        types = model.geom_type[geoms]
        # standing on the floor: half height is size[2] (box), size[1] (cylinder), size[0] (sphere)
        height = jnp.where(types == mujoco.mjtGeom.mjGEOM_BOX, size[:, 2],
                           jnp.where(types == mujoco.mjtGeom.mjGEOM_CYLINDER, size[:, 1], size[:, 0]))
        yaw = jax.random.uniform(k[6], (n,), dtype, 0.0, np.pi)
        out["geom_pos"] = jnp.asarray(model.geom_pos, dtype).at[geoms].set(
            jnp.concatenate([xy, height[:, None]], axis=-1))
        out["geom_quat"] = jnp.asarray(model.geom_quat, dtype).at[geoms].set(
            jnp.stack([jnp.cos(yaw / 2), 0 * yaw, 0 * yaw, jnp.sin(yaw / 2)], axis=-1))
        out["geom_size"] = jnp.asarray(model.geom_size, dtype).at[geoms].set(size)
        colour = jax.random.uniform(k[7], (n, 3), dtype)
        out["geom_rgba"] = out["geom_rgba"].at[geoms, :3].set(colour)
    return out


def sample(model: mujoco.MjModel, config: VisualRandomization, rng: Array, dtype) -> dict[str, Array]:
    """One world's draws, finite for any key: the render model's arrays (:data:`FIELDS`, shapes as in ``model``;
    ``cam_fovy`` and ``cam_intrinsic`` only with ``camera_zoom``; the scenery's only with it, from a ``model``
    built with it) and, with image effects, :data:`IMAGE`'s."""
    k = jax.random.split(rng, 7)
    # the lens and image effects' keys (k's draws stay as they were)
    extra = jax.random.split(jax.random.fold_in(rng, 1), 5)
    c = lambda x: jnp.asarray(np.asarray(x), dtype)  # noqa: E731
    shift = lambda key, shape, s: jax.random.uniform(key, shape, dtype, -s, s)  # noqa: E731
    lo, hi = config.light_intensity
    rgb = lambda key, rgba: rgba.at[:, :3].set(  # noqa: E731
        jnp.clip(rgba[:, :3] + shift(key, (len(rgba), 3), config.colour_shift), 0.0, 1.0))
    geom_rgba = c(model.geom_rgba)
    # else the material's colour shows
    shown = ~((model.geom_matid >= 0) & np.all(model.geom_rgba == DEFAULT_GEOM_RGBA, axis=-1))
    quat = c(model.cam_quat)
    axis = jax.random.normal(k[5], (len(quat), 3), dtype)
    axis = axis / jnp.maximum(jnp.linalg.norm(axis, axis=-1, keepdims=True), 1e-9)
    half = 0.5 * jax.random.uniform(k[6], (len(quat), 1), dtype, 0.0, config.camera_tilt)
    turn = jnp.concatenate([jnp.cos(half), jnp.sin(half) * axis], axis=-1)
    turned = jax.vmap(_quat_mul)(turn, quat)
    draw = {
        "light_diffuse": c(model.light_diffuse) * jax.random.uniform(k[0], (model.nlight, 1), dtype, lo, hi),
        "light_pos": c(model.light_pos) + shift(k[1], (model.nlight, 3), config.light_shift),
        "mat_rgba": rgb(k[2], c(model.mat_rgba)),
        "geom_rgba": jnp.where(shown[:, None], rgb(k[3], geom_rgba), geom_rgba),
        "cam_pos": c(model.cam_pos) + shift(k[4], (model.ncam, 3), config.camera_shift),
        "cam_quat": turned / jnp.linalg.norm(turned, axis=-1, keepdims=True),
    }
    if config.camera_zoom:  # focal length x f: tan(fovy / 2) / f, and fx, fy x f
        focal = jax.random.uniform(extra[0], (model.ncam,), dtype, 1.0 - config.camera_zoom, 1.0 + config.camera_zoom)
        half_fovy = jnp.arctan(jnp.tan(jnp.deg2rad(c(model.cam_fovy)) / 2) / focal)
        draw["cam_fovy"] = jnp.rad2deg(2 * half_fovy)
        draw["cam_intrinsic"] = c(model.cam_intrinsic).at[:, :2].multiply(focal[:, None])
    if config.image_effects:
        balance = jax.random.uniform(extra[1], (3,), dtype, 1.0 - config.white_balance, 1.0 + config.white_balance)
        draw["image_gain"] = jax.random.uniform(extra[2], (), dtype, *config.exposure) * balance
        draw["image_blur"] = jax.random.uniform(extra[3], (), dtype, 0.0, config.blur)
        draw["image_noise"] = jnp.asarray(config.noise, dtype)
        draw["image_key"] = extra[4]
    if config.scenery:
        draw = _scenery(model, config, jax.random.fold_in(rng, 2), dtype, draw)
    return draw


def model_arrays(draw: dict[str, Array] | None) -> dict[str, Array]:
    """The render model's arrays of a draw (:data:`FIELDS`), what a renderer writes into its model."""
    return {k: v for k, v in (draw or {}).items() if k in FIELDS}


def render_arrays(draw: dict[str, Array] | None, physics: dict[str, Array]) -> dict[str, Array]:
    """What a renderer writes into its model for one world: a draw's arrays (:func:`model_arrays`) with the
    physics model's randomized ``physics`` arrays (e.g. a block's ``geom_size``) laid over their first rows. A
    render model's scenery geoms come after every geom of the scene, so the physics rows are the scene's; an
    array the draw lacks stays physics-shaped (the renderers pad it with their model's rows)."""
    out = model_arrays(draw)
    for k, v in physics.items():
        out[k] = out[k].at[:v.shape[0]].set(v.astype(out[k].dtype)) if k in out else v
    return out


def apply_image(frames: Array, draw: dict[str, Array] | None, salt: Array | int = 0) -> Array:
    """``frames`` (..., H, W, 3) uint8 of one world under a draw's image effects (:data:`IMAGE`; none: as they
    are): the gain per channel, the blur, then the noise drawn from ``image_key`` folded with ``salt`` (uint32:
    a frame's own, e.g. its camera and state), rounded and clipped to uint8."""
    if not draw or "image_gain" not in draw:
        return frames
    x = frames.astype(jnp.float32) * draw["image_gain"].astype(jnp.float32)
    sigma = jnp.maximum(draw["image_blur"].astype(jnp.float32), 1e-3)
    taps = jnp.exp(-0.5 * (jnp.arange(-BLUR_TAPS, BLUR_TAPS + 1, dtype=jnp.float32) / sigma) ** 2)
    taps = taps / taps.sum()
    for axis in (-3, -2):  # rows, then columns; edges repeated
        pad = [(0, 0)] * x.ndim
        pad[axis] = (BLUR_TAPS, BLUR_TAPS)
        padded, n = jnp.pad(x, pad, mode="edge"), x.shape[axis]
        # an Array: taps is not empty (sum's 0 start never returned)
        x = cast(Array, sum(w * jax.lax.slice_in_dim(padded, i, i + n, axis=axis) for i, w in enumerate(taps)))
    key = jax.random.fold_in(jnp.asarray(draw["image_key"], jnp.uint32), jnp.asarray(salt, jnp.uint32))
    x = x + 255.0 * draw["image_noise"].astype(jnp.float32) * jax.random.normal(key, x.shape, jnp.float32)
    return jnp.clip(jnp.round(x), 0, 255).astype(jnp.uint8)


def state_salt(qpos: Array, camera: int) -> Array:
    """A uint32 that differs from frame to frame: the bits of the state's ``qpos`` sum, and the camera's index."""
    bits = jax.lax.bitcast_convert_type(jnp.sum(qpos).astype(jnp.float32), jnp.uint32)
    return bits ^ jnp.uint32(camera * 0x9E3779B9 & 0xFFFFFFFF)


def _quat_mul(a: Array, b: Array) -> Array:
    """Hamilton product of two (w, x, y, z) quaternions (4,): rotation ``b`` then ``a``."""
    w1, v1, w2, v2 = a[0], a[1:], b[0], b[1:]
    return jnp.concatenate([(w1 * w2 - v1 @ v2)[None], w1 * v2 + w2 * v1 + jnp.cross(v1, v2)])
