"""The LeRobotDataset v3.0 format as lerobot 0.4-0.6 writes it: paths, constants, tables, video.

Layout, column names, dtypes and JSON keys::

    meta/info.json                                     schema, fps, totals, path templates
    meta/stats.json                                    per feature min/max/mean/std/count/q01..q99
    meta/tasks.parquet                                 task (pandas index) -> task_index
    meta/episodes/chunk-000/file-000.parquet           one row per episode: offsets + its stats
    data/chunk-000/file-000.parquet                    one row per frame, one row group per episode
    videos/<video key>/chunk-000/file-000.mp4          episodes' frames, concatenated

Every path a writer derives from the files on disk stays under :data:`PREFIXES`: feature keys
match :data:`FEATURE_KEY`, and :func:`files` lists ``chunk-<digits>/file-<digits>`` names only.

Videos: AV1 (libsvtav1, yuv420p, GOP 2, CRF 30, lerobot's defaults), each episode encoded on its
own and stream-copied into its file, so every episode starts on a keyframe. ffmpeg is imageio-ffmpeg's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from so101_mjx._files import DISK_ERRNOS
from so101_mjx.errors import InputError

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE, DATA_FILES_SIZE_IN_MB, VIDEO_FILES_SIZE_IN_MB = 1000, 100, 200
_CHUNK_FILE = "chunk-{chunk_index:03d}/file-{file_index:03d}"
DATA_PATH = "data/" + _CHUNK_FILE + ".parquet"
VIDEO_PATH = "videos/{video_key}/" + _CHUNK_FILE + ".mp4"
EPISODES_PATH = "meta/episodes/" + _CHUNK_FILE + ".parquet"
INFO_PATH, STATS_PATH, TASKS_PATH = "meta/info.json", "meta/stats.json", "meta/tasks.parquet"
PREFIXES = ("data/", "meta/", "videos/")  # the only places a dataset writer publishes or deletes files
FEATURE_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}")  # one path component: videos/<key>/
_FILE_NAME = re.compile(r"chunk-(\d{3,9})/file-(\d{3,9})\.(parquet|mp4)")
DEFAULT_FEATURES = {name: {"dtype": dtype, "shape": [1], "names": None} for name, dtype in (
    ("timestamp", "float32"), ("frame_index", "int64"), ("episode_index", "int64"), ("index", "int64"),
    ("task_index", "int64"))}
VIDEO_CODEC: dict[str, Any] = {"vcodec": "libsvtav1", "codec": "av1", "pix_fmt": "yuv420p", "g": 2, "crf": 30}
METADATA_ROWS_PER_WRITE = 10  # episodes per row group of meta/episodes (lerobot's metadata_buffer_size)
_ARROW = {"float32": pa.float32(), "float64": pa.float64(), "int64": pa.int64(), "bool": pa.bool_()}


def video_feature(height: int, width: int, fps: int) -> dict[str, Any]:
    """A camera's ``info.json`` feature: (height, width, 3) frames in an AV1 mp4."""
    info = {"video.height": height, "video.width": width, "video.codec": VIDEO_CODEC["codec"],
            "video.pix_fmt": VIDEO_CODEC["pix_fmt"],
            "video.is_depth_map": False, "video.fps": fps, "video.channels": 3, "has_audio": False}
    return {"dtype": "video", "shape": [height, width, 3], "names": ["height", "width", "channels"], "info": info}


def next_file(chunk_index: int, file_index: int, chunks_size: int) -> tuple[int, int]:
    """The (chunk, file) index after this one: a new chunk after ``chunks_size`` files."""
    return (chunk_index + 1, 0) if file_index == chunks_size - 1 else (chunk_index, file_index + 1)


def file_path(prefix: str, index: tuple[int, int]) -> str:
    """The path of file ``index`` (chunk, file) under ``prefix`` (``data/``, ``meta/episodes/`` or
    ``videos/<key>/``)."""
    suffix = ".mp4" if prefix.startswith("videos/") else ".parquet"
    return prefix + _CHUNK_FILE.format(chunk_index=index[0], file_index=index[1]) + suffix


def files(root: Path, prefix: str) -> list[Path]:
    """The files ``root/prefix/chunk-<digits>/file-<digits>.<parquet|mp4>`` in (chunk, file) order (other names are no
    part of the dataset)."""
    suffix = ".mp4" if prefix.startswith("videos/") else ".parquet"
    found = [p for p in (Path(root) / prefix).glob("chunk-*/file-*" + suffix)
             if _FILE_NAME.fullmatch(f"{p.parent.name}/{p.name}")]
    return sorted(found, key=file_index)


def file_index(path: Path) -> tuple[int, int]:
    """The (chunk, file) index of a path :func:`files` lists."""
    return int(path.parent.name[6:]), int(path.stem[5:])


def check_feature_keys(features: dict[str, Any], source: str | Path) -> None:
    """InputError naming ``source`` and the first feature key that does not match :data:`FEATURE_KEY`."""
    for key in features:
        if not isinstance(key, str) or not FEATURE_KEY.fullmatch(key):
            raise InputError(f"{source}: feature key {key!r} must be letters, digits, '_', '.' and '-' (not starting "
                             "with '.' or '-'), at most 200 characters")


def read_columns(path: Path, columns: list[str] | None = None, required: tuple[str, ...] = ()) -> pa.Table:
    """The parquet file at ``path`` (``columns`` only, when given); InputError in one line naming the
    file and the first of ``required`` it lacks, or why it is unreadable."""
    try:
        with pq.ParquetFile(path) as file:
            missing = [c for c in required if c not in file.schema_arrow.names]
            if missing:
                raise InputError(f"{path} lacks the column {missing[0]!r}")
            return file.read(columns)
    except (pa.ArrowException, OSError) as err:
        raise InputError(f"{path} is unreadable ({' '.join(str(err).split())[:160]})") from None


