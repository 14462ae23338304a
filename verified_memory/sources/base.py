"""The ``CodeSource`` Protocol: where the code that citations point at comes from.

A source answers three questions, which is all the verifier needs (the cost model in
docs/ARCHITECTURE.md): which commit does a ref name, which files (with blob shas) does a
commit hold, and what bytes does a blob hold. Blob shas are git's, so an unchanged file
is recognised without reading it, whatever the source.

Two more serve the ref rule (a memory is a claim about the main line): which ref is
the repository's main line (``main_line``), and which commits its history contains
(``contained``), so a memory stored on an unmerged branch is not judged on main.

Errors: an unknown ref raises ``NotFound``; anything that stops the code from being
read (a dead git process, the network, auth, a rate limit) raises
``SourceUnavailable``, which the verifier turns into ``unverifiable``, never into a
verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

__all__ = [
    "BatchReader",
    "ClosingSource",
    "CodeSource",
    "CountsRequests",
    "DescribesEntries",
    "KnowsCommits",
    "ListsChanges",
    "MainLine",
    "PrefetchesPaths",
    "PrefetchesRenames",
    "Rename",
    "Reopenable",
    "SourceFactory",
    "SourcesByRepo",
    "Suffixes",
    "git_blob_sha",
    "has_suffix",
    "narrowed",
    "no_file",
]


@dataclass(frozen=True, slots=True)
class Rename:
    """A path that changed between two revisions (``new`` is None when deleted)."""

    old: str
    new: str | None
    similarity: int = 100


#: File name endings (lower case, with the dot: ``(".py", ".pyi")``) that a search for
#: renames keeps to, or None for every file.
Suffixes = tuple[str, ...] | None


def has_suffix(path: str, suffixes: Suffixes) -> bool:
    """Whether ``path`` is among the files of ``suffixes`` (any case; all without)."""
    return suffixes is None or path.lower().endswith(suffixes)


def narrowed(renames: Iterable[Rename], suffixes: Suffixes) -> tuple[Rename, ...]:
    """``renames`` as a search among the files of ``suffixes`` finds them (git with a
    pathspec): a rename to a file of another suffix is a deletion, one from such a file
    is not seen."""
    if suffixes is None:
        return tuple(renames)
    return tuple(r if r.new is None or has_suffix(r.new, suffixes) else Rename(r.old, None)
                 for r in renames if has_suffix(r.old, suffixes))


@dataclass(frozen=True, slots=True)
class MainLine:
    """The repository's main line as a source sees it.

    ``name`` is the branch as people say it (``main``); ``ref`` is what ``resolve``
    takes to find its tip here (a remote-tracking ``refs/remotes/origin/main`` in a
    clone, else the local branch); ``how`` says how it was found, for messages.
    ``aliases`` are other refs that name the same tip here by definition (GitHub's
    ``HEAD`` is its default branch): a pass at one is at the tip without asking twice."""

    name: str
    ref: str
    how: str
    aliases: tuple[str, ...] = ()


@runtime_checkable
class CodeSource(Protocol):
    #: Whether ``resolve`` returns real commit shas that citations may be pinned to
    #: (False for a working tree with uncommitted files).
    pins_commits: bool

    def resolve(self, ref: str) -> str:
        """The commit sha (or a stable revision id) that ``ref`` names now."""

    def tree(self, revision: str) -> Mapping[str, str]:
        """Every regular file at ``revision``: path -> git blob sha. Cached per run."""

    def read_blob(self, blob_sha: str) -> bytes:
        """The bytes of a blob. Each blob is read at most once per run."""

    def renames(self, old_revision: str, new_revision: str, *,
                suffixes: Suffixes = None) -> Sequence[Rename]:
        """Files renamed, moved or deleted between two revisions (git rename detection);
        with ``suffixes``, among the files whose names end with one of them only (any
        case): a file renamed to another suffix is deleted there (``narrowed``).

        Sources that cannot tell return an empty sequence; the verifier then falls back
        to searching the tree."""

    def main_line(self, branch: str | None = None) -> MainLine | None:
        """The main line: ``branch`` when given (configured), else the repository's
        default branch. None when it cannot be told (then nothing is a verdict).
        Raises ``SourceUnavailable`` when the answer could not be read."""

    def contained(self, commits: Collection[str], tip: str) -> frozenset[str]:
        """Those of ``commits`` (full shas) that ``tip``'s history contains, ``tip``
        itself included. A commit this source does not know is not contained."""

    def close(self) -> None:
        """Stop helper processes and connections. Safe to call twice."""


@runtime_checkable
class SourceFactory(Protocol):
    """The source for each repository, for a service that spans several (the CLI opens
    a working copy or GitHub per repository, on first use). ``SourcesByRepo`` is one."""

    def __call__(self, repo: str) -> CodeSource:
        """The source of ``repo`` ('owner/name'); the same object for the same repo."""

    def close(self) -> None:
        """Close every source it opened. Safe to call twice."""


class SourcesByRepo:
    """A ``SourceFactory`` that opens each repository's source once, with ``opener``,
    and closes them all."""

    def __init__(self, opener: Callable[[str], CodeSource]) -> None:
        self._opener = opener
        self._sources: dict[str, CodeSource] = {}

    def __call__(self, repo: str) -> CodeSource:
        if repo not in self._sources:
            self._sources[repo] = self._opener(repo)
        return self._sources[repo]

    def close(self) -> None:
        sources, self._sources = list(self._sources.values()), {}
        for source in sources:
            source.close()


@runtime_checkable
class CountsRequests(Protocol):
    """A source that spends requests against a rate limit (GitHub): what a pass spent
    is reported with it and in its telemetry."""

    @property
    def requests(self) -> int:
        """Requests sent so far."""

    @property
    def requests_before_pass(self) -> int:
        """``requests`` before the current pass (``budget.time_budget``) sent its first
        one (``requests`` outside a pass), or since a pass before it in the same budget
        was ``counted``: the scope an entry point says before a pass, within its time
        budget, is counted with the pass, which reuses its answers."""

    def counted(self) -> None:
        """A pass counted every request so far: the next one in the same time budget
        counts from here."""


@runtime_checkable
class BatchReader(Protocol):
    """A source that reads many blobs cheaper together than one by one (one exchange
    with ``git cat-file`` instead of a round trip each)."""

    def read_blobs(self, blob_shas: Iterable[str]) -> None:
        """Warm the source's cache with these blobs; ``read_blob`` then answers."""


