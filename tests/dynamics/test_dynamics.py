"""JaxBackend vs the MuJoCo C reference (MujocoBackend) and Pinocchio, float64."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from so101_mjx.dynamics.backend import JaxBackend
from so101_mjx.dynamics.mujoco_backend import MujocoBackend
from so101_mjx.robot.scenes import load_model

N = 1000  # random (q, v, a) samples for the value checks


@pytest.fixture(scope="module")
def arm() -> mujoco.MjModel:
    return load_model("so101")


@pytest.fixture(scope="module")
def jax_backend(arm) -> JaxBackend:
    return JaxBackend(arm)


@pytest.fixture(scope="module")
def mujoco_backend(arm) -> MujocoBackend:
    return MujocoBackend(arm)


@pytest.fixture(scope="module")
def samples(jax_backend):
    rng = np.random.default_rng(7)
    q = jax_backend.random_configuration(rng, (N,))
    return q, rng.normal(0.0, 3.0, (N, 6)), rng.normal(0.0, 10.0, (N, 6))


def _loop(fn, *arrays) -> np.ndarray:
    return np.stack([fn(*xs) for xs in zip(*arrays)])


def _max_err(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))


def test_matches_mujoco(jax_backend, mujoco_backend, samples):
    jb, mb = jax_backend, mujoco_backend
    q, v, a = samples
    tau = _loop(mb.compute_inverse_dynamics, q, v, a)
    errors = {
        "M": _max_err(jb.compute_mass_matrix(q), _loop(mb.compute_mass_matrix, q)),
        "bias": _max_err(jb.compute_bias(q, v), _loop(mb.compute_bias, q, v)),
        "g": _max_err(jb.compute_gravity_vector(q), _loop(mb.compute_gravity_vector, q)),
        "ID": _max_err(jb.compute_inverse_dynamics(q, v, a), tau),
        # FD of tau = ID(q, v, a): accelerations of the size of a (|a| ~ 10 rad/s²).
        "FD": _max_err(jb.compute_forward_dynamics(q, v, tau), _loop(mb.compute_forward_dynamics, q, v, tau)),
        "FD(ID)": _max_err(jb.compute_forward_dynamics(q, v, tau), a),
    }
    assert max(errors.values()) <= 1e-10, errors


def test_armature_convention(arm, jax_backend, samples):
    """include_armature adds diag(armature) to M: both backends, ID and FD included."""
    q, v, a = samples
    jb, mb = JaxBackend(arm, include_armature=True), MujocoBackend(arm, include_armature=True)
    armature = arm.dof_armature[:6]
    m = np.asarray(jb.compute_mass_matrix(q))
    tau = _loop(mb.compute_inverse_dynamics, q, v, a)
    errors = {
        "M": _max_err(m, _loop(mb.compute_mass_matrix, q)),
        "M - rigid": _max_err(m - np.asarray(jax_backend.compute_mass_matrix(q)),
                              np.broadcast_to(np.diag(armature), m.shape)),
        "ID": _max_err(jb.compute_inverse_dynamics(q, v, a), tau),
        "ID - rigid": _max_err(tau - np.asarray(jax_backend.compute_inverse_dynamics(q, v, a)), armature * a),
        "FD": _max_err(jb.compute_forward_dynamics(q, v, tau), _loop(mb.compute_forward_dynamics, q, v, tau)),
    }
    assert max(errors.values()) <= 1e-10, errors


@pytest.mark.slow
def test_regressor_times_parameters_is_inverse_dynamics(jax_backend, mujoco_backend, samples):
    q, v, a = samples
    w = np.asarray(jax_backend.compute_regressor(q, v, a))
    assert w.shape == (N, 6, 60)
    assert _max_err(w @ jax_backend.parameters, jax_backend.compute_inverse_dynamics(q, v, a)) <= 1e-10
    assert _max_err(w, _loop(mujoco_backend.compute_regressor, q, v, a)) <= 1e-10


def _pinocchio_model(model: mujoco.MjModel):
    """Pinocchio model of the arm built from the compiled MjModel's arrays (hinges at body origins)."""
    pin = pytest.importorskip("pinocchio")

    def se3(pos, quat):
        return pin.SE3(pin.Quaternion(*quat).matrix(), np.asarray(pos))

    pm = pin.Model()
    pm.gravity = pin.Motion(model.opt.gravity.copy(), np.zeros(3))
    joint_of, frame_in_joint = {0: 0}, {0: pin.SE3.Identity()}  # MuJoCo body -> pinocchio joint, pose in it
    for b in range(1, model.nbody):
        parent = model.body_parentid[b]
        placement = frame_in_joint[parent] * se3(model.body_pos[b], model.body_quat[b])
        if model.body_jntnum[b]:
            j = model.body_jntadr[b]
            assert (model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE and not model.jnt_pos[j].any()
                    and model.qpos0[j] == 0)
            joint_of[b] = pm.addJoint(joint_of[parent], pin.JointModelRevoluteUnaligned(model.jnt_axis[j]), placement,
                                      model.joint(j).name)
            frame_in_joint[b] = pin.SE3.Identity()
        else:
            joint_of[b], frame_in_joint[b] = joint_of[parent], placement
        rot = pin.Quaternion(*model.body_iquat[b]).matrix()
        inertia = pin.Inertia(model.body_mass[b], model.body_ipos[b], rot @ np.diag(model.body_inertia[b]) @ rot.T)
        pm.appendBodyToJoint(joint_of[b], inertia, frame_in_joint[b])
    return pin, pm


