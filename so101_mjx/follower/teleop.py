"""``so101-mjx teleop``: drive the simulated arm from the keyboard, in joint or Cartesian mode.

Joint mode (a :class:`~so101_mjx.follower.sim.SimFollower`): each key press moves one motor's
target by ``step`` motor units (degrees by default; the gripper in 0..100), from the measured pose:

====================  =====  =====
motor                 +      -
====================  =====  =====
shoulder_pan          q      a
shoulder_lift         w      s
elbow_flex            e      d
wrist_flex            r      f
wrist_roll            t      g
gripper (open +)      y      h
====================  =====  =====

Cartesian mode (the task's gym env, the reference's ``[dx, dy, dz, grasp]``): ``w``/``s`` move the
IK target along +x/-x (away from / toward the base), ``a``/``d`` along +y/-y, ``r``/``f`` up/down,
by ``action_scale`` metres per press (default 1 cm); ``o`` opens the jaw, ``c`` closes it.

Both: ``n`` starts a new episode (a fresh scene), ``x`` (or end of input, or Ctrl-C) quits. In a
terminal the keys are read as they are pressed, one control period at a time; from a pipe or
file each line holds one control period's keys (the scripted form the tests use).
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time
from collections.abc import Iterator
from typing import IO, Any

import numpy as np

from so101_mjx.errors import InputError
from so101_mjx.follower.actions import as_dict
from so101_mjx.follower.sim import SimFollower, SimFollowerConfig

MODES = ("joint", "cartesian")
JOINT_KEYS = {k: (i, sign) for i, pair in enumerate(("qa", "ws", "ed", "rf", "tg", "yh"))
              for k, sign in zip(pair, (1, -1))}
CARTESIAN_KEYS = {k: (i, sign) for i, pair in enumerate(("ws", "ad", "rf")) for k, sign in zip(pair, (1, -1))}
NEW_EPISODE, QUIT = "n", "x"


def joint_targets(targets: np.ndarray, keys: str, step: float, limits: np.ndarray) -> np.ndarray:
    """``targets`` (6,) moved by ``step`` per press of :data:`JOINT_KEYS` in ``keys``, within ``limits`` (6, 2)."""
    out = np.array(targets, np.float64)
    for key in keys:
        if key in JOINT_KEYS:
            motor, sign = JOINT_KEYS[key]
            out[motor] += sign * step
    return np.clip(out, limits[:, 0], limits[:, 1])


def cartesian_action(keys: str, grasp: float) -> tuple[np.ndarray, float]:
    """``([dx, dy, dz, grasp] (4,), grasp)`` for one control period's ``keys``; ``o``/``c`` set the grasp."""
    delta = np.zeros(3)
    for key in keys:
        if key in CARTESIAN_KEYS:
            axis, sign = CARTESIAN_KEYS[key]
            delta[axis] += sign
        grasp = {"o": 1.0, "c": 0.0}.get(key, grasp)
    return np.concatenate([np.clip(delta, -1, 1), [grasp]]), grasp


@contextlib.contextmanager
def key_periods(stream: IO[str], fps: float) -> Iterator[Iterator[str]]:
    """The keys of each control period: a terminal's presses in raw mode, or one line per period from a pipe."""
    if not stream.isatty():
        yield (line.rstrip("\n") for line in stream)
        return
    import termios
    import tty

    fd = stream.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)

    def presses() -> Iterator[str]:
        tick = time.monotonic()
        while True:
            tick += 1.0 / fps
            keys = ""
            while (wait := tick - time.monotonic()) > 0:
                if select.select([fd], [], [], wait)[0]:
                    keys += os.read(fd, 64).decode(errors="ignore")
            yield keys

    try:
        yield presses()
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def driven(periods: Iterator[str], max_steps: int | None) -> Iterator[str]:
    """The periods' keys until one holds ``x`` or ``max_steps`` periods have passed."""
    for steps, keys in enumerate(periods):
        if QUIT in keys or (max_steps is not None and steps >= max_steps):
            return
        yield keys


def teleop(task: str = "SO101PickCube-v0", mode: str = "joint", stream: IO[str] | None = None, *, step: float = 2.0,
           action_scale: float = 0.01, use_degrees: bool = True, seed: int = 0, viewer: bool = False,
           max_steps: int | None = None) -> dict[str, Any]:
    """Teleoperate ``task`` from ``stream`` (default stdin) until ``x``, end of input or ``max_steps``;
    returns the final ``{"<motor>.pos": ...}`` (joint) or ``{"ik_target": [...]}`` (Cartesian) and the step count."""
    if mode not in MODES:
        raise InputError(f"mode must be one of {MODES}, got {mode!r}")
    stream = sys.stdin if stream is None else stream
    if mode == "joint":
        return _joint(task, stream, step, use_degrees, seed, viewer, max_steps)
    return _cartesian(task, stream, action_scale, seed, viewer, max_steps)


def _joint(task, stream, step, use_degrees, seed, viewer, max_steps) -> dict[str, Any]:
    follower = SimFollower(SimFollowerConfig(task=task, use_degrees=use_degrees, camera_names=(), seed=seed,
                                             real_time=stream.isatty()))
    follower.connect()
    if viewer:
        assert follower.env is not None  # connected
        follower.env.render_mode = "human"
    steps = 0
    try:
        targets = follower.present_position()
        with key_periods(stream, follower.config.fps) as periods:
            for keys in driven(periods, max_steps):
                if NEW_EPISODE in keys:
                    follower.reset()
                    targets = follower.present_position()
                targets = joint_targets(targets, keys, step, follower.limits)
                follower.send_action(as_dict(targets))
                steps += 1
        return {**as_dict(follower.present_position()), "steps": steps}
    finally:
        follower.disconnect()


def _cartesian(task, stream, action_scale, seed, viewer, max_steps) -> dict[str, Any]:
    from so101_mjx.gym.task_env import gym_class

    env = gym_class(task)(seed, render_mode="human" if viewer else "rgb_array", action_scale=action_scale)
    env.reset(seed=seed)
    grasp, steps, episode = 1.0, 0, 0
    try:
        with key_periods(stream, env.metadata["render_fps"]) as periods:
            for keys in driven(periods, max_steps):
                if NEW_EPISODE in keys:
                    episode += 1
                    env.reset(seed=seed + episode)
                action, grasp = cartesian_action(keys, grasp)
                env.step(action)
                steps += 1
        return {"ik_target": [float(v) for v in env._target_ee_pos], "grasp": grasp, "steps": steps}
    finally:
        env.close()
