"""Plain data: memories, citations, fingerprints, verification outcomes, telemetry.

No I/O happens here. Everything is a frozen dataclass so that a memory read from a
store cannot be changed behind the store's back; changes go through the service.
Validation of user input lives here too (``NewMemory.parse``), because it is pure and
every entry point (CLI, MCP, Python) must apply the same rules.
"""

from __future__ import annotations

import json
import re
import secrets
import struct
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import FrozenInstanceError, dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar

from verified_memory.errors import ValidationError

__all__ = [
    "MAX_LINE",
    "NEVER_JUDGED",
    "READ_KINDS",
    "Anchor",
    "Citation",
    "CitationCheck",
    "CitationRef",
    "Cited",
    "Decision",
    "EventKind",
    "Fingerprint",
    "Location",
    "Memory",
    "MemoryFilter",
    "NewMemory",
    "Outcome",
    "RepoStats",
    "Scope",
    "SearchHit",
    "Status",
    "StoreInfo",
    "Stored",
    "TelemetryEvent",
    "Tombstone",
    "Transition",
    "Verification",
    "decode_line_hashes",
    "encode_line_hashes",
    "new_event_key",
    "new_event_keys",
    "normalize_path",
    "replaced",
    "slot_maker",
    "utcnow",
    "validate_repo",
]

#: Promotion by feedback (seed 000): applied at least this often, with at least this
#: share of its feedback a success, a memory is "validated": a promotion candidate.
VALIDATED_MIN_APPLIED = 3
VALIDATED_MIN_SUCCESS = 0.9
#: A poor performer: at least this much feedback, under this share of it a success.
#: Left out of context and flagged.
POOR_MIN_FEEDBACK = 4
POOR_MAX_SUCCESS = 0.5

SUBJECT_MAX = 200
FACT_MAX = 20_000  # also the limit of a reason
CITATIONS_MAX = 50
CITATION_LINES_MAX = 2_000  # lines one citation of a memory may span
TAGS_MAX = 20
TAG_MAX = 100  # characters in one tag
REPO_PATTERN = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def utcnow() -> datetime:
    """The current time, timezone-aware UTC (all stored times are UTC)."""
    return datetime.now(UTC)


_Frozen = TypeVar("_Frozen")


def replaced(value: _Frozen, **changes: Any) -> _Frozen:
    """``dataclasses.replace`` for the frozen, slotted dataclasses here (none has an
    ``__post_init__`` to run): a copy of every slot, ``changes`` applied. ``replace``
    looks every field's definition up on each call; a verification pass makes two
    copies a memory (33,000 memories: 0.74 s with ``replace``, about half with this)."""
    cls = type(value)
    copy = object.__new__(cls)
    for name in cls.__slots__:  # type: ignore[attr-defined]
        object.__setattr__(copy, name, changes[name] if name in changes
                           else getattr(value, name))
    return copy


def slot_maker(cls: type[_Frozen], names: Sequence[str]) -> Callable[..., _Frozen]:
    """A function that makes a ``cls`` from the values of its slots ``names`` (every
    slot), given positionally in that order: what the ``__init__`` of a frozen, slotted
    class without ``__post_init__`` does, 2.5 times faster. A frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__`` by name; this sets each
    slot through its descriptor, in code written out for the class (as ``dataclasses``
    writes its ``__init__``). For reading rows: 50 memories and their 150 citations
    took 0.65 ms to make on this machine, 0.35 ms this way."""
    slots = cls.__slots__  # type: ignore[attr-defined]
    if sorted(names) != sorted(slots):
        raise TypeError(f"slot_maker({cls.__name__}) needs every slot once: {slots}")
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    namespace.update((f"_set{i}", getattr(cls, name).__set__) for i, name in enumerate(names))
    values = ", ".join(f"v{i}" for i in range(len(names)))
    body = "".join(f"    _set{i}(made, v{i})\n" for i in range(len(names)))
    exec(f"def make({values}):\n    made = _new(_cls)\n{body}    return made\n", namespace)
    make: Callable[..., _Frozen] = namespace["make"]
    make.__qualname__ = make.__name__ = f"make_{cls.__name__}"
    return make


class Status(StrEnum):
    ACTIVE = "active"
    PENDING = "pending"  # a category that needs approval: never injected until approved
    INVALID = "invalid"
    SUPERSEDED = "superseded"
    EXPIRED = "expired"  # unused for too long: not injected; comes back when verified and used


class Outcome(StrEnum):
    """What verification found for one citation (the ladder in docs/ARCHITECTURE.md)."""

    VALID = "valid"
    RELOCATED = "relocated"
    CHANGED = "changed"
    MISSING = "missing"
    UNVERIFIABLE = "unverifiable"

    @property
    def holds(self) -> bool:
        """The cited code is still there (possibly somewhere else)."""
        return self in (Outcome.VALID, Outcome.RELOCATED)

    @property
    def is_verdict(self) -> bool:
        """The code was read and contradicts the citation."""
        return self in (Outcome.CHANGED, Outcome.MISSING)


