"""The solver interface (seed 002) as client code uses it, end to end: a config stored as a dict (as a
robot config holds it), ``init_solver``, the TCP, limits, weights and iteration parameters set through
the interface's setters, then batched FK -> IK round trips, the Jacobian, the solver as a context
manager, and the differential solver driven by commands. Each call is the seed's documented one; the
per-method behaviour is tested in test_solver_cfg.py, test_solver_surface.py and test_differential.py."""

import numpy as np
import pytest

from so101_mjx.ik import SolverCfg
from so101_mjx.robot.scenes import scenes_dir

pytestmark = pytest.mark.slow  # compile-heavy: run with -m slow (.ci/run does)


def _solver_client(cfg_dict: dict) -> dict:
    """Seed 002, BaseSolver / PytorchSolver: what a robot's control part calls on its solver."""
    cfg = SolverCfg.from_dict(cfg_dict)
    with cfg.init_solver() as solver:
        limits = solver.get_qpos_limits()
        lower, upper = np.asarray(limits["lower_qpos_limits"]), np.asarray(limits["upper_qpos_limits"])
        assert solver.set_qpos_limits(lower, upper) is True
        assert solver.set_qpos_limits(upper, lower) is False  # lower above upper: refused, as the seed says
        assert solver.set_ik_nearest_weight(np.ones(len(lower))) is True
        assert solver.set_ik_nearest_weight([-1.0]) is False
        params = solver.get_iteration_params()
        assert solver.set_iteration_params(**{**params, "max_iterations": 200}) is True
        assert solver.set_iteration_params(**{**params, "max_iterations": 0}) is False
        tcp = solver.get_tcp()
        solver.set_tcp(tcp)
        rng = np.random.default_rng(7)
        qpos = rng.uniform(lower + 0.2, upper - 0.2, (16, len(lower)))
        poses = np.asarray(solver.get_fk(qpos))
        seeds = np.clip(qpos + rng.uniform(-0.3, 0.3, qpos.shape), lower, upper)
        success, solved = solver.get_ik(poses[:, :3, 3], qpos_seed=seeds, num_samples=8)
        return {
            "dof": len(lower), "tcp": tcp, "poses": poses, "success": np.asarray(success),
            "reached": np.asarray(solver.get_fk(solved))[:, :3, 3],
            "jacobian": np.asarray(solver.get_jacobian(qpos[0])), "params": solver.get_iteration_params(),
        }


def test_solver_client_script_runs_unchanged():
    """A URDF-built solver (the shipped so101.urdf) and the default MJCF one answer the client alike."""
    urdf = str(scenes_dir() / "so101.urdf")
    from_urdf = _solver_client({"class_type": "PytorchSolver", "urdf_path": urdf, "is_only_position_constraint": True})
    from_mjcf = _solver_client({"class_type": "PytorchSolver", "is_only_position_constraint": True})
    for out in (from_urdf, from_mjcf):
        assert out["dof"] == 5 and out["params"]["max_iterations"] == 200
        np.testing.assert_array_equal(out["tcp"], np.eye(4))
        assert out["success"].all()
        np.testing.assert_allclose(out["reached"], out["poses"][:, :3, 3], rtol=0, atol=1e-3)
        assert out["jacobian"].shape == (6, 5)
    np.testing.assert_allclose(from_urdf["poses"], from_mjcf["poses"], rtol=0, atol=1e-12)


def test_differential_solver_client_drives_a_target():
    """Seed 002, DifferentialSolver: ``init_solver(num_envs)``, a position command with the orientation
    to keep (``set_command(command, ee_quat=...)``), ``get_ik`` from the measured joints, ``reset(env_ids)``."""
    cfg = {"class_type": "DifferentialSolver", "command_type": "position", "is_only_position_constraint": True}
    solver = SolverCfg.from_dict(cfg).init_solver(num_envs=2)
    lim = solver.get_qpos_limits()
    qpos = np.tile((np.asarray(lim["lower_qpos_limits"]) + np.asarray(lim["upper_qpos_limits"])) / 2, (2, 1))
    target = np.asarray(solver.get_fk(qpos))[:, :3, 3] + np.array([[0.02, 0.0, 0.0], [0.0, 0.0, -0.02]])
    assert solver.action_dim == 3
    assert solver.set_command(target, ee_quat=np.array([0.0, 0.0, 0.0, 1.0])) is True
    success, qpos = solver.get_ik(qpos_seed=qpos)
    assert np.asarray(success).all()
    np.testing.assert_allclose(np.asarray(solver.get_fk(qpos))[:, :3, 3], target, rtol=0, atol=1e-3)
    solver.reset(env_ids=[0])
    np.testing.assert_array_equal(np.asarray(solver.ee_pos_des), [[0.0, 0.0, 0.0], target[1]])
