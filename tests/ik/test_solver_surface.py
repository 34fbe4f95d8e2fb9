"""The solver interface's shared surface on the SO-101 solvers (seed 002, BaseSolver / PytorchSolver):
batch FK/IK, get_all_fk, prepare_buffers, iteration parameters, damp floor, dt, both constraint modes,
the continuous-IK capability and its check, the weights by joint_ids, the context manager."""

import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.errors import InputError
from so101_mjx.ik import PytorchSolver, PytorchSolverCfg, SO101AnalyticSolver, compute_batch_ik
from so101_mjx.ik.solvers.analytic_solver import _pitch_of as pitch_of
from so101_mjx.ik.solvers.solver import DAMP_FLOOR

pytestmark = pytest.mark.slow  # compile-heavy: run with -m slow (.ci/run does)


@pytest.fixture(scope="module")
def solver():
    return PytorchSolver()


@pytest.fixture(scope="module")
def goals(solver):
    lim = solver.get_qpos_limits()
    q = np.random.default_rng(3).uniform(lim["lower_qpos_limits"], lim["upper_qpos_limits"], (2, 3, 5))
    return q, np.asarray(solver.get_fk(q))


def test_batch_fk_ik_keep_leading_axes(solver, goals):
    """Seed 002, get_fk_batch / get_ik_batch: (..., dof) -> (..., 4, 4); (..., 4, 4) -> success (...), joints (...,
    dof)."""
    q, poses = goals
    np.testing.assert_array_equal(np.asarray(solver.get_fk_batch(q)), poses)
    ok, sol = solver.get_ik_batch(poses, qpos_seed=q + 0.05)
    assert ok.shape == (2, 3) and sol.shape == (2, 3, 5) and bool(np.all(ok))
    np.testing.assert_allclose(np.asarray(solver.get_fk(sol))[..., :3, 3], poses[..., :3, 3], atol=1e-3)
    with pytest.raises(InputError, match=r"target_xpos must have shape \(\.\.\., 4, 4\)"):
        solver.get_ik_batch(poses[..., :3, 3])


def test_get_all_fk_chain(solver, goals):
    """Seed 002, PytorchSolver.get_all_fk: root-to-end link poses; the last is the end link, the TCP's frame."""
    q, poses = goals
    links = solver.get_all_fk(q)
    assert len(links) == 7 and all(x.shape == (2, 3, 4, 4) for x in links)
    # base at the origin
    np.testing.assert_allclose(np.asarray(links[0]), np.broadcast_to(np.eye(4), (2, 3, 4, 4)), atol=0)
    np.testing.assert_allclose(np.asarray(links[-1]), poses, rtol=0, atol=1e-15)  # identity TCP


def test_prepare_buffers(solver):
    """Seed 002, prepare_buffers(max_batch): an int >= 1, kept; nothing else changes."""
    assert solver.prepare_buffers(64) is None and solver.max_batch == 64
    with pytest.raises(InputError, match="max_batch"):
        solver.prepare_buffers(0)


def test_iteration_params_validated_returning_bool():
    """Seed 002, get/set_iteration_params: the seed's keys and defaults; invalid input returns False, unchanged."""
    solver = PytorchSolver()
    assert solver.get_iteration_params() == {"pos_eps": 1e-3, "rot_eps": 0.05, "max_iterations": 30, "dt": 1.0,
                                             "damp": 1e-3, "num_samples": 16, "is_only_position_constraint": True}
    before = solver.get_iteration_params()
    for bad in ({"pos_eps": 0}, {"rot_eps": -1}, {"max_iterations": 0}, {"dt": 0}, {"damp": -1e-9},
                {"num_samples": 0}, {"is_only_position_constraint": "yes"}, {"max_iterations": 2.5}):
        with pytest.warns(UserWarning, match=next(iter(bad))):
            assert solver.set_iteration_params(**bad) is False
        assert solver.get_iteration_params() == before
    assert solver.set_iteration_params() is True  # the seed's defaults
    assert solver.get_iteration_params() == {"pos_eps": 5e-4, "rot_eps": 5e-4, "max_iterations": 1000, "dt": 0.1,
                                             "damp": 1e-6, "num_samples": 30, "is_only_position_constraint": False}
    assert solver.set_iteration_params(damp=0.0, max_iterations=40, dt=1.0, is_only_position_constraint=True)
    # damp = 0 keeps the floor
    assert solver.get_iteration_params()["damp"] == 0.0 and solver._cfg.damping == DAMP_FLOOR


def test_damp_zero_and_dt(goals):
    """Seed 002, damp (0 keeps the 1e-9 floor) and dt (step length): damp=0 solves as damping 1e-9; dt < 1
    takes shorter steps (further from the target after one iteration), dt = 1 is the full step."""
    q, poses = goals
    seed = q + 0.1
    zero = PytorchSolver(PytorchSolverCfg(damp=0.0, enable_seed_selection=False, num_samples=1))
    floor = PytorchSolver(PytorchSolverCfg(damp=1e-9, enable_seed_selection=False, num_samples=1))
    np.testing.assert_array_equal(np.asarray(zero.get_ik(poses, seed)[1]), np.asarray(floor.get_ik(poses, seed)[1]))
    err = {}
    for dt in (1.0, 0.3):
        one = PytorchSolver(PytorchSolverCfg(dt=dt, max_iterations=1, enable_seed_selection=False, num_samples=1))
        sol = one.get_ik(poses, seed, return_all_solutions=True)[1][..., 0, :]
        err[dt] = np.linalg.norm(np.asarray(one.get_fk(sol))[..., :3, 3] - poses[..., :3, 3], axis=-1)
    assert np.all(err[0.3] > err[1.0])


