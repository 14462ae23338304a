"""Rows to models and back: the one place that decides how a memory looks in a table.

Every SQL store (SQLite now, Postgres later) and the in-memory fake share these rules,
so a memory read back from any store equals the memory written, field for field:

- Times are aware UTC datetimes, stored as fixed-width ISO-8601 text
  (``2026-11-22T02:30:00.123456+00:00``) so that text order is time order. A naive
  datetime is taken to be UTC.
- ``tags`` and a telemetry event's ``detail`` are JSON text; ``detail`` must be strict
  JSON (no NaN), because Postgres ``jsonb`` will refuse anything else.
- A citation's ``line_hashes`` are 16-hex-digit hashes joined by single spaces, the
  same spelling as ``Citation.to_dict``; its anchor is ``Anchor.to_dict`` as JSON.

Validation here is the store's last line of defence (the service validates user input
first): a memory that breaks an invariant never reaches a table.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Protocol

from verified_memory.errors import ValidationError
from verified_memory.models import (
    MAX_LINE,
    Citation,
    EventKind,
    Fingerprint,
    Memory,
    SearchHit,
    Status,
    TelemetryEvent,
    Tombstone,
    Transition,
    encode_line_hashes,
    new_event_keys,
    slot_maker,
    utcnow,
)

__all__ = [
    "CITATION_COLUMNS",
    "EVENT_COLUMNS",
    "MEMORY_COLUMNS",
    "REASON_MAX",
    "TOMBSTONE_COLUMNS",
    "Row",
    "check_limit",
    "check_lines",
    "check_load",
    "check_reason",
    "citation_from_row",
    "citation_from_values",
    "citation_values",
    "dump_json",
    "event_from_row",
    "event_from_values",
    "event_values",
    "events_values",
    "forgetting",
    "hit_from_values",
    "kept_by",
    "memory_from_row",
    "memory_from_values",
    "memory_values",
    "normalize_event",
    "normalize_memory",
    "normalize_time",
    "query_terms",
    "text_terms",
    "time_from_text",
    "time_not_later",
    "time_to_text",
    "tombstone_from_row",
    "tombstone_from_values",
    "tombstone_values",
    "transition_values",
    "validate_citations",
    "validate_events",
    "validate_memory",
    "with_supersedes",
]

#: Columns of ``agent_memory`` in the order ``memory_values`` returns them.
MEMORY_COLUMNS = (
    "id",
    "repo",
    "subject",
    "fact",
    "reason",
    "category",
    "tags",
    "status",
    "supersedes",
    "superseded_by",
    "created_by",
    "created_at",
    "refreshed_at",
    "verification_count",
    "applied_count",
    "verified_commit",
    "invalid_reason",
    "verified_ref",
    "success_count",
    "failure_count",
    "used_at",
    "promoted_to",
)

#: Columns of ``agent_memory_citation`` in the order ``citation_values`` returns them.
CITATION_COLUMNS = (
    "memory_id",
    "position",
    "repo",
    "path",
    "line_start",
    "line_end",
    "sha",
    "blob_sha",
    "snippet_hash",
    "line_hashes",
    "anchor",
)

#: Columns of ``agent_memory_telemetry`` (without ``id``) in ``event_values`` order.
EVENT_COLUMNS = ("kind", "repo", "memory_id", "actor", "at", "detail", "key")

#: Columns of ``agent_memory_tombstone`` in ``tombstone_values`` order.
TOMBSTONE_COLUMNS = ("id", "repo", "status", "forgotten_by", "forgotten_at", "reason")


class Row(Protocol):
    """Anything indexable by column name: ``sqlite3.Row``, a psycopg dict row, a dict."""

    def __getitem__(self, key: str, /) -> Any: ...


# --------------------------------------------------------------------------- scalars


@lru_cache(maxsize=256)
def time_to_text(value: datetime) -> str:
    """Fixed-width UTC ISO-8601 with microseconds, so text order is time order.

    Cached: the events of one verification pass share one time."""
    if value.tzinfo is not UTC:  # what utcnow() gives needs no conversion
        value = (value.replace(tzinfo=UTC) if value.tzinfo is None
                 else value.astimezone(UTC))
    return value.isoformat(timespec="microseconds")


def time_not_later(value: datetime) -> str:
    """A creation or refresh time as a store writes it: one later than now is now. No
    memory is created or refreshed after the store takes it in, and a time ahead
    (another machine's clock, an import) would keep its memory first, by path (newest
    created) or in ``recent`` (newest refreshed), until the clock passed it. Postgres
    applies the same rule with its own clock (``sql/013``, ``sql/014``)."""
    now = utcnow()
    if value.tzinfo is None:  # naive: UTC by convention, as time_to_text reads it
        value = value.replace(tzinfo=UTC)
    return time_to_text(value if value <= now else now)


def normalize_time(value: datetime) -> datetime:
    """A time as a store reads it back: aware UTC, to the microsecond."""
    return time_from_text(time_to_text(value))


def time_from_text(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    if value.tzinfo is UTC:  # what we write: nothing to convert
        return value
    if value.tzinfo is None:  # written by hand or by an older tool: UTC by convention
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


# One encoder for every write: ``json.dumps`` with options builds a new one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def dump_json(value: Any, where: str) -> str:
    """Strict JSON text; a value that is not JSON is a ``ValidationError`` naming ``where``."""
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{where} must be JSON-serialisable: {exc}") from exc


# --------------------------------------------------------------------------- validation


def validate_citations(citations: Sequence[Citation], where: str) -> None:
    """A memory cites at least one place, and every range is 1-indexed and inclusive."""
    if not citations:
        raise ValidationError(f"{where}: a memory needs at least one citation")
    for i, citation in enumerate(citations):
        if not citation.path:
            raise ValidationError(f"{where}: citations[{i}].path is empty")
        if not 1 <= citation.line_start <= citation.line_end:
            raise ValidationError(
                f"{where}: citations[{i}] has lines {citation.line_start}-"
                f"{citation.line_end}; need 1 <= line_start <= line_end"
            )
        if any(not 0 <= h < 2**64 for h in citation.fingerprint.line_hashes):
            raise ValidationError(f"{where}: citations[{i}] has a line hash outside 64 bits")


def validate_memory(memory: Memory) -> None:
    if not memory.id:
        raise ValidationError("a memory needs an id")
    if not isinstance(memory.status, Status):
        raise ValidationError(f"memory {memory.id}: status must be a Status, got {memory.status!r}")
    validate_citations(memory.citations, f"memory {memory.id}")


# --------------------------------------------------------------------------- memories


def memory_values(memory: Memory) -> tuple[Any, ...]:
    """The ``agent_memory`` row of a memory, in ``MEMORY_COLUMNS`` order; creation and
    refresh times later than now as now (``time_not_later``)."""
    return (
        memory.id,
        memory.repo,
        memory.subject,
        memory.fact,
        memory.reason,
        memory.category,
        dump_json(list(memory.tags), f"memory {memory.id}: tags"),
        memory.status.value,
        memory.supersedes,
        memory.superseded_by,
        memory.created_by,
        time_not_later(memory.created_at),
        time_not_later(memory.refreshed_at),
        memory.verification_count,
        memory.applied_count,
        memory.verified_commit,
        memory.invalid_reason,
        memory.verified_ref,
        memory.success_count,
        memory.failure_count,
        time_to_text(memory.used_at) if memory.used_at is not None else None,
        memory.promoted_to,
    )


def citation_values(
    memory_id: str, repo: str, position: int, citation: Citation
) -> tuple[Any, ...]:
    """The ``agent_memory_citation`` row of a citation, in ``CITATION_COLUMNS`` order."""
    fp = citation.fingerprint
    return (
        memory_id,
        position,
        repo,
        citation.path,
        citation.line_start,
        citation.line_end,
        citation.sha,
        citation.blob_sha,
        fp.snippet_hash,
        encode_line_hashes(fp.line_hashes),
        dump_json(fp.anchor.to_dict(), "anchor") if fp.anchor else None,
    )


def citation_from_row(row: Row) -> Citation:
    """A citation from a row read by column name (a dict, ``sqlite3.Row``, psycopg)."""
    return citation_from_values([row[c] for c in CITATION_COLUMNS])


def citation_from_values(values: Sequence[Any]) -> Citation:
    """A citation from a row in ``CITATION_COLUMNS`` order (the fast path: no name
    look-ups, which is most of the cost of reading fifty memories)."""
    _, _, _, path, line_start, line_end, sha, blob_sha, snippet_hash, hashes, anchor = values
    # Made slot by slot (``slot_maker``: fifty memories' citations are read for every
    # listing); the fingerprint is decoded on first use: a listing or a check of an
    # unchanged file needs neither its line hashes nor its anchor.
    return _make_citation(path, int(line_start), int(line_end), sha, blob_sha,
                          Fingerprint.stored(snippet_hash, hashes, anchor))


def memory_from_row(row: Row, citations: Sequence[Citation]) -> Memory:
    """A memory from a row read by column name (a dict, ``sqlite3.Row``, psycopg)."""
    return memory_from_values([row[c] for c in MEMORY_COLUMNS], citations)


def memory_from_values(values: Sequence[Any], citations: Sequence[Citation]) -> Memory:
    """A memory from a row in ``MEMORY_COLUMNS`` order (the fast path)."""
    (memory_id, repo, subject, fact, reason, category, tags, status, supersedes,
     superseded_by, created_by, created_at, refreshed_at, verification_count,
     applied_count, verified_commit, invalid_reason, verified_ref, success_count,
     failure_count, used_at, promoted_to) = values
    # Every field, in Memory's order (``_make_memory``: slot by slot, not by keyword).
    return _make_memory(
        memory_id,
        repo,
        subject,
        fact,
        tuple(citations),
        _STATUS[status],
        reason,
        category,
        _tags(tags),
        supersedes,
        superseded_by,
        created_by,
        _time(created_at),
        _time(refreshed_at),
        int(verification_count),
        int(applied_count),
        verified_commit,
        invalid_reason,
        verified_ref,
        int(success_count or 0),
        int(failure_count or 0),
        _time(used_at) if used_at is not None else None,
        promoted_to,
    )


def hit_from_values(values: Sequence[Any], paths: Sequence[str]) -> SearchHit:
    """A search hit from ``(id, subject, fact, reason, tags)`` and its cited paths."""
    memory_id, subject, fact, reason, tags = values
    return _make_hit(memory_id, subject, fact, reason, _tags(tags), tuple(paths), None)


def kept_by(memory: Memory, category: str | None, tag: str | None) -> bool:
    """Whether a listing filtered by ``category`` and ``tag`` keeps ``memory`` (the rule
    every store applies, here for the stores that filter in Python)."""
    return ((category is None or memory.category == category)
            and (tag is None or tag in memory.tags))


def normalize_memory(memory: Memory) -> Memory:
    """The memory exactly as a SQL store would read it back (UTC times, tuples)."""
    citations = [
        citation_from_values(citation_values(memory.id, memory.repo, i, c))
        for i, c in enumerate(memory.citations)
    ]
    return memory_from_values(memory_values(memory), citations)


def transition_values(transition: Transition) -> dict[str, Any]:
    """The columns a transition sets, by name (``None``: leave the column as it is);
    each store adds what its own write needs (SQLite its parameters as they are,
    Postgres the expected status, the citations and the events)."""
    return {
        "memory_id": transition.memory_id,
        "status": transition.status.value if transition.status is not None else None,
        "invalid_reason": transition.invalid_reason,
        "refreshed_at": (time_not_later(transition.refreshed_at)
                         if transition.refreshed_at is not None else None),
        "verified_commit": transition.verified_commit,
        "verified_ref": transition.verified_ref,
        "unconfirm": transition.unconfirm,
        "add_verifications": transition.add_verifications,
        "add_applications": transition.add_applications,
        "add_successes": transition.add_successes,
        "add_failures": transition.add_failures,
        "used_at": time_to_text(transition.used_at) if transition.used_at is not None else None,
        "promoted_to": transition.promoted_to,
        "demote": transition.demote,
        "superseded_by": transition.superseded_by,
    }


# --------------------------------------------------------------------------- telemetry


def event_values(event: TelemetryEvent) -> tuple[Any, ...]:
    """The ``agent_memory_telemetry`` row of an event (no id), in ``EVENT_COLUMNS`` order;
    an event without a key gets a new one (``new_event_key``)."""
    return events_values((event,))[0]


def events_values(events: Sequence[TelemetryEvent]) -> list[tuple[Any, ...]]:
    """``event_values`` of each event, in order. Events that share one ``detail``
    object, or one time, have it encoded once: the events of a verification pass over
    unchanged code share both (two events a memory, 66,000 in a pass over 100,000
    citations), and encoding each was most of the cost of making their rows."""
    fresh = iter(new_event_keys(sum(1 for event in events if not event.key)))
    details: dict[int, str] = {}  # id(detail) -> its JSON; the events keep them alive
    rows = []
    for event in events:
        kind = event.kind
        if kind.__class__ is not EventKind:
            try:
                kind = EventKind(kind)
            except ValueError as exc:
                raise ValidationError(f"unknown telemetry event kind {event.kind!r}") from exc
        detail = event.detail
        text = details.get(id(detail))
        if text is None:
            text = details[id(detail)] = dump_json(
                detail if detail.__class__ is dict else dict(detail),
                f"{kind.value} event detail")
        # time_to_text is cached: the events of a pass share one time
        rows.append((kind.value, event.repo, event.memory_id, event.actor,
                     time_to_text(event.at), text, event.key or next(fresh)))
    return rows


def event_from_row(row: Row) -> TelemetryEvent:
    """An event from a row read by column name; ``id`` included."""
    return event_from_values([row["id"], *(row[c] for c in EVENT_COLUMNS)])


def event_from_values(values: Sequence[Any]) -> TelemetryEvent:
    """An event from a row in ``("id", *EVENT_COLUMNS)`` order (the fast path)."""
    event_id, kind, repo, memory_id, actor, at, detail, key = values
    return TelemetryEvent(
        id=int(event_id),
        kind=EventKind(kind),
        repo=repo,
        memory_id=memory_id,
        actor=actor,
        at=_time(at),
        detail=_json_object(detail) if detail else {},
        key=key,
    )


def normalize_event(event: TelemetryEvent, event_id: int) -> TelemetryEvent:
    """The event exactly as a SQL store would read it back, with its assigned id."""
    return event_from_values((event_id, *event_values(event)))


def validate_events(events: Sequence[TelemetryEvent]) -> None:
    """Check that every event can be written before a store writes any of them."""
    for event in events:
        event_values(event)


def check_load(memories: Sequence[Memory], events: Sequence[TelemetryEvent],
               tombstones: Sequence[Tombstone] = ()) -> None:
    """What ``MemoryStore.load`` is given, checked before anything is written: every
    memory and event valid, no id or key twice (a file that repeats one is malformed)."""
    for memory in memories:
        validate_memory(memory)
    validate_events(events)
    for tombstone in tombstones:
        check_reason(tombstone.reason)
    for what, values in (("memory id", [m.id for m in memories]
                          + [t.id for t in tombstones]),
                         ("event key", [e.key for e in events if e.key is not None])):
        seen: set[str] = set()
        for value in values:
            if value in seen:
                raise ValidationError(f"{what} {value} appears twice in one import")
            seen.add(value)


# --------------------------------------------------------------------------- tombstones


def tombstone_values(tombstone: Tombstone) -> tuple[Any, ...]:
    """The ``agent_memory_tombstone`` row, in ``TOMBSTONE_COLUMNS`` order."""
    return (tombstone.id, tombstone.repo, tombstone.status.value, tombstone.forgotten_by,
            time_to_text(tombstone.forgotten_at), tombstone.reason)


def tombstone_from_values(values: Sequence[Any]) -> Tombstone:
    memory_id, repo, status, by, at, reason = values
    return Tombstone(id=memory_id, repo=repo, status=_STATUS[status], forgotten_by=by,
                     forgotten_at=_time(at), reason=reason)


def tombstone_from_row(row: Row) -> Tombstone:
    return tombstone_from_values([row[c] for c in TOMBSTONE_COLUMNS])


def forgetting(memories: Sequence[tuple[str, str, str]], *, by: str | None, reason: str,
               at: datetime) -> tuple[list[Tombstone], list[TelemetryEvent]]:
    """The tombstones and ``forgotten`` events of forgetting ``memories`` ((id, repo,
    status) each): what every store writes, in one transaction with the deletion. The
    event says who, when, why and what the memory was; never its text."""
    reason = check_reason(reason)
    tombstones = [Tombstone(memory_id, repo, _STATUS[status], by, at, reason)
                  for memory_id, repo, status in memories]
    events = [TelemetryEvent(EventKind.FORGOTTEN, t.repo, t.id, actor=by, at=at,
                             detail={"reason": reason, "status": t.status.value})
              for t in tombstones]
    return tombstones, events


#: Characters in the reason a memory is forgotten for.
REASON_MAX = 2000


def check_reason(reason: object) -> str:
    """A reason to forget: required, one or more words, at most ``REASON_MAX``."""
    if not isinstance(reason, str) or not reason.strip():
        raise ValidationError("forgetting a memory needs a reason (it is kept on the "
                              "tombstone)")
    if len(reason.strip()) > REASON_MAX:
        raise ValidationError(f"the reason is {len(reason.strip())} characters long; the "
                              f"limit is {REASON_MAX}")
    return reason.strip()


# --------------------------------------------------------------------------- queries


def check_limit(limit: int | None, where: str = "limit") -> int | None:
    """``None`` means no limit; a negative limit is a caller's mistake, not "all"."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValidationError(f"{where} must be a whole number >= 0 or None, got {limit!r}")
    return limit


