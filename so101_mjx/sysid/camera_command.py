"""``so101-mjx camera marker`` and ``so101-mjx camera calibrate DATASET``.

``marker`` writes the ArUco marker's card as a printable SVG at its physical size
(:func:`so101_mjx.robot.marker.svg`). ``calibrate`` reads a LeRobotDataset v3.0 recorded on the arm with
the marker on its gripper (frames of ``--camera-key``'s video, ``observation.state`` in the follower's
motor units), keeps the frames where the arm holds still (every arm joint slower than ``--max-speed``),
up to ``--frames`` of them spread over the recording, calibrates the camera
(:func:`so101_mjx.sysid.camera.calibrate`) and writes ``--out``: a camera file
(:class:`~so101_mjx.render.camera.CameraSpec`'s fields: ``camera_matrix``, ``dist_coeffs``, ``image_width``,
``image_height``, ``body: world``, ``position`` m and ``orientation`` (w, x, y, z) of the OpenCV camera
frame), and beside it ``<out>.report.json``: the reprojection errors (RMS, max, per frame), the marker's
fitted mount, the frames used and the camera as an MJCF ``<camera pos quat>`` (MuJoCo's convention: it looks
along -z, y up).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from so101_mjx._files import atomic_write
from so101_mjx.data import lerobot_format as fmt
from so101_mjx.data.dataset_check import read_episodes, read_info
from so101_mjx.errors import InputError, ParameterError
from so101_mjx.robot import motors, rotations
from so101_mjx.robot.marker import NOMINAL_MOUNT, Marker, write_svg
from so101_mjx.robot.scenes import ROBOT_JOINTS, joint_qpos_ids, load_model
from so101_mjx.sysid import camera
from so101_mjx.sysid.dataset import check_range, motor_indices, motor_positions

STATE = "observation.state"
MAX_FRAMES = 500  # frames decoded and fitted at most


@dataclasses.dataclass(frozen=True)
class Frames:
    """The chosen frames of a recording: (N, H, W, 3) RGB ``images``, joint angles ``q`` (N, 6) rad in
    :data:`~so101_mjx.robot.scenes.ROBOT_JOINTS` order, ``labels`` naming them (episode and frame)."""

    images: np.ndarray
    q: np.ndarray
    labels: tuple[str, ...]
    still: int  # frames where the arm held still, of which these were chosen


def _video_feature(info: dict[str, Any], key: str, root: Path) -> tuple[int, int]:
    """``(height, width)`` px of video feature ``key``; InputError naming the dataset's video keys otherwise."""
    feature = info["features"].get(key)
    if feature is None or feature.get("dtype") != "video":
        keys = [k for k, f in info["features"].items() if f.get("dtype") == "video"]
        raise ParameterError(f"{root} has no video feature {key!r}; its video features: {keys} (camera_key)",
                             "camera_key")
    height, width = feature["shape"][:2]
    return int(height), int(width)


def _still(q: np.ndarray, fps: float, max_speed: float) -> np.ndarray:
    """(T,) bool: frames of one episode where every arm joint of ``q`` (T, 6) rad moves below ``max_speed``
    rad/s (central differences; one-sided at the ends)."""
    if len(q) < 2:
        return np.zeros(len(q), bool)
    speed = np.abs(np.gradient(q[:, :5], axis=0)) * fps
    return speed.max(1) <= max_speed


