"""Line-level evidence for the anchored locator: which old lines a new file keeps
(a diff of the normalised line hashes), whether a place still sits among its old
neighbours, which copy of repeated lines in a definition is which, and where a
formatter's re-wrapped lines read as the cited ones.

Pure functions over ``FileText`` hashes and definitions: no source, no parsing, no
caches (``AnchorLocator`` keeps those)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

import xxhash

from verified_memory.anchors import treesitter
from verified_memory.anchors.hashing import BLANK, hash_line, line_hashes
from verified_memory.anchors.matcher import SequenceMatcher
from verified_memory.anchors.normalize import squeeze
from verified_memory.anchors.similarity import matched_lines
from verified_memory.models import Citation, Location
from verified_memory.verify.files import FileText
from verified_memory.verify.ladder import find_runs

__all__ = [
    "MAX_ALIGN_LINES",
    "all_in",
    "line_origins",
    "occurs_once",
    "resemblance",
    "rewrapped",
    "same_context",
    "sibling_rows",
    "unheard_of",
]

#: Files longer than this (in non-blank lines) are not aligned: no evidence, old rules.
MAX_ALIGN_LINES = 50_000

def line_origins(old: FileText, new: FileText) -> tuple[int, ...] | None:
    """For each line of ``new`` (0-based), the line of ``old`` it is kept from according
    to a diff of the normalised line hashes, or -1 (added, moved here, or blank).

    None when the files are too big to align here."""
    old_rows = [i for i, h in enumerate(old.hashes) if h != BLANK]
    new_rows = [i for i, h in enumerate(new.hashes) if h != BLANK]
    if max(len(old_rows), len(new_rows)) > MAX_ALIGN_LINES:
        return None
    matcher = SequenceMatcher(None, [old.hashes[i] for i in old_rows],
                              [new.hashes[i] for i in new_rows])
    origins = [-1] * len(new.hashes)
    for a, b, size in matcher.get_matching_blocks():
        for k in range(size):
            origins[new_rows[b + k]] = old_rows[a + k]
    return tuple(origins)


#: Non-blank lines compared on each side of a place by ``same_context``.
CONTEXT = 3


def unheard_of(old: FileText, new: FileText, place: Location) -> bool:
    """Whether a non-blank line at ``place`` in ``new`` occurs nowhere in ``old``: the
    line alignment cannot keep it from an old line then (unless the files are too big
    to align, which is left to the alignment's own answer)."""
    if max(len(old.hashes), len(new.hashes)) > MAX_ALIGN_LINES:
        return False
    hashes = new.hashes[place.line_start - 1 : place.line_end]
    return any(h != BLANK and not old.positions(h) for h in hashes)


def same_context(old: FileText, cited: tuple[int, int], new: FileText,
                  place: Location) -> bool:
    """Whether the non-blank lines just above and just below ``place`` in ``new`` are
    those just above and below the cited rows in ``old`` (up to ``CONTEXT`` a side;
    fewer only at the start or end of the file): the code stayed among its
    neighbours, as ``patch`` would say."""
    for old_side, new_side in (
            (_neighbours(old, cited[0] - 1, -1), _neighbours(new, place.line_start - 2, -1)),
            (_neighbours(old, cited[1] + 1, 1), _neighbours(new, place.line_end, 1))):
        if old_side != new_side:
            return False
    return True


def occurs_once(file: FileText, rows: tuple[int, int],
                hashes: Sequence[int] | None = None) -> bool:
    """Whether rows ``rows`` (0-based, inclusive) of ``file`` occur once in it: a twin
    block (with, often, the same neighbours: two functions sharing their loop body)
    defeats ``same_context``. ``hashes``: those of the rows as the caller has them (a
    citation's fingerprint), looked for instead.

    A file not hashed yet is first asked by its squeezed text: a run of the rows
    squeezes to their squeezed text, so when that text is found once (the rows
    themselves are one find), no other run can be there, and the file is not hashed
    whole for it (most old files a check reads, and the new ones whose cited code
    stayed where it was, are asked nothing else)."""
    lines = file.lines[rows[0]:rows[1] + 1]
    if file.hashes_made() is None and (hashes is None or tuple(hashes) == line_hashes(lines)) \
            and _found_once(file, lines):
        return True
    return len(find_runs(file, file.hashes[rows[0]:rows[1] + 1] if hashes is None
                         else hashes)) == 1


def _found_once(file: FileText, rows: Sequence[str]) -> bool:
    """Whether the squeezed text of ``rows`` occurs once in the file's, and the first
    non-blank row squeezes to something (else two runs could start at one place of the
    squeezed text: a row of commas alone squeezes to nothing)."""
    first = next((row for row in rows if row.strip()), None)
    if first is None or not squeeze(first):
        return False
    needle, text = squeeze("".join(rows)), file.squeezed()
    at = text.find(needle)
    return at >= 0 and text.find(needle, at + 1) < 0


def _neighbours(file: FileText, start: int, step: int) -> list[int]:
    """Up to ``CONTEXT`` non-blank line hashes of ``file`` from row ``start`` walking by
    ``step``: the file's own when made, else those rows' alone (an old file whose
    cited lines stayed among their neighbours is not hashed whole for it)."""
    made, lines = file.hashes_made(), file.lines
    found: list[int] = []
    i = start
    while 0 <= i < len(lines) and len(found) < CONTEXT:
        line = made[i] if made is not None else hash_line(lines[i])
        if line != BLANK:
            found.append(line)
        i += step
    return found


def rewrapped(citation: Citation, file: FileText, lo: int, hi: int,
              cited_text: bytes | None = None) -> tuple[int, int] | None:
    """A window inside lines ``lo..hi`` whose whitespace-free text equals the citation's
    (the snippet hash), found even when a formatter re-wrapped the lines; of several,
    the one nearest the anchor's offset.

    With ``cited_text`` (the text ``text_hash`` hashed when the citation was made, read
    from its own blob) the window is found by searching that text in the definition's
    text: linear in the definition. Without it, each start grows its window one line at
    a time, up to about twice the cited lines, hashing as it goes: the definition's
    length times the window's."""
    cited = sum(1 for h in citation.fingerprint.line_hashes if h != BLANK)
    shortest = max(1, cited // 3)
    hasher = file.hasher()
    parts, kept = hasher.parts, hasher.kept
    rows = [i for i in range(lo - 1, min(hi, len(file.lines))) if file.hashes[i] != BLANK]
    found = (_windows_of_text(rows, parts, kept, cited_text) if cited_text is not None
             else _windows_of_hash(rows, parts, kept, citation.snippet_hash,
                                   2 * len(citation.fingerprint.line_hashes) + 4))
    windows = [(rows[i] + 1, rows[j] + 1) for i, j in found if j - i + 1 >= shortest]
    if not windows:
        return None
    anchor_start = lo + (citation.fingerprint.anchor.offset
                         if citation.fingerprint.anchor else 0)
    return min(windows, key=lambda w: (abs(w[0] - anchor_start), w[0], w[1]))


def _windows_of_text(rows: Sequence[int], parts: Sequence[bytes], kept: Sequence[bytes],
                     text: bytes) -> list[tuple[int, int]]:
    """(first, last) indices into ``rows`` of every window whose text is ``text``.

    A window's text is its lines as ``TextHasher.kept`` has them, the last one as
    ``parts`` has it (it keeps its trailing comma), so every window's text starts with
    ``text`` less a final comma in the rows' joined ``kept`` text: those places are
    found with ``bytes.find``, then checked."""
    starts: dict[int, int] = {}
    ends: list[int] = []
    offset = 0
    for k, row in enumerate(rows):
        starts[offset] = k
        offset += len(kept[row])
        ends.append(offset)
    joined = b"".join(kept[row] for row in rows)
    core = text[:-1] if text.endswith(b",") else text
    found: list[tuple[int, int]] = []
    at = joined.find(core)
    while at >= 0 and core:
        first = starts.get(at)
        if first is not None:
            last = bisect_left(ends, at + len(core))
            if last < len(rows) and joined[at:ends[last] - len(kept[rows[last]])] \
                    + parts[rows[last]] == text:
                found.append((first, last))
        at = joined.find(core, at + 1)
    return found


def _windows_of_hash(rows: Sequence[int], parts: Sequence[bytes], kept: Sequence[bytes],
                     want: str, longest: int) -> list[tuple[int, int]]:
    """(first, last) indices into ``rows`` of every window of at most ``longest`` lines
    whose text hashes to ``want``, the shortest one from each start."""
    found: list[tuple[int, int]] = []
    for first in range(len(rows)):
        running = xxhash.xxh3_64()
        for last in range(first, min(len(rows), first + longest)):
            candidate = running.copy()
            candidate.update(parts[rows[last]])
            if candidate.hexdigest() == want:
                found.append((first, last))
                break
            running.update(kept[rows[last]])
    return found


def sibling_rows(citation: Citation, old: treesitter.Definition,
                  new: treesitter.Definition) -> frozenset[int]:
    """Rows of the file (0-based) inside ``new``, the old definition ``old`` moved or
    edited, that aligning the two definitions keeps from rows of ``old`` other than the
    cited ones; empty unless ``old`` repeated the cited lines (``keys.push(Key { key,
    index })`` after each kind of key), the only case where a surviving copy can be
    mistaken for the cited one when that one was edited."""
    lo, hi = citation.line_start - old.start_line, citation.line_end - old.start_line
    cited = old.line_hashes[lo:hi + 1]
    if len(cited) != hi - lo + 1 or _occurrences(old.line_hashes, cited) < 2:
        return frozenset()
    rows: set[int] = set()
    for a, b, size in SequenceMatcher(None, old.line_hashes, new.line_hashes,
                                      autojunk=False).get_matching_blocks():
        rows.update(new.start_line - 1 + b + k for k in range(size)
                    if not lo <= a + k <= hi)
    return frozenset(rows)


def all_in(siblings: frozenset[int], file: FileText, place: Location) -> bool:
    """Whether every non-blank line at ``place`` is one of ``siblings``."""
    rows = [i for i in range(place.line_start - 1, place.line_end)
            if file.hashes[i] != BLANK]
    return bool(rows) and all(i in siblings for i in rows)


def _occurrences(hashes: Sequence[int], run: Sequence[int]) -> int:
    first, n = run[0], len(run)
    return sum(1 for i, h in enumerate(hashes)
               if h == first and tuple(hashes[i:i + n]) == tuple(run))


def resemblance(old: Sequence[int], new: Sequence[int]) -> float:
    """Share of the longer definition's non-blank lines that match the other's in order."""
    a = [h for h in old if h != BLANK]
    b = [h for h in new if h != BLANK]
    if not a or not b:
        return 0.0
    return matched_lines(a, b) / max(len(a), len(b))
