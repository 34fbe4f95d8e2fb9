"""Closed-form SO-101 IK (every branch, FK-verified) and continuous path selection (float64)."""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.ik import analytic as analytic_ik
from so101_mjx.ik.solvers.analytic_solver import SO101AnalyticSolver
from so101_mjx.ik.solvers.path import select_continuous_path
from so101_mjx.ik.solvers.solver import SO101Solver
from so101_mjx.robot.kinematics import Kinematics
from so101_mjx.robot.scenes import ARM_JOINTS, EE_SITE, load_model


@pytest.fixture(scope="module")
def solver() -> SO101AnalyticSolver:
    return SO101AnalyticSolver.top_down()


def limits(solver):
    lim = solver.get_qpos_limits()
    return np.asarray(lim["lower_qpos_limits"]), np.asarray(lim["upper_qpos_limits"])


def pitch_of(q):
    """In-plane approach pitch of joint angles q (..., 5) (the reference approach is horizontal)."""
    s = q[..., 1] + q[..., 2] + q[..., 3]
    return np.arctan2(np.sin(s), np.cos(s))


def test_geometry_rejects_a_chain_of_another_shape():
    model = load_model("so101")
    model.jnt_axis[model.joint("elbow_flex").id] = [0.0, 0.9, 0.1]  # no longer parallel to the shoulder
    kin = Kinematics.from_model(model, ARM_JOINTS)
    with pytest.raises(ValueError, match="pitch axes are not parallel"):
        analytic_ik.ArmGeometry.from_kinematics(kin, EE_SITE)


def test_every_branch_is_exact_and_the_original_is_among_them(solver):
    lo, hi = limits(solver)
    q = np.random.default_rng(0).uniform(lo, hi, (5000, 5))
    target = np.asarray(solver.get_fk(q))[:, :3, 3]
    # The geometry's own FK (the single answer's check) is the chain's.
    np.testing.assert_allclose(np.asarray(analytic_ik.forward(solver._geometry(), q)), target, rtol=0, atol=1e-12)
    exists, cand = analytic_ik.solve(solver._geometry(), jnp.asarray(target), jnp.asarray(pitch_of(q)),
                                     jnp.asarray(q[:, 4]))
    fk = np.asarray(solver.get_fk(cand))[..., :3, 3]
    err = np.linalg.norm(fk - target[:, None], axis=-1)
    assert np.asarray(exists).any(-1).all()  # a reachable point has a branch
    assert err[np.asarray(exists)].max() < 1e-9
    recovered = np.min(np.max(np.abs(np.asarray(cand) - q[:, None]), -1), -1)
    assert recovered.max() < 1e-6


def test_no_false_success_over_random_targets(solver):
    rng = np.random.default_rng(1)
    target = rng.uniform([-0.6, -0.6, -0.2], [0.6, 0.6, 0.6], (20000, 3))
    seed = rng.uniform(*limits(solver), (20000, 5))
    valid, q = solver.get_ik(target, qpos_seed=seed, return_all_solutions=True)
    valid, q = np.asarray(valid), np.asarray(q)
    assert 0.02 < valid.any(-1).mean() < 0.5  # reachable and unreachable targets both present
    pose = np.asarray(solver.get_fk(q))
    lo, hi = limits(solver)
    assert np.linalg.norm(pose[..., :3, 3] - target[:, None], axis=-1)[valid].max() < 1e-9
    assert np.abs(pose[..., 2, 0] + 1)[valid].max() < 1e-9  # approach axis straight down
    assert np.all((q[valid] >= lo) & (q[valid] <= hi))
    assert np.all(np.isfinite(q))
    # Best first: valid slots lead, nearest to the seed among them.
    assert np.all(np.diff(valid.astype(int), axis=-1) <= 0)
    cost = np.sum((q - seed[:, None]) ** 2, -1)
    both = valid[:, 0] & valid[:, 1]
    assert np.all(cost[both, 0] <= cost[both, 1])
    # The single answer (only its branch FK-checked) is the first of all of them.
    ok1, q1 = (np.asarray(x) for x in solver.get_ik(target, qpos_seed=seed))
    np.testing.assert_array_equal(ok1, valid[:, 0])
    np.testing.assert_allclose(q1, q[:, 0], rtol=0, atol=1e-12)


