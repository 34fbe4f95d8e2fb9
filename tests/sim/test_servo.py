"""The servo model (:mod:`so101_mjx.sim.servo`, ``ArmConfig.servo_model``): each effect in isolation (the
tick function, then in the env), neutral settings leaving trajectories bitwise unchanged, ``c`` and ``mjx``
equal with every effect on, and bad values naming the field."""

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx import make
from so101_mjx.envs.base import asdict
from so101_mjx.sim import servo
from so101_mjx.sim.servo import RAD_PER_COUNT, ServoModel, ServoRanges, VoltageSag

DT = 1 / 30
IDEAL = ServoModel(delay_ticks=0, backlash=0.0, max_velocity=None, deadband=0.0, quantize=False)


def ticks(model: ServoModel, commands, measured=None) -> np.ndarray:
    """The targets acted on for a sequence of commands (n, 6), from rest at 0 (measured positions 0 unless given)."""
    state = servo.initial(model, jnp.zeros(6), jax.random.PRNGKey(0))
    out = []
    for i, command in enumerate(np.asarray(commands, float)):
        target, state = servo.apply(model, state, jnp.asarray(command),
                                    jnp.zeros(6) if measured is None else measured[i], DT)
        out.append(np.asarray(target))
    return np.array(out)


def test_latency_acts_on_the_target_sent_delay_ticks_before():
    commands = np.zeros((6, 6))
    commands[1:, 2] = 0.3  # a step at tick 1
    out = ticks(ServoModel(delay_ticks=3, backlash=0.0, max_velocity=None, quantize=False), commands)
    np.testing.assert_array_equal(out[:, 2], [0, 0, 0, 0, 0.3, 0.3])
    np.testing.assert_array_equal(out[:, [0, 1, 3, 4, 5]], 0)


def test_velocity_limit_is_a_ceiling_on_the_target_slew():
    out = ticks(ServoModel(backlash=0.0, max_velocity=2.0, quantize=False), np.full((5, 6), 0.25))
    np.testing.assert_allclose(out[:, 0], [2 * DT, 4 * DT, 0.2, 0.25, 0.25], rtol=0, atol=1e-15)


def test_backlash_leaves_a_reversal_gap_of_its_width():
    b = 0.02
    up = np.linspace(0, 0.1, 11)
    down = np.linspace(0.1, 0.1 - 1.5 * b, 16)
    commands = np.repeat(np.r_[up, down][:, None], 6, axis=1)
    out = ticks(ServoModel(backlash=b, max_velocity=None, quantize=False), commands)[:, 0]
    assert out[10] == pytest.approx(0.1 - b / 2, abs=1e-15)  # trailing the rising command by half the band
    still = (commands[:, 0] >= 0.1 - b - 1e-12) & (np.arange(len(out)) >= 10)
    np.testing.assert_allclose(out[still], 0.1 - b / 2, rtol=0, atol=1e-15)  # a reversal of up to b moves nothing
    np.testing.assert_allclose(out[-1], commands[-1, 0] + b / 2, rtol=0, atol=1e-15)  # then it trails from above


def test_deadband_does_not_act_on_a_small_error():
    model = ServoModel(backlash=0.0, max_velocity=None, deadband=0.01, quantize=False)
    measured = jnp.full(6, 0.1)
    small, large = np.full((1, 6), 0.105), np.full((1, 6), 0.12)
    np.testing.assert_array_equal(ticks(model, small, [measured])[0], 0.1)  # the target becomes the measured position
    np.testing.assert_array_equal(ticks(model, large, [measured])[0], 0.12)


def test_quantized_readings_are_whole_counts():
    q = jnp.asarray(np.random.default_rng(0).uniform(-2, 2, 1000))
    counts = np.asarray(servo.quantized(q)) / RAD_PER_COUNT
    np.testing.assert_allclose(counts, np.round(counts), rtol=0, atol=1e-9)
    assert np.max(np.abs(np.asarray(servo.quantized(q) - q))) <= RAD_PER_COUNT / 2 + 1e-15


