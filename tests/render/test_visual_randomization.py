"""Visual domain randomization: config checks, the drawn arrays, and what the jitted envs render."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.cli import argtypes as cliargs
from so101_mjx.envs import make
from so101_mjx.render import batch, visual_randomization as vr
from so101_mjx.render.batch import render_model

NAME = "SO101PickCube-v0"


def test_parse_forms_and_errors():
    assert vr.parse(None) is None and vr.parse("standard") == vr.STANDARD and vr.parse("wide") == vr.WIDE
    assert vr.parse(json.dumps(dataclasses.asdict(vr.STANDARD))) == vr.STANDARD
    assert vr.parse({"camera_tilt": 0.1}) == vr.VisualRandomization(camera_tilt=0.1)
    with pytest.raises(ValueError, match=r"unknown visual_randomization field\(s\) \['tilt'\]"):
        vr.parse({"tilt": 0.1})
    with pytest.raises(ValueError, match="visual_randomization.light_intensity must be a range 0 <= low <= high"):
        vr.VisualRandomization(light_intensity=(1.5, 1.0))
    with pytest.raises(ValueError, match="visual_randomization.camera_tilt must be"):
        vr.VisualRandomization(camera_tilt=2.0)
    with pytest.raises(ValueError, match="visual_randomization.colour_shift must be"):
        vr.VisualRandomization(colour_shift=float("nan"))
    with pytest.raises(ValueError, match=r"one of \['standard', 'wide', 'cluttered'\] or a JSON object"):
        vr.parse("strong")
    with pytest.raises(cliargs.ArgumentValueError, match="unknown visual_randomization"):
        cliargs.visual_randomization('{"hue": 1}')


def test_env_config_needs_image_obs():
    with pytest.raises(ValueError, match="visual_randomization change only the rendered frames of pixels: "
                                         "they need image_obs=True"):
        make(NAME, "c", visual_randomization="standard")


@pytest.mark.slow
def test_sample_defaults_are_the_model_and_ranges_hold():
    model = render_model("pick_cube", "fast")
    nominal = vr.sample(model, vr.VisualRandomization(), jax.random.PRNGKey(0), jnp.float32)
    # the lens only with camera_zoom, the scenery's arrays only with scenery
    assert set(nominal) == set(vr.FIELDS) - {"cam_fovy", "cam_intrinsic", *vr.SCENERY_FIELDS}
    for name, value in nominal.items():
        np.testing.assert_allclose(value, getattr(model, name), atol=1e-6, err_msg=name)
    config = vr.STANDARD
    draws = jax.vmap(lambda k: vr.sample(model, config, k, jnp.float32))(jax.random.split(jax.random.PRNGKey(1), 64))
    assert all(bool(jnp.all(jnp.isfinite(v))) for v in draws.values())
    scale = draws["light_diffuse"] / np.maximum(model.light_diffuse, 1e-9)
    lo, hi = config.light_intensity
    assert lo - 1e-6 <= float(scale.min()) and float(scale.max()) <= hi + 1e-6 and float(scale.std()) > 0.1
    assert float(jnp.abs(draws["light_pos"] - model.light_pos).max()) <= config.light_shift + 1e-6
    assert float(jnp.abs(draws["cam_pos"] - model.cam_pos).max()) <= config.camera_shift + 1e-6
    np.testing.assert_allclose(jnp.linalg.norm(draws["cam_quat"], axis=-1), 1.0, atol=1e-6)
    cos = jnp.abs(jnp.sum(draws["cam_quat"] * model.cam_quat, axis=-1))  # cos(angle / 2) between the orientations
    angle = 2 * jnp.arccos(jnp.clip(cos, 0.0, 1.0))
    assert float(angle.max()) <= config.camera_tilt + 1e-4 and float(angle.max()) > 0.5 * config.camera_tilt
    rgb = draws["mat_rgba"][..., :3]
    assert float(rgb.min()) >= 0 and float(rgb.max()) <= 1
    assert float(jnp.abs(rgb - model.mat_rgba[:, :3]).max()) <= config.colour_shift + 1e-6
    np.testing.assert_array_equal(draws["mat_rgba"][..., 3], np.broadcast_to(model.mat_rgba[:, 3], (64, model.nmat)))
    by_material = (model.geom_matid >= 0) & np.all(model.geom_rgba == vr.DEFAULT_GEOM_RGBA, axis=-1)
    assert by_material.any() and (~by_material).any()
    np.testing.assert_array_equal(draws["geom_rgba"][:, by_material],
                                  np.broadcast_to(model.geom_rgba[by_material], (64, by_material.sum(), 4)))
    assert (float(jnp.abs(draws["geom_rgba"][:, ~by_material, :3] - model.geom_rgba[~by_material, :3]).max())
            > 0.5 * config.colour_shift)


def _frames(**config):
    # fixed block position: the same physics in every world
    env = make(NAME, "c", image_obs=True, image_size=32, **config)
    states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(2), 4))
    return env, states, np.asarray(states.obs["pixels/front"])


@pytest.mark.slow
def test_randomized_worlds_look_different_and_match_the_renderer():
    _, plain_states, plain = _frames()
    assert plain_states.info.render_params is None
    assert all(np.array_equal(plain[0], f) for f in plain[1:])  # same state, same picture
    env, states, frames = _frames(visual_randomization="standard")
    np.testing.assert_array_equal(states.physics.qpos, plain_states.physics.qpos)  # the physics is untouched
    diffs = [np.abs(frames[0].astype(int) - f).mean() for f in frames[1:]]
    assert min(diffs) > 1.0, diffs
    assert np.abs(frames.astype(int) - plain).mean() > 1.0
    renderer = env.cameras["front"]
    again = renderer.render(np.asarray(states.physics.qpos), None,
                            jax.tree.map(np.asarray, vr.model_arrays(states.info.render_params)))
    np.testing.assert_array_equal(again, frames)
    stepped = jax.jit(jax.vmap(env.step))(states, jnp.zeros((4, 4)))  # the episode keeps its draw
    jax.tree.map(np.testing.assert_array_equal, stepped.info.render_params, states.info.render_params)


@pytest.mark.slow
def test_wide_draws_the_lens_and_image_effects_within_their_ranges():
    model = render_model("pick_cube", "fast")
    config = vr.WIDE
    draws = jax.vmap(lambda k: vr.sample(model, config, k, jnp.float32))(jax.random.split(jax.random.PRNGKey(3), 64))
    assert set(draws) == (set(vr.FIELDS) - set(vr.SCENERY_FIELDS)) | set(vr.IMAGE)
    focal = np.tan(np.deg2rad(model.cam_fovy) / 2) / np.tan(np.deg2rad(np.asarray(draws["cam_fovy"])) / 2)
    assert (1 - config.camera_zoom - 1e-5 <= focal.min() and focal.max() <= 1 + config.camera_zoom + 1e-5
            and focal.std() > 0.01)
    np.testing.assert_allclose(
        np.asarray(draws["cam_intrinsic"])[..., :2] / np.maximum(model.cam_intrinsic[:, :2], 1e-12),
        focal[..., None] * np.ones(2), rtol=1e-5)
    gain = np.asarray(draws["image_gain"])
    lo, hi = config.exposure[0] * (1 - config.white_balance), config.exposure[1] * (1 + config.white_balance)
    assert lo - 1e-6 <= gain.min() and gain.max() <= hi + 1e-6 and gain.std() > 0.05
    assert 0 <= float(draws["image_blur"].min()) and float(draws["image_blur"].max()) <= config.blur
    # the draws that STANDARD has are the same under any lens and image fields (their keys are apart)
    standard = vr.sample(model, vr.STANDARD, jax.random.PRNGKey(4), jnp.float32)
    more = vr.sample(model, dataclasses.replace(vr.STANDARD, camera_zoom=0.1, noise=0.1),
                     jax.random.PRNGKey(4), jnp.float32)
    jax.tree.map(np.testing.assert_array_equal, standard, {k: more[k] for k in standard})


def test_image_effects_gain_blur_and_noise():
    frames = jnp.asarray(np.random.default_rng(0).integers(0, 256, (16, 20, 3), dtype=np.uint8))
    draw = {"image_gain": jnp.ones(3), "image_blur": jnp.zeros(()), "image_noise": jnp.zeros(()),
            "image_key": jax.random.PRNGKey(0)}
    np.testing.assert_array_equal(vr.apply_image(frames, draw), frames)  # neutral draws: the frame as it was
    assert vr.apply_image(frames, None) is frames
    darker = np.asarray(vr.apply_image(frames, {**draw, "image_gain": jnp.asarray([0.5, 1.0, 1.0])}))
    np.testing.assert_array_equal(darker[..., 0], np.round(np.asarray(frames[..., 0]) * 0.5).astype(np.uint8))
    blurred = np.asarray(vr.apply_image(frames, {**draw, "image_blur": jnp.asarray(1.5)})).astype(float)
    assert np.abs(np.diff(blurred, axis=1)).mean() < 0.5 * np.abs(np.diff(np.asarray(frames, float), axis=1)).mean()
    assert abs(blurred.mean() - float(frames.mean())) < 3.0  # a blur keeps the brightness
    noisy = {**draw, "image_noise": jnp.asarray(0.05)}
    a, b = (np.asarray(vr.apply_image(frames, noisy, salt)).astype(float) for salt in (1, 2))
    # 0.05 of 255: ~10 per pixel, new each frame
    assert 5 < np.abs(a - np.asarray(frames)).mean() < 15 and not np.array_equal(a, b)


@pytest.mark.slow
def test_wide_frames_in_the_env_are_the_renderers_under_the_image_effects():
    env, states, frames = _frames(visual_randomization="wide")
    draw = jax.tree.map(np.asarray, states.info.render_params)
    drawn = env.cameras["front"].render(np.asarray(states.physics.qpos), None, vr.model_arrays(draw))
    salts = jax.vmap(vr.state_salt, (0, None))(states.physics.qpos, 0)
    np.testing.assert_array_equal(jax.vmap(vr.apply_image)(jnp.asarray(drawn), draw, salts), frames)
    assert min(np.abs(frames[0].astype(int) - f).mean() for f in frames[1:]) > 1.0
    stepped = jax.jit(jax.vmap(env.step))(states, jnp.zeros((4, 4)))
    assert not np.array_equal(stepped.obs["pixels/front"], frames)  # the noise is drawn anew each frame


def test_scenery_options_and_the_render_model_they_build():
    assert vr.parse("cluttered") == vr.CLUTTERED and vr.CLUTTERED.scenery and not vr.WIDE.scenery
    assert dataclasses.replace(vr.CLUTTERED, textures=False, backdrop=False, distractors=0) == vr.WIDE
    with pytest.raises(ValueError, match="visual_randomization.distractors must be"):
        vr.VisualRandomization(distractors=vr.MAX_DISTRACTORS + 1)
    with pytest.raises(ValueError, match="visual_randomization.textures must be"):
        vr.VisualRandomization(textures="yes")
    plain, model = render_model("pick_cube", "fast"), render_model("pick_cube", "fast", visual=vr.CLUTTERED)
    assert render_model("pick_cube", "fast", visual=vr.WIDE).ngeom == plain.ngeom  # no scenery, nothing added
    assert (model.nq, model.njnt, model.nu, model.nbody) == (plain.nq, plain.njnt, plain.nu, plain.nbody + 1)
    added = [i for i in range(model.ngeom) if (model.geom(i).name or "").startswith(vr.SCENERY)]
    assert len(added) == 1 + vr.CLUTTERED.distractors == model.ngeom - plain.ngeom
    assert added == list(range(plain.ngeom, model.ngeom))  # last: the scene's geoms keep the physics model's ids
    np.testing.assert_array_equal(model.geom_bodyid[:plain.ngeom], plain.geom_bodyid)
    assert not model.geom_contype[added].any() and not model.geom_conaffinity[added].any()
    assert not model.geom_sameframe[added].any()  # drawn poses take effect (no geom frame is its body's)
    assert model.nmat - plain.nmat == len(vr.TEXTURES) and model.ntex - plain.ntex == len(vr.TEXTURES)


@pytest.mark.slow
def test_scenery_draws_stand_beside_the_task_region():
    config = vr.CLUTTERED
    model = render_model("pick_cube", "fast", visual=config)
    draws = jax.vmap(lambda k: vr.sample(model, config, k, jnp.float32))(jax.random.split(jax.random.PRNGKey(5), 256))
    assert set(draws) == set(vr.FIELDS) | set(vr.IMAGE)
    ids = [model.geom(f"{vr.SCENERY}distractor{i}").id for i in range(config.distractors)]
    pos, size = np.asarray(draws["geom_pos"])[:, ids], np.asarray(draws["geom_size"])[:, ids]
    (x0, y0), (x1, y1) = vr.CLEAR_REGION
    assert not np.any((pos[..., 0] > x0) & (pos[..., 0] < x1) & (pos[..., 1] > y0) & (pos[..., 1] < y1))
    in_strip = np.zeros(pos.shape[:2], bool)
    for (sx0, sy0), (sx1, sy1) in vr.DISTRACTOR_STRIPS:
        in_strip |= (pos[..., 0] >= sx0) & (pos[..., 0] <= sx1) & (pos[..., 1] >= sy0) & (pos[..., 1] <= sy1)
    assert in_strip.all()
    lo, hi = vr.DISTRACTOR_SIZE
    assert size.min() >= lo and size.max() <= hi
    half_height = np.where(model.geom_type[ids] == 6, size[..., 2],  # box, cylinder, sphere (mjtGeom)
                           np.where(model.geom_type[ids] == 5, size[..., 1], size[..., 0]))
    np.testing.assert_allclose(pos[..., 2], half_height, rtol=1e-6)  # standing on the floor
    materials = [model.material(f"{vr.SCENERY}material{k}").id for k in range(len(vr.TEXTURES))]
    for geom in ("floor", f"{vr.SCENERY}backdrop"):
        chosen = np.asarray(draws["geom_matid"])[:, model.geom(geom).id]
        assert set(chosen.tolist()) == set(materials)  # every texture is drawn in 256 episodes
    tint, repeat = np.asarray(draws["mat_rgba"])[:, materials, :3], np.asarray(draws["mat_texrepeat"])[:, materials]
    assert vr.TINT[0] <= tint.min() and tint.max() <= vr.TINT[1] and tint.std() > 0.1
    assert vr.TEXREPEAT[0] <= repeat.min() and repeat.max() <= vr.TEXREPEAT[1]


@pytest.mark.slow
def test_cluttered_frames_in_the_env_are_the_renderers_and_the_physics_is_untouched():
    _, plain_states, plain = _frames()
    env, states, frames = _frames(visual_randomization="cluttered")
    np.testing.assert_array_equal(states.physics.qpos, plain_states.physics.qpos)
    draw = jax.tree.map(np.asarray, states.info.render_params)
    drawn = env.cameras["front"].render(np.asarray(states.physics.qpos), None, vr.model_arrays(draw))
    salts = jax.vmap(vr.state_salt, (0, None))(states.physics.qpos, 0)
    np.testing.assert_array_equal(jax.vmap(vr.apply_image)(jnp.asarray(drawn), draw, salts), frames)
    wide = _frames(visual_randomization="wide")[2]
    assert np.abs(frames.astype(int) - wide).mean() > 5.0  # the scenery shows
    # with the block's size randomized too: its geom_size rows lie over the draw's, the other arrays are padded
    env, states, bigger = _frames(visual_randomization="cluttered", randomization={"block_size": (1.6, 1.6)})
    params = jax.vmap(vr.render_arrays)(states.info.render_params,
                                        {k: v for k, v in states.info.model_params.items() if k.startswith("geom_")})
    block = env.mj_model.geom("block").id
    np.testing.assert_allclose(params["geom_size"][:, block], np.tile(1.6 * env.mj_model.geom_size[block], (4, 1)),
                               rtol=1e-6)
    assert params["geom_friction"].shape[1] == env.mj_model.ngeom < params["geom_size"].shape[1]
    drawn = env.cameras["front"].render(np.asarray(states.physics.qpos), None, jax.tree.map(np.asarray, params))
    draw = jax.tree.map(np.asarray, states.info.render_params)
    salts = jax.vmap(vr.state_salt, (0, None))(states.physics.qpos, 0)
    np.testing.assert_array_equal(jax.vmap(vr.apply_image)(jnp.asarray(drawn), draw, salts), bigger)
    assert not np.array_equal(bigger, frames)  # the bigger block shows


def test_render_arrays_lay_the_physics_rows_over_the_draw_and_the_renderer_pads_the_rest():
    draw = {"geom_size": jnp.full((5, 3), 2.0), "geom_rgba": jnp.ones((5, 4)), "image_gain": jnp.ones(3)}
    physics = {"geom_size": jnp.full((3, 3), 7.0), "geom_friction": jnp.full((3, 3), 0.5)}
    out = vr.render_arrays(draw, physics)
    assert set(out) == {"geom_size", "geom_rgba", "geom_friction"}  # no image effects: they are not model arrays
    np.testing.assert_array_equal(out["geom_size"], np.r_[np.full((3, 3), 7.0), np.full((2, 3), 2.0)])
    assert out["geom_friction"].shape == (3, 3)
    full = np.arange(15.0).reshape(5, 3)
    padded = batch._padded(full, np.zeros((2, 3, 3)), 2)  # two worlds of a 3-row physics array
    assert padded.shape == (2, 5, 3)
    np.testing.assert_array_equal(padded[:, :3], 0.0)
    np.testing.assert_array_equal(padded[:, 3:], np.broadcast_to(full[3:], (2, 2, 3)))
    with pytest.raises(ValueError, match="a model array has 6 rows, the render model's 5"):
        batch._padded(full, np.zeros((1, 6, 3)), 1)


def test_scenery_is_refused_on_the_warp_renderer():
    with pytest.raises(ValueError, match="textures, backdrop and distractors render with MuJoCo C only"):
        make(NAME, "mjx", image_obs=True, visual_randomization="cluttered")
