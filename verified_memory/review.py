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
   ``apply=False``: only telemetry is written, ``retrieved`` and the outcome) and
   turns each into a ``Finding``: the memory still ``holds`` (a reminder), the change
   ``breaks`` it (the cited code changed), it ``deletes`` the cited code, or the code
   was ``unverifiable`` (no verdict).

With ``apply=True`` (after a merge) the same pass refreshes, relocates or invalidates
for real, and also brings every other memory citing a changed file up to date.

Rendering follows ``prompt``'s rule that memory text is data: subjects are inline code,
facts fenced blocks that nothing inside can close, so a memory cannot post markdown,
mentions or HTML into a review.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any
from urllib.parse import quote, urlsplit

from verified_memory.errors import SourceUnavailable
from verified_memory.models import (
    Citation,
    CitationCheck,
    Decision,
    Location,
    Memory,
    Outcome,
    Status,
    Verification,
    validate_repo,
)
from verified_memory.prompt import fence, inline, sanitize
from verified_memory.service import MemoryService
from verified_memory.verify.ladder import Verifier

__all__ = [
    "CommentLine",
    "Diff",
    "FileDiff",
    "Finding",
    "FindingKind",
    "HunkReader",
    "Links",
    "ReviewReport",
    "brief_line",
    "parse_patch",
    "render_finding",
    "render_markdown",
    "review",
    "summary_line",
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


# --------------------------------------------------------------------------- diffs

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True, slots=True)
class FileDiff:
    """One changed file: which base lines the change removes, where it inserts, and
    which lines a review comment may sit on.

    ``path`` is the file at the head (None when deleted), ``old_path`` at the base
    (None when added). Line sets are 1-based: ``deleted`` base lines removed or
    replaced; ``inserted_after`` base lines after which new lines appear (0: at the
    top); ``added`` head lines; ``left`` / ``right`` every base / head line the diff
    shows (changed lines and context), the lines GitHub accepts comments on. ``whole``:
    no patch was available (a binary or very large file), so every line counts as
    changed.
    """

    path: str | None
    old_path: str | None
    status: str = "modified"  # added, removed, modified, renamed
    deleted: frozenset[int] = frozenset()
    inserted_after: frozenset[int] = frozenset()
    added: frozenset[int] = frozenset()
    left: frozenset[int] = frozenset()
    right: frozenset[int] = frozenset()
    whole: bool = False

    @property
    def comment_path(self) -> str:
        """The path a review comment names (the old one for a deleted file)."""
        path = self.path or self.old_path
        assert path is not None
        return path

    def touches(self, start: int, end: int) -> bool:
        """Whether the change removes, replaces or inserts inside base lines start-end."""
        if self.whole or (self.path is None and self.old_path is not None):
            return True
        if any(start <= line <= end for line in self.deleted):
            return True
        return any(start <= after < end for after in self.inserted_after)

    def replaces(self, start: int, end: int) -> bool:
        """Whether new lines take the place of base lines start-end (an edit, not a
        deletion)."""
        if self.path is None:
            return False
        return self.whole or any(start - 1 <= after <= end for after in self.inserted_after)

    def comment_line(self, location: Location, side: str) -> int | None:
        """A line of ``location`` a comment may sit on: a changed one first."""
        lines = range(location.line_start, location.line_end + 1)
        changed, shown = (self.added, self.right) if side == "RIGHT" else (self.deleted, self.left)
        return next((n for n in lines if n in changed), None) or next(
            (n for n in lines if n in shown), None)


def parse_patch(lines: Iterable[str], *, path: str | None, old_path: str | None,
                status: str = "modified") -> FileDiff:
    """A ``FileDiff`` from unified diff hunks (``@@ -a,b +c,d @@`` and their lines), as
    ``git diff`` writes them and GitHub sends them in a pull request file's ``patch``."""
    reader = HunkReader()
    for line in lines:
        reader.feed(line)
    return reader.result(path=path, old_path=old_path, status=status)