def test_voltage_sag_follows_the_load_and_shrinks_the_velocity_ceiling():
    """Σ|τ| = 12 N·m at 0.05 /(N·m) settles the supply at 0.4 of its voltage, approached with a 0.1 s time
    constant; the target's slew per tick is the velocity limit times the supply left."""
    model = ServoModel(backlash=0.0, max_velocity=2.0, quantize=False,
                       voltage_sag=VoltageSag(per_torque=0.05, time_constant=0.1))
    state = servo.initial(model, jnp.zeros(6), jax.random.PRNGKey(0))
    assert float(state["supply"]) == 1.0
    targets, supplies = [], []
    for _ in range(5):
        target, state = servo.apply(model, state, jnp.full(6, 1.0), jnp.zeros(6), DT,
                                    jnp.array([2.0, -2.0, 2.0, -2.0, 2.0, -2.0]))
        targets.append(float(target[0]))
        supplies.append(float(state["supply"]))
    expected = 0.4 + 0.6 * math.exp(-DT / 0.1) ** np.arange(1, 6)
    np.testing.assert_allclose(supplies, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.diff(np.r_[0.0, targets]), 2.0 * DT * expected, rtol=0, atol=1e-12)
    idle = servo.apply(model, servo.initial(model, jnp.zeros(6), jax.random.PRNGKey(0)), jnp.full(6, 1.0), jnp.zeros(6),
                       DT, jnp.zeros(6))
    # no load, no sag
    assert float(idle[1]["supply"]) == 1.0 and float(idle[0][0]) == pytest.approx(2.0 * DT, abs=1e-15)


def test_voltage_sag_scales_the_motors_torque_limits():
    model = ServoModel(voltage_sag=VoltageSag(per_torque=0.1))
    forcerange = np.array([[-3.0, 3.0], [-1.0, 1.0], [-2.0, 2.0]])
    params = servo.sagged(model, {"supply": jnp.asarray(0.5)}, {"dof_damping": jnp.ones(2)}, forcerange,
                          np.array([0, 2]))
    np.testing.assert_array_equal(params["actuator_forcerange"], [[-1.5, 1.5], [-1.0, 1.0], [-1.0, 1.0]])
    np.testing.assert_array_equal(params["dof_damping"], 1.0)  # the world's other arrays kept
    assert servo.sagged(ServoModel(), {}, None, forcerange, np.array([0])) is None  # no sag: the model's limits


def test_voltage_sag_in_the_env():
    """No sag at zero load sensitivity is bitwise the model without it; under load the supply drops, and the
    elbow's step is slower (a lower velocity ceiling and torque limit)."""
    plain = ServoModel(backlash=0.0, quantize=False)
    neutral = dataclasses.replace(plain, voltage_sag=VoltageSag(per_torque=0.0))
    np.testing.assert_array_equal(joint_run("c", neutral, 20), joint_run("c", plain, 20))
    runs = {}
    for name, model in (("plain", plain),
                        ("sag",
                         dataclasses.replace(plain, voltage_sag=VoltageSag(per_torque=0.15, time_constant=0.05)))):
        env = make("SO101PickCube-v0", "c", control_mode="joint", servo_model=model)
        state = jax.jit(env.reset)(jax.random.PRNGKey(0))
        step, goal = (jax.jit(env.step),
                      np.asarray(env.arm.motor_positions(state.physics)) + np.array([0, 0, 40.0, 0, 0, 0]))
        elbow, supply = [], []
        for _ in range(8):
            state = step(state, goal)
            elbow.append(float(state.physics.qpos[env.arm.qpos_ids[2]]))
            supply.append(float(state.info.servo.get("supply", 1.0)))
        runs[name] = np.array(elbow) - elbow[0], np.array(supply)
    assert runs["plain"][1].min() == 1.0 and runs["sag"][1].min() < 0.9
    assert runs["sag"][0][4] < 0.9 * runs["plain"][0][4]  # mid-step, 0.49 rad against 0.59 (measured)


def joint_run(backend: str, model: ServoModel | None, steps: int) -> list[np.ndarray]:
    """Joint-mode PickCube (float64): a sinusoid on every motor; per step the qpos, ctrl and observation."""
    env = make("SO101PickCube-v0", backend, control_mode="joint", servo_model=model)
    state = jax.jit(env.reset)(jax.random.PRNGKey(1))
    step = jax.jit(env.step)
    start = np.asarray(env.arm.motor_positions(state.physics))
    out = []
    for t in range(steps):
        state = step(state, start + 15 * np.sin(0.2 * t + np.arange(6)))
        out.append(np.concatenate([np.asarray(state.physics.qpos), np.asarray(state.physics.ctrl),
                                   np.asarray(state.obs)]))
    return out


