"""One verification pass: check memories' citations at a ref, decide under the ref rule,
and carry the decisions out (``MemoryService.verify`` runs one).

Per repository the pass finds its scope (``verify/scope.py``: a verdict at the main
line's tip, else a view), checks every citation (``verify/ladder.py``), decides per
memory (``verify/decision.py``), and, in a verdict pass, places never-judged memories on
the main line (a memory stored on an unmerged branch is not invalidated there) and lets
memories nobody used for the policy's days expire. The decisions of every repository are
written together, in batches of ``APPLY_BATCH`` transitions per store transaction, each
with the events that record it; a check that changes nothing leaves one event (a
verdict pass's ``unverifiable``, else ``checked``: what was seen, never counted as a
verdict).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from verified_memory.errors import NotFound, SourceUnavailable, VerifiedMemoryError
from verified_memory.models import (
    NEVER_JUDGED,
    Citation,
    CitationCheck,
    Decision,
    EventKind,
    Memory,
    Outcome,
    Scope,
    Status,
    TelemetryEvent,
    Transition,
    Verification,
    replaced,
    utcnow,
)
from verified_memory.quality import expired_at
from verified_memory.sources.base import CodeSource, CountsRequests, KnowsCommits
from verified_memory.store.base import MemoryStore
from verified_memory.telemetry import TelemetryBuffer
from verified_memory.verify.citing import refingerprinted
from verified_memory.verify.decision import decide
from verified_memory.verify.files import FileCache
from verified_memory.verify.ladder import Locator, Verifier
from verified_memory.verify.scope import PassScope, pass_scope

__all__ = ["APPLY_BATCH", "VerificationPass", "VerificationReport", "stale_rule_detail"]

Progress = Callable[[int, int], None]
#: A decision: the verification as the pass reports it if its transition (None: no
#: change) is applied, the transition, the event that records the outcome, and the
#: memory as it was read (reported instead if another writer came first).
Decided = tuple[Verification, Transition | None, TelemetryEvent, Memory]

#: Transitions written per store transaction during a verification pass. Each commit
#: of a SQLite store may checkpoint its write-ahead log, rewriting the pages every batch
#: touches (the newest end of the recency index, the telemetry's tail): 33,000 verdicts
#: took 4.3 s in batches of 500, 2.2 s in batches of 5,000, which hold the write lock
#: for about a fifth of a second each.
APPLY_BATCH = 5000


@dataclass(frozen=True, slots=True)
class VerificationReport:
    """One verification pass: a ``Verification`` per memory, in the order asked."""

    verifications: tuple[Verification, ...]
    revisions: Mapping[str, str]  # repo -> revision checked
    duration_ms: float
    requests: int = 0  # requests the source sent (GitHub); 0 for local sources
    scopes: Mapping[str, PassScope] = field(default_factory=dict)  # repo -> what it may change
    #: Ids of the unmerged memories whose commit the working copy does not have (a
    #: shallow clone): whether the main line contains it could not be told.
    unplaced: frozenset[str] = frozenset()

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
    def not_in_clone(self) -> int:
        """Of ``unmerged``, those whose commit the clone lacks (a shallow clone)."""
        return sum(1 for v in self.verifications
                   if v.scope is Scope.UNMERGED and v.memory.id in self.unplaced)

    @property
    def behind(self) -> int:
        """Memories an explicit apply did not judge: judged at a later main-line commit."""
        return sum(1 for v in self.verifications if v.scope is Scope.BEHIND)

    @property
    def stale_rules(self) -> list[Memory]:
        """Promoted memories this pass invalidated: their rules are stale now."""
        return [v.memory for v in self.verifications
                if v.change == "invalidated" and v.memory.stale_rule]

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
            "not_in_clone": self.not_in_clone,
            "behind": self.behind,
            "stale_rules": {m.id: m.stale_rule for m in self.stale_rules},
            "memories": [v.to_dict() for v in self.verifications],
        }


class VerificationPass:
    """A pass over memories, writing through ``store`` as ``actor`` (see the module)."""

    def __init__(self, store: MemoryStore, telemetry: TelemetryBuffer, *, actor: str,
                 locator: Locator, truth_ref: str | None = None, expire_days: int = 0,
                 now: datetime | None = None) -> None:
        self.store = store
        self.telemetry = telemetry
        self.actor = actor
        self.locator = locator
        self.truth_ref = truth_ref
        self.expire_days = expire_days
        self.now = now or utcnow()
        #: The details of the events of unchanged memories (``_unchanged``), by what
        #: they say.
        self._details: dict[tuple[str, str, int, int],
                            tuple[dict[str, Any], dict[str, Any]]] = {}

    def _event(self, kind: EventKind, memory: Memory, _repo: None, at: datetime, /,
               **detail: Any) -> TelemetryEvent:
        return TelemetryEvent(kind=kind, repo=memory.repo, memory_id=memory.id,
                              actor=self.actor, at=at, detail=detail)

    def run(self, memories: Sequence[Memory], source_for: Callable[[str], CodeSource], *,
            ref: str = "HEAD", apply: bool | None = None,
            revive: frozenset[Status] = frozenset(),
            on_progress: Progress | None = None) -> VerificationReport:
        """Check ``memories`` at ``ref`` (``apply`` as ``MemoryService.verify`` takes
        it); a memory in a ``revive`` status that holds at the tip becomes active."""
        started = time.perf_counter()
        by_repo: dict[str, list[Memory]] = {}
        for memory in memories:
            by_repo.setdefault(memory.repo, []).append(memory)
        decided: list[Decided] = []
        scopes: dict[str, PassScope] = {}
        requests = 0
        done = 0
        now = self.now
        verifiers: dict[int, Verifier] = {}  # one per source: files are read once per run
        lacked: set[str] = set()  # citation commits a clone does not have (shallow)
        for repo_name, group in by_repo.items():
            source = source_for(repo_name)
            before = _requests(source, before_pass=True)
            scope = scopes[repo_name] = pass_scope(source, ref, apply=apply,
                                                   branch=self.truth_ref)
            verifier = verifiers.setdefault(id(source), Verifier(source, locator=self.locator))
            checked: list[tuple[Memory, list[CitationCheck], Decision, str | None]] = []
            for memory in group:
                done += 1
                if on_progress is not None:
                    on_progress(done, len(memories))
                if self._unused(memory):
                    decided.append(self._expire(memory, scope, spent=0))
                    continue
                # An unreadable ref makes every citation unverifiable (never a verdict).
                checks = verifier.check(memory.citations, scope.revision)
                checked.append((memory, checks, *decide(checks)))
            placing = _to_place(scope, [(m, d) for m, _, d, _ in checked])
            inside = _contained(source, scope, placing)
            lacking = _lacking(source, scope, placing, inside)
            lacked |= lacking
            asked = {m.id for m in placing}
            newer = _judged_later(source, scope, [m for m, _, _, _ in checked])
            spent = _requests(source) - before
            if isinstance(source, CountsRequests):  # the next pass counts from here
                source.counted()
            requests += spent
            decided += [self._decide(memory, checks, decision, reason, scope, now,
                                     contained=inside if memory.id in asked else None,
                                     revive=revive, requests=spent, files=verifier.files,
                                     behind=memory.id in newer, lacking=lacking,
                                     lacking_why=(source.lacking if isinstance(
                                         source, KnowsCommits) else None))
                        for memory, checks, decision, reason in checked]
        # Written after every repository was checked: one transaction per batch, not
        # one per repository (a pass over a team's store spans many).
        results = {v.memory.id: v for v in self._carry_out(decided)}
        unplaced = frozenset(m.id for m in memories if any(
            c.sha in lacked for c in m.citations))
        return VerificationReport(
            verifications=tuple(results[m.id] for m in memories if m.id in results),
            revisions={repo_name: scope.revision for repo_name, scope in scopes.items()},
            duration_ms=(time.perf_counter() - started) * 1000,
            requests=requests,
            scopes=scopes,
            unplaced=unplaced,
        )

    def _unused(self, memory: Memory) -> bool:
        """An active memory nobody used for the policy's days (decay)."""
        deadline = expired_at(memory, self.expire_days)
        return memory.status is Status.ACTIVE and deadline is not None and deadline <= self.now

    def _expire(self, memory: Memory, scope: PassScope, *, spent: int) -> Decided:
        """An unused memory is not injected, its code unread. In a verdict pass it
        expires (no verdict on its code: it keeps its citations, and comes back when it
        is verified and used); in a view it is only left out."""
        since = (memory.used_at or memory.created_at).isoformat()
        reason = f"unused since {since[:10]} ({self.expire_days} days)"
        verification = Verification(memory, (), Decision.EXPIRE, scope.revision, reason,
                                    scope=scope.kind, ref=scope.ref)
        if not scope.judges:
            return verification, None, self._outcome_event(
                memory, (), Decision.EXPIRE, reason, scope, scope.kind, spent, self.now), memory
        event = self._event(EventKind.EXPIRED, memory, None, self.now, ref=scope.ref,
                            revision=scope.revision, unused_since=since,
                            expire_days=self.expire_days)
        transition = Transition(memory.id, status=Status.EXPIRED, events=(event,))
        return (replaced(verification, memory=transition.apply_to(memory),
                         change=_change(transition)), transition, event, memory)

    def _decide(self, memory: Memory, checks: list[CitationCheck], decision: Decision,
                reason: str | None, scope: PassScope, now: datetime, *,
                contained: frozenset[str] | None, revive: frozenset[Status], requests: int,
                files: FileCache, behind: bool = False,
                lacking: frozenset[str] = frozenset(),
                lacking_why: Callable[[str, str], str] | None = None) -> Decided:
        """The verdict on one memory (or the view of it), the change it calls for (None:
        nothing changes), and the event that records the outcome (``Decided``).

        ``contained``: the citation commits the checked revision contains, when the
        memory had to be placed (None: it was judged on the main line before). One that
        does not hold and cites a commit not contained (an unmerged branch) is not
        judged until it is merged. ``behind``: the memory was judged at a later commit of
        the main line than this explicit apply's, whose verdict stands. ``lacking``: the
        citation commits the source could not place (``KnowsCommits``), which its
        ``lacking_why`` words for the reason instead of "not merged yet"."""
        kind = scope.kind
        transition: Transition | None = None
        merged = contained is None or all(c.sha in contained for c in memory.citations)
        if kind.judges:
            if behind and decision is not Decision.UNVERIFIED:
                kind = Scope.BEHIND
                reason = (f"{reason + '; ' if reason else ''}not judged: it was judged at a "
                          f"later commit of {scope.verdict_ref} "
                          f"({(memory.verified_commit or '')[:12]}), whose verdict stands")
            elif memory.status is Status.ACTIVE and decision is Decision.INVALIDATE \
                    and not merged:
                kind = Scope.UNMERGED
                absent = sorted({c.sha[:12] for c in memory.citations if c.sha in lacking})
                reason = (f"{reason}; not judged: " + (
                    lacking_why(", ".join(absent), scope.verdict_ref)
                    if absent and lacking_why is not None else
                    f"it was stored on a commit that {scope.verdict_ref} does not contain "
                    "yet (judged once merged)"))
            elif decision is not Decision.UNVERIFIED and (
                    memory.status is Status.ACTIVE
                    or (memory.status in revive and decision is Decision.REFRESH)):
                transition = self._verdict(memory, checks, decision, reason, scope,
                                           contained, now, requests, files)
        if transition is not None:  # reported as applied: one copy, not two
            return (Verification(transition.apply_to(memory), tuple(checks), decision,
                                 scope.revision, reason, scope=kind, ref=scope.ref,
                                 change=_change(transition)),
                    transition, transition.events[0], memory)
        verification = Verification(memory, tuple(checks), decision, scope.revision, reason,
                                    scope=kind, ref=scope.ref)
        outcome = self._outcome_event(memory, checks, decision, reason, scope, kind,
                                      requests, now)
        return verification, None, outcome, memory

    def _carry_out(self, decided: Sequence[Decided]) -> list[Verification]:
        out = [v for v, transition, _, _ in decided if transition is None]
        pending = [(v, transition, memory) for v, transition, _, memory in decided
                   if transition is not None]
        for start in range(0, len(pending), APPLY_BATCH):
            batch = pending[start:start + APPLY_BATCH]
            applied = self.store.apply([t for _, t, _ in batch])  # a failure: raised
            for (verification, _, memory), done in zip(batch, applied, strict=True):
                # Not applied: another writer changed the memory meanwhile; report it as
                # it was.
                out.append(verification if done
                           else replaced(verification, memory=memory, change=None))
        # Nothing to change: the outcome alone is recorded, after anything queued, and
        # only once the verdicts are (recorded before them, it stayed when they failed,
        # and the pass run again counted it twice). What it records was only seen: a
        # store that refuses it now loses it with a warning, and the answer goes on.
        try:
            self.telemetry.flush([outcome for _, transition, outcome, _ in decided
                                  if transition is None])
        except VerifiedMemoryError as exc:
            self.telemetry.give_up(exc)
        return out

    def _outcome_event(self, memory: Memory, checks: Sequence[CitationCheck],
                       decision: Decision, reason: str | None, scope: PassScope, kind: Scope,
                       requests: int, at: datetime) -> TelemetryEvent:
        """The one event of a verification that changes nothing: ``unverifiable`` in a
        verdict pass (the memory stays as it is), else ``checked`` (a view, a dry run,
        an unmerged memory, or a memory whose status a verdict does not touch). Views
        are "what was seen", kept apart from verdicts so dashboards never count them."""
        outcomes = _outcomes(checks)
        if kind.judges and decision is Decision.UNVERIFIED and memory.status is Status.ACTIVE:
            return self._event(EventKind.UNVERIFIABLE, memory, None, at, ref=scope.ref,
                               revision=scope.revision, **outcomes, reason=reason,
                               pass_requests=requests)
        return self._event(EventKind.CHECKED, memory, None, at, scope=kind.value,
                           ref=scope.ref, revision=scope.revision, decision=decision.value,
                           reason=reason, **outcomes, pass_requests=requests)

    def _unchanged(self, memory: Memory, cited: int, scope: PassScope, now: datetime,
                   requests: int) -> Transition:
        """``_verdict``'s refresh of an active memory every one of whose ``cited`` files
        has the blob it cited (ladder step 1), at commits on the main line: the memory
        keeps its citations and pins, and its two events say what they say of every
        such memory of the pass. So their details are made once per pass and shared (a
        store encodes a shared detail once): a pass over 100,000 unchanged citations
        makes 66,000 such events. The transition ``_any_verdict`` makes (a test holds
        them together)."""
        key = (scope.ref, scope.revision, cited, requests)
        details = self._details.get(key)
        if details is None:
            where = {"ref": scope.ref, "revision": scope.revision}
            details = self._details[key] = (
                {**where, "outcomes": [], "unchanged": cited, "pass_requests": requests},
                {"by": "verification", **where})
        valid, refreshed = details
        return Transition(
            memory.id, expect=memory.status, **_as_read(memory),
            refreshed_at=now, add_verifications=1,
            verified_commit=scope.revision, verified_ref=scope.verdict_ref,
            events=(TelemetryEvent(EventKind.VERIFIED_VALID, memory.repo, memory.id,
                                   self.actor, now, valid),
                    TelemetryEvent(EventKind.REFRESHED, memory.repo, memory.id, self.actor,
                                   now, refreshed)))

    def _verdict(self, memory: Memory, checks: Sequence[CitationCheck], decision: Decision,
                 reason: str | None, scope: PassScope, contained: frozenset[str] | None,
                 now: datetime, requests: int, files: FileCache) -> Transition:
        """The change a verdict makes, with its events (the outcome event first): the
        memory is refreshed (revived, if it was invalid) or invalidated, and records the
        main line and commit of the verdict."""
        if (memory.status is Status.ACTIVE and decision is Decision.REFRESH and checks
                and all(c.step == 1 for c in checks)
                and (contained is None or all(c.citation.sha in contained for c in checks))):
            return self._unchanged(memory, len(checks), scope, now, requests)
        return self._any_verdict(memory, checks, decision, reason, scope, contained, now,
                                 requests, files)

    def _any_verdict(self, memory: Memory, checks: Sequence[CitationCheck],
                     decision: Decision, reason: str | None, scope: PassScope,
                     contained: frozenset[str] | None, now: datetime,
                     requests: int, files: FileCache) -> Transition:
        """``_verdict`` made field by field, whatever the checks found."""
        revision, at = scope.revision, now
        where = {"ref": scope.ref, "revision": revision}
        outcomes = _outcomes(checks)
        # The outcome event carries what the whole pass spent (API requests), so
        # dashboards can sum the cost of verification from telemetry alone.
        if decision is Decision.INVALIDATE:
            return Transition(
                memory.id, **_as_read(memory), status=Status.INVALID,
                invalid_reason=reason, add_verifications=1,
                verified_ref=scope.verdict_ref, verified_commit=revision,
                events=(self._event(EventKind.VERIFIED_INVALID, memory, None, at, **where,
                                    **outcomes, pass_requests=requests),
                        self._event(EventKind.INVALIDATED, memory, None, at, reason=reason,
                                    **where, **stale_rule_detail(memory))))
        events = [self._event(EventKind.VERIFIED_VALID, memory, None, at, **where,
                              **outcomes, pass_requests=requests)]
        events += [self._event(EventKind.RELOCATED, memory, None, at, **where,
                               old=str(c.citation.location), new=str(c.location))
                   for c in checks if c.outcome is Outcome.RELOCATED]
        revived = memory.status is not Status.ACTIVE
        if revived:
            events.append(self._event(EventKind.REVIVED, memory, None, at, **where,
                                      was=memory.status.value,
                                      reason=memory.invalid_reason))
        else:
            # The ref too, so an audit trail says where every change was decided.
            events.append(self._event(EventKind.REFRESHED, memory, None, at,
                                      by="verification", **where))
        # A citation made on a commit the main line does not contain (a branch that was
        # squashed or rebased in) is pinned to the revision that holds it now, so the
        # memory's citations name main-line commits from now on.
        citations = tuple(_advance(c, revision, files, keep_pins=contained is None
                                   or c.citation.sha in contained) for c in checks)
        return Transition(
            memory.id, expect=memory.status, **_as_read(memory),
            status=Status.ACTIVE if revived else None,
            refreshed_at=now, add_verifications=1, verified_commit=revision,
            verified_ref=scope.verdict_ref,
            citations=citations if citations != memory.citations else None,
            events=tuple(events))


