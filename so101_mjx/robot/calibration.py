"""A real follower's calibration: lerobot's ``so101_follower`` calibration file, checked, and what it
assumes about the arm (docs/calibration.md).

lerobot >= 0.6 (read at huggingface/lerobot 7427f31, version 0.6.2) calibrates an SO-101 follower in
``SOFollower.calibrate`` (``src/lerobot/robots/so_follower/so_follower.py``):

1. the user holds every joint in the middle of its range; ``set_half_turn_homings``
   (``src/lerobot/motors/motors_bus.py``, with ``FeetechMotorsBus._get_half_turn_homings`` in
   ``src/lerobot/motors/feetech/feetech.py``) writes each servo's homing offset so that this pose
   reads :data:`HALF_TURN` raw counts, half of the STS3215's largest count :data:`MAX_COUNT`;
2. the user sweeps every joint but ``wrist_roll`` through its range; the lowest and highest counts
   read become ``range_min`` and ``range_max`` (``wrist_roll``: 0 and 4095).

The file holds, per motor name, ``{"id", "drive_mode", "homing_offset", "range_min", "range_max"}``
(``drive_mode`` is always 0 there). The counts in it are the servo's present positions, its homing
offset already applied; the offset itself plays no part in lerobot's normalization.

What the file cannot say, and :class:`Calibration` assumes (``zero_counts`` is settable): the MJCF
joint zero reads ``zero_counts`` counts, :data:`HALF_TURN` by default (the scene is TheRobotStudio's
``so101_new_calib``, whose joint zeros are the middle of the joints' ranges, the pose lerobot's
calibration holds); and counts grow with the MJCF joint angle, :data:`COUNTS_PER_TURN` per turn, on all
six motors (lerobot's kinematics, ``src/lerobot/model/kinematics.py``, feed a follower's degrees into
``so101_new_calib.urdf`` unchanged). :mod:`so101_mjx.robot.motors` converts with it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from so101_mjx.errors import InputError, MissingFileError

# the follower's motors: lerobot's names, bus ids 1..6
MOTORS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
COUNTS_PER_TURN = 4096  # the STS3215's 12-bit magnetic encoder
MAX_COUNT = COUNTS_PER_TURN - 1  # 4095, lerobot's max_res: the largest count and its normalization's counts per 360°
HALF_TURN = MAX_COUNT // 2  # 2047: what the pose held at calibration reads
MAX_HOMING_OFFSET = 2047  # the servo's register: sign and 11 bits of magnitude
MAX_ID = 253  # Feetech bus ids
FILE_FIELDS = ("id", "drive_mode", "homing_offset", "range_min", "range_max")  # lerobot's MotorCalibration
MAX_FILE_BYTES = 2**16  # a calibration file is a few hundred bytes


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, (float, np.floating))) and math.isfinite(value)


# field -> (what it may hold, the test), each per motor
_KINDS = {
    "id": (f"an int in 0..{MAX_ID}", lambda v: _is_int(v) and 0 <= v <= MAX_ID),
    "drive_mode": ("0 or 1", lambda v: _is_int(v) and v in (0, 1)),
    "homing_offset": (f"an int in -{MAX_HOMING_OFFSET}..{MAX_HOMING_OFFSET}",
                      lambda v: _is_int(v) and abs(v) <= MAX_HOMING_OFFSET),
    "range_min": (f"a whole encoder count in 0..{MAX_COUNT}", lambda v: _is_int(v) and 0 <= v <= MAX_COUNT),
    "range_max": (f"a whole encoder count in 0..{MAX_COUNT}", lambda v: _is_int(v) and 0 <= v <= MAX_COUNT),
    "zero_counts": (f"a finite number of counts in 0..{MAX_COUNT}", lambda v: _is_real(v) and 0 <= v <= MAX_COUNT),
}


@dataclasses.dataclass(frozen=True)
class Calibration:
    """A follower's calibration: each field holds six values, one per motor in :data:`MOTORS` order.

    ``range_min`` / ``range_max`` (raw counts), ``drive_mode``, ``homing_offset`` and ``id`` are
    lerobot's; ``zero_counts`` is the count each motor reads at the MJCF joint zero (the module's
    assumption). ``source`` names it in errors (the file it came from). InputError, one line naming
    ``source``, the motor and the field, for a value out of its range, ``range_min >= range_max``, or a
    range that does not hold the zero pose (lerobot sweeps it from the pose it holds at ``HALF_TURN``).
    """

    range_min: tuple[int, ...]
    range_max: tuple[int, ...]
    drive_mode: tuple[int, ...] = (0,) * len(MOTORS)
    homing_offset: tuple[int, ...] = (0,) * len(MOTORS)
    id: tuple[int, ...] = tuple(range(1, len(MOTORS) + 1))
    zero_counts: tuple[float, ...] = (float(HALF_TURN),) * len(MOTORS)
    source: str = dataclasses.field(default="calibration", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.source, str):
            raise InputError(f"calibration source must be a string (the file's path), got {self.source!r}")
        for field, (what, test) in _KINDS.items():
            values = getattr(self, field)
            if not isinstance(values, (tuple, list, np.ndarray)) or len(values) != len(MOTORS):
                raise InputError(f"{self.source}: {field} must hold {len(MOTORS)} values, one per motor "
                                 f"{list(MOTORS)}, got {values!r}")
            for motor, value in zip(MOTORS, values):
                if not test(value):
                    raise InputError(f"{self.source}: {motor}.{field} must be {what}, got {value!r}")
            convert = float if field == "zero_counts" else int
            object.__setattr__(self, field, tuple(convert(v) for v in values))
        for motor, low, high, zero in zip(MOTORS, self.range_min, self.range_max, self.zero_counts):
            if low >= high:
                raise InputError(f"{self.source}: {motor}.range_min ({low}) must be below {motor}.range_max ({high})")
            if not low <= zero <= high:
                raise InputError(f"{self.source}: {motor}.range_min..range_max = {low}..{high} must hold the joint's "
                                 f"zero pose at {zero:g} counts (zero_counts): lerobot records the range from the pose "
                                 f"it holds at {HALF_TURN}")

    @classmethod
    def from_lerobot(cls, data: Any, source: str = "calibration", zero_counts: Any = None) -> Calibration:
        """The calibration in lerobot's JSON form ``data`` (motor name -> its :data:`FILE_FIELDS`), with
        ``zero_counts`` (six, or None for the default); InputError naming ``source`` and the motor and field."""
        if not isinstance(data, dict):
            raise InputError(f"{source}: must be a JSON object of the motors {list(MOTORS)}, got {type(data).__name__}")
        unknown = [name for name in data if name not in MOTORS]
        if unknown:
            raise InputError(f"{source}: {unknown} are not motors of an SO-101 follower {list(MOTORS)}")
        # field -> the file's values, unchecked (Any: __post_init__ checks them and makes the tuples)
        fields: dict[str, Any] = {field: [] for field in FILE_FIELDS}
        for motor in MOTORS:
            entry = data.get(motor)
            if not isinstance(entry, dict):
                found = "missing" if motor not in data else f"a {type(entry).__name__}"
                raise InputError(f"{source}: motor {motor} is {found}; expected an object with {list(FILE_FIELDS)}")
            extra = [name for name in entry if name not in FILE_FIELDS]
            if extra:
                raise InputError(f"{source}: {motor} has unknown field(s) {extra}; expected {list(FILE_FIELDS)}")
            for field in FILE_FIELDS:
                if field not in entry:
                    raise InputError(f"{source}: {motor}.{field} is missing")
                fields[field].append(entry[field])
        more = {} if zero_counts is None else {"zero_counts": zero_counts}
        return cls(**fields, **more, source=source)

    @classmethod
    def nominal(cls, ranges: np.ndarray, zero_counts: float = HALF_TURN) -> Calibration:
        """The calibration the joint ``ranges`` (6, 2) rad stand for: each end as the nearest whole count,
        ``zero_counts`` at the joint zero (robot.motors without a calibration maps these ranges)."""
        counts = np.rint(zero_counts + np.asarray(ranges, np.float64) * COUNTS_PER_TURN / (2 * np.pi))
        counts = np.clip(counts, 0, MAX_COUNT).astype(int)
        return cls(tuple(counts[:, 0].tolist()), tuple(counts[:, 1].tolist()),
                   zero_counts=(float(zero_counts),) * len(MOTORS), source="nominal calibration")


def load_calibration(path: str | os.PathLike, zero_counts: Any = None) -> Calibration:
    """The calibration lerobot wrote to ``path`` (``~/.cache/huggingface/lerobot/calibration/robots/
    so101_follower/<id>.json``), with ``zero_counts`` (six counts, or None: :data:`HALF_TURN`); one
    InputError line naming the file (and motor and field) for a missing, unreadable or malformed file."""
    path = Path(path)
    if not path.exists():
        raise MissingFileError(f"{path} is missing (a lerobot calibration file, e.g. "
                               "~/.cache/huggingface/lerobot/calibration/robots/so101_follower/<id>.json)")
    if not path.is_file():
        raise InputError(f"{path} is not a plain file; expected a lerobot calibration file (JSON)")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise InputError(f"{path} is larger than {MAX_FILE_BYTES:,} bytes; expected a lerobot calibration file (JSON)")
    try:
        data = json.loads(path.read_bytes())
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None
    except (UnicodeDecodeError, OSError) as err:
        raise InputError(f"{path}: unreadable as JSON text ({type(err).__name__})") from None
    return Calibration.from_lerobot(data, str(path), zero_counts)


def parse(value: Any) -> Calibration | None:
    """A config's ``calibration``: None, a :class:`Calibration`, the path of a lerobot calibration file,
    lerobot's JSON form (motor names as keys) or the dataclass's dict form (``asdict``, run.json)."""
    if value is None or isinstance(value, Calibration):
        return value
    if isinstance(value, (str, os.PathLike)):
        return load_calibration(value)
    if isinstance(value, dict) and set(value) & set(MOTORS):
        return Calibration.from_lerobot(value)
    if isinstance(value, dict):
        names = [f.name for f in dataclasses.fields(Calibration)]
        unknown = [k for k in value if k not in names]
        if unknown or not {"range_min", "range_max"} <= set(value):
            raise InputError(f"calibration as a dict must hold {names} (range_min and range_max required), "
                             f"or lerobot's motors {list(MOTORS)}; got the keys {sorted(map(str, value))}")
        return Calibration(**value)
    raise InputError(f"calibration must be None, the path of a lerobot calibration file, a Calibration or its dict "
                     f"form, got {value!r}")
