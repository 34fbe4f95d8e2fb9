"""The user's cameras: a calibrated camera's pose, intrinsics, lens distortion and frame latency.

A :class:`CameraSpec` is loaded from a JSON or YAML file in OpenCV's conventions
(:func:`load_camera`) and applied to a named camera of a render model (:func:`camera_setup`)::

    image_width: 640            # px, the calibration's resolution
    image_height: 480
    camera_matrix: [[fx, 0, cx], [0, fy, cy], [0, 0, 1]]   # px; or fovy: 45 (deg), square pixels, centred
    dist_coeffs: [k1, k2, p1, p2, k3]                      # OpenCV's plumb-bob model (default: none)
    body: gripper               # the body it is mounted on ("world": fixed); absent: the scene's
    position: [x, y, z]         # m, in the body's frame
    orientation: [w, x, y, z]   # the OpenCV camera frame in the body's frame (or a 3x3 rotation matrix)
    latency: 0                  # control ticks between the state a frame shows and its observation

Matrices may also be OpenCV FileStorage / ROS mappings ``{rows, cols, data}``. Conventions: OpenCV's
camera looks along +z with x right and y down, pixel centres at integer coordinates; MuJoCo's looks
along -z with y up. The same camera in MuJoCo is the OpenCV frame turned half a turn about its x
axis, ``R_mujoco = R_opencv diag(1, -1, -1)``, i.e. the quaternion ``q_opencv ⊗ (0, -1, 0, 0)``, a
permutation of its entries (exact in floating point). Intrinsics go into MuJoCo's ``fovy`` when the
pixels are square and the principal point is the image centre, else into ``cam_intrinsic`` /
``cam_sensorsize`` / ``cam_resolution`` (in pixels: MuJoCo uses their ratios only), which both the C
renderer and MuJoCo Warp honour: principal point ``cx = (W - 1) / 2 - cam_intrinsic[2]``,
``cy = (H - 1) / 2 - cam_intrinsic[3]`` (measured on both). Lens distortion is a remap of a wider
pinhole render (:mod:`so101_mjx.render.distortion`).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from so101_mjx import _checks as checks, _schema as schema
from so101_mjx.errors import InputError, MissingFileError
from so101_mjx.render import distortion
from so101_mjx.robot import rotations
from so101_mjx.robot.scenes import fit_offscreen, scenes_dir

DIST_NAMES = ("k1", "k2", "p1", "p2", "k3")  # OpenCV's distortion coefficients, in its order
MAX_IMAGE_SIZE = 8192  # px, largest calibration resolution
MAX_LATENCY = 1000  # control ticks
SUFFIXES = (".json", ".yaml", ".yml")


def _matrix(name: str, value: Any, shape: tuple[int, ...], layout: str = "") -> np.ndarray:
    """A nested list or a ``{rows, cols, data}`` mapping (OpenCV FileStorage, ROS) as a finite float64
    array of ``shape``; a vector may come as one row or one column."""
    if isinstance(value, dict):
        if not {"rows", "cols", "data"} <= set(value):
            raise InputError(f"{name} as a mapping needs rows, cols and data, got keys {sorted(value)}")
        data = checks.real_array(name, value["data"], finite=True).reshape(-1)
        rows, cols = (checks.integer(f"{name}.{k}", value[k], ge=1) for k in ("rows", "cols"))
        if data.size != rows * cols:
            raise InputError(f"{name} has rows x cols = {rows} x {cols} but {data.size} data entries")
        value = data.reshape(rows, cols)
    arr = checks.real_array(name, value, finite=True)
    if len(shape) == 1 and arr.size == shape[0] and max(arr.shape, default=1) == arr.size:
        return arr.reshape(shape)
    if arr.shape != shape:
        what = f"{shape[0]} numbers" if len(shape) == 1 else "x".join(map(str, shape))
        raise InputError(f"{name} must be {what}{layout}, got shape {arr.shape}")
    return arr


def _rotation_quat(name: str, value: Any) -> tuple[float, ...]:
    """A unit quaternion (w, x, y, z) from 4 numbers or a 3x3 rotation matrix (columns: the camera's axes)."""
    arr = checks.real_array(name, value, finite=True)
    if arr.shape == (4,):
        if not abs(np.linalg.norm(arr) - 1) <= 1e-3:
            raise InputError(f"{name} must be a unit quaternion (w, x, y, z), norm 1 to 1e-3, "
                             f"got norm {np.linalg.norm(arr):.6g}")
        return tuple(arr.tolist())
    if arr.shape == (3, 3):
        if np.abs(arr.T @ arr - np.eye(3)).max() > 1e-6 or np.linalg.det(arr) < 0:
            raise InputError(f"{name} must be a rotation matrix (orthonormal, det +1), got {arr.tolist()}")
        return tuple(rotations.mat_to_quat_np(arr).tolist())
    raise InputError(f"{name} must be a quaternion [w, x, y, z] or a 3x3 rotation matrix, got shape {arr.shape}")


@dataclasses.dataclass(frozen=True)
class CameraSpec:
    """A calibrated camera (the file's fields, OpenCV conventions); checked at construction.

    Exactly one of ``camera_matrix`` (with ``image_width``/``image_height``) and ``fovy``. ``None``
    pose fields keep the scene camera's own. The defaults otherwise change nothing.
    """

    image_width: int | None = None  # px, the calibration's resolution (with fovy: optional)
    image_height: int | None = None  # px
    camera_matrix: tuple[tuple[float, ...], ...] | None = None  # 3x3 [[fx, 0, cx], [0, fy, cy], [0, 0, 1]], px
    fovy: float | None = None  # deg, vertical field of view: square pixels, principal point at the centre
    dist_coeffs: tuple[float, ...] = (0.0,) * 5  # k1, k2, p1, p2, k3 (OpenCV)
    body: str | None = None  # the body the camera is fixed to ("world": fixed in the world)
    position: tuple[float, ...] | None = None  # m, in the body's frame
    orientation: tuple[float, ...] | None = None  # (w, x, y, z) of the OpenCV camera frame in the body's frame
    latency: int = 0  # control ticks between the state a frame shows and the observation holding it

    def __post_init__(self) -> None:
        """Check every field (naming it) and store plain Python values (JSON-ready)."""
        set_ = object.__setattr__
        if (self.camera_matrix is None) == (self.fovy is None):
            raise InputError("camera needs exactly one of camera_matrix and fovy")
        for name in ("image_width", "image_height"):
            value = getattr(self, name)
            if value is None and self.camera_matrix is not None:
                raise InputError(f"camera.{name} is required with camera_matrix (the resolution it was calibrated at)")
            if value is not None:
                set_(self, name, checks.integer(f"camera.{name}", value, ge=1, le=MAX_IMAGE_SIZE))
        if (self.image_width is None) != (self.image_height is None):
            raise InputError("camera.image_width and camera.image_height go together")
        if self.camera_matrix is not None:
            k = _matrix("camera.camera_matrix", self.camera_matrix, (3, 3))
            if not (k[0, 0] > 0 and k[1, 1] > 0):
                raise InputError(f"camera.camera_matrix needs fx > 0 and fy > 0, got fx={k[0, 0]:g}, fy={k[1, 1]:g}")
            if k[0, 1] != 0 or k[1, 0] != 0 or k[2].tolist() != [0, 0, 1]:
                raise InputError("camera.camera_matrix must be [[fx, 0, cx], [0, fy, cy], [0, 0, 1]] (no skew), "
                                 f"got {k.tolist()}")
            set_(self, "camera_matrix", tuple(tuple(row) for row in k.tolist()))
        if self.fovy is not None:
            set_(self, "fovy", checks.real("camera.fovy", self.fovy, gt=0, le=179, unit=" deg"))
        dist = _matrix("camera.dist_coeffs", self.dist_coeffs, (len(DIST_NAMES),), f" {list(DIST_NAMES)}")
        set_(self, "dist_coeffs", tuple(dist.tolist()))
        if self.body is not None and not (isinstance(self.body, str) and self.body):
            raise InputError(f"camera.body must be a body name, got {self.body!r}")
        if self.position is not None:
            set_(self, "position", tuple(_matrix("camera.position", self.position, (3,)).tolist()))
        if self.orientation is not None:
            set_(self, "orientation", _rotation_quat("camera.orientation", self.orientation))
        set_(self, "latency", checks.integer("camera.latency", self.latency, ge=0, le=MAX_LATENCY))

    @property
    def distorted(self) -> bool:
        """Whether any distortion coefficient is non-zero."""
        return any(self.dist_coeffs)

    def intrinsics(self, width: int, height: int) -> tuple[float, float, float, float]:
        """``(fx, fy, cx, cy)`` px of the image resized to ``width`` x ``height`` (each axis scaled alone)."""
        if self.camera_matrix is None and self.image_width is None:
            assert self.fovy is not None  # checked: exactly one of camera_matrix and fovy
            fy = height / 2 / math.tan(math.radians(self.fovy) / 2)
            return fy, fy, (width - 1) / 2, (height - 1) / 2
        w0, h0 = self.image_width, self.image_height
        assert w0 is not None and h0 is not None  # checked: set together, and required with camera_matrix
        if self.camera_matrix is None:
            assert self.fovy is not None  # checked: exactly one of camera_matrix and fovy
            f = h0 / 2 / math.tan(math.radians(self.fovy) / 2)
            fx, fy, cx, cy = f, f, (w0 - 1) / 2, (h0 - 1) / 2
        else:
            (fx, _, cx), (_, fy, cy), _ = self.camera_matrix
        sx, sy = width / w0, height / h0
        return fx * sx, fy * sy, (cx + 0.5) * sx - 0.5, (cy + 0.5) * sy - 0.5

    def check_body(self, model: mujoco.MjModel, source: str = "camera") -> None:
        """InputError naming ``source`` unless ``body`` is None or one of ``model``'s bodies."""
        if self.body is not None and mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, self.body) < 0:
            names = [model.body(i).name for i in range(model.nbody)]
            raise InputError(f"{source}: field 'body' must be one of the model's bodies {names}, got {self.body!r}")


