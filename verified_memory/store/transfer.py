"""Move memories and telemetry between stores as JSON Lines: SQLite <-> Postgres <-> Supabase.

One JSON object per line, each with a ``type``:

- ``{"type": "header", "format": "verified-memory", "version": 1, "exported_at": ...}``
  first, so that a file is recognised (and a future format refused) before anything
  is written;
- ``{"type": "memory", ...Memory.to_dict()}``: every field, citations and fingerprints
  included, so a memory imported elsewhere is equal to the one exported;
- ``{"type": "event", ...TelemetryEvent.to_dict()}``: telemetry, oldest first.

Only the ``MemoryStore`` Protocol is used, so any store can be either end. Event ids are
surrogate keys: the importing store assigns its own, in the same order. Importing a
memory whose id the target already has skips it (and counts it), and so is an event the
target already holds (the same kind, repository, memory, actor, time and detail), so an
import that was interrupted (even killed outright) is completed by running it again,
and importing a file twice changes nothing. Each memory is written with its citations in
one transaction, so none is ever half there.

A file is checked whole before anything is written: every line at most
``IMPORT_LINE_MAX`` characters, valid JSON not nested absurdly deep, every memory within
the limits a memory has at any entry point (``models``: subject, fact, reason, tags,
citations).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

from verified_memory.errors import Conflict, ValidationError
from verified_memory.limits import (
    CITATIONS_MAX,
    FACT_MAX,
    IMPORT_LINE_MAX,
    SUBJECT_MAX,
    TAG_MAX,
    TAGS_MAX,
    too_long,
)
from verified_memory.models import Memory, TelemetryEvent, utcnow, validate_repo
from verified_memory.store._rows import validate_events, validate_memory
from verified_memory.store.base import MemoryStore

__all__ = ["FORMAT", "VERSION", "TransferCounts", "export_jsonl", "import_jsonl"]

FORMAT = "verified-memory"
VERSION = 1
#: Events written per ``log`` call on import: one transaction each.
EVENT_BATCH = 500


@dataclass(frozen=True, slots=True)
class TransferCounts:
    """What an export wrote or an import read, per kind of line."""

    memories: int = 0
    events: int = 0
    skipped: int = 0  # memories the target store already had (import only)
    repos: tuple[str, ...] = field(default=())
    skipped_events: int = 0  # events the target store already had (import only)

    def to_dict(self) -> dict[str, Any]:
        return {
            "memories": self.memories,
            "events": self.events,
            "skipped": self.skipped,
            "skipped_events": self.skipped_events,
            "repos": list(self.repos),
        }


def export_jsonl(
    store: MemoryStore, out: IO[str], repos: Sequence[str] | None = None
) -> TransferCounts:
    """Write every memory (any status) and event of ``repos`` (default: every repository
    with memories) to ``out``; memories oldest first, then the repository's events."""
    chosen = sorted({validate_repo(r) for r in repos}) if repos is not None else _repos(store)
    _write(out, {"type": "header", "format": FORMAT, "version": VERSION,
                 "exported_at": utcnow().isoformat(), "repos": chosen})
    memories = events = 0
    for repo in chosen:
        found = store.recent(repo, limit=None, status=None)
        for memory in sorted(found, key=lambda m: (m.created_at, m.id)):
            _write(out, {"type": "memory", **memory.to_dict()})
            memories += 1
        for event in store.events(repo=repo, limit=None):
            record = event.to_dict()
            # Postgres (jsonb) does not keep key order: sort it, so that the same
            # telemetry exports to the same text from every store.
            record["detail"] = json.loads(json.dumps(record["detail"], sort_keys=True))
            _write(out, {"type": "event", **record})
            events += 1
    return TransferCounts(memories=memories, events=events, repos=tuple(chosen))


