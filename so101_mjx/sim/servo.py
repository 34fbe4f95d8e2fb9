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
   position, so the position loop exerts no torque;
5. **voltage sag** (with ``voltage_sag``, :class:`VoltageSag`): the shared supply's voltage drops under
   the six motors' load, and the velocity limit and the torque limit shrink with it (:func:`sagged`).

Each of the four is one value for every motor or a tuple of six, one per motor (what ``so101-mjx
sysid`` fits). With ``ranges`` (:class:`ServoRanges`), every reset draws each motor's delay, backlash,
velocity limit and deadband uniformly from their ranges (per world and per episode, from the reset's
key); the draws live in ``Info.servo["params"]``.

The position loop itself is the scene's position actuator: kp 17.8 N·m/rad, joint damping 0.6 N·m·s/rad,
torque limit ±3.35 N·m, MuJoCo Menagerie's ``sts3215`` class. ``kp``, ``damping`` and ``torque_limit``
replace them (:func:`set_position_loop`, applied to the model before either backend is built). With
``quantize``, observed positions (the observation's joint angles or motor positions, and joint mode's
measured positions that relative targets add to) are rounded to the encoder's :data:`COUNTS_PER_TURN`.
Each field is bounded to a physically plausible range (:data:`MAX_BAND`, :data:`LOOP_LIMITS`, :data:`MAX_SAG`, ...):
a value outside it is an InputError naming the field and the range. Sources of the defaults: docs/sim2real.md.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from jax import Array
from jax.typing import ArrayLike, DTypeLike

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.robot.calibration import COUNTS_PER_TURN  # the STS3215's 12-bit magnetic encoder

RAD_PER_COUNT = 2 * math.pi / COUNTS_PER_TURN
BACKLASH = 14.78 * RAD_PER_COUNT  # rad (1.30°): the STS3215's output backlash under load (Kotov, Robonine, 2025)
NO_LOAD_SPEED = math.radians(60) / 0.222  # rad/s (4.72): the STS3215 datasheet's 0.222 s/60° at 7.4 V
MAX_DELAY_TICKS = 100
# physically plausible bounds of the fields (an STS3215's values lie far inside; a value past them is a unit error)
MAX_BAND = 0.5  # rad (29°): backlash and deadband
MAX_VELOCITY = 100.0  # rad/s: velocity limit
MAX_KP = 1000.0  # N·m/rad: position-loop gain (56x the scene's 17.8)
MAX_DAMPING = 100.0  # N·m·s/rad: joint damping
MAX_TORQUE = 30.0  # N·m: torque limit (9x the scene's 3.35)
MAX_SAG = 1.0  # 1/(N·m): voltage_sag.per_torque, the whole supply lost at 1 N·m of load
MAX_SAG_TIME = 1.0  # s: voltage_sag.time_constant
LOOP_LIMITS = {"max_velocity": (" rad/s", MAX_VELOCITY), "kp": (" N·m/rad", MAX_KP),
               "damping": (" N·m·s/rad", MAX_DAMPING),
               "torque_limit": (" N·m", MAX_TORQUE)}  # unit, highest; every one > 0 except the damping (>= 0)
N_MOTORS = 6  # the five arm joints, then the gripper (robot.motors.MOTORS)
PerMotor = float | tuple[float, ...]  # one value for every motor, or one per motor
# the servo state (Info.servo): "queue", "output" and "supply" arrays; with ranges, "params" a dict of (6,) arrays
ServoState = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class ServoRanges:
    """Uniform ranges ``(low, high)`` drawn per motor at every reset; None keeps the model's value.
    ``delay_ticks`` draws whole ticks in [low, high]."""

    delay_ticks: tuple[int, int] | None = None
    backlash: tuple[float, float] | None = None
    max_velocity: tuple[float, float] | None = None
    deadband: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        set_, bounds = object.__setattr__, {"backlash": (0.0, MAX_BAND), "deadband": (0.0, MAX_BAND),
                                            "max_velocity": (0.0, MAX_VELOCITY)}
        if self.delay_ticks is not None:
            lo, hi = checks.range_pair("servo_model.ranges.delay_ticks", self.delay_ticks, lowest=0,
                                       highest=MAX_DELAY_TICKS)
            if lo != int(lo) or hi != int(hi):
                raise InputError(f"servo_model.ranges.delay_ticks must be whole ticks, got {self.delay_ticks!r}")
            set_(self, "delay_ticks", (int(lo), int(hi)))
        for name, (lowest, highest) in bounds.items():
            if getattr(self, name) is not None:
                pair = checks.range_pair(f"servo_model.ranges.{name}", getattr(self, name), lowest=lowest,
                                         highest=highest, strict=name == "max_velocity",
                                         what=" rad/s" if name == "max_velocity" else " rad")
                set_(self, name, pair)


