"""SQLite and Postgres (and Supabase over REST) give the same dashboard numbers for the
same data: every view, row for row, and the whole dashboard built from them. And
SQLite's running counts stay what its events say, through migration and every write."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard_data import NOW, random_store_data, seed
from tests.pg import postgres_store, supabase_store
from verified_memory import MemoryService
from verified_memory.dashboard.data import collect
from verified_memory.models import EventKind, Status, TelemetryEvent, Transition
from verified_memory.store import sqlite as sqlite_module
from verified_memory.store.base import MemoryStore
from verified_memory.store.sqlite import MIGRATIONS, SQLiteStore
from verified_memory.store.views import VIEWS, ViewQuery


def fill(store: MemoryStore) -> None:
    seed(store)
    memories, events = random_store_data(18)
    for memory in memories:
        store.add(memory)
    for start in range(0, len(events), 500):
        store.log(events[start:start + 500])


def every_view(store: MemoryStore) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for name, view in VIEWS.items():
        rows = store.read_view(ViewQuery(name))
        # Rates are floats: compare them rounded; the rest exactly.
        out[name] = sorted(({k: round(v, 12) if isinstance(v, float) else v
                             for k, v in row.items()} for row in rows),
                           key=lambda r: tuple(str(r[c]) for c in view.key))
    return out


@pytest.fixture
def sqlite_filled(tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path / "dash.db") as store:
        fill(store)
        yield store


@pytest.mark.postgres
def test_sqlite_and_postgres_agree_on_every_view_and_the_dashboard(
    sqlite_filled: SQLiteStore, tmp_path: Path
) -> None:
    expected = every_view(sqlite_filled)
    assert sum(len(rows) for rows in expected.values()) > 1000  # enough to disagree about
    assert all(expected[name] for name in VIEWS), "every view has rows"
    with postgres_store(tmp_path) as postgres:
        fill(postgres)
        assert every_view(postgres) == expected
        for days in (7, 30, 365):
            ours = collect(sqlite_filled.read_view, days=days, now=NOW, list_limit=50)
            theirs = collect(postgres.read_view, days=days, now=NOW, list_limit=50)
            assert theirs.to_dict() == ours.to_dict(), days
    # A window that ends before the newest events: bounded on both sides, over REST too.
    back = NOW - timedelta(days=1)
    ours = collect(sqlite_filled.read_view, days=7, now=back).to_dict()
    with supabase_store(tmp_path) as supabase:  # the same SQL, through PostgREST
        fill(supabase)
        assert every_view(supabase) == expected
        assert {**collect(supabase.read_view, days=7, now=back).to_dict(),
                "store": ours["store"]} == ours


def test_sqlite_running_counts_are_what_its_events_say(sqlite_filled: SQLiteStore) -> None:
    sqlite_filled.apply([Transition("m-fresh", add_applications=1, events=(
        TelemetryEvent(kind=EventKind.APPLIED, repo="acme/api", memory_id="m-fresh",
                       at=NOW),))])
    assert rollups(sqlite_filled.path) == recount(sqlite_filled.path)


def test_migration_7_counts_the_events_written_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.db"
    # Every migration but 7 (today's code writes rows later migrations shaped, such as
    # migration 8's citation column; none of them touches telemetry), and 15, which counts
    # 7's tables again.
    monkeypatch.setattr(sqlite_module, "MIGRATIONS",
                        tuple(m for m in MIGRATIONS if m[0] not in (7, 15)))
    with SQLiteStore(path) as old:
        fill(old)
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS)
    with SQLiteStore(path) as store:
        assert rollups(store.path) == recount(store.path)
        assert rollups(store.path)[0]  # something was counted
        with SQLiteStore(tmp_path / "new.db") as fresh:
            fill(fresh)
            assert every_view(store) == every_view(fresh)


def test_migration_15_counts_again_what_an_older_compaction_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction before migration 15 deleted the events it archived and left SQLite's
    running counts as they were: the store's dashboard counted archived events, which
    the views of every other store (and its own after a compaction today) do not. The
    migration counts those days again; before it, the counts stayed inflated."""
    cut = NOW - timedelta(days=4, hours=3)
    path = tmp_path / "old.db"
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", tuple(m for m in MIGRATIONS if m[0] < 15))
    with SQLiteStore(path) as old:
        fill(old)
        counted = rollups(old.path)
        assert old.archive_events(cut) > 0
    # What that compaction left: the counts of before it, archived events included.
    with sqlite3.connect(path) as conn:
        for table, rows in zip(("agent_memory_events_rollup", "agent_memory_breaks_rollup"),
                               counted, strict=True):
            conn.execute(f"DELETE FROM {table}")
            conn.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})",
                             rows)
    assert rollups(path) != recount(path)
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS)
    with SQLiteStore(path) as store, SQLiteStore(tmp_path / "new.db") as today:
        assert rollups(store.path) == recount(store.path)
        fill(today)
        today.archive_events(cut)
        assert every_view(store) == every_view(today)


