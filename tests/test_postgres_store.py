"""What only the Postgres store promises: migrations, the schema's own rules, error
translation, dashboards, and many processes writing at once.

The behaviour every store shares is in ``tests/contract`` (which runs on Postgres too);
row-level security is in ``test_rls.py``. Every test gets a database of its own.
"""

from __future__ import annotations

import multiprocessing
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.store_races import at_once, check_stored_once, store_at_once
from verified_memory.config import Settings
from verified_memory.dashboard.data import collect
from verified_memory.errors import (
    Conflict,
    MissingDependency,
    NotFound,
    StoreError,
    ValidationError,
    VerifiedMemoryError,
)
from verified_memory.models import (
    Citation,
    EventKind,
    Fingerprint,
    Memory,
    Status,
    TelemetryEvent,
    Transition,
)
from verified_memory.store import open_store
from verified_memory.store.migrate import (
    MIGRATIONS_TABLE,
    applied_versions,
    load_migrations,
    migrate,
    migrations_dir,
    render_sql,
)
from verified_memory.store.postgres import (
    ADD_LOCK,
    ADD_LOCK_SQL,
    IMPORT_LOCK,
    IMPORT_SQL,
    PostgresStore,
    applied_flags,
    import_payload,
    memory_payload,
)
from verified_memory.store.views import ViewQuery, sql_select

pytestmark = pytest.mark.postgres

REPO = "acme/api"
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _memory(memory_id: str | None = None, *, minutes: float = 0, **fields: Any) -> Memory:
    citation = Citation(
        path=fields.pop("path", "src/app.py"),
        line_start=fields.pop("line_start", 10),
        line_end=fields.pop("line_end", 12),
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


def _event(kind: EventKind, memory_id: str | None = None, *, repo: str = REPO,
           at: datetime = T0, **detail: Any) -> TelemetryEvent:
    return TelemetryEvent(kind=kind, repo=repo, memory_id=memory_id, actor="t", at=at,
                          detail=detail)


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    opened = PostgresStore(pg_url)
    yield opened
    opened.close()


def _sql(url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(query.encode(), params or None)
        return cur.fetchall() if cur.description else []


# --------------------------------------------------------------------------- migrations


def test_migrate_applies_every_file_once_in_order(pg_empty_url: str) -> None:
    versions = [m.version for m in load_migrations()]
    assert versions == sorted(versions, key=int)
    assert len(versions) >= 4

    assert applied_versions(pg_empty_url) == []
    assert migrate(pg_empty_url) == versions
    assert migrate(pg_empty_url) == []  # recorded: nothing runs twice
    assert applied_versions(pg_empty_url) == versions
    rows = _sql(pg_empty_url, f"select version, name, checksum from {MIGRATIONS_TABLE} "
                              "order by version")
    assert [(v, n) for v, n, _ in rows] == [(m.version, m.name) for m in load_migrations()]
    assert all(len(c) == 64 for _, _, c in rows)


def test_migration_files_are_idempotent_sql(pg_url: str) -> None:
    """Pasting the files again (the Supabase SQL editor, psql -f) changes nothing."""
    before = _sql(pg_url, "select count(*) from pg_policies where tablename like 'agent_memory%'")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for _ in range(2):
            conn.execute(render_sql().encode())
    after = _sql(pg_url, "select count(*) from pg_policies where tablename like 'agent_memory%'")
    assert before == after
    assert before[0][0] > 0
    store = PostgresStore(pg_url)
    try:
        store.add(_memory("m1"))
        assert store.get("m1").id == "m1"
    finally:
        store.close()


def test_concurrent_migrations_apply_each_file_once(pg_empty_url: str) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: migrate(pg_empty_url), range(4)))
    applied = sorted(v for r in results for v in r)
    assert applied == sorted(m.version for m in load_migrations())


def test_a_failing_migration_is_rolled_back_and_named(pg_empty_url: str, tmp_path: Path) -> None:
    for m in load_migrations():
        (tmp_path / f"{m.version}_{m.name}.sql").write_text(m.sql)
    (tmp_path / "900_broken.sql").write_text(
        "create table vm_half_done (x int);\nselect * from no_such_table;\n"
    )
    with pytest.raises(StoreError, match="900_broken") as caught:
        migrate(pg_empty_url, tmp_path)
    assert "no_such_table" in str(caught.value)
    assert "900" not in applied_versions(pg_empty_url)
    assert _sql(pg_empty_url, "select to_regclass('vm_half_done')") == [(None,)]
    (tmp_path / "900_broken.sql").unlink()
    assert migrate(pg_empty_url, tmp_path) == []
    # What the SQL says to do about it (003_rls's missing roles: how to get them) is kept.
    (tmp_path / "901_hinted.sql").write_text(
        "do $$ begin raise exception 'needs the roles' using errcode = '42501', "
        "hint = 'create them, or migrate as a role with CREATEROLE'; end $$;\n")
    with pytest.raises(StoreError) as caught:
        migrate(pg_empty_url, tmp_path)
    assert str(caught.value) == ("migration 901_hinted failed and was rolled back: needs the "
                                 "roles: create them, or migrate as a role with CREATEROLE "
                                 "[42501]")


