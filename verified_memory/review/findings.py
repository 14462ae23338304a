"""The review bot: which memories does a change touch, and do they still hold at its head?

A review compares two commits: the **base** side of a diff (the merge base of the
pull request's base and head, as GitHub diffs a pull request) and the **head**. It:

1. takes the changed files and, per file, the base lines the change deletes or
   replaces and the places it inserts lines (``FileDiff``, from ``git diff`` or from
   GitHub's pull request files);
2. finds the memories citing each changed file (an index look-up by path) and locates
   each citation *at the base*: a citation is pinned to the commit it was last
   verified at, which may be older than the base, so its stored lines are trusted only
   when the file's blob at the base is the citation's blob, and otherwise the ladder
   finds the cited code at the base. A citation the change touches is one whose base
   lines overlap a deleted line or surround an inserted one;
3. verifies every touched memory at the head (``MemoryService.verify`` with
   ``apply=False``, a dry run: only telemetry is written, ``retrieved`` and what the
   check saw) and
   turns each into a ``Finding``: the memory still ``holds`` (a reminder), the change
   ``breaks`` it (the cited code changed), it ``deletes`` the cited code, or the code
   was ``unverifiable`` (no verdict).

With ``apply=True`` (after a merge) the same pass refreshes, relocates or invalidates
for real, and also brings every other memory citing a changed file up to date.

The review reads and changes memories only through ``MemoryService``'s public methods
(``memories_citing``, ``locate``, ``newer_than``, ``main_tip``, ``on_branch``,
``record_retrieval``, ``verify``). The
package: ``diff`` (the change), ``findings`` (this), ``markdown`` (for people), ``git`` (a
local ``base...head``) and ``github`` (pull requests: files, reviews, comments).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any
from urllib.parse import quote, urlsplit

from verified_memory.models import (
    Citation,
    CitationCheck,
    Decision,
    Location,
    Memory,
    Outcome,
    Scope,
    Status,
    Verification,
    validate_repo,
)
from verified_memory.review.diff import Diff, FileDiff
from verified_memory.service import MemoryService

__all__ = [
    "CommentLine",
    "Finding",
    "FindingCitation",
    "FindingKind",
    "Links",
    "ReviewReport",
    "review",
    "web_url",
]

#: Memories read per changed path (a file cited by more is an outlier; the rest wait
#: for the next ``vmem verify``).
BY_PATH_LIMIT = 10_000

Progress = Callable[[int, int], None]


class FindingKind(StrEnum):
    """What a change does to a memory whose cited code it touches."""

    BREAKS = "breaks"  # the cited code changed: flag it; supersede or invalidate once merged
    DELETES = "deletes"  # the cited code is gone
    UNVERIFIABLE = "unverifiable"  # the code could not be read: no verdict
    HOLDS = "holds"  # the code is kept (maybe moved): remind the author of the convention

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    FindingKind.BREAKS: "Breaks a convention",
    FindingKind.DELETES: "Deletes cited code",
    FindingKind.UNVERIFIABLE: "Could not be verified",
    FindingKind.HOLDS: "Convention to keep",
}
_ORDER = {kind: i for i, kind in enumerate(FindingKind)}


# --------------------------------------------------------------------------- links


def web_url(api_url: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The web host of a GitHub API URL: ``GITHUB_SERVER_URL`` when set (GitHub Actions
    sets it, on Enterprise Server too), else derived from the API URL
    (``https://api.github.com`` -> ``https://github.com``, ``https://HOST/api/v3`` ->
    ``https://HOST``)."""
    env = os.environ if env is None else env
    server = (env.get("GITHUB_SERVER_URL") or "").strip().rstrip("/")
    if server:
        return server
    parts = urlsplit(api_url or "https://api.github.com")
    host = parts.netloc.removesuffix(":443")
    if host == "api.github.com":
        return "https://github.com"
    return f"{parts.scheme or 'https'}://{host}"


@dataclass(frozen=True, slots=True)
class Links:
    """Links to cited lines at a commit on the repository's web host (``web`` None: no
    links, places are written as ``path:lines``)."""

    repo: str
    web: str | None = None

    def blob(self, commit: str | None, location: Location) -> str | None:
        if not self.web or not commit:
            return None
        lines = (f"L{location.line_start}" if location.line_start == location.line_end
                 else f"L{location.line_start}-L{location.line_end}")
        return f"{self.web}/{self.repo}/blob/{commit}/{quote(location.path)}#{lines}"


# --------------------------------------------------------------------------- findings


@dataclass(frozen=True, slots=True)
class CommentLine:
    """Where a review comment sits: a line the pull request's diff shows. ``side`` is
    ``RIGHT`` for a head line, ``LEFT`` for a base line the change removes."""

    path: str
    line: int
    side: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "side": self.side}


