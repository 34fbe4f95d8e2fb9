"""``record --repair``: a dataset rewritten to hold its intact episodes (:func:`so101_mjx.data.dataset_check.inspect`),
renumbered.

The kept episodes keep their order (by ``episode_index``) and are numbered 0, 1, ... with contiguous
frame indices. Each run of kept episodes that shared a file shares a new one, the files numbered
from ``file-000``: a file whose content does not change stays, the others are rewritten (parquet)
or stream-copied (video, :func:`~so101_mjx.data.lerobot_format.cut`), files that no kept episode
uses are removed, and tasks, stats and ``info.json`` are rewritten, all in one
:class:`so101_mjx._files.Transaction`. A dataset without an intact episode is refused, unchanged.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from so101_mjx._files import Transaction, disk_errors, recover
from so101_mjx.data import lerobot_format as fmt
from so101_mjx.data.dataset_check import Finding, inspect
from so101_mjx.data.stats import QUANTILE_KEYS, aggregate_stats
from so101_mjx.errors import InputError, ParameterError

STAT_KEYS = ("min", "max", "mean", "std", "count", *QUANTILE_KEYS)


def repair(root: str | Path, provenance: str | None = None) -> tuple[int, list[str]]:
    """Rewrite the dataset at ``root`` to its intact episodes: ``(episodes kept, problems found)``.

    ``provenance`` (a JSON object file relative to ``root``) gets a ``repairs`` entry. InputError,
    with nothing changed, when no episode is intact. Callers hold the writer lock.
    """
    root = Path(root)
    recover(root, fmt.PREFIXES)  # a commit a kill cut short is finished before the dataset is judged
    found = inspect(root)
    if not found.problems:
        return found.info["total_episodes"], []
    if not found.intact:
        raise ParameterError(f"{root}: no episode is intact ({found.problems[0]}); repair=True changed nothing",
                             "repair=True")
    kept = _renumber(found.intact)
    with disk_errors(f"the dataset at {root}"):
        txn = Transaction(root, fmt.PREFIXES)
        try:
            _write_data(root, txn, found, kept)
            for key in [k for k, f in found.info["features"].items() if f["dtype"] == "video"]:
                _write_video(root, txn, found, kept, key)
            _write_meta(root, txn, found, kept)
            _write_summary(root, txn, found, kept, provenance)
            txn.commit()
        finally:
            if not txn.published:
                txn.abort()
    return len(kept), found.problems


def report_repair(root: Path, provenance: str | None, who: str, shown: int = 20) -> None:
    """:func:`repair` the dataset at ``root``, saying on stderr what was wrong (the first ``shown`` problems, each
    line starting with ``who``) and how many episodes it holds."""
    kept, problems = repair(root, provenance)
    for problem in problems[:shown] + ([f"... and {len(problems) - shown} more problems"]
                                       if len(problems) > shown else []):
        print(f"{who}: {root}: {problem}", file=sys.stderr)
    print(f"{who}: {root} holds {kept} intact episodes" + (" (nothing to repair)" if not problems else ""),
          file=sys.stderr)


def _renumber(intact: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The intact rows as episodes 0, 1, ... with contiguous frames (the ``index`` and ``episode_index`` stats moved
    along); ``_old``: the row's episode_index and dataset_from_index."""
    kept, end = [], 0
    for new, row in enumerate(intact):
        shift = end - row["dataset_from_index"]
        row = row | {"_old": (row["episode_index"], row["dataset_from_index"]), "episode_index": new,
                     "dataset_from_index": end, "dataset_to_index": end + row["length"]}
        for k in ("min", "max", "mean", *QUANTILE_KEYS):
            if f"stats/index/{k}" in row:
                row[f"stats/index/{k}"] = [type(v)(v + shift) for v in row[f"stats/index/{k}"]]
            if f"stats/episode_index/{k}" in row:
                row[f"stats/episode_index/{k}"] = [type(v)(new) for v in row[f"stats/episode_index/{k}"]]
        if "stats/episode_index/std" in row:
            row["stats/episode_index/std"] = [type(v)(0) for v in row["stats/episode_index/std"]]
        kept.append(row)
        end += row["length"]
    return kept


def _groups(kept: list[dict[str, Any]], source: Callable[[dict], tuple[int, int]], chunks_size: int) -> list[tuple]:
    """``(new file, source file, rows)`` for each run of kept rows with one source file, new files numbered from (0,
    0)."""
    runs: list[tuple[tuple[int, int], list[dict[str, Any]]]] = []
    for row in kept:
        if runs and runs[-1][0] == source(row):
            runs[-1][1].append(row)
        else:
            runs.append((source(row), [row]))
    out, index = [], (0, 0)
    for src, rows in runs:
        out.append((index, src, rows))
        index = fmt.next_file(*index, chunks_size)
    return out


def _delete_unused(root: Path, txn: Transaction, prefix: str, used: set[str]) -> None:
    for path in fmt.files(root, prefix):
        if (rel := f"{prefix}{path.parent.name}/{path.name}") not in used:
            txn.delete(rel)


