"""DifferentialSolver / DifferentialSolverCfg (seed 002, Differential Solver): batched differential IK,
its command buffers (set_command absolute and relative, reset(env_ids), action_dim) and get_ik(jacobian=)."""

import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.errors import InputError
from so101_mjx.ik import SolverCfg, pose as P
from so101_mjx.ik.solvers.differential import (
    DEFAULT_IK_PARAMS,
    DifferentialSolver,
    DifferentialSolverCfg,
    delta_joint_pos,
)
from so101_mjx.robot import rotations as R

pytestmark = pytest.mark.slow  # compile-heavy: run with -m slow (.ci/run does)


@pytest.fixture(scope="module")
def pose_solver():
    return DifferentialSolverCfg().init_solver(num_envs=4)


@pytest.fixture(scope="module")
def problems(pose_solver):
    """Joints (4, 5) within the limits, their TCP poses, and seeds 0.15 rad away."""
    rng = np.random.default_rng(3)
    lo, hi = pose_solver._lower, pose_solver._upper
    q = rng.uniform(lo + 0.3, hi - 0.3, (4, 5))
    return q, np.asarray(pose_solver.get_fk(q)), np.clip(q + rng.choice([-0.15, 0.15], q.shape), lo, hi)


def test_cfg_defaults_and_ik_params_merge():
    """seed 002, DifferentialSolverCfg: class_type, tolerances, command/IK method defaults; ik_params
    over the method's defaults; from_dict finds the config by class_type."""
    cfg = DifferentialSolverCfg()
    assert (cfg.class_type, cfg.pos_eps, cfg.rot_eps, cfg.max_iterations) == ("DifferentialSolver", 5e-4, 5e-4, 1000)
    assert ((cfg.command_type, cfg.use_relative_mode, cfg.ik_method, cfg.is_only_position_constraint)
            == ("pose", False, "pinv", False))
    assert cfg.ik_params == DEFAULT_IK_PARAMS["pinv"]
    assert (DifferentialSolverCfg(ik_method="svd", ik_params={"k_val": 0.5}).ik_params
            == {"k_val": 0.5, "min_singular_value": 1e-5})
    assert type(SolverCfg.from_dict({"class_type": "DifferentialSolver", "ik_method": "dls"})) is DifferentialSolverCfg
    for bad, field in [({"ik_method": "lm"}, "ik_method"), ({"command_type": "twist"}, "command_type"),
                       ({"ik_params": {"lambda": 1}}, "ik_params"), ({"max_iterations": 0}, "max_iterations")]:
        with pytest.raises(InputError, match=field):
            DifferentialSolverCfg(**bad)


@pytest.mark.parametrize("method", ["pinv", "svd", "trans", "dls"])
def test_delta_joint_pos_methods(method):
    """seed 002, DifferentialSolver (Jacobian inverse methods): each method's joint step for a pose error."""
    rng = np.random.default_rng(0)
    jac, err = rng.normal(size=(2, 6, 5)), rng.normal(size=(2, 6))
    params = DEFAULT_IK_PARAMS[method]
    expected = {"pinv": np.linalg.pinv(jac) @ err[..., None],
                "svd": np.linalg.pinv(jac, rcond=1e-5 / 10) @ err[..., None],
                "trans": np.swapaxes(jac, 1, 2) @ err[..., None],
                "dls": np.swapaxes(jac, 1, 2) @ np.linalg.solve(jac @ np.swapaxes(jac, 1, 2) + 0.01**2 * np.eye(6),
                                                                err[..., None])}
    np.testing.assert_allclose(delta_joint_pos(jnp.asarray(jac), jnp.asarray(err), method, params),
                               expected[method][..., 0], rtol=1e-9, atol=1e-12)