def _outcomes(checks: Sequence[CitationCheck]) -> dict[str, Any]:
    """What an outcome event says of each citation: ``outcomes``, one entry for each
    citation whose file changed (or could not be read), and ``unchanged``, how many
    were valid because their file's blob did not change (ladder step 1). A pass over
    unchanged code writes a count, not a description of every citation: describing
    them was half the time of such a pass."""
    described = [c.to_dict() for c in checks if c.step != 1]
    unchanged = len(checks) - len(described)
    return {"outcomes": described, "unchanged": unchanged} if unchanged else {
        "outcomes": described}


def _requests(source: CodeSource, *, before_pass: bool = False) -> int:
    """Requests the source has sent so far (0 for one that spends none); with
    ``before_pass``, before this pass's time budget began (so what the scope line an
    entry point said first asked is counted with the pass)."""
    if not isinstance(source, CountsRequests):
        return 0
    return source.requests_before_pass if before_pass else source.requests


def stale_rule_detail(memory: Memory) -> dict[str, str]:
    """What an event retiring ``memory`` adds when it was promoted: the rules file
    whose rule is stale now (people take it out; a pass never edits a rules file)."""
    return {"stale_rule": memory.promoted_to} if memory.promoted_to else {}


def _as_read(memory: Memory) -> dict[str, Any]:
    """A verdict's compare-and-set: the memory as this pass read it.

    ``expect_judged``: the commit it was last judged at. Whether the verdict may stand
    (``behind``, ``_to_place``) was decided against it; a verdict another pass recorded
    since makes the store skip this one, so a late apply never overwrites a later one.

    ``expect_citations``: the citations the pass checked, for a memory never judged on
    the main line only. Re-cited off the main line while the pass ran, such a memory is
    still never judged, and only its citations tell. A memory judged at a commit is
    judged elsewhere (or nowhere) once re-cited, so its commit tells already (but for a
    re-cite at that very commit, where the verdict on its old citations is the one
    recorded there); the store then reads no citation rows, which cost a pass over
    100,000 unchanged citations a tenth of its time."""
    return {"expect_judged": memory.verified_commit or NEVER_JUDGED,
            "expect_citations": None if memory.verified_commit
            else Transition.cited(memory.citations)}


