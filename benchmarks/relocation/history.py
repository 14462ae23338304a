"""This repository's own history as a corpus: citations made at older commits, checked at HEAD.

Nothing here is scripted, so there is no exact answer for every citation. What can be
said without trusting the verifier's own machinery too far:

* a citation in a file whose blob did not change must stay ``valid`` at the same place;
* a whole definition whose qualified name still exists at HEAD with the same code line
  for line (same per-line hashes) has moved there (or stayed): its exact new range is
  known;
* a window inside such a definition moved with it (same offset);
* a whole definition whose name still exists, once, with different code has ``changed``.

Everything else (renamed or deleted definitions, windows in edited definitions) has no
oracle; their outcomes are only counted. The oracle uses the product's tree-sitter names,
so the "definition" rows are not fully independent of the verifier (a bug in naming would
hide from both); the "file unchanged" row is.
"""

from __future__ import annotations

import random
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.relocation import syntax
from benchmarks.relocation.edits import FUNCTION_KINDS
from verified_memory.anchors import treesitter
from verified_memory.anchors.normalize import decode_text, split_lines
from verified_memory.sources.local_git import LocalGitSource

__all__ = ["HistoryCase", "history_cases"]


@dataclass(frozen=True, slots=True)
class HistoryCase:
    id: str
    sha: str
    path: str
    line_start: int
    line_end: int
    category: str  # file unchanged | definition unchanged | definition edited | no oracle
    expect: str  # same | moved | changed | unknown
    new_path: str | None = None
    new_start: int | None = None
    new_end: int | None = None


def _commits(repo: Path, limit: int) -> list[str]:
    out = subprocess.run(["git", "-C", str(repo), "rev-list", "--first-parent",
                          f"--max-count={limit}", "HEAD"],
                         capture_output=True, text=True, check=True).stdout.split()
    return out


def history_cases(repo: Path, per_commit: int, rng: random.Random,
                  max_commits: int = 30) -> tuple[list[HistoryCase], str]:
    """Citations at each older commit (up to ``per_commit`` each), with what is known."""
    commits = _commits(repo, max_commits + 1)
    if len(commits) < 2:
        return [], ""
    head = commits[0]
    cases: list[HistoryCase] = []
    with LocalGitSource(repo) as source:
        head_tree = source.tree(head)
        head_defs: dict[str, list[treesitter.Definition]] = {}

        def defs_at(path: str, blob: str) -> tuple[list[str], tuple[treesitter.Definition, ...]]:
            text = decode_text(source.read_blob(blob)) or ""
            return split_lines(text), tuple(d for d in treesitter.definitions(path, text,
                                                                               key=blob)
                                            if not d.declaration)

        def by_name(name: str, first: str | None) -> list[tuple[str, treesitter.Definition]]:
            found: list[tuple[str, treesitter.Definition]] = []
            # the file that continues the cited one first: found there, that is the one
            if first is not None and first in head_tree \
                    and treesitter.language_for(first) is not None:
                found = [(first, d) for d in head_defs_of(first) if d.name == name]
                if found:
                    return found
            for path in sorted(head_tree):
                if treesitter.language_for(path) is not None:
                    found.extend((path, d) for d in head_defs_of(path) if d.name == name)
            return found

        def head_defs_of(path: str) -> list[treesitter.Definition]:
            if path not in head_defs:
                head_defs[path] = list(defs_at(path, head_tree[path])[1])
            return head_defs[path]

        for sha in commits[1:]:
            tree = source.tree(sha)
            renames = {r.old: r.new for r in source.renames(sha, head)}
            pool: list[HistoryCase] = []
            for path, blob in sorted(tree.items()):
                language = treesitter.language_for(path)
                if language is None:
                    continue
                lines, defs = defs_at(path, blob)
                parsed = syntax.parse(path, lines)
                unchanged = head_tree.get(path) == blob
                for d in defs:
                    if d.end_line - d.start_line + 1 > 120:
                        continue
                    spans = [(d.start_line, d.end_line, True)]
                    if d.kind in FUNCTION_KINDS[language] and parsed is not None:
                        windows = _windows(parsed, d)
                        if windows:
                            w = rng.choice(windows)
                            spans.append((w[0], w[1], False))
                    for start, end, whole in spans:
                        cid = f"hist-{sha[:8]}-{path}-{start}-{end}"
                        if unchanged:
                            pool.append(HistoryCase(cid, sha, path, start, end, "file unchanged",
                                                    "same", path, start, end))
                            continue
                        pool.append(_oracle(cid, sha, path, start, end, whole, d,
                                            by_name(d.name, renames.get(path, path))))
            rng.shuffle(pool)
            cases.extend(pool[:per_commit])
    return cases, head


def _windows(parsed: syntax.FileSyntax, d: treesitter.Definition) -> list[tuple[int, int]]:
    out = []
    for group in parsed.statements:
        for i, (first, _) in enumerate(group):
            if first <= d.start_line:
                continue
            for j in range(i, len(group)):
                last = group[j][1]
                if group[j][0] < 0 or last > d.end_line or last - first + 1 > 5:
                    break
                if last - first >= 1:
                    out.append((first, last))
    return out


def _inside(part: Sequence[int], whole: Sequence[int]) -> int | None:
    """Where ``part`` occurs as a run of ``whole`` (the only place), or None."""
    places = [i for i in range(len(whole) - len(part) + 1)
              if list(whole[i:i + len(part)]) == list(part)]
    return places[0] if len(places) == 1 else None


def _oracle(cid: str, sha: str, path: str, start: int, end: int, whole: bool,
            d: treesitter.Definition, found: list[tuple[str, treesitter.Definition]]
            ) -> HistoryCase:
    same = [(p, n) for p, n in found if n.line_hashes == d.line_hashes]
    if len(same) == 1:
        new_path, n = same[0]
        offset = start - d.start_line
        lo, hi = n.start_line + offset, n.start_line + offset + (end - start)
        expect = "same" if (new_path, lo, hi) == (path, start, end) else "moved"
        return HistoryCase(cid, sha, path, start, end, "definition unchanged", expect,
                           new_path, lo, hi)
    if whole and len(found) == 1 and found[0][1].text_hash != d.text_hash:
        new_path, n = found[0]
        at = _inside(d.line_hashes, n.line_hashes)
        if at is not None:  # every cited line intact, the definition grew around them
            lo = n.start_line + at
            return HistoryCase(cid, sha, path, start, end, "definition grew", "moved",
                               new_path, lo, lo + (end - start))
        return HistoryCase(cid, sha, path, start, end, "definition edited", "changed")
    return HistoryCase(cid, sha, path, start, end, "no oracle", "unknown")
