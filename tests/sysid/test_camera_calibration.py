"""Camera calibration from the marker on the gripper (so101_mjx.robot.marker, so101_mjx.sysid.camera):
the pose of a camera hidden in a rendered scene is recovered from its frames and the joint angles."""

from __future__ import annotations

import json
import math
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import mujoco
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from so101_mjx.errors import InputError
from so101_mjx.robot import marker as mk
from so101_mjx.robot.scenes import load_model, scene_path
from so101_mjx.sysid import camera

cv2 = pytest.importorskip("cv2")

WIDTH, HEIGHT, FOVY = 640, 480, 45.0  # the hidden camera's frames
POSES = 16  # rendered frames of the acceptance (<= 20)
F = HEIGHT / 2 / math.tan(math.radians(FOVY) / 2)
K = camera.camera_matrix(F, F, (WIDTH - 1) / 2, (HEIGHT - 1) / 2)  # MuJoCo's pinhole: pixel centres at integers


def look_at(position: np.ndarray, target: np.ndarray, roll: float) -> np.ndarray:
    """(3, 3) OpenCV camera axes (x right, y down, z forward) in the world, rolled by ``roll`` rad about z."""
    forward = (target - position) / np.linalg.norm(target - position)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    axes = np.stack([right, np.cross(forward, right), forward], 1)
    return axes @ Rotation.from_rotvec([0, 0, roll]).as_matrix()


def hidden_scene(seed: int = 7) -> tuple[mujoco.MjModel, np.ndarray, np.ndarray]:
    """The arm with the marker at its nominal mount and a camera ``hidden`` at a random-ish pose looking at the
    workspace: ``(model, position (3,), OpenCV rotation (3, 3))``."""
    rng = np.random.default_rng(seed)
    azimuth, distance = rng.uniform(-1.2, -0.6), rng.uniform(0.5, 0.6)
    target = np.array([0.18, 0.0, 0.12])
    position = target + distance * np.array([math.cos(azimuth), math.sin(azimuth), rng.uniform(0.3, 0.5)])
    rotation = look_at(position, target + rng.uniform(-0.03, 0.03, 3), rng.uniform(-0.2, 0.2))
    spec = mujoco.MjSpec.from_file(str(scene_path("so101")))
    mk.add_marker(spec)
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, (rotation @ np.diag([1.0, -1.0, -1.0])).ravel())  # MuJoCo's camera: -z forward, y up
    spec.worldbody.add_camera(name="hidden", pos=position.tolist(), quat=quat.tolist(), fovy=FOVY)
    spec.worldbody.add_light(pos=[0.3, -0.3, 1.0], dir=[0, 0, -1], diffuse=[0.7, 0.7, 0.7], castshadow=False)
    model = spec.compile()
    model.vis.quality.shadowsize = 0
    return model, position, rotation


def marker_poses(model: mujoco.MjModel, position: np.ndarray, rotation: np.ndarray, count: int,
                 seed: int = 0) -> np.ndarray:
    """(count, nq) varied joint poses with the marker facing the camera (within 50°) inside the frame."""
    rng, found = np.random.default_rng(seed), []
    low, high = model.jnt_range[:5].T * 0.7
    mount = mk.NOMINAL_MOUNT.matrix()
    while len(found) < count:
        q = np.zeros(model.nq)
        q[:5], q[5] = rng.uniform(low, high), 0.3
        pose = camera.body_poses(model, q[None])[0] @ mount
        to_camera = position - pose[:3, 3]
        if pose[2, 3] < 0.05 or pose[:3, 2] @ to_camera < math.cos(math.radians(50)) * np.linalg.norm(to_camera):
            continue
        corners = (pose[:3, :3] @ mk.MARKER.corners().T + pose[:3, 3:]).T
        pixels = camera.project((corners - position) @ rotation, K, np.zeros(5))
        if np.all((pixels > 20) & (pixels < [WIDTH - 20, HEIGHT - 20])):
            found.append(q)
    return np.array(found)


def render(model: mujoco.MjModel, poses: np.ndarray) -> np.ndarray:
    """(N, H, W, 3) the hidden camera's frames of ``poses``."""
    data, frames = mujoco.MjData(model), []
    with mujoco.Renderer(model, HEIGHT, WIDTH) as renderer:
        for q in poses:
            data.qpos[:] = q
            mujoco.mj_forward(model, data)
            renderer.update_scene(data, "hidden")
            frames.append(renderer.render().copy())
    return np.array(frames)


@pytest.fixture(scope="module")
def recording():
    start = time.perf_counter()
    model, position, rotation = hidden_scene()
    poses = marker_poses(model, position, rotation, POSES)
    images = render(model, poses)
    print(f"\nrendered {len(images)} frames in {time.perf_counter() - start:.1f} s")
    return model, position, rotation, poses, images


def errors(fit: camera.CameraFit, position: np.ndarray, rotation: np.ndarray) -> tuple[float, float]:
    """Position error, mm, and rotation error, degrees, of ``fit`` against the truth."""
    return (float(np.linalg.norm(fit.position - position) * 1000),
            float(np.degrees(Rotation.from_matrix(fit.rotation.T @ rotation).magnitude())))


