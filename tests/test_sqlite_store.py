"""What only the SQLite store promises: its file, its pragmas, its schema, its locking.

The behaviour every store shares is in ``tests/contract``; this file checks the SQLite
machinery underneath it, including several processes writing one file at once.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from tests.store_races import check_stored_once, store_at_once
from verified_memory.errors import Conflict, StoreError, ValidationError, VerifiedMemoryError
from verified_memory.models import (
    Citation,
    EventKind,
    Fingerprint,
    Memory,
    Status,
    TelemetryEvent,
    Transition,
)
from verified_memory.store import sqlite_paths
from verified_memory.store._rows import (
    CITATION_COLUMNS,
    EVENT_COLUMNS,
    MEMORY_COLUMNS,
    citation_values,
    event_values,
    events_values,
    memory_values,
)
from verified_memory.store.sqlite import MIGRATIONS, SQLiteStore, fts_query

REPO = "acme/api"
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _memory(memory_id: str | None = None, *, minutes: int = 0, **fields: Any) -> Memory:
    citation = Citation(
        path=fields.pop("path", "src/app.py"),
        line_start=10,
        line_end=12,
        sha="a" * 40,
        blob_sha="b" * 40,
        fingerprint=Fingerprint("0123456789abcdef", (1, 0, 2)),
    )
    return Memory(
        id=memory_id or str(uuid.uuid4()),
        repo=fields.pop("repo", REPO),
        subject=fields.pop("subject", "retry policy"),
        fact=fields.pop("fact", "calls are retried three times"),
        citations=(citation,),
        created_at=T0 + timedelta(minutes=minutes),
        refreshed_at=T0 + timedelta(minutes=minutes),
        **fields,
    )


def _event(kind: EventKind, memory_id: str | None = None) -> TelemetryEvent:
    return TelemetryEvent(kind=kind, repo=REPO, memory_id=memory_id, actor="tester")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(db_path)
    try:
        yield opened
    finally:
        opened.close()


def _raw(path: Path) -> sqlite3.Connection:
    """A plain connection to the same file, as another program would open it."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=5)
    return conn


# ------------------------------------------------------------------------- file & schema


def test_the_file_is_in_wal_mode_with_the_promised_pragmas(store: SQLiteStore) -> None:
    conn = store._conn
    assert conn is not None

    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    with _raw(Path(store.path)) as other:  # WAL is a property of the file, not the connection
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_the_parent_directory_is_created(tmp_path: Path) -> None:
    path = tmp_path / "does" / "not" / "exist" / "memory.db"

    SQLiteStore(path).close()

    assert path.is_file()


def test_a_throwaway_in_memory_database_works() -> None:
    store = SQLiteStore(":memory:")
    m = _memory()
    store.add(m)

    assert store.search(REPO, "retry") == [m]
    store.close()


def test_a_store_created_in_one_thread_serves_others(store: SQLiteStore) -> None:
    def work(worker: int) -> int:
        for i in range(25):
            store.add(_memory(f"t{worker}-{i}", minutes=i))
            store.recent(REPO, limit=5)
        return worker

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert sorted(pool.map(work, range(4))) == [0, 1, 2, 3]

    assert len(store.recent(REPO, limit=None)) == 100


def test_migrations_are_recorded_and_reopening_is_harmless(db_path: Path) -> None:
    first = SQLiteStore(db_path)
    m = _memory()
    first.add(m)
    first.close()
    with _raw(db_path) as conn:
        recorded = conn.execute(
            "SELECT version, name, applied_at FROM schema_migrations"
        ).fetchall()

    second = SQLiteStore(db_path)
    try:
        assert second.get(m.id) == m
    finally:
        second.close()

    assert [(v, n) for v, n, _ in recorded] == [(v, n) for v, n, _ in MIGRATIONS]
    assert datetime.fromisoformat(recorded[0][2]).tzinfo is not None
    with _raw(db_path) as conn:
        assert conn.execute("SELECT version, name, applied_at FROM schema_migrations").fetchall() \
            == recorded


def test_a_migrated_file_opens_and_reads_while_another_process_writes(
        db_path: Path) -> None:
    """Opening a store that is up to date takes no write lock: a writer holding it for
    longer than the store would wait does not stop it."""
    SQLiteStore(db_path).close()
    with _raw(db_path) as writer:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO agent_memory_telemetry (kind, repo, at) "
                       "VALUES ('applied', 'acme/x', '2026-03-01T00:00:00+00:00')")
        store = SQLiteStore(db_path, timeout=0.2)
        try:
            assert store.recent(REPO) == []
            with pytest.raises(StoreError, match="locked by another process"):
                store.log([_event(EventKind.APPLIED, "m1")])  # a write still waits, then fails
        finally:
            store.close()
        writer.execute("ROLLBACK")


