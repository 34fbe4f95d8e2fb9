"""A servo-model fit drawn, for the docs: docs/img/sysid_fit.png, the elbow's excitation recorded in the simulator
under known, non-default servo parameters, then fitted from the defaults (``so101-mjx sysid``'s fit and plot).

    MUJOCO_GL=egl python docs/_tools/render_sysid.py

It prints the true and fitted parameters beside each other.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from so101_mjx.robot import motors
from so101_mjx.sim.servo import ServoModel
from so101_mjx.sysid import command, fit

OUT = Path(__file__).resolve().parents[1] / "img" / "sysid_fit.png"
TASK = "SO101Reach-v0"
ELBOW = motors.MOTORS.index("elbow_flex")
TRUE = {"delay_ticks": 2, "backlash": 0.035, "max_velocity": 3.0, "deadband": 0.008, "kp": 24.0, "damping": 0.9}


def main() -> None:
    jax.config.update("jax_enable_x64", True)  # the fit compares positions to a fraction of an encoder count
    recorded = fit.simulated(ServoModel(**TRUE), (ELBOW,), TASK)
    found = fit.identify(recorded, task=TASK, backend="c", motors_fitted=(ELBOW,), population=32, iterations=10)
    for name, true in TRUE.items():
        print(f"{name}: true {true}, fitted {np.asarray(found.value[name])[ELBOW]:.4g}")
    command.plot(str(OUT), found, recorded, TASK, "c")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
