"""One render process of :class:`so101_mjx.render.batch.BatchRenderer`, and the per-world draw loop.

The batch renderer starts ``python -m so101_mjx.render.worker FD`` once per worker; FD is the
worker's end of a socket pair, read as a :class:`multiprocessing.connection.Connection`. Worlds
are drawn in separate processes, not threads, because two threads of one process overlap their
GL work only in part (measured on 2 cores, 64×64: 1.6× one thread; two processes: 2.2×).

Protocol (pickled messages): the parent sends the setup ``(model, height, width, camera,
markers, shadows, remap)`` (``remap``: a lens's :class:`~so101_mjx.render.distortion.Remap` of the
(height, width) render, or None) and the worker answers ``("ready", "")`` or ``("setup-error", text)``
(no GL context); then each ``(qpos (n, nq), marker_pos (n, len(markers), 3) | None, params
{MjModel field: (n, ...)})`` is answered ``("frames", "")`` followed by the (n, H, W, 3) uint8 frames
(remapped, with a lens) as raw bytes, or ``("error", traceback)``; while drawing, the worker sends
``("drawing", "")`` at least every :data:`HEARTBEAT_S` seconds, so that the parent tells a slow
batch from a stopped or hung worker.
``None`` or end of file stops the worker. This module imports only MuJoCo and numpy (no JAX), so
a worker starts in well under a second.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection

import mujoco
import numpy as np

from so101_mjx.render.distortion import remap_numpy
from so101_mjx.render.frames import gl_failure

HEARTBEAT_S = 1.0  # s between two ("drawing", "") messages, at most (one frame more)


def draw(model: mujoco.MjModel, data: mujoco.MjData, renderer: mujoco.Renderer, camera: str, qpos: np.ndarray,
         out: np.ndarray, marker_pos: np.ndarray | None = None, sites: list[int] | None = None,
         params: dict[str, np.ndarray] | None = None, progress: Callable[[], None] | None = None) -> None:
    """Render world i at ``qpos[i]`` (n, nq) into ``out[i]`` (n, H, W, 3) uint8, one after another.

    ``sites``: site ids set to ``marker_pos[i]`` (n, len(sites), 3) m; ``params``: per-world model
    arrays (n, *shape) by MjModel field name, written into ``model`` before drawing each world;
    ``progress`` is called after each world.
    """
    for i in range(len(qpos)):
        if sites:
            assert marker_pos is not None  # sites come with their marker positions
            model.site_pos[sites] = marker_pos[i]
        for name, value in (params or {}).items():
            getattr(model, name)[...] = value[i]
        data.qpos[:] = qpos[i]
        mujoco.mj_forward(model, data)  # poses, and the lights that track the block
        renderer.update_scene(data, camera=camera)
        renderer.render(out=out[i])
        if progress is not None:
            progress()


def _heartbeat(conn: Connection) -> Callable[[], None]:
    """A ``progress`` callback sending ``("drawing", "")`` when :data:`HEARTBEAT_S` has passed since the last one."""
    last = time.monotonic()

    def beat() -> None:
        nonlocal last
        if time.monotonic() - last >= HEARTBEAT_S:
            conn.send(("drawing", ""))
            last = time.monotonic()

    return beat


def serve(conn: Connection) -> None:
    """Answer the setup, then render requests until ``None`` or end of file (see the module docstring)."""
    try:
        model, height, width, camera, markers, shadows, remap = conn.recv()
    except EOFError:
        return
    try:
        data = mujoco.MjData(model)
        renderer = mujoco.Renderer(model, height, width)
    except Exception as err:  # GL failures surface as assorted exception types
        conn.send(("setup-error", gl_failure(err)))
        return
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = shadows
    sites = [model.site(name).id for name in markers]
    conn.send(("ready", ""))
    try:
        while (request := conn.recv()) is not None:
            qpos, marker_pos, params = request
            beat = _heartbeat(conn)
            try:
                out = np.empty((len(qpos), height, width, 3), np.uint8)
                draw(model, data, renderer, camera, qpos, out, marker_pos, sites, params, beat)
                out = out if remap is None else remap_numpy(remap, out)
            except Exception:
                conn.send(("error", traceback.format_exc()))
                continue
            conn.send(("frames", ""))
            # 1-D: Connection sizes a buffer by len(); ignore: numpy 2.4's stubs: __buffer__ only for Python >= 3.12
            conn.send_bytes(out.reshape(-1))  # type: ignore[arg-type, unused-ignore]
    except EOFError:
        pass
    finally:
        renderer.close()


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])))
