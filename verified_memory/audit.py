"""Who acts, which memory a short id names, and what an event says, for people.

- **The actor.** Every write is attributed to whoever made it: ``--created-by`` on the
  command line, the MCP client by the name it gives when it connects (``mcp:cursor``),
  else ``VMEM_ACTOR`` (the service's ``actor``). An entry point that serves many callers
  through one service (the MCP server) wraps each call in ``acting_as(name)``; a context
  variable carries the name to every event the call writes, as ``budget.time_budget``
  carries a pass's time limit.
- **Short ids.** ``verify``, ``demo`` and the tables print 8 characters of an id; any
  unique prefix names the memory wherever an id is taken (``resolve_id``; the spaces
  around it are dropped, as a paste brings them). A prefix that
  names a forgotten memory names its tombstone.
- **What an event says.** ``vmem log`` shows who, when, which ref, what changed and why:
  ``describe`` reads them out of an event's detail, kind by kind.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from verified_memory.errors import NotFound, ValidationError
from verified_memory.models import READ_KINDS, EventKind, Memory, TelemetryEvent, validate_repo
from verified_memory.store.base import MemoryStore

__all__ = [
    "SHORT_ID",
    "Described",
    "acting_actor",
    "acting_as",
    "cut_by_archive",
    "describe",
    "in_order",
    "named_memory",
    "resolve_id",
    "short_ids",
    "trail",
]

#: Characters of an id that tables and messages show.
SHORT_ID = 8
#: The longest id a store keeps (sql/001: ``length(id) between 1 and 200``).
_ID_MAX = 200

_ACTOR: ContextVar[str | None] = ContextVar("vmem_actor", default=None)


@contextmanager
def acting_as(actor: str | None) -> Iterator[None]:
    """Attribute every write inside the block to ``actor`` (None changes nothing)."""
    if actor is None:
        yield
        return
    token = _ACTOR.set(actor)
    try:
        yield
    finally:
        _ACTOR.reset(token)


def acting_actor() -> str | None:
    """The actor ``acting_as`` set for this call, if any."""
    return _ACTOR.get()


def resolve_id(store: MemoryStore, text: str) -> str:
    """The id ``text`` names: the id itself, or the one id of a memory or tombstone that
    begins with it. ``NotFound`` when none does, ``ValidationError`` (naming them) when
    several do."""
    if not isinstance(text, str) or not text.strip() or len(text) > _ID_MAX:
        raise ValidationError(f"a memory id must be 1 to {_ID_MAX} characters, got {text!r}")
    text = text.strip()  # pasted ids often come with a space or a newline around them
    found = store.match_ids(text, limit=6)
    if not found and text != text.lower():  # ids are lower-case hex: 0950ADBA names one
        text = text.lower()
        found = store.match_ids(text, limit=6)
    if text in found:
        return text
    if not found:
        raise NotFound(f"memory {text!r} not found: no memory's id is or starts with it")
    if len(found) == 1:
        return found[0]
    listed = ", ".join(found[:5]) + (", ..." if len(found) > 5 else "")
    raise ValidationError(f"{text!r} is the start of more than one memory id ({listed}): "
                          "give more of it")


def named_memory(store: MemoryStore, text: str) -> Memory:
    """The memory an id or a unique prefix of one names (``resolve_id``); a forgotten one
    is ``NotFound`` saying when, by whom and why it was forgotten."""
    if isinstance(text, str):
        text = text.strip()  # as ``resolve_id`` reads it
    try:
        return store.get(text)
    except NotFound:
        full = resolve_id(store, text)
        if full != text:
            try:
                return store.get(full)
            except NotFound:
                pass
        for stone in store.tombstones(ids=[full], limit=1):
            raise NotFound(
                f"memory {full} was forgotten on {stone.forgotten_at:%Y-%m-%d %H:%M} UTC by "
                f"{stone.forgotten_by or 'someone'}: {stone.reason}") from None
        raise


def trail(store: MemoryStore, memory_id: str | None, *, repo: str | None,
          kinds: Sequence[EventKind] | None, reads: bool, since: datetime | None,
          limit: int, archived: bool = False) -> list[TelemetryEvent]:
    """``MemoryService.audit``: a memory's events (archived ones too) or a repository's
    (live ones; with ``archived``, archived ones too), newest first, reads left out
    unless ``reads`` or ``kinds`` names one."""
    query = _query(kinds, reads, since, limit)
    if memory_id is not None:
        return _with_archive(store, {**query, "memory_id": resolve_id(store, memory_id)},
                             limit)
    if repo is None:
        raise ValidationError("an audit trail needs a memory id or a repository")
    query["repo"] = validate_repo(repo)
    return _with_archive(store, query, limit) if archived else store.events(**query)


def cut_by_archive(store: MemoryStore, shown: Sequence[TelemetryEvent], *, repo: str,
                   kinds: Sequence[EventKind] | None, reads: bool, since: datetime | None,
                   limit: int) -> bool:
    """Whether a repository's live trail (``shown``: ``trail`` without ``archived``, for
    the same arguments) would list more had compaction not archived them: the archive
    holds a matching event and the trail is short of ``limit``, or that event is no
    older than the oldest shown. One look at the archive's newest matching event."""
    newest = store.events(**{**_query(kinds, reads, since, 1), "repo": validate_repo(repo)},
                          archived=True)
    if not newest:
        return False
    return len(shown) < limit or newest[0].at >= shown[-1].at


