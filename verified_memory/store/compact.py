"""Compaction (seed 003): back up, prune, archive old telemetry, vacuum.

``vmem db compact`` plans first and changes nothing unless asked (``--apply``); applied,
the steps run in this order, each one only after the one before succeeded (a backup
whose store then refuses the first change, as a file this user may not write does, is
removed again: nothing changed, and nothing is left behind):

1. **Back up.** SQLite: a copy through the online backup API (consistent while other
   processes go on reading and writing). Postgres: a ``vmem db export`` of every
   repository, a file any store can import (or none, ``--no-backup``, when the database
   has backups of its own).
2. **Prune** what forgotten memories left: citation rows without their memory (none on
   Postgres, whose foreign key cascades; on SQLite a tool that did not enforce foreign
   keys may have left some) and, on SQLite, the words of deleted text still in the
   full-text index (merged away with step 4).
3. **Archive** the events older than N days: moved, in one transaction, into
   ``agent_memory_telemetry_archive``; they still count in ``vmem stats`` and export.
4. **Vacuum**: SQLite merges the full-text index, rebuilds the file and empties its
   write-ahead log; Postgres runs ``VACUUM (ANALYZE)`` on the tables.

Supabase's REST API can neither back up nor vacuum: compact through the project's direct
``postgresql://`` connection string.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from verified_memory.errors import StoreError, ValidationError
from verified_memory.models import StoreInfo, utcnow

__all__ = ["Compactable", "CompactionPlan", "CompactionResult", "compact", "plan"]


@runtime_checkable
class Compactable(Protocol):
    """What a store that can be compacted offers besides ``MemoryStore``."""

    def compaction_counts(self, before: datetime) -> tuple[int, int]:
        """Citation rows without their memory, and events older than ``before``."""

    def prune(self) -> int:
        """Delete citation rows without their memory; how many."""

    def vacuum(self) -> None:
        """Give back the space of deleted rows (and their text)."""

    def archive_events(self, before: datetime) -> int:
        """``MemoryStore.archive_events``."""

    def info(self) -> StoreInfo:
        """``MemoryStore.info``."""


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What a compaction would do, counted before anything changes."""

    location: str
    kind: str
    older_than_days: int
    before: datetime  # events older than this are archived
    orphaned_citations: int
    events_to_archive: int
    size_bytes: int | None
    backup: str | None  # where the backup goes (None: no backup)

    def to_dict(self) -> dict[str, Any]:
        return {"store": self.location, "kind": self.kind,
                "older_than_days": self.older_than_days, "before": self.before.isoformat(),
                "orphaned_citations": self.orphaned_citations,
                "events_to_archive": self.events_to_archive, "size_bytes": self.size_bytes,
                "backup": self.backup}


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What a compaction did."""

    plan: CompactionPlan
    pruned: int
    archived: int
    size_bytes: int | None  # after

    def to_dict(self) -> dict[str, Any]:
        return {**self.plan.to_dict(), "applied": True, "pruned": self.pruned,
                "archived": self.archived, "size_bytes_before": self.plan.size_bytes,
                "size_bytes": self.size_bytes}


def plan(store: object, older_than_days: int, backup: Path | None) -> CompactionPlan:
    """Count what compacting ``store`` would do (nothing is changed)."""
    if not isinstance(store, Compactable):
        raise ValidationError(
            f"{store!r} cannot be compacted: compaction needs a SQLite file or a direct "
            "postgresql:// connection (for Supabase, its database connection string)")
    if older_than_days < 0:
        raise ValidationError(f"--older-than must be 0 days or more, got {older_than_days}")
    before = utcnow() - timedelta(days=older_than_days)
    orphans, old = store.compaction_counts(before)
    info = store.info()
    return CompactionPlan(location=info.location, kind=info.kind,
                          older_than_days=older_than_days, before=before,
                          orphaned_citations=orphans, events_to_archive=old,
                          size_bytes=info.size_bytes,
                          backup=None if backup is None else str(backup))


def compact(store: object, planned: CompactionPlan,
            back_up: Callable[[Path], None]) -> CompactionResult:
    """Carry out ``planned``: the backup (``back_up(path)``: the store's own copy, or an
    export), then prune, archive, vacuum, each after the one before succeeded."""
    if not isinstance(store, Compactable):
        raise ValidationError(f"{store!r} cannot be compacted")
    target = None if planned.backup is None else Path(planned.backup)
    if target is not None:
        if target.exists():
            raise ValidationError(f"the backup {target} exists already: name another "
                                  "(--backup FILE)")
        try:
            back_up(target)
        except OSError as exc:
            raise StoreError(f"cannot write the backup {target}: {exc.strerror or exc}") from exc
    try:
        pruned = store.prune()
    except BaseException:
        # Nothing changed (a store that refuses writes, beside a file this user may not
        # write, or a lock that stayed held): a backup of it is litter. Once the first
        # change is made, the backup is what it was before and is kept.
        if target is not None:
            with suppress(OSError):
                target.unlink()
        raise
    archived = store.archive_events(planned.before)
    store.vacuum()
    return CompactionResult(plan=planned, pruned=pruned, archived=archived,
                            size_bytes=store.info().size_bytes)
