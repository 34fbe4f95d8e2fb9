"""Identification of a fixed camera from a recording: its pose in the world, optionally its intrinsics,
from frames of the arm with an ArUco marker on its gripper and the joint angles of the same frames
(eye-to-hand).

Per frame the marker's four corners are detected (``cv2.aruco.ArucoDetector``, sub-pixel corners) and the
gripper's pose ``G_i`` (world <- gripper) comes from forward kinematics (MuJoCo's, float64) of the joint
readings. The unknowns are the camera's pose ``X`` (world <- OpenCV camera: x right, y down, z along the
view) and the marker's mount ``Y`` (gripper <- marker); a marker corner ``p`` is seen at
``project(K, d, X^-1 G_i Y p)``. Two starts: OpenCV's robot-world/hand-eye solution
(``cv2.calibrateRobotWorldHandEye``, Shah's method, on each frame's ``solvePnP`` of the marker) and the
nominal mount (each frame's ``G_i Y_0 P_i^-1``, averaged); each is refined by nonlinear least squares
(``scipy.optimize.least_squares``) on the reprojection error of all corners over all frames, with
``fx, fy, cx, cy`` too when asked, and the better fit is kept.

OpenCV's robot-world/hand-eye problem is ``cTw_i wTb = cTg gTb_i`` (``A_i X = Z B_i``); eye-to-hand, its
world is our marker, its gripper our world (the arm's base), its base our gripper. Its inputs are then the
marker's pose in the camera (``P_i``, camera <- marker) and the gripper's pose in the world (``G_i``, world
<- gripper, *not* inverted); its ``gripper2cam`` output (``cTg``) is ``X^-1`` (camera <- world) and its
``base2world`` output (``wTb``) is ``Y^-1`` (marker <- gripper). tests/sysid/test_camera_calibration.py
checks both on exact data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import mujoco
import numpy as np

from so101_mjx.errors import InputError
from so101_mjx.robot.marker import MARKER, NOMINAL_MOUNT, Marker, Mount, cv2_module

MIN_FRAMES = 4  # frames with the marker found that a calibration needs
INTRINSICS = ("fx", "fy", "cx", "cy")
_DEGENERATE = 1e-7  # smallest singular value of the column-scaled Jacobian, relative to the largest


@dataclasses.dataclass(frozen=True)
class CameraFit:
    """A calibrated camera and how well it explains the frames.

    ``rotation`` (3, 3) holds the OpenCV camera frame's axes (columns) in the world, ``position`` (3,) m
    its origin; ``mount_rotation``/``mount_position`` the marker frame in the gripper's. ``frames`` are
    the indices (into the input) of the frames used, ``residuals`` (len(frames), 4, 2) px the fit's
    reprojection errors of their corners (projected minus detected).
    """

    rotation: np.ndarray
    position: np.ndarray
    mount_rotation: np.ndarray
    mount_position: np.ndarray
    camera_matrix: np.ndarray  # (3, 3) px
    dist_coeffs: np.ndarray  # (5,) OpenCV's k1, k2, p1, p2, k3
    frames: tuple[int, ...]
    residuals: np.ndarray
    start: str  # which start the kept fit came from: "hand-eye" or "nominal mount"

    @property
    def rms_px(self) -> float:
        """Root mean square of the corners' reprojection distances, px."""
        return float(np.sqrt(np.mean(np.sum(self.residuals**2, -1))))

    @property
    def max_px(self) -> float:
        """Largest corner reprojection distance, px."""
        return float(np.max(np.linalg.norm(self.residuals, axis=-1)))

    def frame_rms_px(self) -> np.ndarray:
        """(len(frames),) each frame's RMS reprojection distance, px."""
        return np.sqrt(np.mean(np.sum(self.residuals**2, -1), -1))


def camera_matrix(fx: float, fy: float, cx: float, cy: float) -> np.ndarray:
    """(3, 3) OpenCV's ``[[fx, 0, cx], [0, fy, cy], [0, 0, 1]]`` px."""
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