def test_a_detail_a_verification_never_writes_is_skipped_not_an_error(
    tmp_path: Path
) -> None:
    odd = [{"outcomes": "not a list"}, {"outcomes": {"path": "x", "outcome": "missing"}},
           {"outcomes": [None, 3, [], {"outcome": ["missing"], "path": "x"}]},
           {"outcomes": [{"outcome": "missing", "path": {"nested": 1}}]}, {}]
    with SQLiteStore(tmp_path / "odd.db") as store:
        store.log([TelemetryEvent(kind=EventKind.VERIFIED_INVALID, repo="acme/api",
                                  memory_id="m", at=NOW, detail=d) for d in odd])
        assert store.read_view(ViewQuery("agent_memory_breaks_daily")) == []
        (counted,) = store.read_view(ViewQuery("agent_memory_events_daily"))
        assert counted["events"] == len(odd)


def test_a_dashboard_reads_and_writes_no_telemetry(sqlite_filled: SQLiteStore) -> None:
    service = MemoryService(sqlite_filled)
    before = len(sqlite_filled.events(limit=None))
    from verified_memory.dashboard import build

    dashboard, details = build(service, days=30, now=NOW)
    assert dashboard.repos
    assert details
    assert len(sqlite_filled.events(limit=None)) == before
    assert sqlite_filled.get("m-fresh").status is Status.ACTIVE


def rollups(path: str) -> tuple[list[Any], list[Any]]:
    with sqlite3.connect(path) as conn:
        return (conn.execute("SELECT * FROM agent_memory_events_rollup ORDER BY 1, 2, 3")
                .fetchall(),
                conn.execute("SELECT * FROM agent_memory_breaks_rollup ORDER BY 1, 2, 3")
                .fetchall())


def recount(path: str) -> tuple[list[Any], list[Any]]:
    """The counts recomputed from the events themselves, in Python."""
    import json

    events: dict[tuple[str, str, str], list[int]] = {}
    breaks: dict[tuple[str, str, str], int] = {}
    with sqlite3.connect(path) as conn:
        for repo, kind, at, detail_text in conn.execute(
                "SELECT repo, kind, at, detail FROM agent_memory_telemetry"):
            detail = json.loads(detail_text)
            counts = events.setdefault((repo, at[:10], kind), [0, 0, 0])
            counts[0] += 1
            if kind == "feedback":
                counts[1] += detail.get("outcome") == "success"
                counts[2] += detail.get("outcome") == "failure"
            outcomes = detail.get("outcomes")
            if kind == "verified_invalid" and isinstance(outcomes, list):
                for o in outcomes:
                    if isinstance(o, dict) and isinstance(o.get("path"), str) \
                            and o.get("outcome") in ("changed", "missing"):
                        key = (repo, at[:10], o["path"])
                        breaks[key] = breaks.get(key, 0) + 1
    return ([(*k, *v) for k, v in sorted(events.items())],
            [(*k, v) for k, v in sorted(breaks.items())])


@pytest.mark.postgres
def test_archived_telemetry_leaves_the_views_on_every_store(
    sqlite_filled: SQLiteStore, tmp_path: Path
) -> None:
    """The views count the live telemetry (README: Dashboard); ``vmem db compact`` moves
    the older events into the archive, and every store's views stop counting them. SQLite
    kept them in its running counts, so after a compaction its dashboard (and the git
    folder store's, read from a SQLite index) counted verdicts Postgres' did not."""
    cut = NOW - timedelta(days=4, hours=3)  # in the middle of a day: it keeps its later events
    sqlite_filled.archive_events(cut)
    assert rollups(sqlite_filled.path) == recount(sqlite_filled.path)
    expected = every_view(sqlite_filled)
    with postgres_store(tmp_path) as postgres:
        fill(postgres)
        assert postgres.archive_events(cut) > 0
        assert every_view(postgres) == expected
        for days in (7, 30):
            ours = collect(sqlite_filled.read_view, days=days, now=NOW, list_limit=50)
            theirs = collect(postgres.read_view, days=days, now=NOW, list_limit=50)
            assert theirs.to_dict() == ours.to_dict(), days
