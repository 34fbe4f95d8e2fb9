"""A model of the SO-101's STS3215 servos between the controller's targets and the physics (off by default).

:class:`ServoModel` (``ArmConfig.servo_model``) is applied in the JAX control layer, once per control
tick, so backends ``c`` and ``mjx`` run the same numbers. For each of the six motors (five arm joints,
then the gripper), in this order:

1. **latency**: the servos act on the targets sent ``delay_ticks`` control ticks earlier (a queue of
   targets in ``Info.servo``);
2. **backlash**: a play band ``backlash`` rad wide between the command and the output, the play
   operator: the output stays put until the command has moved half the band away, then follows it at
   that distance (a reversal leaves a gap of the band's width);
3. **velocity limit**: the output moves at most ``max_velocity · control_dt`` rad per tick;
4. **deadband**: a target within ``deadband`` rad of the measured position is replaced by the measured
   position, so the position loop exerts no torque.

The position loop itself (gain and torque limit) is the scene's position actuator: kp 17.8 N·m/rad,
forcerange ±3.35 N·m, MuJoCo Menagerie's ``sts3215`` class. With ``quantize``, observed positions (the
observation's joint angles or motor positions, and joint mode's measured positions that relative targets
add to) are rounded to the encoder's :data:`COUNTS_PER_TURN`. Sources of the defaults: docs/sim2real.md.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
from jax import Array

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError

COUNTS_PER_TURN = 4096  # the STS3215's 12-bit magnetic encoder
RAD_PER_COUNT = 2 * math.pi / COUNTS_PER_TURN
BACKLASH = 14.78 * RAD_PER_COUNT  # rad (1.30°): a published measurement of the STS3215's gear play
NO_LOAD_SPEED = math.radians(60) / 0.222  # rad/s (4.72): the STS3215 datasheet's 0.222 s/60° at 7.4 V
MAX_DELAY_TICKS = 100


@dataclasses.dataclass(frozen=True)
class ServoModel:
    """The servo effects :mod:`so101_mjx.envs.servo` applies; every motor alike. ValueError naming the field
    for a bad value (``servo_model.<field>``)."""

    delay_ticks: int = 0  # control ticks between a target and the servos acting on it
    backlash: float = BACKLASH  # rad, the play band's width
    max_velocity: float | None = NO_LOAD_SPEED  # rad/s, None: no limit
    deadband: float = 0.0  # rad, position error the servo does not act on
    quantize: bool = True  # observed positions in whole encoder counts

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "delay_ticks", checks.integer("servo_model.delay_ticks", self.delay_ticks, ge=0, le=MAX_DELAY_TICKS))
        for name in ("backlash", "deadband"):
            value = checks.real(f"servo_model.{name}", getattr(self, name), unit=" rad")
            if not 0 <= value < math.pi:
                raise InputError(f"servo_model.{name} must be in [0, pi) rad, got {value!r}")
            set_(self, name, value)
        if self.max_velocity is not None:
            set_(self, "max_velocity", checks.real("servo_model.max_velocity", self.max_velocity, gt=0, unit=" rad/s"))
        set_(self, "quantize", checks.flag("servo_model.quantize", self.quantize))


def parse(value: ServoModel | dict | None) -> ServoModel | None:
    """A config's ``servo_model``: None, a :class:`ServoModel`, or its dict form (``asdict``/JSON)."""
    if value is None or isinstance(value, ServoModel):
        return value
    if isinstance(value, dict):
        return checks.dataclass_from_dict(ServoModel, "servo_model", value)
    raise InputError(f"servo_model must be None, a ServoModel or its dict form, got {value!r}")


def initial(model: ServoModel, targets: Array) -> dict[str, Array]:
    """The servo state at reset, every motor at rest on ``targets`` (6,) rad: ``queue``
    (delay_ticks + 1, 6) of the targets sent, oldest first, and ``output`` (6,), the targets acted on."""
    return {"queue": jnp.broadcast_to(targets, (model.delay_ticks + 1, targets.shape[-1])), "output": targets}


def apply(model: ServoModel, state: dict[str, Array], command: Array, measured: Array, control_dt: float
          ) -> tuple[Array, dict[str, Array]]:
    """One control tick: ``(position targets (6,) rad for the physics, the next state)`` for the targets
    ``command`` (6,) rad just sent and the ``measured`` positions (6,) rad."""
    queue = jnp.concatenate([state["queue"][1:], command[None]])
    delayed, previous = queue[0], state["output"]
    output = jnp.clip(previous, delayed - model.backlash / 2, delayed + model.backlash / 2)
    if model.max_velocity is not None:
        reach = model.max_velocity * control_dt
        output = previous + jnp.clip(output - previous, -reach, reach)
    target = jnp.where(jnp.abs(output - measured) <= model.deadband, measured, output) if model.deadband else output
    return target, {"queue": queue, "output": output}


def quantized(q: Array) -> Array:
    """Positions ``q`` (..., n) rad rounded to whole encoder counts."""
    return jnp.round(q / RAD_PER_COUNT) * RAD_PER_COUNT