def _change(transition: Transition) -> str:
    """What an applied verdict did, in the word reports use."""
    if transition.status is Status.INVALID:
        return "invalidated"
    if transition.status is Status.ACTIVE and transition.expect is not Status.ACTIVE:
        return "revived"
    if transition.status is Status.EXPIRED:
        return "expired"
    return "refreshed"


def _advance(check: CitationCheck, sha: str, files: FileCache, *,
             keep_pins: bool = True) -> Citation:
    """The citation after a passing check: its new place and pins, and the fingerprint
    of the lines it now names (the same one, unless the code was found re-wrapped).

    A file whose blob did not change (step 1) keeps its old pins, unless they point off
    the main line (``keep_pins`` False): "at that commit the file was this blob" is
    still true, step 1 still answers next time, and a pass over unchanged code then
    rewrites no citation rows."""
    assert check.location is not None
    if check.step == 1 and keep_pins:
        return check.citation
    moved = check.citation.moved_to(check.location, sha=sha, blob_sha=check.blob_sha)
    if check.outcome is Outcome.RELOCATED and check.blob_sha is not None:
        # Re-wrapped code (a formatter split one line into five) holds at its new, longer
        # place, but the old lines' hashes do not describe it: kept, the next check of
        # the file would find it "moved" to where it already is, pass after pass.
        try:  # read in the check (a cache evicts only past 4,096 files)
            file = files.get(check.blob_sha)
        except (NotFound, SourceUnavailable):
            file = None  # unread now: it keeps the fingerprint it had, as before
        if file is not None and (
                tuple(file.hashes[moved.line_start - 1:moved.line_end])
                != tuple(moved.fingerprint.line_hashes)):
            return refingerprinted(moved, file)
    return moved


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


