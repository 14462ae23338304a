"""``MemoryService``: the one public API every entry point (CLI, MCP, review bot) uses.

It joins a ``MemoryStore`` (where memories live) and a ``CodeSource`` (where the code
is) and keeps the product's rule: a memory reaches a prompt only after its citations
were checked against the code as it is now. Every operation writes its telemetry.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

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
    Scope,
    Status,
    TelemetryEvent,
    Transition,
    Verification,
    parse_citation,
    utcnow,
    validate_repo,
)
from verified_memory.sources.base import CodeSource, CountsRequests, SourceFactory, SourcesByRepo
from verified_memory.store.base import MemoryStore
from verified_memory.telemetry import TelemetryBuffer
from verified_memory.verify.citing import fingerprint_citation
from verified_memory.verify.decision import decide
from verified_memory.verify.files import FileCache
from verified_memory.verify.ladder import Locator, Verifier
from verified_memory.verify.scope import PassScope, pass_scope

if TYPE_CHECKING:
    from verified_memory.prompt import Rendered

__all__ = ["Context", "MemoryService", "VerificationReport"]

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
    scopes: Mapping[str, PassScope] = field(default_factory=dict)  # repo -> what it may change

    def count(self, decision: Decision, *, judged: bool | None = None) -> int:
        """Verifications that reached ``decision`` (only verdicts, or only views, when
        ``judged`` says so)."""
        return sum(1 for v in self.verifications if v.decision is decision
                   and (judged is None or v.judged is judged))

    def changed(self, change: str) -> int:
        """Memories this pass refreshed, invalidated or revived (``Verification.change``)."""
        return sum(1 for v in self.verifications if v.change == change)

    @property
    def unmerged(self) -> int:
        """Memories a verdict pass did not judge: stored on a branch not merged yet."""
        return sum(1 for v in self.verifications if v.scope is Scope.UNMERGED)

    @property
    def passed(self) -> list[Memory]:
        return [v.memory for v in self.verifications if v.passed]

    @property
    def applies(self) -> bool:
        """Whether any repository's verdicts were applied."""
        return any(s.judges for s in self.scopes.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "revisions": dict(self.revisions),
            "scopes": {repo: scope.to_dict() for repo, scope in self.scopes.items()},
            "duration_ms": round(self.duration_ms, 1),
            "requests": self.requests,
            "hold": self.count(Decision.REFRESH),
            "do_not_hold": self.count(Decision.INVALIDATE),
            "unverified": self.count(Decision.UNVERIFIED),
            "refreshed": self.changed("refreshed"),
            "invalidated": self.changed("invalidated"),
            "revived": self.changed("revived"),
            "unmerged": self.unmerged,
            "memories": [v.to_dict() for v in self.verifications],
        }


@dataclass(frozen=True, slots=True)
class Context:
    """Verified memories ready for a prompt, and those left out with why.

    ``rendered`` is the whole rendering (tokens, budget, the level each memory was
    shown at, those cut by the budget); ``scope`` says whether the verification behind
    it changed anything stored (only at the main line's tip)."""

    repo: str
    revision: str
    memories: tuple[Memory, ...]
    markdown: str
    left_out: tuple[Verification, ...] = field(default=())
    scope: PassScope | None = None
    rendered: Rendered | None = None
    verifications: tuple[Verification, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "revision": self.revision,
            "scope": self.scope.to_dict() if self.scope else None,
            "memories": [m.to_dict() for m in self.memories],
            "markdown": self.markdown,
            "left_out": [
                {"memory_id": v.memory.id, "decision": v.decision.value,
                 "scope": v.scope.value, "reason": v.reason}
                for v in self.left_out
            ],
        }