def test_migration_files_ship_inside_the_package_or_the_checkout() -> None:
    directory = migrations_dir()
    assert (directory / "001_schema.sql").is_file()
    assert "create table if not exists agent_memory" in render_sql()


def test_the_store_migrates_a_fresh_database_at_construction(pg_empty_url: str) -> None:
    store = PostgresStore(pg_empty_url)
    try:
        store.add(_memory("m1"))
        assert store.recent(REPO)[0].id == "m1"
    finally:
        store.close()
    assert applied_versions(pg_empty_url) == [m.version for m in load_migrations()]


# --------------------------------------------------------------------------- schema rules


@pytest.mark.parametrize(
    ("column", "value"),
    [("status", "'forgotten'"), ("repo", "'not a repo'"), ("repo", "'acme/..'")],
)
def test_memory_constraints(pg_url: str, column: str, value: str) -> None:
    values = {"id": "'x'", "repo": "'acme/api'", "subject": "'s'", "fact": "'f'",
              "status": "'active'"}
    values[column] = value
    with pytest.raises(psycopg.errors.CheckViolation):
        _sql(pg_url, f"insert into agent_memory ({', '.join(values)}) "
                     f"values ({', '.join(values.values())})")


@pytest.mark.parametrize(("start", "end"), [(0, 3), (5, 4), (-1, 2)])
def test_citation_lines_must_be_one_based_and_ordered(
    store: PostgresStore, start: int, end: int
) -> None:
    store.add(_memory("m1"))
    with pytest.raises(ValidationError, match=r"lines_check|line"):
        store.apply([Transition("m1", citations=(
            Citation("a.py", start, end, None, None, Fingerprint("00", ())),))])
    assert store.get("m1").citations[0].line_start == 10


def test_citation_line_constraint_holds_in_sql(pg_url: str, store: PostgresStore) -> None:
    store.add(_memory("m1"))
    for start, end in ((0, 1), (3, 2)):
        with pytest.raises(psycopg.errors.CheckViolation, match="lines_check"):
            _sql(pg_url, "insert into agent_memory_citation (memory_id, position, repo, path, "
                         "line_start, line_end, snippet_hash) values "
                         "('m1', 5, 'acme/api', 'a.py', %s, %s, 'x')", (start, end))


def test_a_citation_belongs_to_its_memorys_repository(pg_url: str, store: PostgresStore) -> None:
    store.add(_memory("m1"))
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        _sql(pg_url, "insert into agent_memory_citation (memory_id, position, repo, path, "
                     "line_start, line_end, snippet_hash) values "
                     "('m1', 5, 'other/repo', 'a.py', 1, 1, 'x')")


def test_telemetry_is_append_only(pg_url: str, store: PostgresStore) -> None:
    store.log([_event(EventKind.RETRIEVED, "m1")])
    for statement in ("update agent_memory_telemetry set actor = 'x'",
                      "delete from agent_memory_telemetry"):
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="append-only"):
            _sql(pg_url, statement)
    assert len(store.events()) == 1


def test_the_indexes_the_queries_need_exist(pg_url: str) -> None:
    names = {r[0] for r in _sql(pg_url, "select indexname from pg_indexes "
                                        "where tablename like 'agent_memory%'")}
    assert {
        "agent_memory_repo_status_refreshed_idx",  # recent per repo
        "agent_memory_search_idx",  # full-text search
        "agent_memory_citation_newest_idx",  # by_path, the review bot
        "agent_memory_telemetry_repo_at_idx",  # telemetry by repo and time
    } <= names


def test_search_by_path_uses_the_indexes(pg_url: str, store: PostgresStore) -> None:
    for i in range(200):
        store.add(_memory(f"m{i}", path=f"src/f{i % 40}.py", subject=f"topic{i} retries"))
    _sql(pg_url, "analyze")
    with psycopg.connect(pg_url) as conn:
        conn.execute("set enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute(
            "explain select * from agent_memory_by_path('acme/api', 'src/f3.py')").fetchall())
        inner = "\n".join(r[0] for r in conn.execute(  # by_path's own look-up (sql/013)
            "explain select c.memory_id collate \"C\" from agent_memory_citation c join "
            "agent_memory m on m.id = c.memory_id where c.repo = 'acme/api' and "
            "c.path = 'src/f3.py' and m.repo = 'acme/api' and m.status = 'active' group by "
            "c.memory_created_at, c.memory_id collate \"C\" order by c.memory_created_at "
            "desc, c.memory_id collate \"C\" limit 50").fetchall())
        search = "\n".join(r[0] for r in conn.execute(
            "explain select id from agent_memory "
            "where search @@ agent_memory_tsquery(array['topic7'])").fetchall())
    assert plan  # the function plans; its inner look-up uses the (repo, path) index
    assert "agent_memory_citation_newest_idx" in inner
    assert "agent_memory_search_idx" in search


