"""The ``MemoryStore`` Protocol: where memories, citations and telemetry live.

Every store (SQLite, Postgres, Supabase, the in-memory fake) implements this narrow
interface and passes the same contract suite (``tests/contract/test_store.py``).
Invariants every implementation keeps:

- ``add``, ``supersede`` and ``apply`` are atomic: all of a call's rows and events are
  written, or none are.
- ``add_unless_duplicate`` (a store that has it: ``AddsUnlessDuplicate``) stores one
  memory once however many processes store it at the same moment: it decides whether
  the memory repeats one and inserts it in one transaction, under a lock that other such
  adds wait for, or (Supabase) inserts only if what it decided over is unchanged.
- ``supersede`` succeeds only while the old memory is ``active``; otherwise it raises
  ``Conflict`` and writes nothing, so two agents racing to supersede get one winner.
- ``apply`` writes each transition only if its memory still has the expected status
  (and, for a verdict, is still judged at the commit its pass read:
  ``Transition.expects``); a skipped transition's events are not written either.
- ``forget`` deletes a memory's row and citations and leaves a tombstone and a
  ``forgotten`` event, atomically; a forgotten id is never a memory again.
- ``load`` (an import) writes all it is given, or nothing.
- Telemetry is append-only: an event is never changed, and leaves the telemetry table
  only into the archive (``archive_events``).
- Lower-layer errors are translated into ``verified_memory.errors``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol, Self, runtime_checkable

from verified_memory.models import (
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
)
from verified_memory.store.views import ViewQuery

__all__ = [
    "CITING_LIMIT",
    "AddsUnlessDuplicate",
    "ClosingStore",
    "Decide",
    "Finds",
    "FindsNeverApplied",
    "MemoryStore",
    "ReadsByPath",
    "SearchesLightly",
    "add_unless_duplicate",
    "citing_code",
    "oldest_never_applied",
    "repeat_candidates",
    "search_hits",
]


@runtime_checkable
class MemoryStore(Protocol):
    def add(self, memory: Memory, events: Sequence[TelemetryEvent] = ()) -> None:
        """Insert a new memory with its citations (and events) atomically."""

    def supersede(
        self, old_id: str, new: Memory, events: Sequence[TelemetryEvent] = ()
    ) -> None:
        """Insert ``new`` (whose ``supersedes`` is ``old_id``) and retire the old memory.

        Raises ``NotFound`` if the old memory does not exist and ``Conflict`` if it is
        not active.
        """

    def apply(self, transitions: Sequence[Transition]) -> list[bool]:
        """Apply transitions in one transaction: True for each one applied, False for
        one skipped because its memory was no longer as expected (``Transition.expects``,
        asked inside the transaction: its status, and a verdict's ``expect_judged``). Raises
        ``NotFound`` (and writes nothing) if a memory does not exist.

        What an applied transition leaves is ``Transition.apply_to(memory)``; stores
        do not read the memories back (a verification pass applies thousands)."""

    def get(self, memory_id: str) -> Memory:
        """The memory with this id; ``NotFound`` otherwise."""

    def get_many(self, memory_ids: Sequence[str]) -> list[Memory]:
        """Memories in the order asked; ``NotFound`` naming the first unknown id."""

    def recent(
        self, repo: str, *, limit: int | None = 50, status: Status | None = Status.ACTIVE,
        category: str | None = None, tag: str | None = None,
    ) -> list[Memory]:
        """Most recently refreshed first; ``status=None`` means any status. ``category``
        and ``tag`` keep only memories of that category, or carrying that tag (in every
        listing below too: filtered before the limit, by the store)."""

    def search(self, repo: str, query: str, *, limit: int = 20, category: str | None = None,
               tag: str | None = None) -> list[Memory]:
        """Active memories whose subject, fact or tags match ``query``, best first."""

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
        """Active memories citing ``path`` (overlapping ``lines`` when given), newest
        created first (ties: the smaller id first). Creation, not the last refresh: a
        pass refreshes every memory it checks at one time, which leaves the refresh
        order of a file's memories to their ids; and an order that never changes can
        be kept in the citation index at no cost to a pass."""

    def count(self, repo: str, *, status: Status | None = Status.ACTIVE,
              at_most: int | None = None) -> int:
        """How many memories ``repo`` has in ``status`` (any status: None). Cheap: an
        index count. With ``at_most``, counting stops there (the answer is at most
        that): whether a repository is over a limit, asked on every store, then costs
        the limit, not the repository's size."""

    def repos(self) -> list[str]:
        """Every repository with memories (any status), sorted."""

    def log(self, events: Sequence[TelemetryEvent]) -> None:
        """Append telemetry events."""

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
        """Telemetry, oldest first; ``newest``: the last ``limit`` events, newest first.
        ``changes`` leaves out reads (``READ_KINDS``: an audit trail's filter, served by
        an index of its own), ``since`` keeps events at or after a time, ``archived``
        reads the archive (``archive_events``) instead of the live table."""

    def stats(self, repo: str) -> RepoStats:
        """Counts by status, by event kind (archived events included), of citations, and
        of tombstones, for one repository."""

    # ------------------------------------------------------------ audit and hygiene

    def find(self, repo: str, where: MemoryFilter | None = None, *,
             limit: int | None = 50) -> list[Memory]:
        """Memories of ``repo`` that ``where`` keeps (None: all; any status unless it names one),
        most recently refreshed first, ties to the smaller id (``vmem list``)."""

    def match_ids(self, prefix: str, *, limit: int = 10) -> list[str]:
        """Ids of memories and of tombstones that start with ``prefix``, sorted, at most
        ``limit``: what resolves a short id (``MemoryService.resolve``)."""

    def forget(self, memory_ids: Sequence[str] | None = None, *, repo: str | None = None,
               by: str | None, reason: str, at: datetime | None = None) -> list[Tombstone]:
        """Delete memories (their row, text and citations) and keep a tombstone and a
        ``forgotten`` event for each, in one transaction: the memories ``memory_ids``
        (each in ``repo`` when it is given), or with ``memory_ids`` None every memory of
        ``repo``. ``NotFound`` (and nothing written) for an id that is not a memory."""

    def tombstones(self, *, repo: str | None = None, ids: Sequence[str] | None = None,
                   limit: int | None = 50) -> list[Tombstone]:
        """Tombstones of ``repo`` or with these ids, most recently forgotten first."""

    def archive_events(self, before: datetime) -> int:
        """Move every event older than ``before`` into the archive, in one transaction;
        how many moved. Archived events still count (``stats``) and export."""

    def load(self, memories: Sequence[Memory], events: Sequence[TelemetryEvent],
             tombstones: Sequence[Tombstone] = ()) -> tuple[int, int, int]:
        """An import, all or nothing: ``memories`` whose id is not a memory or a
        tombstone yet, then ``events`` whose key the store does not hold yet (live or
        archived), then ``tombstones`` whose id is neither, in one transaction; how many
        memories, events and tombstones were written."""

    def info(self) -> StoreInfo:
        """Where the store is, its schema version, size and counts (``vmem where``)."""

    def read_view(self, query: ViewQuery) -> list[dict[str, Any]]:
        """Rows of one dashboard view (``store/views.py``): every store has the same
        views, columns and numbers; rows normalised by ``views.normalize_row``."""

    def close(self) -> None:
        """Release connections. Safe to call twice."""


#: Memories each citation of a new memory brings as candidates it may repeat.
CITING_LIMIT = 100

#: Given the memories a new memory may repeat (``repeat_candidates``: the active ones
#: citing what it cites; for a pending memory, the pending ones citing its files too):
#: the events to write with it, or None when it repeats one of them (then nothing is
#: written). ``MemoryService.store`` asks ``quality.classify``, which also names its
#: conflicts.
Decide = Callable[[Sequence[Memory]], Sequence[TelemetryEvent] | None]


class ReadsByPath(Protocol):
    """``MemoryStore.by_path`` as the duplicate check calls it: a store's own, or its
    reading inside the write transaction it holds."""

    def __call__(self, repo: str, path: str, *, lines: tuple[int, int] | None = None,
                 limit: int = 50) -> list[Memory]: ...


class Finds(Protocol):
    """``MemoryStore.find`` as the duplicate check calls it: a store's own, or its
    reading inside the write transaction it holds."""

    def __call__(self, repo: str, where: MemoryFilter | None = None, *,
                 limit: int | None = 50) -> list[Memory]: ...


def citing_code(by_path: ReadsByPath, memory: Memory) -> list[Memory]:
    """The active memories citing lines that ``memory`` cites, each once (the
    candidates for a duplicate or a conflict): one index look-up per citation."""
    found: dict[str, Memory] = {}
    for c in memory.citations:
        for other in by_path(memory.repo, c.path, lines=(c.line_start, c.line_end),
                             limit=CITING_LIMIT):
            found.setdefault(other.id, other)
    return list(found.values())


def repeat_candidates(by_path: ReadsByPath, find: Finds, memory: Memory) -> list[Memory]:
    """What ``add_unless_duplicate`` hands ``decide``, each memory once: ``citing_code``,
    and for a pending memory the pending memories citing the files it cites (a rule
    proposed in every session waits in the queue once)."""
    found = {m.id: m for m in citing_code(by_path, memory)}
    if memory.status is Status.PENDING:
        for path in dict.fromkeys(c.path for c in memory.citations):
            for other in find(memory.repo, MemoryFilter(status=Status.PENDING, path=path),
                              limit=CITING_LIMIT):
                found.setdefault(other.id, other)
    return list(found.values())


@runtime_checkable
class AddsUnlessDuplicate(Protocol):
    """A store that checks for a duplicate and adds without a rival's add in between."""

    def add_unless_duplicate(self, memory: Memory, decide: Decide) -> bool:
        """See ``add_unless_duplicate``."""


def add_unless_duplicate(store: MemoryStore, memory: Memory, decide: Decide) -> bool:
    """``store.add(memory, events)`` with the events ``decide(repeat_candidates(...))``
    gives, unless it gives None (the memory repeats one): then nothing is written.
    Whether the memory was added.

    A store that has ``AddsUnlessDuplicate`` makes sure that of several processes
    storing one memory at once one adds it and the others find it. SQLite, Postgres,
    the in-memory and git stores ask inside the transaction that adds, under a lock
    every such add takes first (SQLite's write lock, a Postgres advisory lock per
    repository); the question is asked once, there: asked before as well, it cost a
    store at 100,000 memories 60% more. Supabase, which holds no transaction across
    REST calls, asks first, then adds only if the database, behind Postgres's lock,
    finds the same candidates, and asks again over the fresh ones if not
    (``sql/012``). Any other store is asked, then added to: a rival's memory that
    lands in between is not seen."""
    if isinstance(store, AddsUnlessDuplicate):
        return store.add_unless_duplicate(memory, decide)
    events = decide(repeat_candidates(store.by_path, store.find, memory))
    if events is None:
        return False
    store.add(memory, events)
    return True


@runtime_checkable
class FindsNeverApplied(Protocol):
    """A store that finds the oldest memories never applied in its own query, rather
    than by handing every memory of the repository over to be sorted."""

    def oldest_never_applied(self, repo: str, limit: int) -> list[Memory]:
        """See ``oldest_never_applied``."""


def oldest_never_applied(store: MemoryStore, repo: str, limit: int = 5) -> list[Memory]:
    """The active memories of ``repo`` never applied, the longest unused first (by
    ``used_at``, else ``created_at``; ties by id): candidates to retire. A store that
    cannot ask for them has every active memory read and sorted here."""
    if isinstance(store, FindsNeverApplied):
        return store.oldest_never_applied(repo, limit)
    return sorted((m for m in store.recent(repo, limit=None) if m.applied_count == 0),
                  key=lambda m: (m.used_at or m.created_at, m.id))[:limit]


@runtime_checkable
class SearchesLightly(Protocol):
    """A store that reads a search's matches without their citations' rows (only the
    cited paths), so that ranking 60 matches to keep 20 reads 20 memories whole."""

    def search_hits(self, repo: str, query: str, *, limit: int = 20,
                    category: str | None = None, tag: str | None = None) -> list[SearchHit]:
        """See ``search_hits``."""


def search_hits(store: MemoryStore, repo: str, query: str, *, limit: int = 20,
                category: str | None = None, tag: str | None = None) -> list[SearchHit]:
    """``store.search``'s matches in its order, as ``SearchHit``: without ``memory`` from
    a store that reads them lightly, with it from any other."""
    if isinstance(store, SearchesLightly):
        return store.search_hits(repo, query, limit=limit, category=category, tag=tag)
    return [SearchHit.of(m) for m in store.search(repo, query, limit=limit,
                                                  category=category, tag=tag)]


class ClosingStore:
    """A store is a context manager that closes itself (connections, pools)."""

    def close(self) -> None:
        """Overridden by each store; safe to call twice."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
