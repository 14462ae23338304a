"""The ``CodeSource`` Protocol: where the code that citations point at comes from.

A source answers three questions, which is all the verifier needs (DESIGN.md, cost
model): which commit does a ref name, which files (with blob shas) does a commit hold,
and what bytes does a blob hold. Blob shas are git's, so an unchanged file is
recognised without reading it, whatever the source.

Errors: an unknown ref raises ``NotFound``; anything that stops the code from being
read (a dead git process, the network, auth, a rate limit) raises
``SourceUnavailable``, which the verifier turns into ``unverifiable``, never into a
verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

__all__ = [
    "BatchReader", "ClosingSource", "CodeSource", "DescribesEntries", "Rename", "Reopenable",
    "git_blob_sha",
]


@dataclass(frozen=True, slots=True)
class Rename:
    """A path that changed between two revisions (``new`` is None when deleted)."""

    old: str
    new: str | None
    similarity: int = 100


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

    def renames(self, old_revision: str, new_revision: str) -> Sequence[Rename]:
        """Files renamed, moved or deleted between two revisions (git rename detection).

        Sources that cannot tell return an empty sequence; the verifier then falls back
        to searching the tree."""

    def close(self) -> None:
        """Stop helper processes and connections. Safe to call twice."""


@runtime_checkable
class BatchReader(Protocol):
    """A source that reads many blobs cheaper together than one by one (one exchange
    with ``git cat-file`` instead of a round trip each)."""

    def read_blobs(self, blob_shas: Iterable[str]) -> None:
        """Warm the source's cache with these blobs; ``read_blob`` then answers."""


@runtime_checkable
class DescribesEntries(Protocol):
    """A source that can say what a path the tree leaves out is: trees list regular
    files only, and a symbolic link or a submodule is never followed (a link could
    lead out of the repository), but a citation's reason can name it."""

    def entry_kind(self, revision: str, path: str) -> str | None:
        """'a symbolic link', 'a submodule' or 'a directory' when ``path`` is one at
        ``revision`` (as far as this source knows without another request), else None."""


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


def git_blob_sha(data: bytes) -> str:
    """The sha git gives a blob with these bytes (``git hash-object``)."""
    import hashlib

    return hashlib.sha1(b"blob %d\x00" % len(data) + data, usedforsecurity=False).hexdigest()