def _query(kinds: Sequence[EventKind] | None, reads: bool, since: datetime | None,
           limit: int) -> dict[str, Any]:
    changes = not reads and not (kinds and set(kinds) & READ_KINDS)
    return {"kinds": kinds, "changes": changes, "since": since, "newest": True,
            "limit": limit}


def _with_archive(store: MemoryStore, query: dict[str, Any],
                  limit: int) -> list[TelemetryEvent]:
    found = in_order([*store.events(**query), *store.events(**query, archived=True)],
                     newest=True)
    return found[:limit]


def in_order(events: Iterable[TelemetryEvent], *, newest: bool) -> list[TelemetryEvent]:
    """Events of the live table and the archive in one order: by time, then id (an
    event keeps its id in the archive), oldest or ``newest`` first."""
    return sorted(events, key=lambda e: (e.at, e.id or 0), reverse=newest)


def short_ids(ids: list[str]) -> dict[str, str]:
    """Each id at ``SHORT_ID`` characters, longer where two of ``ids`` would read alike
    (at most the whole id)."""
    out: dict[str, str] = {}
    for memory_id in ids:
        length = SHORT_ID
        while length < len(memory_id) and any(
                other != memory_id and other.startswith(memory_id[:length]) for other in ids):
            length += 4
        out[memory_id] = memory_id[:length]
    return out


@dataclass(frozen=True, slots=True)
class Described:
    """An event for people: which ref it was at, what it changed, why."""

    ref: str
    what: str
    why: str

    def to_dict(self) -> dict[str, str]:
        return {"ref": self.ref, "what": self.what, "why": self.why}


def describe(event: TelemetryEvent) -> Described:
    """Which ref, what changed and why, read from an event's detail."""
    detail: dict[str, Any] = dict(event.detail)
    ref = _ref(detail)
    why = next((str(detail[k]) for k in ("reason", "note", "pending") if detail.get(k)), "")
    return Described(ref=ref, what=_what(event.kind, detail), why=why)


def _ref(detail: dict[str, Any]) -> str:
    name = str(detail.get("ref") or "")
    for prefix in ("refs/heads/", "refs/tags/", "refs/remotes/"):
        name = name.removeprefix(prefix)
    revision = str(detail.get("revision") or "")[:12]
    if name and revision and name not in (revision, detail.get("revision")):
        return f"{name} @ {revision}"
    return name or revision


def _what(kind: EventKind, detail: dict[str, Any]) -> str:
    """The kind, and what the detail adds to it."""
    said = {
        EventKind.CREATED: (f"{detail['citations']} citation(s)"
                            if "citations" in detail else ""),
        EventKind.SUPERSEDED: f"by {detail.get('superseded_by', '?')}",
        EventKind.RELOCATED: f"{detail.get('old', '?')} -> {detail.get('new', '?')}",
        EventKind.RECITED: (f"{', '.join(detail.get('old') or [])} -> "
                            f"{', '.join(detail.get('new') or [])}"),
        EventKind.FEEDBACK: str(detail.get("outcome") or ""),
        EventKind.PROMOTED: f"into {detail.get('to', '?')}",
        EventKind.DEMOTED: (f"from {detail.get('from', '?')}"
                            + (f" by {detail['by']}" if detail.get("by") else "")
                            + ("; the file held no rule of it"
                               if detail.get("removed") is False else "")),
        EventKind.APPLIED: str(detail.get("task") or ""),
        EventKind.RETRIEVED: f"via {detail.get('via', '?')}",
        EventKind.CHECKED: f"{detail.get('scope', '')}: {detail.get('decision', '')}",
        EventKind.REVIVED: f"was {detail.get('was', '?')}",
        EventKind.EXPIRED: f"unused since {str(detail.get('unused_since', '?'))[:10]}",
        EventKind.FORGOTTEN: f"was {detail.get('status', '?')}",
    }.get(kind, "")
    if kind is EventKind.CREATED and detail.get("supersedes"):
        said += f", supersedes {detail['supersedes']}" + (
            " once approved" if detail.get("pending") else "")
    if kind is EventKind.CREATED and isinstance(detail.get("conflicts"), list | tuple):
        said += f", possible conflict with {', '.join(map(str, detail['conflicts']))}"
    if detail.get("by") and kind in (EventKind.REFRESHED, EventKind.APPROVED,
                                     EventKind.REJECTED):
        said = f"by {detail['by']}"
    stale = (f"; its rule in {detail['stale_rule']} is stale now"
             if detail.get("stale_rule") else "")
    return (f"{kind.value} {said}".strip() if said else kind.value) + stale
