"""The error tree of verified-memory.

Every error this package raises derives from one root, so a caller can catch
``VerifiedMemoryError`` and know it caught ours and nothing else::

    VerifiedMemoryError
    ├── ValidationError        bad input: the message says what was wrong and where
    ├── NotFound               an unknown memory id, ref, repository or path
    ├── Conflict               a mutation lost a race or its precondition (e.g. the
    │                          memory to supersede is no longer active)
    ├── SourceUnavailable      the code could not be read (network, auth, rate limit,
    │   │                      a broken git process): never a verdict on a memory
    │   ├── SourceDown         the whole source is out for now (retries exhausted, a
    │   │   │                  rate limit far from its reset): the rest of a pass is
    │   │   │                  not tried
    │   │   └── CredentialsRejected  the token is missing, invalid, expired or revoked
    │   └── BudgetSpent        the pass's time limit ran out before this was read
    ├── StoreError             the memory store failed (locked, corrupt, unreachable)
    │   └── ReadOnlyStore      it may be read but not written (file or directory modes):
    │                          nothing was written; never a verdict on a memory
    └── MissingDependency      an optional extra is not installed (also an ImportError)

Lower-layer errors (sqlite3, subprocess, psycopg, PyGithub, httpx) are translated
with ``raise ... from exc`` at the layer that meets them; none reaches a caller raw.
"""

from __future__ import annotations

__all__ = [
    "BudgetSpent",
    "Conflict",
    "CredentialsRejected",
    "MissingDependency",
    "NotFound",
    "ReadOnlyStore",
    "SourceDown",
    "SourceUnavailable",
    "StoreError",
    "ValidationError",
    "VerifiedMemoryError",
]


class VerifiedMemoryError(Exception):
    """Root of every error raised by verified-memory."""


class ValidationError(VerifiedMemoryError, ValueError):
    """Input was rejected; nothing was written."""


class NotFound(VerifiedMemoryError, LookupError):
    """The memory, ref, repository or file asked for does not exist."""


class Conflict(VerifiedMemoryError):
    """A mutation's precondition no longer holds (another writer got there first)."""


class SourceUnavailable(VerifiedMemoryError):
    """The code could not be read; this says nothing about whether a memory holds."""


class SourceDown(SourceUnavailable):
    """The source as a whole cannot be read for now (it failed every retry, or a rate
    limit holds until ``retry_at``, an epoch time): further reads in the same pass
    would fail too, so they are not tried."""

    def __init__(self, message: str, *, retry_at: float | None = None) -> None:
        super().__init__(message)
        self.retry_at = retry_at


class CredentialsRejected(SourceDown):
    """The source refused the credentials (missing, invalid, expired or revoked): no
    read succeeds until they are fixed, so this is an error to report, not only an
    absence of verdicts."""


class BudgetSpent(SourceUnavailable):
    """The time budget of a verification pass ran out before this read: the code was
    not checked, which says nothing about whether a memory holds."""


class StoreError(VerifiedMemoryError):
    """The memory store itself failed."""


class ReadOnlyStore(StoreError):
    """The store can be read but refuses writes (this user may not write its file or
    directory): nothing was written. Verdicts that could not be recorded are not
    verdicts: a pass that meets this is a view."""


class MissingDependency(VerifiedMemoryError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package} is not installed: pip install 'verified-memory[{extra}]'"
        )
        self.package = package
        self.extra = extra