def check_lines(lines: tuple[int, int] | None) -> tuple[int, int] | None:
    if lines is None:
        return None
    start, end = lines
    if not 1 <= start <= end <= MAX_LINE:
        raise ValidationError(f"lines must be (start, end) with 1 <= start <= end <= {MAX_LINE}, "
                              f"got {lines!r}")
    return start, end


_TERM = re.compile(r"[^\W_]+")


def text_terms(text: str) -> list[str]:
    """Words as SQLite's ``unicode61 remove_diacritics 2`` tokenizer sees them: runs of
    letters and digits, lower-cased, diacritics removed. Punctuation (``- " * ( :``)
    only separates words. (Lower-casing, not ``casefold``: FTS5 keeps ``ß`` as it is.)"""
    decomposed = unicodedata.normalize("NFD", text.lower())
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _TERM.findall(stripped)


def query_terms(query: str) -> list[str]:
    """The terms of a free-text query: every one must match, the last as a prefix
    (the user may still be typing it). No terms means no results, not an error."""
    return text_terms(query)


# --------------------------------------------------------------------------- helpers


_STATUS = {s.value: s for s in Status}
#: Memories and citations read from rows are made slot by slot (``slot_maker``): making
#: them was most of the Python cost of reading fifty memories.
_make_memory = slot_maker(Memory, [f.name for f in fields(Memory)])
_make_citation = slot_maker(Citation, [f.name for f in fields(Citation)])
_make_hit = slot_maker(SearchHit, [f.name for f in fields(SearchHit)])