class HunkReader:
    """Reads hunks line by line, counting each hunk's lines so that a removed line that
    reads ``--- a/x`` or ``@@`` is never taken for a header."""

    def __init__(self) -> None:
        self.deleted: set[int] = set()
        self.inserted_after: set[int] = set()
        self.added: set[int] = set()
        self.left: set[int] = set()
        self.right: set[int] = set()
        self._old = self._new = 0  # the next line number on each side
        self._old_left = self._new_left = 0  # lines of the current hunk still to come

    @property
    def in_hunk(self) -> bool:
        return self._old_left > 0 or self._new_left > 0

    def feed(self, line: str) -> None:
        """Take one line: a hunk header, a hunk line, or anything else (ignored)."""
        if not self.in_hunk:
            match = _HUNK.match(line)
            if match is None:
                return  # not a hunk, or "\ No newline at end of file"
            old_start, old_count = int(match[1]), int(match[2] or "1")
            new_start, new_count = int(match[3]), int(match[4] or "1")
            # An empty side names the line *before* the hunk; otherwise its first line.
            self._old = old_start if old_count else old_start + 1
            self._new = new_start if new_count else new_start + 1
            self._old_left, self._new_left = old_count, new_count
            return
        mark = line[:1]
        if mark == "-" and self._old_left > 0:
            self.deleted.add(self._old)
            self.left.add(self._old)
            self._old += 1
            self._old_left -= 1
        elif mark == "+" and self._new_left > 0:
            self.added.add(self._new)
            self.right.add(self._new)
            self.inserted_after.add(self._old - 1)
            self._new += 1
            self._new_left -= 1
        elif mark in (" ", "") and self._old_left > 0 and self._new_left > 0:
            self.left.add(self._old)
            self.right.add(self._new)
            self._old += 1
            self._new += 1
            self._old_left -= 1
            self._new_left -= 1
        elif mark != "\\":
            self._old_left = self._new_left = 0  # a hunk shorter than its header said

    def result(self, *, path: str | None, old_path: str | None, status: str,
               whole: bool = False) -> FileDiff:
        return FileDiff(path=path, old_path=old_path, status=status,
                        deleted=frozenset(self.deleted),
                        inserted_after=frozenset(self.inserted_after),
                        added=frozenset(self.added), left=frozenset(self.left),
                        right=frozenset(self.right), whole=whole)


@dataclass(frozen=True, slots=True)
class Diff:
    """What a review looks at: the changed files between two commits.

    ``base_commit`` is the diff's old side: the merge base of ``base`` and ``head``
    (what GitHub diffs a pull request against), which is ``base`` itself when it is an
    ancestor of ``head``."""

    base: str  # as given: a ref name or a sha
    head: str
    base_commit: str
    head_commit: str
    files: tuple[FileDiff, ...]
    notes: tuple[str, ...] = ()

    def by_old_path(self) -> dict[str, FileDiff]:
        return {f.old_path: f for f in self.files if f.old_path is not None}

    def by_path(self) -> dict[str, FileDiff]:
        return {f.path: f for f in self.files if f.path is not None}


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
        if self.kind is FindingKind.HOLDS:
            moved = [c for c in self.citations if c.check.outcome is Outcome.RELOCATED]
            where = " (it moved: the memory follows it)" if moved else ""
            done = " The memory was refreshed." if applied else ""
            return (f"This change touches code the memory cites, and the code is kept{where}: "
                    f"keep to the convention.{done}")
        if self.kind is FindingKind.UNVERIFIABLE:
            return ("The cited code could not be read at the head, so there is no verdict "
                    "either way; the memory was not changed.")
        if applied or self.memory.status is Status.INVALID:
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
            "updated": self.updated,
            "notes": list(self.notes),
            "requests": self.requests,
        }


# --------------------------------------------------------------------------- the review