def test_a_file_another_process_migrates_meanwhile_opens_without_the_write_lock(
        db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that found a migration missing, and waits for the write lock to apply
    it, opens as soon as another process has applied it, though writers keep the lock:
    in a crowd of writers SQLite's busy handler may serve the longest waiter last (one of
    eight processes opening a fresh file gave up after 5 s)."""
    from verified_memory.store import sqlite as sqlite_module

    monkeypatch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS[:-1])
    SQLiteStore(db_path).close()  # the last migration missing
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS)
    version, name, statements = MIGRATIONS[-1]
    with _raw(db_path) as other:
        other.execute("BEGIN IMMEDIATE")  # the other process holds the write lock
        with ThreadPoolExecutor(max_workers=1) as pool:
            opening = pool.submit(SQLiteStore, db_path, timeout=1.0)
            time.sleep(0.3)
            assert not opening.done()  # waiting to apply the last migration
            for statement in statements:  # the other process applies it ...
                if callable(statement):
                    statement(other)
                else:
                    other.execute(statement)
            other.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)",
                          (version, name, "2026-03-01T00:00:00+00:00"))
            other.execute("COMMIT")
            other.execute("BEGIN IMMEDIATE")  # ... and writes on, for longer than 1 s
            store = opening.result(timeout=0.9)
        try:
            assert store.recent(REPO) == []
        finally:
            store.close()
            other.execute("ROLLBACK")
    with _raw(db_path) as conn:
        assert [v for (v,) in conn.execute("SELECT version FROM schema_migrations")] == [
            v for v, _, _ in MIGRATIONS]


def test_a_file_from_a_newer_version_is_refused(db_path: Path) -> None:
    SQLiteStore(db_path).close()
    with _raw(db_path) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (999, 'future', '2099-01-01')")

    with pytest.raises(StoreError, match="newer"):
        SQLiteStore(db_path)


def test_the_tables_and_indexes_have_the_shared_names(store: SQLiteStore) -> None:
    with _raw(Path(store.path)) as conn:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}

    assert {
        "schema_migrations",
        "agent_memory",
        "agent_memory_citation",
        "agent_memory_telemetry",
        "agent_memory_fts",
        "agent_memory_recent",
        "agent_memory_citation_newest",
        "agent_memory_telemetry_repo",
        "agent_memory_telemetry_memory",
    } <= names


def test_telemetry_is_append_only_in_sql(store: SQLiteStore) -> None:
    store.log([_event(EventKind.FEEDBACK, "m1")])

    with _raw(Path(store.path)) as conn:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("UPDATE agent_memory_telemetry SET actor = 'mallory'")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("DELETE FROM agent_memory_telemetry")

    [event] = store.events()
    assert event.actor == "tester"


def test_events_are_written_in_order_within_the_parameter_limit(store: SQLiteStore) -> None:
    # Events go in statements of many rows each; with SQLite's old limit of parameters
    # lowered further (two rows a statement), every event is still written, in order,
    # the triggers' counts with them.
    assert store._conn is not None
    store._conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 2 * len(EVENT_COLUMNS) + 1)
    shared = {"ref": "HEAD", "outcomes": [], "unchanged": 3}
    events = [TelemetryEvent(kind=EventKind.VERIFIED_VALID, repo=REPO, memory_id=f"m{i}",
                             actor="tester", at=T0, detail=shared) for i in range(7)]
    store.log(events)
    store.log([_event(EventKind.FEEDBACK, "m9")])

    written = store.events(limit=None)
    assert [e.memory_id for e in written] == [*(f"m{i}" for i in range(7)), "m9"]
    assert [dict(e.detail) for e in written[:7]] == [shared] * 7
    assert len({e.key for e in written}) == 8
    with _raw(Path(store.path)) as conn:
        assert conn.execute("SELECT kind, events FROM agent_memory_events_rollup "
                            "ORDER BY kind").fetchall() == [("feedback", 1),
                                                            ("verified_valid", 7)]


def test_rows_of_many_events_are_the_rows_of_each() -> None:
    # events_values encodes a detail (and a time) that events share once: the rows are
    # the ones event_values makes of each, whatever the detail's mapping type.
    shared = {"ref": "HEAD", "revision": "r" * 40, "outcomes": [], "unchanged": 3}
    events = [TelemetryEvent(EventKind.VERIFIED_VALID, REPO, "m1", "tester", T0, shared),
              TelemetryEvent(EventKind.REFRESHED, REPO, "m1", "tester", T0,
                             MappingProxyType({"by": "verification", "é": 1.5})),
              TelemetryEvent(EventKind.VERIFIED_VALID, REPO, "m2", "tester",
                             T0 + timedelta(seconds=1), shared, key="k" * 32)]

    rows = events_values(events)

    assert [row[:-1] for row in rows] == [event_values(e)[:-1] for e in events]
    assert rows[1][5] == '{"by":"verification","é":1.5}'
    assert rows[2][-1] == "k" * 32
    assert len({row[-1] for row in rows}) == 3
    with pytest.raises(ValidationError, match="unknown telemetry event kind"):
        events_values([replace(events[0], kind="nonsense")])


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE agent_memory SET status = 'forgotten'",
        "UPDATE agent_memory_citation SET line_start = 0",
        "UPDATE agent_memory_citation SET line_end = line_start - 1",
        "INSERT INTO agent_memory_citation (memory_id, position, repo, path, line_start, "
        "line_end, snippet_hash) VALUES ('no-such-memory', 0, 'a/b', 'x.py', 1, 1, 'h')",
    ],
)
def test_the_schema_enforces_its_constraints(store: SQLiteStore, statement: str) -> None:
    store.add(_memory())

    with _raw(Path(store.path)) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(statement)


def test_deleting_a_memory_deletes_its_citations_and_index_entry(store: SQLiteStore) -> None:
    m = _memory(subject="ephemeral")
    store.add(m)

    with _raw(Path(store.path)) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM agent_memory WHERE id = ?", (m.id,))
        assert conn.execute("SELECT count(*) FROM agent_memory_citation").fetchone()[0] == 0
        conn.execute("INSERT INTO agent_memory_fts (agent_memory_fts) VALUES ('integrity-check')")

    assert store.search(REPO, "ephemeral") == []


def test_full_text_index_follows_edits(store: SQLiteStore) -> None:
    m = _memory(subject="retry policy", tags=("network",))
    store.add(m)

    with _raw(Path(store.path)) as conn:
        conn.execute("UPDATE agent_memory SET subject = 'backoff schedule' WHERE id = ?", (m.id,))
        conn.execute("INSERT INTO agent_memory_fts (agent_memory_fts) VALUES ('integrity-check')")

    assert store.search(REPO, "retry policy") == []
    assert [x.id for x in store.search(REPO, "backoff")] == [m.id]
    assert [x.id for x in store.search(REPO, "network")] == [m.id]


def test_times_are_stored_as_fixed_width_utc_text(store: SQLiteStore) -> None:
    store.add(_memory(minutes=0))  # a whole second: microseconds must still be written

    with _raw(Path(store.path)) as conn:
        created, refreshed = conn.execute(
            "SELECT created_at, refreshed_at FROM agent_memory"
        ).fetchone()

    assert created == "2026-03-01T00:00:00.000000+00:00"
    assert len(refreshed) == len(created)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("retry", '"retry"*'),
        ("Retry POLICY", '"retry" "policy"*'),
        ('a"b', '"a" "b"*'),
        ("foo-bar", '"foo" "bar"*'),
        ("NEAR(", '"near"*'),
        ("*", None),
        ("", None),
    ],
)
def test_fts_query_quotes_every_term(query: str, expected: str | None) -> None:
    assert fts_query(query) == expected


# ------------------------------------------------------------------------- errors


def test_a_corrupt_file_is_a_store_error(db_path: Path) -> None:
    db_path.write_bytes(b"this is not a database, " * 200)

    with pytest.raises(StoreError, match="corrupt or not a SQLite database") as caught:
        SQLiteStore(db_path)

    assert str(db_path) in str(caught.value)
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)


def test_a_directory_in_place_of_the_file_is_a_store_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=str(tmp_path)):
        SQLiteStore(tmp_path)


def test_a_file_in_place_of_the_directory_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("")

    with pytest.raises(StoreError, match="directory"):
        SQLiteStore(tmp_path / "blocker" / "memory.db")


def test_a_locked_file_is_a_store_error_and_reads_go_on(db_path: Path) -> None:
    store = SQLiteStore(db_path, timeout=0.2)
    m = _memory()
    store.add(m)
    holder = _raw(db_path)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with pytest.raises(StoreError, match="locked") as caught:
            store.add(_memory())
        assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
        assert str(db_path) in str(caught.value)
        assert store.get(m.id) == m  # WAL: readers are not blocked by a writer
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        store.close()


def _every_operation(store: SQLiteStore) -> dict[str, Callable[[], object]]:
    m = _memory()
    return {
        "add": lambda: store.add(_memory()),
        "supersede": lambda: store.supersede(m.id, _memory()),
        "apply": lambda: store.apply([Transition(m.id, add_verifications=1)]),
        "log": lambda: store.log([_event(EventKind.FEEDBACK)]),
        "get": lambda: store.get(m.id),
        "get_many": lambda: store.get_many([m.id]),
        "recent": lambda: store.recent(REPO),
        "recent_any": lambda: store.recent(REPO, status=None),
        "search": lambda: store.search(REPO, "retry"),
        "by_path": lambda: store.by_path(REPO, "src/app.py", lines=(1, 20)),
        "events": lambda: store.events(repo=REPO),
        "stats": lambda: store.stats(REPO),
    }


def test_no_sqlite3_exception_escapes_a_broken_schema(db_path: Path) -> None:
    store = SQLiteStore(db_path)
    with _raw(db_path) as conn:  # someone broke the file behind our back
        for table in ("agent_memory_fts", "agent_memory_citation", "agent_memory",
                      "agent_memory_telemetry"):
            conn.execute(f"DROP TABLE {table}")
    try:
        for name, operation in _every_operation(store).items():
            with pytest.raises(StoreError, match=str(db_path)) as caught:
                operation()
            assert isinstance(caught.value.__cause__, sqlite3.Error), name
    finally:
        store.close()


def test_no_sqlite3_exception_escapes_a_lock(db_path: Path) -> None:
    store = SQLiteStore(db_path, timeout=0.05)
    m = _memory()
    store.add(m)
    holder = _raw(db_path)
    holder.execute("BEGIN IMMEDIATE")
    try:
        for operation in (
            lambda: store.add(_memory()),
            lambda: store.supersede(m.id, _memory()),
            lambda: store.apply([Transition(m.id, add_verifications=1)]),
            lambda: store.log([_event(EventKind.FEEDBACK)]),
        ):
            with pytest.raises(StoreError, match="locked"):
                operation()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.get(m.id) == m  # nothing half-written, and the store still works
    store.close()


def test_a_closed_store_says_so(store: SQLiteStore) -> None:
    store.close()

    for operation in _every_operation(store).values():
        with pytest.raises(StoreError, match="closed"):
            operation()


# ------------------------------------------------------------------------- queries


def _statements(store: SQLiteStore, action: Callable[[], object]) -> list[str]:
    conn = store._conn
    assert conn is not None
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        action()
    finally:
        conn.set_trace_callback(None)
    return [s for s in seen if not s.startswith("--")]  # "--": SQLite's own, inside FTS5


@pytest.mark.parametrize(
    "read",
    [
        pytest.param(lambda s, ids: s.recent(REPO, limit=50), id="recent"),
        pytest.param(lambda s, ids: s.recent(REPO, limit=None, status=None), id="recent-any"),
        pytest.param(lambda s, ids: s.get_many(ids), id="get_many"),
        pytest.param(lambda s, ids: s.search(REPO, "retry"), id="search"),
        pytest.param(lambda s, ids: s.by_path(REPO, "src/app.py", lines=(11, 11)), id="by_path"),
    ],
)
def test_reads_load_all_citations_with_one_extra_query(
    store: SQLiteStore, read: Callable[[SQLiteStore, list[str]], list[Memory]]
) -> None:
    memories = [_memory(minutes=i) for i in range(60)]
    for m in memories:
        store.add(m)

    found: list[Memory] = []
    statements = _statements(store, lambda: found.extend(read(store, [m.id for m in memories])))

    assert len(found) >= 20
    assert all(len(m.citations) == 1 for m in found)
    # One query for the memories' rows, one for all their citations; search first
    # counts (up to a bound) what matches, to choose its plan.
    rows = [s for s in statements if not s.startswith("SELECT count(*) FROM (SELECT 1 ")]
    assert len(rows) == 2, statements
    assert "ORDER BY memory_id, position" in rows[1]
    assert len(statements) - len(rows) <= 2, statements


@pytest.mark.parametrize(
    ("read", "index", "sorts"),
    [
        pytest.param(lambda s: s.recent(REPO), "agent_memory_recent", False, id="recent"),
        # Every status (an export): the repository's rows, sorted; no index of its own,
        # which every refresh would have to move (any index that starts with the
        # repository serves: the dashboard's health index does as well).
        pytest.param(lambda s: s.recent(REPO, status=None),
                     ("agent_memory_recent", "agent_memory_health"), True, id="recent-any"),
        pytest.param(lambda s: s.events(repo=REPO), "agent_memory_telemetry_repo", False,
                     id="events-repo"),
        # These sort what the index found: one memory's rows, a handful.
        pytest.param(lambda s: s.events(memory_id="m1"), "agent_memory_telemetry_memory", True,
                     id="events-memory"),
    ],
)
def test_reads_start_from_their_index(
    store: SQLiteStore, read: Callable[[SQLiteStore], object], index: str | tuple[str, ...],
    sorts: bool
) -> None:
    store.add(_memory())
    conn = store._conn
    assert conn is not None
    [statement, *_] = _statements(store, lambda: read(store))

    plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}")]

    first = plan[1] if plan[0].startswith("CO-ROUTINE") else plan[0]
    assert any(name in first for name in ((index,) if isinstance(index, str) else index)), plan
    tables = {"agent_memory", "agent_memory_citation", "agent_memory_telemetry", "m", "c"}
    assert not any(step.split()[:2] in (["SCAN", t] for t in tables) for step in plan), plan
    assert any("TEMP B-TREE" in step for step in plan) is sorts, plan


def _cited(path: str, start: int, end: int) -> Citation:
    return Citation(path, start, end, "a" * 40, "b" * 40, Fingerprint("0123456789abcdef", (1,)))


@pytest.fixture
def crowd(store: SQLiteStore) -> list[Memory]:
    """A repository where src/hot.py is cited by most memories, some more than once,
    src/cool.py by a few; some memories invalid, one in another repository; times in
    no particular order, some equal; two categories, some tagged."""
    memories = []
    for i in range(60):
        citations = [_cited("src/other.py", 1, 2)]
        if i % 5:
            citations.append(_cited("src/hot.py", 1 + i % 7 * 10, 5 + i % 7 * 10))
        if i % 3 == 0:
            citations.append(_cited("src/hot.py", 80, 90))
        if i % 10 == 0:
            citations.append(_cited("src/cool.py", i + 1, i + 3))
        memories.append(replace(
            _memory(minutes=(i * 37) % 61 % 20), citations=tuple(citations),  # some tie
            status=Status.INVALID if i % 11 == 0 else Status.ACTIVE,
            repo="acme/web" if i == 7 else REPO,
            category="convention" if i % 4 == 0 else "gotcha",
            tags=("odd",) if i % 2 else ()))
    for m in memories:
        store.add(m)
    return memories


def _expected(memories: list[Memory], path: str, lines: tuple[int, int] | None,
              limit: int) -> list[str]:
    hits = [m for m in memories if m.repo == REPO and m.status is Status.ACTIVE and any(
        c.path == path and (lines is None or (c.line_start <= lines[1]
                                               and c.line_end >= lines[0]))
        for c in m.citations)]
    return [m.id for m in sorted(hits, key=lambda m: (-m.created_at.timestamp(), m.id))
            ][:limit]


@pytest.mark.parametrize("lines", [None, (15, 22), (85, 85), (200, 300)])
@pytest.mark.parametrize("limit", [1, 5, 50])
@pytest.mark.parametrize("filters", [{}, {"category": "convention"}, {"tag": "odd"}])
def test_by_path_walks_the_citation_index_newest_created_first(
        store: SQLiteStore, crowd: list[Memory], lines: tuple[int, int] | None,
        limit: int, filters: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """However many memories cite the file: the citation index's own order, each entry's
    memory by rowid, no sort and no scan; the refresh time plays no part. (A category or
    tag more memories have than ``GATHER_AT_MOST``: 15 and 30 here. Lines few
    citations reach are read otherwise: the next test.)"""
    monkeypatch.setattr(sqlite_paths, "GATHER_AT_MOST", 5)
    monkeypatch.setattr(sqlite_paths, "few_reach", lambda *args: False)
    for m in crowd[::4]:  # refreshed since: by_path's order does not follow it
        store.apply([Transition(m.id, expect=m.status,
                                refreshed_at=T0 + timedelta(minutes=500))])
    kept = [m for m in crowd if ("category" not in filters or m.category == "convention")
            and ("tag" not in filters or "odd" in m.tags)]
    for path in ("src/hot.py", "src/cool.py", "src/none.py"):
        found: list[Memory] = []
        statements = _statements(store, lambda path=path, found=found: found.extend(
            store.by_path(REPO, path, lines=lines, limit=limit, **filters)))
        assert [m.id for m in found] == _expected(kept, path, lines, limit), path
        steps = _plan(store, _read_by_path(statements))
        assert any("agent_memory_citation_newest" in step for step in steps), steps
        assert not any(step.startswith(("SCAN m", "SCAN c", "SCAN agent_memory"))
                       or "TEMP B-TREE FOR GROUP BY" in step for step in steps), steps


@pytest.mark.parametrize("lines", [(200, 300), (91, 91), (85, 85), (61, 90), (1, 100)])
@pytest.mark.parametrize("limit", [1, 5, 50])
@pytest.mark.parametrize("filters", [{}, {"category": "gotcha"}])
def test_by_path_reads_lines_few_citations_reach_by_their_last_line(
        store: SQLiteStore, crowd: list[Memory], lines: tuple[int, int], limit: int,
        filters: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines past the end of a file many memories cite (or near it): the walk newest
    first asked every citation of the file whether it reaches them (a crowded file,
    nothing found: 7 to 9 ms). When at most ``GATHER_AT_MOST`` citations end at or
    after the lines' start, those are read instead by migration 14's index and the few
    that reach the lines sorted: the same answers as the walk, no scan."""
    monkeypatch.setattr(sqlite_paths, "GATHER_AT_MOST", 20)  # fewer than the 45 gotchas
    kept = [m for m in crowd if m.category == filters.get("category", m.category)]
    for path in ("src/hot.py", "src/cool.py", "src/none.py"):
        with monkeypatch.context() as walk:
            walk.setattr(sqlite_paths, "few_reach", lambda *args: False)
            walked = [m.id for m in store.by_path(REPO, path, lines=lines, limit=limit,
                                                  **filters)]
        assert walked == _expected(kept, path, lines, limit), path
        found: list[Memory] = []
        statements = _statements(store, lambda path=path, found=found: found.extend(
            store.by_path(REPO, path, lines=lines, limit=limit, **filters)))
        assert [m.id for m in found] == walked, path
        reach = sum(m.repo == REPO and c.path == path and c.line_end >= lines[0]
                    for m in crowd for c in m.citations)
        steps = _plan(store, _read_by_path(statements))
        assert any("agent_memory_citation_end" in step for step in steps) is (
            reach <= 20), (path, reach, steps)
        assert not any(step.startswith(("SCAN m", "SCAN c", "SCAN agent_memory"))
                       for step in steps), steps
    # Past the end of the crowded file, and lines most of its citations reach.
    assert sqlite_paths.few_reach(store._conn, REPO, "src/hot.py", 91)
    assert not sqlite_paths.few_reach(store._conn, REPO, "src/hot.py", 1)


