"""The ArUco marker on the gripper that ``so101-mjx camera calibrate`` finds: its cells, its printable
SVG, its corners, its nominal mount and its geoms in a simulated scene.

A :class:`Marker` is an OpenCV ArUco dictionary entry (``DICT_4X4_50`` id 0 by default) printed with a
black square of ``size`` metres (its border of black cells included) on a white card ``margin`` wider on
each side. Its frame (OpenCV's, as ``cv2.aruco`` detects it): origin at the black square's centre on the
printed face, x to the right and y up as the marker is read, z out of the face; corners in the detector's
order ``top-left, top-right, bottom-right, bottom-left`` (:meth:`Marker.corners`).

The nominal mount (:data:`NOMINAL_MOUNT`, docs/camera_calibration.md): the card glued on the flat outer
face of the gripper's fixed jaw (the side away from the moving jaw, the face of the wrist-roll follower
part at x = -35.2 mm in the ``gripper`` body frame), centred on it, the marker's top edge toward the
wrist. The calibration estimates the real mount, so gluing it a few millimetres off costs nothing.

:func:`add_marker` adds the card to an ``mujoco.MjSpec`` as geoms: a thin white plate and one thin black
box per black cell, each box's top face on the marker's plane (exact corners, no texture sampling); the
geoms are visual only (no contacts) and the body's explicit inertia is kept. Scenes stay as they are
unless asked (:func:`marker_model`). The cells come from OpenCV (``pip install "so101-mjx[camera]"``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mujoco
import numpy as np

from so101_mjx.errors import InputError
from so101_mjx.robot import rotations
from so101_mjx.robot.scenes import scene_path

MAX_SIZE = 1.0  # m, largest printed marker


def cv2_module(what: str = "the ArUco marker"):
    """OpenCV, imported on first use; one InputError line naming the extra when it is missing."""
    try:
        import cv2
    except ImportError:
        raise InputError(f'{what} needs OpenCV: pip install "so101-mjx[camera]"') from None
    return cv2


@dataclasses.dataclass(frozen=True)
class Marker:
    """An ArUco marker as printed: its dictionary entry and physical size (checked at construction)."""

    dictionary: str = "DICT_4X4_50"  # a cv2.aruco predefined dictionary
    id: int = 0
    size: float = 0.030  # m, side of the black square (its black border cells included)
    margin: float = 0.005  # m, white border around it on the card (one cell by default)

    def __post_init__(self) -> None:
        """Check the fields without OpenCV (the dictionary and the id's range are checked on first use)."""
        if not (isinstance(self.dictionary, str) and self.dictionary.startswith("DICT_")):
            raise InputError(f"marker dictionary must name a cv2.aruco predefined dictionary (DICT_4X4_50, ...), "
                             f"got {self.dictionary!r}")
        if isinstance(self.id, bool) or not isinstance(self.id, (int, np.integer)) or self.id < 0:
            raise InputError(f"marker id must be a non-negative integer, got {self.id!r}")
        for name, allowed, ok in (("size", f"(0, {MAX_SIZE}]", lambda v: 0 < v <= MAX_SIZE),
                                  ("margin", f"[0, {MAX_SIZE}]", lambda v: 0 <= v <= MAX_SIZE)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(value):
                raise InputError(f"marker {name} must be a number of metres in {allowed}, got {value!r}")

    def aruco_dictionary(self):
        """The ``cv2.aruco.Dictionary``; InputError for a dictionary OpenCV lacks or an id outside it."""
        aruco = cv2_module().aruco
        code = getattr(aruco, self.dictionary, None)
        if not isinstance(code, int):
            raise InputError(f"marker dictionary must name a cv2.aruco predefined dictionary (DICT_4X4_50, ...), "
                             f"got {self.dictionary!r}")
        dictionary = aruco.getPredefinedDictionary(code)
        if self.id >= dictionary.bytesList.shape[0]:
            count = dictionary.bytesList.shape[0]
            raise InputError(f"marker id must be below {count} for {self.dictionary}, got {self.id}")
        return dictionary

    @property
    def cells(self) -> int:
        """Cells along a side of the black square: the dictionary's bits plus a black border cell each side."""
        return int(self.aruco_dictionary().markerSize) + 2

    @property
    def cell(self) -> float:
        """Side of one cell, m."""
        return self.size / self.cells

    @property
    def card(self) -> float:
        """Side of the printed card (black square and white margin), m."""
        return self.size + 2 * self.margin

    def bits(self) -> np.ndarray:
        """(cells, cells) bool, True for a black cell; row 0 is the top, column 0 the left, as printed."""
        image = cv2_module().aruco.generateImageMarker(self.aruco_dictionary(), int(self.id), self.cells, borderBits=1)
        return np.asarray(image) == 0

    def corners(self) -> np.ndarray:
        """(4, 3) m: the black square's corners in the marker frame, in ``cv2.aruco``'s order."""
        h = self.size / 2
        return np.array([[-h, h, 0.0], [h, h, 0.0], [h, -h, 0.0], [-h, -h, 0.0]])

    def cell_centres(self) -> np.ndarray:
        """(cells, cells, 2) m: the (x, y) of each cell's centre in the marker frame."""
        offsets = (np.arange(self.cells) + 0.5) * self.cell - self.size / 2
        x, y = np.meshgrid(offsets, -offsets)
        return np.stack([x, y], -1)


MARKER = Marker()  # DICT_4X4_50 id 0, 30 mm, a 5 mm white border: a 40 mm card


@dataclasses.dataclass(frozen=True)
class Mount:
    """Where a marker sits: its frame in a body's frame."""

    body: str = "gripper"
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)  # m
    quaternion: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)  # (w, x, y, z)

    def matrix(self) -> np.ndarray:
        """(4, 4) the marker -> body transform (``body_point = T @ marker_point``)."""
        transform = np.eye(4)
        quat = np.asarray(self.quaternion, np.float64)
        transform[:3, :3] = rotations.quat_to_mat_np(quat / np.linalg.norm(quat))
        transform[:3, 3] = self.position
        return transform


