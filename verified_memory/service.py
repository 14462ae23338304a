"""``MemoryService``: the one public API every entry point (CLI, MCP, review bot) uses.

It joins a ``MemoryStore`` (where memories live) and a ``CodeSource`` (where the code
is) and keeps the product's rule: a memory reaches a prompt only after its citations
were checked against the code as it is now. Every operation writes its telemetry.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from verified_memory.audit import (
    acting_actor,
    cut_by_archive,
    named_memory,
    resolve_id,
    trail,
)
from verified_memory.errors import (
    Conflict,
    NotFound,
    ReadOnlyStore,
    SourceUnavailable,
    ValidationError,
)
from verified_memory.models import (
    Citation,
    CitationCheck,
    CitationRef,
    EventKind,
    Memory,
    MemoryFilter,
    NewMemory,
    RepoStats,
    SearchHit,
    Status,
    Stored,
    StoreInfo,
    TelemetryEvent,
    Tombstone,
    Transition,
    Verification,
    normalize_path,
    parse_citation,
    slot_maker,
    utcnow,
    validate_repo,
)
from verified_memory.prompt import relevance, sanitize_line
from verified_memory.quality import (
    QualityPolicy,
    classify,
    normalize_category,
    rank_search,
    safe_filtered,
)
from verified_memory.sources.base import CodeSource, SourceFactory, SourcesByRepo, no_file
from verified_memory.store._rows import REASON_MAX
from verified_memory.store.base import (
    MemoryStore,
    add_unless_duplicate,
    citing_code,
    oldest_never_applied,
    search_hits,
)
from verified_memory.store.views import ViewQuery
from verified_memory.telemetry import TelemetryBuffer
from verified_memory.verify.citing import fingerprint_citation
from verified_memory.verify.collector import collector_paused
from verified_memory.verify.files import FileCache
from verified_memory.verify.ladder import Locator, Verifier
from verified_memory.verify.passes import (
    VerificationPass,
    VerificationReport,
    stale_rule_detail,
)
from verified_memory.verify.scope import PassScope, pass_scope

if TYPE_CHECKING:
    from verified_memory.prompt import Rendered
    from verified_memory.verify.bulk import CheckedCitation, Item

__all__ = ["Context", "MemoryService", "Stored", "VerificationReport"]

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]

#: How often a store asks again when the memory it repeats changes between the check
#: and its refresh (each time another process invalidated or forgot it meanwhile).
STORE_ATTEMPTS = 3


#: A telemetry event from all its fields, in order (``models.slot_maker``).
_make_event = slot_maker(TelemetryEvent, [f.name for f in fields(TelemetryEvent)])


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
    default branch, as its source finds it); see ``verify``. ``policy`` holds the
    quality rules' settings (``quality.QualityPolicy``: categories needing approval,
    days until an unused memory expires, the soft limit).
    """

    def __init__(
        self,
        store: MemoryStore,
        source: CodeSource | SourceFactory | Callable[[str], CodeSource] | None = None,
        *,
        actor: str = "vmem",
        locator: Locator | None = None,
        truth_ref: str | None = None,
        policy: QualityPolicy | None = None,
    ) -> None:
        self.memories = store
        self.telemetry = TelemetryBuffer(store)  # ``retrieved`` events, written behind
        # A plain function from repository to source is opened once per repository.
        self._source: CodeSource | SourceFactory | None = (
            source if source is None or isinstance(source, CodeSource | SourceFactory)
            else SourcesByRepo(source))
        self.actor = actor
        self.truth_ref = truth_ref
        self.policy = policy or QualityPolicy()
        # repo -> (when found, the oldest never-applied memories): see soft_limit_warning
        # per repository over the soft limit: when counted, its active memories then,
        # and the oldest never applied
        self._oldest_unused: dict[str, tuple[float, int, tuple[Memory, ...]]] = {}
        self._locator = locator

    @property
    def locator(self) -> Locator:
        """Ladder step 4; the anchored one (tree-sitter and its grammars) is made when
        a command first verifies, not when one only reads memories."""
        if self._locator is None:
            from verified_memory.verify.anchored import AnchorLocator

            self._locator = AnchorLocator()
        return self._locator

    @locator.setter
    def locator(self, locator: Locator) -> None:
        self._locator = locator

    # ------------------------------------------------------------------ plumbing

    @property
    def current_actor(self) -> str:
        """Who the writes of this call are attributed to: the name an entry point set
        for it (``audit.acting_as``: an MCP client), else the service's ``actor``."""
        return acting_actor() or self.actor

    def resolve(self, memory_id: str) -> str:
        """The full id a unique prefix names (``audit.resolve_id``): ``NotFound`` when no
        memory has it, ``ValidationError`` when more than one starts with it."""
        return resolve_id(self.memories, memory_id)

    def _memory(self, memory_id: str) -> Memory:
        """The memory an id or a unique prefix of one names (``audit.named_memory``)."""
        return named_memory(self.memories, memory_id)

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
        return TelemetryEvent(kind=kind, repo=repo, memory_id=memory_id,
                              actor=self.current_actor, at=at or utcnow(), detail=detail)

    def record_retrieval(self, memories: Sequence[Memory], via: str,
                         **detail: Any) -> list[Memory]:
        """Record that these memories were handed on (a ``retrieved`` event each, with
        ``via`` and ``detail``); the reads of this service do it themselves, a caller
        that picks from ``memories_citing`` does it for what it picked.

        Written behind the read (telemetry.py): a read must not cost a transaction. One
        time and one detail for the whole read: it is one retrieval."""
        at, detail, actor = utcnow(), {"via": via, **detail}, self.current_actor
        retrieved = EventKind.RETRIEVED
        # Made slot by slot (every field, in order; no id or key yet): a read of fifty
        # memories makes fifty events, in 0.12 ms by keyword, 0.05 ms this way.
        self.telemetry.add([_make_event(retrieved, m.repo, m.id, actor, at, detail, None, None)
                            for m in memories])
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

    def store(self, memory: NewMemory | Mapping[str, Any], *, ref: str = "HEAD") -> Stored:
        """Fingerprint the citations at ``ref`` (or each citation's own ``sha``) and store.

        Refused with ``ValidationError``, writing nothing, when a citation points at
        nothing: a missing file, lines past its end, blank lines only, a binary file.

        Quality (``quality.py``): a memory whose category needs approval is stored
        ``pending``; one that says what an active memory already says about the same
        code is not stored twice (that one is refreshed, and returned, ``duplicate``;
        asked where the store adds, so that several processes storing one memory at
        once store it once: ``store.base.add_unless_duplicate``); one citing the same
        code but saying something else is stored with its possible ``conflicts`` named
        (in the answer and the ``created`` event). A pending memory is checked the same
        way, and also against the memories already waiting: a copy of one is that one
        (refreshed, ``duplicate``), so the queue holds a rule once."""
        new = memory if isinstance(memory, NewMemory) else NewMemory.parse(memory)
        built = self._build(new, ref=ref)
        self.telemetry.flush()  # not from inside the store's write below
        detail: dict[str, Any] = {}
        if built.status is Status.PENDING:
            detail["pending"] = f"category {built.category} needs approval"
        repeated: list[Memory] = []
        conflicts: tuple[str, ...] = ()

        def decide(citing: Sequence[Memory]) -> list[TelemetryEvent] | None:
            # Asked where the store adds (under its write lock), so that another
            # process storing the same memory at once is seen.
            nonlocal conflicts
            # Waiting for a person: a copy of a memory already waiting is that memory
            # (the queue is not filled with one rule proposed in every session); one
            # that repeats an active memory is a duplicate of it, as below.
            waiting = self._pending_copy(built, citing)
            if waiting is not None:
                repeated.append(waiting)
                return None
            novelty = classify(built, citing, self.policy)
            if novelty.duplicate_of is not None:
                repeated.append(novelty.duplicate_of)
                return None
            conflicts = tuple(m.id for m in novelty.conflicts)
            return [self._created(built, **detail, **({"conflicts": list(conflicts)}
                                                      if conflicts else {}))]

        for _ in range(STORE_ATTEMPTS):
            repeated.clear()
            if add_unless_duplicate(self.memories, built, decide):
                return Stored(built, conflicts=conflicts,
                              warnings=self._over_limit(built.repo))
            refreshed = self._refresh_if_still(repeated[0], built)
            if refreshed is not None:
                return Stored(refreshed, duplicate=True)
            # The memory it repeats was invalidated or forgotten since: ask again.
        raise Conflict(f"could not store the memory in {built.repo}: the memory it repeats "
                       f"changed {STORE_ATTEMPTS} times while it was stored; try again")

    def _pending_copy(self, memory: Memory, citing: Sequence[Memory]) -> Memory | None:
        """The pending memory that says what a pending ``memory`` says about the same
        code, if one is waiting (``quality.classify``'s rule, over the pending memories
        among ``citing``: ``store.base.repeat_candidates``, read where the store adds)."""
        if memory.status is not Status.PENDING:
            return None
        waiting = {m.id: m for m in citing if m.status is Status.PENDING}
        # classify weighs active memories: the waiting ones are weighed as if they were.
        novelty = classify(memory, [replace(m, status=Status.ACTIVE)
                                    for m in waiting.values()], self.policy)
        found = novelty.duplicate_of
        return waiting[found.id] if found is not None else None

    def _created(self, memory: Memory, **detail: Any) -> TelemetryEvent:
        # Attributed to who stored it: --created-by, else the caller (audit.py).
        return replace(self._event(EventKind.CREATED, memory,
                                   citations=len(memory.citations), **detail),
                       actor=memory.created_by)

    def _refresh_if_still(self, existing: Memory, attempt: Memory) -> Memory | None:
        """``existing`` refreshed for ``attempt`` (its duplicate), or None when it is no
        longer as it was found: invalidated, approved, forgotten by another process
        between the check and the refresh."""
        try:
            return self._refresh_duplicate(existing, attempt)
        except (Conflict, NotFound):
            return None

    def _refresh_duplicate(self, existing: Memory, attempt: Memory) -> Memory:
        now = utcnow()
        # No text of the attempt in the event: telemetry outlives a forgotten memory.
        event = replace(self._event(EventKind.REFRESHED, existing, by="duplicate"),
                        actor=attempt.created_by)
        return self._transition(existing, Transition(
            existing.id, expect=existing.status, refreshed_at=now, used_at=now,
            events=(event,)), "refresh")

    def _over_limit(self, repo: str) -> tuple[str, ...]:
        warning = self.soft_limit_warning(repo)
        return (warning,) if warning else ()

    def soft_limit_warning(self, repo: str) -> str | None:
        """A line for people when ``repo`` keeps more active memories than the policy's
        soft limit, naming the oldest that were never applied (candidates to retire).

        Whether the repository is over the limit is an index count that stops past
        the limit (asked on every store, it costs the limit, not the repository's
        size: counting a 100,000-memory repository in full cost a store about 6 ms).
        Past it, the count in the line and the names (a query of their own, not every
        memory read: that took 8.6 s there) are found once per service and repository,
        and again after ten minutes."""
        limit = self.policy.soft_limit
        if not limit or self.memories.count(validate_repo(repo), at_most=limit + 1) <= limit:
            return None
        named = self._oldest_unused.get(repo)
        if named is None or time.monotonic() - named[0] > 600:
            named = self._oldest_unused[repo] = (
                time.monotonic(), self.memories.count(repo),
                tuple(oldest_never_applied(self.memories, repo)))
        _, active_count, never_applied = named
        names = ", ".join(f"{m.id[:8]} ({sanitize_line(m.subject)})" for m in never_applied)
        return (f"{repo} has {active_count} active memories, over the soft limit of "
                f"{self.policy.soft_limit}: retire what no longer helps"
                + (f"; the oldest never applied: {names}" if names else ""))

    def supersede(self, old_id: str, new: NewMemory | Mapping[str, Any], *,
                  ref: str = "HEAD") -> Memory:
        """Replace an active memory with a corrected one, atomically (else ``Conflict``).

        A correction whose category needs approval is stored ``pending`` and the memory
        it corrects stays active (and injected) until the correction is approved:
        ``approve`` then retires it in the same transaction; ``reject`` leaves it as
        it was."""
        old = self._memory(old_id)
        old_id = old.id
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
        if built.status is Status.PENDING:  # proposed: nothing is retired yet
            self.memories.add(built, [self._created(
                built, supersedes=old_id,
                pending=f"category {built.category} needs approval")])
            return built
        self.memories.supersede(old_id, built, [
            replace(self._event(EventKind.CREATED, built, citations=len(built.citations),
                                supersedes=old_id), actor=built.created_by),
            replace(self._event(EventKind.SUPERSEDED, old, superseded_by=built.id,
                                **stale_rule_detail(old)), actor=built.created_by),
        ])
        return built

    def _build(self, new: NewMemory, *, ref: str, supersedes: str | None = None) -> Memory:
        source = self.source_for(new.repo)
        files = FileCache(source)
        citations = tuple(
            fingerprint_citation(source, files, ref, c, f"citations[{i}]")
            for i, c in enumerate(new.citations)
        )
        category = normalize_category(new.category) if new.category else None
        now = utcnow()
        return Memory(
            id=str(uuid.uuid4()), repo=new.repo, subject=new.subject, fact=new.fact,
            citations=citations, reason=new.reason, category=category, tags=new.tags,
            supersedes=supersedes, created_by=new.created_by or self.current_actor,
            created_at=now, refreshed_at=now, used_at=now,
            status=Status.PENDING if self.policy.needs_approval(category) else Status.ACTIVE,
        )

    def refresh(self, memory_id: str) -> Memory:
        """Mark an active memory as still useful (after the agent checked it): it ranks
        higher, and counts as used (an unused memory expires)."""
        memory = self._memory(memory_id)
        now = utcnow()
        return self._transition(memory, Transition(
            memory.id, refreshed_at=now, used_at=now,
            events=(self._event(EventKind.REFRESHED, memory, by="request"),)), "refresh")

    def invalidate(self, memory_id: str, reason: str) -> Memory:
        """Retire an active memory whose code no longer supports it."""
        why = _reason(reason, needed="an invalidation needs a reason")
        memory = self._memory(memory_id)
        return self._transition(memory, Transition(
            memory.id, status=Status.INVALID, invalid_reason=why,
            events=(self._event(EventKind.INVALIDATED, memory, reason=why,
                                **stale_rule_detail(memory)),)),
            "invalidate")

    def log_applied(self, memory_id: str, **detail: Any) -> Memory:
        """Record that an agent used this memory in a task.

        An expired memory comes back when it is used: it is verified first, and only if
        its citations hold at the main line's tip is it active again and applied."""
        memory = self._memory(memory_id)
        memory_id = memory.id
        if memory.status is Status.EXPIRED:
            (check,) = self.verify([memory_id], include_expired=True,
                                   expire=False).verifications
            if check.change != "revived":
                why = check.reason or (
                    "this is not the main line's tip" if not check.judged else "no verdict")
                raise Conflict(f"memory {memory_id} expired; it comes back when it holds at "
                               f"the main line's tip, and it did not now: {why}")
            memory = check.memory
        return self._transition(memory, Transition(
            memory_id, add_applications=1, used_at=utcnow(),
            events=(self._event(EventKind.APPLIED, memory, **detail),)), "apply")

    # ------------------------------------------------------------------ reading

    def get(self, memory_id: str) -> Memory:
        """The memory an id (or a unique prefix of one) names."""
        memory = self._memory(memory_id)
        return self.record_retrieval([memory], "get")[0]

    def get_recent(self, repo: str, limit: int = 50, *, category: str | None = None,
                   tag: str | None = None) -> list[Memory]:
        """Active memories, most recently refreshed first (not yet verified); of one
        category, or carrying one tag, when given."""
        validate_repo(repo)
        _check_limit(limit)
        return self.record_retrieval(
            self.memories.recent(repo, limit=limit, category=category, tag=tag), "recent")

    def search(self, repo: str, query: str, limit: int = 20, *, safe: bool = False,
               category: str | None = None, tag: str | None = None) -> list[Memory]:
        """Active memories matching ``query``, ranked as seed 003 ranks them: full-text
        score minus tag penalties (``quality.TAG_PENALTIES``); ``safe`` weighs the
        penalties fully and leaves out known bad patterns (``POISON_PATH``,
        ``PHANTOM_PATTERN``)."""
        validate_repo(repo)
        _check_limit(limit)
        # More than asked, so that penalised memories can sink below the cut; the text
        # score is how the query's words fall in subject, tags and fact (``relevance``),
        # ties kept in the store's order. Ranked on what that reads; only the memories
        # kept are read whole (a third of them, with the default pool).
        found = search_hits(self.memories, repo, query, limit=min(3 * limit, 10_000),
                            category=category, tag=tag)
        ranked = rank_search(found, [relevance(h, query) for h in found], safe=safe)[:limit]
        return self.record_retrieval(self._whole(ranked), "search")

    def _whole(self, hits: Sequence[SearchHit]) -> list[Memory]:
        """The memories of these hits, in order: read by id where the hit has none.
        One forgotten or no longer active since the search is left out, as a search
        now would."""
        unread = [h.id for h in hits if h.memory is None]
        read: dict[str, Memory] = {}
        if unread:
            try:
                read = {m.id: m for m in self.memories.get_many(unread)}
            except NotFound:  # forgotten meanwhile: read the others one by one
                for memory_id in unread:
                    with suppress(NotFound):
                        read[memory_id] = self.memories.get(memory_id)
        memories = (h.memory if h.memory is not None else read.get(h.id) for h in hits)
        return [m for m in memories if m is not None and m.status is Status.ACTIVE]

    def search_by_path(self, repo: str, path: str, lines: tuple[int, int] | None = None,
                       limit: int = 50, *, category: str | None = None,
                       tag: str | None = None, safe: bool = False) -> list[Memory]:
        """Active memories citing ``path`` (overlapping ``lines``, when given), newest
        created first (``MemoryStore.by_path``); ``safe`` leaves out known bad patterns
        (``quality.SAFE_FILTERED``) before the limit, as a safe search does."""
        validate_repo(repo)
        _check_limit(limit)
        if lines is not None:
            ref = parse_citation({"path": path, "line_start": lines[0], "line_end": lines[1]},
                                 "lines")
            path, lines = ref.path, (ref.line_start, ref.line_end)
        else:
            path = normalize_path(path)
        asked = limit
        while True:  # safe mode leaves some out: read further until the limit is kept
            found = self.memories.by_path(repo, path, lines=lines, limit=asked,
                                          category=category, tag=tag)
            kept = [m for m in found if not (safe and safe_filtered(m))]
            if len(kept) >= limit or len(found) < asked:
                return self.record_retrieval(kept[:limit], "path")
            asked *= 2

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
        """The supersede chain through this memory, oldest first (a forgotten link ends
        it: what it said is gone)."""
        memory = self._memory(memory_id)
        chain = [memory]
        seen = {memory.id}
        while chain[0].supersedes and chain[0].supersedes not in seen:
            seen.add(chain[0].supersedes)
            try:
                chain.insert(0, self.memories.get(chain[0].supersedes))
            except NotFound:
                break
        while chain[-1].superseded_by and chain[-1].superseded_by not in seen:
            seen.add(chain[-1].superseded_by)
            try:
                chain.append(self.memories.get(chain[-1].superseded_by))
            except NotFound:
                break
        # Corrections proposed and waiting for approval: not links yet, but part of
        # the story.
        last = chain[-1]
        return chain + [m for m in self.memories.find(
            last.repo, MemoryFilter(status=Status.PENDING), limit=None)
            if m.supersedes == last.id and m.id not in seen]

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

    def on_branch(self, repo: str, memories: Iterable[Memory], ref: str) -> frozenset[str]:
        """The ids of those of ``memories`` that are claims about a branch, not (yet)
        about the main line, as seen from ``ref``: never judged on the main line, and
        stored on a commit ``ref`` does not contain (or from uncommitted files): what
        ``newer_than`` says of the unjudged ones. A review names them apart from the
        main line's memories."""
        return self.newer_than(repo, [m for m in memories if not m.verified_ref], ref)

    def newer_than(self, repo: str, memories: Iterable[Memory], ref: str) -> frozenset[str]:
        """The ids of those of ``memories`` whose claim is about code ``ref`` does not
        have: judged on the main line at a commit ``ref`` does not contain (the main line
        moved on since ``ref``), or never judged there and stored on a commit ``ref`` does
        not contain (a branch, the main line after ``ref``) or from uncommitted files.
        That such a memory does not hold at ``ref`` says nothing against it. One question
        to the source; when it cannot answer, only the uncommitted ones are."""
        source = self.source_for(validate_repo(repo))

        def commits_of(m: Memory) -> set[str]:
            if m.verified_ref and m.verified_commit:
                return {m.verified_commit}
            return {c.sha for c in m.citations if c.sha}

        listed = list(memories)
        unpinned = {m.id for m in listed if not (m.verified_ref and m.verified_commit)
                    and any(not c.sha for c in m.citations)}
        commits = {sha for m in listed for sha in commits_of(m)}
        try:
            inside = source.contained(commits, source.resolve(ref)) if commits else frozenset()
        except (NotFound, SourceUnavailable):
            return frozenset(unpinned)
        return frozenset(unpinned | {m.id for m in listed if commits_of(m) - inside})

    def main_tip(self, repo: str) -> str | None:
        """The commit at the tip of ``repo``'s main line (``truth_ref``, else its default
        branch), or None when it cannot be told or read."""
        source = self.source_for(validate_repo(repo))
        try:
            main = source.main_line(self.truth_ref)
            return source.resolve(main.ref) if main is not None else None
        except (NotFound, SourceUnavailable):
            return None

    def stats(self, repo: str) -> RepoStats:
        repo = validate_repo(repo)
        self.telemetry.flush_for_reading()
        return self.memories.stats(repo)

    def read_view(self, query: ViewQuery) -> list[dict[str, Any]]:
        """Rows of one dashboard view (``store/views.py``: the same on every store),
        counting what is still buffered too."""
        if query.repo is not None:
            validate_repo(query.repo)
        self.telemetry.flush_for_reading()
        return self.memories.read_view(query)

    # ------------------------------------------------------------------ verifying

    def scope(self, repo: str, *, ref: str = "HEAD", apply: bool | None = None) -> PassScope:
        """What a pass over ``repo`` at ``ref`` may change, and why (see ``verify``): for
        entry points that say so before they verify."""
        return pass_scope(self.source_for(validate_repo(repo)), ref, apply=apply,
                          branch=self.truth_ref)

    def verify_or_view(self, ids: Iterable[str] | None = None, **options: Any
                       ) -> tuple[VerificationReport, ReadOnlyStore | None]:
        """``verify`` (same arguments), but a store that refuses the verdicts
        (``ReadOnlyStore``) makes the pass a view: checked again with ``apply=False``,
        which records nothing. The report, and the refusal for the caller to say
        (verdicts that could not be recorded are not verdicts). A dry run that meets
        one raises it."""
        try:
            return self.verify(ids, **options), None
        except ReadOnlyStore as exc:
            if options.get("apply") is False:
                raise
            return self.verify(ids, **{**options, "apply": False}), exc

    def verify(
        self,
        ids: Iterable[str] | None = None,
        *,
        repo: str | None = None,
        ref: str = "HEAD",
        apply: bool | None = None,
        include_invalid: bool = False,
        include_expired: bool = False,
        expire: bool = True,
        on_progress: Progress | None = None,
    ) -> VerificationReport:
        """Check memories (by id, or every active memory of ``repo``) at ``ref``.

        The ref rule decides what the pass may change (``verify/scope.py``). At the
        main line's tip (``apply=None``, the default) it reaches verdicts: memories
        whose citations all hold are refreshed (relocated citations rewritten to their
        new place, the old one kept in telemetry), memories with changed or missing
        code are invalidated with a reason naming the citations, and, with
        ``include_invalid`` / ``include_expired``, invalid or expired memories that hold
        again are revived. Anywhere else the pass is a view that changes nothing stored
        (``apply=False`` makes any pass a dry run); ``apply=True`` applies verdicts at a
        ``ref`` on the main line that is not its tip (after a merge). Unverifiable
        citations are never a verdict, and a memory stored on a commit the checked
        revision does not contain (an unmerged branch) is not invalidated there. Every
        verdict records the main line and commit it was made at.

        With ``expire`` (the default), a memory nobody used for the policy's days is
        left out unread, and expires at the tip (``verify/passes.py``)."""
        with collector_paused():
            return self._verify(ids, repo=repo, ref=ref, apply=apply,
                                include_invalid=include_invalid,
                                include_expired=include_expired, expire=expire,
                                on_progress=on_progress)

    def _verify(self, ids: Iterable[str] | None, *, repo: str | None, ref: str,
                apply: bool | None, include_invalid: bool, include_expired: bool,
                expire: bool, on_progress: Progress | None) -> VerificationReport:
        if ids is not None:
            asked = list(ids)
            try:
                memories = self.memories.get_many(asked)
            except NotFound:  # short ids among them
                memories = [self._memory(memory_id) for memory_id in asked]
            # Named twice (an id and a prefix of it): one memory, one verdict.
            memories = list({m.id: m for m in memories}.values())
        elif repo is not None:
            name = validate_repo(repo)
            memories = self.memories.recent(name, limit=None)
            for wanted, status in ((include_invalid, Status.INVALID),
                                   (include_expired, Status.EXPIRED)):
                if wanted:
                    memories += self.memories.recent(name, limit=None, status=status)
        else:
            raise ValidationError("verify needs memory ids or a repo")
        revive = frozenset(status for wanted, status in ((include_invalid, Status.INVALID),
                                                          (include_expired, Status.EXPIRED))
                           if wanted)
        return VerificationPass(
            self.memories, self.telemetry, actor=self.current_actor, locator=self.locator,
            truth_ref=self.truth_ref, expire_days=self.policy.expire_days if expire else 0,
        ).run(memories, self.source_for, ref=ref, apply=apply, revive=revive,
              on_progress=on_progress)

    def check_citations(self, repo: str | None, items: Iterable[Item], *, ref: str = "HEAD",
                        jobs: int = 1, require_sha: bool = False
                        ) -> Iterator[CheckedCitation]:
        """Check citations that are not (yet) memories: ``items`` are ``(id, citation)``
        pairs, the citation a mapping ``{path, line_start, line_end, sha}`` (or, for an
        input that is not one, the message saying why). Each is fingerprinted at its own
        ``sha`` (the commit it was made at; ``ref`` when absent, unless ``require_sha``)
        and checked at ``ref``: one ``CheckedCitation`` per item, in order, a bad item
        an error of its own that does not stop the run. Nothing is stored: a check of
        citations is a view (the ref rule).

        ``repo`` None reads the service's one source (a service made for one working
        copy, as ``vmem citations check`` is). ``jobs`` > 1 shares a large run among
        worker processes (``verify/bulk.py``). An unknown ``ref`` raises ``NotFound``
        before anything is read."""
        if repo is None:
            if not isinstance(self._source, CodeSource):
                raise ValidationError("check_citations needs a repo: this service reads "
                                      "the code of more than one")
            source = self._source
        else:
            source = self.source_for(validate_repo(repo))
        from verified_memory.verify.bulk import check_citations  # worker processes & all

        return check_citations(source, items, ref, jobs=jobs, require_sha=require_sha)

    def read_citation(self, repo: str, path: str, lines: tuple[int, int], *,
                      ref: str = "HEAD") -> str:
        """The cited lines as they are at ``ref`` (for an agent to read before use)."""
        validate_repo(repo)
        cite = parse_citation({"path": path, "line_start": lines[0], "line_end": lines[1]})
        source = self.source_for(repo)
        revision = source.resolve(ref)
        blob = source.tree(revision).get(cite.path)
        if blob is None:
            at = ref + (f" ({revision[:12]})" if revision != ref else "")
            raise NotFound(no_file(source, revision, cite.path, at))
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
                dry_run: bool = False, list_left_out: bool = False, safe: bool = False,
                category: str | None = None, tag: str | None = None,
                order: str | None = None) -> Context:
        """Verify the most recent memories (those matching ``query`` first, when given;
        or exactly ``memories``, e.g. a search's results), then format only those that
        passed: at ``hydration`` (``summary``, ``full`` or ``files``), within ``budget``
        estimated tokens (default ``prompt.DEFAULT_BUDGET``), most relevant to ``query``
        first, then those recently confirmed, often applied and validated
        (``quality.standing``). ``list_left_out`` lists the memories that did not pass
        by id and reason (for a caller that may act on them). ``safe``, ``category`` and
        ``tag`` narrow the candidates as ``search`` does; poor performers (feedback says
        they mostly did not help) and memories nobody used for the policy's days are
        set aside, named in the note, never quoted. ``order`` names the order ``memories``
        come in (``"newest created first"``: ``search_by_path``'s): they are shown in it.

        The verification follows the ref rule (``verify``): at the main line's tip it
        refreshes and invalidates; anywhere else, or with ``dry_run``, it is a view that
        only decides what is shown here."""
        from verified_memory.models import Location
        from verified_memory.prompt import Hydration, render_context

        level = Hydration.parse(hydration)
        if memories is not None:
            candidates = list(memories)
        else:
            candidates = self.get_recent(repo, limit=limit, category=category, tag=tag)
            if query and query.strip():
                found = self.search(repo, query, limit=limit, safe=safe, category=category,
                                    tag=tag)
                candidates = list({m.id: m for m in [*found, *candidates]}.values())[:limit]
        set_aside = tuple((m, f"poor feedback: {m.success_count} of {m.feedback_count} uses "
                              "helped") for m in candidates if m.poor)
        candidates = [m for m in candidates if not m.poor]
        apply = False if dry_run else None
        view: str | None = None
        report, refused = self.verify_or_view([m.id for m in candidates], ref=ref, apply=apply)
        if refused is not None:
            log.warning("%s; the memories were checked as a view", refused)
            apply, view = False, "the memory store is read-only: no verdict is recorded"
        scope = report.scopes.get(repo) or self.scope(repo, ref=ref, apply=apply)
        revision = scope.revision
        if view is None and not scope.judges:
            view = scope.cause

        def read_code(location: Location) -> str:
            return self.read_citation(repo, location.path,
                                      (location.line_start, location.line_end), ref=revision)

        verifications = list(report.verifications)
        if order is not None:
            place = {m.id: i for i, m in enumerate(candidates)}
            verifications.sort(key=lambda v: place.get(v.memory.id, len(place)))
        rendered = render_context(repo, revision, verifications, hydration=level,
                                  budget=budget, query=query, list_left_out=list_left_out,
                                  read_code=read_code if level is Hydration.FILES else None,
                                  view=view, set_aside=set_aside, order=order)
        # The memories in the order they are shown (then those cut for room).
        shown = {mid: i for i, mid in enumerate([*rendered.hydration, *rendered.omitted])}
        passed = sorted((v.memory for v in report.verifications if v.passed),
                        key=lambda m: shown.get(m.id, len(shown)))
        return Context(
            repo=repo, revision=revision, memories=tuple(passed),
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
        memory = self._memory(memory_id)
        memory_id = memory.id
        if memory.status not in (Status.ACTIVE, Status.INVALID):
            raise Conflict(f"memory {memory_id} is {memory.status.value}; only an active or "
                           "invalid memory can be re-cited")
        reason = _reason(reason)
        new = NewMemory.parse({"repo": memory.repo, "subject": memory.subject,
                               "fact": memory.fact, "citations": list(citations)})
        scope = self.scope(memory.repo, ref=ref)
        built = self._build(new, ref=scope.revision)
        now = utcnow()
        detail = {"ref": scope.ref, "revision": scope.revision,
                  "old": [str(c.location) for c in memory.citations],
                  "new": [str(c.location) for c in built.citations],
                  "reason": reason}
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
        signal that tells a useful memory from a merely popular one. It counts into the
        memory's success rate: applied at least 3 times with at least 90 % success and
        no conflict, it becomes validated (a promotion candidate, ``promotion_queue``);
        with under 50 % success after 4 feedbacks it is a poor performer, left out of
        context. Any memory may get feedback (one applied yesterday may be invalid
        today); an unknown id is ``NotFound``."""
        if outcome not in ("success", "failure"):
            raise ValidationError(f"outcome must be 'success' or 'failure', got {outcome!r}")
        if note is not None and not isinstance(note, str):
            raise ValidationError(f"note must be a string, got {type(note).__name__}")
        note = (note or "").strip() or None
        if note is not None and len(note) > 2000:
            raise ValidationError(f"note is {len(note)} characters long; the limit is 2000")
        memory = self._memory(memory_id)
        memory_id = memory.id
        event = self._event(EventKind.FEEDBACK, memory, outcome=outcome, note=note)
        transition = Transition(memory_id, expect=memory.status,
                                add_successes=int(outcome == "success"),
                                add_failures=int(outcome == "failure"), events=(event,))
        after = transition.apply_to(memory)
        if after.validated and not memory.validated and not self.conflicts(after):
            transition = replace(transition, events=(event, self._event(
                EventKind.VALIDATED, memory, applied=after.applied_count,
                success_rate=after.success_rate)))
        self._transition(memory, transition, "record feedback on")
        return event

    # ------------------------------------------------------------------ quality

    def conflicts(self, memory: Memory) -> list[Memory]:
        """Active memories citing the same code as ``memory`` that say something else
        (``quality.classify``): what a person should reconcile."""
        found = citing_code(self.memories.by_path, memory)
        return list(classify(memory, found, self.policy).conflicts)

    def pending(self, repo: str, *, limit: int = 50, category: str | None = None,
                tag: str | None = None) -> list[Memory]:
        """Memories waiting for a person's approval, most recent first."""
        validate_repo(repo)
        _check_limit(limit)
        return self.record_retrieval(self.memories.recent(
            repo, limit=limit, status=Status.PENDING, category=category, tag=tag), "pending")

    def approve(self, memory_id: str, *, by: str | None = None) -> Memory:
        """Make a pending memory active. Refused (``Conflict``) to whoever proposed it,
        unless the policy allows self-approval: its category needs a second person.
        ``by`` (default: the caller) is the ``approved`` event's actor."""
        memory = self._memory(memory_id)
        approver = by or self.current_actor
        self._check_reviewer(memory, approver, "approve")
        now = utcnow()
        # Attributed to the reviewer (``by``), as ``created`` is to --created-by.
        approved = replace(self._event(EventKind.APPROVED, memory, by=approver),
                           actor=approver)
        approval = Transition(memory.id, expect=Status.PENDING, status=Status.ACTIVE,
                              refreshed_at=now, used_at=now, events=(approved,))
        corrected = self._corrected(memory)
        if corrected is None:
            return self._transition(memory, approval, "approve")
        return self._complete_supersede(memory, corrected, approval, approver)

    def _corrected(self, memory: Memory) -> Memory | None:
        """The memory a pending correction retires once approved (None: it corrects
        none, or one already retired for it: a correction proposed before approval
        waited, or one whose memory was forgotten)."""
        if memory.supersedes is None:
            return None
        try:
            corrected = self.memories.get(memory.supersedes)
        except NotFound:
            return None
        return None if corrected.superseded_by == memory.id else corrected

    def _complete_supersede(self, memory: Memory, corrected: Memory, approval: Transition,
                            approver: str) -> Memory:
        """Approve a correction and retire the memory it corrects, together or not at
        all: each transition requires the other's memory (``Transition.requires``)."""
        retired = replace(self._event(EventKind.SUPERSEDED, corrected, superseded_by=memory.id,
                                      approved_by=approver, **stale_rule_detail(corrected)),
                          actor=approver)
        approval = replace(approval, requires=(corrected.id, Status.ACTIVE))
        retirement = Transition(corrected.id, status=Status.SUPERSEDED,
                                superseded_by=memory.id, requires=(memory.id, Status.ACTIVE),
                                events=(retired,))
        self.telemetry.flush()
        if self.memories.apply([approval, retirement]) == [True, True]:
            return approval.apply_to(memory)
        now, before = self.memories.get_many([memory.id, corrected.id])
        if now.status is not Status.PENDING:
            raise Conflict(f"cannot approve memory {memory.id}: it is {now.status.value}, "
                           "not pending")
        raise Conflict(f"cannot approve memory {memory.id}: it corrects {corrected.id}, which "
                       f"is {before.status.value} now, not active: there is nothing left to "
                       "supersede (reject it, and store the fact anew if it holds)")

    def reject(self, memory_id: str, reason: str, *, by: str | None = None) -> Memory:
        """Retire a pending memory (it becomes invalid, the reason kept). ``by``
        (default: the caller) is the ``rejected`` event's actor."""
        said = _reason(reason, needed="a rejection needs a reason")
        memory = self._memory(memory_id)
        reviewer = by or self.current_actor
        self._check_reviewer(memory, reviewer, "reject")
        why = f"rejected by {reviewer}: {said}"
        rejected = replace(self._event(EventKind.REJECTED, memory, by=reviewer,
                                       reason=said), actor=reviewer)
        return self._transition(memory, Transition(
            memory.id, expect=Status.PENDING, status=Status.INVALID, invalid_reason=why,
            events=(rejected,)), "reject")

    def _check_reviewer(self, memory: Memory, reviewer: str, action: str) -> None:
        if memory.status is not Status.PENDING:
            raise Conflict(f"memory {memory.id} is {memory.status.value}, not pending: "
                           f"there is nothing to {action}")
        if not self.policy.self_approval and reviewer == memory.created_by:
            raise Conflict(f"memory {memory.id} was proposed by {reviewer}; another person "
                           f"must {action} it (VMEM_SELF_APPROVAL=1 allows it)")

    def promotion_queue(self, repo: str, *, limit: int = 50) -> list[Memory]:
        """Validated memories not promoted yet and in no open conflict, most applied
        first: the human-gated queue of seed 000 (``promote`` writes one into a rules
        file)."""
        validate_repo(repo)
        _check_limit(limit)
        ready = [m for m in self.memories.recent(repo, limit=None)
                 if m.validated and m.promoted_to is None]
        ready = [m for m in ready if not self.conflicts(m)]
        ready.sort(key=lambda m: (-m.applied_count, -(m.success_rate or 0), m.id))
        return ready[:limit]

    def promote(self, memory_id: str, to: str,
                write: Callable[[Verification], object] | None = None) -> Verification:
        """Promote a validated memory into the rules file ``to`` (a person's decision):
        verify it (the rule cites the verified lines: ``Verification.checks``), let
        ``write`` write the rule (``rules_file.promote_rule``), then record the promotion,
        so a rule that could not be written is not recorded. When ``write`` returns a
        callable, it takes the rule back out if the promotion then cannot be recorded
        (another process retired the memory meanwhile, the store failed): the file never
        holds a rule the store does not say was promoted. Refused (``Conflict``) unless
        the memory is active, validated, in no conflict, and holds."""
        memory = self._memory(memory_id)
        memory_id = memory.id
        if memory.status is not Status.ACTIVE:  # else "not validated", whatever its counts
            raise Conflict(f"memory {memory_id} is {memory.status.value}; only an active "
                           "memory can be promoted")
        if not memory.validated:
            raise Conflict(f"memory {memory_id} is not validated (applied "
                           f"{memory.applied_count}x, success rate "
                           f"{_percent(memory.success_rate)}): promotion needs at least 3 "
                           "applications with 90 % success")
        if self.conflicts(memory):
            raise Conflict(f"memory {memory_id} conflicts with "
                           + ", ".join(m.id for m in self.conflicts(memory)))
        (check,) = self.verify([memory_id], expire=False).verifications
        if not check.passed:
            raise Conflict(f"memory {memory_id} does not hold now ({check.reason}): "
                           "a rule must cite code that still says it")
        undo = write(check) if write is not None else None
        try:
            promoted = self._transition(check.memory, Transition(
                memory_id, promoted_to=to,
                events=(self._event(EventKind.PROMOTED, memory, to=to),)), "promote")
        except Exception:
            if callable(undo):
                undo()
            raise
        return replace(check, memory=promoted)

    def demote(self, memory_id: str, *, by: str | None = None,
               remove: Callable[[Memory], object] | None = None) -> Memory:
        """Take a promoted memory's rule back out (a person's decision), whatever the
        memory's status: ``remove`` takes the rule out of the file it was promoted into
        (``rules_file.remove_rule``), then the store forgets that file (``promoted_to``)
        with a ``demoted`` event, whose actor is ``by`` (default: the caller). When
        ``remove`` returns a callable, it puts the rule back if the demotion then cannot
        be recorded; when it returns None the file held no rule of the memory (deleted by
        hand), and the memory is demoted all the same. Refused (``Conflict``) for a
        memory that is not promoted."""
        memory = self._memory(memory_id)
        if memory.promoted_to is None:
            raise Conflict(f"memory {memory.id} is not promoted: there is no rule of it to "
                           "take out")
        who = by or self.current_actor
        undo = remove(memory) if remove is not None else None
        detail: dict[str, Any] = {"from": memory.promoted_to, "by": who}
        if remove is not None:
            detail["removed"] = callable(undo)  # False: the file held no rule of it
        demoted = replace(self._event(EventKind.DEMOTED, memory, **detail), actor=who)
        try:
            return self._transition(memory, Transition(
                memory.id, expect=memory.status, demote=True, events=(demoted,)), "demote")
        except Exception:
            if callable(undo):
                undo()
            raise

    # ------------------------------------------------------------------ audit and hygiene

    def list_memories(self, repo: str, where: MemoryFilter | None = None, *,
                      limit: int = 50) -> list[Memory]:
        """Memories of ``repo`` in any status (or those ``where`` keeps), most recently
        refreshed first: the audit view of ``vmem list``. Not verified, and not a
        retrieval (nothing is handed to an agent): no ``retrieved`` events."""
        validate_repo(repo)
        _check_limit(limit)
        if where is not None and where.path is not None:
            where = replace(where, path=normalize_path(where.path))
        return self.memories.find(repo, where, limit=limit)

    def audit(self, memory_id: str | None = None, *, repo: str | None = None,
              kinds: Sequence[EventKind] | None = None, reads: bool = False,
              since: datetime | None = None, limit: int = 50,
              archived: bool = False) -> list[TelemetryEvent]:
        """The audit trail of a memory (an id or a unique prefix; a forgotten memory's
        too) or of a repository, newest first: who did what, when, at which ref, why.
        Reads (``retrieved``, ``checked``) are left out unless ``reads`` or ``kinds``
        asks for them. A memory's trail includes archived events; a repository's reads
        the live telemetry (``vmem db compact`` archives what is older), and the archive
        too with ``archived`` (``audit_archived`` says when that would show more)."""
        _check_limit(limit)
        self.telemetry.flush_for_reading()
        return trail(self.memories, memory_id, repo=repo, kinds=kinds, reads=reads,
                     since=since, limit=limit, archived=archived)

    def audit_archived(self, shown: Sequence[TelemetryEvent], *, repo: str,
                       kinds: Sequence[EventKind] | None = None, reads: bool = False,
                       since: datetime | None = None, limit: int = 50) -> bool:
        """Whether compaction cut a repository's trail: ``shown`` is what ``audit`` gave
        for these arguments (without ``archived``), and the archive holds events it
        would have listed. ``audit(..., archived=True)`` lists them."""
        _check_limit(limit)
        return cut_by_archive(self.memories, shown, repo=repo, kinds=kinds, reads=reads,
                              since=since, limit=limit)

    def forget(self, memory_id: str | None = None, *, repo: str | None = None,
               reason: str, by: str | None = None) -> list[Tombstone]:
        """Forget a memory (an id or a unique prefix), or with ``memory_id`` None every
        memory of ``repo``: their text and citations are deleted, a tombstone (id,
        repository, who, when, why) and a ``forgotten`` event are kept, in one
        transaction. Any status may be forgotten; ``by`` defaults to the caller."""
        who = by or self.current_actor
        self.telemetry.flush()
        if memory_id is None:
            if repo is None:
                raise ValidationError("forget needs a memory id, or a repository to wipe")
            return self.memories.forget(repo=validate_repo(repo), by=who, reason=reason)
        memory = self._memory(memory_id)
        if repo is not None and memory.repo != validate_repo(repo):
            raise NotFound(f"memory {memory.id} is in {memory.repo}, not {repo}")
        return self.memories.forget([memory.id], by=who, reason=reason)

    def tombstones(self, repo: str, *, limit: int = 50) -> list[Tombstone]:
        """What is left of the memories of ``repo`` that were forgotten, newest first."""
        _check_limit(limit)
        return self.memories.tombstones(repo=validate_repo(repo), limit=limit)

    def info(self) -> StoreInfo:
        """Where the store is, its schema version, size and counts (``vmem where``)."""
        self.telemetry.flush_for_reading()
        return self.memories.info()


def _reason(reason: object, *, needed: str | None = None) -> str | None:
    """A reason given for a change, as kept: stripped, at most ``REASON_MAX`` characters
    (what MCP takes, and a tombstone keeps; a longer one would also make the store's
    export refused on import). ``needed``: the message when one is required; else a
    blank one is None."""
    if reason is not None and not isinstance(reason, str):
        raise ValidationError(f"a reason must be text, got {type(reason).__name__}")
    said = (reason or "").strip()
    if not said:
        if needed is not None:
            raise ValidationError(needed)
        return None
    if len(said) > REASON_MAX:
        raise ValidationError(f"the reason is {len(said)} characters long; the limit is "
                              f"{REASON_MAX}")
    return said


def _percent(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.0%}"


def _check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise ValidationError(f"limit must be a whole number from 1 to 10000, got {limit!r}")
