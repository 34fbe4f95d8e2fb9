"""Host-side cameras of one world: the frames of several cameras, each with its own lens and latency.

A :class:`CameraRig` draws what the gym env's ``pixels`` and the simulated follower's camera features show: one
:class:`~so101_mjx.render.frames.FrameRenderer` per camera, from the model of a render quality
(:func:`frames_model`), each camera's frame of the scene ``latency`` control ticks back
(:class:`~so101_mjx.render.latency.History`). The renderers, and with them a GL context, are made on the first
frame, so an env that never renders needs no GL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np

from so101_mjx.errors import InputError
from so101_mjx.render import latency
from so101_mjx.render.frames import FrameRenderer, check_quality
from so101_mjx.robot.scenes import fit_offscreen

if TYPE_CHECKING:
    from so101_mjx.render.camera import CameraSpec

Scene = tuple[np.ndarray, dict[str, np.ndarray]]  # (qpos (nq,), {marker site: world position (3,)})


def frames_model(physics: mujoco.MjModel, scene: str, quality: str, height: int, width: int) -> mujoco.MjModel:
    """The model frames of ``quality`` are drawn from, with room for (height, width) frames: ``"full"`` the physics
    model ``physics`` itself (the scene as shipped: meshes, shadows, multisampling; edits of it show), ``"shadowed"`` or
    ``"fast"`` the task scene's light render model (:func:`so101_mjx.render.batch.render_model`); the same bodies,
    joints and sites as ``physics``, so a qpos and marker positions of the physics draw as they are."""
    if check_quality(quality) == "full":
        model = physics
    else:
        from so101_mjx.render.batch import render_model

        model = render_model(scene, quality)
    fit_offscreen(model, height, width)
    return model


def check_cameras(model: mujoco.MjModel, cameras: Any) -> tuple[str, ...]:
    """``image_cameras`` as a tuple: distinct names of ``model``'s cameras, else InputError naming them."""
    names = [model.camera(i).name for i in range(model.ncam)]
    if (isinstance(cameras, str) or not isinstance(cameras, (tuple, list)) or not cameras
            or len(set(cameras)) != len(cameras) or not set(cameras) <= set(names)):
        raise InputError(f"image_cameras must be distinct cameras of the scene {names}, got {cameras!r}")
    return tuple(cameras)


class CameraRig:
    """Frames (height, width, 3) uint8 of ``cameras`` (key -> (camera of ``model``, the user's
    :class:`~so101_mjx.render.camera.CameraSpec` or None)); ``shadows``: draw the lights' shadows where ``model``
    has a shadow map. InputError naming the key of a spec whose body ``model`` lacks."""

    def __init__(self, model: mujoco.MjModel, cameras: dict[str, tuple[str | int, CameraSpec | None]], height: int,
                 width: int, shadows: bool = True):
        for key, (_, spec) in cameras.items():
            if spec is not None:
                spec.check_body(model, f"camera_specs[{key!r}]")
        self.model, self.cameras, self.size = model, dict(cameras), (height, width)
        self.shadows = shadows and model.vis.quality.shadowsize > 0
        self.lags = {key: spec.latency if spec is not None else 0 for key, (_, spec) in cameras.items()}
        self._scenes = latency.History(max(self.lags.values(), default=0))
        self._renderers: dict[str, FrameRenderer] = {}

    @property
    def lagged(self) -> bool:
        """Whether a camera shows an older scene than the current one (then :meth:`start` and :meth:`push` matter)."""
        return any(self.lags.values())

    def start(self, scene: Scene) -> None:
        """A new episode's first scene (each lagged camera shows it until enough ticks have passed)."""
        self._scenes.start(scene)

    def push(self, scene: Scene) -> None:
        """The scene after a control tick."""
        self._scenes.push(scene)

    def open(self) -> None:
        """Make the renderers (a GL context each) unless they are made; SetupError where GL is missing."""
        if not self._renderers:
            height, width = self.size
            self._renderers = {key: FrameRenderer(self.model, height, width, camera, self.shadows, spec)
                               for key, (camera, spec) in self.cameras.items()}

    def frames(self, current: Scene) -> dict[str, np.ndarray]:
        """Each camera's frame: of ``current`` (the scene now), or of the scene its latency back."""
        self.open()
        return {key: renderer.frame(*(self._scenes.ago(self.lags[key]) if self.lags[key] else current))
                for key, renderer in self._renderers.items()}

    def close(self) -> None:
        """Release the renderers (the next frame makes new ones)."""
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers = {}
