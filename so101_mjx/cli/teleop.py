"""``so101-mjx teleop``: drive the simulated arm from the keyboard (:func:`so101_mjx.follower.teleop.teleop`)."""

from __future__ import annotations

import argparse

from so101_mjx.cli import argtypes as types


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("--env", default="SO101PickCube-v0", help="the task whose scene is driven")
    parser.add_argument("--mode", choices=("joint", "cartesian"), default="joint",
                        help="joint: keys move the six motors (q/a w/s e/d r/f t/g y/h); cartesian: the IK target (w/s "
                             "a/d r/f, o/c)")
    parser.add_argument("--step", type=types.positive_float, default=2.0, help="joint mode: motor units per key press")
    parser.add_argument("--action-scale", type=types.positive_float, default=0.01,
                        help="Cartesian mode: metres per key press")
    parser.add_argument("--range-units", action="store_true",
                        help="joint mode: arm motors in -100..100 (lerobot's use_degrees=False)")
    parser.add_argument("--viewer", action="store_true", help="show the arm in MuJoCo's viewer (needs a display)")
    parser.add_argument("--max-steps", type=types.positive_int, default=None,
                        help="stop after this many control periods")
    parser.add_argument("--seed", type=types.seed, default=0)


def run(args: argparse.Namespace) -> int:
    from so101_mjx.follower import teleop

    result = teleop.teleop(args.env, args.mode, step=args.step, action_scale=args.action_scale,
                           use_degrees=not args.range_units,
                           seed=args.seed, viewer=args.viewer, max_steps=args.max_steps)
    print(" ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in result.items()))
    return 0
