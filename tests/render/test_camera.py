"""The user's cameras (so101_mjx.render.camera): camera files, intrinsics and pose, lens distortion, latency."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")

from so101_mjx.envs import make  # noqa: E402
from so101_mjx.errors import InputError  # noqa: E402
from so101_mjx.render import batch, distortion  # noqa: E402
from so101_mjx.render.camera import CameraSpec, camera_setup, load_camera, spec_from_model  # noqa: E402
from so101_mjx.render.frames import FrameRenderer  # noqa: E402

GOOD = {"image_width": 640, "image_height": 480, "camera_matrix": [[520.0, 0, 330.0], [0, 500.0, 230.0], [0, 0, 1]],
        "dist_coeffs": [-0.2, 0.05, 0.001, -0.002, 0.0], "body": "mount", "position": [0.01, 0.02, -0.03],
        "orientation": [1, 0, 0, 0], "latency": 1}
OPENCV_YAML = """%YAML:1.0
---
image_width: 640
image_height: 480
camera_matrix: !!opencv-matrix
   rows: 3
   cols: 3
   dt: d
   data: [ 520., 0., 330., 0., 500., 230., 0., 0., 1. ]
dist_coeffs: !!opencv-matrix
   rows: 1
   cols: 5
   dt: d
   data: [ -0.2, 0.05, 0.001, -0.002, 0. ]
