"""LeRobotDataset v3.0 on disk with pyarrow and imageio-ffmpeg's ffmpeg only (no torch, no lerobot).

Layout, column names, dtypes and JSON keys as lerobot 0.4-0.6 writes them::

    meta/info.json                                     schema, fps, totals, path templates
    meta/stats.json                                    per feature min/max/mean/std/count/q01..q99
    meta/tasks.parquet                                 task (pandas index) -> task_index
    meta/episodes/chunk-000/file-000.parquet           one row per episode: offsets + its stats
    data/chunk-000/file-000.parquet                    one row per frame, one row group per episode
    videos/<video key>/chunk-000/file-000.mp4          every episode's frames, concatenated

A file rolls over to the next index (``file-001``; ``chunk-001`` after ``chunks_size`` files) when
adding an episode would take it past its size limit (100 MB data, 200 MB video); a resumed
dataset starts new files, as lerobot's resume does. Statistics: :mod:`so101_mjx.data.stats`. Videos: AV1
(libsvtav1, yuv420p, GOP 2, CRF 30, lerobot's defaults), each episode encoded on its own and
stream-copied into its file, so every episode starts on a keyframe.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from so101_mjx import _schema as schema
from so101_mjx._lock import LOCK_FILE
from so101_mjx.data.stats import QUANTILE_KEYS, aggregate_stats, feature_stats, image_stats
from so101_mjx.errors import ExistingFileError, InputError, MissingFileError

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE, DATA_FILES_SIZE_IN_MB, VIDEO_FILES_SIZE_IN_MB = 1000, 100, 200
_CHUNK_FILE = "chunk-{chunk_index:03d}/file-{file_index:03d}"
DATA_PATH = "data/" + _CHUNK_FILE + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + _CHUNK_FILE + ".mp4"
EPISODES_PATH = "meta/episodes/" + _CHUNK_FILE + ".parquet"
INFO_PATH, STATS_PATH, TASKS_PATH = "meta/info.json", "meta/stats.json", "meta/tasks.parquet"
DEFAULT_FEATURES = {name: {"dtype": dtype, "shape": [1], "names": None} for name, dtype in (
    ("timestamp", "float32"), ("frame_index", "int64"), ("episode_index", "int64"), ("index", "int64"), ("task_index", "int64"))}
VIDEO_CODEC = {"vcodec": "libsvtav1", "codec": "av1", "pix_fmt": "yuv420p", "g": 2, "crf": 30}
METADATA_ROWS_PER_WRITE = 10  # episodes per row group of meta/episodes (lerobot's metadata_buffer_size)
_ARROW = {"float32": pa.float32(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}
# the info.json fields this writer reads back (resuming), and those of each feature
INFO_FIELDS = {"codebase_version": schema.STRING, "total_episodes": schema.integer(0), "total_frames": schema.integer(0),
               "fps": schema.integer(1), "chunks_size": schema.integer(1), "data_files_size_in_mb": schema.number(0),
               "video_files_size_in_mb": schema.number(0), "features": schema.OBJECT}
FEATURE_FIELDS = {"dtype": schema.STRING, "shape": schema.list_of(schema.integer(1)), "names": schema.Kind(
    "a list, a dict or null", lambda v: v is None or isinstance(v, (list, dict)))}


def video_feature(height: int, width: int, fps: int) -> dict[str, Any]:
    """A camera's ``info.json`` feature: (height, width, 3) frames in an AV1 mp4."""
    info = {"video.height": height, "video.width": width, "video.codec": VIDEO_CODEC["codec"], "video.pix_fmt": VIDEO_CODEC["pix_fmt"],
            "video.is_depth_map": False, "video.fps": fps, "video.channels": 3, "has_audio": False}
    return {"dtype": "video", "shape": [height, width, 3], "names": ["height", "width", "channels"], "info": info}


