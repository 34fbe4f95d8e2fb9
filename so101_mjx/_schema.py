"""Schema checks of the files a user can edit: JSON metadata, arrays in ``.npz`` and ONNX files, CSV rows.

Every loader checks what it reads before using it, and each error is one :class:`InputError` line
naming the file, the field, what was found and what is allowed, e.g.
``run.json: field 'step' must be an int >= 0, got nothing (the field is missing)``. A field's
:class:`Kind` says what it may hold; :func:`fields` checks a JSON object against a table of them,
:func:`array` one array (dtype, shape, finite values).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from so101_mjx.errors import InputError, MissingFileError

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "MISSING"})()  # an absent field, as a Kind sees it
_ARRAY_KINDS = {"f": "a float", "iu": "an integer", "biuf": "a real (not complex) numeric"}


@dataclass(frozen=True)
class Kind:
    """What a field may hold: ``what`` in words (the error's "allowed"), ``test(value)`` (value is
    :data:`MISSING` for an absent field)."""

    what: str
    test: Callable[[Any], bool]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


STRING = Kind("a string", lambda v: isinstance(v, str))
BOOL = Kind("true or false", lambda v: isinstance(v, bool))
OBJECT = Kind("a dict", lambda v: isinstance(v, dict))  # a JSON object
NUMBER = Kind("a finite number", _is_number)


def integer(ge: int | None = None) -> Kind:
    """An int (not bool, not 2.0), at least ``ge``."""
    return Kind("an int" + (f" >= {ge}" if ge is not None else ""), lambda v: _is_int(v) and (ge is None or v >= ge))


def number(gt: float) -> Kind:
    """A finite number (int or float, not bool) above ``gt``."""
    return Kind(f"a finite number > {gt}", lambda v: _is_number(v) and v > gt)


def one_of(values: Iterable[Any]) -> Kind:
    allowed = sorted(values)
    return Kind(f"one of {allowed}", lambda v: v in allowed and not isinstance(v, (bool, dict, list)))


def list_of(kind: Kind, length: int | None = None) -> Kind:
    """A list of ``length`` (any when None) items, each of ``kind``."""
    what = f"a list of {length if length is not None else 'any number of'} items, each {kind.what}"
    return Kind(what,
                lambda v: isinstance(v, list) and (length is None or len(v) == length) and all(kind.test(x) for x in v))


def optional(kind: Kind) -> Kind:
    """``kind``, or the field absent."""
    return Kind(f"{kind.what} (or absent)", lambda v: v is MISSING or kind.test(v))


def found(value: Any) -> str:
    """What a field holds, for an error message: its type and a short repr."""
    if value is MISSING:
        return "nothing (the field is missing)"
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array of shape {value.shape}"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def fields(source: str | Path, data: Any, spec: Mapping[str, Kind], *, where: str = "", label: str = "field",
           extra: bool = True) -> dict[str, Any]:
    """``data`` (a JSON object) after checking that each field of ``spec`` holds its kind; with
    ``extra=False`` no other field is allowed. ``where``: the object's path in the file (``"network."``).
    InputError naming ``source`` and the first bad field otherwise."""
    if not isinstance(data, dict):
        raise InputError(f"{source}: {where.rstrip('.') or 'the top level'} must be a dict (a JSON object), got "
                         f"{found(data)}")
    for name, kind in spec.items():
        value = data.get(name, MISSING)
        if not kind.test(value):
            raise InputError(f"{source}: {label} {where + name!r} must be {kind.what}, got {found(value)}")
    unknown = sorted(set(data) - set(spec), key=str)
    if not extra and unknown:
        raise InputError(f"{source}: unknown {label}(s) {[where + str(u) for u in unknown]}, allowed: "
                         f"{[where + n for n in spec]}")
    return data


def read_json(path: str | Path) -> Any:
    """The JSON value in ``path``; MissingFileError when absent, InputError naming the line and
    column of a syntax error (or the file's unreadable bytes)."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{path} is missing")
    try:
        return json.loads(path.read_bytes())
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None
    except (UnicodeDecodeError, OSError) as err:
        raise InputError(f"{path}: unreadable as JSON text ({type(err).__name__})") from None


def array(source: str | Path, name: str, value: Any, *, kinds: str = "f", dtype: str | None = None,
          shape: tuple[int, ...] | None = None, ndim: int | None = None, finite: bool = True) -> np.ndarray:
    """``value`` (an array read from a file) after checking its dtype kind (``"f"`` float, ``"iu"``
    integer, ``"biuf"`` any real number or bool) and exact ``dtype``, its ``shape`` or
    ``ndim``, and (floats, with ``finite``) that every entry is finite."""
    a = np.asarray(value)
    allowed = f"{_ARRAY_KINDS[kinds]} array" if dtype is None else f"a {dtype} array"
    if a.dtype.kind not in kinds or (dtype is not None and a.dtype != np.dtype(dtype)):
        raise InputError(f"{source}: {name} must be {allowed}, got {found(a)}")
    if (shape is not None and a.shape != tuple(shape)) or (ndim is not None and a.ndim != ndim):
        wanted = f"shape {tuple(shape)}" if shape is not None else f"{ndim} dimensions"
        raise InputError(f"{source}: {name} must have {wanted}, got shape {a.shape}")
    if finite and a.dtype.kind == "f" and not np.all(np.isfinite(a)):
        raise InputError(f"{source}: {name} holds {a.size - int(np.isfinite(a).sum())} non-finite values (NaN or inf); "
                         "expected finite numbers")
    return a