class Decision(StrEnum):
    """What verification does to a memory as a whole."""

    REFRESH = "refresh"  # every citation holds: injectable, relocated places rewritten
    INVALIDATE = "invalidate"  # some citation changed or vanished
    UNVERIFIED = "unverified"  # some citation could not be read: no verdict, not injected
    EXPIRE = "expire"  # nobody used it for too long: not injected (its code is not read)


class Scope(StrEnum):
    """What a verification may change: the ref rule (docs/ARCHITECTURE.md).

    A memory is a claim about the repository's main line. Only a check at the main
    line's tip (or an explicit apply after a merge) is a verdict; anywhere else it is
    a view, which decides what is injected there and changes nothing stored."""

    VERDICT = "verdict"  # at the main line's tip, or an explicit apply on the main line
    VIEW = "view"  # another branch, an old tag, a detached HEAD, the worktree
    DRY_RUN = "dry_run"  # asked to change nothing
    UNMERGED = "unmerged"  # a verdict pass, but the memory's commit is not merged yet
    #: an explicit apply at a main-line commit older than the memory's last verdict (a
    #: late job of an earlier push): that newer verdict stands
    BEHIND = "behind"

    @property
    def judges(self) -> bool:
        """Whether a check in this scope may change the memory it checks."""
        return self is Scope.VERDICT


class EventKind(StrEnum):
    CREATED = "created"
    RETRIEVED = "retrieved"
    # Verdicts: what a check at the main line's tip decided (dashboards count these).
    VERIFIED_VALID = "verified_valid"
    VERIFIED_INVALID = "verified_invalid"
    UNVERIFIABLE = "unverifiable"
    RELOCATED = "relocated"
    REFRESHED = "refreshed"
    INVALIDATED = "invalidated"
    REVIVED = "revived"  # an invalid memory whose citations hold again on the main line
    # What was seen and decided nothing: a view, a dry run, an unmerged memory.
    CHECKED = "checked"
    RECITED = "recited"  # citations replaced by request (``vmem recite``)
    SUPERSEDED = "superseded"
    APPLIED = "applied"
    FEEDBACK = "feedback"
    # Quality: approval of pending categories, promotion by feedback, decay.
    APPROVED = "approved"
    REJECTED = "rejected"
    VALIDATED = "validated"  # applied often enough with enough success: a promotion candidate
    PROMOTED = "promoted"  # written into a rules file by a person
    DEMOTED = "demoted"  # its rule taken back out of that file by a person
    EXPIRED = "expired"
    # Hygiene: a memory's text and citations deleted on request; a tombstone is kept.
    FORGOTTEN = "forgotten"


#: Events that record a read and change nothing: an audit trail (``vmem log``) leaves
#: them out unless asked, and stores index the other events apart.
READ_KINDS = frozenset({EventKind.RETRIEVED, EventKind.CHECKED})


@dataclass(frozen=True, slots=True)
class Anchor:
    """The innermost definition around a cited range, found again by qualified name.

    ``offset`` is how many lines the citation starts below the definition's first line,
    so a window inside a function can be relocated inside the relocated function.
    """

    kind: str  # tree-sitter node type, e.g. "function_definition"
    name: str  # qualified name, e.g. "Session.request"
    text_hash: str  # hash of the definition's normalised text
    offset: int = 0
    language: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "text_hash": self.text_hash,
            "offset": self.offset,
            "language": self.language,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Anchor:
        return cls(
            kind=str(data["kind"]),
            name=str(data["name"]),
            text_hash=str(data["text_hash"]),
            offset=int(data.get("offset", 0)),
            language=str(data.get("language", "")),
        )


class Fingerprint:
    """Enough to recognise cited code again without storing the code itself.

    ``line_hashes`` has one entry per cited line; blank lines hash to 0 and are
    skipped when matching, so blank-line edits are not changes.

    Immutable like the dataclasses around it. A fingerprint read from a store
    (``Fingerprint.stored``) decodes its line hashes and anchor on first use: most
    reads never need them (a listing, or a check of a file that did not change), and
    decoding them was most of the cost of reading fifty memories.
    """

    __slots__ = ("_anchor", "_line_hashes", "snippet_hash")

    snippet_hash: str
    _line_hashes: tuple[int, ...] | str
    _anchor: Anchor | str | None

    def __init__(self, snippet_hash: str, line_hashes: Sequence[int] = (),
                 anchor: Anchor | None = None) -> None:
        object.__setattr__(self, "snippet_hash", snippet_hash)
        object.__setattr__(self, "_line_hashes", tuple(line_hashes))
        object.__setattr__(self, "_anchor", anchor)

    @classmethod
    def stored(cls, snippet_hash: str, line_hashes: str | None,
               anchor: str | None) -> Fingerprint:
        """A fingerprint as a store spells it: line hashes as 16-hex-digit words joined
        by spaces, the anchor as JSON text. Both are decoded lazily."""
        return _stored_fingerprint(snippet_hash, line_hashes or (), anchor or None)

    @property
    def line_hashes(self) -> tuple[int, ...]:
        value = self._line_hashes
        if isinstance(value, str):
            value = decode_line_hashes(value)
            object.__setattr__(self, "_line_hashes", value)
        return value

    @property
    def anchor(self) -> Anchor | None:
        value = self._anchor
        if not isinstance(value, str):
            return value
        try:
            anchor = Anchor.from_dict(json.loads(value))
        except (ValueError, TypeError, KeyError) as exc:
            raise ValidationError(f"a stored anchor is malformed: {value[:80]!r}") from exc
        object.__setattr__(self, "_anchor", anchor)
        return anchor

    def _key(self) -> tuple[str, tuple[int, ...], Anchor | None]:
        return (self.snippet_hash, self.line_hashes, self.anchor)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Fingerprint):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"Fingerprint(snippet_hash={self.snippet_hash!r}, "
                f"line_hashes={self.line_hashes!r}, anchor={self.anchor!r})")

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Fingerprint, (self.snippet_hash, self.line_hashes, self.anchor))


