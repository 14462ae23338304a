"""Fingerprint hashes (xxhash, xxh3 64-bit): fast, stable across platforms and runs."""

from __future__ import annotations

from collections.abc import Sequence

import xxhash

from verified_memory.anchors.normalize import normalize_line

__all__ = ["BLANK", "hash_line", "line_hashes", "snippet_hash"]

#: The hash of a blank line; blank lines are skipped when matching.
BLANK = 0


def hash_line(line: str) -> int:
    normalized = normalize_line(line)
    if not normalized:
        return BLANK
    return xxhash.xxh3_64_intdigest(normalized.encode("utf-8")) or 1


def line_hashes(lines: Sequence[str]) -> tuple[int, ...]:
    return tuple(hash_line(line) for line in lines)


def snippet_hash(hashes: Sequence[int]) -> str:
    """Hash of the non-blank normalised lines, in order (16 hex digits)."""
    h = xxhash.xxh3_64()
    for value in hashes:
        if value != BLANK:
            h.update(value.to_bytes(8, "little"))
    return h.hexdigest()
