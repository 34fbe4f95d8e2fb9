"""Identification of the servo model's per-motor parameters from commanded and measured positions.

The commands of a recording are replayed in ``population`` simulated worlds at once (one ``vmap`` over
worlds, on either backend), each world with its own candidate parameters for every motor: the servo
model's ``delay_ticks``, ``backlash``, ``max_velocity`` and ``deadband`` (:mod:`so101_mjx.sim.servo`)
and the position loop's ``kp`` and the joints' ``damping``. A candidate's cost for one motor is the mean
squared difference between its simulated and the recorded measured positions of that motor.

The search starts from :data:`DEFAULTS` with the cross-entropy method, per motor: each iteration draws
a population around each motor's mean (log-normal for the positive scales ``max_velocity``, ``kp`` and
``damping``, normal and clipped at zero for the bands ``backlash`` and ``deadband``, a categorical
distribution for the whole-tick delay), keeps the ``elites`` with the lowest cost for that motor and
refits the motor's distribution to them. Coordinate sweeps (:func:`refine`) then refine the result, and a
short search around it with small spreads polishes it.
Neither needs a gradient: the deadband, backlash, delay and encoder counts make the cost piecewise flat
in the parameters, which defeats gradient descent, while the batched simulator evaluates a whole
population per replay.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from so101_mjx import _checks as checks, _progress
from so101_mjx.envs import make
from so101_mjx.errors import InputError
from so101_mjx.robot import motors
from so101_mjx.sim import servo
from so101_mjx.sim.randomization import Randomization
from so101_mjx.sysid import excitation

PARAMETERS = ("delay_ticks", "backlash", "max_velocity", "deadband", "kp", "damping")
SERVO_PARAMETERS = PARAMETERS[:4]
# where candidates are drawn (and clipped): (low, high) (Any: whole ticks for delay_ticks, floats otherwise)
SEARCH: dict[str, tuple[Any, Any]] = {"delay_ticks": (0, 6), "backlash": (0.0, 0.2), "max_velocity": (0.3, 30.0),
                                      "deadband": (0.0, 0.1), "kp": (1.0, 200.0), "damping": (0.01, 10.0)}
# the search's start: the servo model's and the scene's defaults (Any: an int for delay_ticks, floats otherwise)
DEFAULTS: dict[str, Any] = {"delay_ticks": 0, "backlash": servo.BACKLASH, "max_velocity": servo.NO_LOAD_SPEED,
                            "deadband": 0.0, "kp": 17.8, "damping": 0.6}
LOG_SCALE = ("max_velocity", "kp", "damping")
SPREAD = {"backlash": 0.03, "deadband": 0.01, "max_velocity": 0.6, "kp": 0.6, "damping": 0.8}  # rad, or log units
FLOOR = {"backlash": 2e-4, "deadband": 1e-4, "max_velocity": 0.005, "kp": 0.005, "damping": 0.005}  # smallest spread
PHYSICS_RATE = 480  # Hz, joint mode's default physics rate
SMOOTHING = 0.3  # weight of the previous distribution in each update
# relative, first sweep
SWEEP_WIDTH = {"backlash": 0.5, "deadband": 0.5, "max_velocity": 0.3, "kp": 0.3, "damping": 0.3}
DELAY_GAIN_WIDTH = 0.7  # log units: the gains tried with each delay in the first sweep (x/ 2)
# log, or relative
POLISH_SPREAD = {"max_velocity": 0.03, "kp": 0.03, "damping": 0.03, "backlash": 0.1, "deadband": 0.1}
PROFILE = 0.05  # a profile interval holds the values whose rms residual is within 5 % of the best
SWEEP_MIN = {"backlash": 0.004, "deadband": 0.004}  # rad: the first sweep's half-width at least this


@dataclasses.dataclass(frozen=True)
class Recording:
    """Episodes of commanded targets and measured positions at ``fps``: pairs ``(commands (T, 6),
    measured (T, 6))`` rad, the measurement at frame t read before command t was sent."""

    fps: float
    episodes: tuple[tuple[np.ndarray, np.ndarray], ...]


@dataclasses.dataclass(frozen=True)
class Identified:
    """The fit: per parameter ``value`` (6,) per motor and ``interval`` (6, 2), the profile interval of the
    last coordinate sweep (the range of the search's last elites without sweeps);
    ``rms`` (6,) rad, each motor's residual; ``history`` the best cost (6,) per iteration."""

    value: dict[str, np.ndarray]
    interval: dict[str, np.ndarray]
    rms: np.ndarray
    history: np.ndarray
    motors: tuple[int, ...]

    def servo_model(self) -> dict:
        """The fitted values as ``ServoModel`` fields (one per motor; checked by it): what env configs and
        ``--servo-model`` take."""
        # lists (JSON's form): ServoModel checks them and makes its tuples (Any: its fields are typed as those)
        fields: dict[str, Any] = {k: [int(v) for v in self.value[k]] if k == "delay_ticks"
                                  else [float(v) for v in self.value[k]] for k in PARAMETERS}
        servo.ServoModel(**fields)
        return fields


def simulated(model: servo.ServoModel, moved: tuple[int, ...], task: str = "SO101Reach-v0") -> Recording:
    """The excitation of the motors ``moved`` (:func:`~so101_mjx.sysid.excitation.trajectory`) recorded in
    ``task``'s scene on backend ``c`` in joint mode (30 Hz) under servo ``model``, from the task's reset: a recording
    whose true parameters are known."""
    env = make(task, "c", control_mode="joint", servo_model=model)
    fps = 1.0 / env.config.periods()[0]
    state = env.reset(jax.random.PRNGKey(0))
    commands = excitation.trajectory(np.asarray(env.arm.motor_q(state.physics)), env.arm.motor_ranges, fps, moved)

    def tick(s, command):
        return env.step(s, motors.to_motor(command, env.arm.motor_ranges, "degrees")), env.arm.motor_q(s.physics)

    measured = jax.jit(lambda s, c: jax.lax.scan(tick, s, c)[1])(state, jnp.asarray(commands))
    return Recording(fps, ((commands, np.asarray(measured)),))


def replay_env(task: str, fps: float, backend: str | None):
    """The env the candidates are simulated in: ``task``'s scene in joint mode at ``fps``, with the servo
    model drawing per-world parameters (overwritten by :func:`replayer`) and per-world model arrays."""
    ranges = servo.ServoRanges(**{k: SEARCH[k] for k in SERVO_PARAMETERS})
    substeps = max(1, round(PHYSICS_RATE / fps))  # physics steps per control tick, near the joint mode's 480 Hz
    return make(task, backend, control_mode="joint", control_dt=1.0 / fps, physics_dt=1.0 / (fps * substeps),
                servo_model=servo.ServoModel(ranges=ranges), randomization=Randomization())


def replayer(env):
    """Jitted ``(commands (T, 6) rad, start (6,) rad, candidates {name: (W, 6)}) -> measured (W, T, 6) rad``:
    every world at rest at ``start`` with its candidate parameters, then the commands one per control tick."""
    arm = env.arm
    actuators = arm.motor_ctrl_ids
    dofs = arm.actuated_dof[actuators]

    def world(commands, start, candidate):
        state = env.reset(jax.random.PRNGKey(0))
        params = state.info.model_params
        params = dict(params)
        for name, index, value in servo.position_loop(actuators, dofs, candidate["kp"], candidate["damping"]):
            params[name] = params[name].at[index].set(value)
        drawn = {k: candidate[k].astype(state.info.servo["params"][k].dtype) for k in SERVO_PARAMETERS}
        servo_state = {**servo.initial(arm.servo_model, start, jax.random.PRNGKey(0)), "params": drawn}
        state = state.replace(physics=arm.at_rest(state.physics, start),
                              info=state.info.replace(model_params=params, servo=servo_state))
        to_motor = lambda q: arm.joint_mode.to_motor(q, arm.motor_ranges)  # noqa: E731

        def tick(s, command):
            return env.step(s, to_motor(command)), arm.motor_q(s.physics)

        return jax.lax.scan(tick, state, commands)[1]

    return jax.jit(jax.vmap(world, in_axes=(None, None, 0)))


def check_population(env, population: int, frames: int) -> None:
    """ParameterError naming ``population`` unless ``population`` worlds replaying ``frames`` control ticks fit the
    memory (the backend's: the device for ``mjx``). Per world: its State twice, and per tick the simulated
    positions, their error and its square (6 float64 each); per parameter its candidates and elites."""
    state = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(jax.eval_shape(env.reset, jax.random.PRNGKey(0))))
    per_world = 2 * state + frames * 3 * 6 * 8 + len(PARAMETERS) * 3 * 6 * 8
    checks.fits_memory(f"population = {population}", population * per_world,
                       f"{per_world:,} B per world replaying {frames} ticks", device=env.backend == "mjx",
                       parameters=("population",))