#: ``Fingerprint.stored``'s maker (a stored fingerprint is made for every citation read).
_stored_fingerprint = slot_maker(Fingerprint, ("snippet_hash", "_line_hashes", "_anchor"))


def decode_line_hashes(text: str) -> tuple[int, ...]:
    """Line hashes from their text spelling (16 hex digits each, space-separated)."""
    if not text:
        return ()
    count, extra = divmod(len(text) + 1, 17)
    if not extra and text[16::17] == " " * (count - 1):
        # The spelling we write (16 digits, single spaces): decode all at once in C.
        with suppress(ValueError):
            return struct.unpack(f">{count}Q", bytes.fromhex(text))
    try:
        return tuple(int(w, 16) for w in text.split())
    except ValueError as exc:
        raise ValidationError(f"stored line hashes are malformed: {text[:80]!r}") from exc


def encode_line_hashes(hashes: Sequence[int]) -> str:
    return " ".join(f"{h:016x}" for h in hashes)


@dataclass(frozen=True, slots=True)
class Location:
    """A place in a file: path plus an inclusive, 1-indexed line range."""

    path: str
    line_start: int
    line_end: int

    def __str__(self) -> str:
        return place(self.path, self.line_start, self.line_end)


def place(path: str, line_start: int, line_end: int) -> str:
    """``path:start-end``, or ``path:line`` for one line."""
    if line_start == line_end:
        return f"{path}:{line_start}"
    return f"{path}:{line_start}-{line_end}"


@dataclass(frozen=True, slots=True)
class CitationRef:
    """A citation as a user gives it: a place, optionally pinned to a commit."""

    path: str
    line_start: int
    line_end: int
    sha: str | None = None

    @property
    def location(self) -> Location:
        return Location(self.path, self.line_start, self.line_end)


