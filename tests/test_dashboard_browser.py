"""The dashboard in a real browser: headless Chromium (Debian's ``chromium``, driven by
Playwright; see ``tests/browser.py``) opens the page from the live server and from the
``--out`` file, and what a person would see is checked in the rendered DOM: the numbers,
charts actually drawn, no console error (a blocked script or style would log one), the
switches and links working; a screenshot of each is kept. With JavaScript off every
number is still there."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import artifact_dir
from tests.dashboard_data import OTHER, REPO, seed
from verified_memory import MemoryService
from verified_memory.cli import main
from verified_memory.dashboard import build, pages
from verified_memory.dashboard.data import Dashboard
from verified_memory.dashboard.page import anchor
from verified_memory.dashboard.server import DashboardServer, start
from verified_memory.models import utcnow
from verified_memory.store.sqlite import SQLiteStore

pytestmark = pytest.mark.browser

NOW = utcnow()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SQLiteStore]:
    """The hand-worked data, dated from today (the page counts the last 90 days)."""
    with SQLiteStore(tmp_path / "browser.db") as store:
        seed(store, NOW)
        yield store


@pytest.fixture
def expected(db: SQLiteStore) -> Dashboard:
    return build(MemoryService(db))[0]


@pytest.fixture
def live(db: SQLiteStore) -> Iterator[DashboardServer]:
    server = start(0, pages(MemoryService(db)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


class Seen:
    """A page open in Chromium, with every console message and error it logged."""

    def __init__(self, context: Any, url: str) -> None:
        self.page = context.new_page()
        self.problems: list[str] = []
        self.page.on("console", lambda m: self.problems.append(f"console {m.type}: {m.text}")
                     if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url}"))
        self.requests: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(url, wait_until="load")

    def text(self, selector: str) -> str:
        return str(self.page.locator(selector).first.inner_text()).strip()

    def shot(self, tmp_path: Path, name: str, record: Any) -> Path:
        path = artifact_dir(tmp_path) / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        record("screenshot", str(path))
        print(f"screenshot: {path}")
        return path


def drawn(seen: Seen, chart: str, marks: str = ":is(rect, circle, path)") -> list[dict[str, float]]:
    """The size of every mark (bar, dot, line) a visible chart drew."""
    return list(seen.page.eval_on_selector_all(
        f"{chart} {marks}",
        "marks => marks.filter(m => m.getClientRects().length).map(m => {"
        " const b = m.getBoundingClientRect(); return {w: b.width, h: b.height}; })"))


def check_numbers(seen: Seen, expected: Dashboard) -> None:
    api = {r.repo: r for r in expected.repos}[REPO]
    assert api.total.verifications == 8  # the seed's, all within the last 90 days
    row = seen.page.locator("table.overview tbody tr", has_text=REPO)
    cells = [c.strip() for c in row.locator("td").all_inner_texts()]
    assert cells[:8] == [REPO, "10", "6", "1", "1", "8", "38 %", "2"]
    section = f'section[data-repo="{REPO}"]'
    assert seen.text(f'{section} .card[data-key="verifications"] dd') == "8"
    assert seen.text(f'{section} .card[data-key="active"] dd') == "6"
    funnel = seen.page.locator(f"{section} table.funnel tbody tr").all_inner_texts()
    assert [" ".join(r.split()) for r in funnel] == [
        "retrieved 7", "verified valid 5", "verified invalid 3", "applied 2",
        "feedback: success 3", "feedback: failure 1"]
    assert seen.text(f"{section} table.files tbody tr").split() == ["src/a.py", "2"]
    assert seen.page.locator(f'{section} .attention[data-total="2"]').count() == 3
    assert seen.page.locator(f'section[data-repo="{OTHER}"]').count() == 1


def check_charts(seen: Seen) -> None:
    section = f'section[data-repo="{REPO}"]'
    for chart in ("status-chart", "rate-chart", "relocation-chart", "funnel", "files"):
        marks = drawn(seen, f"{section} svg.{chart}")
        assert [m for m in marks if m["w"] > 0 and m["h"] > 0], f"{chart} drew nothing"
    dots = drawn(seen, f"{section} svg.rate-chart", "circle.rate-dot")
    assert dots, "the rate has a dot per period with verdicts"


def test_the_live_page_in_chromium(browser: Any, live: DashboardServer, expected: Dashboard,
                                   tmp_path: Path, record_property: Any) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    seen = Seen(context, live.url)
    check_numbers(seen, expected)
    check_charts(seen)
    # The script shows the week; a button switches to days, which then draws.
    section = f'section[data-repo="{REPO}"]'
    daily = seen.page.locator(f"{section} #repo-acme-api-daily")
    weekly = seen.page.locator(f"{section} #repo-acme-api-weekly")
    assert weekly.is_visible()
    assert not daily.is_visible()
    seen.page.locator(f"{section} .periods").first.get_by_role("button", name="per day").click()
    assert daily.is_visible()
    assert not weekly.is_visible()
    assert drawn(seen, f"{section} #repo-acme-api-daily", "rect.volume")
    # A memory's link opens its detail, with its citations and trail.
    seen.page.locator(f"{section} .attention a", has_text="subject of m-poor").first.click()
    detail = seen.page.locator(f"#{anchor('m-poor')}")
    assert detail.evaluate("d => d.open")
    assert "src/a.py" in detail.inner_text()
    assert "verified_invalid" in detail.locator("table.trail").inner_text()
    seen.shot(tmp_path, "dashboard-live", record_property)
    assert seen.problems == []
    assert all(url.startswith(live.url) or url.startswith("data:") for url in seen.requests)
    context.close()


def test_the_out_file_in_chromium(browser: Any, db: SQLiteStore, expected: Dashboard,
                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  record_property: Any) -> None:
    report = tmp_path / "report.html"
    monkeypatch.setenv("VMEM_DATABASE_URL", db.path)
    with pytest.raises(SystemExit) as done:
        main(["dashboard", "--out", str(report)])
    assert done.value.code == 0
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    seen = Seen(context, report.as_uri())
    check_numbers(seen, expected)
    check_charts(seen)
    seen.shot(tmp_path, "dashboard-file", record_property)
    assert seen.problems == []
    assert seen.requests == [report.as_uri()]  # nothing else: no CDN, no font, no icon
    context.close()


def test_with_javascript_off_every_number_is_there(browser: Any, live: DashboardServer,
                                                   expected: Dashboard, tmp_path: Path,
                                                   record_property: Any) -> None:
    context = browser.new_context(java_script_enabled=False,
                                  viewport={"width": 1280, "height": 900})
    seen = Seen(context, live.url)
    check_numbers(seen, expected)
    section = f'section[data-repo="{REPO}"]'
    # No script: both charts of each pair show, and no switch was added.
    assert seen.page.locator(f"{section} #repo-acme-api-daily").is_visible()
    assert seen.page.locator(f"{section} #repo-acme-api-weekly").is_visible()
    assert seen.page.locator(".switch").count() == 0
    check_charts(seen)
    # The per-day numbers are a table behind a summary a click opens, no script needed.
    seen.page.locator(f"{section} details.numbers summary", has_text="per day").click()
    rows = seen.page.locator(f"{section} table.daily tbody tr")
    assert rows.count() == 90
    assert " ".join(rows.last.inner_text().split()).startswith(NOW.date().isoformat())
    seen.shot(tmp_path, "dashboard-no-script", record_property)
    assert seen.problems == []
    context.close()
