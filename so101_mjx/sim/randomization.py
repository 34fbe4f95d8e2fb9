"""Domain randomization: per-world model parameters sampled at every reset.

A :class:`Randomization` gives uniform ranges of *scale factors* for the block's friction, mass
and size, the position actuators' gain (kp) and the joints' damping. :func:`sample` draws one
world's parameters as a dict of model arrays; envs keep them in ``state.info.model_params``
and both physics backends apply them on every step (``mjx``: a per-world ``mjx.Model`` under
``vmap``; ``c``: written into a per-thread ``MjModel`` before each world is stepped). Because they
are drawn in ``reset``, every episode of every world gets new ones on either backend.

Derived quantities that MuJoCo computes at compile time from these (``body_invweight0``,
``dof_invweight0``, used to scale constraint impedance) are not recomputed, as in MuJoCo
Playground's randomizers; the block's inertia is scaled with mass·size².
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array

from so101_mjx import _checks as checks

MAX_SCALE = 10.0  # largest scale factor a range may reach
FIELDS = ("geom_friction", "body_mass", "body_inertia", "geom_size", "geom_rbound", "geom_aabb", "actuator_gainprm",
          "actuator_biasprm", "dof_damping")


@dataclasses.dataclass(frozen=True)
class Randomization:
    """Uniform ranges (low, high) of scale factors; (1, 1) leaves a quantity as modelled."""

    block_friction: tuple[float, float] = (1.0, 1.0)
    block_mass: tuple[float, float] = (1.0, 1.0)
    block_size: tuple[float, float] = (1.0, 1.0)
    actuator_gain: tuple[float, float] = (1.0, 1.0)
    joint_damping: tuple[float, float] = (1.0, 1.0)

    def __post_init__(self) -> None:
        """Check every range and store it as a ``(float, float)`` tuple (lists from JSON accepted)."""
        for f in dataclasses.fields(self):
            pair = checks.range_pair(f"randomization.{f.name}", getattr(self, f.name), lowest=0, highest=MAX_SCALE,
                                     strict=True, what=" (scale factors)")
            object.__setattr__(self, f.name, pair)


def parse(value: Randomization | dict | None) -> Randomization | None:
    """A config's ``randomization``: None, a :class:`Randomization`, or its dict form (``asdict``/JSON)."""
    return checks.optional_dataclass(Randomization, "randomization", value)


def sample(model: mujoco.MjModel, config: Randomization, rng: Array, dtype) -> dict[str, Array]:
    """One world's randomized model arrays (keys in :data:`FIELDS`), shapes as in the model."""
    keys = jax.random.split(rng, 5)
    draw = lambda k, r: jax.random.uniform(k, (), dtype, r[0], r[1])  # noqa: E731
    friction, mass, size, gain, damping = (draw(k, getattr(config, f.name))
                                           for k, f in zip(keys, dataclasses.fields(config)))
    c = lambda x: jnp.asarray(np.asarray(x), dtype)  # noqa: E731
    g, b = block_ids(model)
    gain_col = jnp.zeros(model.actuator_gainprm.shape[1], dtype).at[0].set(1.0)
    bias_col = jnp.zeros(model.actuator_biasprm.shape[1], dtype).at[1].set(1.0)
    gainprm, biasprm = c(model.actuator_gainprm), c(model.actuator_biasprm)
    if g < 0:  # no block: only the arm's quantities vary
        friction = mass = size = jnp.ones((), dtype)
        g, b = 0, 0
    return {
        "geom_friction": c(model.geom_friction).at[g, 0].multiply(friction),
        "body_mass": c(model.body_mass).at[b].multiply(mass),
        "body_inertia": c(model.body_inertia).at[b].multiply(mass * size**2),
        "geom_size": c(model.geom_size).at[g].multiply(size),
        "geom_rbound": c(model.geom_rbound).at[g].multiply(size),
        "geom_aabb": c(model.geom_aabb).at[g].multiply(size),
        "actuator_gainprm": gainprm * (1 + (gain - 1) * gain_col),  # kp
        "actuator_biasprm": biasprm * (1 + (gain - 1) * bias_col),  # -kp
        "dof_damping": c(model.dof_damping) * damping,
    }


def block_ids(model: mujoco.MjModel) -> tuple[int, int]:
    """(geom id, body id) of the block, or (-1, -1) in scenes without one: scaling then touches nothing."""
    names = {model.geom(i).name for i in range(model.ngeom)}
    return (model.geom("block").id, model.body("block").id) if "block" in names else (-1, -1)


def nominal(model: mujoco.MjModel, dtype) -> dict[str, Array]:
    """The unrandomized arrays (what :func:`sample` returns for all-ones ranges)."""
    return {name: jnp.asarray(np.asarray(getattr(model, name)), dtype) for name in FIELDS}
