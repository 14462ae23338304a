"""Check many citations that are not (yet) memories: ``vmem citations check``.

Each input is ``{"id", "path", "line_start", "line_end", "sha"}`` where ``sha`` is the
commit the citation was made at. The original code is read there (so the citation is
fingerprinted exactly as a memory would have been), then the ladder runs at ``ref``.
One bad input yields an error for its id and does not stop the run.

With ``jobs`` > 1 a large run is shared among worker processes (forked, so each
starts with everything already imported and the run's tree already listed): the
citations of one file stay together, so each file is still read and parsed once, and
each worker reads the code through its own twin of the source. Tree-sitter holds the
GIL while it parses, so threads would not help.
"""

from __future__ import annotations

import functools
import json
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from verified_memory.errors import (
    NotFound,
    SourceUnavailable,
    ValidationError,
    VerifiedMemoryError,
)
from verified_memory.models import Location, parse_citation
from verified_memory.sources.base import BatchReader, CodeSource, Reopenable
from verified_memory.verify.citing import fingerprint_citation
from verified_memory.verify.files import FileCache
from verified_memory.verify.ladder import Locator, Verifier

__all__ = ["check_citations", "parse_jsonl", "usable_cpus"]

#: Refs (commit shas, mostly) resolved once per run and remembered.
_REFS_CACHE = 1024
#: Citations whose files are read ahead together (see ``_read_ahead``), and the
#: commits they may cite: half the trees ``LocalGitSource`` keeps.
_READ_AHEAD = 64
_READ_AHEAD_COMMITS = 8
#: Fewer citations than this stay in one process: starting workers would cost more.
PARALLEL_MIN = 200
#: Citations per worker, at least: each worker pays for its own start (a git process,
#: the rename diff, the grammars), so 64 CPUs do not mean 64 workers for 300 citations.
CITATIONS_PER_WORKER = 100
#: Pieces of work per worker, so that one that drew the costly files does not finish
#: last, alone.
_PIECES_PER_JOB = 4

Item = tuple[Any, Mapping[str, Any] | str]


