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

With ``ranges`` (:class:`ServoRanges`), every reset draws each motor's delay, backlash, velocity limit
and deadband uniformly from their ranges (per world and per episode, from the reset's key); the
draws live in ``Info.servo["params"]``.

The position loop itself (gain and torque limit) is the scene's position actuator: kp 17.8 N·m/rad,
forcerange ±3.35 N·m, MuJoCo Menagerie's ``sts3215`` class. With ``quantize``, observed positions (the
observation's joint angles or motor positions, and joint mode's measured positions that relative targets
add to) are rounded to the encoder's :data:`COUNTS_PER_TURN`. Sources of the defaults: docs/sim2real.md.
"""

from __future__ import annotations

import dataclasses
import math

import jax
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
class ServoRanges:
    """Uniform ranges ``(low, high)`` drawn per motor at every reset; None keeps the model's value.
    ``delay_ticks`` draws whole ticks in [low, high]."""

    delay_ticks: tuple[int, int] | None = None
    backlash: tuple[float, float] | None = None
    max_velocity: tuple[float, float] | None = None
    deadband: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        set_, bounds = object.__setattr__, {"backlash": (0.0, math.pi), "deadband": (0.0, math.pi), "max_velocity": (0.0, 1e3)}
        if self.delay_ticks is not None:
            lo, hi = checks.range_pair("servo_model.ranges.delay_ticks", self.delay_ticks, lowest=0, highest=MAX_DELAY_TICKS)
            if lo != int(lo) or hi != int(hi):
                raise InputError(f"servo_model.ranges.delay_ticks must be whole ticks, got {self.delay_ticks!r}")
            set_(self, "delay_ticks", (int(lo), int(hi)))
        for name, (lowest, highest) in bounds.items():
            if getattr(self, name) is not None:
                pair = checks.range_pair(f"servo_model.ranges.{name}", getattr(self, name), lowest=lowest, highest=highest,
                                         strict=name == "max_velocity")
                if name != "max_velocity" and pair[1] >= highest:
                    raise InputError(f"servo_model.ranges.{name} must stay below pi rad, got {pair}")
                set_(self, name, pair)


@dataclasses.dataclass(frozen=True)
class ServoModel:
    """The servo effects :mod:`so101_mjx.envs.servo` applies: fixed values for every motor, or with
    ``ranges`` per-motor draws at every reset. ValueError naming the field for a bad value
    (``servo_model.<field>``)."""

    delay_ticks: int = 0  # control ticks between a target and the servos acting on it
    backlash: float = BACKLASH  # rad, the play band's width
    max_velocity: float | None = NO_LOAD_SPEED  # rad/s, None: no limit
    deadband: float = 0.0  # rad, position error the servo does not act on
    quantize: bool = True  # observed positions in whole encoder counts
    ranges: ServoRanges | None = None  # per-world, per-episode draws of the four above

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
        set_(self, "ranges", checks.optional_dataclass(ServoRanges, "servo_model.ranges", self.ranges))

    def range_of(self, name: str) -> tuple[float, float]:
        """``(low, high)`` of parameter ``name`` over the episodes (the fixed value twice without a range;
        an unlimited velocity is ``inf``)."""
        drawn = None if self.ranges is None else getattr(self.ranges, name)
        value = getattr(self, name)
        return drawn if drawn is not None else (math.inf, math.inf) if value is None else (value, value)


def parse(value: ServoModel | dict | None) -> ServoModel | None:
    """A config's ``servo_model``: None, a :class:`ServoModel`, or its dict form (``asdict``/JSON)."""
    return checks.optional_dataclass(ServoModel, "servo_model", value)


def initial(model: ServoModel, targets: Array, key: Array) -> dict[str, Array]:
    """The servo state at reset, every motor at rest on ``targets`` (6,) rad: ``queue`` (longest delay + 1, 6)
    of the targets sent, oldest first, ``output`` (6,), the targets acted on, and with ``ranges``
    ``params``, this episode's per-motor draws (from ``key``)."""
    longest = int(model.range_of("delay_ticks")[1])
    state = {"queue": jnp.broadcast_to(targets, (longest + 1, targets.shape[-1])), "output": targets}
    if model.ranges is None:
        return state
    n, dtype = targets.shape[-1], targets.dtype
    k_delay, k_backlash, k_velocity, k_deadband = jax.random.split(key, 4)
    fewest, most = model.range_of("delay_ticks")

    def draw(k: Array, name: str) -> Array:
        lo, hi = model.range_of(name)
        return jnp.full((n,), lo, dtype) if lo == hi else jax.random.uniform(k, (n,), dtype, lo, hi)

    return {**state, "params": {
        "delay_ticks": jax.random.randint(k_delay, (n,), int(fewest), int(most) + 1),
        "backlash": draw(k_backlash, "backlash"), "max_velocity": draw(k_velocity, "max_velocity"),
        "deadband": draw(k_deadband, "deadband"),
    }}


def apply(model: ServoModel, state: dict[str, Array], command: Array, measured: Array, control_dt: float
          ) -> tuple[Array, dict[str, Array]]:
    """One control tick: ``(position targets (6,) rad for the physics, the next state)`` for the targets
    ``command`` (6,) rad just sent and the ``measured`` positions (6,) rad."""
    queue = jnp.concatenate([state["queue"][1:], command[None]])
    previous, drawn = state["output"], state.get("params")
    if drawn is None:  # fixed values, known when tracing: a neutral effect costs nothing
        delayed, backlash, velocity, deadband = queue[0], model.backlash, model.max_velocity, model.deadband
    else:
        delayed = jnp.take_along_axis(queue, (queue.shape[0] - 1 - drawn["delay_ticks"])[None], axis=0)[0]
        backlash, velocity, deadband = drawn["backlash"], drawn["max_velocity"], drawn["deadband"]
    output = jnp.clip(previous, delayed - backlash / 2, delayed + backlash / 2)
    if velocity is not None:
        reach = velocity * control_dt
        output = previous + jnp.clip(output - previous, -reach, reach)
    target = jnp.where(jnp.abs(output - measured) <= deadband, measured, output) if drawn is not None or deadband else output
    return target, {**state, "queue": queue, "output": output}


def quantized(q: Array) -> Array:
    """Positions ``q`` (..., n) rad rounded to whole encoder counts."""
    return jnp.round(q / RAD_PER_COUNT) * RAD_PER_COUNT
