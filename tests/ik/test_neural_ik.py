"""Learned IK seed (so101_mjx.ik.solvers.learned_seeds): training lowers the FK error, LM steps from trained seeds solve
(position, pitch) targets, save/load round-trips, and the solver surface matches the other solvers'."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.ik import analytic as analytic_ik, iterative as ik
from so101_mjx.ik.solvers import learned_seeds as neural_ik
from so101_mjx.ik.solvers.analytic_solver import SO101AnalyticSolver
from so101_mjx.robot.kinematics import Kinematics
from so101_mjx.robot.scenes import ARM_JOINTS, EE_SITE

TINY = {"hidden": (64, 64), "heads": 4}
TINY_TRAINING = {"steps": 1500, "batch": 256}  # ~6 s here


@pytest.fixture(scope="module")
def arm(model):
    kin = Kinematics.from_model(model, ARM_JOINTS)
    lo, hi = ik.joint_limits(model)
    return kin, lo, hi


@pytest.fixture(scope="module")
def problems(arm):
    """Held-out (position (N, 3), pitch (N,)) targets of uniform joint samples, float32."""
    kin, lo, hi = arm
    q = np.random.default_rng(7).uniform(lo, hi, (2000, 5))
    geom = analytic_ik.ArmGeometry.from_kinematics(kin, EE_SITE)
    return np.asarray(kin.point(q, EE_SITE), np.float32), np.asarray(analytic_ik.pitch_of(geom, q), np.float32)


@pytest.fixture(scope="module")
def tiny(arm):
    kin, lo, hi = arm
    untrained = neural_ik.init(kin, lo, hi, **TINY)
    trained, losses = neural_ik.train(kin, untrained, **TINY_TRAINING)
    return untrained, trained, losses


def seed_error(kin, net, pos, pitch) -> np.ndarray:
    """Per-target position error (N,) of the best head's seed, metres."""
    q = net.seeds(pos, pitch)
    return np.linalg.norm(np.asarray(kin.point(q, EE_SITE)) - pos[:, None], axis=-1).min(-1)


# soak: test_default_net_trains_to_the_stated_error (slow) holds a trained net to limits an untrained one misses
@pytest.mark.soak  # a training run
def test_tiny_training_lowers_the_error_and_lm_from_it_beats_the_untrained_seed(model, arm, problems, tiny):
    kin = arm[0]
    untrained, trained, losses = tiny
    pos, pitch = problems
    assert losses.shape == (TINY_TRAINING["steps"],) and np.all(np.isfinite(losses))
    assert losses[-20:].mean() < 0.25 * losses[:20].mean()
    before, after = np.median(seed_error(kin, untrained, pos, pitch)), np.median(seed_error(kin, trained, pos, pitch))
    print(f"tiny seed net: median seed error {before * 1e3:.1f} mm untrained, {after * 1e3:.1f} mm trained")
    assert after < 0.1 * before
    rates = [np.mean(np.asarray(neural_ik.SO101LearnedSolver(net, model, iterations=3).get_ik(pos, pitch=pitch)[0]))
             for net in (untrained, trained)]
    print(f"success after 3 LM steps: {rates[0]:.3f} untrained, {rates[1]:.3f} trained")
    assert rates[1] > rates[0] + 0.3


