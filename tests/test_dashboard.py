"""``vmem dashboard``: the numbers (verdicts only, per day and week, the funnel, the files
that break memories, the lists), the page (escaped, self-contained, every link landing),
the live server (loopback, its errors) and the command."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard_data import NOW, OTHER, REPO, cite, seed
from tests.gitrepo import GitRepo, git_env
from tests.pg import postgres_store
from verified_memory import LocalGitSource, MemoryService
from verified_memory.cli import main
from verified_memory.dashboard import build, pages, render_page
from verified_memory.dashboard.data import collect
from verified_memory.dashboard.detail import audit_trail, memory_detail, memory_details
from verified_memory.dashboard.page import anchor, describe, render_detail_page
from verified_memory.dashboard.server import DashboardServer, Pages, start
from verified_memory.errors import NotFound, ValidationError, VerifiedMemoryError
from verified_memory.gitstore.store import GitStore
from verified_memory.models import EventKind, Memory, TelemetryEvent, utcnow
from verified_memory.store.base import MemoryStore
from verified_memory.store.sqlite import SQLiteStore

TODAY = NOW.date()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path / "dash.db") as opened:
        seed(opened)
        yield opened


@pytest.fixture
def service(store: SQLiteStore) -> MemoryService:
    return MemoryService(store)


def week(service: MemoryService, **options: Any) -> Any:
    return collect(service.read_view, days=7, now=NOW, **options)


# --------------------------------------------------------------------------- the numbers


def test_a_week_of_verdicts_per_day_and_per_week(service: MemoryService) -> None:
    api = week(service).repos[0]
    assert api.repo == REPO
    total = api.total
    # 3 + 1 valid, 1 + 1 invalid: the four views (checked) are not verdicts.
    assert (total.verified_valid, total.verified_invalid) == (4, 2)
    assert total.verifications == 6
    assert total.rate == pytest.approx(1 / 3)
    assert (total.relocated, total.invalidated) == (2, 2)
    assert [p.start for p in api.daily] == [TODAY - timedelta(days=n) for n in range(6, -1, -1)]
    yesterday, today = api.daily[-2], api.daily[-1]
    assert (yesterday.verifications, yesterday.rate) == (4, 0.25)
    assert (today.verifications, today.rate) == (2, 0.5)
    assert all(p.rate is None for p in api.daily[:-2])
    # NOW is a Wednesday: the window (Thursday to Wednesday) touches two weeks.
    assert [p.start for p in api.weekly] == [TODAY - timedelta(days=6), date(2026, 3, 9)]
    assert [p.verifications for p in api.weekly] == [0, 6]


def test_a_longer_window_reaches_older_verdicts(service: MemoryService) -> None:
    api = collect(service.read_view, days=30, now=NOW).repos[0]
    assert api.total.verifications == 8
    assert [(f.path, f.breaks) for f in api.files] == [
        ("src/a.py", 2), ("src/c/d.py", 1), ("src/old.py", 1)]
    assert [(d.path, d.breaks) for d in api.directories] == [("src/", 3), ("src/c/", 1)]


def test_the_funnel_and_the_files_of_the_window(service: MemoryService) -> None:
    api = week(service).repos[0]
    assert api.funnel.to_dict() == {"retrieved": 7, "verified_valid": 4, "verified_invalid": 2,
                                    "applied": 2, "successes": 3, "failures": 1}
    assert [(f.path, f.breaks) for f in api.files] == [("src/a.py", 2), ("src/c/d.py", 1)]
    assert [(d.path, d.breaks) for d in week(service, top=1).repos[0].directories] == [
        ("src/", 2)]


def test_statuses_quality_and_the_four_lists(service: MemoryService) -> None:
    api = week(service).repos[0]
    assert dict(api.statuses) == {"active": 6, "pending": 1, "invalid": 1, "superseded": 1,
                                  "expired": 1}
    assert dict(api.quality) == {"validated": 2, "poor": 1, "promoted": 1,
                                 "never_applied": 2, "failing": 2}
    lists = {m.key: ([r.id for r in m.rows], m.total) for m in api.lists}
    assert lists == {"never_applied": (["m-old", "m-fresh"], 2),
                     "failing": (["m-poor", "m-stale"], 2),
                     "pending": (["m-pending"], 1),
                     "expiring": (["m-stale", "m-old"], 2)}
    short = {m.key: (len(m.rows), m.total) for m in week(service, list_limit=1).repos[0].lists}
    assert short["never_applied"] == (1, 2)
    no_decay = week(service, expire_days=0).repos[0]
    assert "expiring" not in {m.key for m in no_decay.lists}
    sooner = week(service, expire_days=30).repos[0]  # 30 days: due within a week are 26+ - 7
    assert {m.key: m.total for m in sooner.lists}["expiring"] == 2
    later = week(service, expire_days=60).repos[0]
    assert {m.key: m.total for m in later.lists}["expiring"] == 0


def test_every_number_is_of_the_window_and_not_after_it(service: MemoryService) -> None:
    """A window that ends before the newest events (``now`` a day back; or events a
    writer with a clock ahead dated tomorrow): the funnel and the files count the days
    the chart does, not the days after it too."""
    api = collect(service.read_view, days=7, now=NOW - timedelta(days=1)).repos[0]
    # Yesterday's events of the fixture are in, today's not.
    assert (api.total.verified_valid, api.total.verified_invalid) == (3, 1)
    assert api.funnel.to_dict() == {"retrieved": 5, "verified_valid": 3, "verified_invalid": 1,
                                    "applied": 2, "successes": 1, "failures": 1}
    assert [(f.path, f.breaks) for f in api.files] == [("src/a.py", 1), ("src/c/d.py", 1)]


def test_repositories_asked_for_and_their_order(service: MemoryService) -> None:
    assert [r.repo for r in week(service).repos] == [REPO, OTHER]
    (web,) = week(service, repos=[OTHER]).repos
    assert (web.repo, web.total.verifications, web.funnel.retrieved) == (OTHER, 1, 1)
    assert web.statuses["active"] == 2
    (nobody,) = week(service, repos=["nobody/none"]).repos
    assert (nobody.memories, nobody.total.verifications, nobody.files) == (0, 0, ())


@pytest.mark.parametrize("options", [{"days": 0}, {"days": 5000}, {"top": 0},
                                     {"list_limit": -1}])
def test_impossible_windows_are_refused(service: MemoryService, options: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        collect(service.read_view, now=NOW, **{"days": 7, **options})


def test_details_carry_citations_history_and_the_audit_trail(service: MemoryService) -> None:
    (valid,) = memory_details(service, ["m-valid"])
    assert [m.id for m in valid.history] == ["m-super", "m-valid"]
    kinds = [e.kind for e in valid.trail]
    assert EventKind.RETRIEVED not in kinds  # thousands of them say nothing here
    assert kinds.count(EventKind.VERIFIED_VALID) == 5
    assert valid.earlier == 0
    assert valid.memory.citations[0].path == "src/a.py"


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_memory_trail_keeps_what_compaction_archived(kind: str, tmp_path: Path) -> None:
    with MemoryService(open_store(kind, tmp_path)) as service:
        store = service.memories
        seed(store)
        # m-valid's `created` (40 days ago) and a verdict (20 days ago) go to the archive.
        assert store.archive_events(NOW - timedelta(days=14)) > 2
        valid = memory_detail(service, "m-valid")
        kinds = [e.kind for e in valid.trail]
        assert kinds[:2] == [EventKind.CREATED, EventKind.VERIFIED_VALID]  # oldest first
        assert kinds.count(EventKind.VERIFIED_VALID) == 5  # as before compaction
        assert (valid.earlier, valid.archived) == (0, 2)
        html = render_detail_page(valid)
        assert "2 of these events were archived by <code>vmem db compact</code>" in html
        assert "<code>vmem log m-valid</code>" in html
        # Cut by the limit: the archived events are the earlier ones, none shown.
        trail, earlier, archived = audit_trail(service, "m-valid", limit=3)
        assert (len(trail), earlier, archived) == (3, len(kinds) - 3, 0)
        assert "archived by" not in render_detail_page(memory_detail(service, "m-fresh"))


# --------------------------------------------------------------------------- verdicts only

SESSIONS = "MAX_RETRIES = 3\nTIMEOUT = 10\n\n\ndef fetch(url):\n    return get(url)\n"
POOL = "POOL_SIZE = 5\nPOOL_TIMEOUT = 30\n"


@pytest.fixture
def clone(tmp_path: Path) -> GitRepo:
    """A clone of ``origin`` whose default branch, main, is the main line."""
    origin = GitRepo(tmp_path / "origin.git", bare=True)
    author = GitRepo.project(tmp_path / "author", {"src/net.py": SESSIONS,
                                                   "src/db/pool.py": POOL})
    author.run("remote", "add", "origin", str(origin.path))
    author.run("push", "-q", "origin", "main")
    subprocess.run(["git", "clone", "-q", str(origin.path), str(tmp_path / "clone")],
                   check=True, env=git_env(), capture_output=True)
    return GitRepo(tmp_path / "clone")


def open_store(kind: str, tmp_path: Path) -> MemoryStore:
    return SQLiteStore(tmp_path / "verdicts.db") if kind == "sqlite" else postgres_store(tmp_path)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_views_and_dry_runs_never_count_a_verdict_does(clone: GitRepo, tmp_path: Path,
                                                       kind: str) -> None:
    repo = "acme/net"
    with MemoryService(open_store(kind, tmp_path), LocalGitSource(clone.path)) as service:
        for subject, path, lines in (("retries", "src/net.py", (1, 2)),
                                     ("fetch", "src/net.py", (5, 6)),
                                     ("pool", "src/db/pool.py", (1, 2))):
            service.store({"repo": repo, "subject": subject, "fact": f"{subject} holds",
                           "citations": [{"path": path, "line_start": lines[0],
                                          "line_end": lines[1]}]})

        def numbers() -> Any:
            return collect(service.read_view, repos=[repo], days=7).repos[0]

        # A branch that breaks everything, checked out: a view. Then a dry run on main.
        clone.run("checkout", "-q", "-b", "feature")
        clone.write("src/net.py", "MAX_RETRIES = 9\n")
        clone.write("src/db/pool.py", "POOL_SIZE = 1\n")
        clone.commit("break everything")
        view = service.verify(repo=repo, ref="feature")
        assert not view.applies
        clone.run("checkout", "-q", "main")
        assert not service.verify(repo=repo, apply=False).applies
        seen = numbers()
        assert seen.total.verifications == 0
        assert seen.total.rate is None
        assert seen.funnel.verified_invalid == 0
        checked = service.read_view(_events_of(repo, "checked"))
        assert sum(r["events"] for r in checked) == 6

        # Main moves on: net.py's code moves down two lines, pool.py's changes.
        clone.write("src/net.py", '"""Network."""\n\n' + SESSIONS)
        clone.write("src/db/pool.py", "POOL_SIZE = 50\nPOOL_TIMEOUT = 1\n")
        clone.commit("main moves on")
        clone.run("push", "-q", "origin", "main")
        assert service.verify(repo=repo).applies
        judged = numbers()
        assert (judged.total.verified_valid, judged.total.verified_invalid) == (2, 1)
        assert judged.total.rate == pytest.approx(1 / 3)
        assert (judged.total.relocated, judged.total.invalidated) == (2, 1)
        assert [(f.path, f.breaks) for f in judged.files] == [("src/db/pool.py", 1)]
        assert judged.statuses["invalid"] == 1


def _events_of(repo: str, kind: str) -> Any:
    from verified_memory.store.views import ViewQuery

    return ViewQuery("agent_memory_events_daily", repo=repo, where=(("kind", "=", kind),))


# --------------------------------------------------------------------------- the page


class Page(HTMLParser):
    """What a test checks in a page: ids, links, inline script and style, text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self.csp = ""
        self.text: list[str] = []
        self._in: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        if tag == "a" and found.get("href"):
            self.links.append(str(found["href"]))
        if tag == "meta" and found.get("http-equiv") == "Content-Security-Policy":
            self.csp = str(found.get("content"))
        self._in = tag if tag in ("script", "style") else None

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "script":
            self.scripts.append(data)
        elif self._in == "style":
            self.styles.append(data)
        else:
            self.text.append(data)


