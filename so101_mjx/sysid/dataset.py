"""A recording for :mod:`so101_mjx.sysid.fit` from a LeRobotDataset v3.0 of a follower in joint mode.

The dataset needs ``action`` and ``observation.state`` features holding the six ``"<motor>.pos"``
entries (:data:`~so101_mjx.robot.motors.FEATURE_NAMES`, a real ``so101_follower``'s names, and the
joint-mode datasets of ``so101-mjx record`` and ``so101-mjx deploy``), in ``units``: lerobot's degrees
(``use_degrees=True``) or -100..100 (``use_degrees=False``), the gripper 0..100 either way: float vectors,
one entry per name, as a follower's. With the follower's ``calibration``
(:class:`~so101_mjx.robot.calibration.Calibration`) the values are read as that arm's units, else the
scene's joint ranges stand for its calibration. A position more than :data:`RANGE_MARGIN` of a motor's span
outside its range in ``units`` is refused (a recording in other units). Frames are read in order per
episode; the state of frame t is what the follower measured before action t was sent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from so101_mjx.data import lerobot_format as fmt
from so101_mjx.data.dataset_check import read_info
from so101_mjx.envs import registry
from so101_mjx.errors import InputError, ParameterError
from so101_mjx.robot import motors
from so101_mjx.robot.calibration import Calibration
from so101_mjx.robot.scenes import load_model
from so101_mjx.sysid.fit import Recording

COLUMNS = ("action", "observation.state")
MIN_FRAMES = 30  # per episode
# of each motor's span: how far outside its range a recorded position may lie (calibration differences)
RANGE_MARGIN = 0.1


def motor_indices(info: dict, key: str, root: Path, user: str = "sysid", needs: tuple[str, ...] = COLUMNS) -> list[int]:
    """Where the six motors sit in feature ``key``'s vector: a float vector of one entry per name holding the
    follower's :data:`~so101_mjx.robot.motors.FEATURE_NAMES`; InputError naming what is not and the command
    (``user``) that needs it (the features ``needs``)."""
    feature = info["features"].get(key)
    if feature is None:
        raise InputError(f"{root} has no {key!r} feature; {user} needs {list(needs)} with {list(motors.FEATURE_NAMES)}")
    names = feature.get("names")
    names = names.get("motors", names) if isinstance(names, dict) else names
    missing = [n for n in motors.FEATURE_NAMES if not isinstance(names, list) or n not in names]
    if missing:
        raise InputError(f"{root}: feature {key!r} lacks {missing} (names: {names}); {user} needs a follower's "
                         "joint positions")
    if feature["dtype"] not in ("float32", "float64") or feature["shape"] != [len(names)]:
        raise InputError(f"{root}: feature {key!r} is {feature['dtype']} of shape {feature['shape']}; {user} needs a "
                         f"follower's: float32 or float64 of shape [{len(names)}], one per name")
    return [names.index(n) for n in motors.FEATURE_NAMES]


def motor_positions(rows: pa.Table, key: str, where: list[int], width: int, name: str) -> np.ndarray:
    """Column ``key`` of one episode's ``rows`` as (T, 6) float64 motor values; InputError unless each frame holds
    ``width`` finite numbers."""
    try:
        values = np.stack(rows[key].to_numpy(zero_copy_only=False))
    except (ValueError, TypeError):  # ragged or not arrays
        values = np.asarray(None)
    if values.ndim != 2 or values.shape[1] != width or values.dtype.kind not in "iuf":
        what = f"{values.dtype} values" if values.dtype.kind in "iufb" else "text or other non-numbers"
        raise InputError(f"{name} holds {what} of shape {values.shape[1:]} per frame; its feature says {width} numbers")
    if not np.all(np.isfinite(values)):
        raise InputError(f"{name} has non-finite values")
    return values[:, where].astype(np.float64)


def check_range(values: np.ndarray, limits: np.ndarray, units: str, name: str) -> None:
    """InputError naming the first motor whose ``values`` (T, 6) leave its ``limits`` (6, 2) (in ``units``)
    by more than :data:`RANGE_MARGIN` of its span: a recording in other units, or of another robot."""
    margin = RANGE_MARGIN * (limits[:, 1] - limits[:, 0])
    low, high = limits[:, 0] - margin, limits[:, 1] + margin
    outside = (values < low) | (values > high)
    if outside.any():
        m = int(np.nonzero(outside.any(0))[0][0])
        found = values[:, m][outside[:, m]]
        raise ParameterError(f"{name}: {motors.FEATURE_NAMES[m]} reaches {found[np.abs(found).argmax()]:.4g}, "
                             f"outside its range [{limits[m, 0]:.4g}, {limits[m, 1]:.4g}] in {units} (the gripper "
                             f"0..100) by more than {RANGE_MARGIN:.0%}: record in units {units}, or pass the dataset's "
                             "units (degrees or range_m100_100) and the recording follower's calibration",
                             "units", "calibration")


def read(root: str | Path, *, units: str = "degrees", task: str = "SO101Reach-v0",
         calibration: Calibration | None = None) -> Recording:
    """The dataset at ``root`` as a :class:`Recording` in rad (under ``calibration``, else the joint ranges of
    ``task``'s scene); InputError for features unlike a follower's or positions outside the motors' ranges in
    ``units`` (:func:`check_range`)."""
    root = Path(root)
    info = read_info(root)
    ranges = motors.joint_ranges(load_model(registry.task(task).scene))
    limits = motors.motor_limits(ranges, units, calibration)
    where = {key: motor_indices(info, key, root) for key in COLUMNS}
    tables = []
    for path in fmt.files(root, "data/"):
        try:
            tables.append(pq.read_table(path, columns=["episode_index", "frame_index", *COLUMNS]))
        except (pa.ArrowException, OSError) as err:
            raise InputError(f"{path} is unreadable: {err}") from None
    if not tables:
        raise InputError(f"{root} has no data files (data/chunk-*/file-*.parquet)")
    try:
        table = pa.concat_tables(tables)
    except pa.ArrowException as err:
        raise InputError(f"{root}: its data files disagree on their columns' types ({err})") from None
    episodes = []
    for episode in np.unique(table["episode_index"].to_numpy()):
        rows = table.filter(pc.equal(table["episode_index"], episode)).sort_by("frame_index")
        if len(rows) < MIN_FRAMES:
            continue
        values = {}
        for key in COLUMNS:
            name = f"{root}: episode {episode}'s {key!r}"
            values[key] = motor_positions(rows, key, where[key], info["features"][key]["shape"][0], name)
            check_range(values[key], limits, units, name)
        angles = (motors.from_motor(values[key], ranges, units, calibration) for key in COLUMNS)
        commands, measured = (np.asarray(q) for q in angles)
        episodes.append((commands, measured))
    if not episodes:
        raise InputError(f"{root}: no episode has {MIN_FRAMES} frames or more")
    return Recording(float(info["fps"]), tuple(episodes))