body: mount
position: [0.01, 0.02, -0.03]
orientation: [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
latency: 1
"""
# red spheres at known world points (m), seen from a camera on the tilted "mount" body
POINTS = [(0, 0, 0), (0.12, 0.08, 0.0), (-0.15, -0.09, 0.02), (0.16, -0.1, -0.03), (-0.13, 0.1, 0.01)]
MOUNT_POS = np.array([0.05, -0.02, 0.6])
MOUNT_QUAT = np.array([0.9, 0.1, 0.05, 0.2]) / np.linalg.norm([0.9, 0.1, 0.05, 0.2])
VISUAL = ('<visual><global offwidth="640" offheight="480"/>'
          '<headlight ambient="1 1 1" diffuse="0 0 0" specular="0 0 0"/></visual>')
SPHERES = "".join(f'<geom type="sphere" size="0.006" pos="{x} {y} {z}" rgba="1 0 0 1"/>' for x, y, z in POINTS)
SCENE = (f'<mujoco>{VISUAL}<statistic extent="1" center="0 0 0"/><worldbody><body name="mount" pos="0.05 -0.02 0.6" '
         f'quat="{" ".join(map(str, MOUNT_QUAT))}"><camera name="cam" fovy="45"/></body>'
         f'<body name="points"><joint type="slide"/>{SPHERES}</body></worldbody></mujoco>')  # nq = 1, at 0


def _write(tmp_path, data, name="camera.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data) if name.endswith(".json") else data)
    return path


def _rotation(quat):
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, np.asarray(quat, np.float64))
    return mat.reshape(3, 3)


def test_a_camera_file_loads_from_json_and_from_opencv_yaml(tmp_path):
    spec = load_camera(_write(tmp_path, GOOD))
    # matrices as !!opencv-matrix, the orientation as a 3x3 rotation
    assert spec == load_camera(_write(tmp_path, OPENCV_YAML, "camera.yaml"))
    assert spec.intrinsics(640, 480) == (520.0, 500.0, 330.0, 230.0) and spec.distorted and spec.latency == 1
    assert spec.intrinsics(320, 240) == (260.0, 250.0, 164.75, 114.75)  # resized: pixel centres at integers
    assert CameraSpec(**dataclasses.asdict(spec)) == spec  # the dict form (a config's JSON) round-trips


@pytest.mark.parametrize("change, field", [
    ({"camera_matrix": [[520.0, 0, 330.0], [0, 500.0, 230.0]]}, "camera_matrix"),
    ({"camera_matrix": [[0.0, 0, 330.0], [0, 500.0, 230.0], [0, 0, 1]]}, "fx > 0"),
    ({"camera_matrix": [[520.0, 3, 330.0], [0, 500.0, 230.0], [0, 0, 1]]}, "no skew"),
    ({"dist_coeffs": [0.1, 0.0, 0.0, 0.0]}, "dist_coeffs"),
    ({"latency": -1}, "latency"),
    ({"latency": 1.5}, "latency"),
    ({"image_width": None}, "image_width"),
    ({"fovy": 45}, "exactly one of camera_matrix and fovy"),
    ({"orientation": [[1, 0, 0], [0, 1, 0], [0, 0, 2]]}, "orientation"),
    ({"position": [0, 0]}, "position"),
    ({"focal": 3}, "unknown camera field"),
    ({"body": "nowhere"}, "body"),
    ({"dist_coeffs": [-3.0, 0, 0, 0, 0]}, "dist_coeffs"),  # folds over inside the image: refused where it is applied
])
def test_a_bad_camera_file_is_one_line_naming_the_file_and_the_field(tmp_path, change, field):
    path = _write(tmp_path, {k: v for k, v in {**GOOD, **change}.items() if v is not None})
    with pytest.raises(InputError) as err:
        spec = load_camera(path, mujoco.MjModel.from_xml_string(SCENE))
        FrameRenderer(mujoco.MjModel.from_xml_string(SCENE), 48, 64, "cam", spec=spec)
    message = str(err.value)
    assert "\n" not in message and field in message
    assert str(path) in message or "dist_coeffs" in field


@pytest.mark.parametrize("text, expected", [("{", "not valid JSON"), ("[1, 2]", "mapping of camera fields")])
def test_a_broken_camera_file_is_one_line(tmp_path, text, expected):
    path = tmp_path / "camera.json"
    path.write_text(text)
    with pytest.raises(InputError, match=expected):
        load_camera(path)


def test_a_spec_at_the_scene_cameras_own_values_is_bitwise_neutral(tmp_path):
    """Each scene camera written to a file (fovy, body, pose in OpenCV's frame) and applied: the same model
    arrays, the same frames."""
    model = batch.render_model("pick_cube", "fast")
    qpos = np.tile(model.qpos0, (2, 1))
    qpos[1, :5] += 0.3
    for camera in ("front", "wrist"):
        spec = load_camera(_write(tmp_path, dataclasses.asdict(spec_from_model(model, camera)), f"{camera}.json"))
        applied, size, remap = camera_setup(model, camera, spec, 32, 32)
        assert size == (32, 32) and remap is None
        for field in ("cam_bodyid", "cam_pos", "cam_quat", "cam_fovy", "cam_mode", "cam_sensorsize", "cam_intrinsic"):
            assert getattr(applied, field).tobytes() == getattr(model, field).tobytes(), field
        frames = []
        for s in (None, spec):
            renderer = batch.BatchRenderer(model, 32, 32, camera, workers=1, spec=s)
            try:
                frames.append(renderer.render(qpos))
            finally:
                renderer.close()
        assert frames[0].tobytes() == frames[1].tobytes()


def _centroids(frame):
    """Intensity-weighted centres (x, y) px of the red blobs."""
    mask = ((frame[..., 0] > 60) & (frame[..., 1] < 60)).astype(np.uint8)
    count, labels = cv2.connectedComponents(mask)
    out = []
    for i in range(1, count):
        ys, xs = np.nonzero(labels == i)
        w = frame[ys, xs, 0].astype(float)
        out.append(((xs * w).sum() / w.sum(), (ys * w).sum() / w.sum()))
    return np.array(out)


def _projected(spec, width, height):
    """``POINTS`` projected by OpenCV with the spec's pose (on the mount body), intrinsics and distortion."""
    r_body = _rotation(MOUNT_QUAT)
    r_cam = r_body @ _rotation(spec.orientation)
    t_cam = MOUNT_POS + r_body @ np.asarray(spec.position)
    fx, fy, cx, cy = spec.intrinsics(width, height)
    rvec, _ = cv2.Rodrigues(r_cam.T)
    k = np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1.0]])
    points, _ = cv2.projectPoints(np.array(POINTS, float), rvec, -r_cam.T @ t_cam, k, np.asarray(spec.dist_coeffs))
    return points.reshape(-1, 2)