@dataclass(frozen=True, slots=True)
class Citation:
    """A fingerprinted citation as stored: where the code was, at which commit and blob.

    A relocated citation keeps its fingerprint: only its place (and pins) move.
    """

    path: str
    line_start: int
    line_end: int
    sha: str | None  # commit the citation was made or last verified at
    blob_sha: str | None  # git blob of the file at that commit
    fingerprint: Fingerprint

    @property
    def location(self) -> Location:
        return Location(self.path, self.line_start, self.line_end)

    @property
    def snippet_hash(self) -> str:
        return self.fingerprint.snippet_hash

    def moved_to(self, location: Location, *, sha: str | None, blob_sha: str | None) -> Citation:
        return replace(
            self,
            path=location.path,
            line_start=location.line_start,
            line_end=location.line_end,
            sha=sha,
            blob_sha=blob_sha,
        )

    def to_dict(self) -> dict[str, Any]:
        fp = self.fingerprint
        return {
            "path": self.path,
            "line_start": self.line_start,
            "line_end": self.line_end,
            "sha": self.sha,
            "blob_sha": self.blob_sha,
            "snippet_hash": fp.snippet_hash,
            "line_hashes": [f"{h:016x}" for h in fp.line_hashes],
            "anchor": fp.anchor.to_dict() if fp.anchor else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Citation:
        anchor = data.get("anchor")
        return cls(
            path=str(data["path"]),
            line_start=int(data["line_start"]),
            line_end=int(data["line_end"]),
            sha=data.get("sha"),
            blob_sha=data.get("blob_sha"),
            fingerprint=Fingerprint(
                snippet_hash=str(data["snippet_hash"]),
                line_hashes=tuple(int(h, 16) for h in data.get("line_hashes", ())),
                anchor=Anchor.from_dict(anchor) if anchor else None,
            ),
        )


@dataclass(frozen=True, slots=True)
class Memory:
    id: str
    repo: str
    subject: str
    fact: str
    citations: tuple[Citation, ...]
    status: Status = Status.ACTIVE
    reason: str | None = None
    category: str | None = None
    tags: tuple[str, ...] = ()
    supersedes: str | None = None
    superseded_by: str | None = None
    created_by: str | None = None
    created_at: datetime = field(default_factory=utcnow)
    refreshed_at: datetime = field(default_factory=utcnow)
    verification_count: int = 0
    applied_count: int = 0
    verified_commit: str | None = None  # where the last verdict on the main line was made
    invalid_reason: str | None = None
    verified_ref: str | None = None  # the main line's name then (None: never judged there)
    #: Feedback after use: whether applying the memory helped (``memory_feedback``).
    success_count: int = 0
    failure_count: int = 0
    #: Last time someone used it: stored, approved, refreshed by request, applied. Not a
    #: verification pass (a memory that is only ever verified still decays).
    used_at: datetime | None = None
    promoted_to: str | None = None  # the rules file it was promoted into

    @property
    def paths(self) -> tuple[str, ...]:
        """The cited files, in citation order (a file cited twice is named twice)."""
        return tuple(c.path for c in self.citations)

    @property
    def feedback_count(self) -> int:
        return self.success_count + self.failure_count

    @property
    def success_rate(self) -> float | None:
        """Share of feedback that said applying it helped (None: no feedback yet)."""
        return self.success_count / self.feedback_count if self.feedback_count else None

    @property
    def validated(self) -> bool:
        """Applied often, and it helped (the promotion rule of seed 000; a conflict with
        another memory is checked where the promotion queue is made)."""
        rate = self.success_rate
        return (self.status is Status.ACTIVE and self.applied_count >= VALIDATED_MIN_APPLIED
                and rate is not None and rate >= VALIDATED_MIN_SUCCESS)

    @property
    def stale_rule(self) -> str | None:
        """The rules file holding a rule this memory no longer backs: it was promoted,
        then invalidated or superseded. The rule stays until a person takes it out
        (a verification never edits a rules file)."""
        retired = self.status in (Status.INVALID, Status.SUPERSEDED)
        return self.promoted_to if retired else None

    @property
    def poor(self) -> bool:
        """Applying it mostly did not help: flagged, and left out of context."""
        rate = self.success_rate
        return (self.status is Status.ACTIVE and self.feedback_count >= POOR_MIN_FEEDBACK
                and rate is not None and rate < POOR_MAX_SUCCESS)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "repo": self.repo,
            "subject": self.subject,
            "fact": self.fact,
            "citations": [c.to_dict() for c in self.citations],
            "status": self.status.value,
            "reason": self.reason,
            "category": self.category,
            "tags": list(self.tags),
            "supersedes": self.supersedes,
            "superseded_by": self.superseded_by,
            "created_by": self.created_by,
            "created_at": self.created_at.isoformat(),
            "refreshed_at": self.refreshed_at.isoformat(),
            "verification_count": self.verification_count,
            "applied_count": self.applied_count,
            "verified_commit": self.verified_commit,
            "verified_ref": self.verified_ref,
            "invalid_reason": self.invalid_reason,
            "success_count": self.success_count,
            "failure_count": self.failure_count,
            "used_at": self.used_at.isoformat() if self.used_at else None,
            "promoted_to": self.promoted_to,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Memory:
        return cls(
            id=str(data["id"]),
            repo=str(data["repo"]),
            subject=str(data["subject"]),
            fact=str(data["fact"]),
            citations=tuple(Citation.from_dict(c) for c in data["citations"]),
            status=Status(data.get("status", "active")),
            reason=data.get("reason"),
            category=data.get("category"),
            tags=tuple(data.get("tags") or ()),
            supersedes=data.get("supersedes"),
            superseded_by=data.get("superseded_by"),
            created_by=data.get("created_by"),
            created_at=datetime.fromisoformat(data["created_at"]),
            refreshed_at=datetime.fromisoformat(data["refreshed_at"]),
            verification_count=int(data.get("verification_count", 0)),
            applied_count=int(data.get("applied_count", 0)),
            verified_commit=data.get("verified_commit"),
            invalid_reason=data.get("invalid_reason"),
            verified_ref=data.get("verified_ref"),
            success_count=int(data.get("success_count", 0)),
            failure_count=int(data.get("failure_count", 0)),
            used_at=datetime.fromisoformat(data["used_at"]) if data.get("used_at") else None,
            promoted_to=data.get("promoted_to"),
        )


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A search's match, with what ranking it reads (``prompt.relevance``,
    ``quality.rank_search``): a store that can read that much without the citations'
    rows gives hits without ``memory``, and only those kept are read whole. ``memory``
    is the whole memory when the store read it anyway."""

    id: str
    subject: str
    fact: str
    reason: str | None
    tags: tuple[str, ...]
    paths: tuple[str, ...]  # the cited files, in citation order
    memory: Memory | None = None

    @classmethod
    def of(cls, memory: Memory) -> SearchHit:
        return cls(memory.id, memory.subject, memory.fact, memory.reason, memory.tags,
                   memory.paths, memory)


@dataclass(frozen=True, slots=True)
class Stored:
    """What storing a memory did. ``memory`` is the new memory, or, when an active one
    already said the same about the same code (``duplicate``), that one, refreshed
    instead of stored twice. ``conflicts``: active memories citing the same code that say
    something else (the new one was stored all the same). ``warnings`` are for people
    (e.g. a repository over its soft limit)."""

    memory: Memory
    duplicate: bool = False
    conflicts: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.memory.id

    def to_dict(self) -> dict[str, Any]:
        return {**self.memory.to_dict(), "duplicate": self.duplicate,
                "conflicts": list(self.conflicts), "warnings": list(self.warnings)}


def new_event_key() -> str:
    """A new event's key: 32 hex digits, the time in nanoseconds then 64 random bits, so
    that keys are unique across stores and grow with time (an index on them is appended
    to, not rewritten at random places)."""
    return f"{time.time_ns():016x}{secrets.token_hex(8)}"


def new_event_keys(count: int) -> list[str]:
    """``count`` new event keys (``new_event_key``), their random bits read in one
    call: a verification pass writes 66,000 events, and reading 8 bytes from the
    operating system for each was a tenth of its writing."""
    random = secrets.token_hex(8 * count)
    return [f"{time.time_ns():016x}{random[16 * i:16 * i + 16]}" for i in range(count)]


@dataclass(frozen=True, slots=True)
class TelemetryEvent:
    """One append-only telemetry record. ``detail`` is JSON-serialisable.

    ``key`` names the event wherever it travels: a store gives an event without one a
    new key (``new_event_key``) when it writes it, an export carries it, and an import
    skips the keys a store already holds, so importing a file twice adds nothing. Events
    written before keys existed have none (``transfer`` derives one for them)."""

    kind: EventKind
    repo: str
    memory_id: str | None = None
    actor: str | None = None
    at: datetime = field(default_factory=utcnow)
    detail: Mapping[str, Any] = field(default_factory=dict)
    id: int | None = None  # assigned by the store
    key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind.value,
            "repo": self.repo,
            "memory_id": self.memory_id,
            "actor": self.actor,
            "at": self.at.isoformat(),
            "detail": dict(self.detail),
            "key": self.key,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TelemetryEvent:
        return cls(
            kind=EventKind(data["kind"]),
            repo=str(data["repo"]),
            memory_id=data.get("memory_id"),
            actor=data.get("actor"),
            at=datetime.fromisoformat(data["at"]),
            detail=dict(data.get("detail") or {}),
            id=data.get("id"),
            key=data.get("key"),
        )


@dataclass(frozen=True, slots=True)
class Tombstone:
    """What is left of a forgotten memory: which it was, where, who forgot it, when and
    why. Its subject, fact, reason, tags and citations are deleted; its telemetry stays
    (the audit trail), and its id is never used again (an import skips it)."""

    id: str
    repo: str
    status: Status  # the memory's status when it was forgotten
    forgotten_by: str | None
    forgotten_at: datetime
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "repo": self.repo, "status": self.status.value,
                "forgotten_by": self.forgotten_by,
                "forgotten_at": self.forgotten_at.isoformat(), "reason": self.reason}


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Which memories of a repository a listing keeps (``MemoryStore.find``): every
    field narrows, None does not. ``status`` None keeps every status; ``path`` keeps
    memories citing that file; ``since`` those created at or after it."""

    status: Status | None = None
    category: str | None = None
    tag: str | None = None
    path: str | None = None
    created_by: str | None = None
    since: datetime | None = None

    def keeps(self, memory: Memory) -> bool:
        """Whether ``memory`` passes (the rule every store applies, here in Python)."""
        return ((self.status is None or memory.status is self.status)
                and (self.category is None or memory.category == self.category)
                and (self.tag is None or self.tag in memory.tags)
                and (self.path is None or any(c.path == self.path for c in memory.citations))
                and (self.created_by is None or memory.created_by == self.created_by)
                and (self.since is None or memory.created_at >= self.since))