@pytest.mark.slow
def test_training_is_pure(arm, tiny):
    kin, untrained = arm[0], tiny[0]
    first, losses = neural_ik.train(kin, untrained, steps=50, batch=64)
    again, losses2 = neural_ik.train(kin, untrained, steps=50, batch=64)
    np.testing.assert_array_equal(losses2, losses)
    for a, b in zip(jax.tree.leaves(again.params), jax.tree.leaves(first.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(neural_ik.train(kin, untrained, steps=50, batch=64, seed=1)[1], losses)


@pytest.mark.slow
def test_save_load_round_trip(tmp_path, model, problems, tiny):
    trained = tiny[1]
    path = tmp_path / "seed.npz"
    neural_ik.save(trained, path)
    loaded = neural_ik.load(path)
    assert (loaded.hidden, loaded.heads, loaded.site) == (trained.hidden, trained.heads, trained.site)
    pos, pitch = problems
    np.testing.assert_array_equal(np.asarray(loaded.seeds(pos, pitch)), np.asarray(trained.seeds(pos, pitch)))
    a = neural_ik.SO101LearnedSolver(trained, model).get_ik(pos[:50], pitch=pitch[:50])
    b = neural_ik.SO101LearnedSolver(loaded, model).get_ik(pos[:50], pitch=pitch[:50])
    np.testing.assert_array_equal(np.asarray(a[1]), np.asarray(b[1]))
    # Not a saved net, or params of another shape: refused by name.
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match="missing"):
        neural_ik.load(tmp_path / "other.npz")
    with np.load(path) as data:
        files = dict(data)
    files["hidden"] = np.asarray([64, 32])
    np.savez(tmp_path / "mismatch.npz", **files)
    with pytest.raises(ValueError, match="hidden"):
        neural_ik.load(tmp_path / "mismatch.npz")


@pytest.mark.slow
def test_solver_surface(model, arm, problems, tiny):
    kin, lo, hi = arm
    trained = tiny[1]
    solver = neural_ik.SO101LearnedSolver(trained, model, refine=trained.heads)
    pos, pitch = problems
    grid, grid_pitch = pos[:8].reshape(2, 4, 3), pitch[:8].reshape(2, 4)
    seed = np.zeros(5, np.float32)
    valid, cand = (np.asarray(x)
                   for x in solver.get_ik(grid, qpos_seed=seed, pitch=grid_pitch, return_all_solutions=True))
    assert valid.shape == (2, 4, trained.heads) and cand.shape == (2, 4, trained.heads, 5)
    ok, q = (np.asarray(x) for x in solver.get_ik(grid, qpos_seed=seed, pitch=grid_pitch))
    np.testing.assert_array_equal(ok, valid[..., 0])
    np.testing.assert_array_equal(q, cand[..., 0, :])
    assert np.all(np.diff(valid.astype(int), axis=-1) <= 0)  # valid first
    assert np.all((cand >= lo - 1e-6) & (cand <= hi + 1e-6))
    # Refining fewer heads keeps those whose seeds miss least: one candidate by default.
    one = neural_ik.SO101LearnedSolver(trained, model)
    assert np.asarray(one.get_ik(grid, pitch=grid_pitch, return_all_solutions=True)[1]).shape == (2, 4, 1, 5)
    # Every reported success is one (position within pos_eps, pitch within rot_eps); non-finite
    # or unreachable targets fail with finite joints.
    pos = np.concatenate([pos, [[np.nan, 0.1, 0.1], [2.0, 0.0, 0.2], pos[0]]]).astype(np.float32)
    pitch = np.concatenate([pitch, [1.0, 1.0, np.nan]]).astype(np.float32)
    ok, q = (np.asarray(x) for x in solver.get_ik(pos, pitch=pitch))
    np.testing.assert_array_equal(ok[-3:], [False, False, False])
    assert np.all(np.isfinite(q))
    err = np.linalg.norm(np.asarray(kin.point(q.astype(np.float64), EE_SITE)) - pos, axis=-1)
    geom = analytic_ik.ArmGeometry.from_kinematics(kin, EE_SITE)
    tilt = np.abs(np.asarray(analytic_ik.wrap(analytic_ik.pitch_of(geom, q.astype(np.float64)) - pitch)))
    assert ok.mean() > 0.3 and err[ok].max() < 1e-3 and tilt[ok].max() < 0.05


@pytest.mark.slow
def test_invalid_arguments(model, arm, tiny):
    kin, lo, hi = arm
    trained = tiny[1]
    with pytest.raises(ValueError, match="net must be a SeedNet"):
        neural_ik.SO101LearnedSolver("seed.npz", model)
    with pytest.raises(ValueError, match="site"):
        neural_ik.SO101LearnedSolver(trained, model, site="other")
    with pytest.raises(ValueError, match="refine"):
        neural_ik.SO101LearnedSolver(trained, model, refine=trained.heads + 1)
    solver = neural_ik.SO101LearnedSolver(trained, model)
    with pytest.raises(ValueError, match="poses"):
        solver.get_ik(np.eye(4))
    with pytest.raises(ValueError, match="pitch"):
        solver.get_ik(np.zeros((4, 3)), pitch=np.zeros(3))
    tcp = np.eye(4)
    tcp[:3, 3] = [0.01, 0.0, 0.0]
    solver.set_tcp(tcp)
    with pytest.raises(ValueError, match="TCP offset"):
        solver.get_ik(np.zeros(3))
    with pytest.raises(ValueError, match="steps"):
        neural_ik.train(kin, trained, steps=0)
    with pytest.raises(ValueError, match="heads"):
        neural_ik.init(kin, lo, hi, heads=0)
    with pytest.raises(ValueError, match="lower"):
        neural_ik.init(kin, hi, lo)


@pytest.mark.slow
@pytest.mark.optimized
def test_default_net_trains_to_the_stated_error(model, arm, problems):
    """The default net and training (as ``bench ik`` trains in-run, ~30 s here): median best-head
    seed error < 6 mm (measured 4.46 mm), and after 2 LM steps success (< 1 mm, pitch < 0.05 rad)
    > 85 % of held-out targets (measured 88.1 %), agreeing with a closed-form branch where the
    analytic solver solves them too."""
    kin, lo, hi = arm
    net, _ = neural_ik.train(kin, neural_ik.init(kin, lo, hi))
    pos, pitch = problems
    err = np.median(seed_error(kin, net, pos, pitch))
    ok, q = (np.asarray(x) for x in neural_ik.SO101LearnedSolver(net, model).get_ik(pos, pitch=pitch))
    print(f"default seed net: median seed error {err * 1e3:.2f} mm, success after 2 LM steps {ok.mean():.3f}")
    assert err < 6e-3 and ok.mean() > 0.85
    # Where the closed form solves the target too, the learned answer is one of its branches at the
    # learned pitch and roll, up to the learned position error (< 1 mm), which ill-conditioned
    # configurations (elbow straight, TCP over the pan axis) turn into larger joint gaps: measured
    # p50 3e-4 rad, p90 5e-3 rad.
    geom = analytic_ik.ArmGeometry.from_kinematics(kin, EE_SITE)
    analytic = SO101AnalyticSolver(model, pos_eps=1e-3)
    valid, cand = (np.asarray(x) for x in analytic.get_ik(
        pos, qpos_seed=q, pitch=np.asarray(analytic_ik.pitch_of(geom, q)), return_all_solutions=True))
    both = ok & valid[:, 0]
    gap = np.min(np.max(np.abs(cand - q[:, None]), -1) + 10 * ~valid, -1)
    print(f"  solved by both {both.mean():.3f}; joint gap p50 {np.median(gap[both]):.1e}, p90 "
          f"{np.percentile(gap[both], 90):.1e} rad")
    assert both.mean() > 0.8 and np.median(gap[both]) < 1e-3 and np.percentile(gap[both], 90) < 2e-2


@pytest.mark.slow
def test_seeds_follow_the_input_dtype(arm, tiny):
    trained = tiny[1]
    q32 = trained.seeds(np.zeros((3, 3), np.float32), np.zeros(3, np.float32))
    q64 = trained.seeds(np.zeros((3, 3)), np.zeros(3))
    assert q32.dtype == jnp.float32 and q64.dtype == jnp.float64 and q32.shape == (3, trained.heads, 5)
