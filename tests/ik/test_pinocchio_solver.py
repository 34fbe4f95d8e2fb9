"""PinocchioSolver / PinocchioSolverCfg (seed 002, PinocchioSolver): the Pinocchio model of the chain,
damped-least-squares IK, qpos_to_limits, iteration parameters, and the optional ``pinocchio`` extra."""

import sys

import numpy as np
import pytest

from so101_mjx.errors import InputError
from so101_mjx.ik import SolverCfg
from so101_mjx.ik.solvers.pinocchio_solver import PinocchioSolver, PinocchioSolverCfg

pytest.importorskip("pinocchio")


@pytest.fixture(scope="module")
def solver():
    return PinocchioSolverCfg().init_solver()


@pytest.fixture(scope="module")
def problems(solver):
    rng = np.random.default_rng(5)
    q = rng.uniform(solver._lower, solver._upper, (6, 5))
    return q, np.asarray(solver.get_fk(q))


def test_cfg_defaults():
    """seed 002, PinocchioSolverCfg / set_iteration_params defaults; from_dict by class_type."""
    cfg = PinocchioSolverCfg()
    assert (cfg.class_type, cfg.mesh_path, cfg.pos_eps, cfg.rot_eps, cfg.max_iterations, cfg.dt, cfg.damp,
            cfg.is_only_position_constraint, cfg.num_samples) == ("PinocchioSolver", None, 5e-4, 5e-4, 1000, 0.1,
                                                                  1e-6, False, 30)
    assert type(SolverCfg.from_dict({"class_type": "PinocchioSolver"})) is PinocchioSolverCfg
    with pytest.raises(InputError, match="dt"):
        PinocchioSolverCfg(dt=0)


def test_pinocchio_fk_equals_the_chain_fk(solver, problems):
    """seed 002, PinocchioSolver: the Pinocchio model built from the MJCF gives the project's FK (<= 1e-9)."""
    q, target = problems
    for x, t in zip(q, target):
        np.testing.assert_allclose(solver._end_pose(x).homogeneous, t, rtol=0, atol=1e-9)


def test_pose_ik_and_shapes(solver, problems):
    """seed 002, PinocchioSolver.get_ik: one (4, 4) target gives success (1,) and qpos (1, dof); N targets (N,), (N,
    dof)."""
    q, target = problems
    ok, sol = solver.get_ik(target[0], qpos_seed=q[0] + 0.1)
    assert ok.shape == (1,) and sol.shape == (1, 5) and bool(ok[0])
    ok, sol = solver.get_ik(target, qpos_seed=q + 0.1)
    assert ok.shape == (6,) and sol.shape == (6, 5) and bool(ok.all())
    err = np.asarray(solver.get_fk(sol)) - target
    assert np.abs(err[:, :3, 3]).max() < 5e-4 and np.abs(err[:, :3, :3]).max() < 2e-3
    # seed 002, get_ik_batch
    ok_b, sol_b = solver.get_ik_batch(target[:2].reshape(1, 2, 4, 4), (q[:2] + 0.1).reshape(1, 2, 5))
    assert ok_b.shape == (1, 2) and sol_b.shape == (1, 2, 5) and np.allclose(sol_b[0], sol[:2], atol=1e-9)
    assert solver.get_ik_batch(target[0], q[0] + 0.1)[0].shape == ()


def test_position_only_ik_ignores_rotation(problems):
    """seed 002, PinocchioSolverCfg.is_only_position_constraint: only the TCP position is solved."""
    q, target = problems
    solver = PinocchioSolver(PinocchioSolverCfg(is_only_position_constraint=True, num_samples=4))
    twisted = target.copy()
    twisted[:, :3, :3] = np.eye(3)  # unreachable orientations: ignored
    ok, sol = solver.get_ik(twisted)
    fk = np.asarray(solver.get_fk(sol))
    assert np.mean(ok) >= 5 / 6
    assert np.all(np.linalg.norm(fk[:, :3, 3] - target[:, :3, 3], axis=-1)[np.asarray(ok)] < 5e-4)


