"""Camera images on backend mjx: MuJoCo Warp's batch renderer (so101_mjx.render.warp) against the C one.

Runs on Warp's CPU device where no GPU is present (measured: warp-lang 1.19.0, mujoco-warp 3.17.0;
the first render compiles Warp's kernels, cached under ``~/.cache/warp``). Skipped where mujoco_warp
is not installed (``pip install -e ".[warp]"``).
"""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

pytest.importorskip("mujoco_warp")

from so101_mjx.envs import make
from so101_mjx.render import batch as pixels
from so101_mjx.render.warp import WarpBatchRenderer

SIZE, WORLDS = 64, 6


def _poses(model, n=WORLDS, seed=0):
    """``n`` arm poses and block offsets (qpos (n, nq)) and goal positions (n, 1, 3) on the table."""
    rng = np.random.default_rng(seed)
    qpos = np.tile(model.qpos0, (n, 1))
    qpos[:, :5] += rng.uniform(-0.3, 0.3, (n, 5))
    qpos[:, 6:8] += rng.uniform(-0.05, 0.05, (n, 2))
    goal = np.zeros((n, 1, 3))
    goal[:, 0, :2] = [0.2, 0.08] + rng.uniform(-0.1, 0.1, (n, 2))
    goal[:, 0, 2] = 0.0005
    return qpos, goal


@pytest.fixture(scope="module")
def warp_renderer():
    model = pixels.render_model("pick_place", "shadowed", marker_geoms=("goal",))
    return WarpBatchRenderer(model, SIZE, SIZE, "front", markers=("goal",))


def test_warp_frames_match_the_c_renderer_up_to_its_lighting(warp_renderer):
    """Same states, quality "shadowed": measured mean |Δ| 10.1 of 255 and median 1 over 6 worlds at
    64×64 (the difference is the sky: Warp's background is black, C's haze is not; and shading)."""
    qpos, goal = _poses(warp_renderer.model)
    frames = warp_renderer.render(qpos, goal)
    c = pixels.BatchRenderer(pixels.render_model("pick_place", "shadowed"), SIZE, SIZE, markers=("goal",), workers=1)
    try:
        expected = c.render(qpos, goal)
    finally:
        c.close()
    assert frames.shape == (WORLDS, SIZE, SIZE, 3) and frames.dtype == np.uint8
    assert all(frames[i].std() > 10 for i in range(WORLDS))  # not blank
    assert np.abs(frames[0].astype(int) - frames[1]).mean() > 1  # the pose shows
    diff = np.abs(frames.astype(int) - expected)
    assert diff.mean() < 12 and np.median(diff) <= 2
    # below the sky (the top 12 rows at 64 px), the two renderers agree closely
    assert np.median(diff[:, 16:]) <= 1 and diff[:, 16:].mean() < 8


def test_a_per_world_focal_length_zooms_warp_frames_as_the_c_renderers(warp_renderer):
    """``cam_fovy`` per world (``camera_zoom``): C renders it, Warp resamples its traced frame; the two stay as
    close as at the model's own focal length (below the sky rows, where their lighting agrees)."""
    qpos, goal = _poses(warp_renderer.model, n=2)
    model = warp_renderer.model
    camera = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, "front")
    fovy = np.tile(model.cam_fovy, (2, 1)).astype(np.float32)
    fovy[:, camera] = np.rad2deg(2 * np.arctan(np.tan(np.deg2rad(model.cam_fovy[camera]) / 2)
                                               / np.asarray([1.15, 0.9])))
    c = pixels.BatchRenderer(pixels.render_model("pick_place", "shadowed"), SIZE, SIZE, markers=("goal",), workers=1)
    try:
        expected, plain_c = c.render(qpos, goal, {"cam_fovy": fovy}), c.render(qpos, goal)
    finally:
        c.close()
    frames, plain = warp_renderer.render(qpos, goal, {"cam_fovy": fovy}), warp_renderer.render(qpos, goal)
    assert np.abs(frames.astype(int) - plain).mean() > 3  # zoomed
    zoomed, nominal = (np.abs(a[:, 16:].astype(int) - b[:, 16:]).mean()
                       for a, b in ((frames, expected), (plain, plain_c)))
    print(f"mean |Δ| below the sky: zoomed {zoomed:.2f}, nominal {nominal:.2f}")
    assert zoomed < nominal + 3, (zoomed, nominal)