def _time(value: Any) -> datetime:
    if isinstance(value, str):
        return time_from_text(value)
    if isinstance(value, datetime):  # drivers that parse timestamps themselves
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return time_from_text(str(value))


def _tags(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):  # JSON text (SQLite)
        return _tags_from_json(value)
    return tuple(value or ())  # an array column (Postgres)


@lru_cache(maxsize=4096)
def _tags_from_json(text: str) -> tuple[str, ...]:
    # Teams reuse a handful of tag sets: decode each spelling once (tuples are immutable).
    # A tag that is not a string (written by an older, lenient import) is read as text,
    # so that one bad row cannot break every listing of its repository.
    return () if text == "[]" else tuple(t if isinstance(t, str) else json.dumps(t)
                                         for t in json.loads(text))


def _json_object(value: Any) -> dict[str, Any]:
    data = json.loads(value) if isinstance(value, str | bytes) else value
    if not isinstance(data, Mapping):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    return dict(data)


def with_supersedes(new: Memory, old_id: str) -> Memory:
    """``new`` pointing back at ``old_id``; a different, explicit back-pointer is refused."""
    if new.supersedes is None:
        return replace(new, supersedes=old_id)
    if new.supersedes != old_id:
        raise ValidationError(
            f"memory {new.id} says it supersedes {new.supersedes}, not {old_id}"
        )
    return new