def test_failure_returns_the_seed(solver):
    """seed 002, PinocchioSolver.get_ik: 'If no solution, returns the seed joint positions'."""
    far = np.eye(4)
    far[:3, 3] = [3.0, 0, 0]
    seed = solver.get_default_qpos_seed()
    fast = PinocchioSolver(PinocchioSolverCfg(max_iterations=20, num_samples=2))
    ok, sol = fast.get_ik(far, qpos_seed=seed)
    assert not bool(ok[0]) and np.allclose(sol, seed)


def test_qpos_to_limits(solver):
    """seed 002, PinocchioSolver.qpos_to_limits: whole turns into the limits, nearest the seed; [] when impossible."""
    lo, hi = solver._lower, solver._upper
    inside = 0.5 * (lo + hi)
    wrapped = inside + 2 * np.pi * np.array([1, 0, -1, 0, 0])
    np.testing.assert_allclose(solver.qpos_to_limits(wrapped, inside), inside, atol=1e-12)
    q = inside.copy()
    q[0] = hi[0] + 0.5  # no turn of it lies within the pan's range
    assert len(solver.qpos_to_limits(q, inside)) == 0
    roll = PinocchioSolver(PinocchioSolverCfg(user_qpos_limits=[list(lo[:4]) + [-7.0], list(hi[:4]) + [7.0]]))
    roll.set_qpos_limits(np.r_[lo[:4], -7.0], np.r_[hi[:4], 7.0])  # a roll range wider than 2π: two turns fit
    x = inside.copy()
    x[4] = 1.0
    seed = x.copy()
    seed[4] = 1.0 - 2 * np.pi + 0.1
    assert np.isclose(roll.qpos_to_limits(x, seed)[4], 1.0 - 2 * np.pi)


def test_iteration_params_validated(solver):
    """seed 002, PinocchioSolver.set_iteration_params / get_iteration_params: True and set, or False
    (nothing changed) for an invalid value; damp = 0 is allowed."""
    s = PinocchioSolver(PinocchioSolverCfg())
    assert s.set_iteration_params(pos_eps=1e-3, max_iterations=50, damp=0.0)
    assert s.get_iteration_params() == {"pos_eps": 1e-3, "rot_eps": 5e-4, "max_iterations": 50, "dt": 0.1, "damp": 0.0,
                                        "num_samples": 30, "is_only_position_constraint": False}
    with pytest.warns(UserWarning):
        assert s.set_iteration_params(dt=-1.0) is False
    assert s.get_iteration_params()["max_iterations"] == 50


def test_missing_pinocchio_names_the_extra(monkeypatch):
    """The ``pinocchio`` extra: without pin, building the solver is an ImportError naming it."""
    monkeypatch.setitem(sys.modules, "pinocchio", None)  # what an absent package looks like to importlib
    with pytest.raises(ImportError, match=r"so101-mjx\[pinocchio\]"):
        PinocchioSolver(PinocchioSolverCfg())


def test_model_from_the_shipped_urdf(problems):
    """seed 002, SolverCfg.urdf_path on PinocchioSolver: the SO-101 URDF gives the same Pinocchio FK (<= 1e-9)
    as the MJCF chain, and solves the same targets."""
    import pathlib

    urdf = pathlib.Path(__file__).resolve().parents[2] / "scenes" / "so101.urdf"
    if not urdf.is_file():
        pytest.skip("no SO-101 URDF in scenes/")
    q, target = problems
    solver = PinocchioSolver(PinocchioSolverCfg(urdf_path=str(urdf)))
    for x, t in zip(q, target):
        np.testing.assert_allclose(solver._end_pose(x).homogeneous, t, rtol=0, atol=1e-9)
    assert bool(solver.get_ik(target, qpos_seed=q + 0.1)[0].all())
