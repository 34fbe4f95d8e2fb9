"""Identification of the SO-101's base inertial parameters from a simulated excitation.

The arm follows a Fourier-series trajectory inside its joint limits; torques are the rigid-body
inverse dynamics of that trajectory (plus optional Gaussian measurement noise). Stacking the
regressor ``W(q, v, a)`` (see :mod:`so101_mjx.dynamics.backend`) over the samples gives ``W θ = tau``,
with ``W`` rank deficient. QR with column pivoting selects ``r`` independent columns; the base
parameters ``β = θ_ind + K θ_dep`` (``K = R11⁻¹ R12``) are the identifiable combinations, and
``W_ind β = tau`` is solved by least squares. Units: SI (kg, kg·m, kg·m², N·m, s).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg

from so101_mjx.dynamics.backend import ChainBackend, DynamicsBackend, JaxBackend

PARAMETER_NAMES = ("m", "mcx", "mcy", "mcz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")


def fourier_trajectory(q_range: np.ndarray, t: np.ndarray, *, n_harmonics: int = 5, base_freq: float = 0.1,
                       fill: float = 0.8, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Random finite Fourier series about mid-range, its excursion scaled to ``fill`` of each half-range.

    Args:
        q_range: (nv, 2) joint limits [rad].
        t: (T,) sample times [s].
        base_freq: fundamental frequency [Hz]; harmonics k·base_freq, k = 1..n_harmonics.
    Returns:
        q, v, a: (T, nv) positions, velocities and accelerations, exact derivatives of the series.
    """
    rng = np.random.default_rng(seed)
    nv = len(q_range)
    w = 2 * np.pi * base_freq * np.arange(1, n_harmonics + 1)  # (K,) rad/s
    coef = rng.normal(size=(2, n_harmonics, nv)) / np.arange(1, n_harmonics + 1)[:, None]
    phase = w[:, None] * t[None, :]  # (K, T)
    sin, cos = np.sin(phase), np.cos(phase)
    q = np.einsum("kt,kj->tj", sin, coef[0]) + np.einsum("kt,kj->tj", cos, coef[1])
    v = np.einsum("kt,kj->tj", w[:, None] * cos, coef[0]) - np.einsum("kt,kj->tj", w[:, None] * sin, coef[1])
    a = -np.einsum("kt,kj->tj", w[:, None] ** 2 * sin, coef[0]) - np.einsum("kt,kj->tj", w[:, None] ** 2 * cos, coef[1])
    lo, hi = q_range.T
    scale = fill * 0.5 * (hi - lo) / np.abs(q).max(axis=0)
    return 0.5 * (lo + hi) + scale * q, scale * v, scale * a


@dataclass(frozen=True)
class BaseParameters:
    """Independent columns of a stacked regressor and the combination ``β = θ[ind] + K θ[dep]``."""

    independent: np.ndarray  # (r,) column indices
    dependent: np.ndarray  # (P - r,)
    combination: np.ndarray  # (r, P - r) K

    @classmethod
    def from_regressor(cls, w: np.ndarray, rtol: float = 1e-10) -> BaseParameters:
        """QR with column pivoting of ``w`` (N, P); rank from ``|R_ii| > rtol |R_00|``."""
        _, r, piv = scipy.linalg.qr(w, mode="economic", pivoting=True)
        diag = np.abs(np.diag(r))
        rank = int(np.sum(diag > rtol * diag[0]))
        k = scipy.linalg.solve_triangular(r[:rank, :rank], r[:rank, rank:])
        k[np.abs(k) < rtol] = 0.0
        return cls(independent=piv[:rank], dependent=piv[rank:], combination=k)

    @property
    def rank(self) -> int:
        return len(self.independent)

    def project(self, theta: np.ndarray) -> np.ndarray:
        """Base parameters (r,) of standard parameters θ (P,)."""
        return theta[self.independent] + self.combination @ theta[self.dependent]

    def describe(self, labels: list[str], digits: int = 3) -> list[str]:
        """Each base parameter as text, e.g. ``Izz[wrist] + 0.0123 m[gripper]``."""
        out = []
        for i, row in zip(self.independent, self.combination):
            terms = [labels[i]] + [f"{c:+.{digits}g} {labels[j]}" for j, c in zip(self.dependent, row) if c]
            out.append(" ".join(terms))
        return out