@dataclass(frozen=True, slots=True)
class FindingCitation:
    """One citation of a finding's memory: its check at the head, whether the change
    touches it, where it was at the base, and a link to the code. ``rewritten``: none of
    the cited lines survive (the verifier says ``missing``) but the diff puts new lines in
    their place: an edit, not a deletion."""

    check: CitationCheck
    touched: bool
    base_location: Location | None
    link: str | None
    rewritten: bool = False

    def to_dict(self) -> dict[str, Any]:
        place = self.check.location
        return {
            "cited": str(self.check.citation.location),
            "outcome": self.check.outcome.value,
            "touched": self.touched,
            "rewritten": self.rewritten,
            "base": str(self.base_location) if self.base_location else None,
            "path": place.path if place else self.check.citation.path,
            "line_start": place.line_start if place else None,
            "line_end": place.line_end if place else None,
            "similarity": self.check.similarity,
            "detail": self.check.detail,
            "link": self.link,
        }


@dataclass(frozen=True, slots=True)
class Finding:
    kind: FindingKind
    verification: Verification
    citations: tuple[FindingCitation, ...]
    comment: CommentLine | None = None  # the diff line a review comment sits on

    @property
    def memory(self) -> Memory:
        return self.verification.memory

    def advice(self, applied: bool) -> str:
        mid = self.memory.id
        # What the apply did to this memory (None: nothing, e.g. judged later already).
        change = self.verification.change if applied else None
        if self.kind is FindingKind.HOLDS:
            moved = [c for c in self.citations if c.check.outcome is Outcome.RELOCATED]
            where = " (it moved: the memory follows it)" if moved else ""
            done = f" The memory was {change}." if change else ""
            return (f"This change touches code the memory cites, and the code is kept{where}: "
                    f"keep to the convention.{done}")
        if self.kind is FindingKind.UNVERIFIABLE:
            return ("The cited code could not be read at the head, so there is no verdict "
                    "either way; the memory was not changed.")
        if applied and change is None and self.verification.scope is not Scope.VERDICT:
            return (f"The memory was not changed: {self.verification.reason or 'not judged'}.")
        if change == "invalidated" or self.memory.status is Status.INVALID:
            return ("The memory no longer holds and was invalidated. If the change sets a "
                    "new convention, store it with `vmem store`.")
        what = "edits" if self.kind is FindingKind.BREAKS else "deletes"
        return (f"This change {what} code the memory cites. If that is deliberate, once it "
                f"merges supersede the memory with the new convention (`vmem supersede "
                f"{mid}`) or retire it (`vmem invalidate {mid} --reason ...`); "
                "`vmem review --apply` after the merge invalidates it otherwise. If it is "
                "not deliberate, restore the cited code.")

    def to_dict(self, applied: bool = False) -> dict[str, Any]:
        m = self.memory
        return {
            "kind": self.kind.value,
            "memory_id": m.id,
            "subject": m.subject,
            "fact": m.fact,
            "status": m.status.value,
            "decision": self.verification.decision.value,
            "reason": self.verification.reason,
            "advice": self.advice(applied),
            "citations": [c.to_dict() for c in self.citations],
            "comment": self.comment.to_dict() if self.comment else None,
        }


@dataclass(frozen=True, slots=True)
class ReviewReport:
    """A review: the findings, and what was compared."""

    repo: str
    base: str
    head: str
    base_commit: str
    head_commit: str
    verified_at: str  # the commit memories were verified at (the head, or a merge commit)
    findings: tuple[Finding, ...]
    files: int  # changed files looked at
    applied: bool = False
    has_memories: bool = True
    stale: tuple[str, ...] = ()  # memories citing changed files that did not hold at the base
    branch: tuple[str, ...] = ()  # the same, stored on a branch: not main-line claims yet
    newer: tuple[str, ...] = ()  # the same, stored or judged on the main line after the base
    updated: int = 0  # with apply: other memories citing changed files brought up to date
    notes: tuple[str, ...] = ()
    pull_request: int | None = None
    requests: int = 0  # GitHub requests the review sent (0 for local sources)

    def count(self, kind: FindingKind) -> int:
        return sum(1 for f in self.findings if f.kind is kind)

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "pull_request": self.pull_request,
            "base": self.base,
            "head": self.head,
            "base_commit": self.base_commit,
            "head_commit": self.head_commit,
            "verified_at": self.verified_at,
            "applied": self.applied,
            "files": self.files,
            "counts": {kind.value: self.count(kind) for kind in FindingKind},
            "findings": [f.to_dict(self.applied) for f in self.findings],
            "stale": list(self.stale),
            "branch": list(self.branch),
            "newer": list(self.newer),
            "updated": self.updated,
            "notes": list(self.notes),
            "requests": self.requests,
        }


