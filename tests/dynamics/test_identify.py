"""Base-parameter identification on a simulated excitation (float64)."""

import numpy as np
import pytest

from so101_mjx.dynamics.backend import JaxBackend
from so101_mjx.dynamics.identify import BaseParameters, excite, fourier_trajectory, identify

NOISE = 0.01  # N·m


@pytest.fixture(scope="module")
def backend() -> JaxBackend:
    return JaxBackend("so101")


@pytest.fixture(scope="module")
def report(backend):
    return identify(backend, duration=20.0, rate=50.0, noise_std=NOISE, seed=3)


def test_fourier_trajectory_is_within_limits_and_consistent(backend):
    t = np.arange(0.0, 10.0, 1e-3)
    q, v, a = fourier_trajectory(backend.chain.q_range, t, seed=1)
    lo, hi = backend.chain.q_range.T
    assert np.all((q >= lo) & (q <= hi))
    assert np.abs(np.gradient(q, t, axis=0) - v)[1:-1].max() <= 1e-5 * np.abs(v).max()
    assert np.abs(np.gradient(v, t, axis=0) - a)[1:-1].max() <= 1e-5 * np.abs(a).max()


def test_base_parameters_reproduce_torques(backend):
    w, tau = excite(backend, np.arange(0.0, 20.0, 0.02), seed=3)
    base = BaseParameters.from_regressor(w)
    theta = backend.parameters
    assert 0 < base.rank < w.shape[1]
    assert np.linalg.matrix_rank(w) == base.rank
    # W θ = W_base β for any θ, not only the true one.
    other = np.random.default_rng(0).normal(size=theta.shape)
    assert np.abs(w[:, base.independent] @ base.project(other) - w @ other).max() <= 1e-10 * np.abs(w @ other).max()
    assert np.abs(w[:, base.independent] @ base.project(theta) - tau).max() <= 1e-10


def test_noise_free_recovery(report):
    assert report.rel_error_clean <= 1e-6
    assert np.max(np.abs(report.beta_clean - report.beta_true)) <= 1e-6 * np.max(np.abs(report.beta_true))
    assert report.fit_rms_clean <= 1e-10


def test_noisy_prediction_within_twice_the_noise(report):
    assert report.noise_std == NOISE and report.tau_rms > 10 * NOISE  # the noise is not negligible
    assert report.fit_rms_noisy <= 2 * NOISE
    assert report.validation_rms_noisy <= 2 * NOISE
    assert report.validation_rms_true < NOISE  # the model predicts better than a single measurement
    assert report.rel_error_noisy > report.rel_error_clean


def test_summary_lists_every_base_parameter(report):
    text = report.summary()
    assert len(text.splitlines()) == 5 + len(report.names)
    assert report.n_standard == 60 and len(report.beta_true) == len(report.names)
