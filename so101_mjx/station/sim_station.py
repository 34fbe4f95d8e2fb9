"""A simulated SO-101 station speaking the arm evaluation interface (:mod:`so101_mjx.station.interface`).

The station drives the arm in joint space on a task env's physics (the env's IK is bypassed):
every control tick (``spec.control_rate`` Hz; the env is built with ``control_dt = 1 /
control_rate``) it holds absolute joint targets and a gripper open fraction for one control
period. Action chunks emitted at a lower rate are interpolated up to the control rate by
:func:`so101_mjx.station.interface.interpolate_chunk` (row i is the target i / chunk_rate s after the
chunk starts; linear between rows, held before and after). Observations are published at
``spec.refresh_rate`` Hz (every ``control_rate / refresh_rate``-th tick). A
:class:`~so101_mjx.station.chunk.Station_ActionChunk` carries its reference timestamp on the station
clock (the observations' ``timestamp``): its row i is due ``i / rate`` s after it, so the rows of a
stale chunk that are already past are skipped (:meth:`SimStation.execute`).

Bad input: :class:`SimStation` raises ``ValueError`` naming the argument for a spec that is not
the SO-101's, a ``control_rate`` that does not divide the physics rate ``1 / physics_dt`` (each
tick runs a whole number of physics steps, so observation timestamps are exact), a chunk rate or
duration that is not finite and positive or would play longer than ``MAX_PLAY_SECONDS``, and
containers that are invalid when they enter the simulation (re-validated on every call, as their
arrays can be edited in place). Inside jit nothing raises: :func:`tick` keeps the previous
command for every non-finite target entry, so NaN never reaches the physics (non-finite targets
stay visible in :func:`run_chunks`' returned per-tick targets).

Two paths share one per-tick function, :func:`tick`:

- :class:`SimStation`: one world on the CPU (backend ``c``), Python-facing, returns
  :class:`~so101_mjx.station.interface.MotorizedArm_Observation` objects;
- :func:`run_chunks`: a jitted ``lax.scan`` over ticks with the worlds vmapped, chunks batched.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from so101_mjx import _checks as checks
from so101_mjx.envs import make
from so101_mjx.envs.base import SO101Env
from so101_mjx.envs.registry import default_config
from so101_mjx.errors import InputError
from so101_mjx.robot.gripper import ctrl_to_open_fraction
from so101_mjx.sim.physics import PhysicsState
from so101_mjx.station.chunk import Station_ActionChunk
from so101_mjx.station.interface import (
    SO101_SPEC,
    MotorizedArm_ActionChunk,
    MotorizedArm_ArmType,
    MotorizedArm_GripperType,
    MotorizedArm_JointPose,
    MotorizedArm_Observation,
    MotorizedArmSpec,
    interpolate_chunk,
    sample_chunk,
)

MAX_PLAY_SECONDS = 600.0  # longest chunk or walk one call plays, simulated seconds


def tick(env: SO101Env, physics: PhysicsState, arm_q: Array, gripper_open: Array) -> PhysicsState:
    """One control tick: hold ``arm_q`` (5,) rad and the jaw at open fraction ``gripper_open`` (1,).

    A non-finite entry keeps that actuator's previous command.
    """
    arm = env.arm
    arm_q = jnp.where(jnp.isfinite(arm_q), arm_q, physics.ctrl[arm.actuator_ids])
    gripper = jnp.where(jnp.isfinite(gripper_open[0]), arm.gripper_ctrl(gripper_open[0]),
                        physics.ctrl[arm.gripper_actuator])
    return arm.actuate(physics, arm_q, gripper)


def measure(env: SO101Env, physics: PhysicsState) -> dict[str, Array]:
    """The observation channels of one world; temperatures are not simulated (NaN)."""
    arm = env.arm
    lo, hi = arm.gripper_range
    force = arm.actuator_force(physics)
    g = arm.gripper_actuator
    nan = jnp.full((1,), jnp.nan, physics.qpos.dtype)
    return {
        "timestamp": physics.time,
        "joint_angle_q": arm.joint_q(physics),
        "joint_angle_vel_dq": physics.qvel[arm.dof_ids],
        "joint_torque": force[arm.actuator_ids],
        "joint_temperature": jnp.full((len(arm.actuator_ids),), jnp.nan, physics.qpos.dtype),
        "gripper_pos": ctrl_to_open_fraction(physics.qpos[arm.gripper_qpos], arm.gripper_range)[None],
        "gripper_vel": (physics.qvel[arm.actuated_dof[g]] / (hi - lo))[None],
        "gripper_torque": force[g][None],
        "gripper_temperature": nan,
    }


def chunk_ticks(chunk_rate_hz: float, control_rate_hz: float, horizon: int) -> int:
    """Control ticks needed to play a chunk to its last row: floor((H-1)/chunk_rate · control_rate) + 1."""
    return int(np.floor((horizon - 1) / chunk_rate_hz * control_rate_hz + 1e-9)) + 1


def run_chunks(
    env: SO101Env, physics: PhysicsState, arm_chunks: Array, gripper_chunks: Array, chunk_rate_hz: float, n_ticks: int
) -> tuple[PhysicsState, Array, Array]:
    """Play batched chunks: ``arm_chunks`` (B, H, 5), ``gripper_chunks`` (B, H, 1) on B worlds.

    Returns the final physics, the per-tick targets (n_ticks, B, 6) and the per-tick joint
    positions (n_ticks, B, 5). Jit it with ``n_ticks`` static. A concrete ``chunk_rate_hz`` must
    be finite and > 0 (ValueError); a traced one that is not gives non-finite or held targets,
    which :func:`tick` never sends.
    """
    if not checks.is_traced(chunk_rate_hz):
        checks.real("chunk_rate_hz", chunk_rate_hz, gt=0, unit=" Hz")
    checks.integer("n_ticks", n_ticks, ge=1)
    control_rate = 1.0 / (env.n_substeps * env.config.periods()[1])  # ticks per second of simulated time
    targets = jnp.concatenate([arm_chunks, gripper_chunks.astype(arm_chunks.dtype)], axis=-1)

    def body(p, k):
        target = interpolate_chunk(targets, chunk_rate_hz, control_rate, k / control_rate)
        p = jax.vmap(lambda pw, tw: tick(env, pw, tw[:5], tw[5:]))(p, target)
        return p, (target, env.arm.joint_q(p))

    physics, (targets_out, q) = jax.lax.scan(body, physics, jnp.arange(n_ticks))
    return physics, targets_out, q


def _tick_period(control_rate: int, physics_dt: float) -> float:
    """control_dt for a whole number n = 1 / (control_rate · physics_dt) of physics steps per tick.

    ValueError when ``control_rate`` does not divide the physics rate. The env counts
    ``control_dt // physics_dt`` substeps, which rounding can put one short (1.0 // 0.002 = 499),
    so the period n · physics_dt is raised by the few ulps that make the floor exactly n.
    """
    ratio = 1.0 / (control_rate * physics_dt)
    n = round(ratio)
    if n < 1 or abs(ratio - n) > 1e-9 * n:
        physics_rate = 1.0 / physics_dt
        divisors = ""
        if physics_rate <= 10_000 and abs(physics_rate - round(physics_rate)) <= 1e-9 * physics_rate:
            rates = [r for r in range(1, round(physics_rate) + 1) if round(physics_rate) % r == 0]
            divisors = f"; allowed rates: {rates} Hz"
        raise InputError(f"control_rate ({control_rate} Hz) must divide the physics rate 1 / physics_dt = "
                         f"{physics_rate:g} Hz, so that each tick runs a whole number of physics steps{divisors}")
    period = n * physics_dt
    while period // physics_dt < n:
        period = float(np.nextafter(period, np.inf))
    return period


class SimStation:
    """One simulated SO-101 on MuJoCo C; see the module docstring."""

    def __init__(self, env_name: str = "SO101PickCube-v0", spec: MotorizedArmSpec = SO101_SPEC,
                 backend: str = "c", **config):
        if not isinstance(spec, MotorizedArmSpec):
            raise InputError(f"spec must be a MotorizedArmSpec, got {spec!r}")
        if (spec.arm is not MotorizedArm_ArmType.SO101_5DoF
                or spec.gripper is not MotorizedArm_GripperType.SO101_jaw_1DoF):
            raise InputError(f"spec must describe the simulated SO-101 (arm 'so101_5dof', gripper 'so101_jaw_1dof'), "
                             f"got arm {spec.arm.value!r}, gripper {spec.gripper.value!r}")
        if spec.control_rate % spec.refresh_rate:
            raise InputError(f"refresh_rate ({spec.refresh_rate} Hz) must divide control_rate ({spec.control_rate} Hz)")
        if "control_dt" in config:
            raise InputError("control_dt is set by spec.control_rate (control_dt = 1 / control_rate); do not pass it")
        physics_dt = checks.real("physics_dt", config.get("physics_dt", default_config(env_name).physics_dt),
                                 gt=0, unit=" s")
        self.spec = spec
        self.env = make(env_name, backend=backend, control_dt=_tick_period(spec.control_rate, physics_dt), **config)
        self._tick = jax.jit(lambda p, q, g: tick(self.env, p, q, g))
        self._measure = jax.jit(lambda p: measure(self.env, p))
        self._publish_every = spec.control_rate // spec.refresh_rate
        self.physics: PhysicsState | None = None
        self.targets: list[np.ndarray] = []  # every tick's (arm 5 + gripper 1) target, for inspection

    def reset(self, seed: int = 0) -> MotorizedArm_Observation:
        """Reset the underlying env (its reset distribution; ``seed`` an int in [0, 2**32 − 1]) and
        return the first observation."""
        seed = checks.integer("seed", seed, ge=0, le=2**32 - 1)
        self.physics = self.env.reset(jax.random.PRNGKey(seed)).physics
        self.targets = []
        return self.observe()

    def observe(self) -> MotorizedArm_Observation:
        """The current observation (float32 containers; temperatures NaN)."""
        fields = {k: np.asarray(v, np.float32) for k, v in self._measure(self._require()).items()}
        obs = MotorizedArm_Observation(timestamp=float(fields.pop("timestamp")), **fields)
        obs.validate(self.spec)
        return obs

    def _require(self) -> PhysicsState:
        if self.physics is None:
            raise RuntimeError("call reset() first")
        return self.physics

    def _play(self, targets: np.ndarray) -> list[MotorizedArm_Observation]:
        published = []
        for k, target in enumerate(targets):
            self.targets.append(np.asarray(target))
            self.physics = self._tick(self._require(), jnp.asarray(target[:5]), jnp.asarray(target[5:]))
            if (k + 1) % self._publish_every == 0:
                published.append(self.observe())
        return published

    def walk_to(self, pose: MotorizedArm_JointPose, duration: float = 2.0) -> list[MotorizedArm_Observation]:
        """Move to ``pose`` along a straight joint-space line over ``duration`` seconds, finite in
        [0, MAX_PLAY_SECONDS] (at least one control period is played)."""
        if not isinstance(pose, MotorizedArm_JointPose):
            raise InputError(f"pose must be a MotorizedArm_JointPose, got {type(pose).__name__}")
        duration = checks.real("duration", duration, ge=0, le=MAX_PLAY_SECONDS, unit=" s")
        pose.validate(self.spec)
        now = self.observe()
        start = np.concatenate([now.joint_angle_q, now.gripper_pos])[None]
        end = np.concatenate([pose.joint_angle_q, pose.gripper_pos])[None]
        chunk = np.concatenate([start, end]).astype(np.float32)
        rate = 1.0 / max(duration, self.env.dt)
        n = chunk_ticks(rate, self.spec.control_rate, 2) - 1  # ticks 1..n: tick 0 is now
        ticks = np.arange(1, n + 1) / self.spec.control_rate
        return self._play(np.asarray(interpolate_chunk(chunk, rate, self.spec.control_rate,
                                                       np.minimum(ticks, 1 / rate))))

    def execute(self, chunk: Station_ActionChunk | MotorizedArm_ActionChunk, chunk_rate_hz: float | None = None
                ) -> list[MotorizedArm_Observation]:  # fmt: skip
        """Play ``chunk`` to its last row; returns the observations published meanwhile.

        ``execute(Station_ActionChunk)``: row i is the target at ``chunk.timestamp + i / chunk.rate``
        on the station clock (the observations' ``timestamp``). Ticks run from now to the last
        row's time: rows already past are skipped (the first tick takes the chunk's value now,
        linear between rows), row 0 is held until ``timestamp`` when that lies ahead, and a chunk
        that ended before now holds its last row for one tick.

        ``execute(MotorizedArm_ActionChunk, chunk_rate_hz)``: rows at ``chunk_rate_hz`` (finite
        > 0), row 0 now.

        Either way the play may last at most ``MAX_PLAY_SECONDS``.
        """
        if isinstance(chunk, Station_ActionChunk):
            if chunk_rate_hz is not None:
                raise InputError("chunk_rate_hz must be None for a Station_ActionChunk, which carries its rate")
            return self._execute_stamped(chunk)
        if not isinstance(chunk, MotorizedArm_ActionChunk):
            raise InputError("chunk must be a MotorizedArm_ActionChunk (with chunk_rate_hz) or a Station_ActionChunk, "
                             f"got {type(chunk).__name__}")
        chunk_rate_hz = checks.real("chunk_rate_hz", chunk_rate_hz, gt=0, unit=" Hz")
        chunk.validate(self.spec, chunk.horizon)
        if (chunk.horizon - 1) / chunk_rate_hz > MAX_PLAY_SECONDS:
            raise InputError(f"chunk_rate_hz ({chunk_rate_hz} Hz) makes the {chunk.horizon}-row chunk last "
                             f"{(chunk.horizon - 1) / chunk_rate_hz:.3g} s; at most {MAX_PLAY_SECONDS} s allowed")
        targets = np.concatenate([chunk.joint_angle_q, chunk.gripper_pos], axis=-1)
        ticks = np.arange(chunk_ticks(chunk_rate_hz, self.spec.control_rate, chunk.horizon)) / self.spec.control_rate
        return self._play(np.asarray(interpolate_chunk(targets, chunk_rate_hz, self.spec.control_rate, ticks)))

    def _execute_stamped(self, chunk: Station_ActionChunk) -> list[MotorizedArm_Observation]:
        chunk.validate(self.spec)
        now = float(self._require().time)
        wait, span = chunk.timestamp - now, chunk.end_time - now
        if max(wait, span) > MAX_PLAY_SECONDS:
            raise InputError(f"chunk plays until {chunk.end_time:.6g} s on the station clock, {span:.3g} s after now "
                             f"({now:.6g} s); at most {MAX_PLAY_SECONDS} s allowed")
        rate = self.spec.control_rate
        n = max(int(np.floor(span * rate + 1e-9)) + 1, 1)  # ticks k >= 0 with now + k / rate <= end_time
        rows = (np.arange(n) / rate - wait) * chunk.rate
        arm = chunk.arms[0]
        targets = np.concatenate([arm.joint_angle_q, arm.gripper_pos], axis=-1)
        return self._play(np.asarray(sample_chunk(targets, rows)))
