"""A LeRobotDataset v3.0's consistency, checked before anything is appended.

:func:`inspect` reads ``info.json`` (its schema; feature keys as
:data:`~so101_mjx.data.lerobot_format.FEATURE_KEY`), every ``meta/episodes`` row, every data file's
:data:`DATA_COLUMNS`, and counts every video's frames. An episode is intact when its row is sane
(``length`` >= 1 frames, ``dataset_to_index - dataset_from_index == length``), one run of a data
file's rows is its rows (``index`` from..to, ``frame_index`` 0..length-1), and each video file it
names holds its frames. The dataset is consistent when every episode is intact and in place: rows
0, 1, ... with contiguous frame offsets, each file holding exactly its listed episodes in order,
``info.json``'s totals and fps those of the episodes (fps: the data's ``timestamp`` of frame 1).
:func:`check` refuses an inconsistent dataset with one line;
:func:`so101_mjx.data.dataset_repair.repair` keeps its intact episodes.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from so101_mjx import _schema as schema
from so101_mjx.data import lerobot_format as fmt
from so101_mjx.errors import InputError, MissingFileError, ParameterError

# the info.json fields read back (checking, resuming), and those of each feature
INFO_FIELDS = {"codebase_version": schema.STRING, "total_episodes": schema.integer(0),
               "total_frames": schema.integer(0),
               "fps": schema.integer(1), "chunks_size": schema.integer(1), "data_files_size_in_mb": schema.number(0),
               "video_files_size_in_mb": schema.number(0), "features": schema.OBJECT}
FEATURE_FIELDS = {"dtype": schema.STRING, "shape": schema.list_of(schema.integer(1)), "names": schema.Kind(
    "a list, a dict or null", lambda v: v is None or isinstance(v, (list, dict)))}
EPISODE_COLUMNS = ("episode_index", "tasks", "length", "dataset_from_index", "dataset_to_index", "data/chunk_index",
                   "data/file_index")
VIDEO_COLUMNS = ("chunk_index", "file_index", "from_timestamp", "to_timestamp")
DATA_COLUMNS = ("episode_index", "index", "frame_index", "timestamp")  # the data columns inspected


def read_info(root: str | Path) -> dict[str, Any]:
    """``meta/info.json`` of the dataset at ``root``, checked against :data:`INFO_FIELDS` (each feature
    against :data:`FEATURE_FIELDS`, each key against :data:`~so101_mjx.data.lerobot_format.FEATURE_KEY`);
    InputError naming the file and the first bad field."""
    path = Path(root) / fmt.INFO_PATH
    if not path.is_file():
        raise MissingFileError(f"no dataset to resume or repair at {root} ({fmt.INFO_PATH} is missing)")
    info = schema.fields(path, schema.read_json(path), INFO_FIELDS)
    if info["codebase_version"] != fmt.CODEBASE_VERSION:
        raise InputError(f"{path}: codebase_version {info['codebase_version']!r}; so101-mjx writes "
                         f"{fmt.CODEBASE_VERSION} datasets only")
    fmt.check_feature_keys(info["features"], path)
    for key, feature in info["features"].items():
        schema.fields(path, feature, FEATURE_FIELDS, where=f"features.{key}.")
    return info


def read_episodes(root: Path) -> pa.Table:
    """Every row of ``meta/episodes`` (all files, in chunk/file order); InputError naming an unreadable file."""
    return pa.concat_tables([fmt.read_columns(path) for path in fmt.files(root, "meta/episodes/")])


@dataclasses.dataclass
class Finding:
    """What :func:`inspect` found (rows as dicts of ``meta/episodes`` columns)."""

    info: dict[str, Any]
    fps: int  # the episodes' frame rate: info.json's, unless the data's timestamps agree on another
    rows: list[dict[str, Any]]  # every row of the readable meta/episodes files, "_meta": its file's (chunk, file)
    # the intact rows by episode_index; "_data": ((chunk, file), first row), "_videos": key -> (file, start, stop)
    intact: list[dict[str, Any]]
    problems: list[str]  # one line each
    # prefix -> file -> rows (data/) or frames (videos/<key>/; -1: unreadable)
    sizes: dict[str, dict[tuple[int, int], int]]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def inspect(root: str | Path) -> Finding:
    """The dataset at ``root``'s intact episodes and problems (InputError when ``info.json`` is unusable)."""
    root = Path(root)
    info = read_info(root)
    video_keys = [k for k, f in info["features"].items() if f["dtype"] == "video"]
    need = (*EPISODE_COLUMNS, *(f"videos/{k}/{c}" for k in video_keys for c in VIDEO_COLUMNS))
    problems: list[str] = []
    rows = []
    for path in fmt.files(root, "meta/episodes/"):
        try:
            rows += [r | {"_meta": fmt.file_index(path)} for r in fmt.read_columns(path, None, need).to_pylist()]
        except InputError as err:
            problems.append(str(err))
    data = _read_data(root, problems)
    found = Finding(info, _fps(info, data, problems), rows, [], problems,
                    {"data/": {f: len(c["index"]) for f, c in data.items()}})
    for key in video_keys:
        found.sizes[f"videos/{key}/"] = {fmt.file_index(p): _count(p) for p in fmt.files(root, f"videos/{key}/")}
    _find_intact(found, data, video_keys)
    _check_layout(found, video_keys)
    lengths = [r["length"] for r in rows if _is_int(r["length"])]
    if info["total_episodes"] != len(rows):
        problems.append(f"info.json counts {info['total_episodes']} episodes, meta/episodes lists {len(rows)}")
    if info["total_frames"] != sum(lengths):
        problems.append(f"info.json counts {info['total_frames']} frames, meta/episodes {sum(lengths)}")
    for rel in (fmt.TASKS_PATH, fmt.STATS_PATH):
        try:
            pq.read_table(root / rel) if rel.endswith(".parquet") else json.loads((root / rel).read_text())
        except (pa.ArrowException, OSError, ValueError) as err:
            problems.append(f"{rel} is unreadable ({' '.join(str(err).split())[:120]})")
    return found


