"""The built site in a real headless Chromium (Debian's binary via Playwright; nothing downloaded).

Pages are checked both from disk (file://) and through `pabench leaderboard serve`'s server.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from test_leaderboard import (
    FIXTURE,
    KNOWN_NOW,
    ROOT,
    UNRANKED,
    XSS,
    XSS_ENTRY,
    write_fixture_results,
)

from pabench.leaderboard import build_site, build_tables, load_records, make_server

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} not found (apt-get install "
                       "chromium; see .ci/install-browser)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (Python) not installed")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("lb-browser")
    results = write_fixture_results(root)
    build_site(results, ROOT / "leaderboard" / "reported", root / "site")
    return results, root / "site"


@pytest.fixture(scope="module")
def base_urls(built: tuple[Path, Path]) -> Iterator[dict[str, str]]:
    """The site's root as a file:// URL and as served on 127.0.0.1."""
    site = built[1]
    server = make_server(site, 0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield {"file": site.as_uri() + "/", "http": f"http://127.0.0.1:{server.server_port}/"}
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@dataclass
class Watched:
    """A page plus what it did that a clean static site never does."""

    page: Any
    problems: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def on_request(self, request: Any) -> None:
        if not request.url.startswith(("file://", "http://127.0.0.1", "data:")):
            self.problems.append(f"external request: {request.url}")

    def on_dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()


@pytest.fixture
def watched(browser: Any) -> Iterator[Watched]:
    """A fresh page recording console errors, page errors, dialogs and non-local requests."""
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    w = Watched(context.new_page())
    w.page.on("console", lambda m: m.type == "error" and w.problems.append(f"console: {m.text}"))
    w.page.on("pageerror", lambda e: w.problems.append(f"pageerror: {e}"))
    w.page.on("dialog", w.on_dialog)
    w.page.on("request", w.on_request)
    yield w
    context.close()


def _names(pg: Any, table_id: str) -> list[str]:
    return pg.locator(f"#tbl-{table_id} tbody tr .entry-link").all_inner_texts()


def _table_id(results: Path, protocol: str, version: int) -> str:
    return next(t.id for t in build_tables(load_records(results))
                if (t.protocol, t.version) == (protocol, version))


@pytest.mark.parametrize("mode", ["file", "http"])
def test_index_loads_without_errors(
    watched: Watched, base_urls: dict[str, str], built: tuple[Path, Path], mode: str,
    tmp_path: Path,
) -> None:
    page = watched.page
    tables = build_tables(load_records(built[0]))
    for href in ("reported.html", "protocols.html", "protocols/known.html", "archive.html"):
        page.goto(base_urls[mode] + href, wait_until="load")
    archived = [t for t in tables if t.listing == "archived"]
    assert page.locator("table.results.sortable").count() == len(archived)
    page.goto(base_urls[mode] + "index.html", wait_until="load")
    listed = [t for t in tables if t.listing != "archived"]
    assert page.locator("table.results.sortable").count() == len(listed)  # + the calibration
    drawn = sum(len(t.shown) for t in listed) - 1  # the chance control is named, not drawn
    assert page.locator("svg .pt").count() == drawn
    assert page.locator("svg .pt").count() == sum(len(v) for v in FIXTURE.values()) - 9  # 7
    caption = page.locator("figcaption").first.inner_text()
    assert "the chance control black (action top-1 12.5" in caption
    # archived rows, the one unranked record and the chance control are not plotted on the index
    assert watched.problems == []
    shot = tmp_path / f"leaderboard-index-{mode}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    target = os.environ.get("PABENCH_SCREENSHOT_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(target) / shot.name)


