"""SO101Solver: multi-start IK, selection, TCP, limits, validation; checked against MuJoCo C."""

import mujoco
import numpy as np
import pytest

from so101_mjx.ik import iterative as ik
from so101_mjx.ik.solvers.solver import SO101Solver
from so101_mjx.robot.scenes import ARM_JOINTS, joint_qpos_ids

N = 1000


@pytest.fixture(scope="module")
def solver(model):
    return SO101Solver(model)


@pytest.fixture(scope="module")
def reachable(solver):
    """Joint configurations within limits (N, 5) and their TCP positions (N, 3)."""
    lims = solver.get_qpos_limits()
    q = np.random.default_rng(0).uniform(lims["lower_qpos_limits"], lims["upper_qpos_limits"], (N, 5))
    return q, np.asarray(solver.get_fk(q))[:, :3, 3]


def mujoco_site(model, q, site="gripperframe"):
    """MuJoCo C site positions (..., 3) and rotations (..., 3, 3) of joint angles q (..., 5)."""
    data, adr, s = mujoco.MjData(model), joint_qpos_ids(model), model.site(site).id
    flat = np.reshape(q, (-1, 5))
    pos, rot = np.zeros((len(flat), 3)), np.zeros((len(flat), 3, 3))
    for i, qi in enumerate(flat):
        data.qpos[adr] = qi
        mujoco.mj_kinematics(model, data)
        pos[i], rot[i] = data.site_xpos[s], data.site_xmat[s].reshape(3, 3)
    return pos.reshape(*np.shape(q)[:-1], 3), rot.reshape(*np.shape(q)[:-1], 3, 3)


@pytest.mark.slow
def test_multi_start_solves_reachable_targets(model, solver, reachable):
    _, targets = reachable
    success, q = (np.asarray(a) for a in solver.get_ik(targets))
    rate = success.mean()
    print(f"multi-start ({solver.num_samples} starts) success on {N} reachable targets: {rate:.4f}")
    assert rate >= 0.995
    err = np.linalg.norm(mujoco_site(model, q)[0] - targets, axis=-1)
    assert np.all(err[success] < 1e-3)  # never a false success, by MuJoCo C
    lims = solver.get_qpos_limits()
    assert np.all((q >= lims["lower_qpos_limits"]) & (q <= lims["upper_qpos_limits"]))
    # A pose target in position mode: its rotation is ignored.
    poses = np.array(solver.get_fk(reachable[0][::-1]))
    poses[:, :3, 3] = targets
    np.testing.assert_array_equal(np.asarray(solver.get_ik(poses)[1]), q)


@pytest.mark.slow
def test_seed_re_ranking_is_opt_in_and_solves(model, solver, reachable):
    """seed_k_max re-ranks the k nearest database entries by predicted correction (docs/ik.md#seeds);
    seed_k_max = num_samples - 1 keeps the plain nearest ones, the default."""
    _, targets = reachable
    plain = np.asarray(solver.get_ik(targets[:200], return_all_solutions=True)[1])
    same = SO101Solver(model, seed_k_max=solver.num_samples - 1)
    np.testing.assert_array_equal(np.asarray(same.get_ik(targets[:200], return_all_solutions=True)[1]), plain)
    ranked = SO101Solver(model, seed_k_max=64)
    success, q = (np.asarray(a) for a in ranked.get_ik(targets[:200], return_all_solutions=True))
    assert not np.array_equal(q, plain)  # other starts were kept
    assert success[:, 0].mean() >= 0.99
    with pytest.raises(ValueError, match="seed_k_max"):
        SO101Solver(model, seed_k_max=0)


def test_unreachable_and_non_finite_targets(model, solver, reachable):
    q_reach, t_reach = reachable
    targets = np.array([t_reach[0], [1.5, 0.0, 0.2], [0.0, 0.0, -2.0], [np.nan, 0.1, 0.1],
                        [np.inf, 0.0, 0.0], [-np.inf, np.nan, np.inf], t_reach[1], [0.2, 0.0, 0.7]])
    seeds = np.tile(solver.get_default_qpos_seed(), (8, 1))
    seeds[6] = np.nan  # a non-finite seed falls back to the default seed
    success, q = (np.asarray(a).reshape(8, *a.shape[2:])
                  for a in solver.get_ik(targets.reshape(2, 4, 3), seeds.reshape(2, 4, 5)))
    np.testing.assert_array_equal(success, [True, False, False, False, False, False, True, False])
    assert np.all(np.isfinite(q))
    err = np.linalg.norm(mujoco_site(model, q)[0] - targets, axis=-1)
    assert np.all(err[success] < 1e-3)
    assert np.all(err[[1, 2, 7]] > 1e-3)