def test_by_path_on_a_crowded_file_reads_the_newest_created_first(pg_url: str,
                                                                  store: PostgresStore) -> None:
    """A file with thousands of citations, some written in plain SQL (the trigger of
    sql/011 gives them their memory's creation time): by_path's answers, newest created
    first, whatever the refresh times say."""
    memories = [_memory(f"m{i:02d}", minutes=(i * 37) % 61 % 20, path="src/hot.py",
                        line_start=1 + i % 9 * 10, line_end=5 + i % 9 * 10,
                        status=Status.INVALID if i % 11 == 0 else Status.ACTIVE)
                for i in range(60)]
    for m in memories:
        store.add(m)
    _sql(pg_url, "update agent_memory set refreshed_at = now() where id like 'm_5'")
    with psycopg.connect(pg_url, autocommit=True) as conn:  # 40 more citations each
        conn.cursor().executemany(
            "insert into agent_memory_citation (memory_id, position, repo, path, line_start, "
            "line_end, snippet_hash) values (%s, %s, %s, 'src/hot.py', 200, 210, '00')",
            [(m.id, p, REPO) for m in memories for p in range(1, 41)])
    assert _sql(pg_url, "select count(*) from agent_memory_citation c join agent_memory m "
                        "on m.id = c.memory_id where c.memory_created_at = m.created_at"
                )[0][0] == 60 * 41
    _sql(pg_url, "analyze")
    with psycopg.connect(pg_url) as conn:  # the index's own order: the read stops early
        plan = "\n".join(r[0] for r in conn.execute(
            "explain select c.memory_id collate \"C\" from agent_memory_citation c join "
            "agent_memory m on m.id = c.memory_id where c.repo = %s and c.path = "
            "'src/hot.py' and m.repo = %s and m.status = 'active' group by "
            "c.memory_created_at, c.memory_id collate \"C\" order by c.memory_created_at "
            "desc, c.memory_id collate \"C\" limit 5",
            (REPO, REPO)).fetchall())
    assert "agent_memory_citation_newest_idx" in plan, plan
    assert "Sort" not in plan, plan
    newest = sorted((m for m in memories if m.status is Status.ACTIVE),
                    key=lambda m: (-m.created_at.timestamp(), m.id))
    for lines, limit in ((None, 50), ((11, 14), 5), ((205, 205), 3), ((300, 400), 50)):
        expected = [m.id for m in newest if lines is None or lines[1] >= 200 or (
            m.citations[0].line_start <= lines[1] and m.citations[0].line_end >= lines[0])
                    ][:limit] if lines != (300, 400) else []
        assert [m.id for m in store.by_path(REPO, "src/hot.py", lines=lines, limit=limit)
                ] == expected, lines


def test_rows_written_in_plain_sql_are_searchable_too(pg_url: str, store: PostgresStore) -> None:
    """Without client-computed terms the SQL fallback tokenizer fills the index."""
    _sql(pg_url, "select agent_memory_add(%s::jsonb)", (
        '{"id": "sql-1", "repo": "acme/api", "subject": "Hand-written memory", '
        '"fact": "Inserted by SQL", "tags": ["manual"], "citations": [{"path": "a.py", '
        '"line_start": 1, "line_end": 2, "snippet_hash": "00"}]}',))
    assert [m.id for m in store.search(REPO, "hand written")] == ["sql-1"]
    assert [m.id for m in store.search(REPO, "manu")] == ["sql-1"]
    memory = store.get("sql-1")
    assert memory.status is Status.ACTIVE
    assert memory.citations[0].fingerprint.line_hashes == ()


# --------------------------------------------------------------------------- store


def test_repos_lists_repositories_with_memories_sorted(store: PostgresStore) -> None:
    assert store.repos() == []
    for repo in ("zeta/x", "acme/web", REPO, "acme/web"):
        store.add(_memory(repo=repo))
    store.log([_event(EventKind.RETRIEVED, repo="only/events")])
    assert store.repos() == ["acme/api", "acme/web", "zeta/x"]


def test_open_store_picks_postgres_for_a_postgresql_url(pg_url: str) -> None:
    store = open_store(pg_url, Settings(database_url="sqlite:///unused.db"))
    try:
        assert isinstance(store, PostgresStore)
    finally:
        store.close()


