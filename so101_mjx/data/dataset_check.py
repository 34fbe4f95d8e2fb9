"""A LeRobotDataset v3.0's consistency, checked before anything is appended, and its repair.

:func:`inspect` reads ``info.json`` (its schema), every ``meta/episodes`` file (readable footers;
episode indices 0, 1, ...; contiguous frame offsets), every data file (its ``episode_index`` and
``index`` columns against the episodes' offsets), and counts every video's frames against the
episodes' timestamps. It finds the complete prefix: the episodes ``0 .. complete - 1`` whose
metadata, rows and frames are all there, and the problems past it. :func:`check` refuses an
inconsistent dataset with one line; :func:`repair` truncates one back to its complete prefix
in one :class:`so101_mjx._files.Transaction`.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from so101_mjx import _schema as schema
from so101_mjx._files import Transaction, recover
from so101_mjx.data import lerobot_format as fmt
from so101_mjx.data.stats import QUANTILE_KEYS, aggregate_stats
from so101_mjx.errors import InputError, MissingFileError

# the info.json fields read back (checking, resuming), and those of each feature
INFO_FIELDS = {"codebase_version": schema.STRING, "total_episodes": schema.integer(0), "total_frames": schema.integer(0),
               "fps": schema.integer(1), "chunks_size": schema.integer(1), "data_files_size_in_mb": schema.number(0),
               "video_files_size_in_mb": schema.number(0), "features": schema.OBJECT}
FEATURE_FIELDS = {"dtype": schema.STRING, "shape": schema.list_of(schema.integer(1)), "names": schema.Kind(
    "a list, a dict or null", lambda v: v is None or isinstance(v, (list, dict)))}
EPISODE_COLUMNS = ("episode_index", "tasks", "length", "dataset_from_index", "dataset_to_index", "data/chunk_index", "data/file_index")
VIDEO_COLUMNS = ("chunk_index", "file_index", "from_timestamp", "to_timestamp")


def read_info(root: str | Path) -> dict[str, Any]:
    """``meta/info.json`` of the dataset at ``root``, checked against :data:`INFO_FIELDS` (each feature
    against :data:`FEATURE_FIELDS`); InputError naming the file and the first bad field."""
    path = Path(root) / fmt.INFO_PATH
    if not path.is_file():
        raise MissingFileError(f"no dataset to resume or repair at {root} ({fmt.INFO_PATH} is missing)")
    info = schema.fields(path, schema.read_json(path), INFO_FIELDS)
    if info["codebase_version"] != fmt.CODEBASE_VERSION:
        raise InputError(f"{path}: codebase_version {info['codebase_version']!r}; so101-mjx writes {fmt.CODEBASE_VERSION} datasets only")
    for key, feature in info["features"].items():
        schema.fields(path, feature, FEATURE_FIELDS, where=f"features.{key}.")
    return info


def _index(path: Path) -> tuple[int, int]:
    return int(path.parent.name.split("-")[1]), int(path.stem.split("-")[1])


def read_episodes(root: Path) -> pa.Table:
    """Every row of ``meta/episodes`` (all files, in chunk/file order); InputError naming an unreadable file."""
    tables = []
    for path in fmt.files(root, "meta/episodes/"):
        try:
            tables.append(pq.read_table(path))
        except (pa.ArrowException, OSError) as err:
            raise InputError(f"{path} is unreadable: {err}") from None
    return pa.concat_tables(tables)


@dataclasses.dataclass
class Finding:
    """What :func:`inspect` found: ``complete`` episodes intact, ``problems`` (one line each)."""

    info: dict[str, Any]
    rows: list[dict[str, Any]]  # meta/episodes rows, of the readable files before the first unreadable one
    complete: int
    problems: list[str]

    def cut(self, episode: int, problem: str) -> None:
        """Episode ``episode`` is incomplete (so are the ones after it)."""
        self.complete = min(self.complete, episode)
        self.problems.append(problem)


def inspect(root: str | Path) -> Finding:
    """The dataset at ``root``'s complete prefix and problems (InputError when ``info.json`` is unusable)."""
    root = Path(root)
    info = read_info(root)
    rows, problems = [], []
    video_keys = [k for k, f in info["features"].items() if f["dtype"] == "video"]
    need = (*EPISODE_COLUMNS, *(f"videos/{k}/{c}" for k in video_keys for c in VIDEO_COLUMNS))
    for path in fmt.files(root, "meta/episodes/"):
        try:
            table = pq.read_table(path)
        except (pa.ArrowException, OSError) as err:
            problems.append(f"{path.relative_to(root)} is unreadable ({str(err)[:120]})")
            break
        missing = [c for c in need if c not in table.column_names]
        if missing:
            problems.append(f"{path.relative_to(root)} lacks the column {missing[0]!r}")
            break
        rows += [r | {"_meta": _index(path)} for r in table.select(need).to_pylist()]
    found = Finding(info, rows, len(rows), problems)
    end = 0
    for i, row in enumerate(rows):
        if (row["episode_index"], row["dataset_from_index"], row["dataset_to_index"] - row["dataset_from_index"]) != (i, end, row["length"]):
            found.cut(i, f"meta/episodes: episode {i}'s row says episode {row['episode_index']}, frames "
                         f"{row['dataset_from_index']}..{row['dataset_to_index']} of length {row['length']} (expected from {end})")
            break
        end = row["dataset_to_index"]
    if info["total_episodes"] != len(rows):
        found.cut(min(info["total_episodes"], len(rows)), f"info.json counts {info['total_episodes']} episodes, meta/episodes lists {len(rows)}")
    _check_data(root, found)
    for key in video_keys:
        _check_video(root, found, key)
    if info["total_frames"] != sum(r["length"] for r in rows):
        found.problems.append(f"info.json counts {info['total_frames']} frames, meta/episodes {sum(r['length'] for r in rows)}")
    for rel in (fmt.TASKS_PATH, fmt.STATS_PATH):
        try:
            pq.read_table(root / rel) if rel.endswith(".parquet") else json.loads((root / rel).read_text())
        except (pa.ArrowException, OSError, ValueError) as err:
            found.problems.append(f"{rel} is unreadable ({str(err)[:120]})")
    return found


