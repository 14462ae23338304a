"""What the code looked like at a citation's commit, and which lines of a file now came
from where: the history evidence of the anchored locator (``verify/anchored.py``).

* the cited file as it was (``origin_base``), and any other file as it was, under its
  old name when git saw it renamed (``candidate_base``);
* the line alignment of an old and a new file (``alignment.line_origins``), kept per
  pair of blobs, and what it says of a place: the cited lines kept, other old lines, or
  added (``provenance``), and which rows are other code (``foreign_rows``);
* the files changed since a citation's commit and git's renames (``diff``), and where
  to search for moved code: the cited file's successors first (``candidates``).

Old trees, diffs and alignments are kept in small LRU caches: a bulk check cites many
commits, and a tree of a big repository is megabytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from verified_memory.anchors.hashing import BLANK
from verified_memory.cache import BoundedCache
from verified_memory.errors import NotFound
from verified_memory.models import Citation, Location
from verified_memory.sources.base import ListsChanges, Suffixes, has_suffix
from verified_memory.verify import candidates
from verified_memory.verify.alignment import line_origins, occurs_once, same_context, unheard_of
from verified_memory.verify.files import FileText
from verified_memory.verify.ladder import Verifier

__all__ = ["ForeignRows", "Origins", "Provenance"]

#: Line alignments kept per locator (each is one int per line of the new file).
_ORIGINS_CACHE = 256
#: Candidate lists kept per locator, one per (commit, revision, cited path): paths only.
_CANDIDATE_LISTS = 256
#: Old trees and (old commit, revision) diffs kept per locator: a bulk check cites
#: many commits, and a tree of a big repository is megabytes.
_TREES_CACHE = 32


class ForeignRows:
    """Rows of a file that are other code (``Origins._foreign_rows``), and any rows
    added with ``|``, as a set that is only asked ``row in rows``: each row is first
    judged by its line alone (``maybe``), and the line alignment (``compute``, the
    dear part) runs only when that cannot rule the row out."""

    __slots__ = ("_compute", "_extra", "_known", "_maybe")

    def __init__(self, maybe: Callable[[int], bool], compute: Callable[[], frozenset[int]],
                 extra: frozenset[int] = frozenset()) -> None:
        self._maybe = maybe
        self._compute = compute
        self._extra = extra
        self._known: frozenset[int] | None = None

    @classmethod
    def none(cls) -> ForeignRows:
        return cls(lambda _row: False, frozenset)

    def __contains__(self, row: object) -> bool:
        if row in self._extra:
            return True
        if self._known is None:
            if not isinstance(row, int) or not self._maybe(row):
                return False
            self._known = self._compute()
        return row in self._known

    def __or__(self, rows: frozenset[int]) -> ForeignRows:
        return ForeignRows(self._maybe, self._compute, self._extra | rows)


class Provenance(Enum):
    """Where lines of the new file come from, according to the line alignment."""

    KEPT = "kept"  # the cited lines themselves, kept in place (perhaps shifted)
    OTHER = "other"  # other lines of the old file that read the same
    ADDED = "added"  # not explained by the old file: moved here, or new


@dataclass(frozen=True, slots=True)
class _Base:
    """What a file looked like at the citation's commit: ``old`` is None when the file
    did not exist then; ``cited`` is the cited range (0-based rows) when this file is
    the cited one (or its new name)."""

    old: FileText | None
    cited: tuple[int, int] | None


class Origins:
    """The history evidence, with its caches (a base of ``AnchorLocator``)."""

    def __init__(self) -> None:
        self._diffs: BoundedCache[tuple[str, str, Suffixes],
                                  tuple[candidates.ChangedFiles, dict[str, str]]] = (
            BoundedCache(_TREES_CACHE))
        self._old_trees: BoundedCache[str, Mapping[str, str] | None] = BoundedCache(
            _TREES_CACHE)
        self._origins: BoundedCache[tuple[str, str], tuple[int, ...] | None] = BoundedCache(
            _ORIGINS_CACHE)
        self._foreign: BoundedCache[tuple[str, str, int, int], frozenset[int]] = (
            BoundedCache(_ORIGINS_CACHE))
        self._candidate_lists: BoundedCache[tuple[str, str, str],
                                            tuple[list[str], frozenset[str]]] = (
            BoundedCache(_CANDIDATE_LISTS))

    def _origin_base(self, verifier: Verifier | None, citation: Citation) -> _Base | None:
        """The cited file as it was (for the cited file and its new name)."""
        if verifier is None:
            return None
        old = self._old_file(verifier, citation.blob_sha)
        if old is None:
            return None
        return _Base(old, (citation.line_start - 1, citation.line_end - 1))

    def _candidate_base(self, verifier: Verifier, citation: Citation, path: str,
                        renamed_from: Mapping[str, str]) -> _Base | None:
        """Another file as it was at the citation's commit, under its old name if git
        saw it renamed (a renamed file is not new code). None: cannot tell."""
        if not citation.sha:
            return None
        old_tree = self._old_tree(verifier, citation.sha)
        if old_tree is None:
            return None
        blob = old_tree.get(renamed_from.get(path, path))
        if blob is None:
            return _Base(None, None)  # the file is new: everything in it was added
        old = self._old_file(verifier, blob)
        return _Base(old, None) if old is not None else None

    def _provenance(self, base: _Base, file: FileText, place: Location,
                    *, fast: bool = True) -> Provenance | None:
        """Where the lines at ``place`` come from (None: the files are too big to
        align). Kept: most of them are the cited lines; other: all of them are other
        lines of the old file; added: otherwise (moved or new code).

        The cited lines still between the lines that surrounded them are kept without
        aligning the whole files (the common case: lines inserted or removed further
        up, which is also the cheap one)."""
        if base.old is None:
            return Provenance.ADDED
        if fast and base.cited is not None and same_context(base.old, base.cited, file,
                                                              place) \
                and occurs_once(base.old, base.cited):
            return Provenance.KEPT
        if base.cited is None and unheard_of(base.old, file, place):
            return Provenance.ADDED  # what the alignment would say, without aligning
        origins = self._origins_of(base.old, file)
        if origins is None:
            return None
        rows = [origins[i] for i in range(place.line_start - 1, min(place.line_end,
                                                                   len(origins)))
                if file.hashes[i] != BLANK]
        if not rows:
            return Provenance.ADDED
        if base.cited is not None:
            lo, hi = base.cited
            inside = sum(1 for r in rows if lo <= r <= hi)
            if 2 * inside >= len(rows):
                return Provenance.KEPT
            if inside:
                return Provenance.ADDED
        if all(r >= 0 for r in rows):
            return Provenance.OTHER
        return Provenance.ADDED

    def _foreign_rows(self, base: _Base | None, file: FileText) -> ForeignRows:
        """Rows of ``file`` (0-based) that the alignment keeps from old lines other than
        the cited ones: whatever they read, they are not what is left of the cited code.
        Asked row by row (``ForeignRows``): the files are aligned only when a row asked
        about could be one."""
        if base is None or base.old is None:
            return ForeignRows.none()
        lo, hi = base.cited if base.cited is not None else (-1, -1)
        old = base.old

        def compute() -> frozenset[int]:
            origins = self._origins_of(old, file)
            return frozenset() if origins is None else frozenset(
                i for i, row in enumerate(origins) if row >= 0 and not lo <= row <= hi)

        def maybe(row: int) -> bool:
            # the alignment keeps a non-blank row from an old row with the same line
            # only; none outside the cited rows: the row cannot be foreign
            line = file.hashes[row]
            if line == BLANK:
                return False
            rows = old.positions(line)
            return bool(rows) and (rows[0] < lo or rows[-1] > hi)

        return ForeignRows(maybe, lambda: self._foreign.get_or_compute(
            (old.blob_sha, file.blob_sha, lo, hi), compute))

    def _origins_of(self, old: FileText, new: FileText) -> tuple[int, ...] | None:
        return self._origins.get_or_compute((old.blob_sha, new.blob_sha),
                                            lambda: line_origins(old, new))

    def _old_file(self, verifier: Verifier, blob_sha: str | None) -> FileText | None:
        """A file at the citation's commit; None when it cannot exist any more (a
        rewritten history). A source that cannot be read raises: no verdict then."""
        if not blob_sha:
            return None
        try:
            return verifier.files.get(blob_sha)
        except NotFound:
            return None

    def _old_tree(self, verifier: Verifier, sha: str) -> Mapping[str, str] | None:
        def read() -> Mapping[str, str] | None:
            try:
                return verifier.source.tree(sha)
            except NotFound:  # a commit that is gone (rewritten history)
                return None

        return self._old_trees.get_or_compute(sha, read)

    def _diff(self, verifier: Verifier, citation: Citation, revision: str,
              tree: Mapping[str, str]) -> tuple[candidates.ChangedFiles,
                                                dict[str, str]] | None:
        """Files of the cited file's kind (``candidates.kind_suffixes``) added or changed
        since the citation's commit, and renames among them."""
        old_sha = citation.sha
        if not old_sha or old_sha == revision:
            return None
        suffixes = candidates.kind_suffixes(citation.path)

        def compute() -> tuple[candidates.ChangedFiles, dict[str, str]]:
            listed = _listed_changes(verifier, old_sha, revision, suffixes)
            if listed is not None:  # no need to list the old tree
                changed, known = [p for p in listed if p in tree], True
            else:
                old_tree = self._old_tree(verifier, old_sha)
                before = old_tree or {}
                changed = [p for p, blob in tree.items()
                           if before.get(p) != blob and has_suffix(p, suffixes)]
                known = old_tree is not None
            try:
                renames = verifier.source.renames(old_sha, revision, suffixes=suffixes) \
                    if known else []
            except NotFound:  # the old commit is gone (rewritten history): no renames
                renames = []
            return (candidates.ChangedFiles(changed),
                    {r.old: r.new for r in renames if r.new})

        return self._diffs.get_or_compute((old_sha, revision, suffixes), compute)

    def _candidates(self, verifier: Verifier, citation: Citation, revision: str,
                    tree: Mapping[str, str]) -> tuple[list[str], frozenset[str]]:
        """Files the code may have moved to, and which of them continue the cited file
        (``verify.candidates``): its successors first, then the files of its kind added
        or changed since the citation's commit, nearest paths first (the same for every
        citation of a file: kept per locator)."""
        diff = self._diff(verifier, citation, revision, tree)
        if diff is None or not citation.sha:
            return [], frozenset()
        changed, renamed = diff

        def compute() -> tuple[list[str], frozenset[str]]:
            first = candidates.successors(citation.path,
                                          self._old_file(verifier, citation.blob_sha),
                                          changed, tree, renamed, verifier.files)
            return changed.ordered(citation.path, first), frozenset(first)

        return self._candidate_lists.get_or_compute((citation.sha, revision, citation.path),
                                                    compute)


def _listed_changes(verifier: Verifier, old: str, new: str,
                    suffixes: Suffixes) -> Sequence[str] | None:
    """The files changed from ``old`` to ``new`` as the source lists them (GitHub's
    ``compare``, which the search asks for renames anyway), or None: then the old tree
    is listed and diffed, a request more on GitHub."""
    source = verifier.source
    if not isinstance(source, ListsChanges):
        return None
    try:
        return source.changed_paths(old, new, suffixes=suffixes)
    except NotFound:
        return None
