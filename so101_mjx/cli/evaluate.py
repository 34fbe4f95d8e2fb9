"""``so101-mjx evaluate POLICY --suite NAME``: the command's thin layer over :mod:`so101_mjx.training.suites`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def run(args: argparse.Namespace) -> int:
    from so101_mjx._files import atomic_write
    from so101_mjx.training import suites

    result = suites.run_suite(args.policy, args.suite, seed=args.seed, backend=args.backend, episodes=args.episodes)
    comparison = None
    if args.compare:
        other = suites.run_suite(args.compare, args.suite, seed=args.seed, backend=args.backend, episodes=args.episodes)
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