CARD_THICKNESS = 0.001  # m, the nominal card (printed paper on thin card) the marker is glued on
# The card on the fixed jaw's flat outer face (x = -35.2 mm of the gripper frame; the face spans y -13..13 mm,
# z -43..-7.5 mm): marker z along -x (out of the face), marker y (its top) along +z (toward the wrist).
NOMINAL_MOUNT = Mount("gripper", (-0.0352 - CARD_THICKNESS, -0.0002, -0.0254), (0.5, 0.5, -0.5, -0.5))


def svg(marker: Marker = MARKER) -> str:
    """The card as an SVG document at its physical size (millimetres): white card, one black rect per black
    cell, a light grey cut line on the card's edge. Print at 100 % (no fit to page)."""
    mm = lambda v: f"{v * 1000:.4f}".rstrip("0").rstrip(".")  # noqa: E731
    card, cell, margin = marker.card, marker.cell, marker.margin
    rects = [f'<rect x="{mm(margin + c * cell)}" y="{mm(margin + r * cell)}" width="{mm(cell)}" height="{mm(cell)}"/>'
             for r, c in zip(*np.nonzero(marker.bits()), strict=True)]
    return "\n".join([
        '<?xml version="1.0" encoding="UTF-8"?>',
        f"<!-- ArUco {marker.dictionary} id {marker.id}: black square {mm(marker.size)} mm, card {mm(card)} mm. "
        "Print at 100 % (no scaling); check the black square with a ruler. -->",
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{mm(card)}mm" height="{mm(card)}mm" '
        f'viewBox="0 0 {mm(card)} {mm(card)}" shape-rendering="crispEdges">',
        f'<rect x="0" y="0" width="{mm(card)}" height="{mm(card)}" fill="#ffffff" stroke="#c8c8c8" '
        'stroke-width="0.1"/>',
        '<g fill="#000000">', *rects, "</g>", "</svg>", ""])


def write_svg(path: str | Path, marker: Marker = MARKER) -> None:
    """Write :func:`svg` to ``path`` (atomically)."""
    from so101_mjx._files import atomic_write

    atomic_write(path, svg(marker))


def add_marker(spec: mujoco.MjSpec, marker: Marker = MARKER, mount: Mount = NOMINAL_MOUNT,
               thickness: float = CARD_THICKNESS, prefix: str = "aruco") -> None:
    """Add ``marker``'s card to ``mount.body`` of ``spec`` as visual geoms named ``<prefix>_card`` and
    ``<prefix>_cell_<row>_<col>``: the white plate under the marker plane (``thickness`` m, its face 0.1 mm
    below it), one black box per black cell whose top face is the plane. Matte materials
    ``<prefix>_white``/``<prefix>_black``. InputError when the body is not in ``spec``."""
    body = spec.body(mount.body)
    if body is None:
        raise InputError(f"marker mount: body {mount.body!r} is not in the model")
    white = spec.add_material(name=f"{prefix}_white", rgba=[1, 1, 1, 1], specular=0, shininess=0, reflectance=0)
    black = spec.add_material(name=f"{prefix}_black", rgba=[0, 0, 0, 1], specular=0, shininess=0, reflectance=0)
    transform = mount.matrix()
    relief = 1e-4  # m: the black cells stand this far above the white plate (no z-fighting)

    def geom(name: str, centre: np.ndarray, half: tuple[float, float, float], material) -> None:
        body.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_BOX, size=list(half),
                      pos=transform[:3, :3] @ centre + transform[:3, 3], quat=list(mount.quaternion),
                      material=material.name, contype=0, conaffinity=0, group=2, density=0, mass=0)

    half_card, half_cell = marker.card / 2, marker.cell / 2
    geom(f"{prefix}_card", np.array([0, 0, -relief - thickness / 2]), (half_card, half_card, thickness / 2), white)
    centres = marker.cell_centres()
    for r, c in zip(*np.nonzero(marker.bits()), strict=True):
        centre = np.array([*centres[r, c], -relief / 2])
        geom(f"{prefix}_cell_{r}_{c}", centre, (half_cell, half_cell, relief / 2), black)


def marker_model(scene: str | Path = "so101", marker: Marker = MARKER, mount: Mount = NOMINAL_MOUNT) -> mujoco.MjModel:
    """``scene`` (a name or an MJCF path, :func:`~so101_mjx.robot.scenes.scene_path`) compiled with ``marker``
    added at ``mount`` (:func:`add_marker`)."""
    spec = mujoco.MjSpec.from_file(str(scene_path(str(scene))))
    add_marker(spec, marker, mount)
    return spec.compile()