# --------------------------------------------------------------------------- the review


def review(
    service: MemoryService,
    repo: str,
    diff: Diff,
    *,
    verify_at: str | None = None,
    apply: bool = False,
    links: Links | None = None,
    pull_request: int | None = None,
    on_progress: Progress | None = None,
) -> ReviewReport:
    """Review ``diff``: find the memories whose citations it touches, verify them at
    ``verify_at`` (default: the head commit), and report a finding for each.

    Without ``apply`` no memory changes: the verification is a dry run, and only
    telemetry is written (``retrieved`` for each touched memory, and what the check
    saw). With ``apply`` (after a merge) the verification is carried out, for the
    touched memories and for every other memory citing a changed file; ``verify_at``
    must then be on the main line (the ref rule)."""
    validate_repo(repo)
    verify_at = verify_at or diff.head_commit
    links = links or Links(repo)
    notes = list(diff.notes)
    empty = ReviewReport(repo=repo, base=diff.base, head=diff.head,
                         base_commit=diff.base_commit, head_commit=diff.head_commit,
                         verified_at=verify_at, findings=(), files=len(diff.files),
                         pull_request=pull_request, notes=tuple(notes))
    counts = service.stats(repo).by_status
    if not counts.get(Status.ACTIVE.value):
        which = "active memories" if sum(counts.values()) else "memories"
        notes.append(f"no {which} for {repo}: nothing to review (store some with "
                     "`vmem store`)")
        if apply:
            notes.append(_NOTHING_APPLIED)
        return replace(empty, has_memories=False, notes=tuple(notes))

    changed = [f.old_path for f in diff.files if f.old_path is not None]
    citing = service.memories_citing(repo, changed, limit=BY_PATH_LIMIT)
    memories = {m.id: m for found in citing.values() for m in found}
    # Each citation of a changed file, placed at the base: as stored when the file's
    # blob there is the citation's, else found again by the ladder (pins may be older).
    cited = [(m.id, i, c) for m in memories.values() for i, c in enumerate(m.citations)
             if c.path in citing]
    placed = service.locate(repo, [c for _, _, c in cited], diff.base_commit)
    by_old_path = diff.by_old_path()
    touched: dict[str, dict[int, Location]] = {}  # memory id -> citation index -> base place
    stale: set[str] = set()
    for (memory_id, i, citation), check in zip(cited, placed, strict=True):
        where = _base_place(citation, check)
        if where is None:
            stale.add(memory_id)
        elif where.path == citation.path and by_old_path[where.path].touches(
                where.line_start, where.line_end):
            touched.setdefault(memory_id, {})[i] = where
    stale -= touched.keys()
    # A memory whose claim is about commits the base lacks is no claim about the base:
    # named apart, never as broken there. Stored on a branch (this one or another) and
    # not merged: ``branch``; stored or judged on the main line after the base (main
    # moved on since this branch was cut): ``newer``.
    later = service.newer_than(repo, [memories[mid] for mid in stale], diff.base_commit)
    stale -= later
    tip = service.main_tip(repo) if later else None
    if tip is None:
        branch = frozenset(mid for mid in later if not memories[mid].verified_ref)
    else:
        branch = service.on_branch(repo, [memories[mid] for mid in later], tip)
    newer = later - branch
    service.record_retrieval([memories[mid] for mid in touched], "review",
                             base=diff.base_commit, head=diff.head_commit,
                             pull_request=pull_request)
    ids = list(memories) if apply else list(touched)
    verifications: Sequence[Verification] = ()
    applied = apply
    if ids:
        report = service.verify(ids, ref=verify_at, apply=apply, on_progress=on_progress)
        verifications = report.verifications
        scope = report.scopes.get(repo)
        if apply and scope is not None and not scope.judges:
            # The ref rule wins over --apply (a main line that cannot be told or read):
            # the report must not say memories were changed, and says why not.
            applied = False
            notes.append(f"--apply: {scope.why}")
    elif apply:  # no memory cites a changed file: the report must not say any changed
        applied = False
        notes.append(_NOTHING_APPLIED)
    places = _Places(diff.by_path(), by_old_path)
    findings = [
        _finding(v, touched[v.memory.id], places, diff.base_commit, verify_at, links)
        for v in verifications if v.memory.id in touched
    ]
    findings.sort(key=lambda f: (_ORDER[f.kind], f.memory.subject.lower(), f.memory.id))
    if stale:
        notes.append(f"{len(stale)} memor{'y' if len(stale) == 1 else 'ies'} citing changed "
                     "files did not hold even at the base (run `vmem verify` on the base "
                     "branch): " + ", ".join(sorted(stale)))
    if branch:
        one = len(branch) == 1
        notes.append(f"{len(branch)} memor{'y' if one else 'ies'} citing changed files "
                     f"{'was' if one else 'were'} stored on a branch (commits the base does "
                     f"not contain) and {'does' if one else 'do'} not hold at the base: not "
                     "claims about the main line yet, judged once merged: "
                     + ", ".join(sorted(branch)))
    if newer:
        one = len(newer) == 1
        notes.append(f"{len(newer)} memor{'y' if one else 'ies'} citing changed files "
                     f"{'was' if one else 'were'} stored or judged on the main line after the "
                     f"base (it moved on since this branch was cut) and {'does' if one else 'do'}"
                     " not hold at the base: not checked against this change (merge or rebase "
                     "onto the main line to review against them): " + ", ".join(sorted(newer)))
    return replace(empty, applied=applied, findings=tuple(findings),
                   stale=tuple(sorted(stale)),
                   branch=tuple(sorted(branch)), newer=tuple(sorted(newer)),
                   updated=sum(1 for v in verifications if v.change is not None
                               and v.memory.id not in touched), notes=tuple(notes))


