"""Bounds the parser and the commands know: sizes past what the CNN, JAX's int32 loops or the machine's
memory take end in one error line and exit status 2, before anything is allocated or written."""

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from so101_mjx.cli import argtypes as cliargs, distill, record
from so101_mjx.errors import InputError
from so101_mjx.sim import servo

ROOT = Path(__file__).resolve().parents[2]
HUGE = str(10**12)  # worlds, episodes or a batch: terabytes on any machine


def so101_mjx(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``python -m so101_mjx ARGV`` with this checkout's package first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([sys.executable, "-m", "so101_mjx", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def assert_one_line_error(result: subprocess.CompletedProcess, *words: str) -> str:
    """Exit status 2, no traceback, the last stderr line an error naming ``words``; returns that line."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "error:" in last and all(w in last for w in words), last
    return last


def test_distill_image_size_range_is_the_students_own():
    """The parser accepts exactly the frame sizes the student's strided convolutions take (36 px and up)."""
    from so101_mjx.envs.config import MAX_IMAGE_SIZE
    from so101_mjx.training.pixel_policy import MIN_IMAGE_SIZE, conv_sides

    assert distill.IMAGE_SIZES == (MIN_IMAGE_SIZE, MAX_IMAGE_SIZE) == (36, 1024)
    assert conv_sides(MIN_IMAGE_SIZE)[-1] == 1 and conv_sides(MIN_IMAGE_SIZE - 1)[-1] < 1
    parse = cliargs.int_in(*distill.IMAGE_SIZES, "image size")
    assert parse("36") == 36 and parse("1024") == 1024
    for bad in ("35", "1", "1025"):
        with pytest.raises(ValueError, match="integer >= 36 and <= 1024"):
            parse(bad)


def test_distill_image_size_below_the_students_minimum_is_a_parse_error(tmp_path):
    result = so101_mjx("distill", "teacher.onnx", "--out", str(tmp_path / "d"), "--image-size", "35")
    assert_one_line_error(result, "--image-size", ">= 36")


def test_record_image_size_range_is_records_own():
    from so101_mjx.data.record import IMAGE_SIZES

    assert record.IMAGE_SIZES == IMAGE_SIZES


def test_rollout_steps_past_int32_is_a_parse_error():
    result = so101_mjx("rollout", "--steps", str(2**31))
    assert_one_line_error(result, "--steps", str(2**31 - 1))


def test_train_num_timesteps_past_a_scan_writes_nothing(tmp_path):
    result = so101_mjx("train", "--env", "SO101Reach-v0", "--preset", "tiny", "--out", str(tmp_path / "run"),
                       "--num-timesteps", str(10**20))
    assert_one_line_error(result, "num_timesteps", "training steps per epoch")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv", [
    ["rollout", "--env", "SO101Reach-v0", "--num-envs", HUGE],
    ["rollout", "--env", "SO101Reach-v0", "--num-envs", "1", "--steps", str(2**31 - 1), "--video", "{tmp}/v.gif"],
    ["parity", "--episodes", HUGE],
    ["bench", "fk", "--batch", "1", HUGE],
    ["bench", "render", "--batch", HUGE],
], ids=["rollout-num-envs", "rollout-video-steps", "parity-episodes", "bench-fk-batch", "bench-render-batch"])
def test_sizes_past_the_machines_memory_are_refused_first(argv, tmp_path):
    argv = [a.format(tmp=tmp_path) for a in argv]
    option = next(a for a in reversed(argv) if a.startswith("--") and a != "--video")
    line = assert_one_line_error(so101_mjx(*argv), option, "needs about", "GiB", "this machine has")
    assert "RAM" in line or "memory on" in line
    assert not any(tmp_path.iterdir())


def test_record_num_envs_past_the_machines_memory_writes_nothing(tmp_path):
    result = so101_mjx("record", "--env", "SO101Reach-v0", "--episodes", HUGE, "--num-envs", HUGE, "--out",
                       str(tmp_path / "ds"))
    assert_one_line_error(result, "--num-envs", "needs about", "this machine has")
    assert not (tmp_path / "ds").exists()


def test_rollout_video_into_an_unwritable_directory_fails_before_the_rollout(tmp_path):
    """The video's directory is checked while parsing: nothing is simulated for a video that cannot be written."""
    if os.geteuid() == 0:  # permissions do not stop root: /proc/self takes no new files
        where = Path("/proc/self")
    else:
        where = tmp_path / "read-only"
        where.mkdir(mode=0o500)
    result = so101_mjx("rollout", "--env", "SO101Reach-v0", "--num-envs", "1", "--steps", "2", "--video",
                       str(where / "out" / "v.mp4"))
    assert_one_line_error(result, "--video", "cannot write in", str(where))
    assert "success rate" not in result.stdout


