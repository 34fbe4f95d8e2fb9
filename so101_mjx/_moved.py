"""Old module paths that moved: importing one fails with one line naming its new place."""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any

MOVED: dict[str, str] = {}  # old full module name -> new full module name


class _MovedModules(importlib.abc.MetaPathFinder):
    """Turns an import of a moved module into a ModuleNotFoundError naming its new place."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname in MOVED:
            raise ModuleNotFoundError(f"{fullname} moved to {MOVED[fullname]}", name=fullname)
        return None


def moved(package: str, table: dict[str, str]) -> None:
    """Register ``package.<old>`` -> ``package.<new>`` for each ``old: new`` of ``table``."""
    MOVED.update({f"{package}.{old}": f"{package}.{new}" for old, new in table.items()})
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())
