"""Excitation trajectories for identifying the servos: each motor in turn, the others held.

Per motor, about :func:`duration` seconds: a smooth move from the start pose to a centre with room for
the largest step, steps of :data:`STEPS` rad held :data:`STEP_HOLD` s (large ones reach the velocity limit;
small ones, alternating in sign, probe the backlash), a staircase of :data:`STAIR` rad steps up then down
held :data:`STAIR_HOLD` s each (the joint moves only once the accumulated error passes the deadband, and
after the reversal only once the command has crossed the backlash), a linear chirp of
:data:`CHIRP_AMPLITUDE` rad from :data:`CHIRP_HZ` (the gain and damping), and a smooth move back.
Positions in rad, the six motors in :data:`so101_mjx.robot.motors.MOTORS` order.
"""

from __future__ import annotations

import numpy as np

from so101_mjx.errors import InputError

STEPS = (0.5, 0.0, -0.5, 0.0, 0.15, 0.0, -0.15, 0.0, 0.04, 0.0, -0.04, 0.0)  # rad from the centre
STEP_HOLD = 0.5  # s per step
STAIR, STAIR_COUNT, STAIR_HOLD = 0.002, 12, 1 / 6  # rad per stair (1.3 encoder counts), stairs each way, s per stair
CHIRP_AMPLITUDE = 0.12  # rad
CHIRP_HZ = (0.3, 2.5)  # start and end frequency
CHIRP_SECONDS = 5.0
MOVE_SECONDS = 1.0  # each smooth move to and from the centre
MARGIN = 0.05  # rad kept from the joint limits


def duration(fps: float) -> float:
    """Seconds of one motor's segment at ``fps`` control ticks per second."""
    return len(segment(0.0, (-np.pi, np.pi), fps)) / fps


def _move(a: float, b: float, n: int) -> np.ndarray:
    """``n`` samples of a cosine-smoothed move from ``a`` to ``b`` (both excluded at the start, ``b`` reached)."""
    s = np.arange(1, n + 1) / n
    return a + (b - a) * 0.5 * (1 - np.cos(np.pi * s))


def segment(start: float, limits: tuple[float, float], fps: float) -> np.ndarray:
    """One motor's excitation (T,) rad from and back to ``start`` within ``limits`` (low, high) rad."""
    lo, hi = limits
    reach = max(np.abs(STEPS).max(), CHIRP_AMPLITUDE) + MARGIN
    if hi - lo <= 2 * reach:
        raise InputError(f"a joint range of {hi - lo:.3f} rad leaves no room for the excitation (needs "
                         f"{2 * reach:.3f})")
    centre = float(np.clip(start, lo + reach, hi - reach))
    move, hold = round(MOVE_SECONDS * fps), round(STEP_HOLD * fps)
    t = np.arange(round(CHIRP_SECONDS * fps)) / fps
    f0, f1 = CHIRP_HZ
    chirp = CHIRP_AMPLITUDE * np.sin(2 * np.pi * (f0 * t + 0.5 * (f1 - f0) / CHIRP_SECONDS * t**2))
    levels = STAIR * np.r_[np.arange(1, STAIR_COUNT + 1), np.arange(STAIR_COUNT - 1, -STAIR_COUNT - 1, -1),
                           np.arange(-STAIR_COUNT + 1, 1)]
    stairs = np.repeat(centre + levels, round(STAIR_HOLD * fps))
    return np.concatenate([_move(start, centre, move), np.full(hold, centre),
                           *(np.full(hold, centre + s) for s in STEPS),
                           stairs, centre + chirp, _move(centre, start, move), np.full(hold, start)])


def trajectory(start: np.ndarray, limits: np.ndarray, fps: float,
               motors: tuple[int, ...] = tuple(range(6))) -> np.ndarray:
    """Targets (T, 6) rad exciting ``motors`` (indices) one after another from the pose ``start`` (6,) rad,
    within ``limits`` (6, 2) rad; every other motor holds its start."""
    start = np.asarray(start, np.float64)
    parts = []
    for m in motors:
        x = segment(start[m], tuple(limits[m]), fps)
        part = np.repeat(start[None], len(x), axis=0)
        part[:, m] = x
        parts.append(part)
    return np.concatenate(parts)
