"""Move memories and telemetry between stores as JSON Lines: SQLite <-> Postgres <-> Supabase.

One JSON object per line, each with a ``type``:

- ``{"type": "header", "format": "verified-memory", "version": 2, "exported_at": ...,
  "counts": {"memories": N, "events": N, "tombstones": N}}`` first, so that a file is
  recognised (and a future format refused) before anything is written, and a file cut
  short at a line's end (an interrupted copy, a ``head`` in a pipe) is refused rather
  than imported in part (``counts``: files written before it have none);
- ``{"type": "memory", ...Memory.to_dict()}``: every field, citations and fingerprints
  included, so a memory imported elsewhere is equal to the one exported;
- ``{"type": "event", ...TelemetryEvent.to_dict()}``: telemetry (archived events too),
  oldest first, each with its ``key``;
- ``{"type": "tombstone", ...Tombstone.to_dict()}``: what is left of forgotten memories
  (version 2), so their ids stay forgotten wherever the file goes.

Only the ``MemoryStore`` Protocol is used, so any store can be either end.

**Idempotent.** An event's key names it everywhere; the importing store skips the keys it
holds (``MemoryStore.load``), as it skips memory ids it has or forgot, and tombstones it
has. Events written before keys existed (and every event of a version 1 file) get a key
derived from what they say and how many identical events came before them in their
repository (``legacy_key``), the same however often and from whichever store they are
exported, so importing a file twice adds nothing either. (Event ids are surrogate keys:
the importing store numbers its own, in the same order.)

**All or nothing.** The whole file is read and checked first (every line at most
``IMPORT_LINE_MAX`` characters, valid JSON nested at most ``JSON_DEPTH_MAX`` levels, each
record as strictly as a memory is checked at any entry point: ``records``), then written
in one transaction (``MemoryStore.load``): a bad line, or a failure while writing, leaves
the store as it was.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import IO, Any

from verified_memory.errors import NotFound, ValidationError
from verified_memory.limits import (
    IMPORT_LINE_MAX,
    check_depth,
    refuse_undecoded,
    too_long,
)
from verified_memory.models import Memory, TelemetryEvent, Tombstone, utcnow, validate_repo
from verified_memory.store._rows import time_to_text
from verified_memory.store.base import MemoryStore
from verified_memory.store.records import read_event, read_memory, read_tombstone

__all__ = ["FORMAT", "VERSION", "Export", "TransferCounts", "collect", "export_jsonl",
           "forgetting_reason", "held_tombstones", "import_jsonl", "legacy_key",
           "load_export", "read_export"]

FORMAT = "verified-memory"
#: 2: events carry their key; tombstones. Version 1 files are read too.
VERSION = 2
LEGACY_PREFIX = "legacy-"
_COUNTED = frozenset({"memories", "events", "tombstones"})


@dataclass(frozen=True, slots=True)
class TransferCounts:
    """What an export wrote or an import wrote and skipped, per kind of record."""

    memories: int = 0
    events: int = 0
    skipped: int = 0  # memories the target already had, or had forgotten (import only)
    repos: tuple[str, ...] = field(default=())
    skipped_events: int = 0  # events the target already had (import only)
    tombstones: int = 0
    skipped_tombstones: int = 0  # tombstones the target had, or whose memory it holds
    #: memories the target held that a tombstone of the file names: forgotten there too
    erased: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "memories": self.memories,
            "events": self.events,
            "tombstones": self.tombstones,
            "skipped": self.skipped,
            "skipped_events": self.skipped_events,
            "skipped_tombstones": self.skipped_tombstones,
            "erased": self.erased,
            "repos": list(self.repos),
        }


@dataclass(frozen=True, slots=True)
class Export:
    """A whole export file, read and checked (``read_export``): nothing is written yet."""

    memories: tuple[Memory, ...]
    events: tuple[TelemetryEvent, ...]  # in the source's order, every one keyed
    tombstones: tuple[Tombstone, ...]
    chosen: tuple[str, ...] = ()  # the repositories an export was asked for (``collect``)

    @property
    def repos(self) -> tuple[str, ...]:
        return tuple(sorted({m.repo for m in self.memories} | {e.repo for e in self.events}
                            | {t.repo for t in self.tombstones} | set(self.chosen)))


def legacy_key(event: TelemetryEvent, occurrence: int) -> str:
    """The key of an event written before events had keys: what it says (kind, where,
    who, when, detail) and how many identical events its repository had before it."""
    said = json.dumps([event.kind.value, event.repo, event.memory_id, event.actor,
                       time_to_text(event.at), dict(event.detail)],
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return f"{LEGACY_PREFIX}{hashlib.sha256(said.encode()).hexdigest()[:32]}-{occurrence}"


def _keyed(events: Iterable[TelemetryEvent]) -> list[TelemetryEvent]:
    """``events`` (one repository's, in order) with a legacy key for each one without."""
    seen: Counter[str] = Counter()
    out = []
    for event in events:
        if event.key is None:
            base = legacy_key(event, 0)
            event = replace(event, key=base[:-2] + f"-{seen[base]}")
            seen[base] += 1
        out.append(event)
    return out


# --------------------------------------------------------------------------- export


def collect(store: MemoryStore, repos: Sequence[str] | None = None) -> Export:
    """Every memory (any status, oldest first), event (archived ones too, in the order
    they happened, each keyed) and tombstone of ``repos`` (default: every repository
    with memories): what an export writes, in the order it writes it."""
    chosen = sorted({validate_repo(r) for r in repos}) if repos is not None else _repos(store)
    memories: list[Memory] = []
    events: list[TelemetryEvent] = []
    tombstones: list[Tombstone] = []
    for repo in chosen:
        found = store.recent(repo, limit=None, status=None)
        memories += sorted(found, key=lambda m: (m.created_at, m.id))
        trail = [*store.events(repo=repo, limit=None, archived=True),
                 *store.events(repo=repo, limit=None)]
        trail.sort(key=lambda e: (e.at, e.id or 0))
        events += _keyed(trail)
        tombstones += sorted(store.tombstones(repo=repo, limit=None), key=lambda t: t.id)
    return Export(memories=tuple(memories), events=tuple(events),
                  tombstones=tuple(tombstones), chosen=tuple(chosen))


def export_jsonl(
    store: MemoryStore, out: IO[str], repos: Sequence[str] | None = None
) -> TransferCounts:
    """Write every memory (any status), event (archived ones too) and tombstone of
    ``repos`` (default: every repository with memories) to ``out``."""
    export = collect(store, repos)
    _write(out, {"type": "header", "format": FORMAT, "version": VERSION,
                 "exported_at": utcnow().isoformat(), "repos": list(export.chosen),
                 "counts": {"memories": len(export.memories), "events": len(export.events),
                            "tombstones": len(export.tombstones)}})
    for memory in export.memories:
        _write(out, {"type": "memory", **memory.to_dict()})
    for event in export.events:
        record = event.to_dict()
        # Postgres (jsonb) does not keep key order: sort it, so that the same
        # telemetry exports to the same text from every store.
        record["detail"] = json.loads(json.dumps(record["detail"], sort_keys=True))
        _write(out, {"type": "event", **record})
    for tombstone in export.tombstones:
        _write(out, {"type": "tombstone", **tombstone.to_dict()})
    return TransferCounts(memories=len(export.memories), events=len(export.events),
                          repos=export.chosen, tombstones=len(export.tombstones))


# --------------------------------------------------------------------------- import


def import_jsonl(store: MemoryStore, source: Iterable[str]) -> TransferCounts:
    """Read an ``export_jsonl`` file into ``store``: all of it, or (on any error) none;
    what the store already holds is skipped."""
    return load_export(store, read_export(source))


def read_export(source: Iterable[str]) -> Export:
    """Read and check a whole export; ``ValidationError`` naming the first bad line.
    ``source`` may be any iterable of lines; ``limits.bounded_lines`` keeps an endless
    one from filling memory. Decode a file with ``errors="surrogateescape"``: a byte
    that is not UTF-8 is then named by its line (a decoder's own error can only count
    bytes from where its last chunk began)."""
    memories: list[Memory] = []
    events: list[tuple[datetime, int, TelemetryEvent]] = []
    tombstones: list[Tombstone] = []
    promised: dict[str, int] = {}  # the header's counts, when it has them
    # Where each memory id (a tombstone's too) and event key was first seen: a file that
    # repeats one is malformed, and is refused here, by line, before a store is opened
    # (the store's own check comes after tombstones have forgotten what they name).
    seen: dict[tuple[str, str], int] = {}
    for number, version, record in _records(source, promised):
        kind = record.pop("type")
        try:
            if kind == "event":
                # The target numbers its own events; the exported id only keeps order.
                order = record.pop("id", None) or 0
                if isinstance(order, bool) or not isinstance(order, int):
                    raise ValidationError(f"id must be a whole number, got {order!r}")
                if version < 2 and "key" in record:
                    raise ValidationError("a version 1 export has no event keys")
                event = read_event(record)
                _once(seen, ("event key", event.key), number)
                events.append((event.at.astimezone(UTC), order, event))
            elif kind == "memory":
                memory = read_memory(record)
                _once(seen, ("memory id", memory.id), number)
                memories.append(memory)
            elif version < 2:
                raise ValidationError("a version 1 export has no tombstones")
            else:
                stone = read_tombstone(record)
                _once(seen, ("memory id", stone.id), number)
                tombstones.append(stone)
        except ValidationError as exc:
            raise ValidationError(f"line {number}: {kind}: {exc}") from None
    found = {"memories": len(memories), "events": len(events), "tombstones": len(tombstones)}
    if promised and promised != found:
        raise ValidationError(
            f"the file does not hold what its header promises ({_listed(promised)}; it "
            f"holds {_listed(found)}): cut short, or edited? Nothing was imported")
    # In the source's order (time, then id) across repositories, so that an export of
    # the target numbers its events as the source did.
    ordered = [event for _, _, event in sorted(events, key=lambda e: (e[0], e[1]))]
    by_repo: dict[str, list[TelemetryEvent]] = {}
    for event in ordered:
        by_repo.setdefault(event.repo, []).append(event)
    keyed = {id(old): new for repo_events in by_repo.values()
             for old, new in zip(repo_events, _keyed(repo_events), strict=True)}
    return Export(memories=tuple(memories), events=tuple(keyed[id(e)] for e in ordered),
                  tombstones=tuple(tombstones))


def load_export(store: MemoryStore, export: Export, *,
                forget_held: bool = True) -> TransferCounts:
    """Write a checked export in one transaction (``MemoryStore.load``); what the store
    holds (memory ids it has or forgot, event keys, tombstones) is skipped.

    First, with ``forget_held``, a memory the store holds that a tombstone of the export
    names (forgotten in the store exported) is forgotten here too, each in a transaction
    of its own: forgetting is for text that must not live on (a leaked secret), so it is
    done even if the rest then fails. ``vmem git import`` forgets them itself, under the
    ref rule."""
    erase = held_tombstones(store, export.tombstones) if forget_held else []
    for stone in erase:
        store.forget([stone.id], by=stone.forgotten_by,
                     reason=forgetting_reason(stone, "forgotten in the store exported; "
                                                     "imported"))
    events = list(export.events)
    legacy = {e.repo for e in events if e.key and e.key.startswith(LEGACY_PREFIX)}
    if legacy:  # the target may hold these very events without a key: an old import
        held: set[str | None] = set()
        for repo in sorted(legacy):
            trail = [*store.events(repo=repo, limit=None, archived=True),
                     *store.events(repo=repo, limit=None)]
            trail.sort(key=lambda e: (e.at, e.id or 0))
            held |= {e.key for e in _keyed(e for e in trail if e.key is None)}
        events = [e for e in events if e.key not in held]
    memories, written, tombstones = store.load(export.memories, events, export.tombstones)
    return TransferCounts(
        memories=memories, events=written, skipped=len(export.memories) - memories,
        repos=export.repos, skipped_events=len(export.events) - written,
        tombstones=tombstones, skipped_tombstones=len(export.tombstones) - tombstones,
        erased=len(erase))


def held_tombstones(store: MemoryStore, tombstones: Iterable[Tombstone]) -> list[Tombstone]:
    """The tombstones whose memory ``store`` still holds (copied there before it was
    forgotten where the tombstone comes from)."""
    held = []
    for stone in tombstones:
        try:
            store.get(stone.id)
        except NotFound:
            continue
        held.append(stone)
    return held


def forgetting_reason(stone: Tombstone, how: str) -> str:
    """The reason a store forgets a memory another store forgot: that store's, and
    ``how`` it came (kept within a reason's length)."""
    why = stone.reason if len(stone.reason) <= 1800 else stone.reason[:1797] + "..."
    return f"{why} ({how})"


# --------------------------------------------------------------------------- helpers


def _repos(store: MemoryStore) -> list[str]:
    return sorted(store.repos())


def _write(out: IO[str], record: dict[str, Any]) -> None:
    out.write(json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":")))
    out.write("\n")


