"""The SQLite store's audit and hygiene queries: listings by any filter, id prefixes,
forgetting, tombstones, the telemetry archive, imports in one transaction, and what
``vmem where`` and ``vmem db compact`` read and do.

Each function takes the open connection of ``SQLiteStore`` (inside its lock, and inside
its write transaction for the writes); the store keeps the connection, the transaction
and the translation of errors. Kept apart from ``sqlite.py`` so that the hot paths there
(recent, search, the verification pass) stay readable in one sitting.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from verified_memory.errors import NotFound, ValidationError
from verified_memory.models import (
    Memory,
    MemoryFilter,
    Status,
    StoreInfo,
    TelemetryEvent,
    Tombstone,
)
from verified_memory.store._rows import (
    CITATION_COLUMNS,
    EVENT_COLUMNS,
    MEMORY_COLUMNS,
    TOMBSTONE_COLUMNS,
    citation_values,
    events_values,
    forgetting,
    memory_values,
    time_to_text,
    tombstone_from_values,
    tombstone_values,
)
from verified_memory.store.sqlite_views import recount_through

__all__ = [
    "CHANGES",
    "INSERT_CITATION",
    "MIGRATION",
    "archive_events",
    "backup",
    "compaction_counts",
    "find",
    "forget",
    "info",
    "insert_event_rows",
    "load",
    "match_ids",
    "prune_citations",
    "tombstones",
    "vacuum",
]

#: The events an audit trail shows (``READ_KINDS`` left out), spelled exactly as the
#: partial indexes of migration 5 spell it: SQLite uses a partial index only for a query
#: whose WHERE clause contains its condition.
CHANGES = "kind NOT IN ('retrieved', 'checked')"
#: SQLite migration 5 (``sqlite.MIGRATIONS``): event keys, the audit trail's indexes,
#: tombstones, the telemetry archive. Shipped: never edit, append a migration instead.
MIGRATION: tuple[str, ...] = (
    # An event's key travels with it (export, import): a re-run skips what is here.
    "ALTER TABLE agent_memory_telemetry ADD COLUMN key TEXT",
    """
    CREATE UNIQUE INDEX agent_memory_telemetry_key
        ON agent_memory_telemetry (key) WHERE key IS NOT NULL
    """,
    # vmem log: the changes of a repository or of a memory, newest first, without
    # walking past the reads (retrieved events are most of the table).
    """
    CREATE INDEX agent_memory_telemetry_repo_changes
        ON agent_memory_telemetry (repo, at, id)
        WHERE kind NOT IN ('retrieved', 'checked')
    """,
    """
    CREATE INDEX agent_memory_telemetry_memory_changes
        ON agent_memory_telemetry (memory_id, at, id)
        WHERE kind NOT IN ('retrieved', 'checked')
    """,
    # What is left of a forgotten memory: no text, no citations.
    """
    CREATE TABLE agent_memory_tombstone (
        id TEXT PRIMARY KEY,
        repo TEXT NOT NULL,
        status TEXT NOT NULL,
        forgotten_by TEXT,
        forgotten_at TEXT NOT NULL,
        reason TEXT NOT NULL
    ) WITHOUT ROWID
    """,
    """
    CREATE INDEX agent_memory_tombstone_repo
        ON agent_memory_tombstone (repo, forgotten_at)
    """,
    # Old telemetry moved out of the live table by vmem db compact; still counted.
    """
    CREATE TABLE agent_memory_telemetry_archive (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL,
        repo TEXT NOT NULL,
        memory_id TEXT,
        actor TEXT,
        at TEXT NOT NULL,
        detail TEXT NOT NULL DEFAULT '{}',
        key TEXT,
        archived_at TEXT NOT NULL
    )
    """,
    """
    CREATE INDEX agent_memory_telemetry_archive_repo
        ON agent_memory_telemetry_archive (repo, at)
    """,
    """
    CREATE INDEX agent_memory_telemetry_archive_memory
        ON agent_memory_telemetry_archive (memory_id)
    """,
    """
    CREATE UNIQUE INDEX agent_memory_telemetry_archive_key
        ON agent_memory_telemetry_archive (key) WHERE key IS NOT NULL
    """,
    """
    CREATE TRIGGER agent_memory_telemetry_archive_no_update
    BEFORE UPDATE ON agent_memory_telemetry_archive
    BEGIN SELECT RAISE(ABORT, 'agent_memory_telemetry_archive is append-only'); END
    """,
    """
    CREATE TRIGGER agent_memory_telemetry_archive_no_delete
    BEFORE DELETE ON agent_memory_telemetry_archive
    BEGIN SELECT RAISE(ABORT, 'agent_memory_telemetry_archive is append-only'); END
    """,
    # An event may leave the live table only once its copy is in the archive.
    "DROP TRIGGER agent_memory_telemetry_no_delete",
    """
    CREATE TRIGGER agent_memory_telemetry_no_delete
    BEFORE DELETE ON agent_memory_telemetry
    WHEN NOT EXISTS (SELECT 1 FROM agent_memory_telemetry_archive a
                     WHERE a.id = old.id AND a.key IS old.key)
    BEGIN SELECT RAISE(ABORT, 'agent_memory_telemetry is append-only'); END
    """,
)
#: Above every character: ``id < prefix || TOP`` bounds a prefix range on an index.
_TOP = "\U0010ffff"
_M = ", ".join(f"m.{c}" for c in MEMORY_COLUMNS)
_EVENTS = ", ".join(("id", *EVENT_COLUMNS))


def _ids(values: Sequence[str]) -> str:
    return json.dumps(list(values))


# --------------------------------------------------------------------------- reads


def find(conn: sqlite3.Connection, repo: str, where: MemoryFilter,
         limit: int) -> list[Any]:
    """The rows of ``MemoryStore.find``, newest first. Every status is its own range of
    the (repo, status, refreshed_at) index, each cut at ``limit`` before they are
    merged, so a listing costs ``limit`` rows per status however large the repository
    (one sort of every row of it, otherwise)."""
    clauses = ["m.repo = ?", "m.status = ?"]
    for clause, value in (("m.category = ?", where.category),
                          ("EXISTS (SELECT 1 FROM json_each(m.tags) WHERE value = ?)",
                           where.tag),
                          ("m.created_by = ?", where.created_by),
                          ("m.created_at >= ?",
                           None if where.since is None else time_to_text(where.since)),
                          ("m.id IN (SELECT memory_id FROM agent_memory_citation "
                           "WHERE repo = ? AND path = ?)", where.path)):
        if value is not None:
            clauses.append(clause)
    statuses = [where.status] if where.status is not None else list(Status)
    branch = (f"SELECT * FROM (SELECT {_M} FROM agent_memory m WHERE {' AND '.join(clauses)} "
              "ORDER BY m.refreshed_at DESC, m.id LIMIT ?)")
    sql = (" UNION ALL ".join([branch] * len(statuses))
           + " ORDER BY refreshed_at DESC, id LIMIT ?")
    args: list[Any] = []
    for status in statuses:
        args += [repo, Status(status).value]
        args += [v for v in (where.category, where.tag, where.created_by,
                             None if where.since is None else time_to_text(where.since))
                 if v is not None]
        if where.path is not None:
            args += [repo, where.path]
        args.append(limit)
    return conn.execute(sql, (*args, limit)).fetchall()


def match_ids(conn: sqlite3.Connection, prefix: str, limit: int) -> list[str]:
    """Ids of memories and tombstones starting with ``prefix`` (a range of each unique
    index, so a short id costs two look-ups)."""
    bounds = (prefix, prefix + _TOP, len(prefix), prefix)
    where = "id >= ? AND id < ? AND substr(id, 1, ?) = ?"
    return [row[0] for row in conn.execute(
        f"SELECT id FROM agent_memory WHERE {where} UNION "
        f"SELECT id FROM agent_memory_tombstone WHERE {where} ORDER BY id LIMIT ?",
        (*bounds, *bounds, limit))]


def tombstones(conn: sqlite3.Connection, repo: str | None, ids: Sequence[str] | None,
               limit: int) -> list[Tombstone]:
    clauses: list[str] = []
    params: list[Any] = []
    if repo is not None:
        clauses.append("repo = ?")
        params.append(repo)
    if ids is not None:
        clauses.append("id IN (SELECT value FROM json_each(?))")
        params.append(_ids(ids))
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    return [tombstone_from_values(row) for row in conn.execute(
        f"SELECT {', '.join(TOMBSTONE_COLUMNS)} FROM agent_memory_tombstone {where} "
        "ORDER BY forgotten_at DESC, id LIMIT ?", (*params, limit))]


def info(conn: sqlite3.Connection, path: str) -> StoreInfo:
    (version,) = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    counts = conn.execute(
        "SELECT (SELECT count(*) FROM agent_memory), "
        "(SELECT count(*) FROM agent_memory_tombstone), "
        "(SELECT count(*) FROM agent_memory_telemetry), "
        "(SELECT count(*) FROM agent_memory_telemetry_archive), "
        "(SELECT count(DISTINCT repo) FROM agent_memory)").fetchone()
    memories, forgotten, events, archived, repos = (int(n) for n in counts)
    return StoreInfo(kind="sqlite", location=path,
                     schema_version=None if version is None else str(version),
                     size_bytes=file_size(path), memories=memories, forgotten=forgotten,
                     events=events, archived_events=archived, repos=repos)


def file_size(path: str) -> int | None:
    """The store's bytes on disk: the file and its write-ahead log."""
    if path == ":memory:" or path.startswith("file:"):
        return None
    return sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p))


