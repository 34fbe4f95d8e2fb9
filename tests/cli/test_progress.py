"""Long commands say what they are doing (so101_mjx._progress): in a pseudo-terminal their phase lines and
progress bars come before the result; where stderr is not a terminal, nothing."""

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from so101_mjx import cli

POLICY = Path(__file__).parents[1] / "fixtures" / "v0.1.0" / "pick_cube_run" / "policy.onnx"


def in_a_terminal(argv: list[str], timeout: float = 300) -> str:
    """What ``so101-mjx argv`` writes to a pseudo-terminal (stdout and stderr), to its exit."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # 40 rows, 120 columns
    proc = subprocess.Popen([sys.executable, "-m", "so101_mjx", *argv], stdin=slave, stdout=slave, stderr=slave,
                            env=os.environ)
    os.close(slave)
    out = b""
    try:
        while select.select([master], [], [], timeout)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the command has exited and closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        proc.kill() if proc.poll() is None else None
        proc.wait(timeout=30)
        os.close(master)
    assert proc.returncode == 0, out.decode(errors="replace")[-2000:]
    return out.decode(errors="replace")


@pytest.mark.slow
def test_eval_and_rollout_show_progress_in_a_terminal(tmp_path):
    out = in_a_terminal(["eval", str(POLICY), "--episodes", "2"])
    assert out.index("eval c: compiling 2 episodes") < out.index("episodes ended") < out.index("success rate")
    video = tmp_path / "v.mp4"
    out = in_a_terminal(["rollout", "--env", "SO101Reach-v0", "--num-envs", "2", "--steps", "6", "--video", str(video)])
    assert (out.index("rollout: compiling") < out.index("rollout: rendering") < out.index("6/6")
            < out.index("video of world 0"))
    assert video.stat().st_size > 0


def test_without_a_terminal_no_progress(capsys):
    assert cli.main(["eval", str(POLICY), "--episodes", "2"]) == 0
    out = capsys.readouterr()
    assert out.err == "" and "success rate" in out.out  # a log holds the results alone


RECORD = ["record", "--env", "SO101Reach-v0", "--episodes", "2", "--num-envs", "2", "--image-size", "16",
          "--image-quality", "fast"]


@pytest.mark.slow
def test_record_shows_progress_in_a_terminal(tmp_path):
    out = in_a_terminal([*RECORD, "--out", str(tmp_path / "ds")])
    assert (out.index("record: compiling 2 worlds of SO101Reach-v0") < out.index("2/2 [")
            < out.index("kept 2 of 2 episodes"))
    assert "record: 2/2 episodes" not in out  # the bar, not the log's lines


@pytest.mark.slow
def test_record_without_a_terminal_logs_its_lines_alone(tmp_path, capsys):
    assert cli.main([*RECORD, "--out", str(tmp_path / "ds")]) == 0
    out = capsys.readouterr()
    assert "kept 2 of 2 episodes" in out.out
    lines = out.err.splitlines()  # a log's lines, as before: one per tenth of the episodes, no phase, no bar
    assert len(lines) == 2 and all(line.startswith(f"record: {i + 1}/2 episodes ({i + 1} tried), ") for i, line in
                                   enumerate(lines)), out.err


@pytest.fixture
def excitation_log(tmp_path):
    """A short simulated excitation recording (deploy's dataset) for sysid."""
    from so101_mjx.follower.deploy import deploy

    deploy("excitation", "so101_mjx", episode_time_s=1.5, dataset=str(tmp_path / "log"))
    return tmp_path / "log"


SYSID = ["--motors", "wrist_roll", "--population", "4", "--elites", "2", "--iterations", "2", "--sweeps", "1",
         "--polish", "1"]


@pytest.mark.slow
def test_sysid_shows_progress_in_a_terminal(excitation_log, tmp_path):
    out = in_a_terminal(["sysid", str(excitation_log), "--out", str(tmp_path / "fit.json"), *SYSID])
    assert (out.index("sysid: reading") < out.index("sysid: compiling the replay of 1 episode(s)")
            < out.index("search 1/2: rms") < out.index("4/4 [") < out.index("sysid: 1 motors fitted"))


@pytest.mark.slow
def test_sysid_without_a_terminal_no_progress(excitation_log, tmp_path, capsys):
    capsys.readouterr()
    assert cli.main(["sysid", str(excitation_log), "--out", str(tmp_path / "fit.json"), *SYSID]) == 0
    out = capsys.readouterr()
    assert out.err == "" and out.out.splitlines()[:4] == [
        line for line in out.out.splitlines() if line.startswith(("search ", "sweep ", "polish "))]


@pytest.mark.slow
def test_bench_names_what_it_times_in_a_terminal():
    out = in_a_terminal(["bench", "fk", "--batch", "8", "--repeats", "1"])
    assert out.index("bench fk: MuJoCo C baseline") < out.index("bench fk: batch 8") < out.index("evals/s")
