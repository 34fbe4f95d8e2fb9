"""``so101-mjx record``: demonstrations as a LeRobotDataset v3.0 (:func:`so101_mjx.data.record.record`)."""

from __future__ import annotations

import argparse
import importlib.util
import sys

from so101_mjx._interrupts import dataset_kept, interruptible
from so101_mjx.cli import argtypes as types
from so101_mjx.cli.options import (
    BACKEND,
    BACKEND_HELP,
    JOINT_UNITS,
    QUALITY,
    QUALITY_HELP,
    add_camera_spec,
    add_visual_randomization,
)
from so101_mjx.errors import InputError

IMAGE_SIZES = (16, 8192)  # px: the frame sides record writes (so101_mjx.data.record.IMAGE_SIZES)


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("--env", default=None,
                        help="env name (required with --policy scripted; default: the policy's env)")
    parser.add_argument("--policy", default="scripted",
                        help="'scripted', 'demonstrator' (a controller that solves the task: "
                        "PickCube's lifts) or an exported .onnx / .npz policy")
    parser.add_argument("--episodes", type=types.positive_int, required=True,
                        help="episodes to record (kept, with --only-success)")
    parser.add_argument("--out", type=types.output_dir, required=True,
                        help="dataset directory (new and empty, or with --resume)")
    parser.add_argument("--backend", type=BACKEND, default=None, help=BACKEND_HELP)
    parser.add_argument("--image-size", type=types.int_in(*IMAGE_SIZES, "image size"), default=128,
                        help="frame height and width, pixels: even, {} to {}".format(*IMAGE_SIZES))
    parser.add_argument("--image-quality", type=QUALITY, default="shadowed",
                        help=f"{QUALITY_HELP}: shadowed (light meshes with shadows: looks like the gym and lerobot "
                        "envs' camera), fast (no shadows, ~6x faster) or full (the scene as shipped)")
    parser.add_argument("--cameras", default="front", help="comma-separated camera names of the scene")
    add_visual_randomization(parser, "the recording")
    parser.add_argument("--only-success", action="store_true", help="keep successful episodes only")
    parser.add_argument("--max-tries", type=types.positive_int, default=None,
                        help="with --only-success: give up after this many episodes (default 10 x --episodes)")
    parser.add_argument("--fps", type=types.positive_int, default=None,
                        help="frames per second: the env's control rate (the default)")
    parser.add_argument("--seed", type=types.seed, default=0)
    parser.add_argument("--resume", action="store_true",
                        help="append to the dataset at --out (checked for consistency first)")
    parser.add_argument("--repair", action="store_true",
                        help="truncate the dataset at --out to its last complete episode, then append "
                             "(implies --resume)")
    parser.add_argument("--no-video", action="store_true", help="record no camera frames")
    parser.add_argument("--control-mode", choices=("cartesian", "joint"), default="cartesian",
                        help="joint: the follower's action space and feature names (six motor targets, '<motor>.pos'; "
                             "with --policy scripted or demonstrator)")
    parser.add_argument("--joint-units", type=JOINT_UNITS, default="degrees",
                        help="with --control-mode joint: the arm motors' units, degrees or range_m100_100 "
                             "(lerobot's use_degrees=True or False)")
    parser.add_argument("--calibration", type=types.calibration, default=None, metavar="FILE",
                        help="with --control-mode joint: a real follower's lerobot calibration file; the motor "
                             "units follow it")
    parser.add_argument("--env-config", type=types.name_or_json, default=None, metavar="NAME|JSON",
                        help="env config laid over the recording's: one of the task's named variants (e.g. "
                        "PickCube's 'joint-30hz': the follower's 30 Hz with 10 s episodes; docs/training.md), or env "
                        "config fields as JSON, inline or a file")
    add_camera_spec(parser)
    parser.add_argument("--num-envs", type=types.positive_int, default=64, help="worlds simulated at a time")


def env_config(args: argparse.Namespace) -> dict:
    """The env config the options set: ``--env-config``'s entries, then joint mode's (the calibration only when
    one is given)."""
    config: dict = {}
    if args.env_config is not None:
        if isinstance(args.env_config, str) and args.env is None:
            raise InputError(f"--env-config {args.env_config} names a variant of a task: give the task with --env")
        from so101_mjx.training import presets

        config = dict(presets.variant(args.env, args.env_config).config)
    if args.control_mode == "joint":
        extra = {} if args.calibration is None else {"calibration": args.calibration}
        config |= {"control_mode": "joint", "joint_units": args.joint_units, **extra}
    return config


@interruptible("record", lambda args: dataset_kept(args.out))  # SIGTERM as Ctrl-C; either ends in one line, status 130
def run(args: argparse.Namespace) -> int:
    from so101_mjx.data import record

    if not args.no_video and importlib.util.find_spec("imageio_ffmpeg") is None:
        raise InputError("recording video needs imageio-ffmpeg: pip install imageio-ffmpeg (or so101-mjx[viz]), "
                         "or pass --no-video")

    r = record.record(args.env, args.policy, args.episodes, args.out, args.backend,
                      None if args.no_video else args.image_size,
                      tuple(c.strip() for c in args.cameras.split(",")), args.only_success, args.fps,
                      args.seed, args.resume,
                      args.num_envs, args.max_tries, image_quality=args.image_quality, visual=args.visual_randomization,
                      repair=args.repair, config=env_config(args),
                      camera_specs=dict(args.camera_specs or ()))
    print(f"{r['env']} backend={r['backend']} policy={r['policy']} -> {r['out']}")
    print(f"  kept {r['kept']} of {r['tried']} episodes tried ({r['successes']} successful: "
          f"{r['successes'] / max(r['tried'], 1):.3f}), {r['frames']:,} frames; the dataset now holds "
          f"{r['total_episodes']} episodes")
    print(f"  {r['seconds']:.1f} s (compile included): {r['frames'] / r['seconds']:,.1f} frames/s")
    if r["kept"] < args.episodes:
        print(f"  gave up after {r['tried']} tries: {r['kept']} of {args.episodes} episodes recorded", file=sys.stderr)
        return 1
    return 0