def sha(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def test_the_page_is_self_contained_and_every_link_lands(service: MemoryService) -> None:
    html = render_page(*build(service, days=7, now=NOW))
    page = Page(html)
    assert "http://" not in html.replace("http://www.w3.org/", "")  # nothing fetched
    assert "https://" not in html
    (script,), (style,) = page.scripts, page.styles
    assert f"script-src '{sha(script)}'" in page.csp
    assert f"style-src '{sha(style)}'" in page.csp
    assert "default-src 'none'" in page.csp
    assert " style=" not in html  # the policy allows no style attribute
    for link in page.links:
        assert link.startswith("#"), link
        assert link[1:] in page.ids, link
    for memory_id in ("m-old", "m-fresh", "m-poor", "m-stale", "m-pending"):
        assert anchor(memory_id) in page.ids
    text = " ".join(page.text)
    assert "33 %" in text  # the week's rate
    assert "src/c/d.py" in text


def test_stored_text_is_data_never_markup(tmp_path: Path) -> None:
    hostile = Memory(id="id with spaces/and<angle>", repo=REPO,
                     subject='<script>alert("subject")</script>',
                     fact="RLO \u202e here & <b>bold</b>", citations=(cite("src/<x>.py"),),
                     created_at=NOW, refreshed_at=NOW)
    with SQLiteStore(tmp_path / "h.db") as store:
        store.add(hostile)
        store.log([TelemetryEvent(kind=EventKind.INVALIDATED, repo=REPO, memory_id=hostile.id,
                                  at=NOW, detail={"reason": "<img src=x onerror=alert(1)>"})])
        html = render_page(*build(MemoryService(store), days=7, now=NOW))
    page = Page(html)
    assert len(page.scripts) == 1  # only ours
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&quot;subject&quot;)&lt;/script&gt;" in html
    assert "&lt;U+202E&gt;" in html  # shown, not obeyed
    assert "\u202e" not in html
    assert "&lt;b&gt;bold&lt;/b&gt;" in html
    assert "src/&lt;x&gt;.py" in html
    assert "<img" not in html
    assert anchor(hostile.id) in page.ids
    assert re.fullmatch(r"memory-[0-9a-f]{24}", anchor(hostile.id))


