"""The gymnasium base of every env here: a MuJoCo model, its data, frames and the viewer.

:class:`MujocoGymEnv` is lerobot_env_so101 0.4.0's base class of the same name: it owns the model,
the data, the offscreen renderer (built on first use) and, with ``render_mode="human"``, MuJoCo's
passive viewer, and derives the physics substeps per control step. Robot control and the task
loop belong to subclasses (:class:`so101_mjx.gym.so101_env.SO101GymEnv`).
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium
import mujoco
import numpy as np

from so101_mjx import _checks as checks
from so101_mjx.errors import InputError
from so101_mjx.render.frames import FrameRenderer, display, mujoco_gl
from so101_mjx.robot.scenes import fit_offscreen, load_model

if TYPE_CHECKING:
    from so101_mjx.render.camera import CameraSpec

_logger = logging.getLogger(__name__)

MAX_FRAME_SIZE = 8192  # pixels per side of an offscreen frame
CAMERA = "front"  # the SO-101 envs' default camera, and the key of their pixels observation
RENDER_MODES = ("rgb_array", "human")
VIEWER_CLOSE_TIMEOUT = 10.0  # s close() waits for the viewer's threads to tear its window down


@dataclasses.dataclass(frozen=True)
class GymRenderingSpec:
    """Offscreen frame size in pixels and the camera of ``render()`` and of the pixels observation.

    ``camera_id``: ``-1`` is MuJoCo's free camera, a name (``"front"``, ``"wrist"``) or a number
    (0 .. ncam - 1) a camera of the model; ``None`` (the default) the env's own camera: ``front``
    for the SO-101 envs (what the reference renders), the free camera for a bare
    :class:`MujocoGymEnv`. ``mode``: ``"rgb_array"`` or ``"human"`` (a record of intent, as in the
    reference; the env's ``render_mode`` decides).
    """

    height: int = 128
    width: int = 128
    camera_id: str | int | None = None
    mode: str = "rgb_array"

    def __post_init__(self) -> None:
        for name in ("height", "width"):
            object.__setattr__(self, name,
                               checks.integer(f"render_spec.{name}", getattr(self, name), ge=1, le=MAX_FRAME_SIZE))
        camera = self.camera_id
        if isinstance(camera, bool) or not (camera is None or (isinstance(camera, str) and camera)
                                            or isinstance(camera, (int, np.integer))):
            raise InputError("render_spec.camera_id must be -1 (the free camera), a camera name or number, or None, "
                             f"got {camera!r}")
        if isinstance(camera, (int, np.integer)):
            object.__setattr__(self, "camera_id", checks.integer("render_spec.camera_id", camera, ge=-1))
        if self.mode not in RENDER_MODES:
            raise InputError(f"render_spec.mode must be one of {RENDER_MODES}, got {self.mode!r}")


def resolve_camera(model: mujoco.MjModel, camera: str | int | None, default: str | int) -> str | int:
    """The camera ``camera`` (``None``: ``default``) checked against ``model``: -1, or a camera's name or id."""
    camera = default if camera is None else camera
    names = [model.camera(i).name for i in range(model.ncam)]
    if isinstance(camera, str) and camera not in names or not isinstance(camera, str) and not -1 <= camera < model.ncam:
        raise InputError(f"render_spec.camera_id must be -1 (the free camera) or one of the model's cameras "
                         f"{names} (or their ids 0..{model.ncam - 1}), got {camera!r}")
    return camera


def viewer_unavailable() -> str | None:
    """Why MuJoCo's viewer cannot open a window in this process, or None when it can: a display
    (``DISPLAY`` or ``WAYLAND_DISPLAY`` on Linux) and a GLFW that initializes on it."""
    if sys.platform.startswith("linux") and not display():
        return "no display: DISPLAY and WAYLAND_DISPLAY are unset"
    try:
        import glfw
    except Exception as err:  # the glfw package raises ImportError or its own errors when libglfw is missing
        return f"GLFW does not load: {err} (Debian: libglfw3)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # glfw reports its errors as warnings; the reason is given below
        if glfw._glfw is None or not glfw.init():  # type: ignore[attr-defined]  # private: not in glfw's types
            return f"GLFW cannot initialize on display {display()!r}"
    return None


_no_window_warned = False


def _warn_no_window(reason: str) -> None:
    """Say once per process that human mode shows no window, and why."""
    global _no_window_warned
    if not _no_window_warned:
        _no_window_warned = True
        warnings.warn(f"render_mode='human': no window can open ({reason}); render() returns offscreen frames "
                      f"(MUJOCO_GL={mujoco_gl()!r}) and no viewer is shown", RuntimeWarning, stacklevel=4)


class MujocoGymEnv(gymnasium.Env):
    """A MuJoCo model wrapped in the gymnasium interface (the reference's ``MujocoGymEnv``).

    Args:
        xml_path: MJCF scene to load (str or Path); ``FileNotFoundError`` (an InputError) when missing.
        seed: seeds :attr:`random_state`, an int in [0, 2**32 - 1].
        control_dt: seconds of simulated time per control step (> 0).
        physics_dt: MuJoCo's timestep (> 0); ``control_dt // physics_dt`` substeps per control step.
        render_spec: frame size and camera of :meth:`render`.
        model: extension: a compiled model to wrap instead of loading ``xml_path`` (subclasses pass theirs).
    """

    _default_camera: str | int = -1  # the camera of render_spec.camera_id=None

    def __init__(self, xml_path: str | Path | None, seed: int = 0, control_dt: float = 0.02, physics_dt: float = 0.002,
                 render_spec: GymRenderingSpec = GymRenderingSpec(), *, model: mujoco.MjModel | None = None):
        if not isinstance(render_spec, GymRenderingSpec):
            raise InputError(f"render_spec must be a GymRenderingSpec, got {render_spec!r}")
        seed = checks.integer("seed", seed, ge=0, le=2**32 - 1)
        control_dt = checks.real("control_dt", control_dt, gt=0, unit=" s")
        physics_dt = checks.real("physics_dt", physics_dt, gt=0, unit=" s")
        if model is None:
            if not isinstance(xml_path, (str, Path)):
                raise InputError(f"xml_path must be the path of an MJCF file, got {xml_path!r}")
            model = load_model(Path(xml_path))
            model.opt.timestep = physics_dt
        self._model = model
        fit_offscreen(self._model, render_spec.height, render_spec.width)
        self._mjdata = mujoco.MjData(self._model)
        self._control_dt = control_dt
        self._n_substeps = int(control_dt // physics_dt)
        self._random = np.random.RandomState(seed)
        self._viewer: FrameRenderer | None = None  # the offscreen renderer, built on first use
        self._camera_spec: CameraSpec | None = None  # the user's camera in place of the render camera's own
        self._human_viewer: Any = None  # MuJoCo's passive viewer (render_mode "human"), opened on first use
        self._human_threads: list[threading.Thread] = []  # the viewer's threads, joined by close()
        self._human_unavailable = False  # no window can open (warned once): human mode renders offscreen only
        self._render_specs = render_spec
        self._frames_model = self._model  # the model frames are drawn from (a subclass may draw a lighter one)
        self._render_camera = resolve_camera(self._model, render_spec.camera_id, self._default_camera)

    # -- rendering ----------------------------------------------------------------------------------
    def render(self) -> np.ndarray | None:
        """(height, width, 3) uint8 frame from ``render_spec.camera_id``. With ``render_mode="human"``
        the viewer is brought up to date first, and the frame returned as the reference returns it
        (gymnasium's checker notes that human rendering usually returns None)."""
        if self.render_mode == "human":
            self._sync_viewer()
        return self._frame()

    def _frame(self, scene: tuple[np.ndarray, dict[str, np.ndarray]] | None = None) -> np.ndarray:
        """The offscreen frame of the current state, or of ``scene`` = (qpos, marker positions) (the
        renderer is built on first use, so a headless run that never renders needs no GL context)."""
        if self._viewer is None:
            spec = self._render_specs
            self._viewer = FrameRenderer(self._frames_model, spec.height, spec.width, self._render_camera,
                                         shadows=self._frames_model.vis.quality.shadowsize > 0, spec=self._camera_spec)
        return self._viewer.frame(*(scene or self.scene()))

    def scene(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """What a frame of the current state draws: ``(qpos (nq,), {marker site: world position (3,)})``, copies
        (:class:`~so101_mjx.render.frames.FrameRenderer` ``.frame(*scene)`` draws it)."""
        return np.array(self.data.qpos), self._marker_positions()

    def _marker_positions(self) -> dict[str, np.ndarray]:
        """World positions of marker sites to draw, by site name (none here)."""
        return {}

    def _sync_viewer(self) -> None:
        """Open MuJoCo's passive viewer on :attr:`data` (first call) and show the current state.

        Where no window can open (no display, no GLFW), one warning says why and the env goes on
        without a window: ``render()`` still returns offscreen frames, as the reference does. The
        check runs before MuJoCo's viewer starts, whose GLFW failure would end the process."""
        if self._human_viewer is None:
            if self._human_unavailable:
                return
            reason = viewer_unavailable()
            if reason is not None:
                self._human_unavailable = True
                _warn_no_window(reason)
                return
            import mujoco.viewer

            before = set(threading.enumerate())
            self._human_viewer = mujoco.viewer.launch_passive(self._model, self.data)
            self._human_threads = [t for t in threading.enumerate() if t not in before]
        with self._human_viewer.lock():
            self.data  # noqa: B018  (brings the viewer's MjData up to date)
        self._human_viewer.sync()

    def close(self) -> None:
        """Release the renderer and the viewer, if open; a failure to release is logged, not raised."""
        for attr in ("_viewer", "_human_viewer"):
            viewer = getattr(self, attr, None)
            setattr(self, attr, None)
            if viewer is not None and callable(getattr(viewer, "close", None)):
                try:
                    viewer.close()
                except Exception:
                    # teardown failures must not mask the caller's own cleanup (as the reference)
                    _logger.debug("%s.close() failed", attr, exc_info=True)
        # the viewer's window is destroyed by its own thread: let it finish before the process may exit
        for thread in getattr(self, "_human_threads", []):
            thread.join(VIEWER_CLOSE_TIMEOUT)
        self._human_threads = []

    # -- the reference's properties -----------------------------------------------------------------
    @property
    def model(self) -> mujoco.MjModel:
        return self._model

    @property
    def data(self) -> mujoco.MjData:
        return self._mjdata

    @property
    def _data(self) -> mujoco.MjData:
        return self.data

    @property
    def control_dt(self) -> float:
        return self._control_dt

    @property
    def physics_dt(self) -> float:
        return float(self._model.opt.timestep)

    @property
    def random_state(self) -> np.random.RandomState:
        """A ``RandomState`` seeded with the constructor's ``seed`` (not used by ``reset``)."""
        return self._random