def test_repr_hides_the_password(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        store.url = pg_url.replace("postgres@", "postgres:s3cret@")
        assert "s3cret" not in repr(store)
    finally:
        store.close()


def test_bulk_loading_is_one_round_trip_per_memory(store: PostgresStore) -> None:
    started = time.perf_counter()
    for i in range(300):
        store.add(_memory(minutes=i), [_event(EventKind.CREATED)])
    elapsed = time.perf_counter() - started
    assert store.stats(REPO).by_status["active"] == 300
    assert elapsed < 15, f"300 adds took {elapsed:.1f} s"


def test_an_unreachable_server_is_a_store_error_naming_it() -> None:
    with pytest.raises(StoreError, match="cannot reach the database") as caught:
        PostgresStore("postgresql://nobody:hunter2@127.0.0.1:9/none", timeout=2)
    assert "hunter2" not in str(caught.value)


def test_an_unknown_database_is_a_store_error(pg_server: Any) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        PostgresStore(pg_server.url_for("vmem_no_such_database"))


def test_an_unmigrated_database_says_to_migrate(pg_empty_url: str) -> None:
    store = PostgresStore(pg_empty_url, migrate=False)
    try:
        with pytest.raises(StoreError, match="vmem db migrate"):
            store.recent(REPO)
    finally:
        store.close()


def test_a_closed_store_refuses_work(store: PostgresStore) -> None:
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.recent(REPO)


def test_missing_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingDependency, match=r"verified-memory\[postgres\]"):
        PostgresStore("postgresql://localhost/x")


def test_no_psycopg_error_reaches_the_caller(store: PostgresStore, pg_url: str) -> None:
    store.add(_memory("m1"))
    attempts = [
        lambda: store.add(_memory("m1")),  # duplicate id
        lambda: store.add(_memory(repo="no-slash")),  # repo format
        lambda: store.supersede("nope", _memory()),
        lambda: store.apply([Transition("nope")]),
        lambda: store.log([_event(EventKind.RETRIEVED, repo="bad repo")]),
    ]
    for attempt in attempts:
        with pytest.raises(VerifiedMemoryError) as caught:
            attempt()
        assert not isinstance(caught.value, psycopg.Error)
        assert isinstance(caught.value.__cause__, psycopg.Error | type(None))


def test_apply_locks_rows_in_id_order_so_overlapping_batches_do_not_deadlock(
    pg_url: str,
) -> None:
    stores = [PostgresStore(pg_url) for _ in range(2)]
    try:
        ids = [f"m{i:02d}" for i in range(20)]
        for memory_id in ids:
            stores[0].add(_memory(memory_id))
        batches = [
            [Transition(i, add_verifications=1) for i in ids],
            [Transition(i, add_verifications=1) for i in reversed(ids)],
        ]

        def run(n: int) -> None:
            for _ in range(10):
                stores[n].apply(batches[n])

        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(run, range(2)))
        assert {m.verification_count for m in stores[0].get_many(ids)} == {20}
    finally:
        for s in stores:
            s.close()


# --------------------------------------------------------------------------- dashboards


def test_invalidation_rate_per_repository_per_day(pg_url: str, store: PostgresStore) -> None:
    day1, day2 = T0, T0 + timedelta(days=1)
    store.log(
        [_event(EventKind.VERIFIED_VALID, "a", at=day1)] * 3
        + [_event(EventKind.VERIFIED_INVALID, "b", at=day1)]
        + [_event(EventKind.INVALIDATED, "b", at=day1)]
        + [_event(EventKind.VERIFIED_INVALID, "c", at=day2)]
        + [_event(EventKind.VERIFIED_VALID, "d", at=day1, repo="acme/web")]
    )
    rows = _sql(pg_url, "select repo, day::text, verified_valid, verified_invalid, invalidated, "
                        "invalidation_rate from agent_memory_invalidation_daily "
                        "order by repo, day")
    assert rows == [
        ("acme/api", "2026-03-01", 3, 1, 1, 0.25),
        ("acme/api", "2026-03-02", 0, 1, 0, 1.0),
        ("acme/web", "2026-03-01", 1, 0, 0, 0.0),
    ]


def test_outcome_funnel_per_repository_per_day(pg_url: str, store: PostgresStore) -> None:
    store.log(
        [_event(EventKind.RETRIEVED, m) for m in ("a", "a", "b", "c")]
        + [_event(EventKind.VERIFIED_VALID, m) for m in ("a", "b")]
        + [_event(EventKind.VERIFIED_INVALID, "c")]
        + [_event(EventKind.APPLIED, "a"), _event(EventKind.APPLIED, "a")]
        + [_event(EventKind.FEEDBACK, "a")]
    )
    rows = _sql(pg_url, "select retrieved, verified_valid, verified_invalid, applied, "
                        "memories_retrieved, memories_applied from agent_memory_outcome_funnel")
    assert rows == [(4, 2, 1, 2, 3, 1)]
    counts = _sql(pg_url, "select repo, status, memories from agent_memory_status_counts")
    assert counts == []


