"""Poisoned numbers and edited graphs in files: every load path checks weights (finite, real, float32,
shaped) and an ONNX graph against the one export writes, and ``eval`` and ``replay`` accept and refuse
the same files. Files are copies of ``tests/fixtures/v0.1.0`` or a tiny random pixel student."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx import cli
from so101_mjx._lock import LOCK_FILE
from so101_mjx.errors import InputError

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from conftest import one_error_line  # noqa: E402
from onnx import numpy_helper  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "v0.1.0" / "pick_cube_run"
SIZE = 36


def edited_onnx(source: Path, out: Path, edit) -> Path:
    model = onnx.load(str(source))
    edit(model.graph)
    onnx.save(model, out)
    return out


def set_init(graph, name: str, change) -> None:
    (init,) = [t for t in graph.initializer if t.name == name]
    init.CopyFrom(numpy_helper.from_array(change(numpy_helper.to_array(init).copy()), name))


def set_op(name: str, op: str):
    def edit(graph) -> None:
        (node,) = [n for n in graph.node if n.name == name]
        node.op_type = op
    return edit


def nan_first(a: np.ndarray) -> np.ndarray:
    a.flat[0] = np.nan
    return a


STATE_EDITS = {
    "tanh_to_neg": (set_op("squashed", "Neg"), "graph node"),
    "loc_start": (lambda g: set_init(g, "loc_start", lambda a: a + 1), "graph constant loc_start differs"),
    "nan_mean": (lambda g: set_init(g, "obs_mean", nan_first), "obs_mean holds 1 non-finite values"),
    "hidden_to_relu": (set_op("sigmoid_0", "Relu"), "graph node"),
    "no_metadata": (None, "metadata property 'so101_mjx' is missing"),
}


def state_file(tmp_path: Path, case: str) -> Path:
    out = tmp_path / f"{case}.onnx"
    edit, _ = STATE_EDITS[case]
    if edit is not None:
        return edited_onnx(FIXTURE / "policy.onnx", out, edit)
    model = onnx.load(str(FIXTURE / "policy.onnx"))
    del model.metadata_props[:]
    onnx.save(model, out)
    return out


@pytest.mark.parametrize("case", sorted(STATE_EDITS))
@pytest.mark.parametrize("command", ["eval", "replay"])
def test_an_edited_state_onnx_is_refused_by_eval_and_replay(tmp_path, case, command, capsys):
    """eval rebuilds the net from the weights, replay runs the graph: both check the graph first."""
    path = state_file(tmp_path, case)
    assert cli.main([command, str(path), "--episodes", "1"]) == 2
    one_error_line(capsys, f"{path}", STATE_EDITS[case][1])


@pytest.mark.parametrize("command", ["eval", "replay"])
def test_the_exported_onnx_is_accepted_by_eval_and_replay(command, capsys):
    assert cli.main([command, str(FIXTURE / "policy.onnx"), "--episodes", "1"]) == 0
    assert "success rate" in capsys.readouterr().out


# -- the pixel student -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def student(tmp_path_factory) -> Path:
    """A tiny random PickCube student at 36x36 (as test_pixel_policy's) exported to student.onnx."""
    from so101_mjx.training import distill, pixel_policy

    out = tmp_path_factory.mktemp("distill")
    net = pixel_policy.PixelStudent(channels=(4, 6, 5), hidden=16)
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, SIZE, SIZE, 3), jnp.uint8), jnp.zeros((1, 14)))
    env_config = {"image_obs": True, "image_size": SIZE, "image_quality": "fast", "episode_length": 3}
    distill.save(out, params, {"teacher": "t.onnx", "env": "SO101PickCube-v0", "env_config": env_config})
    pixel_policy.export(out)
    return out


PIXEL_EDITS = {
    "nan_weight": (lambda g: set_init(g, "dense_1_kernel", nan_first), "dense_1_kernel holds 1 non-finite values"),
    "inf_conv": (lambda g: set_init(g, "conv_0_weight", lambda a: a * np.inf), "conv_0_weight holds"),
    "tanh_to_neg": (set_op("move", "Neg"), "graph node"),
    "byte_scale": (lambda g: set_init(g, "byte_scale", lambda a: a * 0 + 1), "graph constant byte_scale differs"),
}


@pytest.mark.parametrize("case", sorted(PIXEL_EDITS))
def test_an_edited_pixel_student_onnx_is_refused_by_replay(student, tmp_path, case, capsys):
    edit, message = PIXEL_EDITS[case]
    path = edited_onnx(student / "student.onnx", tmp_path / "student.onnx", edit)
    assert cli.main(["replay", str(path), "--episodes", "1"]) == 2
    one_error_line(capsys, str(path), message)


