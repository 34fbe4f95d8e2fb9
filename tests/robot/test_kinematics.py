"""The lean JAX chain vs MuJoCo C and vs the reference model."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from so101_mjx.robot.kinematics import Kinematics
from so101_mjx.robot.scenes import ARM_JOINTS, ROBOT_JOINTS, joint_dof_ids, joint_qpos_ids


@pytest.fixture(scope="module")
def kin(model):
    return Kinematics.from_model(model)


def _random_q(m, rng, n, joints=ROBOT_JOINTS):
    lo, hi = m.jnt_range[[m.joint(j).id for j in joints]].T
    return rng.uniform(lo, hi, size=(n, len(joints)))


def _mj(m, q, joints=ROBOT_JOINTS):
    d = mujoco.MjData(m)
    d.qpos[joint_qpos_ids(m, joints)] = q
    mujoco.mj_kinematics(m, d)
    mujoco.mj_comPos(m, d)
    return d


@pytest.mark.parametrize("which", ["ours", "reference"])
def test_fk_equals_mujoco_every_body_and_site(kin, model, ref_model, rng, which):
    m = model if which == "ours" else ref_model
    q = _random_q(m, rng, 1000)
    xpos, xrot = jax.jit(kin.forward)(q)
    site_pos, site_rot = jax.jit(lambda q: kin.site_pose(q, "gripperframe"))(q)
    bodies, sid = [m.body(name).id for name in kin.body_names], m.site("gripperframe").id
    ds = [_mj(m, qk) for qk in q]
    np.testing.assert_allclose(xpos, [d.xpos[bodies] for d in ds], rtol=0, atol=1e-12)
    np.testing.assert_allclose(xrot, [d.xmat[bodies].reshape(-1, 3, 3) for d in ds], rtol=0, atol=1e-12)
    np.testing.assert_allclose(site_pos, [d.site_xpos[sid] for d in ds], rtol=0, atol=1e-12)
    np.testing.assert_allclose(site_rot, [d.site_xmat[sid].reshape(3, 3) for d in ds], rtol=0, atol=1e-12)


def test_jacobians_equal_mj_jac(kin, model, rng):
    q = _random_q(model, rng, 1000)
    offset = np.array([0.01, -0.02, 0.03])
    jp, jr = jax.jit(lambda q: kin.jacobian(q, "gripperframe"))(q)
    jpo, jro = jax.jit(lambda q: kin.jacobian(q, "gripperframe", offset))(q)
    dofs = joint_dof_ids(model, ROBOT_JOINTS)
    sid = model.site("gripperframe").id
    site, point = np.zeros((len(q), 2, 3, model.nv)), np.zeros((len(q), 2, 3, model.nv))
    for k, qk in enumerate(q):
        d = _mj(model, qk)
        mujoco.mj_jacSite(model, d, site[k, 0], site[k, 1], sid)
        offset_point = d.site_xpos[sid] + d.site_xmat[sid].reshape(3, 3) @ offset
        mujoco.mj_jac(model, d, point[k, 0], point[k, 1], offset_point, model.site_bodyid[sid])
    np.testing.assert_allclose(jp, site[:, 0][..., dofs], rtol=0, atol=1e-12)
    np.testing.assert_allclose(jr, site[:, 1][..., dofs], rtol=0, atol=1e-12)
    np.testing.assert_allclose(jpo, point[:, 0][..., dofs], rtol=0, atol=1e-12)
    np.testing.assert_allclose(jro, point[:, 1][..., dofs], rtol=0, atol=1e-12)


@pytest.mark.slow
def test_jacobian_matches_finite_differences_and_autodiff(kin, model, rng):
    q = _random_q(model, rng, 20)
    offset = jnp.array([0.0, 0.01, 0.02])
    f = lambda q: kin.point(q, "gripperframe", offset)  # noqa: E731
    jp, _ = kin.jacobian(q, "gripperframe", offset)
    np.testing.assert_allclose(jax.vmap(jax.jacfwd(f))(q), jp, atol=1e-12)
    eps = 1e-6
    for i in range(kin.nq):
        dq = np.zeros(kin.nq)
        dq[i] = eps
        fd = (f(q + dq) - f(q - dq)) / (2 * eps)
        np.testing.assert_allclose(fd, jp[..., i], atol=1e-8)


def test_leading_batch_axes_and_float32(kin, model, rng):
    q = _random_q(model, rng, 24).reshape(2, 3, 4, 6)
    pos64 = kin.point(q, "gripperframe")
    assert pos64.shape == (2, 3, 4, 3) and pos64.dtype == jnp.float64
    jp, jr = kin.jacobian(q, "gripperframe")
    assert jp.shape == jr.shape == (2, 3, 4, 3, 6)
    pos32 = jax.jit(lambda q: kin.point(q, "gripperframe"))(q.astype(np.float32))
    assert pos32.dtype == jnp.float32
    np.testing.assert_allclose(pos32, pos64, atol=2e-6)
    assert kin.point(q[0, 0, 0], "gripperframe").shape == (3,)


def test_arm_only_chain_holds_gripper_at_qpos0(model, rng):
    arm = Kinematics.from_model(model, ARM_JOINTS)
    q = _random_q(model, rng, 10, ARM_JOINTS)
    full = Kinematics.from_model(model)
    q6 = np.concatenate([q, np.zeros((10, 1))], axis=1)
    np.testing.assert_allclose(arm.forward(q)[0], full.forward(q6)[0], atol=1e-15)


def test_bad_input(kin):
    with pytest.raises(ValueError, match=r"q must have shape \(\.\.\., 6\)"):
        kin.forward(np.zeros(5))
    with pytest.raises(ValueError, match=r"q must have shape"):
        kin.forward(np.float64(0.0))
    with pytest.raises(ValueError, match="unknown site 'tcp'"):
        kin.point(np.zeros(6), "tcp")
    with pytest.raises(ValueError, match="unknown body"):
        kin.body_pose(np.zeros(6), "hand")
