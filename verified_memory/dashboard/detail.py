"""One memory's detail for the dashboard: the memory with its citations, the supersede
chain it belongs to, and its audit trail.

``audit_trail`` is the one place that decides what the trail is; it is meant to become
whatever ``vmem log`` shows for a memory, and like it reads the events ``vmem db compact``
archived too. Reads only: no ``retrieved`` event (the dashboard hands nothing to an agent).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from verified_memory.audit import in_order
from verified_memory.errors import NotFound
from verified_memory.models import EventKind, Memory, TelemetryEvent

if TYPE_CHECKING:
    from verified_memory.service import MemoryService

__all__ = ["TRAIL_LIMIT", "MemoryDetail", "audit_trail", "memory_detail", "memory_details"]

#: Events shown per memory: the most recent ones.
TRAIL_LIMIT = 100
#: Every kind but ``retrieved``: a popular memory is handed out thousands of times, which
#: says nothing about what happened to it (the funnel counts those).
TRAIL_KINDS = tuple(k for k in EventKind if k is not EventKind.RETRIEVED)


@dataclass(frozen=True, slots=True)
class MemoryDetail:
    memory: Memory
    history: tuple[Memory, ...]  # the supersede chain, oldest first (just the memory: none)
    trail: tuple[TelemetryEvent, ...]  # the most recent events, oldest first
    earlier: int  # events before those shown
    archived: int  # events shown that compaction archived


def audit_trail(service: MemoryService, memory_id: str,
                limit: int = TRAIL_LIMIT) -> tuple[list[TelemetryEvent], int, int]:
    """What happened to a memory, oldest first: its last ``limit`` events (retrievals
    left out; archived ones in, as in ``vmem log ID``), how many earlier ones are not
    shown, and how many of those shown come from the archive."""
    def read(archived: bool) -> list[TelemetryEvent]:
        return service.memories.events(memory_id=memory_id, kinds=TRAIL_KINDS, limit=None,
                                       archived=archived)

    archive = read(True)
    events = in_order([*archive, *read(False)], newest=False)
    shown = events[-limit:] if limit else []
    from_archive = {id(e) for e in archive}  # these objects: an event may lack a key
    return shown, len(events) - len(shown), sum(id(e) in from_archive for e in shown)


def memory_detail(service: MemoryService, memory_id: str) -> MemoryDetail:
    """One memory's detail; ``NotFound`` when there is no such memory."""
    return _detail(service, service.memories.get(memory_id))


def memory_details(service: MemoryService, memory_ids: Sequence[str]) -> list[MemoryDetail]:
    """The detail of each memory that exists, read in one query for the memories and one
    per memory for its trail."""
    wanted = list(dict.fromkeys(memory_ids))
    try:
        memories = service.memories.get_many(wanted)
    except NotFound:  # one was deleted since it was listed: show the others
        memories = [m for m in (_get(service, i) for i in wanted) if m is not None]
    return [_detail(service, memory) for memory in memories]


def _detail(service: MemoryService, memory: Memory) -> MemoryDetail:
    chained = memory.supersedes is not None or memory.superseded_by is not None
    history = tuple(service.history(memory.id)) if chained else (memory,)
    trail, earlier, archived = audit_trail(service, memory.id)
    return MemoryDetail(memory, history, tuple(trail), earlier, archived)


def _get(service: MemoryService, memory_id: str) -> Memory | None:
    try:
        return service.memories.get(memory_id)
    except NotFound:
        return None
