"""A memory, an event and a tombstone as an export spells them, read as strictly as a
memory is read at any other entry point.

``vmem db import`` used to take ``Memory.from_dict`` at its word: a ``../`` or absolute
path, a repository name no store accepts, a 5 MB subject, a negative counter, an unknown
status or a tag that is a number went in, and the last broke ``vmem context`` and the MCP
tools for the whole repository. Here every field is checked for its type and its limits
(the same as ``NewMemory.parse``: ``models``), unknown fields are refused, and every
failure is a ``ValidationError`` naming the field. The caller adds the line number.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from verified_memory.errors import ValidationError
from verified_memory.models import (
    CITATIONS_MAX,
    FACT_MAX,
    SUBJECT_MAX,
    TAG_MAX,
    TAGS_MAX,
    Anchor,
    Citation,
    EventKind,
    Fingerprint,
    Memory,
    Status,
    TelemetryEvent,
    Tombstone,
    normalize_path,
    validate_repo,
)
from verified_memory.store._rows import REASON_MAX

__all__ = ["read_event", "read_memory", "read_tombstone"]

ID_MAX = 200  # sql/001: length(id) between 1 and 200
NAME_MAX = 200  # created_by, actor, forgotten_by: an agent's or a person's name
REF_MAX = 255  # a commit, a branch name
CATEGORY_MAX = 100
_HASH = re.compile(r"^[0-9a-f]{16}$")
_SHA = re.compile(r"^[^\s\x00]{1,255}$")
_MEMORY_FIELDS = frozenset({
    "id", "repo", "subject", "fact", "citations", "status", "reason", "category", "tags",
    "supersedes", "superseded_by", "created_by", "created_at", "refreshed_at",
    "verification_count", "applied_count", "verified_commit", "verified_ref",
    "invalid_reason", "success_count", "failure_count", "used_at", "promoted_to"})
_CITATION_FIELDS = frozenset({"path", "line_start", "line_end", "sha", "blob_sha",
                              "snippet_hash", "line_hashes", "anchor"})
_ANCHOR_FIELDS = frozenset({"kind", "name", "text_hash", "offset", "language"})
_EVENT_FIELDS = frozenset({"id", "kind", "repo", "memory_id", "actor", "at", "detail", "key"})
_TOMBSTONE_FIELDS = frozenset({"id", "repo", "status", "forgotten_by", "forgotten_at",
                               "reason"})


def read_memory(data: Mapping[str, Any]) -> Memory:
    """A ``Memory.to_dict()`` record, every field checked."""
    _known(data, _MEMORY_FIELDS, "memory")
    memory_id = _text(data, "id", limit=ID_MAX)
    raw = data.get("citations")
    if not isinstance(raw, list) or not 1 <= len(raw) <= CITATIONS_MAX:
        raise ValidationError(f"citations must be a list of 1 to {CITATIONS_MAX} citations")
    tags = data.get("tags", [])
    if not isinstance(tags, list) or len(tags) > TAGS_MAX or not all(
            isinstance(t, str) and t.strip() and len(t) <= TAG_MAX for t in tags):
        raise ValidationError(f"tags must be a list of at most {TAGS_MAX} non-empty strings "
                              f"of at most {TAG_MAX} characters")
    return Memory(
        id=memory_id,
        repo=validate_repo(data.get("repo")),
        subject=_text(data, "subject", limit=SUBJECT_MAX),
        fact=_text(data, "fact", limit=FACT_MAX),
        citations=tuple(_citation(c, f"citations[{i}]") for i, c in enumerate(raw)),
        status=_status(data.get("status", "active"), "status"),
        reason=_text(data, "reason", limit=FACT_MAX, optional=True),
        category=_text(data, "category", limit=CATEGORY_MAX, optional=True),
        tags=tuple(tags),
        supersedes=_text(data, "supersedes", limit=ID_MAX, optional=True),
        superseded_by=_text(data, "superseded_by", limit=ID_MAX, optional=True),
        created_by=_text(data, "created_by", limit=NAME_MAX, optional=True),
        created_at=_time(data.get("created_at"), "created_at"),
        refreshed_at=_time(data.get("refreshed_at"), "refreshed_at"),
        verification_count=_count(data, "verification_count"),
        applied_count=_count(data, "applied_count"),
        verified_commit=_text(data, "verified_commit", limit=REF_MAX, optional=True),
        invalid_reason=_text(data, "invalid_reason", limit=FACT_MAX, optional=True),
        verified_ref=_text(data, "verified_ref", limit=REF_MAX, optional=True),
        success_count=_count(data, "success_count"),
        failure_count=_count(data, "failure_count"),
        used_at=None if data.get("used_at") is None else _time(data["used_at"], "used_at"),
        promoted_to=_text(data, "promoted_to", limit=1000, optional=True),
    )


def read_event(data: Mapping[str, Any]) -> TelemetryEvent:
    """A ``TelemetryEvent.to_dict()`` record (without its export id), every field checked."""
    _known(data, _EVENT_FIELDS - {"id"}, "event")
    try:
        kind = EventKind(str(data.get("kind")))
    except ValueError:
        raise ValidationError(f"kind must be an event kind, got {data.get('kind')!r}") from None
    detail = data.get("detail", {})
    if not isinstance(detail, dict):
        raise ValidationError(f"detail must be an object, got {type(detail).__name__}")
    return TelemetryEvent(
        kind=kind,
        repo=validate_repo(data.get("repo")),
        memory_id=_text(data, "memory_id", limit=ID_MAX, optional=True),
        actor=_text(data, "actor", limit=NAME_MAX, optional=True),
        at=_time(data.get("at"), "at"),
        detail=detail,
        key=_text(data, "key", limit=ID_MAX, optional=True),
    )


def read_tombstone(data: Mapping[str, Any]) -> Tombstone:
    """A ``Tombstone.to_dict()`` record, every field checked."""
    _known(data, _TOMBSTONE_FIELDS, "tombstone")
    return Tombstone(
        id=_text(data, "id", limit=ID_MAX),
        repo=validate_repo(data.get("repo")),
        status=_status(data.get("status"), "status"),
        forgotten_by=_text(data, "forgotten_by", limit=NAME_MAX, optional=True),
        forgotten_at=_time(data.get("forgotten_at"), "forgotten_at"),
        reason=_text(data, "reason", limit=REASON_MAX),
    )


# --------------------------------------------------------------------------- fields


def _known(data: Mapping[str, Any], fields: frozenset[str], what: str) -> None:
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ValidationError(f"unknown field(s) in a {what}: {', '.join(unknown)}")


def _text(data: Mapping[str, Any], key: str, *, limit: int, optional: bool = False) -> Any:
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or (not value.strip() and not optional):
        raise ValidationError(f"{key} must be a non-empty string, got {value!r}"[:200])
    if len(value) > limit:
        raise ValidationError(f"{key} is {len(value):,} characters long; the limit is "
                              f"{limit:,}")
    return value


def _count(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
        raise ValidationError(f"{key} must be a whole number from 0, got {value!r}")
    return value


def _status(value: object, where: str) -> Status:
    try:
        return Status(str(value))
    except ValueError:
        raise ValidationError(f"{where} must be one of "
                              f"{', '.join(s.value for s in Status)}, got {value!r}") from None


def _time(value: object, where: str) -> datetime:
    if not isinstance(value, str):
        raise ValidationError(f"{where} must be an ISO 8601 time, got {value!r}")
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationError(f"{where} must be an ISO 8601 time, got {value!r}") from None
    if when.tzinfo is None:
        return when.replace(tzinfo=UTC)
    try:  # every store keeps times in UTC: one that leaves the calendar there is refused
        when.astimezone(UTC)
    except OverflowError:
        raise ValidationError(f"{where} is out of range in UTC, got {value!r}") from None
    return when


def _line(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**31:
        raise ValidationError(f"{where} must be a line number from 1, got {value!r}")
    return value


def _citation(data: object, where: str) -> Citation:
    if not isinstance(data, dict):
        raise ValidationError(f"{where} must be an object")
    _known(data, _CITATION_FIELDS, "citation")
    path = data.get("path")
    if normalize_path(path, f"{where}.path") != path:
        raise ValidationError(f"{where}.path must be a plain relative path, got {path!r}")
    start = _line(data.get("line_start"), f"{where}.line_start")
    end = _line(data.get("line_end"), f"{where}.line_end")
    if end < start:
        raise ValidationError(f"{where}.line_end ({end}) is before line_start ({start})")
    for key in ("sha", "blob_sha"):
        value = data.get(key)
        if value is not None and (not isinstance(value, str) or not _SHA.match(value)):
            raise ValidationError(f"{where}.{key} must be a commit or blob name, got {value!r}")
    snippet = data.get("snippet_hash")
    if not isinstance(snippet, str) or not _HASH.match(snippet):
        raise ValidationError(f"{where}.snippet_hash must be 16 hex digits, got {snippet!r}")
    hashes = data.get("line_hashes", [])
    if not isinstance(hashes, list) or len(hashes) > end - start + 1 or not all(
            isinstance(h, str) and _HASH.match(h) for h in hashes):
        raise ValidationError(f"{where}.line_hashes must be a list of 16-hex-digit hashes, "
                              "one per cited line")
    anchor = data.get("anchor")
    return Citation(path=path, line_start=start, line_end=end, sha=data.get("sha"),
                    blob_sha=data.get("blob_sha"),
                    fingerprint=Fingerprint(snippet, tuple(int(h, 16) for h in hashes),
                                            None if anchor is None
                                            else _anchor(anchor, f"{where}.anchor")))


def _anchor(data: object, where: str) -> Anchor:
    if not isinstance(data, dict):
        raise ValidationError(f"{where} must be an object or null")
    _known(data, _ANCHOR_FIELDS, "anchor")
    for key in ("kind", "name", "text_hash"):
        value = data.get(key)
        if not isinstance(value, str) or not value or len(value) > 1000:
            raise ValidationError(f"{where}.{key} must be a non-empty string")
    offset = data.get("offset", 0)
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValidationError(f"{where}.offset must be a whole number from 0")
    language = data.get("language", "")
    if not isinstance(language, str) or len(language) > 100:
        raise ValidationError(f"{where}.language must be a string")
    return Anchor(data["kind"], data["name"], data["text_hash"], offset, language)
