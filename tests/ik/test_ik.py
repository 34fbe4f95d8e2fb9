"""so101_mjx.ik.iterative against lerobot_env_so101 0.4.0's numpy/MuJoCo C solvers (float64 unless noted)."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from so101_mjx.ik import iterative as ik
from so101_mjx.robot.kinematics import Kinematics
from so101_mjx.robot.scenes import ARM_JOINTS

ref_ik = pytest.importorskip("lerobot_env_so101.ik_control")
N = 1000
PARITY = 1e-10  # rad per joint


@pytest.fixture(scope="module")
def kin(model):
    return Kinematics.from_model(model, ARM_JOINTS)


@pytest.fixture(scope="module")
def limits(model):
    return ik.joint_limits(model)


@pytest.fixture(scope="module")
def ref_solve(ref_model):
    """Loop a reference solver over problems: fn(solver, targets (N, 3), seeds (N, 5), **kw) -> (N, 5)."""
    data = mujoco.MjData(ref_model)
    site, dofs = ref_model.site("gripperframe").id, np.asarray([ref_model.joint(j).id for j in ARM_JOINTS])

    def solve(solver, targets, seeds, **kw):
        return np.stack([solver(ref_model, data, site, dofs, t, q, **kw) for t, q in zip(targets, seeds)])

    return solve


@pytest.fixture(scope="module")
def problems(kin, limits):
    """Reachable targets (FK of random joints within limits) and independent random seeds."""
    rng = np.random.default_rng(0)
    lo, hi = limits
    return rng.uniform(lo, hi, (N, 5)), rng.uniform(lo, hi, (N, 5))


@pytest.fixture(scope="module")
def offset(model):
    return ik.grasp_point_offset(model)


@pytest.fixture(scope="module")
def targets(kin, problems, offset):
    """Reachable targets of the site origin (position-only) and of the grasp point (top-down)."""
    return (np.asarray(kin.point(problems[0], "gripperframe")),
            np.asarray(kin.point(problems[0], "gripperframe", offset)))


@pytest.fixture(scope="module")
def ref_lm(problems, targets, ref_solve, offset):
    """Reference LM solutions (position-only, top-down) of the shared problems."""
    q0 = problems[1]
    lm = ref_ik.compute_ik_levenberg_marquardt
    return ref_solve(lm, targets[0], q0), ref_solve(lm, targets[1], q0, point_offset=offset, approach_axis=0)


@pytest.fixture(scope="module")
def lm_limits(kin):
    """Position-only LM with the limits as arguments: fn(q0, targets, lower, upper)."""
    return jax.jit(lambda q, t, lo, hi: ik.levenberg_marquardt(kin, q, t, lower=lo, upper=hi))


@pytest.fixture(scope="module")
def lm_position(lm_limits, limits):
    return lambda q, t: lm_limits(q, t, *(np.asarray(x, np.asarray(q).dtype) for x in limits))


@pytest.fixture(scope="module")
def lm_top_down(kin, limits, offset):
    return jax.jit(
        lambda q, t: ik.levenberg_marquardt(kin, q, t, offset=offset, approach_axis=0, lower=limits[0], upper=limits[1])
    )


def test_joint_limits_match_model_ranges(model):
    lo, hi = ik.joint_limits(model)
    rng = model.jnt_range[[model.joint(j).id for j in ARM_JOINTS]]
    np.testing.assert_array_equal(lo, rng[:, 0])
    np.testing.assert_array_equal(hi, rng[:, 1])


def test_grasp_point_offset_matches_reference(model, ref_model):
    from lerobot_env_so101.mujoco_env import grasp_point_offset

    ours = ik.grasp_point_offset(model)
    theirs = grasp_point_offset(ref_model, ref_model.site("gripperframe").id)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours, [-9.2846e-4, 6.8121e-5, 2.60264e-2], atol=1e-7)


def test_top_down_seed_matches_reference_env(kin, limits):
    from lerobot_env_so101.mujoco_env import SO101GymEnv

    env = SO101GymEnv(top_down_ik=True)
    rng = np.random.default_rng(1)
    qs = rng.uniform(*limits, (200, 5))
    expected = []
    for q in qs:
        env._data.qpos[env._arm_dof_ids] = q
        mujoco.mj_forward(env._model, env._data)
        expected.append(env._top_down_seed())
    ours = np.asarray(jax.jit(lambda q: ik.top_down_seed(kin, q, *limits))(qs))
    np.testing.assert_allclose(ours, np.asarray(expected), rtol=0, atol=1e-12)
    assert np.any(ours[:, 4] == limits[1][4]) or np.any(ours[:, 4] == limits[0][4])  # the clip is exercised


@pytest.mark.parametrize("mode", ["position", "top-down"])
def test_lm_parity(mode, problems, targets, ref_lm, lm_position, lm_top_down):
    k = ["position", "top-down"].index(mode)
    err = np.abs(np.asarray((lm_position, lm_top_down)[k](problems[1], targets[k])) - ref_lm[k]).max()
    print(f"LM {mode} float64 parity: max {err:.3g} rad over {N} problems")
    assert err <= PARITY


def test_pseudoinverse_parity(kin, limits, problems, ref_solve):
    # Undamped, unclipped Gauss-Newton from far seeds is chaotic (round-off grows ~10x per
    # iteration: measured 236/1000 uniform-seed problems beyond 1e-10 after 20 iterations), so
    # parity is asserted on local problems, seeds within 0.2 rad of a solution, as in the envs.
    qt, _ = problems
    q0 = np.clip(qt + np.random.default_rng(2).uniform(-0.2, 0.2, qt.shape), *limits)
    targets = np.asarray(kin.point(qt, "gripperframe"))
    expected = ref_solve(ref_ik.compute_ik_pseudoinverse, targets, q0)
    err = np.abs(np.asarray(jax.jit(lambda q, t: ik.pseudoinverse(kin, q, t))(q0, targets)) - expected).max()
    print(f"pseudoinverse float64 parity: max {err:.3g} rad over {N} problems")
    assert err <= PARITY


def test_float32_deviation(problems, targets, ref_lm, lm_position, lm_top_down):
    q0 = problems[1].astype(np.float32)
    for name, fn, t, expected in zip(("position", "top-down"), (lm_position, lm_top_down), targets, ref_lm):
        out = fn(q0, t.astype(np.float32))
        assert out.dtype == jnp.float32
        err = np.abs(np.asarray(out, np.float64) - expected).max(-1)
        p50, p99, worst = np.percentile(err, [50, 99, 100])
        print(f"LM {name} float32 vs reference: median {p50:.3g}, p99 {p99:.3g}, max {worst:.3g} rad")
        # Measured: median ~1.6e-7, p99 ~1e-6, max ~1.1e-4 (a few ill-conditioned problems).
        assert p50 < 1e-6 and p99 < 1e-5 and worst < 1e-3


def test_batch_composition_is_bitwise_and_unbatched_matches(problems, targets, lm_top_down):
    q0, targets = problems[1][:64], targets[1][:64]
    batch = np.asarray(lm_top_down(q0, targets))
    # Same shape, other companions (half replaced by unreachable problems that never freeze,
    # then a permutation): each problem's result is bitwise its own.
    far = targets.copy()
    far[32:] = [2.0, 0.0, 1.0]
    np.testing.assert_array_equal(np.asarray(lm_top_down(q0, far))[:32], batch[:32])
    perm = np.random.default_rng(3).permutation(64)
    np.testing.assert_array_equal(np.asarray(lm_top_down(q0[perm], targets[perm])), batch[perm])
    # Other shapes: XLA CPU's vectorization rounds FK differently per shape (~1 ulp), not bitwise.
    one = np.stack([np.asarray(lm_top_down(q, t)) for q, t in zip(q0[:16], targets[:16])])
    np.testing.assert_allclose(one, batch[:16], rtol=0, atol=1e-12)


def test_leading_axes_broadcasting_vmap_and_step(kin, limits, problems, targets, lm_position):
    q0, targets = problems[1], targets[0]
    batch = np.asarray(lm_position(q0, targets))
    shared = np.asarray(lm_position(q0[0], targets.reshape(8, 125, 3)))  # one seed for a grid of targets
    assert shared.shape == (8, 125, 5)
    expected = np.asarray(lm_position(np.broadcast_to(q0[0], (N, 5)), targets))
    np.testing.assert_allclose(shared.reshape(N, 5), expected, rtol=0, atol=1e-12)
    vmapped = jax.jit(jax.vmap(lambda q, t: ik.levenberg_marquardt(kin, q, t, lower=limits[0], upper=limits[1])))
    np.testing.assert_allclose(np.asarray(vmapped(q0, targets)), batch, rtol=0, atol=1e-12)
    step = jax.jit(lambda q, t: ik.ik_step(kin, q, t, lower=limits[0], upper=limits[1]))
    q = q0
    for _ in range(20):
        q = step(q, targets)
    np.testing.assert_allclose(np.asarray(q), batch, rtol=0, atol=1e-12)


def test_clip_to_given_limits(problems, targets, lm_limits):
    lo, hi = np.full(5, -0.5), np.full(5, 0.5)
    q = np.asarray(lm_limits(problems[1], targets[0], lo, hi))
    assert np.all((q >= lo) & (q <= hi)) and np.any(np.isclose(np.abs(q), 0.5))


def _converged_interior_jacobian(kin, limits):
    """A converged solution away from the limits: its seed, target, dq*/dtarget (5, 3) and the jvp."""
    lo, hi = limits
    rng = np.random.default_rng(4)
    jvp = jax.jit(lambda q, t, v: jax.jvp(lambda t: ik.levenberg_marquardt(kin, q, t, lower=lo, upper=hi), (t,), (v,)))
    while True:
        q_true = rng.uniform(lo + 0.3, hi - 0.3)
        seed, target = q_true + rng.uniform(-0.1, 0.1, 5), np.asarray(kin.point(q_true, "gripperframe"))
        sol = np.asarray(jvp(seed, target, np.zeros(3))[0])
        if (np.linalg.norm(kin.point(sol, "gripperframe") - target) < 1e-4
            and np.all((sol > lo + 0.05) & (sol < hi - 0.05))):
            break
    jac = np.stack([np.asarray(jvp(seed, target, e)[1]) for e in np.eye(3)], -1)
    return seed, target, jac, lambda t, v: jvp(seed, t, v)


def test_gradient_wrt_target_matches_finite_differences(kin, limits):
    _, target, jac, jvp = _converged_interior_jacobian(kin, limits)
    h = 1e-6
    fd = np.stack([(jvp(target + h * e, e)[0] - jvp(target - h * e, e)[0]) / (2 * h) for e in np.eye(3)], -1)
    print(f"dq*/dtarget: max |autodiff - finite differences| {np.abs(jac - fd).max():.3g}, max |dq*/dt| "
          f"{np.abs(jac).max():.3g}")
    assert np.all(np.isfinite(jac)) and np.abs(jac).max() > 0.1
    np.testing.assert_allclose(jac, fd, rtol=0, atol=1e-6 * np.abs(jac).max())


@pytest.mark.slow
@pytest.mark.optimized
def test_reverse_mode_gradient_matches_forward(kin, limits):
    seed, target, jac, _ = _converged_interior_jacobian(kin, limits)
    f = lambda t: ik.levenberg_marquardt(kin, seed, t, lower=limits[0], upper=limits[1])  # noqa: E731
    np.testing.assert_allclose(np.asarray(jax.jit(jax.jacrev(f))(target)), jac, rtol=0, atol=1e-10)


def test_top_down_gradient_finite_at_zero_tilt(kin, limits, offset):
    q = jnp.asarray([0.1, 0.2, 0.3, 1.2, 0.4])
    axis = kin.site_pose(q, "gripperframe")[1][:, 0]  # approach_dir == the current axis: zero tilt

    def loss(q):
        e, _ = ik.task_error(kin, q, jnp.asarray([0.25, 0.0, 0.05]), offset=offset, approach_axis=0, approach_dir=axis)
        return jnp.sum(e**2)

    e, _ = ik.task_error(kin, q, jnp.zeros(3), offset=offset, approach_axis=0, approach_dir=axis)
    assert np.abs(e[3:]).max() < 1e-15  # sin(tilt) below the 1e-9 guard: the unscaled branch
    assert np.all(np.isfinite(jax.jit(jax.grad(loss))(q)))
