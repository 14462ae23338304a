"""Per-run file cache: each blob is read and hashed at most once per run.

Fingerprinting (at store time) and verification (before use) both look at files as
lines plus per-line hashes; ``FileCache`` keeps that view per blob sha, which is
immutable, so one cache serves every revision a run looks at.

A read that failed is remembered for the run too (the same error is raised again
without asking the source), and so is why a file cannot be compared as text: larger
than ``MAX_FILE_BYTES``, binary, or not UTF-8. Those are faults of one file, which the
verifier reports for the citations of that file only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from verified_memory.anchors.hashing import BLANK, TextHasher, line_hashes
from verified_memory.anchors.normalize import decode_text, split_lines, squeeze
from verified_memory.errors import NotFound, SourceUnavailable
from verified_memory.sources.base import BatchReader, CodeSource

__all__ = ["MAX_FILE_BYTES", "FileCache", "FileText"]

#: Files larger than this are not read as text: hashing every line of a huge generated
#: file would cost seconds and memory, and nobody cites one. Citations of such a file
#: are ``unverifiable`` (when it changed) and refused at store time.
MAX_FILE_BYTES = 16 * 1024 * 1024


@dataclass(slots=True, weakref_slot=True)  # weakly held by definitions (treesitter._Rows)
class FileText:
    """A text file at one blob: its lines and the hash of each normalised line, both
    made on first use. Most files a search reads are passed over on their text alone
    (``squeezed``, ``mentions``): splitting and hashing every line of each would cost
    more than reading it."""

    blob_sha: str
    text: str
    _lines: list[str] | None = field(default=None, repr=False)
    _hashes: tuple[int, ...] | None = field(default=None, repr=False)
    _last: dict[int, int] | None = field(default=None, repr=False)
    _first: dict[int, int] = field(default_factory=dict, repr=False)
    _repeated: dict[int, list[int]] = field(default_factory=dict, repr=False)
    _squeezed: str | None = field(default=None, repr=False)
    _mentions: dict[str, bool] = field(default_factory=dict, repr=False)
    _names: dict[str, bool] = field(default_factory=dict, repr=False)
    _hasher: TextHasher | None = field(default=None, repr=False)

    @classmethod
    def from_bytes(cls, blob_sha: str, data: bytes) -> FileText | None:
        text = decode_text(data)
        return None if text is None else cls(blob_sha, text)

    @property
    def lines(self) -> list[str]:
        """The lines as editors number them (``split_lines``)."""
        if self._lines is None:
            self._lines = split_lines(self.text)
        return self._lines

    @property
    def hashes(self) -> tuple[int, ...]:
        """``hash_line`` of each line."""
        if self._hashes is None:
            self._hashes = line_hashes(self.lines)
        return self._hashes

    def hashes_made(self) -> tuple[int, ...] | None:
        """``hashes`` if they were made already, else None (for a caller that needs a
        few lines' hashes: hashing them is cheaper than hashing the file)."""
        return self._hashes

    def positions(self, line_hash: int) -> Sequence[int]:
        """0-based indices of the lines with this hash, in order.

        Built on first use from two dicts made at C speed (the last and the first line
        of each hash): most lines are unique, and only a hash on several lines is looked
        for again, between its first and last line, once."""
        if self._last is None:
            hashes = self.hashes
            self._last = dict(zip(hashes, range(len(hashes)), strict=True))
            self._first = dict(zip(reversed(hashes), range(len(hashes) - 1, -1, -1),
                                   strict=True))
        last = self._last.get(line_hash)
        if last is None or line_hash == BLANK:
            return ()
        first = self._first[line_hash]
        if first == last:
            return (first,)
        found = self._repeated.get(line_hash)
        if found is None:
            hashes = self.hashes
            found = self._repeated[line_hash] = [i for i in range(first, last + 1)
                                                 if hashes[i] == line_hash]
        return found

    def mentions(self, word: str) -> bool:
        """Whether ``word`` occurs in the text: asked of every candidate file for every
        citation searched for, about a handful of names, so each answer is kept. A word
        with neither whitespace nor a comma is first looked for in the squeezed text,
        when it was made: it is shorter (no indentation), and holds every such word the
        text holds, so most files are told apart there."""
        found = self._mentions.get(word)
        if found is None:
            absent = self._squeezed is not None and squeeze(word) == word \
                and word not in self._squeezed
            found = self._mentions[word] = not absent and word in self.text
        return found

    def names(self, word: str) -> bool:
        """Whether ``word`` occurs in the text as a whole word (no word character, in
        ``re``'s sense, on either side): the stricter ``mentions``, kept the same way.
        A definition's name is spelled from the identifiers of its file, so each word
        of it is a whole word there (``Run`` inside ``RunE`` or ``Runtime`` is not)."""
        found = self._names.get(word)
        if found is None:
            found = self._names[word] = self.mentions(word) and _whole_word(self.text, word)
        return found

    def hasher(self) -> TextHasher:
        """The file's lines as ``text_hash`` sees them (built once, on first use)."""
        if self._hasher is None:
            self._hasher = TextHasher(self.lines)
        return self._hasher

    def squeezed(self) -> str:
        """``normalize.squeeze`` of the text (built once, on first use)."""
        if self._squeezed is None:
            self._squeezed = squeeze(self.text)
        return self._squeezed


def _whole_word(text: str, word: str) -> bool:
    """``re.search(rf"(?<!\\w){re.escape(word)}(?!\\w)", text)``, without a regular
    expression: each occurrence found with ``str.find``, its neighbours tested as
    ``re`` tests ``\\w`` (``str.isalnum`` or ``_``). Several times faster on a source
    file (a pattern that starts with a look-behind is tried at every position)."""
    at, end = text.find(word), len(text)
    while at >= 0:
        after = at + len(word)
        if not (at and _word_char(text[at - 1])) and not (after < end
                                                           and _word_char(text[after])):
            return True
        at = text.find(word, at + 1)
    return False


def _word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


class FileCache:
    """Decoded files by blob sha, for the lifetime of one run."""

    def __init__(self, source: CodeSource, max_files: int = 4096) -> None:
        self.source = source
        # asked once: a check against a runtime protocol costs microseconds, and
        # prefetch is asked for every group of candidates of every search
        self._batches = source if isinstance(source, BatchReader) else None
        self._files: dict[str, FileText | None] = {}
        self._max = max_files
        self._failed: dict[str, SourceUnavailable | NotFound] = {}  # blob -> why unread
        self._not_text: dict[str, str] = {}  # blob -> why it is not compared as text

    def prefetch(self, blob_shas: Iterable[str]) -> None:
        """Have the source read these blobs together, when it can (``BatchReader``):
        files about to be read one after another. Only a warm-up: a failure here is
        left for ``get`` to meet and report."""
        if self._batches is not None:
            with contextlib.suppress(SourceUnavailable):
                self._batches.read_blobs(sha for sha in blob_shas if sha not in self._files)

    def get(self, blob_sha: str) -> FileText | None:
        """The file's text, or None when it is too large, binary or not UTF-8 (then
        ``not_text`` says which).

        Raises ``SourceUnavailable`` when the source cannot be read, ``NotFound`` when
        it does not have the blob; either is raised again, unasked, for the rest of
        the run."""
        if blob_sha in self._files:
            return self._files[blob_sha]
        failed = self._failed.get(blob_sha)
        if failed is not None:
            raise failed.with_traceback(None)
        try:
            data = self.source.read_blob(blob_sha)
        except (SourceUnavailable, NotFound) as exc:
            self._failed[blob_sha] = exc
            raise
        if len(self._files) >= self._max:
            self._files.pop(next(iter(self._files)))
        if len(data) > MAX_FILE_BYTES:
            file = None
            self._not_text[blob_sha] = (f"is {len(data) / 2**20:.1f} MiB, larger than the "
                                        f"{MAX_FILE_BYTES // 2**20} MiB verified-memory reads")
        else:
            file = FileText.from_bytes(blob_sha, data)
            if file is None:
                self._not_text[blob_sha] = ("is binary" if b"\x00" in data[:8192]
                                            else "is not UTF-8 text")
        self._files[blob_sha] = file
        return file

    def not_text(self, blob_sha: str) -> str | None:
        """Why a blob read earlier is not compared as text ("is binary", "is not UTF-8
        text", "is 40.0 MiB, larger than ..."), or None."""
        return self._not_text.get(blob_sha)