def tasks_table(tasks: list[str]) -> pa.Table:
    """``meta/tasks.parquet`` as pandas writes it: column task_index, index ``task``."""
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
                            "metadata": {"encoding": "UTF-8"}}],
        "columns": [{"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
                     "metadata": None},
                    {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object",
                     "metadata": None}],
        "creator": {"library": "pyarrow", "version": pa.__version__}, "pandas_version": "2.2.3",
    }
    table = pa.table({"task_index": pa.array(range(len(tasks)), pa.int64()), "task": pa.array(tasks, pa.string())})
    return table.replace_schema_metadata({"pandas": json.dumps(pandas_meta)})


def hf_metadata(features: dict[str, dict]) -> dict[str, str]:
    """The data parquet's ``huggingface`` schema metadata: the ``datasets`` features of the non-video columns."""
    def feature(f: dict[str, Any]) -> dict[str, Any]:
        value = {"dtype": f["dtype"], "_type": "Value"}
        return value if f["shape"] == [1] else {"feature": value, "length": f["shape"][0], "_type": "Sequence"}

    return {"huggingface": json.dumps({"info": {"features": {k: feature(f) for k, f in features.items()
                                                             if f["dtype"] != "video"}}})}


def column(values: np.ndarray, feature: dict[str, Any]) -> pa.Array:
    """A (T,) or (T, D) array as the feature's arrow column (scalar or fixed-size list)."""
    flat = pa.array(values.reshape(-1), _ARROW[feature["dtype"]])
    return flat if feature["shape"] == [1] else pa.FixedSizeListArray.from_arrays(flat, feature["shape"][0])


def write_parquet(path: Path, tables: list[pa.Table], row_group_size: int | None = None) -> None:
    """``tables`` (one schema) as one parquet file, one row group per table (or per ``row_group_size`` rows)."""
    with pq.ParquetWriter(path, tables[0].schema, compression="snappy") as writer:
        for table in tables:
            writer.write_table(table.cast(writer.schema), row_group_size=row_group_size)


def ffmpeg(args: list[str], cwd: Path, stdin: bytes | None = None) -> str:
    """Run imageio-ffmpeg's ffmpeg in ``cwd`` (paths relative to it: no character of the dataset's
    own path reaches ffmpeg's URL parsing); returns its stderr. An OSError of
    :data:`~so101_mjx._files.DISK_ERRNOS` when ffmpeg names one (a full disk), else RuntimeError
    with the tail of stderr, when it fails."""
    import imageio_ffmpeg

    env = {**os.environ, "SVT_LOG": "1"}  # SVT-AV1 prints its configuration to stderr unless told
    with warnings.catch_warnings():  # JAX warns on any fork; ffmpeg is a plain subprocess
        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
        done = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-y", *(["-nostdin"] if stdin is None else []),
                               *args], input=stdin,
                              env=env, capture_output=True, cwd=cwd)
    if done.returncode != 0:
        log = done.stderr.decode(errors="replace")
        for code in DISK_ERRNOS:
            if os.strerror(code) in log:
                raise OSError(code, os.strerror(code), str(cwd / args[-1]))
        raise RuntimeError(f"ffmpeg failed ({' '.join(args[-3:])}): "
                           f"{done.stderr.decode(errors='replace').strip()[-800:]}")
    return done.stderr.decode(errors="replace")


def encode(frames: np.ndarray, fps: int, out: Path) -> None:
    """(T, H, W, 3) uint8 frames as an AV1 mp4 at ``out``."""
    t, h, w = frames.shape[:3]
    c = VIDEO_CODEC
    ffmpeg(["-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{w}x{h}", "-r", str(fps), "-i", "-",
            "-c:v", c["vcodec"], "-pix_fmt", c["pix_fmt"], "-g", str(c["g"]), "-crf", str(c["crf"]), out.name],
           out.parent, np.ascontiguousarray(frames, np.uint8).tobytes())


def concat(parts: list[Path], out: Path) -> None:
    """Stream-copy the mp4 ``parts`` (one directory) into ``out``."""
    listing = parts[0].parent / f".{out.name}.list"
    listing.write_text("".join(f"file '{p.name}'\n" for p in parts))
    ffmpeg(["-loglevel", "error", "-f", "concat", "-safe", "0", "-i", listing.name, "-c", "copy",
            os.path.relpath(out, listing.parent)], listing.parent)
    listing.unlink()


def cut(segments: list[tuple[Path, int, int]], fps: int, out: Path) -> None:
    """Frames ``start .. stop - 1`` of each ``(mp4, start, stop)`` (each ``start`` an episode's first
    frame, a keyframe), stream-copied one after another into ``out``."""
    listing = out.parent / f".{out.name}.cut"
    listing.write_text("".join(f"file '{os.path.relpath(p, out.parent)}'\ninpoint {start / fps!r}\noutpoint "
                               f"{stop / fps!r}\n"
                               for p, start, stop in segments))
    try:
        ffmpeg(["-loglevel", "error", "-f", "concat", "-safe", "0", "-i", listing.name, "-c", "copy",
                out.name], out.parent)
    finally:
        listing.unlink()


def count_frames(path: Path) -> int:
    """The video frames (packets) of the mp4 at ``path``, without decoding; RuntimeError when unreadable."""
    log = ffmpeg(["-i", path.name, "-map", "0:v:0", "-c", "copy", "-f", "null", "-"], path.parent)
    found = re.findall(r"frame=\s*(\d+)", log)
    if not found:
        raise RuntimeError(f"ffmpeg printed no frame count for {path.name}")
    return int(found[-1])

