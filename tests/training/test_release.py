"""A finished ``train`` leaves nothing of its run alive in the process: its env (and that env's
physics threads) is freed, so notebooks, sweeps and the test suite do not grow with every run.

The runs happen in a fresh Python process: a test worker also holds what earlier tests started
(pools that grow on demand, writers still flushing), which would be counted against ``train``.
A leak grows with every run: the threads after run 1 are compared with those after run 0."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_PROBE = textwrap.dedent(
    """
    import collections, gc, json, os, sys, time
    from pathlib import Path

    sys.path.insert(0, os.getcwd())
    from so101_mjx.envs.base import SO101Env
    from tests.conftest import train_tiny

    def threads():
        # OS threads by name, but for tensorstore's ts_pool_worker pool, which grows to a cap as work
        # comes. A thread takes the name of the thread that starts it: MuJoCo's batch threads, started
        # inside a host callback, are named after XLA's tf_XLAEigen workers.
        names = (open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task"))
        return collections.Counter(name for name in names if name != "ts_pool_worker")

    def envs():
        gc.collect()
        return sum(isinstance(o, SO101Env) for o in gc.get_objects())

    out, after = Path(sys.argv[1]), []
    for run in range(2):  # run 0 starts the first-use threads (JAX's, the compile pool)
        train_tiny(out / str(run))
        for _ in range(20):  # a thread that is ending (a writer's flush) may take a moment
            if not after or sum(threads().values()) <= sum(after[0][1].values()):
                break
            time.sleep(0.25)
        after.append((envs(), threads()))
    print(json.dumps(after))
    """
)


@pytest.mark.slow
def test_finished_runs_free_their_envs_and_threads(tmp_path):
    if not Path("/proc/self/task").is_dir():
        pytest.skip("counts OS threads through /proc")
    done = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path)], capture_output=True, text=True, timeout=600,
                          cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr[-3000:]
    after = json.loads(done.stdout.strip().splitlines()[-1])
    assert [envs for envs, _ in after] == [0] * 2, f"envs alive after each run: {[envs for envs, _ in after]}"
    first = after[0][1]
    for run, (_, threads) in enumerate(after[1:], 1):
        more = {name: n - first.get(name, 0) for name, n in threads.items() if n > first.get(name, 0)}
        assert not more, f"after run {run}, threads beyond the first run's: {more}"