@runtime_checkable
class PrefetchesPaths(Protocol):
    """A source that looks many paths up cheaper together (each path's folder asked for
    by name, all in one exchange with ``git cat-file``)."""

    def prefetch_paths(self, wanted: Iterable[tuple[str, str]]) -> None:
        """Warm the lookups of these (commit, path) pairs; ``tree(commit)`` then answers."""


@runtime_checkable
class PrefetchesRenames(Protocol):
    """A source that can start looking for renames between commits ahead of need
    (``git diff-tree`` running on another core while the verifier reads and parses)."""

    def prefetch_renames(self, pairs: Iterable[tuple[str, str]], *,
                         suffixes: Suffixes = None) -> None:
        """Start finding the renames of these (old, new) commit pairs (among files of
        ``suffixes``, as ``renames`` would); ``renames`` then answers from what was
        started. A warm-up only: failures are left to ``renames``."""


@runtime_checkable
class DescribesEntries(Protocol):
    """A source that can say what a path the tree leaves out is: trees list regular
    files only, and a symbolic link or a submodule is never followed (a link could
    lead out of the repository), but a citation's reason can name it."""

    def entry_kind(self, revision: str, path: str) -> str | None:
        """'a symbolic link', 'a submodule' or 'a directory' when ``path`` is one at
        ``revision`` (as far as this source knows without another request), else None."""


@runtime_checkable
class KnowsCommits(Protocol):
    """A source that can say which commits its copy of the repository lacks (a shallow
    clone cut its history; GitHub could not compare them): a commit it lacks may be on
    the main line or not, which ``contained`` alone cannot tell apart."""

    def lacks(self, commits: Collection[str]) -> frozenset[str]:
        """Those of ``commits`` (full shas) this repository does not have."""

    def lacking(self, commits: str, main: str) -> str:
        """Why whether ``main`` contains ``commits`` (short shas, joined) cannot be
        told, for the reason of a memory that is therefore not judged."""


@runtime_checkable
class ListsChanges(Protocol):
    """A source that can say which files changed between two commits without listing
    the older one's tree (GitHub's ``compare``, already asked for renames): a request
    saved each time a citation's code is searched for in other files."""

    def changed_paths(self, old_revision: str, new_revision: str, *,
                      suffixes: Suffixes = None) -> Sequence[str] | None:
        """Paths at ``new_revision`` whose blob differs from ``old_revision`` (with
        ``suffixes``, of those only, as for ``renames``); None when the source cannot
        tell (then the two trees are diffed)."""


@runtime_checkable
class Reopenable(Protocol):
    """A source that can open a twin of itself: the same code through its own helper
    processes and caches, for a worker process to use (a pipe cannot be shared)."""

    def reopen(self) -> CodeSource:
        """A new, independent source over the same code."""


class ClosingSource:
    """A source is a context manager that closes itself (helper processes, connections)."""

    def close(self) -> None:
        """Overridden by each source; safe to call twice."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def no_file(source: CodeSource, revision: str, path: str, at: str) -> str:
    """Why ``path`` has no blob at ``revision`` (``at`` names it for the user): a
    symbolic link, a submodule or a directory, or a path that goes through a link or
    into a submodule, is named as such, since the user sees it on disk; else it does
    not exist. One wording for storing, verifying and reading a citation, whatever the
    source (``DescribesEntries``)."""
    if isinstance(source, DescribesEntries):
        kind = source.entry_kind(revision, path)
        if kind is not None:
            return f"{path} is {kind} at {at}, not a file"
        parts = path.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            kind = source.entry_kind(revision, parent)
            if kind == "a symbolic link":
                return (f"{path} is behind the symbolic link {parent} at {at}, "
                        "which is never followed")
            if kind == "a submodule":
                return (f"{path} is in the submodule {parent} at {at}, whose files are "
                        "not this repository's")
            if kind is None:
                break
    return f"{path} does not exist at {at}"


def git_blob_sha(data: bytes) -> str:
    """The sha git gives a blob with these bytes (``git hash-object``)."""
    import hashlib

    return hashlib.sha1(b"blob %d\x00" % len(data) + data, usedforsecurity=False).hexdigest()
