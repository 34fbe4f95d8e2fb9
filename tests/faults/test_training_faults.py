"""Training, export and eval against hostile or odd inputs: a working directory with a planted
``numpy.py``, ``.npz`` files whose arrays would expand to gigabytes, a PPO state that trains into NaN,
export paths that are directories, a state policy whose env config asks for camera frames.
Copies of ``tests/fixtures/v0.1.0``'s tiny PickCube run, float32 (the library default)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import one_error_line

from so101_mjx import cli
from so101_mjx.training import checkpoint
from so101_mjx.training.progress import read_csv
from tests.training.test_poisoned_weights import POLICY_KERNEL, digest
from tests.training.test_resume import environment

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "v0.1.0" / "pick_cube_run"
PACKAGE = Path(__file__).resolve().parents[2] / "so101_mjx"
STEP = "checkpoints/000000000256"
RESUME = ["train", "--env", "SO101PickCube-v0", "--preset", "tiny", "--num-timesteps", "512", "--resume", "--out"]
HUGE = (2**17, 2**10)  # float32: 512 MiB of zeros, about 0.5 MB compressed


@pytest.fixture
def run(tmp_path) -> Path:
    return shutil.copytree(FIXTURE, tmp_path / "run")


# -- child processes never import from the working directory ------------------------------------
def test_every_python_child_process_of_the_library_runs_with_safe_path():
    """Each place in so101_mjx/ that starts a Python interpreter passes ``-P`` (or sets PYTHONSAFEPATH
    for a multiprocessing spawn): a ``numpy.py`` where the user runs so101-mjx is never imported."""
    starts = []
    for file in sorted(PACKAGE.rglob("*.py")):
        text = file.read_text()
        for match in re.finditer(r"sys\.executable|get_context\(\"(?:spawn|forkserver)\"\)|set_start_method", text):
            call = text[match.start():match.start() + 120]
            safe = '"-P"' in call if match.group() == "sys.executable" else "PYTHONSAFEPATH" in text
            starts.append((file.relative_to(PACKAGE.parent).as_posix(), match.group(), safe))
    assert {(f, what) for f, what, _ in starts} >= {("so101_mjx/training/distributed.py", "sys.executable"),
                                                  ("so101_mjx/render/batch.py", "sys.executable")}
    assert all(safe for *_, safe in starts), [s for s in starts if not s[2]]


@pytest.mark.slow  # a two-process training run (~40 s)
def test_a_planted_numpy_in_the_working_directory_never_runs_in_training_processes(tmp_path):
    marker = tmp_path / "planted-ran"
    work = tmp_path / "work"
    work.mkdir()
    (work / "numpy.py").write_text(f"open({str(marker)!r}, 'a').write('ran\\n')\nraise ImportError('planted "
                                   "numpy.py')\n")
    argv = ["train", "--env", "SO101Reach-v0", "--preset", "tiny", "--num-evals", "2", "--num-processes", "2", "--out",
            str(tmp_path / "run")]
    result = subprocess.run([sys.executable, "-P", "-m", "so101_mjx", *argv], cwd=work, env=environment(),
                            capture_output=True, text=True, timeout=600)
    assert not marker.exists(), result.stderr[-3000:]
    assert result.returncode == 0, result.stderr[-3000:]


# -- .npz files whose arrays would expand to gigabytes --------------------------------------------
def write_bomb(path: Path, arrays: dict[str, np.ndarray], name: str, shape: tuple[int, ...]) -> None:
    """``arrays`` as an ``.npz``, but ``name`` a zero-filled float32 array of ``shape``, deflated (never in memory)."""
    with zipfile.ZipFile(path, "w") as zf:
        for key, value in arrays.items():
            if key != name:
                with zf.open(f"{key}.npy", "w") as f:
                    np.lib.format.write_array(f, np.asarray(value), allow_pickle=False)
        info = zipfile.ZipInfo(f"{name}.npy")
        info.compress_type = zipfile.ZIP_DEFLATED
        with zf.open(info, "w", force_zip64=True) as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": shape})
            chunk, left = bytes(2**24), int(np.prod(shape)) * 4
            while left:
                f.write(chunk[:min(left, len(chunk))])
                left -= min(left, len(chunk))


def bomb(file: Path, name: str) -> None:
    with np.load(file) as z:
        arrays = dict(z)
    assert name in arrays
    write_bomb(file, arrays, name, HUGE)
    assert file.stat().st_size < 2**22


def refused_small(capsys, argv: list[str], *needles: str) -> None:
    """``so101-mjx argv`` exits 2 with one line holding ``needles``, allocating little (the array is never read)."""
    tracemalloc.start()
    try:
        start = time.perf_counter()
        assert cli.main(argv) == 2
        seconds, peak = time.perf_counter() - start, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    one_error_line(capsys, *needles)
    assert peak < 2**27, f"{peak / 2**20:.0f} MiB allocated"
    assert seconds < 120


def test_a_policy_npz_bomb_is_refused_by_its_header(run, tmp_path, capsys):
    policy = shutil.copy(run / "policy.npz", tmp_path / "policy.npz")
    bomb(policy, "kernel_0")
    refused_small(capsys, ["replay", str(policy), "--episodes", "1"], "policy.npz: kernel_0 has shape (131072, 1024)",
                  "more than a policy of its metadata's sizes")


def test_a_params_npz_bomb_is_refused_by_its_header(run, tmp_path, capsys):
    params = run / STEP / checkpoint.PARAMS_FILE
    with np.load(params) as z:
        name = next(k for k in z.files if "hidden_0" in k and "kernel" in k)
    bomb(params, name)
    refused_small(capsys, ["export", str(run), "--out", str(tmp_path / "p.onnx")], f"{params} does not fit this run",
                  "float32[131072, 1024]")


@pytest.mark.slow
def test_a_training_state_npz_bomb_is_refused_by_its_header(run, float32, capsys):
    state = run / STEP / checkpoint.STATE_FILE
    bomb(state, POLICY_KERNEL)
    before = digest(run)
    refused_small(capsys, [*RESUME, str(run)], f"{state} does not fit this run", "float32[131072, 1024]")
    assert digest(run) == before


# -- a PPO run gone non-finite ------------------------------------------------------------------
@pytest.mark.slow
def test_a_ppo_run_gone_non_finite_stops_before_writing_that_step(run, float32, capsys):
    """Weights of 3e38 (finite: the state loads) overflow in the first update: exit 1, one line, no checkpoint, no eval
    row."""
    state = run / STEP / checkpoint.STATE_FILE
    with np.load(state) as z:
        arrays = dict(z)
    arrays[POLICY_KERNEL] = np.full_like(arrays[POLICY_KERNEL], 3e38)
    np.savez(state, **arrays)
    assert cli.main([*RESUME, str(run)]) == 1
    one_error_line(capsys, "the training state went non-finite (NaN or inf)", "stopped before writing this step")
    assert [p.name for p in checkpoint.steps(run)] == ["000000000256"]
    assert read_csv(run / "metrics.csv")[-1]["step"] == 256


# -- export onto a directory; eval of a state policy whose env config asks for frames ---------------
def test_export_onto_a_directory_is_one_line(run, tmp_path, capsys):
    (run / "policy.onnx").unlink()
    (run / "policy.onnx").mkdir()
    assert cli.main(["export", str(run)]) == 2  # the default --out: <run dir>/policy.onnx
    one_error_line(capsys, f"{run / 'policy.onnx'} is a directory, expected a file path")
    (tmp_path / "p.npz").mkdir()
    assert cli.main(["export", str(run), "--out", str(tmp_path / "p.onnx")]) == 2  # the .npz beside it
    one_error_line(capsys, f"{tmp_path / 'p.npz'} is a directory")
    assert not (tmp_path / "p.onnx").exists()


def test_train_export_onto_a_directory_is_refused_before_training(tmp_path, capsys):
    (tmp_path / "run" / "policy.npz").mkdir(parents=True)
    assert cli.main(["train", "--preset", "tiny", "--export", "--out", str(tmp_path / "run")]) == 2
    one_error_line(capsys, "--export:", "policy.npz is a directory")
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["policy.npz"]


def test_eval_of_a_state_policy_whose_config_asks_for_frames_runs_without_them(run, tmp_path, capsys):
    import json

    with np.load(run / "policy.npz") as z:
        arrays = dict(z)
    meta = json.loads(str(arrays["metadata"]))
    meta["env_config"] |= {"image_obs": True, "image_size": 48}
    np.savez(tmp_path / "policy.npz", **{**arrays, "metadata": np.asarray(json.dumps(meta))})
    assert cli.main(["eval", str(tmp_path / "policy.npz"), "--episodes", "2"]) == 0
    assert "success rate" in capsys.readouterr().out
