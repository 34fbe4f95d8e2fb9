"""The arm evaluation interface (seed 003): the spec's two-argument form and the station chunk
that carries the reference timestamp, with its rows played at i / rate after it."""

import dataclasses

import numpy as np
import pytest

from so101_mjx.station.chunk import Station_ActionChunk
from so101_mjx.station.interface import (
    SO101_SPEC,
    MotorizedArm_ActionChunk,
    MotorizedArm_ArmType,
    MotorizedArm_GripperType,
    MotorizedArm_JointPose,
    MotorizedArmSpec,
    sample_chunk,
)
from tests.station.shared import CONTROL_RATE, make_station, random_chunk


@pytest.fixture(scope="module")
def station():
    return make_station()



def _rows(chunk: MotorizedArm_ActionChunk) -> np.ndarray:
    return np.c_[chunk.joint_angle_q, chunk.gripper_pos]


# --- MotorizedArmSpec(refresh_rate, control_rate) ---------------------------------------------


def test_spec_two_argument_form():
    """Seed 003, MotorizedArmSpec(refresh_rate: int, control_rate: int): rates only, the SO-101's arm."""
    spec = MotorizedArmSpec(30, 100)
    assert (spec.refresh_rate, spec.control_rate) == (30, 100)
    assert spec.arm is MotorizedArm_ArmType.SO101_5DoF and spec.gripper is MotorizedArm_GripperType.SO101_jaw_1DoF
    assert (spec.n_arm_dof, spec.n_gripper_dof, spec.gripper_actuated, spec.actuated_width) == (5, 1, True, 6)
    assert MotorizedArmSpec(refresh_rate=10, control_rate=10) == SO101_SPEC
    assert dataclasses.replace(spec, control_rate=60).control_rate == 60
    yam = MotorizedArmSpec(30, 100, arm="yam_6dof", gripper="i2rt_teaching_handle")
    assert yam == MotorizedArmSpec("yam_6dof", "i2rt_teaching_handle", 30, 100)  # arm and gripper first, also accepted
    assert (yam.n_arm_dof, yam.actuated_width) == (6, 6)


@pytest.mark.parametrize(
    "args, kwargs, error, needle",
    [
        ((10,), {}, TypeError, "control_rate"),
        ((10, 20, 30), {}, TypeError, "positional"),
        ((10, 20), {"arm": "ur5"}, ValueError, "^arm must be"),
        ((10.0, 20), {}, ValueError, "^refresh_rate must be an int > 0"),
        ((10, 0), {}, ValueError, "^control_rate must be an int > 0"),
        ((10, 20), {"speed": 1}, TypeError, "speed"),
    ],
)
def test_spec_two_argument_form_rejects(args, kwargs, error, needle):
    """Seed 003, MotorizedArmSpec: integer rates in Hz; a bad field is named."""
    with pytest.raises(error, match=needle):
        MotorizedArmSpec(*args, **kwargs)


# --- Station_ActionChunk ---------------------------------------------------------------------


def test_station_chunk_times(rng):
    """Seed 003, MotorizedArm_ActionChunk: row i is the target i / rate s after the reference timestamp."""
    arm = random_chunk(rng, horizon=4)
    chunk = Station_ActionChunk(timestamp=2.5, rate=20.0, arms=arm)
    assert chunk.arms == (arm,) and chunk.horizon == len(chunk) == 4
    np.testing.assert_allclose(chunk.times, [2.5, 2.55, 2.6, 2.65], rtol=0, atol=1e-15)
    assert chunk.end_time == pytest.approx(2.65, abs=1e-15)
    chunk.validate(SO101_SPEC)
    chunk.validate([SO101_SPEC])


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"timestamp": float("nan")}, "^timestamp must be a finite number"),
        ({"rate": 0.0}, "^rate must be a finite number > 0"),
        ({"rate": float("inf")}, "^rate must be"),
        ({"arms": ()}, "^arms must be"),
        ({"arms": [np.zeros((2, 6), np.float32)]}, r"^arms\[0\] must be a MotorizedArm_ActionChunk"),
    ],
)
def test_station_chunk_rejects(rng, kwargs, needle):
    """Seed 003: invalid containers raise ValueError naming the field."""
    args = {"timestamp": 0.0, "rate": 10.0, "arms": [random_chunk(rng, 5)]} | kwargs
    with pytest.raises(ValueError, match=needle):
        Station_ActionChunk(**args)


def test_station_chunk_validate_binds_specs(rng):
    """Seed 003, validate: the dims are bound to concrete specs, one per arm, and the shared horizon."""
    with pytest.raises(ValueError, match=r"^arms\[1\] must have the horizon of arms\[0\] \(5 rows\)"):
        Station_ActionChunk(0.0, 10.0, [random_chunk(rng, 5), random_chunk(rng, horizon=3)])
    two = Station_ActionChunk(0.0, 10.0, [random_chunk(rng, 5), random_chunk(rng, 5)])
    with pytest.raises(ValueError, match=r"^specs must be one MotorizedArmSpec per arm \(2\)"):
        two.validate(SO101_SPEC)
    with pytest.raises(ValueError, match="^joint_angle_q .*n_arm_dof = 6"):
        two.validate([SO101_SPEC, MotorizedArmSpec(30, 100, arm="yam_6dof", gripper="i2rt_linear_gripper_1dof")])


