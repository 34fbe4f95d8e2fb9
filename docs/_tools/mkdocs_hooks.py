"""mkdocs hooks of the documentation site (mkdocs.yml ``hooks:``).

- ``on_files``: generates the API reference, one page per unit of the package (``api/<unit>.md``),
  each listing every public module of the unit for mkdocstrings, so a new module is documented
  without editing the site; ``api/index.md`` lists the names ``so101_mjx`` exports; ``cli.md`` holds
  every command's ``--help``, from the parser the console script runs (which imports no command).
- ``on_page_content``: the docstrings' Sphinx roles (``:func:`~so101_mjx.ik.solvers.solver.SO101Solver```)
  become code spans linked to the API reference where the target is documented there.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "so101_mjx"
# the units of docs/DESIGN.md's layer table that users call (private ones left out), in floor order
UNITS = ("robot", "ik", "dynamics", "sim", "render", "envs", "gym", "station", "validation", "training", "data",
         "benchmarks", "sysid", "follower", "cli", "errors")


def _public_modules(unit: str) -> list[str]:
    path = PACKAGE / unit
    if path.with_suffix(".py").is_file():
        return [f"so101_mjx.{unit}"]
    modules = []
    for file in sorted(path.rglob("*.py")):
        parts = file.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(p.startswith("_") for p in parts) and "__pycache__" not in file.parts:
            modules.append(".".join(parts))
    return sorted(modules, key=lambda m: (m.count("."), m) if m == f"so101_mjx.{unit}" else (9, m))


def _unit_page(unit: str) -> str:
    lines = [f"# `so101_mjx.{unit}`", ""]
    for module in _public_modules(unit):
        lines += [f"::: {module}", ""]
        if module == f"so101_mjx.{unit}" and (PACKAGE / unit).is_dir():  # a package's re-exports: under their modules
            lines[-1:] = ["    options:", "      members: false", ""]
    return "\n".join(lines)


def _index_page() -> str:
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    lazy = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                and getattr(node.targets[0], "id", "") == "_LAZY")
    names = ast.literal_eval(lazy)
    rows = [f'| <autoref identifier="{module}.{name}" optional><code>so101_mjx.{name}</code></autoref> | `{module}` |'
            for name, module in sorted(names.items())]
    units = [f"- [`so101_mjx.{unit}`]({unit}.md)" for unit in UNITS]
    return "\n".join([
        "# API reference", "",
        "Generated from the docstrings. `import so101_mjx` imports neither JAX nor MuJoCo: each name below",
        "loads its module on first use.", "",
        "| name | defined in |", "|---|---|", *rows, "",
        "By unit (the package's layers, lowest first; see [Design](../DESIGN.md#layers)):", "", *units, "",
    ])


def _cli_page() -> str:
    import argparse
    import os
    import sys

    sys.path.insert(0, str(ROOT))
    from so101_mjx.cli.main import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps at the terminal's width: the same page everywhere
    lines = ["# Command line", "",
             "`so101-mjx COMMAND --help` prints each section below. Generated from the parser the console "
             "script runs.", ""]

    def add(parser: argparse.ArgumentParser, title: str) -> None:
        lines.extend([f"## `{title}`", "", "```text", parser.format_help().rstrip(), "```", ""])
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    add(sub, f"{title} {name}")

    root = build_parser()
    root.prog = "so101-mjx"
    add(root, "so101-mjx")
    return "\n".join(lines)


def on_files(files, config):
    files.append(File.generated(config, "cli.md", content=_cli_page()))
    files.append(File.generated(config, "api/index.md", content=_index_page()))
    for unit in UNITS:
        files.append(File.generated(config, f"api/{unit}.md", content=_unit_page(unit)))
    return files


_ROLE = re.compile(r":(?:py:)?(?:mod|func|class|meth|data|attr|obj|exc|const):<code>(~?)([\w.]+?)(\(\))?</code>")


def _role(match: re.Match) -> str:
    short, target, call = match.groups()
    title = (target.rsplit(".", 1)[-1] if short else target) + (call or "")
    return f'<autoref identifier="{target}" optional><code>{title}</code></autoref>'


def on_page_content(html, page, config, files):
    return _ROLE.sub(_role, html)
