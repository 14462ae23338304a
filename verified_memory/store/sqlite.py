"""The embedded default store: one SQLite file, safe for many processes at once.

Why it is shaped like this:

- WAL mode lets readers run while one writer writes; every write opens with
  ``BEGIN IMMEDIATE`` so it takes the write lock *before* reading what it checks.
  That is what makes ``supersede`` and ``apply`` race-free across processes: the
  status check and the update happen under the same lock, and a second writer waits
  (up to ``busy_timeout``) instead of failing half-way with ``SQLITE_BUSY``.
- ``synchronous=NORMAL`` is durable across application crashes in WAL mode and only
  risks the last transactions on power loss, which is the right trade for a cache of
  checked facts.
- Numbered migrations run at construction, each in its own transaction, and are
  recorded in ``schema_migrations``; a second process opening the same fresh file
  re-checks under the write lock, so nothing runs twice. Whether any is missing is read
  first: opening a file that is up to date takes no write lock, and one that another
  process finishes migrating meanwhile opens without it (``_migrate``).
- ``MemoryService.store``'s duplicate check runs inside the transaction that adds
  the memory (``add_unless_duplicate``), so processes storing one memory store it once.
- ``agent_memory`` has an integer ``seq`` as its rowid alias and ``id`` as a unique
  key: the full-text index (external content, kept in step by triggers) points at
  rowids, and only an explicit INTEGER PRIMARY KEY survives ``VACUUM`` unchanged.
- Citations of all returned memories are loaded with one query (``json_each`` over the
  ids), so ``recent(50)`` costs two index look-ups however many memories there are.
  The citation table is ``WITHOUT ROWID``, clustered on (memory_id, position), so a
  memory's citations sit together on disk.
- No ``sqlite3`` exception reaches a caller: a locked, corrupt or unreadable file is a
  ``StoreError`` naming the file, a duplicate id a ``Conflict``.

One store object may be used by one thread at a time, from any thread: a lock
serialises operations on the single connection.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from itertools import groupby
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any
from urllib.parse import quote

from verified_memory.errors import Conflict, NotFound, ReadOnlyStore, StoreError
from verified_memory.models import (
    POOR_MAX_SUCCESS,
    POOR_MIN_FEEDBACK,
    VALIDATED_MIN_APPLIED,
    VALIDATED_MIN_SUCCESS,
    Citation,
    Cited,
    EventKind,
    Memory,
    MemoryFilter,
    RepoStats,
    SearchHit,
    Status,
    StoreInfo,
    TelemetryEvent,
    Tombstone,
    Transition,
    utcnow,
)
from verified_memory.store import _sqlite_admin as _admin
from verified_memory.store import sqlite_paths as _paths
from verified_memory.store._rows import (
    CITATION_COLUMNS,
    EVENT_COLUMNS,
    MEMORY_COLUMNS,
    check_limit,
    check_lines,
    check_load,
    citation_from_values,
    citation_values,
    event_from_values,
    events_values,
    hit_from_values,
    memory_from_values,
    memory_values,
    query_terms,
    time_to_text,
    transition_values,
    validate_citations,
    validate_memory,
    with_supersedes,
)
from verified_memory.store.base import ClosingStore, Decide, repeat_candidates
from verified_memory.store.sqlite_views import DASHBOARD_MIGRATION, recount_archived_days
from verified_memory.store.views import ViewQuery, as_text, normalize_row, sql_select

__all__ = ["MIGRATIONS", "SQLiteStore", "fts_query"]

#: The statuses of migration 1 (frozen: a shipped migration never changes; migration 4
#: widens the check to every status).
_STATUSES_1 = "'active', 'pending', 'invalid', 'superseded'"
_STATUSES = ", ".join(f"'{s.value}'" for s in Status)

#: Seconds a write waits for another process's write lock before giving up.
BUSY_TIMEOUT = 5.0
#: Seconds of each wait for the write lock while opening a file that lacks a
#: migration, before reading again whether another process applied it (``_migrate``).
OPEN_LOCK_SLICE = 0.05
#: The page cache of a connection, in KiB (``PRAGMA cache_size``; see ``_open``).
CACHE_KIB = 32 * 1024

#: (version, name, statements). Append only: never edit a migration that has shipped.
Statement = str | Callable[[sqlite3.Connection], None]
MIGRATIONS: tuple[tuple[int, str, tuple[Statement, ...]], ...] = (
    (
        1,
        "memories, citations, telemetry, full-text search",
        (
            f"""
            CREATE TABLE agent_memory (
                seq INTEGER PRIMARY KEY,
                id TEXT NOT NULL UNIQUE,
                repo TEXT NOT NULL,
                subject TEXT NOT NULL,
                fact TEXT NOT NULL,
                reason TEXT,
                category TEXT,
                tags TEXT NOT NULL DEFAULT '[]',
                status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ({_STATUSES_1})),
                supersedes TEXT,
                superseded_by TEXT,
                created_by TEXT,
                created_at TEXT NOT NULL,
                refreshed_at TEXT NOT NULL,
                verification_count INTEGER NOT NULL DEFAULT 0,
                applied_count INTEGER NOT NULL DEFAULT 0,
                verified_commit TEXT,
                invalid_reason TEXT
            )
            """,
            # recent(), with and without a status filter; ties go to the smaller id.
            """
            CREATE INDEX agent_memory_recent
                ON agent_memory (repo, status, refreshed_at DESC, id)
            """,
            """
            CREATE INDEX agent_memory_repo_refreshed
                ON agent_memory (repo, refreshed_at DESC, id)
            """,
            """
            CREATE TABLE agent_memory_citation (
                memory_id TEXT NOT NULL REFERENCES agent_memory (id) ON DELETE CASCADE,
                position INTEGER NOT NULL,
                repo TEXT NOT NULL,
                path TEXT NOT NULL,
                line_start INTEGER NOT NULL,
                line_end INTEGER NOT NULL,
                sha TEXT,
                blob_sha TEXT,
                snippet_hash TEXT NOT NULL,
                line_hashes TEXT NOT NULL DEFAULT '',
                anchor TEXT,
                PRIMARY KEY (memory_id, position),
                CHECK (1 <= line_start AND line_start <= line_end)
            ) WITHOUT ROWID
            """,
            """
            CREATE INDEX agent_memory_citation_path
                ON agent_memory_citation (repo, path, line_start)
            """,
            """
            CREATE TABLE agent_memory_telemetry (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                kind TEXT NOT NULL,
                repo TEXT NOT NULL,
                memory_id TEXT,
                actor TEXT,
                at TEXT NOT NULL,
                detail TEXT NOT NULL DEFAULT '{}'
            )
            """,
            "CREATE INDEX agent_memory_telemetry_repo ON agent_memory_telemetry (repo, at)",
            "CREATE INDEX agent_memory_telemetry_memory ON agent_memory_telemetry (memory_id)",
            """
            CREATE TRIGGER agent_memory_telemetry_no_update
            BEFORE UPDATE ON agent_memory_telemetry
            BEGIN SELECT RAISE(ABORT, 'agent_memory_telemetry is append-only'); END
            """,
            """
            CREATE TRIGGER agent_memory_telemetry_no_delete
            BEFORE DELETE ON agent_memory_telemetry
            BEGIN SELECT RAISE(ABORT, 'agent_memory_telemetry is append-only'); END
            """,
            """
            CREATE VIRTUAL TABLE agent_memory_fts USING fts5 (
                subject, fact, tags,
                content = 'agent_memory', content_rowid = 'seq',
                tokenize = 'unicode61 remove_diacritics 2'
            )
            """,
            """
            CREATE TRIGGER agent_memory_fts_insert AFTER INSERT ON agent_memory BEGIN
                INSERT INTO agent_memory_fts (rowid, subject, fact, tags)
                VALUES (new.seq, new.subject, new.fact, new.tags);
            END
            """,
            """
            CREATE TRIGGER agent_memory_fts_delete AFTER DELETE ON agent_memory BEGIN
                INSERT INTO agent_memory_fts (agent_memory_fts, rowid, subject, fact, tags)
                VALUES ('delete', old.seq, old.subject, old.fact, old.tags);
            END
            """,
            """
            CREATE TRIGGER agent_memory_fts_update
            AFTER UPDATE OF subject, fact, tags ON agent_memory BEGIN
                INSERT INTO agent_memory_fts (agent_memory_fts, rowid, subject, fact, tags)
                VALUES ('delete', old.seq, old.subject, old.fact, old.tags);
                INSERT INTO agent_memory_fts (rowid, subject, fact, tags)
                VALUES (new.seq, new.subject, new.fact, new.tags);
            END
            """,
        ),
    ),
    (
        2,
        "one index fewer for a refresh to move",
        (
            # Every refresh moves refreshed_at, and so its entry in each index on it;
            # (repo, refreshed_at) only served listings of every status (an export),
            # which sort a repository's rows from agent_memory_recent instead.
            "DROP INDEX IF EXISTS agent_memory_repo_refreshed",
        ),
    ),
    (
        3,
        "the main line's name where a memory was last judged",
        (
            # With verified_commit: where the last verdict was made. NULL for a memory
            # never judged on the main line (new, stored on a branch, or re-cited).
            "ALTER TABLE agent_memory ADD COLUMN verified_ref TEXT",
        ),
    ),
    (
        4,
        "memory quality: feedback counters, last use, promotion, the expired status",
        (
            "ALTER TABLE agent_memory ADD COLUMN success_count INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE agent_memory ADD COLUMN failure_count INTEGER NOT NULL DEFAULT 0",
            # Existing memories were last used when they were last refreshed.
            "ALTER TABLE agent_memory ADD COLUMN used_at TEXT",
            "UPDATE agent_memory SET used_at = refreshed_at",
            "ALTER TABLE agent_memory ADD COLUMN promoted_to TEXT",
            lambda conn: _widen_status_check(conn, _STATUSES_1, _STATUSES),
        ),
    ),
    # The statements live with the queries that use them (_sqlite_admin.py).
    (5, "audit and hygiene: event keys, tombstones, the telemetry archive", _admin.MIGRATION),
    (
        6,
        "a memory's citations by path, for walking memories newest first",
        (
            # by_path on a file most memories cite walks the memories newest first and
            # asks, of each, whether it cites the file: an index look-up here rather
            # than a read of its citation rows (fingerprints and anchors included).
            """
            CREATE INDEX agent_memory_citation_memory
                ON agent_memory_citation (memory_id, path, line_start, line_end)
            """,
        ),
    ),
    (7, "dashboard views, over counts kept as telemetry is appended", DASHBOARD_MIGRATION),
    (
        8,
        "a citation's memory by row number, for finding a file's newest memories",
        (
            # by_path on a file a few hundred memories cite gathers them from the path
            # index and walks the repository's memories newest first until it has
            # ``limit`` of them: asking whether a memory is among them by its integer
            # seq (which never changes) rather than its 36-character id made that walk
            # 2.5 times faster. Rows are written with it (_sqlite_admin.INSERT_CITATION).
            "ALTER TABLE agent_memory_citation ADD COLUMN memory_seq INTEGER",
            """
            UPDATE agent_memory_citation SET memory_seq = (
                SELECT m.seq FROM agent_memory m WHERE m.id = agent_memory_citation.memory_id)
            """,
            # The same name and first columns (what reads by path use), and the memory's
            # seq in it, so that gathering a file's memories reads nothing else.
            "DROP INDEX agent_memory_citation_path",
            """
            CREATE INDEX agent_memory_citation_path
                ON agent_memory_citation (repo, path, line_start, line_end, memory_seq)
            """,
            # Migration 6's index, keyed by the seq instead of the id: whether a memory
            # cites a file (lines of it) is then an integer look-up (lines of the file
            # most memories cite: 1.3 ms of SQL, 0.35 ms with it).
            "DROP INDEX agent_memory_citation_memory",
            """
            CREATE INDEX agent_memory_citation_memory
                ON agent_memory_citation (memory_seq, path, line_start, line_end)
            """,
        ),
    ),
    (
        9,
        "a file's memories newest first, in the order of the citation index",
        (
            # by_path answers newest created first. A memory's creation time never
            # changes, so its citations can carry it in their index at no cost to a
            # verification pass (the refresh time, which every pass moves, could not:
            # that cost the 100k pass about a second). A file's newest memories are then
            # the first entries under its path, however many memories cite it. Rows
            # are written with it (_sqlite_admin.INSERT_CITATION).
            "ALTER TABLE agent_memory_citation ADD COLUMN memory_created_at TEXT",
            """
            UPDATE agent_memory_citation SET memory_created_at = (
                SELECT m.created_at FROM agent_memory m
                WHERE m.seq = agent_memory_citation.memory_seq)
            """,
            # It replaces the (repo, path, line_start) index: every read by path starts
            # with the same two columns, and the cited lines and the memory's seq in
            # each entry let a read ask about lines and reach the memory row without
            # reading the citation's own row.
            "DROP INDEX agent_memory_citation_path",
            """
            CREATE INDEX agent_memory_citation_newest
                ON agent_memory_citation (repo, path, memory_created_at DESC, memory_id,
                                          line_start, line_end, memory_seq)
            """,
        ),
    ),
    (
        10,
        "citation rows an older version writes get their memory's seq and creation time",
        (
            # A process of an older version that opened the file before it was migrated
            # (an MCP server running through an upgrade) goes on writing citation rows
            # without the columns migrations 8 and 9 added: without the creation time
            # its memory, the newest, came last by path; without the seq it was not
            # found by path at all. The file fills them in, whoever writes the row (as
            # Postgres's trigger does); rows written so before this migration too.
            # INSERT_CITATION writes both, so the trigger's condition is all it costs.
            """
            CREATE TRIGGER agent_memory_citation_memory_fields
            AFTER INSERT ON agent_memory_citation
            WHEN NEW.memory_seq IS NULL OR NEW.memory_created_at IS NULL
            BEGIN
                UPDATE agent_memory_citation SET
                    memory_seq = (SELECT seq FROM agent_memory WHERE id = NEW.memory_id),
                    memory_created_at = (SELECT created_at FROM agent_memory
                                         WHERE id = NEW.memory_id)
                WHERE memory_id = NEW.memory_id AND position = NEW.position;
            END
            """,
            """
            UPDATE agent_memory_citation SET
                memory_seq = (SELECT m.seq FROM agent_memory m
                              WHERE m.id = agent_memory_citation.memory_id),
                memory_created_at = (SELECT m.created_at FROM agent_memory m
                                     WHERE m.id = agent_memory_citation.memory_id)
            WHERE memory_seq IS NULL OR memory_created_at IS NULL
            """,
        ),
    ),
    # The statements live with the reads by path that need them (sqlite_paths.py).
    (11, "creation times never later than now, and their copies kept in step",
     _paths.CREATED_AT_MIGRATION),
    (12, "a repository's memories by category and by tag", _paths.GATHER_MIGRATION),
    (13, "refresh times never later than now; nor either time written by hand",
     _paths.TIMES_MIGRATION),
    (14, "a file's citations by their last line", _paths.LINES_MIGRATION),
    (15, "the dashboard's counts of the days an older compaction archived from, counted again",
     (recount_archived_days,)),
)

_M = ", ".join(f"m.{c}" for c in MEMORY_COLUMNS)
_INSERT_MEMORY = (
    f"INSERT INTO agent_memory ({', '.join(MEMORY_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in MEMORY_COLUMNS)})"
)
#: What ranking a search's match reads (``SearchHit``; the seq finds its cited paths),
#: and its cited paths: from migration 8's index (by seq; the position is in every
#: entry), not from the citation rows, which hold fingerprints and anchors too.
_HIT = "m.id, m.subject, m.fact, m.reason, m.tags, m.seq"
_SELECT_PATHS = ("SELECT memory_seq, path FROM agent_memory_citation INDEXED BY "
                 "agent_memory_citation_memory WHERE memory_seq IN "
                 "(SELECT value FROM json_each(?)) ORDER BY memory_seq, position")
_SELECT_CITATIONS = (
    f"SELECT {', '.join(CITATION_COLUMNS)} FROM agent_memory_citation "
    "WHERE memory_id IN (SELECT value FROM json_each(?)) ORDER BY memory_id, position"
)
#: search: bm25 ranks a query's matches in a repository up to this many; past it the
#: newest matches are taken, by where the words are (``SQLiteStore._newest_matches``).
RANKED_MATCHES = 500
# Column weights for bm25: a word in the subject says more than one in a long fact.
_BM25 = "bm25(agent_memory_fts, 4.0, 1.0, 2.0)"


def fts_query(query: str, *, prefix: bool = True) -> str | None:
    """A free-text query as a safe FTS5 expression, or None when it has no words.

    Every term is double-quoted (a quote inside is doubled), so FTS5 operators and
    punctuation in user input (``- " * ( : NEAR AND``) are never parsed as syntax.
    Terms are ANDed; the last one is a prefix because the user may still be typing
    (unless ``prefix`` is False: then every word is matched whole).
    """
    terms = [f'"{t.replace(chr(34), chr(34) * 2)}"' for t in query_terms(query)]
    if not terms:
        return None
    if prefix:
        terms[-1] += "*"
    return " ".join(terms)


class SQLiteStore(ClosingStore):
    """A ``MemoryStore`` in one SQLite file (``":memory:"`` for a throwaway one)."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float | None = None,
                 create: bool = True) -> None:
        """Open (and migrate) the store at ``path``; ``create=False`` refuses a file that
        does not exist (``NotFound`` naming it) instead of creating it and its
        directories: what a command that only reads wants."""
        self.path = os.fspath(path)
        self.timeout = BUSY_TIMEOUT if timeout is None else timeout
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = self._open(create)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    # ------------------------------------------------------------------ writes

    def add(self, memory: Memory, events: Sequence[TelemetryEvent] = ()) -> None:
        validate_memory(memory)
        rows = _memory_rows(memory)
        event_rows = events_values(events)
        with self._write("adding a memory") as conn:
            self._insert_memory(conn, memory, rows)
            _admin.insert_event_rows(conn, event_rows)

    def add_unless_duplicate(self, memory: Memory, decide: Decide) -> bool:
        validate_memory(memory)
        rows = _memory_rows(memory)
        with self._write("adding a memory") as conn:
            # Under BEGIN IMMEDIATE no other process can add a memory between this
            # check and the insert: of several storing one memory, one inserts it.
            def by_path(repo: str, path: str, *, lines: tuple[int, int] | None = None,
                        limit: int = 50) -> list[Memory]:
                return self._by_path(conn, repo, path, lines=lines, limit=limit)

            def find(repo: str, where: MemoryFilter | None = None, *,
                     limit: int | None = 50) -> list[Memory]:
                return self._find(conn, repo, where, limit)

            events = decide(repeat_candidates(by_path, find, memory))
            if events is None:
                return False
            self._insert_memory(conn, memory, rows)
            _admin.insert_event_rows(conn, events_values(events))
        return True

    def supersede(
        self, old_id: str, new: Memory, events: Sequence[TelemetryEvent] = ()
    ) -> None:
        new = with_supersedes(new, old_id)
        validate_memory(new)
        rows = _memory_rows(new)
        event_rows = events_values(events)
        with self._write("superseding a memory") as conn:
            # Under BEGIN IMMEDIATE nobody else can write between this check and the
            # update below, so of two racing supersedes exactly one sees 'active'.
            found = conn.execute(
                "SELECT status FROM agent_memory WHERE id = ?", (old_id,)
            ).fetchone()
            if found is None:
                raise NotFound(f"memory {old_id} not found")
            if found[0] != Status.ACTIVE.value:
                raise Conflict(
                    f"memory {old_id} is {found[0]}, not active: it cannot be superseded"
                )
            self._insert_memory(conn, new, rows)
            conn.execute(
                "UPDATE agent_memory SET status = ?, superseded_by = ? WHERE id = ?",
                (Status.SUPERSEDED.value, new.id, old_id),
            )
            _admin.insert_event_rows(conn, event_rows)

    def apply(self, transitions: Sequence[Transition]) -> list[bool]:
        for transition in transitions:
            _check_transition(transition)
        if not transitions:
            return []
        # Every event's row made at once (a pass's share their detail and time), sliced
        # per transition below.
        all_rows = events_values([e for t in transitions for e in t.events])
        ids = list(dict.fromkeys(t.memory_id for t in transitions))
        required = [t.requires[0] for t in transitions if t.requires is not None]
        with self._write("applying transitions") as conn:
            # One read of every status, then each kind of row in one statement: the
            # write lock is held, so the statuses cannot change under us, and the
            # transitions are decided in order as if each were its own UPDATE.
            found = {
                memory_id: (status, judged, repo, seq)
                for memory_id, status, judged, repo, seq in conn.execute(
                    "SELECT id, status, verified_commit, repo, seq FROM agent_memory "
                    "WHERE id IN (SELECT value FROM json_each(?))",
                    (json.dumps([*ids, *required]),),
                )
            }
            for memory_id in ids:
                if memory_id not in found:
                    raise NotFound(f"memory {memory_id} not found")
            status = {memory_id: s for memory_id, (s, _, _, _) in found.items()}
            judged = {memory_id: j for memory_id, (_, j, _, _) in found.items()}
            cited = _cited(conn, [t.memory_id for t in transitions
                                  if t.expect_citations is not None])
            results: list[bool] = []
            updates: list[_Update] = []
            clauses: dict[tuple[Any, ...], tuple[str, tuple[Any, ...]] | None] = {}
            # memory id -> its citation rows; a memory rewritten twice keeps the last set
            rewritten: dict[str, list[tuple[Any, ...]]] = {}
            event_rows: list[tuple[Any, ...]] = []
            offset = 0
            for transition in transitions:
                memory_id, citations = transition.memory_id, transition.citations
                first, offset = offset, offset + len(transition.events)
                if not (transition.expects(status[memory_id], judged[memory_id],
                                           cited.get(memory_id, ()))
                        and transition.required(status)):
                    results.append(False)  # lost a race: skip it and its events
                    continue
                if transition.status is not None:
                    status[memory_id] = transition.status.value
                judged[memory_id] = transition.judged_after(judged[memory_id])
                # Transitions that change the same (a pass's refreshes) share one clause.
                shape = _CHANGES(transition)
                if shape in clauses:
                    sets = clauses[shape]
                else:
                    sets = clauses[shape] = _update(transition_values(transition))
                if sets is not None:  # by row number: no look-up of the id again
                    updates.append((*sets, found[memory_id][3]))
                if citations is not None:
                    cited[memory_id] = list(Transition.cited(citations))
                    repo = found[memory_id][2]
                    rewritten[memory_id] = [citation_values(memory_id, repo, i, c)
                                            for i, c in enumerate(citations)]
                event_rows += all_rows[first:offset]
                results.append(True)
            _run_updates(conn, updates)
            if rewritten:
                conn.executemany("DELETE FROM agent_memory_citation WHERE memory_id = ?",
                                 [(memory_id,) for memory_id in rewritten])
                conn.executemany(_admin.INSERT_CITATION,
                                 [row for rows in rewritten.values() for row in rows])
            _admin.insert_event_rows(conn, event_rows)
        return results

    def log(self, events: Sequence[TelemetryEvent]) -> None:
        rows = events_values(events)
        if not rows:
            return
        with self._write("logging telemetry") as conn:
            _admin.insert_event_rows(conn, rows)

    # ------------------------------------------------------------------ reads

    def get(self, memory_id: str) -> Memory:
        return self.get_many([memory_id])[0]

    def get_many(self, memory_ids: Sequence[str]) -> list[Memory]:
        ids = list(memory_ids)
        if not ids:
            return []
        with self._read("reading memories") as conn:
            return self._select_many(conn, ids)

    def recent(
        self, repo: str, *, limit: int | None = 50, status: Status | None = Status.ACTIVE,
        category: str | None = None, tag: str | None = None,
    ) -> list[Memory]:
        bound = _sql_limit(limit)
        where = "m.repo = ?"
        params: list[Any] = [repo]
        if status is not None:
            where += " AND m.status = ?"
            params.append(Status(status).value)
        where, params = _filtered(where, params, category, tag)
        sql = (
            f"SELECT {_M} FROM agent_memory m WHERE {where} "
            "ORDER BY m.refreshed_at DESC, m.id LIMIT ?"
        )
        with self._read("listing recent memories") as conn:
            return self._hydrate(conn, conn.execute(sql, (*params, bound)).fetchall())

    def count(self, repo: str, *, status: Status | None = Status.ACTIVE,
              at_most: int | None = None) -> int:
        where, params = ("repo = ?", [repo]) if status is None else (
            "repo = ? AND status = ?", [repo, Status(status).value])
        with self._read("counting memories") as conn:
            return int(conn.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM agent_memory WHERE {where} LIMIT ?)",
                [*params, _sql_limit(at_most, "at_most")]).fetchone()[0])

    def oldest_never_applied(self, repo: str, limit: int) -> list[Memory]:
        with self._read("finding memories never applied") as conn:
            rows = conn.execute(
                f"SELECT {_M} FROM agent_memory m WHERE m.repo = ? AND m.status = 'active' "
                "AND m.applied_count = 0 ORDER BY coalesce(m.used_at, m.created_at), m.id "
                "LIMIT ?", (repo, _sql_limit(limit))).fetchall()  # text order: time order
            return self._hydrate(conn, rows)

    def repos(self) -> list[str]:
        with self._read("listing repositories") as conn:
            return [row[0] for row in conn.execute(
                "SELECT DISTINCT repo FROM agent_memory ORDER BY repo")]

    def search(self, repo: str, query: str, *, limit: int = 20, category: str | None = None,
               tag: str | None = None) -> list[Memory]:
        with self._read("searching memories") as conn:
            return self._hydrate(conn, self._search_rows(conn, _M, repo, query, limit,
                                                         category, tag))

    def search_hits(self, repo: str, query: str, *, limit: int = 20,
                    category: str | None = None, tag: str | None = None) -> list[SearchHit]:
        """``search``'s matches with what ranking them reads: their rows and cited paths,
        not their citations' rows (fingerprints, anchors), which only the memories kept
        are read for."""
        with self._read("searching memories") as conn:
            rows = self._search_rows(conn, _HIT, repo, query, limit, category, tag)
            paths: dict[int, list[str]] = {row[-1]: [] for row in rows}
            if paths:
                for seq, path in conn.execute(_SELECT_PATHS, (json.dumps(list(paths)),)):
                    paths[seq].append(path)
            return [hit_from_values(row[:-1], paths[row[-1]]) for row in rows]

    def _search_rows(self, conn: sqlite3.Connection, columns: str, repo: str, query: str,
                     limit: int, category: str | None, tag: str | None) -> list[Any]:
        """The ``columns`` of the memories a search finds, best first."""
        bound = _sql_limit(limit)
        expression = fts_query(query)
        if expression is None or bound == 0:
            return []
        where, params = _filtered("agent_memory_fts MATCH ? AND m.repo = ? AND "
                                  "m.status = 'active'", [repo], category, tag)
        matches = f"FROM agent_memory_fts f CROSS JOIN agent_memory m ON m.seq = f.rowid " \
                  f"WHERE {where}"
        if 0 < bound <= RANKED_MATCHES:
            # bm25 reads every match (and the whole index entry of each word, for its
            # weights): past a few hundred matches, the newest are taken by where the
            # words are, the last word whole first (a prefix is dearer).
            for words in dict.fromkeys((fts_query(query, prefix=False), expression)):
                many = conn.execute(
                    f"SELECT count(*) FROM (SELECT 1 {matches} ORDER BY f.rowid DESC "
                    "LIMIT ?)", (words, *params, RANKED_MATCHES + 1)).fetchone()[0]
                if many > RANKED_MATCHES:
                    return _newest_matches(conn, columns, matches, str(words), params, bound)
        return conn.execute(f"SELECT {columns} {matches} ORDER BY {_BM25}, m.refreshed_at "
                            "DESC, m.id LIMIT ?", (expression, *params, bound)).fetchall()

    def by_path(
        self,
        repo: str,
        path: str,
        *,
        lines: tuple[int, int] | None = None,
        limit: int = 50,
        category: str | None = None,
        tag: str | None = None,
    ) -> list[Memory]:
        with self._read("finding memories by path") as conn:
            return self._by_path(conn, repo, path, lines=lines, limit=limit,
                                 category=category, tag=tag)

    def _by_path(self, conn: sqlite3.Connection, repo: str, path: str, *,
                 lines: tuple[int, int] | None = None, limit: int = 50,
                 category: str | None = None, tag: str | None = None) -> list[Memory]:
        """``by_path`` on ``conn`` (in a transaction that holds it, or under the lock)."""
        bound = _sql_limit(limit)
        span = check_lines(lines)
        cited = "c.path = ?"
        cited_params: list[Any] = [path]
        if span is not None:
            cited += " AND c.line_start <= ? AND c.line_end >= ?"
            cited_params += [span[1], span[0]]
        kept, kept_params = _filtered("m.repo = ? AND m.status = 'active'", [repo],
                                      category, tag)
        few = _paths.gathered(conn, repo, category, tag)
        if few is not None:
            # A category or tag few memories have: those memories (by rowid: CROSS JOIN
            # keeps SQLite from walking every active memory of the repository instead),
            # each asked whether it cites the file (migration 8's index by seq), sorted.
            having, having_params = few
            newest = (f"SELECT m.seq FROM ({having}) g CROSS JOIN agent_memory m "
                      f"ON m.seq = g.seq WHERE {kept} AND EXISTS (SELECT 1 "
                      f"FROM agent_memory_citation c "
                      f"INDEXED BY agent_memory_citation_memory WHERE c.memory_seq = m.seq "
                      f"AND {cited}) ORDER BY m.created_at DESC, m.id LIMIT ?")
            return self._newest_rows(
                conn, newest, [*having_params, *kept_params, *cited_params, bound])
        # The citation index is ordered by the memory's creation time (migration 9), so
        # the newest memories citing the file are its first entries there, each a
        # look-up of its memory by rowid: the walk stops at the ``limit``-th memory
        # kept, however many memories cite the file. A memory citing the file twice
        # is one group (its entries are side by side: the id follows the time). For
        # lines few citations reach (past the end of the file, near it), the walk would
        # read every citation of the file: those that may reach them are read instead,
        # by their last line, and sorted (``_paths.few_reach``).
        index = "agent_memory_citation_newest"
        if span is not None and _paths.few_reach(conn, repo, path, span[0]):
            index = "agent_memory_citation_end"
        newest = (f"SELECT m.seq FROM agent_memory_citation c INDEXED BY "
                  f"{index} CROSS JOIN agent_memory m "
                  f"ON m.seq = c.memory_seq WHERE c.repo = ? AND {cited} AND {kept} "
                  f"GROUP BY c.memory_created_at, c.memory_id "
                  f"ORDER BY c.memory_created_at DESC, c.memory_id LIMIT ?")
        return self._newest_rows(conn, newest, [repo, *cited_params, *kept_params, bound])

    def _newest_rows(self, conn: sqlite3.Connection, newest: str,
                     params: list[Any]) -> list[Memory]:
        """The memories whose seqs ``newest`` selects (at most ``limit``: read by rowid),
        newest created first."""
        rows = conn.execute(f"SELECT {_M} FROM agent_memory m WHERE m.seq IN ({newest}) "
                            "ORDER BY m.created_at DESC, m.id", params).fetchall()
        return self._hydrate(conn, rows)

    def events(
        self,
        *,
        repo: str | None = None,
        memory_id: str | None = None,
        kinds: Sequence[EventKind] | None = None,
        limit: int | None = 1000,
        changes: bool = False,
        since: datetime | None = None,
        newest: bool = False,
        archived: bool = False,
    ) -> list[TelemetryEvent]:
        bound = _sql_limit(limit)
        clauses: list[str] = []
        params: list[Any] = []
        if repo is not None:
            clauses.append("repo = ?")
            params.append(repo)
        if memory_id is not None:
            clauses.append("memory_id = ?")
            params.append(memory_id)
        if kinds is not None:
            clauses.append("kind IN (SELECT value FROM json_each(?))")
            params.append(json.dumps([EventKind(k).value for k in kinds]))
        if changes:
            clauses.append(_admin.CHANGES)  # the partial indexes' own condition
        if since is not None:
            clauses.append("at >= ?")
            params.append(time_to_text(since))
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        table = "agent_memory_telemetry_archive" if archived else "agent_memory_telemetry"
        order = "at DESC, id DESC" if newest else "at, id"
        sql = (
            f"SELECT id, {', '.join(EVENT_COLUMNS)} FROM {table} {where} "
            f"ORDER BY {order} LIMIT ?"
        )
        with self._read("reading telemetry") as conn:
            return [event_from_values(r) for r in conn.execute(sql, (*params, bound))]

    def stats(self, repo: str) -> RepoStats:
        with self._read("counting memories") as conn:
            by_status = {s.value: 0 for s in Status}
            for status, count in conn.execute(
                "SELECT status, count(*) FROM agent_memory WHERE repo = ? GROUP BY status",
                (repo,),
            ):
                by_status[status] = count
            # Archived events still count: compaction moves them, it does not lose them.
            events = dict(conn.execute(
                    "SELECT kind, sum(n) FROM (SELECT kind, count(*) AS n "
                    "FROM agent_memory_telemetry WHERE repo = ?1 GROUP BY kind UNION ALL "
                    "SELECT kind, count(*) FROM agent_memory_telemetry_archive "
                    "WHERE repo = ?1 GROUP BY kind) GROUP BY kind ORDER BY kind",
                    (repo,),
                ))
            (forgotten,) = conn.execute(
                "SELECT count(*) FROM agent_memory_tombstone WHERE repo = ?", (repo,)
            ).fetchone()
            citations = conn.execute(
                "SELECT count(*) FROM agent_memory_citation c "
                "JOIN agent_memory m ON m.id = c.memory_id "
                "WHERE m.repo = ? AND m.status = 'active'",
                (repo,),
            ).fetchone()[0]
            # One scan of the repository's active memories for the quality counts; the
            # rules are Memory.validated and Memory.poor (models.py).
            unconfirmed, validated, poor = conn.execute(
                "SELECT count(*) FILTER (WHERE verified_ref IS NULL), "
                "count(*) FILTER (WHERE applied_count >= ? AND success_count + failure_count > 0"
                " AND success_count >= ? * (success_count + failure_count)), "
                "count(*) FILTER (WHERE success_count + failure_count >= ? "
                " AND success_count < ? * (success_count + failure_count)) "
                "FROM agent_memory WHERE repo = ? AND status = 'active'",
                (VALIDATED_MIN_APPLIED, VALIDATED_MIN_SUCCESS, POOR_MIN_FEEDBACK,
                 POOR_MAX_SUCCESS, repo),
            ).fetchone()
        return RepoStats(repo=repo, by_status=by_status, events=events, citations=citations,
                         unconfirmed=unconfirmed, validated=validated, poor=poor,
                         forgotten=forgotten)

    # ------------------------------------------------------------------ audit and hygiene

    def find(self, repo: str, where: MemoryFilter | None = None, *,
             limit: int | None = 50) -> list[Memory]:
        with self._read("listing memories") as conn:
            return self._find(conn, repo, where, limit)

    def _find(self, conn: sqlite3.Connection, repo: str, where: MemoryFilter | None,
              limit: int | None) -> list[Memory]:
        """``find`` on ``conn`` (in a transaction that holds it, or under the lock)."""
        return self._hydrate(conn, _admin.find(conn, repo, where or MemoryFilter(),
                                               _sql_limit(limit)))

    def match_ids(self, prefix: str, *, limit: int = 10) -> list[str]:
        with self._read("resolving an id") as conn:
            return _admin.match_ids(conn, prefix, limit)

    def forget(self, memory_ids: Sequence[str] | None = None, *, repo: str | None = None,
               by: str | None, reason: str, at: datetime | None = None) -> list[Tombstone]:
        # secure_delete: the freed space of the deleted rows is overwritten with zeros,
        # so the forgotten text does not linger in the file's free pages.
        with self._write("forgetting memories", secure_delete=True) as conn:
            return _admin.forget(conn, memory_ids, repo, by, reason, at or utcnow())

    def tombstones(self, *, repo: str | None = None, ids: Sequence[str] | None = None,
                   limit: int | None = 50) -> list[Tombstone]:
        bound = _sql_limit(limit)
        with self._read("reading tombstones") as conn:
            return _admin.tombstones(conn, repo, ids, bound)

    def archive_events(self, before: datetime) -> int:
        with self._write("archiving telemetry") as conn:
            return _admin.archive_events(conn, before, utcnow())

    def load(self, memories: Sequence[Memory], events: Sequence[TelemetryEvent],
             tombstones: Sequence[Tombstone] = ()) -> tuple[int, int, int]:
        check_load(memories, events, tombstones)
        with self._write("importing") as conn:
            return _admin.load(conn, memories, events, tombstones)

    def info(self) -> StoreInfo:
        with self._read("describing the store") as conn:
            return _admin.info(conn, self.path)

    # ------------------------------------------------------------------ compaction

    def compaction_counts(self, before: datetime) -> tuple[int, int]:
        """Citation rows without their memory, and events older than ``before``."""
        with self._read("planning a compaction") as conn:
            return _admin.compaction_counts(conn, before)

    def backup(self, target: Path) -> None:
        """A consistent copy at ``target`` (SQLite's online backup API)."""
        with self._read("backing up") as conn:
            try:
                _admin.backup(conn, target)
            except OSError as exc:
                raise StoreError(
                    f"cannot write the backup {target}: {exc.strerror or exc}") from exc

    def copy_into(self, other: SQLiteStore) -> None:
        """Make ``other`` a copy of this store in one write (SQLite's online backup API):
        its file stays where it is, so connections open on it, in any process, read the
        copy from their next query on, as they read any other writer's."""
        with self._read("copying") as conn, other._read("being replaced by a copy") as into:
            conn.backup(into)

    def prune(self) -> int:
        """Delete citation rows left without their memory; how many."""
        with self._write("pruning citations") as conn:
            return _admin.prune_citations(conn)

    def vacuum(self) -> None:
        """Merge the full-text index, rebuild the file, empty the write-ahead log."""
        with self._read("vacuuming") as conn:
            _admin.vacuum(conn)

    def read_view(self, query: ViewQuery) -> list[dict[str, Any]]:
        view = query.checked()
        sql, params = sql_select(query, "?", as_text)
        with self._read(f"reading {view.name}") as conn:
            cursor = conn.execute(sql, params)
            names = [d[0] for d in cursor.description]
            return [normalize_row(view, dict(zip(names, row, strict=True))) for row in cursor]

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                try:
                    conn.close()
                except sqlite3.Error as exc:
                    raise self._translate(exc, "closing") from exc

    # ------------------------------------------------------------------ internals

    def _open(self, create: bool) -> sqlite3.Connection:
        target = self.path
        if target != ":memory:" and not target.startswith("file:"):
            file = Path(target).expanduser()
            if not create and not file.exists():
                raise NotFound(f"there is no memory store at {file} (nothing was stored "
                               "there yet: `vmem store` creates it; `vmem where` names the "
                               "store in use)")
            _create_private(file)
            target = str(file)
            self.path = target
        try:
            return self._connect(target)
        except sqlite3.Error as exc:
            if target == ":memory:" or target.startswith("file:") or not _refused(exc):
                raise self._translate(exc, "opening") from exc
            try:  # a file or directory this user may not write: read it as it is
                return self._connect(_read_only_uri(target), read_only=True)
            except sqlite3.Error:
                raise self._translate(exc, "opening") from exc

    def _connect(self, target: str, *, read_only: bool = False) -> sqlite3.Connection:
        """A connection to ``target``, set up and migrated; closed again if that fails.
        ``read_only``: ``target`` is a read-only URI (no journal mode to set)."""
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(
                target,
                timeout=self.timeout,
                isolation_level=None,  # we issue BEGIN IMMEDIATE / COMMIT ourselves
                check_same_thread=False,  # created here, used under self._lock anywhere
                uri=target.startswith("file:"),
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            if not read_only:
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            # Up to 32 MiB of pages kept (the default is 2 MiB): a verification pass's
            # batch of 5,000 verdicts adds events all over the telemetry's indexes by
            # memory, and with the default every insert read its page back from the OS
            # (100,000 citations: 0.95 s of event inserts, 0.65 s with this). Pages are
            # held as they are read, so a small store never uses it all.
            conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            conn.execute("PRAGMA foreign_keys = ON")
            _migrate(conn, self.path, self.timeout)
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        return conn

    @contextmanager
    def _read(self, action: str) -> Iterator[sqlite3.Connection]:
        """The connection, under the lock, with sqlite3 errors translated."""
        with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreError(f"the memory store {self.path} is closed")
            try:
                yield conn
            except sqlite3.Error as exc:
                raise self._translate(exc, action) from exc

    @contextmanager
    def _write(self, action: str, *, secure_delete: bool = False
               ) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed if the block returns, rolled
        back (and the error re-raised, translated) if it raises anything.
        ``secure_delete``: what the transaction deletes is overwritten on disk."""
        with self._read(action) as conn:
            if secure_delete:
                conn.execute("PRAGMA secure_delete = ON")
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    _rollback(conn)
                    raise
            finally:
                if secure_delete:
                    conn.execute("PRAGMA secure_delete = OFF")

    def _insert_memory(
        self, conn: sqlite3.Connection, memory: Memory, rows: _MemoryRows
    ) -> None:
        memory_row, citation_rows = rows
        try:
            conn.execute(_INSERT_MEMORY, memory_row)
        except sqlite3.IntegrityError as exc:
            if "agent_memory.id" in str(exc):
                raise Conflict(f"memory {memory.id} already exists in {self.path}") from exc
            raise
        conn.executemany(_admin.INSERT_CITATION, citation_rows)

    def _select_many(self, conn: sqlite3.Connection, ids: list[str]) -> list[Memory]:
        rows = conn.execute(
            f"SELECT {_M} FROM agent_memory m "
            "WHERE m.id IN (SELECT value FROM json_each(?))",
            (json.dumps(ids),),
        ).fetchall()
        memories = {m.id: m for m in self._hydrate(conn, rows)}
        for memory_id in ids:
            if memory_id not in memories:
                raise NotFound(f"memory {memory_id} not found")
        return [memories[i] for i in ids]

    def _hydrate(self, conn: sqlite3.Connection, rows: list[Any]) -> list[Memory]:
        """Memories from their rows, with every citation loaded in one query."""
        if not rows:
            return []
        citations: dict[str, list[Citation]] = {row[0]: [] for row in rows}
        for row in conn.execute(_SELECT_CITATIONS, (json.dumps(list(citations)),)):
            citations[row[0]].append(citation_from_values(row))
        return [memory_from_values(row, citations[row[0]]) for row in rows]

    def _translate(self, exc: sqlite3.Error, action: str) -> StoreError:
        name = getattr(exc, "sqlite_errorname", "") or ""
        message = str(exc)
        if _busy(exc):
            return StoreError(
                f"the memory store {self.path} is locked by another process "
                f"(gave up after {self.timeout:g} s while {action}); try again"
            )
        if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")) or "not a database" in message:
            return StoreError(
                f"the memory store {self.path} is corrupt or not a SQLite database "
                f"({message}); move it aside to start a new one"
            )
        if name.startswith("SQLITE_READONLY") and os.path.exists(self.path):
            return ReadOnlyStore(
                f"the memory store {self.path} is read-only (this user may not write it or "
                f"its directory): nothing was written while {action}")
        if name.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_IOERR", "SQLITE_PERM")):
            return StoreError(
                f"cannot read or write the memory store {self.path} while {action}: {message}"
            )
        return StoreError(f"the memory store {self.path} failed while {action}: {message}")


# ---------------------------------------------------------------------- helpers

_MemoryRows = tuple[tuple[Any, ...], list[tuple[Any, ...]]]


def _memory_rows(memory: Memory) -> _MemoryRows:
    """All rows of a memory, computed before the transaction so it stays short."""
    return (
        memory_values(memory),
        [citation_values(memory.id, memory.repo, i, c) for i, c in enumerate(memory.citations)],
    )


def _newest_matches(conn: sqlite3.Connection, columns: str, matches: str, words: str,
                    params: list[Any], bound: int) -> list[Any]:
    """Search with more matches than bm25 ranks: those with every word in the subject,
    then in the subject or tags, then anywhere (bm25's column weights, in order), newest
    first in each; each query stops at ``bound`` rows. Their ``columns``."""
    found: dict[int, None] = {}
    for where in ("{subject} : ", "{subject tags} : ", ""):
        for (seq,) in conn.execute(
                f"SELECT m.seq {matches} ORDER BY f.rowid DESC LIMIT ?",
                (f"{where}({words})", *params, bound + len(found))):
            found.setdefault(seq)
        if len(found) >= bound:
            break
    return conn.execute(f"SELECT {columns} FROM json_each(?) AS j CROSS JOIN agent_memory m "
                        "ON m.seq = j.value ORDER BY j.key",
                        (json.dumps(list(found)[:bound]),)).fetchall()


#: An UPDATE of one memory: its SET clause, the clause's parameters, the memory's seq.
_Update = tuple[str, tuple[Any, ...], int]
#: What a transition changes of its memory's row (every field that ``_update`` reads
#: but the id): transitions alike in these have one SET clause.
_CHANGES = attrgetter(*(name for name in Transition.__slots__
                        if name not in ("memory_id", "expect", "expect_judged",
                                        "expect_citations", "requires", "citations",
                                        "events")))


def _cited(conn: sqlite3.Connection, memory_ids: Sequence[str]) -> dict[str, list[Cited]]:
    """The citations of ``memory_ids`` as ``Transition.cited`` names them (read only for
    the verdicts that carry ``expect_citations``): a memory without any is absent."""
    cited: dict[str, list[Cited]] = {}
    if memory_ids:
        for memory_id, path, line_start, line_end, snippet_hash in conn.execute(
                "SELECT memory_id, path, line_start, line_end, snippet_hash "
                "FROM agent_memory_citation WHERE memory_id IN (SELECT value FROM json_each(?)) "
                "ORDER BY memory_id, position", (json.dumps(list(dict.fromkeys(memory_ids))),)):
            cited.setdefault(memory_id, []).append((path, line_start, line_end, snippet_hash))
    return cited


def _update(values: dict[str, Any]) -> tuple[str, tuple[Any, ...]] | None:
    """The SET clause of a transition's UPDATE (``transition_values``) and its
    parameters, setting only the columns it changes (None: it changes none, only its
    events are written); what ``Transition.apply_to`` says in Python. A statement
    naming only what changes is a third cheaper than one that coalesces every column,
    and a pass's refreshes all share one."""
    sets: list[str] = []
    params: list[Any] = []

    def assign(column: str, value: Any, expression: str = "?") -> None:
        sets.append(f"{column} = {expression}")
        params.append(value)

    status = values["status"]
    if status is not None:
        assign("status", status)
    if status == "active":  # a revival clears the reason
        sets.append("invalid_reason = NULL")
    elif values["invalid_reason"] is not None:
        assign("invalid_reason", values["invalid_reason"])
    if values["unconfirm"]:
        sets += ["verified_commit = NULL", "verified_ref = NULL"]
    if values["demote"]:
        sets.append("promoted_to = NULL")
    for column in ("refreshed_at", "verified_commit", "verified_ref", "used_at",
                   "promoted_to", "superseded_by"):
        if values[column] is not None and not (values["unconfirm"]
                                               and column.startswith("verified_")):
            assign(column, values[column])
    for column, key in (("verification_count", "add_verifications"),
                        ("applied_count", "add_applications"),
                        ("success_count", "add_successes"),
                        ("failure_count", "add_failures")):
        if values[key]:
            assign(column, values[key], f"{column} + ?")
    if not sets:
        return None
    return ", ".join(sets), tuple(params)


def _run_updates(conn: sqlite3.Connection, updates: Sequence[_Update]) -> None:
    """Run ``updates`` in order. Consecutive ones that set the same values on different
    memories (a pass's refreshes: one time, one revision) are one statement over a JSON
    array of their row numbers: 33,000 one-row statements cost a pass about 0.3 s, a few
    statements of 5,000 rows a third of that. A memory updated twice in a row starts a
    new statement, so that its counters add up as the single updates would."""
    for (sets, params), group in groupby(updates, key=itemgetter(0, 1)):
        rows: dict[int, None] = {}
        for *_, seq in group:
            if seq in rows:
                _update_rows(conn, sets, params, rows)
                rows = {}
            rows[seq] = None
        _update_rows(conn, sets, params, rows)


def _update_rows(conn: sqlite3.Connection, sets: str, params: tuple[Any, ...],
                 rows: dict[int, None]) -> None:
    conn.execute(f"UPDATE agent_memory SET {sets} "
                 "WHERE seq IN (SELECT value FROM json_each(?))",
                 (*params, json.dumps(list(rows))))


def _check_transition(transition: Transition) -> None:
    """Validate a transition before any write happens (its events: ``events_values``)."""
    if transition.citations is not None:
        validate_citations(transition.citations, f"transition of memory {transition.memory_id}")
    transition.check()


def _filtered(where: str, params: list[Any], category: str | None,
              tag: str | None) -> tuple[str, list[Any]]:
    """``where`` narrowed to a category and a tag (``m`` is the memory row)."""
    if category is not None:
        where += " AND m.category = ?"
        params = [*params, category]
    if tag is not None:
        where += " AND EXISTS (SELECT 1 FROM json_each(m.tags) WHERE value = ?)"
        params = [*params, tag]
    return where, params


def _sql_limit(limit: int | None, where: str = "limit") -> int:
    bound = check_limit(limit, where)
    return -1 if bound is None else bound  # SQLite reads a negative LIMIT as "no limit"


def _rollback(conn: sqlite3.Connection) -> None:
    """Undo the open transaction; an error here must not hide the one that caused it."""
    if conn.in_transaction:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _create_private(file: Path) -> None:
    """Create the store's file (0600) and its directory (0700) when they do not exist.

    Memories quote other people's code and conventions, so a new store is readable by
    its owner only; SQLite gives the -wal and -shm files the database file's mode. An
    existing file or directory keeps the mode its owner chose."""
    try:
        file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise StoreError(
            f"cannot create the directory for the memory store {file}: {exc}"
        ) from exc
    try:
        os.close(os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        raise StoreError(f"cannot create the memory store {file}: {exc}") from exc


def _widen_status_check(conn: sqlite3.Connection, old: str, new: str) -> None:
    """Let ``agent_memory.status`` take the statuses ``new`` lists instead of ``old``.

    SQLite cannot alter a CHECK constraint; widening one (every row still passes) is
    the case its documentation allows doing by editing the stored schema, inside the
    migration's transaction: the text of the table's definition, then the schema
    version, so that every connection reloads it."""
    (sql,) = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'agent_memory'"
    ).fetchone()
    before, after = f"CHECK (status IN ({old}))", f"CHECK (status IN ({new}))"
    if before not in sql:
        raise StoreError("cannot widen the status check: the agent_memory table is not "
                         "as migration 1 made it")
    (version,) = conn.execute("PRAGMA schema_version").fetchone()
    conn.execute("PRAGMA writable_schema = ON")
    try:
        conn.execute("UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND "
                     "name = 'agent_memory'", (sql.replace(before, after),))
        conn.execute(f"PRAGMA schema_version = {int(version) + 1}")
    finally:
        conn.execute("PRAGMA writable_schema = OFF")


def _migrate(conn: sqlite3.Connection, path: str, timeout: float) -> None:
    """Apply the migrations this file lacks, each in its own write transaction.

    What is applied is read first, without a lock (in WAL mode a reader waits for no
    writer), so a file that is up to date opens without the write lock. A migration
    waits for the lock in slices of ``OPEN_LOCK_SLICE``, reading again between them:
    when another process applies it meanwhile, this one opens at once instead of
    queueing behind writers. (SQLite's busy handler serves waiters in no order and the
    longest waiter polls least often: one of eight processes opening a fresh file while
    the others wrote gave up after 5 s.) The slices together are bounded by ``timeout``,
    the wait of any write; past it, opening fails as locked."""
    deadline = time.monotonic() + timeout
    latest = MIGRATIONS[-1][0]
    conn.execute(f"PRAGMA busy_timeout = {int(min(OPEN_LOCK_SLICE, timeout) * 1000)}")
    try:
        while True:
            try:
                applied = _applied(conn)
                if applied and max(applied) > latest:
                    raise StoreError(
                        f"the memory store {path} has schema version {max(applied)}, newer "
                        f"than this verified-memory understands ({latest}); upgrade "
                        "verified-memory")
                missing = [m for m in MIGRATIONS if m[0] not in applied]
                if not missing:
                    return
                _apply_migration(conn, *missing[0])
            except sqlite3.OperationalError as exc:
                # Rolled back whole: waiting again, or finding it done, is safe.
                if not _busy(exc) or time.monotonic() >= deadline:
                    raise
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")


def _applied(conn: sqlite3.Connection) -> set[int]:
    """The versions of the migrations the file has (none before the first)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' "
                    "AND name = 'schema_migrations'").fetchone() is None:
        return set()
    return {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}


def _apply_migration(conn: sqlite3.Connection, version: int, name: str,
                     statements: tuple[Statement, ...]) -> None:
    """One migration in one write transaction, unless another process applied it while
    this one waited for the write lock."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        if version not in _applied(conn):
            for statement in statements:
                if callable(statement):
                    statement(conn)
                else:
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (version, name, time_to_text(utcnow())),
            )
        conn.execute("COMMIT")
    except BaseException:
        _rollback(conn)
        raise


def _refused(exc: sqlite3.Error) -> bool:
    """Whether opening failed because this user may not write the file or its directory
    (SQLite opens such a file read-only, then fails at the first write: the journal mode,
    a -shm file it cannot create)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM"))


def _read_only_uri(path: str) -> str:
    """A URI opening ``path`` read-only. Without its -wal file no connection is open on
    the file (SQLite removes it when the last one closes), and SQLite, unable to create
    one in a directory it may not write, reads the file only as immutable."""
    uri = f"file:{quote(os.path.abspath(path))}?mode=ro"
    return uri if os.path.exists(f"{path}-wal") else f"{uri}&immutable=1"


def _busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` is SQLite giving up on a lock another connection holds."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc)
