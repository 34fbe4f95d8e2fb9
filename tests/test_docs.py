"""The documentation: its Python examples run, the README stays short, no page tells build history.

Every ```python block of README.md and docs/*.md runs, in order, one namespace per page, in a
temporary working directory. A block preceded by the line ``<!-- skip -->`` is not run (for examples
that need an accelerator or hours); console examples use ```bash and are not run.
"""

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
SKIP = "<!-- skip -->"
README_MAX_LINES = 200
# build history: numbered rounds of work, sessions, comparisons with earlier runs of the project
HISTORY = re.compile(
    r"\bsessions?\b|\bthis time\b|\blast time\b|\bthis machine\b|\brerun after\b|\bearlier "
    r"(?:preset|run|figure|code)s?\b"
    r"|\bround \d+\b|\bbefore this\b",
    re.IGNORECASE,
)


def python_blocks(page: Path) -> list[str]:
    """The page's ```python blocks that are not marked to skip, in order."""
    text = page.read_text()
    blocks = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip().splitlines()
        if not (before and before[-1].strip() == SKIP):
            blocks.append(match.group(1))
    return blocks


RUNNABLE = [page for page in PAGES if python_blocks(page)]


@pytest.mark.parametrize("page", RUNNABLE, ids=[p.relative_to(ROOT).as_posix() for p in RUNNABLE])
def test_examples_run(page, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MUJOCO_GL", os.environ.get("MUJOCO_GL", "egl"))
    namespace = {"__name__": "__docs__"}
    for i, block in enumerate(python_blocks(page)):
        code = compile(block, f"{page.name}[python block {i}]", "exec")
        exec(code, namespace)


def test_readme_is_short():
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; at most {README_MAX_LINES} (details go to docs/)"


def test_readme_keeps_the_test_command():
    assert "python -m pytest -n 2 -q" in (ROOT / "README.md").read_text()  # .ci/run and CI run the README's command


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_no_build_history(page):
    hits = [f"{n}: {line.strip()}" for n, line in enumerate(page.read_text().splitlines(), 1) if HISTORY.search(line)]
    assert not hits, (f"{page.name} tells build history (say what the software does and what it measured, "
                      "with dates):\n" + "\n".join(hits))


def test_every_page_is_in_the_site():
    nav = (ROOT / "mkdocs.yml").read_text()
    missing = [p.name for p in PAGES[1:] if f": {p.name}" not in nav and f"- {p.name}" not in nav]
    assert not missing, f"docs pages missing from mkdocs.yml's nav: {missing}"