def usable_cpus() -> int:
    """The CPUs this process may run on (the default for ``--jobs``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def parse_jsonl(lines: Iterable[str], *, max_line: int | None = None) -> Iterator[Item]:
    """(id, object) per non-empty line, or (id or line number, error message); a line
    longer than ``max_line`` characters is an error (``limits.bounded_lines``)."""
    for number, line in enumerate(lines, 1):
        if max_line is not None and len(line.rstrip("\r\n")) > max_line:
            yield f"line {number}", f"line {number} is longer than {max_line:,} characters"
            continue
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            yield f"line {number}", f"line {number} is not valid JSON: {exc.msg}"
            continue
        except RecursionError:
            yield f"line {number}", f"line {number} is JSON nested too deeply"
            continue
        if not isinstance(data, dict):
            yield f"line {number}", f"line {number} is not a JSON object"
            continue
        yield data.get("id", f"line {number}"), data


def check_citations(source: CodeSource, items: Iterable[Item], ref: str = "HEAD",
                    locator: Locator | None = None, *, jobs: int = 1
                    ) -> Iterator[dict[str, Any]]:
    """One result per input, in input order: ``{id, status, path, line_start, line_end,
    similarity}`` with the code's current place, or ``{id, error}`` for a bad input.

    ``ref`` is resolved before anything is read, so an unknown ref raises ``NotFound``
    here, once, even for an empty input, rather than failing every line.

    The default locator derives each citation's anchor only when the ladder needs it:
    a citation whose file did not change, or whose lines are found again by their
    hashes alone, costs no parse.

    ``jobs`` > 1 shares a run of at least ``PARALLEL_MIN`` citations among up to that
    many worker processes (at most one per ``CITATIONS_PER_WORKER`` citations) when
    the source can be reopened (``LocalGitSource``) and the platform can fork; the
    answers are the same, still in input order. Forking copies the calling process:
    call it so from a process whose other threads are idle (as the CLI is), since a
    lock another thread holds at the fork stays held in the workers."""
    if locator is None:
        from verified_memory.verify.anchored import AnchorLocator

        locator = AnchorLocator(derive_anchors=True)
    revision = source.resolve(ref)
    tree = source.tree(revision)
    verifier = Verifier(source, locator=locator)
    if jobs > 1 and isinstance(source, Reopenable) and _can_fork():
        listed = list(items)
        citations = sum(isinstance(data, Mapping) for _, data in listed)
        if citations >= PARALLEL_MIN:
            workers = min(jobs, citations // CITATIONS_PER_WORKER)
            return _check_in_workers(source, listed, ref, revision, tree, locator, workers)
        items = listed
    return _check(source, items, ref, revision, tree, verifier)


def _can_fork() -> bool:
    """Whether workers may be forked here: not on macOS, where system frameworks are
    not fork-safe (Python's own default there is to spawn), nor where fork is missing."""
    return sys.platform != "darwin" and "fork" in multiprocessing.get_all_start_methods()


def _check(source: CodeSource, items: Iterable[Item], ref: str, revision: str,
           tree: Mapping[str, str], verifier: Verifier) -> Iterator[dict[str, Any]]:
    files: FileCache = verifier.files  # one cache: the old and the new code read once
    # a ref names one commit for the whole run (and a full sha forever): resolve it once
    resolve = functools.lru_cache(maxsize=_REFS_CACHE)(source.resolve)
    with_anchor = verifier.locator is None or not verifier.locator.derive_anchors
    for item_id, data in _read_ahead(items, files, resolve, source, tree):
        if isinstance(data, str):
            yield {"id": item_id, "error": data}
            continue
        try:
            if not data.get("sha"):
                raise ValidationError("sha (the commit the citation was made at) is required")
            cite = parse_citation(data, "citation")
            citation = fingerprint_citation(source, files, ref, cite, "citation",
                                            with_anchor=with_anchor, resolve=resolve)
        except (ValidationError, NotFound) as exc:
            yield {"id": item_id, "error": str(exc).removeprefix("citation: ")}
            continue
        except SourceUnavailable:  # no verdict: the code could not be read
            yield _result(item_id, "unverifiable", data.get("path"), None, None)
            continue
        check = verifier.check_one(citation, revision, tree)
        yield _result(item_id, check.outcome.value, check.location.path if check.location
                      else citation.path, check.location, check.similarity)


def _read_ahead(items: Iterable[Item], files: FileCache, resolve: Callable[[str], str],
                source: CodeSource, tree: Mapping[str, str]) -> Iterator[Item]:
    """The items, unchanged, in groups; before each group is checked, the files it will
    read (both sides of each cited file that changed) are fetched together, when the
    source can (``BatchReader``). Best effort: whatever cannot be resolved here is
    reported by the check.

    A group is at most ``_READ_AHEAD`` citations of at most ``_READ_AHEAD_COMMITS``
    commits, so the trees listed here are still in the source's cache when the check
    asks for them again."""
    if not isinstance(source, BatchReader):
        yield from items
        return
    for group in _groups(items):
        wanted: list[str] = []
        for _, data in group:
            path, sha = (data.get("path"), data.get("sha")) if isinstance(data, Mapping) \
                else (None, None)
            if not isinstance(path, str) or not isinstance(sha, str) or path not in tree:
                continue
            try:
                old = source.tree(resolve(sha)).get(path)
            except VerifiedMemoryError:
                continue
            if old is not None and old != tree[path]:
                wanted += (old, tree[path])
        if wanted:
            files.prefetch(wanted)
        yield from group


def _groups(items: Iterable[Item]) -> Iterator[list[Item]]:
    group: list[Item] = []
    commits: set[Any] = set()
    for item in items:
        data = item[1]
        sha = data.get("sha") if isinstance(data, Mapping) else None
        if len(group) == _READ_AHEAD or (
                sha not in commits and len(commits) == _READ_AHEAD_COMMITS):
            yield group
            group, commits = [], set()
        group.append(item)
        commits.add(sha)
    if group:
        yield group


def _result(item_id: Any, status: str, path: Any, place: Location | None,
            similarity: float | None) -> dict[str, Any]:
    """The output line: exactly these keys, in this order; the place is the current one
    (None when the code is missing or could not be read)."""
    return {
        "id": item_id,
        "status": status,
        "path": path,
        "line_start": place.line_start if place else None,
        "line_end": place.line_end if place else None,
        "similarity": similarity,
    }


# --------------------------------------------------------------------- worker processes

#: What the workers of the current parallel run inherit when they are forked.
_inherited: tuple[Reopenable, str, str, Mapping[str, str], Locator | None] | None = None
#: A worker's own source and verifier, made once when it starts.
_worker: tuple[CodeSource, str, str, Mapping[str, str], Verifier] | None = None

Piece = list[tuple[int, Any, Mapping[str, Any] | str]]


def _check_in_workers(source: Reopenable, items: Sequence[Item], ref: str, revision: str,
                      tree: Mapping[str, str], locator: Locator,
                      jobs: int) -> Iterator[dict[str, Any]]:
    global _inherited
    pieces = _pieces(items, jobs * _PIECES_PER_JOB)
    results: list[dict[str, Any] | None] = [None] * len(items)
    _inherited = (source, ref, revision, tree, locator)
    try:
        with multiprocessing.get_context("fork").Pool(
                min(jobs, len(pieces)), initializer=_start_worker) as pool:
            for answered in pool.imap_unordered(_check_piece, pieces):
                for index, result in answered:
                    results[index] = result
    finally:
        _inherited = None
    for answer in results:
        assert answer is not None  # every index is in exactly one piece
        yield answer


def _pieces(items: Sequence[Item], count: int) -> list[Piece]:
    """Items split into up to ``count`` pieces of about equal size, the citations of one
    path always in the same piece (so its files are read and parsed by one worker)."""
    by_path: dict[Any, Piece] = {}
    for index, (item_id, data) in enumerate(items):
        path = data.get("path") if isinstance(data, Mapping) else None
        by_path.setdefault(path if isinstance(path, str) else None, []).append(
            (index, item_id, data))
    pieces: list[Piece] = [[] for _ in range(min(count, len(by_path)))]
    for group in sorted(by_path.values(), key=len, reverse=True):
        min(pieces, key=len).extend(group)  # the largest groups first, each to the lightest
    return pieces


def _start_worker() -> None:
    global _worker
    assert _inherited is not None
    source, ref, revision, tree, locator = _inherited
    twin = source.reopen()
    _worker = (twin, ref, revision, tree, Verifier(twin, locator=locator))


def _check_piece(piece: Piece) -> list[tuple[int, dict[str, Any]]]:
    assert _worker is not None
    source, ref, revision, tree, verifier = _worker
    answers = _check(source, [(item_id, data) for _, item_id, data in piece], ref,
                     revision, tree, verifier)
    return [(index, answer) for (index, _, _), answer in zip(piece, answers, strict=True)]