def _write_data(root: Path, txn: Transaction, found: Finding, kept: list[dict[str, Any]]) -> None:
    """The kept episodes' rows, renumbered; each row's ``data/`` columns set to their new file."""
    used = set()
    for index, src, rows in _groups(kept, lambda r: r["_data"][0], found.info["chunks_size"]):
        rel = fmt.file_path("data/", index)
        used.add(rel)
        starts = np.cumsum([0, *(r["length"] for r in rows)])
        same = index == src and found.sizes["data/"][src] == starts[-1] and all(
            r["_data"][1] == s and r["_old"] == (r["episode_index"], r["dataset_from_index"])
            for r, s in zip(rows, starts))
        if not same:
            table = fmt.read_columns(root / fmt.file_path("data/", src))
            parts = []
            for r in rows:
                part = table.slice(r["_data"][1], r["length"])
                for name, values in (("episode_index", np.full(r["length"], r["episode_index"])),
                                     ("index", np.arange(r["dataset_from_index"], r["dataset_to_index"]))):
                    i = part.schema.get_field_index(name)
                    part = part.set_column(i, part.schema.field(i), pa.array(values, part.schema.field(i).type))
                parts.append(part)
            fmt.write_parquet(txn.path(rel), parts)
        for r in rows:
            r["data/chunk_index"], r["data/file_index"] = index
    _delete_unused(root, txn, "data/", used)


def _write_video(root: Path, txn: Transaction, found: Finding, kept: list[dict[str, Any]], key: str) -> None:
    """The kept episodes' ``key`` frames; each row's video columns set to their new file and timestamps."""
    prefix, fps, used = f"videos/{key}/", found.fps, set()
    for index, src, rows in _groups(kept, lambda r: r["_videos"][key][0], found.info["chunks_size"]):
        rel, source = fmt.file_path(prefix, index), root / fmt.file_path(prefix, src)
        used.add(rel)
        starts = np.cumsum([0, *(r["length"] for r in rows)])
        whole = found.sizes[prefix][src] == starts[-1] and all(r["_videos"][key][1] == s for r, s in zip(rows, starts))
        if not whole:
            fmt.cut([(source, r["_videos"][key][1], r["_videos"][key][2]) for r in rows], fps, txn.path(rel))
            if (frames := fmt.count_frames(txn.path(rel))) != starts[-1]:
                raise InputError(f"{source}: cutting the intact episodes' frames gave {frames} frames, not "
                                 f"{starts[-1]}; nothing was changed")
        elif index != src:  # the whole file, renamed
            target = txn.path(rel)
            try:
                os.link(source, target)
            except OSError:
                shutil.copyfile(source, target)
        for r, start in zip(rows, starts):
            r |= {prefix + "chunk_index": index[0], prefix + "file_index": index[1],
                  prefix + "from_timestamp": float(start / fps),
                  prefix + "to_timestamp": float((start + r["length"]) / fps)}
    _delete_unused(root, txn, prefix, used)


def _write_meta(root: Path, txn: Transaction, found: Finding, kept: list[dict[str, Any]]) -> None:
    """``meta/episodes``: the kept rows, each run of rows from one file in a file of its own (that file's schema)."""
    used = set()
    for index, src, rows in _groups(kept, lambda r: r["_meta"], found.info["chunks_size"]):
        rel = fmt.file_path("meta/episodes/", index)
        used.add(rel)
        schema = pq.read_schema(root / fmt.file_path("meta/episodes/", src))
        rows = [{k: v for k, v in r.items() if not k.startswith("_")}
                | {"meta/episodes/chunk_index": index[0], "meta/episodes/file_index": index[1]} for r in rows]
        fmt.write_parquet(txn.path(rel), [pa.Table.from_pylist(rows, schema=schema)], fmt.METADATA_ROWS_PER_WRITE)
    _delete_unused(root, txn, "meta/episodes/", used)


def _write_summary(root: Path, txn: Transaction, found: Finding, kept: list[dict[str, Any]],
                   provenance: str | None) -> None:
    """Tasks (rebuilt when unreadable), stats, ``provenance``'s ``repairs`` entry and ``info.json`` (fps the
    episodes')."""
    try:
        tasks = pq.read_table(root / fmt.TASKS_PATH).column("task").to_pylist()
    except (pa.ArrowException, OSError, KeyError):  # rebuilt in the order the kept episodes name them
        tasks = list(dict.fromkeys(t for r in kept for t in r["tasks"] or ()))
        pq.write_table(fmt.tasks_table(tasks), txn.path(fmt.TASKS_PATH))
    features = found.info["features"]
    stats = aggregate_stats([{f: {k: np.asarray(r[f"stats/{f}/{k}"]) for k in STAT_KEYS} for f in features}
                             for r in kept])
    txn.path(fmt.STATS_PATH).write_text(json.dumps({f: {k: v.tolist() for k, v in s.items()}
                                                    for f, s in stats.items()}, indent=4))
    if provenance and (root / provenance).is_file():
        try:
            record = json.loads((root / provenance).read_text())
        except ValueError:
            record = None
        if isinstance(record, dict):
            record.setdefault("repairs", []).append({"kept_episodes": len(kept), "problems": found.problems})
            txn.path(provenance).write_text(json.dumps(record, indent=1, default=str))
    if found.fps != found.info["fps"]:
        features = {k: f | {"info": f["info"] | {"video.fps": found.fps}} if isinstance(f.get("info"), dict)
                    and "video.fps" in f["info"] else f
                    for k, f in features.items()}
    info = found.info | {"total_episodes": len(kept), "total_frames": sum(r["length"] for r in kept),
                         "total_tasks": len(tasks),
                         "splits": {"train": f"0:{len(kept)}"}, "fps": found.fps, "features": features}
    txn.path(fmt.INFO_PATH).write_text(json.dumps(info, indent=4, ensure_ascii=False))