@pytest.mark.parametrize("dist", [(0.0,) * 5, (-0.2, 0.05, 0.001, -0.002, 0.0)])
def test_a_camera_from_a_file_renders_where_projection_predicts(tmp_path, dist):
    """Off-centre principal point, non-square pixels, a tilted mount body, at the calibration's resolution and
    half of it: each sphere's centre is within 0.25 px of OpenCV's projection (measured ≤ 0.08 px)."""
    r_world = np.diag([1.0, -1.0, -1.0])  # OpenCV camera looking straight down, image x along world x
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, (_rotation(MOUNT_QUAT).T @ r_world).reshape(-1))
    spec = load_camera(_write(tmp_path, {**GOOD, "dist_coeffs": list(dist), "orientation": quat.tolist()}))
    model = mujoco.MjModel.from_xml_string(SCENE)
    for width, height in ((640, 480), (320, 240)):
        renderer = FrameRenderer(model, height, width, "cam", shadows=False, spec=spec)
        try:
            frame = renderer.frame(np.zeros(1))
        finally:
            renderer.close()
        found, expected = _centroids(frame), _projected(spec, width, height)
        assert frame.shape == (height, width, 3) and len(found) == len(POINTS)
        error = np.linalg.norm(found[:, None] - expected[None], axis=-1).min(axis=1)
        assert error.max() < 0.25, (width, error)
    c = batch.BatchRenderer(model, height, width, "cam", workers=1, shadows=False, spec=spec)  # the worker path
    try:
        assert c.render(np.zeros((1, 1)))[0].tobytes() == frame.tobytes()
    finally:
        c.close()


def _line_deviation(image, inner=(8, 6)):
    """Largest distance (px) of a detected chessboard corner from the straight line fitted to its row or column."""
    gray = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
    ok, corners = cv2.findChessboardCorners(gray, inner)
    assert ok
    criteria = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 100, 1e-4)
    corners = cv2.cornerSubPix(gray, corners, (5, 5), (-1, -1), criteria).reshape(inner[1], inner[0], 2)
    worst = 0.0
    for line in (*corners, *corners.transpose(1, 0, 2)):
        centred = line - line.mean(axis=0)
        normal = np.linalg.svd(centred)[2][1]
        worst = max(worst, float(np.abs(centred @ normal).max()))
    return worst


def test_a_distorted_checkerboard_is_straight_again_under_cv2_undistort():
    """The acceptance: a 9x7 board rendered through a barrel lens bends (measured 2.6 px off straight
    lines); cv2.undistort with the same coefficients straightens it to ≤ 0.5 px (measured 0.14 px)."""
    squares = "".join(f'<geom type="box" size="0.02 0.02 0.0005" pos="{(i - 4) * 0.04} {(j - 3) * 0.04} 0.001" '
                      'rgba="0 0 0 1"/>' for i in range(9) for j in range(7) if (i + j) % 2 == 0)
    model = mujoco.MjModel.from_xml_string(f'<mujoco>{VISUAL}<statistic extent="1" center="0 0 0"/><worldbody>'
                                           '<camera name="cam"/><geom type="box" size="0.5 0.5 0.0005" rgba="1 1 1 1"/>'
                                           f'{squares}</worldbody></mujoco>')
    k = [[400.0, 0, 245.0], [0, 400.0, 175.0], [0, 0, 1]]
    dist = [-0.25, 0.06, 0.0005, -0.0005, 0.0]
    spec = CameraSpec(image_width=480, image_height=360, camera_matrix=k, dist_coeffs=dist, body="world",
                      position=(0, 0, 0.34), orientation=(0, 1, 0, 0))  # OpenCV's camera looking down
    renderer = FrameRenderer(model, 360, 480, "cam", shadows=False, spec=spec)
    try:
        frame = renderer.frame(np.zeros(0))
    finally:
        renderer.close()
    bent, straight = _line_deviation(frame), _line_deviation(cv2.undistort(frame, np.array(k), np.array(dist)))
    print(f"max corner deviation from straight lines: distorted {bent:.3f} px, undistorted {straight:.3f} px")
    assert bent > 1.5 and straight <= 0.5