def test_all_solutions_ordering_and_leading_axes(solver, reachable):
    _, targets = reachable
    grid = targets[:8].reshape(2, 4, 3)
    seed = np.zeros(5)
    valid, cand = (np.asarray(a) for a in solver.get_ik(grid, qpos_seed=seed, return_all_solutions=True))
    assert valid.shape == (2, 4, 16) and cand.shape == (2, 4, 16, 5)
    success, q = (np.asarray(a) for a in solver.get_ik(grid, qpos_seed=seed))
    np.testing.assert_array_equal(success, valid[..., 0])
    np.testing.assert_array_equal(q, cand[..., 0, :])
    # Valid candidates first, the nearest to the seed first among them.
    assert np.all(np.diff(valid.astype(int), axis=-1) <= 0)
    dist = np.where(valid, np.sum((cand - seed) ** 2, -1), np.inf)
    np.testing.assert_array_equal(np.argmin(dist, -1), 0)


def test_nearest_vs_manipulability(model, solver, reachable):
    _, targets = reachable
    grid = targets[8:16].reshape(2, 4, 3)
    seed = np.zeros(5)
    manip = SO101Solver(model, selection="manipulability")
    _, q_near = (np.asarray(a) for a in solver.get_ik(grid, qpos_seed=seed))
    valid, cand = (np.asarray(a) for a in manip.get_ik(grid, qpos_seed=seed, return_all_solutions=True))

    def yoshikawa(q):
        jv = np.asarray(manip.get_jacobian(q, jac_type="trans"))
        return np.sqrt(np.maximum(np.linalg.det(jv @ np.swapaxes(jv, -1, -2)), 0))

    score = np.where(valid, yoshikawa(cand), -np.inf)
    np.testing.assert_array_equal(np.argmax(score, -1), 0)
    q_manip = cand[..., 0, :]
    assert np.all(yoshikawa(q_manip) >= yoshikawa(q_near) - 1e-12)
    assert np.all(np.sum(q_near**2, -1) <= np.sum(q_manip**2, -1) + 1e-12)
    assert np.any(np.abs(q_near - q_manip).max(-1) > 1e-3)  # the criteria pick different postures


def test_fk_and_jacobian_with_tcp_match_mujoco(model):
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, np.array([np.cos(0.3), np.sin(0.3), 0.0, 0.0]))
    tcp = np.eye(4)
    tcp[:3, :3], tcp[:3, 3] = rot.reshape(3, 3), [0.01, -0.02, 0.03]
    solver = SO101Solver(model, tcp=tcp)
    np.testing.assert_array_equal(solver.get_tcp(), tcp)
    q = np.random.default_rng(1).uniform(-1, 1, (3, 5))
    pos, xmat = mujoco_site(model, q)
    fk = np.asarray(solver.get_fk(q))
    np.testing.assert_allclose(fk[:, :3, :3], xmat @ tcp[:3, :3], atol=1e-12)
    np.testing.assert_allclose(fk[:, :3, 3], pos + xmat @ tcp[:3, 3], atol=1e-12)
    np.testing.assert_array_equal(fk[:, 3], np.tile([0, 0, 0, 1.0], (3, 1)))
    loc = np.array([0.0, 0.05, 0.0])
    jac, jac_loc = np.asarray(solver.get_jacobian(q)), np.asarray(solver.get_jacobian(q, locations=loc))
    assert jac.shape == (3, 6, 5) and solver.get_jacobian(q[0], jac_type="rot").shape == (3, 5)
    data, dofs, body = (mujoco.MjData(model), [model.joint(j).dofadr[0] for j in ARM_JOINTS],
                        model.site("gripperframe").bodyid[0])
    for k in range(3):
        data.qpos[joint_qpos_ids(model)] = q[k]
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        for point, ours in ((fk[k, :3, 3], jac[k]), (fk[k, :3, 3] + fk[k, :3, :3] @ loc, jac_loc[k])):
            jp, jr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
            mujoco.mj_jac(model, data, jp, jr, point, body)
            np.testing.assert_allclose(ours, np.vstack([jp[:, dofs], jr[:, dofs]]), atol=1e-12)


def test_tcp_validation(solver):
    bad = {
        "shape": np.eye(3),
        "nan": np.where(np.eye(4) == 1, np.nan, 0.0),
        "scaled": np.diag([2.0, 1.0, 1.0, 1.0]),
        "reflection": np.diag([-1.0, 1.0, 1.0, 1.0]),
        "last row": np.vstack([np.eye(4)[:3], [0.1, 0, 0, 1]]),
    }
    for tcp in bad.values():
        with pytest.raises(ValueError, match="tcp"):
            solver.set_tcp(tcp)
    np.testing.assert_array_equal(solver.get_tcp(), np.eye(4))  # unchanged after the failures


