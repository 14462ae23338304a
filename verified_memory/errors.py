"""The error tree of verified-memory.

Every error this package raises derives from one root, so a caller can catch
``VerifiedMemoryError`` and know it caught ours and nothing else::

    VerifiedMemoryError
    ├── ValidationError        bad input: the message says what was wrong and where
    ├── NotFound               an unknown memory id, ref, repository or path
    ├── Conflict               a mutation lost a race or its precondition (e.g. the
    │                          memory to supersede is no longer active)
    ├── SourceUnavailable      the code could not be read (network, auth, rate limit,
    │                          a broken git process): never a verdict on a memory
    ├── StoreError             the memory store failed (locked, corrupt, unreachable)
    └── MissingDependency      an optional extra is not installed (also an ImportError)

Lower-layer errors (sqlite3, subprocess, psycopg, PyGithub, httpx) are translated
with ``raise ... from exc`` at the layer that meets them; none reaches a caller raw.
"""

from __future__ import annotations

__all__ = [
    "Conflict",
    "MissingDependency",
    "NotFound",
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


class StoreError(VerifiedMemoryError):
    """The memory store itself failed."""


class MissingDependency(VerifiedMemoryError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"{package} is not installed: pip install 'verified-memory[{extra}]'"
        )
        self.package = package
        self.extra = extra
