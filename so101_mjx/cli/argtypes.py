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

JSON options (:func:`json_object`) are read by one reader: inline, or a plain file of at most
:data:`JSON_MAX_BYTES`, nested at most :data:`JSON_MAX_DEPTH` deep.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

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
non_negative_float = _checked(float, lambda v: math.isfinite(v) and v >= 0, "a finite number >= 0",
                              "non_negative_float")
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
        raise ArgumentValueError(f"{_short(text)} is too long: at most {NAME_MAX} bytes per name and "
                                 f"{PATH_MAX - 1} in all")


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
        raise ArgumentValueError(f"{_short(text)} is not a file" if Path(text).exists()
                                 else f"{_short(text)} does not exist")
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
    """A level's name (``standard``, ``wide``, ``cluttered``) or a JSON object of
    :class:`~so101_mjx.render.visual_randomization.VisualRandomization`'s fields, inline or as a file
    (:func:`json_object`)."""
    from so101_mjx.render import visual_randomization as vr

    try:
        return vr.parse(text if text in vr.LEVELS else json_object(text))
    except (ValueError, TypeError) as err:
        raise ArgumentValueError(str(err)) from None


def visual_randomization_or_off(text: str):
    """``off`` (no visual randomization), or :func:`visual_randomization`'s forms."""
    return text if text == "off" else visual_randomization(text)


def calibration(text: str):
    """A real follower's lerobot calibration file (:func:`~so101_mjx.robot.calibration.load_calibration`), read
    and checked while parsing."""
    from so101_mjx.robot.calibration import load_calibration

    _valid_length(Path(text), text)
    try:
        return load_calibration(text)
    except InputError as err:
        raise ArgumentValueError(str(err)) from None


def camera_names(text: str) -> tuple[str, ...]:
    """Comma-separated distinct camera names (``front,wrist``); the env checks them against its scene."""
    names = tuple(n.strip() for n in text.split(","))
    if not all(names) or len(set(names)) != len(names):
        raise ArgumentValueError("camera names must be distinct and comma-separated (front,wrist), got "
                                 f"{_short(text)!r}")
    return names


def servo_model(text: str):
    """A :class:`~so101_mjx.sim.servo.ServoModel` from its fields as a JSON object, inline or as a file
    (:func:`json_object`), checked while parsing: every ``--servo-model`` reads through this."""
    from so101_mjx.sim import servo

    try:
        return servo.parse(json_object(text))
    except (ValueError, TypeError) as err:
        raise ArgumentValueError(str(err)) from None


def servo_model_or_off(text: str):
    """``off`` (no servo model), or :func:`servo_model`'s forms."""
    return text if text == "off" else servo_model(text)


def name_or_json(text: str) -> str | dict:
    """A name from a table (letters, digits and dashes: an env variant such as ``joint-30hz``, a suite such as
    ``standard``) or a JSON object, inline or as a file (:func:`json_object`; both checked by the command)."""
    return text if re.fullmatch(r"[a-z0-9][a-z0-9-]*", text) and not Path(text).exists() else json_object(text)


def camera_spec(text: str) -> tuple[str, Any]:
    """``CAMERA=FILE``: an image camera and its camera file (or a shipped camera's name,
    :func:`~so101_mjx.render.camera.load_camera`), read and checked while parsing."""
    from so101_mjx.render.camera import load_camera

    camera, sep, source = text.partition("=")
    if not sep or not camera or not source:
        raise ArgumentValueError("expected CAMERA=FILE (e.g. wrist=menagerie_wrist or front=front.yaml), got "
                                 f"{_short(text)}")
    try:
        return camera, load_camera(source)
    except InputError as err:
        raise ArgumentValueError(str(err)) from None


JSON_MAX_BYTES = 2**20  # an option's JSON file: at most 1 MiB
JSON_MAX_DEPTH = 32  # objects and arrays nested at most this deep


def _json_depth(text: str) -> int:
    """How deep the objects and arrays of the JSON ``text`` nest (brackets inside strings not counted)."""
    brackets = re.sub(r"[^\[\]{}]", "", re.sub(r'"(?:[^"\\]|\\.)*"?', "", text))
    return max(itertools.accumulate(1 if c in "[{" else -1 for c in brackets), default=0)


def read_option_file(text: str, limit: int = JSON_MAX_BYTES) -> str:
    """The text of the option file ``text``: a plain file (not a device, FIFO or directory: opened without
    blocking, then checked) of at most ``limit`` bytes, UTF-8; ArgumentValueError naming what is wrong."""
    _valid_length(Path(text), text)
    try:
        fd = os.open(text, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise ArgumentValueError(f"{_short(text)}: cannot read it ({err.strerror or err}); expected a JSON object "
                                 "or a JSON file") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ArgumentValueError(f"{_short(text)} is not a plain file (a directory, device or FIFO); "
                                 "expected a JSON file")
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ArgumentValueError(f"{_short(text)} is larger than {limit:,} bytes; expected a small JSON file")
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise ArgumentValueError(f"{_short(text)} is not UTF-8 text; expected a JSON file") from None


def json_object(text: str) -> dict:
    """A JSON object given inline (text starting with ``{``) or as the path of a file holding one
    (:func:`read_option_file`), nested at most :data:`JSON_MAX_DEPTH` deep (its fields are checked by the command)."""
    inline = text.lstrip().startswith(("{", "["))
    source = text if inline else read_option_file(text)
    where = "" if inline else f" in {_short(text)}"
    if _json_depth(source) > JSON_MAX_DEPTH:
        raise ArgumentValueError(f"the JSON{where} nests deeper than {JSON_MAX_DEPTH} levels; expected a JSON "
                                 "object of fields")
    try:
        value = json.loads(source)
    except (json.JSONDecodeError, RecursionError) as err:
        raise ArgumentValueError(f"not valid JSON{where} ({err})") from None
    if not isinstance(value, dict):
        raise ArgumentValueError(f"must be a JSON object{where}, got {_short(source)}")
    return value
