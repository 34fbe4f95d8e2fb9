"""``so101-mjx rollout``: a jitted batched rollout's success rate and env-steps/s
(:func:`so101_mjx.envs.rollout.rollout`)."""

from __future__ import annotations

import argparse

from so101_mjx.cli import argtypes as types
from so101_mjx.cli.options import BACKEND, BACKEND_HELP


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("--env", default="SO101PickPlace-v0")
    parser.add_argument("--num-envs", type=types.positive_int, default=64)
    parser.add_argument("--steps", type=types.steps, default=None,
                        help="control steps (default: the env's episode length)")
    parser.add_argument("--backend", type=BACKEND, default=None, help=BACKEND_HELP)
    parser.add_argument("--policy", type=types.one_of("so101_mjx.envs.rollout", "POLICIES", "policy"), default=None,
                        help="scripted, demonstrator, random or zero (default: the task's scripted controller, zero "
                             "when it has none)")
    parser.add_argument("--action-scale", type=types.positive_float, default=None,
                        help="metres per unit action (default: the scripted controllers' 0.025)")
    parser.add_argument("--fixed-block", action="store_true", help="reference's fixed block/goal instead of random")
    parser.add_argument("--seed", type=types.seed, default=0)
    parser.add_argument("--video", type=types.output_file, default=None,
                        help="render world 0 to this .mp4 or .gif (MuJoCo C)")


def run(args: argparse.Namespace) -> int:
    from so101_mjx.envs import rollout

    rollout.rollout(args.env, args.num_envs, args.steps, backend=args.backend, policy=args.policy,
                    action_scale=args.action_scale,
                    random_positions=not args.fixed_block, seed=args.seed, video=args.video)
    return 0