def test_position_only_and_approach_modes(goals):
    """Seed 002, is_only_position_constraint: True ignores the target's rotation; False also constrains the
    TCP x axis to the pose's (the 5 DoF leave the roll about it free)."""
    q, poses = goals
    pos_only = PytorchSolver()
    assert pos_only.is_only_position_constraint
    flipped = poses.copy()
    flipped[..., :3, :3] = np.eye(3)
    np.testing.assert_array_equal(np.asarray(pos_only.get_ik(flipped)[1]), np.asarray(pos_only.get_ik(poses)[1]))
    full = PytorchSolver(PytorchSolverCfg(is_only_position_constraint=False, max_iterations=60))
    assert not full.is_only_position_constraint
    ok, sol = (np.asarray(a) for a in full.get_ik(poses))
    assert ok.mean() >= 5 / 6
    fk = np.asarray(full.get_fk(sol))
    cos = np.sum(fk[..., :3, 0] * poses[..., :3, 0], -1)
    assert np.all(np.arccos(np.clip(cos[ok], -1, 1)) < 0.05)
    assert not np.all(np.asarray(full.get_ik(flipped)[0]))  # the rotation now matters
    assert pos_only.set_iteration_params(pos_eps=1e-3, rot_eps=0.05, max_iterations=30, dt=1.0, damp=1e-3,
                                         num_samples=16)
    assert not pos_only.is_only_position_constraint  # the runtime switch


def test_continuous_capability_checked_first(goals):
    """Seed 002, supports_continuous_batch_ik on every solver and compute_batch_ik(..., continuous=True) checking it
    before solving; the analytic solver supports it and returns (B, N) validity and (B, N, DOF) joints."""
    q, poses = goals
    lm = PytorchSolver()
    assert lm.supports_continuous_batch_ik is False
    with pytest.raises(InputError, match="does not support continuous"):
        compute_batch_ik(lm, np.full((2, 3, 4, 4), np.nan), continuous=True)
    ok, sol = lm.compute_batch_ik(poses, q[:, 0])
    assert ok.shape == (2, 3) and sol.shape == (2, 3, 5)
    analytic = SO101AnalyticSolver()
    assert analytic.supports_continuous_batch_ik is True
    path = np.asarray(analytic.get_fk(np.linspace(q[0, 0], q[0, 0] + 0.2, 4)))[None]
    ok, sol = analytic.compute_batch_ik(path, q[:1, 0], continuous=True)
    assert ok.shape == (1, 4) and sol.shape == (1, 4, 5) and bool(np.all(ok))
    assert np.max(np.abs(np.diff(np.asarray(sol)[0], axis=0))) < 0.2


def test_nearest_weight_by_joint_ids(solver):
    """Seed 002, set/get_ik_nearest_weight with joint_ids; bad ids or weights return False."""
    s = PytorchSolver()
    assert s.set_ik_nearest_weight([2.0, 3.0], joint_ids=[1, 4]) is True
    np.testing.assert_array_equal(s.get_ik_nearest_weight(), [1, 2, 1, 1, 3])
    with pytest.warns(UserWarning, match="joint_ids"):
        assert s.set_ik_nearest_weight([1.0], joint_ids=[7]) is False
    with pytest.warns(UserWarning, match="ik_weight"):
        assert s.set_ik_nearest_weight([1.0, 2.0], joint_ids=[0]) is False
    np.testing.assert_array_equal(s.get_ik_nearest_weight(), [1, 2, 1, 1, 3])


def test_context_manager():
    """Solvers are context managers returning themselves (the interface's with-statement use)."""
    with PytorchSolver() as s:
        assert isinstance(s, PytorchSolver) and s.get_fk(jnp.zeros(5)).shape == (4, 4)


def test_analytic_manipulability_selection(goals):
    """Seed 002, ik_solution_selection="manipulability" on the analytic solver (it was silently ignored): the
    valid branch with the largest Yoshikawa score is returned, and differs from the nearest somewhere."""
    q, _ = goals
    near, manip = SO101AnalyticSolver(), SO101AnalyticSolver(selection="manipulability")
    fk = np.asarray(near.get_fk(np.random.default_rng(5).uniform(-1.2, 1.2, (300, 5))))
    targets, pitch = fk[:, :3, 3], np.asarray(pitch_of(fk[:, :3, 0]))  # reachable: each at its own pitch
    valid, cand = (np.asarray(a) for a in manip.get_ik(targets, return_all_solutions=True, pitch=pitch))
    ok, best = (np.asarray(a) for a in manip.get_ik(targets, pitch=pitch))
    assert ok.mean() > 0.8
    jv = np.asarray(manip.get_jacobian(np.where(valid[..., None], cand, 0), jac_type="trans"))
    score = np.where(valid, np.sqrt(np.maximum(np.linalg.det(jv @ np.swapaxes(jv, -1, -2)), 0)), -np.inf)
    np.testing.assert_array_equal(np.argmax(score, -1)[ok], 0)  # all-solutions ordering: best first
    np.testing.assert_allclose(best[ok], cand[ok, 0])
    assert np.any(np.abs(best[ok] - np.asarray(near.get_ik(targets, pitch=pitch)[1])[ok]).max(-1) > 1e-3)