@pytest.mark.slow
def test_neutral_settings_leave_the_trajectory_bitwise_unchanged():
    np.testing.assert_array_equal(joint_run("c", IDEAL, 30), joint_run("c", None, 30))
    cartesian = [make("SO101PickCube-v0", "c", servo_model=m) for m in (IDEAL, None)]
    states = [jax.jit(e.reset)(jax.random.PRNGKey(0)) for e in cartesian]
    steps = [jax.jit(e.step) for e in cartesian]  # compiled once each for the five steps
    for _ in range(5):
        states = [step(s, np.array([0.3, -0.2, 0.1, 0.5])) for step, s in zip(steps, states)]
    np.testing.assert_array_equal(states[0].physics.qpos, states[1].physics.qpos)


def test_effects_in_the_env():
    """Backend c, joint mode: the delay and the velocity ceiling in the actuator targets, quantized observations."""
    env = make("SO101PickCube-v0", "c", control_mode="joint", servo_model=ServoModel(delay_ticks=2, backlash=0.0))
    state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    step, home = jax.jit(env.step), np.asarray(state.physics.ctrl[2])
    goal = np.asarray(env.arm.motor_positions(state.physics)) + np.array([0, 0, 40.0, 0, 0, 0])
    elbow = []
    for _ in range(6):
        state = step(state, goal)
        elbow.append(float(state.physics.ctrl[2]) - home)
    ceiling = servo.NO_LOAD_SPEED * DT
    np.testing.assert_allclose(elbow, [0, 0, ceiling, 2 * ceiling, 3 * ceiling, 4 * ceiling], rtol=0, atol=1e-12)
    q = np.asarray(state.physics.qpos[env.arm.qpos_ids])
    np.testing.assert_allclose(np.asarray(env.arm.motor_positions(state.physics))[:5],
                               np.asarray(env.arm.motor_positions(state.physics.replace(
                                   qpos=state.physics.qpos.at[env.arm.qpos_ids].set(servo.quantized(q)))))[:5],
                                   rtol=0, atol=0)
    assert not np.allclose(q, np.asarray(servo.quantized(q)))  # the readings differ from the true angles


@pytest.mark.slow
def test_c_and_mjx_are_equal_with_every_effect_on():
    """Fixed per-motor values with the position loop's gain, damping and torque limit."""
    model = ServoModel(delay_ticks=(2, 1, 2, 0, 3, 1), deadband=0.002, backlash=(0.02, 0.03, 0.01, 0.02, 0.0, 0.02),
                       kp=(20.0, 24.0, 18.0, 16.0, 15.0, 17.8), damping=0.8, torque_limit=3.0,
                       voltage_sag=VoltageSag(per_torque=0.05, time_constant=0.05))
    c, mjx = joint_run("c", model, 100), joint_run("mjx", model, 100)
    np.testing.assert_allclose(np.array(mjx), np.array(c), rtol=0, atol=1e-9)


# soak: the draws are backend-independent JAX (test_ranges_draw_per_motor_per_world_and_per_episode, on c), and
# the servo on MJX equals C in test_c_and_mjx_are_equal_with_every_effect_on (slow)
@pytest.mark.soak  # a second MJX compile on a CPU
def test_c_and_mjx_draw_the_same_per_motor_values():
    """Per-motor draws from ranges: the same from the same reset key on both backends."""
    model = ServoModel(ranges=ServoRanges(delay_ticks=(0, 3), backlash=(0.01, 0.04), max_velocity=(2.0, 6.0),
                                          deadband=(0.0, 0.003)))
    c, mjx = joint_run("c", model, 100), joint_run("mjx", model, 100)
    np.testing.assert_allclose(np.array(mjx), np.array(c), rtol=0, atol=1e-9)


def test_per_motor_delays_are_each_motors_own():
    delays = (0, 1, 2, 3, 0, 1)
    out = ticks(ServoModel(delay_ticks=delays, backlash=0.0, max_velocity=None, quantize=False), np.ones((4, 6)))
    np.testing.assert_array_equal(out, (np.arange(4)[:, None] >= np.array(delays)).astype(float))


