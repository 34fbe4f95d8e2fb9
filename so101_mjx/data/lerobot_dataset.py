"""LeRobotDataset v3.0 written with pyarrow and imageio-ffmpeg's ffmpeg only (no torch, no lerobot).

The format: :mod:`so101_mjx.data.lerobot_format`. Statistics: :mod:`so101_mjx.data.stats`.

Episodes are added to a pending batch (their videos encoded into the staging area) and published
by :meth:`DatasetWriter.commit` as one :class:`so101_mjx._files.Transaction`: new data, video and
``meta/episodes`` files, then tasks, stats, the caller's extra files, and ``info.json`` last. A
writer killed at any moment leaves the dataset of its last commit (the next writer finishes a
commit whose manifest was written, or discards the staging area). Each commit starts new files
(``file-001`` after ``file-000``; ``chunk-001`` after ``chunks_size`` files), and a commit's episodes
roll over to the next file when a file would reach its size limit (100 MB data, 200 MB video).
A resumed dataset is checked first (:func:`so101_mjx.data.dataset_check.check`). Every file a
writer publishes or deletes lies under ``data/``, ``meta/`` or ``videos/`` of the root
(:data:`~so101_mjx.data.lerobot_format.PREFIXES`); a staging area whose manifest names another path is
refused, never replayed (:func:`so101_mjx._files.recover`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from so101_mjx._files import STAGING, Transaction, deferred_signals, disk_errors, recover
from so101_mjx._lock import LOCK_FILE
from so101_mjx.data import dataset_check, lerobot_format as fmt
from so101_mjx.data.lerobot_format import video_feature  # noqa: F401  (re-exported: callers build features with it)
from so101_mjx.data.stats import QUANTILE_KEYS, aggregate_stats, feature_stats, image_stats
from so101_mjx.errors import ExistingFileError, InputError

read_episodes, read_info = dataset_check.read_episodes, dataset_check.read_info


def _groups(sizes: list[float], limit: float) -> list[list[int]]:
    """Consecutive indices grouped so that a group reaches ``limit`` only when it holds one item."""
    groups: list[list[int]] = []
    total = 0.0
    for i, size in enumerate(sizes):
        if not groups or total + size >= limit:
            groups.append([])
            total = 0.0
        groups[-1].append(i)
        total += size
    return groups


class DatasetWriter:
    """Writes episodes as a new dataset at ``root`` or, with ``resume``, appends them to the one there.

    Args:
        root: dataset directory; a new one must be missing or empty (else FileExistsError).
        features: the recorded features (name -> ``dtype``, ``shape``, ``names`` [, ``info``]),
            lerobot's five default features excluded; ``video`` features take frames.
        fps: frames per second (an int, as lerobot's ``fps``).
        robot_type: ``info.json``'s ``robot_type``.
        resume: append to the dataset at ``root``: ValueError when it is inconsistent, or its
            version, fps or features differ (FileNotFoundError when there is none).
        chunks_size, data_files_size_in_mb, video_files_size_in_mb: the file limits of a new dataset
            (a resumed one keeps its own).
    Callers hold ``root``'s writer lock (:func:`so101_mjx._lock.exclusive`). Episodes are on disk
    once :meth:`commit` (or :meth:`close`) returns.
    """

    def __init__(self, root: str | Path, features: dict[str, dict], fps: int, robot_type: str, resume: bool = False,
                 chunks_size: int = fmt.CHUNKS_SIZE, data_files_size_in_mb: float = fmt.DATA_FILES_SIZE_IN_MB,
                 video_files_size_in_mb: float = fmt.VIDEO_FILES_SIZE_IN_MB):
        self.root = Path(root)
        features = {**features, **fmt.DEFAULT_FEATURES}
        fmt.check_feature_keys(features, "the recorded features")
        self.video_keys = [k for k, f in features.items() if f["dtype"] == "video"]
        prefixes = ("data/", "meta/episodes/", *(f"videos/{k}/" for k in self.video_keys))
        self.next = dict.fromkeys(prefixes, (0, 0))  # each prefix's first file not yet written
        self.episode_stats: list[dict[str, dict[str, np.ndarray]]] = []
        self.tasks: list[str] = []
        if self.root.is_dir():
            recover(self.root, fmt.PREFIXES)
        if resume:
            self.info = self._check_resumable(features, fps)
            rows = read_episodes(self.root).to_pylist()
            self.episode_stats = [self._row_stats(row, features) for row in rows]
            self.tasks = pq.read_table(self.root / fmt.TASKS_PATH).column("task").to_pylist()
            self.next = {p: fmt.next_file(rows[-1][p + "chunk_index"], rows[-1][p + "file_index"],
                                          self.info["chunks_size"])
                         for p in prefixes}
        else:
            if self.root.exists() and (not self.root.is_dir()
                                       or any(p.name not in (LOCK_FILE, STAGING) for p in self.root.iterdir())):
                raise ExistingFileError(f"{self.root} exists and is not an empty directory (resume to append to a "
                                        "dataset there)")
            self.info = {
                "codebase_version": fmt.CODEBASE_VERSION, "robot_type": robot_type, "total_episodes": 0,
                "total_frames": 0,
                "total_tasks": 0, "chunks_size": chunks_size, "data_files_size_in_mb": data_files_size_in_mb,
                "video_files_size_in_mb": video_files_size_in_mb, "fps": fps, "splits": {}, "data_path": fmt.DATA_PATH,
                "video_path": fmt.VIDEO_PATH if self.video_keys else None, "features": features,
            }
        with disk_errors(self.root):
            self.root.mkdir(parents=True, exist_ok=True)
        self.features, self.fps, self.committed = features, fps, 0  # committed: episodes this writer has published
        # episodes added since the last commit: appending one is add_episode's only change
        self.pending: list[dict[str, Any]] = []
        self.txn: Transaction | None = None
        self.hf_metadata = fmt.hf_metadata(features)

    def _check_resumable(self, features: dict[str, dict], fps: int) -> dict[str, Any]:
        info = dataset_check.check(self.root)
        if info["fps"] != fps:
            raise InputError(f"{self.root} is recorded at fps {info['fps']}, not {fps}")
        ours, theirs = ({k: {f: v.get(f) for f in ("dtype", "shape", "names")} for k, v in fs.items()}
                        for fs in (features, info["features"]))
        for key in sorted(set(ours) | set(theirs)):
            if ours.get(key) != theirs.get(key):
                raise InputError(f"{self.root}: feature {key!r} is {theirs.get(key)} there, {ours.get(key)} in "
                                 "this recording")
        return info

    @staticmethod
    def _row_stats(row: dict[str, Any], features: dict[str, dict]) -> dict[str, dict[str, np.ndarray]]:
        keys = ("min", "max", "mean", "std", "count", *QUANTILE_KEYS)
        return {f: {k: np.asarray(row[f"stats/{f}/{k}"]) for k in keys} for f in features}

    @property
    def total_episodes(self) -> int:
        """Episodes in the dataset, the pending ones included."""
        return self.info["total_episodes"] + len(self.pending)

    @property
    def added(self) -> int:
        """Episodes this writer added (published or pending)."""
        return self.committed + len(self.pending)

    def _tasks(self) -> list[str]:
        """The dataset's tasks, the pending episodes' included (in order of first use)."""
        return list(dict.fromkeys([*self.tasks, *(e["task"] for e in self.pending)]))

    def add_episode(self, data: dict[str, np.ndarray], task: str, frames: dict[str, np.ndarray] | None = None) -> int:
        """Add one episode to the pending batch (its videos encoded); returns its episode index.

        ``data``: every non-default, non-video feature, (T,) or (T, D) arrays of T frames;
        ``frames``: every video feature, (T, H, W, 3) uint8.
        """
        frames = frames or {}
        length = len(next(iter(data.values())))
        episode, start = self.total_episodes, self.info["total_frames"] + sum(e["length"] for e in self.pending)
        tasks = list(dict.fromkeys([*self._tasks(), task]))
        steps = np.arange(length)
        data = {**data, "timestamp": steps / self.fps, "frame_index": steps, "episode_index": np.full(length, episode),
                "index": start + steps, "task_index": np.full(length, tasks.index(task))}
        # stats of what is stored
        data = {k: np.asarray(data[k], f["dtype"]) for k, f in self.features.items() if f["dtype"] != "video"}
        for k, values in [*data.items(), *((k, frames.get(k, ())) for k in self.video_keys)]:
            if len(values) != length:
                raise InputError(f"episode {episode}: {k} has {len(values)} frames, {next(iter(data))} {length}")
        stats = {k: image_stats(frames[k]) if k in self.video_keys else feature_stats(data[k]) for k in self.features}
        table = pa.table({k: fmt.column(data[k], self.features[k])
                          for k in data}).replace_schema_metadata(self.hf_metadata)
        with disk_errors(self.root):
            self.txn = self.txn or Transaction(self.root, fmt.PREFIXES)
            parts = {}
            for k in self.video_keys:
                parts[k] = self.txn.scratch() / f"{k}.{episode:09d}.mp4"
                fmt.encode(frames[k], self.fps, parts[k])
        self.pending.append({"episode": episode, "task": task, "length": length, "start": start, "stats": stats,
                             "table": table, "parts": parts})
        return episode

    def commit(self, extra: dict[str, str] | None = None) -> None:
        """Publish the pending episodes, with ``extra`` files (path relative to the root -> text)."""
        if not self.pending:
            return
        first_files = dict(self.next)
        try:
            with disk_errors(f"the dataset at {self.root}"):
                self._stage_and_publish(extra)
        except BaseException:
            # publication cut short: the next writer's recover finishes it
            if self.txn is not None and self.txn.published:
                self.txn, self.pending = None, []
            elif self.txn is not None:  # nothing published: a retry stages the same episodes into the same files
                self.next = first_files
                self.txn.unstage()
            raise

    def _stage_and_publish(self, extra: dict[str, str] | None) -> None:
        """Stage the pending episodes' files, then publish them and take them as committed (signals held)."""
        rows = self._stage_data()
        for key in self.video_keys:
            for i, columns in self._stage_video(key).items():
                rows[i] |= columns
        for i, e in enumerate(self.pending):
            rows[i] |= {f"stats/{f}/{k}": v.tolist() for f, s in e["stats"].items() for k, v in s.items()}
        index = self._advance("meta/episodes/")
        table = pa.Table.from_pylist([rows[i] | {"meta/episodes/chunk_index": index[0],
                                                 "meta/episodes/file_index": index[1]}
                                      for i in range(len(self.pending))])
        fmt.write_parquet(self._open_txn.path(fmt.file_path("meta/episodes/", index)), [table],
                          fmt.METADATA_ROWS_PER_WRITE)
        tasks, episode_stats = self._tasks(), [*self.episode_stats, *(e["stats"] for e in self.pending)]
        pq.write_table(fmt.tasks_table(tasks), self._open_txn.path(fmt.TASKS_PATH))
        stats = aggregate_stats(episode_stats)
        self._stage_json(fmt.STATS_PATH, {f: {k: v.tolist() for k, v in s.items()} for f, s in stats.items()})
        for rel, text in (extra or {}).items():
            self._open_txn.path(rel).write_text(text)
        total = self.total_episodes
        info = self.info | {"total_episodes": total,
                            "total_frames": self.info["total_frames"] + sum(e["length"] for e in self.pending),
                            "total_tasks": len(tasks), "splits": {"train": f"0:{total}"}}
        self._stage_json(fmt.INFO_PATH, info)
        with deferred_signals():  # published and taken as committed, or neither: an interrupt never splits them
            self._open_txn.commit()
            self.info, self.tasks, self.episode_stats = info, tasks, episode_stats
            self.txn, self.committed, self.pending = None, self.committed + len(self.pending), []

    @property
    def _open_txn(self) -> Transaction:
        """The transaction of the pending episodes (add_episode opens it with the first)."""
        assert self.txn is not None  # commit() stages only with pending episodes
        return self.txn

    def _advance(self, prefix: str) -> tuple[int, int]:
        index = self.next[prefix]
        self.next[prefix] = fmt.next_file(*index, self.info["chunks_size"])
        return index

    def _stage_json(self, rel: str, value: Any) -> None:
        self._open_txn.path(rel).write_text(json.dumps(value, indent=4, ensure_ascii=False))

    def _stage_data(self) -> dict[int, dict[str, Any]]:
        """The pending episodes' rows in new data files; returns each one's first metadata columns."""
        rows = {}
        limit = self.info["data_files_size_in_mb"] * 1024**2
        for group in _groups([e["table"].nbytes for e in self.pending], limit):
            index = self._advance("data/")
            fmt.write_parquet(self._open_txn.path(fmt.file_path("data/", index)),
                              [self.pending[i]["table"] for i in group])
            for i in group:
                e = self.pending[i]
                rows[i] = {"episode_index": e["episode"], "tasks": [e["task"]], "length": e["length"],
                           "data/chunk_index": index[0], "data/file_index": index[1], "dataset_from_index": e["start"],
                           "dataset_to_index": e["start"] + e["length"]}
        return rows

    def _stage_video(self, key: str) -> dict[int, dict[str, Any]]:
        """The pending episodes' ``key`` videos concatenated into new files; returns their video columns."""
        columns, prefix = {}, f"videos/{key}/"
        limit = self.info["video_files_size_in_mb"] * 1024**2
        for group in _groups([self.pending[i]["parts"][key].stat().st_size for i in range(len(self.pending))], limit):
            index = self._advance(prefix)
            fmt.concat([self.pending[i]["parts"][key] for i in group],
                       self._open_txn.path(fmt.file_path(prefix, index)))
            frames = 0
            for i in group:
                length = self.pending[i]["length"]
                columns[i] = {prefix + "chunk_index": index[0], prefix + "file_index": index[1],
                              prefix + "from_timestamp": frames / self.fps,
                              prefix + "to_timestamp": (frames + length) / self.fps}
                frames += length
        return columns

    def close(self, extra: dict[str, str] | None = None) -> None:
        """Commit the pending episodes (with ``extra``), then remove the staging area."""
        try:
            self.commit(extra)
        finally:
            if self.txn is not None:
                self.txn.abort()
                self.txn = None
