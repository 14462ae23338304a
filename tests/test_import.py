"""``vmem db import`` as the issue asked: every line checked as strictly as ``vmem store``
checks a memory, nothing written unless the whole file is (a failure while writing
included: one transaction on SQLite and Postgres, one RPC on Supabase), and idempotent
for telemetry too (events keyed, so a re-run, even of an old keyless file, adds nothing).
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.test_transfer import REPOS, _events, _export, _fill, _memories, _snapshot
from verified_memory.audit import named_memory
from verified_memory.errors import NotFound, VerifiedMemoryError
from verified_memory.models import EventKind
from verified_memory.store.base import MemoryStore
from verified_memory.store.memory import InMemoryStore
from verified_memory.store.sqlite import SQLiteStore
from verified_memory.store.transfer import FORMAT, import_jsonl, read_export

HEADER = json.dumps({"type": "header", "format": FORMAT, "version": 2})


@pytest.fixture
def source(tmp_path: Path) -> Iterator[SQLiteStore]:
    store = SQLiteStore(tmp_path / "source.db")
    _fill(store)
    yield store
    store.close()


def _lines(store: MemoryStore) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _export(store).splitlines()]


def _text(lines: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def _memory_line(lines: list[dict[str, Any]]) -> int:
    return next(i for i, line in enumerate(lines) if line["type"] == "memory")


# --------------------------------------------------------------------------- strictness


def _citation(change: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda m: {**m, "citations": [{**m["citations"][0], **change}]}


@pytest.mark.parametrize(("change", "words"), [
    (_citation({"path": "../secrets.txt"}), "citations[0].path must stay inside the repository"),
    (_citation({"path": "/etc/passwd"}), "citations[0].path must be relative"),
    (_citation({"path": "a/./b.py"}), "citations[0].path must be a plain relative path"),
    (_citation({"line_start": 0}), "citations[0].line_start must be a line number from 1"),
    (_citation({"line_end": 1, "line_start": 3}), "citations[0].line_end (1) is before"),
    (_citation({"snippet_hash": "zz"}), "snippet_hash must be 16 hex digits"),
    (_citation({"line_hashes": [1, 2]}), "line_hashes must be a list of 16-hex-digit"),
    (_citation({"anchor": {"kind": "f", "name": "n", "text_hash": "t", "offset": -1}}),
     "anchor.offset must be a whole number from 0"),
    (_citation({"extra": 1}), "unknown field(s) in a citation: extra"),
    (lambda m: {**m, "repo": "not a repo"}, "repo must be 'owner/name'"),
    (lambda m: {**m, "repo": "../x"}, "repo must be 'owner/name'"),
    (lambda m: {**m, "subject": "s" * 201}, "subject is 201 characters long; the limit is 200"),
    (lambda m: {**m, "subject": ""}, "subject must be a non-empty string"),
    (lambda m: {**m, "fact": 42}, "fact must be a non-empty string"),
    (lambda m: {**m, "verification_count": -1}, "verification_count must be a whole number"),
    (lambda m: {**m, "applied_count": True}, "applied_count must be a whole number"),
    (lambda m: {**m, "status": "deleted"}, "status must be one of active, pending"),
    (lambda m: {**m, "tags": ["ok", 7]}, "tags must be a list of at most 20 non-empty strings"),
    (lambda m: {**m, "tags": "api"}, "tags must be a list"),
    (lambda m: {**m, "created_at": "yesterday"}, "created_at must be an ISO 8601 time"),
    (lambda m: {**m, "citations": []}, "citations must be a list of 1 to 50"),
    (lambda m: {**m, "surprise": True}, "unknown field(s) in a memory: surprise"),
    (lambda m: {**m, "id": "x" * 201}, "id is 201 characters long"),
])
def test_every_memory_line_is_checked_as_strictly_as_store(
        source: SQLiteStore, change: Callable[[dict[str, Any]], dict[str, Any]],
        words: str) -> None:
    lines = _lines(source)
    at = _memory_line(lines) + 3  # not the first memory: nothing before it may land
    lines[at] = change(lines[at])
    target = InMemoryStore()
    with pytest.raises(VerifiedMemoryError, match=r"line \d+: memory: ") as caught:
        import_jsonl(target, io.StringIO(_text(lines)))
    assert words in str(caught.value)
    assert f"line {at + 1}:" in str(caught.value)
    assert target.info().memories == 0
    assert target.events(limit=None) == []


@pytest.mark.parametrize(("change", "words"), [
    (lambda e: {**e, "kind": "deleted"}, "kind must be an event kind"),
    (lambda e: {**e, "detail": [1, 2]}, "detail must be an object"),
    (lambda e: {**e, "repo": "x"}, "repo must be 'owner/name'"),
    (lambda e: {**e, "at": 5}, "at must be an ISO 8601 time"),
    (lambda e: {**e, "id": "seven"}, "id must be a whole number"),
    (lambda e: {**e, "actor": "a" * 201}, "actor is 201 characters long"),
])
def test_every_event_line_is_checked(source: SQLiteStore, change: Any, words: str) -> None:
    lines = _lines(source)
    at = max(i for i, line in enumerate(lines) if line["type"] == "event")
    lines[at] = change(lines[at])
    with pytest.raises(VerifiedMemoryError, match=f"line {at + 1}: event: ") as caught:
        import_jsonl(InMemoryStore(), io.StringIO(_text(lines)))
    assert words in str(caught.value)


def test_json_nested_deeper_than_a_memory_is_one_clear_line(source: SQLiteStore) -> None:
    lines = _lines(source)
    deep: Any = "x"
    for _ in range(70):  # parses fine; deeper than anything a store writes back safely
        deep = {"d": deep}
    at = max(i for i, line in enumerate(lines) if line["type"] == "event")
    lines[at] = {**lines[at], "detail": deep}
    with pytest.raises(VerifiedMemoryError,
                       match=f"line {at + 1} is JSON nested more than 64 levels deep"):
        read_export(io.StringIO(_text(lines)))


# --------------------------------------------------------------------------- all or nothing


def _boom_sqlite(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TRIGGER boom BEFORE INSERT ON agent_memory WHEN new.subject = "
                     "'boom' BEGIN SELECT RAISE(ABORT, 'boom'); END")


def _boom_postgres(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("create function boom() returns trigger language plpgsql as $$ begin "
                     "if new.subject = 'boom' then raise exception 'boom'; end if; "
                     "return new; end $$")
        conn.execute("create trigger boom before insert on agent_memory for each row "
                     "execute function boom()")


def _with_boom_last(source: SQLiteStore) -> str:
    """An export whose last memory is valid but fails in the database while written."""
    lines = _lines(source)
    last = max(i for i, line in enumerate(lines) if line["type"] == "memory")
    lines[last] = {**lines[last], "subject": "boom"}
    return _text(lines)


def _assert_empty(store: MemoryStore) -> None:
    info = store.info()
    assert (info.memories, info.events, info.forgotten) == (0, 0, 0)


def test_a_failure_while_writing_leaves_sqlite_as_it_was(source: SQLiteStore,
                                                        tmp_path: Path) -> None:
    target = SQLiteStore(tmp_path / "target.db")
    try:
        _boom_sqlite(tmp_path / "target.db")
        with pytest.raises(VerifiedMemoryError, match="boom"):
            import_jsonl(target, io.StringIO(_with_boom_last(source)))
        _assert_empty(target)
    finally:
        target.close()


@pytest.mark.postgres
@pytest.mark.parametrize("kind", ["postgres", "supabase"])
def test_a_failure_while_writing_leaves_postgres_as_it_was(source: SQLiteStore, pg_url: str,
                                                          kind: str) -> None:
    import httpx

    from tests.fake_postgrest import SERVICE_KEY, SUPABASE_URL, FakePostgrest
    from verified_memory.store.postgres import PostgresStore
    from verified_memory.store.supabase import SupabaseStore

    _boom_postgres(pg_url)
    fake = FakePostgrest(pg_url)
    target: MemoryStore = (PostgresStore(pg_url) if kind == "postgres" else
                           SupabaseStore.connect(SUPABASE_URL, SERVICE_KEY, retry=False,
                                                 http_client=httpx.Client(
                                                     transport=fake.transport())))
    try:
        with pytest.raises(VerifiedMemoryError, match="boom"):
            import_jsonl(target, io.StringIO(_with_boom_last(source)))
        if kind == "supabase":  # the whole import was one request
            assert [r.path for r in fake.requests] == ["/rest/v1/rpc/agent_memory_import"]
        _assert_empty(target)
    finally:
        target.close()
        fake.close()


# --------------------------------------------------------------------------- idempotent


@pytest.mark.postgres
def test_a_rerun_adds_nothing_across_stores(source: SQLiteStore, tmp_path: Path) -> None:
    from tests.pg import postgres_store, supabase_store

    exported = _export(source)
    for target in (postgres_store(tmp_path), supabase_store(tmp_path),
                   SQLiteStore(tmp_path / "again.db")):
        try:
            first = import_jsonl(target, io.StringIO(exported))
            assert (first.memories, first.events) == (len(_memories()), len(_events()))
            before = [target.stats(r) for r in REPOS]
            again = import_jsonl(target, io.StringIO(exported))
            assert (again.memories, again.events, again.tombstones) == (0, 0, 0)
            assert (again.skipped, again.skipped_events) == (len(_memories()), len(_events()))
            assert [target.stats(r) for r in REPOS] == before
            # and an export of the target re-imported adds nothing either
            assert import_jsonl(target, io.StringIO(_export(target))).events == 0
        finally:
            target.close()


def test_an_old_file_without_keys_is_idempotent_too(source: SQLiteStore) -> None:
    lines = _lines(source)
    lines[0]["version"] = 1
    for line in lines:
        line.pop("key", None)
    old = _text(lines)
    target = InMemoryStore()
    assert import_jsonl(target, io.StringIO(old)).events == len(_events())
    again = import_jsonl(target, io.StringIO(old))
    assert (again.events, again.skipped_events) == (0, len(_events()))
    assert _snapshot(target) == _snapshot(source)
    # The same events exported from the new store (with the keys they were given) too.
    assert import_jsonl(target, io.StringIO(_export(target))).events == 0


def test_events_a_store_wrote_before_keys_are_not_imported_twice(tmp_path: Path) -> None:
    """A store migrated from before event keys holds keyless events (the issue's store
    that an old import had already doubled): its own export, imported back, adds none."""
    path = tmp_path / "old.db"
    store = SQLiteStore(path)
    _fill(store)
    store.close()
    with sqlite3.connect(path) as conn:  # what migration 5 found: events without keys
        conn.execute("DROP TRIGGER agent_memory_telemetry_no_update")
        conn.execute("UPDATE agent_memory_telemetry SET key = NULL")
        conn.execute("INSERT INTO agent_memory_telemetry (kind, repo, memory_id, actor, at, "
                     "detail) SELECT kind, repo, memory_id, actor, at, detail FROM "
                     "agent_memory_telemetry WHERE id <= 3")  # an old import's duplicates
    store = SQLiteStore(path)
    try:
        held = store.info().events
        exported = _export(store)
        assert all(json.loads(line)["key"].startswith("legacy-")
                   for line in exported.splitlines() if '"type":"event"' in line)
        counts = import_jsonl(store, io.StringIO(exported))
        assert (counts.events, counts.skipped_events) == (0, held)
        assert store.info().events == held
        assert _export(store).splitlines()[1:] == exported.splitlines()[1:]
    finally:
        store.close()


def test_tombstones_and_archived_events_travel(source: SQLiteStore) -> None:
    forgotten = _memories()[2].id
    before = _export(source)
    source.forget([forgotten], by="admin", reason="a secret")
    moved = source.archive_events(_events()[10].at)
    assert moved > 0
    target = InMemoryStore()
    counts = import_jsonl(target, io.StringIO(_export(source)))
    assert counts.tombstones == 1
    assert counts.events == len(_events()) + 1  # the forgotten event too
    assert [t.reason for t in target.tombstones(limit=None)] == ["a secret"]
    for repo in REPOS:
        assert target.stats(repo) == source.stats(repo)
    forgetting = [(e.memory_id, e.actor, dict(e.detail)) for e in
                  target.events(kinds=[EventKind.FORGOTTEN], limit=None)]
    assert (forgotten, "admin", {"reason": "a secret", "status": "invalid"}) in forgetting
    assert len(forgetting) == len(source.events(kinds=[EventKind.FORGOTTEN], limit=None))
    # A file that still has the memory (exported before it was forgotten) cannot bring
    # it back where its tombstone is.
    assert forgotten in before
    assert import_jsonl(target, io.StringIO(before)).memories == 0
    with pytest.raises(NotFound):
        target.get(forgotten)


def test_a_tombstone_forgets_the_memory_a_target_still_holds(source: SQLiteStore) -> None:
    """Exported before it was forgotten, the memory is in the target; the tombstone,
    exported after, forgets it there too (its text must not live on anywhere)."""
    forgotten = _memories()[2].id
    target = InMemoryStore()
    import_jsonl(target, io.StringIO(_export(source)))
    assert target.get(forgotten).id == forgotten
    source.forget([forgotten], by="admin", reason="a secret")
    counts = import_jsonl(target, io.StringIO(_export(source)))
    assert counts.erased == 1
    with pytest.raises(NotFound, match="was forgotten"):
        named_memory(target, forgotten)
    (stone,) = target.tombstones(ids=[forgotten], limit=None)
    assert (stone.forgotten_by, stone.reason) == (
        "admin", "a secret (forgotten in the store exported; imported)")
    assert import_jsonl(target, io.StringIO(_export(source))).erased == 0  # a re-run


def test_a_repeated_id_or_key_is_refused_by_line_before_a_tombstone_forgets(
        source: SQLiteStore) -> None:
    """A hand-made file that repeats a memory id or an event key is malformed: refused
    naming both lines while the file is read, before its tombstones forget anything."""
    forgotten = _memories()[2].id
    target = InMemoryStore()
    import_jsonl(target, io.StringIO(_export(source)))
    source.forget([forgotten], by="admin", reason="a secret")
    lines = _lines(source)
    events = [i for i, line in enumerate(lines) if line["type"] == "event"]
    at = _memory_line(lines)
    for first, again in ((at, at + 1), (events[0], events[1])):
        changed = list(lines)
        changed[again] = lines[first]  # the header's counts still hold
        what = "memory id" if lines[first]["type"] == "memory" else "event key"
        value = lines[first]["id" if what == "memory id" else "key"]
        with pytest.raises(VerifiedMemoryError,
                           match=f"line {again + 1}: .*{what} {value} is on line "
                                 f"{first + 1} already"):
            import_jsonl(target, io.StringIO(_text(changed)))
        assert target.get(forgotten).id == forgotten  # the tombstone forgot nothing
