"""NeuralIKSolver / NeuralIKSolverCfg (seed 002, Neural IK Solver): the checkpoint (actor_mean weights,
obs_normalizer stats), the iterative policy inference, success, multiple samples."""

import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.errors import InputError, MissingFileError
from so101_mjx.ik import SolverCfg, pose as P
from so101_mjx.ik.solvers.neural_policy import NeuralIKSolver, NeuralIKSolverCfg, save_checkpoint

pytestmark = pytest.mark.slow  # compile-heavy: run with -m slow (.ci/run does)

HIDDEN = [16, 16]
OBS = 2 * 5 + 14


def random_policy(rng, last_scale=1.0, last_bias=None):
    sizes = [OBS, *HIDDEN, 5]
    layers = [(rng.normal(0, 1 / np.sqrt(i), (o, i)), rng.normal(0, 0.1, o)) for i, o in zip(sizes[:-1], sizes[1:])]
    layers[-1] = (last_scale * layers[-1][0], layers[-1][1] if last_bias is None else last_bias)
    return layers, rng.normal(0, 0.1, OBS), rng.uniform(0.5, 2.0, OBS)


@pytest.fixture
def checkpoint(tmp_path):
    def write(layers, mean, var, name="policy.npz"):
        path = tmp_path / name
        save_checkpoint(path, layers, mean, var)
        return str(path)
    return write


def test_cfg_defaults():
    """seed 002, NeuralIKSolverCfg: fields and defaults (num_arm_joints: the SO-101's 5, not the Franka's 7)."""
    c = NeuralIKSolverCfg()
    assert (c.class_type, c.checkpoint_path, c.max_steps, c.action_scale, c.obs_dim, c.num_arm_joints, c.hidden_dims,
            c.pos_eps, c.rot_eps, c.num_samples) == ("NeuralIKSolver", "", 30, 0.2, None, 5, [256, 256], 0.01, 0.1, 1)
    assert type(SolverCfg.from_dict({"class_type": "NeuralIKSolver"})) is NeuralIKSolverCfg
    with pytest.raises(InputError, match="action_scale"):
        NeuralIKSolverCfg(action_scale=0)


def test_checkpoint_errors(checkpoint, tmp_path):
    """seed 002, NeuralIKSolver.__init__: KeyError for missing actor_mean / obs_normalizer entries; shapes
    that do not match hidden_dims / obs_dim are refused; obs_dim must be 2 * num_arm_joints + 14."""
    layers, mean, var = random_policy(np.random.default_rng(0))
    good = checkpoint(layers, mean, var)
    with pytest.raises(MissingFileError):
        NeuralIKSolver(NeuralIKSolverCfg(checkpoint_path=str(tmp_path / "none.npz"), hidden_dims=HIDDEN))
    np.savez(tmp_path / "no_agent.npz", **{"obs_normalizer/mean": mean, "obs_normalizer/var": var})
    with pytest.raises(KeyError, match="actor_mean"):
        NeuralIKSolver(NeuralIKSolverCfg(checkpoint_path=str(tmp_path / "no_agent.npz"), hidden_dims=HIDDEN))
    np.savez(tmp_path / "no_norm.npz", **{f"agent/actor_mean.{2 * k}.{n}": a for k, (w, b) in enumerate(layers)
                                          for n, a in (("weight", w), ("bias", b))})
    with pytest.raises(KeyError, match="obs_normalizer"):
        NeuralIKSolver(NeuralIKSolverCfg(checkpoint_path=str(tmp_path / "no_norm.npz"), hidden_dims=HIDDEN))
    with pytest.raises(InputError, match="hidden_dims"):
        NeuralIKSolver(NeuralIKSolverCfg(checkpoint_path=good, hidden_dims=[16]))
    with pytest.raises(InputError, match="actor_mean.0.weight"):
        NeuralIKSolver(NeuralIKSolverCfg(checkpoint_path=good, hidden_dims=[8, 16]))
    with pytest.raises(InputError, match="obs_dim"):
        NeuralIKSolver(NeuralIKSolverCfg(checkpoint_path=good, hidden_dims=HIDDEN, obs_dim=30))