class _BaseLocator:
    """Where a citation's code is at the base commit (``None``: it did not hold there)."""

    def __init__(self, service: MemoryService, repo: str, base: str) -> None:
        self.source = service.source_for(repo)
        self.verifier = Verifier(self.source, locator=service.locator)
        self.base = base
        self._tree: Mapping[str, str] | None = None
        self._unreadable = False

    def locate(self, citation: Citation) -> tuple[Location | None, bool]:
        """The base location and whether it is trusted (False: the code did not hold).
        When the base cannot be read, the stored place is the best guess (asked once:
        an outage is not retried for every citation)."""
        if self._unreadable:
            return citation.location, True
        if self._tree is None:
            try:
                self._tree = self.source.tree(self.base)
            except SourceUnavailable:
                self._unreadable = True
                return citation.location, True
        check = self.verifier.check_one(citation, self.base, self._tree)
        if check.outcome.holds and check.location is not None:
            return check.location, True
        if check.outcome is Outcome.UNVERIFIABLE:
            return citation.location, True
        return None, False


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

    Without ``apply`` no memory changes: only telemetry is written (``retrieved`` for
    each touched memory, and the verification outcome). With ``apply`` (after a merge)
    the verification is carried out, for the touched memories and for every other
    memory citing a changed file."""
    validate_repo(repo)
    verify_at = verify_at or diff.head_commit
    links = links or Links(repo)
    notes = list(diff.notes)
    empty = ReviewReport(repo=repo, base=diff.base, head=diff.head,
                         base_commit=diff.base_commit, head_commit=diff.head_commit,
                         verified_at=verify_at, findings=(), files=len(diff.files),
                         applied=apply, pull_request=pull_request, notes=tuple(notes))
    if not service.memories.recent(repo, limit=1):
        which = "active memories" if service.memories.recent(repo, limit=1, status=None) \
            else "memories"
        notes.append(f"no {which} for {repo}: nothing to review (store some with "
                     "`vmem store`)")
        return replace(empty, has_memories=False, notes=tuple(notes))

    locator = _BaseLocator(service, repo, diff.base_commit)
    memories: dict[str, Memory] = {}
    touched: dict[str, dict[int, Location]] = {}  # memory id -> citation index -> base place
    stale: set[str] = set()
    for changed in diff.files:
        if changed.old_path is None:
            continue
        for memory in service.memories.by_path(repo, changed.old_path, limit=BY_PATH_LIMIT):
            memories.setdefault(memory.id, memory)
            for i, citation in enumerate(memory.citations):
                if citation.path != changed.old_path:
                    continue
                where, held = locator.locate(citation)
                if not held or where is None:
                    stale.add(memory.id)
                elif where.path == changed.old_path and changed.touches(where.line_start,
                                                                        where.line_end):
                    touched.setdefault(memory.id, {})[i] = where
    stale -= touched.keys()
    # queued: written with the verification outcomes below
    service._retrieved([memories[mid] for mid in touched], "review", base=diff.base_commit,
                       head=diff.head_commit, pull_request=pull_request)
    ids = list(memories) if apply else list(touched)
    verifications: Sequence[Verification] = ()
    if ids:
        verifications = service.verify(ids, ref=verify_at, apply=apply,
                                       on_progress=on_progress).verifications
    places = _Places(diff.by_path(), diff.by_old_path())
    findings = [
        _finding(v, touched[v.memory.id], places, diff.base_commit, verify_at, links)
        for v in verifications if v.memory.id in touched
    ]
    findings.sort(key=lambda f: (_ORDER[f.kind], f.memory.subject.lower(), f.memory.id))
    if stale:
        notes.append(f"{len(stale)} memor{'y' if len(stale) == 1 else 'ies'} citing changed "
                     "files did not hold even at the base (run `vmem verify` on the base "
                     "branch): " + ", ".join(sorted(stale)))
    return replace(empty, findings=tuple(findings), stale=tuple(sorted(stale)),
                   updated=len(set(ids) - touched.keys()) if apply else 0, notes=tuple(notes))


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


# --------------------------------------------------------------------------- markdown


def _short(sha: str) -> str:
    return sha[:12]


def _place(text: str, link: str | None) -> str:
    return f"[{inline(text)}]({link})" if link else inline(text)


def _citation_line(c: FindingCitation) -> str:
    check = c.check
    cited = str(check.citation.location)
    outcome = check.outcome
    now = _place(str(check.location), c.link) if check.location is not None else None
    if outcome is Outcome.VALID and now:
        text = f"{now} holds"
    elif outcome is Outcome.RELOCATED and now:
        text = f"{inline(cited)} moved to {now}"
    elif outcome is Outcome.CHANGED and now:
        share = "part" if check.similarity is None else f"{check.similarity:.0%}"
        text = f"{inline(cited)} **changed**: {share} of the cited lines survive at {now}"
    elif c.rewritten:
        text = f"{_place(cited, c.link)} **rewritten**: none of the cited lines survive"
    elif outcome.is_verdict:
        text = (f"{_place(cited, c.link)} **{'changed' if outcome is Outcome.CHANGED else 'gone'}**"
                f": {inline(check.detail or 'no longer there')}")
    else:
        text = f"{_place(cited, c.link)} could not be read: {inline(check.detail or '?')}"
    if c.touched:
        text += " (touched by this change)"
    return f"- {text}"


def render_finding(finding: Finding, *, applied: bool = False, heading: str = "###") -> str:
    """One finding as markdown: the memory (its text quoted as data), its citations as
    links, and what to do."""
    m = finding.memory
    lines = [
        f"{heading} {finding.kind.label}: {inline(sanitize(m.subject))}".rstrip(),
        "",
        f"Memory {inline(m.id)} ({m.status.value}):",
        "",
        fence(m.fact),
        "",
        *(_citation_line(c) for c in finding.citations),
        "",
        finding.advice(applied),
    ]
    return "\n".join(lines)


def summary_line(report: ReviewReport) -> str:
    if not report.has_memories:
        return f"No active memories for {inline(report.repo)}: nothing to review."
    if not report.findings:
        return ("This change touches no code that a memory cites "
                f"({report.files} changed file{'s' if report.files != 1 else ''} looked at).")
    counts = ", ".join(f"{report.count(kind)} {kind.value}" for kind in FindingKind
                       if report.count(kind))
    n = len(report.findings)
    return (f"This change touches code cited by {n} memor{'y' if n == 1 else 'ies'}: "
            f"{counts}.")


def brief_line(finding: Finding) -> str:
    """One line for a finding written out elsewhere (in its inline review comment)."""
    where = finding.comment
    at = f" (see the comment on {inline(where.path)} line {where.line})" if where else ""
    return (f"- **{finding.kind.label}**: {inline(sanitize(finding.memory.subject))}, "
            f"memory {inline(finding.memory.id)}{at}")


def render_markdown(report: ReviewReport, *, heading: str = "##",
                    brief: Container[str] = ()) -> str:
    """The whole review as markdown for people. Findings whose memory id is in ``brief``
    get one line each (their detail is in an inline comment)."""
    what = (f"pull request #{report.pull_request}" if report.pull_request is not None
            else f"{inline(report.base)}...{inline(report.head)}")
    effect = ("memories were refreshed, relocated or invalidated (--apply)" if report.applied
              else "memories were not changed (telemetry only)")
    parts = [
        f"{heading} verified-memory review of {inline(report.repo)}: {what}",
        "",
        summary_line(report),
        "",
        f"Diff from {inline(_short(report.base_commit))} (merge base) to "
        f"{inline(_short(report.head_commit))}; verified at "
        f"{inline(_short(report.verified_at))}; {effect}.",
    ]
    short = [f for f in report.findings if f.memory.id in brief]
    if short:
        parts += ["", *(brief_line(f) for f in short)]
    for finding in report.findings:
        if finding.memory.id not in brief:
            parts += ["", render_finding(finding, applied=report.applied,
                                         heading=heading + "#")]
    if report.updated:
        parts += ["", f"{report.updated} other memor{'y' if report.updated == 1 else 'ies'} "
                      "citing the changed files were verified and brought up to date."]
    for note in report.notes:
        parts += ["", f"_Note: {sanitize(note)}_"]
    return "\n".join(parts) + "\n"