def test_the_dashboard_reads_its_windows_events_through_an_index(
        pg_url: str, store: PostgresStore) -> None:
    """sql/016: the dashboard's window is a condition on each event's UTC day, which no
    index of ``at`` served: every read scanned the whole telemetry table (a week's
    dashboard over 300,000 events: 86 ms, growing with the table). Before 016 the events'
    plan was a Seq Scan, and the broken files' plan read every verdict ever written."""
    # 40,000 events, one every 15 minutes back from T0 (417 days): a week is 2% of them.
    _sql(pg_url, "insert into agent_memory_telemetry (kind, repo, memory_id, at, detail) "
                 "select (array['retrieved', 'verified_valid', 'verified_invalid', "
                 "'feedback'])[1 + i %% 4], %s, 'm' || i %% 50, %s - i * interval '15 minutes', "
                 "case i %% 4 when 2 then jsonb_build_object('outcomes', jsonb_build_array("
                 "jsonb_build_object('outcome', 'changed', 'path', 'src/f' || i %% 9 || '.py'))) "
                 "when 3 then '{\"outcome\": \"success\"}' else '{}' end "
                 "from generate_series(0, 39999) i", (REPO, T0))
    _sql(pg_url, "analyze agent_memory_telemetry")
    store.add(_memory("m1"))  # the repository the dashboard shows
    asked: list[ViewQuery] = []

    def read(query: ViewQuery) -> list[dict[str, Any]]:
        asked.append(query)
        return store.read_view(query)

    for repos in (None, [REPO]):  # every repository, and one (a condition on repo too)
        (shown,) = collect(read, repos=repos, days=7, now=T0).repos
        since = T0 - timedelta(days=6)
        ((retrieved, invalid),) = _sql(
            pg_url, "select count(*) filter (where kind = 'retrieved'), count(*) filter "
                    "(where kind = 'verified_invalid') from agent_memory_telemetry "
                    "where at >= %s", (since,))
        assert (shown.funnel.retrieved, sum(f.breaks for f in shown.files)) == (
            retrieved, invalid) != (0, 0)
    window_reads = {"agent_memory_events_daily": "agent_memory_telemetry_day_idx",
                    "agent_memory_breaks_daily": "agent_memory_telemetry_broken_day_idx"}
    reads = [q for q in asked if q.view in window_reads]
    assert len(reads) == 4
    with psycopg.connect(pg_url) as conn:
        for query in reads:
            sql, params = sql_select(query, "%s", lambda _kind, value: value)
            ((plan,),) = conn.execute(f"explain (format json) {sql}".encode(),
                                      params).fetchall()
            nodes = list(_plan_nodes(plan[0]["Plan"]))
            assert not [n for n in nodes if n["Node Type"] == "Seq Scan"], (query, plan)
            assert window_reads[query.view] in {n.get("Index Name") for n in nodes}, (
                query, plan)


def _plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A node of an ``explain (format json)`` plan and every node under it."""
    yield node
    for child in node.get("Plans", ()):
        yield from _plan_nodes(child)


# --------------------------------------------------------------------------- concurrency

WORKERS, WRITES, SHARED = 8, 500, 10


def _processes() -> Any:
    """Fork where there is fork: spawning re-imports everything in each child, which
    doubles the test's time on a small machine. The children open their own connections
    and touch nothing of the parent's, so the parent's pool threads are no hazard."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    return multiprocessing.get_context("fork")


# Python 3.12+ warns about fork() in a process with threads (see _processes).
_FORK_WARNING = "ignore:.*use of fork:DeprecationWarning"


def _mixed_writer(url: str, worker: int) -> None:
    """500 writes of five kinds, some on memories every worker updates at once."""
    store = PostgresStore(url, migrate=False, max_size=1)
    own: list[str] = []
    try:
        for i in range(WRITES):
            kind = i % 5
            if kind == 0:
                memory = _memory(f"w{worker}-{i}", minutes=i)
                store.add(memory, [_event(EventKind.CREATED, memory.id)])
                own.append(memory.id)
            elif kind == 1:
                store.log([_event(EventKind.RETRIEVED, own[-1]),
                           _event(EventKind.FEEDBACK, own[-1], worker=worker)])
            elif kind == 2:
                shared = f"shared-{i % SHARED}"
                [result] = store.apply([Transition(
                    shared, add_verifications=1,
                    events=(_event(EventKind.VERIFIED_VALID, shared),))])
                assert result is True
            elif kind == 3:
                old = own.pop(0)
                new = _memory(f"w{worker}-{i}-new", minutes=i)
                store.supersede(old, new, [_event(EventKind.SUPERSEDED, old)])
                own.append(new.id)
            else:
                [result] = store.apply([Transition(
                    own[-1], add_applications=1, events=(_event(EventKind.APPLIED, own[-1]),))])
                assert result is True
    finally:
        store.close()