@dataclass(frozen=True, slots=True)
class StoreInfo:
    """Where a store is and what it holds (``vmem where``). Counts are of what the
    caller may see (row-level security applies); ``size_bytes`` is the file with its
    write-ahead log (SQLite) or the tables with their indexes (Postgres), None when the
    store cannot tell."""

    kind: str  # sqlite, postgres, supabase, memory
    location: str  # a path, or a URL with its credentials hidden
    schema_version: str | None
    size_bytes: int | None
    memories: int
    forgotten: int
    events: int
    archived_events: int
    repos: int

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "location": self.location,
                "schema_version": self.schema_version, "size_bytes": self.size_bytes,
                "memories": self.memories, "forgotten": self.forgotten,
                "events": self.events, "archived_events": self.archived_events,
                "repos": self.repos}


#: ``Transition.expect_judged`` of a memory never judged on the main line.
NEVER_JUDGED = ""

#: A citation as a verdict's compare-and-set names it (``Transition.expect_citations``):
#: path, line_start, line_end, snippet_hash.
Cited = tuple[str, int, int, str]


@dataclass(frozen=True, slots=True)
class Transition:
    """One atomic change to a stored memory, applied only if it is still ``expect``
    (and, for a verdict, still last judged at ``expect_judged`` and still citing
    ``expect_citations``).

    Stores apply a batch of transitions in one transaction; a transition whose memory
    is no longer as expected is skipped (with its events), not applied.
    """

    memory_id: str
    expect: Status = Status.ACTIVE
    #: A verdict's compare-and-set: the ``verified_commit`` its pass read
    #: (``NEVER_JUDGED``: none). Whether a verdict may stand (a late apply must not
    #: overwrite a later verdict) was decided against that commit, so the transition is
    #: skipped if another verdict was recorded meanwhile. None: not checked.
    expect_judged: str | None = None
    #: A verdict's other compare-and-set: the citations its pass checked, in order
    #: (``Transition.cited``). A memory never judged on the main line and re-cited off
    #: it meanwhile keeps its status and its ``verified_commit`` (none), so only its
    #: citations tell that the verdict was reached on lines it no longer cites. None:
    #: not checked.
    expect_citations: tuple[Cited, ...] | None = None
    status: Status | None = None
    invalid_reason: str | None = None
    refreshed_at: datetime | None = None
    verified_commit: str | None = None
    verified_ref: str | None = None
    #: Forget where the memory was last judged on the main line (its citations were
    #: re-cited off it): ``verified_ref`` and ``verified_commit`` become None.
    unconfirm: bool = False
    citations: tuple[Citation, ...] | None = None
    add_verifications: int = 0
    add_applications: int = 0
    add_successes: int = 0
    add_failures: int = 0
    used_at: datetime | None = None
    promoted_to: str | None = None
    #: Its rule was taken out of the rules file it was promoted into: ``promoted_to``
    #: becomes None (``promoted_to=None`` keeps it, as None keeps every field here).
    demote: bool = False
    #: The memory that now replaces this one (approving a correction retires what it
    #: corrects).
    superseded_by: str | None = None
    #: Another memory that must be in a status for this transition to apply, checked as
    #: ``expect`` is (after the transitions before it in the batch): two transitions that
    #: each require the other's memory apply together or not at all.
    requires: tuple[str, Status] | None = None
    events: tuple[TelemetryEvent, ...] = ()

    def expects(self, status: Status | str, judged: str | None,
                cited: Sequence[Cited]) -> bool:
        """Whether a memory in ``status``, last judged at ``judged`` (its
        ``verified_commit``), citing ``cited`` (its citations as ``Transition.cited``
        names them; a store may pass none for a transition without
        ``expect_citations``), still takes this transition. Every store asks inside the
        transaction that writes it (the SQL stores' ``agent_memory_apply_cited``, which
        ``agent_memory_apply_demoting`` calls)."""
        return Status(status) is self.expect and (
            self.expect_judged is None or (judged or NEVER_JUDGED) == self.expect_judged
        ) and (self.expect_citations is None or tuple(cited) == self.expect_citations)

    @staticmethod
    def cited(citations: Iterable[Citation]) -> tuple[Cited, ...]:
        """``citations`` as ``expect_citations`` names them: where each is and the hash
        of the code it cites (a re-cite changes one or the other)."""
        return tuple((c.path, c.line_start, c.line_end, c.snippet_hash) for c in citations)

    def required(self, statuses: Mapping[str, Status | str]) -> bool:
        """Whether ``requires`` holds, given the statuses of the memories it may name
        (a memory missing from them, e.g. forgotten, fails it)."""
        if self.requires is None:
            return True
        memory_id, status = self.requires
        found = statuses.get(memory_id)
        return found is not None and Status(found) is status

    def judged_after(self, judged: str | None) -> str | None:
        """The memory's ``verified_commit`` once this transition is applied to one last
        judged at ``judged``."""
        if self.unconfirm:
            return None
        return judged if self.verified_commit is None else self.verified_commit

    def check(self) -> None:
        """Refuse (``ValidationError``) a transition no store may apply: counters only
        grow, and a memory is promoted or demoted, not both. Every store calls it before
        writing anything."""
        if min(self.add_verifications, self.add_applications, self.add_successes,
               self.add_failures) < 0:
            raise ValidationError(f"transition of memory {self.memory_id}: counters only grow")
        if self.demote and self.promoted_to is not None:
            raise ValidationError(f"transition of memory {self.memory_id}: it cannot both "
                                  "promote and demote")

    def apply_to(self, memory: Memory) -> Memory:
        """``memory`` as a store leaves it after this transition (the store's part is
        checking ``expect``). ``None`` fields leave a field as it is; counters add. A
        memory that becomes active has no invalid reason (a revival clears it).

        Every store passes a contract test saying so, which lets the service compute
        the result of a batch instead of reading thousands of memories back."""
        status = memory.status if self.status is None else self.status
        invalid_reason = (memory.invalid_reason if self.invalid_reason is None
                          else self.invalid_reason)
        if self.status is Status.ACTIVE:
            invalid_reason = None
        verified_ref = (None if self.unconfirm else memory.verified_ref
                        if self.verified_ref is None else self.verified_ref)
        verified_commit = self.judged_after(memory.verified_commit)
        return replaced(
            memory,
            status=status,
            invalid_reason=invalid_reason,
            refreshed_at=memory.refreshed_at if self.refreshed_at is None else self.refreshed_at,
            verified_commit=verified_commit,
            verified_ref=verified_ref,
            citations=memory.citations if self.citations is None else self.citations,
            verification_count=memory.verification_count + self.add_verifications,
            applied_count=memory.applied_count + self.add_applications,
            success_count=memory.success_count + self.add_successes,
            failure_count=memory.failure_count + self.add_failures,
            used_at=memory.used_at if self.used_at is None else self.used_at,
            promoted_to=(None if self.demote else memory.promoted_to
                         if self.promoted_to is None else self.promoted_to),
            superseded_by=(memory.superseded_by if self.superseded_by is None
                           else self.superseded_by),
        )


