"""How ``deploy`` and ``record`` stop from outside (issues 44.6, 50 D4): SIGTERM is handled as Ctrl-C, the
robot is disconnected (a real follower's torque disabled), the episode under way is logged as cut short,
a ``--dataset`` that is not empty is refused before the robot connects, and ``record`` ends in one line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from so101_mjx import _interrupts, cli
from so101_mjx.data import dataset_check
from so101_mjx.follower import deploy as deploy_module
from so101_mjx.follower.deploy import deploy
from so101_mjx.follower.deploy_log import LOG_META

ROOT = Path(__file__).resolve().parents[2]


def started(*argv: str) -> subprocess.Popen:
    """``python -m so101_mjx ARGV`` in a new process (stdout and stderr piped, text)."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.Popen([sys.executable, "-m", "so101_mjx", *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def stopped_deploy(tmp_path: Path, sig: int) -> tuple[int, str, str]:
    """``deploy excitation`` on the simulated follower at the wall clock's pace (one 132 s episode), sent ``sig``
    2.5 s after its episode started (its first action compiles the step: not before); returns its exit status,
    stdout and stderr."""
    proc = started("deploy", "excitation", "--robot.type", "so101_mjx", "--real-time", "--dataset",
                   str(tmp_path / "log"))
    try:
        first = proc.stderr.readline()
        assert "Ctrl-C stops it" in first, first + proc.stderr.read()
        episode = proc.stderr.readline()
        assert episode.strip() == "deploy: episode 1/1", first + episode + proc.stderr.read()
        first += episode
        time.sleep(2.5)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    return proc.returncode, out, first + err


@pytest.mark.parametrize("sig, name", [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "Ctrl-C")])
@pytest.mark.slow
def test_a_signal_mid_episode_disconnects_and_logs_the_episode_cut_short(tmp_path, sig, name):
    if signal.getsignal(sig) is signal.SIG_IGN:  # e.g. pytest started as a background job of a script
        pytest.skip(f"{name} is ignored in this process, so the command started from it inherits that")
    status, out, err = stopped_deploy(tmp_path, sig)
    assert status == _interrupts.INTERRUPTED, err
    assert "Traceback" not in err and "deploy: so101_mjx disconnected" in err, err
    assert "1 episodes (1 cut short)" in out and f"stopped: {name}" in out, out
    info = dataset_check.check(tmp_path / "log")
    meta = json.loads((tmp_path / "log" / LOG_META).read_text())
    assert info["total_episodes"] == 1 and 0 < info["total_frames"] < 3960  # the episode under way, as far as it went
    assert (meta["stopped"] == name
            and meta["episodes"] == [{"episode_index": 0, "frames": info["total_frames"], "cut_short": True}])


def test_an_interrupt_in_a_host_callback_is_not_logged_with_its_traceback(caplog):
    """A SIGTERM or Ctrl-C that lands in a host callback (backend c's physics step): JAX logs "jax.pure_callback
    failed" with the traceback before re-raising; inside ``sigterm_interrupts`` that record is dropped, so the
    command's stop stays one line. Outside it, JAX logs it as before."""
    import logging

    import jax
    import jax.numpy as jnp

    def host(x):
        raise KeyboardInterrupt(_interrupts.SIGTERM_TEXT)

    step = jax.jit(lambda x: jax.pure_callback(host, jax.ShapeDtypeStruct((), jnp.float32), x))
    for quiet in (True, False):
        caplog.clear()
        with caplog.at_level(logging.ERROR), contextlib.ExitStack() as stack, pytest.raises(BaseException) as err:
            if quiet:
                stack.enter_context(_interrupts.sigterm_interrupts())
            jax.block_until_ready(step(jnp.float32(1.0)))
        assert _interrupts.as_interrupt(err.value) is not None
        assert ("jax.pure_callback failed" in caplog.text) is not quiet, caplog.text


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_stop_lost_in_a_garbage_collector_callback_is_raised_again():
    """A SIGTERM whose handler runs inside a gc callback (JAX registers one): Python prints the KeyboardInterrupt
    and drops it. ``stop_point`` raises it again, or, without one, the end of the ``sigterm_interrupts`` block;
    a stop a handler has seen (``as_interrupt``) is not raised twice."""
    import gc

    def kill_once(phase, info):
        if phase == "start" and not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)
            sum(range(100))  # bytecode after the kill: the handler runs here, inside the callback

    gc.callbacks.append(kill_once)
    try:
        for at_stop_point in (True, False):
            sent: list[bool] = []
            with pytest.raises(KeyboardInterrupt) as err, _interrupts.sigterm_interrupts():
                gc.collect()  # the callback's KeyboardInterrupt is printed and dropped: collect returns
                assert sent and _interrupts._pending == [signal.SIGTERM]  # the handler ran, its raise was lost
                if at_stop_point:
                    _interrupts.stop_point()
                    raise AssertionError("stop_point did not raise the lost stop")
            assert _interrupts.stop_name(err.value) == "SIGTERM" and not _interrupts._pending
    finally:
        gc.callbacks.remove(kill_once)
    with _interrupts.sigterm_interrupts():  # seen once by a handler inside the block: the block ends quietly
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            sum(range(100))
        except KeyboardInterrupt as seen:
            assert _interrupts.as_interrupt(seen) is seen
        _interrupts.stop_point()


