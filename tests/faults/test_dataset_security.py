"""A dataset directory is input like any other: its staging manifest, feature keys and file names never
make a writer touch a file outside it (a victim file beside the dataset stays as it was), and
``record --repair`` keeps every intact episode, renumbered, or refuses before it deletes anything."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("imageio_ffmpeg")

from so101_mjx import _files, cli  # noqa: E402
from so101_mjx._lock import LOCK_FILE  # noqa: E402
from so101_mjx.data import dataset_check, dataset_repair, lerobot_format as fmt  # noqa: E402
from so101_mjx.data.lerobot_dataset import DatasetWriter  # noqa: E402
from so101_mjx.data.record import record  # noqa: E402
from so101_mjx.errors import InputError  # noqa: E402
from tests.conftest import one_error_line  # noqa: E402
from tests.data import test_dataset_check as written  # noqa: E402
from tests.data.dataset_reader import assert_consistent, read_parquets  # noqa: E402
from tests.data.test_dataset_check import FEATURES, write  # noqa: E402
from tests.data.test_record import REACH, SHORT  # noqa: E402

CAM = "videos/observation.images.cam/"
pristine, dataset = written.pristine, written.dataset  # six episodes with video in three commits; a copy per test


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A dataset of two short episodes, recorded without video."""
    out = tmp_path_factory.mktemp("recorded") / "ds"
    record(REACH, "scripted", 2, out, image_size=None, config=SHORT)
    return out


@pytest.fixture
def site(recorded, tmp_path) -> Path:
    """``tmp_path/ds`` (a copy of the recorded dataset) beside ``tmp_path/victim.txt``."""
    shutil.copytree(recorded, tmp_path / "ds")
    (tmp_path / "victim.txt").write_text("keep")
    return tmp_path / "ds"


def files_under(top: Path, skip: tuple[str, ...] = (LOCK_FILE,)) -> dict[str, bytes]:
    return {str(p.relative_to(top)): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()
            and p.name not in skip}


def outside(tmp_path: Path, dataset: Path) -> dict[str, bytes]:
    return {k: v for k, v in files_under(tmp_path).items() if not Path(tmp_path / k).is_relative_to(dataset)}


def plant(root: Path, manifest, staged: dict[str, str] | None = None) -> None:
    """A staging area as an attacker writes it: ``manifest`` (JSON text or a value) and staged files."""
    (root / _files.STAGING).mkdir(parents=True)
    (root / _files.STAGING / _files.MANIFEST).write_text(manifest if isinstance(manifest, str)
                                                         else json.dumps(manifest))
    for rel, text in (staged or {}).items():
        (root / _files.STAGING / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / _files.STAGING / rel).write_text(text)


def record_argv(out: Path, *flags: str) -> list[str]:
    return ["record", "--env", REACH, "--episodes", "1", "--no-video", "--num-envs", "1", "--out", str(out), *flags]


PLANTS = {  # name: (manifest (victim: the absolute path of tmp_path/victim.txt), record flags)
    "absolute delete": (lambda victim: {"replace": [], "delete": [victim]}, ["--resume"]),
    "dotdot delete": (lambda victim: {"replace": [], "delete": ["../victim.txt"]}, ["--repair"]),
    "dotdot replace": (lambda victim: {"replace": ["x/../../victim.txt"], "delete": []}, ["--resume"]),
    "not JSON": (lambda victim: '{"replace": [], "delete": ["../victim.txt"]', ["--resume"]),
    "a list": (lambda victim: ["../victim.txt"], ["--repair"]),
}


@pytest.mark.parametrize("name", PLANTS)
def test_a_planted_manifest_is_refused_and_touches_nothing_outside(site, capsys, name):
    manifest, flags = PLANTS[name]
    (site / "victim.txt").write_text("moved over the victim")  # the file a `..` replace would publish
    # .staging/x/../../victim.txt: ds/victim.txt
    plant(site, manifest(str(site.parent / "victim.txt")), {"x/.keep": ""})
    before, inside = outside(site.parent, site), files_under(site)
    status = cli.main(record_argv(site, *flags))
    assert outside(site.parent, site) == before and (site.parent / "victim.txt").read_text() == "keep"
    assert status == 2
    one_error_line(capsys, "MANIFEST.json", "so101-mjx did not write this staging area")
    assert files_under(site) == inside  # refused, not replayed: the dataset and its staging area as they were


def test_a_directory_holding_only_a_planted_staging_area_is_refused(tmp_path, capsys):
    """A new recording into a directory that holds only ``.staging/`` (it counts as empty) replays nothing."""
    (tmp_path / "victim.txt").write_text("keep")
    out = tmp_path / "new"
    plant(out, {"replace": [], "delete": [str(tmp_path / "victim.txt"), "../victim.txt"]})
    status = cli.main(record_argv(out))
    assert (tmp_path / "victim.txt").read_text() == "keep"
    assert status == 2
    one_error_line(capsys, "MANIFEST.json", "is not a relative path under 'data/' or 'meta/' or 'videos/'")
    # deploy --dataset's writer: the same refusal
    with pytest.raises(InputError, match="so101-mjx did not write this staging area"):
        DatasetWriter(out, FEATURES, 10, "so101")
    assert (tmp_path / "victim.txt").read_text() == "keep"