def _read_data(root: Path, problems: list[str]) -> dict[tuple[int, int], dict[str, np.ndarray]]:
    """Each readable data file's :data:`DATA_COLUMNS` (integers without nulls, but ``timestamp``)."""
    data = {}
    for path in fmt.files(root, "data/"):
        try:
            table = fmt.read_columns(path, list(DATA_COLUMNS), DATA_COLUMNS)
        except InputError as err:
            problems.append(str(err))
            continue
        kinds = [pa.types.is_integer] * 3 + [lambda t: pa.types.is_floating(t) or pa.types.is_integer(t)]
        bad = [c for c, kind in zip(DATA_COLUMNS, kinds) if not kind(table.schema.field(c).type)
               or table.column(c).null_count]
        if bad:
            problems.append(f"{path}: column {bad[0]!r} must hold numbers (integers but for timestamp), no nulls")
            continue
        data[fmt.file_index(path)] = {c: table.column(c).to_numpy() for c in DATA_COLUMNS}
    return data


def _fps(info: dict[str, Any], data: dict[tuple[int, int], dict[str, np.ndarray]], problems: list[str]) -> int:
    """info.json's fps, or the one that most episodes' ``timestamp`` of frame 1 says when that differs."""
    rates: collections.Counter[int] = collections.Counter()
    for cols in data.values():
        t = cols["timestamp"][cols["frame_index"] == 1].astype(np.float64)
        rates.update(int(round(1 / x)) for x in t if math.isfinite(x) and 0 < x <= 1)
    if rates:
        rate, votes = rates.most_common(1)[0]
        if rate != info["fps"] and votes * 2 > sum(rates.values()):
            problems.append(f"info.json says fps {info['fps']}, the episodes' timestamps {rate}")
            return rate
    return info["fps"]


def _count(path: Path) -> int:
    try:
        return fmt.count_frames(path)
    except (RuntimeError, OSError):
        return -1


def _find_intact(found: Finding, data: dict[tuple[int, int], dict[str, np.ndarray]], video_keys: list[str]) -> None:
    """Sort the intact rows into ``found.intact`` (the first of each episode_index), the others into its problems."""
    runs: dict[int, list[tuple[tuple[int, int], int, int]]] = collections.defaultdict(list)
    for f, cols in data.items():
        ep = cols["episode_index"]
        starts: np.ndarray | list[int] = np.flatnonzero(np.r_[True, ep[1:] != ep[:-1]]) if len(ep) else []
        for a, b in zip(starts, [*starts[1:], len(ep)]):
            runs[int(ep[a])].append((f, int(a), int(b - a)))
    seen = set()
    for row in sorted(found.rows, key=lambda r: (0, r["episode_index"]) if _is_int(r["episode_index"]) else (1, 0)):
        why = _row_problem(row) or ("listed twice" if row["episode_index"] in seen else None)
        where = why or _locate(row, data, runs)
        videos = {} if isinstance(where, str) else {k: _video(row, k, found) for k in video_keys}
        why = where if isinstance(where, str) else next((v for v in videos.values() if isinstance(v, str)), None)
        if why:
            found.problems.append(f"episode {row['episode_index']} "
                                  f"({fmt.file_path('meta/episodes/', row['_meta'])}): {why}")
            continue
        seen.add(row["episode_index"])
        found.intact.append(row | {"_data": where, "_videos": videos})