@pytest.mark.filterwarnings(_FORK_WARNING)
def test_eight_processes_writing_at_once_lose_nothing(pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        for n in range(SHARED):
            store.add(_memory(f"shared-{n}"))
        ctx = _processes()
        processes = [ctx.Process(target=_mixed_writer, args=(pg_url, w)) for w in range(WORKERS)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=120)
        assert [p.exitcode for p in processes] == [0] * WORKERS

        per_kind = WRITES // 5
        stats = store.stats(REPO)
        assert stats.by_status == {
            "active": SHARED + WORKERS * per_kind,  # every worker keeps one chain per add
            "pending": 0,
            "invalid": 0,
            "superseded": WORKERS * per_kind,
            "expired": 0,
        }
        assert stats.events == {
            "applied": WORKERS * per_kind,
            "created": WORKERS * per_kind,
            "feedback": WORKERS * per_kind,
            "retrieved": WORKERS * per_kind,
            "superseded": WORKERS * per_kind,
            "verified_valid": WORKERS * per_kind,
        }
        shared = store.get_many([f"shared-{n}" for n in range(SHARED)])
        assert sum(m.verification_count for m in shared) == WORKERS * per_kind
        every = store.recent(REPO, limit=None, status=None)
        assert sum(m.applied_count for m in every) == WORKERS * per_kind
        ids = [e.id for e in store.events(limit=None)]
        assert len(ids) == len(set(ids)) == WORKERS * per_kind * 6
    finally:
        store.close()


def _superseder(url: str, olds: list[str], worker: int, barrier: Any, results: Any) -> None:
    store = PostgresStore(url, migrate=False, max_size=1)
    outcome: list[str] = []
    try:
        for old in olds:
            barrier.wait(timeout=60)
            try:
                store.supersede(old, _memory(f"{old}-by-{worker}"))
                outcome.append("won")
            except Conflict:
                outcome.append("conflict")
    finally:
        store.close()
        results.put((worker, outcome))


@pytest.mark.filterwarnings(_FORK_WARNING)
def test_two_processes_superseding_one_memory_get_one_winner(pg_url: str) -> None:
    races = 20
    store = PostgresStore(pg_url)
    try:
        olds = [f"old-{i}" for i in range(races)]
        for old in olds:
            store.add(_memory(old))
        outcomes = at_once(_processes(), 2, _superseder, pg_url, olds)
        for i, old in enumerate(olds):
            assert sorted((outcomes[0][i], outcomes[1][i])) == ["conflict", "won"]
            retired = store.get(old)
            assert retired.status is Status.SUPERSEDED
            winner = store.get(retired.superseded_by or "")
            assert winner.supersedes == old
            assert winner.status is Status.ACTIVE
        assert store.stats(REPO).by_status["active"] == races
    finally:
        store.close()


def test_a_supersede_waiting_on_a_lock_sees_the_winner_and_conflicts(pg_url: str) -> None:
    """Deterministic version of the race: the loser blocks on the row lock, then loses."""
    store = PostgresStore(pg_url)
    try:
        store.add(_memory("old"))
        with psycopg.connect(pg_url) as holder:
            holder.execute("select agent_memory_supersede('old', %s::jsonb)", (
                '{"id": "first", "repo": "acme/api", "subject": "s", "fact": "f", '
                '"citations": [{"path": "a.py", "line_start": 1, "line_end": 1, '
                '"snippet_hash": "0"}]}',))
            outcome: list[BaseException | None] = []

            def second() -> None:
                try:
                    store.supersede("old", _memory("second"))
                    outcome.append(None)
                except BaseException as exc:
                    outcome.append(exc)

            thread = threading.Thread(target=second)
            thread.start()
            time.sleep(0.3)
            assert thread.is_alive(), "the second supersede should wait for the row lock"
            holder.commit()
        thread.join(timeout=30)
        assert len(outcome) == 1
        assert isinstance(outcome[0], Conflict)
        assert "superseded" in str(outcome[0])
        assert store.get("old").superseded_by == "first"
        with pytest.raises(NotFound):
            store.get("second")
    finally:
        store.close()


def test_processes_storing_the_same_memory_at_once_store_it_once(pg_url: str) -> None:
    """The duplicate check and the insert of each store are one transaction behind an
    advisory lock on the repository: of three processes storing one memory at once, one
    creates it and the others refresh that one."""
    check_stored_once(pg_url, store_at_once(pg_url, workers=3))


def test_processes_proposing_the_same_pending_memory_at_once_queue_it_once(
        pg_url: str) -> None:
    """The same for a memory that waits for approval: checked against those waiting
    inside the transaction that queues it."""
    check_stored_once(pg_url, store_at_once(pg_url, workers=3, category="business_rule"),
                      status=Status.PENDING)


def test_a_guarded_add_waits_for_the_one_before_it_and_sees_its_memory(
        store: PostgresStore, pg_url: str) -> None:
    """Deterministic version of the race: the second add waits on the repository's
    lock, then finds the first one's memory and writes nothing."""
    first, second = _memory("first"), _memory("second")
    holder = psycopg.connect(pg_url)  # a guarded add in flight, as the store runs one
    try:
        holder.execute(ADD_LOCK_SQL, (ADD_LOCK, REPO))
        holder.execute("select agent_memory_add(%s, '[]'::jsonb)",
                       (Jsonb(memory_payload(first)),))
        with ThreadPoolExecutor(max_workers=1) as pool:
            asked: list[list[str]] = []

            def decide(found: Sequence[Memory]) -> list[TelemetryEvent] | None:
                asked.append([m.id for m in found])
                return None if found else []

            waiting = pool.submit(store.add_unless_duplicate, second, decide)
            time.sleep(0.5)
            assert not waiting.done()  # waiting on the first add's lock
            holder.commit()
            assert waiting.result(timeout=30) is False
        assert asked == [["first"]]
        with pytest.raises(NotFound):
            store.get("second")
        # Another repository's guarded add never waits for this one's.
        holder.execute(ADD_LOCK_SQL, (ADD_LOCK, REPO))
        elsewhere = _memory("elsewhere", repo="acme/other")
        assert store.add_unless_duplicate(elsewhere, lambda found: []) is True
        assert store.get("elsewhere").repo == "acme/other"
    finally:
        holder.close()


# --------------------------------------------------------------------------- the plugin


def test_without_a_server_postgres_tests_skip_and_say_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests import pg

    monkeypatch.setattr(pg, "_SERVER", None)
    monkeypatch.setattr(pg, "_UNAVAILABLE", "no Postgres server binaries (initdb, pg_ctl)")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="Postgres tests need a server: no Postgres"):
        pg.server()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true: Postgres tests must run"):
        pg.server()