def _by_file(rows: list[dict[str, Any]], prefix: str) -> dict[tuple[int, int], list[dict[str, Any]]]:
    out: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault((row[prefix + "chunk_index"], row[prefix + "file_index"]), []).append(row)
    return out


def _check_data(root: Path, found: Finding) -> None:
    """Each data file holds exactly its episodes' rows, in order."""
    listed = _by_file(found.rows, "data/")
    for path in fmt.files(root, "data/"):
        rel, episodes = path.relative_to(root), listed.pop(_index(path), [])
        try:
            table = pq.read_table(path, columns=["episode_index", "index"])
        except (pa.ArrowException, OSError) as err:
            found.cut(episodes[0]["episode_index"] if episodes else found.complete, f"{rel} is unreadable ({str(err)[:120]})")
            continue
        actual = np.stack([table.column("episode_index").to_numpy(), table.column("index").to_numpy()])
        start = 0  # the episode's first row in this file (episodes are listed in file order)
        for e in episodes:
            expected = np.stack([np.full(e["length"], e["episode_index"]), np.arange(e["dataset_from_index"], e["dataset_to_index"])])
            if actual.shape[1] < start + e["length"] or not np.array_equal(actual[:, start: start + e["length"]], expected):
                found.cut(e["episode_index"], f"{rel} does not hold episode {e['episode_index']}'s {e['length']} rows")
                break
            start += e["length"]
        extra = actual.shape[1] - sum(e["length"] for e in episodes)
        if extra > 0:
            found.problems.append(f"{rel} holds {extra} rows that meta/episodes does not list")
    for index, episodes in listed.items():
        found.cut(episodes[0]["episode_index"], f"{fmt.file_path('data/', index)} is missing")


def _check_video(root: Path, found: Finding, key: str) -> None:
    """Each of ``key``'s video files holds exactly its episodes' frames."""
    prefix, fps = f"videos/{key}/", found.info["fps"]
    listed = _by_file(found.rows, prefix)
    for path in fmt.files(root, prefix):
        rel, episodes = path.relative_to(root), listed.pop(_index(path), [])
        try:
            frames = fmt.count_frames(path)
        except RuntimeError:
            found.cut(episodes[0]["episode_index"] if episodes else found.complete, f"{rel} is unreadable")
            continue
        end = 0
        for e in episodes:
            start, stop = round(e[prefix + "from_timestamp"] * fps), round(e[prefix + "to_timestamp"] * fps)
            if start != end or stop - start != e["length"] or stop > frames:
                found.cut(e["episode_index"], f"{rel} holds {frames} frames, not episode {e['episode_index']}'s frames {start}..{stop}")
                break
            end = stop
        if frames > sum(e["length"] for e in episodes):
            found.problems.append(f"{rel} holds {frames - sum(e['length'] for e in episodes)} frames that meta/episodes does not list")
    for index, episodes in listed.items():
        found.cut(episodes[0]["episode_index"], f"{fmt.file_path(prefix, index)} is missing")


