"""``so101-mjx eval POLICY``: a policy in the jitted env on mjx and/or c
(:func:`so101_mjx.training.evaluate.evaluate`)."""

from __future__ import annotations

import argparse
import json

from so101_mjx.cli import argtypes as types


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("policy", help="checkpoint (run, checkpoints/ or step directory) or exported .onnx / .npz")
    parser.add_argument("--env", default=None, help="env name (default: the policy's; another one needs --force)")
    parser.add_argument("--backend", default="c", help="mjx, c, or both as mjx,c (same seeds: outcome agreement)")
    parser.add_argument("--episodes", type=types.positive_int, default=100,
                        help="episodes per backend (vmapped worlds)")
    parser.add_argument("--seed", type=types.seed, default=0)
    parser.add_argument("--x64", action="store_true", help="float64 (default float32)")
    parser.add_argument("--force", action="store_true", help="run in an --env other than the policy's")
    parser.add_argument("--servo-model", type=types.servo_model_or_off, default=None, metavar="JSON",
                        help="run under this servo model instead of the policy's "
                             "(so101_mjx.sim.servo.ServoModel's fields as a JSON object, {} for the defaults, or a "
                             ".json file), or without one: off")
    parser.add_argument("--visual-randomization", type=types.visual_randomization_or_off, default=None,
                        metavar="standard|wide|JSON|off",
                        help="a pixel policy's frames under this visual randomization instead of its own (a "
                             "level, or a JSON object of VisualRandomization's fields), or none: off")
    parser.add_argument("--physics-dt", type=types.positive_float, default=None, metavar="S",
                        help="physics step in s instead of the policy's (e.g. 0.002, the reference's, for a policy "
                             "trained at a coarser step)")
    parser.add_argument("--json", type=types.output_file, default=None,
                        help="also write the results (per-episode outcomes too) to this file")


def backends(text: str) -> tuple[str, ...]:
    """``"mjx,c"`` -> ``("mjx", "c")``; InputError naming ``--backend`` for anything else."""
    from so101_mjx.errors import InputError
    from so101_mjx.sim.physics import BACKENDS

    names = tuple(b.strip() for b in text.split(","))
    if not names or any(b not in BACKENDS for b in names) or len(set(names)) != len(names):
        raise InputError(f"--backend must be one or more of {BACKENDS} separated by commas, got {text!r}")
    return names


def run(args: argparse.Namespace) -> int:
    from so101_mjx._files import atomic_write
    from so101_mjx.training import evaluate

    result = evaluate.evaluate(args.policy, args.env, backends(args.backend), args.episodes, args.seed, args.x64,
                               args.force, args.servo_model, args.visual_randomization,
                               args.physics_dt)
    if args.json:
        atomic_write(args.json, json.dumps(result, indent=1))
        print(f"results: {args.json}")
    return 0
