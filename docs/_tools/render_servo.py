"""What the servo model does to a move, for the docs: docs/img/servo_effects.png, the measured position of one
motor (``wrist_flex``) after a step of its target and back, in joint mode at 30 Hz, with ideal servos and with
the servo model's effects added one at a time.

    MUJOCO_GL=egl python docs/_tools/render_servo.py

Each curve is the follower's measurement (``agent_pos``, degrees), what a policy and a LeRobotDataset see.
"""

from __future__ import annotations

from pathlib import Path

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import so101_mjx
from so101_mjx.sim.servo import ServoModel

OUT = Path(__file__).resolve().parents[1] / "img" / "servo_effects.png"
MOTOR = 3  # wrist_flex
STEP = 20.0  # degrees
TICKS = 30  # per phase: one second at 30 Hz
IDEAL = {"backlash": 0.0, "max_velocity": None, "quantize": False}
VARIANTS = {  # label -> servo model (None: ideal position servos)
    "ideal servos (no servo model)": None,
    "velocity limit 4.72 rad/s": ServoModel(**{**IDEAL, "max_velocity": 4.72}),
    "+ backlash 1.3°": ServoModel(**{**IDEAL, "max_velocity": 4.72, "backlash": 0.0227}),
    "+ 3 ticks of latency": ServoModel(**{**IDEAL, "max_velocity": 4.72, "backlash": 0.0227, "delay_ticks": 3}),
    "+ deadband 1°, encoder counts": ServoModel(max_velocity=4.72, backlash=0.0227, delay_ticks=3, deadband=0.0175),
}


def response(servo_model: ServoModel | None) -> tuple[np.ndarray, np.ndarray]:
    """The target and the measured position (degrees) of :data:`MOTOR` at each control tick: held, stepped up by
    :data:`STEP`, then back, :data:`TICKS` ticks each."""
    env = so101_mjx.make("SO101PickCube-v0", "c", control_mode="joint", servo_model=servo_model,
                         episode_length=4 * TICKS)
    state = env.reset(jax.random.PRNGKey(0))
    start = np.asarray(state.obs["agent_pos"] if isinstance(state.obs, dict) else state.obs[:6], np.float64)
    targets = np.repeat(start[None], 3 * TICKS, 0)
    targets[TICKS:2 * TICKS, MOTOR] += STEP
    step = jax.jit(env.step)
    measured = []
    for target in targets:
        state = step(state, jax.numpy.asarray(target, jax.numpy.float32))
        obs = state.obs["agent_pos"] if isinstance(state.obs, dict) else state.obs[:6]
        measured.append(float(obs[MOTOR]))
    return targets[:, MOTOR], np.asarray(measured)


def main() -> None:
    fig, ax = plt.subplots(figsize=(7.5, 3.6), dpi=100)
    t = np.arange(3 * TICKS) / 30.0
    for i, (label, model) in enumerate(VARIANTS.items()):
        target, measured = response(model)
        if i == 0:
            ax.step(t, target, where="post", color="black", linestyle=":", label="target")
        ax.plot(t, measured, label=label, linewidth=1.4)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("wrist_flex, measured (°)")
    ax.set_title("A 20° step of the target and back, joint mode at 30 Hz")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center right")
    fig.tight_layout()
    fig.savefig(OUT)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
