"""Training across processes: ``so101-mjx train --num-processes N``.

JAX's multi-controller runtime (``jax.distributed``) joins N processes, each running the same
training; the loop's ``pmap`` then spans the devices of every process, and only process 0 writes
the run directory. A run on P processes of D devices each equals one process with P * D devices
(:mod:`so101_mjx.training.ppo_loop`). On CPUs the processes all-reduce through gloo. The
launcher starts them as ``python -P -m so101_mjx``: nothing is imported from the working directory.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

STOP_GRACE_S = 10.0  # seconds a process gets to stop after SIGTERM before SIGKILL


def initialize(coordinator: str, num_processes: int, process_id: int) -> None:
    """Join the run's other processes; call before JAX computes anything."""
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU devices' collectives across processes
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes, process_id=process_id)


def free_port() -> int:
    """A TCP port free on localhost now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(argv: list[str], num_processes: int) -> int:
    """Run ``so101-mjx <argv>`` as ``num_processes`` processes on this host, joined through a
    coordinator on a free localhost port. Returns 0 when all succeed; else the first failure's
    exit status, after stopping the others (a process left alone would wait for its peers)."""
    coordinator = f"127.0.0.1:{free_port()}"
    package_root = str(Path(__file__).resolve().parents[2])  # the processes import so101_mjx from here too
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
    # -P: the working directory is not put on the processes' sys.path, so a numpy.py (or any module)
    # lying where the user runs so101-mjx is never imported: they see the package and site-packages only.
    procs = [subprocess.Popen([sys.executable, "-P", "-m", "so101_mjx", *argv, "--process-id", str(i),
                               "--coordinator", coordinator],
                              env=env) for i in range(num_processes)]
    previous = signal.signal(signal.SIGTERM, _terminated)  # a SIGTERM to the launcher stops its processes too
    try:
        while True:
            codes = [p.poll() for p in procs]
            failed = [c for c in codes if c not in (None, 0)]
            if failed or all(c == 0 for c in codes):
                return failed[0] if failed else 0
            time.sleep(0.2)
    finally:
        _stop(procs)
        signal.signal(signal.SIGTERM, previous)


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM to the processes still running, SIGKILL to those still running after :data:`STOP_GRACE_S`."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for p in procs:
        try:
            p.wait(max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
