"""Fingerprint hashes (xxhash, xxh3 64-bit): fast, stable across platforms and runs."""

from __future__ import annotations

from collections.abc import Sequence

import xxhash

from verified_memory.anchors.normalize import normalize_line

__all__ = ["BLANK", "hash_line", "line_hashes", "snippet_hash", "text_hash"]

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


#: Closing brackets before which formatters add (or drop) a trailing comma.
_CLOSERS = frozenset(")]}")


def text_hash(lines: Sequence[str]) -> str:
    """Hash of the code with every whitespace character removed, line breaks included
    (16 hex digits), so re-wrapping a statement over more or fewer lines keeps it.

    A comma that ends a line whose next code line starts with a closing bracket is
    dropped: formatters (prettier, black, rustfmt, and Go's own syntax) add one when
    they spread a call over several lines, and take it away when they join it again.
    A comma inside one line (a Python or Rust one-element tuple ``(x,)``) is kept."""
    parts = [text for text in map(normalize_line, lines) if text]
    for i in range(len(parts) - 1):
        if parts[i].endswith(",") and parts[i + 1][0] in _CLOSERS:
            parts[i] = parts[i][:-1]
    return xxhash.xxh3_64_hexdigest("".join(parts).encode())
