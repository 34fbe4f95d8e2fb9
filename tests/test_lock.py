"""One writer per output directory: a second ``train``, ``record`` or ``distill`` on the same ``--out`` is refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from so101_mjx import cli
from so101_mjx._lock import LOCK_FILE, exclusive
from so101_mjx.errors import InputError

HOLD = ("import sys, time; from so101_mjx._lock import exclusive\nwith exclusive(sys.argv[1], 'test'):\n    "
        "print('held', flush=True); time.sleep(600)")


@pytest.fixture
def held(tmp_path):
    """``tmp_path/out`` locked by another process (its pid), released when the test ends."""
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    yield out, holder.pid
    holder.kill()
    holder.wait()


def test_a_second_writer_is_refused_with_the_holders_pid(held):
    out, pid = held
    with pytest.raises(InputError, match=rf"being written by another so101-mjx process \(pid {pid}\)"):
        with exclusive(out, "test"):
            pass


def test_a_dead_holders_lock_is_free(held):
    out, pid = held
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert (out / LOCK_FILE).read_text().strip() == str(pid)  # the stale file stays ...
    with exclusive(out, "test"):  # ... and does not block
        assert (out / LOCK_FILE).read_text().strip() == str(os.getpid())


@pytest.mark.parametrize("argv", [["train", "--env", "SO101Reach-v0", "--preset", "tiny"],
                                  ["record", "--env", "SO101Reach-v0", "--episodes", "1", "--no-video"],
                                  ["distill", "tests/fixtures/v0.1.0/pick_cube_run/policy.npz"]])
def test_writers_refuse_a_directory_in_use(held, argv, capsys):
    out, pid = held
    assert cli.main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"(pid {pid})" in err[0]
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # nothing written


def test_a_symlink_in_place_of_the_lock_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_FILE).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InputError, match="cannot lock"):
        with exclusive(out, "test"):
            pass
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize(("argv", "link"), [
    (["train", "--env", "SO101Reach-v0", "--preset", "tiny", "--resume"], "run.json"),
    (["record", "--env", "SO101Reach-v0", "--episodes", "1", "--no-video", "--resume"], "meta/stats.json"),
])
def test_no_writer_follows_a_symlink_inside_out(tmp_path, argv, link, capsys):
    """A link planted inside --out (here to a file outside it) is refused before anything is written."""
    outside = tmp_path / "outside.json"
    outside.write_text("untouched")
    out = tmp_path / "out"
    (out / link).parent.mkdir(parents=True)
    (out / link).symlink_to(outside)
    assert cli.main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{out / link} is a symlink" in err[0]
    assert outside.read_text() == "untouched"
