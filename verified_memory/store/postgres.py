"""``PostgresStore``: the ``MemoryStore`` on Postgres, for teams that share one database.

Why it is shaped like this:

- Every mutation is one call to a SQL function from ``sql/002_functions.sql``
  (``agent_memory_add``, ``_supersede``, ``_apply``, ``_log``), so it is atomic on the
  server, and the Supabase store runs exactly the same code through ``rpc()``. The
  supersede race is settled by a row lock: the second agent waits, then finds the old
  memory no longer active and gets ``Conflict``. The one exception is
  ``add_unless_duplicate`` (``MemoryService.store``): a transaction that takes an
  advisory lock on the repository, lists the memories the new one may repeat
  (``agent_memory_repeat_candidates``), asks ``decide``, then adds, so that processes
  storing one memory at once store it once. Supabase's optimistic add
  (``agent_memory_add_unless_changed``) takes the same lock.
- Memories travel as JSON in ``Memory.to_dict()`` shape, both ways; reads go through
  the ``agent_memory_full`` view, which returns a memory with its citations in one row.
- Search terms are computed here with the same tokenizer as SQLite's FTS5
  (``_rows.text_terms``) and stored as lexemes, so every store agrees on what matches.
- A ``psycopg_pool.ConnectionPool`` serves many threads; construction first connects
  once directly, so a wrong URL or password fails at once with the server's own words,
  and applies pending migrations (``migrate=False`` to skip, e.g. for a role without
  DDL rights on an already migrated database).
- Serialization failures and deadlocks are retried (the transaction was rolled back,
  so a retry is safe); every other psycopg error is translated (``translate``).

The helpers that build JSON payloads and read rows back are shared with
``store/supabase.py``; they import nothing from psycopg.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from verified_memory.config import redact, scrub
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
    Memory,
    MemoryFilter,
    RepoStats,
    Status,
    StoreInfo,
    TelemetryEvent,
    Tombstone,
    Transition,
)
from verified_memory.store._retry import retry_rolled_back
from verified_memory.store._rows import (
    EVENT_COLUMNS,
    MEMORY_COLUMNS,
    TOMBSTONE_COLUMNS,
    check_limit,
    check_lines,
    check_load,
    check_reason,
    event_from_row,
    event_values,
    memory_from_row,
    memory_values,
    query_terms,
    text_terms,
    time_to_text,
    tombstone_from_row,
    tombstone_values,
    transition_values,
    validate_citations,
    validate_memory,
    with_supersedes,
)
from verified_memory.store.base import CITING_LIMIT, ClosingStore, Decide
from verified_memory.store.views import ViewQuery, normalize_row, sql_select

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

__all__ = [
    "PostgresStore",
    "applied_flags",
    "event_payload",
    "find_params",
    "import_counts",
    "import_payload",
    "info_from_json",
    "memory_from_json",
    "memory_payload",
    "stats_from_json",
    "transition_payload",
    "translate_sqlstate",
]

T = TypeVar("T")

#: SQLSTATEs raised by the SQL functions (sql/002_functions.sql).
SQLSTATE_NOT_FOUND = "VM404"
SQLSTATE_CONFLICT = "VM409"

_EVENT_FIELDS = f"id, {', '.join(EVENT_COLUMNS)}"
#: The events an audit trail shows (``READ_KINDS`` left out), as the partial indexes of
#: 008 spell it.
CHANGES = "kind not in ('retrieved', 'checked')"


# --------------------------------------------------------------------------- payloads


def memory_payload(memory: Memory) -> dict[str, Any]:
    """A memory as the SQL functions take it: ``Memory.to_dict()`` with UTC times, plus
    the search terms every store derives the same way."""
    validate_memory(memory)
    payload = dict(zip(MEMORY_COLUMNS, memory_values(memory), strict=True))
    payload["tags"] = list(memory.tags)
    payload["citations"] = [c.to_dict() for c in memory.citations]
    payload["search_terms"] = {
        "subject": text_terms(memory.subject),
        "tags": text_terms(" ".join(memory.tags)),
        "fact": text_terms(memory.fact),
    }
    return payload


def event_payload(event: TelemetryEvent) -> dict[str, Any]:
    """An event as the SQL functions take it; ``ValidationError`` if it is not valid."""
    row = dict(zip(EVENT_COLUMNS, event_values(event), strict=True))
    row["detail"] = json.loads(row["detail"])  # strict JSON now: no NaN, no tuples
    return row


def events_payload(events: Sequence[TelemetryEvent]) -> list[dict[str, Any]]:
    return [event_payload(e) for e in events]


def transition_payload(transition: Transition) -> dict[str, Any]:
    """A transition as ``agent_memory_apply_demoting`` takes it (``None``: leave as it is)."""
    where = f"transition of memory {transition.memory_id}"
    if transition.citations is not None:
        validate_citations(transition.citations, where)
    transition.check()
    return transition_values(transition) | {
        "expect": Status(transition.expect).value,
        "expect_judged": transition.expect_judged,
        "expect_citations": None if transition.expect_citations is None
        else [list(c) for c in transition.expect_citations],
        "requires": None if transition.requires is None else {
            "memory_id": transition.requires[0], "status": transition.requires[1].value},
        "citations": [c.to_dict() for c in transition.citations]
        if transition.citations is not None
        else None,
        "events": events_payload(transition.events),
    }


def memory_from_json(row: Mapping[str, Any]) -> Memory:
    """A memory from an ``agent_memory_full`` row: a psycopg dict row (datetimes) or
    PostgREST JSON (ISO strings) alike."""
    citations = row["citations"]
    if isinstance(citations, str):
        citations = json.loads(citations)
    return memory_from_row(row, [Citation.from_dict(c) for c in citations or ()])


def applied_flags(results: Sequence[Any]) -> list[bool]:
    """``agent_memory_apply``'s answer as flags: booleans since
    ``005_lighter_verification_writes.sql``; a database still on 002 answers the memory
    (applied) or null (skipped)."""
    return [r is not None and r is not False for r in results]


def stats_from_json(repo: str, data: Mapping[str, Any] | None) -> RepoStats:
    """``RepoStats`` from ``agent_memory_stats``; every status present, in enum order."""
    data = data or {}
    counted = data.get("by_status") or {}
    by_status = {s.value: int(counted.get(s.value, 0)) for s in Status}
    events = {str(k): int(v) for k, v in sorted((data.get("events") or {}).items())}
    return RepoStats(
        repo=repo, by_status=by_status, events=events, citations=int(data.get("citations", 0)),
        unconfirmed=int(data.get("unconfirmed", 0)),
        validated=int(data.get("validated", 0)),
        poor=int(data.get("poor", 0)),
        forgotten=int(data.get("forgotten", 0)),
    )


def find_params(repo: str, where: MemoryFilter, limit: int | None) -> dict[str, Any]:
    """``agent_memory_find``'s arguments, by name (``p_...``)."""
    return {"p_repo": repo,
            "p_status": None if where.status is None else Status(where.status).value,
            "p_category": where.category, "p_tag": where.tag, "p_path": where.path,
            "p_created_by": where.created_by,
            "p_since": None if where.since is None else time_to_text(where.since),
            "p_limit": limit}