@pytest.mark.slow
def test_agrees_with_multistart_lm_where_both_converge(solver):
    lo, hi = limits(solver)
    rng = np.random.default_rng(2)
    q = rng.uniform(lo, hi, (400, 5))
    q[:, 3] = np.pi / 2 - q[:, 1] - q[:, 2]  # top-down configurations, wrist permitting
    keep = (q[:, 3] > lo[3]) & (q[:, 3] < hi[3])
    q = q[keep]
    target = np.asarray(solver.get_fk(q))[:, :3, 3]
    lm = SO101Solver.top_down(pos_eps=1e-5, rot_eps=1e-3, iterations=60)
    ok_lm, q_lm = (np.asarray(x) for x in lm.get_ik(target, qpos_seed=q))
    valid, cand = (np.asarray(x) for x in solver.get_ik(target, qpos_seed=q_lm, return_all_solutions=True))
    assert ok_lm.mean() > 0.5 and valid[:, 0].all()
    # The LM's solution is one of the closed-form branches (to its own tolerances).
    gap = np.min(np.max(np.abs(cand - q_lm[:, None]), -1) + 10 * ~valid, -1)
    assert np.percentile(gap[ok_lm], 99) < 1e-2


@pytest.mark.slow
def test_per_target_pitch_agrees_with_lm_where_both_converge(model):
    """(position, pitch) targets at arbitrary pitches: exact at the sampled roll, and an LM solution
    of the position and approach direction is a closed-form branch of its own pitch and roll."""
    analytic = SO101AnalyticSolver(model)
    lo, hi = limits(analytic)
    rng = np.random.default_rng(6)
    q = rng.uniform(lo, hi, (400, 5))
    pose = np.asarray(analytic.get_fk(q))
    geom = analytic._geometry()
    pitch = np.asarray(analytic_ik.pitch_of(geom, q))
    ok, sol = (np.asarray(x) for x in analytic.get_ik(pose[:, :3, 3], qpos_seed=q, pitch=pitch))
    assert ok.all()
    fk = np.asarray(analytic.get_fk(sol))
    assert np.abs(fk[:, :3, 3] - pose[:, :3, 3]).max() < 1e-9
    assert np.abs(np.asarray(analytic_ik.wrap(analytic_ik.pitch_of(geom, sol) - pitch))).max() < 1e-9
    lm = SO101Solver(model, approach_axis=0, pos_eps=1e-6, rot_eps=1e-5, iterations=60, tolerance=1e-9, damping=1e-7)
    ok_lm, q_lm = (np.asarray(x) for x in lm.get_ik(pose, qpos_seed=np.clip(q + rng.normal(0, 0.2, q.shape), lo, hi)))
    valid, cand = (np.asarray(x) for x in analytic.get_ik(
        pose[:, :3, 3], qpos_seed=q_lm, pitch=np.asarray(analytic_ik.pitch_of(geom, q_lm)), return_all_solutions=True))
    assert ok_lm.mean() > 0.9 and valid[ok_lm, 0].all()  # measured 0.983
    gap = np.min(np.max(np.abs(cand - q_lm[:, None]), -1) + 10 * ~valid, -1)
    assert np.percentile(gap[ok_lm], 99) < 1e-4  # measured 2.3e-6 rad: the LM's own tolerances
    # A non-finite pitch fails like a non-finite target, with finite joints.
    ok, sol = analytic.get_ik(pose[:2, :3, 3], pitch=np.array([np.nan, pitch[1]]), qpos_seed=q[:2])
    np.testing.assert_array_equal(np.asarray(ok), [False, True])
    assert np.all(np.isfinite(np.asarray(sol)))


@pytest.mark.slow
def test_pose_targets(solver):
    lo, hi = limits(solver)
    q = np.random.default_rng(3).uniform(lo, hi, (2000, 5))
    pose = np.asarray(solver.get_fk(q))
    valid, cand = (np.asarray(x) for x in solver.get_ik(pose, qpos_seed=np.zeros(5), return_all_solutions=True))
    assert valid.shape == (2000, 8)
    fk = np.asarray(solver.get_fk(cand))
    assert np.linalg.norm(fk[..., :3, 3] - pose[:, None, :3, 3], axis=-1)[valid].max() < 1e-9
    # The whole pose is reproduced by the best candidate where the Newton roll converged (measured 99.2 %).
    best_rot = np.linalg.norm(fk[:, 0, :3, :3] - pose[:, :3, :3], axis=(-2, -1))
    assert np.mean(valid[:, 0] & (best_rot < 1e-9)) > 0.98
    # Not a rotation, or not finite: never a solution, never NaN.
    bad = np.repeat(pose[:3], 1, 0)
    bad[0, :3, :3] = 0.0
    bad[1, :3, :3] *= 1.5
    bad[2, 0, 0] = np.nan
    ok, qb = solver.get_ik(bad)
    assert not np.asarray(ok).any() and np.all(np.isfinite(np.asarray(qb)))


def test_invalid_arguments():
    with pytest.raises(ValueError, match="approach_axis"):
        SO101AnalyticSolver(approach_axis=2)
    with pytest.raises(ValueError, match="pitch"):
        SO101AnalyticSolver(pitch=float("nan"))
    with pytest.raises(ValueError, match="pitch"):
        SO101AnalyticSolver(pitch="down")
    with pytest.raises(ValueError, match="target"):
        SO101AnalyticSolver().get_ik(np.zeros(4))
    with pytest.raises(ValueError, match="pitch is for"):
        SO101AnalyticSolver().get_ik(np.eye(4), pitch=1.0)
    with pytest.raises(ValueError, match="do not broadcast"):
        SO101AnalyticSolver().get_ik(np.zeros((4, 3)), pitch=np.zeros(3))


