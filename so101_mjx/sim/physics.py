"""Physics backends behind one seam: ``mjx`` (MuJoCo XLA) and ``c`` (MuJoCo C).

Every env is written once over :class:`PhysicsState`; only :meth:`Physics.init` and
:meth:`Physics.step` differ between backends. Both are pure functions usable under ``jit`` and
``vmap``:

- ``mjx``: ``mujoco.mjx`` (impl ``"jax"``, or ``"warp"`` when installed), ``lax.scan`` over the
  substeps. The default on GPU/TPU.
- ``c``: MuJoCo C called through ``jax.pure_callback`` with the whole (vmapped) batch at once;
  ``mujoco.batch`` (or, with ``loop="pool"``, our own thread pool of one ``MjData`` per thread)
  steps the worlds with ``mj_step``. The default on CPU, where MJX is 40-1000x slower.

The state carries the solver warm start, so a trajectory stepped in chunks equals one stepped in
a single ``mj_step`` loop bitwise (backend ``c``), and ``sensordata`` plus ``kin_qpos``, the
``qpos`` at which the sensors and site poses were last evaluated: after ``mj_step`` that is the
state *before* the last integration, exactly as a ``MjData`` seen after ``mj_step`` holds it.
"""

from __future__ import annotations

import abc
import copy
import importlib.util
import os
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ClassVar, Self

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from flax import struct
from jax import Array
from mujoco import batch as mj_batch

from so101_mjx import (
    _checks as checks,
    _compat as compat,  # before mujoco.mjx: it captures MJX's Warp import failures
)
from so101_mjx.errors import InputError

# isort: split
from mujoco import mjx

compat.install()

MJX_IMPLS = ("jax", "warp")
MAX_THREADS = 1024  # worker threads of backend c


@struct.dataclass
class PhysicsState:
    """Physics state of one world (leading batch axes allowed)."""

    if TYPE_CHECKING:  # flax.struct.dataclass adds it at runtime

        def replace(self, **changes: Any) -> Self: ...

    qpos: Array  # (..., nq)
    qvel: Array  # (..., nv)
    ctrl: Array  # (..., nu) held during the last step
    qacc_warmstart: Array  # (..., nv) constraint solver warm start
    time: Array  # (...) seconds
    sensordata: Array  # (..., nsensordata) evaluated at kin_qpos
    kin_qpos: Array  # (..., nq) qpos of the last kinematics evaluation


def default_backend() -> str:
    """``mjx`` on an accelerator, ``c`` on CPU."""
    return "c" if jax.default_backend() == "cpu" else "mjx"


class Physics(abc.ABC):
    """One MuJoCo model stepped by a backend; see the module docstring."""

    name: ClassVar[str]
    options: ClassVar[tuple[str, ...]] = ()  # keyword options of the constructor, forwarded by envs.make

    def __init__(self, model: mujoco.MjModel):
        self.model = model

    @abc.abstractmethod
    def init(self, qpos: Array, qvel: Array, ctrl: Array) -> PhysicsState:
        """State at ``qpos, qvel, ctrl`` (time 0, cold warm start) with kinematics and sensors evaluated."""

    @abc.abstractmethod
    def step(self, state: PhysicsState, ctrl: Array, n_substeps: int,
             params: dict[str, Array] | None = None) -> PhysicsState:
        """Advance ``n_substeps`` physics steps holding ``ctrl`` (..., nu).

        ``params``: per-world model arrays overriding the model's (see :mod:`so101_mjx.sim.randomization`).
        """

    def sensor(self, state: PhysicsState, name: str) -> Array:
        """Slice of ``state.sensordata`` for a named sensor, shape (..., dim)."""
        sensor = self.model.sensor(name)
        return state.sensordata[..., sensor.adr[0] : sensor.adr[0] + sensor.dim[0]]


def default_mjx_impl() -> str:
    """``"warp"`` on a GPU when mujoco_warp is installed, else ``"jax"``."""
    if jax.default_backend() == "gpu" and importlib.util.find_spec("mujoco_warp") is not None:
        return "warp"
    return "jax"


