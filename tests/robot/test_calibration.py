"""A real follower's lerobot calibration (issue 46, item 1): the file's checks, and motor units that follow
lerobot's own normalization with it.

The reference formulas below are written from lerobot 0.6.2's ``MotorsBus._normalize`` and ``_unnormalize``
(``src/lerobot/motors/motors_bus.py`` at huggingface/lerobot 7427f31): the STS3215's ``max_res`` is 4095;
``DEGREES`` measures from the middle of ``[range_min, range_max]``, unclamped, and ignores ``drive_mode``;
``RANGE_M100_100`` and ``RANGE_0_100`` clamp the raw count into the range, map it linearly and, with
``drive_mode`` 1, mirror the result; writing, the value is clamped, mapped back and truncated by ``int``.
"""

import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.errors import InputError, MissingFileError
from so101_mjx.robot import motors
from so101_mjx.robot.calibration import HALF_TURN, MOTORS, Calibration, load_calibration, parse

MAX_RES = 4095
RAD_COUNTS = 4096 / (2 * np.pi)  # the encoder's counts per radian
# a follower as lerobot's calibrate() could leave it: ranges swept from the middle pose (2047), wrist_roll's
# whole turn, and drive_mode 1 on two motors to exercise lerobot's mirroring
FILE = {
    "shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": -812, "range_min": 731, "range_max": 3390},
    "shoulder_lift": {"id": 2, "drive_mode": 0, "homing_offset": 1024, "range_min": 840, "range_max": 3228},
    "elbow_flex": {"id": 3, "drive_mode": 1, "homing_offset": 37, "range_min": 880, "range_max": 3080},
    "wrist_flex": {"id": 4, "drive_mode": 0, "homing_offset": -2047, "range_min": 1010, "range_max": 3201},
    "wrist_roll": {"id": 5, "drive_mode": 0, "homing_offset": 512, "range_min": 0, "range_max": 4095},
    "gripper": {"id": 6, "drive_mode": 1, "homing_offset": 1500, "range_min": 1960, "range_max": 3330},
}


def lerobot_read(raw: float, entry: dict, mode: str) -> float:
    """A raw present position as lerobot reports it for one motor in norm ``mode``."""
    low, high, mirror = entry["range_min"], entry["range_max"], entry["drive_mode"] == 1
    if mode == "degrees":
        return (raw - (low + high) / 2) * 360 / MAX_RES
    fraction = (min(high, max(low, raw)) - low) / (high - low)
    if mode == "range_m100_100":
        return -(200 * fraction - 100) if mirror else 200 * fraction - 100
    return 100 - 100 * fraction if mirror else 100 * fraction  # range_0_100


def lerobot_write(value: float, entry: dict, mode: str) -> int:
    """The raw goal position lerobot writes for one motor's ``value`` in norm ``mode``."""
    low, high, mirror = entry["range_min"], entry["range_max"], entry["drive_mode"] == 1
    if mode == "degrees":
        return int(value * MAX_RES / 360 + (low + high) / 2)
    if mode == "range_m100_100":
        value = min(100.0, max(-100.0, -value if mirror else value))
        return int((value + 100) / 200 * (high - low) + low)
    value = min(100.0, max(0.0, 100 - value if mirror else value))
    return int(value / 100 * (high - low) + low)


def modes(units: str) -> list[str]:
    """Each motor's norm mode for the arm's ``units`` (the gripper is always 0..100)."""
    return [units] * 5 + ["range_0_100"]


def write(tmp_path, data, name="follower.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=4))
    return path


@pytest.fixture
def calibration(tmp_path) -> Calibration:
    return load_calibration(write(tmp_path, FILE))


@pytest.mark.parametrize("units", motors.JOINT_UNITS)
def test_the_units_are_lerobots_normalization_of_the_raw_counts(calibration, model, units):
    ranges = motors.joint_ranges(model)
    rng = np.random.default_rng(0)
    low, high = np.asarray(calibration.range_min), np.asarray(calibration.range_max)
    raw = rng.uniform(low, high, (64, 6))  # the counts a follower in range reads
    q = (raw - HALF_TURN) / RAD_COUNTS  # the joint angles they stand for: MJCF zero at 2047, 4096 counts per turn
    expected = np.array([[lerobot_read(r, FILE[m], mode) for r, m, mode in zip(row, MOTORS, modes(units))]
                         for row in raw])
    np.testing.assert_allclose(motors.to_motor(q, ranges, units, calibration), expected, rtol=0, atol=1e-9)
    on_device = motors.to_motor(jnp.asarray(q), ranges, units, calibration)
    np.testing.assert_allclose(np.asarray(on_device), expected, rtol=0, atol=1e-9)
    # lerobot's write maps a value back to the count it truncates: ours lies in [written, written + 1)
    counts = HALF_TURN + motors.from_motor(expected, ranges, units, calibration) * RAD_COUNTS
    written = np.array([[lerobot_write(v, FILE[m], mode) for v, m, mode in zip(row, MOTORS, modes(units))]
                        for row in expected])
    assert np.all((counts >= written - 1e-6) & (counts < written + 1))
    # drive_mode 1 mirrors the range modes (the elbow's value falls as its joint rises), never the degrees
    at = lambda q: motors.to_motor(q, ranges, units, calibration)  # noqa: E731
    rising = at(np.full(6, 0.1)) > at(np.zeros(6))
    assert rising.tolist() == [True, True, units == "degrees", True, True, False]


@pytest.mark.parametrize("units", motors.JOINT_UNITS)
def test_a_round_trip_returns_the_angles(calibration, model, units):
    ranges = motors.joint_ranges(model)
    q = np.random.default_rng(1).uniform(ranges[:, 0], ranges[:, 1], (128, 6))
    back = motors.from_motor(motors.to_motor(q, ranges, units, calibration), ranges, units, calibration)
    assert type(back) is np.ndarray and back.dtype == np.float64
    np.testing.assert_allclose(back, q, rtol=0, atol=1e-12)
    q32 = jnp.asarray(q, jnp.float32)
    back32 = motors.from_motor(motors.to_motor(q32, ranges, units, calibration), ranges, units, calibration)
    assert back32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(back32, np.float64), np.asarray(q32, np.float64), rtol=0, atol=1e-6)


