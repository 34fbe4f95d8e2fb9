"""The ``so101-mjx`` console script (also ``python -m so101_mjx``).

The parser is built from :mod:`so101_mjx.cli.commands` and :mod:`so101_mjx.cli.benches`, which
declare every command's arguments without importing it; the chosen command's module is imported
to run it. A :class:`~so101_mjx.errors.InputError` (bad input: a value, a file, an env name) is
reported as one line with exit status 2, and so is an OSError of the disk (out of space, quota,
read-only, permission, name too long: :data:`so101_mjx._files.DISK_ERRNOS`); any other exception is a
bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from so101_mjx.cli.benches import BENCHES
from so101_mjx.cli.commands import COMMANDS, Command
from so101_mjx._files import DISK_ERRNOS
from so101_mjx.errors import InputError


def _add(sub: argparse._SubParsersAction, name: str, command: Command) -> None:
    parser = sub.add_parser(name, help=command.help, description=command.help)
    command.arguments(parser)
    parser.set_defaults(_module=command.module)


def build_parser() -> argparse.ArgumentParser:
    """The whole ``so101-mjx`` parser; imports no command module (nor JAX, nor MuJoCo)."""
    parser = argparse.ArgumentParser(prog="so101-mjx", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        _add(sub, name, command)
    bench = sub.add_parser("bench", help="benchmarks, each as a ratio against a baseline in the same run")
    bench_sub = bench.add_subparsers(dest="target", required=True)
    for name, command in BENCHES.items():
        _add(bench_sub, name, command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns its exit status (2 for a bad argument or input, usage on stderr)."""
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        args = build_parser().parse_args(argv)
        args._argv = argv  # what a command that runs itself again in other processes passes them (train --num-processes)
    except SystemExit as exit_:  # argparse: usage + one error line (2), or --help (0)
        return int(exit_.code or 0)
    try:
        return int(importlib.import_module(args._module).run(args) or 0)
    except InputError as err:
        print(f"so101-mjx {args.command}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        if err.errno not in DISK_ERRNOS:
            raise
        print(f"so101-mjx {args.command}: error: {DISK_ERRNOS[err.errno]}: {err.filename or err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