class MjxPhysics(Physics):
    """``mujoco.mjx``; ``impl`` is ``"jax"`` or ``"warp"`` (default: :func:`default_mjx_impl`)."""

    name = "mjx"
    options = ("impl",)

    def __init__(self, model: mujoco.MjModel, impl: str | None = None):
        super().__init__(model)
        compat.install_mjx()
        if impl is not None and impl not in MJX_IMPLS:
            raise InputError(f"impl must be one of {MJX_IMPLS} or None, got {impl!r}")
        self.impl = impl or default_mjx_impl()
        self.mjx_model = mjx.put_model(model, impl=self.impl)

    def _data(self, qpos, qvel, ctrl, qacc_warmstart, time) -> mjx.Data:
        dtype = qpos.dtype
        if self.impl == "warp" and dtype != jnp.float32:
            raise InputError(f"mjx impl 'warp' runs float32 only, got a {dtype} state (pass float32 arrays)")
        # make_data takes the mjx.Model for impl "jax" but only the MjModel for "warp"
        data = mjx.make_data(self.model if self.impl == "warp" else self.mjx_model, impl=self.impl)
        cast = lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x  # noqa: E731
        data = jax.tree.map(cast, data)
        return data.replace(qpos=qpos, qvel=qvel, ctrl=ctrl, qacc_warmstart=qacc_warmstart, time=time)

    def init(self, qpos, qvel, ctrl):
        zero_v = jnp.zeros_like(qvel)
        data = mjx.forward(self.mjx_model, self._data(qpos, qvel, ctrl, zero_v, jnp.zeros((), qpos.dtype)))
        return PhysicsState(qpos, qvel, ctrl, zero_v, data.time, data.sensordata, qpos)

    def step(self, state, ctrl, n_substeps, params=None):
        data = self._data(state.qpos, state.qvel, ctrl, state.qacc_warmstart, state.time)
        model = self.mjx_model if params is None else self.mjx_model.replace(**params)

        def substep(d, _):
            return mjx.step(model, d), d.qpos

        data, qpos_before = jax.lax.scan(substep, data, None, length=n_substeps)
        return PhysicsState(
            data.qpos, data.qvel, ctrl, data.qacc_warmstart, data.time, data.sensordata, qpos_before[-1]
        )


class PoolLoop:
    """Our own thread pool: one ``MjData`` (and one model copy, for randomized parameters) per
    thread, each stepping a contiguous chunk of the worlds with ``mj_step``."""

    def __init__(self, model: mujoco.MjModel, nthread: int):
        self.model, self.nthread = model, nthread
        self._pool = ThreadPoolExecutor(nthread, thread_name_prefix="so101_mjx_c")
        self._datas = [mujoco.MjData(model) for _ in range(nthread)]
        self._models = [copy.copy(model) for _ in range(nthread)]

    def _run(self, fn, n: int) -> None:
        """Call ``fn(model, data, worlds)`` on contiguous chunks of ``range(n)``, one chunk per thread."""
        chunks = [c for c in np.array_split(np.arange(n), self.nthread) if len(c)]
        list(self._pool.map(fn, self._models, self._datas, chunks))

    def step(self, q, v, u, w, t, params, names, n_substeps, out) -> None:
        def work(m: mujoco.MjModel, d: mujoco.MjData, worlds: np.ndarray) -> None:
            m = m if names else self.model
            for i in worlds:
                for name, value in zip(names, params):
                    getattr(m, name)[...] = value[i]
                d.qpos[:], d.qvel[:], d.ctrl[:], d.qacc_warmstart[:], d.time = q[i], v[i], u[i], w[i], t[i]
                d.act[:] = 0.0
                if n_substeps > 1:
                    mujoco.mj_step(m, d, n_substeps - 1)
                out[5][i] = d.qpos
                mujoco.mj_step(m, d)
                out[0][i], out[1][i], out[2][i], out[3][i], out[4][i] = (d.qpos, d.qvel, d.qacc_warmstart, d.time,
                                                                         d.sensordata)

        self._run(work, len(q))

    def forward(self, q, v, u, sens) -> None:
        m = self.model

        def work(_: mujoco.MjModel, d: mujoco.MjData, worlds: np.ndarray) -> None:
            for i in worlds:
                mujoco.mj_resetData(m, d)
                d.qpos[:], d.qvel[:], d.ctrl[:] = q[i], v[i], u[i]
                mujoco.mj_forward(m, d)
                sens[i] = d.sensordata

        self._run(work, len(q))