def test_an_empty_store_says_how_to_begin(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "empty.db") as store:
        dashboard, details = build(MemoryService(store), now=NOW)
        html = render_page(dashboard, details)
    assert dashboard.repos == ()
    assert "No memories in this store yet" in html


def test_the_page_names_the_store_it_reads(tmp_path: Path) -> None:
    """The git folder store by its folder, as the others by their file or URL (not an
    object's address)."""
    folder = tmp_path / ".memory"
    with GitStore(folder, session="test") as store:
        dashboard, _ = build(MemoryService(store), now=NOW)
    assert dashboard.where == f"GitStore({str(folder)!r})"
    assert f"GitStore(&#x27;{folder}&#x27;)" in render_page(dashboard, [])


def test_a_memory_page_of_its_own(service: MemoryService) -> None:
    html = render_detail_page(memory_detail(service, "m-valid"))
    page = Page(html)
    assert anchor("m-valid") in page.ids
    assert "subject of m-super" in html  # its history
    assert 'href="/"' in html


def test_an_event_on_one_line() -> None:
    event = TelemetryEvent(kind=EventKind.VERIFIED_INVALID, repo=REPO, detail={
        "ref": "refs/heads/main", "revision": "d" * 40, "pass_requests": 3,
        "outcomes": [{"cited": "a.py:1-2", "outcome": "missing"}, {"outcome": "valid"}]})
    assert describe(event) == ("ref: refs/heads/main; revision: dddddddddddd; citations: "
                               "1 missing, 1 valid (a.py:1-2 missing)")


