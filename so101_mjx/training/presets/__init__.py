"""Training presets by env: one module per task in this package, collected here.

Each module defines ``ENV`` (the task name), ``PRESETS`` (``{name: Preset}``, a ``tiny`` one
included) and ``DEFAULT`` (the preset ``so101-mjx train`` uses without ``--preset``: one that has
been run). ``preset(env, name)`` returns a frozen :class:`~so101_mjx.training.preset.Preset`;
``name=None`` picks the env's default. The ``cpu`` presets are sized for backend ``c`` on a 2-core
CPU, the ``gpu`` ones for MJX on one accelerator. Every registered task, one registered from outside
the package included, has ``tiny`` (seconds of training; the tests use it).
"""

from __future__ import annotations

import importlib
import pkgutil

from so101_mjx.envs.registry import canonical
from so101_mjx.errors import InputError
from so101_mjx.training.preset import Preset, tiny

__all__ = ["DEFAULT_PRESET", "PRESETS", "Preset", "default_preset", "preset", "tiny"]


def _collect() -> tuple[dict[str, dict[str, Preset]], dict[str, str]]:
    table, defaults = {}, {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        env = canonical(module.ENV)
        if module.DEFAULT not in module.PRESETS:
            raise RuntimeError(f"{module.__name__}: DEFAULT {module.DEFAULT!r} is not one of {sorted(module.PRESETS)}")
        table[env], defaults[env] = dict(module.PRESETS), module.DEFAULT
    return dict(sorted(table.items())), defaults


PRESETS, DEFAULT_PRESET = _collect()


def default_preset(env: str) -> str:
    """Name of ``env``'s default preset; InputError naming the envs that have presets when it has none."""
    env = canonical(env)
    if env not in DEFAULT_PRESET:
        raise InputError(f"{env} has no training presets but 'tiny'; envs with presets: {sorted(PRESETS)}")
    return DEFAULT_PRESET[env]


def preset(env: str, name: str | None = None) -> Preset:
    """The preset ``name`` (default: the env's default) for ``env``; InputError naming the choices."""
    name = name or default_preset(env)
    env = canonical(env)
    choices = PRESETS.get(env, {"tiny": tiny()})
    if name not in choices:
        raise InputError(f"unknown preset {name!r} for {env}; expected one of {sorted(choices)}")
    return choices[name]
