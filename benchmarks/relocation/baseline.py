"""The plain baseline: map line ranges through ``git diff -U0`` hunks.

What a careful script without anchors would do: one ``git diff -U0 --find-renames`` from
the citation's commit to the ref; a deleted file makes its citations ``missing``; a
renamed file is followed to its new path; in the file, every hunk wholly above the range
shifts it by the hunk's net line count; a hunk that overlaps the range (or inserts lines
strictly inside it) makes it ``changed``; otherwise the range is ``valid`` (same place) or
``relocated`` (shifted or renamed).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["FileDiff", "check_with_diff", "parse_diff"]

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class FileDiff:
    new_path: str | None  # None: deleted
    hunks: list[tuple[int, int, int, int]] = field(default_factory=list)  # a, b, c, d


def parse_diff(output: bytes) -> dict[str, FileDiff]:
    """``git diff -U0 -M`` (no prefix, paths unquoted) -> old path -> what became of it."""
    files: dict[str, FileDiff] = {}
    current: FileDiff | None = None
    old = new = None
    pending = 0  # content lines of the current hunk still to skip
    for line in output.split(b"\n"):
        if pending:
            if line[:1] in (b"-", b"+"):
                pending -= 1
            continue
        if line.startswith(b"diff --git "):
            current, old, new = None, None, None
        elif line.startswith(b"--- "):
            name = line[4:].decode("utf-8", "surrogateescape")
            old = None if name == "/dev/null" else name
        elif line.startswith(b"+++ "):
            name = line[4:].decode("utf-8", "surrogateescape")
            new = None if name == "/dev/null" else name
            if old is not None:
                current = files[old] = FileDiff(new)
        elif line.startswith(b"rename from "):
            old = line[12:].decode("utf-8", "surrogateescape")
        elif line.startswith(b"rename to "):
            new = line[10:].decode("utf-8", "surrogateescape")
            current = files[old] = FileDiff(new) if old is not None else None
        elif current is not None:
            m = _HUNK.match(line)
            if m:
                a, b, c, d = (int(g) if g is not None else 1 for g in m.groups())
                current.hunks.append((a, b, c, d))
                pending = b + d
    return files


def map_range(diff: FileDiff | None, path: str, start: int, end: int
              ) -> tuple[str, str | None, int | None, int | None]:
    if diff is None:
        return "valid", path, start, end
    if diff.new_path is None:
        return "missing", None, None, None
    shift = 0
    for a, b, _c, d in diff.hunks:
        if b == 0:  # d lines inserted after old line a
            if a < start:
                shift += d
            elif a < end:
                return "changed", diff.new_path, None, None
        elif a + b - 1 < start:
            shift += d - b
        elif a <= end:
            return "changed", diff.new_path, None, None
    status = "valid" if shift == 0 and diff.new_path == path else "relocated"
    return status, diff.new_path, start + shift, end + shift


def check_with_diff(repo: Path, items: Iterable[tuple[Any, Mapping[str, Any]]],
                    ref: str = "HEAD") -> list[dict[str, Any]]:
    """The baseline's answer for each citation, shaped like ``check_citations``' output."""
    items = list(items)
    diffs: dict[str, dict[str, FileDiff]] = {}
    out: list[dict[str, Any]] = []
    for item_id, data in items:
        sha = data["sha"]
        if sha not in diffs:
            proc = subprocess.run(
                ["git", "-C", str(repo), "-c", "core.quotepath=false", "diff", "-U0",
                 "--find-renames", "--no-color", "--no-ext-diff", "--no-prefix", sha, ref],
                capture_output=True, check=True)
            diffs[sha] = parse_diff(proc.stdout)
        status, path, start, end = map_range(diffs[sha].get(data["path"]), data["path"],
                                             data["line_start"], data["line_end"])
        out.append({"id": item_id, "status": status, "path": path, "line_start": start,
                    "line_end": end})
    return out
