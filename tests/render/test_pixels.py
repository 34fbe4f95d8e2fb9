"""Camera images in the jitted envs (so101_mjx.render.batch, ``image_obs=True`` on backend c)."""

import copy
import os

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from so101_mjx.envs import make
from so101_mjx.envs.rollout import run_episodes
from so101_mjx.render import batch as pixels
from so101_mjx.render.frames import QUALITIES
from so101_mjx.render.worker import draw
from so101_mjx.robot.scenes import scenes_dir

SIZE = 32


@pytest.fixture(scope="module")
def fast_model():
    return pixels.render_model("pick_place", "fast")


def test_cluster_mesh_keeps_the_shape_with_fewer_triangles():
    triangles = pixels.read_stl(scenes_dir() / "meshes" / "upper_arm_so101_v1.stl")
    vertices, faces = pixels.cluster_mesh(triangles)
    assert len(faces) < len(triangles) / 4
    # every vertex is the mean of original points in its 2 mm cell: the bounding box moves by less than a cell
    points = triangles.reshape(-1, 3)
    np.testing.assert_array_less(np.abs(vertices.min(0) - points.min(0)), pixels.CLUSTER_CELL)
    np.testing.assert_array_less(np.abs(vertices.max(0) - points.max(0)), pixels.CLUSTER_CELL)
    assert faces.min() >= 0 and faces.max() < len(vertices)
    assert ((faces[:, 0] != faces[:, 1]).all() and (faces[:, 1] != faces[:, 2]).all()
            and (faces[:, 0] != faces[:, 2]).all())


def test_read_stl_rejects_a_file_that_is_not_binary_stl(tmp_path):
    path = tmp_path / "bad.stl"
    path.write_bytes(b"solid x\n" + b"\0" * 100)
    with pytest.raises(ValueError, match="not a binary STL"):
        pixels.read_stl(path)


def test_fast_render_model_is_the_physics_model_with_light_meshes(fast_model):
    full = pixels.render_model("pick_place", "full")
    assert ((fast_model.nq, fast_model.ngeom, fast_model.nbody, fast_model.nsite)
            == (full.nq, full.ngeom, full.nbody, full.nsite))
    assert fast_model.nmeshface < full.nmeshface / 8
    assert fast_model.vis.quality.offsamples == 0 and full.vis.quality.offsamples > 0
    with pytest.raises(ValueError, match="quality must be one of"):
        pixels.render_model("pick_place", "ugly")


@pytest.mark.slow
def test_shadowed_model_renders_nearly_the_full_scene(fast_model):
    """The light meshes with shadows look like the scene as shipped (at the 64x64 training size); without shadows they
    do not."""
    q = np.tile(fast_model.qpos0, (2, 1))
    q[1, 0] = 0.4
    frames = {}
    for quality in QUALITIES:
        renderer = pixels.BatchRenderer(pixels.render_model("pick_place", quality), 64, 64, workers=1)
        frames[quality] = renderer.render(q).astype(int)
        assert renderer.shadows == (quality != "fast")
        renderer.close()
    shadowed, fast = (np.abs(frames[k] - frames["full"]).mean() for k in ("shadowed", "fast"))
    assert shadowed < 3.0 and fast > 5 * shadowed


def test_batch_renderer_workers_jit_vmap_and_one_thread_agree(fast_model):
    q = np.tile(fast_model.qpos0, (6, 1))
    q[:, 0] = np.linspace(-0.6, 0.6, 6)  # pan the arm: every world looks different
    goal = np.tile([0.2, 0.08, 0.01], (6, 1, 1))
    one = pixels.BatchRenderer(fast_model, SIZE, SIZE, markers=("goal",), workers=1)
    two = pixels.BatchRenderer(fast_model, SIZE, SIZE, markers=("goal",), workers=2)
    try:
        images = one.render(q, goal)
        assert images.shape == (6, SIZE, SIZE, 3) and images.dtype == np.uint8
        np.testing.assert_array_equal(two.render(q, goal), images)
        assert len({im.tobytes() for im in images}) == 6
        jitted = jax.jit(jax.vmap(two.jax_render))(jnp.asarray(q), jnp.asarray(goal))
        np.testing.assert_array_equal(np.asarray(jitted), images)
        # the marker is drawn where it is put
        moved = one.render(q[:1], np.asarray([[[0.3, -0.1, 0.01]]]))
        assert np.abs(moved.astype(int) - images[:1]).sum() > 0
        # a plain mujoco.Renderer in this process draws the same frames
        model = copy.copy(fast_model)
        renderer = mujoco.Renderer(model, SIZE, SIZE)
        renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = one.shadows
        here = np.empty_like(images)
        draw(model, mujoco.MjData(model), renderer, "front", q, here, goal, [model.site("goal").id])
        renderer.close()
        np.testing.assert_array_equal(here, images)
    finally:
        one.close()
        two.close()


