"""Training presets by env: one module per task in this package, collected here.

Each module defines ``ENV`` (the task name), ``PRESETS`` (``{name: Preset or SacPreset}``, a
``tiny`` one included: hyperparameters and the task's training env config) and ``DEFAULT`` (the preset
``so101-mjx train`` uses without ``--preset``: one that has been run); a task's default SAC preset, if it
has one, is named ``sac``. A module may define ``VARIANTS`` (``{name: Variant}``: env variants such as
joint mode, 30 Hz or servo ranges, laid over any preset with ``--env-config NAME``; every task also has
:data:`COMMON_VARIANTS`) and ``RENAMED``
(``{old preset name: Renamed}``: names from when presets named variants too; they still resolve to the
same run, with a FutureWarning giving the new spelling).
``preset(env, name, algo)`` returns a frozen :class:`~so101_mjx.training.preset.Preset` or
:class:`~so101_mjx.training.preset.SacPreset`; ``name=None`` picks the env's default for ``algo``. The ``cpu`` presets
are sized for backend ``c`` on a 2-core CPU, the ``gpu`` ones for MJX on one accelerator. Every registered task, one
registered from outside the package included, has ``tiny`` and ``tiny-sac`` (seconds of training; the tests use them).
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import warnings
from typing import Any

from so101_mjx.envs.registry import canonical
from so101_mjx.errors import InputError, ParameterError
from so101_mjx.training.preset import Preset, Renamed, SacPreset, TrainingPreset, Variant, tiny, tiny_sac

__all__ = ["COMMON_VARIANTS", "DEFAULT_PRESET", "PRESETS", "RENAMED", "VARIANTS", "Preset", "Renamed", "RenamedPreset",
           "SacPreset", "TrainingPreset", "Variant", "default_preset", "preset", "resolve", "tiny", "tiny_sac",
           "variant", "variant_label"]


# env variants of every task: ``5ms``, the physics step the coarse-step study trains at (a policy trained there
# passes at the reference's 2 ms: docs/benchmarks.md, "Physics step"); 0.1 s Cartesian control periods hold 20
COMMON_VARIANTS = {"5ms": Variant({"physics_dt": 0.005})}


def _collect() -> tuple[dict[str, dict[str, Preset]], dict[str, str], dict[str, dict[str, Variant]],
                        dict[str, dict[str, Renamed]]]:
    table, defaults, variants, renamed = {}, {}, {}, {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        env = canonical(module.ENV)
        if module.DEFAULT not in module.PRESETS:
            raise RuntimeError(f"{module.__name__}: DEFAULT {module.DEFAULT!r} is not one of {sorted(module.PRESETS)}")
        tiny_config = module.PRESETS["tiny"].env_config
        table[env], defaults[env] = {**module.PRESETS, "tiny-sac": tiny_sac(**tiny_config)}, module.DEFAULT
        variants[env] = {**COMMON_VARIANTS, **getattr(module, "VARIANTS", {})}
        renamed[env] = getattr(module, "RENAMED", {})
        for old, new in renamed[env].items():
            if old in table[env] or new.preset not in table[env] or new.variant not in variants[env]:
                raise RuntimeError(f"{module.__name__}: RENAMED[{old!r}] must name a former preset as a preset "
                                   "and a variant")
    return dict(sorted(table.items())), defaults, variants, renamed


PRESETS, DEFAULT_PRESET, VARIANTS, RENAMED = _collect()


class RenamedPreset(FutureWarning):
    """A former preset name was given; ``renamed`` is its run now."""

    def __init__(self, message: str, renamed: Renamed):
        super().__init__(message)
        self.renamed = renamed


def default_preset(env: str, algo: str | None = None) -> str:
    """Name of ``env``'s default preset (``algo="sac"``: its ``sac`` preset); InputError naming the
    choices when it has none."""
    env = canonical(env)
    if algo == "sac":
        if "sac" not in PRESETS.get(env, {}):
            raise InputError(f"{env} has no 'sac' preset; choose another: 'tiny-sac', or one of "
                             f"{[n for n, p in PRESETS.get(env, {}).items() if p.algo == 'sac']}")
        return "sac"
    if env not in DEFAULT_PRESET:
        raise InputError(f"{env} has no training presets but 'tiny' and 'tiny-sac'; envs with presets: "
                         f"{sorted(PRESETS)}")
    return DEFAULT_PRESET[env]


def variant(env: str, spec: str | dict[str, Any]) -> Variant:
    """The variant ``spec`` of ``env``: one of its named variants, or env config entries (a dict, e.g. a
    parsed ``--env-config`` JSON); InputError naming the choices for an unknown name."""
    if isinstance(spec, dict):
        return Variant(dict(spec))
    named = VARIANTS.get(canonical(env), COMMON_VARIANTS)
    if spec not in named:
        raise InputError(f"unknown env config {spec!r} for {canonical(env)}: a JSON object of env config fields, "
                         f"or one of {sorted(named)}")
    return named[spec]


def resolve(env: str, name: str | None = None, algo: str | None = None,
            env_config: str | dict[str, Any] | None = None) -> tuple[str, TrainingPreset, str | dict[str, Any] | None]:
    """``(preset name, preset, variant)``: the preset ``name`` (default: the env's default for ``algo``) of
    ``env`` with the variant ``env_config`` (:func:`variant`) laid over it, and that variant as given (a name
    or env config fields; None without one). A former name (``RENAMED``) resolves to its run and its
    variant, with a :class:`RenamedPreset` warning giving the new spelling. InputError naming the choices."""
    renamed = RENAMED.get(canonical(env), {}).get(name or "")
    if renamed is not None:
        if env_config is not None:
            raise ParameterError(f"preset {name!r} is now {renamed.spelling()}: give the preset and env_config that "
                                 "way", "env_config")
        message = f"preset {name!r} of {canonical(env)} is now {renamed.spelling()}"
        warnings.warn(RenamedPreset(message, renamed), stacklevel=2)
        chosen = preset(env, renamed.preset, algo)
        run = dataclasses.replace(variant(env, renamed.variant).apply(chosen), **renamed.length)
        return renamed.preset, run, renamed.variant
    name = name or default_preset(env, algo)
    chosen = preset(env, name, algo)
    return name, chosen if env_config is None else variant(env, env_config).apply(chosen), env_config


def variant_label(spec: str | dict[str, Any] | None) -> str | None:
    """How a run names its variant (run directories, logs): its name, ``custom`` for env config fields, or None
    without one."""
    return spec if isinstance(spec, str) else "custom" if spec else None


def preset(env: str, name: str | None = None, algo: str | None = None) -> TrainingPreset:
    """The preset ``name`` (default: the env's default for ``algo``) for ``env``; InputError naming
    the choices, or when the preset is of another algorithm than ``algo``. A former name resolves as in
    :func:`resolve`."""
    if name in RENAMED.get(canonical(env), {}):
        return resolve(env, name, algo)[1]
    name = name or default_preset(env, algo)
    env = canonical(env)
    choices = PRESETS.get(env, {"tiny": tiny(), "tiny-sac": tiny_sac()})
    if name not in choices:
        raise InputError(f"unknown preset {name!r} for {env}; expected one of {sorted(choices)}")
    if algo is not None and choices[name].algo != algo:
        raise InputError(f"preset {name!r} of {env} is a {choices[name].algo} preset, not {algo}: "
                         f"{algo} presets are {sorted(n for n, p in choices.items() if p.algo == algo)}")
    return choices[name]