def test_per_motor_values_and_the_position_loop():
    """Per-motor backlash and velocity limits act per motor; kp, damping and the torque limit replace the scene's."""
    model = ServoModel(backlash=(0.0, 0.02, 0.0, 0.0, 0.0, 0.0), max_velocity=(1.0, 2.0, 3.0, 4.0, 5.0, 6.0),
                       quantize=False)
    out = ticks(model, np.full((1, 6), 0.5))[0]
    np.testing.assert_allclose(out, [1 * DT, 2 * DT, 3 * DT, 4 * DT, 5 * DT, 6 * DT], rtol=0, atol=1e-15)
    kp = (20.0, 21.0, 22.0, 23.0, 24.0, 25.0)
    env = make("SO101Reach-v0", "c", control_mode="joint", servo_model=ServoModel(kp=kp, damping=0.9, torque_limit=2.5))
    m, ids = env.mj_model, env.arm.motor_ctrl_ids
    np.testing.assert_array_equal(m.actuator_gainprm[ids, 0], kp)
    np.testing.assert_array_equal(m.actuator_biasprm[ids, 1], -np.array(kp))
    np.testing.assert_array_equal(m.dof_damping[m.jnt_dofadr[m.actuator_trnid[ids, 0]]], 0.9)
    np.testing.assert_array_equal(m.actuator_forcerange[ids], [[-2.5, 2.5]] * 6)
    assert make("SO101Reach-v0", "c").mj_model.actuator_gainprm[0, 0] == 17.8  # the scene's, without the model


@pytest.mark.parametrize("value, message", [
    ({"backlash": [0.01, 0.02]}, "servo_model.backlash must be one value or 6, one per motor, got 2"),
    ({"kp": [20.0, 20.0, 20.0, 20.0, 20.0, -1.0]}, "servo_model.kp[5] must be a finite number > 0"),
    ({"delay_ticks": [0, 1, 2, 3, 4, 1.5]}, "servo_model.delay_ticks[5] must be an int"),
    ({"damping": -0.1}, "servo_model.damping must be a finite number >= 0"),
    ({"torque_limit": float("nan")}, "servo_model.torque_limit must be a finite number > 0"),
    ({"delay_ticks": -1}, "servo_model.delay_ticks must be an int >= 0"),
    ({"delay_ticks": 1.5}, "servo_model.delay_ticks must be an int"),
    ({"backlash": float("nan")}, "servo_model.backlash must be a finite number"),
    ({"backlash": -0.1}, "servo_model.backlash must be a finite number >= 0 and <= 0.5 rad"),
    ({"max_velocity": 0.0}, "servo_model.max_velocity must be a finite number > 0"),
    ({"deadband": 2.0}, "servo_model.deadband must be a finite number >= 0 and <= 0.5 rad, got 2.0"),
    # past a physically plausible range (a unit error): the field and the range named
    ({"voltage_sag": {"per_torque": 1e300}},
     "servo_model.voltage_sag.per_torque must be a finite number >= 0 and <= 1.0 1/(N·m)"),
    ({"voltage_sag": {"per_torque": 0.1, "time_constant": 50.0}},
     "servo_model.voltage_sag.time_constant must be a finite number >= 0 and <= 1.0 s"),
    ({"kp": [20.0, 20.0, 20.0, 20.0, 20.0, 1e6]},
     "servo_model.kp[5] must be a finite number > 0 and <= 1000.0 N·m/rad"),
    ({"damping": 1e4}, "servo_model.damping must be a finite number >= 0 and <= 100.0 N·m·s/rad"),
    ({"torque_limit": 3350.0}, "servo_model.torque_limit must be a finite number > 0 and <= 30.0 N·m"),
    ({"max_velocity": 4720.0}, "servo_model.max_velocity must be a finite number > 0 and <= 100.0 rad/s"),
    ({"backlash": 1.3}, "servo_model.backlash must be a finite number >= 0 and <= 0.5 rad, got 1.3"),
    ({"latency": 2}, "latency"),
    ({"voltage_sag": {"per_torque": -0.1}}, "servo_model.voltage_sag.per_torque must be a finite number >= 0"),
    ({"voltage_sag": {"per_torque": 0.1, "time_constant": float("nan")}},
     "servo_model.voltage_sag.time_constant must be a finite"),
    ({"voltage_sag": {"per_torque": 0.1, "tau": 1.0}}, "tau"),
    ("fast", "servo_model must be None, a ServoModel or its dict form"),
])
def test_bad_values_name_the_field(value, message):
    with pytest.raises(ValueError) as err:
        make("SO101PickCube-v0", "c", servo_model=value)
    assert message in str(err.value)


