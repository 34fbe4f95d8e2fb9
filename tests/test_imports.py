"""The import graph: no cycles (importlib-by-name imports included), no upward imports."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "so101_mjx"
# Modules whose importlib calls load every module of a package (the task and preset discovery).
DISCOVERS = {"so101_mjx.envs.registry": "so101_mjx.envs.tasks", "so101_mjx.training.presets": "so101_mjx.training.presets"}


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
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
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in modules and node.value != name:
                deps.add(node.value)  # a module imported by name (cli's command table, lazy attributes)
        if name in DISCOVERS:
            deps |= {m for m in modules if m.startswith(DISCOVERS[name] + ".")}
        graph[name] = {d for d in deps if d in modules and d not in (name, "so101_mjx")}
    # so101_mjx/__init__ imports nothing at import time (its names are lazy attributes)
    graph.pop("so101_mjx")
    return graph


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


def test_no_import_cycles():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]  # the check finds one
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle)


@pytest.mark.parametrize("lower, upper", [
    ("so101_mjx.envs", "so101_mjx.training"), ("so101_mjx.envs", "so101_mjx.validation"), ("so101_mjx.envs", "so101_mjx.gym"),
    ("so101_mjx.sim", "so101_mjx.envs"), ("so101_mjx.robot", "so101_mjx.envs"), ("so101_mjx.ik", "so101_mjx.envs"),
    ("so101_mjx.gym", "so101_mjx.training"), ("so101_mjx.validation", "so101_mjx.training"),
])
def test_no_upward_imports(lower, upper):
    graph = _graph()
    bad = sorted((m, d) for m, deps in graph.items() if m == lower or m.startswith(lower + ".") for d in deps
                 if d == upper or d.startswith(upper + "."))
    assert not bad, bad


def test_nothing_but_the_checkout_entry_imports_the_cli():
    graph = _graph()
    assert not [m for m, deps in graph.items() if "so101_mjx.cli" in deps]