class MemoryService:
    """Store, find, verify and inject memories.

    ``memories`` is the ``MemoryStore``; ``store(...)`` is the method that stores one.

    ``source`` is the code every repository is read from (a working copy, GitHub, a
    fake), or a ``SourceFactory`` giving the source of each repository (a plain
    function from repository to source is opened once per repository); it is closed
    with the service. ``locator`` is ladder
    step 4 (default: tree-sitter anchors and the search across moved files).
    ``truth_ref`` names the main line of every repository (default: each repository's
    default branch, as its source finds it); see ``verify``.
    """

    def __init__(
        self,
        store: MemoryStore,
        source: CodeSource | SourceFactory | Callable[[str], CodeSource] | None = None,
        *,
        actor: str = "vmem",
        locator: Locator | None = None,
        truth_ref: str | None = None,
    ) -> None:
        self.memories = store
        self.telemetry = TelemetryBuffer(store)  # ``retrieved`` events, written behind
        # A plain function from repository to source is opened once per repository.
        self._source: CodeSource | SourceFactory | None = (
            source if source is None or isinstance(source, CodeSource | SourceFactory)
            else SourcesByRepo(source))
        self.actor = actor
        self.truth_ref = truth_ref
        if locator is None:
            from verified_memory.verify.anchored import AnchorLocator

            locator = AnchorLocator()
        self.locator = locator

    # ------------------------------------------------------------------ plumbing

    def source_for(self, repo: str) -> CodeSource:
        """The code of ``repo``: the one source, or what the factory gives for it."""
        if self._source is None:
            raise SourceUnavailable(f"no code source is configured for {repo}")
        if isinstance(self._source, CodeSource):
            return self._source
        return self._source(repo)

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

    def record_retrieval(self, memories: Sequence[Memory], via: str,
                         **detail: Any) -> list[Memory]:
        """Record that these memories were handed on (a ``retrieved`` event each, with
        ``via`` and ``detail``); the reads of this service do it themselves, a caller
        that picks from ``memories_citing`` does it for what it picked.

        Written behind the read (telemetry.py): a read must not cost a transaction. One
        time and one detail for the whole read: it is one retrieval."""
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
        return self.record_retrieval([memory], "get")[0]

    def get_recent(self, repo: str, limit: int = 50) -> list[Memory]:
        """Active memories, most recently refreshed first (not yet verified)."""
        validate_repo(repo)
        _check_limit(limit)
        return self.record_retrieval(self.memories.recent(repo, limit=limit), "recent")

    def search(self, repo: str, query: str, limit: int = 20) -> list[Memory]:
        validate_repo(repo)
        _check_limit(limit)
        return self.record_retrieval(self.memories.search(repo, query, limit=limit), "search")

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
        return self.record_retrieval(self.memories.by_path(repo, path, lines=lines, limit=limit),
                               "path")

    def memories_citing(self, repo: str, paths: Iterable[str], *,
                        limit: int = 10_000) -> dict[str, list[Memory]]:
        """Active memories citing each path (an index look-up per path; at most
        ``limit`` a path), in the order the paths were given. No retrieval is recorded:
        the caller picks which of them it hands on (``record_retrieval``)."""
        validate_repo(repo)
        _check_limit(limit)
        found: dict[str, list[Memory]] = {}
        for path in dict.fromkeys(paths):
            found[path] = self.memories.by_path(repo, path, limit=limit)
        return found

    def locate(self, repo: str, citations: Sequence[Citation], ref: str) -> list[CitationCheck]:
        """Where stored citations' code is at ``ref``, by the verification ladder: a
        look, with no decision and no telemetry (a review places citations at its merge
        base this way). A ref that cannot be read makes every check ``unverifiable``."""
        source = self.source_for(validate_repo(repo))
        try:
            revision = source.resolve(ref)
        except SourceUnavailable:
            revision = ref
        return Verifier(source, locator=self.locator).check(citations, revision)

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

    def standing(self, memory: Memory) -> str:
        """Where a memory stands under the ref rule, in one line for people: where it was
        last judged on the main line, or why it has not been (stored on a branch that is
        not merged yet: judged once merged)."""
        if memory.verified_ref and memory.verified_commit:
            return (f"last judged on {memory.verified_ref} at {memory.verified_commit[:12]}"
                    f" ({memory.status.value})")
        try:
            source = self.source_for(memory.repo)
            main = source.main_line(self.truth_ref)
            if main is None:
                return "not judged yet: this repository's main line is unknown"
            tip = source.resolve(main.ref)
            commits = {c.sha for c in memory.citations if c.sha}
            unpinned = any(not c.sha for c in memory.citations)  # stored from the worktree
            if unpinned or source.contained(commits, tip) != commits:
                return (f"stored on a commit that {main.name} does not contain yet (a branch, "
                        f"or uncommitted files): it is judged on {main.name} once merged")
            return (f"not judged on {main.name} yet: its commit is on {main.name}, so the next "
                    f"verification at {main.name}'s tip judges it")
        except (NotFound, SourceUnavailable) as exc:
            return f"not judged on the main line yet (where it stands could not be read: {exc})"

    def stats(self, repo: str) -> RepoStats:
        repo = validate_repo(repo)
        self.telemetry.flush()
        return self.memories.stats(repo)

    # ------------------------------------------------------------------ verifying

    def scope(self, repo: str, *, ref: str = "HEAD", apply: bool | None = None) -> PassScope:
        """What a pass over ``repo`` at ``ref`` may change, and why (see ``verify``): for
        entry points that say so before they verify."""
        return pass_scope(self.source_for(validate_repo(repo)), ref, apply=apply,
                          branch=self.truth_ref)

    def verify(
        self,
        ids: Iterable[str] | None = None,
        *,
        repo: str | None = None,
        ref: str = "HEAD",
        apply: bool | None = None,
        include_invalid: bool = False,
        on_progress: Progress | None = None,
    ) -> VerificationReport:
        """Check memories (by id, or every active memory of ``repo``) at ``ref``.

        The ref rule decides what the pass may change (``verify/scope.py``). At the
        main line's tip (``apply=None``, the default) it reaches verdicts: memories
        whose citations all hold are refreshed (relocated citations rewritten to their
        new place, the old one kept in telemetry), memories with changed or missing
        code are invalidated with a reason naming the citations, and, with
        ``include_invalid``, invalid memories that hold again are revived. Anywhere
        else the pass is a view that changes nothing stored (``apply=False`` makes any
        pass a dry run); ``apply=True`` applies verdicts at a ``ref`` on the main line
        that is not its tip (after a merge). Unverifiable citations are never a verdict,
        and a memory stored on a commit the checked revision does not contain (an
        unmerged branch) is not invalidated there. Every verdict records the main line
        and commit it was made at."""
        started = time.perf_counter()
        if ids is not None:
            memories = self.memories.get_many(list(ids))
        elif repo is not None:
            name = validate_repo(repo)
            memories = self.memories.recent(name, limit=None)
            if include_invalid:
                memories += self.memories.recent(name, limit=None, status=Status.INVALID)
        else:
            raise ValidationError("verify needs memory ids or a repo")
        by_repo: dict[str, list[Memory]] = {}
        for memory in memories:
            by_repo.setdefault(memory.repo, []).append(memory)
        decided: list[tuple[Verification, Transition | None, TelemetryEvent]] = []
        scopes: dict[str, PassScope] = {}
        requests = 0
        done = 0
        now = utcnow()
        verifiers: dict[int, Verifier] = {}  # one per source: files are read once per run
        for repo_name, group in by_repo.items():
            source = self.source_for(repo_name)
            before = _requests(source)
            scope = scopes[repo_name] = pass_scope(source, ref, apply=apply,
                                                   branch=self.truth_ref)
            verifier = verifiers.setdefault(id(source), Verifier(source, locator=self.locator))
            checked: list[tuple[Memory, list[CitationCheck], Decision, str | None]] = []
            for memory in group:
                # An unreadable ref makes every citation unverifiable (never a verdict).
                checks = verifier.check(memory.citations, scope.revision)
                checked.append((memory, checks, *decide(checks)))
                done += 1
                if on_progress is not None:
                    on_progress(done, len(memories))
            placing = _to_place(scope, [(m, d) for m, _, d, _ in checked])
            inside = _contained(source, scope, placing)
            asked = {m.id for m in placing}
            spent = _requests(source) - before
            requests += spent
            decided += [self._decide(memory, checks, decision, reason, scope, now,
                                     contained=inside if memory.id in asked else None,
                                     include_invalid=include_invalid, requests=spent)
                        for memory, checks, decision, reason in checked]
        # Written after every repository was checked: one transaction per batch, not
        # one per repository (a pass over a team's store spans many).
        results = {v.memory.id: v for v in self._carry_out(decided)}
        return VerificationReport(
            verifications=tuple(results[m.id] for m in memories if m.id in results),
            revisions={repo_name: scope.revision for repo_name, scope in scopes.items()},
            duration_ms=(time.perf_counter() - started) * 1000,
            requests=requests,
            scopes=scopes,
        )

    def _decide(self, memory: Memory, checks: list[CitationCheck], decision: Decision,
                reason: str | None, scope: PassScope, now: datetime, *,
                contained: frozenset[str] | None, include_invalid: bool, requests: int,
                ) -> tuple[Verification, Transition | None, TelemetryEvent]:
        """The verdict on one memory (or the view of it), the change it calls for (None:
        nothing changes), and the event that records the outcome.

        ``contained``: the citation commits the checked revision contains, when the
        memory had to be placed (None: it was judged on the main line before). One that
        does not hold and cites a commit not contained (an unmerged branch) is not
        judged until it is merged."""
        kind = scope.kind
        transition: Transition | None = None
        merged = contained is None or all(c.sha in contained for c in memory.citations)
        if kind.judges:
            if memory.status is Status.ACTIVE and decision is Decision.INVALIDATE \
                    and not merged:
                kind = Scope.UNMERGED
                reason = (f"{reason}; not judged: it was stored on a commit that "
                          f"{scope.verdict_ref} does not contain yet (judged once merged)")
            elif decision is not Decision.UNVERIFIED and (
                    memory.status is Status.ACTIVE
                    or (memory.status is Status.INVALID and include_invalid
                        and decision is Decision.REFRESH)):
                transition = self._verdict(memory, checks, decision, reason, scope,
                                           contained, now, requests)
        verification = Verification(memory, tuple(checks), decision, scope.revision, reason,
                                    scope=kind, ref=scope.ref)
        if transition is not None:
            return verification, transition, transition.events[0]
        outcome = self._outcome_event(memory, checks, decision, reason, scope, kind,
                                      requests, now)
        return verification, None, outcome

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
                    verification = replace(verification,
                                           memory=transition.apply_to(verification.memory),
                                           change=_change(transition))
                out.append(verification)
        return out

    def _outcome_event(self, memory: Memory, checks: Sequence[CitationCheck],
                       decision: Decision, reason: str | None, scope: PassScope, kind: Scope,
                       requests: int, at: datetime) -> TelemetryEvent:
        """The one event of a verification that changes nothing: ``unverifiable`` in a
        verdict pass (the memory stays as it is), else ``checked`` (a view, a dry run,
        an unmerged memory, or a memory whose status a verdict does not touch). Views
        are "what was seen", kept apart from verdicts so dashboards never count them."""
        outcomes = [c.to_dict() for c in checks]
        if kind.judges and decision is Decision.UNVERIFIED and memory.status is Status.ACTIVE:
            return self._event(EventKind.UNVERIFIABLE, memory, None, at, ref=scope.ref,
                               revision=scope.revision, outcomes=outcomes, reason=reason,
                               pass_requests=requests)
        return self._event(EventKind.CHECKED, memory, None, at, scope=kind.value,
                           ref=scope.ref, revision=scope.revision, decision=decision.value,
                           reason=reason, outcomes=outcomes, pass_requests=requests)

    def _verdict(self, memory: Memory, checks: Sequence[CitationCheck], decision: Decision,
                 reason: str | None, scope: PassScope, contained: frozenset[str] | None,
                 now: datetime, requests: int) -> Transition:
        """The change a verdict makes, with its events (the outcome event first): the
        memory is refreshed (revived, if it was invalid) or invalidated, and records the
        main line and commit of the verdict."""
        revision, at = scope.revision, now
        where = {"ref": scope.ref, "revision": revision}
        outcomes = [c.to_dict() for c in checks]
        # The outcome event carries what the whole pass spent (API requests), so
        # dashboards can sum the cost of verification from telemetry alone.
        if decision is Decision.INVALIDATE:
            return Transition(
                memory.id, status=Status.INVALID, invalid_reason=reason, add_verifications=1,
                verified_ref=scope.verdict_ref, verified_commit=revision,
                events=(self._event(EventKind.VERIFIED_INVALID, memory, None, at, **where,
                                    outcomes=outcomes, pass_requests=requests),
                        self._event(EventKind.INVALIDATED, memory, None, at, reason=reason,
                                    **where)))
        events = [self._event(EventKind.VERIFIED_VALID, memory, None, at, **where,
                              outcomes=outcomes, pass_requests=requests)]
        events += [self._event(EventKind.RELOCATED, memory, None, at, **where,
                               old=str(c.citation.location), new=str(c.location))
                   for c in checks if c.outcome is Outcome.RELOCATED]
        revived = memory.status is Status.INVALID
        if revived:
            events.append(self._event(EventKind.REVIVED, memory, None, at, **where,
                                      was=memory.invalid_reason))
        else:
            events.append(self._event(EventKind.REFRESHED, memory, None, at,
                                      by="verification"))
        # A citation made on a commit the main line does not contain (a branch that was
        # squashed or rebased in) is pinned to the revision that holds it now, so the
        # memory's citations name main-line commits from now on.
        citations = tuple(_advance(c, revision, keep_pins=contained is None
                                   or c.citation.sha in contained) for c in checks)
        return Transition(
            memory.id, expect=memory.status, status=Status.ACTIVE if revived else None,
            refreshed_at=now, add_verifications=1, verified_commit=revision,
            verified_ref=scope.verdict_ref,
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
                budget: int | None = None, memories: Sequence[Memory] | None = None,
                dry_run: bool = False, list_left_out: bool = False) -> Context:
        """Verify the most recent memories (those matching ``query`` first, when given;
        or exactly ``memories``, e.g. a search's results), then format only those that
        passed: at ``hydration`` (``summary``, ``full`` or ``files``), within ``budget``
        estimated tokens (default ``prompt.DEFAULT_BUDGET``), most relevant to ``query``
        first, else most recently refreshed first. ``list_left_out`` lists the memories
        that did not pass by id and reason (for a caller that may act on them).

        The verification follows the ref rule (``verify``): at the main line's tip it
        refreshes and invalidates; anywhere else, or with ``dry_run``, it is a view that
        only decides what is shown here."""
        from verified_memory.models import Location
        from verified_memory.prompt import Hydration, render_context

        level = Hydration.parse(hydration)
        if memories is not None:
            candidates = list(memories)
        else:
            candidates = self.get_recent(repo, limit=limit)
            if query and query.strip():
                found = self.search(repo, query, limit=limit)
                candidates = list({m.id: m for m in [*found, *candidates]}.values())[:limit]
        apply = False if dry_run else None
        report = self.verify([m.id for m in candidates], ref=ref, apply=apply)
        scope = report.scopes.get(repo) or self.scope(repo, ref=ref, apply=apply)
        revision = scope.revision

        def read_code(location: Location) -> str:
            return self.read_citation(repo, location.path,
                                      (location.line_start, location.line_end), ref=revision)

        rendered = render_context(repo, revision, report.verifications, hydration=level,
                                  budget=budget, query=query, list_left_out=list_left_out,
                                  read_code=read_code if level is Hydration.FILES else None,
                                  view=None if scope.judges else scope.cause)
        return Context(
            repo=repo, revision=revision,
            memories=tuple(v.memory for v in report.verifications if v.passed),
            markdown=rendered.text, left_out=rendered.left_out, scope=scope,
            rendered=rendered, verifications=report.verifications,
        )

    def recite(self, memory_id: str, citations: Sequence[CitationRef | Mapping[str, Any]],
               *, ref: str = "HEAD", reason: str | None = None) -> Memory:
        """Point an active or invalid memory at new lines, in one atomic step: the new
        citations are fingerprinted at ``ref`` and replace the old ones, and an invalid
        memory becomes active again (for code that moved further than relocation could
        follow). At the main line's tip the memory counts as judged there; anywhere else
        it waits, like a memory stored on a branch, until its commit is merged."""
        memory = self.memories.get(memory_id)
        if memory.status not in (Status.ACTIVE, Status.INVALID):
            raise Conflict(f"memory {memory_id} is {memory.status.value}; only an active or "
                           "invalid memory can be re-cited")
        if reason is not None and (not isinstance(reason, str) or len(reason) > 2000):
            raise ValidationError("reason must be a string of at most 2000 characters")
        new = NewMemory.parse({"repo": memory.repo, "subject": memory.subject,
                               "fact": memory.fact, "citations": list(citations)})
        scope = self.scope(memory.repo, ref=ref)
        built = self._build(new, ref=scope.revision)
        now = utcnow()
        detail = {"ref": scope.ref, "revision": scope.revision,
                  "old": [str(c.location) for c in memory.citations],
                  "new": [str(c.location) for c in built.citations],
                  "reason": (reason or "").strip() or None}
        events = [self._event(EventKind.RECITED, memory, None, now, **detail)]
        if memory.status is Status.INVALID:
            events.append(self._event(EventKind.REVIVED, memory, None, now, by="recite",
                                      was=memory.invalid_reason, **detail))
        judged = scope.judges
        return self._transition(memory, Transition(
            memory_id, expect=memory.status, status=Status.ACTIVE, citations=built.citations,
            refreshed_at=now, unconfirm=not judged,
            verified_ref=scope.verdict_ref if judged else None,
            verified_commit=scope.revision if judged else None, events=tuple(events)),
            "re-cite")

    def close(self) -> None:
        try:
            self.telemetry.close()  # a read never fails for its retrieved events
        finally:
            self.telemetry.discard()
            self.memories.close()
        if self._source is not None:
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


