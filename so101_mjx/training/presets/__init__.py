"""Training presets by env: one module per task in this package, collected here.

Each module defines ``ENV`` (the task name), ``PRESETS`` (``{name: Preset or SacPreset}``, a
``tiny`` one included) and ``DEFAULT`` (the preset ``so101-mjx train`` uses without ``--preset``: one
that has been run); a task's default SAC preset, if it has one, is named ``sac``.
``preset(env, name, algo)`` returns a frozen :class:`~so101_mjx.training.preset.Preset` or
:class:`~so101_mjx.training.preset.SacPreset`; ``name=None`` picks the env's default for ``algo``. The ``cpu`` presets are sized for backend ``c`` on a 2-core
CPU, the ``gpu`` ones for MJX on one accelerator. Every registered task, one registered from outside
the package included, has ``tiny`` and ``tiny-sac`` (seconds of training; the tests use them).
"""

from __future__ import annotations

import importlib
import pkgutil

from so101_mjx.envs.registry import canonical
from so101_mjx.errors import InputError
from so101_mjx.training.preset import Preset, SacPreset, TrainingPreset, tiny, tiny_sac

__all__ = ["DEFAULT_PRESET", "PRESETS", "Preset", "SacPreset", "TrainingPreset", "default_preset", "preset", "tiny", "tiny_sac"]


def _collect() -> tuple[dict[str, dict[str, Preset]], dict[str, str]]:
    table, defaults = {}, {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        env = canonical(module.ENV)
        if module.DEFAULT not in module.PRESETS:
            raise RuntimeError(f"{module.__name__}: DEFAULT {module.DEFAULT!r} is not one of {sorted(module.PRESETS)}")
        tiny_config = module.PRESETS["tiny"].env_config
        table[env], defaults[env] = {**module.PRESETS, "tiny-sac": tiny_sac(**tiny_config)}, module.DEFAULT
    return dict(sorted(table.items())), defaults


PRESETS, DEFAULT_PRESET = _collect()


def default_preset(env: str, algo: str | None = None) -> str:
    """Name of ``env``'s default preset (``algo="sac"``: its ``sac`` preset); InputError naming the
    choices when it has none."""
    env = canonical(env)
    if algo == "sac":
        if "sac" not in PRESETS.get(env, {}):
            raise InputError(f"{env} has no 'sac' preset; choose one with --preset: 'tiny-sac', or one of "
                             f"{[n for n, p in PRESETS.get(env, {}).items() if p.algo == 'sac']}")
        return "sac"
    if env not in DEFAULT_PRESET:
        raise InputError(f"{env} has no training presets but 'tiny' and 'tiny-sac'; envs with presets: {sorted(PRESETS)}")
    return DEFAULT_PRESET[env]


def preset(env: str, name: str | None = None, algo: str | None = None) -> TrainingPreset:
    """The preset ``name`` (default: the env's default for ``algo``) for ``env``; InputError naming
    the choices, or when the preset is of another algorithm than ``algo``."""
    name = name or default_preset(env, algo)
    env = canonical(env)
    choices = PRESETS.get(env, {"tiny": tiny(), "tiny-sac": tiny_sac()})
    if name not in choices:
        raise InputError(f"unknown preset {name!r} for {env}; expected one of {sorted(choices)}")
    if algo is not None and choices[name].algo != algo:
        raise InputError(f"preset {name!r} of {env} is a {choices[name].algo} preset, not {algo}: "
                         f"{algo} presets are {sorted(n for n, p in choices.items() if p.algo == algo)}")
    return choices[name]
