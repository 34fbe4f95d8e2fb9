"""robot/rotations.py vs MuJoCo C (float64, 1e-12), round trips, batched shapes, dtypes."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from so101_mjx.errors import InputError
from so101_mjx.robot import rotations as R

N = 64


def _quats(rng, shape=(N,)) -> np.ndarray:
    """Unit quaternions (*shape, 4), w of both signs, plus the identity and a half turn."""
    q = rng.normal(size=(*shape, 4))
    q.reshape(-1, 4)[:2] = [[1, 0, 0, 0], [0, 0, 1, 0]]
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def _mj(fn, out_size: int, *args) -> np.ndarray:
    """MuJoCo C's ``fn(res, *args)`` applied row by row over the first axis."""
    out = np.empty((len(args[0]), out_size))
    for i, row in enumerate(zip(*args)):
        fn(out[i], *row)
    return out


def _canonical(q: np.ndarray) -> np.ndarray:
    return np.where(q[..., :1] < 0, -q, q)


def _close(actual, desired, atol: float = 1e-12) -> None:
    np.testing.assert_allclose(actual, desired, rtol=0, atol=atol)


@pytest.fixture
def rng():
    return np.random.default_rng(45)


def test_quat_mat_mul_agree_with_mujoco(rng):
    """quat_to_mat, mat_to_quat, quat_mul and axis_angle_to_quat equal mju_* to 1e-12 (wxyz, float64)."""
    q, p = _quats(rng), _quats(rng)
    mats = _mj(mujoco.mju_quat2Mat, 9, q).reshape(N, 3, 3)
    _close(R.quat_to_mat(q), mats)
    _close(R.mat_to_quat(mats), _canonical(_mj(mujoco.mju_mat2Quat, 4, mats.reshape(N, 9))))
    _close(R.quat_mul(q, p), _mj(mujoco.mju_mulQuat, 4, q, p))
    axis, angle = rng.normal(size=(N, 3)), rng.uniform(-7, 7, N)
    axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
    _close(R.axis_angle_to_quat(axis, angle), _mj(mujoco.mju_axisAngle2Quat, 4, axis, angle))
    _close(R.axis_angle_to_mat(axis, angle), R.quat_to_mat(R.axis_angle_to_quat(axis, angle)), 1e-15)
    turn = np.asarray(R.axis_angle_to_quat(axis[0], angle))
    _close(R.rotate_about(axis[0], angle, q[:, 1:]), _mj(mujoco.mju_rotVecQuat, 3, q[:, 1:], turn))


def test_host_functions_are_mujoco_c(rng):
    """The *_np functions are MuJoCo C bit for bit, batched over any leading axes, and equal the JAX ones to 1e-12."""
    q, p = _quats(rng, (4, 5)), _quats(rng, (5,))
    mats = R.quat_to_mat_np(q)
    assert mats.shape == (4, 5, 3, 3) and mats.dtype == np.float64
    np.testing.assert_array_equal(mats.reshape(-1, 9), _mj(mujoco.mju_quat2Mat, 9, q.reshape(-1, 4)))
    _close(mats, R.quat_to_mat(q))
    want = _canonical(_mj(mujoco.mju_mat2Quat, 4, mats.reshape(-1, 9)))
    np.testing.assert_array_equal(R.mat_to_quat_np(mats).reshape(-1, 4), want)
    _close(R.mat_to_quat_np(mats), R.mat_to_quat(mats))
    prod = R.quat_mul_np(q, p)  # (4, 5, 4) ⊗ (5, 4) broadcasts
    assert prod.shape == (4, 5, 4)
    np.testing.assert_array_equal(prod.reshape(-1, 4), _mj(mujoco.mju_mulQuat, 4, q.reshape(-1, 4), np.tile(p, (4, 1))))
    assert R.quat_to_mat_np(q[0, 0]).shape == (3, 3) and R.mat_to_quat_np(mats[0, 0]).shape == (4,)


