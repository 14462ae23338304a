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

from typing import TYPE_CHECKING, Any

from verified_memory._version import __version__

if TYPE_CHECKING:
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

#: Where each public name lives. Imported on first use (PEP 562): ``vmem --version``
#: or a command that stores nothing need not load the verifier, the stores and the
#: grammars (a third of a second of start-up).
_HOMES = {
    "time_budget": "budget",
    **dict.fromkeys(("BudgetSpent", "Conflict", "CredentialsRejected", "MissingDependency",
                     "NotFound", "SourceDown", "SourceUnavailable", "StoreError",
                     "ValidationError", "VerifiedMemoryError"), "errors"),
    **dict.fromkeys(("Citation", "CitationCheck", "CitationRef", "Decision", "EventKind",
                     "Memory", "NewMemory", "Outcome", "RepoStats", "Status",
                     "TelemetryEvent", "Verification"), "models"),
    **dict.fromkeys(("TaskContext", "VerifiedMemoryProvider"), "provider"),
    **dict.fromkeys(("Context", "MemoryService", "VerificationReport"), "service"),
    "CodeSource": "sources.base",
    "DictSource": "sources.fake",
    "LocalGitSource": "sources.local_git",
    "WorktreeSource": "sources.worktree",
    "open_store": "store",
    "MemoryStore": "store.base",
    "InMemoryStore": "store.memory",
    "SQLiteStore": "store.sqlite",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'verified_memory' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"verified_memory.{home}"), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