# --------------------------------------------------------------------------- writes


def forget(conn: sqlite3.Connection, ids: Sequence[str] | None, repo: str | None,
           by: str | None, reason: str, at: datetime) -> list[Tombstone]:
    """Inside the write transaction: tombstones in, memories out (their citations go
    with them: ON DELETE CASCADE; their full-text entries: the delete trigger), one
    ``forgotten`` event each."""
    if ids is None:
        if repo is None:
            raise ValidationError("forget needs memory ids or a repository")
        rows = conn.execute("SELECT id, repo, status FROM agent_memory WHERE repo = ? "
                            "ORDER BY id", (repo,)).fetchall()
    else:
        wanted = list(dict.fromkeys(ids))
        found = {row[0]: row for row in conn.execute(
            "SELECT id, repo, status FROM agent_memory "
            "WHERE id IN (SELECT value FROM json_each(?))", (_ids(wanted),))}
        for memory_id in wanted:
            row = found.get(memory_id)
            if row is None or (repo is not None and row[1] != repo):
                raise NotFound(f"memory {memory_id} not found"
                               + (f" in {repo}" if repo else ""))
        rows = [found[i] for i in wanted]
    marks, events = forgetting([tuple(r) for r in rows], by=by, reason=reason, at=at)
    _insert_tombstones(conn, marks)
    conn.execute("DELETE FROM agent_memory WHERE id IN (SELECT value FROM json_each(?))",
                 (_ids([t.id for t in marks]),))
    _insert_events(conn, events)
    return marks


