"""Check many citations that are not (yet) memories: the engine under
``MemoryService.check_citations`` (``vmem citations check``, MCP
``memory_verify_citations``).

Each input is ``(id, {"path", "line_start", "line_end", "sha"})`` where ``sha`` is the
commit the citation was made at (``ref`` when absent and not required). The original
code is read there (so the citation is fingerprinted exactly as a memory would have
been), then the ladder runs at ``ref``. One bad input yields an error for its id and
does not stop the run; each answer is a ``CheckedCitation``.

With ``jobs`` > 1 a large run is shared among worker processes (forked, so each
starts with everything already imported and the run's tree already listed): the
citations of one file stay together, so each file is still read and parsed once, and
each worker reads the code through its own twin of the source. Tree-sitter holds the
GIL while it parses, so threads would not help.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from verified_memory.errors import (
    CredentialsRejected,
    NotFound,
    SourceUnavailable,
    ValidationError,
    VerifiedMemoryError,
)
from verified_memory.models import CitationCheck, Outcome, parse_citation
from verified_memory.sources.base import (
    BatchReader,
    CodeSource,
    PrefetchesPaths,
    PrefetchesRenames,
    Reopenable,
    Suffixes,
)
from verified_memory.verify.candidates import kind_suffixes
from verified_memory.verify.citing import fingerprint_citation
from verified_memory.verify.collector import collector_paused
from verified_memory.verify.files import FileCache
from verified_memory.verify.ladder import Locator, Verifier

__all__ = ["CheckedCitation", "Item", "check_citations", "usable_cpus"]

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

#: One input: its id, and the citation (or why the input is not one: a message).
Item = tuple[Any, Mapping[str, Any] | str]


@dataclass(frozen=True, slots=True)
class CheckedCitation:
    """One input of a check: the citation's check at ``ref`` (its current place), or why
    it has none: a bad input (``error``), or code that could not be read at the
    citation's own commit (neither: ``unverifiable``, no verdict)."""

    id: Any
    path: Any
    check: CitationCheck | None = None
    error: str | None = None
    unreadable: str | None = None  # why the code at the citation's commit was not read

    @property
    def status(self) -> str:
        if self.error is not None:
            return "error"
        return self.check.outcome.value if self.check else Outcome.UNVERIFIABLE.value

    def to_dict(self) -> dict[str, Any]:
        """The answer as a line of ``vmem citations check``: ``{id, error}``, or exactly
        ``{id, status, path, line_start, line_end, similarity}`` with the current place
        (None when the code is missing or could not be read)."""
        if self.error is not None:
            return {"id": self.id, "error": self.error}
        check = self.check
        place = check.location if check else None
        return {
            "id": self.id,
            "status": self.status,
            "path": place.path if place else (check.citation.path if check else self.path),
            "line_start": place.line_start if place else None,
            "line_end": place.line_end if place else None,
            "similarity": check.similarity if check else None,
        }