def test_the_hidden_camera_is_recovered(recording):
    """THE ACCEPTANCE: the camera's pose within 2 mm and 0.2° from at most 20 rendered frames."""
    model, position, rotation, poses, images = recording
    start = time.perf_counter()
    fit = camera.calibrate(images, poses, model, K)
    mm, deg = errors(fit, position, rotation)
    print(f"camera: {mm:.3f} mm, {deg:.4f} deg; reprojection RMS {fit.rms_px:.3f} px, max {fit.max_px:.3f} px; "
          f"{len(fit.frames)} of {len(images)} frames, start {fit.start}, {time.perf_counter() - start:.2f} s")
    assert len(fit.frames) >= 12
    assert mm < 2.0 and deg < 0.2
    assert fit.rms_px < 1.0 and fit.max_px < 3.0
    mount = mk.NOMINAL_MOUNT.matrix()
    assert np.linalg.norm(fit.mount_position - mount[:3, 3]) < 2e-3


def test_intrinsics_are_refined_from_a_wrong_guess(recording):
    model, position, rotation, poses, images = recording
    wrong = camera.camera_matrix(F * 1.04, F * 0.97, K[0, 2] + 6, K[1, 2] - 5)
    fit = camera.calibrate(images, poses, model, wrong, refine_intrinsics=True)
    mm, deg = errors(fit, position, rotation)
    focal = np.diag(fit.camera_matrix)[:2] / F - 1
    print(f"refined intrinsics: camera {mm:.3f} mm, {deg:.4f} deg, focal {focal * 100} %, RMS {fit.rms_px:.3f} px")
    assert mm < 5.0 and deg < 0.5 and np.abs(focal).max() < 0.01


def test_robot_world_hand_eye_convention_on_exact_data():
    """cv2.calibrateRobotWorldHandEye, fed (marker in camera, gripper in world), gives back X and Y exactly."""
    rng = np.random.default_rng(1)

    def transform(scale: float) -> np.ndarray:
        out = np.eye(4)
        out[:3, :3], out[:3, 3] = Rotation.random(random_state=rng).as_matrix(), rng.normal(0, scale, 3)
        return out

    x, y = transform(0.5), transform(0.05)
    grippers = np.array([transform(0.3) for _ in range(8)])
    markers = np.linalg.inv(x) @ grippers @ y
    found_x, found_y = camera.hand_eye_start(grippers, markers)
    assert np.abs(found_x - x).max() < 1e-9 and np.abs(found_y - y).max() < 1e-9


def test_no_marker_in_view_is_one_line(recording):
    model, _, _, poses, images = recording
    with pytest.raises(InputError, match=r"marker DICT_4X4_50 id 1 found in 0 of 16 frames \(none of them\)") as err:
        camera.calibrate(images, poses, model, K, marker=mk.Marker(id=1))
    assert "\n" not in str(err.value)
    blank = np.full_like(images, 128)
    blank[:3] = images[:3]
    with pytest.raises(InputError, match=r"found in 3 of 16 frames \(frame 0, frame 1, frame 2\); calibration needs 4"):
        camera.calibrate(blank, poses, model, K)


def test_too_few_frames_is_one_line(recording):
    model, _, _, poses, images = recording
    with pytest.raises(InputError, match="needs at least 4 frames with the marker in view, got 3 frames") as err:
        camera.calibrate(images[:3], poses[:3], model, K)
    assert "\n" not in str(err.value)


def test_poses_that_do_not_determine_the_camera_are_refused(recording):
    model, _, _, poses, images = recording
    with pytest.raises(InputError, match="do not determine the camera"):
        camera.calibrate(np.repeat(images[:1], 5, 0), np.repeat(poses[:1], 5, 0), model, K)


def _rasterize(svg: str, px_per_mm: int) -> tuple[np.ndarray, float]:
    """The SVG's rects drawn into a grey image (white page around it), and its width in mm."""
    root = ET.fromstring(svg)
    width = float(root.get("width").removesuffix("mm"))
    side = root.get("width").removesuffix("mm")
    assert root.get("height") == root.get("width") and root.get("viewBox") == f"0 0 {side} {side}"
    pad = 10 * px_per_mm
    image = np.full((round(width * px_per_mm) + 2 * pad,) * 2, 255, np.uint8)
    for rect in root.iter("{http://www.w3.org/2000/svg}rect"):
        if rect.get("fill", "") == "#ffffff":
            continue
        x, y, w, h = (float(rect.get(k)) * px_per_mm for k in ("x", "y", "width", "height"))
        image[pad + round(y): pad + round(y + h), pad + round(x): pad + round(x + w)] = 0
    return image, width


