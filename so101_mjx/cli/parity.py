"""``so101-mjx parity``: MJX vs MuJoCo C vs gymnasium vs reference deviations (:mod:`so101_mjx.validation.parity`)."""

from __future__ import annotations

import argparse
import json
import time

from so101_mjx.cli import argtypes as types


def arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    parser.add_argument("--x64", action="store_true", help="float64 (the contract's precision); default float32")
    parser.add_argument("--episodes", dest="n_episodes", metavar="EPISODES", type=types.non_negative_int, default=256,
                        help="seeds of the scripted pick-and-place (0 skips)")
    parser.add_argument("--steps", dest="n_steps", metavar="STEPS", type=types.steps, default=None,
                        help="control steps of the open-loop episodes (default: the longest horizon, 200)")
    parser.add_argument("--json", type=types.output_file, default=None, help="also write the results to this JSON file")


def run(args: argparse.Namespace) -> int:
    import jax

    from so101_mjx._files import atomic_write
    from so101_mjx.validation import parity

    jax.config.update("jax_enable_x64", bool(args.x64))
    t0 = time.perf_counter()
    results = parity.run_all(args.n_episodes, max(parity.HORIZONS) if args.n_steps is None else args.n_steps)
    results["seconds"] = time.perf_counter() - t0
    print(parity.format_table(results))
    if args.json:
        atomic_write(args.json, json.dumps(results, indent=1))
    return 0
