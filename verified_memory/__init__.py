"""verified-memory: memories about a codebase that agents can trust.

A memory is a subject, a fact and citations to the code that supports it. Before a
memory is used, its citations are checked against the code as it is now: code that
moved is followed, code that changed or vanished invalidates the memory.

    from verified_memory import MemoryService, LocalGitSource, open_store

    with MemoryService(open_store(), LocalGitSource(".")) as memory:
        memory.store({"repo": "acme/app", "subject": "...", "fact": "...",
                      "citations": [{"path": "app.py", "line_start": 3, "line_end": 9}]})
        print(memory.context("acme/app").markdown)
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from verified_memory.budget import time_budget
from verified_memory.errors import (
    BudgetSpent,
    Conflict,
    CredentialsRejected,
    MissingDependency,
    NotFound,
    SourceDown,
    SourceUnavailable,
    StoreError,
    ValidationError,
    VerifiedMemoryError,
)
from verified_memory.models import (
    Citation,
    CitationCheck,
    CitationRef,
    Decision,
    EventKind,
    Memory,
    NewMemory,
    Outcome,
    RepoStats,
    Status,
    TelemetryEvent,
    Verification,
)
from verified_memory.provider import TaskContext, VerifiedMemoryProvider
from verified_memory.service import Context, MemoryService, VerificationReport
from verified_memory.sources.base import CodeSource
from verified_memory.sources.fake import DictSource
from verified_memory.sources.local_git import LocalGitSource
from verified_memory.sources.worktree import WorktreeSource
from verified_memory.store import open_store
from verified_memory.store.base import MemoryStore
from verified_memory.store.memory import InMemoryStore
from verified_memory.store.sqlite import SQLiteStore

try:
    __version__ = version("verified-memory")
except PackageNotFoundError:  # running from a checkout without installing
    __version__ = "0.0.0"

__all__ = [
    "BudgetSpent",
    "Citation",
    "CitationCheck",
    "CitationRef",
    "CodeSource",
    "Conflict",
    "Context",
    "CredentialsRejected",
    "Decision",
    "DictSource",
    "EventKind",
    "InMemoryStore",
    "LocalGitSource",
    "Memory",
    "MemoryService",
    "MemoryStore",
    "MissingDependency",
    "NewMemory",
    "NotFound",
    "Outcome",
    "RepoStats",
    "SQLiteStore",
    "SourceDown",
    "SourceUnavailable",
    "Status",
    "StoreError",
    "TaskContext",
    "TelemetryEvent",
    "ValidationError",
    "Verification",
    "VerificationReport",
    "VerifiedMemoryError",
    "VerifiedMemoryProvider",
    "WorktreeSource",
    "__version__",
    "open_store",
    "time_budget",
]
