"""A finished ``train`` leaves nothing of its run alive in the process: its env (and that env's
physics threads) is freed, so notebooks, sweeps and the test suite do not grow with every run."""

import gc
import os
import threading
import time
import weakref

from so101_mjx.envs.base import SO101Env
from tests.conftest import train_tiny


def _envs() -> weakref.WeakSet:
    gc.collect()
    return weakref.WeakSet(o for o in gc.get_objects() if isinstance(o, SO101Env))


def _threads() -> int:
    """OS threads of this process but for tensorstore's ``ts_pool_worker`` pool, which grows to a cap
    as work comes. A thread takes the name of the thread that starts it: MuJoCo's batch threads,
    started inside a host callback, are named after XLA's ``tf_XLAEigen`` workers."""
    if not os.path.isdir("/proc/self/task"):
        return threading.active_count()
    names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
    return sum(name != "ts_pool_worker" for name in names)


def test_a_finished_run_frees_its_env_and_threads(tmp_path):
    train_tiny(tmp_path / "warm-up")  # first-use threads (JAX's, the compile pool) start here
    before, threads = _envs(), _threads()
    train_tiny(tmp_path / "run")
    kept = [env for env in _envs() if env not in before]
    assert kept == [], f"{len(kept)} env(s) of finished runs are still alive"
    for _ in range(20):  # a thread that is ending (a writer's flush) may take a moment
        if _threads() <= threads:
            break
        time.sleep(0.25)
    assert _threads() <= threads, f"{_threads() - threads} thread(s) of finished runs are still running"