def spec_from_model(model: mujoco.MjModel, camera: str) -> CameraSpec:
    """The spec of ``model``'s own ``camera`` (a fixed camera given by fovy: its fovy, body and pose):
    applying it changes nothing."""
    cam = model.camera(camera)
    w, x, y, z = (float(v) for v in cam.quat)
    return CameraSpec(fovy=float(cam.fovy[0]), body=model.body(int(cam.bodyid[0])).name,
                      position=tuple(float(v) for v in cam.pos), orientation=(-x, w, z, -y))


def camera_files() -> list[str]:
    """Names of the shipped camera files (``scenes/cameras/<name>.json``)."""
    return sorted(p.stem for p in (scenes_dir() / "cameras").glob("*.json"))


def _read(path: Path) -> Any:
    """The JSON or YAML value in ``path``; InputError naming the file when it is not valid text of that kind."""
    if path.suffix == ".json":
        return schema.read_json(path)
    try:
        text = path.read_text()
    except (UnicodeDecodeError, OSError) as err:
        raise InputError(f"{path}: unreadable as text ({type(err).__name__})") from None
    try:
        import yaml
    except ImportError:
        raise InputError(f"{path}: reading YAML needs PyYAML: pip install pyyaml") from None

    class Loader(yaml.SafeLoader):
        """YAML with OpenCV FileStorage's ``!!opencv-matrix`` mappings."""

    Loader.add_constructor("tag:yaml.org,2002:opencv-matrix",
                           lambda loader, node: loader.construct_mapping(node, deep=True))
    if text.startswith("%YAML:1.0"):  # OpenCV's header, not a YAML 1.1 directive
        text = text.split("\n", 1)[1] if "\n" in text else ""
    try:
        return yaml.load(text, Loader=Loader)
    except yaml.YAMLError as err:
        raise InputError(f"{path}: not valid YAML ({' '.join(str(err).split())[:200]})") from None


