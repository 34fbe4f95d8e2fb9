"""PinkSolver / PinkSolverCfg / NullSpacePostureTask (seed 002, Pink Solver): Pink QP steps with adaptive
damping, backtracking, stagnation, the joint-limit safety break, null-space posture targets, and limits."""

import sys

import numpy as np
import pytest

from so101_mjx.errors import InputError
from so101_mjx.ik import SolverCfg
from so101_mjx.ik.solvers.pink_solver import PinkSolver, PinkSolverCfg

pink = pytest.importorskip("pink")


@pytest.fixture(scope="module")
def problems():
    solver = PinkSolver(PinkSolverCfg(show_ik_warnings=False))
    rng = np.random.default_rng(11)
    q = rng.uniform(solver._lower + 0.2, solver._upper - 0.2, (5, 5))
    return solver, q, np.asarray(solver.get_fk(q))


def test_cfg_defaults():
    """seed 002, PinkSolverCfg: the fields and their defaults (solver_type: the pink extra's daqp)."""
    c = PinkSolverCfg()
    assert (c.class_type, c.pos_eps, c.rot_eps, c.max_iterations, c.dt, c.damp, c.is_only_position_constraint) == \
        ("PinkSolver", 5e-4, 5e-4, 1000, 0.1, 1e-6, False)
    assert (c.show_ik_warnings, c.fail_on_joint_limit_violation, c.solver_type, c.stagnation_tolerance,
            c.stagnation_iterations, c.max_backtracks, c.damping_growth, c.damping_decay, c.max_damping) == \
        (True, True, "daqp", 1e-10, 8, 4, 10.0, 0.5, 1e6)
    assert c.variable_input_tasks is None and c.fixed_input_tasks is None and c.mesh_path is None
    assert type(SolverCfg.from_dict({"class_type": "PinkSolver"})) is PinkSolverCfg
    for bad, field in [({"damping_growth": 1.0}, "damping_growth"), ({"damping_decay": 0.0}, "damping_decay"),
                       ({"max_damping": 1e-9}, "max_damping"), ({"max_backtracks": -1}, "max_backtracks")]:
        with pytest.raises(InputError, match=field):
            PinkSolverCfg(**bad)
    with pytest.raises(InputError, match="solver_type"):
        PinkSolver(PinkSolverCfg(solver_type="no_such_qp"))


def test_pose_ik_shapes_and_accuracy(problems):
    """seed 002, PinkSolver.get_ik: success (N,), joints (N, 1, dof); one (4, 4) target is N = 1."""
    solver, q, target = problems
    ok, sol = solver.get_ik(target, q + 0.1)
    assert ok.shape == (5,) and sol.shape == (5, 1, 5) and bool(ok.all())
    fk = np.asarray(solver.get_fk(sol[:, 0]))
    assert np.abs(fk[:, :3, 3] - target[:, :3, 3]).max() < 5e-4
    ok1, sol1 = solver.get_ik(target[0], q[0] + 0.1)
    assert ok1.shape == (1,) and sol1.shape == (1, 1, 5)
    ok_b, sol_b = solver.get_ik_batch(target[:2], q[:2] + 0.1)  # seed 002, get_ik_batch: no candidate axis
    assert ok_b.shape == (2,) and sol_b.shape == (2, 5) and np.allclose(sol_b, sol[:2, 0])
    assert not solver.supports_continuous_batch_ik


def test_failure_returns_seed_and_stagnation_stops_early(problems, monkeypatch, caplog):
    """seed 002, PinkSolver.get_ik: a target that does not converge returns its seed (logged with
    show_ik_warnings); stagnation_iterations stagnant iterations end the solve long before max_iterations."""
    solver = PinkSolver(PinkSolverCfg(stagnation_iterations=3))
    calls = []
    real = pink.solve_ik
    monkeypatch.setattr(solver.pink, "solve_ik", lambda *a, **k: calls.append(k) or real(*a, **k))
    far = np.eye(4)
    far[:3, 3] = [2.0, 0.0, 0.3]
    seed = np.zeros(5)
    with caplog.at_level("WARNING"):
        ok, sol = solver.get_ik(far, seed)
    assert not bool(ok[0]) and np.allclose(sol[0, 0], seed)
    assert "did not converge" in caplog.text
    assert 0 < len(calls) < 200  # stagnation ended it (1000 iterations otherwise)
    assert all(k["safety_break"] is True and k["solver"] == "daqp" for k in calls)  # fail_on_joint_limit_violation