@pytest.mark.parametrize("marker", [mk.MARKER, mk.Marker("DICT_5X5_100", 42, 0.05, 0.01)], ids=["default", "5x5-42"])
def test_the_svg_has_its_physical_size_and_decodes_to_its_id(marker):
    image, width = _rasterize(mk.svg(marker), 10)
    assert width == pytest.approx(marker.card * 1000)
    found = camera.detect(image, marker)
    assert found is not None
    side = np.linalg.norm(np.diff(found[[0, 1, 2, 3, 0]], axis=0), axis=1) / 10  # mm
    assert np.allclose(side, marker.size * 1000, atol=0.15)


def test_the_marker_command_writes_the_svg_and_bad_values_are_one_line(tmp_path, capsys):
    from so101_mjx import cli

    assert cli.main(["camera", "marker", "--out", str(tmp_path / "m.svg"), "--marker-id", "3"]) == 0
    assert (tmp_path / "m.svg").read_text() == mk.svg(mk.Marker(id=3))
    capsys.readouterr()
    for argv, needle in [(["marker", "--marker-id", "50"], "marker id must be below 50 for DICT_4X4_50"),
                         (["calibrate", str(tmp_path), "--intrinsics", "300"], "field of view must be in (0, 180)")]:
        assert cli.main(["camera", *argv, "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert needle in err and "Traceback" not in err and err.strip().splitlines()[-1].count("error") == 1


def test_the_committed_svg_is_the_default_marker():
    assert (Path(__file__).parents[2] / "docs/img/aruco_4x4_50_id0.svg").read_text() == mk.svg()


def test_the_marker_geoms_change_nothing_but_the_picture():
    plain, marked = load_model("so101"), mk.marker_model("so101")
    names = [marked.geom(i).name for i in range(marked.ngeom)]
    assert not any(n.startswith("aruco") for n in (plain.geom(i).name for i in range(plain.ngeom)))
    assert marked.ngeom - plain.ngeom == 1 + mk.MARKER.bits().sum() and "aruco_card" in names
    for field in ("body_mass", "body_inertia", "body_ipos", "qpos0", "jnt_range"):
        assert np.array_equal(getattr(plain, field), getattr(marked, field)), field
    added = [i for i, n in enumerate(names) if n.startswith("aruco")]
    assert not marked.geom_contype[added].any() and not marked.geom_conaffinity[added].any()


def _dataset(root: Path, model: mujoco.MjModel, poses: np.ndarray, images: np.ndarray, hold: int) -> None:
    """A follower's recording: each pose held for ``hold`` frames, observation.state in degrees, the frames as video."""
    from so101_mjx.data.lerobot_dataset import DatasetWriter, video_feature
    from so101_mjx.robot import motors

    state = np.repeat(motors.to_motor(poses, motors.joint_ranges(model), "degrees"), hold, 0).astype(np.float32)
    vector = {"dtype": "float32", "shape": [6], "names": list(motors.FEATURE_NAMES)}
    key = "observation.images.front"
    features = {"observation.state": vector, "action": vector, key: video_feature(HEIGHT, WIDTH, 30)}
    writer = DatasetWriter(root, features, 30, "so101_follower")
    writer.add_episode({"observation.state": state, "action": state}, "calibrate", {key: np.repeat(images, hold, 0)})
    writer.close()


def test_the_command_writes_a_camera_file(recording, tmp_path, capsys):
    """so101-mjx camera calibrate on a LeRobotDataset (AV1 video) writes a camera file render.camera loads."""
    from so101_mjx import cli
    from so101_mjx.render.camera import camera_setup, load_camera

    model, position, rotation, poses, images = recording
    _dataset(tmp_path / "d", model, poses[:8], images[:8], hold=3)
    out = tmp_path / "cam.json"
    assert cli.main(["camera", "calibrate", str(tmp_path / "d"), "--intrinsics", str(FOVY), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    rms = float(re.search(r"RMS ([0-9.]+) px", printed).group(1))
    spec = load_camera(out)
    fitted = Rotation.from_quat(spec.orientation, scalar_first=True).as_matrix()
    mm = np.linalg.norm(np.asarray(spec.position) - position) * 1000
    deg = np.degrees(Rotation.from_matrix(fitted.T @ rotation).magnitude())
    print(f"command (8 poses, AV1): {mm:.3f} mm, {deg:.4f} deg, RMS {rms} px")
    assert re.search(r"marker found in (\d+) of \1 still frames", printed) and spec.body == "world"
    assert mm < 5 and deg < 0.5
    report = json.loads((tmp_path / "cam.report.json").read_text())
    assert report["frames_used"] >= 8 and report["rms_px"] == pytest.approx(rms, abs=1e-3)
    assert np.allclose(report["mujoco_camera"]["pos"], spec.position)
    applied = camera_setup(model, "hidden", spec, HEIGHT, WIDTH)[0]  # the file, read by the renderer's side
    cam = applied.camera("hidden")
    assert np.allclose(cam.pos, spec.position)
    assert abs(abs(cam.quat @ report["mujoco_camera"]["quat"]) - 1) < 1e-12  # the same rotation (q or -q)
    assert abs(abs(cam.quat @ model.camera("hidden").quat) - 1) < 1e-4  # the hidden camera's own orientation
