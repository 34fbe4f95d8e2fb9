"""Every ``so101_mjx.…`` path that the docs, the README, the notebooks, the training entry point and
the docstrings name resolves: the module imports and each attribute after it exists. Names that are
not code (the ``so101_mjx.mujoco`` logger, ``meta/so101_mjx.json``) are listed here; the CHANGELOG
keeps the old paths of moved code on purpose and is not checked."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATH = re.compile(r"(?<![\w/.-])so101_mjx(?:\.[A-Za-z_]\w*)+")
FROM_IMPORT = re.compile(r"from (so101_mjx(?:\.\w+)*) import \(?([\w ,]+)")
NOT_CODE = {"so101_mjx.mujoco", "so101_mjx.json"}  # a logger's name; a dataset's meta file


def _texts() -> dict[str, str]:
    files = [*ROOT.glob("*.md"), *ROOT.glob("docs/**/*.md"), *ROOT.glob("docs/**/*.ipynb"),
             *ROOT.glob("notebooks/**/*.ipynb"),
             *ROOT.glob("train/**/*.py"), *ROOT.glob("plugins/**/*.md"), *ROOT.glob("so101_mjx/**/*.py")]
    texts = {}
    for f in files:
        if f.name == "CHANGELOG.md":
            continue
        text = f.read_text()
        if f.suffix == ".ipynb":
            text = "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
        texts[str(f.relative_to(ROOT))] = text
    return texts


def _named() -> dict[str, str]:
    """``{dotted path: first file naming it}``."""
    named: dict[str, str] = {}
    for name, text in _texts().items():
        for path in PATH.findall(text):
            named.setdefault(path.removesuffix(".py"), name)
        if not name.endswith(".py"):
            for module, names in FROM_IMPORT.findall(text):
                for attr in (n.split()[0] for n in names.split(",") if n.strip()):
                    named.setdefault(f"{module}.{attr}", name)
    return {p: f for p, f in named.items() if p not in NOT_CODE}


def _resolves(path: str) -> bool:
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_the_scan_finds_the_paths():
    named = _named()
    assert len(named) > 50 and "so101_mjx.envs.make" in named


@pytest.mark.parametrize("path", sorted(_named()))
def test_named_path_resolves(path):
    assert _resolves(path), f"{path} (named in {_named()[path]}) does not import"
