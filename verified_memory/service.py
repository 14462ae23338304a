"""``MemoryService``: the one public API every entry point (CLI, MCP, review bot) uses.

It joins a ``MemoryStore`` (where memories live) and a ``CodeSource`` (where the code
is) and keeps the product's rule: a memory reaches a prompt only after its citations
were checked against the code as it is now. Every operation writes its telemetry.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from verified_memory.errors import Conflict, NotFound, SourceUnavailable, ValidationError
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
    Transition,
    Verification,
    parse_citation,
    utcnow,
    validate_repo,
)
from verified_memory.sources.base import CodeSource
from verified_memory.store.base import MemoryStore
from verified_memory.telemetry import TelemetryBuffer
from verified_memory.verify.citing import fingerprint_citation
from verified_memory.verify.decision import decide
from verified_memory.verify.files import FileCache
from verified_memory.verify.ladder import Locator, Verifier

__all__ = ["Context", "MemoryService", "VerificationReport"]

SourceFor = Callable[[str], CodeSource]
Progress = Callable[[int, int], None]

#: Transitions written per store transaction during a verification pass.
APPLY_BATCH = 500


@dataclass(frozen=True, slots=True)
class VerificationReport:
    """One verification pass: a ``Verification`` per memory, in the order asked."""

    verifications: tuple[Verification, ...]
    revisions: Mapping[str, str]  # repo -> revision checked
    duration_ms: float
    requests: int = 0  # requests the source sent (GitHub); 0 for local sources

    def count(self, decision: Decision) -> int:
        return sum(1 for v in self.verifications if v.decision is decision)

    @property
    def passed(self) -> list[Memory]:
        return [v.memory for v in self.verifications if v.passed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "revisions": dict(self.revisions),
            "duration_ms": round(self.duration_ms, 1),
            "requests": self.requests,
            "refreshed": self.count(Decision.REFRESH),
            "invalidated": self.count(Decision.INVALIDATE),
            "unverified": self.count(Decision.UNVERIFIED),
            "memories": [v.to_dict() for v in self.verifications],
        }


@dataclass(frozen=True, slots=True)
class Context:
    """Verified memories ready for a prompt, and those left out with why."""

    repo: str
    revision: str
    memories: tuple[Memory, ...]
    markdown: str
    left_out: tuple[Verification, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "revision": self.revision,
            "memories": [m.to_dict() for m in self.memories],
            "markdown": self.markdown,
            "left_out": [
                {"memory_id": v.memory.id, "decision": v.decision.value, "reason": v.reason}
                for v in self.left_out
            ],
        }


class MemoryService:
    """Store, find, verify and inject memories.

    ``memories`` is the ``MemoryStore``; ``store(...)`` is the method that stores one.

    ``source`` is the code every repository is read from (a working copy, GitHub, a
    fake), or a callable returning the source for a repository. ``locator`` is ladder
    step 4 (default: tree-sitter anchors and the search across moved files).
    """

    def __init__(
        self,
        store: MemoryStore,
        source: CodeSource | SourceFor | None = None,
        *,
        actor: str = "vmem",
        locator: Locator | None = None,
    ) -> None:
        self.memories = store
        self.telemetry = TelemetryBuffer(store)  # ``retrieved`` events, written behind
        self._source = source
        self.actor = actor
        if locator is None:
            from verified_memory.verify.anchored import AnchorLocator

            locator = AnchorLocator()
        self.locator = locator

    # ------------------------------------------------------------------ plumbing

    def source_for(self, repo: str) -> CodeSource:
        if self._source is None:
            raise SourceUnavailable(f"no code source is configured for {repo}")
        if callable(self._source) and not hasattr(self._source, "read_blob"):
            return self._source(repo)
        return self._source  # type: ignore[return-value]

    def _event(self, kind: EventKind, memory: Memory | str, repo: str | None = None,
               at: datetime | None = None, /, **detail: Any) -> TelemetryEvent:
        # Positional-only: a caller's detail may have any key, "repo" and "at" included.
        if isinstance(memory, Memory):
            memory_id, repo = memory.id, memory.repo
        else:
            memory_id = memory
        assert repo is not None
        return TelemetryEvent(kind=kind, repo=repo, memory_id=memory_id, actor=self.actor,
                              at=at or utcnow(), detail=detail)

    def _retrieved(self, memories: Sequence[Memory], via: str, **detail: Any) -> list[Memory]:
        # Written behind the read (telemetry.py): a read must not cost a transaction.
        # One time and one detail for the whole read: it is one retrieval.
        at, detail = utcnow(), {"via": via, **detail}
        self.telemetry.add([
            TelemetryEvent(kind=EventKind.RETRIEVED, repo=m.repo, memory_id=m.id,
                           actor=self.actor, at=at, detail=detail)
            for m in memories
        ])
        return list(memories)

    def _transition(self, memory: Memory, transition: Transition, action: str) -> Memory:
        self.telemetry.flush()
        (applied,) = self.memories.apply([transition])
        if not applied:
            current = self.memories.get(transition.memory_id)
            raise Conflict(
                f"cannot {action} memory {transition.memory_id}: it is {current.status.value}"
                f", not {transition.expect.value}"
            )
        return transition.apply_to(memory)

    # ------------------------------------------------------------------ writing

    def store(self, memory: NewMemory | Mapping[str, Any], *, ref: str = "HEAD") -> Memory:
        """Fingerprint the citations at ``ref`` (or each citation's own ``sha``) and store.

        Refused with ``ValidationError``, writing nothing, when a citation points at
        nothing: a missing file, lines past its end, blank lines only, a binary file.
        """
        new = memory if isinstance(memory, NewMemory) else NewMemory.parse(memory)
        built = self._build(new, ref=ref)
        self.telemetry.flush()
        self.memories.add(built, [self._event(EventKind.CREATED, built,
                                           citations=len(built.citations))])
        return built

    def supersede(self, old_id: str, new: NewMemory | Mapping[str, Any], *,
                  ref: str = "HEAD") -> Memory:
        """Replace an active memory with a corrected one, atomically (else ``Conflict``)."""
        old = self.memories.get(old_id)
        if old.status is not Status.ACTIVE:
            raise Conflict(f"memory {old_id} is {old.status.value}; only an active memory "
                           "can be superseded")
        new_memory = new if isinstance(new, NewMemory) else NewMemory.parse(
            {"repo": old.repo, **new})
        if new_memory.repo != old.repo:
            raise ValidationError(f"repo {new_memory.repo!r} differs from the superseded "
                                  f"memory's {old.repo!r}")
        built = self._build(new_memory, ref=ref, supersedes=old_id)
        self.telemetry.flush()
        self.memories.supersede(old_id, built, [
            self._event(EventKind.CREATED, built, citations=len(built.citations),
                        supersedes=old_id),
            self._event(EventKind.SUPERSEDED, old, superseded_by=built.id),
        ])
        return built

    def _build(self, new: NewMemory, *, ref: str, supersedes: str | None = None) -> Memory:
        source = self.source_for(new.repo)
        files = FileCache(source)
        citations = tuple(
            fingerprint_citation(source, files, ref, c, f"citations[{i}]")
            for i, c in enumerate(new.citations)
        )
        now = utcnow()
        return Memory(
            id=str(uuid.uuid4()), repo=new.repo, subject=new.subject, fact=new.fact,
            citations=citations, reason=new.reason, category=new.category, tags=new.tags,
            supersedes=supersedes, created_by=new.created_by or self.actor,
            created_at=now, refreshed_at=now,
        )

    def refresh(self, memory_id: str) -> Memory:
        """Mark an active memory as still useful (after the agent checked it)."""
        memory = self.memories.get(memory_id)
        return self._transition(memory, Transition(
            memory_id, refreshed_at=utcnow(),
            events=(self._event(EventKind.REFRESHED, memory, by="request"),)), "refresh")

    def invalidate(self, memory_id: str, reason: str) -> Memory:
        """Retire an active memory whose code no longer supports it."""
        if not isinstance(reason, str) or not reason.strip():
            raise ValidationError("an invalidation needs a reason")
        memory = self.memories.get(memory_id)
        return self._transition(memory, Transition(
            memory_id, status=Status.INVALID, invalid_reason=reason.strip(),
            events=(self._event(EventKind.INVALIDATED, memory, reason=reason.strip()),)),
            "invalidate")

    def log_applied(self, memory_id: str, **detail: Any) -> Memory:
        """Record that an agent used this memory in a task."""
        memory = self.memories.get(memory_id)
        return self._transition(memory, Transition(
            memory_id, add_applications=1,
            events=(self._event(EventKind.APPLIED, memory, **detail),)), "apply")

    # ------------------------------------------------------------------ reading

    def get(self, memory_id: str) -> Memory:
        memory = self.memories.get(memory_id)
        return self._retrieved([memory], "get")[0]

    def get_recent(self, repo: str, limit: int = 50) -> list[Memory]:
        """Active memories, most recently refreshed first (not yet verified)."""
        validate_repo(repo)
        _check_limit(limit)
        return self._retrieved(self.memories.recent(repo, limit=limit), "recent")

    def search(self, repo: str, query: str, limit: int = 20) -> list[Memory]:
        validate_repo(repo)
        _check_limit(limit)
        return self._retrieved(self.memories.search(repo, query, limit=limit), "search")

    def search_by_path(self, repo: str, path: str, lines: tuple[int, int] | None = None,
                       limit: int = 50) -> list[Memory]:
        """Active memories citing ``path`` (overlapping ``lines``, when given)."""
        validate_repo(repo)
        _check_limit(limit)
        if lines is not None:
            ref = parse_citation({"path": path, "line_start": lines[0], "line_end": lines[1]},
                                 "lines")
            path, lines = ref.path, (ref.line_start, ref.line_end)
        else:
            path = parse_citation({"path": path, "line_start": 1}, "path").path
        return self._retrieved(self.memories.by_path(repo, path, lines=lines, limit=limit),
                               "path")

    def history(self, memory_id: str) -> list[Memory]:
        """The supersede chain through this memory, oldest first."""
        memory = self.memories.get(memory_id)
        chain = [memory]
        seen = {memory.id}
        while chain[0].supersedes and chain[0].supersedes not in seen:
            seen.add(chain[0].supersedes)
            chain.insert(0, self.memories.get(chain[0].supersedes))
        while chain[-1].superseded_by and chain[-1].superseded_by not in seen:
            seen.add(chain[-1].superseded_by)
            chain.append(self.memories.get(chain[-1].superseded_by))
        return chain

    def stats(self, repo: str) -> RepoStats:
        repo = validate_repo(repo)
        self.telemetry.flush()
        return self.memories.stats(repo)

    # ------------------------------------------------------------------ verifying

    def verify(
        self,
        ids: Iterable[str] | None = None,
        *,
        repo: str | None = None,
        ref: str = "HEAD",
        apply: bool = True,
        on_progress: Progress | None = None,
    ) -> VerificationReport:
        """Check memories (by id, or every active memory of ``repo``) at ``ref``.

        With ``apply`` (the default) the decision is carried out: memories whose
        citations all hold are refreshed (relocated citations rewritten to their new
        place, the old one kept in telemetry); memories with changed or missing code are
        invalidated with a reason naming the citations. Unverifiable citations never
        invalidate. Without ``apply`` only telemetry is written (a review of unmerged
        code must not change memories).
        """
        started = time.perf_counter()
        if ids is not None:
            memories = self.memories.get_many(list(ids))
        elif repo is not None:
            memories = self.memories.recent(validate_repo(repo), limit=None)
        else:
            raise ValidationError("verify needs memory ids or a repo")
        by_repo: dict[str, list[Memory]] = {}
        for memory in memories:
            by_repo.setdefault(memory.repo, []).append(memory)
        decided: list[tuple[Verification, Transition | None, TelemetryEvent]] = []
        revisions: dict[str, str] = {}
        requests = 0
        done = 0
        now = utcnow()
        verifiers: dict[int, Verifier] = {}  # one per source: files are read once per run
        for repo_name, group in by_repo.items():
            source = self.source_for(repo_name)
            before = int(getattr(source, "requests", 0))
            try:
                revision = source.resolve(ref)
            except SourceUnavailable:
                revision = ref  # every citation below comes out unverifiable
            revisions[repo_name] = revision
            verifier = verifiers.setdefault(id(source), Verifier(source, locator=self.locator))
            checked: list[tuple[Memory, list[CitationCheck]]] = []
            for memory in group:
                checked.append((memory, verifier.check(memory.citations, revision)))
                done += 1
                if on_progress is not None:
                    on_progress(done, len(memories))
            spent = int(getattr(source, "requests", 0)) - before
            requests += spent
            decided += [self._decide(memory, checks, revision, source.pins_commits, now,
                                     apply=apply, requests=spent)
                        for memory, checks in checked]
        # Written after every repository was checked: one transaction per batch, not
        # one per repository (a pass over a team's store spans many).
        results = {v.memory.id: v for v in self._carry_out(decided)}
        return VerificationReport(
            verifications=tuple(results[m.id] for m in memories if m.id in results),
            revisions=revisions,
            duration_ms=(time.perf_counter() - started) * 1000,
            requests=requests,
        )

    def _decide(self, memory: Memory, checks: list[CitationCheck], revision: str, pins: bool,
                now: datetime, *, apply: bool, requests: int,
                ) -> tuple[Verification, Transition | None, TelemetryEvent]:
        """The verdict on one memory, the change it calls for (None: nothing to
        change, or ``apply`` is off), and the event that records the outcome."""
        decision, reason = decide(checks)
        events = self._verification_events(memory, checks, decision, reason, revision,
                                           requests, now)
        verification = Verification(memory, tuple(checks), decision, revision, reason)
        transition = None
        if apply and memory.status is Status.ACTIVE and decision is not Decision.UNVERIFIED:
            transition = self._verification_transition(
                memory, checks, decision, reason, revision, pins, now, events)
        return verification, transition, events[0]

    def _carry_out(self, decided: Sequence[tuple[Verification, Transition | None,
                                                  TelemetryEvent]]) -> list[Verification]:
        out = [v for v, transition, _ in decided if transition is None]
        pending = [(v, transition) for v, transition, _ in decided if transition is not None]
        # Nothing to change: the outcome alone is recorded, now, after anything queued.
        self.telemetry.flush([outcome for _, transition, outcome in decided
                              if transition is None])
        for start in range(0, len(pending), APPLY_BATCH):
            batch = pending[start:start + APPLY_BATCH]
            applied = self.memories.apply([t for _, t in batch])
            for (verification, transition), done in zip(batch, applied, strict=True):
                # Not applied: another writer changed the memory meanwhile; report it as
                # it was.
                if done:
                    verification = Verification(
                        transition.apply_to(verification.memory), verification.checks,
                        verification.decision, verification.revision, verification.reason)
                out.append(verification)
        return out

    def _verification_events(self, memory: Memory, checks: Sequence[CitationCheck],
                             decision: Decision, reason: str | None,
                             revision: str, requests: int, at: datetime,
                             ) -> list[TelemetryEvent]:
        # The outcome event carries what the whole pass spent (API requests), so
        # dashboards can sum the cost of verification from telemetry alone.
        outcomes = [c.to_dict() for c in checks]
        if decision is Decision.REFRESH:
            events = [self._event(EventKind.VERIFIED_VALID, memory, None, at,
                                  revision=revision, outcomes=outcomes, pass_requests=requests)]
            events += [self._event(EventKind.RELOCATED, memory, None, at, revision=revision,
                                   old=str(c.citation.location), new=str(c.location))
                       for c in checks if c.outcome is Outcome.RELOCATED]
            return [*events, self._event(EventKind.REFRESHED, memory, None, at,
                                         by="verification")]
        if decision is Decision.INVALIDATE:
            return [self._event(EventKind.VERIFIED_INVALID, memory, None, at,
                                revision=revision, outcomes=outcomes, pass_requests=requests),
                    self._event(EventKind.INVALIDATED, memory, None, at, reason=reason)]
        return [self._event(EventKind.UNVERIFIABLE, memory, None, at, revision=revision,
                            outcomes=outcomes, reason=reason, pass_requests=requests)]

    def _verification_transition(
        self, memory: Memory, checks: Sequence[CitationCheck], decision: Decision,
        reason: str | None, revision: str, pins: bool, now: datetime,
        events: Sequence[TelemetryEvent],
    ) -> Transition:
        if decision is Decision.INVALIDATE:
            return Transition(memory.id, status=Status.INVALID, invalid_reason=reason,
                              add_verifications=1, events=tuple(events))
        # A working tree is no commit: its places are not pinned into citations.
        citations = tuple(_advance(c, revision) for c in checks) if pins else memory.citations
        return Transition(
            memory.id, refreshed_at=now, add_verifications=1,
            verified_commit=revision if pins else None,
            citations=citations if citations != memory.citations else None,
            events=tuple(events))

    def verify_citations(self, repo: str, citations: Sequence[CitationRef | Mapping[str, Any]],
                         *, ref: str = "HEAD") -> list[CitationCheck]:
        """Check citations that are not (yet) memories: each is fingerprinted at its own
        ``sha`` (the commit it was made at; ``ref`` when absent) and checked at ``ref``."""
        validate_repo(repo)
        source = self.source_for(repo)
        files = FileCache(source)
        revision = source.resolve(ref)
        verifier = Verifier(source, locator=self.locator)
        out = []
        for i, raw in enumerate(citations):
            cite = parse_citation(raw, f"citations[{i}]")
            citation = fingerprint_citation(source, files, ref, cite, f"citations[{i}]")
            out.append(verifier.check([citation], revision)[0])
        return out

    def read_citation(self, repo: str, path: str, lines: tuple[int, int], *,
                      ref: str = "HEAD") -> str:
        """The cited lines as they are at ``ref`` (for an agent to read before use)."""
        validate_repo(repo)
        cite = parse_citation({"path": path, "line_start": lines[0], "line_end": lines[1]})
        source = self.source_for(repo)
        revision = source.resolve(ref)
        blob = source.tree(revision).get(cite.path)
        if blob is None:
            raise NotFound(f"{cite.path} does not exist at {ref}")
        file = FileCache(source).get(blob)
        if file is None:
            raise ValidationError(f"{cite.path} is binary or not UTF-8 text")
        if cite.line_end > len(file.lines):
            raise ValidationError(f"lines {cite.line_start}-{cite.line_end} are past the end "
                                  f"of {cite.path} ({len(file.lines)} lines)")
        return "\n".join(file.lines[cite.line_start - 1 : cite.line_end])

    def context(self, repo: str, *, ref: str = "HEAD", limit: int = 20,
                query: str | None = None, hydration: str = "full",
                budget: int | None = None) -> Context:
        """Verify the most recent memories (those matching ``query`` first, when given),
        then format only those that passed: at ``hydration`` (``summary``, ``full`` or
        ``files``), within ``budget`` estimated tokens (default ``prompt.DEFAULT_BUDGET``),
        most relevant to ``query`` first, else most recently refreshed first."""
        from verified_memory.models import Location
        from verified_memory.prompt import Hydration, render_context

        level = Hydration.parse(hydration)
        candidates = self.get_recent(repo, limit=limit)
        if query and query.strip():
            found = self.search(repo, query, limit=limit)
            candidates = list({m.id: m for m in [*found, *candidates]}.values())[:limit]
        report = self.verify([m.id for m in candidates], ref=ref)
        passed = tuple(v.memory for v in report.verifications if v.passed)
        revision = report.revisions.get(repo) or self.source_for(repo).resolve(ref)

        def read_code(location: Location) -> str:
            return self.read_citation(repo, location.path,
                                      (location.line_start, location.line_end), ref=revision)

        rendered = render_context(repo, revision, report.verifications, hydration=level,
                                  budget=budget, query=query,
                                  read_code=read_code if level is Hydration.FILES else None)
        return Context(
            repo=repo, revision=revision, memories=passed, markdown=rendered.text,
            left_out=tuple(v for v in report.verifications if not v.passed),
        )

    def close(self) -> None:
        try:
            self.telemetry.close()  # a read never fails for its retrieved events
        finally:
            self.telemetry.discard()
            self.memories.close()
        if self._source is not None and hasattr(self._source, "close"):
            self._source.close()

    def __enter__(self) -> MemoryService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def feedback(self, memory_id: str, outcome: str, note: str | None = None) -> TelemetryEvent:
        """Record whether applying a memory worked: ``success`` or ``failure``.

        ``applied`` says a memory was used; feedback says whether using it helped, the
        signal that tells a useful memory from a merely popular one. Any memory may get
        feedback (one applied yesterday may be invalid today); an unknown id is
        ``NotFound``. Only telemetry is written."""
        if outcome not in ("success", "failure"):
            raise ValidationError(f"outcome must be 'success' or 'failure', got {outcome!r}")
        if note is not None and not isinstance(note, str):
            raise ValidationError(f"note must be a string, got {type(note).__name__}")
        note = (note or "").strip() or None
        if note is not None and len(note) > 2000:
            raise ValidationError(f"note is {len(note)} characters long; the limit is 2000")
        memory = self.memories.get(memory_id)
        event = self._event(EventKind.FEEDBACK, memory, outcome=outcome, note=note)
        self.telemetry.flush([event])  # written now, after anything queued before it
        return event


def _advance(check: CitationCheck, sha: str | None) -> Citation:
    """The citation after a passing check: its new place and pins, same fingerprint.

    A file whose blob did not change (step 1) keeps its old pins: "at that commit the
    file was this blob" is still true, step 1 still answers next time, and a pass over
    unchanged code then rewrites no citation rows."""
    assert check.location is not None
    if check.step == 1:
        return check.citation
    return check.citation.moved_to(check.location, sha=sha, blob_sha=check.blob_sha)


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise ValidationError(f"limit must be a whole number from 1 to 10000, got {limit!r}")