def test_ctrl_c_is_taken_inside_the_block_unless_the_process_ignores_it():
    """A process started with SIGINT ignored (a script's background job) keeps ignoring Ctrl-C inside
    ``sigterm_interrupts``; otherwise the block's handler takes it. Both handlers are restored after."""
    before = signal.getsignal(signal.SIGINT)
    try:
        for start, inside in ((signal.SIG_IGN, signal.SIG_IGN), (signal.default_int_handler, _interrupts._interrupt)):
            signal.signal(signal.SIGINT, start)
            with _interrupts.sigterm_interrupts():
                assert signal.getsignal(signal.SIGINT) is inside
                assert signal.getsignal(signal.SIGTERM) is _interrupts._interrupt
            assert signal.getsignal(signal.SIGINT) is start
    finally:
        signal.signal(signal.SIGINT, before)


def test_an_interrupt_mid_episode_keeps_the_frames_so_far(tmp_path, monkeypatch):
    """Ctrl-C at the 5th action of the second episode: the first whole, the second's 4 frames, both logged."""
    calls = []
    original = deploy_module.SimFollower.send_action

    def send(self, action):
        calls.append(action)
        if len(calls) == 8 + 5:
            raise KeyboardInterrupt
        return original(self, action)

    monkeypatch.setattr(deploy_module.SimFollower, "send_action", send)
    result = deploy("excitation", "so101_mjx", episodes=3, episode_time_s=8 / 30, dataset=str(tmp_path / "log"))
    assert (result["stopped"], result["episodes"], result["cut_short"]) == ("Ctrl-C", 2, 1)
    info = dataset_check.check(tmp_path / "log")
    assert info["total_episodes"] == 2 and info["total_frames"] == 8 + 4
    episodes = json.loads((tmp_path / "log" / LOG_META).read_text())["episodes"]
    assert [(e["frames"], e["cut_short"]) for e in episodes] == [(8, False), (4, True)]


def test_a_dataset_that_is_not_empty_is_refused_before_connect(tmp_path, monkeypatch, capsys):
    log = tmp_path / "log"
    log.mkdir()
    (log / "notes.txt").write_text("not a dataset")
    connected = []
    monkeypatch.setattr(deploy_module.SimFollower, "connect", lambda self, calibrate=True: connected.append(self))
    with pytest.raises(ValueError, match="^dataset .* exists and is not empty: deploy logs into a new or empty "
                                         "directory"):
        deploy("excitation", "so101_mjx", episode_time_s=0.5, dataset=str(log))
    assert cli.main(["deploy", "excitation", "--dataset", str(log)]) == 2
    err = capsys.readouterr().err
    assert "nothing was sent" in err and len(err.strip().splitlines()) == 1 and connected == []
    assert sorted(p.name for p in log.iterdir() if not p.name.startswith(".")) == ["notes.txt"]


def test_a_time_limit_cuts_the_episode_short():
    result = deploy("excitation", "so101_mjx", episodes=2, time_limit_s=1e-3)
    assert (result["stopped"], result["episodes"], result["cut_short"]) == ("time limit", 1, 1)


@pytest.mark.slow
def test_record_stopped_by_sigterm_says_what_it_kept_in_one_line(tmp_path):
    """SIGTERM after record kept its first episodes: exit 130, no traceback, one line naming the episodes kept."""
    out = tmp_path / "ds"
    proc = started("record", "--env", "SO101Reach-v0", "--episodes", "500", "--num-envs", "2", "--no-video",
                   "--out", str(out))
    try:
        for line in proc.stderr:
            if line.startswith("record: "):
                break
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == _interrupts.INTERRUPTED, err
    kept = dataset_check.check(out)["total_episodes"]
    assert ("Traceback" not in err and err.strip().splitlines()
            == [f"record: stopped by SIGTERM; the dataset at {out} holds {kept} complete episodes"])
    assert 0 < kept < 500


def test_stop_names():
    assert _interrupts.stop_name(KeyboardInterrupt()) == "Ctrl-C"
    assert _interrupts.stop_name(KeyboardInterrupt(f"signal {int(signal.SIGTERM)}")) == "SIGTERM"


def test_a_stop_inside_a_host_callback_is_still_a_stop():
    """Ctrl-C or SIGTERM landing while backend c's physics runs in a JAX host callback reaches the
    caller wrapped in JAX's runtime error; it is recognised as the stop it is."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def host(x):
        raise KeyboardInterrupt(_interrupts.SIGTERM_TEXT)

    step = jax.jit(lambda x: jax.pure_callback(host, jax.ShapeDtypeStruct((), jnp.float32), x))
    try:
        step(np.float32(1.0)).block_until_ready()
    except BaseException as err:  # the wrapped form is what is under test
        stop = _interrupts.as_interrupt(err)
    assert stop is not None and _interrupts.stop_name(stop) == "SIGTERM"
    assert _interrupts.as_interrupt(ValueError("INTERNAL: something else")) is None