def import_payload(memories: Sequence[Memory], events: Sequence[TelemetryEvent],
                   tombstones: Sequence[Tombstone]) -> dict[str, Any]:
    """``agent_memory_import``'s arguments, checked (``check_load``)."""
    check_load(memories, events, tombstones)
    return {"p_memories": [memory_payload(m) for m in memories],
            "p_events": events_payload(events),
            "p_tombstones": [dict(zip(TOMBSTONE_COLUMNS, tombstone_values(t), strict=True))
                             for t in tombstones]}


def import_counts(data: Any) -> tuple[int, int, int]:
    if not isinstance(data, dict):
        raise StoreError(f"agent_memory_import answered {type(data).__name__}; is the "
                         "database migrated?")
    return int(data["memories"]), int(data["events"]), int(data["tombstones"])


def info_from_json(kind: str, location: str, data: Mapping[str, Any] | None) -> StoreInfo:
    """``StoreInfo`` from ``agent_memory_info``."""
    data = data or {}
    size = data.get("size_bytes")
    version = data.get("schema_version")
    return StoreInfo(kind=kind, location=location,
                     schema_version=None if version is None else str(version),
                     size_bytes=None if size is None else int(size),
                     memories=int(data.get("memories", 0)),
                     forgotten=int(data.get("forgotten", 0)),
                     events=int(data.get("events", 0)),
                     archived_events=int(data.get("archived_events", 0)),
                     repos=int(data.get("repos", 0)))


