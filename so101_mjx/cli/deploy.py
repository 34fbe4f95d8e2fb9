"""``so101-mjx deploy POLICY``: an exported policy on a follower (:func:`so101_mjx.follower.deploy.deploy`)."""

from __future__ import annotations

import argparse

from so101_mjx._interrupts import INTERRUPTED, interruptible
from so101_mjx.cli import argtypes as types


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("policy",
                        help="exported policy: .onnx or .npz (a pixel student: student.npz); joint or Cartesian "
                                       "mode; or 'excitation', the commands so101-mjx sysid fits the servos to")
    parser.add_argument("--robot.type", dest="robot_type", choices=("so101_mjx", "so101_follower"), default="so101_mjx",
                        help="so101_follower: a real SO-101 through lerobot; so101_mjx: the simulated follower")
    parser.add_argument("--robot.port", dest="port", metavar="ROBOT_PORT", default=None,
                        help="the follower's serial port (so101_follower)")
    parser.add_argument("--robot.id", dest="robot_id", default=None,
                        help="the follower's calibration id (so101_follower)")
    parser.add_argument("--robot.max_relative_target", dest="robot_max_relative_target",
                        type=types.positive_float, default=None,
                        help="motor units per action a target may lie from the measured position (lerobot's clamp)")
    parser.add_argument("--calibration", type=types.calibration, default=None, metavar="FILE",
                        help="the follower's lerobot calibration file when its units differ from the policy's: "
                             "readings and targets are converted through the joint angles (so101_mjx: the simulated "
                             "follower takes its units)")
    parser.add_argument("--robot.front_camera", dest="front_camera", metavar="ROBOT_FRONT_CAMERA", default=None,
                        help="OpenCV index or path of the 'front' camera (a pixel policy on so101_follower)")
    parser.add_argument("--robot.wrist_camera", dest="wrist_camera", metavar="ROBOT_WRIST_CAMERA", default=None,
                        help="OpenCV index or path of the 'wrist' camera (a pixel policy that sees it, on "
                             "so101_follower)")
    parser.add_argument("--episodes", type=types.positive_int, default=1)
    parser.add_argument("--episode-time-s", type=types.positive_float, default=None,
                        help="default: the task's episode length")
    parser.add_argument("--time-limit-s", type=types.positive_float, default=None,
                        help="stop the whole run after this long")
    parser.add_argument("--start-tolerance", type=types.positive_float, default=10.0,
                        help="motor units each arm motor may lie from the start pose before the first action")
    parser.add_argument("--dataset", type=types.output_dir, default=None,
                        help="log observations and actions here as a LeRobotDataset")
    parser.add_argument("--real-time", action="store_true", help="so101_mjx: pace the simulation to the wall clock")
    parser.add_argument("--dry-run", action="store_true", help="compute the actions, send none")
    parser.add_argument("--seed", type=types.seed, default=0, help="so101_mjx: the first episode's scene")
    parser.add_argument("--servo-model", type=types.servo_model, default=None, metavar="JSON",
                        help="so101_mjx: simulate the follower's servos with this servo model (ServoModel's "
                             "fields as a JSON object, or a .json file such as so101-mjx sysid's output)")


@interruptible("deploy", lambda args: "the robot was not connected: nothing was sent")  # a stop before connect()
def run(args: argparse.Namespace) -> int:
    from so101_mjx.follower import deploy

    options = {"port": args.port, "robot_id": args.robot_id, "max_relative_target": args.robot_max_relative_target,
               "real_time": args.real_time, "front_camera": args.front_camera, "wrist_camera": args.wrist_camera}
    result = deploy.deploy(args.policy, args.robot_type, episodes=args.episodes, episode_time_s=args.episode_time_s,
                           time_limit_s=args.time_limit_s, dry_run=args.dry_run, start_tolerance=args.start_tolerance,
                           dataset=args.dataset, seed=args.seed, servo_model=args.servo_model,
                           calibration=args.calibration, **options)
    return INTERRUPTED if result["stopped"] in ("Ctrl-C", "SIGTERM") else 0
