"""The built documentation site in a headless browser (Playwright driving Chromium): the home page shows the
install line and the quick start above the fold, every page's images load, and no internal link is broken.

The site is ``$SO101_SITE_DIR`` when set (``.ci/run`` passes the one its ``mkdocs build --strict`` made, and a
missing browser is then a failure), else built here into a temporary directory. The browser is Playwright's own
Chromium where installed, else the system's (``chromium``, Debian's ``chromium-headless-shell``).
``$SO101_SITE_SHOTS``, when set, is a directory that receives screenshots of the home and Tasks pages.
"""

from __future__ import annotations

import functools
import http.server
import importlib
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlsplit

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
VIEWPORT = {"width": 1280, "height": 800}  # px: a laptop's browser window; "above the fold" is within its height
SYSTEM_BROWSERS = ("chromium", "chromium-headless-shell", "/usr/lib/chromium/chromium-headless-shell",
                   "chromium-browser", "google-chrome")
# every image of a page, with whether it loaded (a decoded image has a natural width)
BROKEN_IMAGES_JS = "() => [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"
LINKS_JS = "() => [...document.querySelectorAll('a[href]')].map(a => a.href)"
# the page's bottom edge (px from the top of the page) of the first element matching a selector, or null
BOTTOM_JS = "s => { const e = document.querySelector(s); return e ? e.getBoundingClientRect().bottom : null; }"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    given = os.environ.get("SO101_SITE_DIR")
    if given:
        return Path(given)
    pytest.importorskip("mkdocs", reason="the docs extra builds the site")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--quiet", "--site-dir", str(out)], cwd=ROOT,
                   env=env, check=True)
    return out


def _browser_executable(playwright) -> str | None:
    """None where Playwright's own Chromium is installed (its default), else the first system browser found."""
    if Path(playwright.chromium.executable_path).is_file():
        return None
    for name in SYSTEM_BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    message = f"no Chromium: Playwright's is not installed and none of {SYSTEM_BROWSERS} is on PATH"
    if os.environ.get("SO101_SITE_DIR"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def page(site) -> Iterator:
    """A headless Chromium page, and the site served over HTTP on localhost (``page.site_url``)."""
    if os.environ.get("SO101_SITE_DIR"):  # CI: a missing package fails
        playwright_api = importlib.import_module("playwright.sync_api")
    else:
        playwright_api = pytest.importorskip("playwright.sync_api", reason="the docs extra holds playwright")
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with playwright_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=_browser_executable(p))
            page = browser.new_page(viewport=VIEWPORT)
            page.site_url = f"http://127.0.0.1:{server.server_address[1]}/"
            yield page
            browser.close()
    finally:
        server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # the base class prints every request to stderr
        pass


def _pages(site: Path) -> list[str]:
    return sorted(str(p.relative_to(site)) for p in site.rglob("*.html"))


def _target(site: Path, path: str) -> Path:
    """The file a site URL path serves: ``dir/`` -> ``dir/index.html``."""
    target = site / unquote(path).lstrip("/")
    return target / "index.html" if path.endswith("/") or target.is_dir() else target


def _shoot(page, name: str) -> None:
    shots = os.environ.get("SO101_SITE_SHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(shots) / f"{name}.png"))


def test_the_home_page_shows_the_install_line_and_quick_start_above_the_fold(page):
    page.goto(page.site_url, wait_until="load")
    _shoot(page, "home")
    heading = page.evaluate(BOTTOM_JS, "h2#quick-start")
    assert heading is not None, "the home page has no 'Quick start' heading"
    install = page.locator("pre code", has_text="pip install").first
    box = install.bounding_box()
    assert box is not None, "the home page has no install line in a code block"
    assert heading <= VIEWPORT["height"] and box["y"] + box["height"] <= VIEWPORT["height"], (
        f"below the fold ({VIEWPORT['height']} px): the quick start's heading ends at {heading:.0f} px, the install "
        f"line at {box['y'] + box['height']:.0f} px")


def test_every_page_loads_its_images_and_links_only_to_pages_that_exist(page, site):
    pages = _pages(site)
    assert "index.html" in pages and "tasks/index.html" in pages, pages[:10]
    broken_images, broken_links, images, internal = [], [], 0, 0
    for path in pages:
        page.goto(page.site_url + path, wait_until="load")
        if path == "tasks/index.html":
            _shoot(page, "tasks")
        images += page.evaluate("() => document.images.length")
        broken_images += [f"{path}: {src}" for src in page.evaluate(BROKEN_IMAGES_JS)]
        for href in page.evaluate(LINKS_JS):
            url = urlsplit(urldefrag(href).url)
            if url.netloc == urlsplit(page.site_url).netloc:
                internal += 1
                if not _target(site, url.path).is_file():
                    broken_links.append(f"{path}: {href}")
    assert images >= 20 and internal >= 1000, (images, internal)  # the checks ran over the site's pictures and links
    assert not broken_images, f"{len(broken_images)} images did not load: {broken_images[:10]}"
    assert not broken_links, f"{len(broken_links)} internal links lead nowhere: {broken_links[:10]}"