def test_workers_never_import_modules_from_the_working_directory(fast_model, tmp_path, monkeypatch):
    """A numpy.py (or any module) in the directory so101-mjx runs in is not imported by the render workers."""
    marker = tmp_path / "imported"
    for name in ("numpy", "mujoco", "so101_mjx"):
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write('{name} ')\nraise SystemExit(3)\n")
    monkeypatch.chdir(tmp_path)
    renderer = pixels.BatchRenderer(fast_model, SIZE, SIZE, markers=("goal",), workers=1)
    try:
        images = renderer.render(np.tile(fast_model.qpos0, (2, 1)), np.tile([0.2, 0.08, 0.01], (2, 1, 1)))
    finally:
        renderer.close()
    assert images.shape == (2, SIZE, SIZE, 3) and not marker.exists()


@pytest.mark.slow
def test_renderer_workers_stop_when_dropped_and_restart_after_a_crash(fast_model):
    """Envs made again and again (notebooks) drop renderers without close(): their render processes
    stop. A worker that dies fails that call with a RuntimeError; the next call starts new workers."""
    import gc
    import signal

    q = np.tile(fast_model.qpos0, (4, 1))
    dropped = pixels.BatchRenderer(fast_model, SIZE, SIZE, workers=2)
    dropped.render(q)
    processes = [w.process for w in dropped._workers]
    del dropped
    gc.collect()
    assert len(processes) == 2 and all(p.poll() is not None for p in processes)
    kept = pixels.BatchRenderer(fast_model, SIZE, SIZE, workers=2)
    try:
        first = kept.render(q)
        assert first.std() > 0
        os.kill(kept._workers[1].process.pid, signal.SIGKILL)
        kept._workers[1].process.wait()
        with pytest.raises(RuntimeError, match="render worker .* died"):
            kept.render(q)
        assert not kept._workers  # the survivors were stopped with it
        np.testing.assert_array_equal(kept.render(q), first)
    finally:
        kept.close()
    kept.close()  # twice is harmless


def test_batch_renderer_bad_arguments(fast_model):
    with pytest.raises(ValueError, match="camera must be one of"):
        pixels.BatchRenderer(fast_model, SIZE, SIZE, camera="top")
    with pytest.raises(ValueError, match="marker 'nowhere'"):
        pixels.BatchRenderer(fast_model, SIZE, SIZE, markers=("nowhere",))
    with pytest.raises(ValueError, match="height"):
        pixels.BatchRenderer(fast_model, 0, SIZE)


@pytest.fixture(scope="module")
def image_env():
    return make("SO101PickPlace-v0", backend="c", image_obs=True, image_size=SIZE, random_block_position=True)