# --------------------------------------------------------------------------- the server


@pytest.fixture
def served(service: MemoryService) -> Iterator[DashboardServer]:
    server = start(0, pages(service, days=7, now=NOW))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def get(server: DashboardServer, path: str, *, method: str = "GET",
        host: str | None = None) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True)
        conn.putheader("Host", host or f"127.0.0.1:{server.port}")
        conn.endheaders()
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        conn.close()


def test_the_live_page_and_its_headers(served: DashboardServer) -> None:
    status, headers, body = get(served, "/")
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert f'data-repo="{REPO}"' in body
    assert f'data-repo="{OTHER}"' in body
    status, _, only = get(served, f"/?repo={OTHER}&days=30")
    assert status == 200
    assert f'data-repo="{OTHER}"' in only
    assert f'data-repo="{REPO}"' not in only
    assert "Last 30 days" in only
    assert get(served, "/", host=f"localhost:{served.port}")[0] == 200


@pytest.mark.parametrize(("path", "status", "says"), [
    ("/memory/m-valid", 200, "subject of m-super"),
    ("/memory/nope", 404, "memory nope not found"),
    ("/elsewhere", 404, "Nothing at /elsewhere"),
    ("/?days=many", 400, "days must be a whole number"),
    ("/?days=0", 400, "days must be between 1"),
    ("/?repo=not-a-repo", 400, "must be &#x27;owner/name&#x27;"),
])
def test_the_live_server_answers_errors_in_a_line(served: DashboardServer, path: str,
                                                  status: int, says: str) -> None:
    got, _, body = get(served, path)
    assert got == status
    assert says in body


