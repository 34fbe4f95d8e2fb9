"""A hand-edited dataset's ``meta/info.json`` or ``meta/so101_mjx.json`` gives ``record --resume`` one
line naming the file and the field, and leaves the dataset as it was (a copy of
``tests/fixtures/v0.1.0/dataset``)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from so101_mjx import cli
from so101_mjx._lock import LOCK_FILE
from so101_mjx.errors import InputError

pytest.importorskip("pyarrow")
from so101_mjx.data import lerobot_dataset, record

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "v0.1.0" / "dataset"
RESUME = ["record", "--env", "SO101PickCube-v0", "--episodes", "1", "--no-video", "--resume", "--out"]


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != LOCK_FILE}


def without(key):
    return lambda d: {k: v for k, v in d.items() if k != key}


def feature(name, **fields):
    return lambda info: {**info, "features": {**info["features"], name: {**info["features"][name], **fields}}}


EDITS = {
    "info_list": ("info.json", lambda info: [info],
                  "info.json: the top level must be a dict (a JSON object), got list"),
    "info_no_fps": ("info.json", without("fps"),
                    "info.json: field 'fps' must be an int >= 1, got nothing (the field is missing)"),
    "info_fps_text": ("info.json", lambda info: {**info, "fps": "10"},
                      "info.json: field 'fps' must be an int >= 1, got str '10'"),
    "info_no_features": ("info.json", without("features"), "info.json: field 'features' must be a dict"),
    "info_total_float": ("info.json", lambda info: {**info, "total_episodes": 2.5},
                         "field 'total_episodes' must be an int >= 0"),
    "feature_no_dtype": ("info.json", lambda info: {**info, "features": {**info["features"], "action": {"shape": [4]}}},
                         "field 'features.action.dtype' must be a string, got nothing"),
    "feature_shape": ("info.json", feature("action", shape="4"), "field 'features.action.shape' must be a list"),
    "provenance_list": ("so101_mjx.json", lambda p: p["runs"], "so101_mjx.json: the top level must be a dict"),
    "provenance_no_runs": ("so101_mjx.json", without("runs"), "so101_mjx.json: field 'runs' must be a list"),
    "provenance_seed": ("so101_mjx.json", lambda p: {"runs": [{**p["runs"][0], "seed": "0"}]},
                        "so101_mjx.json: field 'runs[0].seed' must be an int >= 0, got str '0'"),
    "provenance_no_tried": ("so101_mjx.json", lambda p: {"runs": [without("tried")(p["runs"][0])]},
                            "field 'runs[0].tried'"),
}


@pytest.fixture
def dataset(tmp_path) -> Path:
    return shutil.copytree(FIXTURE, tmp_path / "dataset")


@pytest.mark.parametrize("case", sorted(EDITS))
def test_an_edited_meta_file_is_one_line_and_nothing_changes(dataset, case, capsys):
    name, edit, message = EDITS[case]
    path = dataset / "meta" / name
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    before = digest(dataset)
    assert cli.main([*RESUME, str(dataset)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and message in err, err
    assert digest(dataset) == before


@pytest.mark.parametrize("name", ["info.json", "so101_mjx.json"])
def test_a_meta_file_that_is_not_json_is_one_line(dataset, name, capsys):
    (dataset / "meta" / name).write_text("{'fps': 10}")
    assert cli.main([*RESUME, str(dataset)]) == 2
    err = capsys.readouterr().err
    assert f"{name}: not valid JSON (Expecting property name enclosed in double quotes at line 1, column 2)" in err, err


def test_the_readers_check_the_library_way(dataset):
    assert lerobot_dataset.read_info(dataset)["total_episodes"] == 2
    assert record.read_provenance(dataset / "meta/so101_mjx.json")[0]["tried"] == 2
    (dataset / "meta/info.json").write_text("[]")
    with pytest.raises(InputError, match="info.json: the top level must be a dict"):
        lerobot_dataset.read_info(dataset)