def usable_cpus() -> int:
    """The CPUs this process may run on (the default for ``--jobs``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def check_citations(source: CodeSource, items: Iterable[Item], ref: str = "HEAD",
                    locator: Locator | None = None, *, jobs: int = 1,
                    require_sha: bool = True) -> Iterator[CheckedCitation]:
    """One answer per input, in input order (``CheckedCitation``). With ``require_sha``
    a citation without the commit it was made at is a bad input; without, it is read at
    ``ref`` (then it only has to exist).

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
    lock another thread holds at the fork stays held in the workers.

    Python's cyclic garbage collector rests (``collector_paused``) from the first
    answer until the last is taken or the iterator is closed, as it does during a
    verification pass; a caller that paused it already finds it paused after."""
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
            return _check_in_workers(source, listed, ref, revision, tree, locator, workers,
                                     require_sha)
        items = listed
    return _check(source, items, ref, revision, tree, verifier, require_sha)


def _can_fork() -> bool:
    """Whether workers may be forked here: not on macOS, where system frameworks are
    not fork-safe (Python's own default there is to spawn), nor where fork is missing."""
    return sys.platform != "darwin" and "fork" in multiprocessing.get_all_start_methods()


def _check(source: CodeSource, items: Iterable[Item], ref: str, revision: str,
           tree: Mapping[str, str], verifier: Verifier,
           require_sha: bool) -> Iterator[CheckedCitation]:
    """The answers, with Python's cyclic collector paused from the first to the last
    (``collector_paused``), and so while the caller handles each: paused only inside
    each check, the collections would come between them, as many and as dear.

    The run's caches (the verifier's: every file read, every anchor) are let go before
    the collector resumes: everything made while it rested is young, and the first
    collection after would walk all of it, only for the caches to be freed after (4 to
    7 ms of a Java check of 200 citations, 2%; 1 to 2 ms once they are let go)."""
    with collector_paused():
        yield from _answers(source, items, ref, revision, tree, verifier, require_sha)
        del verifier  # the last reference but a worker's own (``_worker``)


def _answers(source: CodeSource, items: Iterable[Item], ref: str, revision: str,
             tree: Mapping[str, str], verifier: Verifier,
             require_sha: bool) -> Iterator[CheckedCitation]:
    files: FileCache = verifier.files  # one cache: the old and the new code read once
    # a ref names one commit for the whole run (and a full sha forever): resolve it once
    resolve = functools.lru_cache(maxsize=_REFS_CACHE)(source.resolve)
    with_anchor = verifier.locator is None or not verifier.locator.derive_anchors
    for item_id, data in _read_ahead(items, files, resolve, source, revision, tree):
        if isinstance(data, str):
            yield CheckedCitation(item_id, None, error=data)
            continue
        try:
            if require_sha and not data.get("sha"):
                raise ValidationError("sha (the commit the citation was made at) is required")
            cite = parse_citation(data, "citation")
            citation = fingerprint_citation(source, files, ref, cite, "citation",
                                            with_anchor=with_anchor, resolve=resolve)
        except (ValidationError, NotFound) as exc:
            yield CheckedCitation(item_id, data.get("path"),
                                  error=str(exc).removeprefix("citation: "))
            continue
        except CredentialsRejected:  # no read can succeed: the run's error, not a line's
            raise
        except SourceUnavailable as exc:  # no verdict: the code could not be read
            yield CheckedCitation(item_id, data.get("path"), unreadable=str(exc))
            continue
        yield CheckedCitation(item_id, citation.path,
                              check=verifier.check_one(citation, revision, tree))


def _read_ahead(items: Iterable[Item], files: FileCache, resolve: Callable[[str], str],
                source: CodeSource, revision: str,
                tree: Mapping[str, str]) -> Iterator[Item]:
    """The items, unchanged, in groups; before each group is checked, the paths it will
    look up are found together (``PrefetchesPaths``), the files it will read (each cited
    file, and the new side of one that changed) are asked for together, when the source
    can (``BatchReader``), and the search for renames since each commit whose cited files
    changed or left is started (``PrefetchesRenames``: step 4 of the ladder asks for it,
    and git finds them on another core meanwhile). Best effort: whatever cannot be
    resolved here is reported by the check.

    A group is at most ``_READ_AHEAD`` citations of at most ``_READ_AHEAD_COMMITS``
    commits, so the trees read here are still in the source's cache when the check asks
    for them again."""
    if not isinstance(source, BatchReader):
        yield from items
        return
    for group in _groups(items):
        wanted: list[str] = []
        # (commit, revision) pairs whose files changed, by the kind of those files
        moved: dict[Suffixes, list[tuple[str, str]]] = {}
        cited: list[tuple[str, str]] = []  # (commit, path) of each citation
        for _, data in group:
            path, sha = (data.get("path"), data.get("sha")) if isinstance(data, Mapping) \
                else (None, None)
            if isinstance(path, str) and isinstance(sha, str):
                with contextlib.suppress(VerifiedMemoryError):
                    cited.append((resolve(sha), path))
        if isinstance(source, PrefetchesPaths):  # each cited file, then and now
            source.prefetch_paths([*cited, *((revision, path) for _, path in cited)])
        for commit, path in cited:
            try:
                old = source.tree(commit).get(path)
            except VerifiedMemoryError:
                continue
            if old is None:
                continue
            wanted.append(old)  # read to fingerprint the citation, changed or not
            if old == tree.get(path):
                continue
            if commit != revision:
                moved.setdefault(kind_suffixes(path), []).append((commit, revision))
            if path in tree:
                wanted.append(tree[path])
        if wanted:
            files.prefetch(wanted)
        if isinstance(source, PrefetchesRenames):
            for suffixes, pairs in moved.items():
                source.prefetch_renames(pairs, suffixes=suffixes)
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


# --------------------------------------------------------------------- worker processes

#: What the workers of the current parallel run inherit when they are forked.
_inherited: tuple[Reopenable, str, str, Mapping[str, str], Locator | None, bool] | None = None
#: A worker's own source and verifier, made once when it starts.
_worker: tuple[CodeSource, str, str, Mapping[str, str], Verifier, bool] | None = None

Piece = list[tuple[int, Any, Mapping[str, Any] | str]]


def _check_in_workers(source: Reopenable, items: Sequence[Item], ref: str, revision: str,
                      tree: Mapping[str, str], locator: Locator, jobs: int,
                      require_sha: bool) -> Iterator[CheckedCitation]:
    global _inherited
    pieces = _pieces(items, jobs * _PIECES_PER_JOB)
    results: list[CheckedCitation | None] = [None] * len(items)
    # listed once here, for every worker (a tree not listed yet looks paths up as asked)
    tree = MappingProxyType(dict(tree.items()))
    _inherited = (source, ref, revision, tree, locator, require_sha)
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
    source, ref, revision, tree, locator, require_sha = _inherited
    twin = source.reopen()
    _worker = (twin, ref, revision, tree, Verifier(twin, locator=locator), require_sha)


def _check_piece(piece: Piece) -> list[tuple[int, CheckedCitation]]:
    assert _worker is not None
    source, ref, revision, tree, verifier, require_sha = _worker
    answers = _check(source, [(item_id, data) for _, item_id, data in piece], ref,
                     revision, tree, verifier, require_sha)
    return [(index, answer) for (index, _, _), answer in zip(piece, answers, strict=True)]