class BatchLoop:
    """``mujoco.batch.Batch``: MuJoCo's own thread pool over state rows, bit-identical to a loop of
    ``mj_step`` on one ``MjData`` per world. One ``Batch`` per (number of worlds, randomized fields)."""

    def __init__(self, model: mujoco.MjModel, nthread: int):
        self.model, self.nthread = model, nthread
        self._batches: dict[tuple[int, tuple[str, ...]], mj_batch.Batch] = {}
        data = mujoco.MjData(model)  # a fresh MjData's state: what every call starts from but for the fields set
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        self._row = np.empty(mujoco.mj_stateSize(model, spec))
        mujoco.mj_getState(model, data, self._row, spec)

    def _batch(self, n: int, names: tuple[str, ...]):
        batch = self._batches.get((n, names))
        if batch is None:
            batch = self._batches[n, names] = mj_batch.Batch(self.model, nsim=n, nthread=self.nthread)
            batch.bind("sensordata")  # an output is copied out by the calls after it is bound
        batch.state[:] = self._row
        return batch

    def step(self, q, v, u, w, t, params, names, n_substeps, out) -> None:
        b = self._batch(len(q), names)
        for name, value in zip(names, params):
            b.expand(name)[...] = value
        b.qpos[...], b.qvel[...], b.ctrl[...], b.qacc_warmstart[...], b.time[...] = q, v, u, w, t
        if n_substeps > 1:
            b.step(nstep=n_substeps - 1)
        out[5][...] = b.qpos
        b.step()
        out[0][...], out[1][...], out[2][...], out[3][...], out[4][...] = (b.qpos, b.qvel, b.qacc_warmstart, b.time,
                                                                           b.sensordata)

    def forward(self, q, v, u, sens) -> None:
        b = self._batch(len(q), ())
        b.qpos[...], b.qvel[...], b.ctrl[...] = q, v, u
        b.forward()
        sens[...] = b.sensordata


C_LOOPS: dict[str, type[BatchLoop] | type[PoolLoop]] = {"batch": BatchLoop, "pool": PoolLoop}


def _weakly(physics: CPhysics, method: str, **kwargs: Any) -> Callable[..., Any]:
    """``physics.<method>(*args, **kwargs)`` through a weak reference, as a host callback. JAX may
    keep a traced program, and the callback in it, after the env that traced it is gone (JAX 0.12
    caches dead-code-eliminated jaxprs that way); a strong reference would keep the physics, and
    MuJoCo's batch threads with it, alive for the life of the process."""
    ref = weakref.ref(physics)

    def call(*args: Any) -> Any:
        target = ref()
        if target is None:
            raise RuntimeError("this program was traced with a MuJoCo C physics that has since been freed")
        return getattr(target, method)(*args, **kwargs)

    return call


