"""The change a review looks at: for each changed file, the base lines it removes or
replaces, where it inserts lines, and the lines a review comment may sit on; from
``git diff`` (``review/git.py``) or a pull request's patches (``review/github.py``)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from verified_memory.models import Location

__all__ = ["Diff", "FileDiff", "HunkReader", "parse_patch"]

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True, slots=True)
class FileDiff:
    """One changed file: which base lines the change removes, where it inserts, and
    which lines a review comment may sit on.

    ``path`` is the file at the head (None when deleted), ``old_path`` at the base
    (None when added). Line sets are 1-based: ``deleted`` base lines removed or
    replaced; ``inserted_after`` base lines after which new lines appear (0: at the
    top); ``added`` head lines; ``left`` / ``right`` every base / head line the diff
    shows (changed lines and context), the lines GitHub accepts comments on. ``whole``:
    no patch was available (a binary or very large file), so every line counts as
    changed.
    """

    path: str | None
    old_path: str | None
    status: str = "modified"  # added, removed, modified, renamed
    deleted: frozenset[int] = frozenset()
    inserted_after: frozenset[int] = frozenset()
    added: frozenset[int] = frozenset()
    left: frozenset[int] = frozenset()
    right: frozenset[int] = frozenset()
    whole: bool = False

    @property
    def comment_path(self) -> str:
        """The path a review comment names (the old one for a deleted file)."""
        path = self.path or self.old_path
        assert path is not None
        return path

    def touches(self, start: int, end: int) -> bool:
        """Whether the change removes, replaces or inserts inside base lines start-end."""
        if self.whole or (self.path is None and self.old_path is not None):
            return True
        if any(start <= line <= end for line in self.deleted):
            return True
        return any(start <= after < end for after in self.inserted_after)

    def replaces(self, start: int, end: int) -> bool:
        """Whether new lines take the place of base lines start-end (an edit, not a
        deletion)."""
        if self.path is None:
            return False
        return self.whole or any(start - 1 <= after <= end for after in self.inserted_after)

    def comment_line(self, location: Location, side: str) -> int | None:
        """A line of ``location`` a comment may sit on: a changed one first."""
        lines = range(location.line_start, location.line_end + 1)
        changed, shown = (self.added, self.right) if side == "RIGHT" else (self.deleted, self.left)
        return next((n for n in lines if n in changed), None) or next(
            (n for n in lines if n in shown), None)


def parse_patch(lines: Iterable[str], *, path: str | None, old_path: str | None,
                status: str = "modified") -> FileDiff:
    """A ``FileDiff`` from unified diff hunks (``@@ -a,b +c,d @@`` and their lines), as
    ``git diff`` writes them and GitHub sends them in a pull request file's ``patch``."""
    reader = HunkReader()
    for line in lines:
        reader.feed(line)
    return reader.result(path=path, old_path=old_path, status=status)


class HunkReader:
    """Reads hunks line by line, counting each hunk's lines so that a removed line that
    reads ``--- a/x`` or ``@@`` is never taken for a header."""

    def __init__(self) -> None:
        self.deleted: set[int] = set()
        self.inserted_after: set[int] = set()
        self.added: set[int] = set()
        self.left: set[int] = set()
        self.right: set[int] = set()
        self._old = self._new = 0  # the next line number on each side
        self._old_left = self._new_left = 0  # lines of the current hunk still to come

    @property
    def in_hunk(self) -> bool:
        return self._old_left > 0 or self._new_left > 0

    def feed(self, line: str) -> None:
        """Take one line: a hunk header, a hunk line, or anything else (ignored)."""
        if not self.in_hunk:
            match = _HUNK.match(line)
            if match is None:
                return  # not a hunk, or "\ No newline at end of file"
            old_start, old_count = int(match[1]), int(match[2] or "1")
            new_start, new_count = int(match[3]), int(match[4] or "1")
            # An empty side names the line *before* the hunk; otherwise its first line.
            self._old = old_start if old_count else old_start + 1
            self._new = new_start if new_count else new_start + 1
            self._old_left, self._new_left = old_count, new_count
            return
        mark = line[:1]
        if mark == "-" and self._old_left > 0:
            self.deleted.add(self._old)
            self.left.add(self._old)
            self._old += 1
            self._old_left -= 1
        elif mark == "+" and self._new_left > 0:
            self.added.add(self._new)
            self.right.add(self._new)
            self.inserted_after.add(self._old - 1)
            self._new += 1
            self._new_left -= 1
        elif mark in (" ", "") and self._old_left > 0 and self._new_left > 0:
            self.left.add(self._old)
            self.right.add(self._new)
            self._old += 1
            self._new += 1
            self._old_left -= 1
            self._new_left -= 1
        elif mark != "\\":
            self._old_left = self._new_left = 0  # a hunk shorter than its header said

    def result(self, *, path: str | None, old_path: str | None, status: str,
               whole: bool = False) -> FileDiff:
        return FileDiff(path=path, old_path=old_path, status=status,
                        deleted=frozenset(self.deleted),
                        inserted_after=frozenset(self.inserted_after),
                        added=frozenset(self.added), left=frozenset(self.left),
                        right=frozenset(self.right), whole=whole)


@dataclass(frozen=True, slots=True)
class Diff:
    """What a review looks at: the changed files between two commits.

    ``base_commit`` is the diff's old side: the merge base of ``base`` and ``head``
    (what GitHub diffs a pull request against), which is ``base`` itself when it is an
    ancestor of ``head``."""

    base: str  # as given: a ref name or a sha
    head: str
    base_commit: str
    head_commit: str
    files: tuple[FileDiff, ...]
    notes: tuple[str, ...] = ()

    def by_old_path(self) -> dict[str, FileDiff]:
        return {f.old_path: f for f in self.files if f.old_path is not None}

    def by_path(self) -> dict[str, FileDiff]:
        return {f.path: f for f in self.files if f.path is not None}