def translate_sqlstate(
    sqlstate: str | None, message: str, action: str
) -> VerifiedMemoryError:
    """Our error for a server error code; shared by the Postgres and Supabase stores."""
    code = sqlstate or ""
    if code == SQLSTATE_NOT_FOUND:
        return NotFound(message)
    if code == SQLSTATE_CONFLICT:
        return Conflict(message)
    if code == "23505":  # unique_violation: an id that is already taken
        return Conflict(f"{message} (while {action})")
    if code.startswith("22") or code in {"23502", "23503", "23514", "23P01"}:
        return ValidationError(f"rejected by the database while {action}: {message}")
    if code == "42501":
        return StoreError(f"permission denied while {action}: {message}")
    if code.startswith("08") or code in {"57P01", "57P02", "57P03", "53300"}:
        return StoreError(f"the database is unreachable while {action}: {message}")
    if code in {"42P01", "42883", "PGRST202", "PGRST205"}:
        return StoreError(
            f"the database is missing verified-memory's tables or functions while "
            f"{action} ({message}); run `vmem db migrate`"
        )
    return StoreError(f"the database failed while {action}: {message}")


# --------------------------------------------------------------------------- the store


class PostgresStore(ClosingStore):
    """A ``MemoryStore`` in a Postgres database (self-hosted, or Supabase's by URL).

    ``prepare=False`` turns server-side prepared statements off, as transaction-mode
    poolers (PgBouncer, Supabase's port 6543) require.
    """

    def __init__(
        self,
        url: str,
        *,
        migrate: bool = True,
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = 30.0,
        prepare: bool = True,
        pool: ConnectionPool[Any] | None = None,
    ) -> None:
        """Connect to ``url`` (and apply pending migrations unless ``migrate=False``).

        ``pool``: an open ``psycopg_pool.ConnectionPool`` to share with other code; the
        store then uses it instead of opening its own, and leaves it open on ``close``.
        """
        self.url = url
        self._lock = threading.Lock()
        self._closed = False
        self._owns_pool = pool is None
        psycopg = _psycopg()
        from psycopg_pool import ConnectionPool

        # Autocommit: every operation is one statement (one SQL function call or one
        # query), atomic on its own; an explicit transaction would only add a round trip.
        kwargs: dict[str, Any] = {"autocommit": True}
        if not prepare:
            kwargs["prepare_threshold"] = None
        if pool is not None:
            self._pool: ConnectionPool[Any] = pool
            if migrate:
                try:
                    with pool.connection() as conn:
                        self._migrate(conn)
                except psycopg.Error as exc:
                    raise self._translate(exc, "migrating") from exc
            return
        try:
            with psycopg.connect(url, connect_timeout=max(1, int(timeout)), **kwargs) as conn:
                if migrate:
                    self._migrate(conn)
        except psycopg.Error as exc:
            raise self._translate(exc, "connecting") from exc
        self._pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            kwargs=kwargs,
            open=True,
            name="verified-memory",
        )

    def __repr__(self) -> str:
        return f"PostgresStore({redact(self.url)!r})"

    # ------------------------------------------------------------------ writes

    def add(self, memory: Memory, events: Sequence[TelemetryEvent] = ()) -> None:
        payload = memory_payload(memory)
        event_rows = events_payload(events)
        self._run(
            "adding a memory",
            lambda cur: cur.execute(
                "select agent_memory_add(%s, %s)", (_jsonb(payload), _jsonb(event_rows))
            ),
        )

    def add_unless_duplicate(self, memory: Memory, decide: Decide) -> bool:
        payload = memory_payload(memory)

        def body(cur: psycopg.Cursor[Any]) -> bool:
            with cur.connection.transaction():
                # Every guarded add to the repository waits here for the one before it
                # to commit; read committed, the look-ups below then see its memory.
                cur.execute(ADD_LOCK_SQL, (ADD_LOCK, memory.repo))
                # ``repeat_candidates`` in one query (sql/012, which Supabase lists by).
                cur.execute(CANDIDATES_SQL, (_jsonb(payload), CITING_LIMIT))
                events = decide([memory_from_json(r) for r in cur.fetchall()])
                if events is None:
                    return False
                cur.execute("select agent_memory_add(%s, %s)",
                            (_jsonb(payload), _jsonb(events_payload(events))))
                return True

        return self._run("adding a memory", body)

    def supersede(
        self, old_id: str, new: Memory, events: Sequence[TelemetryEvent] = ()
    ) -> None:
        payload = memory_payload(with_supersedes(new, old_id))
        event_rows = events_payload(events)
        self._run(
            "superseding a memory",
            lambda cur: cur.execute(
                "select agent_memory_supersede(%s, %s, %s)",
                (old_id, _jsonb(payload), _jsonb(event_rows)),
            ),
        )

    def apply(self, transitions: Sequence[Transition]) -> list[bool]:
        payload = [transition_payload(t) for t in transitions]
        if not payload:
            return []

        def call(cur: psycopg.Cursor[Any]) -> list[Any]:
            cur.execute("select agent_memory_apply_demoting(%s) as results", (_jsonb(payload),))
            row = cur.fetchone()
            return list(row["results"]) if row else []

        results = self._run("applying transitions", call)
        return applied_flags(results)

    def log(self, events: Sequence[TelemetryEvent]) -> None:
        rows = events_payload(events)
        if not rows:
            return
        self._run(
            "logging telemetry",
            lambda cur: cur.execute("select agent_memory_log(%s)", (_jsonb(rows),)),
        )

    # ------------------------------------------------------------------ reads

    def get(self, memory_id: str) -> Memory:
        return self.get_many([memory_id])[0]

    def get_many(self, memory_ids: Sequence[str]) -> list[Memory]:
        ids = list(memory_ids)
        if not ids:
            return []
        rows = self._fetch(
            "reading memories",
            "select * from agent_memory_full where id = any(%s)",
            (ids,),
        )
        found = {row["id"]: memory_from_json(row) for row in rows}
        for memory_id in ids:
            if memory_id not in found:
                raise NotFound(f"memory {memory_id} not found")
        return [found[i] for i in ids]

    def recent(
        self, repo: str, *, limit: int | None = 50, status: Status | None = Status.ACTIVE,
        category: str | None = None, tag: str | None = None,
    ) -> list[Memory]:
        bound = check_limit(limit)
        where, params = "repo = %s", [repo]
        for clause, value in (("status = %s", None if status is None else Status(status).value),
                              ("category = %s", category), ("%s = any(tags)", tag)):
            if value is not None:
                where += f" and {clause}"
                params.append(value)
        sql = (f"select * from agent_memory_full where {where} "
               "order by refreshed_at desc, id limit %s")
        return [memory_from_json(r) for r in self._fetch("listing recent memories", sql,
                                                         (*params, bound))]

    def search(self, repo: str, query: str, *, limit: int = 20, category: str | None = None,
               tag: str | None = None) -> list[Memory]:
        bound = check_limit(limit)
        terms = query_terms(query)
        if not terms or bound == 0:
            return []
        rows = self._fetch(
            "searching memories",
            "select * from agent_memory_search(%s, %s, %s, %s, %s)",
            (repo, terms, bound, category, tag),
        )
        return [memory_from_json(r) for r in rows]

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
        rows = self._fetch("finding memories by path", BY_PATH_SQL,
                           _by_path_params(repo, path, lines, limit, category, tag))
        return [memory_from_json(r) for r in rows]

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
        bound = check_limit(limit)
        clauses: list[str] = []
        params: list[Any] = []
        for clause, value in (("repo = %s", repo), ("memory_id = %s", memory_id),
                              ("kind = any(%s)", None if kinds is None
                               else [EventKind(k).value for k in kinds]),
                              ("at >= %s", since)):
            if value is not None:
                clauses.append(clause)
                params.append(value)
        if changes:
            clauses.append(CHANGES)  # the partial indexes' own condition
        where = f" where {' and '.join(clauses)}" if clauses else ""
        table = "agent_memory_telemetry_archive" if archived else "agent_memory_telemetry"
        order = "at desc, id desc" if newest else "at, id"
        rows = self._fetch(
            "reading telemetry",
            f"select {_EVENT_FIELDS} from {table}{where} order by {order} limit %s",
            (*params, bound),
        )
        return [event_from_row(r) for r in rows]

    def stats(self, repo: str) -> RepoStats:
        rows = self._fetch("counting memories", "select agent_memory_stats(%s) as s", (repo,))
        return stats_from_json(repo, rows[0]["s"] if rows else None)

    def read_view(self, query: ViewQuery) -> list[dict[str, Any]]:
        view = query.checked()
        sql, params = sql_select(query, "%s", lambda _kind, value: value)
        return [normalize_row(view, row) for row in self._fetch(f"reading {view.name}", sql,
                                                                params)]

    def count(self, repo: str, *, status: Status | None = Status.ACTIVE,
              at_most: int | None = None) -> int:
        where, params = ("repo = %s", (repo,)) if status is None else (
            "repo = %s and status = %s", (repo, Status(status).value))
        rows = self._fetch("counting memories",
                           f"select count(*) as n from (select 1 from agent_memory "
                           f"where {where} limit %s) as counted",
                           (*params, check_limit(at_most, "at_most")))
        return int(rows[0]["n"])

    def oldest_never_applied(self, repo: str, limit: int) -> list[Memory]:
        sql = ("select * from agent_memory_full where repo = %s and status = 'active' "
               "and applied_count = 0 order by coalesce(used_at, created_at), id limit %s")
        return [memory_from_json(r) for r in self._fetch(
            "finding memories never applied", sql, (repo, check_limit(limit)))]

    def repos(self) -> list[str]:
        """Repositories that have memories, sorted."""
        rows = self._fetch(
            "listing repositories", "select repo from agent_memory_repos order by repo", ()
        )
        return [str(r["repo"]) for r in rows]

    # ------------------------------------------------------------------ audit and hygiene

    def find(self, repo: str, where: MemoryFilter | None = None, *,
             limit: int | None = 50) -> list[Memory]:
        params = find_params(repo, where or MemoryFilter(), check_limit(limit))
        rows = self._fetch("listing memories", FIND_SQL, params)
        return [memory_from_json(r) for r in rows]

    def match_ids(self, prefix: str, *, limit: int = 10) -> list[str]:
        rows = self._fetch("resolving an id", "select id from agent_memory_match_ids(%s, %s)",
                           (prefix, limit))
        return [str(r["id"]) for r in rows]

    def forget(self, memory_ids: Sequence[str] | None = None, *, repo: str | None = None,
               by: str | None, reason: str, at: datetime | None = None) -> list[Tombstone]:
        rows = self._fetch(
            "forgetting memories",
            "select * from agent_memory_forget(%s, %s, %s, %s, %s)",
            (None if memory_ids is None else list(memory_ids), repo, by,
             check_reason(reason), at))
        return [tombstone_from_row(r) for r in rows]

    def tombstones(self, *, repo: str | None = None, ids: Sequence[str] | None = None,
                   limit: int | None = 50) -> list[Tombstone]:
        clauses, params = [], []
        for clause, value in (("repo = %s", repo),
                              ("id = any(%s)", None if ids is None else list(ids))):
            if value is not None:
                clauses.append(clause)
                params.append(value)
        where = f" where {' and '.join(clauses)}" if clauses else ""
        rows = self._fetch(
            "reading tombstones",
            f"select {', '.join(TOMBSTONE_COLUMNS)} from agent_memory_tombstone{where} "
            "order by forgotten_at desc, id limit %s", (*params, check_limit(limit)))
        return [tombstone_from_row(r) for r in rows]

    def archive_events(self, before: datetime) -> int:
        rows = self._fetch("archiving telemetry",
                           "select agent_memory_archive_events(%s) as n", (before,))
        return int(rows[0]["n"])

    def load(self, memories: Sequence[Memory], events: Sequence[TelemetryEvent],
             tombstones: Sequence[Tombstone] = ()) -> tuple[int, int, int]:
        payload = import_payload(memories, events, tombstones)
        rows = self._fetch("importing", IMPORT_SQL,
                           [*(_jsonb(payload[k]) for k in (
                               "p_memories", "p_events", "p_tombstones")), IMPORT_LOCK])
        return import_counts(rows[0]["counts"])

    def info(self) -> StoreInfo:
        rows = self._fetch("describing the store", "select agent_memory_info() as info", ())
        return info_from_json("postgres", redact(self.url), rows[0]["info"])

    # ------------------------------------------------------------------ compaction

    def compaction_counts(self, before: datetime) -> tuple[int, int]:
        """Citation rows without their memory (none: a foreign key cascades), and events
        older than ``before``."""
        rows = self._fetch(
            "planning a compaction",
            "select (select count(*) from agent_memory_citation c where not exists "
            "(select from agent_memory m where m.id = c.memory_id)) as orphans, "
            "(select count(*) from agent_memory_telemetry where at < %s) as old", (before,))
        return int(rows[0]["orphans"]), int(rows[0]["old"])

    def prune(self) -> int:
        """Citation rows without their memory: none can exist (the foreign key cascades)."""
        return 0

    def vacuum(self) -> None:
        """``VACUUM (ANALYZE)`` the tables: the space of deleted rows (forgotten text
        among them) is made reusable and the planner's statistics are fresh. Needs the
        tables' owner."""
        def body(cur: psycopg.Cursor[Any]) -> None:
            cur.execute("vacuum (analyze) agent_memory, agent_memory_citation, "
                        "agent_memory_telemetry, agent_memory_telemetry_archive, "
                        "agent_memory_tombstone")

        self._run("vacuuming", body)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._owns_pool:
            self._pool.close()

    # ------------------------------------------------------------------ internals

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        from verified_memory.store.migrate import (
            load_migrations,
            migrate_connection,
            pending_versions,
        )

        if pending_versions(conn, load_migrations()):
            migrate_connection(conn)

    @contextmanager
    def _cursor(self, action: str) -> Iterator[psycopg.Cursor[Any]]:
        """A dict-row cursor on a pooled (autocommit) connection. psycopg errors are left
        to _run."""
        from psycopg.rows import dict_row
        from psycopg_pool import PoolClosed, PoolTimeout

        if self._closed:
            raise StoreError(f"{self!r} is closed")
        try:
            with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
                yield cur
        except PoolTimeout as exc:
            raise StoreError(
                f"no database connection became available while {action} "
                f"({redact(self.url)}): {scrub(str(exc), self.url)}"
            ) from exc
        except PoolClosed as exc:
            raise StoreError(f"{self!r} is closed") from exc

    def _run(self, action: str, body: Callable[[psycopg.Cursor[Any]], T]) -> T:
        """Run ``body`` in a transaction, retrying deadlocks and serialization failures."""
        psycopg = _psycopg()

        def attempt() -> T:
            with self._cursor(action) as cur:
                return body(cur)

        try:
            return retry_rolled_back(attempt, lambda exc: getattr(exc, "sqlstate", None))
        except psycopg.Error as exc:
            raise self._translate(exc, action) from exc

    def _fetch(self, action: str, sql: str,
               params: Sequence[Any] | Mapping[str, Any]) -> list[dict[str, Any]]:
        def body(cur: psycopg.Cursor[Any]) -> list[dict[str, Any]]:
            cur.execute(sql.encode(), params)
            return list(cur.fetchall())

        return self._run(action, body)

    def _translate(self, exc: BaseException, action: str) -> VerifiedMemoryError:
        diag = getattr(exc, "diag", None)
        message = (getattr(diag, "message_primary", None) if diag else None) or str(exc)
        message = scrub(message, self.url)  # libpq may echo a piece of the string
        sqlstate = getattr(exc, "sqlstate", None)
        if sqlstate is None:  # no server answer: could not connect, or the link broke
            return StoreError(
                f"cannot reach the database {redact(self.url)} while {action}: "
                f"{message.strip()}"
            )
        return translate_sqlstate(sqlstate, message.strip(), action)


