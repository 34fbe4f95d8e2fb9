"""The ``so101-mjx`` console script (also ``python -m so101_mjx``).

The parser is built from :mod:`so101_mjx.cli.commands` and :mod:`so101_mjx.cli.benches`, which
declare every command's arguments without importing it; the chosen command's module is imported
to run it. A :class:`~so101_mjx.errors.InputError` (bad input: a value, a file, an env name) is
reported as one line with exit status 2 (the parameters a :class:`~so101_mjx.errors.ParameterError`
names written as the command's options), and so is an OSError of the disk (out of space, quota,
read-only, permission, name too long: :data:`so101_mjx._files.DISK_ERRNOS`). A
:class:`~so101_mjx.errors.SetupError` (no GL backend, no display) is one line with exit status 1,
and so is a ``MUJOCO_GL`` that would make ``import mujoco`` fail (checked before a command runs).
Any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import ctypes.util
import importlib
import os
import re
import sys

from so101_mjx._files import DISK_ERRNOS
from so101_mjx.cli.benches import BENCHES
from so101_mjx.cli.commands import CAMERA, COMMANDS, Command
from so101_mjx.errors import InputError, ParameterError, SetupError

# MUJOCO_GL values mujoco's GL context module accepts on Linux; for the offscreen ones, the library it loads
MUJOCO_GL_VALUES = ("", "enable", "enabled", "on", "true", "1", "disable", "disabled", "off", "false", "0", "glfw",
                    "glx", "egl", "osmesa")
MUJOCO_GL_LIBRARIES = {"egl": ("EGL", "libegl1"), "osmesa": ("OSMesa", "libosmesa6")}
# Commands with subcommands: name -> (help, subcommands)
GROUPS = {"bench": ("benchmarks, each as a ratio against a baseline in the same run", BENCHES),
          "camera": ("the ArUco marker for the gripper, and a fixed camera's calibration from a recording", CAMERA)}


def mujoco_gl_problem() -> str | None:
    """Why ``import mujoco`` would fail under this ``MUJOCO_GL`` (Linux), or None."""
    value = os.environ.get("MUJOCO_GL", "").lower().strip()
    if not sys.platform.startswith("linux"):
        return None
    if value not in MUJOCO_GL_VALUES:
        return f"MUJOCO_GL must be one of ['egl', 'glfw', 'glx', 'osmesa'] (or unset), got {value!r}"
    if value in MUJOCO_GL_LIBRARIES and ctypes.util.find_library(MUJOCO_GL_LIBRARIES[value][0]) is None:
        library, package = MUJOCO_GL_LIBRARIES[value]
        return (f"MUJOCO_GL={value!r} needs lib{library}, which is not installed (Debian: {package}); "
                "install it or choose another MUJOCO_GL")
    return None


def _add(sub: argparse._SubParsersAction, name: str, command: Command) -> None:
    parser = sub.add_parser(name, help=command.help, description=command.help)
    command.arguments(parser)
    parser.set_defaults(_module=command.module, _options={a.dest: a for a in parser._actions if a.option_strings})


def spelled(err: InputError, options: dict[str, argparse.Action]) -> str:
    """The message of ``err`` with each parameter a :class:`ParameterError` names written as the option of that
    destination in ``options`` (``steps`` -> ``--steps``; a switch's ``force=True`` -> ``--force``)."""
    text = str(err)
    for name in err.parameters if isinstance(err, ParameterError) else ():
        dest, switch, value = name.partition("=")
        action = options.get(dest)
        if action is None or (switch and (action.nargs != 0 or str(action.const) != value)):
            continue
        flag = max(action.option_strings, key=len)  # an option string: no backslash, so a plain replacement
        text = re.sub(rf"(?<![\w./-]){re.escape(name)}(?![\w/-]|\.\w)", flag, text)
    return text


def build_parser() -> argparse.ArgumentParser:
    """The whole ``so101-mjx`` parser; imports no command module (nor JAX, nor MuJoCo)."""
    parser = argparse.ArgumentParser(prog="so101-mjx", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        _add(sub, name, command)
    for group, (help_, commands) in GROUPS.items():
        group_sub = sub.add_parser(group, help=help_).add_subparsers(dest="target", required=True)
        for name, command in commands.items():
            _add(group_sub, name, command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; returns its exit status (2 for a bad argument or input, usage on stderr)."""
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        args = build_parser().parse_args(argv)
        # what a command that runs itself again in other processes passes them (train --num-processes)
        args._argv = argv
    except SystemExit as exit_:  # argparse: usage + one error line (2), or --help (0)
        return int(exit_.code or 0)
    problem = mujoco_gl_problem()
    if problem is not None:
        print(f"so101-mjx {args.command}: error: {problem}", file=sys.stderr)
        return 1
    try:
        return int(importlib.import_module(args._module).run(args) or 0)
    except SetupError as err:
        print(f"so101-mjx {args.command}: error: {err}", file=sys.stderr)
        return 1
    except InputError as err:
        print(f"so101-mjx {args.command}: error: {spelled(err, args._options)}", file=sys.stderr)
        return 2
    except OSError as err:
        if err.errno not in DISK_ERRNOS:
            raise
        print(f"so101-mjx {args.command}: error: {DISK_ERRNOS[err.errno]}: {err.filename or err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