def check(root: str | Path) -> dict[str, Any]:
    """``info.json`` of a consistent dataset with episodes at ``root``; else one line naming the first problem."""
    found = inspect(root)
    if found.problems:
        more = f" (and {len(found.problems) - 1} more)" if len(found.problems) > 1 else ""
        raise InputError(f"{root}: {found.problems[0]}{more}; --repair truncates it to its {found.complete} complete episodes")
    if found.info["total_episodes"] < 1:
        raise InputError(f"{root}: can only resume a dataset with episodes, found none")
    return found.info


def repair(root: str | Path, provenance: str | None = None) -> tuple[int, list[str]]:
    """Truncate the dataset at ``root`` to its complete prefix: ``(episodes kept, problems found)``.

    Files past the prefix are cut (parquet rewritten, video stream-copied) or removed; tasks, stats
    and ``info.json`` are rewritten; ``provenance`` (a JSON file relative to ``root``) gets a
    ``repairs`` entry. Callers hold the writer lock.
    """
    root = Path(root)
    recover(root)  # a commit a kill cut short is finished before the dataset is judged
    found = inspect(root)
    if not found.problems:
        return found.info["total_episodes"], []
    kept = found.rows[: found.complete]
    txn = Transaction(root)
    _truncate_parquets(root, txn, "meta/episodes/", collections.Counter(r["_meta"] for r in kept))
    _truncate_parquets(root, txn, "data/", {i: sum(e["length"] for e in es) for i, es in _by_file(kept, "data/").items()})
    for key in [k for k, f in found.info["features"].items() if f["dtype"] == "video"]:
        prefix = f"videos/{key}/"
        frames = {i: sum(e["length"] for e in es) for i, es in _by_file(kept, prefix).items()}
        for path in fmt.files(root, prefix):
            rel, n = str(path.relative_to(root)), frames.get(_index(path), 0)
            if n == 0:
                txn.delete(rel)
            elif fmt.count_frames(path) != n:
                fmt.trim(path, txn.path(rel), n)
    try:
        tasks = pq.read_table(root / fmt.TASKS_PATH).column("task").to_pylist()
    except (pa.ArrowException, OSError, KeyError):  # rebuilt in the order the kept episodes name them
        tasks = list(dict.fromkeys(t for r in kept for t in r["tasks"]))
        pq.write_table(fmt.tasks_table(tasks), txn.path(fmt.TASKS_PATH))
    full = read_episodes_prefix(root, found.complete)
    features = found.info["features"]
    stats = aggregate_stats([{f: {k: np.asarray(r[f"stats/{f}/{k}"]) for k in ("min", "max", "mean", "std", "count", *QUANTILE_KEYS)}
                              for f in features} for r in full]) if full else {}
    txn.path(fmt.STATS_PATH).write_text(json.dumps({f: {k: v.tolist() for k, v in s.items()} for f, s in stats.items()}, indent=4))
    if provenance and (root / provenance).is_file():
        record = json.loads((root / provenance).read_text())
        record.setdefault("repairs", []).append({"kept_episodes": found.complete, "problems": found.problems})
        txn.path(provenance).write_text(json.dumps(record, indent=1, default=str))
    info = found.info | {"total_episodes": found.complete, "total_frames": sum(r["length"] for r in kept), "total_tasks": len(tasks),
                         "splits": {"train": f"0:{found.complete}"} if found.complete else {}}
    txn.path(fmt.INFO_PATH).write_text(json.dumps(info, indent=4, ensure_ascii=False))
    txn.commit()
    return found.complete, found.problems


def read_episodes_prefix(root: Path, n: int) -> list[dict[str, Any]]:
    """The first ``n`` rows of ``meta/episodes`` (every column), reading no file past them."""
    rows: list[dict[str, Any]] = []
    for path in fmt.files(root, "meta/episodes/"):
        if len(rows) >= n:
            break
        rows += pq.read_table(path).to_pylist()
    return rows[:n]


def _truncate_parquets(root: Path, txn: Transaction, prefix: str, keep: dict[tuple[int, int], int]) -> None:
    """Cut each parquet file under ``prefix`` to its first ``keep[index]`` rows (removed at 0 or unreadable)."""
    for path in fmt.files(root, prefix):
        rel, n = str(path.relative_to(root)), keep.get(_index(path), 0)
        try:
            file = pq.ParquetFile(path)
            rows = file.metadata.num_rows
        except (pa.ArrowException, OSError):
            txn.delete(rel)
            continue
        if n == 0:
            txn.delete(rel)
        elif rows != n:
            fmt.write_parquet(txn.path(rel), [file.read().slice(0, n)])