def _read_by_path(statements: list[str]) -> str:
    """by_path's read of the memories it found, among the statements it ran."""
    (read,) = [s for s in statements if "FROM agent_memory m WHERE m.seq IN" in s]
    return read


def _plan(store: SQLiteStore, statement: str) -> list[str]:
    conn = store._conn
    assert conn is not None
    return [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {statement}",
                                           [None] * statement.count("?"))]


@pytest.mark.parametrize("lines", [None, (15, 22), (85, 85)])
@pytest.mark.parametrize("limit", [1, 5, 50])
@pytest.mark.parametrize("filters", [
    {"category": "convention"}, {"tag": "odd"}, {"category": "gotcha", "tag": "odd"},
    {"category": "nobody's"}, {"tag": "nobody's"}, {"category": "convention", "tag": "x"}])
def test_by_path_gathers_a_category_or_tag_few_memories_have(
        store: SQLiteStore, crowd: list[Memory], lines: tuple[int, int] | None,
        limit: int, filters: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A category or tag at most ``GATHER_AT_MOST`` memories of the repository have:
    those memories, by the category index or the tag table, each asked whether it cites
    the file (the index by seq), no scan. The same answers as the walk gives (the
    bound put below every count here), newest created first."""
    for m in crowd[::4]:
        store.apply([Transition(m.id, expect=m.status,
                                refreshed_at=T0 + timedelta(minutes=500))])
    kept = [m for m in crowd if m.category == filters.get("category", m.category)
            and ("tag" not in filters or filters["tag"] in m.tags)]
    for path in ("src/hot.py", "src/cool.py", "src/none.py"):
        walked = _statements(store, lambda path=path: store.by_path(
            REPO, path, lines=lines, limit=limit, **filters))
        monkeypatch.setattr(sqlite_paths, "GATHER_AT_MOST", 30)
        found: list[Memory] = []
        statements = _statements(store, lambda path=path, found=found: found.extend(
            store.by_path(REPO, path, lines=lines, limit=limit, **filters)))
        monkeypatch.setattr(sqlite_paths, "GATHER_AT_MOST", -1)  # always the walk
        assert [m.id for m in found] == _expected(kept, path, lines, limit), path
        assert [m.id for m in store.by_path(REPO, path, lines=lines, limit=limit,
                                            **filters)] == [m.id for m in found], path
        monkeypatch.undo()
        assert _read_by_path(walked) == _read_by_path(statements)  # the default gathers too
        steps = _plan(store, _read_by_path(statements))
        assert any("agent_memory_category" in step or "agent_memory_tag" in step
                   for step in steps), steps
        assert any("agent_memory_citation_memory" in step for step in steps), steps
        assert not any(step.startswith(("SCAN m", "SCAN c", "SCAN agent_memory",
                                        "SEARCH m USING INDEX")) for step in steps), steps


def test_the_tag_table_follows_every_write_of_tags(store: SQLiteStore, db_path: Path) -> None:
    """Migration 12's table of a repository's memories by tag is kept by triggers:
    whatever adds, imports, edits (by hand too) or forgets a memory."""
    store.add(_memory("a", tags=("x", "y")))
    store.load([_memory("b", tags=("y",)), _memory("c", repo="acme/web", tags=("x",))], [])
    with _raw(db_path) as conn:
        conn.execute("""UPDATE agent_memory SET tags = '["z", "x"]' WHERE id = 'b'""")
    store.forget(["a"], by="tester", reason="test")

    def pairs(sql: str) -> set[tuple[Any, ...]]:
        with _raw(db_path) as conn:
            return set(conn.execute(sql).fetchall())

    assert pairs("SELECT repo, tag, memory_seq FROM agent_memory_tag") == pairs(
        "SELECT m.repo, t.value, m.seq FROM agent_memory m, json_each(m.tags) t") == {
        (REPO, "z", 2), (REPO, "x", 2), ("acme/web", "x", 3)}
    assert [m.id for m in store.by_path(REPO, "src/app.py", tag="x")] == ["b"]
    assert store.by_path(REPO, "src/app.py", tag="y") == []


def test_search_past_the_ranked_matches_takes_the_newest_by_where_the_words_are(
        store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    import verified_memory.store.sqlite as module

    def add(name: str, minutes: int, subject: str, fact: str = "nothing here", *,
            tags: tuple[str, ...] = (), **fields: Any) -> str:
        store.add(_memory(name, minutes=minutes, subject=subject, fact=fact, tags=tags,
                          **fields))
        return name

    in_fact = [add(f"fact{i}", i, "a convention", f"retry budget {i}") for i in range(4)]
    in_subject = [add(f"subject{i}", 10 + i, f"retry budget {i}") for i in range(3)]
    tagged = add("tagged", 20, "budget rules", tags=("retry",))
    add("prefix", 30, "retrying budget")  # the last word whole first: found only after
    add("invalid", 40, "retry budget", status=Status.INVALID)
    add("elsewhere", 50, "retry budget", repo="acme/web")
    add("categorised", 60, "retry budget", category="decision")
    expected_order = ["categorised", *reversed(in_subject), tagged, *reversed(in_fact)]
    bm25 = [m.id for m in store.search(REPO, "budget retry", limit=20)]
    assert sorted(bm25) == sorted([*expected_order, "prefix"])

    monkeypatch.setattr(module, "RANKED_MATCHES", 8)  # 9 whole-word matches: past it
    assert [m.id for m in store.search(REPO, "budget retry", limit=8)] == expected_order[:8]
    assert [m.id for m in store.search(REPO, "budget retry", limit=3)] == expected_order[:3]
    assert [m.id for m in store.search(REPO, "budget retry", limit=20)] == bm25  # asked more
    assert [m.id for m in store.search(REPO, "budget retry", limit=5, category="decision")
            ] == ["categorised"]  # one match of the category: ranked by bm25
    monkeypatch.setattr(module, "RANKED_MATCHES", 3)
    # No whole-word match ("retr"): the last word as a prefix, in the same order.
    assert [m.id for m in store.search(REPO, "budget retr", limit=3)] == [
        "categorised", "prefix", "subject2"]


# ------------------------------------------------------------------------- processes


def _mixed_writer(path: str, worker: int, rounds: int) -> None:
    """One process's share of the load: add, refresh and log, each its own transaction."""
    store = SQLiteStore(path)  # several of these race to create and migrate the file
    try:
        for i in range(rounds):
            m = _memory(f"w{worker}-{i}", minutes=i)
            store.add(m, [_event(EventKind.CREATED, m.id)])
            [done] = store.apply([
                Transition(m.id, add_verifications=1, refreshed_at=datetime.now(UTC),
                           events=(_event(EventKind.REFRESHED, m.id),))
            ])
            assert done is True
            store.log([_event(EventKind.APPLIED, m.id)])
    finally:
        store.close()


def test_eight_processes_writing_at_once_lose_nothing(db_path: Path) -> None:
    workers, rounds = 8, 100
    ctx = multiprocessing.get_context("spawn")
    processes = [
        ctx.Process(target=_mixed_writer, args=(str(db_path), w, rounds))
        for w in range(workers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=180)

    assert [p.exitcode for p in processes] == [0] * workers
    store = SQLiteStore(db_path)
    try:
        stats = store.stats(REPO)
        everything = store.recent(REPO, limit=None)
        events = store.events(repo=REPO, limit=None)
    finally:
        store.close()
    assert stats.by_status["active"] == workers * rounds
    assert len(everything) == workers * rounds
    assert all(m.verification_count == 1 for m in everything)
    assert stats.citations == workers * rounds
    assert dict(stats.events) == {"applied": 800, "created": 800, "refreshed": 800}
    assert len({e.id for e in events}) == 3 * workers * rounds
    with _raw(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == len(
            MIGRATIONS
        )
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _superseder(
    path: str, worker: int, old_ids: list[str], barrier: Any, results: Any
) -> None:
    """Supersede each old memory the moment the rival process does too."""
    store = SQLiteStore(path)
    outcomes: list[str] = []
    try:
        for old_id in old_ids:
            barrier.wait(timeout=60)
            try:
                store.supersede(old_id, _memory(f"{old_id}-by-{worker}"))
                outcomes.append("won")
            except Conflict:
                outcomes.append("conflict")
            except VerifiedMemoryError as exc:  # pragma: no cover - reported to the parent
                outcomes.append(f"error: {exc}")
    finally:
        store.close()
        results.put((worker, outcomes))


def test_two_processes_superseding_one_memory_get_one_winner(db_path: Path) -> None:
    races = 25
    store = SQLiteStore(db_path)
    olds = [_memory(f"old-{i}") for i in range(races)]
    for m in olds:
        store.add(m)
    store.close()
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    processes = [
        ctx.Process(target=_superseder,
                    args=(str(db_path), w, [m.id for m in olds], barrier, results))
        for w in range(2)
    ]
    for process in processes:
        process.start()
    outcomes = dict(results.get(timeout=180) for _ in processes)
    for process in processes:
        process.join(timeout=60)

    assert [p.exitcode for p in processes] == [0, 0]
    store = SQLiteStore(db_path)
    try:
        for i, old in enumerate(olds):
            pair = sorted([outcomes[0][i], outcomes[1][i]])
            assert pair == ["conflict", "won"], (old.id, pair)
            winner = 0 if outcomes[0][i] == "won" else 1
            retired = store.get(old.id)
            assert retired.status is Status.SUPERSEDED
            assert retired.superseded_by == f"{old.id}-by-{winner}"
            assert store.get(f"{old.id}-by-{winner}").supersedes == old.id
        assert store.stats(REPO).by_status == {
            "active": races, "pending": 0, "invalid": 0, "superseded": races, "expired": 0,
        }
    finally:
        store.close()


def test_processes_storing_the_same_memory_at_once_store_it_once(db_path: Path) -> None:
    """The duplicate check and the insert are one transaction (``add_unless_duplicate``):
    of three processes storing one memory at once, one creates it and the others refresh
    that one."""
    SQLiteStore(db_path).close()  # migrated before the races
    url = f"sqlite:///{db_path}"
    check_stored_once(url, store_at_once(url, workers=3))


def test_processes_proposing_the_same_pending_memory_at_once_queue_it_once(
        db_path: Path) -> None:
    """A memory that waits for approval is checked against those already waiting in the
    transaction that queues it: of three processes proposing one at once, one queues it
    and the others refresh that one."""
    SQLiteStore(db_path).close()
    url = f"sqlite:///{db_path}"
    check_stored_once(url, store_at_once(url, workers=3, category="business_rule"),
                      status=Status.PENDING)


def test_a_store_made_before_the_quality_columns_migrates_in_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Migration 4 widens the status check of migration 1 (SQLite cannot alter one) and
    adds the quality columns; what was stored before keeps every field."""
    from verified_memory.store import sqlite as sqlite_module

    path = tmp_path / "old.db"
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS[:3])
    SQLiteStore(path).close()  # the schema as version 3 left it
    conn = sqlite3.connect(path)
    with conn:  # a memory as version 3 wrote it
        conn.execute(
            "INSERT INTO agent_memory (id, repo, subject, fact, status, created_at, "
            "refreshed_at) VALUES ('before', 'acme/api', 's', 'f', 'active', "
            "'2026-01-01T00:00:00.000000+00:00', '2026-02-01T00:00:00.000000+00:00')")
        conn.execute(
            "INSERT INTO agent_memory_citation (memory_id, position, repo, path, line_start, "
            "line_end, snippet_hash) VALUES ('before', 0, 'acme/api', 'a.py', 1, 2, 'ab')")
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):  # no expired yet
            conn.execute("UPDATE agent_memory SET status = 'expired' WHERE id = 'before'")
    conn.close()
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS)
    with SQLiteStore(path) as new:
        before = new.get("before")
        assert before.used_at == before.refreshed_at  # last used: when last refreshed
        assert (before.success_count, before.failure_count, before.promoted_to) == (0, 0, None)
        assert new.apply([Transition("before", status=Status.EXPIRED)]) == [True]
        assert new.get("before").status is Status.EXPIRED
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):  # still no odd status
            conn.execute("UPDATE agent_memory SET status = 'bogus' WHERE id = 'before'")
        versions = [v for (v,) in conn.execute("SELECT version FROM schema_migrations")]
        assert versions == [m[0] for m in MIGRATIONS]
    finally:
        conn.close()


def test_the_audit_trail_reads_its_partial_indexes(tmp_path: Path) -> None:
    """``vmem log`` stays fast however many reads were logged: its queries use the
    partial indexes of migration 5, which SQLite picks only when the query spells their
    condition exactly (``_sqlite_admin.CHANGES``)."""
    from verified_memory.models import EventKind, TelemetryEvent

    store = SQLiteStore(tmp_path / "m.db")
    try:
        store.log([TelemetryEvent(EventKind.RETRIEVED, "acme/api", "m1")])
        seen: list[str] = []
        assert store._conn is not None
        store._conn.set_trace_callback(seen.append)
        store.events(repo="acme/api", changes=True, newest=True, limit=50)
        store.events(memory_id="m1", changes=True, newest=True, limit=50)
        store._conn.set_trace_callback(None)
        plans = []
        for sql in (s for s in seen if s.startswith("SELECT")):
            plans.append(" ".join(str(row) for row in
                                  store._conn.execute(f"EXPLAIN QUERY PLAN {sql}")))
        assert "agent_memory_telemetry_repo_changes" in plans[0]
        assert "agent_memory_telemetry_memory_changes" in plans[1]
    finally:
        store.close()


def test_citations_stored_before_migrations_8_and_9_are_found_by_path_after_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Migrations 8 and 9 give every citation row its memory's seq and creation time
    (what by_path joins on and walks in order): rows written before them are filled
    in, rows written after them carry both."""
    from verified_memory.store import sqlite as sqlite_module

    path = tmp_path / "old.db"
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS[:7])
    before = [replace(_memory(minutes=i % 7), citations=(_cited("src/hot.py", 1 + i, 3 + i),))
              for i in range(12)]
    SQLiteStore(path).close()  # the schema as version 7 left it
    conn = sqlite3.connect(path)
    with conn:  # the rows as version 7 wrote them
        conn.executemany(f"INSERT INTO agent_memory ({', '.join(MEMORY_COLUMNS)}) VALUES "
                         f"({', '.join('?' for _ in MEMORY_COLUMNS)})",
                         [memory_values(m) for m in before])
        conn.executemany(f"INSERT INTO agent_memory_citation ({', '.join(CITATION_COLUMNS)}) "
                         f"VALUES ({', '.join('?' for _ in CITATION_COLUMNS)})",
                         [citation_values(m.id, m.repo, 0, m.citations[0]) for m in before])
    conn.close()
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS)
    with SQLiteStore(path) as new:
        after = [replace(_memory(minutes=3 + i), citations=(_cited("src/hot.py", 5, 6),))
                 for i in range(3)]
        for m in after:
            new.add(m)
        everyone = before + after
        for lines in (None, (4, 6)):
            assert [m.id for m in new.by_path(REPO, "src/hot.py", lines=lines, limit=10)] \
                == _expected(everyone, "src/hot.py", lines, 10)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute(
            "SELECT count(*) FROM agent_memory_citation c JOIN agent_memory m "
            "ON m.id = c.memory_id WHERE c.memory_seq IS m.seq "
            "AND c.memory_created_at IS m.created_at").fetchone() == (15,)
    finally:
        conn.close()


@pytest.mark.parametrize("written_by", ["version 7", "version 8"])
@pytest.mark.parametrize("at_version", [9, 10])
def test_citations_an_older_process_writes_after_the_upgrade_are_found_newest_first(
        db_path: Path, monkeypatch: pytest.MonkeyPatch, written_by: str,
        at_version: int) -> None:
    """A process of an older version that opened the file before another upgraded it
    (an MCP server running through the upgrade) goes on writing citation rows its way:
    without the memory's creation time (version 8), or its seq too (version 7). The
    file fills them in, so its newest memory is still the first by path (it came last,
    or was not found at all): as rows are written (migration 10's trigger), and rows
    written while the file was at version 9 when migration 10 is applied."""
    from verified_memory.store import sqlite as sqlite_module

    monkeypatch.setattr(sqlite_module, "MIGRATIONS",
                        tuple(m for m in MIGRATIONS if m[0] <= at_version))
    with SQLiteStore(db_path) as new:
        older = replace(_memory(minutes=0), citations=(_cited("src/hot.py", 1, 3),))
        new.add(older)
    newest = replace(_memory(minutes=60), citations=(_cited("src/hot.py", 1, 3),
                                                     _cited("src/cool.py", 5, 6)))
    columns = list(CITATION_COLUMNS)
    values = "?, " * (len(columns) - 1) + "?"
    if written_by == "version 8":
        columns.append("memory_seq")
        values += ", (SELECT seq FROM agent_memory WHERE id = ?1)"
    with _raw(db_path) as conn:  # the rows as the older process writes them
        conn.execute("BEGIN")
        conn.execute(f"INSERT INTO agent_memory ({', '.join(MEMORY_COLUMNS)}) VALUES "
                     f"({', '.join('?' for _ in MEMORY_COLUMNS)})", memory_values(newest))
        for i, c in enumerate(newest.citations):
            conn.execute(f"INSERT INTO agent_memory_citation ({', '.join(columns)}) "
                         f"VALUES ({values})", citation_values(newest.id, newest.repo, i, c))
        conn.execute("COMMIT")
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS)
    with SQLiteStore(db_path) as store:
        assert [m.id for m in store.by_path(REPO, "src/hot.py", limit=1)] == [newest.id]
        assert [m.id for m in store.by_path(REPO, "src/hot.py")] == [newest.id, older.id]
        assert [m.id for m in store.by_path(REPO, "src/cool.py", lines=(6, 6))] \
            == [newest.id]