def test_sorting_and_filtering(
    watched: Watched, base_urls: dict[str, str], built: tuple[Path, Path]
) -> None:
    page, tid = watched.page, _table_id(built[0], "known", KNOWN_NOW)
    entries = {k: v for k, v in FIXTURE[("known", KNOWN_NOW)].items() if k != UNRANKED}
    ends = ["black", "identity"]  # the chance control and the raw reference, never ranked
    ranked = [n for n in entries if n not in ends]

    def by(column: int, names: list[str], sign: int = 1) -> list[str]:
        return sorted(names, key=lambda n: sign * entries[n][column])

    page.goto(base_urls["file"] + "index.html")
    initial = _names(page, tid)
    # ranked rows by privacy, best first, then the reference and controls apart: the
    # all-black video's privacy never sits above rank 1
    assert initial == by(1, ranked) + by(1, ends)
    assert page.locator(f"#tbl-{tid} tbody.ends tr.group-head").inner_text().startswith(
        "Not ranked")
    header = page.locator(f"#tbl-{tid} thead th", has_text="Action").first.locator("button")
    header.click()
    by_action = by(0, ranked, -1) + by(0, ends, -1)  # each group sorts on its own
    assert _names(page, tid) == by_action != initial
    assert page.locator(f"#tbl-{tid} thead th[aria-sort=descending]").count() == 1
    header.click()
    assert _names(page, tid) == by(0, ranked) + by(0, ends)
    visible = page.locator(f"#tbl-{tid} tbody tr:visible .entry-link")
    page.locator(f'[data-pareto-only="tbl-{tid}"]').check()
    assert set(visible.all_inner_texts()) == {"unet"}
    page.locator(f'[data-pareto-only="tbl-{tid}"]').uncheck()
    page.locator(f'[data-filter="tbl-{tid}"]').fill("blur")
    assert visible.all_inner_texts() == ["box-blur-face"]
    assert page.locator(f"#tbl-{tid} tr.group-head").is_hidden()  # no control left to head
    assert page.locator(f'[data-count="tbl-{tid}"]').inner_text() == f"1 of {len(entries)} shown"
    assert watched.problems == []


@pytest.mark.parametrize("mode", ["file", "http"])
def test_entry_page_shows_images(
    watched: Watched, base_urls: dict[str, str], built: tuple[Path, Path], mode: str
) -> None:
    page, tid = watched.page, _table_id(built[0], "known", 1)
    page.goto(base_urls[mode] + "archive.html")
    page.locator(f"#tbl-{tid} .entry-link", has_text="downsample-4x").click()
    page.wait_for_load_state("load")
    images = page.locator(".samples img")
    assert images.count() == 1 and images.first.is_visible()
    assert images.evaluate_all("els => els.map(i => [i.complete, i.naturalWidth])") == [
        [True, 128]]
    assert watched.problems == []


def test_script_metadata_renders_as_text(watched: Watched, base_urls: dict[str, str]) -> None:
    page = watched.page
    page.goto(base_urls["file"] + "archive.html")
    link = page.get_by_role("link", name=XSS_ENTRY, exact=True)
    assert link.is_visible()
    link.click()
    page.wait_for_load_state("load")
    assert page.locator("h1.entry-name").inner_text() == XSS_ENTRY
    assert page.get_by_text(f"by {XSS}").first.is_visible()  # authors, shown literally
    assert XSS in page.locator("pre.command").inner_text()
    assert page.evaluate("document.querySelectorAll('script').length") == 1  # only ours
    assert watched.dialogs == [] and watched.problems == []


def test_entry_page_draws_curves(
    watched: Watched, base_urls: dict[str, str], built: tuple[Path, Path]
) -> None:
    page, tid = watched.page, _table_id(built[0], "known", KNOWN_NOW)
    page.goto(base_urls["file"] + f"entries/{tid}__unet.html")
    figures = page.locator("figure.curve svg")
    assert figures.count() == 4 and all(figures.nth(i).is_visible() for i in range(4))
    box = page.locator("figure.curve polyline.curve-line").first.bounding_box()
    assert box is not None and box["width"] > 100  # drawn, not collapsed
    dashed = page.locator(".attempt .curve-line").first.evaluate(
        "el => getComputedStyle(el).strokeDasharray")
    assert dashed not in ("", "none")
    assert watched.problems == []