def test_only_a_loopback_host_is_answered(served: DashboardServer) -> None:
    status, _, body = get(served, "/", host="evil.example")  # DNS rebinding
    assert status == 421
    assert "answers only at http://127.0.0.1:" in body
    assert REPO not in body


def test_head_and_other_methods(served: DashboardServer) -> None:
    status, headers, body = get(served, "/", method="HEAD")
    assert (status, body) == (200, "")
    assert int(headers["Content-Length"]) > 1000
    assert get(served, "/", method="POST")[0] == 501


def test_a_busy_port_is_one_clear_error(service: MemoryService) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(VerifiedMemoryError, match=rf"cannot serve the dashboard on "
                           rf"http://127.0.0.1:{port}/: .*--port N"):
            start(port, Pages(lambda *_: "", lambda _: ""))


def test_starting_asks_no_name_service(monkeypatch: pytest.MonkeyPatch) -> None:
    """http.server looks up the host's name when it binds (``socket.getfqdn``): a reverse
    DNS query that can take seconds where no name server answers. The dashboard binds
    to 127.0.0.1 and never uses that name: starting asks for none."""
    def lookup(name: str = "") -> str:
        raise AssertionError(f"a name look-up of {name!r}")

    monkeypatch.setattr(socket, "getfqdn", lookup)
    server = start(0, Pages(lambda *_: "", lambda _: ""))
    try:
        assert server.url == f"http://127.0.0.1:{server.port}/"
    finally:
        server.server_close()


# --------------------------------------------------------------------------- the command


