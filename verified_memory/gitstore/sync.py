"""``vmem git export`` and ``vmem git import``: a store's memories to the folder in the
repository and back, through the ``MemoryStore`` Protocol and ``MemoryService``, so any
store (SQLite, Postgres, Supabase, the repository itself) is either end.

**Export** writes what the store holds (``transfer.collect``: every memory in any
status, every event, every tombstone) as files (``layout``), each only when its text
changed: a re-run changes nothing. A file whose memory the store does not know is kept
(a teammate's memory not imported yet) and counted.

**Import** reads the whole folder first, strictly, and plans: memories the store does
not have are new; a file whose subject, fact, reason, category, tags or cited places
differ from the stored memory is a hand edit, which supersedes it; a memory ``index.md``
lists whose file is gone was deleted, which invalidates it. Every edited citation is
fingerprinted before anything is written, so a bad file or a citation pointing at
nothing is one line naming the file and field, and the store is as it was. Then: the new
memories, the folder's events and tombstones in one transaction
(``transfer.load_export``), each supersede, each invalidation; and a verification of the
new memories at the ref (the ref rule decides whether it is a verdict or a view). A
re-run adds nothing: new ids are held, a supersede already made is recognised by its
successor, a deleted memory is already invalid.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verified_memory.errors import (
    MissingDependency,
    NotFound,
    SourceUnavailable,
    ValidationError,
)
from verified_memory.gitstore.layout import (
    EXPORT_SESSION,
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
from verified_memory.models import Memory, NewMemory, Status, Tombstone
from verified_memory.quality import normalize_category
from verified_memory.service import MemoryService
from verified_memory.store.base import MemoryStore
from verified_memory.store.transfer import (
    Export,
    collect,
    forgetting_reason,
    held_tombstones,
    load_export,
)
from verified_memory.verify.citing import fingerprint_citation
from verified_memory.verify.files import FileCache

__all__ = ["ExportCounts", "ImportPlan", "ImportResult", "export_folder", "import_folder",
           "plan_import", "write_folder"]


@dataclass(frozen=True, slots=True)
class ExportCounts:
    memories: int
    events: int
    tombstones: int
    written: tuple[str, ...]  # files written or rewritten, relative to the folder
    removed: tuple[str, ...]  # memory files renamed or forgotten
    not_imported: tuple[str, ...]  # files whose memory the store does not have

    def to_dict(self) -> dict[str, Any]:
        return {"memories": self.memories, "events": self.events,
                "tombstones": self.tombstones, "written": list(self.written),
                "removed": list(self.removed), "not_imported": list(self.not_imported)}


def export_folder(store: MemoryStore, folder: Path,
                  repos: Sequence[str] | None = None) -> ExportCounts:
    """Write the memories, events and tombstones of ``repos`` into ``folder``."""
    return write_folder(collect(store, repos), folder)


def write_folder(export: Export, folder: Path) -> ExportCounts:
    """Write a collected export into ``folder`` (see the module's docstring)."""
    existing = read_folder(folder)
    forgotten = {t.id for t in export.tombstones}
    held = {m.id for m in export.memories} | forgotten
    wanted: dict[str, str] = dict(support_files())
    for memory in export.memories:
        wanted[memory_file(memory)] = render_memory(memory)
    for tombstone in export.tombstones:
        wanted[tombstone_file(tombstone)] = render_tombstone(tombstone)
    # Events a session of the repository store already logged are not written twice.
    logged = existing.session_keys
    logs: dict[str, list[str]] = {}
    for event in export.events:
        if event.key not in logged:
            logs.setdefault(event_file(event, EXPORT_SESSION), []).append(event_line(event))
    wanted.update({path: "".join(lines) for path, lines in logs.items()})
    wanted[INDEX] = render_index(export.memories, export.repos)
    written = [path for path, text in sorted(wanted.items()) if write_text(folder / path, text)]
    removed, unknown = [], []
    for path, memory in sorted(existing.memories.items()):
        if path in wanted:
            continue
        if memory.id in held:
            (folder / path).unlink()
            removed.append(path)
        else:
            unknown.append(path)
    return ExportCounts(memories=len(export.memories), events=len(export.events),
                        tombstones=len(export.tombstones), written=tuple(written),
                        removed=tuple(removed), not_imported=tuple(unknown))


# --------------------------------------------------------------------------- import


@dataclass(frozen=True, slots=True)
class Edit:
    """A hand edit: the stored memory, the file's version, and the memory to store."""

    path: str
    old: Memory
    new: NewMemory


@dataclass(frozen=True, slots=True)
class ImportPlan:
    new: tuple[Memory, ...] = ()
    edits: tuple[Edit, ...] = ()
    deleted: tuple[Memory, ...] = ()
    unchanged: int = 0
    forgotten: tuple[str, ...] = ()  # files of memories forgotten (here or in the store)
    #: tombstones of the folder whose memory the store still holds: forgotten here too
    forget: tuple[Tombstone, ...] = ()
    #: pending memories whose file was deleted: a review decision, left to `vmem reject`
    unreviewed: tuple[str, ...] = ()
    export: Export = field(default_factory=lambda: Export((), (), ()))


@dataclass(frozen=True, slots=True)
class ImportResult:
    new: tuple[str, ...]
    superseded: tuple[tuple[str, str], ...]  # (old id, new id)
    invalidated: tuple[str, ...]
    unchanged: int
    forgotten: tuple[str, ...]
    events: int
    tombstones: int
    verified: dict[str, int]  # decision -> how many of the new active memories
    scope: str | None  # verdict, view or dry_run: what the verification could change
    # Edited or deleted files read off the main line's tip: what they would change, kept
    # for an import there (the ref rule: a branch's folder is a proposal until merged).
    held_back: tuple[str, ...] = ()
    #: why they were held back: the scope of each repository that held some back
    held_why: tuple[str, ...] = ()
    #: memories this store held whose tombstone the folder has: forgotten here too
    erased: tuple[str, ...] = ()
    #: pending memories whose file was deleted: not changed (`vmem reject` decides)
    unreviewed: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"new": list(self.new), "superseded": [list(p) for p in self.superseded],
                "invalidated": list(self.invalidated), "unchanged": self.unchanged,
                "forgotten": list(self.forgotten), "erased": list(self.erased),
                "unreviewed": list(self.unreviewed),
                "events": self.events,
                "tombstones": self.tombstones, "verified": self.verified,
                "scope": self.scope, "held_back": list(self.held_back),
                "held_why": list(self.held_why)}