def test_a_pixel_student_onnx_without_metadata_is_one_line(student, tmp_path, capsys):
    model = onnx.load(str(student / "student.onnx"))
    del model.metadata_props[:]
    onnx.save(model, tmp_path / "student.onnx")
    assert cli.main(["replay", str(tmp_path / "student.onnx"), "--episodes", "1"]) == 2
    one_error_line(capsys, "student.onnx is not an exported so101_mjx ONNX file",
                   "metadata property 'so101_mjx' is missing")


@pytest.mark.parametrize(("edit", "message"), [
    (lambda p: p.__setitem__("params/Dense_0/kernel", p["params/Dense_0/kernel"] * np.nan),
     "params/Dense_0/kernel holds"),
    (lambda p: p.__setitem__("params/Conv_1/bias", p["params/Conv_1/bias"] + 1j),
     "params/Conv_1/bias must be a float array, got complex"),
    (lambda p: p.pop("params/Conv_2/bias"), "must be 3 Conv layers for each of 1 camera"),
    (lambda p: p.__setitem__("params/Conv_0/kernel", p["params/Conv_0/kernel"][:4]), "Conv kernel (4, 8, 3, 4)"),
])
def test_a_poisoned_student_npz_is_refused_by_export_and_load(student, tmp_path, edit, message, capsys):
    """distill's outputs: student.npz is checked before export or the flax runner uses it."""
    from so101_mjx.training import policies

    run = shutil.copytree(student, tmp_path / "run")
    with np.load(run / "student.npz") as z:
        params = dict(z)
    edit(params)
    np.savez(run / "student.npz", **params)
    assert cli.main(["export", str(run), "--out", str(tmp_path / "s.onnx")]) == 2
    one_error_line(capsys, "student.npz", message)
    assert not (tmp_path / "s.onnx").exists()
    with pytest.raises(InputError, match="student.npz"):
        policies.load(run / "student.npz")


# -- checkpoints -------------------------------------------------------------------------------
def digest(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` but the writer lock (which a refused writer may leave)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != LOCK_FILE}


POLICY_KERNEL = ".training.params.policy['params']['hidden_0']['kernel']"


@pytest.mark.parametrize(("change", "message"), [
    (lambda a: a * np.nan, f"{POLICY_KERNEL} holds 136 non-finite values"),
    (lambda a: a.astype(np.complex64), f"{POLICY_KERNEL} must be a real (not complex) numeric array, got complex64"),
])
def test_a_poisoned_training_state_is_refused_by_resume_before_anything_is_written(
        tmp_path, change, message, float32, capsys):
    """In float32 the fixture's state fits this run: without the check the resume trains on from NaN."""
    run = shutil.copytree(FIXTURE, tmp_path / "run")
    state = run / "checkpoints/000000000256/training_state.npz"
    with np.load(state) as z:
        arrays = dict(z)
    arrays[POLICY_KERNEL] = change(arrays[POLICY_KERNEL])
    np.savez(state, **arrays)
    before = digest(run)
    argv = ["train", "--env", "SO101PickCube-v0", "--preset", "tiny", "--num-timesteps", "512", "--resume",
            "--out", str(run)]
    assert cli.main(argv) == 2
    one_error_line(capsys, str(state), message)
    assert digest(run) == before


def test_complex_params_npz_is_refused_by_eval_and_export(tmp_path, capsys):
    run = shutil.copytree(FIXTURE, tmp_path / "run")
    params = run / "checkpoints/000000000256/params.npz"
    with np.load(params) as z:
        arrays = dict(z)
    name = next(k for k in arrays if "hidden_0" in k and "kernel" in k)
    arrays[name] = arrays[name] + 1j
    np.savez(params, **arrays)
    for argv in (["eval", str(run), "--episodes", "1"], ["export", str(run), "--out", str(tmp_path / "p.onnx")]):
        assert cli.main(argv) == 2
        one_error_line(capsys, str(params), "complex64")


def test_a_state_npz_with_float64_weights_is_refused(tmp_path, capsys):
    with np.load(FIXTURE / "policy.npz") as z:
        arrays = dict(z)
    arrays["kernel_1"] = arrays["kernel_1"].astype(np.float64)
    np.savez(tmp_path / "p.npz", **arrays)
    for command in ("eval", "replay"):
        assert cli.main([command, str(tmp_path / "p.npz"), "--episodes", "1"]) == 2
        one_error_line(capsys, "p.npz: kernel_1 must be a float32 array, got float64")
    assert json.loads(str(arrays["metadata"]))["env"] == "SO101PickCube-v0"
