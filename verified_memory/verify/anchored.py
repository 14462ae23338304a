"""Ladder step 4: follow code by its tree-sitter anchor and across files.

When the cited lines are not found intact in their file (steps 1-3), the code may have
moved to another file, been renamed with its file, been re-wrapped by a formatter, or
really changed. In that order this step looks for:

a. the anchor (same qualified name) in the same file: if the cited code is inside it,
   re-wrapped or not, ``relocated``; if the definition is there but differs, ``changed``
   with a similarity;
b. the file's new name (git rename detection between the citation's commit and now),
   then every file added or changed since that commit: the same lines, else the anchor;
c. nothing: the ladder goes on to step 5 (``missing``).

Only files whose blob changed since the citation's commit are searched in (b): code that
moved must have landed in a file that changed. So the search costs nothing on a
repository where little moved, and each candidate is read and parsed once per run.

The same anchors also arbitrate step 3: when the cited lines occur more than once in a
file, the occurrence inside the anchor's definition wins; a lone short snippet found
outside it, when the definition itself is gone, is not taken as the code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from verified_memory.anchors import treesitter
from verified_memory.anchors.hashing import BLANK
from verified_memory.anchors.normalize import normalize_line
from verified_memory.anchors.similarity import similarity, similarity_of_hashes
from verified_memory.errors import NotFound, SourceUnavailable
from verified_memory.models import Citation, CitationCheck, Location, Outcome
from verified_memory.verify.files import FileText
from verified_memory.verify.ladder import Locator, Verifier, find_runs

__all__ = ["AnchorLocator"]

#: Candidate files searched for a moved citation, at most (nearest paths first).
MAX_CANDIDATES = 400


class AnchorLocator(Locator):
    """Step 4 of the ladder, and the anchor-aware choice between step-3 matches."""

    def __init__(self, index: treesitter.DefinitionIndex | None = None) -> None:
        self.index = index or treesitter.default_index()
        self._changed: dict[tuple[str, str], list[str]] = {}
        self._renamed: dict[tuple[str, str], dict[str, str]] = {}

    # ------------------------------------------------------------------ step 3

    def choose(self, citation: Citation, path: str, file: FileText,
               places: Sequence[Location]) -> tuple[Location | None, bool]:
        """Pick among the places where the cited lines occur in ``file``."""
        anchor = citation.fingerprint.anchor
        if len(places) == 1 and (anchor is None or _distinctive(citation)):
            return places[0], False
        defs = self._defs(path, file) if anchor is not None else ()
        named = treesitter.find(defs, anchor.name) if anchor is not None else []
        if named:
            inside = [p for p in places if any(d.contains(p.line_start, p.line_end)
                                               for d in named)]
            if inside:
                return _nearest(inside, citation.line_start), len(inside) > 1
            return None, False  # the definition is here but the lines left it: step 4
        if not _distinctive(citation) and (anchor is not None or len(places) > 1):
            return None, False  # one short common line, its definition gone: not proof
        return _nearest(places, citation.line_start), len(places) > 1

    # ------------------------------------------------------------------ step 4

    def locate(self, verifier: Verifier, citation: Citation, revision: str,
               tree: Mapping[str, str], file: FileText | None) -> CitationCheck | None:
        if file is not None:
            found = self._by_anchor(verifier, citation, citation.path, file)
            if found is not None:
                return found
        for path in self._candidates(verifier, citation, revision, tree):
            moved = verifier.files.get(tree[path])
            if moved is None:
                continue
            places = find_runs(moved, citation.fingerprint.line_hashes)
            if places:
                place, ambiguous = self.choose(citation, path, moved,
                                               [Location(path, p.line_start, p.line_end)
                                                for p in places])
                if place is not None:
                    return CitationCheck(citation, Outcome.RELOCATED, place, tree[path], 1.0,
                                         ambiguous, step=4, detail=f"moved to {place}")
            found = self._by_anchor(verifier, citation, path, moved)
            if found is not None:
                return found
        return None

    def _by_anchor(self, verifier: Verifier, citation: Citation, path: str,
                   file: FileText) -> CitationCheck | None:
        anchor = citation.fingerprint.anchor
        if anchor is None or treesitter.language_for(path) != (anchor.language or
                                                                treesitter.language_for(path)):
            return None
        named = treesitter.find(self._defs(path, file), anchor.name)
        if not named:
            return None
        same = [d for d in named if d.text_hash == anchor.text_hash]
        pool = same or named
        old_start = citation.line_start - anchor.offset
        best = min(pool, key=lambda d: (abs(d.start_line - old_start), d.start_line))
        ambiguous = len(pool) > 1
        window = _rewrapped(citation, file, best.start_line, best.end_line)
        if window is not None:
            place = Location(path, *window)
            return CitationCheck(citation, Outcome.RELOCATED, place, file.blob_sha, 1.0,
                                 ambiguous, step=4,
                                 detail=f"found in {anchor.name} at {place}")
        if citation.snippet_hash == anchor.text_hash:  # the citation was the definition
            place = Location(path, best.start_line, best.end_line)
        else:
            start = min(best.start_line + anchor.offset, best.end_line)
            end = min(start + len(citation.fingerprint.line_hashes) - 1, best.end_line)
            place = Location(path, start, end)
        score = self._similarity(verifier, citation, file, place)
        return CitationCheck(citation, Outcome.CHANGED, place, file.blob_sha, round(score, 3),
                             ambiguous, step=4,
                             detail=f"{anchor.name} changed ({score:.0%} of the cited code "
                                    f"survives at {place})")

    def _similarity(self, verifier: Verifier, citation: Citation, file: FileText,
                    place: Location) -> float:
        """How much survives: line alignment, plus fuzzy credit for edited lines when
        the original text can still be read (the citation's own blob)."""
        new_lines = file.lines[place.line_start - 1 : place.line_end]
        old_lines = None
        if citation.blob_sha:
            try:
                old = verifier.files.get(citation.blob_sha)
            except SourceUnavailable:
                old = None
            if old is not None:
                old_lines = old.lines[citation.line_start - 1 : citation.line_end]
        if old_lines is not None and len(old_lines) == len(citation.fingerprint.line_hashes):
            return similarity(citation.fingerprint.line_hashes, new_lines, old_lines)
        return similarity_of_hashes(citation.fingerprint.line_hashes,
                                    file.hashes[place.line_start - 1 : place.line_end])

    # ------------------------------------------------------------------ helpers

    def _defs(self, path: str, file: FileText) -> tuple[treesitter.Definition, ...]:
        return self.index.definitions(path, file.text, key=file.blob_sha)

    def _candidates(self, verifier: Verifier, citation: Citation, revision: str,
                    tree: Mapping[str, str]) -> list[str]:
        """Files the code may have moved to: the file's new name first, then files added
        or changed since the citation's commit, nearest paths first."""
        old_sha = citation.sha
        if not old_sha or old_sha == revision:
            return []
        key = (old_sha, revision)
        if key not in self._changed:
            try:
                old_tree = verifier.source.tree(old_sha)
                renames = verifier.source.renames(old_sha, revision)
            except NotFound:  # the old commit is gone (rewritten history): no move to follow
                old_tree, renames = {}, []
            self._changed[key] = [p for p, blob in tree.items() if old_tree.get(p) != blob]
            self._renamed[key] = {r.old: r.new for r in renames if r.new}
        first = self._renamed[key].get(citation.path)
        language = treesitter.language_for(citation.path)
        stem = citation.path.rsplit("/", 1)[0] if "/" in citation.path else ""
        ordered = sorted(
            (p for p in self._changed[key] if p != citation.path and p != first),
            key=lambda p: (treesitter.language_for(p) != language,
                           not p.startswith(stem), p))
        out = ([first] if first and first in tree else []) + ordered
        return out[:MAX_CANDIDATES]


def _rewrapped(citation: Citation, file: FileText, lo: int, hi: int) -> tuple[int, int] | None:
    """A window inside lines ``lo..hi`` whose whitespace-free text equals the citation's
    (the snippet hash), found even when a formatter re-wrapped the lines."""
    from verified_memory.anchors.hashing import text_hash

    cited = len([h for h in citation.fingerprint.line_hashes if h != BLANK])
    flat = [normalize_line(line) for line in file.lines[lo - 1 : hi]]
    want = citation.snippet_hash
    max_len = 2 * len(citation.fingerprint.line_hashes) + 4
    anchor_start = lo + (citation.fingerprint.anchor.offset
                         if citation.fingerprint.anchor else 0)
    starts = sorted(range(len(flat)), key=lambda i: abs(lo + i - anchor_start))
    for i in starts:
        if not flat[i]:
            continue
        for j in range(i + max(1, cited // 3) - 1, min(len(flat), i + max_len)):
            if not flat[j]:
                continue
            if text_hash(flat[i:j + 1]) == want:
                return lo + i, lo + j
    return None


def _distinctive(citation: Citation) -> bool:
    """Enough code that finding it elsewhere is evidence (not a lone ``}`` or ``pass``)."""
    return sum(1 for h in citation.fingerprint.line_hashes if h != BLANK) >= 2


def _nearest(places: Sequence[Location], near: int) -> Location:
    return min(places, key=lambda p: (abs(p.line_start - near), p.line_start))