def test_apply_answers_from_a_database_before_005_read_as_flags() -> None:
    # 002's agent_memory_apply answered the memory or null; 005's answers booleans.
    assert applied_flags([{"id": "m1"}, None, True, False]) == [True, False, True, False]


def test_a_second_import_of_the_same_file_waits_and_skips(
        store: PostgresStore, pg_url: str) -> None:
    """Two imports of one file at once (a re-run while the first still writes): the
    second waits for the first to commit, then skips what it wrote, as on SQLite; it
    used to find nothing there yet, insert too, and fail on the primary keys."""
    memories = [_memory() for _ in range(3)]
    payload = import_payload(memories, [], [])
    first = psycopg.connect(pg_url)  # an import in flight, exactly as the store runs one
    try:
        first.execute(IMPORT_SQL.encode(), [*(Jsonb(payload[k]) for k in (
            "p_memories", "p_events", "p_tombstones")), IMPORT_LOCK])
        with ThreadPoolExecutor(max_workers=1) as pool:
            second = pool.submit(store.load, memories, [], [])
            time.sleep(0.5)
            assert not second.done()  # waiting on the first import's lock
            first.commit()
            assert second.result(timeout=30) == (0, 0, 0)
    finally:
        first.close()
    assert {m.id for m in store.recent(REPO, limit=None)} >= {m.id for m in memories}


# --------------------------------------------------------------------------- by_path's order


@pytest.fixture
def icu_url(pg_server: Any) -> Iterator[str]:
    """A migrated database whose collation is ICU's en-US (as many hosted databases'
    en_US.UTF-8 is): text sorts 'a' before 'B' there, not by bytes."""
    name = f"vmem_icu_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server.url, autocommit=True) as conn:
        conn.execute(f'create database "{name}" template template0 locale_provider icu '
                     "icu_locale 'en-US' locale 'C'")
    pg_server.created.append(name)
    url = pg_server.url_for(name)
    migrate(url)
    yield url
    pg_server.drop_database(url)


def test_by_path_orders_equal_times_by_the_ids_bytes_whatever_the_collation(
        icu_url: str) -> None:
    """sql/013: the index and the function compare ids collate "C", as SQLite and Python
    do; before, this database answered ['_tie', 'a-tie', 'b-tie', 'B-tie', ...]."""
    assert _sql(icu_url, "select 'B' < 'a'") == [(False,)]  # the collation says 'a' first
    names = ["b-tie", "B-tie", "a-tie", "_tie", "é-tie", "Z-tie"]
    with PostgresStore(icu_url) as store:
        for name in names:
            store.add(_memory(name, minutes=5))
        store.add(_memory("newest", minutes=6))
        assert [m.id for m in store.by_path(REPO, "src/app.py")] == ["newest", *sorted(names)]
        assert [m.id for m in store.by_path(REPO, "src/app.py", limit=3)] == [
            "newest", *sorted(names)[:2]]
    with psycopg.connect(icu_url) as conn:  # still the index's own order: no sort
        plan = "\n".join(r[0] for r in conn.execute(
            "explain select * from agent_memory_citation c where c.repo = %s and "
            "c.path = 'src/app.py' order by c.memory_created_at desc, "
            "c.memory_id collate \"C\" limit 3", (REPO,)).fetchall())
    assert "agent_memory_citation_newest_idx" in plan, plan
    assert "Sort" not in plan, plan