def test_pose_ik_reaches_reachable_poses(pose_solver, problems):
    """seed 002, DifferentialSolver.get_ik: pose command, success (num_envs,) and joints (num_envs, dof)."""
    q, target, seed = problems
    ok, sol = pose_solver.get_ik(target, seed)
    assert ok.shape == (4,) and sol.shape == (4, 5) and bool(jnp.all(ok))
    fk = np.asarray(pose_solver.get_fk(sol))
    assert np.all(np.linalg.norm(fk[:, :3, 3] - target[:, :3, 3], axis=-1) < 5e-4)
    assert np.all(np.linalg.norm(fk[:, :3, :3] - target[:, :3, :3], axis=(-2, -1)) < 5e-4)
    np.testing.assert_allclose(pose_solver.ee_pos_des, target[:, :3, 3])  # the target became the desired pose
    assert not pose_solver.supports_continuous_batch_ik
    with pytest.warns(UserWarning, match="return_all_solutions"):
        pose_solver.get_ik(target, seed, return_all_solutions=True)


def test_position_command_one_step_with_given_jacobian(problems):
    """seed 002, DifferentialSolver.get_ik(jacobian=): one differential step (max_iterations=1) with the
    caller's Jacobian equals q + pinv(Jv) (p* - p) at the seed; a wrong Jacobian changes the step."""
    q, target, seed = problems
    solver = DifferentialSolver(DifferentialSolverCfg(command_type="position", max_iterations=1,
                                                      clamp_to_limits=False), num_envs=4)
    jac = np.asarray(solver.get_jacobian(seed))
    ok, sol = solver.get_ik(target[:, :3, 3], seed, jacobian=jac)
    p = np.asarray(solver.get_fk(seed))[:, :3, 3]
    expected = seed + (np.linalg.pinv(jac[:, :3]) @ (target[:, :3, 3] - p)[..., None])[..., 0]
    np.testing.assert_allclose(sol, expected, atol=1e-12)
    _, other = solver.get_ik(target[:, :3, 3], seed, jacobian=2 * jac)
    np.testing.assert_allclose(other - seed, 0.5 * (expected - seed), atol=1e-12)


def test_set_command_absolute_and_relative_then_get_ik(problems):
    """seed 002, DifferentialSolver.set_command: absolute pose (x, y, z, qx, qy, qz, qw) and relative
    pose (dx, dy, dz, rotation vector) commands set ee_pos_des / ee_quat_des; get_ik(None) tracks them."""
    q, target, seed = problems
    solver = DifferentialSolverCfg().init_solver(num_envs=4)
    assert solver.action_dim == 7
    assert solver.set_command(P.pos_quat(jnp.asarray(target)))
    ok, sol = solver.get_ik(None, seed)
    assert bool(jnp.all(ok))
    rel = DifferentialSolverCfg(use_relative_mode=True).init_solver(num_envs=4)
    assert rel.action_dim == 6
    current = P.pos_quat(rel.get_fk(seed))
    delta = np.concatenate([target[:, :3, 3] - np.asarray(current[:, :3]),
                            np.asarray(R.rotation_error(rel.get_fk(seed)[:, :3, :3], target[:, :3, :3]))], -1)
    with pytest.warns(UserWarning, match="ee_pos and ee_quat"):
        assert rel.set_command(delta) is False  # a relative command needs the current pose
    assert rel.set_command(delta, current[:, :3], current[:, 3:])
    np.testing.assert_allclose(P.quat_to_matrix(rel.ee_quat_des), target[:, :3, :3], atol=1e-12)
    np.testing.assert_allclose(rel.ee_pos_des, target[:, :3, 3], atol=1e-12)
    assert bool(jnp.all(rel.get_ik(None, seed)[0]))


