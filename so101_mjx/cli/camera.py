"""``so101-mjx camera marker`` and ``so101-mjx camera calibrate DATASET``: the ArUco marker's printable card,
and a fixed camera calibrated from a recording (:mod:`so101_mjx.sysid.camera_command`).
"""

from __future__ import annotations

import argparse

from so101_mjx.cli import argtypes as types
from so101_mjx.cli.options import JOINT_UNITS


def _fovy_or_file(text: str) -> float | str:
    """``--intrinsics``: a vertical field of view in degrees, in (0, 180), or an existing camera file."""
    try:
        value = float(text)
    except ValueError:
        return types.input_file(text)
    if not 0 < value < 180:
        raise types.ArgumentValueError(f"a field of view must be in (0, 180) degrees, got {text!r}")
    return value


def _marker_options(parser: argparse.ArgumentParser) -> None:
    """``--marker-dictionary``, ``--marker-id``, ``--marker-size``."""
    parser.add_argument("--marker-dictionary", default="DICT_4X4_50", help="the cv2.aruco predefined dictionary")
    parser.add_argument("--marker-id", type=types.non_negative_int, default=0, help="the marker's id in the dictionary")
    parser.add_argument("--marker-size", type=types.positive_float, default=0.03,
                        help="side of the printed black square, m (its black border included)")


def marker_arguments(parser: argparse.ArgumentParser) -> None:
    """``camera marker``'s arguments."""
    parser.add_argument("--out", type=types.output_file, default="marker.svg", help="the SVG to write")
    _marker_options(parser)
    parser.add_argument("--marker-margin", type=float, default=0.005, help="white border around it, m (0 or more)")


def calibrate_arguments(parser: argparse.ArgumentParser) -> None:
    """``camera calibrate``'s arguments."""
    parser.add_argument("dataset", help="a LeRobotDataset v3.0 recorded on the arm with the marker on its gripper: the "
                                        "camera's video and observation.state with the six '<motor>.pos'")
    parser.add_argument("--camera-key", default="observation.images.front", help="the camera's video feature")
    parser.add_argument("--intrinsics", type=_fovy_or_file, required=True, metavar="FILE_OR_FOVY",
                        help="a camera file with camera_matrix and dist_coeffs (OpenCV), or a vertical field of view "
                             "in degrees (square pixels, centred, no distortion)")
    parser.add_argument("--refine-intrinsics", action="store_true", help="also fit fx, fy, cx, cy (distortion stays)")
    parser.add_argument("--out", type=types.output_file, default="camera.json",
                        help="the camera file to write; the report goes beside it as <out>.report.json")
    parser.add_argument("--units", type=JOINT_UNITS, default="degrees",
                        help="the arm motors' units in the dataset, degrees or range_m100_100")
    parser.add_argument("--calibration", type=types.calibration, default=None, metavar="FILE",
                        help="the recording follower's lerobot calibration file (default: the scene's joint ranges "
                             "stand for its calibration)")
    parser.add_argument("--scene", default="so101", help="the scene whose kinematics and world frame are used")
    parser.add_argument("--frames", type=types.int_in(4, 500, "frames"), default=40,
                        help="still frames used at most, spread over the recording (4 to 500)")
    parser.add_argument("--max-speed", type=types.positive_float, default=0.1,
                        help="rad/s: a frame is used only where every arm joint moves slower")
    _marker_options(parser)


def _marker(args: argparse.Namespace):
    """The ``--marker-*`` options' marker (``--marker-margin``: ``camera marker`` only)."""
    from so101_mjx.robot.marker import Marker

    margin = {"margin": args.marker_margin} if hasattr(args, "marker_margin") else {}
    return Marker(args.marker_dictionary, args.marker_id, args.marker_size, **margin)


def run(args: argparse.Namespace) -> int:
    from so101_mjx.cli.sysid import report_path
    from so101_mjx.sysid import camera_command

    marker = _marker(args)
    if args.target == "marker":
        camera_command.write_marker(args.out, marker)
        return 0
    report_path(args.out)
    camera_command.calibrate_recording(args.dataset, args.out, args.intrinsics, marker, camera_key=args.camera_key,
                                       refine_intrinsics=args.refine_intrinsics, units=args.units,
                                       calibration=args.calibration,
                                       scene=args.scene, frames=args.frames, max_speed=args.max_speed)
    return 0