def _judged_later(source: CodeSource, scope: PassScope,
                  memories: Sequence[Memory]) -> frozenset[str]:
    """The memories an explicit apply (a verdict pass off the main line's tip) must not
    judge: last judged at a later commit of the main line than the one applied (an
    earlier push's job that ran late, a re-run of an old range). One question to the
    source per such commit; one it cannot answer leaves its memories judged, as before."""
    if not scope.judges or scope.at_tip:
        return frozenset()
    by_commit: dict[str, list[str]] = {}
    for memory in memories:
        judged = memory.verified_commit
        if judged and judged != scope.revision and memory.verified_ref == scope.verdict_ref:
            by_commit.setdefault(judged, []).append(memory.id)
    later: set[str] = set()
    for judged, ids in by_commit.items():
        try:
            if source.contained([scope.revision], judged):
                later.update(ids)
        except (NotFound, SourceUnavailable):
            continue
    return frozenset(later)


def _lacking(source: CodeSource, scope: PassScope, placing: Sequence[Memory],
             inside: frozenset[str]) -> frozenset[str]:
    """The citation commits of these memories not contained and not even in the
    repository (a shallow clone's cut): asked only where a verdict pass placed memories
    and found commits outside, of a source that can tell (``KnowsCommits``)."""
    if not isinstance(source, KnowsCommits):
        return frozenset()
    commits = {c.sha for m in placing for c in m.citations if c.sha} - inside
    if not commits:
        return frozenset()
    try:
        return source.lacks(commits)
    except (NotFound, SourceUnavailable):
        return frozenset()


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