@pytest.mark.parametrize("link", ["staging", "chunk"])
def test_a_symlink_out_of_the_dataset_is_not_followed(site, tmp_path, capsys, link):
    """A staging area, or a chunk directory, that links to a directory outside: nothing there is moved or deleted."""
    away = tmp_path / "away"
    (away / "meta").mkdir(parents=True)
    (away / "victim.txt").write_text("keep")
    (away / "meta/victim.txt").write_text("keep")
    if link == "staging":  # the replace would move away/meta/victim.txt into the dataset
        (away / _files.MANIFEST).write_text(json.dumps({"replace": ["meta/victim.txt"], "delete": []}))
        (site / _files.STAGING).symlink_to(away)
    else:
        (site / "data/chunk-001").symlink_to(away)
        plant(site, {"replace": [], "delete": ["data/chunk-001/victim.txt"]})
    # the CLI's writer lock refuses any link in the output directory
    assert cli.main(record_argv(site, "--resume")) == 2
    one_error_line(capsys, "is a symlink")
    # the library refuses it on its own
    with pytest.raises(InputError, match="so101-mjx did not write this staging area"):
        _files.recover(site, fmt.PREFIXES)
    assert (away / "victim.txt").read_text() == (away / "meta/victim.txt").read_text() == "keep"


def test_a_planted_feature_key_is_refused(site, tmp_path, capsys):
    """A video feature ``../../victims`` would make --repair list and delete
    ``tmp_path/victims/chunk-000/file-000.mp4``."""
    victim = tmp_path / "victims/chunk-000/file-000.mp4"
    victim.parent.mkdir(parents=True)
    victim.write_text("keep")
    (site / "videos").mkdir()  # as in a dataset with cameras: videos/../../victims resolves
    info = json.loads((site / fmt.INFO_PATH).read_text())
    info["features"]["../../victims"] = fmt.video_feature(16, 16, 10)
    (site / fmt.INFO_PATH).write_text(json.dumps(info))
    before = outside(tmp_path, site)
    status = cli.main(record_argv(site, "--repair"))
    assert outside(tmp_path, site) == before and victim.read_text() == "keep"
    assert status == 2
    one_error_line(capsys, "feature key '../../victims' must be letters, digits")


def test_transaction_paths_are_confined(tmp_path):
    txn = _files.Transaction(tmp_path / "ds", fmt.PREFIXES)
    for rel in ("../x", "/etc/passwd", "data/../../x", "other/x", ".staging/x", "data//x", "data/./x", ""):
        with pytest.raises(InputError, match="is not a relative path under"):
            txn.path(rel)
        with pytest.raises(InputError, match="is not a relative path under"):
            txn.delete(rel)
    assert txn.path("data/chunk-000/file-000.parquet").parent.is_dir()
    txn.abort()


def actions(root: Path) -> list[np.ndarray]:
    """Each episode's actions, in episode order."""
    data = read_parquets(root, "data")
    index, action = data.column("episode_index").to_numpy(), np.asarray(data.column("action").to_pylist())
    return [action[index == e] for e in range(int(index.max()) + 1)]


def swap(a: Path, b: Path) -> None:
    tmp = a.with_suffix(".tmp")
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)


def set_info(root: Path, **fields) -> None:
    path = root / fmt.INFO_PATH
    path.write_text(json.dumps(json.loads(path.read_text()) | fields))


REPAIRS = {  # name: (damage, the original episodes kept); every other episode is intact
    "first video missing": (lambda r: (r / CAM / "chunk-000/file-000.mp4").unlink(), [2, 3, 4, 5]),
    "meta/episodes files swapped": (lambda r: swap(*(r / "meta/episodes/chunk-000" / f"file-00{i}.parquet"
                                                     for i in (0, 1))), list(range(6))),
    "data files swapped": (lambda r: swap(*(r / "data/chunk-000" / f"file-00{i}.parquet" for i in (1, 2))),
                           list(range(6))),
    "total_episodes 0": (lambda r: set_info(r, total_episodes=0), list(range(6))),
    "fps 1e9": (lambda r: set_info(r, fps=1_000_000_000), list(range(6))),
    # its video file cut: frames 5..6 kept
    "one bad row in the middle": (lambda r: add_zero_frame_row(r, 2), [0, 1, 3, 4, 5]),
}