def test_a_creation_time_edited_by_hand_moves_its_memory_by_path(
        db_path: Path, store: SQLiteStore) -> None:
    """Each citation keeps a copy of its memory's creation time (the index's order):
    an edit of the memory's time by hand reaches the copies (migration 11), and a copy
    edited alone is set back to its memory's, as on Postgres (sql/013). Before, the
    memory was found by its old time."""
    for name, minutes in (("old", 1), ("mid", 2), ("new", 3)):
        store.add(replace(_memory(name, minutes=minutes), citations=(_cited("a.py", 1, 2),
                                                                      _cited("a.py", 5, 6))))
    with _raw(db_path) as conn:
        conn.execute("UPDATE agent_memory SET created_at = '2026-01-01T00:00:00.000000+00:00'"
                     " WHERE id = 'new'")
        conn.execute("UPDATE agent_memory_citation SET memory_created_at = "
                     "'2027-01-01T00:00:00.000000+00:00' WHERE memory_id = 'old'")
    assert [m.id for m in store.by_path(REPO, "a.py", limit=1)] == ["mid"]
    assert [m.id for m in store.by_path(REPO, "a.py")] == ["mid", "old", "new"]
    with _raw(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM agent_memory_citation c JOIN agent_memory m "
                            "ON m.id = c.memory_id WHERE c.memory_created_at IS m.created_at"
                            ).fetchone() == (6,)


