"""A small git reader for the benchmark's oracle side: trees, blobs and history.

Deliberately not ``verified_memory.sources.local_git``: the labels must not depend on
the code under test. One ``git cat-file --batch`` process per repository.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["Git", "lines_of", "norm"]

_BREAK = re.compile(r"\r\n|\r|\n")


def lines_of(text: str) -> list[str]:
    """Lines as editors number them: broken at LF, CRLF or CR; a final break starts none."""
    lines = _BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def norm(line: str) -> str:
    """A line without whitespace: the documented rule for "the same line"."""
    return "".join(line.split())


class Git:
    """Read-only access to one repository (bare or not)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._proc: subprocess.Popen[bytes] | None = None
        self._trees: dict[str, dict[str, str]] = {}
        self._blobs: dict[str, str | None] = {}

    def run(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.path), *args], check=True,
                              capture_output=True).stdout.decode("utf-8", "replace")

    def first_parent(self, ref: str = "HEAD") -> list[str]:
        """Commits of the main line, newest first."""
        return self.run("rev-list", "--first-parent", ref).split()

    def tree(self, commit: str) -> Mapping[str, str]:
        found = self._trees.get(commit)
        if found is None:
            out = subprocess.run(["git", "-C", str(self.path), "ls-tree", "-r", "-z",
                                  "--full-tree", commit], check=True,
                                 capture_output=True).stdout
            found = {}
            for entry in out.split(b"\0"):
                if not entry:
                    continue
                meta, _, path = entry.partition(b"\t")
                mode, kind, sha = meta.split(b" ")
                if kind == b"blob" and mode.startswith(b"100"):
                    found[path.decode("utf-8", "surrogateescape")] = sha.decode()
            if len(self._trees) > 64:
                self._trees.pop(next(iter(self._trees)))
            self._trees[commit] = found
        return found

    def texts(self, blobs: Iterable[str]) -> dict[str, str | None]:
        """The UTF-8 text of each blob (None: binary, not UTF-8, or absent here)."""
        blobs = list(blobs)
        wanted = [b for b in dict.fromkeys(blobs) if b not in self._blobs]
        if wanted:
            proc = self._proc
            if proc is None:
                proc = self._proc = subprocess.Popen(
                    ["git", "-C", str(self.path), "cat-file", "--batch"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            assert proc.stdin is not None
            assert proc.stdout is not None
            for start in range(0, len(wanted), 500):
                chunk = wanted[start:start + 500]
                proc.stdin.write(b"".join(b.encode() + b"\n" for b in chunk))
                proc.stdin.flush()
                for sha in chunk:
                    header = proc.stdout.readline().split()
                    if len(header) != 3:
                        self._blobs[sha] = None
                        continue
                    body = proc.stdout.read(int(header[2]) + 1)[:-1]
                    text: str | None
                    try:
                        text = None if b"\0" in body[:8192] else body.decode("utf-8")
                    except UnicodeDecodeError:
                        text = None
                    self._blobs[sha] = text.removeprefix("\ufeff") if text else text
        return {b: self._blobs.get(b) for b in blobs}

    def text(self, blob: str) -> str | None:
        return self.texts([blob])[blob]

    def close(self) -> None:
        if self._proc is not None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            self._proc.wait()
            self._proc = None
