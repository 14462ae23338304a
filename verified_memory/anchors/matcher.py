"""The one place that chooses the ``SequenceMatcher`` used to align line hashes.

cydifflib is a Cython port of difflib's ``SequenceMatcher`` (same algorithm, same
matching blocks and opcodes, junk and "popular element" heuristics included) and about
twice as fast on the long alignments of a bulk check. Its wheels cover CPython 3.11-3.13
only, so where it is not installed difflib's own class is used: the answers are the
same either way (tests/test_matcher.py holds the two equal), only slower.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # cydifflib ships no type information; its class mirrors difflib's.
    from difflib import SequenceMatcher
else:
    try:
        from cydifflib import SequenceMatcher
    except ImportError:  # pragma: no cover - exercised where no cydifflib wheel exists
        from difflib import SequenceMatcher

__all__ = ["SequenceMatcher"]