def next_file(chunk_index: int, file_index: int, chunks_size: int) -> tuple[int, int]:
    """The (chunk, file) index after this one: a new chunk after ``chunks_size`` files."""
    return (chunk_index + 1, 0) if file_index == chunks_size - 1 else (chunk_index, file_index + 1)


# -- files -----------------------------------------------------------------------------------------
def _file_mb(path: Path) -> float:
    return path.stat().st_size / 1024**2 if path.exists() else 0.0  # MiB, as lerobot's get_file_size_in_mb


class _ParquetFiles:
    """Parquet files from a path template, one ParquetWriter at a time, rolled over by size."""

    def __init__(self, root: Path, template: str, chunks_size: int, limit_mb: float, start: tuple[int, int]):
        self.root, self.template, self.chunks_size, self.limit_mb = root, template, chunks_size, limit_mb
        self.index, self.rows, self.writer = start, 0, None

    @property
    def path(self) -> Path:
        return self.root / self.template.format(chunk_index=self.index[0], file_index=self.index[1])

    def place(self, rows: int) -> tuple[int, int]:
        """The (chunk, file) the next ``rows`` rows go to: the next file once the current one, grown
        by its average row size times ``rows``, would reach the size limit (lerobot's rule)."""
        if self.writer is not None:
            size = _file_mb(self.path)
            if size + size / self.rows * rows >= self.limit_mb:
                self.close()
                self.index = next_file(*self.index, self.chunks_size)
        return self.index

    def write(self, table: pa.Table) -> None:
        """Append ``table`` as one row group to the file :meth:`place` chose."""
        if self.writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.writer, self.rows = pq.ParquetWriter(self.path, table.schema, compression="snappy"), 0
        self.writer.write_table(table.cast(self.writer.schema))
        self.rows += table.num_rows

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class _VideoFiles:
    """One camera's mp4 files: an episode is encoded alone, then stream-copied into its file at close."""

    def __init__(self, root: Path, key: str, fps: int, chunks_size: int, limit_mb: float, start: tuple[int, int]):
        import imageio_ffmpeg

        self.ffmpeg, self.root, self.key, self.fps = imageio_ffmpeg.get_ffmpeg_exe(), root, key, fps
        self.chunks_size, self.limit_mb, self.index = chunks_size, limit_mb, start
        self.tmp = Path(tempfile.mkdtemp(prefix=".encoding-", dir=root))
        self.pending: list[Path] = []
        self.frames, self.encoded = 0, 0  # frames in the current file, episodes encoded

    def _run(self, args: list[str], stdin: bytes | None = None) -> None:
        env = {**os.environ, "SVT_LOG": "1"}  # SVT-AV1 prints its configuration to stderr unless told
        with warnings.catch_warnings():  # JAX warns on any fork; ffmpeg is a plain subprocess
            warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
            done = subprocess.run([self.ffmpeg, "-y", "-loglevel", "error", *args], input=stdin, env=env, capture_output=True)
        if done.returncode != 0:
            raise RuntimeError(f"ffmpeg failed ({' '.join(args[-3:])}): {done.stderr.decode(errors='replace').strip()[-800:]}")

    def add(self, frames: np.ndarray) -> dict[str, Any]:
        """Encode (T, H, W, 3) uint8 frames; returns the episode's ``videos/<key>/...`` columns."""
        t, h, w = frames.shape[:3]
        self.encoded += 1
        part = self.tmp / f"{self.encoded:06d}.mp4"
        c = VIDEO_CODEC
        self._run(["-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{w}x{h}", "-r", str(self.fps), "-i", "-",
                   "-c:v", c["vcodec"], "-pix_fmt", c["pix_fmt"], "-g", str(c["g"]), "-crf", str(c["crf"]), str(part)],
                  np.ascontiguousarray(frames, np.uint8).tobytes())
        if self.pending and sum(_file_mb(p) for p in self.pending) + _file_mb(part) >= self.limit_mb:
            self.close()
            self.index = next_file(*self.index, self.chunks_size)
        self.pending.append(part)
        start, self.frames = self.frames, self.frames + t
        prefix = f"videos/{self.key}/"
        return {prefix + "chunk_index": self.index[0], prefix + "file_index": self.index[1],
                prefix + "from_timestamp": start / self.fps, prefix + "to_timestamp": self.frames / self.fps}

    def close(self) -> None:
        """Concatenate the pending episodes (stream copy) into the current file."""
        if not self.pending:
            return
        path = self.root / VIDEO_PATH.format(video_key=self.key, chunk_index=self.index[0], file_index=self.index[1])
        path.parent.mkdir(parents=True, exist_ok=True)
        listing = self.tmp / "list.txt"
        listing.write_text("".join(f"file '{p.name}'\n" for p in self.pending))
        self._run(["-f", "concat", "-safe", "0", "-i", str(listing), "-c", "copy", str(path)])
        for p in self.pending:
            p.unlink()
        self.pending, self.frames = [], 0

    def remove_tmp(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=4, ensure_ascii=False))


