"""PinocchioBackend (seed 004, the pinocchio backend) against JaxBackend and MujocoBackend, float64."""

from pathlib import Path

import numpy as np
import pytest
import scipy.linalg
from scipy.spatial.transform import Rotation

from so101_mjx.dynamics.backend import JaxBackend, ModelLoadError
from so101_mjx.dynamics.identify import nonzero_inertia_columns
from so101_mjx.dynamics.mujoco_backend import MujocoBackend
from so101_mjx.robot.scenes import scenes_dir

pin = pytest.importorskip("pinocchio")
from so101_mjx.dynamics.pinocchio_backend import PinocchioBackend  # noqa: E402

N = 100  # random (q, v, a) samples
TOL = 1e-9  # the bound, float64

_INERTIAL = ('<inertial><origin xyz="{c}" rpy="{rpy}"/><mass value="{m}"/>'
             '<inertia ixx="{i[0]}" ixy="{i[1]}" ixz="{i[2]}" iyy="{i[3]}" iyz="{i[4]}" izz="{i[5]}"/></inertial>')
_LINKS = {
    "base": ("0.01 0 0.02", "0 0 0", 0.5, (1e-3, 0, 0, 1e-3, 0, 1e-3)),
    "link1": ("0 0.01 0", "0 0 0", 0.1, (1e-4, 0, 0, 1e-4, 0, 1e-4)),
    "link2": ("0.1 0.01 0.02", "0.1 0.2 0.3", 0.3, (2e-3, 1e-4, -2e-4, 3e-3, 5e-5, 4e-3)),
    "link3": ("0.05 0 0", "0 0 0", 0.2, (1e-4, 0, 0, 2e-4, 0, 3e-4)),
}
_JOINTS = [("joint1", "base", "link1", "0 0 0.1", "0 0 0.5", "0 0 1"),
           ("joint2", "link1", "link2", "0 0 0.05", "0.3 0 0", "0 1 0"),
           ("joint3", "link2", "link3", "0.2 0 0", "0 0.4 0", "1 0 0")]  # fmt: skip
JOINTS = ("joint1", "joint2", "joint3")


def write_urdf(path: Path, massless: tuple[str, ...] = ()) -> str:
    """A three-hinge URDF with a massless fixed ``tool`` link (and the links in ``massless`` without inertia)."""
    links = [f'<link name="{n}">{"" if n in massless else _INERTIAL.format(c=c, rpy=r, m=m, i=i)}</link>'
             for n, (c, r, m, i) in _LINKS.items()]  # fmt: skip
    joints = [f'<joint name="{n}" type="revolute"><parent link="{p}"/><child link="{c}"/><origin xyz="{xyz}" '
              f'rpy="{rpy}"/><axis xyz="{ax}"/><limit lower="-2" upper="2" effort="5" velocity="5"/></joint>'
              for n, p, c, xyz, rpy, ax in _JOINTS]  # fmt: skip
    tool = ('<link name="tool"/><joint name="tool_fixed" type="fixed"><parent link="link3"/><child '
            'link="tool"/><origin xyz="0.1 0 0"/></joint>')
    body = "\n".join([*links, *joints, tool])
    path.write_text('<?xml version="1.0"?>\n<robot name="three_link">\n<mujoco><compiler '
                    f'fusestatic="false"/></mujoco>\n{body}\n</robot>\n')
    return str(path)


def _err(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))))


def _loop(fn, *arrays) -> np.ndarray:
    return np.stack([fn(*xs) for xs in zip(*arrays)])


@pytest.fixture(scope="module")
def backends():
    return PinocchioBackend(), JaxBackend(), MujocoBackend()


@pytest.fixture(scope="module")
def samples(backends):
    rng = np.random.default_rng(11)
    q = backends[1].random_configuration(rng, (N,))
    return q, rng.normal(0.0, 3.0, (N, 6)), rng.normal(0.0, 10.0, (N, 6))