def test_defaults_and_json_round_trip():
    model = ServoModel()
    assert (model.backlash == pytest.approx(math.radians(1.30), abs=1e-4)
            and model.max_velocity == pytest.approx(4.717, abs=1e-3))
    env = make("SO101PickCube-v0", "c", servo_model={"delay_ticks": 1})
    assert env.config.servo_model == ServoModel(delay_ticks=1)
    per_motor = ServoModel(delay_ticks=(0, 1, 2, 0, 1, 2), kp=(20.0,) * 6,
                           voltage_sag=VoltageSag(per_torque=0.05, time_constant=0.1))
    assert ServoModel(**json.loads(json.dumps(dataclasses.asdict(per_motor)))) == per_motor  # lists come back as tuples


RANGES = ServoRanges(delay_ticks=(1, 3), backlash=(0.01, 0.04), max_velocity=(2.0, 6.0), deadband=(0.0, 0.003))


def test_ranges_draw_per_motor_per_world_and_per_episode():
    env = make("SO101PickCube-v0", "c", control_mode="joint", servo_model=ServoModel(ranges=RANGES))
    reset = jax.jit(jax.vmap(env.reset))
    first = reset(jax.random.split(jax.random.PRNGKey(0), 64))
    params = {k: np.asarray(v) for k, v in first.info.servo["params"].items()}
    assert params["delay_ticks"].shape == (64, 6) and set(np.unique(params["delay_ticks"])) == {1, 2, 3}
    for name in ("backlash", "max_velocity", "deadband"):
        lo, hi = getattr(RANGES, name)
        assert lo <= params[name].min() and params[name].max() <= hi and np.ptp(params[name][:, 0]) > 0.5 * (hi - lo)
        assert np.ptp(params[name][0]) > 0  # motors differ
    again = reset(jax.vmap(lambda i: i.rng)(first.info))  # the next episode of each world
    assert not np.array_equal(np.asarray(again.info.servo["params"]["backlash"]), params["backlash"])
    assert first.info.servo["queue"].shape == (64, 4, 6)  # the longest delay + 1


def test_a_drawn_delay_is_each_motors_own():
    model = ServoModel(backlash=0.0, max_velocity=None, quantize=False, ranges=ServoRanges(delay_ticks=(0, 3)))
    state = servo.initial(model, jnp.zeros(6), jax.random.PRNGKey(0))
    delays = np.array([0, 1, 2, 3, 0, 1])
    state = {**state, "params": {**state["params"], "delay_ticks": jnp.asarray(delays), "deadband": jnp.zeros(6)}}
    seen = []
    for _ in range(4):
        target, state = servo.apply(model, state, jnp.ones(6), jnp.zeros(6), DT)
        seen.append(np.asarray(target))
    np.testing.assert_array_equal(np.array(seen), (np.arange(4)[:, None] >= delays).astype(float))


@pytest.mark.parametrize("ranges, message", [
    ({"delay_ticks": (0.5, 2)}, "servo_model.ranges.delay_ticks must be whole ticks"),
    ({"delay_ticks": (2, 1)}, "servo_model.ranges.delay_ticks must be a range"),
    ({"backlash": (0.0, 4.0)}, "servo_model.ranges.backlash must be a range 0.0 <= low <= high <= 0.5 rad"),
    ({"max_velocity": (1.0, 1e3)}, "servo_model.ranges.max_velocity must be a range 0.0 < low <= high <= 100.0 rad/s"),
    ({"max_velocity": (0.0, 1.0)}, "servo_model.ranges.max_velocity must be a range 0.0 < low"),
    ({"deadband": (0.0, 2.0)}, "servo_model.ranges.deadband must be a range 0.0 <= low <= high <= 0.5 rad"),
    ({"jitter": (0, 1)}, "unknown servo_model.ranges field(s) ['jitter']"),
])
def test_bad_ranges_name_the_field(ranges, message):
    with pytest.raises(ValueError) as err:
        make("SO101PickCube-v0", "c", servo_model={"ranges": ranges})
    assert message in str(err.value)


def test_ranges_survive_the_json_round_trip():
    config = make("SO101PickCube-v0", "c", servo_model=ServoModel(delay_ticks=1, ranges=RANGES)).config
    again = make("SO101PickCube-v0", "c", **json.loads(json.dumps(asdict(config)))).config
    assert again.servo_model == config.servo_model and again.servo_model.ranges == RANGES