def _decode(path: Path, wanted: list[int], height: int, width: int) -> np.ndarray:
    """(len(wanted), H, W, 3) uint8: frames ``wanted`` (sorted, distinct, 0-based) of the video at ``path``,
    decoded by imageio-ffmpeg's ffmpeg (run in the video's folder on its bare name)."""
    import imageio_ffmpeg

    select = "+".join(f"eq(n\\,{n})" for n in wanted)
    command = [imageio_ffmpeg.get_ffmpeg_exe(), "-nostdin", "-loglevel", "error", "-i", path.name, "-map", "0:v:0",
               "-vf", f"select='{select}'", "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
    done = subprocess.run(command, cwd=path.parent, capture_output=True)
    size = height * width * 3
    if done.returncode != 0 or len(done.stdout) != size * len(wanted):
        why = done.stderr.decode(errors="replace").strip()[-300:] or f"{len(done.stdout) // size} frames decoded"
        raise InputError(f"{path}: cannot read its frames {wanted[0]}..{wanted[-1]} of {width}x{height}: {why}")
    return np.frombuffer(done.stdout, np.uint8).reshape(len(wanted), height, width, 3)


def read_frames(root: str | Path, key: str, *, units: str = "degrees", calibration=None, scene: str = "so101",
                frames: int = 40, max_speed: float = 0.1) -> Frames:
    """Up to ``frames`` still frames of ``key``'s video, evenly spread over the recording, with their joint
    angles (``observation.state`` read in ``units`` under ``calibration``, else the ``scene``'s joint ranges).
    InputError for a dataset without the features, with positions outside the motors' ranges, or without
    a frame where the arm holds still."""
    root = Path(root)
    info = read_info(root)
    height, width = _video_feature(info, key, root)
    where = motor_indices(info, STATE, root, "camera calibrate", (STATE,))
    ranges = motors.joint_ranges(load_model(scene))
    columns = ("episode_index", "frame_index", "timestamp", STATE)
    paths = fmt.files(root, "data/")
    if not paths:
        raise InputError(f"{root} has no data files (data/chunk-*/file-*.parquet)")
    table = pa.concat_tables([fmt.read_columns(p, list(columns), required=columns) for p in paths])
    episodes = {row["episode_index"]: row for row in read_episodes(root).to_pylist()}
    candidates = []  # (episode, frame_index, timestamp, q)
    for episode in np.unique(table["episode_index"].to_numpy()):
        rows = table.filter(pc.equal(table["episode_index"], episode)).sort_by("frame_index")
        name = f"{root}: episode {episode}'s {STATE!r}"
        values = motor_positions(rows, STATE, where, info["features"][STATE]["shape"][0], name)
        check_range(values, motors.motor_limits(ranges, units, calibration), units, name)
        q = np.asarray(motors.from_motor(values, ranges, units, calibration))
        keep = np.nonzero(_still(q, float(info["fps"]), max_speed))[0]
        stamps, numbers = rows["timestamp"].to_numpy(), rows["frame_index"].to_numpy()
        candidates += [(int(episode), int(numbers[i]), float(stamps[i]), q[i]) for i in keep]
    if not candidates:
        raise ParameterError(f"{root}: the arm never holds still (every arm joint below {max_speed} rad/s): hold "
                             "each pose for a few frames while recording, or raise max_speed", "max_speed")
    spread = np.linspace(0, len(candidates) - 1, min(frames, len(candidates))).round().astype(int)
    chosen = [candidates[i] for i in np.unique(spread)]
    images = _images(root, key, info, episodes, chosen, height, width)
    labels = tuple(f"episode {e} frame {f}" for e, f, _, _ in chosen)
    return Frames(images, np.array([c[3] for c in chosen]), labels, len(candidates))


def _images(root: Path, key: str, info: dict, episodes: dict, chosen: list, height: int, width: int) -> np.ndarray:
    """The video frames of the ``chosen`` (episode, frame, timestamp, q), in their order."""
    prefix, fps = f"videos/{key}/", float(info["fps"])
    by_file: dict[Path, dict[int, int]] = {}
    for i, (episode, _, stamp, _) in enumerate(chosen):
        row = episodes.get(episode)
        if row is None or row.get(prefix + "chunk_index") is None:
            raise InputError(f"{root}: meta/episodes has no {key} video for episode {episode}")
        path = root / fmt.file_path(prefix, (row[prefix + "chunk_index"], row[prefix + "file_index"]))
        by_file.setdefault(path, {})[i] = round((row[prefix + "from_timestamp"] + stamp) * fps)
    images = np.zeros((len(chosen), height, width, 3), np.uint8)
    for path, numbers in by_file.items():
        wanted = sorted(set(numbers.values()))
        decoded = dict(zip(wanted, _decode(path, wanted, height, width), strict=True))
        for i, n in numbers.items():
            images[i] = decoded[n]
    return images


def intrinsics(value: float | str, width: int, height: int) -> tuple[np.ndarray, np.ndarray]:
    """``(K (3, 3), dist (5,))`` for ``width`` x ``height`` frames from a vertical field of view in degrees
    (square pixels, centred principal point, no distortion) or a camera file
    (:func:`~so101_mjx.render.camera.load_camera`, scaled to the frames' size)."""
    from so101_mjx.render.camera import CameraSpec, load_camera

    spec = CameraSpec(fovy=value) if isinstance(value, float) else load_camera(value)
    return camera.camera_matrix(*spec.intrinsics(width, height)), np.asarray(spec.dist_coeffs, np.float64)


def camera_file(fit: camera.CameraFit, width: int, height: int) -> dict[str, Any]:
    """The fit as a camera file's fields (:class:`~so101_mjx.render.camera.CameraSpec`, fixed in the world)."""
    from so101_mjx.render.camera import CameraSpec

    quat = rotations.mat_to_quat_np(fit.rotation)
    spec = CameraSpec(image_width=width, image_height=height, camera_matrix=fit.camera_matrix.tolist(),
                      dist_coeffs=fit.dist_coeffs.tolist(), body="world", position=fit.position.tolist(),
                      orientation=quat.tolist())
    return dataclasses.asdict(spec)


def report(fit: camera.CameraFit, frames: Frames, settings: dict[str, Any]) -> dict[str, Any]:
    """The report's JSON: settings, errors, the marker's mount, the frames used and the MJCF camera."""
    quat = rotations.mat_to_quat_np(fit.rotation @ np.diag([1.0, -1.0, -1.0]))  # MuJoCo's camera: -z view, y up
    mount = rotations.mat_to_quat_np(fit.mount_rotation)
    per_frame = fit.frame_rms_px()
    return {
        **settings, "frames_still": frames.still, "frames_read": len(frames.labels), "frames_used": len(fit.frames),
        "rms_px": fit.rms_px, "max_px": fit.max_px, "start": fit.start,
        "frame_rms_px": {frames.labels[i]: float(e) for i, e in zip(fit.frames, per_frame, strict=True)},
        "no_marker": [frames.labels[i] for i in range(len(frames.labels)) if i not in fit.frames],
        "marker_mount": {"body": NOMINAL_MOUNT.body, "position": fit.mount_position.tolist(),
                         "quaternion": mount.tolist()},
        "mujoco_camera": {"pos": fit.position.tolist(), "quat": quat.tolist(),
                          "mode": "fixed in the world; looks along -z, y up"},
    }


def calibrate_recording(path: str, out: str, intrinsics_of: float | str, marker: Marker, *,
                        camera_key: str = "observation.images.front", refine_intrinsics: bool = False,
                        units: str = "degrees", calibration=None, scene: str = "so101", frames: int = 40,
                        max_speed: float = 0.1) -> camera.CameraFit:
    """Calibrate the camera of ``camera_key`` from the recording at ``path`` (:func:`read_frames`' still frames, the
    ``marker`` on the gripper, :func:`intrinsics` from ``intrinsics_of``); write :func:`camera_file` to ``out`` and
    :func:`report` to ``<out>.report.json``, and return the fit."""
    report_file = Path(out).with_suffix(".report.json")
    model = load_model(scene)
    chosen = read_frames(path, camera_key, units=units, calibration=calibration, scene=scene, frames=frames,
                         max_speed=max_speed)
    height, width = chosen.images.shape[1:3]
    k, dist = intrinsics(intrinsics_of, width, height)
    qpos = np.tile(model.qpos0, (len(chosen.q), 1))
    qpos[:, joint_qpos_ids(model, ROBOT_JOINTS)] = chosen.q
    fit = camera.calibrate(chosen.images, qpos, model, k, dist, marker=marker, refine_intrinsics=refine_intrinsics,
                           labels=chosen.labels)
    settings = {"dataset": str(Path(path).resolve()), "camera_key": camera_key, "intrinsics": intrinsics_of,
                "refine_intrinsics": refine_intrinsics, "units": units, "scene": scene,
                "marker": dataclasses.asdict(marker), "max_speed": max_speed}
    atomic_write(out, json.dumps(camera_file(fit, width, height), indent=2) + "\n")
    atomic_write(report_file, json.dumps(report(fit, chosen, settings), indent=2) + "\n")
    print(f"camera calibrate: marker found in {len(fit.frames)} of {len(chosen.labels)} still frames; "
          f"reprojection error RMS {fit.rms_px:.3f} px, max {fit.max_px:.3f} px")
    if refine_intrinsics:
        (fx, _, cx), (_, fy, cy), _ = fit.camera_matrix
        print(f"intrinsics: fx {fx:.2f}, fy {fy:.2f}, cx {cx:.2f}, cy {cy:.2f} px")
    print(f"camera at {np.round(fit.position, 4).tolist()} m in the world; wrote {out} and {report_file}")
    return fit


def write_marker(out: str, marker: Marker) -> None:
    """``marker``'s card as a printable SVG at ``out`` (an unknown dictionary or id fails before writing)."""
    marker.bits()
    write_svg(out, marker)
    print(f"camera marker: wrote {out}: ArUco {marker.dictionary} id {marker.id}, black square "
          f"{marker.size * 1000:g} mm on a {marker.card * 1000:g} mm card; print at 100 % and check the square with "
          "a ruler")