@dataclass(frozen=True, slots=True)
class CitationCheck:
    """The outcome of verifying one citation at one revision."""

    citation: Citation
    outcome: Outcome
    location: Location | None = None  # where the code is now (valid / relocated / changed)
    blob_sha: str | None = None  # blob of the file where the code is now
    similarity: float | None = None  # share of the cited code that survives (0..1)
    ambiguous: bool = False  # the code occurs more than once; the nearest was taken
    step: int = 0  # the ladder step that decided
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        cited, now = self.citation, self.location  # one per citation of a pass: kept lean
        return {
            "cited": place(cited.path, cited.line_start, cited.line_end),
            "outcome": self.outcome.value,
            "path": now.path if now else cited.path,
            "line_start": now.line_start if now else None,
            "line_end": now.line_end if now else None,
            "similarity": self.similarity,
            "ambiguous": self.ambiguous,
            "step": self.step,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class Verification:
    """Every citation of one memory checked at one revision, and the decision."""

    memory: Memory  # the memory after the decision was applied (or as it was, if not)
    checks: tuple[CitationCheck, ...]
    decision: Decision
    revision: str  # the commit checked against (or "worktree")
    reason: str | None = None
    scope: Scope = Scope.VERDICT  # whether the decision may change the stored memory
    ref: str = ""  # the ref asked for (``HEAD``, a branch, a tag), as given
    #: What the verdict did to the stored memory: "refreshed", "invalidated",
    #: "revived", or None (nothing: a view, no verdict, or another writer came first).
    change: str | None = None

    @property
    def passed(self) -> bool:
        """Every citation holds here: the memory may be injected at this revision."""
        return self.decision is Decision.REFRESH

    @property
    def judged(self) -> bool:
        """The decision is a verdict on the memory, not a view of it."""
        return self.scope.judges

    @property
    def where(self) -> str:
        """``REF (sha)``, or the sha alone: where the code was checked, for people."""
        short = self.revision[:12]
        if self.revision == "worktree":
            return "the worktree"
        if not self.ref or self.ref in (self.revision, short):
            return short
        name = self.ref
        for prefix in ("refs/heads/", "refs/tags/", "refs/remotes/"):
            name = name.removeprefix(prefix)
        return f"{name} ({short})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory.id,
            "subject": self.memory.subject,
            "status": self.memory.status.value,
            "decision": self.decision.value,
            "scope": self.scope.value,
            "change": self.change,
            "ref": self.ref,
            "revision": self.revision,
            "reason": self.reason,
            "citations": [c.to_dict() for c in self.checks],
        }


