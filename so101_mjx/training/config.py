"""Training presets by env, collected from :mod:`so101_mjx.training.presets` (one module per task).

``preset(env, name)`` returns a frozen :class:`~so101_mjx.training.preset.Preset`; ``name=None``
picks the env's default. Every env with presets has a ``tiny`` one (seconds; used by the tests)
besides its real ones. The ``cpu`` presets are sized for backend ``c`` on a 2-core CPU, the
``gpu`` ones for MJX on one accelerator.
"""

from __future__ import annotations

import importlib
import pkgutil

from so101_mjx.envs.registry import canonical
from so101_mjx.training import presets as _presets
from so101_mjx.training.preset import Preset, tiny

__all__ = ["DEFAULT_PRESET", "PRESETS", "Preset", "default_preset", "preset", "tiny"]


def _collect() -> tuple[dict[str, dict[str, Preset]], dict[str, str]]:
    table, defaults = {}, {}
    for info in pkgutil.iter_modules(_presets.__path__):
        module = importlib.import_module(f"{_presets.__name__}.{info.name}")
        env = canonical(module.ENV)
        if module.DEFAULT not in module.PRESETS:
            raise RuntimeError(f"{module.__name__}: DEFAULT {module.DEFAULT!r} is not one of {sorted(module.PRESETS)}")
        table[env], defaults[env] = dict(module.PRESETS), module.DEFAULT
    return dict(sorted(table.items())), defaults


PRESETS, DEFAULT_PRESET = _collect()


def default_preset(env: str) -> str:
    """Name of ``env``'s default preset; ValueError naming the presets that exist when it has none."""
    env = canonical(env)
    if env not in DEFAULT_PRESET:
        raise ValueError(f"{env} has no training presets; envs with presets: {sorted(PRESETS)}")
    return DEFAULT_PRESET[env]


def preset(env: str, name: str | None = None) -> Preset:
    """The preset ``name`` (default: the env's default) for ``env``; ValueError naming the choices."""
    name = name or default_preset(env)
    env = canonical(env)
    if name not in PRESETS[env]:
        raise ValueError(f"unknown preset {name!r} for {env}; expected one of {sorted(PRESETS[env])}")
    return PRESETS[env][name]