def reference_inference(solver, layers, mean, var, q, target, steps, scale):
    """The seed's loop in NumPy: obs [q, ee pos, ee quat, target pos, target quat, last action],
    normalized, MLP (tanh), clip to [-1, 1], q += scale * action, clip to the limits."""
    lo, hi = solver._lower, solver._upper
    goal = np.concatenate([target[:3, 3], np.asarray(P.matrix_to_quat(target[:3, :3]))])
    last = np.zeros(5)
    for _ in range(steps):
        ee = np.asarray(P.pos_quat(solver.get_fk(q)))
        x = ((np.concatenate([q, ee, goal, last]) - mean) / (np.sqrt(var) + 1e-8)).astype(np.float32)
        for w, b in layers[:-1]:
            x = np.tanh(x @ w.T.astype(np.float32) + b.astype(np.float32))
        last = np.clip(x @ layers[-1][0].T.astype(np.float32) + layers[-1][1].astype(np.float32), -1,
                       1).astype(np.float64)
        q = np.clip(q + scale * last, lo, hi)
    return q


def test_iterative_inference_matches_the_seed_loop(checkpoint):
    """seed 002, NeuralIKSolver: 'runs iterative inference' — max_steps policy steps, each as the reference loop."""
    rng = np.random.default_rng(1)
    layers, mean, var = random_policy(rng)
    solver = NeuralIKSolver(NeuralIKSolverCfg(checkpoint_path=checkpoint(layers, mean, var),
                                              hidden_dims=HIDDEN, max_steps=4, action_scale=0.1))
    seeds = rng.uniform(solver._lower, solver._upper, (3, 5))
    targets = np.asarray(solver.get_fk(rng.uniform(solver._lower, solver._upper, (3, 5))))
    ok, q = solver.get_ik(targets, seeds)
    assert ok.shape == (3,) and q.shape == (3, 1, 5)
    for k in range(3):  # float32 network, as the checkpoint's weights
        np.testing.assert_allclose(q[k, 0], reference_inference(solver, layers, mean, var, seeds[k], targets[k], 4,
                                                                0.1), atol=1e-5)


def test_constant_policy_steps_and_success(checkpoint):
    """seed 002, NeuralIKSolver.get_ik: actions clipped to [-1, 1] move the arm joints by action_scale per
    step (then clipped to the limits); success needs pos_eps and rot_eps; a non-finite target fails."""
    rng = np.random.default_rng(2)
    bias = np.array([3.0, -0.5, 0.0, 0.0, 0.0])  # clipped to 1
    layers, mean, var = random_policy(rng, last_scale=0.0, last_bias=bias)
    solver = NeuralIKSolver(NeuralIKSolverCfg(checkpoint_path=checkpoint(layers, mean, var),
                                              hidden_dims=HIDDEN, max_steps=3))
    seed = solver.get_default_qpos_seed()
    expected = np.clip(seed + 3 * 0.2 * np.clip(bias, -1, 1), solver._lower, solver._upper)
    reached = np.asarray(solver.get_fk(expected))
    missed = reached.copy()
    missed[0, 3] += 0.02  # 2 cm > pos_eps
    nan = np.full((4, 4), np.nan)
    ok, q = solver.get_ik(np.stack([reached, missed, nan]), seed)
    np.testing.assert_allclose(q[:2, 0], [expected, expected], atol=1e-12)
    np.testing.assert_allclose(q[2, 0], seed)
    assert ok.tolist() == [True, False, False]


def test_num_samples_and_all_solutions(checkpoint):
    """seed 002, NeuralIKSolver.get_ik(num_samples=, return_all_solutions=): random starts within the
    limits after the seed; all (B, num_samples, dof), or the success nearest the seed as (B, 1, dof)."""
    rng = np.random.default_rng(3)
    layers, mean, var = random_policy(rng, last_scale=0.0, last_bias=np.zeros(5))  # a policy that holds still
    solver = NeuralIKSolver(NeuralIKSolverCfg(checkpoint_path=checkpoint(layers, mean, var),
                                              hidden_dims=HIDDEN, max_steps=2))
    seed = solver.get_default_qpos_seed()
    target = np.asarray(solver.get_fk(seed))
    ok, every = solver.get_ik(target, seed, num_samples=6, return_all_solutions=True)
    assert ok.shape == (1,) and every.shape == (1, 6, 5) and bool(ok[0])
    np.testing.assert_allclose(every[0, 0], seed)
    assert np.all((np.asarray(every) >= solver._lower) & (np.asarray(every) <= solver._upper))
    assert len({tuple(np.round(np.asarray(r), 6)) for r in every[0]}) == 6
    ok, best = solver.get_ik(jnp.asarray(target), seed, num_samples=6)
    assert best.shape == (1, 1, 5) and np.allclose(best[0, 0], seed)
    assert solver.get_ik_batch(target[None, None], seed)[1].shape == (1, 1, 5)
