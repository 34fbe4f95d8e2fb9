"""The ``so101-mjx`` doors: bad arguments end in one error line and exit status 2 before any env is
built; no import noise on stdout; MuJoCo warnings go to logging, not to a file in the cwd."""

import argparse
import dataclasses
import logging
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import mujoco
import numpy as np
import pytest

from so101_mjx import _compat as compat, cli
from so101_mjx.cli import argtypes as cliargs
from so101_mjx.training import presets


@pytest.fixture
def paths(tmp_path):
    """An existing file and an existing directory."""
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    return tmp_path


BAD_ARGUMENTS = [
    (["rollout", "--num-envs", "0"], "--num-envs", "integer >= 1"),
    (["rollout", "--num-envs", "-3"], "--num-envs", "integer >= 1"),
    (["rollout", "--steps", "0"], "--steps", "integer >= 1"),
    (["rollout", "--steps", "1.5"], "--steps", "integer >= 1"),
    (["rollout", "--action-scale", "nan"], "--action-scale", "finite number > 0"),
    (["rollout", "--action-scale", "inf"], "--action-scale", "finite number > 0"),
    (["rollout", "--action-scale", "0"], "--action-scale", "finite number > 0"),
    (["rollout", "--seed", "-1"], "--seed", "[0, 2**32)"),
    (["rollout", "--seed", str(2**32)], "--seed", "[0, 2**32)"),
    (["rollout", "--video", "{dir}"], "--video", "is a directory"),
    (["train", "--num-timesteps", "-5"], "--num-timesteps", "integer >= 1"),
    (["train", "--num-timesteps", "0"], "--num-timesteps", "integer >= 1"),
    (["train", "--num-evals", "0"], "--num-evals", "integer >= 1"),
    (["train", "--demo-start-prob", "1.5"], "--demo-start-prob", "a number in [0, 1]"),
    (["record", "--episodes", "1", "--out", "x", "--image-quality", "hd"], "--image-quality",
     "expected one of fast, shadowed, full"),
    (["rollout", "--backend", "gpu"], "--backend", "expected one of mjx, c, got 'gpu'"),
    (["rollout", "--policy", "best"], "--policy", "expected one of scripted, demonstrator, random, zero"),
    (["train", "--replay-episodes", "-1"], "--replay-episodes", "integer >= 0"),
    (["train", "--seed", "-2"], "--seed", "[0, 2**32)"),
    (["train", "--out", "{file}"], "--out", "is a file, not a directory"),
    (["train", "--out", "{file}/run"], "--out", "is a file, not a directory"),
    (["export", "ckpt", "--out", "{dir}"], "--out", "is a directory"),
    (["export", "ckpt", "--out", "{file}/policy.onnx"], "--out", "is a file, not a directory"),
    (["parity", "--steps", "0"], "--steps", "integer >= 1"),
    (["parity", "--episodes", "-1"], "--episodes", "integer >= 0"),
    (["parity", "--json", "{dir}"], "--json", "is a directory"),
    (["replay", "p.onnx", "--seed", "-1"], "--seed", "[0, 2**32)"),
    (["replay", "p.onnx", "--episodes", "0"], "--episodes", "integer >= 1"),
    (["replay", "p.onnx", "--video-episodes", "-1"], "--video-episodes", "integer >= 0"),
    (["replay", "p.onnx", "--video", "{dir}"], "--video", "is a directory"),
    (["eval", "p.onnx", "--seed", "-1"], "--seed", "[0, 2**32)"),
    (["eval", "p.onnx", "--episodes", "0"], "--episodes", "integer >= 1"),
    (["eval", "p.onnx", "--json", "{dir}"], "--json", "is a directory"),
]


