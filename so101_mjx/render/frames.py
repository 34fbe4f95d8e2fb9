"""Offscreen rendering of env states with MuJoCo C (front camera), and video writing.

Headless Linux needs an offscreen GL backend: ``import so101_mjx`` defaults ``MUJOCO_GL`` to
``egl`` (GPU drivers, or Mesa's software EGL: Debian/Ubuntu ``libegl-mesa0``); set ``MUJOCO_GL``
yourself to override (e.g. ``osmesa`` with ``libosmesa6``). Videos are encoded with the ffmpeg
binary that ``imageio-ffmpeg`` ships (the ``viz`` extra).

A :class:`FrameRenderer` left open at interpreter exit (a gym env never closed) is closed by an
``atexit`` hook: MuJoCo's ``GLContext.__del__`` would otherwise run during module teardown, after
the EGL / OSMesa bindings it calls are gone, and print a ``TypeError``.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import warnings
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np

from so101_mjx._files import atomic_path
from so101_mjx.errors import InputError, SetupError
from so101_mjx.render.distortion import remap_numpy

if TYPE_CHECKING:  # render workers import this module: camera.py's checks would load JAX there
    from so101_mjx.render.camera import CameraSpec


# render models (so101_mjx.render.batch.render_model): light meshes without / with shadows, or the scene as shipped
QUALITIES = ("fast", "shadowed", "full")


def check_quality(value: Any, field: str = "image_quality") -> str:
    """``value`` if it is one of :data:`QUALITIES`, else InputError naming ``field``."""
    if value not in QUALITIES:
        raise InputError(f"{field} must be one of {QUALITIES}, got {value!r}")
    return value


_OPEN: weakref.WeakSet[FrameRenderer] = weakref.WeakSet()  # renderers whose GL context is still held


def _close_open() -> None:
    """Close every open renderer (at exit, while the GL bindings still work)."""
    for renderer in list(_OPEN):
        renderer.close()


class FrameRenderer:
    """Renders a model at given ``qpos`` vectors from a named camera; ``close()`` releases GL (at
    interpreter exit at the latest). ``spec``: the user's camera in place of ``camera``'s own pose
    and lens (:class:`~so101_mjx.render.camera.CameraSpec`; the model is then copied)."""

    def __init__(self, model: mujoco.MjModel, height: int = 240, width: int = 320, camera: str | int = "front",
                 shadows: bool = True, spec: CameraSpec | None = None):
        from so101_mjx.render.camera import camera_setup

        model, (draw_height, draw_width), self._remap = camera_setup(model, camera, spec, height, width)
        self.model = model
        self.data = mujoco.MjData(model)
        self.camera, self.shadows = camera, shadows
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # GLFW's own warnings: the error below says why
                self._renderer = mujoco.Renderer(model, height=draw_height, width=draw_width)
        except Exception as err:  # GL failures surface as assorted exception types
            raise SetupError(gl_failure(err)) from err
        if not _OPEN:  # registered after MuJoCo's own exit hooks (eglTerminate): run before them
            atexit.unregister(_close_open)
            atexit.register(_close_open)
        _OPEN.add(self)

    def frame(self, qpos: np.ndarray, site_pos: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """(height, width, 3) uint8 image at ``qpos``; ``site_pos`` moves marker sites (e.g. the goal)."""
        for name, pos in (site_pos or {}).items():
            self.model.site(name).pos[:] = pos
        self.data.qpos[:] = qpos
        mujoco.mj_forward(self.model, self.data)
        self._renderer.update_scene(self.data, camera=self.camera)
        self._renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = self.shadows
        frame = self._renderer.render()
        return frame.copy() if self._remap is None else remap_numpy(self._remap, frame)

    def close(self) -> None:
        self._renderer.close()
        _OPEN.discard(self)


def mujoco_gl() -> str:
    return os.environ.get("MUJOCO_GL", "")


def display() -> str:
    """The window system's display (``DISPLAY``, else ``WAYLAND_DISPLAY``), or ``""`` when there is none."""
    return os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or ""