def test_limits_intersection_and_rebuild(model, reachable):
    lo, hi = ik.joint_limits(model)
    solver = SO101Solver(model, user_qpos_limits=[lo + 0.1, hi + 0.1])
    lims = solver.get_qpos_limits()
    np.testing.assert_allclose(lims["lower_qpos_limits"], lo + 0.1)
    np.testing.assert_allclose(lims["upper_qpos_limits"], hi)
    robot = np.stack([lo - 1, hi - 0.2], -1)
    solver.update_with_robot_limit(robot)
    np.testing.assert_allclose(solver.get_qpos_limits()["upper_qpos_limits"], hi - 0.2)
    np.testing.assert_allclose(solver.get_default_qpos_seed(), 0.5 * (lo + 0.1 + hi - 0.2))
    with pytest.raises(ValueError, match="lower <= upper"):
        solver.update_with_robot_limit(np.stack([hi, hi + 1], -1))
    with pytest.raises(ValueError, match=r"robot_qpos_limits must have shape \(5, 2\)"):
        solver.update_with_robot_limit(np.zeros((2, 5)))
    # Seed 002, BaseSolver.set_qpos_limits: invalid input returns False (with a warning), limits unchanged.
    before = solver.get_qpos_limits()
    with pytest.warns(UserWarning, match=r"lower_qpos_limits must have shape \(5,\)"):
        assert solver.set_qpos_limits(np.zeros(4), np.ones(5)) is False
    assert solver.get_qpos_limits() == before
    # Tight limits: the seed database is rebuilt inside them and every solution respects them.
    tight_lo, tight_hi = np.full(5, -0.6), np.full(5, 0.6)
    assert solver.set_qpos_limits(tight_lo, tight_hi)
    q_in = np.clip(reachable[0][:64], -0.5, 0.5)
    success, q = (np.asarray(a) for a in solver.get_ik(np.asarray(solver.get_fk(q_in))[:, :3, 3]))
    assert np.all((solver._database()[0] >= tight_lo) & (solver._database()[0] <= tight_hi))
    assert np.all((q >= tight_lo) & (q <= tight_hi)) and success.mean() >= 0.95


def test_argument_validation(model, solver):
    with pytest.raises(ValueError, match=r"target must have shape \(\.\.\., 3\) or \(\.\.\., 4, 4\)"):
        solver.get_ik(np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"qpos_seed must have shape \(5,\)"):
        solver.get_ik(np.zeros(3), qpos_seed=np.zeros(4))
    with pytest.raises(ValueError, match="qpos_seed batch"):
        solver.get_ik(np.zeros((3, 3)), qpos_seed=np.zeros((2, 5)))
    with pytest.raises(ValueError, match="num_samples"):
        solver.get_ik(np.zeros(3), num_samples=0)
    with pytest.raises(ValueError, match="jac_type"):
        solver.get_jacobian(np.zeros(5), jac_type="angular")
    with pytest.raises(ValueError, match=r"qpos must have shape \(\.\.\., 5\)"):
        solver.get_fk(np.zeros(6))
    with pytest.raises(ValueError, match="selection"):
        SO101Solver(model, selection="best")
    # Seed 002, BaseSolver.set_ik_nearest_weight: invalid weights return False (with a warning).
    with pytest.warns(UserWarning, match="ik_weight"):
        assert solver.set_ik_nearest_weight([-1.0, 1, 1, 1, 1]) is False
    np.testing.assert_array_equal(solver.get_ik_nearest_weight(), np.ones(5))


@pytest.mark.slow
def test_top_down_solver(model):
    solver = SO101Solver.top_down(model)
    np.testing.assert_allclose(solver.get_tcp()[:3, 3], ik.grasp_point_offset(model))
    # Reachable top-down grasp points: converge random configurations onto the constraint.
    lo, hi = ik.joint_limits(model)
    q = np.random.default_rng(2).uniform(lo, hi, (400, 5))
    fk = np.asarray(solver.get_fk(q))
    q = np.asarray(ik.levenberg_marquardt(solver.kin, q, fk[:, :3, 3], offset=solver.get_tcp()[:3, 3], approach_axis=0,
                                          damping=1e-3, iterations=100, lower=lo, upper=hi))
    poses = np.asarray(solver.get_fk(q))
    poses = poses[np.arccos(np.clip(-poses[:, 2, 0], -1, 1)) < 1e-3]
    assert len(poses) >= 50
    success, q = (np.asarray(a) for a in solver.get_ik(poses[:, :3, 3]))
    print(f"top-down multi-start success on {len(poses)} reachable grasps: {success.mean():.4f}")
    assert success.mean() >= 0.995
    pos, rot = mujoco_site(model, q)
    grasp = pos + rot @ solver.get_tcp()[:3, 3]
    assert np.all(np.linalg.norm(grasp - poses[:, :3, 3], axis=-1)[success] < 1e-3)
    assert np.all(np.arccos(np.clip(-rot[success, 2, 0], -1, 1)) < 0.05)  # jaws point down
