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
the files (names, sizes, times) is kept next to the index: dropped while a write is under
way and kept again once the index and the files both hold it, so a process that dies
between the two leaves an index that is rebuilt, not trusted. Archived telemetry
(``archive_events``) is an index matter: the logs keep every event, and a rebuilt index
has them all live.

Several processes share one folder (an MCP server open for a whole session, hooks, a
command in a terminal): each checks the signature, rebuilds and writes under one lock
(``index.sqlite.lock``), so none rebuilds from files another is still writing or trusts
an index another is rebuilding; a store open for long checks the signature again before
each read and write, so a pull while it is open reaches the index first. A rebuilt index is copied
into the index file in place (``SQLiteStore.copy_into``), never put in its stead: a
connection another process holds open on it reads and writes the rebuilt index, not a
file no one will read again.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from verified_memory.errors import NotFound, ReadOnlyStore, StoreError
from verified_memory.gitstore.layout import (
    INDEX,
    event_file,
    event_line,
    id_part,
    looks_like_memory_folder,
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
#: Taken to check, rebuild or write the index (git-ignored with it: ``index.sqlite*``).
LOCK_FILE = "index.sqlite.lock"


def _signature(folder: Path) -> str:
    """What the index was built from: every memory, tombstone and log file's name, size
    and modification time. (``os.scandir``, not ``Path.rglob``: it is taken at every
    write, and this is five times faster on a thousand files.)"""
    rows: list[str] = []

    def walk(directory: str, prefix: str) -> None:
        with os.scandir(directory) as entries:
            for entry in entries:
                relative = prefix + entry.name
                if not prefix and (entry.name.startswith((".", INDEX_FILE, STATE_FILE))
                                   or entry.name == INDEX):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    walk(entry.path, relative + "/")
                elif entry.is_file():
                    stat = entry.stat()
                    rows.append(f"{relative}\0{stat.st_size}\0{stat.st_mtime_ns}\n")

    walk(os.fspath(folder), "")
    return hashlib.sha256("".join(sorted(rows)).encode()).hexdigest()


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """The folder's lock, held until the block ends (a process that dies lets it go)."""
    if sys.platform == "win32":  # no flock: Windows goes without the lock
        yield
        return
    import fcntl

    with open(folder / LOCK_FILE, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _current(folder: Path) -> bool:
    """Whether the index holds what the files hold (its signature is theirs)."""
    try:
        kept = (folder / STATE_FILE).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return False
    return kept == _signature(folder) and (folder / INDEX_FILE).exists()


def _catch_up(folder: Path) -> None:
    """Rebuild the index if the files changed behind it (the caller holds the lock)."""
    if not _current(folder):
        _rebuild(folder)


def _keep_signature(folder: Path) -> None:
    (folder / STATE_FILE).write_text(_signature(folder) + "\n", encoding="utf-8")


def rebuild_index(folder: Path) -> tuple[int, int, int]:
    """Rebuild the index from the files (under the folder's lock); how many memories,
    events and tombstones it holds."""
    with _locked(folder):
        return _rebuild(folder)


def _rebuild(folder: Path) -> tuple[int, int, int]:
    """Build the index from the files into a new file, then copy that into the index
    file (the caller holds the lock). A memory with a tombstone (forgotten on another
    branch) stays forgotten."""
    target = folder / INDEX_FILE
    fresh = folder / f"{INDEX_FILE}.rebuild"
    _remove_sqlite(fresh)
    try:
        with SQLiteStore(fresh) as built:
            counts = _fill(built, folder)
            try:
                index = SQLiteStore(target)
            except StoreError:  # damaged: it is rebuilt whole, so it can go
                _remove_sqlite(target)
                index = SQLiteStore(target)
            with index:
                built.copy_into(index)
    finally:
        _remove_sqlite(fresh)
    _keep_signature(folder)
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
        elif not create and not looks_like_memory_folder(self.folder, INDEX_FILE):
            raise NotFound(f"{self.folder} is not a memory folder (no index.md, _events/, "
                           "_forgotten/ or the .gitignore vmem writes there): nothing was "
                           "written in it")
        self.session = session or os.environ.get("VMEM_SESSION") or secrets.token_hex(6)
        writable = os.access(self.folder, os.W_OK)
        for name, text in support_files().items() if writable else ():
            write_text(self.folder / name, text)
        self._wrote = False
        self._closed = False
        self._writable = writable
        if not writable:
            # A folder this user may only read (a read-only checkout) can neither keep
            # an index nor take the lock: its index when it is current, else one built
            # in memory for this process; writes are refused (``_writing``).
            if _current(self.folder):
                self.index = SQLiteStore(self.folder / INDEX_FILE)
            else:
                self.index = SQLiteStore(":memory:")
                _fill(self.index, self.folder)
            return
        with _locked(self.folder):
            _catch_up(self.folder)
            self.index = SQLiteStore(self.folder / INDEX_FILE)

    def __repr__(self) -> str:  # what the dashboard says it reads, as the other stores
        return f"GitStore({str(self.folder)!r})"

    # ------------------------------------------------------------------ files

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """One write, under the folder's lock: the index first brought up to date with
        files that changed since (a pull while this store is open), the signature
        dropped while the index is ahead of the files, kept again once the files hold
        the write too (a failure leaves it dropped: the next store rebuilds). A folder
        this user may not write is refused here, before anything is written."""
        with ExitStack() as held:
            try:
                if not os.access(self.folder, os.W_OK):
                    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
                held.enter_context(_locked(self.folder))
            except OSError as exc:
                raise ReadOnlyStore(f"the memory folder {self.folder} is read-only "
                                    f"({exc.strerror or exc}): nothing was written") from exc
            _catch_up(self.folder)
            (self.folder / STATE_FILE).unlink(missing_ok=True)
            self._wrote = True
            yield
            _keep_signature(self.folder)

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
        with self._writing():
            keyed = self._keyed(events)
            self.index.add(memory, keyed)
            # As the index stored it (a creation time in the future is now): a rebuilt
            # index then reads the same time from the file (as supersede and load write).
            self._write_memories([self.index.get(memory.id)])
            self._append(keyed)

    def add_unless_duplicate(self, memory: Memory, decide: Decide) -> bool:
        with self._writing():
            keyed: list[TelemetryEvent] = []

            def decide_keyed(found: Sequence[Memory]) -> list[TelemetryEvent] | None:
                events = decide(found)
                if events is None:
                    return None
                keyed.extend(self._keyed(events))
                return keyed

            if not self.index.add_unless_duplicate(memory, decide_keyed):
                return False
            self._write_memories([self.index.get(memory.id)])
            self._append(keyed)
            return True

    def supersede(self, old_id: str, new: Memory,
                  events: Sequence[TelemetryEvent] = ()) -> None:
        with self._writing():
            keyed = self._keyed(events)
            self.index.supersede(old_id, new, keyed)
            self._write_memories(self.index.get_many([old_id, new.id]))
            self._append(keyed)

    def apply(self, transitions: Sequence[Transition]) -> list[bool]:
        with self._writing():
            keyed = [replace(t, events=tuple(self._keyed(t.events))) for t in transitions]
            applied = self.index.apply(keyed)
            done = [t for t, ok in zip(keyed, applied, strict=True) if ok]
            self._write_memories(self.index.get_many(list(dict.fromkeys(t.memory_id
                                                                         for t in done))))
            self._append([e for t in done for e in t.events])
            return applied

    def log(self, events: Sequence[TelemetryEvent]) -> None:
        with self._writing():
            keyed = self._keyed(events)
            self.index.log(keyed)
            self._append(keyed)

    def forget(self, memory_ids: Sequence[str] | None = None, *, repo: str | None = None,
               by: str | None, reason: str, at: datetime | None = None) -> list[Tombstone]:
        with self._writing():
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
        with self._writing():
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
        with _locked(self.folder):
            self.index.close()
            counts = _rebuild(self.folder)
            self.index = SQLiteStore(self.folder / INDEX_FILE)
        return counts

    # ------------------------------------------------------------------ reads

    def _read(self) -> SQLiteStore:
        """The index for a read, brought up to date first with files that changed behind
        this store (a pull, a merge, another process's write), so that a store held open
        for a whole session (the MCP server) never answers from before them: a signature
        walk under the folder's lock, about 5 ms for a thousand files. A folder this
        user may not write is read as it was found (its index cannot be rebuilt)."""
        if self._writable:
            with _locked(self.folder):
                _catch_up(self.folder)
        return self.index

    def get(self, memory_id: str) -> Memory:
        return self._read().get(memory_id)

    def get_many(self, memory_ids: Sequence[str]) -> list[Memory]:
        return self._read().get_many(memory_ids)

    def recent(self, repo: str, *, limit: int | None = 50,
               status: Status | None = Status.ACTIVE, category: str | None = None,
               tag: str | None = None) -> list[Memory]:
        return self._read().recent(repo, limit=limit, status=status, category=category, tag=tag)

    def search(self, repo: str, query: str, *, limit: int = 20, category: str | None = None,
               tag: str | None = None) -> list[Memory]:
        return self._read().search(repo, query, limit=limit, category=category, tag=tag)

    def search_hits(self, repo: str, query: str, *, limit: int = 20,
                    category: str | None = None, tag: str | None = None) -> list[SearchHit]:
        return self._read().search_hits(repo, query, limit=limit, category=category, tag=tag)

    def by_path(self, repo: str, path: str, *, lines: tuple[int, int] | None = None,
                limit: int = 50, category: str | None = None,
                tag: str | None = None) -> list[Memory]:
        return self._read().by_path(repo, path, lines=lines, limit=limit, category=category,
                                  tag=tag)

    def count(self, repo: str, *, status: Status | None = Status.ACTIVE,
              at_most: int | None = None) -> int:
        return self._read().count(repo, status=status, at_most=at_most)

    def oldest_never_applied(self, repo: str, limit: int) -> list[Memory]:
        return self._read().oldest_never_applied(repo, limit)

    def repos(self) -> list[str]:
        return self._read().repos()

    def events(self, *, repo: str | None = None, memory_id: str | None = None,
               kinds: Sequence[EventKind] | None = None, limit: int | None = 1000,
               changes: bool = False, since: datetime | None = None, newest: bool = False,
               archived: bool = False) -> list[TelemetryEvent]:
        return self._read().events(repo=repo, memory_id=memory_id, kinds=kinds, limit=limit,
                                 changes=changes, since=since, newest=newest,
                                 archived=archived)

    def stats(self, repo: str) -> RepoStats:
        return self._read().stats(repo)

    def find(self, repo: str, where: MemoryFilter | None = None, *,
             limit: int | None = 50) -> list[Memory]:
        return self._read().find(repo, where, limit=limit)

    def match_ids(self, prefix: str, *, limit: int = 10) -> list[str]:
        return self._read().match_ids(prefix, limit=limit)

    def tombstones(self, *, repo: str | None = None, ids: Sequence[str] | None = None,
                   limit: int | None = 50) -> list[Tombstone]:
        return self._read().tombstones(repo=repo, ids=ids, limit=limit)

    def info(self) -> StoreInfo:
        return replace(self._read().info(), kind="git", location=str(self.folder))

    def read_view(self, query: ViewQuery) -> list[dict[str, Any]]:
        # The index keeps the dashboard's rollups as events are appended or rebuilt.
        return self._read().read_view(query)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._wrote:
                with _locked(self.folder):  # the index as it is at one moment
                    repos = self.index.repos()
                    memories = [m for repo in repos
                                for m in self.index.recent(repo, limit=None, status=None)]
                    write_text(self.folder / INDEX, render_index(memories, repos))
        finally:
            self.index.close()

