"""An independent reader of LeRobotDataset v3.0 directories (pyarrow and ffmpeg only, none of the
writer's code): what a consumer such as lerobot sees, and the invariants a complete dataset keeps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def read_parquets(root: Path, folder: str) -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in sorted((root / folder).glob("chunk-*/file-*.parquet"))])


def video_frames(path: Path) -> int:
    import imageio_ffmpeg

    return imageio_ffmpeg.count_frames_and_secs(str(path))[0]


def assert_consistent(root: Path, staging_ok: bool = False) -> dict:
    """Every file readable; rows, episodes and video frames equal ``info.json``'s totals; ``index``
    0..N-1 without duplicates; no staging area left behind (unless ``staging_ok``: a killed writer's,
    which readers do not see). Returns info.json."""
    info = json.loads((root / "meta/info.json").read_text())
    data = read_parquets(root, "data")
    episodes = read_parquets(root, "meta/episodes").to_pylist()
    assert data.num_rows == info["total_frames"] == sum(e["length"] for e in episodes)
    assert (len(episodes) == info["total_episodes"]
            and [e["episode_index"] for e in episodes] == list(range(len(episodes))))
    np.testing.assert_array_equal(data.column("index").to_numpy(), np.arange(data.num_rows))
    lengths = np.bincount(data.column("episode_index").to_numpy(), minlength=len(episodes))
    np.testing.assert_array_equal(lengths, [e["length"] for e in episodes])
    pq.read_table(root / "meta/tasks.parquet")
    json.loads((root / "meta/stats.json").read_text())
    for key in (k for k, f in info["features"].items() if f["dtype"] == "video"):
        prefix = f"videos/{key}/"
        per_file: dict[tuple[int, int], int] = {}
        for e in episodes:
            index = (e[prefix + "chunk_index"], e[prefix + "file_index"])
            per_file[index] = per_file.get(index, 0) + e["length"]
        found = {(int(p.parent.name[6:]), int(p.stem[5:])): video_frames(p)
                 for p in sorted((root / prefix).glob("chunk-*/file-*.mp4"))}
        assert found == per_file, (key, found, per_file)
    assert staging_ok or not (root / ".staging").exists()
    return info