def archive_events(conn: sqlite3.Connection, before: datetime, now: datetime) -> int:
    """Inside the write transaction: copy the events older than ``before`` into the
    archive, then delete them (the append-only trigger lets an event go once its copy
    is in the archive). The dashboard's running counts follow the live events, as
    Postgres' views do (``sqlite_views.py``): the days archived from are counted again
    from what is left of them (the day of the cut keeps its later events)."""
    cutoff = time_to_text(before)
    conn.execute(
        f"INSERT INTO agent_memory_telemetry_archive ({_EVENTS}, archived_at) "
        f"SELECT {_EVENTS}, ? FROM agent_memory_telemetry WHERE at < ?",
        (time_to_text(now), cutoff))
    archived = conn.execute("DELETE FROM agent_memory_telemetry WHERE at < ?",
                            (cutoff,)).rowcount
    if archived:
        recount_through(conn, cutoff[:10])
    return archived


assert CITATION_COLUMNS[0] == "memory_id"
#: A citation row, with its memory's ``seq`` (migration 8) and creation time (migration
#: 9) read from the memory's row (by its id, ``?1``): the memory is written first, in
#: the same transaction.
INSERT_CITATION = (
    f"INSERT INTO agent_memory_citation ({', '.join(CITATION_COLUMNS)}, memory_seq, "
    "memory_created_at) "
    f"VALUES ({', '.join(f'?{i}' for i in range(1, len(CITATION_COLUMNS) + 1))}, "
    "(SELECT seq FROM agent_memory WHERE id = ?1), "
    "(SELECT created_at FROM agent_memory WHERE id = ?1))"
)
#: Events are written by statements of many rows each (``VALUES (...), (...)``), not by
#: one statement a row: the telemetry table's triggers (the dashboard's counts) make
#: SQLite keep a statement journal for each statement it runs, and for a verification
#: pass's 66,000 events, one statement each, that journal cost more than the inserts
#: (2.9 s against 1.3 s as one statement). Rows as parameters rather than one JSON array
#: of them: SQLite (before 3.45) parsed a row's JSON again for each of its columns, and
#: the encoding was Python's (66,000 events: 0.55 s and 0.1 s, 0.32 s as rows).
EVENTS_PER_INSERT = 1000
_INSERT_EVENTS = f"INSERT INTO agent_memory_telemetry ({', '.join(EVENT_COLUMNS)}) VALUES "
_EVENT_ROW = f"({', '.join('?' for _ in EVENT_COLUMNS)})"