def read_info(root: str | Path) -> dict[str, Any]:
    """``meta/info.json`` of the dataset at ``root``, checked against :data:`INFO_FIELDS` (and each
    feature against :data:`FEATURE_FIELDS`): ValueError naming the file and the field otherwise."""
    path = Path(root) / INFO_PATH
    info = schema.fields(path, schema.read_json(path), INFO_FIELDS)
    for key, feature in info["features"].items():
        schema.fields(path, feature, FEATURE_FIELDS, where=f"features.{key}.")
    return info


def read_episodes(root: Path) -> pa.Table:
    """Every row of ``meta/episodes`` (all files, in chunk/file order)."""
    return pa.concat_tables([pq.read_table(p) for p in sorted((Path(root) / "meta/episodes").glob("chunk-*/file-*.parquet"))])


def _tasks_table(tasks: list[str]) -> pa.Table:
    """``meta/tasks.parquet`` as pandas writes it: column task_index, index ``task``."""
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
                            "metadata": {"encoding": "UTF-8"}}],
        "columns": [{"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64", "metadata": None},
                    {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None}],
        "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": "2.2.3",
    }
    table = pa.table({"task_index": pa.array(range(len(tasks)), pa.int64()), "task": pa.array(tasks, pa.string())})
    return table.replace_schema_metadata({"pandas": json.dumps(pandas_meta)})


def _hf_feature(feature: dict[str, Any]) -> dict[str, Any]:
    """The ``datasets`` feature of a non-video column (its parquet's ``huggingface`` schema metadata)."""
    value = {"dtype": feature["dtype"], "_type": "Value"}
    return value if feature["shape"] == [1] else {"feature": value, "length": feature["shape"][0], "_type": "Sequence"}


def _column(values: np.ndarray, feature: dict[str, Any]) -> pa.Array:
    """A (T,) or (T, D) array as the feature's arrow column (scalar or fixed-size list)."""
    flat = pa.array(values.reshape(-1), _ARROW[feature["dtype"]])
    return flat if feature["shape"] == [1] else pa.FixedSizeListArray.from_arrays(flat, feature["shape"][0])