@pytest.mark.parametrize(("argv", "argument", "allowed"), BAD_ARGUMENTS, ids=["_".join(a[0]) for a in BAD_ARGUMENTS])
def test_bad_argument_is_one_line_and_status_2(argv, argument, allowed, paths, capsys):
    argv = [a.format(file=paths / "file", dir=paths / "dir") for a in argv]
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith(f"so101-mjx {argv[0]}: error: argument {argument}: ") and allowed in last


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "--env", "SO101Reach-v0", "--preset", "tiny", "--num-evals", "1"],
         "num_evals must be an integer >= 2"),
        (["train", "--env", "SO101Reach-v0", "--preset", "tiny"], "'runs' is a file, not a directory"),  # default --out
    ],
)
def test_run_level_errors_are_one_line(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").write_text("not a directory")
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # nothing written


def test_argument_types_accept_valid_values(tmp_path):
    assert cliargs.positive_int("3") == 3 and cliargs.non_negative_int("0") == 0
    assert cliargs.seed("0") == 0 and cliargs.seed(str(2**32 - 1)) == 2**32 - 1
    assert cliargs.positive_float("0.025") == 0.025
    (tmp_path / "policy.onnx").write_text("old")  # an existing file may be overwritten
    for path in (tmp_path / "policy.onnx", tmp_path / "new" / "deeper" / "policy.onnx"):
        assert cliargs.output_file(str(path)) == str(path)
    assert cliargs.output_dir(str(tmp_path)) == str(tmp_path)
    assert cliargs.output_dir(str(tmp_path / "new" / "run")) == str(tmp_path / "new" / "run")
    assert not (tmp_path / "new").exists()  # checked, not created
    with pytest.raises(ValueError, match="integer >= 1"):  # also a ValueError, for run()-level use
        cliargs.positive_int("0")
    with pytest.raises(argparse.ArgumentTypeError):
        cliargs.positive_float("nan")


def test_help_returns_0(capsys):
    assert cli.main(["rollout", "--help"]) == 0
    assert "--num-envs" in capsys.readouterr().out


def test_a_parameter_error_names_the_commands_options():
    """The parameters a ParameterError names become the command's options, whole words only; others stay."""
    from so101_mjx.cli.main import build_parser, spelled
    from so101_mjx.errors import InputError, ParameterError

    options = build_parser().parse_args(["eval", "p.onnx"])._options
    err = ParameterError("runs/env/p.onnx is a Reach policy; env Push differs (pass force=True, or episodes.x)",
                         "env", "force=True", "episodes", "seed=True")
    assert spelled(err, options) == ("runs/env/p.onnx is a Reach policy; --env Push differs "
                                     "(pass --force, or episodes.x)")
    assert spelled(InputError("env Push"), options) == "env Push"


def test_rollout_runs_the_requested_steps(capsys):
    argv = ["rollout", "--env", "SO101Reach-v0", "--policy", "zero", "--num-envs", "2", "--steps", "3",
            "--backend", "c"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "worlds=2 steps=3" in out and "compile " in out and "; run " in out and "env-steps/s" in out


@pytest.mark.parametrize(
    ("field", "value"),
    [("num_timesteps", -5), ("num_timesteps", 0), ("num_envs", 0), ("num_evals", 1), ("learning_rate", float("nan")),
     ("discounting", 1.5), ("episode_length", 0), ("max_grad_norm", -1.0), ("policy_hidden_layer_sizes", (64, 0))],
)
def test_preset_rejects_bad_fields(field, value):
    with pytest.raises(ValueError, match=f"^{field} must be"):
        dataclasses.replace(presets.preset("SO101Reach-v0", "tiny"), **{field: value})


def test_imports_print_nothing_on_stdout():
    code = "import so101_mjx.sim.physics, so101_mjx.envs, so101_mjx.training.ppo"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout == ""


def test_python_m_so101_mjx_is_the_console_script():
    help_ = subprocess.run([sys.executable, "-m", "so101_mjx", "--help"], capture_output=True, text=True, timeout=60)
    assert help_.returncode == 0 and help_.stdout.startswith("usage: so101-mjx")
    bad = subprocess.run([sys.executable, "-m", "so101_mjx", "rollout", "--num-envs", "0"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "argument --num-envs: expected an integer >= 1" in bad.stderr


def test_only_input_errors_are_one_line(monkeypatch, capsys):
    """An InputError from a command is one line and status 2; any other ValueError is a bug: its traceback
    propagates."""
    from so101_mjx.cli import rollout
    from so101_mjx.errors import InputError

    def raising(error):
        def run(args):
            raise error
        return run

    monkeypatch.setattr(rollout, "run", raising(InputError("steps must be small")))
    assert cli.main(["rollout"]) == 2
    assert capsys.readouterr().err == "so101-mjx rollout: error: steps must be small\n"
    monkeypatch.setattr(rollout, "run", raising(ValueError("an internal bug")))
    with pytest.raises(ValueError, match="an internal bug"):
        cli.main(["rollout"])


def test_info_starts_with_its_own_output():
    result = subprocess.run([sys.executable, "-m", "so101_mjx", "info"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    assert result.stdout.startswith("so101_mjx ")
    assert "MJX Warp implementation:" in result.stdout


@pytest.mark.skipif(not compat.WARP_IMPORT_ERRORS, reason="Warp imported in this environment")
def test_requesting_warp_shows_its_import_errors(model):
    from so101_mjx.sim.physics import MjxPhysics

    with pytest.raises(RuntimeError) as err:
        MjxPhysics(model, impl="warp")
    assert all(line in str(err.value) for line in compat.WARP_IMPORT_ERRORS)


def test_mujoco_warnings_go_to_logging_not_a_file(tmp_path, monkeypatch, caplog, capfd):
    monkeypatch.chdir(tmp_path)
    model = mujoco.MjModel.from_xml_string("<mujoco><worldbody><body><freejoint/><geom "
                                           "size='.1'/></body></worldbody></mujoco>")

    def nan_step(_) -> int:
        data = mujoco.MjData(model)
        data.qpos[0] = np.nan
        mujoco.mj_step(model, data)
        return data.warning[mujoco.mjtWarning.mjWARN_BADQPOS].number

    with caplog.at_level(logging.WARNING, logger="so101_mjx.mujoco"):
        counts = [nan_step(0)]
        with ThreadPoolExecutor(4) as pool:  # backend c steps worlds on a thread pool
            counts += list(pool.map(nan_step, range(4)))
    assert counts == [1] * 5
    records = [r for r in caplog.records if r.name == "so101_mjx.mujoco"]
    assert len(records) == 5 and all("Nan, Inf or huge value in QPOS" in r.getMessage() for r in records)
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()
    assert "WARNING" not in capfd.readouterr().out


def test_train_entry_point_of_the_checkout():
    """``python -m train.ppo`` from the repository root is ``so101-mjx train``."""
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-m", "train.ppo", "--help"], cwd=root, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0 and "--preset" in result.stdout, result.stderr
    bad = subprocess.run([sys.executable, "-m", "train.ppo", "--env", "NoSuchEnv-v0"], cwd=root, capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and "unknown env" in bad.stderr


def test_the_version_is_written_once():
    """pyproject.toml reads the version from so101_mjx.__version__: the installed metadata agrees."""
    import importlib.metadata

    import so101_mjx

    assert importlib.metadata.version("so101-mjx") == so101_mjx.__version__


def test_help_texts_name_what_the_library_tables_hold():
    """The CLI declares its options without importing the library: what its help texts list is checked here
    against the tables they mirror (backends, qualities, policies, IK solvers, DistillConfig, defaults)."""
    from so101_mjx.cli import distill, options
    from so101_mjx.envs import arm, rollout, scripted
    from so101_mjx.render.frames import QUALITIES
    from so101_mjx.sim.physics import BACKENDS
    from so101_mjx.training.distill import DistillConfig
    from so101_mjx.validation.parity import HORIZONS

    def helps(argv):
        from so101_mjx.cli.main import build_parser

        parser = build_parser()
        sub = parser._subparsers._group_actions[0].choices[argv[0]]
        if len(argv) > 1:
            sub = sub._subparsers._group_actions[0].choices[argv[1]]
        return {a.dest: a.help or "" for a in sub._actions}

    assert all(b in options.BACKEND_HELP for b in BACKENDS) and all(q in options.QUALITY_HELP for q in QUALITIES)
    assert all(p in helps(["rollout"])["policy"] for p in rollout.POLICIES)
    assert str(scripted.DEFAULT_ACTION_SCALE) in helps(["rollout"])["action_scale"]
    assert f"longest horizon, {max(HORIZONS)}" in helps(["parity"])["n_steps"]
    assert all(s in helps(["bench", "env"])["ik_solver"] for s in arm.IK_SOLVERS)
    assert set(distill.CONFIG_FIELDS) == {f.name for f in dataclasses.fields(DistillConfig)}