def test_position_commands_and_buffer_resize():
    """seed 002, DifferentialSolver.set_command (position): 3-D commands need ee_quat, relative ones ee_pos;
    a command of another batch resizes the buffers."""
    solver = DifferentialSolverCfg(command_type="position", use_relative_mode=True).init_solver(num_envs=2)
    assert solver.action_dim == 3
    quat = jnp.asarray([[0.0, 0.0, 0.0, 1.0]] * 3)
    with pytest.warns(UserWarning, match="ee_pos"):
        assert not solver.set_command(jnp.ones((3, 3)), ee_quat=quat)
    assert solver.set_command(jnp.ones((3, 3)), ee_pos=jnp.full((3, 3), 0.5), ee_quat=quat)
    assert solver.ee_pos_des.shape == (3, 3) and np.allclose(solver.ee_pos_des, 1.5)
    with pytest.raises(InputError, match="command"):
        solver.set_command(jnp.ones((3, 7)))


def test_reset_env_ids():
    """seed 002, DifferentialSolver.reset(env_ids): the chosen rows go back to zero position and
    command and the identity quaternion (xyzw); the others keep theirs; None resets all."""
    solver = DifferentialSolverCfg().init_solver(num_envs=3)
    cmd = jnp.asarray([[0.1, 0.2, 0.3, 0.0, 1.0, 0.0, 0.0]] * 3)
    solver.set_command(cmd)
    solver.reset(jnp.asarray([1]))
    (np.testing.assert_allclose(solver.ee_pos_des[1], 0)
     and np.testing.assert_allclose(solver.ee_quat_des[1], [0, 0, 0, 1]))
    np.testing.assert_allclose(solver.ee_pos_des[0], [0.1, 0.2, 0.3])
    assert np.all(np.asarray(solver._command[1]) == 0) and np.all(np.asarray(solver._command[2]) == np.asarray(cmd[2]))
    solver.reset()
    assert np.all(np.asarray(solver.ee_pos_des) == 0)
    with pytest.raises(InputError, match="env_ids"):
        solver.reset([5])


def test_nonfinite_target_keeps_seed_and_limits_hold(pose_solver, problems):
    """DESIGN (inputs) on seed 002's get_ik: a non-finite target fails and returns its seed; iterates
    stay within the limits (clamp_to_limits)."""
    q, target, seed = problems
    bad = target.copy()
    bad[1, 0, 3] = np.nan
    ok, sol = pose_solver.get_ik(bad, seed)
    assert not bool(ok[1]) and np.allclose(sol[1], seed[1]) and bool(ok[0])
    far = target.copy()
    far[:, :3, 3] += 5.0  # unreachable
    ok, sol = pose_solver.get_ik(far, seed)
    assert (not bool(jnp.any(ok))
            and np.all((np.asarray(sol) >= pose_solver._lower) & (np.asarray(sol) <= pose_solver._upper)))


def test_shared_surface_from_the_config():
    """seed 002, BaseSolver surface on DifferentialSolver(cfg, num_envs, device): the config's TCP, limits,
    weights and joints; FK, Jacobian, default seed, context manager (shared with SO101Solver)."""
    tcp = np.eye(4)
    tcp[:3, 3] = [0.0, 0.0, 0.05]
    cfg = DifferentialSolverCfg(tcp=tcp, user_qpos_limits=[[-1.0] * 5, [1.0] * 5], ik_nearest_weight=[1, 2, 3, 4, 5])
    with DifferentialSolver(cfg, num_envs=2, device="cpu") as solver:
        assert solver.num_envs == 2 and solver.device.platform == "cpu" and solver.joint_names[0] == "shoulder_pan"
        np.testing.assert_allclose(solver.get_tcp(), tcp)
        assert max(solver.get_qpos_limits()["upper_qpos_limits"]) <= 1.0
        np.testing.assert_allclose(solver.get_ik_nearest_weight(), [1, 2, 3, 4, 5])
        q = np.zeros(5)
        assert solver.get_fk(q).shape == (4, 4) and solver.get_jacobian(q).shape == (6, 5)
        np.testing.assert_allclose(solver.get_fk_batch(np.zeros((2, 3, 5))).shape, (2, 3, 4, 4))
    with pytest.raises(InputError, match="cfg"):
        DifferentialSolver(SolverCfg())
