"""``.npz`` files read with every array's header checked before any of its data is read.

:func:`headers` reads each member's ``.npy`` header (numpy's ``read_array_header_1_0`` / ``_2_0``
on the zip member: only the header is decompressed) as ``(shape, dtype)``; :func:`read` hands
them to the caller's check, which raises for a header it refuses, and only then reads the arrays.
A small compressed file whose array would expand to gigabytes is thus refused by its shape, in
microseconds and without the memory. Object arrays (pickles) are refused always. numpy only: no JAX.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from so101_mjx.errors import InputError, MissingFileError

Header = tuple[tuple[int, ...], np.dtype]  # (shape, dtype) of one array, from its .npy header
Check = Callable[[dict[str, Header]], None]


class Unreadable(InputError):
    """A file that is not an ``.npz`` of plain arrays; ``reason`` says why in a few words."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


def nbytes(header: Header) -> int:
    """Bytes of the array a header describes."""
    shape, dtype = header
    return math.prod(shape) * dtype.itemsize


def _header(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Header:
    with zf.open(info) as member:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(member)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(member)
        else:
            raise ValueError(f".npy format version {version}")
    if dtype.hasobject:
        raise ValueError("object array (a pickle)")
    return tuple(int(n) for n in shape), dtype


def headers(path: str | Path, what: str = "npz file") -> dict[str, Header]:
    """``{array name: (shape, dtype)}`` of the ``.npz`` at ``path`` (names without ``.npy``), from the
    headers alone; MissingFileError when absent, else :class:`Unreadable` ``"<path>: unreadable <what> (<reason>)"``
    for a file that is not an ``.npz`` of plain (non-object) arrays."""
    if not Path(path).is_file():
        raise MissingFileError(f"{path}: unreadable {what} (no such file)")
    try:
        with zipfile.ZipFile(path) as zf:
            return {info.filename.removesuffix(".npy"): _header(zf, info) for info in zf.infolist()}
    except Exception as err:  # zipfile, zlib, OSError, ValueError: a truncated or foreign file
        reason = (str(err) if isinstance(err, ValueError) and str(err).startswith(("object", ".npy"))
                  else type(err).__name__)
        raise Unreadable(f"{path}: unreadable {what} ({reason})", reason) from None


def read(path: str | Path, check: Check | None = None, what: str = "npz file",
         names: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` at ``path`` by name (only ``names`` when given), read after
    ``check(headers)`` (see :func:`headers`) returned; errors as :func:`headers`'s."""
    found = headers(path, what)
    if check is not None:
        check(found)
    wanted = list(found) if names is None else [n for n in names if n in found]
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in wanted}
    except Exception as err:  # a member whose data is truncated or corrupt
        raise Unreadable(f"{path}: unreadable {what} ({type(err).__name__})", type(err).__name__) from None


def limit(path: str | Path, found: dict[str, Header], max_bytes: dict[str, int], what: str) -> None:
    """InputError naming the first array of ``found`` larger than ``max_bytes[name]`` (``what``: what bounds it)."""
    for name, header in found.items():
        if name in max_bytes and nbytes(header) > max_bytes[name]:
            raise InputError(f"{path}: {name} has shape {header[0]} of {header[1]} ({nbytes(header):,} bytes), more "
                             f"than {what} holds ({max_bytes[name]:,} bytes at most)")