def smooth_paths(solver, rng, paths: int, waypoints: int) -> np.ndarray:
    """Random smooth joint paths (paths, waypoints, 5) inside the limits: steps < 0.1 rad."""
    lo, hi = limits(solver)
    margin = 0.2
    start = rng.uniform(lo + margin, hi - margin, (paths, 5))
    end = rng.uniform(lo + margin, hi - margin, (paths, 5))
    t = np.linspace(0, 1, waypoints)[None, :, None]
    wiggle = 0.1 * np.sin(2 * np.pi * t * rng.uniform(0.5, 1.5, (paths, 1, 5)))
    return np.clip(start[:, None] + (end - start)[:, None] * (0.5 - 0.5 * np.cos(np.pi * t)) + wiggle, lo, hi)


@pytest.mark.parametrize("paths", [100, pytest.param(1000, marks=pytest.mark.soak)])  # 1000: the same checks as 100
def test_continuous_path_has_no_jump_where_a_continuous_branch_exists(solver, paths):
    rng = np.random.default_rng(4)
    q = smooth_paths(solver, rng, paths, 50)
    assert np.abs(np.diff(q, axis=1)).max() < 0.5
    target = np.asarray(solver.get_fk(q))[..., :3, 3]
    exists, cand = analytic_ik.solve(solver._geometry(), jnp.asarray(target), jnp.asarray(pitch_of(q)),
                                     jnp.asarray(q[..., 4]))
    lo, hi = limits(solver)
    valid = np.asarray(exists) & np.all((np.asarray(cand) >= lo) & (np.asarray(cand) <= hi), -1)
    ok, joints, jumps = select_continuous_path(jnp.asarray(valid), cand, jnp.asarray(q[:, 0]), threshold=0.5)
    assert np.asarray(ok).all() and not np.asarray(jumps).any()
    moves = np.abs(np.diff(np.concatenate([q[:, :1], np.asarray(joints)], 1), axis=1)).max()
    assert moves < 0.5
    fk = np.asarray(solver.get_fk(np.asarray(joints)))[..., :3, 3]
    assert np.abs(fk - target).max() < 1e-9
    # Solver-level hook, the same selection.
    ok2, joints2, _ = solver.select_continuous_ik_path(valid, cand, q[:, 0], threshold=0.5)
    np.testing.assert_array_equal(np.asarray(joints2), np.asarray(joints))


def test_path_flags_forced_jumps_and_holds_through_unreachable_waypoints():
    # One path, 4 waypoints, 2 candidates: waypoint 2 has no valid candidate, waypoint 3 only a far one.
    cand = jnp.asarray([[[[0.0] * 5, [3.0] * 5], [[0.1] * 5, [3.0] * 5], [[9.0] * 5, [9.0] * 5],
                         [[2.0] * 5, [0.2] * 5]]])
    valid = jnp.asarray([[[True, True], [True, False], [False, False], [True, False]]])
    ok, joints, jumps = select_continuous_path(valid, cand, jnp.zeros((1, 5)), threshold=0.5)
    np.testing.assert_array_equal(np.asarray(ok)[0], [True, True, False, True])
    np.testing.assert_allclose(np.asarray(joints)[0, :, 0], [0.0, 0.1, 0.1, 2.0])
    np.testing.assert_array_equal(np.asarray(jumps)[0], [False, False, False, True])
    with pytest.raises(ValueError, match="threshold"):
        select_continuous_path(valid, cand, jnp.zeros((1, 5)), threshold=0.0)


def test_float32(solver):
    lo, hi = limits(solver)
    q = np.random.default_rng(5).uniform(lo, hi, (256, 5))
    q[:, 3] = np.pi / 2 - q[:, 1] - q[:, 2]
    q = q[(q[:, 3] > lo[3]) & (q[:, 3] < hi[3])]
    target = np.asarray(solver.get_fk(q))[:, :3, 3].astype(np.float32)
    loose = SO101AnalyticSolver.top_down(pos_eps=1e-4)
    ok, sol = loose.get_ik(target, qpos_seed=q.astype(np.float32))
    assert sol.dtype == jnp.float32 and np.asarray(ok).mean() > 0.99
    fk = np.asarray(loose.get_fk(np.asarray(sol, np.float64)))[:, :3, 3]
    assert np.abs(fk - target)[np.asarray(ok)].max() < 1e-5


def test_geometry_is_hashable_for_jit(solver):
    g = solver._geometry()
    assert hash(g) == hash(g) and dataclasses.is_dataclass(g)