def _row_problem(row: dict[str, Any]) -> str | None:
    if not all(_is_int(row[c]) for c in EPISODE_COLUMNS if c != "tasks"):
        return "its row holds a missing or negative index"
    if row["length"] < 1 or row["dataset_to_index"] - row["dataset_from_index"] != row["length"]:
        return (f"its row says {row['length']} frames at index {row['dataset_from_index']}..{row['dataset_to_index']} "
                "(at least 1 frame)")
    return None


def _locate(row: dict[str, Any], data: dict, runs: dict) -> tuple[tuple[int, int], int] | str:
    """Where a data file holds the episode's rows, in one run (the file its row names first), else why not."""
    n, first, listed = row["length"], row["dataset_from_index"], (row["data/chunk_index"], row["data/file_index"])
    for f, start, count in sorted(runs.get(row["episode_index"], ()), key=lambda run: run[0] != listed):
        cols = data[f]
        if count == n and np.array_equal(cols["index"][start: start + n], np.arange(first, first + n)) \
                and np.array_equal(cols["frame_index"][start: start + n], np.arange(n)):
            return f, start
    return f"no data file holds its {n} rows (index {first}..{first + n - 1})" + ("" if listed in data else
                                                                                 f"; {fmt.file_path('data/', listed)} "
                                                                                 "is missing or unreadable")


def _video(row: dict[str, Any], key: str, found: Finding) -> tuple[tuple[int, int], int, int] | str:
    """The episode's ``(file, first frame, end frame)`` in ``key``'s video files, else why not."""
    prefix = f"videos/{key}/"
    f, times = (row[prefix + "chunk_index"], row[prefix + "file_index"]), (row[prefix + "from_timestamp"],
                                                                           row[prefix + "to_timestamp"])
    if not (all(map(_is_int, f)) and all(isinstance(t, (int, float)) and math.isfinite(t) and t >= 0 for t in times)):
        return f"its {key} video columns are not indices and timestamps"
    frames = found.sizes[prefix].get(f)
    start, stop = (round(t * found.fps) for t in times)
    if (frames is None or frames < 0 or stop - start != row["length"] or stop > frames
            or max(abs(t * found.fps - round(t * found.fps)) for t in times) > 0.01):
        state = "is missing" if frames is None else "is unreadable" if frames < 0 else f"holds {frames} frames"
        return f"{fmt.file_path(prefix, f)} {state}, not its frames {start}..{stop}"
    return f, start, stop


def _check_layout(found: Finding, video_keys: list[str]) -> None:
    """Problems of place: rows out of order, offsets with gaps, a file holding episodes out of order or rows and frames
    no row lists."""
    intact, problems = found.intact, found.problems
    if len(intact) == len(found.rows):
        if [r["episode_index"] for r in found.rows] != list(range(len(found.rows))):
            problems.append("meta/episodes does not list the episodes 0, 1, ... in order")
        elif any(r["dataset_from_index"] != (intact[i - 1]["dataset_to_index"] if i else 0)
                 for i, r in enumerate(intact)):
            problems.append("meta/episodes: the episodes' frame offsets are not contiguous from 0")
    for prefix, places in [("data/", [(r, (r["data/chunk_index"], r["data/file_index"]), r["_data"]) for r in intact]),
                           *((f"videos/{k}/", [(r, r["_videos"][k][0], r["_videos"][k][:2]) for r in intact])
                             for k in video_keys)]:
        used: collections.Counter[Any] = collections.Counter()
        listed_so_far: collections.Counter[Any] = collections.Counter()
        misplaced = False
        for row, listed, (f, start) in places:
            if not misplaced and (f, start) != (listed, listed_so_far[listed]):
                misplaced = True
                problems.append(f"{fmt.file_path(prefix, f)}: episode {row['episode_index']} is not at "
                                f"{fmt.file_path(prefix, listed)}'s {'row' if prefix == 'data/' else 'frame'} "
                                f"{listed_so_far[listed]}")
            used[f] += row["length"]
            listed_so_far[listed] += row["length"]
        for f, size in found.sizes[prefix].items():
            if size < 0 or size > used[f]:
                what = ("is unreadable" if size < 0
                        else f"holds {size - used[f]} {'rows' if prefix == 'data/' else 'frames'} that meta/episodes "
                        "does not list")
                problems.append(f"{fmt.file_path(prefix, f)} {what}")


def check(root: str | Path) -> dict[str, Any]:
    """``info.json`` of a consistent dataset with episodes at ``root``; else one line naming the first problem."""
    found = inspect(root)
    if found.problems:
        more = f" (and {len(found.problems) - 1} more)" if len(found.problems) > 1 else ""
        keep = f"repair=True keeps its {len(found.intact)} intact episodes" if found.intact else "no episode is intact"
        raise ParameterError(f"{root}: {found.problems[0]}{more}; {keep}", "repair=True")
    if found.info["total_episodes"] < 1:
        raise InputError(f"{root}: can only resume a dataset with episodes, found none")
    return found.info