def _editable(memory: Memory) -> tuple[Any, ...]:
    category = normalize_category(memory.category) if memory.category else None
    return (memory.subject, memory.fact, memory.reason, category, tuple(memory.tags),
            tuple((c.path, c.line_start, c.line_end) for c in memory.citations))


def _successor_matches(service: MemoryService, old: Memory, wanted: Memory) -> bool:
    """Whether the supersede chain after ``old`` (corrections waiting for approval
    included: ``MemoryService.history``) reaches a memory saying what ``wanted`` says (a
    hand edit imported before)."""
    chain = service.history(old.id)
    later = chain[[m.id for m in chain].index(old.id) + 1:]
    return any(_editable(m) == _editable(wanted) for m in later)


def plan_import(service: MemoryService, folder: Path, *, ref: str = "HEAD") -> ImportPlan:
    """Read ``folder`` whole and decide what importing it does, writing nothing;
    ``ValidationError`` naming the file and field for any bad input."""
    read = read_folder(folder)
    store = service.memories
    gone = {t.id for t in read.tombstones}
    new: list[Memory] = []
    edits: list[Edit] = []
    forgotten: list[str] = []
    unchanged = 0
    for path, memory in sorted(read.memories.items()):
        where = f"{folder.name}/{path}"
        if memory.id in gone or store.tombstones(ids=[memory.id], limit=1):
            forgotten.append(path)
            continue
        try:
            held = store.get(memory.id)
        except NotFound:
            new.append(memory)
            continue
        if held.repo != memory.repo:
            raise ValidationError(f"{where}: repo is {memory.repo}, but memory {memory.id} "
                                  f"is in {held.repo}")
        if _editable(held) == _editable(memory) or _successor_matches(service, held, memory):
            unchanged += 1
            continue
        if held.status is not Status.ACTIVE:
            raise ValidationError(f"{where}: memory {memory.id} was edited, but it is "
                                  f"{held.status.value}: only an active memory can be "
                                  "superseded")
        edits.append(Edit(path, held, _edited(held, memory, where)))
    _check_citations(service, edits, folder, ref)
    present = {m.id for m in read.memories.values()}
    repos = sorted(set(read.repos) | {m.repo for m in read.memories.values()})
    deleted = [m for repo in repos for m in _recent(store, repo)
               if id_part(m.id) in read.listed and m.id not in present]
    unreviewed = [m.id for repo in repos for m in _recent(store, repo, Status.PENDING)
                  if id_part(m.id) in read.listed and m.id not in present]
    # Forgotten in another store (a leaked secret, say): forgotten in this one as well,
    # so that its text does not live on here, nor come back with this store's export.
    forget = held_tombstones(store, read.tombstones)
    export = Export(memories=tuple(new), events=read.events,
                    tombstones=tuple(t for t in read.tombstones))
    return ImportPlan(new=tuple(new), edits=tuple(edits), deleted=tuple(deleted),
                      unchanged=unchanged, forgotten=tuple(forgotten), forget=tuple(forget),
                      unreviewed=tuple(unreviewed), export=export)


def _recent(store: MemoryStore, repo: str,
            status: Status = Status.ACTIVE) -> list[Memory]:
    try:
        return store.recent(repo, limit=None, status=status)
    except ValidationError:  # index.md names something that is not a repository
        return []