def gl_failure(err: Exception) -> str:
    """One line on why no offscreen GL context could be made, and what to do."""
    if mujoco_gl().lower() in ("", "glfw", "glx") and not display():
        hint = "it renders through a window system and there is no display: use MUJOCO_GL=egl (or osmesa) here"
    else:
        hint = "on headless Linux use MUJOCO_GL=egl (Mesa's libegl1, or a GPU driver) or MUJOCO_GL=osmesa (libosmesa6)"
    return f"cannot create an offscreen GL context (MUJOCO_GL={mujoco_gl()!r}): {err}; {hint}"


VIDEO_SUFFIXES = (".mp4", ".gif")


def check_video_path(path: str | Path) -> None:
    """ValueError early (before any simulation) when ``path`` cannot be written: its suffix, its
    encoder (imageio-ffmpeg and its ffmpeg binary for .mp4); the CLI checks the directory's permissions."""
    suffix = Path(path).suffix
    if suffix not in VIDEO_SUFFIXES:
        raise InputError(f"video path must end in one of {VIDEO_SUFFIXES}, got {path}")
    if suffix == ".mp4":
        if importlib.util.find_spec("imageio_ffmpeg") is None:
            raise InputError("writing .mp4 needs imageio-ffmpeg: pip install 'so101-mjx[viz]' (or write a .gif)")
        import imageio_ffmpeg

        try:
            imageio_ffmpeg.get_ffmpeg_exe()
        except RuntimeError as err:
            raise InputError(f"writing .mp4 needs an ffmpeg binary: {err}") from None


def write_video(frames: Iterable[np.ndarray], path: str | Path, fps: float) -> Path:
    """Write (H, W, 3) uint8 frames: .mp4 (H.264, imageio-ffmpeg's bundled ffmpeg) or .gif (Pillow)."""
    check_video_path(path)
    path = Path(path)
    if path.suffix == ".gif":
        from PIL import Image

        images = [Image.fromarray(np.asarray(f)) for f in frames]
        with atomic_path(path) as tmp:
            images[0].save(tmp, save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0)
        return path
    import imageio_ffmpeg

    with atomic_path(path) as tmp:
        writer = None
        try:
            for frame in frames:
                if writer is None:
                    h, w = frame.shape[:2]
                    # file: and absolute: ffmpeg reads "name:..." as a protocol, "-..." as an option, "%d" as a pattern
                    writer = imageio_ffmpeg.write_frames(f"file:{tmp.absolute()}", (w, h), fps=fps,
                                                         macro_block_size=1, quality=7)
                    with warnings.catch_warnings():  # JAX warns on any fork; ffmpeg is a plain subprocess
                        warnings.filterwarnings("ignore", "os.fork", RuntimeWarning)
                        writer.send(None)
                writer.send(np.ascontiguousarray(frame))
        finally:
            if writer is not None:
                writer.close()
    return path


def render_trajectory(env, qpos: np.ndarray, path: str | Path, fps: float, site_pos: dict | None = None) -> Path:
    """Render a (T, nq) qpos trajectory of ``env``'s model to a video file."""
    from so101_mjx import _progress

    renderer, qpos = FrameRenderer(env.mj_model), np.asarray(qpos)
    try:
        return write_video(_progress.each((renderer.frame(q, site_pos) for q in qpos), len(qpos), "frames",
                                          "frame"), path, fps)
    finally:
        renderer.close()


def fit_frame(frame: Any, size: int, what: str) -> np.ndarray:
    """``frame`` (H, W, 3) uint8 at ``size`` x ``size``: as it is, or a larger camera frame resized by OpenCV's area
    average (the whole field of view, as the simulator renders a calibration at a smaller size); InputError
    naming ``what`` for a frame that is not a larger RGB one, or without OpenCV."""
    frame = np.asarray(frame)
    if frame.shape == (size, size, 3):
        return frame
    if frame.ndim != 3 or frame.shape[2] != 3 or min(frame.shape[:2]) < size:
        raise InputError(f"{what} are {frame.shape}, not ({size}, {size}, 3) or a larger RGB frame to resize")
    try:
        import cv2
    except ImportError:
        raise InputError(f'resizing {what} from {frame.shape[1]}x{frame.shape[0]} to {size}x{size} needs OpenCV: '
                         'pip install "so101-mjx[camera]"') from None
    return cv2.resize(frame, (size, size), interpolation=cv2.INTER_AREA)
