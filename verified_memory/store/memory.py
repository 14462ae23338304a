"""``InMemoryStore``: the ``MemoryStore`` contract with dicts and a lock.

A public fake for tests (ours and yours): it passes the same contract suite as the
SQLite store, so code tested against it behaves the same on a real database. Memories
and events go through the same row rules as the SQL stores (``_rows``), so what you
read back is exactly what SQLite would give you: UTC times, JSON-clean ``detail``.

Search is plain word matching (every word, the last as a prefix) with a crude score
(subject over tags over fact); it agrees with FTS5 on what matches, not on exact rank.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from operator import attrgetter
from typing import Any

from verified_memory.errors import Conflict, NotFound, StoreError, ValidationError
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
    utcnow,
)
from verified_memory.store._rows import (
    check_limit,
    check_lines,
    check_load,
    forgetting,
    kept_by,
    normalize_event,
    normalize_memory,
    normalize_time,
    query_terms,
    text_terms,
    validate_citations,
    validate_events,
    validate_memory,
    with_supersedes,
)
from verified_memory.store.base import Decide, repeat_candidates
from verified_memory.store.views import ViewQuery

__all__ = ["InMemoryStore"]

# Same order of importance as the SQLite store's bm25 weights.
_WEIGHTS = {"subject": 4.0, "tags": 2.0, "fact": 1.0}


class InMemoryStore:
    """A ``MemoryStore`` that lives and dies with the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._memories: dict[str, Memory] = {}
        self._events: list[TelemetryEvent] = []
        self._archive: list[TelemetryEvent] = []
        self._tombstones: dict[str, Tombstone] = {}
        self._next_event = 1
        self._closed = False

    def __repr__(self) -> str:
        return f"InMemoryStore({len(self._memories)} memories)"

    # ------------------------------------------------------------------ writes

    def add(self, memory: Memory, events: Sequence[TelemetryEvent] = ()) -> None:
        validate_memory(memory)
        validate_events(events)
        stored = normalize_memory(memory)
        with self._open():
            self._insert(stored, events)

    def _insert(self, stored: Memory, events: Sequence[TelemetryEvent]) -> None:
        """A new memory and its events; call with the lock held."""
        if stored.id in self._memories:
            raise Conflict(f"memory {stored.id} already exists")
        self._memories[stored.id] = stored
        self._append(events)

    def add_unless_duplicate(self, memory: Memory, decide: Decide) -> bool:
        validate_memory(memory)
        stored = normalize_memory(memory)
        with self._open():  # checked and added under the one lock
            events = decide(repeat_candidates(self._by_path, self._find, stored))
            if events is None:
                return False
            validate_events(events)
            self._insert(stored, events)
        return True

    def supersede(
        self, old_id: str, new: Memory, events: Sequence[TelemetryEvent] = ()
    ) -> None:
        new = with_supersedes(new, old_id)
        validate_memory(new)
        validate_events(events)
        stored = normalize_memory(new)
        with self._open():
            old = self._memories.get(old_id)
            if old is None:
                raise NotFound(f"memory {old_id} not found")
            if old.status != Status.ACTIVE:
                raise Conflict(
                    f"memory {old_id} is {old.status.value}, not active: it cannot be superseded"
                )
            if stored.id in self._memories:
                raise Conflict(f"memory {stored.id} already exists")
            self._memories[stored.id] = stored
            self._memories[old_id] = replace(
                old, status=Status.SUPERSEDED, superseded_by=stored.id
            )
            self._append(events)

    def apply(self, transitions: Sequence[Transition]) -> list[bool]:
        for t in transitions:
            if t.citations is not None:
                validate_citations(t.citations, f"transition of memory {t.memory_id}")
            t.check()
            validate_events(t.events)
        with self._open():
            # Stage every change, then publish them together: all or nothing.
            staged: dict[str, Memory] = {}
            events: list[TelemetryEvent] = []
            results: list[bool] = []
            for t in transitions:
                current = staged.get(t.memory_id) or self._memories.get(t.memory_id)
                if current is None:
                    raise NotFound(f"memory {t.memory_id} not found")
                required = None if t.requires is None else (
                    staged.get(t.requires[0]) or self._memories.get(t.requires[0]))
                cited = () if t.expect_citations is None else Transition.cited(
                    current.citations)  # made only for a verdict that names its own
                if not (t.expects(current.status, current.verified_commit, cited) and t.required(
                        {} if required is None else {required.id: required.status})):
                    results.append(False)  # lost a race: skip it and its events
                    continue
                updated = normalize_memory(t.apply_to(current))
                staged[t.memory_id] = updated
                events.extend(t.events)
                results.append(True)
            self._memories.update(staged)
            self._append(events)
            return results

    def log(self, events: Sequence[TelemetryEvent]) -> None:
        validate_events(events)
        with self._open():
            self._append(events)

    # ------------------------------------------------------------------ reads

    def get(self, memory_id: str) -> Memory:
        return self.get_many([memory_id])[0]

    def get_many(self, memory_ids: Sequence[str]) -> list[Memory]:
        with self._open():
            found: list[Memory] = []
            for memory_id in memory_ids:
                memory = self._memories.get(memory_id)
                if memory is None:
                    raise NotFound(f"memory {memory_id} not found")
                found.append(memory)
            return found

    def recent(
        self, repo: str, *, limit: int | None = 50, status: Status | None = Status.ACTIVE,
        category: str | None = None, tag: str | None = None,
    ) -> list[Memory]:
        bound = check_limit(limit)
        with self._open():
            chosen = [
                m for m in self._memories.values()
                if m.repo == repo and (status is None or m.status == status)
                and kept_by(m, category, tag)
            ]
        return _newest_first(chosen)[:bound]

    def count(self, repo: str, *, status: Status | None = Status.ACTIVE,
              at_most: int | None = None) -> int:
        bound = check_limit(at_most, "at_most")
        with self._open():
            found = sum(1 for m in self._memories.values()
                        if m.repo == repo and (status is None or m.status == status))
        return found if bound is None else min(found, bound)

    def repos(self) -> list[str]:
        with self._open():
            return sorted({m.repo for m in self._memories.values()})

    def search(self, repo: str, query: str, *, limit: int = 20, category: str | None = None,
               tag: str | None = None) -> list[Memory]:
        bound = check_limit(limit)
        terms = query_terms(query)
        if not terms:
            return []
        with self._open():
            candidates = [
                m for m in self._memories.values()
                if m.repo == repo and m.status is Status.ACTIVE and kept_by(m, category, tag)
            ]
        scores = {m.id: s for m in candidates if (s := _score(m, terms)) > 0}
        matched = _newest_first([m for m in candidates if m.id in scores])
        # Best score first; the stable sort keeps recent() order between equals.
        return sorted(matched, key=lambda m: -scores[m.id])[:bound]

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
        with self._open():
            return self._by_path(repo, path, lines=lines, limit=limit, category=category,
                                 tag=tag)

    def _by_path(self, repo: str, path: str, *, lines: tuple[int, int] | None = None,
                 limit: int = 50, category: str | None = None,
                 tag: str | None = None) -> list[Memory]:
        """``by_path``; call with the lock held."""
        bound = check_limit(limit)
        span = check_lines(lines)
        chosen = [
            m for m in self._memories.values()
            if m.repo == repo and m.status is Status.ACTIVE and kept_by(m, category, tag)
            and any(
                c.path == path
                and (span is None or (c.line_start <= span[1] and c.line_end >= span[0]))
                for c in m.citations
            )
        ]
        return _newest_first(chosen, "created_at")[:bound]

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
        wanted = None if kinds is None else {EventKind(k) for k in kinds}
        with self._open():
            chosen = [
                e for e in (self._archive if archived else self._events)
                if (repo is None or e.repo == repo)
                and (memory_id is None or e.memory_id == memory_id)
                and (wanted is None or e.kind in wanted)
                and not (changes and e.kind in READ_KINDS)
                and (since is None or e.at >= since)
            ]
        chosen.sort(key=lambda e: (e.at, e.id or 0), reverse=newest)
        # A fresh copy each time: a caller editing ``detail`` must not edit the log.
        return [normalize_event(e, e.id or 0) for e in chosen[:bound]]

    def stats(self, repo: str) -> RepoStats:
        with self._open():
            memories = [m for m in self._memories.values() if m.repo == repo]
            kinds = Counter(e.kind.value for e in (*self._events, *self._archive)
                            if e.repo == repo)
            forgotten = sum(1 for t in self._tombstones.values() if t.repo == repo)
        by_status = {s.value: 0 for s in Status}
        by_status.update(Counter(m.status.value for m in memories))
        citations = sum(len(m.citations) for m in memories if m.status is Status.ACTIVE)
        return RepoStats(
            repo=repo, by_status=by_status, events=dict(sorted(kinds.items())),
            citations=citations,
            unconfirmed=sum(1 for m in memories
                            if m.status is Status.ACTIVE and m.verified_ref is None),
            validated=sum(1 for m in memories if m.validated),
            poor=sum(1 for m in memories if m.poor),
            forgotten=forgotten,
        )

    # ------------------------------------------------------------------ audit and hygiene

    def find(self, repo: str, where: MemoryFilter | None = None, *,
             limit: int | None = 50) -> list[Memory]:
        with self._open():
            return self._find(repo, where, limit=limit)

    def _find(self, repo: str, where: MemoryFilter | None = None, *,
              limit: int | None = 50) -> list[Memory]:
        """``find``; call with the lock held."""
        bound = check_limit(limit)
        keeps = (where or MemoryFilter()).keeps
        chosen = [m for m in self._memories.values() if m.repo == repo and keeps(m)]
        return _newest_first(chosen)[:bound]

    def match_ids(self, prefix: str, *, limit: int = 10) -> list[str]:
        with self._open():
            found = {i for i in (*self._memories, *self._tombstones) if i.startswith(prefix)}
        return sorted(found)[:limit]

    def forget(self, memory_ids: Sequence[str] | None = None, *, repo: str | None = None,
               by: str | None, reason: str, at: datetime | None = None) -> list[Tombstone]:
        with self._open():
            chosen = _chosen(self._memories, memory_ids, repo)
            tombstones, events = forgetting([(m.id, m.repo, m.status.value) for m in chosen],
                                            by=by, reason=reason, at=at or utcnow())
            for tombstone in tombstones:
                del self._memories[tombstone.id]
                self._tombstones[tombstone.id] = tombstone
            self._append(events)
        return tombstones

    def tombstones(self, *, repo: str | None = None, ids: Sequence[str] | None = None,
                   limit: int | None = 50) -> list[Tombstone]:
        bound = check_limit(limit)
        wanted = None if ids is None else set(ids)
        with self._open():
            chosen = [t for t in self._tombstones.values()
                      if (repo is None or t.repo == repo) and (wanted is None or t.id in wanted)]
        chosen.sort(key=lambda t: t.id)
        chosen.sort(key=lambda t: t.forgotten_at, reverse=True)
        return chosen[:bound]

    def archive_events(self, before: datetime) -> int:
        with self._open():
            moving = [e for e in self._events if e.at < before]
            self._events = [e for e in self._events if e.at >= before]
            self._archive.extend(moving)
        return len(moving)

    def load(self, memories: Sequence[Memory], events: Sequence[TelemetryEvent],
             tombstones: Sequence[Tombstone] = ()) -> tuple[int, int, int]:
        check_load(memories, events, tombstones)
        staged = [normalize_memory(m) for m in memories]
        with self._open():
            fresh = [m for m in staged
                     if m.id not in self._memories and m.id not in self._tombstones]
            held = {e.key for e in (*self._events, *self._archive)}
            new_events = [e for e in events if e.key not in held]
            marks = [replace(t, forgotten_at=normalize_time(t.forgotten_at))
                     for t in tombstones
                     if t.id not in self._memories and t.id not in self._tombstones]
            self._memories.update((m.id, m) for m in fresh)
            self._append(new_events)
            self._tombstones.update((t.id, t) for t in marks)
        return len(fresh), len(new_events), len(marks)

    def info(self) -> StoreInfo:
        with self._open():
            return StoreInfo(kind="memory", location=":memory:", schema_version=None,
                             size_bytes=None, memories=len(self._memories),
                             forgotten=len(self._tombstones), events=len(self._events),
                             archived_events=len(self._archive),
                             repos=len({m.repo for m in self._memories.values()}))

    def read_view(self, query: ViewQuery) -> list[dict[str, Any]]:
        """Read from a SQLite copy of this store: the views keep one definition for
        embedded stores, not a second one in Python."""
        from verified_memory.store.sqlite import SQLiteStore

        query.checked()
        with self._open():
            memories, events = list(self._memories.values()), list(self._events)
            tombstones = list(self._tombstones.values())
        with SQLiteStore(":memory:") as copy:
            for memory in memories:
                copy.add(memory)
            copy.log(events)
            if tombstones:
                copy.load((), (), tombstones)
            return copy.read_view(query)

    def close(self) -> None:
        with self._lock:
            self._closed = True

    # ------------------------------------------------------------------ internals

    @contextmanager
    def _open(self) -> Iterator[None]:
        """The lock, refusing to proceed once the store is closed (like a real store)."""
        with self._lock:
            if self._closed:
                raise StoreError("the in-memory store is closed")
            yield

    def _append(self, events: Sequence[TelemetryEvent]) -> None:
        """Append events with ids in arrival order (and a key each). Call with the lock
        held."""
        for event in events:
            self._events.append(normalize_event(event, self._next_event))
            self._next_event += 1