@pytest.mark.slow
def test_dynamics_match_jax_and_mujoco(backends, samples):
    """Seed 004, PinocchioBackend: CRBA, computeCoriolisMatrix, generalized gravity, RNEA, ABA and
    computeJointTorqueRegressor agree with the other backends on the same configurations."""
    pb, jb, mb = backends
    q, v, a = samples
    tau = _loop(pb.compute_inverse_dynamics, q, v, a)
    errors = {}
    for name, other in (("jax", jb), ("mujoco", mb)):
        batched = name == "jax"

        def theirs(fn, *x, batched=batched):
            return fn(*x) if batched else _loop(fn, *x)

        errors |= {
            f"M/{name}": _err(_loop(pb.compute_mass_matrix, q), theirs(other.compute_mass_matrix, q)),
            f"C/{name}": _err(_loop(pb.compute_coriolis_matrix, q, v), theirs(other.compute_coriolis_matrix, q, v)),
            f"g/{name}": _err(_loop(pb.compute_gravity_vector, q), theirs(other.compute_gravity_vector, q)),
            f"bias/{name}": _err(_loop(pb.compute_bias, q, v), theirs(other.compute_bias, q, v)),
            f"ID/{name}": _err(tau, theirs(other.compute_inverse_dynamics, q, v, a)),
            f"FD/{name}": _err(_loop(pb.compute_forward_dynamics, q, v, tau),
                               theirs(other.compute_forward_dynamics, q, v, tau)),
            f"W/{name}": _err(_loop(pb.compute_regressor, q, v, a), theirs(other.compute_regressor, q, v, a)),
        }
    assert max(errors.values()) <= TOL, errors
    assert _err(_loop(pb.compute_forward_dynamics, q, v, tau), a) <= TOL
    assert np.abs(tau).max() > 0.1  # not vacuous
    m = pb.compute_mass_matrix(q[0])
    assert _err(m, m.T) == 0.0 and np.linalg.eigvalsh(m).min() > 0


def test_regressor_columns_are_the_parameters(backends, samples):
    """Seed 004, compute_regressor: tau = W θ, W (nv, 10 nbody), θ in Pinocchio's order; get_inertias
    lists the universe first (the base is fixed to it), then one pin.Inertia per joint's body."""
    pb, jb, _ = backends
    q, v, a = (x[:20] for x in samples)
    w = _loop(pb.compute_regressor, q, v, a)
    assert w.shape == (20, 6, 60)
    assert _err(w @ pb.parameters, _loop(pb.compute_inverse_dynamics, q, v, a)) <= TOL
    assert _err(pb.parameters, jb.parameters) <= 1e-15
    inertias = pb.get_inertias()
    assert len(inertias) == pb.get_model_object().njoints == 7 and all(isinstance(i, pin.Inertia) for i in inertias)
    assert [i.mass for i in inertias[1:]] == [i.mass for i in jb.get_inertias()]
    assert _err(inertias[3].toDynamicParameters(), np.asarray(jb.get_inertias()[2])) <= 1e-15
    assert _err(jb.get_inertias()[2].lever, inertias[3].lever) <= 1e-15
    assert _err(jb.get_inertias()[2].inertia, inertias[3].inertia) <= 1e-15


def test_local_jacobians(backends, samples):
    """Seed 004, compute_jacobian: computeFrameJacobian in pin.LOCAL, [linear; angular], (6, nv): the
    world-aligned Jacobian of the other backends expressed in the frame's axes."""
    pb, jb, _ = backends
    q = samples[0][:10]
    fk = jb.compute_forward_kinematics(q)
    frames = [f for f in jb.get_frame_names() if f in pb.get_frame_names()]
    assert {"gripperframe", "grasp_point", "wrist", "moving_jaw_so101_v1"} <= set(frames)
    for frame in frames:
        world = np.asarray(jb.compute_jacobian(q, frame))
        rot_t = np.swapaxes(np.asarray(fk[frame]["orientation"]), -1, -2)
        local = np.concatenate([rot_t @ world[:, :3], rot_t @ world[:, 3:]], axis=1)
        assert _err(_loop(lambda x, f=frame: pb.compute_jacobian(x, f), q), local) <= TOL, frame
    assert np.abs(local).max() > 0.05


def test_forward_kinematics(backends, samples):
    """Seed 004, compute_forward_kinematics: forwardKinematics + updateFramePlacements, every frame but
    the universe; a name shared by a joint and a body ("gripper") maps to the first frame (the body)."""
    pb, jb, mb = backends
    q = samples[0][3]
    ours, ref = pb.compute_forward_kinematics(q), mb.compute_forward_kinematics(q)
    assert set(ours) == set(pb.get_frame_names()) and "universe" not in ours
    common = set(ours) & set(ref)
    assert {"gripper", "gripperframe", "base"} <= common
    for name in common:
        for key in ("position", "orientation", "quaternion", "transformation"):
            assert _err(ours[name][key], ref[name][key]) <= TOL, (name, key)
    assert pb.get_frame_id("gripper") == pb.get_frame_names().index("gripper") + 1  # frame ids count the universe


