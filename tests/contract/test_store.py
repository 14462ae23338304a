"""The ``MemoryStore`` contract: one suite, run unchanged against every store.

Objects are built directly (no git): the store neither reads code nor checks that a
fingerprint matches anything, it only keeps what it is given and finds it again.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from verified_memory.errors import Conflict, NotFound, StoreError, ValidationError
from verified_memory.models import (
    NEVER_JUDGED,
    Anchor,
    Citation,
    Cited,
    EventKind,
    Fingerprint,
    Memory,
    SearchHit,
    Status,
    TelemetryEvent,
    Transition,
)
from verified_memory.store.base import (
    MemoryStore,
    add_unless_duplicate,
    oldest_never_applied,
    search_hits,
)

REPO = "acme/api"
OTHER = "acme/web"
T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def cite(
    path: str = "src/app.py", start: int = 10, end: int = 12, *, anchor: bool = True
) -> Citation:
    hashes = tuple(0 if i == 1 else (start * 1000 + i) for i in range(end - start + 1))
    return Citation(
        path=path,
        line_start=start,
        line_end=end,
        sha="a" * 40,
        blob_sha="b" * 40,
        fingerprint=Fingerprint(
            snippet_hash=f"{start:016x}",
            line_hashes=hashes,
            anchor=Anchor("function_definition", "App.run", "c" * 16, 1, "python")
            if anchor
            else None,
        ),
    )


def mem(
    subject: str = "the app retries",
    fact: str = "calls are retried three times",
    *,
    repo: str = REPO,
    minutes: float = 0,
    status: Status = Status.ACTIVE,
    citations: tuple[Citation, ...] | None = None,
    **fields: Any,
) -> Memory:
    return Memory(
        id=fields.pop("id", None) or str(uuid.uuid4()),
        repo=repo,
        subject=subject,
        fact=fact,
        citations=citations if citations is not None else (cite(),),
        status=status,
        created_at=at(minutes),
        refreshed_at=at(minutes),
        **fields,
    )


def event(
    kind: EventKind = EventKind.CREATED,
    memory_id: str | None = None,
    *,
    repo: str = REPO,
    minutes: float = 0,
    **detail: Any,
) -> TelemetryEvent:
    return TelemetryEvent(
        kind=kind, repo=repo, memory_id=memory_id, actor="tester", at=at(minutes), detail=detail
    )


def ids(memories: list[Memory]) -> list[str]:
    return [m.id for m in memories]


# ------------------------------------------------------------------------- add / get


def test_store_satisfies_the_protocol(store: MemoryStore) -> None:
    assert isinstance(store, MemoryStore)


def test_add_then_get_round_trips_every_field(store: MemoryStore) -> None:
    india = timezone(timedelta(hours=5, minutes=30))
    original = Memory(
        id=str(uuid.uuid4()),
        repo=REPO,
        subject="Session.request retries idempotent calls",
        fact="GET and PUT are retried up to 3 times; POST never is. Ünïcode ✓",
        citations=(
            replace(
                cite("src/session.py", 40, 44),
                fingerprint=Fingerprint("0123456789abcdef", (2**64 - 1, 0, 1, 42, 7)),
            ),
            cite("src/retry.py", 1, 1, anchor=False),
            cite("docs/retry.md", 3, 9),
        ),
        status=Status.PENDING,
        reason="found while fixing a flaky test",
        category="behaviour",
        tags=("http", "retry-policy", "ünïcode"),
        supersedes="older-id",
        superseded_by="newer-id",
        created_by="agent-7",
        created_at=datetime(2026, 2, 3, 4, 5, 6, 789012, tzinfo=india),
        refreshed_at=datetime(2026, 2, 4, 0, 0, 0, 1, tzinfo=UTC),
        verification_count=3,
        applied_count=4,
        verified_commit="d" * 40,
        invalid_reason="was broken once",
    )
    store.add(original)

    got = store.get(original.id)

    assert got == original
    assert got.citations[0].fingerprint.line_hashes == (2**64 - 1, 0, 1, 42, 7)
    assert got.citations[0].fingerprint.anchor is None
    assert got.citations[1].fingerprint.anchor is None
    assert got.citations[2].fingerprint.anchor == Anchor(
        "function_definition", "App.run", "c" * 16, 1, "python"
    )
    assert [c.path for c in got.citations] == ["src/session.py", "src/retry.py", "docs/retry.md"]
    for value in (got.created_at, got.refreshed_at):
        assert value.tzinfo is not None
        assert value.utcoffset() == timedelta(0)
    assert got.created_at == datetime(2026, 2, 2, 22, 35, 6, 789012, tzinfo=UTC)
    assert got.status is Status.PENDING
    assert got.tags == ("http", "retry-policy", "ünïcode")


def test_add_writes_its_events(store: MemoryStore) -> None:
    m = mem()
    store.add(m, [event(EventKind.CREATED, m.id, minutes=1, nested={"a": [1, 2.5, None]})])

    [logged] = store.events(memory_id=m.id)

    assert logged.kind is EventKind.CREATED
    assert logged.repo == REPO
    assert logged.actor == "tester"
    assert logged.at == at(1)
    assert logged.at.utcoffset() == timedelta(0)
    assert dict(logged.detail) == {"nested": {"a": [1, 2.5, None]}}
    assert isinstance(logged.id, int)


def test_add_duplicate_id_is_conflict_and_writes_nothing(store: MemoryStore) -> None:
    m = mem(subject="first")
    store.add(m)

    with pytest.raises(Conflict, match=m.id):
        store.add(replace(m, subject="second"), [event(EventKind.CREATED, m.id)])

    assert store.get(m.id).subject == "first"
    assert store.events(memory_id=m.id) == []


def test_add_unless_duplicate_asks_about_the_memories_citing_its_lines(
        store: MemoryStore) -> None:
    """``add_unless_duplicate`` hands ``decide`` the active memories citing lines the
    new memory cites, each once; given events, it adds the memory and them."""
    overlapping = mem("overlapping", citations=(cite("src/app.py", 11, 20),))
    both = mem("cites both", minutes=1,
               citations=(cite("src/app.py", 1, 10), cite("src/util.py", 5, 5)))
    beside = mem("other lines", citations=(cite("src/app.py", 30, 40),))
    retired = mem("invalid", status=Status.INVALID)
    for m in (overlapping, both, beside, retired):
        store.add(m)
    new = mem("new", citations=(cite("src/app.py", 10, 12), cite("src/util.py", 1, 9)))
    asked: list[list[str]] = []

    def decide(found: Sequence[Memory]) -> list[TelemetryEvent]:
        asked.append(sorted(m.subject for m in found))
        return [event(EventKind.CREATED, new.id)]

    assert add_unless_duplicate(store, new, decide) is True
    assert asked == [["cites both", "overlapping"]]
    assert store.get(new.id) == new
    assert [e.kind for e in store.events(memory_id=new.id)] == [EventKind.CREATED]


def test_a_pending_memory_is_asked_about_the_pending_memories_citing_its_files(
        store: MemoryStore) -> None:
    """For a pending memory, ``decide`` is also handed the pending memories citing the
    files it cites (any lines: the queue holds a rule once); an active memory is
    handed active ones only."""
    waiting = mem("waiting", status=Status.PENDING, citations=(cite("src/app.py", 30, 40),))
    elsewhere = mem("waiting elsewhere", status=Status.PENDING,
                    citations=(cite("src/other.py", 1, 2),))
    active = mem("active", citations=(cite("src/app.py", 10, 12),))
    for m in (waiting, elsewhere, active):
        store.add(m)
    asked: list[list[str]] = []

    def decide(found: Sequence[Memory]) -> None:
        asked.append(sorted(m.subject for m in found))

    pending = mem("new", status=Status.PENDING, citations=(cite("src/app.py", 10, 12),))
    assert add_unless_duplicate(store, pending, decide) is False
    assert add_unless_duplicate(store, replace(pending, status=Status.ACTIVE), decide) is False
    assert asked == [["active", "waiting"], ["active"]]
    with pytest.raises(NotFound):
        store.get(pending.id)


def test_add_unless_duplicate_told_it_repeats_one_writes_nothing(
        store: MemoryStore) -> None:
    first = mem("first")
    store.add(first)
    again = mem("again")
    asked: list[list[str]] = []

    def decide(found: Sequence[Memory]) -> list[TelemetryEvent] | None:
        asked.append([m.id for m in found])
        return None if found else [event(EventKind.CREATED, again.id)]

    assert add_unless_duplicate(store, again, decide) is False

    assert asked == [[first.id]]
    with pytest.raises(NotFound):
        store.get(again.id)
    assert store.events(memory_id=again.id) == []
    assert ids(store.recent(REPO)) == [first.id]


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param({"citations": ()}, id="no-citations"),
        pytest.param({"citations": (replace(cite(), line_start=0),)}, id="line-zero"),
        pytest.param({"citations": (replace(cite(), line_start=9, line_end=3),)}, id="reversed"),
    ],
)
def test_add_rejects_a_memory_that_breaks_an_invariant(
    store: MemoryStore, broken: dict[str, Any]
) -> None:
    m = replace(mem(), **broken)

    with pytest.raises(ValidationError):
        store.add(m, [event(EventKind.CREATED, m.id)])

    with pytest.raises(NotFound):
        store.get(m.id)
    assert store.events(memory_id=m.id) == []


def test_get_unknown_id_is_not_found(store: MemoryStore) -> None:
    store.add(mem())

    with pytest.raises(NotFound, match="no-such-id"):
        store.get("no-such-id")


def test_get_many_keeps_the_order_asked_and_names_the_first_unknown(store: MemoryStore) -> None:
    a, b, c = mem(minutes=1), mem(minutes=2), mem(minutes=3)
    for m in (a, b, c):
        store.add(m)

    assert ids(store.get_many([b.id, c.id, a.id])) == [b.id, c.id, a.id]
    assert store.get_many([]) == []
    with pytest.raises(NotFound, match="missing-1"):
        store.get_many([a.id, "missing-1", "missing-2"])


# ------------------------------------------------------------------------- recent


def test_recent_is_newest_first_and_honours_limit(store: MemoryStore) -> None:
    old, middle, new = mem(minutes=1), mem(minutes=2), mem(minutes=3)
    for m in (middle, new, old):
        store.add(m)

    assert ids(store.recent(REPO)) == [new.id, middle.id, old.id]
    assert ids(store.recent(REPO, limit=2)) == [new.id, middle.id]
    assert store.recent(REPO, limit=0) == []
    assert ids(store.recent(REPO, limit=None)) == [new.id, middle.id, old.id]


def test_recent_returns_whole_memories(store: MemoryStore) -> None:
    m = mem(citations=(cite("a.py", 1, 2), cite("b.py", 3, 4)), tags=("x",))
    store.add(m)

    assert store.recent(REPO) == [m]


def test_recent_filters_by_status(store: MemoryStore) -> None:
    active = mem(minutes=1)
    pending = mem(minutes=2, status=Status.PENDING)
    invalid = mem(minutes=3, status=Status.INVALID)
    for m in (active, pending, invalid):
        store.add(m)

    assert ids(store.recent(REPO)) == [active.id]
    assert ids(store.recent(REPO, status=Status.PENDING)) == [pending.id]
    assert ids(store.recent(REPO, status=None)) == [invalid.id, pending.id, active.id]


def test_recent_is_per_repository(store: MemoryStore) -> None:
    mine, theirs = mem(repo=REPO), mem(repo=OTHER)
    store.add(mine)
    store.add(theirs)

    assert ids(store.recent(REPO)) == [mine.id]
    assert ids(store.recent(OTHER)) == [theirs.id]
    assert store.recent("nobody/nothing") == []


def test_repos_lists_every_repository_with_memories(store: MemoryStore) -> None:
    assert store.repos() == []
    store.add(mem(repo=OTHER))
    store.add(mem(repo=REPO, status=Status.INVALID))
    store.add(mem(repo=REPO))
    assert store.repos() == sorted({REPO, OTHER})


def test_recent_breaks_ties_by_id(store: MemoryStore) -> None:
    b, a = mem(id="bbbb", minutes=5), mem(id="aaaa", minutes=5)
    store.add(b)
    store.add(a)

    assert ids(store.recent(REPO)) == ["aaaa", "bbbb"]


# ------------------------------------------------------------------------- search


def test_search_ranks_subject_matches_above_a_passing_mention(store: MemoryStore) -> None:
    strong = mem("retry policy", "retry idempotent calls", minutes=1)
    weak = mem(
        "connection pool sizing",
        "the pool holds ten connections per host and is shared between sessions; "
        "timeouts are configured separately and a failed call may retry elsewhere, "
        "but most of this module is about keeping sockets warm between requests",
        minutes=2,
    )
    unrelated = mem("logging", "logs go to stderr", minutes=3)
    for m in (weak, unrelated, strong):
        store.add(m)

    assert ids(store.search(REPO, "retry")) == [strong.id, weak.id]
    assert ids(store.search(REPO, "retry", limit=1)) == [strong.id]


def test_search_hits_are_the_search_matches_with_what_ranking_reads(
        store: MemoryStore) -> None:
    tagged = mem("retry policy", "retry idempotent calls", minutes=1, tags=("http", "retry"),
                 reason="outages", citations=(cite("src/a.py"), cite("src/b.py", 30, 31),
                                              cite("src/a.py", 50, 52)))
    plain = mem("retry budget", "a retry budget per host", minutes=2)
    invalid = mem("retry invalid", "retry", minutes=3, status=Status.INVALID)
    elsewhere = mem("retry there", "retry", minutes=4, repo=OTHER)
    for m in (tagged, plain, invalid, elsewhere):
        store.add(m)

    for limit in (1, 20):
        found = store.search(REPO, "retry", limit=limit)
        hits = search_hits(store, REPO, "retry", limit=limit)
        assert [h.id for h in hits] == ids(found)
        for hit, memory in zip(hits, found, strict=True):
            assert hit.memory in (None, memory)  # the whole memory, or none to read
            assert (hit.subject, hit.fact, hit.reason, hit.tags, hit.paths) == (
                memory.subject, memory.fact, memory.reason, memory.tags, memory.paths)
    assert SearchHit.of(tagged).paths == ("src/a.py", "src/b.py", "src/a.py")
    assert tagged.paths == ("src/a.py", "src/b.py", "src/a.py")
    assert search_hits(store, REPO, "nothing matches") == []
    assert search_hits(store, REPO, "retry", limit=0) == []


def test_search_needs_every_word_and_completes_only_the_last(store: MemoryStore) -> None:
    m = mem("retry policy", "applies to idempotent requests")
    store.add(m)

    assert ids(store.search(REPO, "RETRY Policy")) == [m.id]
    assert ids(store.search(REPO, "idempotent retr")) == [m.id]
    assert store.search(REPO, "retr idempotent") == []
    assert store.search(REPO, "retry banana") == []


def test_search_ignores_case_and_accents(store: MemoryStore) -> None:
    m = mem("Café ordering", "the Straße module sorts ÉCLAIRS")
    store.add(m)

    for query in ("cafe", "CAFÉ", "café ord", "straße", "eclairs", "éclair"):
        assert ids(store.search(REPO, query)) == [m.id], query


def test_search_covers_tags(store: MemoryStore) -> None:
    m = mem("nothing here", "or here", tags=("flaky-tests", "ci"))
    store.add(m)

    assert ids(store.search(REPO, "flaky")) == [m.id]
    assert ids(store.search(REPO, "ci")) == [m.id]


def test_search_returns_only_active_memories_of_the_repository(store: MemoryStore) -> None:
    active = mem("retry policy", "x")
    store.add(active)
    store.add(mem("retry policy", "x", status=Status.INVALID))
    store.add(mem("retry policy", "x", status=Status.PENDING))
    store.add(mem("retry policy", "x", repo=OTHER))

    assert ids(store.search(REPO, "retry")) == [active.id]


def test_search_finds_words_around_punctuation(store: MemoryStore) -> None:
    dashed = mem("foo-bar handling", "see the foo-bar module")
    quoted = mem("quoting", 'the literal a"b is escaped')
    store.add(dashed)
    store.add(quoted)

    assert ids(store.search(REPO, "foo-bar")) == [dashed.id]
    assert ids(store.search(REPO, 'a"b')) == [quoted.id]
    assert ids(store.search(REPO, "(foo):bar*")) == [dashed.id]
    assert store.search(REPO, "foo AND bar") == []  # AND is a word here, not an operator


@pytest.mark.parametrize(
    "query",
    ["", "   ", "*", '"', '""', "(", ")", "NEAR(", "-", ":", "^", "'", "\\", "\x00", "*-*",
     '"unterminated', "AND", "OR NOT", "NEAR(a b, 2)", "subject:retry", "retry*", "-retry",
     "{subject fact}: x", "a\tb\nc", "'; DROP TABLE agent_memory; --"],
)
def test_search_never_fails_on_hostile_input(store: MemoryStore, query: str) -> None:
    store.add(mem("retry policy", "retry idempotent calls"))
    store.add(mem("retry policy", "elsewhere", repo=OTHER))

    found = store.search(REPO, query)

    assert all(m.repo == REPO and m.status is Status.ACTIVE for m in found)
    assert len(store.recent(REPO)) == 1  # and nothing was harmed


@pytest.mark.parametrize("query", ["", "   ", "*", '"', "(", "-", ":", "\x00", "*-*", "_"])
def test_search_without_words_returns_nothing(store: MemoryStore, query: str) -> None:
    store.add(mem("retry policy", "anything"))

    assert store.search(REPO, query) == []


# ------------------------------------------------------------------------- by_path


def test_by_path_finds_active_citing_memories_newest_first(store: MemoryStore) -> None:
    early = mem(minutes=1, citations=(cite("src/app.py", 10, 20),))
    late = mem(minutes=2, citations=(cite("docs/x.md", 1, 2), cite("src/app.py", 30, 40)))
    elsewhere = mem(minutes=3, citations=(cite("src/other.py", 10, 20),))
    invalid = mem(minutes=4, citations=(cite("src/app.py", 10, 20),), status=Status.INVALID)
    other_repo = mem(minutes=5, repo=OTHER, citations=(cite("src/app.py", 10, 20),))
    for m in (early, late, elsewhere, invalid, other_repo):
        store.add(m)

    assert ids(store.by_path(REPO, "src/app.py")) == [late.id, early.id]
    assert ids(store.by_path(REPO, "src/app.py", limit=1)) == [late.id]
    assert ids(store.by_path(REPO, "docs/x.md")) == [late.id]
    assert store.by_path(REPO, "src/missing.py") == []
    assert store.by_path(REPO, "src/app") == []  # whole paths, not prefixes


def test_by_path_orders_by_creation_not_by_the_last_refresh(store: MemoryStore) -> None:
    first = mem(minutes=1, citations=(cite("src/app.py", 1, 2),))
    second = mem(minutes=2, citations=(cite("src/app.py", 5, 6),))
    twins = sorted((mem(minutes=3, citations=(cite("src/app.py", 8, 9),)) for _ in range(2)),
                   key=lambda m: m.id)
    for m in (first, second, *twins):
        store.add(m)
    assert store.apply([Transition(first.id, refreshed_at=at(60))]) == [True]

    # Newest created first, equal times by id; a refresh moves a memory in recent() only.
    assert ids(store.by_path(REPO, "src/app.py")) == [twins[0].id, twins[1].id, second.id,
                                                     first.id]
    assert ids(store.by_path(REPO, "src/app.py", lines=(1, 6), limit=1)) == [second.id]
    assert ids(store.recent(REPO))[0] == first.id


def test_a_creation_time_later_than_now_is_stored_as_now(store: MemoryStore) -> None:
    """Another machine's clock ahead, or an import, gives a memory a creation time in the
    future: it would stay first by path until the clock passed it (for ever, for 2099).
    No memory is created after the store takes it in: it is stored as then."""
    ahead = datetime(2099, 1, 1, tzinfo=UTC)
    added, loaded = (replace(mem(id=name, citations=(cite("src/app.py", 1, 2),)),
                             created_at=ahead) for name in ("z-added", "z-loaded"))
    store.add(added)
    assert store.load([loaded], []) == (1, 0, 0)
    taken = datetime.now(UTC)
    for memory_id in (added.id, loaded.id):
        assert store.get(memory_id).created_at <= taken, memory_id
    # Created after both were taken in (on a tie, its smaller id puts it first too).
    newer = replace(mem(id="a-newer", citations=(cite("src/app.py", 5),)),
                    created_at=datetime.now(UTC))
    store.add(newer)
    assert ids(store.by_path(REPO, "src/app.py"))[0] == newer.id
    assert store.get(newer.id).created_at == newer.created_at  # a past time is kept as it is


def test_a_refresh_time_later_than_now_is_stored_as_now(store: MemoryStore) -> None:
    """The same rule for the refresh time, which orders ``recent``: a memory refreshed
    "tomorrow" (a clock ahead, an import, a transition from such a clock) stayed first
    in ``vmem recent`` until the clock passed it."""
    ahead = datetime(2099, 1, 1, tzinfo=UTC)
    added, loaded, applied = (replace(mem(id=name), refreshed_at=ahead if name != "z-applied"
                                      else at(0)) for name in ("z-added", "z-loaded",
                                                               "z-applied"))
    store.add(added)
    store.add(applied)
    assert store.load([loaded], []) == (1, 0, 0)
    assert store.apply([Transition(applied.id, refreshed_at=ahead)]) == [True]
    taken = datetime.now(UTC)
    for memory_id in (added.id, loaded.id, applied.id):
        assert store.get(memory_id).refreshed_at <= taken, memory_id
    # Refreshed after the three were taken in: the most recent.
    newer = replace(mem(id="a-newer"), refreshed_at=datetime.now(UTC))
    store.add(newer)
    assert ids(store.recent(REPO))[0] == newer.id
    assert store.get(newer.id).refreshed_at == newer.refreshed_at  # a past time is kept


def test_by_path_breaks_equal_times_by_the_ids_bytes(store: MemoryStore) -> None:
    """The same order on every store, whatever a database's collation: ids compared as
    UTF-8 bytes (code points), so 'B' before '_' before 'a' before 'é'."""
    names = ["b-tie", "B-tie", "a-tie", "_tie", "\u00e9-tie", "Z-tie", "0-tie"]
    for name in names:
        store.add(mem(id=name, minutes=5, citations=(cite("src/app.py", 1, 2),)))
    assert ids(store.by_path(REPO, "src/app.py")) == sorted(names)
    assert ids(store.by_path(REPO, "src/app.py", limit=3)) == sorted(names)[:3]


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ((20, 25), ["early"]),  # touches the last cited line
        ((5, 10), ["early"]),  # touches the first cited line
        ((12, 14), ["early"]),  # inside
        ((1, 100), ["late", "early"]),  # around both
        ((21, 29), []),  # between
        ((40, 40), ["late"]),
        ((41, 50), []),
    ],
)
def test_by_path_with_lines_returns_overlapping_citations(
    store: MemoryStore, lines: tuple[int, int], expected: list[str]
) -> None:
    named = {
        "early": mem(minutes=1, citations=(cite("src/app.py", 10, 20),)),
        "late": mem(minutes=2, citations=(cite("src/app.py", 30, 40),)),
    }
    for m in named.values():
        store.add(m)

    assert ids(store.by_path(REPO, "src/app.py", lines=lines)) == [named[n].id for n in expected]


def test_by_path_lists_a_memory_once_however_often_it_cites_the_file(store: MemoryStore) -> None:
    m = mem(citations=(cite("src/app.py", 1, 5), cite("src/app.py", 8, 9), cite("src/app.py", 3)))
    store.add(m)

    assert ids(store.by_path(REPO, "src/app.py")) == [m.id]
    assert ids(store.by_path(REPO, "src/app.py", lines=(1, 9))) == [m.id]


def test_by_path_rejects_a_reversed_range(store: MemoryStore) -> None:
    with pytest.raises(ValidationError):
        store.by_path(REPO, "src/app.py", lines=(9, 3))


# ------------------------------------------------------------------------- apply


def test_apply_refresh_updates_fields_counters_and_events(store: MemoryStore) -> None:
    m = mem(minutes=0, verification_count=2)
    store.add(m)
    refresh = Transition(
        m.id,
        refreshed_at=at(60),
        verified_commit="e" * 40,
        add_verifications=1,
        events=(event(EventKind.VERIFIED_VALID, m.id, minutes=60),),
    )

    assert store.apply([refresh]) == [True]
    refreshed = store.get(m.id)
    assert store.apply([Transition(m.id, add_applications=2)]) == [True]
    applied = store.get(m.id)

    assert refreshed.refreshed_at == at(60)
    assert refreshed.verified_commit == "e" * 40
    assert refreshed.verification_count == 3
    assert refreshed.status is Status.ACTIVE
    assert refreshed.citations == m.citations
    assert (applied.verification_count, applied.applied_count) == (3, 2)
    assert applied.verified_commit == "e" * 40  # None leaves a field as it is
    assert [e.kind for e in store.events(memory_id=m.id)] == [EventKind.VERIFIED_VALID]


def test_apply_leaves_what_the_transition_says(store: MemoryStore) -> None:
    # The service computes a batch's results with Transition.apply_to instead of
    # reading them back: every store must agree with it, field for field.
    m = mem(citations=(cite("src/old.py", 1, 3),), verification_count=1)
    store.add(m)
    before = store.get(m.id)
    transitions = [
        Transition(m.id, refreshed_at=at(90), verified_commit="c" * 40, add_verifications=1,
                   citations=(cite("src/new.py", 4, 6, anchor=False),)),
        Transition(m.id, add_applications=3),
        Transition(m.id, status=Status.INVALID, invalid_reason="src/new.py:4-6 changed",
                   add_verifications=1),
    ]
    expected = before
    for transition in transitions:
        assert store.apply([transition]) == [True]
        expected = transition.apply_to(expected)
        assert store.get(m.id) == expected


def test_apply_records_confirms_revives_and_unconfirms(store: MemoryStore) -> None:
    # The ref rule's fields: where a verdict was made, a revival that clears the invalid
    # reason, and forgetting where (re-cited off the main line). Every store agrees
    # with Transition.apply_to, and a memory reads back with verified_ref.
    m = mem(verified_ref="main", verified_commit="a" * 40)
    store.add(m)
    assert store.get(m.id).verified_ref == "main"
    steps = [
        Transition(m.id, status=Status.INVALID, invalid_reason="src/app.py:1-3 changed",
                   verified_ref="trunk", verified_commit="b" * 40, add_verifications=1,
                   events=(event(EventKind.INVALIDATED, m.id),)),
        Transition(m.id, expect=Status.INVALID, status=Status.ACTIVE, refreshed_at=at(30),
                   verified_ref="main", verified_commit="c" * 40,
                   events=(event(EventKind.REVIVED, m.id),)),
        Transition(m.id, unconfirm=True, citations=(cite("src/other.py", 2, 4),),
                   events=(event(EventKind.RECITED, m.id),)),
    ]
    expected = store.get(m.id)
    for transition in steps:
        assert store.apply([transition]) == [True]
        expected = transition.apply_to(expected)
        assert store.get(m.id) == expected
    final = store.get(m.id)
    assert (final.status, final.invalid_reason) == (Status.ACTIVE, None)
    assert (final.verified_ref, final.verified_commit) == (None, None)
    assert [e.kind for e in store.events(memory_id=m.id)] == [
        EventKind.INVALIDATED, EventKind.REVIVED, EventKind.RECITED]
    assert store.stats(REPO).unconfirmed == 1


def test_apply_invalidate_hides_the_memory(store: MemoryStore) -> None:
    m = mem(citations=(cite("src/app.py", 1, 3),), subject="retry policy")
    store.add(m)

    assert store.apply([
        Transition(m.id, status=Status.INVALID, invalid_reason="src/app.py:1-3 changed")
    ]) == [True]

    invalid = store.get(m.id)
    assert invalid.status is Status.INVALID
    assert invalid.invalid_reason == "src/app.py:1-3 changed"
    assert store.recent(REPO) == []
    assert store.search(REPO, "retry") == []
    assert store.by_path(REPO, "src/app.py") == []
    assert ids(store.recent(REPO, status=Status.INVALID)) == [m.id]


def test_apply_replaces_citations(store: MemoryStore) -> None:
    m = mem(citations=(cite("src/old.py", 1, 3), cite("src/keep.py", 5, 6)))
    store.add(m)
    moved = (cite("src/new.py", 20, 22), cite("src/keep.py", 7, 8, anchor=False))

    assert store.apply([Transition(m.id, citations=moved)]) == [True]

    assert store.get(m.id).citations == moved
    assert store.by_path(REPO, "src/old.py") == []
    assert ids(store.by_path(REPO, "src/new.py")) == [m.id]
    assert store.by_path(REPO, "src/keep.py", lines=(5, 6)) == []


def test_apply_of_two_rewrites_in_one_batch_keeps_the_last(store: MemoryStore) -> None:
    m = mem(citations=(cite("src/a.py", 1, 3),))
    store.add(m)
    first = (cite("src/b.py", 4, 6),)
    last = (cite("src/c.py", 7, 9), cite("src/d.py", 1, 1, anchor=False))

    assert store.apply([
        Transition(m.id, citations=first, add_verifications=1),
        Transition(m.id, add_applications=1),
        Transition(m.id, citations=last, add_verifications=1),
    ]) == [True, True, True]

    after = store.get(m.id)
    assert after.citations == last
    assert (after.verification_count, after.applied_count) == (2, 1)
    assert store.by_path(REPO, "src/b.py") == []
    assert ids(store.by_path(REPO, "src/d.py")) == [m.id]


def test_apply_skips_a_transition_whose_memory_moved_on(store: MemoryStore) -> None:
    a = mem()
    b = mem(status=Status.INVALID)
    store.add(a)
    store.add(b)

    results = store.apply([
        Transition(a.id, add_verifications=1, events=(event(EventKind.REFRESHED, a.id),)),
        Transition(b.id, add_verifications=1, events=(event(EventKind.REFRESHED, b.id),)),
    ])

    assert results == [True, False]
    assert store.get(a.id).verification_count == 1
    assert store.get(b.id) == b
    assert len(store.events(memory_id=a.id)) == 1
    assert store.events(memory_id=b.id) == []


def test_apply_sees_earlier_transitions_of_the_same_batch(store: MemoryStore) -> None:
    m = mem()
    store.add(m)

    results = store.apply([
        Transition(m.id, status=Status.INVALID, invalid_reason="gone"),
        Transition(m.id, add_verifications=1, events=(event(EventKind.REFRESHED, m.id),)),
    ])

    assert results == [True, False]
    assert store.get(m.id).status is Status.INVALID
    assert store.get(m.id).verification_count == 0
    assert store.events(memory_id=m.id) == []


def test_apply_of_many_alike_refreshes_is_each_refresh_in_order(store: MemoryStore) -> None:
    # A pass's refreshes set the same values on many memories (the SQLite store writes
    # them as one statement): each memory is refreshed once, one named twice twice, one
    # refreshed otherwise keeps its own values, and the events are written in order.
    memories = [mem(subject=f"memory {i}", minutes=i) for i in range(5)]
    for m in memories:
        store.add(m)
    a, b, c, d, e = memories

    def refresh(m: Memory, minutes: float, commit: str = "e" * 40) -> Transition:
        return Transition(m.id, refreshed_at=at(minutes), verified_commit=commit,
                          add_verifications=1,
                          events=(event(EventKind.VERIFIED_VALID, m.id, minutes=60,
                                        step=m.subject),))

    transitions = [refresh(a, 60), refresh(b, 60), refresh(a, 60), refresh(c, 60),
                   refresh(d, 61, "f" * 40), refresh(e, 60)]
    assert store.apply(transitions) == [True] * 6

    expected = {m.id: m for m in memories}
    for transition in transitions:
        expected[transition.memory_id] = transition.apply_to(expected[transition.memory_id])
    assert [store.get(m.id) for m in memories] == [expected[m.id] for m in memories]
    assert store.get(a.id).verification_count == 2
    assert store.get(d.id).verified_commit == "f" * 40
    assert [(x.memory_id, x.detail["step"]) for x in store.events(repo=REPO, limit=None)
            if x.kind is EventKind.VERIFIED_VALID] == [
        (m.id, m.subject) for m in [a, b, a, c, d, e]]


def test_apply_skips_a_verdict_once_another_verdict_was_recorded(store: MemoryStore) -> None:
    # A verdict carries the commit its pass read the memory judged at (never judged:
    # NEVER_JUDGED); a verdict recorded since, by another pass or earlier in the same
    # batch, makes the store skip it with its events. Not a status check: the memory
    # is active throughout.
    fresh, judged = mem(subject="never judged"), mem(subject="judged",
                                                   verified_ref="main",
                                                   verified_commit="a" * 40)
    store.add(fresh)
    store.add(judged)

    def verdict(m: Memory, read: str | None, commit: str, **change: Any) -> Transition:
        return Transition(m.id, expect_judged=read or NEVER_JUDGED, verified_ref="main",
                          verified_commit=commit, add_verifications=1,
                          events=(event(EventKind.VERIFIED_VALID, m.id, commit=commit),),
                          **change)

    # Two passes read both memories; the later commit's verdicts are recorded first.
    assert store.apply([verdict(fresh, None, "c" * 40),
                        verdict(judged, "a" * 40, "c" * 40)]) == [True, True]
    late = [verdict(fresh, None, "b" * 40, status=Status.INVALID, invalid_reason="gone"),
            verdict(judged, "a" * 40, "b" * 40, status=Status.INVALID, invalid_reason="x")]
    assert store.apply(late) == [False, False]
    for m in (fresh, judged):
        after = store.get(m.id)
        assert (after.status, after.verified_commit, after.verification_count) == (
            Status.ACTIVE, "c" * 40, 1)
        assert [e.detail["commit"] for e in store.events(memory_id=m.id)] == ["c" * 40]
    # In one batch, each verdict sees the one before it; a transition that checks no
    # verdict (feedback, a use) still applies, and unconfirming is seen as never judged.
    assert store.apply([
        verdict(judged, "c" * 40, "d" * 40),
        verdict(judged, "c" * 40, "e" * 40),
        Transition(judged.id, add_applications=1),
        Transition(judged.id, unconfirm=True),
        verdict(judged, "d" * 40, "f" * 40),
        verdict(judged, None, "f" * 40),
    ]) == [True, False, True, True, False, True]
    after = store.get(judged.id)
    assert (after.verified_commit, after.verification_count, after.applied_count) == (
        "f" * 40, 3, 1)


def test_apply_skips_a_verdict_on_citations_the_memory_no_longer_has(
        store: MemoryStore) -> None:
    # A verdict carries the citations its pass checked too (Transition.cited); a memory
    # re-cited since, by another writer or earlier in the same batch, makes the store
    # skip it with its events. Off the main line a re-cite leaves the memory active and
    # never judged: only its citations tell it apart. A transition that names none
    # (the re-cite itself, feedback) is not checked.
    m = mem(citations=(cite("src/app.py", 10, 12), cite("src/b.py", 1, 2)))
    store.add(m)
    read = Transition.cited(m.citations)

    def verdict(cited: tuple[Cited, ...], commit: str = "c" * 40) -> Transition:
        return Transition(m.id, expect_judged=NEVER_JUDGED, expect_citations=cited,
                          status=Status.INVALID, invalid_reason="gone", verified_ref="main",
                          verified_commit=commit, add_verifications=1,
                          events=(event(EventKind.VERIFIED_INVALID, m.id, commit=commit),))

    def recite(*citations: Citation) -> Transition:
        return Transition(m.id, citations=citations, unconfirm=True,
                          events=(event(EventKind.RECITED, m.id),))

    assert store.apply([recite(cite("src/app.py", 20, 22), m.citations[1])]) == [True]
    recited = store.get(m.id)
    (path, _, _, snippet), other = read
    # The old citations, and any that differ in one field, in order, or in number.
    assert store.apply([verdict(read), verdict(((path, 20, 22, snippet), other)),
                        verdict(((path, 20, 22, "0" * 16), other)),
                        verdict((other, (path, 20, 22, snippet))),
                        verdict(((path, 20, 22, snippet),))]) == [False] * 5
    assert store.get(m.id) == recited
    assert [e.kind for e in store.events(memory_id=m.id)] == [EventKind.RECITED]
    # In one batch, each verdict sees the re-cites before it.
    assert store.apply([recite(*m.citations), verdict(Transition.cited(recited.citations)),
                        verdict(read, "d" * 40), Transition(m.id, expect=Status.INVALID,
                                                            add_applications=1)]) == [
        True, False, True, True]
    after = store.get(m.id)
    assert (after.status, after.verified_commit, after.citations, after.applied_count) == (
        Status.INVALID, "d" * 40, m.citations, 1)
    assert [e.detail.get("commit") for e in store.events(
        memory_id=m.id, kinds=[EventKind.VERIFIED_INVALID])] == ["d" * 40]


def test_apply_of_two_transitions_that_require_each_other_is_all_or_nothing(
        store: MemoryStore) -> None:
    # Approving a correction retires what it corrects: each transition requires the
    # other's memory, so they apply together, or neither does when either memory moved
    # on (checked after the transitions before it in the batch).
    def approval(new: Memory, old: Memory) -> list[Transition]:
        return [Transition(new.id, expect=Status.PENDING, status=Status.ACTIVE,
                           requires=(old.id, Status.ACTIVE),
                           events=(event(EventKind.APPROVED, new.id),)),
                Transition(old.id, status=Status.SUPERSEDED, superseded_by=new.id,
                           requires=(new.id, Status.ACTIVE),
                           events=(event(EventKind.SUPERSEDED, old.id),))]

    old = mem(subject="old")
    new = mem(subject="new", status=Status.PENDING, supersedes=old.id)
    rejected = mem(subject="rejected", status=Status.INVALID, supersedes=old.id)
    for m in (old, new, rejected):
        store.add(m)
    assert store.apply(approval(rejected, old)) == [False, False]
    assert store.get(old.id) == old
    assert store.apply(approval(new, old)) == [True, True]
    expected = approval(new, old)[1].apply_to(old)
    assert store.get(old.id) == expected
    assert (expected.status, expected.superseded_by) == (Status.SUPERSEDED, new.id)
    assert store.get(new.id).status is Status.ACTIVE
    assert sorted(e.kind.value for e in store.events(repo=REPO)) == ["approved",
                                                                    "superseded"]
    # The memory it corrects retired meanwhile: nothing applies, nothing is logged.
    later = mem(subject="later", status=Status.PENDING, supersedes=old.id)
    store.add(later)
    assert store.apply(approval(later, old)) == [False, False]
    assert store.get(later.id).status is Status.PENDING
    assert len(store.events(repo=REPO)) == 2


def test_apply_can_expect_another_status(store: MemoryStore) -> None:
    m = mem(status=Status.PENDING)
    store.add(m)

    assert store.apply([
        Transition(m.id, expect=Status.PENDING, status=Status.ACTIVE)]) == [True]

    assert store.get(m.id).status is Status.ACTIVE
    assert ids(store.recent(REPO)) == [m.id]


def test_apply_with_an_unknown_id_writes_nothing(store: MemoryStore) -> None:
    m = mem()
    store.add(m)

    with pytest.raises(NotFound, match="no-such-id"):
        store.apply([
            Transition(m.id, status=Status.INVALID, add_verifications=1,
                       citations=(cite("src/new.py", 1, 1),),
                       events=(event(EventKind.INVALIDATED, m.id),)),
            Transition("no-such-id", add_verifications=1),
        ])

    assert store.get(m.id) == m
    assert store.events(repo=REPO) == []


def test_apply_of_nothing_is_nothing(store: MemoryStore) -> None:
    assert store.apply([]) == []


# ------------------------------------------------------------------------- supersede


def test_supersede_retires_the_old_memory(store: MemoryStore) -> None:
    old = mem("retry policy", "three retries", minutes=1, citations=(cite("src/app.py", 1, 2),))
    store.add(old)
    new = mem("retry policy", "five retries", minutes=2, supersedes=old.id,
              citations=(cite("src/app.py", 1, 3),))

    store.supersede(old.id, new, [event(EventKind.SUPERSEDED, old.id, replaced_by=new.id)])

    retired = store.get(old.id)
    assert retired.status is Status.SUPERSEDED
    assert retired.superseded_by == new.id
    assert store.get(new.id) == new
    assert ids(store.recent(REPO)) == [new.id]
    assert ids(store.by_path(REPO, "src/app.py")) == [new.id]
    assert ids(store.search(REPO, "retry")) == [new.id]
    [logged] = store.events(memory_id=old.id)
    assert dict(logged.detail) == {"replaced_by": new.id}


def test_supersede_fills_in_the_back_pointer(store: MemoryStore) -> None:
    old = mem()
    store.add(old)
    new = mem()

    store.supersede(old.id, new)

    assert store.get(new.id).supersedes == old.id


def test_supersede_refuses_a_back_pointer_to_another_memory(store: MemoryStore) -> None:
    old = mem()
    store.add(old)
    new = mem(supersedes="someone-else")

    with pytest.raises(ValidationError):
        store.supersede(old.id, new)

    assert store.get(old.id).status is Status.ACTIVE
    with pytest.raises(NotFound):
        store.get(new.id)


@pytest.mark.parametrize("status", [Status.INVALID, Status.SUPERSEDED, Status.PENDING])
def test_supersede_of_a_memory_that_is_not_active_is_a_conflict(
    store: MemoryStore, status: Status
) -> None:
    old = mem(status=status)
    store.add(old)
    new = mem(supersedes=old.id)

    with pytest.raises(Conflict, match=old.id):
        store.supersede(old.id, new, [event(EventKind.SUPERSEDED, old.id)])

    assert store.get(old.id) == old
    with pytest.raises(NotFound):
        store.get(new.id)
    assert store.events(repo=REPO) == []


def test_supersede_twice_is_a_conflict_the_second_time(store: MemoryStore) -> None:
    old = mem()
    store.add(old)
    first, second = mem(supersedes=old.id), mem(supersedes=old.id)

    store.supersede(old.id, first)
    with pytest.raises(Conflict):
        store.supersede(old.id, second)

    assert store.get(old.id).superseded_by == first.id
    with pytest.raises(NotFound):
        store.get(second.id)


def test_supersede_of_an_unknown_memory_is_not_found(store: MemoryStore) -> None:
    new = mem(supersedes="no-such-id")

    with pytest.raises(NotFound, match="no-such-id"):
        store.supersede("no-such-id", new, [event(EventKind.SUPERSEDED, "no-such-id")])

    with pytest.raises(NotFound):
        store.get(new.id)
    assert store.events(repo=REPO) == []


def test_supersede_with_a_taken_id_is_a_conflict_and_keeps_the_old_active(
    store: MemoryStore,
) -> None:
    old, taken = mem(), mem()
    store.add(old)
    store.add(taken)

    with pytest.raises(Conflict):
        store.supersede(old.id, replace(taken, supersedes=old.id, subject="changed"))

    assert store.get(old.id).status is Status.ACTIVE
    assert store.get(taken.id) == taken


# ------------------------------------------------------------------------- events


def test_events_are_oldest_first_and_filterable(store: MemoryStore) -> None:
    store.log([
        event(EventKind.RETRIEVED, "m1", minutes=5),
        event(EventKind.APPLIED, "m1", minutes=1),
        event(EventKind.FEEDBACK, "m2", minutes=3),
        event(EventKind.RETRIEVED, "m3", minutes=2, repo=OTHER),
    ])

    in_repo = store.events(repo=REPO)
    assert [e.at for e in in_repo] == [at(1), at(3), at(5)]
    assert [e.memory_id for e in store.events(memory_id="m1")] == ["m1", "m1"]
    assert [e.kind for e in store.events(repo=REPO, memory_id="m1")] == [
        EventKind.APPLIED, EventKind.RETRIEVED,
    ]
    assert [e.repo for e in store.events(kinds=[EventKind.RETRIEVED])] == [OTHER, REPO]
    assert len(store.events(repo=REPO, kinds=[EventKind.APPLIED, EventKind.FEEDBACK])) == 2
    assert store.events(repo=REPO, kinds=[]) == []
    assert [e.at for e in store.events(repo=REPO, limit=2)] == [at(1), at(3)]
    assert len(store.events(limit=None)) == 4
    assert len({e.id for e in store.events()}) == 4


def test_events_are_append_only(store: MemoryStore) -> None:
    store.log([event(EventKind.FEEDBACK, "m1", minutes=1, note="useful", tags=["a"])])
    [first] = store.events(repo=REPO)
    first.detail["tags"].append("mutated")

    store.log([event(EventKind.FEEDBACK, "m1", minutes=2, note="later")])

    again = store.events(repo=REPO)
    assert len(again) == 2
    assert again[0] == replace(first, detail={"note": "useful", "tags": ["a"]})
    assert again[1].id != again[0].id


def test_log_of_an_unserialisable_detail_writes_nothing(store: MemoryStore) -> None:
    with pytest.raises(ValidationError):
        store.log([event(EventKind.FEEDBACK, "m1"), event(EventKind.FEEDBACK, "m1", x=object())])

    assert store.events(repo=REPO) == []


def test_log_of_nothing_is_harmless(store: MemoryStore) -> None:
    store.log([])

    assert store.events() == []


# ------------------------------------------------------------------------- stats


def test_stats_counts_statuses_events_and_active_citations(store: MemoryStore) -> None:
    two_citations = (cite("a.py", 1, 2), cite("b.py", 1, 2))
    store.add(mem(citations=two_citations), [event(EventKind.CREATED)])
    store.add(mem(), [event(EventKind.CREATED)])
    store.add(mem(status=Status.INVALID, citations=two_citations))
    store.add(mem(repo=OTHER), [event(EventKind.CREATED, repo=OTHER)])
    store.log([event(EventKind.VERIFIED_VALID), event(EventKind.VERIFIED_INVALID),
               event(EventKind.VERIFIED_VALID)])

    stats = store.stats(REPO)

    assert stats.repo == REPO
    assert dict(stats.by_status) == {"active": 2, "pending": 0, "invalid": 1, "superseded": 0,
                                     "expired": 0}
    assert dict(stats.events) == {"created": 2, "verified_invalid": 1, "verified_valid": 2}
    assert stats.citations == 3
    assert stats.invalidation_rate == pytest.approx(1 / 3)
    assert stats.unconfirmed == 2  # active, never judged on the main line


def test_quality_counts_follow_the_memory_rules(store: MemoryStore) -> None:
    # validated: applied 3+ times, 90 %+ of its feedback a success; poor: 4+ feedbacks,
    # under 50 % success (Memory.validated / Memory.poor; the SQL stores count alike).
    shapes = {
        "validated": (3, 9, 1), "not applied enough": (2, 5, 0), "too few successes": (3, 8, 2),
        "poor": (4, 1, 3), "no feedback": (5, 0, 0),
    }
    made = {}
    for name, (applied, successes, failures) in shapes.items():
        m = mem(subject=name)
        store.add(m)
        store.apply([Transition(m.id, add_applications=applied, add_successes=successes,
                                add_failures=failures, used_at=at(5),
                                promoted_to="AGENTS.md" if name == "validated" else None)])
        made[name] = store.get(m.id)
    assert made["validated"].validated
    assert (made["validated"].success_count, made["validated"].failure_count) == (9, 1)
    assert made["validated"].used_at == at(5)
    assert made["validated"].promoted_to == "AGENTS.md"
    assert [n for n, m in made.items() if m.validated] == ["validated"]
    assert [n for n, m in made.items() if m.poor] == ["poor"]
    stats = store.stats(REPO)
    assert (stats.validated, stats.poor) == (1, 1)
    with pytest.raises(ValidationError, match="counters only grow"):
        store.apply([Transition(made["poor"].id, add_failures=-1)])


def test_a_demotion_clears_the_rules_file_whatever_the_status(store: MemoryStore) -> None:
    # Before: promoted_to=None keeps the file, so no transition could clear it and a
    # rule taken out stayed "promoted" (and "stale" once retired) for good.
    kept, retired, twice = mem(subject="kept"), mem(subject="retired"), mem(subject="twice")
    for m in (kept, retired, twice):
        store.add(m)
    store.apply([Transition(m.id, promoted_to="AGENTS.md") for m in (kept, retired, twice)])
    store.apply([Transition(retired.id, status=Status.INVALID, invalid_reason="gone")])
    demoted = event(EventKind.DEMOTED, retired.id, **{"from": "AGENTS.md", "by": "ana"})
    # Skipped, with its event, when the memory is no longer as read.
    assert store.apply([Transition(retired.id, demote=True, events=(demoted,))]) == [False]
    assert store.get(retired.id).promoted_to == "AGENTS.md"
    assert store.apply([Transition(retired.id, expect=Status.INVALID, demote=True,
                                   events=(demoted,))]) == [True]
    # In a batch each transition sees the ones before it: demoted, then promoted again.
    assert store.apply([Transition(twice.id, demote=True),
                        Transition(twice.id, promoted_to="CLAUDE.md"),
                        Transition(kept.id, promoted_to="CLAUDE.md"),
                        Transition(kept.id, demote=True),
                        Transition(kept.id, promoted_to="AGENTS.md")]) == [True] * 5
    found = store.get_many([kept.id, retired.id, twice.id])
    assert [m.promoted_to for m in found] == ["AGENTS.md", None, "CLAUDE.md"]
    assert store.apply([Transition(twice.id, promoted_to="AGENTS.md"),
                        Transition(twice.id, demote=True)]) == [True, True]
    assert store.get(twice.id).promoted_to is None
    assert (found[1].status, found[1].stale_rule) == (Status.INVALID, None)
    assert [(e.kind, e.detail) for e in store.events(memory_id=retired.id)] == [
        (EventKind.DEMOTED, {"from": "AGENTS.md", "by": "ana"})]
    with pytest.raises(ValidationError, match="both promote and demote"):
        store.apply([Transition(kept.id, demote=True, promoted_to="AGENTS.md")])
    assert store.get(kept.id).promoted_to == "AGENTS.md"


def test_expired_is_a_status_of_its_own(store: MemoryStore) -> None:
    kept, gone = mem(minutes=1), mem(minutes=2)
    store.add(kept)
    store.add(gone)
    assert store.apply([Transition(gone.id, status=Status.EXPIRED,
                                   events=(event(EventKind.EXPIRED, gone.id),))]) == [True]
    assert ids(store.recent(REPO)) == [kept.id]
    assert ids(store.recent(REPO, status=Status.EXPIRED)) == [gone.id]
    assert store.stats(REPO).by_status["expired"] == 1
    assert store.apply([Transition(gone.id, expect=Status.EXPIRED, status=Status.ACTIVE,
                                   used_at=at(9))]) == [True]
    assert store.get(gone.id).status is Status.ACTIVE


def test_listings_filter_by_category_and_tag_before_the_limit(store: MemoryStore) -> None:
    rule = mem("fiscal year rule", "the fiscal year starts in April", minutes=1,
               category="business_rule", tags=("finance",),
               citations=(cite("src/app.py", 1, 3),))
    style = mem("naming rule", "the fiscal code uses snake case", minutes=2,
                category="convention", tags=("style", "finance"),
                citations=(cite("src/app.py", 2, 4),))
    other = mem("fiscal naming", "fiscal helpers live in fiscal.py", minutes=3,
                category="convention", citations=(cite("src/app.py", 3, 5),))
    for m in (rule, style, other):
        store.add(m)
    assert ids(store.recent(REPO, category="convention")) == [other.id, style.id]
    assert ids(store.recent(REPO, tag="finance")) == [style.id, rule.id]
    assert ids(store.recent(REPO, category="convention", tag="finance", limit=1)) == [style.id]
    assert ids(store.search(REPO, "fiscal", category="business_rule")) == [rule.id]
    assert set(ids(store.search(REPO, "fiscal", tag="finance"))) == {rule.id, style.id}
    assert ids(store.by_path(REPO, "src/app.py", category="convention", limit=1)) == [other.id]
    assert ids(store.by_path(REPO, "src/app.py", tag="style")) == [style.id]
    assert store.recent(REPO, tag="nobody") == []


def test_checked_events_are_kept_but_never_count_as_verdicts(store: MemoryStore) -> None:
    store.add(mem())
    store.log([event(EventKind.CHECKED), event(EventKind.CHECKED), event(EventKind.CHECKED)])

    stats = store.stats(REPO)

    assert stats.events == {"checked": 3}
    assert stats.invalidation_rate is None


def test_stats_of_an_empty_repository_has_every_status_at_zero(store: MemoryStore) -> None:
    stats = store.stats("nobody/nothing")

    assert dict(stats.by_status) == {s.value: 0 for s in Status}
    assert dict(stats.events) == {}
    assert stats.citations == 0


# ------------------------------------------------------------------------- lifecycle


def test_close_is_idempotent_and_final(store: MemoryStore) -> None:
    store.add(mem())

    store.close()
    store.close()

    with pytest.raises(StoreError):
        store.recent(REPO)


def test_count_is_per_repository_and_status(store: MemoryStore) -> None:
    store.add(mem())
    store.add(mem(status=Status.PENDING))
    store.add(mem(status=Status.INVALID))
    store.add(mem(repo=OTHER))
    assert store.count(REPO) == 1
    assert store.count(REPO, status=Status.PENDING) == 1
    assert store.count(REPO, status=None) == 3
    assert store.count("nobody/nothing") == 0
    assert store.count(REPO, status=None, at_most=2) == 2  # counting stops there
    assert store.count(REPO, status=None, at_most=5) == 3
    assert store.count(REPO, at_most=0) == 0


def test_oldest_never_applied_are_the_longest_unused_active_ones(store: MemoryStore) -> None:
    """The soft limit's candidates to retire: by ``used_at``, else ``created_at``, then id;
    in the store's own query where it has one, else sorted by the helper."""
    never = mem("created at minute 1", minutes=1)
    used_late = mem("used at minute 5", used_at=at(5))
    second = mem("created at minute 2", minutes=2, id="cccccccc-0000-4000-8000-000000000000")
    twin = mem("also minute 2", minutes=2, id="bbbbbbbb-0000-4000-8000-000000000000")
    used_early = mem("used at minute 3", minutes=4, used_at=at(3))
    for other in (mem("applied", applied_count=1), mem("invalid", status=Status.INVALID),
                  mem("elsewhere", repo=OTHER), never, used_late, second, twin, used_early):
        store.add(other)
    found = oldest_never_applied(store, REPO, 3)
    assert [m.subject for m in found] == ["created at minute 1", "also minute 2",
                                          "created at minute 2"]
    assert found[0].citations == never.citations  # whole memories, citations included
    assert [m.subject for m in oldest_never_applied(store, REPO, 10)][3:] == [
        "used at minute 3", "used at minute 5"]