def import_jsonl(store: MemoryStore, source: Iterable[str]) -> TransferCounts:
    """Read an ``export_jsonl`` file into ``store``; what it already holds is skipped.

    The whole file is parsed and validated first: a bad line (named by number) raises
    ``ValidationError`` before anything is written. ``source`` may be any iterable of
    lines; ``limits.bounded_lines`` keeps an endless one from filling memory.
    """
    memories: list[Memory] = []
    events: list[tuple[datetime, int, TelemetryEvent]] = []
    for number, record in _records(source):
        kind = record.pop("type")
        try:
            if kind == "memory":
                memory = Memory.from_dict(record)
                validate_memory(memory)
                _check_limits(memory)
                memories.append(memory)
            elif kind == "event":
                # The target numbers its own events; the exported id only keeps their order.
                order = int(record.pop("id", None) or 0)
                event = TelemetryEvent.from_dict(record)
                validate_events([event])
                at = event.at if event.at.tzinfo else event.at.replace(tzinfo=UTC)
                events.append((at, order, event))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ValidationError):
                raise ValidationError(f"line {number}: {exc}") from exc
            raise ValidationError(f"line {number}: not a valid {kind}: {exc!r}") from exc
    added = skipped = 0
    for memory in memories:
        try:
            store.add(memory)
        except Conflict:
            skipped += 1
        else:
            added += 1
    # In the source's order (time, then id) across repositories, so that an export of
    # the target numbers its events as the source did.
    ordered = [event for _, _, event in sorted(events, key=lambda e: (e[0], e[1]))]
    repos = sorted({m.repo for m in memories} | {e.repo for e in ordered})
    fresh = _not_held(store, ordered, repos)
    for start in range(0, len(fresh), EVENT_BATCH):
        store.log(fresh[start : start + EVENT_BATCH])
    return TransferCounts(memories=added, events=len(fresh), skipped=skipped,
                          repos=tuple(repos), skipped_events=len(ordered) - len(fresh))


def _event_key(event: TelemetryEvent) -> tuple[str, ...]:
    at = event.at if event.at.tzinfo else event.at.replace(tzinfo=UTC)
    return (event.kind.value, event.repo, event.memory_id or "", event.actor or "",
            at.astimezone(UTC).isoformat(), json.dumps(dict(event.detail), sort_keys=True))


def _not_held(store: MemoryStore, events: Sequence[TelemetryEvent],
              repos: Sequence[str]) -> list[TelemetryEvent]:
    """``events`` without those the target already holds (each held one matches one
    imported one): a re-run after an interrupted import appends only the rest."""
    if not events:
        return []
    held = Counter(_event_key(e) for repo in repos for e in store.events(repo=repo, limit=None))
    fresh: list[TelemetryEvent] = []
    for event in events:
        key = _event_key(event)
        if held[key] > 0:
            held[key] -= 1
        else:
            fresh.append(event)
    return fresh


def _check_limits(memory: Memory) -> None:
    """The limits every entry point puts on a memory (``NewMemory.parse``)."""
    for name, value, limit in (("subject", memory.subject, SUBJECT_MAX),
                               ("fact", memory.fact, FACT_MAX),
                               ("reason", memory.reason or "", FACT_MAX)):
        if len(value) > limit:
            raise ValidationError(f"memory {memory.id}: {name} is {len(value)} characters "
                                  f"long; the limit is {limit}")
    if not 1 <= len(memory.citations) <= CITATIONS_MAX:
        raise ValidationError(f"memory {memory.id} has {len(memory.citations)} citations; a "
                              f"memory has 1 to {CITATIONS_MAX}")
    if len(memory.tags) > TAGS_MAX or any(len(t) > TAG_MAX for t in memory.tags):
        raise ValidationError(f"memory {memory.id}: at most {TAGS_MAX} tags of at most "
                              f"{TAG_MAX} characters each")


# --------------------------------------------------------------------------- helpers


def _repos(store: MemoryStore) -> list[str]:
    return sorted(store.repos())


def _write(out: IO[str], record: dict[str, Any]) -> None:
    out.write(json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":")))
    out.write("\n")


def _records(source: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) per non-blank line, after checking the header."""
    header_seen = False
    for number, line in enumerate(source, start=1):
        if too_long(line, IMPORT_LINE_MAX):
            raise ValidationError(f"line {number} is longer than {IMPORT_LINE_MAX:,} "
                                  "characters (the limit)")
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"line {number}: not JSON ({exc.msg})") from exc
        except RecursionError:
            raise ValidationError(f"line {number}: JSON nested too deeply") from None
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise ValidationError(f"line {number}: expected an object with a \"type\"")
        kind = record["type"]
        if not header_seen:
            if kind != "header" or record.get("format") != FORMAT:
                raise ValidationError(
                    f"line {number}: not a verified-memory export (the first line must be "
                    f'{{"type": "header", "format": "{FORMAT}", ...}})'
                )
            version = record.get("version")
            if not isinstance(version, int) or version > VERSION:
                raise ValidationError(
                    f"line {number}: export format version {version!r} is newer than this "
                    f"verified-memory reads ({VERSION}); upgrade verified-memory"
                )
            header_seen = True
            continue
        if kind == "header":
            raise ValidationError(f"line {number}: a second header")
        if kind not in {"memory", "event"}:
            raise ValidationError(f"line {number}: unknown type {kind!r}")
        yield number, record
    if not header_seen:
        raise ValidationError("the file is empty: no verified-memory export header")
