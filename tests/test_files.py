"""Every writer writes a temporary file and renames it: an error or a full disk leaves the old file,
a symlink at the destination is replaced (never written through), and a disk error is one line.

The full-disk cases run the CLI on a real 64 KiB tmpfs, mounted in a private user and mount
namespace (``unshare``); where that is not allowed they are skipped and the injected-OSError cases
still run.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from so101_mjx import _files, cli
from so101_mjx.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests/fixtures/v0.1.0/pick_cube_run"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "a.json"
    path.write_text("old")
    with pytest.raises(RuntimeError), _files.atomic_path(path) as tmp:
        tmp.write_text("half")
        raise RuntimeError("interrupted")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["a.json"]


def test_a_symlink_is_replaced_not_followed(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (tmp_path / "out").mkdir()
    link = tmp_path / "out/metrics.json"
    link.symlink_to(outside)
    _files.atomic_write(link, "new")
    assert outside.read_text() == "keep" and not link.is_symlink() and link.read_text() == "new"


def test_out_of_space_is_one_line_naming_the_file(tmp_path, monkeypatch):
    path = tmp_path / "policy.npz"
    path.write_bytes(b"old")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(InputError, match=f"^no space left on device while writing {path}; nothing was changed$"):
        _files.atomic_write(path, b"new")
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["policy.npz"]


def test_the_cli_reports_a_disk_error_in_one_line(tmp_path, monkeypatch, capsys):
    def full(*args, **kwargs):
        raise OSError(errno.EDQUOT, "Disk quota exceeded", str(tmp_path / "x"))

    monkeypatch.setattr("so101_mjx.training.export.export", full)
    assert cli.main(["export", str(FIXTURE), "--out", str(tmp_path / "p.onnx")]) == 2
    assert (capsys.readouterr().err.strip().splitlines()
            == [f"so101-mjx export: error: disk quota exceeded: {tmp_path / 'x'}"])


@pytest.mark.parametrize("argv", [["train", "--env", "SO101Reach-v0", "--out"],
                                  ["record", "--env", "SO101Reach-v0", "--episodes", "1", "--out"],
                                  ["eval", str(FIXTURE), "--json"], ["rollout", "--env", "SO101Reach-v0", "--video"]])
def test_overlong_output_paths_are_one_line(tmp_path, capsys, argv):
    long = str(tmp_path / ("y" * 300) / "out.mp4")
    assert cli.main([*argv, long]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "is too long: at most 255 bytes per name" in err[-1] and not any("Traceback" in line for line in err)


def unshare_tmpfs(script: str, size_kib: int = 64) -> subprocess.CompletedProcess:
    """``script`` (sh) run with a fresh ``size_kib`` tmpfs at ``$FULL``, in its own user and mount namespace."""
    full = "/tmp/so101_mjx_full_disk"
    command = f"mkdir -p {full} && mount -t tmpfs -o size={size_kib}k tmpfs {full} && FULL={full} && {script}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    return subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", command],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)


@pytest.fixture(scope="module")
def tmpfs_allowed() -> None:
    if shutil.which("unshare") is None or unshare_tmpfs("true").returncode != 0:
        pytest.skip("cannot mount a tmpfs in a private namespace here (unshare not allowed)")


FILL = 'dd if=/dev/zero of="$FULL/filler" bs=1k count=100000 2>/dev/null; '


@pytest.mark.parametrize("command", [
    f'{sys.executable} -m so101_mjx export {FIXTURE} --out "$FULL/policy.onnx"',
    f'{sys.executable} -m so101_mjx eval {FIXTURE / "policy.npz"} --episodes 2 --json "$FULL/eval.json"',
])
@pytest.mark.slow
def test_a_full_disk_changes_nothing(tmpfs_allowed, command):
    """The destination already holds a good file; the disk is then filled; the writer fails in one line."""
    old = ('cp tests/fixtures/v0.1.0/pick_cube_run/policy.npz "$FULL/policy.npz"; echo \'{"old": 1}\' > '
           '"$FULL/eval.json"; ')
    check = ('; echo "rc=$?"; cmp "$FULL/policy.npz" tests/fixtures/v0.1.0/pick_cube_run/policy.npz && echo same-npz; '
             'cat "$FULL/eval.json"; ls -a "$FULL"')
    done = unshare_tmpfs(old + FILL + command + check)
    out, err = done.stdout, done.stderr.strip().splitlines()
    assert "rc=2" in out, done.stdout + done.stderr
    assert err[-1].endswith("nothing was changed") and "no space left on device while writing" in err[-1], err
    assert "same-npz" in out and '{"old": 1}' in out
    assert not [name for name in out.split() if name.startswith(".") and name not in (".", "..")]  # no temporary left


@pytest.mark.slow  # three recordings (the default suite injects the error: tests/data/test_dataset_check.py)
def test_a_full_disk_while_recording_keeps_the_dataset(tmpfs_allowed):
    """A dataset on a disk that fills up mid-recording keeps its complete commits and stays resumable."""
    record = (f'{sys.executable} -m so101_mjx record --env SO101Reach-v0 --no-video --num-envs 1 --seed 1 '
              '--out "$FULL/ds"')
    script = (f'{record} --episodes 2 && {FILL}{record} --episodes 50 --resume; echo "rc=$?"; '
              f'rm "$FULL/filler"; {record} --episodes 1 --resume && echo resumed; '
              f'{sys.executable} -c "import json; '
              'print(json.load(open(\'$FULL/ds/meta/info.json\'))[\'total_episodes\'])"')
    done = unshare_tmpfs(script, size_kib=512)
    assert "rc=2" in done.stdout and "resumed" in done.stdout, done.stdout + done.stderr[-3000:]
    assert "no space left on device" in done.stderr
    assert int(done.stdout.split()[-1]) >= 3


def test_odd_characters_in_a_video_path(tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    from so101_mjx.render.frames import write_video

    path = tmp_path / "a #1 %d 'x'" / "v.mp4"
    write_video([np.full((16, 16, 3), 40 * i, np.uint8) for i in range(5)], path, 10)
    import imageio_ffmpeg

    assert imageio_ffmpeg.count_frames_and_secs(str(path))[0] == 5


def test_metrics_csv_and_run_json_are_never_torn(tmp_path):
    """The training run's small files are rewritten whole through a rename (no append)."""
    from so101_mjx.training.progress import CSV_FILE, Recorder, read_csv

    recorder = Recorder(tmp_path, 1000)
    for step in (100, 200):
        recorder(step, {"eval/episode_reward": 1.0})
    assert [r["step"] for r in read_csv(tmp_path / CSV_FILE)] == [100, 200]
    assert json.dumps(sorted(os.listdir(tmp_path))).count(".tmp") == 0