def load_camera(path: str | Path, model: mujoco.MjModel | None = None) -> CameraSpec:
    """The :class:`CameraSpec` in a ``.json``/``.yaml``/``.yml`` file, or a shipped one by name
    (:func:`camera_files`); with ``model``, its ``body`` is checked too. Every error is one
    InputError line naming the file and the field."""
    if str(path) in camera_files():
        path = scenes_dir() / "cameras" / f"{path}.json"
    path = Path(path)
    if path.suffix not in SUFFIXES:
        raise InputError(f"camera file must end in one of {SUFFIXES} or be one of {camera_files()}, got {str(path)!r}")
    if not path.is_file():
        raise MissingFileError(f"camera file not found: {path}")
    data = _read(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: must hold a mapping of camera fields, got {type(data).__name__}")
    try:
        spec = checks.dataclass_from_dict(CameraSpec, "camera", data)
    except InputError as err:
        raise InputError(f"{path}: {err}") from None
    if model is not None:
        spec.check_body(model, str(path))
    return spec


def parse(value: CameraSpec | dict | str | Path) -> CameraSpec:
    """A camera option: a :class:`CameraSpec`, its dict form (``dataclasses.asdict``), or a file path or name."""
    if isinstance(value, CameraSpec):
        return value
    if isinstance(value, dict):
        return checks.dataclass_from_dict(CameraSpec, "camera", value)
    if isinstance(value, (str, Path)):
        return load_camera(value)
    raise InputError(f"camera must be a CameraSpec, its dict form or a camera file, got {value!r}")


def capture_size(option: Any) -> dict[str, int]:
    """A real camera's capture ``{"width", "height"}`` (px): its camera option's calibrated resolution, else 640 x
    480."""
    spec = parse(option) if option is not None else None
    if spec is not None and spec.image_width is not None and spec.image_height is not None:  # set together
        return {"width": spec.image_width, "height": spec.image_height}
    return {"width": 640, "height": 480}


def parse_specs(value: Any, cameras: tuple[str, ...],
                field: str = "image_cameras") -> tuple[tuple[str, CameraSpec], ...] | None:
    """A config's ``camera_specs``: None, or a mapping (or ``(camera, option)`` pairs) from the cameras
    rendered (the config's ``field``) to camera options (:func:`parse`), as ``((camera, CameraSpec), ...)``
    in ``cameras``' order."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
        value = dict(value)
    if not isinstance(value, dict) or not value:
        raise InputError("camera_specs must be None or a non-empty mapping image camera -> camera file or spec, "
                         f"got {value!r:.80}")
    unknown = [c for c in value if c not in cameras]
    if unknown:
        raise InputError(f"camera_specs names {unknown}, which are not among {field} {list(cameras)}")
    out = []
    for name in (c for c in cameras if c in value):
        try:
            out.append((name, parse(value[name])))
        except InputError as err:
            raise InputError(f"camera_specs[{name!r}]: {err}") from None
    return tuple(out)


def _set_pose(model: mujoco.MjModel, cam: int, spec: CameraSpec) -> None:
    if spec.body is not None:
        model.cam_bodyid[cam] = model.body(spec.body).id
        model.cam_mode[cam] = mujoco.mjtCamLight.mjCAMLIGHT_FIXED
        model.cam_targetbodyid[cam] = -1
    if spec.position is not None:
        model.cam_pos[cam] = spec.position
    if spec.orientation is not None:
        w, x, y, z = spec.orientation
        quat = np.array([x, -w, -z, y])  # q_opencv ⊗ (0, -1, 0, 0): MuJoCo's -z view, y up
        mujoco.mju_normalize4(quat)  # unchanged when already unit (to 1e-15)
        model.cam_quat[cam] = quat


def _set_intrinsics(model: mujoco.MjModel, cam: int, fx: float, fy: float, cx: float, cy: float,
                    width: int, height: int) -> None:
    """A pinhole camera ``fx, fy, cx, cy`` (px, OpenCV) drawing ``width`` x ``height`` pixels."""
    model.cam_sensorsize[cam] = (width, height)  # in pixels: MuJoCo uses ratios only
    model.cam_intrinsic[cam] = (fx, fy, (width - 1) / 2 - cx, (height - 1) / 2 - cy)
    model.cam_resolution[cam] = (width, height)
    fit_offscreen(model, height, width)


def camera_setup(model: mujoco.MjModel, camera: str | int, spec: CameraSpec | None, height: int,
                 width: int) -> tuple[mujoco.MjModel, tuple[int, int], distortion.Remap | None]:
    """What a renderer of ``camera``'s (height, width) frames draws: ``(model, (render height, render
    width), remap)``. Without ``spec``: ``model`` itself, the same size, no remap. With one: a copy of
    ``model`` with the camera's pose and intrinsics set, and, for a distorting lens, the wider
    pinhole render's size and the :class:`~so101_mjx.render.distortion.Remap` that bends it."""
    if spec is None:
        return model, (height, width), None
    cam = camera if isinstance(camera, int) else mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    if not 0 <= cam < model.ncam:
        raise InputError(f"camera {camera!r} is not a camera of the model")
    spec.check_body(model)
    model = copy.copy(model)
    _set_pose(model, cam, spec)
    fx, fy, cx, cy = spec.intrinsics(width, height)
    if spec.distorted:
        remap, (fx, fy, cx, cy), (height, width) = distortion.build(fx, fy, cx, cy, spec.dist_coeffs, width, height)
        _set_intrinsics(model, cam, fx, fy, cx, cy, width, height)
        return model, (height, width), remap
    centred = math.isclose(cx, (width - 1) / 2, abs_tol=1e-9) and math.isclose(cy, (height - 1) / 2, abs_tol=1e-9)
    if centred and math.isclose(fx, fy, rel_tol=1e-12):
        model.cam_fovy[cam] = spec.fovy if spec.fovy is not None else math.degrees(2 * math.atan(height / 2 / fy))
        model.cam_sensorsize[cam] = 0  # fovy, not intrinsics
    else:
        _set_intrinsics(model, cam, fx, fy, cx, cy, width, height)
    return model, (height, width), None