@dataclass(frozen=True, slots=True)
class RepoStats:
    repo: str
    by_status: Mapping[str, int]
    events: Mapping[str, int]
    citations: int
    #: Active memories never judged on the main line: stored on a branch (judged once
    #: merged), re-cited, or new since the last verification at the main line's tip.
    unconfirmed: int = 0
    validated: int = 0  # active promotion candidates (``Memory.validated``)
    poor: int = 0  # active poor performers (``Memory.poor``)
    #: Memories forgotten on request: tombstones, in no status and not in ``total``;
    #: their events still count (``created`` counts every memory ever stored).
    forgotten: int = 0

    @property
    def total(self) -> int:
        return sum(self.by_status.values())

    @property
    def invalidation_rate(self) -> float | None:
        """Share of verification passes that found a memory broken."""
        valid = self.events.get(EventKind.VERIFIED_VALID.value, 0)
        invalid = self.events.get(EventKind.VERIFIED_INVALID.value, 0)
        return invalid / (valid + invalid) if valid + invalid else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "total": self.total,
            "by_status": dict(self.by_status),
            "events": dict(self.events),
            "citations": self.citations,
            "unconfirmed": self.unconfirmed,
            "validated": self.validated,
            "poor": self.poor,
            "forgotten": self.forgotten,
            "invalidation_rate": self.invalidation_rate,
        }


# --------------------------------------------------------------------------- input


def validate_repo(repo: object, where: str = "repo") -> str:
    if not isinstance(repo, str) or not REPO_PATTERN.match(repo):
        raise ValidationError(f"{where} must be 'owner/name', got {repo!r}")
    owner, name = repo.split("/")
    if owner in {".", ".."} or name in {".", ".."}:
        raise ValidationError(f"{where} must be 'owner/name', got {repo!r}")
    return repo


def normalize_path(path: object, where: str = "path") -> str:
    """A repository-relative path with forward slashes, no '.', '..' or empty parts."""
    if not isinstance(path, str) or not path.strip():
        raise ValidationError(f"{where} must be a non-empty relative path, got {path!r}")
    if "\x00" in path or "\n" in path or "\r" in path:
        raise ValidationError(f"{where} contains a control character: {path!r}")
    if path.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:[\\/]", path):
        raise ValidationError(f"{where} must be relative to the repository root, got {path!r}")
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValidationError(f"{where} must stay inside the repository ('..' found): {path!r}")
    if not parts:
        raise ValidationError(f"{where} must name a file, got {path!r}")
    return "/".join(parts)