def detect(image: np.ndarray, marker: Marker = MARKER) -> np.ndarray | None:
    """(4, 2) px: ``marker``'s corners in an (H, W, 3) RGB or (H, W) grey uint8 ``image`` (``cv2.aruco``'s
    order, pixel centres at integer coordinates), or None when it is not found."""
    cv2 = cv2_module("camera calibration")
    image = np.asarray(image)
    grey = image if image.ndim == 2 else cv2.cvtColor(np.ascontiguousarray(image[..., :3]), cv2.COLOR_RGB2GRAY)
    params = cv2.aruco.DetectorParameters()
    params.cornerRefinementMethod = cv2.aruco.CORNER_REFINE_SUBPIX
    corners, ids, _ = cv2.aruco.ArucoDetector(marker.aruco_dictionary(), params).detectMarkers(grey)
    found = [c for c, i in zip(corners, [] if ids is None else ids.ravel(), strict=True) if i == marker.id]
    return np.asarray(found[0], np.float64).reshape(4, 2) if len(found) == 1 else None


def body_poses(model: mujoco.MjModel, qpos: np.ndarray, body: str = "gripper") -> np.ndarray:
    """(T, 4, 4) world <- ``body`` transforms by MuJoCo's forward kinematics (float64) of ``qpos`` (T, model.nq)."""
    qpos = np.asarray(qpos, np.float64)
    if qpos.ndim != 2 or qpos.shape[1] != model.nq:
        raise InputError(f"joint positions must have shape (frames, {model.nq}), got {qpos.shape}")
    index = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
    if index < 0:
        raise InputError(f"the model has no body {body!r} (the marker's mount)")
    data = mujoco.MjData(model)
    poses = np.tile(np.eye(4), (len(qpos), 1, 1))
    for i, q in enumerate(qpos):
        data.qpos[:] = q
        mujoco.mj_kinematics(model, data)
        poses[i, :3, :3], poses[i, :3, 3] = data.xmat[index].reshape(3, 3), data.xpos[index]
    return poses


def project(points: np.ndarray, k: np.ndarray, dist: np.ndarray) -> np.ndarray:
    """(..., 2) px: OpenCV's projection (plumb-bob distortion) of camera-frame ``points`` (..., 3) m."""
    x, y = points[..., 0] / points[..., 2], points[..., 1] / points[..., 2]
    k1, k2, p1, p2, k3 = dist
    r2 = x * x + y * y
    radial = 1 + r2 * (k1 + r2 * (k2 + r2 * k3))
    xd = x * radial + 2 * p1 * x * y + p2 * (r2 + 2 * x * x)
    yd = y * radial + p1 * (r2 + 2 * y * y) + 2 * p2 * x * y
    return np.stack([k[0, 0] * xd + k[0, 2], k[1, 1] * yd + k[1, 2]], -1)


def _transform(rotvec: np.ndarray, translation: np.ndarray) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    out = np.eye(4)
    out[:3, :3], out[:3, 3] = Rotation.from_rotvec(rotvec).as_matrix(), translation
    return out


def _params(transform: np.ndarray) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    return np.concatenate([Rotation.from_matrix(transform[:3, :3]).as_rotvec(), transform[:3, 3]])


def _inverse(transform: np.ndarray) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = transform[:3, :3].T
    out[:3, 3] = -transform[:3, :3].T @ transform[:3, 3]
    return out


def _marker_poses(corners: np.ndarray, k: np.ndarray, dist: np.ndarray, marker: Marker,
                  labels: list[str]) -> np.ndarray:
    """(N, 4, 4) camera <- marker of each frame's corners (N, 4, 2), ``solvePnP`` (IPPE for squares)."""
    cv2 = cv2_module("camera calibration")
    poses = np.tile(np.eye(4), (len(corners), 1, 1))
    for i, c in enumerate(corners):
        ok, rvec, tvec = cv2.solvePnP(marker.corners(), c, k, dist, flags=cv2.SOLVEPNP_IPPE_SQUARE)
        if not ok:
            raise InputError(f"solvePnP found no pose of the marker in {labels[i]}")
        poses[i, :3, :3], poses[i, :3, 3] = cv2.Rodrigues(rvec)[0], tvec.ravel()
    return poses


