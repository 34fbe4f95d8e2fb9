"""argparse ``type=`` functions shared by every ``so101-mjx`` subcommand.

Each parses one command-line value and raises :class:`ArgumentValueError` naming what is allowed,
so a bad value ends in argparse's own usage + one error line, exit status 2, before any env is
built or anything is compiled (called from a ``run()``, e.g. on a default, the error is an
:class:`~so101_mjx.errors.InputError`: ``so101_mjx.cli`` reports it in one line, status 2)::

    parser.add_argument("--num-envs", type=positive_int, default=64)
    parser.add_argument("--out", type=output_dir)

Output paths are checked, not created: a writer makes the missing parent directories itself. The
check writes (and drops at once) a nameless temporary file in the nearest existing directory, so a
path the user cannot write is refused before a command runs, not after.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from so101_mjx.errors import InputError

T = TypeVar("T")
SEED_LIMIT = 2**32  # jax.random.PRNGKey keeps 32 bits without x64: larger seeds would collide
INT32_MAX = 2**31 - 1  # JAX's integers are int32 without x64: a longer scan or loop count overflows


class ArgumentValueError(argparse.ArgumentTypeError, InputError):
    """A bad command-line value: argparse reports it with the argument's name, ``cli.main`` as an InputError."""


def _checked(convert: Callable[[str], T], ok: Callable[[T], bool], allowed: str, name: str) -> Callable[[str], T]:
    """A ``type=`` function: ``convert(text)``, accepted when ``ok(value)``, else an error naming ``allowed``."""

    def parse(text: str) -> T:
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise ArgumentValueError(f"expected {allowed}, got {text!r}")
        return value

    parse.__name__ = parse.__qualname__ = name
    return parse


positive_int = _checked(int, lambda v: v > 0, "an integer >= 1", "positive_int")
non_negative_int = _checked(int, lambda v: v >= 0, "an integer >= 0", "non_negative_int")
seed = _checked(int, lambda v: 0 <= v < SEED_LIMIT, f"an integer in [0, 2**32) = [0, {SEED_LIMIT - 1}]", "seed")
positive_float = _checked(float, lambda v: math.isfinite(v) and v > 0, "a finite number > 0", "positive_float")
probability = _checked(float, lambda v: 0 <= v <= 1, "a number in [0, 1]", "probability")


def int_in(low: int, high: int, name: str) -> Callable[[str], int]:
    """A ``type=`` function accepting the integers in ``[low, high]``."""
    return _checked(int, lambda v: low <= v <= high, f"an integer >= {low} and <= {high}", name)


steps = int_in(1, INT32_MAX, "steps")  # a count JAX loops over (control steps, updates): int32


def one_of(module: str, table: str, name: str) -> Callable[[str], str]:
    """A ``type=`` function accepting the entries of ``module.table`` (e.g. the physics backends).

    The table is imported when a value is parsed, not when the parser is built, so ``--help``
    imports nothing heavy; the error names every allowed value.
    """

    def parse(text: str) -> str:
        allowed = tuple(getattr(importlib.import_module(module), table))
        if text not in allowed:
            raise ArgumentValueError(f"expected one of {', '.join(allowed)}, got {text!r}")
        return text

    parse.__name__ = parse.__qualname__ = name
    return parse


NAME_MAX, PATH_MAX = 255, 4096  # bytes: Linux's limits on one path component and a whole path


def _short(text: str) -> str:
    return repr(text) if len(text) <= 80 else repr(f"{text[:40]}...{text[-30:]}")


def _valid_length(path: Path, text: str) -> None:
    """ArgumentValueError when a component of ``path`` or the whole absolute path is longer than Linux allows."""
    if any(len(part.encode()) > NAME_MAX for part in path.parts) or len(str(path.absolute()).encode()) >= PATH_MAX:
        raise ArgumentValueError(f"{_short(text)} is too long: at most {NAME_MAX} bytes per name and {PATH_MAX - 1} in all")


def _creatable(path: Path, text: str) -> None:
    """ArgumentValueError unless ``path`` is a directory or can be made one: its nearest existing
    ancestor is a directory this process can create files in."""
    _valid_length(path, text)
    ancestor = path
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        where = "" if ancestor == Path(text) else f": {str(ancestor)!r}"
        raise ArgumentValueError(f"{_short(text)}{where} is a file, not a directory")
    try:
        tempfile.TemporaryFile(dir=ancestor).close()
    except OSError as err:
        raise ArgumentValueError(f"{_short(text)}: cannot write in {str(ancestor)!r} ({err.strerror or err})") from None


def input_file(text: str) -> str:
    """An existing file to read."""
    _valid_length(Path(text), text)
    if not Path(text).is_file():
        raise ArgumentValueError(f"{_short(text)} is not a file" if Path(text).exists() else f"{_short(text)} does not exist")
    return text


def output_file(text: str) -> str:
    """A file to (over)write: not an existing directory, and its directory exists or can be created."""
    path = Path(text)
    _valid_length(path, text)
    if path.is_dir():
        raise ArgumentValueError(f"{_short(text)} is a directory, expected a file path")
    _creatable(path.parent, text)
    if path.exists() and not os.access(path, os.W_OK):
        raise ArgumentValueError(f"{_short(text)} exists and is not writable")
    return text


def output_dir(text: str) -> str:
    """A directory to write into: an existing directory or one that can be created."""
    _creatable(Path(text), text)
    return text


def visual_randomization(text: str):
    """``'standard'`` or a JSON object of :class:`~so101_mjx.render.visual_randomization.VisualRandomization`'s fields."""
    from so101_mjx.render import visual_randomization as vr

    try:
        return vr.parse(text)
    except (ValueError, TypeError) as err:
        raise ArgumentValueError(str(err)) from None


def servo_model(text: str) -> dict | str:
    """``off`` (no servo model), or a JSON object given inline or as a ``.json`` file (checked by the command)."""
    return text if text == "off" else json_object(text)


def json_object(text: str) -> dict:
    """A JSON object given inline or as a ``.json`` file (its fields are checked by the command)."""
    import json
    from pathlib import Path

    try:
        value = json.loads(Path(text).read_text() if text.endswith(".json") else text)
    except (OSError, json.JSONDecodeError) as err:
        raise ArgumentValueError(f"not a JSON object or a readable .json file ({err})") from None
    if not isinstance(value, dict):
        raise ArgumentValueError(f"must be a JSON object, got {text!r}")
    return value