class DatasetWriter:
    """Writes episodes as a new dataset at ``root`` or, with ``resume``, appends them to the one there.

    Args:
        root: dataset directory; a new one must be missing or empty (else FileExistsError).
        features: the recorded features (name -> ``dtype``, ``shape``, ``names`` [, ``info``]),
            lerobot's five default features excluded; ``video`` features take frames.
        fps: frames per second (an int, as lerobot's ``fps``).
        robot_type: ``info.json``'s ``robot_type``.
        resume: append to the dataset at ``root``: ValueError when its version, fps or features
            differ (FileNotFoundError when there is none); episode and frame indices continue.
        chunks_size, data_files_size_in_mb, video_files_size_in_mb: the file limits of a new dataset
            (a resumed one keeps its own).
    Nothing is final before :meth:`close`: it writes the episodes' metadata, tasks, stats and info.
    """

    def __init__(self, root: str | Path, features: dict[str, dict], fps: int, robot_type: str, resume: bool = False,
                 chunks_size: int = CHUNKS_SIZE, data_files_size_in_mb: float = DATA_FILES_SIZE_IN_MB,
                 video_files_size_in_mb: float = VIDEO_FILES_SIZE_IN_MB):
        self.root = Path(root)
        features = {**features, **DEFAULT_FEATURES}
        self.video_keys = [k for k, f in features.items() if f["dtype"] == "video"]
        starts = {p: (0, 0) for p in ("data/", "meta/episodes/", *(f"videos/{k}/" for k in self.video_keys))}
        self.episode_stats: list[dict[str, dict[str, np.ndarray]]] = []
        self.tasks: list[str] = []
        if resume:
            self.info = self._check_resumable(features, fps)
            rows = read_episodes(self.root).to_pylist()
            self.episode_stats = [self._row_stats(row, features) for row in rows]
            self.tasks = pq.read_table(self.root / TASKS_PATH).column("task").to_pylist()
            starts = {p: next_file(rows[-1][p + "chunk_index"], rows[-1][p + "file_index"], self.info["chunks_size"]) for p in starts}
        else:
            if self.root.exists() and (not self.root.is_dir() or any(p.name != LOCK_FILE for p in self.root.iterdir())):
                raise ExistingFileError(f"{self.root} exists and is not an empty directory (resume to append to a dataset there)")
            self.info = {
                "codebase_version": CODEBASE_VERSION, "robot_type": robot_type, "total_episodes": 0, "total_frames": 0,
                "total_tasks": 0, "chunks_size": chunks_size, "data_files_size_in_mb": data_files_size_in_mb,
                "video_files_size_in_mb": video_files_size_in_mb, "fps": fps, "splits": {}, "data_path": DATA_PATH,
                "video_path": VIDEO_PATH if self.video_keys else None, "features": features,
            }
        self.root.mkdir(parents=True, exist_ok=True)
        self.features, self.fps, self.added = features, fps, 0
        info = self.info
        self.data = _ParquetFiles(self.root, DATA_PATH, info["chunks_size"], info["data_files_size_in_mb"], starts["data/"])
        self.meta = _ParquetFiles(self.root, EPISODES_PATH, info["chunks_size"], info["data_files_size_in_mb"], starts["meta/episodes/"])
        self.videos = {k: _VideoFiles(self.root, k, fps, info["chunks_size"], info["video_files_size_in_mb"], starts[f"videos/{k}/"])
                       for k in self.video_keys}
        self.rows: list[dict[str, Any]] = []  # episode rows not yet in meta/episodes
        hf = {k: _hf_feature(f) for k, f in features.items() if f["dtype"] != "video"}
        self.hf_metadata = {"huggingface": json.dumps({"info": {"features": hf}})}

    def _check_resumable(self, features: dict[str, dict], fps: int) -> dict[str, Any]:
        if not (self.root / INFO_PATH).is_file():
            raise MissingFileError(f"no dataset to resume at {self.root} ({INFO_PATH} is missing)")
        info = read_info(self.root)
        if info["codebase_version"] != CODEBASE_VERSION or info["total_episodes"] < 1:
            raise InputError(f"{self.root}: can only resume a {CODEBASE_VERSION} dataset with episodes, found "
                             f"{info.get('codebase_version')!r} with {info.get('total_episodes')} episodes")
        if info["fps"] != fps:
            raise InputError(f"{self.root} is recorded at fps {info['fps']}, not {fps}")
        ours, theirs = ({k: {f: v[f] for f in ("dtype", "shape", "names")} for k, v in fs.items()} for fs in (features, info["features"]))
        for key in sorted(set(ours) | set(theirs)):
            if ours.get(key) != theirs.get(key):
                raise InputError(f"{self.root}: feature {key!r} is {theirs.get(key)} there, {ours.get(key)} in this recording")
        return info

    @staticmethod
    def _row_stats(row: dict[str, Any], features: dict[str, dict]) -> dict[str, dict[str, np.ndarray]]:
        keys = ("min", "max", "mean", "std", "count", *QUANTILE_KEYS)
        return {f: {k: np.asarray(row[f"stats/{f}/{k}"]) for k in keys} for f in features}

    @property
    def total_episodes(self) -> int:
        return self.info["total_episodes"]

    def add_episode(self, data: dict[str, np.ndarray], task: str, frames: dict[str, np.ndarray] | None = None) -> int:
        """Add one episode; returns its episode index.

        ``data``: every non-default, non-video feature, (T,) or (T, D) arrays of T frames;
        ``frames``: every video feature, (T, H, W, 3) uint8.
        """
        frames = frames or {}
        length = len(next(iter(data.values())))
        episode, start = self.info["total_episodes"], self.info["total_frames"]
        if task not in self.tasks:
            self.tasks.append(task)
        steps = np.arange(length)
        data = {**data, "timestamp": steps / self.fps, "frame_index": steps, "episode_index": np.full(length, episode),
                "index": start + steps, "task_index": np.full(length, self.tasks.index(task))}
        data = {k: np.asarray(data[k], f["dtype"]) for k, f in self.features.items() if f["dtype"] != "video"}  # stats of what is stored
        for k, values in data.items():
            if len(values) != length:
                raise InputError(f"episode {episode}: {k} has {len(values)} frames, {next(iter(data))} {length}")
        stats = {k: image_stats(frames[k]) if k in self.videos else feature_stats(data[k]) for k in self.features}
        table = pa.table({k: _column(data[k], self.features[k]) for k in data}).replace_schema_metadata(self.hf_metadata)
        chunk, file = self.data.place(length)
        self.data.write(table)
        row = {"episode_index": episode, "tasks": [task], "length": length, "data/chunk_index": chunk, "data/file_index": file,
               "dataset_from_index": start, "dataset_to_index": start + length}
        for k, video in self.videos.items():
            if len(frames[k]) != length:
                raise InputError(f"episode {episode}: {k} has {len(frames[k])} frames, the data {length}")
            row |= video.add(frames[k])
        row |= {f"stats/{f}/{k}": v.tolist() for f, s in stats.items() for k, v in s.items()}
        self.rows.append(row)
        if len(self.rows) >= METADATA_ROWS_PER_WRITE:
            self._write_rows()
        self.episode_stats.append(stats)
        self.info["total_episodes"] += 1
        self.info["total_frames"] += length
        self.added += 1
        return episode

    def _write_rows(self) -> None:
        if not self.rows:
            return
        chunk, file = self.meta.place(len(self.rows))
        table = pa.Table.from_pylist([r | {"meta/episodes/chunk_index": chunk, "meta/episodes/file_index": file} for r in self.rows])
        self.meta.write(table)
        self.rows = []

    def close(self) -> None:
        """Finish the files and write meta/ (nothing when no episode was added)."""
        self._write_rows()
        self.data.close()
        self.meta.close()
        for video in self.videos.values():
            video.close()
            video.remove_tmp()
        if not self.added:
            return
        pq.write_table(_tasks_table(self.tasks), self.root / TASKS_PATH)
        stats = aggregate_stats(self.episode_stats)
        _write_json(self.root / STATS_PATH, {f: {k: v.tolist() for k, v in s.items()} for f, s in stats.items()})
        self.info |= {"total_tasks": len(self.tasks), "splits": {"train": f"0:{self.info['total_episodes']}"}}
        _write_json(self.root / INFO_PATH, self.info)