def _text(data: Mapping[str, Any], key: str, *, required: bool, limit: int) -> str | None:
    value = data.get(key)
    if value is None or (isinstance(value, str) and not value.strip() and not required):
        if required:
            raise ValidationError(f"{key} is required and must not be empty")
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{key} must be a string, got {type(value).__name__}")
    value = value.strip()
    if required and not value:
        raise ValidationError(f"{key} must not be empty")
    if len(value) > limit:
        raise ValidationError(f"{key} is {len(value)} characters long; the limit is {limit}")
    return value


#: The largest line number a citation may name: Postgres stores lines as ``integer``, and
#: no file that can be cited (16 MiB at most) comes near it.
MAX_LINE = 2**31 - 1


def _line(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if not (isinstance(value, str) and value.strip().isdigit()):
            raise ValidationError(f"{where} must be a whole number, got {value!r}")
        value = int(value)
    if value > MAX_LINE:
        raise ValidationError(f"{where} must be at most {MAX_LINE}, got {value}")
    return value


def parse_citation(data: object, where: str = "citation") -> CitationRef:
    if isinstance(data, CitationRef):
        data = {"path": data.path, "line_start": data.line_start,
                "line_end": data.line_end, "sha": data.sha}
    if not isinstance(data, Mapping):
        raise ValidationError(f"{where} must be an object with path, line_start, line_end")
    for key in ("path", "line_start"):
        if key not in data:
            raise ValidationError(f"{where}.{key} is required")
    path = normalize_path(data["path"], f"{where}.path")
    start = _line(data["line_start"], f"{where}.line_start")
    end = _line(data.get("line_end", start), f"{where}.line_end")
    if start < 1:
        raise ValidationError(f"{where}.line_start must be 1 or more, got {start}")
    if end < start:
        raise ValidationError(f"{where}.line_end ({end}) is before line_start ({start})")
    sha = data.get("sha")
    if sha is not None and (not isinstance(sha, str) or not re.fullmatch(r"[^\s\x00]{1,255}", sha)):
        raise ValidationError(f"{where}.sha must be a commit or ref name, got {sha!r}")
    return CitationRef(path, start, end, sha or None)


@dataclass(frozen=True, slots=True)
class NewMemory:
    """A memory as an agent submits it, before fingerprinting. Build with ``parse``."""

    repo: str
    subject: str
    fact: str
    citations: tuple[CitationRef, ...]
    reason: str | None = None
    category: str | None = None
    tags: tuple[str, ...] = ()
    created_by: str | None = None

    @classmethod
    def parse(cls, data: Mapping[str, Any]) -> NewMemory:
        """Validate a JSON-like mapping (the seed's fields); raise ValidationError."""
        if not isinstance(data, Mapping):
            raise ValidationError("a memory must be a JSON object")
        known = {"repo", "subject", "fact", "citations", "reason", "category", "tags",
                 "created_by"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValidationError(f"unknown field(s) in memory: {', '.join(unknown)}")
        repo = validate_repo(data.get("repo"))
        subject = _text(data, "subject", required=True, limit=SUBJECT_MAX)
        fact = _text(data, "fact", required=True, limit=FACT_MAX)
        raw = data.get("citations")
        if not isinstance(raw, Sequence) or isinstance(raw, str | bytes) or not raw:
            raise ValidationError("a memory needs at least one citation")
        if len(raw) > CITATIONS_MAX:
            raise ValidationError(f"a memory may have at most {CITATIONS_MAX} citations")
        citations = tuple(parse_citation(c, f"citations[{i}]") for i, c in enumerate(raw))
        for i, c in enumerate(citations):
            if c.line_end - c.line_start >= CITATION_LINES_MAX:
                raise ValidationError(f"citations[{i}] spans {c.line_end - c.line_start + 1} "
                                      f"lines; the limit is {CITATION_LINES_MAX}")
        tags = data.get("tags") or ()
        if isinstance(tags, str) or not isinstance(tags, Sequence) or not all(
                isinstance(t, str) and t.strip() for t in tags):
            raise ValidationError("tags must be a list of non-empty strings")
        if len(tags) > TAGS_MAX or any(len(t.strip()) > TAG_MAX for t in tags):
            raise ValidationError(f"a memory may have at most {TAGS_MAX} tags of at most "
                                  f"{TAG_MAX} characters each")
        assert subject is not None
        assert fact is not None
        return cls(
            repo=repo,
            subject=subject,
            fact=fact,
            citations=citations,
            reason=_text(data, "reason", required=False, limit=FACT_MAX),
            category=_text(data, "category", required=False, limit=100),
            tags=tuple(dict.fromkeys(t.strip() for t in tags)),
            created_by=_text(data, "created_by", required=False, limit=200),
        )

    @classmethod
    def build(
        cls,
        repo: str,
        subject: str,
        fact: str,
        citations: Sequence[CitationRef | Mapping[str, Any]],
        **optional: Any,
    ) -> NewMemory:
        """Keyword-friendly constructor for Python callers; validates like ``parse``."""
        return cls.parse({"repo": repo, "subject": subject, "fact": fact,
                          "citations": list(citations), **optional})
