"""Seed samplers (seed 002, Seed Selection: QposSeedSelSampler): shapes, target-major order, caller seed,
database build and rebuild, shortfall filled uniformly, re-ranking by predicted correction."""

import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.errors import InputError
from so101_mjx.ik import PytorchSolver, QposSeedSampler, QposSeedSelSampler
from so101_mjx.ik.solvers.seed_sampler import correction

pytestmark = pytest.mark.slow  # compile-heavy: run with -m slow (.ci/run does)


@pytest.fixture(scope="module")
def arm():
    solver = PytorchSolver()
    lim = solver.get_qpos_limits()
    return solver, np.array(lim["lower_qpos_limits"]), np.array(lim["upper_qpos_limits"])


def _sampler(solver, **kw):
    return QposSeedSelSampler(kw.pop("num_samples", 5), 5, "cpu", fk_fn=solver.get_fk, **kw)


def test_shape_order_caller_seed_and_lazy_database(arm):
    """sample(): (B·num_samples, dof), target-major, slot 0 the caller seed; database_size 0 before the first
    target-aware call, db_size after; rebuilt when the limits change."""
    solver, lo, hi = arm
    s = _sampler(solver, db_size=500)
    seeds = np.tile(solver.get_default_qpos_seed(), (3, 1)) + np.arange(3)[:, None] * 0.01
    assert s.database_size == 0
    plain = np.asarray(s.sample(seeds, lo, hi, 3))  # no targets: uniform, as QposSeedSampler
    assert plain.shape == (15, 5) and s.database_size == 0
    q_goal = np.random.default_rng(1).uniform(lo, hi, (3, 5))
    out = np.asarray(s.sample(seeds, lo, hi, 3, np.asarray(solver.get_fk(q_goal)))).reshape(3, 5, 5)
    assert s.database_size == 500
    np.testing.assert_array_equal(out[:, 0], seeds)
    assert np.all((out >= lo) & (out <= hi))
    # The retrieved entries are near each target in task space: nearer than uniform draws on average.
    d_ret = np.linalg.norm(np.asarray(solver.get_fk(out[:, 1:]))[..., :3, 3]
                           - np.asarray(solver.get_fk(q_goal))[:, None, :3, 3], axis=-1)
    d_uni = np.linalg.norm(np.asarray(solver.get_fk(plain.reshape(3, 5, 5)[:, 1:]))[..., :3, 3]
                           - np.asarray(solver.get_fk(q_goal))[:, None, :3, 3], axis=-1)
    assert d_ret.mean() < 0.5 * d_uni.mean()
    tight = (lo * 0.5, hi * 0.5)
    out = np.asarray(s.sample(seeds[0], *tight, 3, np.asarray(solver.get_fk(q_goal)))).reshape(3, 5, 5)
    assert np.all((out[:, 1:] >= tight[0]) & (out[:, 1:] <= tight[1]))  # rebuilt inside the new limits
    nocaller = _sampler(solver, db_size=64, use_caller_seed=False)
    out = np.asarray(nocaller.sample(seeds, lo, hi, 3, np.asarray(solver.get_fk(q_goal)))).reshape(3, 5, 5)
    assert not np.any(np.all(out == seeds[:, None], -1))  # every slot from the database


def test_shortfall_filled_uniformly(arm):
    """Fewer retrieved than wanted (database or k_max too small): the rest are uniform draws within the limits."""
    solver, lo, hi = arm
    for kw in ({"db_size": 3}, {"db_size": 100, "k_max": 2}):
        s = _sampler(solver, num_samples=8, **kw)
        target = np.asarray(solver.get_fk(np.zeros((2, 5))))
        out = np.asarray(s.sample(np.zeros(5), lo, hi, 2, target)).reshape(2, 8, 5)
        db_q = np.asarray(s._db[2])
        from_db = np.array([[np.any(np.all(row == db_q, -1)) for row in t] for t in out[:, 1:]])
        n = min(kw.get("k_max", 200), kw["db_size"])
        assert np.all(from_db[:, :n]) and not np.any(from_db[:, n:])
        assert np.all((out >= lo) & (out <= hi))


def test_rerank_by_predicted_correction(arm):
    """With jacobian_fn, the kept entries are those of smallest ‖pinv(J) e‖ among the k_max nearest."""
    solver, lo, hi = arm
    s = _sampler(solver, num_samples=4, db_size=400, k_max=40, jacobian_fn=solver.get_jacobian, rot_scale=0.0)
    goal = np.asarray(solver.get_fk(np.random.default_rng(2).uniform(lo, hi, (1, 5))))
    out = np.asarray(s.sample(np.zeros(5), lo, hi, 1, goal))[1:]
    cand = np.asarray(s._db[2])
    near = np.argsort(np.sum((np.asarray(solver.get_fk(cand))[:, :3, 3] - goal[0, :3, 3]) ** 2, -1))[:40]
    err = goal[0, :3, 3] - np.asarray(solver.get_fk(cand[near]))[:, :3, 3]
    jac = np.array(solver.get_jacobian(cand[near]))
    jac[:, 3:] = 0
    score = np.asarray(correction(jnp.concatenate([err, np.zeros_like(err)], -1), jac))
    np.testing.assert_allclose(out, cand[near][np.argsort(score)[:3]])
    plain = _sampler(solver, num_samples=4, db_size=400, k_max=40, rot_scale=0.0)
    np.testing.assert_allclose(np.asarray(plain.sample(np.zeros(5), lo, hi, 1, goal))[1:], cand[near[:3]])


def test_uniform_sampler_and_bad_input(arm):
    """QposSeedSampler: slot 0 the caller seed, the rest uniform and reproducible by sobol_seed; bad inputs name the
    field."""
    _, lo, hi = arm
    a, b = (np.asarray(QposSeedSampler(4, 5, "cpu", sobol_seed=7).sample(np.zeros(5), lo, hi, 2)) for _ in range(2))
    np.testing.assert_array_equal(a, b)
    assert a.shape == (8, 5) and np.all(a[::4] == 0) and np.all((a >= lo) & (a <= hi))
    with pytest.raises(InputError, match="qpos_seed must have shape"):
        QposSeedSampler(4, 5).sample(np.zeros(4), lo, hi, 2)
    with pytest.raises(InputError, match="lower <= upper"):
        QposSeedSampler(4, 5).sample(np.zeros(5), hi, lo, 2)
    with pytest.raises(InputError, match="rot_scale"):
        QposSeedSelSampler(4, 5, fk_fn=np.eye, rot_scale=-1)
    with pytest.raises(InputError, match="target_xpos"):
        QposSeedSelSampler(4, 5, fk_fn=np.eye).sample(np.zeros(5), lo, hi, 2, np.zeros((3, 4, 4)))