@dataclasses.dataclass(frozen=True)
class VoltageSag:
    """A first-order sag of the servos' shared supply under load. Each tick the supply's voltage moves
    towards ``1 - per_torque · Σ|τ|`` of its nominal value (Σ|τ| N·m: the six position loops' torques at
    the tick's start, to which the bus current is proportional), with time constant ``time_constant`` s.
    The velocity limit and the torque limit scale with the fraction left, as a DC motor's no-load speed
    and stall torque scale with its voltage."""

    per_torque: float  # 1/(N·m): the fraction of the supply voltage lost per N·m of total load torque
    time_constant: float = 0.0  # s; 0: the sag follows the load within the tick

    def __post_init__(self) -> None:
        object.__setattr__(self, "per_torque",
                           checks.real("servo_model.voltage_sag.per_torque", self.per_torque, unit=" 1/(N·m)",
                                                           ge=0, le=MAX_SAG))
        object.__setattr__(self, "time_constant",
                           checks.real("servo_model.voltage_sag.time_constant", self.time_constant, unit=" s",
                                                              ge=0, le=MAX_SAG_TIME))


@dataclasses.dataclass(frozen=True)
class ServoModel:
    """The servo effects :mod:`so101_mjx.sim.servo` applies: fixed values (one for every motor or six, one
    per motor) or with ``ranges`` per-motor draws at every reset. ValueError naming the field for a bad
    value (``servo_model.<field>``)."""

    delay_ticks: int | tuple[int, ...] = 0  # control ticks between a target and the servos acting on it
    backlash: PerMotor = BACKLASH  # rad, the play band's width
    max_velocity: PerMotor | None = NO_LOAD_SPEED  # rad/s, None: no limit
    deadband: PerMotor = 0.0  # rad, position error the servo does not act on
    quantize: bool = True  # observed positions in whole encoder counts
    ranges: ServoRanges | None = None  # per-world, per-episode draws of the four above
    kp: PerMotor | None = None  # N·m/rad, the position loop's gain; None: the scene's (17.8)
    damping: PerMotor | None = None  # N·m·s/rad, the joints' damping; None: the scene's (0.6)
    torque_limit: PerMotor | None = None  # N·m, the position loop's torque limit; None: the scene's (3.35)
    voltage_sag: VoltageSag | None = None  # None: the supply holds its voltage

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "delay_ticks", per_motor("servo_model.delay_ticks", self.delay_ticks,
                                            lambda n, v: checks.integer(n, v, ge=0, le=MAX_DELAY_TICKS)))
        for name in ("backlash", "deadband"):
            set_(self, name, per_motor(f"servo_model.{name}", getattr(self, name),
                                       lambda n, v: checks.real(n, v, unit=" rad", ge=0, le=MAX_BAND)))
        for name, (unit, highest) in LOOP_LIMITS.items():
            if getattr(self, name) is not None:
                lowest = {"ge": 0} if name == "damping" else {"gt": 0}
                set_(self, name, per_motor(
                    f"servo_model.{name}", getattr(self, name),
                    lambda n, v, u=unit, lo=lowest, hi=highest: checks.real(n, v, unit=u, le=hi, **lo)))
        set_(self, "quantize", checks.flag("servo_model.quantize", self.quantize))
        set_(self, "ranges", checks.optional_dataclass(ServoRanges, "servo_model.ranges", self.ranges))
        set_(self, "voltage_sag", checks.optional_dataclass(VoltageSag, "servo_model.voltage_sag", self.voltage_sag))

    def range_of(self, name: str) -> tuple[float, float]:
        """``(low, high)`` of parameter ``name`` over the motors and episodes (an unlimited velocity is ``inf``)."""
        drawn = None if self.ranges is None else getattr(self.ranges, name)
        value = getattr(self, name)
        if drawn is not None:
            return drawn
        values = np.atleast_1d(np.inf if value is None else np.asarray(value, float))
        return float(values.min()), float(values.max())


