"""Per-run file cache: each blob is read and hashed at most once per run.

Fingerprinting (at store time) and verification (before use) both look at files as
lines plus per-line hashes; ``FileCache`` keeps that view per blob sha, which is
immutable, so one cache serves every revision a run looks at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from verified_memory.anchors.hashing import BLANK, line_hashes
from verified_memory.anchors.normalize import decode_text, split_lines
from verified_memory.sources.base import CodeSource

__all__ = ["FileCache", "FileText"]


@dataclass(slots=True)
class FileText:
    """A text file at one blob: its lines and the hash of each normalised line."""

    blob_sha: str
    text: str
    lines: list[str]
    hashes: tuple[int, ...]
    _positions: dict[int, list[int]] | None = field(default=None, repr=False)

    @classmethod
    def from_bytes(cls, blob_sha: str, data: bytes) -> FileText | None:
        text = decode_text(data)
        if text is None:
            return None
        lines = split_lines(text)
        return cls(blob_sha, text, lines, line_hashes(lines))

    def positions(self, line_hash: int) -> Sequence[int]:
        """0-based indices of the lines with this hash (built once, on first use)."""
        if self._positions is None:
            index: dict[int, list[int]] = {}
            for i, h in enumerate(self.hashes):
                if h != BLANK:
                    index.setdefault(h, []).append(i)
            self._positions = index
        return self._positions.get(line_hash, ())


class FileCache:
    """Decoded files by blob sha, for the lifetime of one run."""

    def __init__(self, source: CodeSource, max_files: int = 4096) -> None:
        self.source = source
        self._files: dict[str, FileText | None] = {}
        self._max = max_files

    def get(self, blob_sha: str) -> FileText | None:
        """The file's text, or None when it is binary or not UTF-8.

        Raises ``SourceUnavailable`` when the source cannot be read."""
        if blob_sha in self._files:
            return self._files[blob_sha]
        data = self.source.read_blob(blob_sha)
        if len(self._files) >= self._max:
            self._files.pop(next(iter(self._files)))
        file = self._files[blob_sha] = FileText.from_bytes(blob_sha, data)
        return file