def hand_eye_start(grippers: np.ndarray, markers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(X, Y)`` (4, 4) each from ``cv2.calibrateRobotWorldHandEye`` given the gripper poses in the world
    ``grippers`` (N, 4, 4) and the marker poses in the camera ``markers`` (N, 4, 4) (see the module doc)."""
    cv2 = cv2_module("camera calibration")
    r_yi, t_yi, r_xi, t_xi = cv2.calibrateRobotWorldHandEye(  # cv2.error on degenerate poses (the caller's fallback)
        list(markers[:, :3, :3]), list(markers[:, :3, 3:]), list(grippers[:, :3, :3]), list(grippers[:, :3, 3:]))
    y_inverse, x_inverse = np.eye(4), np.eye(4)
    y_inverse[:3, :3], y_inverse[:3, 3] = r_yi, np.ravel(t_yi)
    x_inverse[:3, :3], x_inverse[:3, 3] = r_xi, np.ravel(t_xi)
    return _inverse(x_inverse), _inverse(y_inverse)


def nominal_start(grippers: np.ndarray, markers: np.ndarray, mount: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(X, Y)``: each frame's camera pose ``G_i Y_0 P_i^-1`` under the ``mount`` ``Y_0`` (4, 4), averaged."""
    from scipy.spatial.transform import Rotation

    each = grippers @ mount @ np.array([_inverse(p) for p in markers])
    x = np.eye(4)
    x[:3, :3], x[:3, 3] = Rotation.from_matrix(each[:, :3, :3]).mean().as_matrix(), each[:, :3, 3].mean(0)
    return x, mount


class _Problem:
    """The reprojection residuals of all corners as a function of ``[X (6), Y (6), fx, fy, cx, cy]``."""

    def __init__(self, corners: np.ndarray, grippers: np.ndarray, k: np.ndarray, dist: np.ndarray,
                 marker: Marker, refine_intrinsics: bool):
        self.corners, self.grippers, self.k, self.dist = corners, grippers, k, dist
        self.points = np.concatenate([marker.corners(), np.ones((4, 1))], 1).T  # (4, 4): homogeneous columns
        self.refine_intrinsics = refine_intrinsics

    def pack(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        intrinsics = [self.k[0, 0], self.k[1, 1], self.k[0, 2], self.k[1, 2]] if self.refine_intrinsics else []
        return np.concatenate([_params(x), _params(y), intrinsics])

    def unpack(self, params: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        k = camera_matrix(*params[12:16]) if self.refine_intrinsics else self.k
        return _transform(params[:3], params[3:6]), _transform(params[6:9], params[9:12]), k

    def residuals(self, params: np.ndarray) -> np.ndarray:
        """(N, 4, 2) px: projected minus detected corners."""
        x, y, k = self.unpack(params)
        in_camera = np.einsum("ij,njk,kl,lm->nmi", _inverse(x), self.grippers, y, self.points)[..., :3]
        return project(in_camera, k, self.dist) - self.corners

    def solve(self, x: np.ndarray, y: np.ndarray):
        from scipy.optimize import least_squares

        return least_squares(lambda p: self.residuals(p).ravel(), self.pack(x, y), method="lm", x_scale="jac",
                             xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=2000)


def solve(corners: Sequence[np.ndarray | None], grippers: np.ndarray, k: np.ndarray, dist: np.ndarray | None = None, *,
          marker: Marker = MARKER, mount: Mount = NOMINAL_MOUNT, refine_intrinsics: bool = False,
          labels: Sequence[str] | None = None) -> CameraFit:
    """Calibrate from each frame's detected ``corners`` ((4, 2) px, or None where the marker was not found)
    and gripper pose ``grippers`` (N, 4, 4) world <- gripper, under intrinsics ``k`` (3, 3) and ``dist`` (5,).

    ``labels`` name the frames in messages (default ``frame <i>``). InputError, one line: fewer than
    :data:`MIN_FRAMES` frames, or the marker found in fewer (naming where it was found), or poses that do
    not determine the camera (too little rotation of the gripper between frames).
    """
    grippers = np.asarray(grippers, np.float64)
    dist = np.zeros(5) if dist is None else np.asarray(dist, np.float64).reshape(5)
    k = np.asarray(k, np.float64)
    labels = list(labels) if labels is not None else [f"frame {i}" for i in range(len(corners))]
    if len(corners) != len(grippers) or len(labels) != len(corners):
        raise InputError(f"{len(corners)} frames of corners, {len(grippers)} gripper poses and {len(labels)} labels; "
                         "they must be as many")
    if len(corners) < MIN_FRAMES:
        raise InputError(f"camera calibration needs at least {MIN_FRAMES} frames with the marker in view, got "
                         f"{len(corners)} frames: record more poses")
    used = tuple(i for i, c in enumerate(corners) if c is not None)
    if len(used) < MIN_FRAMES:
        where = ", ".join(labels[i] for i in used[:10]) or "none of them"
        raise InputError(f"marker {marker.dictionary} id {marker.id} found in {len(used)} of {len(corners)} frames "
                         f"({where}); calibration needs {MIN_FRAMES}: check that the marker faces the camera, is in "
                         "focus and matches the marker's dictionary and id")
    found = np.array([corners[i] for i in used], np.float64).reshape(-1, 4, 2)
    grippers = grippers[list(used)]
    problem = _Problem(found, grippers, k, dist, marker, refine_intrinsics)
    markers = _marker_poses(found, k, dist, marker, [labels[i] for i in used])
    starts = {"nominal mount": nominal_start(grippers, markers, mount.matrix())}
    try:
        starts["hand-eye"] = hand_eye_start(grippers, markers)
    except cv2_module().error:  # degenerate poses: the nominal start alone, and the check below says why
        pass
    fits = {name: problem.solve(*start) for name, start in starts.items() if np.all(np.isfinite(start[0]))}
    name = min(fits, key=lambda n: fits[n].cost)
    result = fits[name]
    _check_determined(result.jac, labels, used)
    x, y, k_fit = problem.unpack(result.x)
    return CameraFit(rotation=x[:3, :3], position=x[:3, 3], mount_rotation=y[:3, :3], mount_position=y[:3, 3],
                     camera_matrix=k_fit, dist_coeffs=dist, frames=used, residuals=problem.residuals(result.x),
                     start=name)


def _check_determined(jac: np.ndarray, labels: list[str], used: tuple[int, ...]) -> None:
    """InputError when the fit's Jacobian (columns scaled to unit norm) is rank-deficient: the frames leave
    the camera's pose undetermined."""
    jac = np.asarray(jac)
    scaled = jac / np.maximum(np.linalg.norm(jac, axis=0), 1e-300)
    s = np.linalg.svd(scaled, compute_uv=False)
    if s[-1] < _DEGENERATE * s[0]:
        raise InputError(f"the {len(used)} frames with the marker ({labels[used[0]]} ...) do not determine the camera: "
                         "rotate the gripper about at least two different axes between frames (wrist flex and roll, "
                         "shoulder pan) and move it across the view")


def calibrate(images: Sequence[np.ndarray] | np.ndarray, qpos: np.ndarray, model: mujoco.MjModel, k: np.ndarray,
              dist: np.ndarray | None = None, *, marker: Marker = MARKER, mount: Mount = NOMINAL_MOUNT,
              refine_intrinsics: bool = False, labels: Sequence[str] | None = None) -> CameraFit:
    """:func:`solve` from ``images`` (N of (H, W, 3) RGB uint8) and the joint positions ``qpos`` (N, model.nq)
    rad of the same instants: the marker detected in each (:func:`detect`), the ``mount.body`` poses by
    forward kinematics of ``model`` (:func:`body_poses`)."""
    if len(images) != len(qpos):
        raise InputError(f"{len(images)} images but {len(qpos)} joint readings; calibration needs one reading per "
                         "image")
    grippers = body_poses(model, qpos, mount.body)
    return solve([detect(image, marker) for image in images], grippers, k, dist, marker=marker, mount=mount,
                 refine_intrinsics=refine_intrinsics, labels=labels)
