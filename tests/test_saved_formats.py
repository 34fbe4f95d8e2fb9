"""Files written by so101-mjx 0.1.0 before the subpackage layout still load and give the same results.

``tests/fixtures/v0.1.0`` was written by the 0.1.0 code: a tiny PickCube training run (checkpoint,
``run.json``, ``policy.npz``, ``policy.onnx``) and a two-episode LeRobotDataset; ``expected_eval.json``
holds that code's own ``so101-mjx eval --episodes 8`` results for each form of the policy.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jax
import numpy as np
import pytest

from so101_mjx import cli

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "v0.1.0"
EXPECTED = json.loads((FIXTURE / "expected_eval.json").read_text())
FORMS = {"checkpoint": "pick_cube_run", "onnx": "pick_cube_run/policy.onnx", "npz": "pick_cube_run/policy.npz"}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_policies_of_0_1_0_evaluate_as_they_did(form, tmp_path):
    if form == "onnx":
        pytest.importorskip("onnxruntime")
    out = tmp_path / "eval.json"
    jax.config.update("jax_enable_x64", False)  # the fixture's results are float32, the eval default
    try:
        assert cli.main(["eval", str(FIXTURE / FORMS[form]), "--episodes", "8", "--json", str(out)]) == 0
    finally:
        jax.config.update("jax_enable_x64", True)
    got, want = json.loads(out.read_text())["backends"]["c"], EXPECTED[form]
    assert got["success"] == want["success"] and got["length"] == want["length"]
    # float32 episodes of 8 steps: jax releases may round a last bit differently, never more
    np.testing.assert_allclose(got["returns"], want["returns"], rtol=0, atol=1e-5)


def test_a_0_1_0_dataset_reads_and_resumes(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("imageio_ffmpeg")
    from so101_mjx.data.record import record
    from so101_mjx.render.frames import FrameRenderer
    from so101_mjx.robot.scenes import load_model

    try:
        FrameRenderer(load_model("pick_cube"), 16, 16).close()
    except RuntimeError:
        pytest.skip("no offscreen GL context (MUJOCO_GL=egl or osmesa)")
    root = tmp_path / "dataset"
    shutil.copytree(FIXTURE / "dataset", root)
    before = pq.read_table(root / "data/chunk-000/file-000.parquet")
    summary = record("SO101PickCube-v0", "scripted", 1, root, image_size=32, resume=True, config={"episode_length": 5})
    assert summary["total_episodes"] == 3
    info = json.loads((root / "meta/info.json").read_text())
    data = pa.concat_tables([pq.read_table(p) for p in sorted((root / "data").glob("chunk-*/file-*.parquet"))])
    assert info["total_frames"] == data.num_rows == before.num_rows + 5
    np.testing.assert_array_equal(np.asarray(data.column("index")), np.arange(data.num_rows))
    assert pq.read_table(root / "data/chunk-000/file-000.parquet").equals(before)  # the old rows are untouched