def _once(seen: dict[tuple[str, str], int], name: tuple[str, str | None], number: int) -> None:
    """Refuse a memory id or event key that an earlier line of the file already has."""
    what, value = name
    if value is None:  # an event without a key gets one derived later, never twice
        return
    first = seen.setdefault((what, value), number)
    if first != number:
        raise ValidationError(f"{what} {value} is on line {first} already")


def _listed(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in counts.items())


def _records(source: Iterable[str],
             promised: dict[str, int]) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(line number, format version, object) per non-blank line, after the header;
    ``promised`` gets the header's counts, when it has them."""
    version: int | None = None
    for number, line in enumerate(source, start=1):
        if too_long(line, IMPORT_LINE_MAX):
            raise ValidationError(f"line {number} is longer than {IMPORT_LINE_MAX:,} "
                                  "characters (the limit)")
        refuse_undecoded(line, number)
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"line {number}: not JSON ({exc.msg})") from exc
        except RecursionError:
            raise ValidationError(f"line {number}: JSON nested too deeply") from None
        check_depth(record, f"line {number}")
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise ValidationError(f"line {number}: expected an object with a \"type\"")
        kind = record["type"]
        if version is None:
            if kind != "header" or record.get("format") != FORMAT:
                raise ValidationError(
                    f"line {number}: not a verified-memory export (the first line must be "
                    f'{{"type": "header", "format": "{FORMAT}", ...}})'
                )
            given = record.get("version")
            if isinstance(given, bool) or not isinstance(given, int) or given < 1:
                raise ValidationError(f"line {number}: export format version {given!r} is "
                                      "not a version")
            if given > VERSION:
                raise ValidationError(
                    f"line {number}: export format version {given} is newer than this "
                    f"verified-memory reads (1 to {VERSION}); upgrade verified-memory"
                )
            version = given
            counts = record.get("counts")
            if counts is not None:
                if not isinstance(counts, dict) or set(counts) != _COUNTED or any(
                        isinstance(n, bool) or not isinstance(n, int) or n < 0
                        for n in counts.values()):
                    raise ValidationError(f"line {number}: the header's counts must be "
                                          f"whole numbers of {', '.join(sorted(_COUNTED))}")
                promised.update((kind, counts[kind])
                                for kind in ("memories", "events", "tombstones"))
            continue
        if kind == "header":
            raise ValidationError(f"line {number}: a second header")
        if kind not in {"memory", "event", "tombstone"}:
            raise ValidationError(f"line {number}: unknown type {kind!r}")
        yield number, version, record
    if version is None:
        raise ValidationError("the file is empty: no verified-memory export header")
