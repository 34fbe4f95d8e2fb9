"""Argument checks shared by the public doors (env configs, gym envs, IK, solvers, station).

Each returns the value as a plain Python ``float`` / ``int`` / ``bool`` (JSON-ready) or raises
``ValueError`` naming the field and what is allowed: bad input never becomes a ``TypeError``
traceback or a NaN deep inside jit. ``bool`` is rejected where a number is expected (Python
treats it as an ``int``), and numbers are rejected where a flag is expected.

:func:`fits_memory` refuses a size whose arrays would not fit the machine, before anything is
allocated: the caller estimates the bytes from array sizes (bytes per world, state or frame times
their count); the limit is the host's total RAM, or the default JAX device's memory for arrays on
an accelerator that reports it. An estimate, not a guarantee: XLA's temporaries, other processes
and container limits are not counted.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import jax
import numpy as np

from so101_mjx.errors import InputError, ParameterError


def is_traced(value: Any) -> bool:
    """True for a JAX tracer (a value only known at run time inside jit/vmap/grad), or a list,
    tuple or dict holding one (a list of Python numbers passed to a jitted function)."""
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(value))


def _scalar(name: str, value: Any, kinds: str, what: str) -> Any:
    if is_traced(value):
        raise InputError(f"{name} must be {what} known at trace time, got a traced value")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        arr = np.asarray(None)
    if arr.shape != () or arr.dtype.kind not in kinds:
        raise InputError(f"{name} must be {what}, got {value!r}")
    return arr.item()


def _bounds(gt: float | None, ge: float | None, le: float | None, unit: str) -> str:
    parts = [f"> {gt}" if gt is not None else "", f">= {ge}" if ge is not None else "",
             f"<= {le}" if le is not None else ""]
    text = " and ".join(p for p in parts if p)
    return f" {text}{unit}" if text else ""


def real(name: str, value: Any, *, gt: float | None = None, ge: float | None = None, le: float | None = None,
         unit: str = "") -> float:
    """A finite real number (int or float, not bool) within the given bounds, as ``float``."""
    what = "a finite number" + _bounds(gt, ge, le, unit)
    x = float(_scalar(name, value, "iuf", what))
    if (not math.isfinite(x) or (gt is not None and not x > gt) or (ge is not None and not x >= ge)
            or (le is not None and not x <= le)):
        raise InputError(f"{name} must be {what}, got {value!r}")
    return x


def integer(name: str, value: Any, *, ge: int | None = None, le: int | None = None) -> int:
    """An integer (not bool, not a float such as 2.0) within ``[ge, le]``, as ``int``."""
    what = "an int" + _bounds(None, ge, le, "")
    x = int(_scalar(name, value, "iu", what))
    if (ge is not None and x < ge) or (le is not None and x > le):
        raise InputError(f"{name} must be {what}, got {value!r}")
    return x


def flag(name: str, value: Any) -> bool:
    """``True`` or ``False`` (numpy bools too); anything else, ``"no"`` and ``0`` included, raises."""
    return bool(_scalar(name, value, "b", "True or False"))


def needs_image_obs(names: str, image_obs: bool) -> None:
    """Raise naming ``names`` (options that change only rendered frames, set) when ``image_obs`` is off."""
    if not image_obs:
        raise InputError(f"{names} change only the rendered frames of pixels: they need image_obs=True")


def range_pair(name: str, value: Any, *, lowest: float, highest: float, strict: bool = False,
               what: str = "") -> tuple[float, float]:
    """A range ``(low, high)`` of two finite numbers (tuple, list or array) with
    ``lowest <= low <= high <= highest`` (``lowest < low`` when ``strict``), as a float tuple."""
    if not isinstance(value, (tuple, list, np.ndarray)) or len(value) != 2:
        raise InputError(f"{name} must be a range (low, high) of two numbers, got {value!r}")
    lo, hi = (real(name, v) for v in value)
    if not ((lowest < lo) if strict else (lowest <= lo)) or not lo <= hi <= highest:
        raise InputError(f"{name} must be a range {lowest} {'<' if strict else '<='} low <= high <= {highest}{what}, "
                         f"got {(lo, hi)}")
    return lo, hi


def dataclass_from_dict(cls: type, name: str, value: dict) -> Any:
    """``cls(**value)``, naming the unknown keys (and the known fields) when there are any."""
    fields = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(value) - set(fields), key=str)
    if unknown:
        raise InputError(f"unknown {name} field(s) {unknown}; expected some of {fields}")
    return cls(**value)


def optional_dataclass(cls: type, name: str, value: Any) -> Any:
    """A config field holding None, a ``cls`` or its dict form (``asdict``/JSON), as None or a ``cls``;
    InputError naming ``name`` otherwise (and unknown keys, :func:`dataclass_from_dict`)."""
    if value is None or isinstance(value, cls):
        return value
    if isinstance(value, dict):
        return dataclass_from_dict(cls, name, value)
    raise InputError(f"{name} must be None, a {cls.__name__} or its dict form, got {value!r}")


def host_memory() -> int:
    """The host's total RAM in bytes (``os.sysconf``, else ``/proc/meminfo``'s MemTotal; 0 when unknown)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return 0


def machine_memory(device: bool = False) -> tuple[int, str]:
    """``(bytes, what they are)`` an allocation may use: with ``device``, the default JAX device's
    memory when it reports a limit (GPUs, TPUs; a CPU device does not), else the host's RAM."""
    if device:
        stats = jax.devices()[0].memory_stats() or {}
        if stats.get("bytes_limit"):
            return int(stats["bytes_limit"]), f"memory on {jax.devices()[0].device_kind}"
    return host_memory(), "RAM"


def _size(nbytes: float) -> str:
    return f"{nbytes / 2**30:,.1f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:,.1f} MiB"


def fits_memory(setting: str, nbytes: float, what: str, *, device: bool = False,
                parameters: tuple[str, ...] = ()) -> None:
    """:class:`~so101_mjx.errors.ParameterError` naming ``setting`` (e.g. ``"num_envs 4096"``, of ``parameters``)
    when ``nbytes``, an estimate of what it allocates (``what``), exceeds :func:`machine_memory` (nothing is
    refused when that is unknown)."""
    limit, kind = machine_memory(device)
    if limit and nbytes > limit:
        raise ParameterError(f"{setting} needs about {_size(nbytes)} ({what}); this machine has {_size(limit)} of "
                             f"{kind}", *parameters)
def real_array(name: str, value: Any, shape: tuple[int, ...] | None = None, *, finite: bool = False,
               layout: str = "") -> np.ndarray:
    """``value`` as a float64 NumPy array of real numbers (ints and floats: not complex, bool, text or
    objects), of ``shape`` when given (``layout`` names its entries in the message), finite with
    ``finite``; ValueError naming ``name`` otherwise (never a TypeError, never a dropped imaginary part)."""
    if is_traced(value):
        raise InputError(f"{name} must be known at trace time, got a traced value")
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):  # ragged nesting
        arr = np.asarray(None)
    if arr.dtype.kind not in "iuf":
        raise InputError(f"{name} must be real numbers (int or float; not complex, bool, text or objects), got "
                         f"{arr.dtype} {value!r:.80}")
    if shape is not None and arr.shape != shape:
        raise InputError(f"{name} must have shape {shape}{layout}, got {arr.shape}")
    if finite and not np.all(np.isfinite(arr)):
        raise InputError(f"{name} must be {arr.size} finite numbers{layout}, got {arr.tolist()!r:.80}")
    return arr.astype(np.float64)