@pytest.mark.parametrize("units", motors.JOINT_UNITS)
def test_a_nominal_calibration_of_the_mjcf_ranges_gives_todays_units(model, units):
    """Up to whole counts at the ranges' ends and 4096 counts per turn against lerobot's 4095 per 360
    degrees: within a tenth of a unit (a count is 0.088 degrees)."""
    ranges = motors.joint_ranges(model)
    nominal = Calibration.nominal(ranges)
    q = np.random.default_rng(2).uniform(ranges[:, 0], ranges[:, 1], (256, 6))
    np.testing.assert_allclose(motors.to_motor(q, ranges, units, nominal), motors.to_motor(q, ranges, units),
                               rtol=0, atol=0.1)
    np.testing.assert_allclose(motors.motor_limits(ranges, units, nominal), motors.motor_limits(ranges, units),
                               rtol=0, atol=0.1)


@pytest.mark.parametrize("units", motors.JOINT_UNITS)
def test_without_a_calibration_the_units_are_bitwise_todays(model, units):
    """The maps of so101-mjx before calibrations, written out: no calibration takes that very arithmetic."""
    ranges = motors.joint_ranges(model)
    lower, upper = ranges.T
    if units == "degrees":
        gain = np.full(6, 180.0 / np.pi)
        offset = -gain * (lower + upper) / 2
    else:
        gain = 200.0 / (upper - lower)
        offset = -100.0 - gain * lower
    gain[5] = 100.0 / (upper[5] - lower[5])
    offset[5] = -gain[5] * lower[5]
    q = np.random.default_rng(3).uniform(lower, upper, (64, 6))
    for array in (q, jnp.asarray(q), jnp.asarray(q, jnp.float32)):
        value = motors.to_motor(array, ranges, units)
        if isinstance(array, np.ndarray):
            np.testing.assert_array_equal(value, q * gain + offset)
            np.testing.assert_array_equal(motors.from_motor(value, ranges, units), (value - offset) / gain)
        else:
            want = array * jnp.asarray(gain, array.dtype) + jnp.asarray(offset, array.dtype)
            np.testing.assert_array_equal(np.asarray(value), np.asarray(want))
        np.testing.assert_array_equal(np.asarray(motors.to_motor(array, ranges, units, None)), np.asarray(value))
    np.testing.assert_array_equal(motors.motor_limits(ranges, units), ranges * gain[:, None] + offset[:, None])


def test_the_limits_are_where_the_joint_and_the_calibrated_motor_both_reach(model):
    ranges = motors.joint_ranges(model)
    low, high = (1500,) * 5 + (1950,), (2600,) * 6  # inside every MJCF range
    narrow = Calibration(range_min=low, range_max=high, drive_mode=(0, 0, 1, 0, 0, 1))
    for units in motors.JOINT_UNITS:
        limits = motors.motor_limits(ranges, units, narrow)  # the calibrated ranges
        reach = motors.to_motor((np.array([low, high], float) - HALF_TURN) / RAD_COUNTS, ranges, units, narrow)
        np.testing.assert_allclose(limits, np.sort(reach.T, axis=1), atol=1e-9)
        assert np.all(limits[:, 0] < limits[:, 1])
    np.testing.assert_allclose(motors.motor_limits(ranges, "range_m100_100", narrow), [[-100, 100]] * 5 + [[0, 100]],
                               atol=1e-9)
    wide = Calibration(range_min=(0,) * 6, range_max=(4095,) * 6)
    np.testing.assert_allclose(motors.motor_limits(ranges, "degrees", wide),  # the MJCF ranges, inside the whole turns
                               motors.to_motor(ranges.T, ranges, "degrees", wide).T, atol=1e-12)