def test_adaptive_damping_and_backtracking(problems, monkeypatch):
    """seed 002, PinkSolverCfg.damping_growth / max_damping / max_backtracks: a step that never improves is
    retried max_backtracks times with growing damping (capped), then rejected with the joints restored."""
    solver = PinkSolver(PinkSolverCfg(max_backtracks=3, damping_growth=10.0, max_damping=1.0, show_ik_warnings=False))
    _, q, target = problems
    solver._target_task.set_target(solver.pin.SE3(target[0]))
    solver._set_q(q[0][solver._to_pin])
    dampings = []
    monkeypatch.setattr(solver.pink, "solve_ik", lambda *a, damping, **k: dampings.append(damping) or np.full(5, 5.0))
    base = np.asarray(solver.pink_cfg.q).copy()
    primary, secondary, _, _ = solver._metrics()
    accepted, gain, damping = solver._try_step(base, primary - 10.0, secondary, 1e-3)  # nothing can beat primary - 10
    assert not accepted and gain == 0.0
    np.testing.assert_allclose(dampings, [1e-3, 1e-2, 1e-1, 1.0])
    assert damping == 1.0 and np.array_equal(np.asarray(solver.pink_cfg.q), base)
    accepted, gain, damping = solver._try_step(base, primary + 1e9, secondary, 0.5)  # any step improves
    assert accepted and damping == 0.25  # damping_decay after an accepted step


def test_null_space_posture_targets(problems):
    """seed 002, PinkSolver.update_null_space_joint_targets / NullSpacePostureTask: with a position-only
    frame task, the posture pulls the free joints towards its target without moving the TCP off target."""
    from so101_mjx.ik.solvers.pink_tasks import NullSpacePostureTask

    _, q, target = problems
    posture = NullSpacePostureTask(cost=1.0, controlled_frames=["gripperframe"], position_only=True)
    cfg = PinkSolverCfg(is_only_position_constraint=True, fixed_input_tasks=[posture], show_ik_warnings=False)
    with_posture, plain = (PinkSolver(cfg),
                           PinkSolver(PinkSolverCfg(is_only_position_constraint=True, show_ik_warnings=False)))
    goal_posture = q[0].copy()
    with_posture.update_null_space_joint_targets(goal_posture)
    np.testing.assert_allclose(posture.target_q, goal_posture[with_posture._to_pin])
    seed = np.clip(q[0] + np.array([0.2, -0.2, 0.2, 0.0, 1.0]), with_posture._lower, with_posture._upper)
    ok_a, a = with_posture.get_ik(target[0], seed)
    ok_b, b = plain.get_ik(target[0], seed)
    assert bool(ok_a[0]) and bool(ok_b[0])
    assert np.linalg.norm(np.asarray(a[0, 0]) - goal_posture) < np.linalg.norm(np.asarray(b[0, 0]) - goal_posture) - 0.1
    fk = np.asarray(with_posture.get_fk(a[:, 0]))
    assert np.linalg.norm(fk[0, :3, 3] - target[0, :3, 3]) < 5e-4
    # the projector: zero under the full 6-row frame Jacobian of 5 DoF, rank 2 under its position rows
    full = NullSpacePostureTask(cost=1.0, controlled_frames=["gripperframe"])
    assert np.abs(full.compute_jacobian(with_posture.pink_cfg)).max() < 1e-9
    assert np.linalg.matrix_rank(posture.compute_jacobian(with_posture.pink_cfg), tol=1e-9) == 2
    with pytest.raises(InputError, match="current_qpos"):
        with_posture.update_null_space_joint_targets(np.zeros(3))


def test_limits_sync_and_errors():
    """seed 002, PinkSolver.set_qpos_limits / update_with_robot_limit: limits reach Pink's model; invalid
    ones raise (ValueError) as the seed's Pink solver does; reorder_array."""
    s = PinkSolver(PinkSolverCfg())
    lo, hi = s._lower.copy(), s._upper.copy()
    assert s.set_qpos_limits(lo + 0.1, hi - 0.1)
    np.testing.assert_allclose(s.pin_model.lowerPositionLimit, (lo + 0.1)[s._to_pin])
    s.update_with_robot_limit(np.stack([lo + 0.2, hi - 0.2], 1))
    np.testing.assert_allclose(s.pin_model.upperPositionLimit, (hi - 0.2)[s._to_pin])
    with pytest.raises(ValueError, match="qpos limits"):
        s.set_qpos_limits(hi, lo)
    with pytest.raises(ValueError, match="qpos limits"):
        s.set_qpos_limits(np.full(5, -np.inf), hi)
    np.testing.assert_array_equal(PinkSolver.reorder_array([10, 20, 30], [2, 0, 1]), [30, 10, 20])
    with pytest.raises(InputError, match="target_xpos"):
        s.get_ik(np.full((4, 4), np.nan))


def test_missing_pink_names_the_extra(monkeypatch):
    """The ``pink`` extra: without pin-pink, building the solver is an ImportError naming it."""
    monkeypatch.setitem(sys.modules, "pink", None)
    with pytest.raises(ImportError, match=r"so101-mjx\[pink\]"):
        PinkSolver(PinkSolverCfg())