def per_motor(name: str, value, check) -> float | int | tuple:
    """``value`` checked by ``check(name, v)``: one value, or a sequence of :data:`N_MOTORS` (a tuple;
    ``name[i]`` in its errors)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        if len(value) != N_MOTORS:
            raise InputError(f"{name} must be one value or {N_MOTORS}, one per motor, got {len(value)}: "
                             f"{list(value)!r}")
        return tuple(check(f"{name}[{i}]", v) for i, v in enumerate(value))
    return check(name, value)


def parse(value: ServoModel | dict | None) -> ServoModel | None:
    """A config's ``servo_model``: None, a :class:`ServoModel`, or its dict form (``asdict``/JSON)."""
    return checks.optional_dataclass(ServoModel, "servo_model", value)


def initial(model: ServoModel, targets: Array, key: Array) -> ServoState:
    """The servo state at reset, every motor at rest on ``targets`` (6,) rad: ``queue`` (longest delay + 1, 6)
    of the targets sent, oldest first, ``output`` (6,), the targets acted on, with ``voltage_sag`` the
    ``supply`` (), the fraction of its voltage left, and with ``ranges`` ``params``, this episode's
    per-motor draws (from ``key``)."""
    longest = int(model.range_of("delay_ticks")[1])
    state: ServoState = {"queue": jnp.broadcast_to(targets, (longest + 1, targets.shape[-1])), "output": targets}
    if model.voltage_sag is not None:
        state["supply"] = jnp.ones((), targets.dtype)
    if model.ranges is None:
        return state
    n, dtype = targets.shape[-1], targets.dtype

    def draw(k: Array, name: str) -> Array:
        drawn, whole = getattr(model.ranges, name), name == "delay_ticks"
        if drawn is None:  # the model's fixed value(s)
            value = getattr(model, name)
            return jnp.broadcast_to(jnp.asarray(math.inf if value is None else value,
                                                jnp.int32 if whole else dtype), (n,))
        if whole:
            return jax.random.randint(k, (n,), drawn[0], drawn[1] + 1)
        return jax.random.uniform(k, (n,), dtype, drawn[0], drawn[1])

    names = ("delay_ticks", "backlash", "max_velocity", "deadband")
    return {**state, "params": {name: draw(k, name) for k, name in zip(jax.random.split(key, 4), names, strict=True)}}


def apply(model: ServoModel, state: ServoState, command: Array, measured: Array, control_dt: float,
          load: Array | None = None) -> tuple[Array, ServoState]:
    """One control tick: ``(position targets (6,) rad for the physics, the next state)`` for the targets
    ``command`` (6,) rad just sent, the ``measured`` positions (6,) rad and, with ``voltage_sag``, the
    position loops' torques ``load`` (6,) N·m at the tick's start."""
    if model.voltage_sag is not None:
        assert load is not None  # the caller passes the torques with voltage_sag
        state = {**state, "supply": supply_left(model.voltage_sag, state["supply"], load, control_dt)}
    queue = jnp.concatenate([state["queue"][1:], command[None]])
    previous, drawn = state["output"], state.get("params")
    if drawn is None:  # fixed values, known when tracing: a neutral effect costs nothing
        delays = np.broadcast_to(model.delay_ticks, (N_MOTORS,))
        delayed = queue[queue.shape[0] - 1 - delays, np.arange(N_MOTORS)]
        backlash, deadband = _fixed(model.backlash, command.dtype), _fixed(model.deadband, command.dtype)
        velocity = None if model.max_velocity is None else _fixed(model.max_velocity, command.dtype)
    else:
        delayed = jnp.take_along_axis(queue, (queue.shape[0] - 1 - drawn["delay_ticks"])[None], axis=0)[0]
        backlash, velocity, deadband = drawn["backlash"], drawn["max_velocity"], drawn["deadband"]
    output = jnp.clip(previous, delayed - backlash / 2, delayed + backlash / 2)
    if velocity is not None:
        reach = velocity * control_dt * state.get("supply", 1.0)
        output = previous + jnp.clip(output - previous, -reach, reach)
    acts = drawn is not None or np.any(np.asarray(model.deadband) > 0)
    target = jnp.where(jnp.abs(output - measured) <= deadband, measured, output) if acts else output
    return target, {**state, "queue": queue, "output": output}


