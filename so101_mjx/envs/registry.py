"""The task registry: names to task classes, the built-in tasks and any registered from outside.

Built-in tasks are :data:`so101_mjx.envs.tasks.BUILTIN`, registered on first use. A task defined
anywhere else joins with :func:`register`; from then on ``make``, gymnasium (``so101_mjx/<name>``),
``rollout``, ``train`` (with the ``tiny`` preset, or presets of its own), ``export`` and ``replay``
find it here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from so101_mjx.envs.base import SO101Env
from so101_mjx.envs.config import ArmConfig
from so101_mjx.errors import InputError
from so101_mjx.sim.physics import BACKENDS, backend_options

NAMESPACE = "so101_mjx/"
_TASKS: dict[str, type[SO101Env]] = {}
_LISTENERS: list[Callable[[type[SO101Env]], None]] = []  # told of every task registered (gym ids)
_REQUIRED = ("name", "instruction", "config_class", "scene", "observation_layout")


def register(task: type[SO101Env]) -> type[SO101Env]:
    """Register ``task`` (an :class:`SO101Env` subclass declaring ``name``, ``instruction``,
    ``config_class``, ``scene`` and ``observation_layout``); returns it, so it works as a decorator.

    Registering the same class again does nothing; another class under a registered name is an InputError.
    """
    if not (isinstance(task, type) and issubclass(task, SO101Env)):
        raise InputError(f"register() takes an SO101Env subclass, got {task!r}")
    missing = [attr for attr in _REQUIRED if not hasattr(task, attr)]
    if missing or "name" not in vars(task):
        raise InputError(f"task {task.__qualname__} must declare {', '.join(missing or ['name'])} (see "
                         "docs/DESIGN.md, 'A task')")
    _builtins()
    if _TASKS.get(task.name, task) is not task:
        raise InputError(f"task name {task.name!r} is registered already, by "
                         f"{_TASKS[task.name].__module__}.{_TASKS[task.name].__qualname__}")
    if task.name not in _TASKS:
        _TASKS[task.name] = task
        for listener in _LISTENERS:
            listener(task)
    return task


def on_register(listener: Callable[[type[SO101Env]], None]) -> None:
    """Call ``listener(task)`` for every registered task: those registered so far, then each new one."""
    _LISTENERS.append(listener)
    for task in tasks().values():
        listener(task)


def _builtins() -> None:
    if not _TASKS:
        from so101_mjx.envs.tasks import BUILTIN

        _TASKS.update({task.name: task for task in BUILTIN})


def tasks() -> dict[str, type[SO101Env]]:
    """``{name: task class}`` of every registered task, sorted by name."""
    _builtins()
    return dict(sorted(_TASKS.items()))


def names() -> list[str]:
    """The registered task names, sorted."""
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
    ``reward_type``, ...) and backend options (``nthread`` and ``loop`` for ``c``, ``impl`` for ``mjx``);
    an invalid field or value raises ValueError naming it.
    """
    cls = task(name)
    if backend is not None and backend not in BACKENDS:
        raise InputError(f"backend must be one of {BACKENDS} or None, got {backend!r}")
    config, physics_kwargs = split_options(cls, backend, options)
    return cls(config, backend, **physics_kwargs)


def split_options(cls: type[SO101Env], backend: str | None,
                  options: dict[str, Any]) -> tuple[ArmConfig, dict[str, Any]]:
    """``(config, backend options)`` of ``make``'s ``options`` for task ``cls``: config overrides on its
    default config (validated; an unknown name is an InputError), with a changed ``control_mode``
    taking that mode's default rates unless they are given."""
    physics_kwargs = backend_options(backend, options)
    base = cls.default_config()
    fields = {f.name for f in dataclasses.fields(base)}
    config = {k: v for k, v in options.items() if k not in physics_kwargs}
    for name, value in base.retired.items():
        if name in config and config.pop(name) != value:
            raise InputError(f"{name} is not a field of {cls.name}'s config (it could only be {value!r}), got "
                             f"{options[name]!r}")
    unknown = sorted(set(config) - fields)
    if unknown:
        raise InputError(f"unknown config field(s) {unknown} for {cls.name}; expected some of {sorted(fields)}")
    if config.get("control_mode", base.control_mode) != base.control_mode:  # rates not given: the new mode's defaults
        config = {"control_dt": None, "physics_dt": None, **config}
    return dataclasses.replace(base, **config), physics_kwargs  # the config validates (dict randomization too)
