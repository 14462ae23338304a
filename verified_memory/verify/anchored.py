"""Ladder step 4: follow code by its tree-sitter anchor and across files; and the judge
of which copy of the cited lines is the cited code.

When the cited lines are not found intact in their file (steps 1-3), the code may have
moved to another file, been renamed with its file, been re-wrapped by a formatter, or
really changed. In that order this step looks for:

a. the anchor (same qualified name) in the same file: if the cited code is inside it,
   re-wrapped or not, ``relocated``; if the definition is there but differs, ``changed``
   with a similarity;
b. when the definition is gone from the file, or most of the cited code left it (a
   stub left behind), the files that continue the cited one (``verify/candidates.py``:
   git's rename, or, the file gone, changed files naming the same module with enough
   of its lines), where code found is the cited code and a definition of its name
   edited is ``changed``; then every other file of its kind added or changed since
   that commit: the same lines inside the same definition, else the anchor by name (a
   method, type or constant whose name is new in that file is the cited one edited);
c. nothing: the ladder goes on to step 5 (``changed`` if most of the lines survive at
   one place, else ``missing``).

Only files whose blob changed since the citation's commit are searched in (b): code that
moved must have landed in a file that changed. So the search costs nothing on a
repository where little moved, and each candidate is read once per run. A candidate is
parsed (at most once per run) only when its text can hold what is looked for: every
part of the anchor's name, or half of the old definition's lines; and first the old
definition's text (the only way to rank 0, which ends the search); candidates that can
only hold the cited code in an edited definition, or an edited copy, are parsed only
when no candidate gives rank 0 (an edited copy only while the definition is not still
in its own file). The history evidence (old files and trees, line alignments, diffs)
lives in ``verify/origins.py``, names in ``verify/naming.py``.

Lines that read the same are not always the same code: ``if err != nil { return err }``
occurs everywhere, and when the cited function is deleted a sibling's identical lines
may even slide into its place. So a copy of the cited lines counts as the cited code only
with evidence, cheapest first:

* provenance: the copy still sits between the lines that surrounded the cited lines,
  or a line alignment of the old and the new file (a diff on the line hashes) keeps
  it from the cited range: it is the cited code. A copy the alignment keeps from
  elsewhere in the old file (or that was already in another file, under its old name
  if renamed) is other code that was there all along and never counts;
* identity, for a copy the alignment does not explain (moved or added): it must lie
  in the anchor's definition. Ranked: the old definition line for line under the same
  qualified name (or the citation is the whole definition, header included); the same
  code under another qualifier or the same name around edited code; the same simple
  name (a method moved to another class); mostly the same lines (renamed). Across
  files the best rank wins, so a same-named copy in an unrelated module loses;
* the last resort, when the anchor's definition is gone (from its file, the files
  that continue it and every candidate, under any of its names) and nothing else was
  found: a copy in another definition of another file is the cited code inlined or
  moved there, if it is new there, that file is the only other one holding the lines
  at all, they were the cited file's only copy of them, and the definition around
  the copy is not a namesake the name rules turned down (``STRAY``).

The old file is read (once per run, like every file) only when step 1 did not decide;
parsing, the dearest part, only when provenance cannot decide. That holds for the anchor
itself in the bulk check (``derive_anchors``): a citation decided by hashes and
provenance never has its file parsed.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import replace

import xxhash

from verified_memory.anchors import treesitter
from verified_memory.anchors.hashing import BLANK, hash_line, line_hashes
from verified_memory.anchors.normalize import squeeze
from verified_memory.anchors.similarity import similarity, similarity_of_hashes
from verified_memory.cache import BoundedCache
from verified_memory.errors import NotFound, SourceUnavailable
from verified_memory.models import (
    Anchor,
    Citation,
    CitationCheck,
    Fingerprint,
    Location,
    Outcome,
)
from verified_memory.verify import naming
from verified_memory.verify.alignment import (
    all_in,
    occurs_once,
    resemblance,
    rewrapped,
    sibling_rows,
)
from verified_memory.verify.files import FileText
from verified_memory.verify.ladder import (
    CHANGED_THRESHOLD,
    Locator,
    Verifier,
    best_partial,
    find_runs,
    widen,
)
from verified_memory.verify.origins import Origins, Provenance

__all__ = ["AnchorLocator"]

#: A definition under another name is the anchor's, renamed, when at least this share
#: of the longer one's lines match in order (a renamed function keeps its body; a
#: sibling that shares a few lines of boilerplate does not reach it).
SAME_DEFINITION = 0.7
#: The bar for a plain function's namesake that is new in its file since the citation's
#: commit (the function moved there and was edited): the move is evidence of its own.
MOVED_NAMESAKE = 0.6
#: Stands in for a line that is other code (see ``_foreign_rows``) when scoring: it
#: matches no cited line, by hash or by fuzzy ratio.
_FOREIGN = "\x00"
_FOREIGN_HASH = hash_line(_FOREIGN)
#: The rank of a copy of the cited lines in another definition of another file, taken
#: only when the cited definition is gone and nothing better is found (``_stray``).
STRAY = 4
#: Candidate files asked for together (most searches end at one of the first few), and
#: how many are asked for ahead of the one being searched (git reads them meanwhile).
_PREFETCH = 16
_AHEAD = 8 * _PREFETCH
#: Derived anchors kept per locator (``derive_anchors``): a few hundred bytes each.
_ANCHORS_CACHE = 4096


class AnchorLocator(Locator, Origins):
    """Step 4 of the ladder, and the anchor-aware judge of steps 2, 3 and 5.

    ``derive_anchors``: the citations come fingerprinted without their anchor (the bulk
    check), and each one's anchor is derived from the cited file at the citation's
    commit the first time a step needs it. Most citations are decided by blob and line
    hashes alone, and the anchor, which needs a parse, is the dearest part of a
    fingerprint."""

    def __init__(self, index: treesitter.DefinitionIndex | None = None, *,
                 derive_anchors: bool = False) -> None:
        # not `index or ...`: an empty index is falsy (it has a length)
        self.index = index if index is not None else treesitter.default_index()
        self.derive_anchors = derive_anchors
        Origins.__init__(self)
        self._anchors: BoundedCache[tuple[str, str, int, int], Anchor | None] = BoundedCache(
            _ANCHORS_CACHE)
        # (blob, first, last) -> that range's lines squeezed, by hash (``_squeezed_lines``)
        self._squeezed: BoundedCache[tuple[str, int, int], dict[int, str]] = BoundedCache(
            _ANCHORS_CACHE)

    # ------------------------------------------------------------------ step 2

    def confirm(self, verifier: Verifier, citation: Citation, file: FileText) -> bool:
        """The cited lines read the same at the cited place: are they the cited code,
        or another copy of them that slid into its place (the cited function deleted,
        an identical sibling moving up)?

        Only a copy that was unique then and is unique now needs no more evidence;
        otherwise the line alignment decides, and when it cannot, the anchor's
        definition must contain the place. Parsing is the dearest of these, so it
        comes last."""
        hashes = citation.fingerprint.line_hashes
        unique = occurs_once(file, (citation.line_start - 1, citation.line_end - 1), hashes)
        if unique and _whole_definition(citation):
            return True  # a whole definition, header and all, found once: itself
        if _reads_are_requests(verifier) and self._held_intact(citation, citation.path, file,
                                                                 citation.location):
            return True  # what every path below says then, without reading the old file
        try:
            base = self._origin_base(verifier, citation)
        except SourceUnavailable:
            return True  # the old file is extra evidence; without it, step 2 as ever
        if base is None or base.old is None:
            return True
        if unique and base.cited is not None and occurs_once(base.old, base.cited, hashes):
            return True
        origin = self._provenance(base, file, citation.location)
        if origin is Provenance.KEPT:
            return True
        citation = self._anchored(verifier, citation)
        if unique and _whole_definition(citation):
            return True  # as above, once a derived anchor says so
        anchor = citation.fingerprint.anchor
        named = treesitter.find(self._named(citation.path, file, anchor.name),
                                anchor.name) if anchor else []
        if origin is Provenance.OTHER:
            # identical blocks align arbitrarily: the unchanged definition still holding
            # the place outweighs the alignment
            return any(d.text_hash == anchor.text_hash
                       and d.contains(citation.line_start, citation.line_end)
                       for d in named) if anchor else False
        if named:
            return any(d.contains(citation.line_start, citation.line_end) for d in named)
        return True

    # ------------------------------------------------------------------ step 3

    def choose(self, verifier: Verifier | None, citation: Citation, path: str,
               file: FileText, places: Sequence[Location]) -> tuple[Location | None, bool]:
        """Pick among the places where the cited lines occur in their own file (or in
        its new name).

        The line alignment with the old file comes first, being cheaper than parsing:
        lines it keeps from the cited range are the cited code (lines inserted above,
        a neighbour moved away). Otherwise the anchor decides: a copy inside the
        anchor's definition wins over any nearer one, and when that name is gone from
        the file, a copy counts only inside a definition that is recognisably the
        same one renamed. Lines the alignment takes for other old lines never count.
        ``ambiguous`` is reported whenever the lines occur more than once, even when
        the evidence settled which occurrence is the cited one."""
        ambiguous = len(places) > 1
        if (not ambiguous and verifier is not None and _reads_are_requests(verifier)
                and self._held_intact(citation, path, file, places[0])):
            # One copy, inside the anchor's definition as it was: every path below takes
            # it, and only a source that charges a request for the old file asks first.
            return places[0], False
        base = self._origin_base(verifier, citation) if verifier is not None else None
        judged = [(p, self._provenance(base, file, p) if base is not None else None)
                  for p in places]
        kept = [p for p, origin in judged if origin is Provenance.KEPT]
        if len(kept) > 1 and base is not None:
            # repeated code (overloads, table-like blocks) repeats its neighbours too:
            # only the full alignment tells which copy is the cited one
            kept = [p for p in kept
                    if self._provenance(base, file, p, fast=False) is Provenance.KEPT] or kept
        if kept:
            return _nearest(kept, citation.line_start), ambiguous
        citation = self._anchored(verifier, citation)
        anchor = citation.fingerprint.anchor
        fresh = [p for p, origin in judged if origin is not Provenance.OTHER]
        defs = self._defs(path, file) if anchor is not None else ()
        named = treesitter.find(defs, anchor.name) if anchor is not None else []
        if _whole_definition(citation) and fresh:
            # the definition, header and all, moved within the file; unless its name now
            # names a definition elsewhere there (edited in place, while another scope
            # still holds a copy that reads as it did: ``type identity<T> = T``)
            holding = [p for p in fresh if any(d.contains(p.line_start, p.line_end)
                                               for d in named)] if named else fresh
            if not holding:
                return None, False
            return _nearest(holding, citation.line_start), ambiguous
        intact = [p for p in places if any(
            d.text_hash == anchor.text_hash and d.contains(p.line_start, p.line_end)
            for d in named)] if anchor is not None else []
        if intact:
            # the anchor's definition, unchanged, holds a copy: that is the cited code,
            # whatever the alignment made of identical blocks (repeated impls, overloads)
            return self._nearest_to_anchor(citation, defs, intact), ambiguous
        if named:
            fresh = [p for p in fresh if any(d.contains(p.line_start, p.line_end)
                                             for d in named)]
        elif anchor is not None and verifier is not None:
            ranked = [(rank, p) for p in fresh
                      if (rank := self._identified(verifier, citation, file, defs, p,
                                                   renamed_ok=True)) is not None]
            best = min((rank for rank, _ in ranked), default=0)
            fresh = [p for rank, p in ranked if rank == best]
        elif anchor is not None and not _distinctive(citation):
            fresh = []  # one short common line, no evidence either way: not proof
        if not fresh:
            return None, False
        return self._nearest_to_anchor(citation, defs, fresh), ambiguous

    # ------------------------------------------------------------------ step 4

    def locate(self, verifier: Verifier, citation: Citation, revision: str,
               tree: Mapping[str, str], file: FileText | None) -> CitationCheck | None:
        here = None
        if file is not None:
            citation = self._anchored(verifier, citation)
            if _may_define(file, citation):  # else no definition of that name is left
                here = self._by_anchor(verifier, citation, citation.path, file,
                                       cited_file=True)
        if here is not None and (here.outcome is Outcome.RELOCATED
                                 or (here.similarity or 0.0) >= CHANGED_THRESHOLD):
            return here  # found, or edited in place: nothing left to follow
        diff = self._diff(verifier, citation, revision, tree)
        renamed_from = {new: old for old, new in diff[1].items()} if diff else {}
        # (rank, candidate order, check): the best relocation is the first of the best rank
        found: list[tuple[int, int, CitationCheck]] = []
        # (-similarity, candidate order, check): the best edited copy, the first of them
        edited: list[tuple[float, int, CitationCheck]] = []
        # candidates whose text shows they cannot hold the definition intact (no rank 0),
        # or not even the cited code (at most an edited copy): parsed only when no
        # candidate gives rank 0 (the code moved intact: the common case), the latter
        # only when no candidate holds the code at all
        later: list[tuple[int, str, FileText]] = []
        edits_only: list[tuple[int, str, FileText]] = []
        # copies of the cited lines in other definitions (rank STRAY), and how many other
        # files hold the lines at all (new there or not)
        strays: list[CitationCheck] = []
        holders = 0
        paths, successors = self._candidates(verifier, citation, revision, tree)
        # most candidates neither hold the cited lines nor name the anchor: told apart
        # by two look-ups (the same tests as ``find_runs`` and ``_may_define`` below)
        first_line = next((h for h in citation.fingerprint.line_hashes if h != BLANK), None)
        # and the longest cited line squeezed: a file whose squeezed text lacks it holds
        # no copy, told without splitting and hashing it (most files are passed over)
        needle = self._needle(verifier, citation)
        name_word: str | None = None  # the anchor's last word, once derived
        for order, path in enumerate(paths):
            if order % _PREFETCH == 0:  # each asked for once, together, ahead of need
                first = order + _AHEAD - _PREFETCH if order else 0
                verifier.files.prefetch(tree[p] for p in paths[first:order + _AHEAD])
            moved = verifier.files.get(tree[path])
            if moved is None:
                continue
            cited_file = path in successors  # the cited file, moved: its code is the code
            holds_line = first_line is not None and needle in moved.squeezed() \
                and bool(moved.positions(first_line))
            if not cited_file and not holds_line:
                if name_word is None:
                    citation = self._anchored(verifier, citation)
                    anchor = citation.fingerprint.anchor
                    name_word = "" if anchor is None else naming.last_word(anchor.name) or "*"
                if not name_word or (name_word != "*" and not moved.mentions(name_word)):
                    continue  # neither the lines nor the name: nothing to find here
            # the cited lines start with the first of them: none without it
            places = [Location(path, p.line_start, p.line_end)
                      for p in find_runs(moved, citation.fingerprint.line_hashes)] \
                if holds_line else []
            if places:
                holders += not cited_file
                if cited_file:
                    (place, ambiguous), rank = self.choose(verifier, citation, path, moved,
                                                           places), 0
                else:
                    citation = self._anchored(verifier, citation)
                    place, ambiguous, rank = self._choose_elsewhere(
                        verifier, citation, path, moved, places, here is None, renamed_from)
                if place is not None and rank == STRAY:
                    # in another definition: the last resort (see below), and this file
                    # is still searched by anchor
                    strays.append(CitationCheck(
                        citation, Outcome.RELOCATED, place, moved.blob_sha, 1.0, ambiguous,
                        step=4, detail=f"moved to {place}, into another definition"))
                elif place is not None:
                    check = CitationCheck(citation, Outcome.RELOCATED, place, moved.blob_sha,
                                          1.0, ambiguous, step=4, detail=f"moved to {place}")
                    if rank == 0:
                        return check  # in the same definition: nothing can be better
                    found.append((rank, order, check))
                    continue
            citation = self._anchored(verifier, citation)  # the rest is by anchor
            if not cited_file and not (_may_define(moved, citation)
                                       and self._worth_parsing(verifier, citation, moved)):
                continue  # parsing is dear: not for a file that cannot hold the name
            best = 0 if cited_file else self._best_possible(verifier, citation, moved)
            if best != 0:
                (later if best is not None else edits_only).append((order, path, moved))
                continue
            rank_check = self._named_in(verifier, citation, path, moved, cited_file,
                                        renamed_from)
            if rank_check is not None and rank_check[0] == 0:
                return rank_check[1]
            if cited_file and here is None and rank_check is not None \
                    and rank_check[0] is None:
                # the definition, edited, in the file that continues the cited one
                here = rank_check[1]
                if (here.similarity or 0.0) >= CHANGED_THRESHOLD:
                    return here  # edited in place, as above
                continue
            _note(rank_check, order, found, edited)
        for order, path, moved in later:
            _note(self._named_in(verifier, citation, path, moved, False, renamed_from),
                  order, found, edited)
        if not found and here is None:
            # an edited copy can only matter when nothing holds the code, and the
            # definition is not still in its file (or the file that continues it)
            for order, path, moved in edits_only:
                if self._may_hold_edited(verifier, citation, moved):
                    _note(self._named_in(verifier, citation, path, moved, False,
                                         renamed_from), order, found, edited)
        if not found and here is None and not edited and len(strays) == holders == 1 \
                and self._gone_from_home(verifier, citation, tree, file, successors):
            # the definition is gone, and its lines are in one other file only, new
            # there: inlined, or moved into another definition
            found = [(STRAY, 0, strays[0])]
        if found:
            rank, _, check = min(found, key=_first_two)
            if rank > 0 and here is None and file is not None:
                # a copy under another name, or in another scope: not the code when the
                # cited file still has its definition, renamed where it was
                renamed = self._renamed_in_place(verifier, citation, file)
                if renamed is not None:
                    return renamed
            return check
        # the definition still in its file, however little of it is left, is the code;
        # an edited copy elsewhere only when it is gone from there
        result = here or (min(edited, key=_first_two)[2] if edited else None)
        if result is None and file is None and successors:
            citation = self._anchored(verifier, citation)
            if citation.fingerprint.anchor is None:
                return self._edited_in_successor(verifier, citation, tree, paths, successors)
        return result

    def _edited_in_successor(self, verifier: Verifier, citation: Citation,
                             tree: Mapping[str, str], paths: Sequence[str],
                             successors: Container[str]) -> CitationCheck | None:
        """A citation with no anchor (a window over several definitions, a file no
        grammar covers) whose file moved, and whose lines were edited there: ``changed``
        where most of them survive in the files that continue it, as step 5 answers in
        the cited file itself (else a rename made an edit ``missing``)."""
        best: tuple[float, Location, str] | None = None
        for path in paths:
            moved = verifier.files.get(tree[path]) if path in successors else None
            if moved is None:
                continue
            foreign = self._foreign_rows(self._origin_base(verifier, citation), moved)
            partial = best_partial(citation, path, moved, foreign)
            if partial is not None and partial[1] >= CHANGED_THRESHOLD \
                    and (best is None or partial[1] > best[0]):
                best = (partial[1], partial[0], moved.blob_sha)
        if best is None:
            return None
        share, place, blob = best
        return CitationCheck(citation, Outcome.CHANGED, place, blob, round(share, 3), step=4,
                             detail=f"{share:.0%} of the cited lines survive at {place}, "
                                    f"in the file that continues {citation.path}")

    def _renamed_in_place(self, verifier: Verifier, citation: Citation,
                          file: FileText) -> CitationCheck | None:
        """The anchor's definition renamed in the cited file: a definition of the same
        kind under a name new in the file (a twin that was there all along is another
        definition) with mostly the old one's lines, or its body (a two-line method
        renamed keeps half its lines), the nearest to the old place; ``changed`` there."""
        anchor = citation.fingerprint.anchor
        old = self._old_definition(verifier, citation)
        old_file = self._old_file(verifier, citation.blob_sha)
        if anchor is None or old is None or old_file is None:
            return None
        before = {d.name for d in self._defs(citation.path, old_file)}
        lines = set(old.line_hashes) - {BLANK}
        alike = [d for d in self._defs(citation.path, file)
                 if d.name not in before and d.kind == old.kind  # a new name: not a twin
                 and 2 * len(lines & set(d.line_hashes)) >= len(lines)
                 and max(resemblance(old.line_hashes, d.line_hashes),  # or its body:
                         resemblance(old.line_hashes[1:], d.line_hashes[1:]))  # tiny ones
                 >= SAME_DEFINITION]
        if not alike:
            return None
        best = min(alike, key=lambda d: (abs(d.start_line - old.start_line), d.start_line))
        foreign = self._foreign_rows(self._origin_base(verifier, citation), file)
        place = _changed_place(citation, anchor, best, file, citation.path, foreign)
        score = self._similarity(verifier, citation, file, place, foreign)
        if score <= 0.0:
            return None
        return CitationCheck(citation, Outcome.CHANGED, place, file.blob_sha, round(score, 3),
                             step=4, detail=f"{anchor.name} renamed to {best.name} "
                                            f"({score:.0%} of the cited code survives at "
                                            f"{place})")

    def _named_in(self, verifier: Verifier, citation: Citation, path: str, file: FileText,
                  cited_file: bool, renamed_from: Mapping[str, str]
                  ) -> tuple[int | None, CitationCheck] | None:
        """The anchor's definition in a candidate file, by qualified name, else (not in
        the cited file's new name) by simple name: ``(rank, relocated)`` with the rank
        of ``_identified`` (0 only for the intact definition), ``(None, changed)`` for
        an edited copy, None for nothing."""
        for rank, simple_ok in ((0, False), (2, True)):
            named = self._by_anchor(verifier, citation, path, file, cited_file=cited_file,
                                    simple_ok=simple_ok, renamed_from=renamed_from)
            if named is None:
                continue
            if named.outcome is not Outcome.RELOCATED:
                return None, named
            if not self._intact(citation, path, file):
                rank += 1  # found in an edited definition: keep looking
            return rank, named
        return None

    def _squeezed_lines(self, verifier: Verifier, citation: Citation, first: int,
                        last: int) -> dict[int, str]:
        """Lines ``first..last`` (1-based) of the citation's old file, by hash, as
        ``normalize.squeeze`` gives them, the longest first: a file holds a line (the
        same hash: its text without whitespace) only if its squeezed text holds the
        squeezed line (commas dropped too), which is told without splitting and hashing
        that file. Empty when the old file cannot be read."""
        old = self._old_file(verifier, citation.blob_sha)
        if old is None:
            return {}

        def squeezed() -> dict[int, str]:
            assert old is not None
            lines = old.lines[max(first, 1) - 1:last]
            made = old.hashes_made()  # else only these lines are hashed
            hashes = made[max(first, 1) - 1:last] if made is not None else line_hashes(lines)
            # longest first: a scan for a longer text skips more of a file that lacks it
            return dict(sorted(((h, squeeze(line)) for h, line in zip(hashes, lines, strict=True)
                                if h != BLANK), key=lambda item: -len(item[1])))

        return self._squeezed.get_or_compute((old.blob_sha, first, last), squeezed)

    def _needle(self, verifier: Verifier, citation: Citation) -> str:
        """The longest of the cited lines squeezed (``_squeezed_lines``): a file whose
        squeezed text lacks it holds no copy of the cited lines. Empty, which every
        text holds, when the old file cannot be read."""
        lines = self._squeezed_lines(verifier, citation, citation.line_start,
                                     citation.line_end)
        wanted = {h for h in citation.fingerprint.line_hashes if h != BLANK}
        return max((lines[h] for h in wanted if h in lines), key=len, default="") \
            if wanted <= lines.keys() else ""  # else not the cited lines: no shortcut

    def _worth_parsing(self, verifier: Verifier, citation: Citation,
                       file: FileText) -> bool:
        """Whether a file other than the cited one (that does not hold the cited lines
        intact) can answer by anchor, judged on its text: it names every part of the
        anchor's qualified name (a definition of that name may be there), or holds half
        of the old definition's lines (the definition renamed, or moved to another
        class, with most of its lines). Otherwise every file that merely mentions a
        common last word (``type``, ``get``) would be parsed for each citation of code
        that is gone."""
        anchor = citation.fingerprint.anchor
        if anchor is None:
            return False
        if all(file.mentions(word) for word in naming.words(naming.generic_blind(anchor.name))):
            return True
        old = self._old_definition(verifier, citation)
        wanted = {h for h in (old.line_hashes if old is not None
                              else citation.fingerprint.line_hashes) if h != BLANK}
        if not wanted:
            return False
        # counted on the squeezed text first (it holds every line the file holds):
        # most files fall short there, and are never split and hashed
        lines = self._squeezed_lines(verifier, citation, *(
            (old.start_line, old.end_line) if old is not None
            else (citation.line_start, citation.line_end)))
        if wanted <= lines.keys() and file.hashes_made() is None:  # else look them up
            text = file.squeezed()
            spare = len(wanted) // 2  # lines that may be missing, at most
            for h, line in lines.items():
                if h in wanted and line not in text:
                    spare -= 1
                    if spare < 0:
                        return False
        return 2 * sum(1 for h in wanted if file.positions(h)) >= len(wanted)

    def _may_hold_edited(self, verifier: Verifier, citation: Citation,
                         file: FileText) -> bool:
        """Whether ``_named_in`` can find an edited copy of the anchor's definition in
        ``file``, another file that holds neither the old definition's text nor the
        cited text (so the answer there could only be ``changed``), judged on its text
        before parsing it. An edited copy elsewhere is a definition new there under
        the anchor's exact qualified name (``fresh`` in ``_by_anchor``: not for a plain
        function name, and every word of the name is a whole word of the text), or
        one with most of the old definition's lines (``_resembles_old``: at least
        ``SAME_DEFINITION`` of them must be in the file). Neither possible: no parse,
        the same answer."""
        anchor = citation.fingerprint.anchor
        if anchor is None:
            return False
        if not naming.names_a_role(anchor) and all(
                file.names(word) for word in naming.words(naming.generic_blind(anchor.name))):
            return True
        try:
            old = self._old_definition(verifier, citation)
        except SourceUnavailable:
            return True
        if old is None:
            return True  # nothing to resemble: any namesake passes ``_resembles_old``
        wanted = [h for h in old.line_hashes if h != BLANK]
        present = sum(1 for h in wanted if file.positions(h))
        # resemblance counts matched lines over the longer definition: at most these
        # (the lower bar: a namesake new in the file needs only that)
        return bool(wanted) and present / len(wanted) >= MOVED_NAMESAKE

    def _best_possible(self, verifier: Verifier, citation: Citation,
                       file: FileText) -> int | None:
        """The best rank ``_named_in`` could give in ``file``, judged on its text before
        parsing it: 0 if the old definition's text occurs in it, else 1 if the cited
        code's does, else None (at most an edited copy). Texts are compared without
        whitespace and commas, which ``text_hash`` ignores or may drop. 0 (no test) when
        the old file cannot be read."""
        anchor = citation.fingerprint.anchor
        try:
            old = self._old_file(verifier, citation.blob_sha)
            definition = self._old_definition(verifier, citation)
        except SourceUnavailable:
            return 0
        if anchor is None or old is None or definition is None \
                or definition.text_hash != anchor.text_hash:
            return 0
        text = file.squeezed()
        if squeeze("".join(old.lines[definition.start_line - 1 : definition.end_line])) in text:
            return 0
        if squeeze("".join(old.lines[citation.line_start - 1 : citation.line_end])) in text:
            return 1
        return None

    def _anchored(self, verifier: Verifier | None, citation: Citation) -> Citation:
        """The citation with its anchor: as fingerprinted, or with ``derive_anchors``,
        derived from the cited file at its commit (as ``fingerprint_citation`` would)."""
        if (not self.derive_anchors or verifier is None or not citation.blob_sha
                or citation.fingerprint.anchor is not None):
            return citation
        key = (citation.blob_sha, citation.path, citation.line_start, citation.line_end)

        def derive() -> Anchor | None:
            old = self._old_file(verifier, citation.blob_sha)
            return None if old is None else self.index.anchor_for(
                citation.path, old.text, citation.line_start, citation.line_end,
                key=old.blob_sha, hashes=old.hashes_made(), lines=old.lines,
                hasher=old.hasher)

        anchor = self._anchors.get_or_compute(key, derive)
        if anchor is None:
            return citation
        fingerprint = citation.fingerprint
        return replace(citation, fingerprint=Fingerprint(fingerprint.snippet_hash,
                                                         fingerprint.line_hashes, anchor))

    def _intact(self, citation: Citation, path: str, file: FileText) -> bool:
        """Whether ``file`` holds the anchor's definition unchanged (name and text)."""
        anchor = citation.fingerprint.anchor
        return anchor is not None and any(
            d.text_hash == anchor.text_hash
            for d in treesitter.find(self._named(path, file, anchor.name), anchor.name))

    def _choose_elsewhere(self, verifier: Verifier, citation: Citation, path: str,
                          file: FileText, places: Sequence[Location], gone: bool,
                          renamed_from: Mapping[str, str]) -> tuple[Location | None, bool, int]:
        """The cited lines in another file: only a copy that was not there at the
        citation's commit counts, and for anchored code only inside the same definition
        (by name, or, when it is gone from its own file, by content). Also returns the
        rank of the evidence (see ``_identified``): a copy in a definition of the same
        qualified name beats one in a definition that merely shares its simple name."""
        base = self._candidate_base(verifier, citation, path, renamed_from)
        fresh = [p for p in places
                 if base is None or self._provenance(base, file, p) is not Provenance.OTHER]
        if not fresh:
            return None, False, 0  # every copy was there all along: no parse needed
        anchor = citation.fingerprint.anchor
        if anchor is None:
            if not _distinctive(citation):
                return None, False, 0
            return _nearest(fresh, citation.line_start), len(places) > 1, 0
        defs = self._defs(path, file)
        ranked = [(rank, p) for p in fresh
                  if (rank := self._identified(verifier, citation, file, defs, p,
                                               renamed_ok=gone)) is not None]
        # under another name: not when that definition was in this file already (it
        # moved within it, so the line alignment could not tell it was there all along)
        ranked = [(rank, p) for rank, p in ranked if rank == 0
                  or (d := treesitter.innermost(defs, p.line_start, p.line_end)) is None
                  or self._new_name(verifier, citation, path, d.name, renamed_from,
                                    unknown=True)]
        if not ranked:
            if gone and len(places) == 1 and fresh and self._stray(verifier, citation) \
                    and not _namesake_holds(defs, anchor, fresh[0]):
                return fresh[0], False, STRAY
            return None, False, 0
        best = min(rank for rank, _ in ranked)
        chosen = self._nearest_to_anchor(citation, defs, [p for r, p in ranked if r == best])
        return chosen, len(places) > 1, best

    def _gone_from_home(self, verifier: Verifier, citation: Citation,
                        tree: Mapping[str, str], file: FileText | None,
                        successors: frozenset[str]) -> bool:
        """Whether neither the cited file nor a file that continues it still holds the
        cited lines, or a definition of the anchor's simple name (a function that
        became a plain function, ``Command.GenMarkdownTree`` -> ``GenMarkdownTree``,
        is still there: a copy of its lines elsewhere is a copy). Files that cannot
        name it are not parsed."""
        anchor = citation.fingerprint.anchor
        if anchor is None:
            return False
        simple = naming.simple(anchor.name)
        homes = [(path, verifier.files.get(tree[path])) for path in sorted(successors)
                 if path in tree]
        if file is not None:
            homes.append((citation.path, file))
        for path, home in homes:
            if home is None:
                continue
            if find_runs(home, citation.fingerprint.line_hashes):
                return False
            if _may_define(home, citation) and any(
                    naming.simple(d.name) == simple for d in self._named(path, home, simple)):
                return False
        return True

    def _stray(self, verifier: Verifier, citation: Citation) -> bool:
        """Whether a copy of the cited lines in another definition of another file may
        be the cited code, inlined or moved into it (``setPathValue``'s loop now in
        ``routeHTTP``), or kept by a definition renamed and edited past recognition:
        asked only when the cited definition is gone and the copy is new in that file
        and its only one. The cited lines must be code enough to tell (two non-blank
        lines at least) and must have been the cited file's only copy of them."""
        if not _distinctive(citation):
            return False
        try:
            old = self._old_file(verifier, citation.blob_sha)
        except (SourceUnavailable, NotFound):
            return False
        return old is not None and len(find_runs(old, citation.fingerprint.line_hashes)) == 1

    def _by_anchor(self, verifier: Verifier, citation: Citation, path: str,
                   file: FileText, *, cited_file: bool, simple_ok: bool = False,
                   renamed_from: Mapping[str, str] | None = None) -> CitationCheck | None:
        """The anchor's definition in ``file``: ``relocated`` if the cited code is in it
        (re-wrapped or not), else ``changed`` with a similarity. In a file other than
        the cited one (or its new name), with ``simple_ok``, a definition of the same
        simple name also counts (a method moved to another class); there, only when the
        cited code is there or mostly there, and not when it was there all along."""
        anchor = citation.fingerprint.anchor
        if anchor is None:
            return None
        defs = self._named(path, file, anchor.name)
        named = treesitter.find(defs, anchor.name)
        if not named:  # made private or public on the way: ``Cache`` -> ``_Cache``
            public = naming.public(anchor.name)
            tail = public.rsplit(".", 1)[-1]
            named = [d for d in defs if d.name.endswith(tail) and naming.public(d.name) == public]
        if not named and "<" in anchor.name:  # its impl's generic parameters renamed
            blind = naming.generic_blind(anchor.name)
            named = [d for d in defs if "<" in d.name and naming.generic_blind(d.name) == blind]
        if not named and simple_ok and not cited_file:
            simple = naming.simple(anchor.name)
            named = [d for d in defs if naming.simple(d.name) == simple]
        if not named:
            return None
        same = [d for d in named if d.text_hash == anchor.text_hash]
        pool = same or named
        old_start = citation.line_start - anchor.offset
        best = min(pool, key=lambda d: (abs(d.start_line - old_start), d.start_line))
        # a method, type or constant new in this file since the citation's commit is the
        # cited one moved (a plain function name, ``main``, ``New``, ``__getattr__``,
        # names a role as often as one thing: only when it resembles the old one)
        same_name = naming.generic_blind(best.name) == naming.generic_blind(anchor.name)
        new_here = not cited_file and not same and same_name \
            and self._new_name(verifier, citation, path, anchor.name, renamed_from or {})
        fresh = new_here and not naming.names_a_role(anchor)
        if not cited_file and not same and not fresh and not self._resembles_old(
                verifier, citation, best, MOVED_NAMESAKE if new_here else SAME_DEFINITION):
            return None  # a namesake elsewhere, not this definition moved and edited
        if not cited_file and not same_name \
                and not self._new_name(verifier, citation, path, best.name, renamed_from or {},
                                       unknown=True):
            return None  # another name that was in this file already: other code
        ambiguous = len(pool) > 1
        old = self._old_definition(verifier, citation) if best.text_hash != anchor.text_hash \
            else None
        siblings = sibling_rows(citation, old, best) if old is not None else frozenset()
        window = rewrapped(citation, file, best.start_line, best.end_line,
                           self._cited_text(verifier, citation))
        if window is not None:
            # with the blank lines the citation had at its edges, where they still are
            edges = widen(file, window[0] - 1, window[1] - 1, citation.fingerprint.line_hashes)
            place = Location(path, edges.line_start, edges.line_end)
            base = (self._origin_base(verifier, citation) if cited_file
                    else self._candidate_base(verifier, citation, path, renamed_from or {}))
            if base is not None and self._provenance(base, file, place) is Provenance.OTHER \
                    and not (cited_file and best.text_hash == anchor.text_hash):
                # other lines that were there all along, not the cited code (unless the
                # definition itself is intact here: identical blocks align arbitrarily)
                window = None
            elif all_in(siblings, file, place):
                window = None  # the definition's other copy of these lines
        if window is not None:
            return CitationCheck(citation, Outcome.RELOCATED, place, file.blob_sha, 1.0,
                                 ambiguous, step=4,
                                 detail=f"found in {best.name} at {place}")
        base = (self._origin_base(verifier, citation) if cited_file
                else self._candidate_base(verifier, citation, path, renamed_from or {}))
        foreign = self._foreign_rows(base, file) | siblings
        place = _changed_place(citation, anchor, best, file, path, foreign)
        score = self._similarity(verifier, citation, file, place, foreign)
        if not cited_file and not fresh and score < CHANGED_THRESHOLD:
            return None  # another definition that shares a name, not this one edited
        return CitationCheck(citation, Outcome.CHANGED, place, file.blob_sha, round(score, 3),
                             ambiguous, step=4,
                             detail=f"{anchor.name} changed ({score:.0%} of the cited code "
                                    f"survives at {place})")

    # ------------------------------------------------------------------ step 5

    def partial(self, verifier: Verifier, citation: Citation,
                file: FileText) -> tuple[Location, float] | None:
        """The best partial match, not counting lines the alignment says are other
        code that was already there (a sibling's boilerplate is not what is left)."""
        foreign = self._foreign_rows(self._origin_base(verifier, citation), file)
        return best_partial(citation, citation.path, file, foreign)

    # ------------------------------------------------------------------ evidence

    @staticmethod
    def _nearest_to_anchor(citation: Citation, defs: Sequence[treesitter.Definition],
                           places: Sequence[Location]) -> Location:
        """The place nearest to where the citation sits in its definition (the anchor's
        offset below the start of the definition around each place), else nearest to
        the old line: a definition that moved carries its lines along."""
        anchor = citation.fingerprint.anchor
        if anchor is None or not defs:
            return _nearest(places, citation.line_start)

        simple = naming.simple(anchor.name)

        def expected(place: Location) -> int:
            around = [d for d in defs if d.contains(place.line_start, place.line_end)
                      and naming.simple(d.name) == simple]
            if not around:
                return citation.line_start
            innermost = min(around, key=lambda d: d.end_line - d.start_line)
            return innermost.start_line + anchor.offset

        return min(places, key=lambda p: (abs(p.line_start - expected(p)), p.line_start))

    def _identified(self, verifier: Verifier, citation: Citation, file: FileText,
                    defs: Sequence[treesitter.Definition], place: Location,
                    *, renamed_ok: bool) -> int | None:
        """Whether ``place`` lies in the anchor's definition, as a rank (lower is
        stronger evidence) or None.

        0: the very definition, by content and name: the old definition is there line
        for line around it (or the citation is the whole definition), under the
        anchor's qualified name or where nothing parses (``file`` may not parse at all).
        1: the same code under another qualifier (a method moved to another class), or
        the anchor's qualified name around edited code (or, where nothing parses, most
        of the old definition's lines around it). 2: a definition of the anchor's
        simple name. For 1 and 2 by name, the definition must keep most of the old
        one's lines: a namesake is not the definition. 3, with ``renamed_ok``: a
        definition with mostly the old definition's lines (renamed)."""
        anchor = citation.fingerprint.anchor
        if anchor is None:
            return 0
        around = treesitter.innermost(defs, place.line_start, place.line_end)
        same_name = around is not None and around.name == anchor.name
        old = self._old_definition(verifier, citation)
        if _whole_definition(citation) or (old is not None and any(
                run.line_start <= place.line_start and place.line_end <= run.line_end
                for run in find_runs(file, old.line_hashes))):
            return 0 if around is None or same_name else 1
        if around is None:
            # nothing parses around it (a syntax error nearby): the old definition,
            # projected around the copy by the citation's offset in it, must be there
            # for the most part
            if old is None:
                return None
            start = place.line_start - (citation.line_start - old.start_line)
            region = file.hashes[max(start - 1, 0): max(start - 1, 0) + len(old.line_hashes)]
            return 1 if resemblance(old.line_hashes, region) >= SAME_DEFINITION else None
        if old is not None and all_in(sibling_rows(citation, old, around), file, place):
            return None  # the definition's other copy of these lines, not the cited one
        if same_name or naming.simple(around.name) == naming.simple(anchor.name):
            # a namesake (``main``, ``__getattr__``, ``String``) in another module is
            # not the definition moved there unless it is mostly the same lines
            if not self._resembles_old(verifier, citation, around):
                return None
            return 1 if same_name else 2
        if renamed_ok and old is not None and resemblance(
                old.line_hashes, around.line_hashes) >= SAME_DEFINITION:
            return 3
        return None

    def _new_name(self, verifier: Verifier, citation: Citation, path: str, name: str,
                  renamed_from: Mapping[str, str], *, unknown: bool = False) -> bool:
        """Whether ``name`` is new in ``path`` since the citation's commit (the file did
        not exist then, or did not define it, under its old name if git saw it renamed;
        ``unknown`` when that cannot be told). A definition of the anchor's name new there is
        the cited one, moved, however much it changed (it still exists: ``changed``); a
        namesake that was there all along is other code, under whatever generic
        parameters (``naming.generic_blind``)."""
        base = self._candidate_base(verifier, citation, path, renamed_from)
        if base is None:
            return unknown
        if base.old is None:
            return True
        before = self._named(renamed_from.get(path, path), base.old, name)
        if "<" not in name:
            return not treesitter.find(before, name)
        blind = naming.generic_blind(name)
        return not any(naming.generic_blind(d.name) == blind for d in before)

    def _resembles_old(self, verifier: Verifier, citation: Citation,
                       definition: treesitter.Definition,
                       bar: float = SAME_DEFINITION) -> bool:
        """Whether ``definition`` has mostly the lines the anchor's definition had
        (True when the old definition cannot be found: no evidence against). The bar
        is a renamed definition's: boilerplate alone (``warnings.warn(``, ``}``) lets
        two small namesakes share half their lines."""
        old = self._old_definition(verifier, citation)
        return old is None or resemblance(old.line_hashes, definition.line_hashes) >= bar

    def _old_definition(self, verifier: Verifier,
                        citation: Citation) -> treesitter.Definition | None:
        anchor = citation.fingerprint.anchor
        old = self._old_file(verifier, citation.blob_sha)
        if anchor is None or old is None:
            return None
        start = citation.line_start - anchor.offset
        # the anchor's own definition starts there (unless the anchor was made from
        # other text): found without listing the whole old file
        at = self.index.starting_at(citation.path, old.text, start, anchor.name,
                                    key=old.blob_sha, hashes=old.hashes_made(),
                                    lines=old.lines, hasher=old.hasher)
        if at is not None:
            return at
        named = treesitter.find(self._named(citation.path, old, anchor.name), anchor.name)
        if not named:
            return None
        return min(named, key=lambda d: abs(d.start_line - start))

    def _cited_text(self, verifier: Verifier, citation: Citation) -> bytes | None:
        """The cited lines as ``text_hash`` hashed them, from the citation's own blob
        (None when it cannot be read, or no longer hashes to the snippet hash)."""
        try:
            old = self._old_file(verifier, citation.blob_sha)
        except (SourceUnavailable, NotFound):
            return None
        if old is None or citation.line_end > len(old.lines):
            return None
        text = old.hasher().text(citation.line_start - 1, citation.line_end - 1)
        return text if xxhash.xxh3_64_hexdigest(text) == citation.snippet_hash else None

    def _similarity(self, verifier: Verifier, citation: Citation, file: FileText,
                    place: Location, foreign: Container[int] = frozenset()) -> float:
        """How much survives: line alignment, plus fuzzy credit for edited lines when
        the original text can still be read (the citation's own blob). ``foreign`` rows
        (other code that was already there) count as nothing."""
        new_lines = [_FOREIGN if i in foreign else file.lines[i]
                     for i in range(place.line_start - 1, place.line_end)]
        old_lines = None
        if citation.blob_sha:
            try:
                old = verifier.files.get(citation.blob_sha)
            except (SourceUnavailable, NotFound):
                old = None  # the score is a courtesy: the verdict does not depend on it
            if old is not None:
                old_lines = old.lines[citation.line_start - 1 : citation.line_end]
        if old_lines is not None and len(old_lines) == len(citation.fingerprint.line_hashes):
            return similarity(citation.fingerprint.line_hashes, new_lines, old_lines)
        return similarity_of_hashes(citation.fingerprint.line_hashes,
                                    [_FOREIGN_HASH if i in foreign else file.hashes[i]
                                     for i in range(place.line_start - 1, place.line_end)])

    # ------------------------------------------------------------------ candidates

    def _defs(self, path: str, file: FileText) -> tuple[treesitter.Definition, ...]:
        return self.index.definitions(path, file.text, key=file.blob_sha,
                                      hashes=file.hashes_made(), lines=file.lines,
                                      hasher=file.hasher)

    def _named(self, path: str, file: FileText,
               name: str) -> tuple[treesitter.Definition, ...]:
        """Definitions of ``file`` among them every one of the simple name of ``name``,
        private or not (``_Cache`` for ``Cache``), under any qualifier or generic
        parameters: a question about one name parses only the parts of a large file
        where the last word of that name is written (``DefinitionIndex.named``)."""
        word = naming.last_word(naming.generic_blind(name)).lstrip("_")
        return self.index.named(path, file.text, word, key=file.blob_sha,
                                hashes=file.hashes_made(), lines=file.lines,
                                hasher=file.hasher)

    def _held_intact(self, citation: Citation, path: str, file: FileText,
                     place: Location) -> bool:
        """Whether the citation's anchor (as fingerprinted, not derived) names a
        definition of ``file`` whose text is unchanged and holds ``place``: then those
        lines are the cited code whatever the history says."""
        anchor = citation.fingerprint.anchor
        return anchor is not None and any(
            d.text_hash == anchor.text_hash and d.contains(place.line_start, place.line_end)
            for d in treesitter.find(self._named(path, file, anchor.name), anchor.name))