def _chosen(memories: dict[str, Memory], ids: Sequence[str] | None,
            repo: str | None) -> list[Memory]:
    """The memories ``forget`` takes: those ids (each in ``repo`` when given), or every
    memory of ``repo``; ``NotFound`` for an id that is not a memory (of ``repo``)."""
    if ids is None:
        if repo is None:
            raise ValidationError("forget needs memory ids or a repository")
        return sorted((m for m in memories.values() if m.repo == repo), key=lambda m: m.id)
    chosen: dict[str, Memory] = {}
    for memory_id in ids:
        memory = memories.get(memory_id)
        if memory is None or (repo is not None and memory.repo != repo):
            raise NotFound(f"memory {memory_id} not found" + (f" in {repo}" if repo else ""))
        chosen[memory_id] = memory
    return list(chosen.values())


def _newest_first(memories: list[Memory], when: str = "refreshed_at") -> list[Memory]:
    """Most recently refreshed first (``when="created_at"``: created, ``by_path``'s
    order); ties go to the smaller id (as in SQL)."""
    by_id = sorted(memories, key=lambda m: m.id)
    return sorted(by_id, key=attrgetter(when), reverse=True)  # stable: ids stay


def _score(memory: Memory, terms: list[str]) -> float:
    """0 unless every term occurs (the last as a prefix); more for subject hits and
    for shorter fields, roughly as bm25 would rank them."""
    fields = {
        "subject": text_terms(memory.subject),
        "tags": text_terms(" ".join(memory.tags)),
        "fact": text_terms(memory.fact),
    }
    everything = [word for words in fields.values() for word in words]
    *whole, last = terms
    if not all(t in everything for t in whole):
        return 0.0
    if not any(word.startswith(last) for word in everything):
        return 0.0
    score = 0.0
    for name, words in fields.items():
        hits = sum(1 for w in words for i, t in enumerate(terms)
                   if w == t or (i == len(terms) - 1 and w.startswith(t)))
        score += _WEIGHTS[name] * hits / math.sqrt(len(words) or 1)
    return score