def test_free_flyer_difference_and_integrate(backends):
    """Seed 004, compute_difference / compute_integrate: subtraction for revolute joints, the SE(3)
    log and exp for a free-flyer root (configuration [x, y, z, qx, qy, qz, qw], velocity local)."""
    pf, pi_alias = PinocchioBackend(free_flyer=True), PinocchioBackend(isFext=True)
    assert (pf.nq, pf.nv, pi_alias.nq) == (13, 12, 13) and pf.get_joint_names()[0] == "root_joint"
    rng = np.random.default_rng(5)
    arm = backends[1].random_configuration(rng, (2,))

    def config(seed):
        quat = np.random.default_rng(seed).normal(size=4)
        return np.r_[np.random.default_rng(seed + 1).normal(size=3), quat / np.linalg.norm(quat), arm[seed % 2]]

    def pose(q):  # 4x4 of [x, y, z, qx, qy, qz, qw]
        return np.block([[Rotation.from_quat(q[3:7]).as_matrix(), q[:3, None]], [np.zeros((1, 3)), np.ones((1, 1))]])

    def twist(v):  # se(3) matrix of [linear; angular]
        w = v[3:6]
        skew = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
        return np.block([[skew, v[:3, None]], [np.zeros((1, 4))]])

    q1, q2 = config(0), config(1)
    v = rng.normal(size=12)
    moved = pf.compute_integrate(q1, v)
    assert _err(pose(moved), pose(q1) @ scipy.linalg.expm(twist(v[:6]))) <= 1e-12  # M exp(v)
    assert _err(moved[7:], q1[7:] + v[6:]) <= 1e-15
    diff = pf.compute_difference(q1, q2)
    # log(M1⁻¹ M2)
    assert _err(twist(diff[:6]), np.real(scipy.linalg.logm(np.linalg.inv(pose(q1)) @ pose(q2)))) <= 1e-10
    assert _err(diff[6:], q2[7:] - q1[7:]) <= 1e-15
    back = pf.compute_integrate(q1, diff)
    assert _err(pose(back), pose(q2)) <= 1e-12
    # The floating base leaves the arm's own inertia untouched: M's arm block is the fixed-base M.
    assert _err(pf.compute_mass_matrix(q1)[6:, 6:], backends[0].compute_mass_matrix(q1[7:])) <= TOL
    assert _err(backends[0].compute_difference(arm[0], arm[1]), arm[1] - arm[0]) <= 1e-15
    with pytest.raises(ValueError, match="finite position limits"):
        pf.random_configuration()
    lo, hi = backends[0].get_model_object().lowerPositionLimit, backends[0].get_model_object().upperPositionLimit
    q = backends[0].random_configuration()
    assert q.shape == (6,) and np.all((q >= lo) & (q <= hi))


def test_from_model_shares_model_and_data(backends, samples, capsys):
    """Seed 004, from_model(model, data=None, **kwargs): wraps an existing pin.Model without reloading."""
    pb = backends[0]
    model, data = pb.get_model_object(), pb.model.createData()
    wrapped = PinocchioBackend.from_model(model, data, verbose=True)
    assert wrapped.model is model and wrapped.data is data and wrapped.model_path is None
    assert wrapped.config == {"verbose": True} and wrapped.model_format == "urdf"
    own = PinocchioBackend.from_model(model)
    assert own.data is not pb.data and own.data is not None
    q, v, a = (x[0] for x in samples)
    assert _err(own.compute_inverse_dynamics(q, v, a), pb.compute_inverse_dynamics(q, v, a)) == 0.0
    with pytest.raises(ValueError, match="model must be a pinocchio.Model"):
        PinocchioBackend.from_model(object())
    assert capsys.readouterr().out == ""  # seed: from_model stores verbose and prints nothing


def test_urdf_paths(tmp_path, samples):
    """Seed 004: model_path is a str path to a URDF (Pinocchio) or a URDF or MJCF (MuJoCo); the
    three backends load the same URDF and agree."""
    urdf = write_urdf(tmp_path / "three_link.urdf")
    pb, jb, mb = PinocchioBackend(urdf), JaxBackend(urdf, joints=JOINTS), MujocoBackend(Path(urdf), joints=JOINTS)
    assert pb.model_format == jb.model_format == "urdf" and pb.model_path == urdf
    assert pb.get_joint_names() == list(JOINTS) and pb.nv == 3
    rng = np.random.default_rng(2)
    q, v, a = rng.uniform(-2, 2, (3, 20, 3))
    tau = _loop(pb.compute_inverse_dynamics, q, v, a)
    assert (_err(tau, jb.compute_inverse_dynamics(q, v, a)) <= TOL
            and _err(tau, _loop(mb.compute_inverse_dynamics, q, v, a)) <= TOL)
    assert _err(_loop(pb.compute_mass_matrix, q), jb.compute_mass_matrix(q)) <= TOL
    # jax adds the tool body
    assert _err(_loop(pb.compute_regressor, q, v, a), jb.compute_regressor(q, v, a)[..., :30]) <= TOL
    assert _err(pb.compute_jacobian(q[0], "tool"), pb.compute_jacobian(q[0], "tool_fixed")) <= 1e-15