def _changed_place(citation: Citation, anchor: Anchor, definition: treesitter.Definition,
                   file: FileText, path: str, foreign: Container[int]) -> Location:
    """Where the cited code is now inside its changed definition: all of it when the
    citation was the definition, else the window where most cited lines survive
    (lines may have been added above it), else the same offset as before."""
    lo, hi = definition.start_line, definition.end_line
    if _whole_definition(citation):
        return Location(path, lo, hi)
    hashes = citation.fingerprint.line_hashes
    votes: dict[int, int] = {}
    for offset, h in enumerate(hashes):
        if h != BLANK:
            for pos in file.positions(h):
                if lo - 1 <= pos < hi and pos not in foreign:
                    votes[pos - offset] = votes.get(pos - offset, 0) + 1
    start = lo - 1 + anchor.offset
    if votes:
        start = max(votes, key=lambda s: (votes[s], -abs(s - start)))
    first = min(max(start + 1, lo), hi)
    last = min(first + len(hashes) - 1, hi)
    return Location(path, first, last)


def _namesake_holds(defs: Sequence[treesitter.Definition], anchor: Anchor,
                    place: Location) -> bool:
    """Whether the definition around ``place`` has the anchor's simple name: then the
    name rules have judged it (a namesake that does not resemble the old definition is
    another definition, ``__getattr__`` hooks sharing their boilerplate), and its lines
    are not a stray copy of the cited code."""
    around = treesitter.innermost(defs, place.line_start, place.line_end)
    return around is not None and naming.simple(around.name) == naming.simple(anchor.name)