@dataclass(frozen=True)
class IdentificationReport:
    """Recovered vs true base parameters and torque errors (N·m), noise-free and noisy."""

    names: list[str]  # (r,) base parameters as expressions in the standard ones
    beta_true: np.ndarray  # (r,)
    beta_clean: np.ndarray  # (r,) least squares on noise-free torques
    beta_noisy: np.ndarray  # (r,) least squares on noisy torques
    noise_std: float  # torque noise σ [N·m]
    n_samples: int  # trajectory samples (each gives nv equations)
    n_standard: int  # standard parameters (10 per moving body)
    condition: float  # condition number of the base regressor
    rel_error_clean: float  # ||β_clean - β|| / ||β||
    rel_error_noisy: float
    tau_rms: float  # RMS of the noise-free torques
    fit_rms_clean: float  # RMS residual, noise-free fit
    fit_rms_noisy: float  # RMS residual vs the noisy torques of the fit
    validation_rms_noisy: float  # RMS prediction error on a new trajectory vs its noisy torques
    validation_rms_true: float  # same vs its noise-free torques

    def summary(self) -> str:
        lines = [
            f"samples {self.n_samples}, standard parameters {self.n_standard}, base parameters "
            f"{len(self.names)}, cond(W_base) {self.condition:.3g}",
            f"torque RMS {self.tau_rms:.4g} N·m, noise σ {self.noise_std:.4g} N·m",
            f"noise-free: ||Δβ||/||β|| {self.rel_error_clean:.3g}, residual RMS {self.fit_rms_clean:.3g} N·m",
            f"noisy: ||Δβ||/||β|| {self.rel_error_noisy:.3g}, residual RMS {self.fit_rms_noisy:.4g} N·m, "
            f"validation RMS {self.validation_rms_noisy:.4g} N·m (vs noisy), {self.validation_rms_true:.4g} "
            "N·m (vs true)",
            f"{'base parameter':<60} {'true':>12} {'noise-free':>12} {'noisy':>12}",
        ]
        for n, b, c, z in zip(self.names, self.beta_true, self.beta_clean, self.beta_noisy):
            lines.append(f"{n[:60]:<60} {b:12.5g} {c:12.5g} {z:12.5g}")
        return "\n".join(lines)


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x))))


def nonzero_inertia_columns(backend: DynamicsBackend) -> np.ndarray:
    """Regressor columns of the bodies whose inertia has nonzero mass, FIGAROH's filter over
    ``backend.get_inertias()`` (FIGAROH's ``DynamicsBackend``: \"used for nonzero-inertia filtering in regressor
    computation"). Body ``i`` of the regressor is ``get_inertias()[regressor_inertia_start + i]``
    (Pinocchio lists the universe first)."""
    inertias = backend.get_inertias()[backend.regressor_inertia_start :]
    keep = np.array([i for i, inertia in enumerate(inertias) if inertia.mass != 0], dtype=int)
    return (10 * keep[:, None] + np.arange(10)).reshape(-1)


def excite(backend: ChainBackend, t: np.ndarray, seed: int, **trajectory) -> tuple[np.ndarray, np.ndarray]:
    """Stacked regressor (T nv, P) and rigid-body torques (T nv,) along a Fourier trajectory."""
    q, v, a = fourier_trajectory(backend.chain.q_range, t, seed=seed, **trajectory)
    w = np.asarray(backend.compute_regressor(q, v, a), dtype=np.float64)
    tau = np.asarray(backend.compute_inverse_dynamics(q, v, a), dtype=np.float64)
    return w.reshape(-1, w.shape[-1]), tau.reshape(-1)


def identify(backend: ChainBackend | None = None, *, duration: float = 20.0, rate: float = 50.0,
             noise_std: float = 0.01, seed: int = 0, **trajectory) -> IdentificationReport:  # fmt: skip
    """Identify the base parameters of ``backend`` (default: ``JaxBackend()``, the arm alone), a
    :class:`~so101_mjx.dynamics.backend.ChainBackend`; bodies of zero mass are left out
    (:func:`nonzero_inertia_columns`).

    Args:
        duration, rate: length [s] and sampling rate [Hz] of the excitation.
        noise_std: σ of the Gaussian torque measurement noise [N·m].
        seed: seeds the excitation (``seed``), the validation trajectory (``seed + 1``) and the noise.
        trajectory: passed to :func:`fourier_trajectory` (n_harmonics, base_freq, fill).
    Needs float64: with JaxBackend, enable ``jax_enable_x64`` first.
    """
    backend = JaxBackend() if backend is None else backend
    t = np.arange(0.0, duration, 1.0 / rate)
    columns = nonzero_inertia_columns(backend)  # massless bodies' parameters are not identified
    w, tau = excite(backend, t, seed, **trajectory)
    w_val, tau_val = excite(backend, t, seed + 1, **trajectory)
    w, w_val = w[:, columns], w_val[:, columns]
    base = BaseParameters.from_regressor(w)
    wb, wb_val = w[:, base.independent], w_val[:, base.independent]
    beta = base.project(backend.parameters[columns])
    rng = np.random.default_rng(seed)
    tau_noisy = tau + rng.normal(0.0, noise_std, tau.shape)
    tau_val_noisy = tau_val + rng.normal(0.0, noise_std, tau_val.shape)
    beta_clean = np.linalg.lstsq(wb, tau, rcond=None)[0]
    beta_noisy = np.linalg.lstsq(wb, tau_noisy, rcond=None)[0]
    labels = [f"{p}[{b}]" for b in backend.chain.body_names for p in PARAMETER_NAMES]
    labels = [labels[c] for c in columns]
    return IdentificationReport(
        names=base.describe(labels),
        beta_true=beta,
        beta_clean=beta_clean,
        beta_noisy=beta_noisy,
        noise_std=noise_std,
        n_samples=len(t),
        n_standard=w.shape[1],
        condition=float(np.linalg.cond(wb)),
        rel_error_clean=float(np.linalg.norm(beta_clean - beta) / np.linalg.norm(beta)),
        rel_error_noisy=float(np.linalg.norm(beta_noisy - beta) / np.linalg.norm(beta)),
        tau_rms=_rms(tau),
        fit_rms_clean=_rms(wb @ beta_clean - tau),
        fit_rms_noisy=_rms(wb @ beta_noisy - tau_noisy),
        validation_rms_noisy=_rms(wb_val @ beta_noisy - tau_val_noisy),
        validation_rms_true=_rms(wb_val @ beta_noisy - tau_val),
    )
