"""``GitStore``: the repository as the store (``VMEM_DATABASE_URL=git:.memory``).

The files of the memory folder (``layout``) are the truth; a SQLite index inside the
folder (``index.sqlite``, git-ignored) answers every query at SQLite's speed. Each write
goes to the index first (its transaction decides, as in ``SQLiteStore``), then to the
files: the memories it changed rewritten, its events appended to this session's log
(``_events/YYYY/MM/DD/<actor>__<session>.jsonl``: two teammates never write the same
file), a forgotten memory's file replaced by its tombstone. ``index.md`` is rewritten
when the store closes.

The index is rebuilt from the files (``reindex``, ``vmem git reindex``) whenever they
changed behind it: after a ``git pull``, a checkout, a merge, a hand edit. A signature of
the files (names, sizes, times) is kept next to the index when the store closes, and
dropped at the first write, so a process that dies between the index and the files leaves
an index that is rebuilt, not trusted. Archived telemetry (``archive_events``) is an index
matter: the logs keep every event, and a rebuilt index has them all live.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from verified_memory.errors import NotFound, ReadOnlyStore
from verified_memory.gitstore.layout import (
    INDEX,
    event_file,
    event_line,
    id_part,
    memory_file,
    read_folder,
    render_index,
    render_memory,
    render_tombstone,
    support_files,
    tombstone_file,
    write_text,
)
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
    new_event_key,
)
from verified_memory.store.base import ClosingStore, Decide
from verified_memory.store.sqlite import SQLiteStore
from verified_memory.store.transfer import Export, TransferCounts, load_export
from verified_memory.store.views import ViewQuery

__all__ = ["GitStore", "rebuild_index"]

INDEX_FILE = "index.sqlite"
STATE_FILE = "index.state"


def _signature(folder: Path) -> str:
    """What the index was built from: every memory, tombstone and log file's name, size
    and modification time."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if relative.startswith((".", INDEX_FILE, STATE_FILE)) or relative == INDEX:
            continue
        if path.is_file():
            stat = path.stat()
            digest.update(f"{relative}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def rebuild_index(folder: Path) -> tuple[int, int, int]:
    """Build the index from the files into a new file, then put it in place of the old
    one; how many memories, events and tombstones it holds. A memory with a tombstone
    (forgotten on another branch) stays forgotten."""
    target = folder / INDEX_FILE
    fresh = folder / f"{INDEX_FILE}.rebuild"
    _remove_sqlite(fresh)
    with SQLiteStore(fresh) as index:
        counts = _fill(index, folder)
    _remove_sqlite(target)
    os.replace(fresh, target)
    (folder / STATE_FILE).write_text(_signature(folder) + "\n", encoding="utf-8")
    return counts.memories, counts.events, counts.tombstones


def _fill(index: SQLiteStore, folder: Path) -> TransferCounts:
    """Load the files of ``folder`` into an empty index."""
    read = read_folder(folder)
    gone = {t.id for t in read.tombstones}
    memories = tuple(m for m in read.memories.values() if m.id not in gone)
    return load_export(index, Export(memories=memories, events=read.events,
                                     tombstones=read.tombstones))


def _remove_sqlite(path: Path) -> None:
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        name.unlink(missing_ok=True)


class GitStore(ClosingStore):
    """Memories as files in a folder of the repository, with a rebuildable SQLite index.
    ``session`` names this process's logs (default: ``VMEM_SESSION``, else random)."""

    def __init__(self, folder: str | os.PathLike[str], *, session: str | None = None,
                 create: bool = True) -> None:
        self.folder = Path(folder).expanduser()
        if not self.folder.is_dir():
            if not create:
                raise NotFound(f"there is no memory folder at {self.folder} (vmem git "
                               "export writes one; a command that stores creates it)")
            self.folder.mkdir(parents=True)
        self.session = session or os.environ.get("VMEM_SESSION") or secrets.token_hex(6)
        writable = os.access(self.folder, os.W_OK)
        for name, text in support_files().items() if writable else ():
            write_text(self.folder / name, text)
        state = self.folder / STATE_FILE
        try:
            current = state.read_text(encoding="utf-8").strip() == _signature(self.folder)
        except FileNotFoundError:
            current = False
        self._wrote = False
        self._closed = False
        current = current and (self.folder / INDEX_FILE).exists()
        if not current and not writable:
            # A folder this user may only read (a read-only checkout) cannot keep an
            # index: one is built in memory for this process, and writes are refused.
            self.index = SQLiteStore(":memory:")
            _fill(self.index, self.folder)
            return
        if not current:
            rebuild_index(self.folder)
        self.index = SQLiteStore(self.folder / INDEX_FILE)

    # ------------------------------------------------------------------ files

    def _writing(self) -> None:
        """Before the first write: the index may get ahead of the files until close. A
        folder this user may not write is refused here, before anything is written."""
        if not self._wrote:
            try:
                if not os.access(self.folder, os.W_OK):
                    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
                (self.folder / STATE_FILE).unlink(missing_ok=True)
            except OSError as exc:
                raise ReadOnlyStore(f"the memory folder {self.folder} is read-only "
                                    f"({exc.strerror or exc}): nothing was written") from exc
            self._wrote = True

    @staticmethod
    def _keyed(events: Sequence[TelemetryEvent]) -> list[TelemetryEvent]:
        # Keys are given here, not by the index, so that the logs hold the same keys.
        return [e if e.key else replace(e, key=new_event_key()) for e in events]

    def _append(self, events: Sequence[TelemetryEvent]) -> None:
        lines: dict[str, list[str]] = {}
        for event in events:
            lines.setdefault(event_file(event, self.session), []).append(event_line(event))
        for relative, text in lines.items():
            path = self.folder / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8", newline="") as fh:
                fh.write("".join(text))

    def _remove_files(self, memory_id: str, keep: str | None = None) -> None:
        for path in self.folder.glob(f"*/{id_part(memory_id)}_*.md"):
            if path.relative_to(self.folder).as_posix() != keep:
                path.unlink()

    def _write_memories(self, memories: Sequence[Memory]) -> None:
        for memory in memories:
            relative = memory_file(memory)
            write_text(self.folder / relative, render_memory(memory))
            self._remove_files(memory.id, keep=relative)

    # ------------------------------------------------------------------ writes

    def add(self, memory: Memory, events: Sequence[TelemetryEvent] = ()) -> None:
        self._writing()
        keyed = self._keyed(events)
        self.index.add(memory, keyed)
        self._write_memories([memory])
        self._append(keyed)

    def add_unless_duplicate(self, memory: Memory, decide: Decide) -> bool:
        self._writing()
        keyed: list[TelemetryEvent] = []

        def decide_keyed(found: Sequence[Memory]) -> list[TelemetryEvent] | None:
            events = decide(found)
            if events is None:
                return None
            keyed.extend(self._keyed(events))
            return keyed

        if not self.index.add_unless_duplicate(memory, decide_keyed):
            return False
        self._write_memories([memory])
        self._append(keyed)
        return True

    def supersede(self, old_id: str, new: Memory,
                  events: Sequence[TelemetryEvent] = ()) -> None:
        self._writing()
        keyed = self._keyed(events)
        self.index.supersede(old_id, new, keyed)
        self._write_memories(self.index.get_many([old_id, new.id]))
        self._append(keyed)

    def apply(self, transitions: Sequence[Transition]) -> list[bool]:
        self._writing()
        keyed = [replace(t, events=tuple(self._keyed(t.events))) for t in transitions]
        applied = self.index.apply(keyed)
        done = [t for t, ok in zip(keyed, applied, strict=True) if ok]
        self._write_memories(self.index.get_many(list(dict.fromkeys(t.memory_id
                                                                     for t in done))))
        self._append([e for t in done for e in t.events])
        return applied

    def log(self, events: Sequence[TelemetryEvent]) -> None:
        self._writing()
        keyed = self._keyed(events)
        self.index.log(keyed)
        self._append(keyed)

    def forget(self, memory_ids: Sequence[str] | None = None, *, repo: str | None = None,
               by: str | None, reason: str, at: datetime | None = None) -> list[Tombstone]:
        self._writing()
        tombstones = self.index.forget(memory_ids, repo=repo, by=by, reason=reason, at=at)
        events = []
        for tombstone in tombstones:
            self._remove_files(tombstone.id)
            write_text(self.folder / tombstone_file(tombstone), render_tombstone(tombstone))
            events += self.index.events(memory_id=tombstone.id, kinds=[EventKind.FORGOTTEN],
                                        limit=1, newest=True)
        self._append(events)
        return tombstones

    def load(self, memories: Sequence[Memory], events: Sequence[TelemetryEvent],
             tombstones: Sequence[Tombstone] = ()) -> tuple[int, int, int]:
        self._writing()
        keyed = self._keyed(events)
        held = {e.key for e in [*self.index.events(limit=None),
                                *self.index.events(limit=None, archived=True)]}
        counts = self.index.load(memories, keyed, tombstones)
        self._write_memories([m for m in (self._held(m.id) for m in memories) if m])
        self._append([e for e in keyed if e.key not in held])
        for tombstone in self.index.tombstones(ids=[t.id for t in tombstones], limit=None):
            write_text(self.folder / tombstone_file(tombstone), render_tombstone(tombstone))
        return counts

    def _held(self, memory_id: str) -> Memory | None:
        try:
            return self.index.get(memory_id)
        except NotFound:
            return None

    def archive_events(self, before: datetime) -> int:
        return self.index.archive_events(before)

    def reindex(self) -> tuple[int, int, int]:
        """Rebuild the index from the files (``vmem git reindex``)."""
        self.index.close()
        counts = rebuild_index(self.folder)
        self.index = SQLiteStore(self.folder / INDEX_FILE)
        self._wrote = False
        return counts

    # ------------------------------------------------------------------ reads

    def get(self, memory_id: str) -> Memory:
        return self.index.get(memory_id)

    def get_many(self, memory_ids: Sequence[str]) -> list[Memory]:
        return self.index.get_many(memory_ids)

    def recent(self, repo: str, *, limit: int | None = 50,
               status: Status | None = Status.ACTIVE, category: str | None = None,
               tag: str | None = None) -> list[Memory]:
        return self.index.recent(repo, limit=limit, status=status, category=category, tag=tag)

    def search(self, repo: str, query: str, *, limit: int = 20, category: str | None = None,
               tag: str | None = None) -> list[Memory]:
        return self.index.search(repo, query, limit=limit, category=category, tag=tag)

    def search_hits(self, repo: str, query: str, *, limit: int = 20,
                    category: str | None = None, tag: str | None = None) -> list[SearchHit]:
        return self.index.search_hits(repo, query, limit=limit, category=category, tag=tag)

    def by_path(self, repo: str, path: str, *, lines: tuple[int, int] | None = None,
                limit: int = 50, category: str | None = None,
                tag: str | None = None) -> list[Memory]:
        return self.index.by_path(repo, path, lines=lines, limit=limit, category=category,
                                  tag=tag)

    def count(self, repo: str, *, status: Status | None = Status.ACTIVE,
              at_most: int | None = None) -> int:
        return self.index.count(repo, status=status, at_most=at_most)

    def oldest_never_applied(self, repo: str, limit: int) -> list[Memory]:
        return self.index.oldest_never_applied(repo, limit)

    def repos(self) -> list[str]:
        return self.index.repos()

    def events(self, *, repo: str | None = None, memory_id: str | None = None,
               kinds: Sequence[EventKind] | None = None, limit: int | None = 1000,
               changes: bool = False, since: datetime | None = None, newest: bool = False,
               archived: bool = False) -> list[TelemetryEvent]:
        return self.index.events(repo=repo, memory_id=memory_id, kinds=kinds, limit=limit,
                                 changes=changes, since=since, newest=newest,
                                 archived=archived)

    def stats(self, repo: str) -> RepoStats:
        return self.index.stats(repo)

    def find(self, repo: str, where: MemoryFilter | None = None, *,
             limit: int | None = 50) -> list[Memory]:
        return self.index.find(repo, where, limit=limit)

    def match_ids(self, prefix: str, *, limit: int = 10) -> list[str]:
        return self.index.match_ids(prefix, limit=limit)

    def tombstones(self, *, repo: str | None = None, ids: Sequence[str] | None = None,
                   limit: int | None = 50) -> list[Tombstone]:
        return self.index.tombstones(repo=repo, ids=ids, limit=limit)

    def info(self) -> StoreInfo:
        return replace(self.index.info(), kind="git", location=str(self.folder))

    def read_view(self, query: ViewQuery) -> list[dict[str, Any]]:
        # The index keeps the dashboard's rollups as events are appended or rebuilt.
        return self.index.read_view(query)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._wrote:
                repos = self.index.repos()
                memories = [m for repo in repos
                             for m in self.index.recent(repo, limit=None, status=None)]
                write_text(self.folder / INDEX, render_index(memories, repos))
                (self.folder / STATE_FILE).write_text(_signature(self.folder) + "\n",
                                                      encoding="utf-8")
        finally:
            self.index.close()