def test_the_numpy_and_jax_distortion_maps_give_the_same_frames():
    remap, _, (h, w) = distortion.build(60.0, 55.0, 33.0, 30.0, (-0.3, 0.08, 0.002, 0.001, -0.01), 64, 60)
    assert remap.shape == (60, 64) and remap.source == (h, w) and (h, w) > (60, 64)
    frames = np.random.default_rng(0).integers(0, 256, (3, h, w, 3), np.uint8)
    expected = distortion.remap_numpy(remap, frames)
    assert expected.shape == (3, 60, 64, 3) and expected.dtype == np.uint8
    jitted = jax.jit(lambda f: distortion.remap_jax(remap, f))
    assert np.asarray(jitted(jnp.asarray(frames))).tobytes() == expected.tobytes()
    vmapped = jax.jit(jax.vmap(lambda f: distortion.remap_jax(remap, f)))
    assert np.asarray(vmapped(jnp.asarray(frames))).tobytes() == expected.tobytes()


def test_the_menagerie_wrist_camera_is_a_named_default_that_leaves_the_scene_alone():
    model = batch.render_model("pick_cube", "fast")
    spec = load_camera("menagerie_wrist", model)
    assert spec.body == "gripper" and spec.position == (0.0, 0.055, -0.045)
    assert spec.intrinsics(1920, 1080) == (1200.0, 1200.0, 959.5, 539.5)
    applied = camera_setup(model, "wrist", spec, 48, 64)[0]
    turn = np.zeros(4)
    mujoco.mju_axisAngle2Quat(turn, np.array([1.0, 0, 0]), -0.57)  # MuJoCo Menagerie: euler="-0.57 0 0"
    np.testing.assert_allclose(applied.cam_quat[applied.camera("wrist").id], turn, atol=1e-12)
    assert model.camera("wrist").pos.tolist() == [0, -0.04, -0.03]  # the scene's own wrist camera is unchanged


@pytest.mark.slow
def test_camera_latency_delays_the_pixels_by_control_ticks():
    """A front camera with latency 2 shows at step t the frame of step t - 2 (the reset's before that);
    without camera_specs the state carries no frame queue."""
    key, action = jax.random.PRNGKey(0), jnp.array([0.5, -0.5, 0.3, 1.0])
    plain = make("SO101Reach-v0", "c", image_obs=True, image_size=16)
    front = spec_from_model(plain.cameras["front"].model, "front")
    late = make("SO101Reach-v0", "c", image_obs=True, image_size=16,
                camera_specs={"front": dataclasses.replace(front, latency=2)})
    frames = {}
    for name, env in (("plain", plain), ("late", late)):
        state, seen = jax.jit(env.reset)(key), []
        step = jax.jit(env.step)
        for _ in range(4):
            seen.append(np.asarray(state.obs["pixels/front"]))
            state = step(state, action)
        frames[name] = seen
    assert plain.reset(key).info.frames is None
    assert not np.array_equal(frames["plain"][0], frames["plain"][3])  # the arm moved
    for t, frame in enumerate(frames["late"]):
        np.testing.assert_array_equal(frame, frames["plain"][max(t - 2, 0)])


def test_camera_specs_are_checked_with_the_config():
    with pytest.raises(InputError, match="not among image_cameras"):
        make("SO101Reach-v0", "c", image_obs=True, camera_specs={"wrist": "menagerie_wrist"})
    with pytest.raises(InputError, match="need image_obs=True"):
        make("SO101Reach-v0", "c", camera_specs={"front": "menagerie_wrist"})
