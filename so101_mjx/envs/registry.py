"""Env registry: names -> (class, default_config); :func:`make` builds one with overrides."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from so101_mjx.envs import pick_cube, pick_place, reach
from so101_mjx.envs.base import SO101Env
from so101_mjx.physics import BACKENDS

_ENVS: dict[str, tuple[type[SO101Env], Callable]] = {
    "SO101PickCube-v0": (pick_cube.PickCube, pick_cube.default_config),
    "SO101PickPlace-v0": (pick_place.PickPlace, pick_place.default_config),
    "SO101Reach-v0": (reach.Reach, reach.default_config),
}
NAMESPACE = "so101_mjx/"


def names() -> list[str]:
    return list(_ENVS)


def canonical(name: str) -> str:
    """Accept ``SO101Reach-v0`` or ``so101_mjx/SO101Reach-v0``; ValueError for unknown names."""
    if not isinstance(name, str):
        raise ValueError(f"env name must be a str, one of {names()}, got {name!r}")
    short = name.removeprefix(NAMESPACE)
    if short not in _ENVS:
        raise ValueError(f"unknown env {name!r}; expected one of {names()}")
    return short


def default_config(name: str):
    return _ENVS[canonical(name)][1]()


def make(name: str, backend: str | None = None, **config) -> SO101Env:
    """Build a registered env. ``backend``: 'mjx', 'c' or None (c on CPU, mjx on accelerators).

    Config overrides use the reference's field names (``action_scale``, ``reward_type``, ...);
    invalid fields or values raise ValueError naming the field.
    """
    cls, defaults = _ENVS[canonical(name)]
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS} or None, got {backend!r}")
    base = defaults()
    fields = {f.name for f in dataclasses.fields(base)}
    unknown = sorted(set(config) - fields)
    if unknown:
        raise ValueError(f"unknown config field(s) {unknown} for {name}; expected some of {sorted(fields)}")
    return cls(dataclasses.replace(base, **config), backend)  # the config validates (dict randomization too)