def test_round_trips_and_log_exp(rng):
    """mat -> quat -> mat; rotvec -> quat -> rotvec (angles in [0, π)); quat_to_rotvec equals mju_quat2Vel;
    the world-frame rotation error equals R_current · mju_subQuat (MuJoCo's is in the current frame)."""
    q = _quats(rng)
    _close(R.mat_to_quat(R.quat_to_mat(q)), _canonical(q))
    rotvec = rng.normal(size=(N, 3))
    rotvec *= rng.uniform(0, 3.1, (N, 1)) / np.linalg.norm(rotvec, axis=-1, keepdims=True)
    rotvec[0], rotvec[1] = 0.0, 1e-14  # the first-order branch
    _close(R.quat_to_rotvec(R.rotvec_to_quat(rotvec)), rotvec)
    _close(R.quat_to_rotvec(q), _mj(mujoco.mju_quat2Vel, 3, _canonical(q), np.ones(N)))
    p = _quats(rng)
    body = _mj(mujoco.mju_subQuat, 3, p, q)  # q ⊗ quat(body) = p
    rc, rt = R.quat_to_mat(q), R.quat_to_mat(p)
    _close(R.rotation_error(rc, rt), np.einsum("nij,nj->ni", rc, body))
    _close(R.rotation_angle(rc, rt), np.linalg.norm(body, axis=-1))
    _close(R.rotation_angle(rt, rc), R.rotation_angle(rc, rt))


def test_vector_helpers(rng):
    """skew is the cross product; signed_angle, angle_between and rotvec_between turn a onto b."""
    v, x = rng.normal(size=(N, 3)), rng.normal(size=(N, 3))
    _close(np.einsum("nij,nj->ni", R.skew(v), x), np.cross(v, x))
    a, b = (u / np.linalg.norm(u, axis=-1, keepdims=True) for u in (v, x))
    turn = R.rotvec_between(a, b, 1e-12)
    _close(np.einsum("nij,nj->ni", R.quat_to_mat(R.rotvec_to_quat(turn)), a), b)
    _close(np.linalg.norm(turn, axis=-1), R.angle_between(a, b))
    axis = np.array([0.0, 0.6, 0.8])
    a_in, b_in = (u - np.sum(u * axis, -1, keepdims=True) * axis for u in (a, b))  # in the plane normal to axis
    angle = R.signed_angle(a_in, b_in, axis)
    turned = R.rotate_about(axis, angle, a_in)
    _close(turned / np.linalg.norm(turned, axis=-1, keepdims=True), b_in / np.linalg.norm(b_in, axis=-1, keepdims=True))
    grad = jax.grad(lambda u: jnp.sum(R.rotvec_between(u, jnp.asarray(a), 1e-12)))(jnp.asarray(a))
    assert np.all(np.isfinite(grad))  # gradient-safe at a ∥ b


def test_rpy(rng):
    """rpy_to_mat is Rz(yaw) Ry(pitch) Rx(roll); mat_to_rpy rebuilds rotations also at the gimbal lock."""
    e = np.eye(3)
    for roll, pitch, yaw in [*rng.uniform(-3, 3, (8, 3)), (0.4, np.pi / 2, 0.0), (0.4, -np.pi / 2, 0.0)]:
        want = R.axis_angle_to_mat(e[2], yaw) @ R.axis_angle_to_mat(e[1], pitch) @ R.axis_angle_to_mat(e[0], roll)
        rot = R.rpy_to_mat(roll, pitch, yaw)
        _close(rot, want)
        _close(R.rpy_to_mat(*R.mat_to_rpy(rot)), rot, atol=1e-15)
    with pytest.raises(InputError, match="not a rotation"):
        R.mat_to_rpy(2 * np.eye(3))


def test_batched_shapes_dtypes_and_jit(rng):
    """Any leading axes, the inputs' dtype, and jit/vmap give the eager values."""
    q = jnp.asarray(_quats(rng, (2, 3, 4)), jnp.float32)
    mats = R.quat_to_mat(q)
    assert mats.shape == (2, 3, 4, 3, 3) and mats.dtype == jnp.float32
    for fn, arg in [(R.mat_to_quat, mats), (R.quat_to_rotvec, q), (R.rotvec_to_quat, q[..., 1:]), (R.skew, q[..., 1:])]:
        out = fn(arg)
        assert out.dtype == jnp.float32 and out.shape[:3] == (2, 3, 4)
        _close(jax.jit(fn)(arg), out, atol=1e-6)
        _close(jax.vmap(fn)(arg), out, atol=1e-6)
    assert R.quat_mul(q, q[0]).shape == (2, 3, 4, 4)
    assert R.rotation_error(mats, mats[0]).shape == (2, 3, 4, 3) and R.rotation_angle(mats, mats).shape == (2, 3, 4)
    z = jnp.asarray([0.0, 0.0, 1.0], jnp.float32)
    assert R.axis_angle_to_mat(z, jnp.zeros((5,), jnp.float32)).shape == (5, 3, 3)
    assert R.axis_angle_to_quat(jnp.tile(z, (5, 1)), jnp.float32(0.5)).shape == (5, 4)
    assert R.axis_angle_to_mat(jnp.tile(z, (5, 1)), jnp.float32(0.5)).shape == (5, 3, 3)
