"""The published site in a real browser: headless Chromium (Debian's `chromium`) driven by Playwright for
Python with the system browser (Playwright's own download is never used). Skipped, with the reason, where
either is missing; .ci/run installs both."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from publish_fixtures import DRIFT_AT, STEP_AT, history

# Debian's chromium first; a GitHub Ubuntu runner has no such package but ships Google Chrome.
CHROMIUM = (os.environ.get("ADALN_BENCH_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
            or shutil.which("google-chrome") or "/usr/bin/chromium")

pytest.importorskip("matplotlib")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
if not Path(CHROMIUM).is_file():
    pytest.skip(f"no chromium at {CHROMIUM} (apt-get install -y chromium)", allow_module_level=True)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    from adaln_bench.reports.site.build import build_site

    folder = tmp_path_factory.mktemp("browser")
    history(folder / "results")
    build_site([folder / "results"], folder / "site")
    return folder / "site"


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    pg = context.new_page()
    pg.problems = []  # console errors, page errors and any request that is not for a local file
    pg.on("console", lambda m: pg.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    pg.on("pageerror", lambda exc: pg.problems.append(f"page error: {exc}"))
    pg.on("request", lambda r: pg.problems.append(f"request {r.url}") if not r.url.startswith(("file:", "data:"))
          else None)
    yield pg
    context.close()


def test_index_loads_without_console_error_or_network(site, page):
    page.goto((site / "index.html").as_uri())
    assert page.title() == "adaln-bench history"
    assert page.locator("table.matrix").count() == 1
    assert page.problems == []


def cell(page, mode: str, candidate: str):
    return page.locator(f'td.cell[data-mode="{mode}"][data-candidate="{candidate}"]')


def test_matrix_shows_the_verdicts(site, page):
    page.goto((site / "index.html").as_uri())
    expected = {("plain", "diffusers"): "NO", ("plain", "bundled"): "yes", ("vllm", "diffusers"): "unavailable"}
    for (mode, candidate), verdict in expected.items():
        c = cell(page, mode, candidate)
        assert c.count() == 1
        assert c.get_attribute("data-verdict") == verdict
        assert c.locator(".verdict").inner_text().strip() == verdict
    # The failing counts are on hover.
    assert "all_rows[" in cell(page, "plain", "diffusers").locator(".verdict").get_attribute("title")
    # Today's ratio and its trend: the planted step made bundled slower; diffusers is flat.
    assert cell(page, "plain", "bundled").get_attribute("data-trend") == "up"
    assert "×1.2" in cell(page, "plain", "bundled").inner_text()
    assert cell(page, "plain", "diffusers").get_attribute("data-trend") == "flat"


def test_step_is_marked_and_the_clock_drift_is_not(site, page):
    page.goto((site / "index.html").as_uri())
    cell(page, "plain", "bundled").locator("a").click()
    page.wait_for_load_state()
    assert page.url.split("#")[1].endswith("plain-bundled")
    bundled = page.locator('section.series[data-candidate="bundled"]')
    assert bundled.locator(f'tr[data-index="{STEP_AT}"] td[data-step="up"]').count() == 6  # every T
    assert bundled.locator("td[data-step]").count() == 6
    assert bundled.locator(f'tr[data-index="{DRIFT_AT}"] td[data-step]').count() == 0
    assert page.locator('section.series[data-candidate="diffusers[plain]"] td[data-step]').count() == 0
    assert bundled.locator(".plot svg").count() == 1
    assert page.problems == []


def test_points_link_to_their_report_and_to_the_diff_before_them(site, page):
    page.goto((site / "op" / "adaln_projection.html").as_uri())
    row = page.locator(f'section.series[data-candidate="bundled"] tr[data-index="{STEP_AT}"]')
    assert row.locator("a", has_text="report").get_attribute("href").startswith("../reports/")
    row.locator("a", has_text="diff").click()
    page.wait_for_load_state()
    assert "adaln-bench diff" in page.locator("h2").first.inner_text()
    assert page.locator("table").count() >= 1
    assert page.problems == []


def test_the_summary_comes_first_and_its_cell_opens_the_series(site, page):
    page.goto((site / "index.html").as_uri())
    tables = page.locator("table")
    assert tables.first.get_attribute("class") == "summary"
    pick = page.locator('table.summary td.pick[data-mode="plain"]')
    assert pick.count() == 1 and pick.get_attribute("data-candidate") == "bundled"
    # The summary sits above the fold, before the first matrix.
    assert pick.bounding_box()["y"] < page.locator("table.matrix").first.bounding_box()["y"]
    pick.locator("a").click()
    page.wait_for_load_state()
    anchor = page.url.split("#", 1)[1]
    assert page.locator(f'section.series[id="{anchor}"]').is_visible()
    assert page.problems == []
