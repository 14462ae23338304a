"""Row-level security, exercised for real: switch role and set the JWT claims exactly as
PostgREST does, then try to read, count and write another tenant's memories and telemetry
by every path there is: tables, views and functions, and Supabase's REST API.

Tenant A may see ``acme/api``; tenant B owns ``other/app``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.fake_postgrest import ANON_KEY, SUPABASE_URL, FakePostgrest, user_token
from verified_memory.errors import NotFound, StoreError
from verified_memory.models import EventKind, Memory, Status, TelemetryEvent, Transition
from verified_memory.store.postgres import PostgresStore, event_payload, memory_payload
from verified_memory.store.supabase import SupabaseStore
from verified_memory.store.views import VIEWS as DASHBOARD_VIEWS

pytestmark = pytest.mark.postgres

MINE, THEIRS = "acme/api", "other/app"
TENANT_A = {"role": "authenticated", "sub": "user-a", "app_metadata": {"repos": [MINE]}}
TABLES = ("agent_memory", "agent_memory_citation", "agent_memory_telemetry")
# Every dashboard view too (store/views.py): a tenant's dashboard shows its repositories.
VIEWS = ("agent_memory_full", "agent_memory_repos", *DASHBOARD_VIEWS)


def _memory(memory_id: str, repo: str, subject: str = "retry policy") -> Memory:
    from tests.test_postgres_store import _memory as build

    return build(memory_id, repo=repo, subject=subject)


def _event(kind: EventKind, memory_id: str, repo: str) -> TelemetryEvent:
    return TelemetryEvent(kind=kind, repo=repo, memory_id=memory_id, actor="t")


@pytest.fixture(scope="module")
def url(pg_server: Any) -> Iterator[str]:
    """Two tenants' memories and telemetry, written by the owner, shared by the module:
    every tenant's write below is rolled back or refused (the one that succeeds over REST
    cleans up after itself), and ``_owner_counts`` checks that nothing else changed."""
    pg_url = pg_server.create_database()
    store = PostgresStore(pg_url)
    try:
        for repo, prefix in ((MINE, "a"), (THEIRS, "b")):
            for n in range(3):
                memory_id = f"{prefix}{n}"
                store.add(_memory(memory_id, repo),
                          [_event(EventKind.CREATED, memory_id, repo)])
                store.log([_event(EventKind.RETRIEVED, memory_id, repo),
                           _event(EventKind.VERIFIED_VALID, memory_id, repo),
                           _event(EventKind.APPLIED, memory_id, repo)])
            broke = {"outcomes": [{"outcome": "missing", "path": "src/app.py"}]}
            store.log([TelemetryEvent(kind=EventKind.VERIFIED_INVALID, repo=repo,
                                      memory_id=f"{prefix}0", actor="t", detail=broke)])
    finally:
        store.close()
    yield pg_url
    pg_server.drop_database(pg_url)


@pytest.fixture
def conn(url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(url) as connection:
        yield connection


@contextmanager
def acting_as(conn: psycopg.Connection[Any], claims: dict[str, Any] | None,
              role: str | None = None) -> Iterator[psycopg.Connection[Any]]:
    """One request as PostgREST runs it: a transaction with the JWT's role and claims.
    Rolled back afterwards, so a test can try many writes on the same data."""
    role = role or (claims or {}).get("role", "anon")
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(f"set local role {role}")
            conn.execute("select set_config('request.jwt.claims', %s, true)",
                         (json.dumps(claims) if claims is not None else "",))
            yield conn
    except psycopg.Error:
        raise


def _one(conn: psycopg.Connection[Any], query: str, *params: Any) -> Any:
    row = conn.execute(query.encode(), params or None).fetchone()
    return row[0] if row else None


def _owner_counts(url: str) -> tuple[Any, ...]:
    with psycopg.connect(url) as conn:
        counts = [_one(conn, f"select count(*) from {t} where repo = %s", THEIRS) for t in TABLES]
        rows = _one(conn, "select string_agg(id || status || verification_count, ',' "
                          "order by id) from agent_memory where repo = %s", THEIRS)
        return (*counts, rows)


# --------------------------------------------------------------------------- the setup


def test_roles_claims_function_and_policies_are_in_place(conn: psycopg.Connection[Any]) -> None:
    roles = {r[0] for r in conn.execute(
        "select rolname from pg_roles where rolname in ('anon', 'authenticated', 'service_role')")}
    assert roles == {"anon", "authenticated", "service_role"}
    assert _one(conn, "select to_regprocedure('auth.jwt()') is not null")
    for table in TABLES:
        assert _one(conn, "select relrowsecurity from pg_class where oid = %s::regclass", table)


def test_every_function_is_security_invoker_and_every_view_too(
    conn: psycopg.Connection[Any],
) -> None:
    definers = conn.execute(
        "select proname from pg_proc where proname like 'agent_memory%' and prosecdef"
    ).fetchall()
    assert definers == []
    assert _one(conn, "select count(*) from pg_proc where proname like 'agent_memory%'") > 10
    for view in VIEWS:
        options = _one(conn, "select reloptions from pg_class where oid = %s::regclass", view)
        assert "security_invoker=true" in (options or []), view


# --------------------------------------------------------------------------- anon


@pytest.mark.parametrize("relation", TABLES + VIEWS)
def test_anon_cannot_read_anything(conn: psycopg.Connection[Any], relation: str) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege), acting_as(conn, {"role": "anon"}):
        conn.execute(f"select count(*) from {relation}")


@pytest.mark.parametrize("call", [
    "select agent_memory_stats('acme/api')",
    "select * from agent_memory_search('acme/api', array['retry'])",
    "select agent_memory_log('[]'::jsonb)",
    "select agent_memory_json('a0')",
    "select * from agent_memory_repeat_candidates('{\"repo\": \"acme/api\"}')",
    "select agent_memory_add_unless_changed('{}', '[]', '{}')",
])
def test_anon_cannot_call_the_functions(conn: psycopg.Connection[Any], call: str) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege), acting_as(conn, {"role": "anon"}):
        conn.execute(call)


# --------------------------------------------------------------------------- reading


@pytest.mark.parametrize("relation", TABLES + VIEWS)
def test_a_tenant_reads_and_counts_only_its_repositories(
    conn: psycopg.Connection[Any], relation: str
) -> None:
    with acting_as(conn, TENANT_A):
        repos = {r[0] for r in conn.execute(f"select distinct repo from {relation}")}
        theirs = _one(conn, f"select count(*) from {relation} where repo = %s", THEIRS)
        total = _one(conn, f"select count(*) from {relation}")
    assert repos == {MINE}
    assert theirs == 0
    assert total > 0


def test_a_tenant_reads_nothing_of_others_through_the_functions(
    conn: psycopg.Connection[Any],
) -> None:
    with acting_as(conn, TENANT_A):
        assert _one(conn, "select count(*) from agent_memory_search(%s, array['retry'])",
                    THEIRS) == 0
        assert _one(conn, "select count(*) from agent_memory_search(%s, array['retry'])",
                    MINE) == 3
        assert _one(conn, "select count(*) from agent_memory_by_path(%s, 'src/app.py')",
                    THEIRS) == 0
        assert _one(conn, "select agent_memory_json('b0')") is None
        stats = _one(conn, "select agent_memory_stats(%s)", THEIRS)
        assert stats["by_status"] == {"active": 0, "pending": 0, "invalid": 0, "superseded": 0,
                                      "expired": 0}
        assert stats["events"] == {}
        assert stats["citations"] == 0
        assert _one(conn, "select agent_memory_stats(%s)", MINE)["by_status"]["active"] == 3


@pytest.mark.parametrize("claims", [
    {"role": "authenticated"},
    {"role": "authenticated", "app_metadata": {}},
    {"role": "authenticated", "app_metadata": {"repos": "acme/api"}},  # not a list
    {"role": "authenticated", "user_metadata": {"repos": [MINE, THEIRS]}},  # user-editable
    None,  # no claims at all
])
def test_without_app_metadata_repos_a_user_sees_nothing(
    conn: psycopg.Connection[Any], claims: dict[str, Any] | None
) -> None:
    with acting_as(conn, claims, role="authenticated"):
        for relation in TABLES + VIEWS:
            assert _one(conn, f"select count(*) from {relation}") == 0, relation


def test_owner_wildcard_grants_every_repository_of_that_owner(
    conn: psycopg.Connection[Any],
) -> None:
    claims = {"role": "authenticated", "app_metadata": {"repos": ["other/*"]}}
    with acting_as(conn, claims):
        assert {r[0] for r in conn.execute("select distinct repo from agent_memory")} == {THEIRS}


def test_service_role_sees_every_tenant(conn: psycopg.Connection[Any]) -> None:
    with acting_as(conn, {"role": "service_role"}):
        assert _one(conn, "select count(distinct repo) from agent_memory_full") == 2
        assert _one(conn, "select count(*) from agent_memory_telemetry") == 26


# --------------------------------------------------------------------------- writing


def _new(memory_id: str, repo: str) -> Jsonb:
    return Jsonb(memory_payload(_memory(memory_id, repo)))


WRITES_INTO_THEIRS = {
    "insert a memory": ("insert into agent_memory (id, repo, subject, fact) "
                        "values ('x', 'other/app', 's', 'f')", ()),
    "insert a citation": ("insert into agent_memory_citation (memory_id, position, repo, path, "
                          "line_start, line_end, snippet_hash) "
                          "values ('b0', 9, 'other/app', 'a.py', 1, 1, 'x')", ()),
    "insert an event": ("insert into agent_memory_telemetry (kind, repo) "
                        "values ('retrieved', 'other/app')", ()),
    "move my memory to their repository": (
        "update agent_memory set repo = 'other/app' where id = 'a0'", ()),
}


@pytest.mark.parametrize("name", sorted(WRITES_INTO_THEIRS))
def test_a_tenant_cannot_write_into_another_repository(
    url: str, conn: psycopg.Connection[Any], name: str
) -> None:
    query, params = WRITES_INTO_THEIRS[name]
    before = _owner_counts(url)
    with pytest.raises((psycopg.errors.InsufficientPrivilege,
                        psycopg.errors.ForeignKeyViolation)), acting_as(conn, TENANT_A):
        conn.execute(query.encode(), params or None)
    assert _owner_counts(url) == before


def test_a_tenant_cannot_write_through_the_functions(url: str,
                                                     conn: psycopg.Connection[Any]) -> None:
    before = _owner_counts(url)
    attempts: list[tuple[str, tuple[Any, ...], type[Exception]]] = [
        ("select agent_memory_add(%s)", (_new("x1", THEIRS),),
         psycopg.errors.InsufficientPrivilege),
        ("select agent_memory_log(%s)",
         (Jsonb([event_payload(_event(EventKind.APPLIED, "b0", THEIRS))]),),
         psycopg.errors.InsufficientPrivilege),
        # Their memory is invisible: superseding or verifying it finds nothing.
        ("select agent_memory_supersede('b0', %s)", (_new("x2", MINE),), psycopg.Error),
        ("select agent_memory_apply(%s)",
         (Jsonb([{"memory_id": "b0", "status": "invalid", "add_verifications": 5}]),),
         psycopg.Error),
    ]
    for query, params, error in attempts:
        with pytest.raises(error) as caught, acting_as(conn, TENANT_A):
            conn.execute(query.encode(), params)
        if error is psycopg.Error:
            assert caught.value.sqlstate == "VM404", query
    assert _owner_counts(url) == before


def test_updates_and_deletes_of_others_rows_touch_nothing(
    url: str, conn: psycopg.Connection[Any]
) -> None:
    before = _owner_counts(url)
    with acting_as(conn, TENANT_A):
        assert conn.execute("update agent_memory set status = 'invalid' "
                            "where repo = 'other/app'").rowcount == 0
        assert conn.execute("delete from agent_memory_citation "
                            "where repo = 'other/app'").rowcount == 0
        # A tenant may delete (forget) memories, its own only: every one leaves a tombstone.
        assert conn.execute("delete from agent_memory").rowcount == 3
        assert _one(conn, "select count(*) from agent_memory_tombstone") == 3
    for statement in ("update agent_memory_telemetry set actor = 'me'",
                      "delete from agent_memory_telemetry",
                      "delete from agent_memory_tombstone",
                      "insert into agent_memory_telemetry_archive (id, kind, repo, at) "
                      "values (999, 'created', 'acme/api', now())",
                      "select agent_memory_archive_events(now())"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege), acting_as(conn, TENANT_A):
            conn.execute(statement)
    assert _owner_counts(url) == before


def test_a_tenant_works_normally_in_its_own_repositories(conn: psycopg.Connection[Any]) -> None:
    with acting_as(conn, TENANT_A):
        conn.execute("select agent_memory_add(%s)", (_new("a9", MINE),))
        conn.execute("select agent_memory_supersede('a0', %s)", (_new("a10", MINE),))
        [applied] = _one(conn, "select agent_memory_apply(%s)",
                         Jsonb([{"memory_id": "a1", "add_verifications": 1}]))
        assert applied is True
        assert _one(conn, "select verification_count from agent_memory where id = 'a1'") == 1
        assert _one(conn, "select status from agent_memory where id = 'a0'") == "superseded"
        assert _one(conn, "select count(*) from agent_memory where repo = %s", MINE) == 5


# --------------------------------------------------------------------------- over REST


@pytest.fixture
def fake(url: str) -> Iterator[FakePostgrest]:
    server = FakePostgrest(url)
    yield server
    server.close()


def _rest_store(fake: FakePostgrest, key: str, token: str | None = None) -> SupabaseStore:
    return SupabaseStore.connect(SUPABASE_URL, key, access_token=token, retry=False,
                                 http_client=httpx.Client(transport=fake.transport()))


def test_over_rest_a_users_jwt_limits_the_store_to_its_repositories(fake: FakePostgrest) -> None:
    store = _rest_store(fake, ANON_KEY, user_token(MINE))
    try:
        assert store.repos() == [MINE]
        assert len(store.recent(MINE)) == 3
        assert store.recent(THEIRS, status=None) == []
        assert store.search(THEIRS, "retry") == []
        assert store.by_path(THEIRS, "src/app.py") == []
        assert store.events(repo=THEIRS, limit=None) == []
        assert {e.repo for e in store.events(limit=None)} == {MINE}
        assert store.stats(THEIRS).total == 0
        with pytest.raises(NotFound):
            store.get("b0")
        with pytest.raises(NotFound):
            store.supersede("b0", _memory("x", MINE))
        with pytest.raises(NotFound):
            store.apply([Transition("b0", status=Status.INVALID)])
        with pytest.raises(StoreError, match="permission denied"):
            store.add(_memory("x", THEIRS))
        with pytest.raises(StoreError, match="permission denied"):
            store.log([_event(EventKind.APPLIED, "b0", THEIRS)])
        with pytest.raises(StoreError, match="permission denied"):
            store.add_unless_duplicate(_memory("x", THEIRS), lambda found: [])
        store.add(_memory("a9", MINE))
        assert store.get("a9").repo == MINE
        seen: list[str] = []

        def decide(found: Sequence[Memory]) -> list[TelemetryEvent]:
            seen.extend(m.id for m in found)  # both tenants cite those lines: its own only
            return []

        assert store.add_unless_duplicate(_memory("a10", MINE), decide) is True
        assert sorted(seen) == ["a0", "a1", "a2", "a9"]
    finally:
        store.close()
        with psycopg.connect(fake.url) as owner:
            owner.execute("delete from agent_memory where id in ('a9', 'a10')")
    assert fake.requests[0].headers["authorization"] == f"Bearer {user_token(MINE)}"


def test_over_rest_the_anon_key_gets_nothing(fake: FakePostgrest) -> None:
    store = _rest_store(fake, ANON_KEY)
    try:
        with pytest.raises(StoreError, match="permission denied"):
            store.recent(MINE)
        with pytest.raises(StoreError, match="permission denied"):
            store.add(_memory("x", MINE))
    finally:
        store.close()


# --------------------------------------------------------------------------- forgetting


def test_a_tenant_forgets_only_in_its_own_repositories(
    url: str, conn: psycopg.Connection[Any]
) -> None:
    before = _owner_counts(url)
    forget = "select * from agent_memory_forget(%s, %s, 'user-a', 'by mistake')"
    with acting_as(conn, TENANT_A):
        (stone,) = conn.execute(forget.encode(), (["a0"], None)).fetchall()
        assert stone[:3] == ("a0", MINE, "active")
        assert _one(conn, "select count(*) from agent_memory where id = 'a0'") == 0
        assert _one(conn, "select count(*) from agent_memory_citation where memory_id = 'a0'") == 0
        assert _one(conn, "select actor from agent_memory_telemetry where kind = 'forgotten'"
                          " and memory_id = 'a0'") == "user-a"
    for ids, repo in ((["b0"], None), (["a1", "b0"], None), (["b0"], THEIRS)):
        with pytest.raises(psycopg.Error) as caught, acting_as(conn, TENANT_A):
            conn.execute(forget.encode(), (ids, repo))
        assert caught.value.sqlstate == "VM404"
    with acting_as(conn, TENANT_A):  # a wipe of their repository finds nothing to wipe
        assert conn.execute(forget.encode(), (None, THEIRS)).fetchall() == []
        assert _one(conn, "select count(*) from agent_memory where repo = %s", MINE) == 3
    assert _owner_counts(url) == before


def test_a_tenant_sees_only_its_own_tombstones_and_archive(
    conn: psycopg.Connection[Any],
) -> None:
    with conn.transaction(force_rollback=True):  # as the owner, then as tenant A
        conn.execute("select agent_memory_forget(array['a1', 'b1'], null, 'owner', 'r')")
        conn.execute("select agent_memory_archive_events(now() + interval '1 day')")
        conn.execute("set local role authenticated")
        conn.execute("select set_config('request.jwt.claims', %s, true)",
                     (json.dumps(TENANT_A),))
        seen = {r[0]: r[1] for r in conn.execute("select id, repo from agent_memory_tombstone")}
        assert "a1" in seen
        assert "b1" not in seen
        assert set(seen.values()) == {MINE}
        assert {r[0] for r in conn.execute(
            "select distinct repo from agent_memory_telemetry_archive")} == {MINE}
        assert _one(conn, "select count(*) from agent_memory_telemetry") == 0
        assert _one(conn, "select agent_memory_stats(%s)", MINE)["forgotten"] == len(seen)
        assert _one(conn, "select agent_memory_stats(%s)", THEIRS)["forgotten"] == 0
        info = _one(conn, "select agent_memory_info()")
        assert (info["memories"], info["forgotten"], info["schema_version"]) == (
            _one(conn, "select count(*) from agent_memory where repo = %s", MINE), len(seen),
            None)
        assert _one(conn, "select id from agent_memory_match_ids('b', 10)") is None


def test_over_rest_a_user_forgets_only_its_repositories(pg_url: str) -> None:
    owner = PostgresStore(pg_url)
    try:
        owner.add(_memory("a0", MINE))
        owner.add(_memory("b0", THEIRS))
    finally:
        owner.close()
    fake = FakePostgrest(pg_url)
    store = _rest_store(fake, ANON_KEY, user_token(MINE))
    try:
        with pytest.raises(NotFound):
            store.forget(["b0"], by="user-a", reason="not mine")
        assert store.forget(repo=THEIRS, by="user-a", reason="not mine") == []
        (stone,) = store.forget(["a0"], by="user-a", reason="a joke footer")
        assert (stone.id, stone.repo, stone.forgotten_by) == ("a0", MINE, "user-a")
        assert store.tombstones(repo=THEIRS) == []
        with pytest.raises(StoreError, match="permission denied"):
            store.archive_events(datetime.now(UTC))
    finally:
        store.close()
        fake.close()
    check = PostgresStore(pg_url)
    try:
        assert check.get("b0").repo == THEIRS
        assert [t.id for t in check.tombstones(limit=None)] == ["a0"]
    finally:
        check.close()