def test_a_creation_time_edited_in_sql_moves_its_memory_by_path(
        pg_url: str, store: PostgresStore) -> None:
    """Each citation keeps a copy of its memory's creation time (the index's order):
    an edit of the memory's time by hand reaches the copies (sql/013), and a copy edited
    alone is set back to its memory's. Before, the memory was found by its old time."""
    for name, minutes in (("old", 1), ("mid", 2), ("new", 3)):
        store.add(_memory(name, minutes=minutes))
    _sql(pg_url, "update agent_memory set created_at = %s where id = 'new'",
         (T0 - timedelta(days=1),))
    assert [m.id for m in store.by_path(REPO, "src/app.py", limit=1)] == ["mid"]
    assert [m.id for m in store.by_path(REPO, "src/app.py")] == ["mid", "old", "new"]
    _sql(pg_url, "update agent_memory_citation set memory_created_at = %s "
                 "where memory_id = 'old'", (T0 + timedelta(days=1),))
    assert [m.id for m in store.by_path(REPO, "src/app.py", limit=1)] == ["mid"]
    # A time in the future, by hand too, is the database's now.
    _sql(pg_url, "update agent_memory set created_at = '2099-01-01' where id = 'old'")
    (stored,) = _sql(pg_url, "select created_at <= now() from agent_memory where id = 'old'")
    assert stored == (True,)
    assert [m.id for m in store.by_path(REPO, "src/app.py")] == ["old", "mid", "new"]
    assert _sql(pg_url, "select count(*) from agent_memory_citation c join agent_memory m "
                        "on m.id = c.memory_id where c.memory_created_at = m.created_at"
                ) == [(3,)]


def _migrated_to(url: str, tmp_path: Path, version: int, *memories: dict[str, Any]) -> Path:
    """The database at ``url`` migrated up to ``version`` (the directory of those files),
    holding ``memories`` (each citing a.py 1-2), inserted as that version does."""
    older = tmp_path / "older"
    older.mkdir()
    for m in load_migrations():
        if int(m.version) <= version:
            (older / f"{m.version}_{m.name}.sql").write_text(m.sql)
    migrate(url, older)
    with psycopg.connect(url, autocommit=True) as conn:
        for fields in memories:
            conn.execute("select agent_memory_insert(%s)", (Jsonb({
                "repo": REPO, "subject": "s", "fact": "f", **fields,
                "citations": [{"path": "a.py", "line_start": 1, "line_end": 2,
                               "snippet_hash": "00"}]}),))
    return older


def test_a_refresh_time_later_than_now_is_the_databases_now(
        pg_url: str, pg_empty_url: str, store: PostgresStore, tmp_path: Path) -> None:
    """sql/014: a refresh time in the future, edited in SQL or already stored when 014
    is applied, is the database's now(), as a creation time is (013). Before, the
    memory led ``recent`` until the clock passed it."""
    for name, minutes in (("edited", 1), ("plain", 2)):
        store.add(_memory(name, minutes=minutes))
    _sql(pg_url, "update agent_memory set refreshed_at = '2099-01-01' where id = 'edited'")
    assert _sql(pg_url, "select refreshed_at <= now() from agent_memory "
                        "where id = 'edited'") == [(True,)]
    _migrated_to(pg_empty_url, tmp_path, 13, {"id": "ahead",
                                               "refreshed_at": "2099-01-01T00:00:00+00:00"})
    assert migrate(pg_empty_url)[:1] == ["014"]  # and any later migration
    assert _sql(pg_empty_url, "select id from agent_memory where refreshed_at > now()") == []


def test_migration_013_mends_stored_times_after_a_012_it_does_not_know(
        pg_empty_url: str, tmp_path: Path) -> None:
    """A database migrated to 011 with a creation time in the future and a stale copy
    of one: 013 stores the future time as now and mends the copy. Another 012 applied
    in between (another change's) does not stop it."""
    older = _migrated_to(pg_empty_url, tmp_path, 11,
                         {"id": "ahead", "created_at": "2099-01-01T00:00:00+00:00"},
                         {"id": "edited", "created_at": "2026-01-01T00:00:00+00:00"})
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        conn.execute("update agent_memory set created_at = '2020-01-01' where id = 'edited'")
    assert _sql(pg_empty_url, "select count(*) from agent_memory_citation c join agent_memory "
                              "m on m.id = c.memory_id where c.memory_created_at = "
                              "m.created_at") == [(1,)]  # the edit left its copy stale
    full = tmp_path / "full"
    shutil.copytree(older, full)
    for m in load_migrations():
        (full / f"{m.version}_{m.name}.sql").write_text(m.sql)
    if not any(m.version == "012" for m in load_migrations()):
        (full / "012_another_change.sql").write_text("create table vm_other_012 (x int);\n")
    assert migrate(pg_empty_url, full)[:2] == ["012", "013"]
    assert _sql(pg_empty_url, "select id from agent_memory where created_at > now()") == []
    assert _sql(pg_empty_url, "select count(*) from agent_memory_citation c join agent_memory "
                              "m on m.id = c.memory_id where c.memory_created_at = "
                              "m.created_at") == [(2,)]
    with PostgresStore(pg_empty_url) as store:
        assert [m.id for m in store.by_path(REPO, "a.py")] == ["ahead", "edited"]
