"""``so101-mjx evaluate POLICY --suite NAME``: the command's thin layer over :mod:`so101_mjx.training.suites`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from so101_mjx.cli import argtypes as types
from so101_mjx.cli.options import BACKEND


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("policy", help="a checkpoint (run or step directory), an exported .onnx / .npz, a pixel "
                        "student, or lerobot:DIR (a lerobot policy directory, e.g. lerobot-train's pretrained_model; "
                        "needs lerobot)")
    parser.add_argument("--env", default=None,
                        help="the task a lerobot policy runs in (default SO101PickCube-v0); our policies run in "
                        "their own")
    parser.add_argument("--suite", type=types.name_or_json, default="smoke",
                        help="'smoke' (3 conditions, 16 episodes), 'standard' (every condition, 128 episodes), or "
                        "a JSON file {\"episodes\": N, \"conditions\": [NAME | {\"name\": ..., "
                        "\"env_config\": {...}}]}")
    parser.add_argument("--episodes", type=types.positive_int, default=None,
                        help="episodes per condition (default: the suite's)")
    parser.add_argument("--seed", type=types.seed, default=0,
                        help="the episodes' seed: the same episodes in every cell and for --compare")
    parser.add_argument("--backend", type=BACKEND, default="c", help="physics backend (default c)")
    parser.add_argument("--compare", default=None,
                        help="a second policy on the same episodes: per-condition differences and McNemar's test")
    parser.add_argument("--out", type=types.output_file, default="evaluate",
                        help="results base path: OUT.json and OUT.md (and OUT.png with --plot); default ./evaluate")
    parser.add_argument("--plot", action="store_true",
                        help="also plot success per condition with its interval (matplotlib)")


def run(args: argparse.Namespace) -> int:
    from so101_mjx._files import atomic_write
    from so101_mjx.training import suites

    suites.suite(args.suite, "--suite")  # a bad suite is refused naming the option
    result = suites.run_suite(args.policy, args.suite, seed=args.seed, backend=args.backend, episodes=args.episodes,
                              env=args.env)
    comparison = None
    if args.compare:
        other = suites.run_suite(args.compare, args.suite, seed=args.seed, backend=args.backend, episodes=args.episodes,
                                 env=args.env)
        comparison = suites.compare(result, other)
        result = {**result, "compared_with": other, "comparison": comparison}
    table = suites.markdown(result, comparison)
    print(table, end="")
    out = Path(args.out)
    atomic_write(out.with_suffix(".json"), json.dumps(result, indent=1))
    atomic_write(out.with_suffix(".md"), table)
    written = [out.with_suffix(".json"), out.with_suffix(".md")]
    if args.plot:
        suites.plot(result, out.with_suffix(".png"))
        written.append(out.with_suffix(".png"))
    print("results: " + "  ".join(str(p) for p in written))
    return 0
