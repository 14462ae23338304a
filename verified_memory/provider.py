"""``VerifiedMemoryProvider``: verified memory for Python agent code (seed 002's "agent
framework" integration point).

Three calls an agent loop makes, over a ``MemoryService`` for one repository:

- ``context_for(task)`` before it works: the memories relevant to the task (and the most
  recently confirmed ones), verified against the code now, as prompt text; those that do
  not hold are left out and counted, never quoted;
- ``remember(subject, fact, citations)`` when it learned a durable convention;
- ``feedback(memory_id, success)`` after a memory shaped its work: recorded as applied,
  with the outcome.

Verification follows the ref rule, as everywhere: at the main line's tip memories that
broke are invalidated, anywhere else the check only decides what is shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verified_memory.errors import ValidationError
from verified_memory.hooks import relevant_memories
from verified_memory.models import CitationRef, Memory, Stored, Verification, parse_citation
from verified_memory.service import Context, MemoryService

__all__ = ["TaskContext", "VerifiedMemoryProvider"]


@dataclass(frozen=True, slots=True)
class TaskContext:
    """What ``context_for`` found for a task: ``text`` for the prompt, the memories in it
    (verified just now), and those left out (did not hold, or could not be checked)."""

    task: str
    text: str
    memories: tuple[Memory, ...]
    left_out: tuple[Verification, ...] = field(default=())
    context: Context | None = None  # the service's answer, for callers that want more

    @property
    def ids(self) -> list[str]:
        return [m.id for m in self.memories]

    def __str__(self) -> str:
        return self.text


class VerifiedMemoryProvider:
    """Verified memory for an agent working on one repository.

    ``VerifiedMemoryProvider(service, "acme/app")`` over any service, or
    ``VerifiedMemoryProvider.open(path)`` for a working copy (the repository named by
    its ``origin`` remote, the store by ``db`` or the environment, as ``vmem`` does).
    ``agent`` is who telemetry and stored memories say acted. Close it (or use it as a
    context manager) to close the service."""

    def __init__(self, service: MemoryService, repo: str, *, agent: str = "agent",
                 ref: str = "HEAD", hydration: str = "full", budget: int = 2000,
                 limit: int = 20) -> None:
        self.service = service
        self.repo = repo
        self.agent = agent
        self.ref = ref
        self.hydration = hydration
        self.budget = budget
        self.limit = limit

    @classmethod
    def open(cls, path: str | Path = ".", *, db: str | None = None, repo: str | None = None,
             agent: str = "agent", **options: Any) -> VerifiedMemoryProvider:
        """A provider for the working copy at ``path``: code read from it, memories in
        the store ``db`` names (default: ``VMEM_DATABASE_URL``, Supabase's variables, or
        the SQLite file of your data directory)."""
        from verified_memory.config import Settings
        from verified_memory.sources.discovery import (
            find_working_copy,
            no_repo_named,
            repo_from_remote,
        )
        from verified_memory.sources.local_git import LocalGitSource
        from verified_memory.store import open_store

        root = find_working_copy(Path(path).resolve())
        if root is None:
            raise ValidationError(f"{path} is not inside a git working copy")
        name = repo or repo_from_remote(root)
        if name is None:
            raise ValidationError(f"{no_repo_named(root)}: pass repo='owner/name'")
        settings = Settings.from_env()
        store = open_store(db, settings)
        try:
            source = LocalGitSource(root)
        except BaseException:
            store.close()
            raise
        service = MemoryService(store, source, actor=agent, truth_ref=settings.truth_ref)
        return cls(service, name, agent=agent, **options)

    def context_for(self, task: str, *, budget: int | None = None,
                    hydration: str | None = None, limit: int | None = None) -> TaskContext:
        """The verified memories for ``task``: those it is about first (its words, the
        files it names), then the most recently confirmed, within ``budget`` tokens."""
        limit = self.limit if limit is None else limit
        about, query = relevant_memories(self.service, self.repo, task, limit)
        recent = self.service.memories.recent(self.repo, limit=limit)
        candidates = list({m.id: m for m in [*about, *recent]}.values())[:limit]
        self.service.record_retrieval(candidates, "provider", task=task[:200])
        context = self.service.context(
            self.repo, ref=self.ref, memories=candidates, query=query or None,
            hydration=hydration or self.hydration,
            budget=self.budget if budget is None else budget)
        return TaskContext(task, context.markdown, context.memories, context.left_out,
                           context)

    def remember(self, subject: str, fact: str,
                 citations: Iterable[str | Mapping[str, Any] | CitationRef], *,
                 reason: str | None = None, tags: Sequence[str] = (),
                 category: str | None = None) -> Stored:
        """Store a durable fact with its citations (``"path:START-END"``, or a dict with
        ``path``, ``line_start``, ``line_end``), fingerprinted at the provider's ref.
        A citation pointing at nothing is refused and nothing is stored; a fact the
        repository's memory already holds about the same code refreshes that memory
        (``Stored.duplicate``) instead of being stored twice."""
        cited = [_citation(c, i) for i, c in enumerate(citations)]
        return self.service.store({
            "repo": self.repo, "subject": subject, "fact": fact, "citations": cited,
            "reason": reason, "tags": list(tags), "category": category,
            "created_by": self.agent}, ref=self.ref)

    def feedback(self, memory_id: str, success: bool, note: str | None = None, *,
                 task: str | None = None) -> None:
        """A memory shaped the agent's work: record it as applied (for ``task``) and
        whether it helped. A memory that misled should also be fixed (``service.
        supersede`` or ``service.invalidate``)."""
        detail = {"task": task} if task else {}
        self.service.log_applied(memory_id, **detail)
        self.service.feedback(memory_id, "success" if success else "failure", note)

    def close(self) -> None:
        self.service.close()

    def __enter__(self) -> VerifiedMemoryProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _citation(value: str | Mapping[str, Any] | CitationRef, index: int) -> Any:
    where = f"citations[{index}]"
    if isinstance(value, CitationRef | Mapping):
        return value
    if not isinstance(value, str):
        raise ValidationError(f"{where}: a citation is 'path:START-END' or a mapping, got "
                              f"{type(value).__name__}")
    path, sep, lines = value.rpartition(":")
    if not sep or not path:
        raise ValidationError(f"{where}: expected 'path:START-END', got {value!r}")
    start, _, end = lines.partition("-")
    return parse_citation({"path": path, "line_start": start, "line_end": end or start}, where)