def test_warp_frames_follow_markers_and_per_world_params(warp_renderer):
    """Under jit + vmap: a moved goal marker and a recoloured block change the frames; a physics-model
    sized ``geom_rgba`` (no marker geom row) is padded with the render model's own marker row."""
    model = warp_renderer.model
    qpos, goal = _poses(model, 2)
    render = jax.jit(jax.vmap(warp_renderer.jax_render))
    q, g = jnp.asarray(qpos, jnp.float32), jnp.asarray(goal, jnp.float32)
    own = jnp.tile(jnp.asarray(model.geom_rgba[:-1], jnp.float32), (2, 1, 1))  # the physics model's geom rows
    base = np.asarray(render(q, g, {"geom_rgba": own}))
    np.testing.assert_array_equal(base, warp_renderer.render(qpos, goal))
    moved = np.asarray(render(q, g + jnp.asarray([0.05, -0.05, 0.0]), {"geom_rgba": own}))
    assert np.abs(moved.astype(int) - base).sum() > 0
    blue = own.at[:, model.geom("block").id, :3].set(jnp.asarray([0.0, 0.0, 1.0], jnp.float32))
    recoloured = np.asarray(render(q, g, {"geom_rgba": blue})).astype(int)
    changed = np.any(recoloured != base, axis=-1)  # (2, H, W)
    assert 0 < changed.mean() < 0.05  # the block's pixels only
    assert (recoloured[..., 2] - base[..., 2])[changed].mean() > 20  # turned blue


def test_warp_renderer_bad_arguments(warp_renderer):
    with pytest.raises(ValueError, match="camera must be one of"):
        WarpBatchRenderer(warp_renderer.model, SIZE, SIZE, camera="top")
    with pytest.raises(ValueError, match=r"marker 'goal' has no mocap body 'goal_marker'"):
        WarpBatchRenderer(pixels.render_model("pick_place", "fast"), SIZE, SIZE, markers=("goal",))
    with pytest.raises(ValueError, match="rows"):
        warp_renderer.render(warp_renderer.model.qpos0[None], None, {"geom_rgba": np.zeros((1, 40, 4), np.float32)})


def test_image_obs_on_mjx_renders_the_state_as_backend_c_does():
    """``image_obs=True`` on backend mjx: the observation layout of backend c, and reset frames of
    the same keys equal up to the renderers' difference (the reset states are the same)."""
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    kwargs = dict(image_obs=True, image_size=SIZE, image_quality="shadowed", random_block_position=True)
    states = {}
    for backend in ("mjx", "c"):
        env = make("SO101PickPlace-v0", backend=backend, **kwargs)
        assert env.observation_size == {"agent_pos": (14,), "pixels/front": (SIZE, SIZE, 3), "state": (20,)}
        states[backend] = jax.jit(jax.vmap(env.reset))(keys)
    mjx, c = (np.asarray(states[b].obs["pixels/front"]) for b in ("mjx", "c"))
    assert mjx.shape == (3, SIZE, SIZE, 3) and mjx.dtype == np.uint8
    np.testing.assert_allclose(states["mjx"].obs["state"], states["c"].obs["state"], atol=1e-9)
    assert np.abs(mjx[0].astype(int) - mjx[1]).mean() > 0.5  # block and goal differ per key
    diff = np.abs(mjx.astype(int) - c)
    assert diff.mean() < 12 and np.median(diff) <= 2


def test_visual_randomization_reaches_the_warp_frames():
    """Each randomized render array (lights, colours, camera pose and focal length) changes Warp's frame on its
    own; the env's draw is kept per key (equal keys, equal frames)."""
    from so101_mjx.render import visual_randomization

    env = make("SO101PickCube-v0", backend="mjx", image_obs=True, image_size=32, image_quality="shadowed",
               visual_randomization="wide")
    state = jax.jit(jax.vmap(env.reset))(jnp.tile(jax.random.PRNGKey(3)[None], (2, 1)))
    frames = np.asarray(state.obs["pixels/front"]).astype(int)
    np.testing.assert_array_equal(frames[0], frames[1])
    renderer = env.cameras["front"]
    qpos = state.physics.qpos[:1]
    plain = renderer.jax_render(qpos).astype(int)
    # a calibrated camera's
    fields = set(visual_randomization.model_arrays(state.info.render_params)) - {"cam_intrinsic"}
    assert fields == set(visual_randomization.FIELDS) - {"cam_intrinsic", *visual_randomization.SCENERY_FIELDS}
    for field in sorted(fields):
        drawn = renderer.jax_render(qpos, None, {field: state.info.render_params[field][:1]}).astype(int)
        assert np.abs(np.asarray(drawn - plain)).mean() > 0.05, field
