"""How much of a cited range survives in a candidate range (0..1).

When the anchor's definition is found but its text changed, the verifier reports how
much of the cited code is still there ("changed, 80% similar at x.py:10-30"), and a
threshold on the same score can accept a candidate window during relocation.

The score is the share of the cited (old) non-blank lines that survive, in order, in the
candidate: lines are aligned by their normalised hashes (difflib's ``SequenceMatcher``
algorithm, see ``anchors.matcher``, without its "popular element" heuristic, which would
otherwise discard lines such as ``}`` in long inputs). Blank lines are ignored on both
sides, and since hashes are of normalised lines, whitespace-only edits do not count. Lines
the candidate adds are not held against it: a five-line citation inside a function that
grew is still fully there.
Callers that compare whole ranges of different sizes should bear that in mind.

Stored citations keep hashes, not text, so :func:`similarity_of_hashes` is the
alignment alone. When the old text is at hand, :func:`similarity` also gives partial
credit to edited lines (``rapidfuzz.fuzz.ratio`` of the normalised text), so a renamed
variable on one line of ten scores about 0.97 rather than 0.9.
"""

from __future__ import annotations

from collections.abc import Sequence

from rapidfuzz import fuzz

from verified_memory.anchors.hashing import BLANK, hash_line
from verified_memory.anchors.matcher import SequenceMatcher
from verified_memory.anchors.normalize import normalize_line

__all__ = ["PARTIAL_MIN", "matched_lines", "similarity", "similarity_of_hashes"]

#: A changed line earns partial credit only when it is recognisably the same line:
#: ``fuzz.ratio`` of its normalised text against the replacing line, on a 0..1 scale.
#: Unrelated code lines typically score 0.2-0.5 against each other.
PARTIAL_MIN = 0.6

# Above this many line pairs in one replaced block, pair lines in order instead of
# searching for each old line's best match (keeps the cost linear on big rewrites).
_BEST_MATCH_PAIRS = 400


def similarity_of_hashes(old_hashes: Sequence[int], new_hashes: Sequence[int]) -> float:
    """Share of the old non-blank lines found, in order, among the new ones (0..1).

    Equal normalised code scores 1.0. With no non-blank old lines, 1.0 when the new side
    is blank too and 0.0 otherwise.
    """
    old = [h for h in old_hashes if h != BLANK]
    new = [h for h in new_hashes if h != BLANK]
    if not old:
        return 0.0 if new else 1.0
    if old == new:
        return 1.0
    if not new or set(old).isdisjoint(new):
        return 0.0
    return matched_lines(old, new) / len(old)


def matched_lines(old: Sequence[int], new: Sequence[int]) -> int:
    """How many of ``old``'s line hashes a diff keeps, in order, in ``new``."""
    matcher = SequenceMatcher(None, old, new, autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks())


def similarity(
    old_hashes: Sequence[int],
    new_lines: Sequence[str],
    old_lines: Sequence[str] | None = None,
) -> float:
    """Share of the cited code (``old_hashes``) that survives in ``new_lines`` (0..1).

    Lines aligned by hash count fully. When ``old_lines`` (the cited text, one line per
    hash) is given, each old line in a replaced block also earns its best fuzzy ratio
    against the lines that replaced it, if that ratio is at least :data:`PARTIAL_MIN`.
    ``old_lines`` of a different length than ``old_hashes`` is ignored.
    """
    new_all = [(hash_line(line), line) for line in new_lines]
    new = [h for h, _ in new_all if h != BLANK]
    if old_lines is None or len(old_lines) != len(old_hashes):
        return similarity_of_hashes(old_hashes, new)
    old_pairs = [(h, line) for h, line in zip(old_hashes, old_lines, strict=True) if h != BLANK]
    old = [h for h, _ in old_pairs]
    if not old:
        return 0.0 if new else 1.0
    if old == new:
        return 1.0
    if not new:
        return 0.0
    new_text = [normalize_line(line) for h, line in new_all if h != BLANK]
    old_text = [normalize_line(line) for _, line in old_pairs]
    matcher = SequenceMatcher(None, old, new, autojunk=False)
    score = 0.0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            score += i2 - i1
        elif tag == "replace":
            score += _partial(old_text[i1:i2], new_text[j1:j2])
    return min(1.0, score / len(old))


def _partial(old: Sequence[str], new: Sequence[str]) -> float:
    """Credit for old lines replaced by ``new``: each old line's best ratio (if close)."""
    credit = 0.0
    if len(old) * len(new) <= _BEST_MATCH_PAIRS:
        for line in old:
            best = max(fuzz.ratio(line, other) for other in new) / 100.0
            if best >= PARTIAL_MIN:
                credit += best
    else:
        for line, other in zip(old, new, strict=False):
            ratio = fuzz.ratio(line, other) / 100.0
            if ratio >= PARTIAL_MIN:
                credit += ratio
    return credit
