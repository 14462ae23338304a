"""The verification ladder: is the cited code still there, and where?

Each citation climbs the ladder of docs/ARCHITECTURE.md until a step decides:

1. the file's blob sha at the revision equals the citation's: ``valid`` (nothing read);
2. the same lines at the same place hash the same: ``valid``;
3. the same normalised lines elsewhere in the same file: ``relocated``;
4. the tree-sitter anchor (same qualified name) in the same file, then in renamed or
   new files: ``relocated`` if its code hashes the same, ``changed`` if not (see
   ``verify/anchored.py``, which also searches the repository for the line hashes);
5. nothing found: ``missing`` (file gone or code gone), or ``changed`` when most of
   the cited lines survive at one place but not all of them;
6. the source could not be read: ``unverifiable``, which is no verdict at all.

Faults stay with the citation they hit: a blob the repository lacks (a shallow or
partial clone), a cited file that grew past ``MAX_FILE_BYTES`` or is no longer UTF-8
make that citation ``unverifiable`` (a path that became a symbolic link, a submodule or
a directory is ``missing``, saying so), and the pass goes on. A ``missing`` or ``changed``
citation of a file stored with Git LFS (git holds a pointer in its place, now or when
cited) says so: the ladder compares pointers, not the content. Within a pass's time
budget (``verified_memory.budget``) each citation first checks the deadline: once it
is spent, the rest of the pass is ``unverifiable``, saying it was not checked and why.

The verifier compares stored claims (hashes) against freshly derived truth (the code
at the revision); it never trusts a place just because the path still exists, nor
lines just because they read the same: the ``Locator`` may ask whether they are the
cited lines or another copy of them (``confirm``, ``choose``, ``partial``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Mapping, Sequence
from dataclasses import replace

from verified_memory import budget as budgets
from verified_memory.anchors.hashing import BLANK, line_hashes
from verified_memory.errors import NotFound, SourceUnavailable
from verified_memory.models import Citation, CitationCheck, Location, Outcome
from verified_memory.sources.base import CodeSource, CountsRequests, no_file
from verified_memory.verify.files import FileCache, FileText

__all__ = [
    "CHANGED_THRESHOLD", "LFS_POINTER", "Locator", "Verifier", "best_partial", "find_runs",
    "locate_in_file", "widen",
]

#: How a Git LFS pointer file begins (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md).
LFS_POINTER = "version https://git-lfs.github.com/spec/v1\n"
_LFS_FIRST_LINE = line_hashes(LFS_POINTER.splitlines())

#: Share of a citation's non-blank lines that must survive together, at one place,
#: for the code to count as ``changed`` rather than ``missing``.
CHANGED_THRESHOLD = 0.5


def _nonblank(hashes: Sequence[int]) -> list[int]:
    return [h for h in hashes if h != BLANK]


def find_runs(file: FileText, hashes: Sequence[int]) -> list[Location]:
    """Every place in ``file`` whose non-blank lines equal the non-blank ``hashes``.

    Blank lines inside the run may differ (added or removed); the returned range spans
    from the first to the last matching non-blank line, widened by the blank lines the
    citation had at its edges where the file has blank lines there too.
    """
    wanted = _nonblank(hashes)
    if not wanted:
        return []
    found: list[Location] = []
    for first in file.positions(wanted[0]):
        i, ok, last = first, True, first
        for h in wanted[1:]:
            i += 1
            while i < len(file.hashes) and file.hashes[i] == BLANK:
                i += 1
            if i >= len(file.hashes) or file.hashes[i] != h:
                ok = False
                break
            last = i
        if ok:
            found.append(widen(file, first, last, hashes))
    return found


def widen(file: FileText, first: int, last: int, hashes: Sequence[int]) -> Location:
    """The range of rows ``first..last`` (0-based) of ``file``, widened by the blank lines
    the citation (``hashes``) had at its edges where the file has blank lines there too
    (a citation of a function and the blank line after it keeps that line)."""
    lead = next((i for i, h in enumerate(hashes) if h != BLANK), 0)
    trail = next((i for i, h in enumerate(reversed(hashes)) if h != BLANK), 0)
    while lead and first > 0 and file.hashes[first - 1] == BLANK:
        first, lead = first - 1, lead - 1
    while trail and last + 1 < len(file.hashes) and file.hashes[last + 1] == BLANK:
        last, trail = last + 1, trail - 1
    return Location("", first + 1, last + 1)


def _nearest(places: Sequence[Location], near: int) -> Location:
    return min(places, key=lambda loc: (abs(loc.line_start - near), loc.line_start))


def locate_in_file(
    citation: Citation, path: str, file: FileText, locator: Locator | None = None,
    verifier: Verifier | None = None,
) -> tuple[Location | None, bool]:
    """Ladder step 3 within one file: the cited code's place, and whether it was
    ambiguous (found more than once). The locator, when given, arbitrates between
    occurrences (the one inside the anchor wins) and may reject them all (they are
    other code that reads the same); otherwise the nearest to the old place wins."""
    places = [Location(path, p.line_start, p.line_end)
              for p in find_runs(file, citation.fingerprint.line_hashes)]
    if not places:
        return None, False
    return (locator or Locator()).choose(verifier, citation, path, file, places)


def best_partial(citation: Citation, path: str, file: FileText,
                 skip: Container[int] = ()) -> tuple[Location, float] | None:
    """Where most of the cited lines survive together, and what share of them.

    Each surviving line votes for the start its offset implies; the start with the most
    votes wins. Linear in the citation's length times the occurrences of each line.
    Lines whose 0-based index is in ``skip`` do not vote (the locator knows they are
    other code that was already there, not what is left of the cited code).
    """
    hashes = citation.fingerprint.line_hashes
    wanted = len(_nonblank(hashes))
    if not wanted:
        return None
    votes: Counter[int] = Counter()
    for offset, h in enumerate(hashes):
        if h != BLANK:
            for pos in file.positions(h):
                if pos not in skip:
                    votes[pos - offset] += 1
    if not votes:
        return None
    start, count = max(votes.items(), key=lambda kv: (kv[1], -abs(kv[0] - citation.line_start + 1)))
    length = len(hashes)
    first = max(start, 0)
    last = min(start + length, len(file.lines)) - 1
    if last < first:
        return None
    return Location(path, first + 1, last + 1), count / wanted


class Verifier:
    """Checks citations against one source; reads each file at most once per run.

    ``locator`` is the optional step 4 (anchors and repository-wide search); without it
    the ladder goes straight from step 3 to step 5.
    """

    def __init__(self, source: CodeSource, *, locator: Locator | None = None) -> None:
        self.source = source
        self.files = FileCache(source)
        self.locator = locator
        #: Whether each read costs a request against a rate limit (asked once: a check
        #: against a runtime protocol costs microseconds, and the locator asks often).
        self.reads_are_requests = isinstance(source, CountsRequests)
        self._unread_trees: dict[str, SourceUnavailable] = {}  # asked once per run

    def check(self, citations: Sequence[Citation], revision: str) -> list[CitationCheck]:
        try:
            failed = self._unread_trees.get(revision)
            if failed is not None:
                raise failed.with_traceback(None)
            tree = self.source.tree(revision)
        except SourceUnavailable as exc:
            self._unread_trees[revision] = exc
            return [_unverifiable(c, exc) for c in citations]
        return [self.check_one(c, revision, tree) for c in citations]

    def check_one(
        self, citation: Citation, revision: str, tree: Mapping[str, str]
    ) -> CitationCheck:
        try:
            budget = budgets.current()
            if budget is not None:
                budget.check()
            check = self._climb(citation, revision, tree)
            if check.outcome in (Outcome.MISSING, Outcome.CHANGED):
                return self._lfs_hint(check, tree.get(citation.path))
            return check
        except SourceUnavailable as exc:
            return _unverifiable(citation, exc)
        except NotFound as exc:  # an object the tree names is not there: no verdict
            return _unverifiable(citation, exc, " (a shallow or partial clone lacks it?)")

    def _lfs_hint(self, check: CitationCheck, blob: str | None) -> CitationCheck:
        """A broken citation of a file stored with Git LFS says so: git holds a pointer
        (``LFS_POINTER``) in place of the content, and the ladder compares those."""
        c = check.citation
        if self._is_lfs_pointer(blob):
            hint = (f"{c.path} is stored with Git LFS: verification compares LFS pointers, "
                    "not the content they point to")
        elif _cites_a_pointer(c) and self._is_lfs_pointer(c.blob_sha):
            hint = (f"{c.path} was stored with Git LFS when cited: the citation is of its "
                    "LFS pointer, not of the content")
        else:
            return check
        return replace(check, detail=f"{check.detail}; {hint}")

    def _is_lfs_pointer(self, blob: str | None) -> bool:
        if blob is None:
            return False
        try:
            file = self.files.get(blob)
        except (SourceUnavailable, NotFound):  # no hint then, and still the verdict
            return False
        return file is not None and file.text.startswith(LFS_POINTER)

    def _climb(self, c: Citation, revision: str, tree: Mapping[str, str]) -> CitationCheck:
        blob = tree.get(c.path)
        if blob is not None and blob == c.blob_sha:  # step 1
            return CitationCheck(c, Outcome.VALID, c.location, blob, 1.0, step=1,
                                 detail="file unchanged")
        file = self.files.get(blob) if blob is not None else None
        unreadable = self.files.not_text(blob) if blob is not None and file is None else None
        if unreadable is not None and unreadable != "is binary":
            # Too large, or text in another encoding: the code may well be there, but it
            # cannot be compared. That is no verdict.
            return CitationCheck(c, Outcome.UNVERIFIABLE, None, blob, None, step=6,
                                 detail=f"{c.path} {unreadable} at {revision[:12]}: "
                                        "it cannot be compared")
        locator = self.locator or _PLAIN
        if file is not None:
            # the cited rows' hashes: the file's own if made, else only theirs (code that
            # stayed where it was is told without hashing the whole file)
            made = file.hashes_made()
            here = made[c.line_start - 1 : c.line_end] if made is not None \
                else line_hashes(file.lines[c.line_start - 1 : c.line_end])
            cited = c.fingerprint.line_hashes
            # step 2: the same lines, blank ones included, so that a blank line added
            # above the code (which shifts it) is not taken for the code staying put
            if tuple(here) == tuple(cited) and locator.confirm(self, c, file):
                return CitationCheck(c, Outcome.VALID, c.location, blob, 1.0, step=2,
                                     detail="same code at the same place")
            place, ambiguous = locate_in_file(c, c.path, file, locator, self)  # step 3
            if place is not None:
                return CitationCheck(c, Outcome.RELOCATED, place, blob, 1.0, ambiguous, step=3,
                                     detail=f"moved within the file to {place}"
                                     + (" (occurs more than once)" if ambiguous else ""))
        if self.locator is not None:  # step 4
            found = self.locator.locate(self, c, revision, tree, file)
            if found is not None:
                return found
        if file is not None:  # step 5
            partial = locator.partial(self, c, file)
            if partial is not None and partial[1] >= CHANGED_THRESHOLD:
                place, share = partial
                return CitationCheck(c, Outcome.CHANGED, place, blob, round(share, 3), step=5,
                                     detail=f"{share:.0%} of the cited lines survive at {place}")
            return CitationCheck(c, Outcome.MISSING, None, blob, 0.0 if partial is None
                                 else round(partial[1], 3), step=5,
                                 detail="the cited code is no longer in the file")
        if blob is not None:
            return CitationCheck(c, Outcome.MISSING, None, blob, 0.0, step=5,
                                 detail=f"{c.path} {unreadable or 'is not text'} now")
        # A link is never followed: it could lead out of the repository.
        return CitationCheck(c, Outcome.MISSING, None, None, 0.0, step=5,
                             detail=no_file(self.source, revision, c.path, revision[:12]))


class Locator:
    """Ladder step 4: find code that left its file, or changed in place; and the judge
    of steps 2, 3 and 5 when the cited lines read the same in more than one place.

    This base class trusts any copy of the cited lines (step 2 as is, the nearest
    occurrence in step 3, the best partial match in step 5) and finds nothing in
    step 4; ``verify.anchored.AnchorLocator`` is the real one."""

    #: Whether this locator derives a citation's anchor from the cited file itself
    #: when a step needs it, so that citations may be fingerprinted without one.
    derive_anchors: bool = False

    def confirm(self, verifier: Verifier, citation: Citation, file: FileText) -> bool:
        """Step 2: are the equal lines at the cited place the cited code (not another
        copy of it that slid into its place)?"""
        return True

    def choose(self, verifier: Verifier | None, citation: Citation, path: str,
               file: FileText, places: Sequence[Location]) -> tuple[Location | None, bool]:
        """Pick one of the places where the cited lines occur (None: none is trusted)."""
        return _nearest(places, citation.line_start), len(places) > 1

    def partial(self, verifier: Verifier, citation: Citation,
                file: FileText) -> tuple[Location, float] | None:
        """Step 5: where most of the cited lines survive together, and what share."""
        return best_partial(citation, citation.path, file)

    def locate(
        self,
        verifier: Verifier,
        citation: Citation,
        revision: str,
        tree: Mapping[str, str],
        file: FileText | None,
    ) -> CitationCheck | None:
        return None


_PLAIN = Locator()


def _cites_a_pointer(citation: Citation) -> bool:
    """Whether the citation begins with an LFS pointer's first line (its hashes say so:
    the cited blob is read only then)."""
    return (citation.line_start == 1
            and citation.fingerprint.line_hashes[:1] == _LFS_FIRST_LINE)


def _unverifiable(citation: Citation, exc: Exception, hint: str = "") -> CitationCheck:
    return CitationCheck(citation, Outcome.UNVERIFIABLE, None, None, None, step=6,
                         detail=f"could not read the code: {exc}{hint}")
