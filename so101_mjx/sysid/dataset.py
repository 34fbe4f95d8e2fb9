"""A recording for :mod:`so101_mjx.sysid.fit` from a LeRobotDataset v3.0 of a follower in joint mode.

The dataset needs ``action`` and ``observation.state`` features holding the six ``"<motor>.pos"``
entries (:data:`~so101_mjx.robot.motors.FEATURE_NAMES`, a real ``so101_follower``'s names, and the
joint-mode datasets of ``so101-mjx record`` and ``so101-mjx deploy``), in ``units``: lerobot's degrees
(``use_degrees=True``) or -100..100 (``use_degrees=False``), the gripper 0..100 either way. Frames are
read in order per episode; the state of frame t is what the follower measured before action t was sent.
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
from so101_mjx.errors import InputError
from so101_mjx.robot import motors
from so101_mjx.robot.scenes import load_model
from so101_mjx.sysid.fit import Recording

COLUMNS = ("action", "observation.state")
MIN_FRAMES = 30  # per episode


def _indices(info: dict, key: str, root: Path) -> list[int]:
    """Where the six motors sit in feature ``key``'s vector; InputError naming what is missing."""
    feature = info["features"].get(key)
    if feature is None:
        raise InputError(f"{root} has no {key!r} feature; sysid needs {list(COLUMNS)} with {list(motors.FEATURE_NAMES)}")
    names = feature.get("names")
    names = names.get("motors", names) if isinstance(names, dict) else names
    missing = [n for n in motors.FEATURE_NAMES if not names or n not in names]
    if missing:
        raise InputError(f"{root}: feature {key!r} lacks {missing} (names: {names}); sysid needs a follower's joint positions")
    return [names.index(n) for n in motors.FEATURE_NAMES]


def read(root: str | Path, *, units: str = "degrees", task: str = "SO101Reach-v0") -> Recording:
    """The dataset at ``root`` as a :class:`Recording` in rad (joint ranges of ``task``'s scene)."""
    root = Path(root)
    info = read_info(root)
    ranges = motors.joint_ranges(load_model(registry.task(task).scene))
    where = {key: _indices(info, key, root) for key in COLUMNS}
    tables = []
    for path in fmt.files(root, "data/"):
        try:
            tables.append(pq.read_table(path, columns=["episode_index", "frame_index", *COLUMNS]))
        except (pa.ArrowException, OSError) as err:
            raise InputError(f"{path} is unreadable: {err}") from None
    if not tables:
        raise InputError(f"{root} has no data files (data/chunk-*/file-*.parquet)")
    table = pa.concat_tables(tables)
    episodes = []
    for episode in np.unique(table["episode_index"].to_numpy()):
        rows = table.filter(pc.equal(table["episode_index"], episode)).sort_by("frame_index")
        if len(rows) < MIN_FRAMES:
            continue
        values = {key: np.stack(rows[key].to_numpy(zero_copy_only=False))[:, where[key]].astype(np.float64) for key in COLUMNS}
        if not all(np.all(np.isfinite(v)) for v in values.values()):
            raise InputError(f"{root}: episode {episode} has non-finite actions or states")
        episodes.append(tuple(np.asarray(motors.from_motor(values[key], ranges, units)) for key in COLUMNS))
    if not episodes:
        raise InputError(f"{root}: no episode has {MIN_FRAMES} frames or more")
    return Recording(float(info["fps"]), tuple(episodes))