def test_sample_chunk_rows_and_between():
    """Seed 003: row i at i / rate; between rows the station interpolates, before and after it holds."""
    targets = np.array([[0.0, 1.0], [2.0, 3.0], [4.0, 7.0]])
    out = np.asarray(sample_chunk(targets, np.array([-1.0, 0.0, 0.5, 1.0, 1.25, 2.0, 9.0])))
    np.testing.assert_allclose(out, [[0, 1], [0, 1], [1, 2], [2, 3], [2.5, 4], [4, 7], [4, 7]], rtol=0, atol=1e-15)


# --- SimStation playback ----------------------------------------------------------------------


def test_chunk_stamped_now_plays_like_an_unstamped_one(station, rng):
    """Seed 003: a chunk stamped with the current observation's time starts now."""
    arm = random_chunk(rng, 5)
    station.reset(seed=0)
    station.execute(arm, 10.0)
    unstamped = np.stack(station.targets)
    obs = station.reset(seed=0)
    station.execute(Station_ActionChunk(obs.timestamp, 10.0, [arm]))
    stamped = np.stack(station.targets)
    assert stamped.shape == unstamped.shape == (21, 6)  # 0.4 s at 50 Hz, both ends included
    np.testing.assert_allclose(stamped, unstamped, rtol=0, atol=1e-6)
    np.testing.assert_allclose(stamped[::5], _rows(arm), rtol=0, atol=1e-6)


def test_stale_chunk_skips_the_rows_already_past(station, rng):
    """Seed 003: row i is the target i / rate after the reference timestamp, so a chunk stamped
    0.25 s ago starts at row 2.5 (rate 10 Hz) and ends at its last row's time."""
    arm = random_chunk(rng, 5)
    now = station.reset(seed=0).timestamp
    station.execute(Station_ActionChunk(now - 0.25, 10.0, arm))
    played = np.stack(station.targets)
    rows = _rows(arm)
    assert len(played) == 8  # ticks at now + k / 50 up to now + 0.15 s
    np.testing.assert_allclose(played[0], 0.5 * (rows[2] + rows[3]), rtol=0, atol=1e-6)
    np.testing.assert_allclose(played[-1], 0.1 * rows[3] + 0.9 * rows[4], rtol=0, atol=1e-6)  # row 2.5 + 7 / 5


def test_future_chunk_holds_row_0_until_its_timestamp(station, rng):
    """Seed 003: nothing of the chunk is due before its reference timestamp; row 0 is held until then."""
    arm = random_chunk(rng, horizon=2)
    now = station.reset(seed=0).timestamp
    station.execute(Station_ActionChunk(now + 0.1, 10.0, [arm]))
    played, rows = np.stack(station.targets), _rows(arm)
    assert len(played) == 11  # to now + 0.2 s
    np.testing.assert_allclose(played[:6], np.broadcast_to(rows[0], (6, 6)), rtol=0, atol=1e-6)
    np.testing.assert_allclose(played[-1], rows[1], rtol=0, atol=1e-6)


def test_ended_chunk_holds_its_last_row_one_tick(station, rng):
    """Seed 003: after its last row the chunk's target is that row."""
    arm = random_chunk(rng, horizon=3)
    now = station.reset(seed=0).timestamp
    station.execute(Station_ActionChunk(now - 5.0, 10.0, [arm]))
    np.testing.assert_allclose(np.stack(station.targets), _rows(arm)[-1:], rtol=0, atol=1e-6)


def test_stamped_chunk_errors(station, rng):
    """Seed 003 containers enter the simulation validated; the rate is the chunk's own."""
    station.reset(seed=0)
    chunk = Station_ActionChunk(0.0, 10.0, [random_chunk(rng, 5)])
    with pytest.raises(ValueError, match="^chunk_rate_hz must be None"):
        station.execute(chunk, 10.0)
    with pytest.raises(ValueError, match="at most 600.0 s allowed"):
        station.execute(Station_ActionChunk(1e4, 10.0, [random_chunk(rng, 5)]))
    yam = MotorizedArm_ActionChunk(np.zeros((2, 6), np.float32), np.zeros((2, 1), np.float32))
    with pytest.raises(ValueError, match="^joint_angle_q .*n_arm_dof = 5"):
        station.execute(Station_ActionChunk(0.0, 10.0, [yam]))


def test_client_loop_written_from_the_interface(station):
    """Seed 003 client: observe, answer with a chunk stamped at the observation, let the station
    interpolate it up to the control rate; observations arrive at refresh_rate on one clock."""
    spec = MotorizedArmSpec(refresh_rate=25, control_rate=CONTROL_RATE)
    obs = station.reset(seed=0)
    obs.validate(spec)
    start = MotorizedArm_JointPose(obs.joint_angle_q, obs.gripper_pos)
    goal = np.array([0.2, -0.3, 0.3, 0.1, 0.0], np.float32)
    stamps = []
    for _ in range(3):
        q = np.linspace(obs.joint_angle_q, goal, 8, dtype=np.float32)
        g = np.full((8, 1), 0.5, np.float32)
        chunk = Station_ActionChunk(timestamp=obs.timestamp, rate=10.0, arms=[MotorizedArm_ActionChunk(q, g)])
        chunk.validate(spec)
        published = station.execute(chunk)
        stamps += [o.timestamp for o in published]
        obs = published[-1]
    assert len(stamps) == 3 * 18  # 0.7 s per chunk: 36 ticks at 50 Hz, every 2nd published
    np.testing.assert_allclose(np.diff(stamps), 1 / spec.refresh_rate, rtol=0, atol=1e-5)
    np.testing.assert_allclose(station.targets[-1], np.r_[goal, 0.5], rtol=0, atol=1e-6)
    assert np.abs(obs.joint_angle_q - start.joint_angle_q).max() > 0.05  # the arm moved