def test_regressor_matches_pinocchio(arm, jax_backend, samples):
    pin, pm = _pinocchio_model(arm)
    assert list(pm.names[1:]) == jax_backend.get_joint_names()
    pd = pm.createData()
    q, v, a = (x[:200] for x in samples)
    ours = np.asarray(jax_backend.compute_regressor(q, v, a))
    theirs = np.stack([pin.computeJointTorqueRegressor(pm, pd, *x) for x in zip(q, v, a)])
    pin_params = np.concatenate([pm.inertias[j].toDynamicParameters() for j in range(1, pm.njoints)])
    assert _max_err(jax_backend.parameters, pin_params) <= 1e-15
    assert _max_err(ours, theirs) <= 1e-10
    assert (_max_err(_loop(lambda *x: pin.rnea(pm, pd, *x), q, v, a),
                     jax_backend.compute_inverse_dynamics(q, v, a)) <= 1e-10)


@pytest.mark.slow
def test_coriolis_christoffel(jax_backend, mujoco_backend, samples):
    q, v, _ = (jnp.asarray(x[:200]) for x in samples)
    c = np.asarray(jax_backend.compute_coriolis_matrix(q, v))
    bias_v = jax_backend.compute_bias(q, v) - jax_backend.compute_gravity_vector(q)
    assert _max_err(np.einsum("nij,nj->ni", c, v), bias_v) <= 1e-10
    assert _max_err(c, _loop(mujoco_backend.compute_coriolis_matrix, np.asarray(q), np.asarray(v))) <= 1e-10
    m_dot = jax.jvp(jax_backend.compute_mass_matrix, (q,), (v,))[1]
    n = np.asarray(m_dot) - 2 * c
    assert np.abs(m_dot).max() > 1e-3  # the check is not vacuous
    assert _max_err(n, -np.swapaxes(n, -1, -2)) <= 1e-10


@pytest.mark.slow
def test_derivatives_match_finite_differences(jax_backend, mujoco_backend, samples):
    q, v, _ = (x[:5] for x in samples)
    ours = jax_backend.compute_dynamics_derivatives(q, v)
    for k in range(len(q)):
        ref = mujoco_backend.compute_dynamics_derivatives(q[k], v[k], eps=1e-6)
        assert _max_err(ours["dC_dv"][k], ref["dC_dv"]) <= 1e-10  # C is linear in v: exact on both sides
        for key in ("dM_dq", "dC_dq", "dg_dq"):
            # Central differences, step h = 1e-6: truncation ~h² and round-off ~1e-16/h, relative to the scale.
            assert _max_err(ours[key][k], ref[key]) <= 1e-7 * np.abs(ref[key]).max(), key
    assert ours["dM_dq"].shape == (5, 6, 6, 6) and ours["dg_dq"].shape == (5, 6, 6)


