"""Fingerprint a cited range: the hashes that let us recognise the code again."""

from __future__ import annotations

from collections.abc import Sequence

from verified_memory.anchors.hashing import BLANK, line_hashes, text_hash
from verified_memory.models import Anchor, Fingerprint

__all__ = ["fingerprint_lines"]


def fingerprint_lines(
    lines: Sequence[str], line_start: int, line_end: int, anchor: Anchor | None = None,
    hashes: Sequence[int] | None = None,
) -> Fingerprint:
    """The fingerprint of ``lines[line_start-1:line_end]`` (1-indexed, inclusive).

    ``hashes``: ``line_hashes(lines)`` when the caller has them already (a cached file),
    so the cited lines are not hashed again."""
    cited = lines[line_start - 1 : line_end]
    cited_hashes = (tuple(hashes[line_start - 1 : line_end]) if hashes is not None
                    else line_hashes(cited))
    return Fingerprint(snippet_hash=text_hash(cited), line_hashes=cited_hashes, anchor=anchor)


def has_code(fingerprint: Fingerprint) -> bool:
    """A citation of blank lines only cites nothing that could be checked."""
    return any(h != BLANK for h in fingerprint.line_hashes)