def insert_event_rows(conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Append these ``agent_memory_telemetry`` rows (``event_values``), in order."""
    # Within the connection's limit on parameters (999 in SQLite before 3.32).
    per = max(1, min(EVENTS_PER_INSERT,
                     conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // len(EVENT_COLUMNS)))
    for start in range(0, len(rows), per):
        part = rows[start:start + per]
        conn.execute(_INSERT_EVENTS + ", ".join([_EVENT_ROW] * len(part)),
                     [value for row in part for value in row])


def load(conn: sqlite3.Connection, memories: Sequence[Memory],
         events: Sequence[TelemetryEvent],
         tombstones: Sequence[Tombstone]) -> tuple[int, int, int]:
    """Inside the write transaction: the memories whose id is neither a memory nor a
    tombstone, then the events whose key neither table holds, then the tombstones."""
    taken = {row[0] for row in conn.execute(
        "SELECT id FROM agent_memory WHERE id IN (SELECT value FROM json_each(?1)) UNION "
        "SELECT id FROM agent_memory_tombstone WHERE id IN (SELECT value FROM json_each(?1))",
        (_ids([m.id for m in memories] + [t.id for t in tombstones]),))}
    fresh = [m for m in memories if m.id not in taken]
    conn.executemany(
        f"INSERT INTO agent_memory ({', '.join(MEMORY_COLUMNS)}) "
        f"VALUES ({', '.join('?' for _ in MEMORY_COLUMNS)})",
        [memory_values(m) for m in fresh])
    conn.executemany(
        INSERT_CITATION,
        [citation_values(m.id, m.repo, i, c) for m in fresh for i, c in enumerate(m.citations)])
    held = {row[0] for row in conn.execute(
        "SELECT key FROM agent_memory_telemetry WHERE key IN (SELECT value FROM json_each(?1)) "
        "UNION SELECT key FROM agent_memory_telemetry_archive "
        "WHERE key IN (SELECT value FROM json_each(?1))",
        (_ids([e.key for e in events if e.key is not None]),))}
    new = [e for e in events if e.key is None or e.key not in held]
    _insert_events(conn, new)
    marks = [t for t in tombstones if t.id not in taken]
    _insert_tombstones(conn, marks)
    return len(fresh), len(new), len(marks)


def _insert_tombstones(conn: sqlite3.Connection, marks: Sequence[Tombstone]) -> None:
    conn.executemany(
        f"INSERT INTO agent_memory_tombstone ({', '.join(TOMBSTONE_COLUMNS)}) "
        f"VALUES ({', '.join('?' for _ in TOMBSTONE_COLUMNS)})",
        [tombstone_values(t) for t in marks])


def _insert_events(conn: sqlite3.Connection, events: Sequence[TelemetryEvent]) -> None:
    insert_event_rows(conn, events_values(events))


# --------------------------------------------------------------------------- compaction


def compaction_counts(conn: sqlite3.Connection, before: datetime) -> tuple[int, int]:
    """What a compaction would do: citation rows left without their memory, events older
    than ``before``."""
    (orphans,) = conn.execute(
        "SELECT count(*) FROM agent_memory_citation "
        "WHERE memory_id NOT IN (SELECT id FROM agent_memory)").fetchone()
    (old,) = conn.execute("SELECT count(*) FROM agent_memory_telemetry WHERE at < ?",
                          (time_to_text(before),)).fetchone()
    return int(orphans), int(old)


def prune_citations(conn: sqlite3.Connection) -> int:
    """Inside a write transaction: delete citation rows whose memory is gone (a memory
    deleted by a tool that does not enforce foreign keys, as the ``sqlite3`` shell does
    not by default)."""
    return conn.execute("DELETE FROM agent_memory_citation "
                        "WHERE memory_id NOT IN (SELECT id FROM agent_memory)").rowcount


def vacuum(conn: sqlite3.Connection) -> None:
    """Outside any transaction: merge the full-text index into one segment (which drops
    what deleted rows left in it: the words of forgotten memories), rebuild the file
    without free pages, and empty the write-ahead log."""
    conn.execute("INSERT INTO agent_memory_fts (agent_memory_fts) VALUES ('optimize')")
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def backup(conn: sqlite3.Connection, target: Path) -> None:
    """A consistent copy of the store at ``target`` through SQLite's online backup API
    (other processes may go on reading and writing), created readable by its owner only."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    copy = sqlite3.connect(target)
    try:
        conn.backup(copy)
    finally:
        copy.close()
