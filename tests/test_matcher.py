"""The alignment's ``SequenceMatcher``: cydifflib's Cython port where it is installed,
held to give exactly difflib's matching blocks and opcodes on line-hash sequences of the
shapes the verifier aligns (so which one is used can never change an answer)."""

from __future__ import annotations

import difflib
import importlib
import random
import sys

import pytest

from verified_memory.anchors import matcher, similarity
from verified_memory.verify import alignment


def _cydifflib_class() -> type | None:
    try:
        return importlib.import_module("cydifflib").SequenceMatcher  # type: ignore[no-any-return]
    except ImportError:
        return None


def test_cydifflib_is_installed_where_it_is_a_dependency() -> None:
    # pyproject.toml requires it below Python 3.14 (no wheels above yet).
    if sys.version_info < (3, 14):
        assert _cydifflib_class() is not None


def test_alignment_and_similarity_use_the_fast_matcher_when_present() -> None:
    expected = _cydifflib_class() or difflib.SequenceMatcher
    assert matcher.SequenceMatcher is expected
    assert alignment.SequenceMatcher is expected
    assert similarity.SequenceMatcher is expected


def _hashes(rng: random.Random, n: int, alphabet: int) -> list[int]:
    """``n`` 64-bit "line hashes" drawn from ``alphabet`` distinct lines, a few of them
    (``}``, ``return``, ``else:``) far more common than the rest, as in real code."""
    lines = [rng.getrandbits(64) for _ in range(alphabet)]
    popular = lines[:3]
    return [rng.choice(popular) if rng.random() < 0.15 else rng.choice(lines)
            for _ in range(n)]


def _edited(rng: random.Random, old: list[int], alphabet: int) -> list[int]:
    """``old`` after a random edit script: lines dropped, added, replaced, blocks moved."""
    new = list(old)
    pool = [*set(old), *(rng.getrandbits(64) for _ in range(alphabet))]
    for _ in range(rng.randint(0, 12)):
        kind = rng.random()
        at = rng.randint(0, len(new))
        if kind < 0.3 and new:
            del new[at:at + rng.randint(1, 8)]
        elif kind < 0.6:
            new[at:at] = [rng.choice(pool) for _ in range(rng.randint(1, 8))]
        elif kind < 0.8 and new:
            new[at:at + rng.randint(1, 4)] = [rng.choice(pool) for _ in range(rng.randint(1, 4))]
        elif new:
            size = rng.randint(1, 20)
            block, new[at:at + size] = new[at:at + size], []
            to = rng.randint(0, len(new))
            new[to:to] = block
    return new


@pytest.mark.parametrize("autojunk", [True, False])
def test_matching_blocks_and_opcodes_equal_difflibs(autojunk: bool) -> None:
    rng = random.Random(20260513 + autojunk)
    popular_dropped = 0
    for case in range(1000):
        # Sizes on both sides of 200, where difflib's autojunk starts discarding lines
        # that make up more than 1% of the second sequence.
        n = rng.choice([0, 1, 2, 5, 30, 150, 199, 200, 201, 260, 600])
        alphabet = rng.choice([2, 4, 20, 200, 2000])
        old = _hashes(rng, n, alphabet)
        new = _edited(rng, old, alphabet) if rng.random() < 0.8 else _hashes(rng, n, alphabet)
        ours = matcher.SequenceMatcher(None, old, new, autojunk=autojunk)
        theirs = difflib.SequenceMatcher(None, old, new, autojunk=autojunk)
        assert ours.get_matching_blocks() == theirs.get_matching_blocks(), case
        assert ours.get_opcodes() == theirs.get_opcodes(), case
        popular_dropped += bool(theirs.bpopular)
    # The cases did exercise autojunk: lines were dropped as popular when it was on.
    assert (popular_dropped > 50) if autojunk else popular_dropped == 0
