"""Datasets damaged as interrupted writers and hand edits damage them: refused before an append with
one line naming what is wrong, and rewritten by ``--repair`` to their intact episodes, renumbered."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("imageio_ffmpeg")

from so101_mjx import _files  # noqa: E402
from so101_mjx.data import dataset_check, dataset_repair  # noqa: E402
from so101_mjx.data.lerobot_dataset import DatasetWriter, video_feature  # noqa: E402
from so101_mjx.errors import InputError  # noqa: E402
from tests.data.dataset_reader import assert_consistent, read_parquets  # noqa: E402

FEATURES = {"observation.images.cam": video_feature(16, 16, 10),
            "action": {"dtype": "float32", "shape": [2], "names": ["a", "b"]}}
LENGTHS = ((3, 4), (5, 2), (4, 3))  # three commits of two episodes


def write(root: Path, commits=LENGTHS, resume: bool = False, seed: int = 0) -> DatasetWriter:
    rng = np.random.default_rng(seed)
    writer = DatasetWriter(root, FEATURES, 10, "so101", resume=resume)
    for lengths in commits:
        for n in lengths:
            writer.add_episode({"action": rng.normal(size=(n, 2))}, "task",
                               {"observation.images.cam": rng.integers(0, 256, (n, 16, 16, 3), np.uint8)})
        writer.commit()
    writer.close()
    return writer


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pristine") / "ds"
    write(root)
    return root


@pytest.fixture
def dataset(pristine, tmp_path) -> Path:
    shutil.copytree(pristine, tmp_path / "ds")
    return tmp_path / "ds"


def test_each_commit_is_new_files_and_the_dataset_is_consistent(pristine):
    info = assert_consistent(pristine)
    assert info["total_episodes"] == 6 and info["total_frames"] == sum(map(sum, LENGTHS))
    episodes = read_parquets(pristine, "meta/episodes").to_pylist()
    assert [e["data/file_index"] for e in episodes] == [0, 0, 1, 1, 2, 2]
    assert [e["videos/observation.images.cam/from_timestamp"] for e in episodes] == [0, 0.3, 0, 0.5, 0, 0.4]
    assert dataset_check.check(pristine)["total_episodes"] == 6


def truncate(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def add_rows(path: Path, episode: int, n: int) -> None:
    """Rows of an episode the metadata does not list, appended to a data file (an interrupted append)."""
    table = pq.read_table(path)
    extra = table.slice(0, n).set_column(table.column_names.index("episode_index"), "episode_index",
                                         pa.array([episode] * n))
    pq.write_table(pa.concat_tables([table, extra]), path)


DAMAGES = {  # name: (damage, expected words in the refusal, intact episodes kept by the repair)
    "data file without footer": (lambda r: truncate(r / "data/chunk-000/file-002.parquet", 100),
                                 "file-002.parquet is unreadable", 4),
    "meta file without footer": (lambda r: truncate(r / "meta/episodes/chunk-000/file-001.parquet", 50),
                                 "file-001.parquet is unreadable", 4),
    "rows the metadata does not list": (lambda r: add_rows(r / "data/chunk-000/file-002.parquet", 6, 2),
                                        "2 rows that meta/episodes does not list", 6),
    "info.json behind the metadata": (lambda r: r.joinpath("meta/info.json").write_text(
        json.dumps(json.loads(r.joinpath("meta/info.json").read_text()) | {"total_episodes": 5})),
        "counts 5 episodes", 6),
    "video file missing": (lambda r: r.joinpath("videos/observation.images.cam/chunk-000/file-001.mp4").unlink(),
                           "file-001.mp4 is missing", 4),
    "video file cut short": (lambda r: truncate(r / "videos/observation.images.cam/chunk-000/file-000.mp4", 600),
                             "file-000.mp4", 4),
}


@pytest.mark.parametrize("name", DAMAGES)
def test_damaged_dataset_is_refused_then_repaired(dataset, tmp_path, name):
    damage, words, complete = DAMAGES[name]
    damage(dataset)
    with pytest.raises(InputError, match=f"repair=True keeps its {complete} intact episodes") as err:
        write(dataset, resume=True)
    assert words in str(err.value) and "\n" not in str(err.value)
    kept, problems = dataset_repair.repair(dataset)
    assert kept == complete and problems
    assert_consistent(dataset)
    write(dataset, ((2,),), resume=True, seed=1)  # resumes after the repair
    assert assert_consistent(dataset)["total_episodes"] == complete + 1


@pytest.mark.parametrize("info", ["[]", "{", '{"codebase_version": "v3.0"}'])
def test_unusable_info_json_is_one_line(dataset, info):
    (dataset / "meta/info.json").write_text(info)
    with pytest.raises(InputError, match="info.json") as err:
        dataset_check.check(dataset)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("point", ["staged", "publishing"])
def test_a_commit_cut_short_is_finished_or_discarded_by_the_next_writer(dataset, monkeypatch, point):
    """A kill before the manifest leaves the old dataset; one after it, a commit the next writer finishes."""
    def killed(name, count):
        if name == point:
            raise SystemExit("killed")

    monkeypatch.setattr(_files, "kill_point", killed)
    with pytest.raises(SystemExit):
        write(dataset, ((2, 2),), resume=True, seed=1)
    monkeypatch.undo()
    assert (dataset / ".staging").is_dir()
    if point == "staged":  # nothing published: the old dataset, as it was
        assert dataset_check.check(dataset)["total_episodes"] == 6
    _files.recover(dataset)
    assert assert_consistent(dataset)["total_episodes"] == (6 if point == "staged" else 8)


def test_a_full_disk_is_one_line_and_changes_nothing(dataset, monkeypatch):
    before = {p: p.read_bytes() for p in dataset.rglob("*") if p.is_file()}
    real = _files.Transaction.commit

    def full(self):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_files.Transaction, "commit", full)
    with pytest.raises(InputError,
                       match="no space left on device while writing the dataset at .*; nothing was changed"):
        write(dataset, ((2,),), resume=True, seed=1)
    monkeypatch.setattr(_files.Transaction, "commit", real)
    _files.recover(dataset)
    assert {p: p.read_bytes() for p in dataset.rglob("*") if p.is_file()} == before


def test_odd_characters_in_the_path(tmp_path):
    root = tmp_path / "a #b 'c' %d?" / "ds"
    write(root, ((3, 2),))
    assert assert_consistent(root)["total_episodes"] == 2


@pytest.mark.parametrize("where", ["write_parquet", "commit"])
def test_an_interrupted_commit_retried_by_close_publishes_each_episode_once(tmp_path, monkeypatch, where):
    """Ctrl-C while a commit stages its files: close() (record's finally) commits the same episodes again, once."""
    rng = np.random.default_rng(0)
    writer = DatasetWriter(tmp_path / "ds", FEATURES, 10, "so101")
    for n in (3, 4):
        writer.add_episode({"action": rng.normal(size=(n, 2))}, "task",
                           {"observation.images.cam": rng.integers(0, 256, (n, 16, 16, 3), np.uint8)})
    target = (_files.Transaction, "commit") if where == "commit" else (dataset_check.fmt, "write_parquet")
    real = getattr(*target)
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # the second call of the first commit
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(*target, interrupted if where == "write_parquet"
                        else lambda self: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        writer.commit()
    monkeypatch.setattr(*target, real)
    writer.close()
    info = assert_consistent(tmp_path / "ds")
    assert info["total_episodes"] == 2 and info["total_frames"] == 7
    assert [p.name for p in sorted((tmp_path / "ds/data/chunk-000").iterdir())] == ["file-000.parquet"]


def test_deferred_signals_hold_an_interrupt_sent_to_the_process():
    import os
    import signal

    order = []
    # Python's own SIGINT handler, whatever an earlier test in this worker process left installed
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with _files.deferred_signals():
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(1000):  # the handler would run here, between bytecodes
                    pass
                order.append("block finished")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert order == ["block finished"]