def test_migration_11_mends_future_times_and_stale_copies(
        db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file at version 10 with a creation time in the future (another machine's
    clock, an import) and a copy left stale by a hand edit: migration 11 stores the
    future time as now and mends the copies."""
    from verified_memory.store import sqlite as sqlite_module

    monkeypatch.setattr(sqlite_module, "MIGRATIONS", tuple(m for m in MIGRATIONS if m[0] <= 10))
    with SQLiteStore(db_path) as old:
        for name, minutes in (("ahead", 1), ("edited", 2), ("plain", 3)):
            old.add(_memory(name, minutes=minutes))
    with _raw(db_path) as conn:
        conn.execute("UPDATE agent_memory SET created_at = '2099-01-01T00:00:00.000000+00:00'"
                     " WHERE id = 'ahead'")
        conn.execute("UPDATE agent_memory_citation SET memory_created_at = (SELECT created_at"
                     " FROM agent_memory WHERE id = 'ahead') WHERE memory_id = 'ahead'")
        conn.execute("UPDATE agent_memory SET created_at = '2020-01-01T00:00:00.000000+00:00'"
                     " WHERE id = 'edited'")
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS)
    with SQLiteStore(db_path) as store:
        assert store.get("ahead").created_at <= datetime.now(UTC)
        assert [m.id for m in store.by_path(REPO, "src/app.py")] == ["ahead", "plain",
                                                                    "edited"]
        newer = _memory("newer", minutes=0)
        store.add(replace(newer, created_at=datetime.now(UTC)))
        assert [m.id for m in store.by_path(REPO, "src/app.py", limit=1)] == ["newer"]
    with _raw(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM agent_memory_citation c JOIN agent_memory m "
                            "ON m.id = c.memory_id WHERE c.memory_created_at IS m.created_at"
                            ).fetchone() == (4,)


_AHEAD = "2099-01-01T00:00:00.000000+00:00"


def test_times_written_by_hand_later_than_now_are_now(db_path: Path,
                                                      store: SQLiteStore) -> None:
    """A creation or refresh time later than now written by another program (an edit by
    hand, an insert) is brought back to now (migration 13), as Postgres's trigger does
    (sql/013, sql/014). Before, a memory edited to "tomorrow" led ``recent`` (and by
    path, for a creation time) until the clock passed it."""
    for name, minutes in (("edited", 1), ("plain", 2)):
        store.add(_memory(name, minutes=minutes))
    inserted = list(memory_values(_memory("inserted", minutes=3)))
    for column in ("created_at", "refreshed_at"):
        inserted[MEMORY_COLUMNS.index(column)] = _AHEAD
    with _raw(db_path) as conn:
        conn.execute("UPDATE agent_memory SET created_at = ?, refreshed_at = ? "
                     "WHERE id = 'edited'", (_AHEAD, _AHEAD))
        conn.execute(f"INSERT INTO agent_memory ({', '.join(MEMORY_COLUMNS)}) VALUES "
                     f"({', '.join('?' for _ in MEMORY_COLUMNS)})", inserted)
    taken = datetime.now(UTC)
    for memory in store.get_many(["edited", "inserted"]):
        assert max(memory.created_at, memory.refreshed_at) <= taken, memory.id
    newest = replace(_memory("newest"), created_at=datetime.now(UTC),
                     refreshed_at=datetime.now(UTC))
    store.add(newest)
    assert [m.id for m in store.recent(REPO, limit=1)] == ["newest"]
    assert [m.id for m in store.by_path(REPO, "src/app.py", limit=1)] == ["newest"]
    assert store.get("newest").refreshed_at == newest.refreshed_at  # now is not ahead
    with _raw(db_path) as conn:  # the creation time's copies moved with it
        assert conn.execute("SELECT count(*) FROM agent_memory_citation c JOIN agent_memory m "
                            "ON m.id = c.memory_id WHERE c.memory_created_at IS m.created_at"
                            ).fetchone() == (3,)


def test_migration_13_brings_refresh_times_back_to_now(
        db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file at version 12 holding a refresh time in the future: migration 13 stores
    it as now, so the memory no longer leads ``recent``."""
    from verified_memory.store import sqlite as sqlite_module

    monkeypatch.setattr(sqlite_module, "MIGRATIONS", tuple(m for m in MIGRATIONS if m[0] <= 12))
    with SQLiteStore(db_path) as old:
        for name, minutes in (("ahead", 1), ("plain", 2)):
            old.add(_memory(name, minutes=minutes))
    with _raw(db_path) as conn:
        conn.execute("UPDATE agent_memory SET refreshed_at = ? WHERE id = 'ahead'", (_AHEAD,))
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", MIGRATIONS)
    with SQLiteStore(db_path) as store:
        assert store.get("ahead").refreshed_at <= datetime.now(UTC)
        store.add(replace(_memory("newer"), refreshed_at=datetime.now(UTC)))
        assert [m.id for m in store.recent(REPO)] == ["newer", "ahead", "plain"]


def test_a_connection_keeps_a_larger_page_cache(store: SQLiteStore) -> None:
    """The pass's event inserts land all over the telemetry's indexes by memory: the
    store's connection keeps up to ``CACHE_KIB`` of pages, not SQLite's 2 MiB."""
    from verified_memory.store.sqlite import CACHE_KIB

    assert store._conn is not None
    assert store._conn.execute("PRAGMA cache_size").fetchone() == (-CACHE_KIB,)
    assert CACHE_KIB > 2048