@pytest.mark.skipif(not (scenes_dir() / "so101.urdf").is_file(), reason="no SO-101 URDF shipped")
def test_shipped_so101_urdf_matches_the_mjcf(backends, samples):
    """Seed 004, a str URDF path: the SO-101's URDF gives the MJCF's dynamics."""
    urdf = PinocchioBackend(str(scenes_dir() / "so101.urdf"))
    q, v, a = (x[:20] for x in samples)
    assert urdf.get_joint_names() == backends[0].get_joint_names()
    assert (_err(_loop(urdf.compute_inverse_dynamics, q, v, a),
                 _loop(backends[0].compute_inverse_dynamics, q, v, a)) <= TOL)
    assert _err(_loop(urdf.compute_mass_matrix, q), _loop(backends[0].compute_mass_matrix, q)) <= TOL


def test_nonzero_inertia_filtering(tmp_path):
    """Seed 004, get_inertias: "used for nonzero-inertia filtering in regressor computation": the
    columns of a massless body are dropped, on Pinocchio (universe first) and the MJCF backends."""
    massless = PinocchioBackend(write_urdf(tmp_path / "massless.urdf", massless=("link1",)))
    assert [i.mass for i in massless.get_inertias()] == [0.5, 0.0, 0.3, 0.2]
    np.testing.assert_array_equal(nonzero_inertia_columns(massless), np.arange(10, 30))
    # its moving bodies: link1..3 and the massless tool
    jb = JaxBackend(write_urdf(tmp_path / "tool.urdf"), joints=JOINTS)
    assert [i.mass for i in jb.get_inertias()] == [0.1, 0.3, 0.2, 0.0]
    np.testing.assert_array_equal(nonzero_inertia_columns(jb), np.arange(30))
    rng = np.random.default_rng(3)
    q, v, a = rng.uniform(-2, 2, (3, 3))
    cols = nonzero_inertia_columns(massless)
    assert _err(massless.compute_regressor(q, v, a)[:, cols] @ massless.parameters[cols],
                massless.compute_inverse_dynamics(q, v, a)) <= TOL


def test_include_armature(backends, samples):
    """The MJCF's armature is excluded by default, as in the other backends; include_armature keeps it."""
    arm_pin, arm_jax = PinocchioBackend(include_armature=True), JaxBackend(include_armature=True)
    q, v, a = (x[:20] for x in samples)
    assert _err(_loop(arm_pin.compute_mass_matrix, q), arm_jax.compute_mass_matrix(q)) <= TOL
    tau = _loop(arm_pin.compute_inverse_dynamics, q, v, a)
    assert _err(tau, arm_jax.compute_inverse_dynamics(q, v, a)) <= TOL
    assert _err(_loop(arm_pin.compute_forward_dynamics, q, v, tau), a) <= TOL
    assert _err(tau - _loop(backends[0].compute_inverse_dynamics, q, v, a), 0.028 * a) <= TOL


def test_errors(tmp_path, backends):
    """Seed 004: RuntimeError with a hint when the file cannot be loaded, ValueError for an unknown
    frame; and (not in the seed) a clear ValueError for an unknown option or a wrong shape."""
    bad = tmp_path / "broken.urdf"
    bad.write_text("<robot name='x'><link name='a'>")
    for path in (str(bad), str(tmp_path / "missing.urdf"), str(tmp_path / "missing.xml")):
        with pytest.raises(RuntimeError,
                           match=r"(?s)Failed to load model .* with Pinocchio: .*Ensure the file is a valid URDF"):
            PinocchioBackend(path)
        with pytest.raises(RuntimeError,
                           match=r"(?s)Failed to load model .* with MuJoCo: .*Ensure the file is valid URDF or MJCF"):
            MujocoBackend(path)
    assert issubclass(ModelLoadError, ValueError)
    pb = backends[0]
    with pytest.raises(ValueError, match=r"Frame 'tcp' not found in model. Available frames: \[.*'gripperframe'"):
        pb.compute_jacobian(np.zeros(6), "tcp")
    with pytest.raises(ValueError, match=r"unknown PinocchioBackend option\(s\) \['free_fyler'\]"):
        PinocchioBackend(free_fyler=True)
    with pytest.raises(ValueError, match=r"^a must have shape \(6,\)"):
        pb.compute_inverse_dynamics(np.zeros(6), np.zeros(6), np.zeros(5))
    with pytest.raises(NotImplementedError, match="PinocchioBackend does not implement dynamics derivatives"):
        pb.compute_dynamics_derivatives(np.zeros(6), np.zeros(6))


def test_verbose(capsys):
    """Seed 004, verbose: MuJoCo prints the model's sizes on load (Pinocchio too, here)."""
    PinocchioBackend(verbose=True)
    MujocoBackend("so101", verbose=True)
    JaxBackend("so101")
    out = capsys.readouterr().out.splitlines()
    assert (out == ["Pinocchio model loaded: 6 positions, 6 velocities",
                    "MuJoCo model loaded: 6 positions, 6 velocities (MujocoBackend)"])