@pytest.mark.parametrize("name", REPAIRS)
def test_repair_keeps_every_intact_episode_renumbered(dataset, name):
    damage, kept = REPAIRS[name]
    original = actions(dataset)
    damage(dataset)
    with pytest.raises(InputError, match=f"repair=True keeps its {len(kept)} intact episodes"):
        dataset_check.check(dataset)
    assert dataset_repair.repair(dataset)[0] == len(kept)
    info = assert_consistent(dataset)
    assert dataset_check.check(dataset) == info and info["fps"] == 10 and info["total_episodes"] == len(kept)
    for got, e in zip(actions(dataset), kept, strict=True):
        np.testing.assert_array_equal(got, original[e])
    rows = read_parquets(dataset, "meta/episodes").to_pylist()
    for i, row in enumerate(rows):  # the per-episode stats of the renumbered columns follow them
        assert row["stats/episode_index/min"] == [i] and row["stats/index/min"] == [row["dataset_from_index"]]
    write(dataset, ((2,),), resume=True, seed=1)
    assert assert_consistent(dataset)["total_episodes"] == len(kept) + 1


def test_repair_refuses_before_deleting_when_no_episode_is_intact(site, capsys):
    (site / "data/chunk-000/file-000.parquet").unlink()
    before = files_under(site)
    status = cli.main(record_argv(site, "--repair"))
    assert files_under(site) == before
    assert status == 2
    one_error_line(capsys, "no episode is intact", "--repair changed nothing")


def add_zero_frame_row(root: Path, episode: int | None = None) -> None:
    """A row of zero frames: appended as a seventh episode, or replacing ``episode``'s row."""
    path = (root / "meta/episodes/chunk-000/file-002.parquet" if episode is None
            else root / "meta/episodes/chunk-000/file-001.parquet")
    table = pq.read_table(path)
    rows = table.to_pylist()
    if episode is None:
        end = rows[-1]["dataset_to_index"]
        rows.append(rows[-1] | {"episode_index": 6, "length": 0, "dataset_from_index": end, "dataset_to_index": end,
                                CAM + "from_timestamp": rows[-1][CAM + "to_timestamp"]})
        set_info(root, total_episodes=7)
    else:
        rows = [r | {"length": 0, "dataset_to_index": r["dataset_from_index"]} if r["episode_index"] == episode
                else r for r in rows]
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)


def test_a_zero_frame_row_fails_the_check(dataset):
    add_zero_frame_row(dataset)
    with pytest.raises(InputError, match="episode 6 .*at least 1 frame.*repair=True keeps its 6 intact episodes"):
        write(dataset, ((2,),), resume=True, seed=1)
    assert dataset_repair.repair(dataset)[0] == 6
    assert assert_consistent(dataset)["total_episodes"] == 6


def test_a_missing_frame_index_column_is_one_line(dataset):
    path = dataset / "data/chunk-000/file-001.parquet"
    pq.write_table(pq.read_table(path).drop(["frame_index"]), path)
    with pytest.raises(InputError, match="file-001.parquet lacks the column 'frame_index'") as err:
        dataset_check.check(dataset)
    assert "\n" not in str(err.value)


def test_a_full_disk_during_a_video_commit_is_one_line(dataset, monkeypatch):
    """ffmpeg failing for want of space, as record's commit and then its close() meet it: one InputError, nothing
    changed."""
    before = files_under(dataset)
    run = fmt.subprocess.run

    def full(argv, **kwargs):
        if "concat" in argv:  # the commit's stream copy into the staged video file
            return fmt.subprocess.CompletedProcess(argv, 1, b"",
                                                   b"[out#0/mp4] Error opening output file-003.mp4: No space "
                                                   b"left on device\n")
        return run(argv, **kwargs)

    rng = np.random.default_rng(1)
    writer = DatasetWriter(dataset, FEATURES, 10, "so101", resume=True)
    writer.add_episode({"action": rng.normal(size=(3, 2))}, "task",
                       {"observation.images.cam": rng.integers(0, 256, (3, 16, 16, 3), np.uint8)})
    monkeypatch.setattr(fmt.subprocess, "run", full)
    with pytest.raises(InputError,
                       match="^no space left on device while writing the dataset at .*; nothing was changed$"):
        try:
            writer.commit()
        finally:
            writer.close()
    assert files_under(dataset) == before


def test_only_chunk_and_file_names_are_dataset_files(dataset):
    """Stray names under data/ (a backup, a chunk not numbered) are no part of the dataset and never parsed."""
    shutil.copy(dataset / "data/chunk-000/file-000.parquet", dataset / "data/chunk-000/file-000.parquet.bak")
    (dataset / "data/chunk-x").mkdir()
    shutil.copy(dataset / "data/chunk-000/file-000.parquet", dataset / "data/chunk-x/file-y.parquet")
    assert dataset_check.check(dataset)["total_episodes"] == 6
    assert os.path.exists(dataset / "data/chunk-x/file-y.parquet")
