"""``SupabaseStore``: the ``MemoryStore`` over Supabase's REST API (PostgREST).

Why it is shaped like this:

- Reads are PostgREST table queries on the ``agent_memory_full`` view (a memory with
  its citations in one row), ``agent_memory_telemetry`` and ``agent_memory_repos``;
  ranked search, path look-ups and counts are read-only SQL functions called through
  ``rpc()``. Mutations are ``rpc()`` calls to the same SQL functions ``PostgresStore``
  calls (``sql/002_functions.sql``), so atomicity and the supersede race are settled in
  the database, not over HTTP. The duplicate check of ``MemoryService.store`` is a
  similarity of claims computed in Python, and no transaction spans two REST calls, so
  ``add_unless_duplicate`` is optimistic: it lists the memories the new one may repeat,
  decides, and asks ``agent_memory_add_unless_changed`` (``sql/012``) to add only if
  the database, listing them again behind ``PostgresStore``'s lock, finds the same
  ones; if a rival's memory landed meanwhile, it decides again over the fresh list.
- The same JSON payloads and row parsing as ``PostgresStore`` (imported from it), so a
  memory reads back identically from either.
- Supabase caps a response at ``max_rows`` (1000 by default) without saying so, so
  reads that may return more are fetched in pages.
- With the service key the store sees every repository; with a user's JWT (an
  ``Authorization`` header) row-level security limits it to the repositories in the
  user's ``app_metadata.repos`` (``sql/003_rls.sql``).
- The client is injected (``SupabaseStore(client)``), so tests pass one whose HTTP goes
  through ``httpx.MockTransport``; ``from_settings`` builds the real one.
- No postgrest or httpx exception reaches a caller: ``_translate`` maps the error code
  PostgREST forwards from Postgres onto ``verified_memory.errors``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from verified_memory.config import Settings
from verified_memory.errors import (
    Conflict,
    MissingDependency,
    NotFound,
    StoreError,
    ValidationError,
    VerifiedMemoryError,
)
from verified_memory.models import (
    READ_KINDS,
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
    TOMBSTONE_COLUMNS,
    check_limit,
    check_lines,
    check_reason,
    event_from_row,
    query_terms,
    time_to_text,
    tombstone_from_row,
    with_supersedes,
)
from verified_memory.store.base import CITING_LIMIT, ClosingStore, Decide
from verified_memory.store.postgres import (
    applied_flags,
    events_payload,
    find_params,
    import_counts,
    import_payload,
    info_from_json,
    memory_from_json,
    memory_payload,
    stats_from_json,
    transition_payload,
    translate_sqlstate,
)
from verified_memory.store.views import ViewQuery, as_text, normalize_row

if TYPE_CHECKING:
    import httpx
    from supabase import Client

__all__ = ["SupabaseStore"]

T = TypeVar("T")

#: How many times ``add_unless_duplicate`` decides, while rivals' memories keep landing
#: between its listing and its add, before it gives up (each time one lands: a rival's
#: add won, so a few times is already a crowd).
ADD_ATTEMPTS = 5
#: Ids per ``in.(...)`` filter: keeps URLs far below proxies' length limits.
ID_CHUNK = 100
_EVENT_FIELDS = ",".join(("id", *EVENT_COLUMNS))
_READS = sorted(k.value for k in READ_KINDS)


class SupabaseStore(ClosingStore):
    """A ``MemoryStore`` in a Supabase project, through its REST API."""

    def __init__(self, client: Client, *, page_size: int = 1000) -> None:
        """``client`` is a ``supabase.Client`` (the caller keeps ownership of it);
        ``page_size`` must not exceed the project's max rows (1000 unless changed)."""
        if page_size < 1:
            raise ValidationError(f"page_size must be at least 1, got {page_size}")
        self._client = client
        self._page = page_size
        self._http: httpx.Client | None = None  # ours to close (see connect)
        self._closed = False
        self._lock = threading.Lock()

    @classmethod
    def connect(
        cls,
        url: str,
        key: str,
        *,
        access_token: str | None = None,
        http_client: httpx.Client | None = None,
        retry: bool = True,
        timeout: float = 30.0,
        page_size: int = 1000,
    ) -> SupabaseStore:
        """A store for the project at ``url`` with API ``key`` (service or anon key).

        ``access_token``: a signed-in user's JWT, whose ``app_metadata.repos`` then
        decides which repositories this store sees and writes.
        """
        try:
            import supabase  # noqa: F401 - only to name the extra when it is missing
        except ImportError as exc:
            raise MissingDependency("supabase", "supabase") from exc
        from supabase import create_client
        from supabase.lib.client_options import DEFAULT_HEADERS, SyncClientOptions
        headers = dict(DEFAULT_HEADERS)
        if access_token:
            headers["Authorization"] = f"Bearer {access_token}"
        import httpx

        owned = http_client is None
        # Our own httpx client carries the timeout (supabase-py deprecated its own knob)
        # and is closed with the store.
        http = httpx.Client(timeout=timeout) if http_client is None else http_client
        options = SyncClientOptions(
            headers=headers,
            postgrest_client_retry=retry,
            auto_refresh_token=False,
            persist_session=False,
            httpx_client=http,
        )
        try:
            client = create_client(url, key, options=options)
        except Exception as exc:  # SupabaseException: a malformed URL or key
            if owned:
                http.close()
            raise ValidationError(f"cannot use Supabase at {url!r}: {exc}") from exc
        store = cls(client, page_size=page_size)
        store._http = http if owned else None
        return store

    @classmethod
    def from_settings(cls, settings: Settings) -> SupabaseStore:
        """The store ``SUPABASE_URL`` and ``SUPABASE_KEY`` name."""
        if not settings.supabase_url or not settings.supabase_key:
            raise ValidationError("SUPABASE_URL and SUPABASE_KEY must both be set")
        return cls.connect(settings.supabase_url, settings.supabase_key)

    def __repr__(self) -> str:
        return f"SupabaseStore({str(getattr(self._client, 'supabase_url', '?'))!r})"

    # ------------------------------------------------------------------ writes

    def add(self, memory: Memory, events: Sequence[TelemetryEvent] = ()) -> None:
        params = {"p_memory": memory_payload(memory), "p_events": events_payload(events)}
        self._rpc("adding a memory", "agent_memory_add", params)

    def add_unless_duplicate(self, memory: Memory, decide: Decide) -> bool:
        """``base.add_unless_duplicate`` in two calls: the candidates, then an add that
        the database makes only if they are still the ones ``decide`` saw."""
        payload = memory_payload(memory)
        listing = {"p_memory": payload, "p_limit": CITING_LIMIT}
        for _ in range(ADD_ATTEMPTS):
            seen = [memory_from_json(r) for r in self._pages(
                "finding the memories it may repeat",
                lambda: self._client.rpc("agent_memory_repeat_candidates", listing), None)]
            events = decide(seen)
            if events is None:
                return False
            added = self._rpc("adding a memory", "agent_memory_add_unless_changed", {
                **listing, "p_events": events_payload(events), "p_seen": [m.id for m in seen]})
            if not isinstance(added, bool):
                raise StoreError(f"agent_memory_add_unless_changed answered "
                                 f"{type(added).__name__}; is the database migrated?")
            if added:
                return True
        raise Conflict(f"could not store the memory in {memory.repo}: the memories it may "
                       f"repeat changed {ADD_ATTEMPTS} times while it was stored; try again")

    def supersede(
        self, old_id: str, new: Memory, events: Sequence[TelemetryEvent] = ()
    ) -> None:
        params = {
            "p_old_id": old_id,
            "p_new": memory_payload(with_supersedes(new, old_id)),
            "p_events": events_payload(events),
        }
        self._rpc("superseding a memory", "agent_memory_supersede", params)

    def apply(self, transitions: Sequence[Transition]) -> list[bool]:
        payload = [transition_payload(t) for t in transitions]
        if not payload:
            return []
        data = self._rpc("applying transitions", "agent_memory_apply_demoting",
                         {"p_transitions": payload})
        if not isinstance(data, list) or len(data) != len(payload):
            raise StoreError(
                f"agent_memory_apply_demoting answered {type(data).__name__} for {len(payload)} "
                "transitions; is the database migrated?"
            )
        return applied_flags(data)

    def log(self, events: Sequence[TelemetryEvent]) -> None:
        rows = events_payload(events)
        if rows:
            self._rpc("logging telemetry", "agent_memory_log", {"p_events": rows})

    # ------------------------------------------------------------------ reads

    def get(self, memory_id: str) -> Memory:
        return self.get_many([memory_id])[0]

    def get_many(self, memory_ids: Sequence[str]) -> list[Memory]:
        ids = list(memory_ids)
        found: dict[str, Memory] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), ID_CHUNK):
            chunk = unique[start : start + ID_CHUNK]

            def query(chunk: list[str] = chunk) -> Any:
                return self._table("agent_memory_full").select("*").in_("id", chunk)

            rows = self._query("reading memories", query)
            found.update((row["id"], memory_from_json(row)) for row in rows)
        for memory_id in ids:
            if memory_id not in found:
                raise NotFound(f"memory {memory_id} not found")
        return [found[i] for i in ids]

    def recent(
        self, repo: str, *, limit: int | None = 50, status: Status | None = Status.ACTIVE,
        category: str | None = None, tag: str | None = None,
    ) -> list[Memory]:
        bound = check_limit(limit)

        def query() -> Any:
            q = self._table("agent_memory_full").select("*").eq("repo", repo)
            if status is not None:
                q = q.eq("status", Status(status).value)
            if category is not None:
                q = q.eq("category", category)
            if tag is not None:
                q = q.contains("tags", [tag])
            return q.order("refreshed_at", desc=True).order("id")

        rows = self._pages("listing recent memories", query, bound)
        return [memory_from_json(r) for r in rows]

    def search(self, repo: str, query: str, *, limit: int = 20, category: str | None = None,
               tag: str | None = None) -> list[Memory]:
        bound = check_limit(limit)
        terms = query_terms(query)
        if not terms or bound == 0:
            return []
        params = {"p_repo": repo, "p_terms": terms, "p_limit": bound,
                  "p_category": category, "p_tag": tag}
        rows = self._pages(
            "searching memories",
            lambda: self._client.rpc("agent_memory_search", params),
            bound,
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
        bound = check_limit(limit)
        span = check_lines(lines)
        params = {
            "p_repo": repo,
            "p_path": path,
            "p_line_start": span[0] if span else None,
            "p_line_end": span[1] if span else None,
            "p_limit": bound,
            "p_category": category,
            "p_tag": tag,
        }
        rows = self._pages(
            "finding memories by path",
            lambda: self._client.rpc("agent_memory_by_path", params),
            bound,
        )
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
        wanted = None if kinds is None else [EventKind(k).value for k in kinds]
        if wanted == []:
            return []
        table = "agent_memory_telemetry_archive" if archived else "agent_memory_telemetry"

        def query() -> Any:
            q = self._table(table).select(_EVENT_FIELDS)
            if repo is not None:
                q = q.eq("repo", repo)
            if memory_id is not None:
                q = q.eq("memory_id", memory_id)
            if wanted is not None:
                q = q.in_("kind", wanted)
            if changes:
                q = q.not_.in_("kind", _READS)
            if since is not None:
                q = q.gte("at", time_to_text(since))
            return q.order("at", desc=newest).order("id", desc=newest)

        return [event_from_row(r) for r in self._pages("reading telemetry", query, bound)]

    def stats(self, repo: str) -> RepoStats:
        data = self._rpc("counting memories", "agent_memory_stats", {"p_repo": repo})
        return stats_from_json(repo, data if isinstance(data, dict) else None)

    def read_view(self, query: ViewQuery) -> list[dict[str, Any]]:
        view = query.checked()
        filters = {"=": "eq", "<": "lt", "<=": "lte", ">": "gt", ">=": "gte"}

        def build() -> Any:
            q = self._table(view.name).select(",".join(view.columns))
            for column, op, value in query.conditions():
                q = getattr(q, filters[op])(column, as_text(view.columns[column], value))
            for column, descending in query.sort():
                q = q.order(column, desc=descending)
            return q

        rows = self._pages(f"reading {view.name}", build, query.limit)
        return [normalize_row(view, row) for row in rows]

    def count(self, repo: str, *, status: Status | None = Status.ACTIVE,
              at_most: int | None = None) -> int:
        bound = check_limit(at_most, "at_most")
        data = self._rpc("counting memories", "agent_memory_count", {
            "p_repo": repo, "p_status": None if status is None else Status(status).value})
        counted = _scalar(data, "counting memories")
        return counted if bound is None else min(counted, bound)  # the function counts all

    def repos(self) -> list[str]:
        """Repositories that have memories (that this key or user may see), sorted."""
        rows = self._pages(
            "listing repositories",
            lambda: self._table("agent_memory_repos").select("repo").order("repo"),
            None,
        )
        return [str(r["repo"]) for r in rows]

    # ------------------------------------------------------------------ audit and hygiene

    def find(self, repo: str, where: MemoryFilter | None = None, *,
             limit: int | None = 50) -> list[Memory]:
        bound = check_limit(limit)
        params = find_params(repo, where or MemoryFilter(), bound)
        rows = self._pages("listing memories",
                           lambda: self._client.rpc("agent_memory_find", params), bound)
        return [memory_from_json(r) for r in rows]

    def match_ids(self, prefix: str, *, limit: int = 10) -> list[str]:
        data = self._rpc("resolving an id", "agent_memory_match_ids",
                         {"p_prefix": prefix, "p_limit": limit})
        return [str(r["id"]) for r in _rows(data, "resolving an id")]

    def forget(self, memory_ids: Sequence[str] | None = None, *, repo: str | None = None,
               by: str | None, reason: str, at: datetime | None = None) -> list[Tombstone]:
        data = self._rpc("forgetting memories", "agent_memory_forget", {
            "p_ids": None if memory_ids is None else list(memory_ids), "p_repo": repo,
            "p_by": by, "p_reason": check_reason(reason),
            "p_at": None if at is None else time_to_text(at)})
        return [tombstone_from_row(r) for r in _rows(data, "forgetting memories")]

    def tombstones(self, *, repo: str | None = None, ids: Sequence[str] | None = None,
                   limit: int | None = 50) -> list[Tombstone]:
        bound = check_limit(limit)
        wanted = None if ids is None else list(dict.fromkeys(ids))
        chunks = [None] if wanted is None else [wanted[i:i + ID_CHUNK]
                                                for i in range(0, len(wanted), ID_CHUNK)]
        found: list[Tombstone] = []
        for chunk in chunks:
            def query(chunk: list[str] | None = chunk) -> Any:
                q = self._table("agent_memory_tombstone").select(",".join(TOMBSTONE_COLUMNS))
                if repo is not None:
                    q = q.eq("repo", repo)
                if chunk is not None:
                    q = q.in_("id", chunk)
                return q.order("forgotten_at", desc=True).order("id")

            found += [tombstone_from_row(r)
                      for r in self._pages("reading tombstones", query, bound)]
        if len(chunks) > 1:  # each chunk came sorted; the whole must be too
            found.sort(key=lambda t: t.id)
            found.sort(key=lambda t: t.forgotten_at, reverse=True)
        return found[:bound]

    def archive_events(self, before: datetime) -> int:
        data = self._rpc("archiving telemetry", "agent_memory_archive_events",
                         {"p_before": time_to_text(before)})
        return _scalar(data, "archiving telemetry")

    def load(self, memories: Sequence[Memory], events: Sequence[TelemetryEvent],
             tombstones: Sequence[Tombstone] = ()) -> tuple[int, int, int]:
        """One RPC, so one transaction: the whole import or nothing, as long as the
        request fits the project's request size limit (split a larger file: each part
        is then all or nothing)."""
        return import_counts(self._rpc("importing", "agent_memory_import",
                                       import_payload(memories, events, tombstones)))

    def info(self) -> StoreInfo:
        data = self._rpc("describing the store", "agent_memory_info", {})
        return info_from_json("supabase", str(getattr(self._client, "supabase_url", "?")),
                              data if isinstance(data, dict) else None)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._http is not None:
            self._http.close()

    # ------------------------------------------------------------------ internals

    def _table(self, name: str) -> Any:
        return self._client.table(name)

    def _rpc(self, action: str, function: str, params: dict[str, Any]) -> Any:
        return self._execute(action, lambda: self._client.rpc(function, params).execute().data)

    def _query(self, action: str, build: Callable[[], Any]) -> list[dict[str, Any]]:
        data = self._execute(action, lambda: build().execute().data)
        return _rows(data, action)

    def _pages(
        self, action: str, build: Callable[[], Any], limit: int | None
    ) -> list[dict[str, Any]]:
        """Every row up to ``limit`` (``None``: all), ``page_size`` rows per request."""
        rows: list[dict[str, Any]] = []
        for offset, size in _windows(limit, self._page):
            def page(offset: int = offset, size: int = size) -> Any:
                q = build().limit(size)
                return q.offset(offset) if offset else q

            got = self._query(action, page)
            rows.extend(got)
            if len(got) < size:
                break
        return rows

    def _execute(self, action: str, call: Callable[[], T]) -> T:
        """Run one request; retry what the database rolled back; translate failures."""
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        try:
            return retry_rolled_back(call, _sqlstate)
        except VerifiedMemoryError:
            raise
        except Exception as exc:
            error = _translate(exc, action)
            if error is None:
                raise
            raise error from exc


def _windows(limit: int | None, page: int) -> Iterator[tuple[int, int]]:
    """(offset, size) of each page needed to read ``limit`` rows (or all)."""
    offset = 0
    while limit is None or offset < limit:
        size = page if limit is None else min(page, limit - offset)
        yield offset, size
        offset += size


def _scalar(data: Any, action: str) -> int:
    """A function's whole-number answer (some servers wrap a scalar in a row)."""
    if isinstance(data, list) and len(data) == 1:
        data = next(iter(data[0].values())) if isinstance(data[0], dict) else data[0]
    if not isinstance(data, int) or isinstance(data, bool):
        raise StoreError(f"Supabase answered {type(data).__name__}, not a count, while "
                         f"{action}")
    return data


def _rows(data: Any, action: str) -> list[dict[str, Any]]:
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise StoreError(f"Supabase answered {type(data).__name__}, not rows, while {action}")
    return data


def _sqlstate(exc: Exception) -> str | None:
    """The SQLSTATE PostgREST forwarded with a failed request (None: not a database
    answer, e.g. the network)."""
    from postgrest import APIError

    return (exc.code or None) if isinstance(exc, APIError) else None


def _translate(exc: BaseException, action: str) -> VerifiedMemoryError | None:
    """Our error for a postgrest or httpx exception; ``None`` if it is neither."""
    from postgrest import APIError

    if isinstance(exc, APIError):
        code = exc.code or ""
        message = (exc.message or str(exc)).strip()
        if code.isdigit() and len(code) == 3:  # no PostgREST body: an HTTP status
            status = int(code)
            if status in {401, 403}:
                return StoreError(
                    f"Supabase refused the key or token while {action} (HTTP {status}): "
                    f"{message}"
                )
            return StoreError(f"Supabase failed while {action} (HTTP {status}): {message}")
        if code.startswith("PGRST3"):  # JWT problems
            return StoreError(f"Supabase refused the key or token while {action}: {message}")
        if code.startswith("PGRST") and code not in {"PGRST202", "PGRST205"}:
            return StoreError(f"Supabase rejected the request while {action}: {message}")
        return translate_sqlstate(code, message, action)
    import httpx

    if isinstance(exc, httpx.HTTPError):
        return StoreError(f"cannot reach Supabase while {action}: {exc}")
    return None
