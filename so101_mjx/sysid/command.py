"""``so101-mjx sysid DATASET``: fit the servo model to a recording and write what the env config takes.

Writes ``--out`` (``ServoModel``'s fields, per motor: ``servo_model=json.load(...)`` in an env config,
or ``--servo-model FILE`` of ``eval`` and ``deploy``), beside it ``<out>.report.json`` (the search
intervals, per-motor residuals, the cost history and the settings), and with ``--plot`` a PNG of each
motor's measured and simulated positions under the fit.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from so101_mjx import _progress
from so101_mjx._files import atomic_write
from so101_mjx._precision import x64
from so101_mjx.errors import ParameterError
from so101_mjx.robot.calibration import Calibration
from so101_mjx.robot.motors import MOTORS
from so101_mjx.sysid import dataset, fit

NOT_FITTED = {
    "torque_limit": "kept as the scene's: the velocity limit keeps tracking errors, and so torques, below the limit "
                    "in the excitation, so recorded positions carry no information on it",
    "friction": "the joints' friction loss stays the scene's (0.052 N·m); at rest its effect is close to a deadband's",
}


def motor_indices(names: list[str] | None) -> tuple[int, ...]:
    """Indices of the motors ``names`` (all six when None); InputError for an unknown one."""
    if not names:
        return tuple(range(len(MOTORS)))
    unknown = [n for n in names if n not in MOTORS]
    if unknown:
        raise ParameterError(f"motors must be names of {list(MOTORS)}, got {unknown}", "motors")
    return tuple(sorted({MOTORS.index(n) for n in names}))


def report(identified: fit.Identified, recording: fit.Recording, settings: dict[str, Any],
           seconds: float) -> dict[str, Any]:
    """The report's JSON: settings, the fit per motor, its intervals and residuals."""
    per_motor = lambda a: {MOTORS[i]: a[i] for i in identified.motors}  # noqa: E731
    return {
        **settings, "seconds": round(seconds, 1), "episodes": len(recording.episodes),
        "frames": int(sum(len(c) for c, _ in recording.episodes)), "motors": [MOTORS[i] for i in identified.motors],
        "value": {k: per_motor(np.asarray(v).tolist()) for k, v in identified.value.items()},
        "interval": {k: per_motor(np.asarray(v).tolist()) for k, v in identified.interval.items()},
        "rms_rad": per_motor(identified.rms.tolist()), "cost_history": identified.history.tolist(),
        "not_fitted": NOT_FITTED,
    }


def _pyplot():
    """matplotlib's pyplot on the Agg backend; ParameterError naming ``plot_to`` when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ParameterError("plot_to needs matplotlib: pip install 'so101-mjx[viz]'", "plot_to") from None
    return plt


def plot(path: str, identified: fit.Identified, recording: fit.Recording, task: str, backend: str | None) -> None:
    """Measured and fitted positions of each fitted motor over the first episode, as a PNG at ``path``."""
    plt = _pyplot()
    commands, measured = recording.episodes[0]
    replay = fit.replayer(fit.replay_env(task, recording.fps, backend))
    simulated = np.asarray(replay(commands, measured[0],
                                  {k: np.asarray(v)[None] for k, v in identified.value.items()}))[0]
    t = np.arange(len(commands)) / recording.fps
    fig, axes = plt.subplots(len(identified.motors), 1, figsize=(10, 2.2 * len(identified.motors)),
                             sharex=True, squeeze=False)
    for ax, m in zip(axes[:, 0], identified.motors, strict=True):
        ax.plot(t, commands[:, m], lw=0.8, color="0.7", label="command")
        ax.plot(t, measured[:, m], lw=1.0, label="measured")
        ax.plot(t, simulated[:, m], lw=1.0, ls="--", label="fit")
        ax.set_ylabel(f"{MOTORS[m]} [rad]")
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[-1, 0].set_xlabel("time [s]")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def fit_servo_model(path: str, out: str, *, units: str = "degrees", calibration: Calibration | None = None,
                    task: str = "SO101Reach-v0", backend: str | None = None, motors: list[str] | None = None,
                    population: int = 64, elites: int = 8, iterations: int = 12, sweeps: int = 3, polish: int = 4,
                    plot_to: str | None = None, seed: int = 0) -> fit.Identified:
    """Fit the servo model of ``motors`` (default: all six) to the recording at ``path`` (:func:`fit.identify`, in
    float64), replayed in ``task``'s scene; write its fields to ``out``, :func:`report` to ``<out>.report.json`` and,
    with ``plot_to``, :func:`plot` there. ``calibration``: the recording follower's, read in ``units``."""
    motors_fitted = motor_indices(motors)
    report_file = Path(out).with_suffix(".report.json")
    if plot_to:
        _pyplot()  # before the fit, not after it
    settings = {"dataset": str(Path(path).resolve()), "task": task, "units": units,
                "calibration": None if calibration is None else dataclasses.asdict(calibration), "backend": backend,
                "population": population, "elites": elites, "iterations": iterations, "sweeps": sweeps,
                "polish": polish, "seed": seed}
    with x64(True):  # the fit compares positions to a fraction of an encoder count
        _progress.phase(f"sysid: reading {path}")
        recording = dataset.read(path, units=units, task=task, calibration=calibration)
        start = time.perf_counter()
        shown = _progress.bar(iterations + sweeps + polish, "sysid", "round")

        def advanced(stage: str, c: np.ndarray) -> None:
            _progress.write(f"{stage}: rms " + " ".join(f"{np.sqrt(c[m]):.5f}" for m in motors_fitted) + " rad")
            shown.update(1)

        try:
            identified = fit.identify(recording, task=task, backend=backend, population=population, elites=elites,
                                      iterations=iterations, sweeps=sweeps, polish=polish,
                                      motors_fitted=motors_fitted, seed=seed, progress=advanced)
        finally:
            shown.close()
        seconds = time.perf_counter() - start
        if plot_to:
            _progress.phase(f"sysid: plotting the fit to {plot_to}")
            plot(plot_to, identified, recording, task, backend)
    atomic_write(out, json.dumps(identified.servo_model(), indent=2) + "\n")
    atomic_write(report_file, json.dumps(report(identified, recording, settings, seconds), indent=2) + "\n")
    for name in fit.PARAMETERS:
        values = ", ".join(f"{MOTORS[m]} {identified.value[name][m]:.4g}" for m in motors_fitted)
        print(f"{name}: {values}")
    print(f"sysid: {len(motors_fitted)} motors fitted in {seconds:.1f} s; wrote {out} and {report_file}")
    return identified
