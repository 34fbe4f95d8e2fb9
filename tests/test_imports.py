"""The import graph: no cycles (importlib-by-name imports included), and the layer rule of docs/DESIGN.md."""

from __future__ import annotations

import ast
import io
import pathlib
import re
import subprocess
import sys
import tokenize

import pytest

from so101_mjx.cli.benches import BENCHES
from so101_mjx.cli.commands import CAMERA, COMMANDS

ROOT = pathlib.Path(__file__).resolve().parent.parent / "so101_mjx"
# Modules whose importlib calls load every module of a package (the preset discovery).
DISCOVERS = {"so101_mjx.training.presets": "so101_mjx.training.presets."}
# The layers, bottom up (docs/DESIGN.md): a unit (a top-level module or subpackage of so101_mjx)
# imports only units of lower floors.
FLOORS = [
    {"errors", "_compat", "_moved", "_progress", "_interrupts", "_precision"},
    {"_files"},
    {"_checks", "_lock", "_schema", "robot"},
    {"ik", "dynamics", "sim", "render"},
    {"envs"},
    {"gym", "station"},
    {"validation"},
    {"training"},
    {"data", "benchmarks"},
    {"sysid"},
    {"follower"},
    {"cli"},
    {"__main__"},
]
FLOOR = {unit: level for level, units in enumerate(FLOORS) for unit in units}
MAX_TOP_LEVEL_MODULES = 12
# Sizes in logical lines (statements, as tokenize ends them), not physical ones: a call wrapped over four
# lines counts once, so the caps are not met by widening lines; docstrings, comments and blank lines
# do not count. 250 and 60 are what 400 and 80 physical lines held at the code's 1.6 lines a statement.
MAX_MODULE_LINES = 250
MAX_FUNCTION_LINES = 60
MAX_IK_MODULES = 6  # ik/ outside ik/solvers/: the envs' IK


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _graph() -> dict[str, set[str]]:
    """``{module: modules it imports}`` within so101_mjx, function-level and by-name imports included."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                submodules = {f"{node.module}.{a.name}" for a in node.names} & set(modules)
                # ``from package import submodule`` needs the submodule; any other name, the module itself
                deps |= submodules | ({node.module} if len(submodules) < len(node.names) else set())
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in modules
                  and node.value != name):
                deps.add(node.value)  # a module imported by name (the CLI's command table, lazy attributes)
        if name in DISCOVERS:
            deps |= {m for m in modules if m.startswith(DISCOVERS[name])}
        graph[name] = {d for d in deps if d in modules and d not in (name, "so101_mjx")}
    graph.pop("so101_mjx")  # the package's public names are lazy attributes: it imports nothing
    return graph


def _unit(module: str) -> str:
    return module.split(".")[1]


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for d in sorted(graph[n]):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state and (found := visit(d)):
                return found
        state[n] = 2
        stack.pop()
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def _upward(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((m, d) for m, deps in graph.items() for d in deps
                  if _unit(m) != _unit(d) and FLOOR[_unit(d)] >= FLOOR[_unit(m)])


def test_no_import_cycles():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]  # the check finds one
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle)


def test_every_unit_has_a_floor():
    units = {_unit(m) for m in _modules() if m != "so101_mjx"}
    assert (units == set(FLOOR)), (f"units without a floor: {sorted(units - set(FLOOR))}; floors without a unit: "
                                   f"{sorted(set(FLOOR) - units)}")


def test_units_import_only_lower_floors():
    assert _upward({"so101_mjx.ik.x": {"so101_mjx.envs.y"}, "so101_mjx.envs.y": {"so101_mjx.ik.x"}}) == [
        ("so101_mjx.ik.x", "so101_mjx.envs.y")]  # the check finds one
    assert _upward(_graph()) == []


def test_the_top_level_stays_small():
    files = [p.name for p in ROOT.glob("*.py")]
    assert len(files) <= MAX_TOP_LEVEL_MODULES, sorted(files)


def test_the_envs_ik_stays_apart_from_the_solver_suite():
    """ik/ outside solvers/ is the envs' IK; importing an env's arm loads no module of the suite."""
    envs_ik = [m for m in _modules() if m.startswith("so101_mjx.ik") and not m.startswith("so101_mjx.ik.solvers")]
    assert len(envs_ik) <= MAX_IK_MODULES, sorted(envs_ik)
    code = ("import sys, so101_mjx.envs.arm; print(sorted(m for m in sys.modules if "
            "m.startswith('so101_mjx.ik.solvers')))")
    result = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120,
                            cwd=ROOT.parent)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr


def _logical_lines(source: str) -> list[int]:
    """The last physical line of each statement in ``source``, docstrings left out."""
    strings = {n.end_lineno for n in ast.walk(ast.parse(source))
               if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
    return [t.start[0] for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type == tokenize.NEWLINE and t.start[0] not in strings]


def test_modules_and_functions_stay_short():
    source = 'def f(a):\n    """Doc."""\n    # a comment\n\n    return g(a,\n             a)\n'
    assert _logical_lines(source) == [1, 6]  # the check counts a wrapped call once, and no docstring
    long_modules, long_functions = [], []
    for name, path in _modules().items():
        source = path.read_text()
        lines = _logical_lines(source)
        if len(lines) > MAX_MODULE_LINES:
            long_modules.append(f"{name} ({len(lines)} lines)")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = sum(node.lineno <= line <= node.end_lineno for line in lines)
                if size > MAX_FUNCTION_LINES:
                    long_functions.append(f"{name}.{node.name} ({size} lines)")
    assert not long_modules and not long_functions, (long_modules, long_functions)


@pytest.mark.parametrize("argv", [["--help"], *[[cmd, "--help"] for cmd in COMMANDS],
                                  *[["bench", target, "--help"] for target in BENCHES],
                                  *[["camera", target, "--help"] for target in CAMERA]])
def test_help_imports_neither_jax_nor_mujoco(argv):
    code = ("import sys; from so101_mjx.cli import main; code = main(sys.argv[1:]); "
            "heavy = sorted(m for m in ('jax', 'mujoco', 'brax', 'numpy') if m in sys.modules); "
            "print('HEAVY', heavy); sys.exit(code)")
    result = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "HEAVY []" in result.stdout and "usage: so101-mjx" in result.stdout


def test_commands_live_in_the_cli():
    """Each command's and bench target's module is in ``so101_mjx.cli``, with its ``run(args)`` (one per bench
    target in ``so101_mjx.cli.bench``). No module outside ``so101_mjx.cli`` defines a top-level ``run``."""
    import importlib

    from so101_mjx.cli import bench

    commands = [*COMMANDS.values(), *CAMERA.values(), *BENCHES.values()]
    assert all(c.module.startswith("so101_mjx.cli.") and callable(importlib.import_module(c.module).run)
               for c in commands)
    assert set(bench.RUNS) == set(BENCHES)
    defines_run = {name for name, path in _modules().items()
                   if any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in ast.parse(path.read_text()).body)}
    outside = sorted(name for name in defines_run if not name.startswith("so101_mjx.cli."))
    assert not outside, outside


@pytest.mark.parametrize("old, new", [("pytorch_solver", "solvers.jax_solver"), ("solver", "solvers.solver"),
                                      ("neural", "solvers.neural_policy")])
def test_a_moved_ik_module_names_its_new_place(old, new):
    import importlib

    import so101_mjx.ik

    with pytest.raises(ModuleNotFoundError, match=f"so101_mjx.ik.{old} moved to so101_mjx.ik.{new}$"):
        importlib.import_module(f"so101_mjx.ik.{old}")
    assert so101_mjx.ik.SO101Solver is importlib.import_module("so101_mjx.ik.solvers").SO101Solver


@pytest.mark.parametrize("package", ["so101_mjx", "so101_mjx.ik"])
def test_the_static_face_mirrors_the_lazy_table(package):
    """The ``TYPE_CHECKING`` imports (what type checkers and IDEs resolve) name exactly the lazy table's
    names from its modules, ``__all__`` is a literal list of them, and the package is marked typed."""
    import importlib

    module = importlib.import_module(package)
    tree = ast.parse(pathlib.Path(module.__file__).read_text())
    static = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                static.update({alias.name: imp.module for alias in imp.names})
    lazy = {name: target for name, target in module._LAZY.items()}
    assert static == lazy
    literal = next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "__all__")
    assert (isinstance(literal, ast.List)
            and sorted(ast.literal_eval(literal)) == sorted({*lazy} | ({"__version__"} & set(module.__all__))))
    assert (ROOT / "py.typed").is_file()


def test_library_errors_name_no_flag():
    """Library errors and warnings name parameters (``steps``, ``force=True``), never a command's flag; ``so101-mjx``
    writes the parameters a ParameterError names as its options. Flags are the business of ``so101_mjx.cli``."""
    flag = re.compile(r"--[a-zA-Z]")
    found = []
    for name, path in _modules().items():
        if name.startswith("so101_mjx.cli."):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            warns = isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "warn"
            if isinstance(node, ast.Raise) or warns:
                found += [f"{name}:{c.lineno}: {c.value!r}" for c in ast.walk(node)
                          if isinstance(c, ast.Constant) and isinstance(c.value, str) and flag.search(c.value)]
    assert not found, found