def _requests(source: CodeSource) -> int:
    """Requests the source has sent so far (0 for one that spends none)."""
    return source.requests if isinstance(source, CountsRequests) else 0


def _change(transition: Transition) -> str:
    """What an applied verdict did, in the word reports use."""
    if transition.status is Status.INVALID:
        return "invalidated"
    if transition.status is Status.ACTIVE and transition.expect is Status.INVALID:
        return "revived"
    return "refreshed"


def _advance(check: CitationCheck, sha: str, *, keep_pins: bool = True) -> Citation:
    """The citation after a passing check: its new place and pins, same fingerprint.

    A file whose blob did not change (step 1) keeps its old pins, unless they point off
    the main line (``keep_pins`` False): "at that commit the file was this blob" is
    still true, step 1 still answers next time, and a pass over unchanged code then
    rewrites no citation rows."""
    assert check.location is not None
    if check.step == 1 and keep_pins:
        return check.citation
    return check.citation.moved_to(check.location, sha=sha, blob_sha=check.blob_sha)


def _to_place(scope: PassScope, checked: Sequence[tuple[Memory, Decision]]) -> list[Memory]:
    """The memories a verdict pass must place on the main line before changing them.

    A memory judged on the main line before needs no placing at the tip: its citations
    were pinned to main-line commits. Off the tip (an explicit apply after a merge) every
    memory is placed, since one may cite code newer than the revision."""
    if not scope.judges:
        return []
    return [m for m, decision in checked
            if decision is not Decision.UNVERIFIED
            and m.status in (Status.ACTIVE, Status.INVALID)
            and (m.verified_ref is None or not scope.at_tip)]


def _contained(source: CodeSource, scope: PassScope,
               placing: Sequence[Memory]) -> frozenset[str]:
    """The commits of these memories' citations that the checked revision contains: one
    question to the source per pass. A source that cannot answer contains nothing (so
    no verdict against a memory it cannot place, and pins move to the revision)."""
    here = frozenset({scope.revision})  # a memory stored at this very commit: no question
    commits = {c.sha for m in placing for c in m.citations if c.sha} - here
    if not commits:
        return here
    try:
        return here | source.contained(commits, scope.revision)
    except (NotFound, SourceUnavailable):
        return here


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise ValidationError(f"limit must be a whole number from 1 to 10000, got {limit!r}")