def _edited(old: Memory, file: Memory, where: str) -> NewMemory:
    """The memory a hand edit asks for. A citation still at a place the stored memory
    cites keeps its commit; one moved is fingerprinted at the import's ref."""
    pinned = {(c.path, c.line_start, c.line_end): c.sha for c in old.citations}
    try:
        return NewMemory.parse({
            "repo": old.repo, "subject": file.subject, "fact": file.fact,
            "reason": file.reason, "category": file.category, "tags": list(file.tags),
            "citations": [{"path": c.path, "line_start": c.line_start,
                           "line_end": c.line_end,
                           "sha": pinned.get((c.path, c.line_start, c.line_end))}
                          for c in file.citations]})
    except ValidationError as exc:
        raise ValidationError(f"{where}: {exc}") from None


def _check_citations(service: MemoryService, edits: Sequence[Edit], folder: Path,
                     ref: str) -> None:
    """Fingerprint every edited citation now, as ``supersede`` will, so that one that
    points at nothing stops the import before anything is written."""
    caches: dict[str, FileCache] = {}
    for edit in edits:
        source = service.source_for(edit.new.repo)
        files = caches.setdefault(edit.new.repo, FileCache(source))
        for i, cite in enumerate(edit.new.citations):
            try:
                fingerprint_citation(source, files, ref, cite, f"citations[{i}]",
                                     with_anchor=False)
            except ValidationError as exc:
                raise ValidationError(f"{folder.name}/{edit.path}: {exc}") from None


def import_folder(service: MemoryService, folder: Path, *, ref: str = "HEAD",
                  verify: bool = True, plan: ImportPlan | None = None,
                  apply: bool | None = None) -> ImportResult:
    """Import ``folder`` into the service's store (see the module's docstring). Hand
    edits and deletions change stored memories only where a verification at ``ref``
    would reach verdicts (the main line's tip, or ``apply``); elsewhere they are held
    back, as the ref rule holds back a view's verdicts."""
    plan = plan or plan_import(service, folder, ref=ref)
    # Only active memories are judged: a pass over an invalid, superseded or pending one
    # changes nothing, and its decisions would be counted as refreshes and invalidations.
    judged = [m for m in plan.new if m.status is Status.ACTIVE] if verify else []
    for repo in sorted({m.repo for m in judged}):
        # An unknown ref is refused before anything is written, not by the verification
        # after the import (the edits' citations were fingerprinted at it already). Code
        # that cannot be read now is no reason to refuse: the verification says so.
        with suppress(SourceUnavailable, MissingDependency):
            service.source_for(repo).resolve(ref)
    changed = ({e.old.repo for e in plan.edits} | {m.repo for m in plan.deleted}
               | {t.repo for t in plan.forget})
    scopes = {repo: service.scope(repo, ref=ref, apply=apply) for repo in changed}
    judges = {repo: scope.judges for repo, scope in scopes.items()}
    edits = [e for e in plan.edits if judges[e.old.repo]]
    deleted = [m for m in plan.deleted if judges[m.repo]]
    held_back = (tuple(e.old.id for e in plan.edits if not judges[e.old.repo])
                 + tuple(m.id for m in plan.deleted if not judges[m.repo])
                 + tuple(t.id for t in plan.forget if not judges[t.repo]))
    erased = []
    for stone in plan.forget:  # first: the text goes before anything else is written
        if judges[stone.repo]:
            service.forget(stone.id, reason=forgetting_reason(
                stone, f"forgotten by {stone.forgotten_by or 'someone'} on "
                       f"{stone.forgotten_at:%Y-%m-%d}; vmem git import"))
            erased.append(stone.id)
    counts = load_export(service.memories, plan.export, forget_held=False)
    superseded = []
    successors = []
    for edit in edits:
        successor = service.supersede(edit.old.id, edit.new, ref=ref)
        superseded.append((edit.old.id, successor.id))
        successors.append(successor)
    invalidated = []
    for memory in deleted:
        service.invalidate(memory.id, f"its file was deleted from {folder.name}/ "
                                      "(vmem git import)")
        invalidated.append(memory.id)
    fresh = [m.id for m in (*judged, *successors) if m.status is Status.ACTIVE]
    verified: dict[str, int] = {}
    scope = None
    if verify and fresh:
        report = service.verify(fresh, ref=ref, expire=False)
        for check in report.verifications:
            verified[check.decision.value] = verified.get(check.decision.value, 0) + 1
        scope = ", ".join(sorted({s.kind.value for s in report.scopes.values()})) or None
    return ImportResult(new=tuple(m.id for m in plan.new), superseded=tuple(superseded),
                        invalidated=tuple(invalidated), unchanged=plan.unchanged,
                        forgotten=plan.forgotten, events=counts.events,
                        tombstones=counts.tombstones, verified=verified, scope=scope,
                        held_back=held_back, erased=tuple(erased),
                        held_why=tuple(dict.fromkeys(
                            scope.why for scope in scopes.values() if not scope.judges)),
                        unreviewed=plan.unreviewed)