def _reads_are_requests(verifier: Verifier) -> bool:
    """Whether reading the old file costs a request against a rate limit (GitHub), not a
    local read: then parsing the new file, which the anchor needs, is the cheaper
    evidence, and is asked first. Locally the old file is read first (parsing is the
    dearer), as it always was, so local answers and their cost are unchanged."""
    return verifier.reads_are_requests


def _whole_definition(citation: Citation) -> bool:
    """Whether the citation is its anchor's whole definition (its header included, so
    the cited lines carry the definition's name with them)."""
    anchor = citation.fingerprint.anchor
    return anchor is not None and citation.snippet_hash == anchor.text_hash


def _may_define(file: FileText, citation: Citation) -> bool:
    """Whether ``file`` can hold the anchor's definition at all: the last word of its
    name must be in the text (a cheap test before parsing a candidate file)."""
    anchor = citation.fingerprint.anchor
    if anchor is None:
        return False
    word = naming.last_word(anchor.name)
    return not word or file.mentions(word)


def _note(rank_check: tuple[int | None, CitationCheck] | None, order: int,
          found: list[tuple[int, int, CitationCheck]],
          edited: list[tuple[float, int, CitationCheck]]) -> None:
    """File a candidate's answer (see ``AnchorLocator._named_in``) with its order."""
    if rank_check is None:
        return
    rank, check = rank_check
    if rank is not None:
        found.append((rank, order, check))
    else:
        edited.append((-(check.similarity or 0.0), order, check))


def _first_two(entry: tuple[float, int, CitationCheck]) -> tuple[float, int]:
    """Rank (or minus the similarity), then candidate order: the best, then the first."""
    return entry[0], entry[1]


def _distinctive(citation: Citation) -> bool:
    """Enough code that finding it elsewhere is evidence (not a lone ``}`` or ``pass``)."""
    return sum(1 for h in citation.fingerprint.line_hashes if h != BLANK) >= 2


def _nearest(places: Sequence[Location], near: int) -> Location:
    return min(places, key=lambda p: (abs(p.line_start - near), p.line_start))