#: The note of an ``--apply`` that had no memory to verify (``applied`` is then false).
_NOTHING_APPLIED = "--apply: no memory cites a changed file, so none was verified or changed"


def _base_place(citation: Citation, check: CitationCheck) -> Location | None:
    """Where a citation's code is at the base (None: it did not hold there). When the
    base cannot be read, the stored place is the best guess."""
    if check.outcome is Outcome.UNVERIFIABLE:
        return citation.location
    if check.outcome.holds and check.location is not None:
        return check.location
    return None


def _kind(v: Verification, citations: Sequence[FindingCitation]) -> FindingKind:
    """``holds`` / ``unverifiable`` as verification says; a verdict is ``deletes`` when the
    change removes cited lines with nothing in their place (or the file), and ``breaks``
    when it edits them. The citations the change touches decide first."""
    if v.decision is Decision.REFRESH:
        return FindingKind.HOLDS
    if v.decision is Decision.UNVERIFIED:
        return FindingKind.UNVERIFIABLE

    def outcome(c: FindingCitation) -> Outcome:
        return Outcome.CHANGED if c.rewritten else c.check.outcome

    for group in ([c for c in citations if c.touched], citations):
        outcomes = {outcome(c) for c in group}
        if Outcome.MISSING in outcomes:
            return FindingKind.DELETES
        if Outcome.CHANGED in outcomes:
            return FindingKind.BREAKS
    return FindingKind.BREAKS


@dataclass(frozen=True, slots=True)
class _Places:
    """The changed files by their head path and by their base path."""

    heads: Mapping[str, FileDiff]
    olds: Mapping[str, FileDiff]


def _finding(v: Verification, touched: Mapping[int, Location], places: _Places,
             base_commit: str, verify_at: str, links: Links) -> Finding:
    citations = []
    for i, check in enumerate(v.checks):
        base_place = touched.get(i)
        if check.location is not None and check.outcome is not Outcome.UNVERIFIABLE:
            link = links.blob(verify_at, check.location)
        elif base_place is not None:
            link = links.blob(base_commit, base_place)
        else:
            link = links.blob(check.citation.sha, check.citation.location)
        changed = places.olds.get(base_place.path) if base_place is not None else None
        rewritten = (base_place is not None and changed is not None
                     and check.outcome is Outcome.MISSING
                     and changed.replaces(base_place.line_start, base_place.line_end))
        citations.append(FindingCitation(check, i in touched, base_place, link, rewritten))
    return Finding(_kind(v, citations), v, tuple(citations), _comment_line(citations, places))


def _comment_line(citations: Sequence[FindingCitation], places: _Places) -> CommentLine | None:
    """A line of the diff to comment on: in the touched code at the head (a changed
    line first), else on the base lines the change removes from it."""
    heads, olds = places.heads, places.olds
    touched = [c for c in citations if c.touched]
    for c in touched:
        place = c.check.location
        changed = heads.get(place.path) if place is not None else None
        if place is not None and changed is not None:
            line = changed.comment_line(place, "RIGHT")
            if line is not None:
                return CommentLine(changed.comment_path, line, "RIGHT")
    for c in touched:
        assert c.base_location is not None
        changed = olds.get(c.base_location.path)
        if changed is not None:
            line = changed.comment_line(c.base_location, "LEFT")
            if line is not None:
                return CommentLine(changed.comment_path, line, "LEFT")
    return None