def test_the_file_loads_in_motor_order_and_keeps_its_values(calibration, tmp_path):
    assert calibration.range_min == tuple(FILE[m]["range_min"] for m in MOTORS)
    assert calibration.drive_mode == (0, 0, 1, 0, 0, 1) and calibration.id == (1, 2, 3, 4, 5, 6)
    assert calibration.zero_counts == (2047.0,) * 6 and calibration.source.endswith("follower.json")
    shuffled = write(tmp_path, {m: FILE[m] for m in reversed(MOTORS)}, "shuffled.json")
    assert load_calibration(shuffled) == calibration  # the source is not compared
    zero = (2000, 2047, 2100, 2047, 2047, 2047.5)
    assert load_calibration(shuffled, zero_counts=zero).zero_counts == tuple(map(float, zero))
    assert parse(dataclasses.asdict(calibration)) == calibration == parse(str(shuffled)) == parse(FILE)
    assert parse(None) is None and parse(calibration) is calibration


COUNT = "a whole encoder count in 0..4095"


def _edit(motor: str, **fields) -> dict:
    return {**FILE, motor: {**FILE[motor], **fields}}


@pytest.mark.parametrize("data, words", [
    ("{\"shoulder_pan\": ", "not valid JSON (Expecting value at line 1, column"),
    ([1, 2], "must be a JSON object of the motors"),
    ({m: FILE[m] for m in MOTORS if m != "wrist_flex"}, "motor wrist_flex is missing"),
    ({**FILE, "wrist_pitch": FILE["wrist_roll"]}, "['wrist_pitch'] are not motors of an SO-101 follower"),
    ({**FILE, "gripper": [1, 2]}, "motor gripper is a list"),
    ({**FILE, "elbow_flex": {k: v for k, v in FILE["elbow_flex"].items() if k != "range_max"}},
     "elbow_flex.range_max is missing"),
    (_edit("elbow_flex", offset=3), "elbow_flex has unknown field(s) ['offset']"),
    (_edit("wrist_flex", drive_mode=2), "wrist_flex.drive_mode must be 0 or 1, got 2"),
    (_edit("wrist_flex", drive_mode=True), "wrist_flex.drive_mode must be 0 or 1, got True"),
    (_edit("shoulder_lift", range_min=1200.5), f"shoulder_lift.range_min must be {COUNT}, got 1200.5"),
    (_edit("shoulder_lift", range_max=4096), f"shoulder_lift.range_max must be {COUNT}, got 4096"),
    (_edit("shoulder_lift", range_min="800"), f"shoulder_lift.range_min must be {COUNT}, got '800'"),
    (_edit("shoulder_pan", homing_offset=-3000), "shoulder_pan.homing_offset must be an int in -2047..2047, got -3000"),
    (_edit("shoulder_pan", id=-1), "shoulder_pan.id must be an int in 0..253, got -1"),
    (_edit("gripper", range_min=3330), "gripper.range_min (3330) must be below gripper.range_max (3330)"),
    (_edit("gripper", range_min=3400), "gripper.range_min (3400) must be below gripper.range_max (3330)"),
    (_edit("elbow_flex", range_min=2100, range_max=3000),
     "elbow_flex.range_min..range_max = 2100..3000 must hold the joint's zero pose at 2047 counts"),
])
def test_a_bad_file_is_refused_in_one_line_naming_the_motor_and_field(tmp_path, data, words):
    path = write(tmp_path, data)
    with pytest.raises(InputError) as err:
        load_calibration(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ") and words in message and "\n" not in message


def test_a_missing_file_or_a_directory_is_refused(tmp_path):
    with pytest.raises(MissingFileError, match="missing .*so101_follower/<id>.json"):
        load_calibration(tmp_path / "absent.json")
    with pytest.raises(InputError, match="is not a plain file"):
        load_calibration(tmp_path)


@pytest.mark.parametrize("fields, words", [
    ({"range_min": (900,) * 5, "range_max": (3000,) * 6}, "range_min must hold 6 values, one per motor"),
    ({"range_min": (900,) * 6, "range_max": (3000,) * 6, "zero_counts": (2047,) * 5 + (np.nan,)},
     "calibration: gripper.zero_counts must be a finite number of counts in 0..4095, got nan"),
    ({"range_min": (900,) * 6, "range_max": (3000,) * 6, "zero_counts": (2047,) * 5 + (3500,)},
     "gripper.range_min..range_max = 900..3000 must hold the joint's zero pose at 3500 counts"),
])
def test_a_bad_calibration_built_in_code_names_the_field(fields, words):
    with pytest.raises(InputError) as err:
        Calibration(**fields)
    assert words in str(err.value)


def test_parse_refuses_other_values():
    with pytest.raises(InputError, match="calibration must be None, the path of a lerobot calibration file"):
        parse(42)
    with pytest.raises(InputError, match="calibration as a dict must hold"):
        parse({"range_min": (900,) * 6})