def vmem(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def db(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("VMEM_DATABASE_URL", store.path)
    return store.path


def test_out_writes_one_file_that_needs_nothing_else(db: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report.html"
    code, out, err = vmem(capsys, "dashboard", "--out", str(report), "--days", "3650")
    assert code == 0, err
    assert out == ""
    assert f"wrote the dashboard to {report}" in err
    html = report.read_text()
    assert html.startswith("<!doctype html>")
    assert f'data-repo="{REPO}"' in html
    assert oct(report.stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".report")] == []
    code, out, _ = vmem(capsys, "dashboard", "--out", "-", "--repo", OTHER)
    assert code == 0
    assert f'data-repo="{OTHER}"' in out
    assert f'data-repo="{REPO}"' not in out


def test_json_gives_the_numbers(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = vmem(capsys, "dashboard", "--json", "--days", "3650", "--limit", "1")
    assert code == 0, err
    data = json.loads(out)
    api = {r["repo"]: r for r in data["repos"]}[REPO]
    assert api["by_status"]["active"] == 6
    assert api["verifications"] == 8
    assert api["lists"]["never_applied"]["total"] == 2
    assert len(api["lists"]["never_applied"]["memories"]) == 1
    assert data["days"] == 3650


@pytest.mark.parametrize(("args", "code", "says"), [
    (("--repo", "nope"), 1, "vmem: error: --repo must be 'owner/name'"),
    (("--days", "0"), 2, "Invalid value for '--days'"),
    (("--out", "/nonexistent-dir/report.html"), 1,
     "vmem: error: cannot write /nonexistent-dir/report.html: No such file or directory"),
])
def test_mistakes_are_one_line(db: str, capsys: pytest.CaptureFixture[str],
                               args: tuple[str, ...], code: int, says: str) -> None:
    got, _, err = vmem(capsys, "dashboard", *args)
    assert got == code
    assert says in err
    assert "Traceback" not in err


@contextmanager
def sigint(disposition: Any) -> Iterator[None]:
    """SIGINT handled so in this process for the block: children started in it inherit
    an ignored SIGINT (``SIG_IGN``); a handler becomes the default action in them."""
    was = signal.signal(signal.SIGINT, disposition)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, was)


@pytest.mark.parametrize("started", [
    # From a terminal: SIGINT's default action, which Python turns into KeyboardInterrupt.
    signal.default_int_handler,
    # As a background job of a script (a shell without job control, a CI step, a test run
    # started so): SIGINT ignored, inherited, and Python leaves an ignored SIGINT ignored.
    signal.SIG_IGN,
], ids=["from a terminal", "as a background job"])
def test_the_command_serves_until_interrupted(db: str, tmp_path: Path, started: Any) -> None:
    env = dict(os.environ, VMEM_DATABASE_URL=db)
    with sigint(started):
        proc = subprocess.Popen(
            [sys.executable, "-m", "verified_memory", "dashboard", "--port", "0"],
            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"serving the dashboard on http://127\.0\.0\.1:(\d+)/", line)
        assert match, line
        conn = http.client.HTTPConnection("127.0.0.1", int(match.group(1)), timeout=30)
        conn.request("GET", "/")
        response = conn.getresponse()
        assert response.status == 200
        assert f'data-repo="{REPO}"' in response.read().decode()
        conn.close()
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, rest = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()  # never a server left running after the test
            proc.communicate()
            raise
    assert proc.returncode == 0
    assert "dashboard stopped" in rest


def test_a_busy_port_from_the_command(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = vmem(capsys, "dashboard", "--port", str(port))
    assert code == 1
    assert err.count("\n") == 1
    assert f"cannot serve the dashboard on http://127.0.0.1:{port}/" in err


def test_utcnow_is_what_the_page_counts_from(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = vmem(capsys, "dashboard", "--json", "--days", "1")
    assert code == 0
    assert json.loads(out)["until"] == utcnow().date().isoformat()


def test_a_memory_deleted_since_it_was_listed_is_left_out(store: SQLiteStore) -> None:
    """A listed memory may be gone by the time its detail is read (forgotten, or an
    import rolled back elsewhere): the others still show."""

    class Forgetting(SQLiteStore):
        def get_many(self, memory_ids: Any) -> list[Memory]:
            if "m-old" in memory_ids:
                raise NotFound("memory m-old not found")
            return super().get_many(memory_ids)

    forgetting = Forgetting(store.path)
    try:
        details = memory_details(MemoryService(forgetting), ["m-old", "m-fresh", "m-poor"])
        assert [d.memory.id for d in details] == ["m-fresh", "m-poor"]
        with pytest.raises(NotFound):
            memory_detail(MemoryService(forgetting), "m-gone")
    finally:
        forgetting.close()