#: Imports take this transaction-level advisory lock first, so that a second import of
#: the same file waits for the first to commit and then skips what it wrote: without
#: it, both found nothing there and the second failed on the first's primary keys.
IMPORT_LOCK = 0x766D656D  # "vmem"
#: The lock in FROM is taken before the function runs; the function's own statements
#: (plpgsql, read committed) then see what the import before it committed.
IMPORT_SQL = ("select agent_memory_import(%s, %s, %s) as counts "
              "from pg_advisory_xact_lock(%s) as serialised")

#: A guarded add (``add_unless_duplicate``) takes this transaction-level advisory lock
#: on its repository (the two-key form: a key space apart from ``IMPORT_LOCK``'s), so
#: that the duplicate check and the insert of two processes storing one memory do not
#: interleave. Only guarded adds take it: reads and other writes never wait for it.
#: Supabase's guarded add (``agent_memory_add_unless_changed``, sql/012) takes it too,
#: spelled there as the number it is.
ADD_LOCK = 0x766D6164  # "vmad"
ADD_LOCK_SQL = "select pg_advisory_xact_lock(%s::integer, hashtext(%s))"
#: The memories a new one may repeat (``base.repeat_candidates``, in SQL: sql/012).
CANDIDATES_SQL = "select * from agent_memory_repeat_candidates(%s, %s)"
BY_PATH_SQL = "select * from agent_memory_by_path(%s, %s, %s, %s, %s, %s, %s)"
FIND_SQL = ("select * from agent_memory_find(%(p_repo)s, %(p_status)s, %(p_category)s, "
            "%(p_tag)s, %(p_path)s, %(p_created_by)s, %(p_since)s, %(p_limit)s)")


def _by_path_params(repo: str, path: str, lines: tuple[int, int] | None, limit: int,
                    category: str | None = None, tag: str | None = None) -> tuple[Any, ...]:
    """``BY_PATH_SQL``'s parameters, checked."""
    bound = check_limit(limit)
    span = check_lines(lines)
    start, end = span if span is not None else (None, None)
    return (repo, path, start, end, bound, category, tag)


def _jsonb(value: Any) -> Any:
    from psycopg.types.json import Jsonb

    return Jsonb(value)


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401 - the pool is part of the extra
    except ImportError as exc:
        raise MissingDependency("psycopg", "postgres") from exc
    return psycopg