class CPhysics(Physics):
    """MuJoCo C through ``jax.pure_callback``, ``nthread`` threads (default: all cores); ``loop``
    ``"batch"`` (``mujoco.batch``, the default) or ``"pool"`` (our own thread pool)."""

    name = "c"
    options = ("nthread", "loop")

    def __init__(self, model: mujoco.MjModel, nthread: int | None = None, loop: str = "batch"):
        super().__init__(model)
        if nthread is not None:
            nthread = checks.integer("nthread", nthread, ge=1, le=MAX_THREADS)
        if loop not in C_LOOPS:
            raise InputError(f"loop must be one of {tuple(C_LOOPS)}, got {loop!r}")
        self.nthread = nthread or os.cpu_count() or 1
        self.loop = loop
        self._loop = C_LOOPS[loop](model, self.nthread)
        # One batch at a time: callbacks can arrive concurrently (pmap over several devices, or two
        # jitted calls from two threads) and would otherwise share the loop's MjData or state rows.
        self._lock = threading.Lock()

    def _host_step(self, qpos, qvel, ctrl, warm, time, *params, n_substeps: int, names: tuple[str, ...]):
        shape = qpos.shape[:-1]
        flat = lambda x: np.asarray(x, np.float64).reshape(-1, *x.shape[len(shape) :])  # noqa: E731
        q, v, u, w, t = (flat(x) for x in (qpos, qvel, ctrl, warm, time))
        rows = [flat(x) for x in params]
        out = [np.empty_like(q), np.empty_like(v), np.empty_like(w), np.empty_like(t),
               np.empty((len(q), self.model.nsensordata)), np.empty_like(q)]
        with self._lock:
            self._loop.step(q, v, u, w, t, rows, names, n_substeps, out)
        dtype = qpos.dtype
        return tuple(o.reshape(shape + o.shape[1:]).astype(dtype) for o in out)

    def _host_forward(self, qpos, qvel, ctrl):
        shape = qpos.shape[:-1]
        q, v, u = (np.asarray(x, np.float64).reshape(-1, x.shape[-1]) for x in (qpos, qvel, ctrl))
        sens = np.empty((len(q), self.model.nsensordata))
        with self._lock:
            self._loop.forward(q, v, u, sens)
        return sens.reshape(shape + (self.model.nsensordata,)).astype(qpos.dtype)

    def init(self, qpos, qvel, ctrl):
        out = jax.ShapeDtypeStruct((*qpos.shape[:-1], self.model.nsensordata), qpos.dtype)
        sens = jax.pure_callback(_weakly(self, "_host_forward"), out, qpos, qvel, ctrl, vmap_method="broadcast_all")
        zero_v = jnp.zeros_like(qvel)
        return PhysicsState(qpos, qvel, ctrl, zero_v, jnp.zeros(qpos.shape[:-1], qpos.dtype), sens, qpos)

    def step(self, state, ctrl, n_substeps, params=None):
        s = state
        shapes = (s.qpos, s.qvel, s.qacc_warmstart, s.time, s.sensordata, s.qpos)
        out = tuple(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in shapes)
        names = tuple(sorted(params)) if params else ()
        q, v, w, t, sens, kin_q = jax.pure_callback(
            _weakly(self, "_host_step", n_substeps=n_substeps, names=names), out, s.qpos, s.qvel,
            ctrl.astype(s.qpos.dtype), s.qacc_warmstart, s.time,
            *(params[k] for k in names), vmap_method="broadcast_all",
        )
        return PhysicsState(q, v, ctrl, w, t, sens, kin_q)


# The backends, by name: everything that lists or builds backends derives from this table.
BACKEND_CLASSES: dict[str, type[Physics]] = {cls.name: cls for cls in (MjxPhysics, CPhysics)}
BACKENDS: tuple[str, ...] = tuple(BACKEND_CLASSES)


def backend_options(backend: str | None, options: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``options`` that are backend options (``Physics.options``); ValueError for
    one that ``backend`` (None: :func:`default_backend`) does not take."""
    backend = backend or default_backend()
    out = {}
    for name, cls in BACKEND_CLASSES.items():
        for key in set(cls.options) & set(options):
            if key not in BACKEND_CLASSES[backend].options:
                raise InputError(f"{key!r} is an option of backend {name!r}, not of {backend!r} "
                                 f"(which takes {list(BACKEND_CLASSES[backend].options)})")
            out[key] = options[key]
    return out


def make_physics(backend: str | None, model: mujoco.MjModel, **kwargs) -> Physics:
    """Build a backend by name (one of :data:`BACKENDS`; ``None`` picks :func:`default_backend`)."""
    backend = backend or default_backend()
    if backend not in BACKEND_CLASSES:
        raise InputError(f"backend must be one of {BACKENDS}, got {backend!r}")
    return BACKEND_CLASSES[backend](model, **kwargs)