def test_image_obs_state_is_the_flat_observation_and_pixels_follow_the_scene(image_env):
    plain = make("SO101PickPlace-v0", backend="c", random_block_position=True)
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    state = jax.jit(jax.vmap(image_env.reset))(keys)
    assert image_env.observation_size == {"agent_pos": (14,), "pixels/front": (SIZE, SIZE, 3), "state": (20,)}
    assert state.obs["pixels/front"].shape == (3, SIZE, SIZE, 3) and state.obs["pixels/front"].dtype == jnp.uint8
    np.testing.assert_array_equal(state.obs["state"], jax.jit(jax.vmap(plain.reset))(keys).obs)
    np.testing.assert_array_equal(state.obs["agent_pos"], state.obs["state"][:, :14])
    # the frame is the render model at the state's qpos and goal
    renderer = pixels.BatchRenderer(pixels.render_model("pick_place"), SIZE, SIZE, markers=("goal",), workers=1)
    try:
        expected = renderer.render(np.asarray(state.physics.qpos), np.asarray(state.info.task["goal"])[:, None])
    finally:
        renderer.close()
    np.testing.assert_array_equal(state.obs["pixels/front"], expected)
    stepped = jax.jit(jax.vmap(image_env.step))(state, jnp.tile(jnp.asarray([0.0, 0.0, 1.0, 1.0], jnp.float64), (3, 1)))
    assert np.abs(np.asarray(stepped.obs["pixels/front"], int) - np.asarray(state.obs["pixels/front"])).sum() > 0


@pytest.mark.slow
def test_image_obs_rollout_reports_final_observations(image_env):
    out = run_episodes(image_env, "scripted", jax.random.PRNGKey(1), 2, steps=3)
    assert out["final_obs"]["pixels/front"].shape == (2, SIZE, SIZE, 3)


def test_wrist_camera_rides_on_the_gripper():
    """``image_cameras=("front", "wrist")``: one pixels entry each; the wrist view moves with the arm
    (a pan of the base changes it), the front one shows the arm from outside."""
    env = make("SO101PickCube-v0", backend="c", image_obs=True, image_size=SIZE, image_cameras=("front", "wrist"))
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    assert (env.observation_size
            == {"agent_pos": (14,), "pixels/front": (SIZE, SIZE, 3), "pixels/wrist": (SIZE, SIZE, 3), "state": (17,)})
    front, wrist = (np.asarray(state.obs[f"pixels/{c}"], int) for c in ("front", "wrist"))
    assert np.abs(front - wrist).mean() > 10 and wrist.std() > 5
    moved = jax.jit(env.step)(state, jnp.asarray([0.0, 1.0, 0.0, 1.0], state.obs["state"].dtype))
    assert np.abs(np.asarray(moved.obs["pixels/wrist"], int) - wrist).mean() > 2
    with pytest.raises(ValueError, match=r"image_cameras must be cameras of the pick_cube scene \['front', 'wrist'\]"):
        make("SO101PickCube-v0", backend="c", image_obs=True, image_cameras=("top",))


def test_image_obs_on_mjx_without_mujoco_warp_names_what_to_install(monkeypatch):
    from so101_mjx.render import warp as pixels_warp

    monkeypatch.setattr(pixels_warp, "warp_available", lambda: False)
    with pytest.raises(ValueError, match=r"backend 'mjx' renders with MuJoCo Warp.*so101-mjx\[warp\]"):
        make("SO101PickCube-v0", backend="mjx", image_obs=True)


@pytest.mark.parametrize(("field", "value", "match"),
                         [("image_size", 0, "image_size"), ("image_quality", "hd", "image_quality"),
                                                       ("image_cameras", (), "image_cameras"),
                                                       ("image_cameras", ("front", "front"), "distinct")])
def test_bad_image_config_is_a_value_error(field, value, match):
    with pytest.raises(ValueError, match=match):
        make("SO101PickCube-v0", backend="c", image_obs=True, **{field: value})


def test_render_model_matches_the_physics_model_qpos_layout(fast_model):
    physics = make("SO101PickPlace-v0", backend="c").mj_model
    names = lambda m, kind, n: [mujoco.mj_id2name(m, kind, i) for i in range(n)]  # noqa: E731
    assert (names(fast_model, mujoco.mjtObj.mjOBJ_JOINT, fast_model.njnt)
            == names(physics, mujoco.mjtObj.mjOBJ_JOINT, physics.njnt))
    assert (names(fast_model, mujoco.mjtObj.mjOBJ_GEOM, fast_model.ngeom)
            == names(physics, mujoco.mjtObj.mjOBJ_GEOM, physics.ngeom))
