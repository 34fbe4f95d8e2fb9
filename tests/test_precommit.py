""".pre-commit-config.yaml is valid YAML whose local hooks run the checks .ci/run runs."""

import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_the_hooks_run_what_ci_runs():
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = {hook["id"]: hook for repo in config["repos"] for hook in repo["hooks"]}
    assert set(hooks) == {"ruff", "mypy", "layers"}
    assert all(hook["language"] == "system" and isinstance(hook["name"], str) for hook in hooks.values())
    ci = (ROOT / ".ci" / "run").read_text()
    for hook in ("ruff", "mypy"):
        assert hooks[hook]["entry"].split()[0] in ci
    assert "tests/test_imports.py" in hooks["layers"]["entry"]
