"""Every task's default preset is one whose result the docs report: the README's headline names it
with a measured success, and the docs' table of tuned presets lists its size as the preset has it."""

import importlib
import pathlib
import pkgutil
import re

import pytest

from so101_mjx.training import presets

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _row(text: str, env: str) -> str:
    rows = [line for line in text.splitlines() if line.startswith(f"| `{env}`")]
    assert len(rows) == 1, f"one table row for {env} expected, found {len(rows)}"
    return rows[0]


@pytest.mark.parametrize("env", sorted(presets.DEFAULT_PRESET))
def test_the_default_preset_is_the_one_the_readme_reports(env):
    default = presets.DEFAULT_PRESET[env]
    assert default not in ("tiny", "tiny-sac"), f"{env}: the default preset {default!r} is the smoke test"
    headline = _row((ROOT / "README.md").read_text(), env)
    assert re.search(rf"`{re.escape(default)}`(\s*preset)?: eval (1\.000|0\.\d+)", headline), headline


@pytest.mark.parametrize("env", sorted(presets.DEFAULT_PRESET))
def test_the_tuned_preset_table_matches_the_default_preset(env):
    preset = presets.PRESETS[env][presets.DEFAULT_PRESET[env]]
    row = _row((ROOT / "docs" / "training.md").read_text(), env)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert "not run" not in row
    assert cells[1].startswith(f"{preset.total_steps:,} ("), cells[1]
    assert cells[2] == str(preset.num_envs)
    assert float(cells[4]) == preset.success_bonus and float(cells[5]) == preset.demo_start_prob


@pytest.mark.parametrize("info", list(pkgutil.iter_modules(presets.__path__)), ids=lambda i: i.name)
def test_no_preset_docstring_calls_the_default_unrun(info):
    """A module docstring may say a preset has not been run, but not the default one."""
    module = importlib.import_module(f"{presets.__name__}.{info.name}")
    for sentence in re.split(r"(?<=[.;])\s", " ".join((module.__doc__ or "").split())):
        if re.search(r"(never|not been|not yet been|not) run", sentence):
            assert f"``{module.DEFAULT}``" not in sentence and "DEFAULT" not in sentence, sentence
