"""Library inputs of the IK: a saved seed network is checked on load; a NaN seed or NaN candidates
never come back as joints reported valid."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from so101_mjx.errors import InputError
from so101_mjx.ik import iterative as ik
from so101_mjx.ik.solvers import learned_seeds as learned
from so101_mjx.robot.kinematics import Kinematics
from so101_mjx.robot.scenes import ARM_JOINTS, load_model


@pytest.fixture(scope="module")
def seednet(tmp_path_factory) -> Path:
    model = load_model("so101")
    lo, hi = ik.joint_limits(model)
    path = tmp_path_factory.mktemp("seednet") / "net.npz"
    learned.save(learned.init(Kinematics.from_model(model, ARM_JOINTS), lo, hi, hidden=(8,), heads=2), path)
    return path


@pytest.mark.parametrize(("key", "change", "message"), [
    ("params/params/Dense_0/kernel", lambda a: a * np.nan, "params/params/Dense_0/kernel holds"),
    ("scale", lambda a: a + 1j, "scale must be a float array, got complex"),
    ("hidden", lambda a: np.asarray(["8"]), "hidden must be an integer array"),
    ("center", lambda a: a[:2], "center must have shape (3,)"),
])
def test_a_poisoned_seednet_is_refused(seednet, tmp_path, key, change, message):
    with np.load(seednet) as z:
        arrays = dict(z)
    arrays[key] = change(arrays[key])
    np.savez(tmp_path / "net.npz", **arrays)
    with pytest.raises(InputError, match="net.npz") as err:
        learned.load(tmp_path / "net.npz")
    assert message in str(err.value) and len(str(err.value).splitlines()) == 1


def test_a_saved_seednet_loads(seednet):
    net = learned.load(seednet)
    assert net.hidden == (8,) and net.heads == 2


@pytest.fixture(scope="module")
def reachable() -> np.ndarray:
    """TCP targets (8, 3) the analytic solver reaches top-down."""
    from so101_mjx.ik.solvers.analytic_solver import SO101AnalyticSolver

    xs, ys, zs = np.meshgrid(np.linspace(0.15, 0.3, 4), np.linspace(-0.1, 0.1, 3), np.linspace(0.05, 0.15, 3))
    targets = np.stack([xs.ravel(), ys.ravel(), zs.ravel()], -1)
    ok, _ = SO101AnalyticSolver().get_ik(targets)
    assert np.sum(ok) >= 8
    return targets[np.asarray(ok)][:8]


@pytest.mark.slow
def test_the_analytic_ik_falls_back_to_the_default_seed_for_a_nan_seed(reachable):
    from so101_mjx.ik.solvers.analytic_solver import SO101AnalyticSolver

    solver = SO101AnalyticSolver()
    seeds = np.tile(solver.get_default_qpos_seed(), (len(reachable), 1))
    seeds[0] = np.nan
    seeds[1, 4] = np.inf
    for all_solutions in (False, True):
        ok, q = (np.asarray(a) for a in solver.get_ik(reachable, seeds, return_all_solutions=all_solutions))
        want_ok, want_q = (np.asarray(a) for a in solver.get_ik(reachable, solver.get_default_qpos_seed(),
                                                                return_all_solutions=all_solutions))
        assert np.all(np.isfinite(q))
        np.testing.assert_array_equal(ok, want_ok)
        np.testing.assert_array_equal(q, want_q)
    import jax

    ok, q = jax.jit(solver.get_ik)(reachable, seeds)  # traced seeds too
    assert np.all(np.isfinite(np.asarray(q))) and np.all(np.asarray(ok))


def test_the_learned_ik_gives_finite_joints_for_a_nan_seed(seednet, reachable):
    solver = learned.SO101LearnedSolver(learned.load(seednet))
    ok, q = solver.get_ik(reachable, np.full(5, np.nan))
    assert np.all(np.isfinite(np.asarray(q)))


def test_continuous_path_never_reports_nan_joints_as_valid():
    from so101_mjx.ik.solvers.analytic_solver import SO101AnalyticSolver

    solver = SO101AnalyticSolver()
    candidates = np.zeros((2, 3, 2, 5))
    candidates[:, :, 1] = 0.01
    candidates[0, 1, :, 2] = np.nan  # waypoint 1 of path 0: both candidates NaN
    candidates[1, 2, 0] = np.nan  # waypoint 2 of path 1: the first candidate NaN
    ok, joints, _ = (np.asarray(a)
                     for a in solver.select_continuous_ik_path(np.ones((2, 3, 2), bool), candidates, np.zeros((2, 5))))
    np.testing.assert_array_equal(ok, [[True, False, True], [True, True, True]])
    assert np.all(np.isfinite(joints))
    np.testing.assert_array_equal(joints[1, 2], np.full(5, 0.01))
    with pytest.raises(InputError, match="float candidates"):
        solver.select_continuous_ik_path(np.ones((2, 3, 2), bool), candidates + 0j, np.zeros((2, 5)))