def json_options(tmp_path: Path) -> list[tuple[str, str]]:
    """Values a JSON option (``--servo-model``, ``--visual-randomization``) refuses, and what its error names."""
    deep = tmp_path / "deep.json"
    deep.write_text('{"a": ' * 5000 + "1" + "}" * 5000)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")  # endless
    big = tmp_path / "big.json"
    big.write_text("{" + " " * cliargs.JSON_MAX_BYTES + "}")
    return [("[" * 100_000, "nests deeper than 32 levels"), (str(deep), "nests deeper than 32 levels"),
            (str(zero), "is not a plain file"), ("/dev/zero", "is not a plain file"),
            (str(tmp_path), "is not a plain file"),
            (str(big), "is larger than 1,048,576 bytes"), (str(tmp_path / "missing.json"), "cannot read it")]


@pytest.mark.parametrize("argv", [["eval", "policy.onnx", "--servo-model"], ["deploy", "excitation", "--servo-model"],
                                  ["record", "--episodes", "1", "--out", "ds", "--visual-randomization"]],
                                  ids=["eval", "deploy", "record"])
def test_json_options_nested_too_deep_endless_or_not_files_are_one_line(argv, tmp_path, capsys):
    """One reader for every JSON option: a size cap, plain files only, a nesting limit; each refusal one line, exit
    2."""
    from so101_mjx import cli

    for value, words in json_options(tmp_path):
        assert cli.main([*argv, value]) == 2
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert argv[-1] in last and words in last and "Traceback" not in last, (value[:40], last)


def test_a_json_option_on_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "model.json"
    os.mkfifo(fifo)
    assert_one_line_error(so101_mjx("eval", "policy.onnx", "--servo-model", str(fifo)), "--servo-model",
                          "is not a plain file")


def test_json_options_still_take_objects_inline_and_from_files(tmp_path):
    path = tmp_path / "servo.json"
    path.write_text('{"delay_ticks": 1, "ranges": {"backlash": [0.01, 0.03]}}')
    assert (cliargs.servo_model(str(path))
            == servo.parse(cliargs.json_object(' {"delay_ticks": 1, "ranges": {"backlash": [0.01, 0.03]}}')))
    assert (cliargs.servo_model_or_off("off") == "off"
            and cliargs.json_object('{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}') == {"a": "[" * 36})
    with pytest.raises(ValueError, match="must be a JSON object"):
        cliargs.json_object("[1, 2]")
    assert cliargs.visual_randomization("standard").light_shift == 0.2


def test_every_servo_model_option_reads_through_one_parser():
    """``eval``, ``distill`` and ``deploy`` take ``--servo-model`` through :func:`argtypes.servo_model` (``off`` too
    where the policy's own can be dropped): a ServoModel, checked while the arguments are parsed."""
    from so101_mjx.cli.main import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    types = {name: action.type for name, sub in commands.items() for action in sub._actions
             if "--servo-model" in action.option_strings}
    assert set(types) == {"eval", "distill", "deploy"}
    assert types == {"eval": cliargs.servo_model_or_off, "distill": cliargs.servo_model_or_off,
                     "deploy": cliargs.servo_model}
    assert cliargs.servo_model('{"delay_ticks": 2}') == servo.ServoModel(delay_ticks=2)
    with pytest.raises(ValueError, match="servo_model.delay_ticks must be an int >= 0"):
        cliargs.servo_model('{"delay_ticks": -1}')


def _record_args(*argv: str):
    parser = argparse.ArgumentParser()
    record.arguments(parser)
    return parser.parse_args(["--episodes", "1", "--out", "ds", *argv])


def test_record_env_config_is_a_tasks_variant_or_json_under_joint_modes_options():
    config = record.env_config(_record_args("--env", "SO101PickCube-v0", "--env-config", "joint-30hz",
                                            "--control-mode", "joint", "--joint-units", "range_m100_100"))
    assert config["episode_length"] == 300 and config["max_relative_target"] == 6.0  # the variant's
    assert config["control_mode"] == "joint" and config["joint_units"] == "range_m100_100"  # the options'
    assert record.env_config(_record_args("--env-config", '{"top_down_ik": true}')) == {"top_down_ik": True}
    assert record.env_config(_record_args()) == {}
    with pytest.raises(InputError, match="--env-config joint-30hz names a variant of a task: give the task with --env"):
        record.env_config(_record_args("--env-config", "joint-30hz"))
