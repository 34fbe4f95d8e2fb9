"""Env registry, derived from the task files: every :class:`SO101Env` subclass with a ``name``
defined in a module of :mod:`so101_mjx.envs` is a registered task.

Adding a task means adding its file (and its scene); gymnasium ids, ``rollout``'s scripted
policy, export layouts, the parity harness and the benchmarks find it here.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil
from pathlib import Path

from so101_mjx.envs.base import ArmConfig, SO101Env
from so101_mjx.errors import InputError
from so101_mjx.sim.physics import BACKENDS, backend_options

NAMESPACE = "so101_mjx/"


@functools.cache
def tasks() -> dict[str, type[SO101Env]]:
    """``{name: task class}`` of every task file in :mod:`so101_mjx.envs`, sorted by name."""
    found: dict[str, type[SO101Env]] = {}
    package = f"{__name__.rsplit('.', 1)[0]}.tasks"
    for module_info in pkgutil.iter_modules([str(Path(__file__).parent / "tasks")]):
        module = importlib.import_module(f"{package}.{module_info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, SO101Env) and obj.__module__ == module.__name__ and "name" in vars(obj):
                if obj.name in found:
                    raise RuntimeError(f"task name {obj.name!r} is declared by {found[obj.name].__module__} and {module.__name__}")
                found[obj.name] = obj
    return dict(sorted(found.items()))


def names() -> list[str]:
    return list(tasks())


def canonical(name: str) -> str:
    """Accept ``SO101Reach-v0`` or ``so101_mjx/SO101Reach-v0``; ValueError for unknown names."""
    if not isinstance(name, str):
        raise InputError(f"env name must be a str, one of {names()}, got {name!r}")
    short = name.removeprefix(NAMESPACE)
    if short not in tasks():
        raise InputError(f"unknown env {name!r}; expected one of {names()}")
    return short


def task(name: str) -> type[SO101Env]:
    """The task class of a registered env (see :func:`canonical` for the accepted names)."""
    return tasks()[canonical(name)]


def default_config(name: str) -> ArmConfig:
    return task(name).default_config()


def make(name: str, backend: str | None = None, **options) -> SO101Env:
    """Build a registered env. ``backend``: one of ``physics.BACKENDS`` or None (c on CPU, mjx on accelerators).

    ``options`` are config overrides with the reference's field names (``action_scale``,
    ``reward_type``, ...) and backend options (``nthread`` for ``c``, ``impl`` for ``mjx``);
    an invalid field or value raises ValueError naming it.
    """
    cls = task(name)
    if backend is not None and backend not in BACKENDS:
        raise InputError(f"backend must be one of {BACKENDS} or None, got {backend!r}")
    physics_kwargs = backend_options(backend, options)
    base = cls.default_config()
    fields = {f.name for f in dataclasses.fields(base)}
    config = {k: v for k, v in options.items() if k not in physics_kwargs}
    unknown = sorted(set(config) - fields)
    if unknown:
        raise InputError(f"unknown config field(s) {unknown} for {name}; expected some of {sorted(fields)}")
    return cls(dataclasses.replace(base, **config), backend, **physics_kwargs)  # the config validates (dict randomization too)