def _draw(rng: np.random.Generator, mean: dict, spread: dict, delay_p: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """``n`` candidates {name: (n, 6)} from the per-motor distributions."""
    out = {}
    for k in PARAMETERS[1:]:
        x = rng.normal(mean[k], spread[k], (n, len(mean[k])))
        out[k] = np.clip(np.exp(x) if k in LOG_SCALE else x, *SEARCH[k])
    cumulative = np.cumsum(delay_p, axis=1)  # (6, D + 1)
    out["delay_ticks"] = np.minimum((rng.random((n, len(delay_p)))[..., None] > cumulative).sum(-1),
                                    delay_p.shape[1] - 1)
    return out


def cost(replay, recording: Recording, candidates: dict[str, np.ndarray]) -> np.ndarray:
    """Mean squared error (W, 6) rad² of each candidate's simulated measurements, over every episode's frames."""
    total, frames = 0.0, 0
    for commands, measured in recording.episodes:
        simulated = np.asarray(replay(jnp.asarray(commands), jnp.asarray(measured[0]),
                                      jax.tree.map(jnp.asarray, candidates)))
        total = total + ((simulated - measured[None]) ** 2).sum(1)
        frames += len(commands)
    return cast(np.ndarray, total / frames)  # an array: a recording has episodes (none: frames is 0)


@dataclasses.dataclass
class Search:
    """The cross-entropy search's state: per parameter the per-motor ``mean`` and ``spread`` (6,) (log units
    for :data:`LOG_SCALE`), the delay's distribution ``delay_p`` (6, D + 1), the last elites ``chosen``
    {name: (E, 6)}, the best cost per iteration ``history`` and the best candidate seen per motor."""

    mean: dict[str, np.ndarray]
    spread: dict[str, np.ndarray]
    delay_p: np.ndarray
    chosen: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    history: list = dataclasses.field(default_factory=list)
    best: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    best_cost: np.ndarray | None = None

    def value(self) -> dict[str, np.ndarray]:
        """The distribution's centre: the means (6,), and the delay's mode."""
        out = {k: np.exp(m) if k in LOG_SCALE else m for k, m in self.mean.items()}
        return {"delay_ticks": self.delay_p.argmax(1), **out}


def search(replay, recording: Recording, s: Search, fitted: np.ndarray, rng: np.random.Generator, *, population: int,
           elites: int, iterations: int, stage: str, progress=None, solo: bool = False) -> Search:
    """``iterations`` of the per-motor cross-entropy method from ``s`` (updated in place and returned). With
    ``solo`` each world varies one motor (world w motor w mod 6), the others at the distribution's centre,
    so that a motor's cost does not carry the other motors' variations through the arm's coupling."""
    delays = s.delay_p.shape[1]
    owner = np.arange(population)[:, None] % 6 == np.arange(6) if solo else np.ones((population, 6), bool)
    for i in range(iterations):
        candidates, centre = _draw(rng, s.mean, s.spread, s.delay_p, population), s.value()
        candidates = {k: np.where(owner, v, centre[k]) for k, v in candidates.items()}
        costs = cost(replay, recording, candidates)  # (P, 6)
        best = np.argsort(np.where(owner, costs, np.inf), axis=0)[:elites]  # (E, 6) per motor
        s.chosen = {k: np.take_along_axis(v, best, axis=0) for k, v in candidates.items()}  # (E, 6)
        for k in PARAMETERS[1:]:
            x = np.log(s.chosen[k]) if k in LOG_SCALE else s.chosen[k]
            s.mean[k] = np.where(fitted, SMOOTHING * s.mean[k] + (1 - SMOOTHING) * x.mean(0), s.mean[k])
            s.spread[k] = np.where(fitted,
                                   np.maximum(SMOOTHING * s.spread[k] + (1 - SMOOTHING) * x.std(0), FLOOR[k]), 0.0)
        counts = (s.chosen["delay_ticks"][..., None] == np.arange(delays)).mean(0)  # (6, D + 1)
        s.delay_p = np.where(fitted[:, None], SMOOTHING * s.delay_p + (1 - SMOOTHING) * counts, s.delay_p)
        lowest = costs[best[0], np.arange(6)]
        better = lowest < (np.inf if s.best_cost is None else s.best_cost)
        s.best = {k: np.where(better, v[0], s.best.get(k, v[0])) for k, v in s.chosen.items()}
        s.best_cost = np.where(better, lowest, np.inf if s.best_cost is None else s.best_cost)
        s.history.append(lowest)
        if progress is not None:
            progress(f"{stage} {i + 1}/{iterations}", lowest)
    return s


def identify(recording: Recording, *, task: str = "SO101Reach-v0", backend: str | None = None, population: int = 64,
             elites: int = 8, iterations: int = 12, sweeps: int = 3, polish: int = 4,
             motors_fitted: tuple[int, ...] = tuple(range(6)), seed: int = 0, progress=None) -> Identified:
    """Fit every parameter of :data:`PARAMETERS` for the motors ``motors_fitted`` (the others keep
    :data:`DEFAULTS`) to ``recording``, starting from :data:`DEFAULTS`: the search, ``sweeps`` coordinate
    sweeps, then ``polish`` search iterations from the swept fit with :data:`POLISH_SPREAD`, one motor varied
    per world (a motor keeps its best candidate if it beats the sweeps). ``progress(stage, best cost (6,))`` is called
    after each iteration and sweep (``stage``: ``"search 3/12"``, ``"sweep 1/3"``, ``"polish 2/4"``)."""
    if not 2 <= elites < population:
        raise InputError(f"elites must be at least 2 and fewer than population ({population}), got {elites}")
    if iterations < 1:
        raise InputError(f"iterations must be at least 1, got {iterations}")
    env = replay_env(task, recording.fps, backend)
    check_population(env, population, max(len(c) for c, _ in recording.episodes))
    replay = replayer(env)
    frames = sum(len(c) for c, _ in recording.episodes)
    _progress.phase(f"sysid: compiling the replay of {len(recording.episodes)} episode(s), {frames} frames, "
                    f"{population} candidates at a time")
    fitted = np.isin(np.arange(6), motors_fitted)
    rng = np.random.default_rng(seed)
    settings = {"population": population, "elites": elites, "progress": progress}
    to_search = lambda k, v: np.log(v) if k in LOG_SCALE else np.asarray(v, float)  # noqa: E731
    delays = SEARCH["delay_ticks"][1] + 1
    start = Search({k: np.full(6, to_search(k, DEFAULTS[k])) for k in PARAMETERS[1:]},
                   {k: np.where(fitted, SPREAD[k], 0.0) for k in PARAMETERS[1:]},
                   np.where(fitted[:, None], 1.0 / delays, np.eye(delays)[DEFAULTS["delay_ticks"]]))
    found = search(replay, recording, start, fitted, rng, iterations=iterations, stage="search", **settings)
    interval = {k: np.stack([v.min(0), v.max(0)], axis=-1) for k, v in found.chosen.items()}
    value, final, profiled = refine(replay, recording, found.value(), fitted, population, sweeps, progress)
    if polish:
        spread = {k: np.where(fitted, POLISH_SPREAD[k] if k in LOG_SCALE
                              else np.maximum(POLISH_SPREAD[k] * value[k], FLOOR[k]), 0.0)
                  for k in PARAMETERS[1:]}
        near = Search({k: to_search(k, value[k]) for k in PARAMETERS[1:]}, spread, np.eye(delays)[value["delay_ticks"]])
        settings["elites"] = max(2, population // 6 // 3)  # of each motor's own worlds
        near = search(replay, recording, near, fitted, rng, iterations=polish, stage="polish", solo=True, **settings)
        better = near.best_cost < final
        value = {k: np.where(better, near.best[k], v) for k, v in value.items()}
        final = cost(replay, recording, {k: v[None] for k, v in value.items()})[0]  # the motors' bests together
    return Identified(value, {**interval, **profiled}, np.sqrt(final), np.asarray(found.history), tuple(motors_fitted))


def _grid(name: str, value: dict[str, np.ndarray], n: int, shrink: float) -> dict[str, np.ndarray]:
    """Sweep ``name``'s ``n`` candidates {parameter: (n, 6)} around ``value`` (each (6,)), ``shrink`` times
    narrower than the first sweep. ``"ridge"`` moves along the direction the backlash and the deadband trade
    off in (slow motions see only ``backlash / 2 + deadband``): that sum kept, the deadband's share varied."""
    steps = np.linspace(-1, 1, n)[:, None]
    if name == "ridge":
        play = value["backlash"] / 2 + value["deadband"]
        share = np.clip(value["deadband"] / np.maximum(play, 1e-12) + 0.5 * shrink * steps, 0.0, 1.0)
        return {"deadband": share * play, "backlash": 2 * (1 - share) * play}
    x = value[name]
    if name == "delay_ticks":  # every delay, each with a range of gains: a delay trades off against the gain's lag
        delays = SEARCH[name][1] + 1
        scales = np.linspace(-1, 1, max(1, n // delays))
        d, k = np.arange(n) % delays, scales[np.minimum(np.arange(n) // delays, len(scales) - 1)]
        return {name: d[:, None].repeat(len(x), 1),
                "kp": np.clip(value["kp"] * np.exp(DELAY_GAIN_WIDTH * shrink * k[:, None]), *SEARCH["kp"])}
    width = SWEEP_WIDTH[name] * shrink
    if name in LOG_SCALE:
        return {name: np.clip(x * np.exp(width * steps), *SEARCH[name])}
    return {name: np.clip(x + np.maximum(width * x, SWEEP_MIN[name] * shrink) * steps, *SEARCH[name])}


def refine(replay, recording: Recording, value: dict[str, np.ndarray], fitted: np.ndarray, population: int,
           sweeps: int, progress=None) -> tuple[dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray]]:
    """Coordinate sweeps from ``value``: per parameter in turn (and along the backlash-deadband ridge),
    ``population`` values on a grid around the present one (every motor at once, each keeping its best,
    the present value included), the grid halving each sweep. Returns the values, their cost (6,) and per
    parameter the last sweep's profile interval (6, 2): the span of its grid values whose residual is
    within :data:`PROFILE` of the best."""
    value, profiled = {k: np.asarray(v).copy() for k, v in value.items()}, {}
    present = cost(replay, recording, {k: v[None] for k, v in value.items()})[0]
    motor = np.arange(len(present))
    for sweep in range(sweeps):
        for name in (*PARAMETERS, "ridge"):
            grid = {k: np.where(fitted, g, value[k]) for k, g in _grid(name, value, population, 0.5**sweep).items()}
            costs = cost(replay, recording,
                         {**{k: np.repeat(v[None], population, 0) for k, v in value.items()}, **grid})
            best = costs.argmin(0)  # (6,)
            better = costs[best, motor] < present
            value.update({k: np.where(better, g[best, motor], value[k]) for k, g in grid.items()})
            present = np.where(better, costs[best, motor], present)
            if name in PARAMETERS:
                near, g = costs <= present * (1 + PROFILE) ** 2, grid[name]  # (P, 6)
                profiled[name] = np.stack([np.where(near, g, np.inf).min(0),
                                           np.where(near, g, -np.inf).max(0)], axis=-1)
        if progress is not None:
            progress(f"sweep {sweep + 1}/{sweeps}", present)
    return value, present, profiled
