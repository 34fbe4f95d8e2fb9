"""The ``so101-mjx`` console script.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and ``run(args) -> int``;
``bench`` targets likewise live in ``so101_mjx.benchmarks``. Modules are imported lazily, so
``so101-mjx info`` starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "info": ("so101_mjx.cli.info", "versions, JAX devices, scenes and envs"),
    "rollout": ("so101_mjx.envs.rollout", "jitted batched rollout: success rate and env-steps/s"),
    "parity": ("so101_mjx.validation.parity", "MJX vs MuJoCo C vs gymnasium vs reference deviations"),
    "train": ("so101_mjx.training.ppo", "Brax PPO training"),
    "export": ("so101_mjx.training.export", "export a checkpoint to ONNX and numpy"),
    "replay": ("so101_mjx.training.replay", "replay an exported policy on CPU MuJoCo"),
    "eval": ("so101_mjx.training.evaluate", "evaluate a checkpoint or exported policy in the jitted env on mjx and/or c"),
    "distill": ("so101_mjx.training.distill", "distil a state policy into a pixel policy with DAgger (backend c camera)"),
    "record": ("so101_mjx.data.record", "record demonstrations as a LeRobotDataset v3.0 (no torch, no lerobot)"),
}
BENCHES: dict[str, tuple[str, str]] = {
    "fk": ("so101_mjx.benchmarks.fk", "FK + Jacobian evaluations/s vs MuJoCo C"),
    "ik": ("so101_mjx.benchmarks.ik", "batched IK solves/s vs the reference numpy solver"),
    "env": ("so101_mjx.benchmarks.env", "env-steps/s vs raw mujoco.rollout and the reference env"),
    "dynamics": ("so101_mjx.benchmarks.dynamics", "M, C, g, ID, FD, regressor evaluations/s vs MuJoCo C"),
    "render": ("so101_mjx.benchmarks.render", "batched camera frames/s vs a plain mujoco.Renderer loop; pixel env cost"),
    "train": ("so101_mjx.benchmarks.train", "PPO env-steps/s vs the raw env rate (collection and SGD shares)"),
    "device": ("so101_mjx.benchmarks.device", "the prepared accelerator check: env, IK, dynamics, PPO; JSON + markdown"),
}


def _available(table: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    out = {}
    for name, (module, help_) in table.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if found:
            out[name] = (module, help_)
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="so101-mjx", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_) in _available(COMMANDS).items():
        p = sub.add_parser(name, help=help_)
        importlib.import_module(module).add_arguments(p)
        p.set_defaults(_module=module)
    benches = _available(BENCHES)
    if benches:
        bench = sub.add_parser("bench", help="benchmarks, each as a ratio against a baseline in the same run")
        bench_sub = bench.add_subparsers(dest="target", required=True)
        for name, (module, help_) in benches.items():
            p = bench_sub.add_parser(name, help=help_)
            importlib.import_module(module).add_arguments(p)
            p.set_defaults(_module=module)
    return parser


# Errors a user's input causes (unknown env, bad value, a path that is missing, a file where a
# directory is needed, ...): reported as one line, exit status 2, no traceback.
USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError)


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns its exit status (2 for a bad argument or input, usage on stderr)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # argparse: usage + one error line (2), or --help (0)
        return int(exit_.code or 0)
    try:
        return int(importlib.import_module(args._module).run(args) or 0)
    except USER_ERRORS as err:
        print(f"so101-mjx {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
