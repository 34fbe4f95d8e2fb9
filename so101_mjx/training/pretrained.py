"""The policies shipped with the package: ``pretrained:<task>`` (the task's shipped preset) and
``pretrained:<task>/<variant>`` (one trained under an env variant, or a camera student), read by
:func:`so101_mjx.training.policies.load`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from so101_mjx.envs import registry
from so101_mjx.errors import InputError

PRETRAINED = "pretrained:"  # pretrained:<task>[/<variant>]: a policy shipped with the package


def pretrained_dir() -> Path:
    """Where the package's pretrained policies are: ``<task>/`` (the task's shipped preset) and
    ``<task>/<variant>/`` (one trained under that env variant), each with ``policy.onnx``, ``policy.npz`` and
    ``run.json`` (docs/tasks.md says how each was trained); a camera student's folder holds its distill directory
    (``student.npz``, ``distill.json``) and ``run.json``."""
    return Path(__file__).resolve().parent.parent / "pretrained"


def shipped() -> list[str]:
    """The shipped policies' names, ``<task>`` or ``<task>/<variant>`` (``pretrained:<name>``), sorted."""
    root = pretrained_dir()
    return sorted(str(p.parent.relative_to(root)) for pattern in ("*/**/policy.npz", "*/**/student.npz")
                  for p in root.glob(pattern))


def pretrained(name: str) -> Path:
    """The shipped export ``name`` (``<task>`` or ``<task>/<variant>``; ``.onnx`` where onnx is installed, else
    ``.npz``; a camera student's ``student.npz``); InputError naming the shipped ones."""
    task, slash, variant = name.removeprefix(registry.NAMESPACE).partition("/")
    names = shipped()
    if task + slash + variant not in names:
        raise InputError(f"no pretrained policy for {name!r}; pretrained:<name> exists for {names}")
    folder = pretrained_dir() / task / variant
    if (folder / "student.npz").is_file():  # a camera student, read through its distill.json
        return folder / "student.npz"
    onnx = folder / "policy.onnx"
    return onnx if importlib.util.find_spec("onnx") and onnx.is_file() else onnx.with_suffix(".npz")