def _fixed(value: PerMotor, dtype: DTypeLike) -> float | Array:
    """A fixed field as :func:`apply` uses it: one value as it is, one per motor (a tuple) as an array."""
    return jnp.asarray(value, dtype) if isinstance(value, tuple) else value


def supply_left(sag: VoltageSag, supply: Array, load: Array, control_dt: float) -> Array:
    """The supply's fraction of its voltage () after one tick from ``supply``, under the torques ``load`` (6,) N·m."""
    settled = jnp.clip(1.0 - sag.per_torque * jnp.sum(jnp.abs(load)), 0.0, 1.0)
    rate = 1.0 if sag.time_constant == 0 else -math.expm1(-control_dt / sag.time_constant)
    return supply + rate * (settled - supply)


def sagged(model: ServoModel, state: ServoState, params: dict[str, Array] | None, forcerange: np.ndarray,
           actuators: np.ndarray) -> dict[str, Array] | None:
    """The per-world model arrays ``params`` for this tick: with ``voltage_sag``, the model's
    ``forcerange`` (nu, 2) N·m with the ``actuators``' rows scaled by the supply left."""
    if model.voltage_sag is None:
        return params
    limits = jnp.asarray(forcerange, state["supply"].dtype).at[actuators].multiply(state["supply"])
    return {**(params or {}), "actuator_forcerange": limits}


def quantized(q: Array) -> Array:
    """Positions ``q`` (..., n) rad rounded to whole encoder counts."""
    return jnp.round(q / RAD_PER_COUNT) * RAD_PER_COUNT


def position_loop(actuators: np.ndarray, dofs: np.ndarray, kp=None, damping=None,
                  torque_limit=None) -> list[tuple[str, tuple | np.ndarray, ArrayLike]]:
    """The model entries ``(field, index, value)`` that set the position loop's ``kp`` N·m/rad, the joints'
    ``damping`` N·m·s/rad and the ``torque_limit`` N·m (each an array, one value or (6,); None leaves it) of
    the position actuators ``actuators`` (6,) and their joints' ``dofs`` (6,): for an MjModel in place
    (:func:`set_position_loop`) or per-world JAX arrays (``sysid``)."""
    entries: list[tuple[str, tuple | np.ndarray, ArrayLike]] = []
    if kp is not None:
        entries += [("actuator_gainprm", (actuators, 0), kp), ("actuator_biasprm", (actuators, 1), -kp)]
    if damping is not None:
        entries.append(("dof_damping", dofs, damping))
    if torque_limit is not None:
        entries += [("actuator_forcerange", actuators,
                     np.stack(np.broadcast_arrays(-torque_limit, torque_limit), axis=-1)),
                    ("actuator_forcelimited", actuators, 1)]
    return entries


def set_position_loop(mj_model: mujoco.MjModel, model: ServoModel, actuators: np.ndarray) -> None:
    """Write ``model``'s ``kp``, ``damping`` and ``torque_limit`` (those not None) into ``mj_model`` in
    place, for the position actuators ``actuators`` (6,) (the motors' order) and the joints they drive."""
    dofs = mj_model.jnt_dofadr[mj_model.actuator_trnid[actuators, 0]]
    array = lambda v: None if v is None else np.asarray(v, float)  # noqa: E731
    for name, index, value in position_loop(actuators, dofs, array(model.kp), array(model.damping),
                                            array(model.torque_limit)):
        getattr(mj_model, name)[index] = value