def test_kinematics_matches_mujoco(jax_backend, mujoco_backend, samples):
    q = samples[0][:20]
    fk = jax_backend.compute_forward_kinematics(q)
    assert list(fk) == jax_backend.get_frame_names()
    for k in range(len(q)):
        ref = mujoco_backend.compute_forward_kinematics(q[k])
        for name, pose in ref.items():
            for key, value in pose.items():
                assert _max_err(fk[name][key][k], value) <= 1e-12, (name, key)
    for frame in jax_backend.get_frame_names():
        jac = jax_backend.compute_jacobian(q, frame)
        assert jac.shape == (20, 6, 6)
        assert _max_err(jac, _loop(lambda x, frame=frame: mujoco_backend.compute_jacobian(x, frame), q)) <= 1e-12, frame


@pytest.mark.slow
def test_batching_dtypes_and_transforms(jax_backend, samples):
    q, v, a = (x[:12] for x in samples)
    m = jax_backend.compute_mass_matrix(q)
    assert jax_backend.compute_mass_matrix(q.reshape(3, 4, 6)).shape == (3, 4, 6, 6)
    assert _max_err(jax_backend.compute_mass_matrix(q.reshape(3, 4, 6)).reshape(12, 6, 6), m) == 0.0
    assert _max_err(jax.jit(jax.vmap(jax_backend.compute_mass_matrix))(jnp.asarray(q)), m) <= 1e-15
    tau64 = np.asarray(jax_backend.compute_inverse_dynamics(q, v, a))
    tau32 = jax_backend.compute_inverse_dynamics(*(x.astype(np.float32) for x in (q, v, a)))
    assert tau32.dtype == jnp.float32
    assert _max_err(tau32, tau64) <= 1e-5 * np.abs(tau64).max()


def test_configuration_helpers(jax_backend, mujoco_backend):
    q = jax_backend.random_configuration(0, (100,))
    lo, hi = jax_backend.chain.q_range.T
    assert q.shape == (100, 6) and np.all((q >= lo) & (q <= hi))
    v = np.full(6, 0.1)
    assert _max_err(jax_backend.compute_difference(q[0], jax_backend.compute_integrate(q[0], v)), v) <= 1e-15
    assert _max_err(mujoco_backend.compute_integrate(q[0], v), q[0] + v) == 0.0
    assert jax_backend.nq == jax_backend.nv == mujoco_backend.nv == 6
    assert jax_backend.model_format == "mjcf"
    assert jax_backend.get_frame_id("gripperframe") == jax_backend.get_frame_names().index("gripperframe")
    assert len(jax_backend.get_inertias()) == 6


@pytest.mark.parametrize("backend", ["jax_backend", "mujoco_backend"])
def test_errors_say_what_was_expected(backend, request):
    b = request.getfixturevalue(backend)
    with pytest.raises(ValueError, match=r"q must have shape .*6"):
        b.compute_mass_matrix(np.zeros(5))
    with pytest.raises(ValueError, match=r"a must have shape .*6"):
        b.compute_inverse_dynamics(np.zeros(6), np.zeros(6), np.zeros(7))
    with pytest.raises(ValueError, match=r"unknown frame 'tcp'; expected one of .*gripperframe"):
        b.compute_jacobian(np.zeros(6), "tcp")
    with pytest.raises(ValueError, match="unknown frame"):
        b.get_frame_id("world")


def test_mujoco_backend_is_one_configuration(mujoco_backend):
    with pytest.raises(ValueError, match=r"shape \(6,\)"):
        mujoco_backend.compute_gravity_vector(np.zeros((2, 6)))
