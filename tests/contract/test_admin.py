"""The ``MemoryStore`` contract, audit and hygiene: listings by any filter, id prefixes,
forgetting with tombstones, the telemetry archive, event keys, imports in one
transaction, and what a store says about itself. Run unchanged on every store."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tests.contract.test_store import OTHER, REPO, at, cite, event, ids, mem
from verified_memory.audit import cut_by_archive, trail
from verified_memory.errors import NotFound, ValidationError
from verified_memory.models import (
    EventKind,
    Memory,
    MemoryFilter,
    Status,
    TelemetryEvent,
    Tombstone,
)
from verified_memory.store.base import MemoryStore


def _fill(store: MemoryStore) -> dict[str, Memory]:
    """Six memories of REPO in every status, with categories, tags, authors and paths
    that set them apart, and one of OTHER."""
    memories = {
        "active": mem("active one", id="aaaa1111-0", minutes=10, category="convention",
                      tags=("api",), created_by="alice",
                      citations=(cite("src/api.py", 1, 3),)),
        "pending": mem("pending one", id="aaaa2222-0", minutes=20, status=Status.PENDING,
                       category="business_rule", created_by="bob"),
        "invalid": mem("invalid one", id="bbbb1111-0", minutes=30, status=Status.INVALID,
                       tags=("api", "old"), created_by="alice",
                       citations=(cite("src/api.py", 40, 42), cite("src/db.py", 1, 2))),
        "superseded": mem("superseded one", id="bbbb2222-0", minutes=40,
                          status=Status.SUPERSEDED, created_by="bob"),
        "expired": mem("expired one", id="cccc1111-0", minutes=50, status=Status.EXPIRED,
                       created_by="carol"),
        "active2": mem("second active", id="cccc2222-0", minutes=60, created_by="carol",
                       citations=(cite("src/db.py", 5, 9),)),
        "other": mem("other repo", id="dddd1111-0", repo=OTHER, minutes=70),
    }
    for memory in memories.values():
        store.add(memory)
    return memories


# --------------------------------------------------------------------------- find


def test_find_lists_every_status_newest_first_by_default(store: MemoryStore) -> None:
    m = _fill(store)
    assert ids(store.find(REPO)) == ["cccc2222-0", "cccc1111-0", "bbbb2222-0", "bbbb1111-0",
                                     "aaaa2222-0", "aaaa1111-0"]
    assert ids(store.find(REPO, limit=2)) == ["cccc2222-0", "cccc1111-0"]
    assert ids(store.find(REPO, limit=None)) == ids(store.find(REPO))
    assert store.find(REPO)[0] == m["active2"]


@pytest.mark.parametrize(("where", "expected"), [
    (MemoryFilter(status=Status.ACTIVE), ["cccc2222-0", "aaaa1111-0"]),
    (MemoryFilter(status=Status.INVALID), ["bbbb1111-0"]),
    (MemoryFilter(status=Status.EXPIRED), ["cccc1111-0"]),
    (MemoryFilter(category="convention"), ["aaaa1111-0"]),
    (MemoryFilter(tag="api"), ["bbbb1111-0", "aaaa1111-0"]),
    (MemoryFilter(tag="api", status=Status.ACTIVE), ["aaaa1111-0"]),
    (MemoryFilter(path="src/api.py"), ["bbbb1111-0", "aaaa1111-0"]),
    (MemoryFilter(path="src/db.py"), ["cccc2222-0", "bbbb1111-0"]),
    (MemoryFilter(path="src/none.py"), []),
    (MemoryFilter(created_by="bob"), ["bbbb2222-0", "aaaa2222-0"]),
    (MemoryFilter(since=at(40)), ["cccc2222-0", "cccc1111-0", "bbbb2222-0"]),
    (MemoryFilter(since=at(40), created_by="carol", status=Status.ACTIVE), ["cccc2222-0"]),
])
def test_find_keeps_what_the_filter_keeps(store: MemoryStore, where: MemoryFilter,
                                          expected: list[str]) -> None:
    memories = _fill(store)
    found = store.find(REPO, where)
    assert ids(found) == expected
    assert all(where.keeps(m) for m in found)
    assert not [m for m in memories.values()
                if m.repo == REPO and where.keeps(m) and m.id not in expected]


def test_find_filters_before_the_limit_across_statuses(store: MemoryStore) -> None:
    for n in range(6):
        store.add(mem(f"old {n}", minutes=n, status=Status.INVALID, created_by="x"))
    for n in range(6):
        store.add(mem(f"new {n}", minutes=100 + n, created_by="y"))
    assert [m.subject for m in store.find(REPO, MemoryFilter(created_by="x"), limit=3)] == [
        "old 5", "old 4", "old 3"]
    assert [m.subject for m in store.find(REPO, limit=7)][-1] == "old 5"


# --------------------------------------------------------------------------- prefixes


def test_match_ids_finds_memories_and_tombstones_by_prefix(store: MemoryStore) -> None:
    _fill(store)
    assert store.match_ids("aaaa") == ["aaaa1111-0", "aaaa2222-0"]
    assert store.match_ids("aaaa1") == ["aaaa1111-0"]
    assert store.match_ids("aaaa1111-0") == ["aaaa1111-0"]
    assert store.match_ids("zz") == []
    assert store.match_ids("", limit=3) == ["aaaa1111-0", "aaaa2222-0", "bbbb1111-0"]
    assert store.match_ids("a%") == []
    assert store.match_ids("a_") == []
    store.forget(["aaaa2222-0"], by="t", reason="r")
    assert store.match_ids("aaaa") == ["aaaa1111-0", "aaaa2222-0"]  # the tombstone too


# --------------------------------------------------------------------------- forget


def test_forget_deletes_text_and_citations_and_keeps_a_tombstone(store: MemoryStore) -> None:
    memories = _fill(store)
    store.log([event(EventKind.RETRIEVED, "bbbb1111-0", minutes=31)])
    (stone,) = store.forget(["bbbb1111-0"], by="alice", reason="a secret in the fact",
                            at=at(90))
    assert (stone.id, stone.repo, stone.status, stone.forgotten_by, stone.forgotten_at,
            stone.reason) == ("bbbb1111-0", REPO, Status.INVALID, "alice", at(90),
                              "a secret in the fact")
    with pytest.raises(NotFound):
        store.get("bbbb1111-0")
    assert "bbbb1111-0" not in ids(store.find(REPO, limit=None))
    assert store.by_path(REPO, "src/api.py") == [memories["active"]]
    assert store.search(REPO, "invalid") == []
    assert store.tombstones(ids=["bbbb1111-0"]) == [stone]
    trail = store.events(memory_id="bbbb1111-0", limit=None)
    assert [e.kind for e in trail] == [EventKind.RETRIEVED, EventKind.FORGOTTEN]
    assert (trail[-1].actor, trail[-1].at, dict(trail[-1].detail)) == (
        "alice", at(90), {"reason": "a secret in the fact", "status": "invalid"})
    stats = store.stats(REPO)
    assert (stats.forgotten, stats.total, stats.by_status["invalid"]) == (1, 5, 0)
    assert stats.citations == 2  # of the active memories: unchanged
    assert stats.events["forgotten"] == 1


def test_forget_is_all_or_nothing_and_checks_the_repository(store: MemoryStore) -> None:
    _fill(store)
    with pytest.raises(NotFound, match="nope"):
        store.forget(["aaaa1111-0", "nope"], by="t", reason="r")
    with pytest.raises(NotFound, match="dddd1111-0"):
        store.forget(["aaaa1111-0", "dddd1111-0"], repo=REPO, by="t", reason="r")
    with pytest.raises(ValidationError, match="reason"):
        store.forget(["aaaa1111-0"], by="t", reason="  ")
    assert store.tombstones(limit=None) == []
    assert store.get("aaaa1111-0").subject == "active one"
    assert store.events(kinds=[EventKind.FORGOTTEN]) == []
    store.forget(["aaaa1111-0"], by="t", reason="r")
    with pytest.raises(NotFound):  # forgotten once is forgotten
        store.forget(["aaaa1111-0"], by="t", reason="again")


def test_forget_a_whole_repository(store: MemoryStore) -> None:
    _fill(store)
    stones = store.forget(repo=REPO, by="admin", reason="wipe", at=at(100))
    assert sorted(t.id for t in stones) == ["aaaa1111-0", "aaaa2222-0", "bbbb1111-0",
                                            "bbbb2222-0", "cccc1111-0", "cccc2222-0"]
    assert store.find(REPO, limit=None) == []
    assert store.count(REPO, status=None) == 0
    assert [m.id for m in store.find(OTHER)] == ["dddd1111-0"]
    assert store.stats(REPO).forgotten == 6
    assert len(store.events(repo=REPO, kinds=[EventKind.FORGOTTEN], limit=None)) == 6
    assert store.forget(repo=REPO, by="admin", reason="again") == []
    assert {t.repo for t in store.tombstones(repo=REPO, limit=None)} == {REPO}
    assert store.tombstones(repo=OTHER) == []


def test_tombstones_newest_first(store: MemoryStore) -> None:
    _fill(store)
    store.forget(["aaaa1111-0"], by="a", reason="first", at=at(100))
    store.forget(["cccc1111-0", "bbbb2222-0"], by="b", reason="second", at=at(200))
    assert [t.id for t in store.tombstones(repo=REPO)] == ["bbbb2222-0", "cccc1111-0",
                                                          "aaaa1111-0"]
    assert [t.id for t in store.tombstones(repo=REPO, limit=1)] == ["bbbb2222-0"]
    assert [t.reason for t in store.tombstones(ids=["aaaa1111-0", "zz"])] == ["first"]


# --------------------------------------------------------------------------- events


def _trail(store: MemoryStore) -> None:
    store.add(mem(id="m1"))
    store.log([
        event(EventKind.CREATED, "m1", minutes=1),
        event(EventKind.RETRIEVED, "m1", minutes=2),
        event(EventKind.CHECKED, "m1", minutes=3),
        event(EventKind.VERIFIED_VALID, "m1", minutes=4),
        event(EventKind.RETRIEVED, "m1", minutes=5),
        event(EventKind.INVALIDATED, "m1", minutes=6, reason="gone"),
        event(EventKind.CREATED, "m2", repo=OTHER, minutes=7),
    ])


def test_events_changes_since_and_newest(store: MemoryStore) -> None:
    _trail(store)
    kinds = [e.kind.value for e in store.events(repo=REPO, changes=True)]
    assert kinds == ["created", "verified_valid", "invalidated"]
    assert [e.kind.value for e in store.events(memory_id="m1", changes=True, newest=True,
                                               limit=2)] == ["invalidated", "verified_valid"]
    assert [e.kind.value for e in store.events(repo=REPO, newest=True, limit=2)] == [
        "invalidated", "retrieved"]
    assert [e.at for e in store.events(repo=REPO, since=at(5))] == [at(5), at(6)]
    assert [e.kind.value for e in store.events(changes=True, newest=True, limit=1)] == [
        "created"]


def test_every_event_gets_a_key_and_keeps_the_one_it_has(store: MemoryStore) -> None:
    store.log([event(EventKind.CREATED, "m1"),
               replace(event(EventKind.APPLIED, "m1", minutes=1), key="k-given")])
    first, second = store.events(repo=REPO)
    assert first.key
    assert len(first.key) == 32
    assert second.key == "k-given"
    assert store.events(repo=REPO) == [first, second]  # read back the same


def test_archived_events_leave_the_live_table_but_still_count(store: MemoryStore) -> None:
    _trail(store)
    before = store.stats(REPO)
    live = store.events(limit=None)
    assert store.archive_events(at(4)) == 3
    assert [e.at for e in store.events(limit=None)] == [at(4), at(5), at(6), at(7)]
    archived = store.events(archived=True, limit=None)
    assert archived == live[:3]  # same ids, keys, times and details
    assert [e.kind.value for e in store.events(archived=True, changes=True)] == ["created"]
    assert store.stats(REPO) == before
    assert store.info().archived_events == 3
    assert store.archive_events(at(4)) == 0


def test_a_repository_trail_says_when_the_archive_holds_what_it_would_list(
        store: MemoryStore) -> None:
    _trail(store)
    store.archive_events(at(4))  # m1's created, retrieved and checked

    def kinds(events: list[TelemetryEvent]) -> list[str]:
        return [e.kind.value for e in events]

    def cut(limit: int = 50, repo: str = REPO, **query: Any) -> tuple[list[str], bool]:
        """A repository's live trail, and whether the archive cut it."""
        asked = {"kinds": None, "reads": False, "since": None, **query}
        shown = trail(store, None, repo=repo, limit=limit, **asked)
        return kinds(shown), cut_by_archive(store, shown, repo=repo, limit=limit, **asked)

    # The changes shown are short of the limit and `created` was archived: cut.
    assert cut() == (["invalidated", "verified_valid"], True)
    # A page the limit fills with events newer than the archive's is whole.
    assert cut(limit=2) == (["invalidated", "verified_valid"], False)
    assert cut(limit=1) == (["invalidated"], False)
    assert cut(reads=True, limit=3) == (["invalidated", "retrieved", "verified_valid"], False)
    assert cut(reads=True, limit=4)[1]
    # Only what the query would list counts: the archive holds no such event.
    assert cut(since=at(4)) == (["invalidated", "verified_valid"], False)
    assert cut(kinds=[EventKind.VERIFIED_VALID]) == (["verified_valid"], False)
    assert cut(kinds=[EventKind.RETRIEVED]) == (["retrieved"], True)
    assert cut(kinds=[EventKind.CHECKED]) == ([], True)
    assert cut(repo=OTHER, reads=True) == (["created"], False)
    # With the archive: every event, newest first.
    everything = trail(store, None, repo=REPO, kinds=None, reads=True, since=None, limit=50,
                       archived=True)
    assert [e.at for e in everything] == [at(n) for n in (6, 5, 4, 3, 2, 1)]
    assert kinds(trail(store, None, repo=REPO, kinds=None, reads=False, since=None,
                       limit=50, archived=True)) == ["invalidated", "verified_valid",
                                                     "created"]
    # A memory's trail always reads the archive.
    assert kinds(trail(store, "m1", repo=None, kinds=None, reads=False, since=None,
                       limit=50)) == ["invalidated", "verified_valid", "created"]
    # A live event as old as the archive's newest (an import's) is no proof of a whole
    # page: the page is cut.
    store.log([event(EventKind.APPLIED, "m1", minutes=3)])
    assert cut(reads=True, limit=4) == (
        ["invalidated", "retrieved", "verified_valid", "applied"], True)


# --------------------------------------------------------------------------- load


def test_load_writes_what_is_new_and_skips_what_is_held(store: MemoryStore) -> None:
    _fill(store)
    store.forget(["aaaa1111-0"], by="t", reason="r")
    held = store.events(repo=REPO, limit=None)
    new = [mem("new one", id="eeee1111-0", minutes=80), mem("again", id="aaaa2222-0"),
           mem("forgotten id", id="aaaa1111-0")]
    events = [replace(event(EventKind.CREATED, "eeee1111-0", minutes=80), key="k1"),
              held[0],  # a key the store holds
              replace(event(EventKind.APPLIED, "eeee1111-0", minutes=81), key="k2")]
    assert store.load(new, events) == (1, 2, 0)
    assert store.get("eeee1111-0") == new[0]
    assert store.get("aaaa2222-0").subject == "pending one"
    with pytest.raises(NotFound):
        store.get("aaaa1111-0")
    assert [e.key for e in store.events(memory_id="eeee1111-0")] == ["k1", "k2"]
    assert store.load(new, events) == (0, 0, 0)
    store.archive_events(at(1000))
    assert store.load([], [replace(event(EventKind.CREATED, "x"), key="k1")]) == (0, 0, 0)


def test_load_refuses_a_batch_that_repeats_an_id_or_a_key(store: MemoryStore) -> None:
    with pytest.raises(ValidationError, match="twice"):
        store.load([mem(id="x1"), mem(id="x1")], [])
    with pytest.raises(ValidationError, match="twice"):
        store.load([mem(id="x2")], [replace(event(), key="k"), replace(event(), key="k")])
    assert store.find(REPO) == []
    assert store.events() == []


def test_info_counts_what_the_store_holds(store: MemoryStore) -> None:
    _fill(store)
    _trail_events = [event(EventKind.RETRIEVED, "aaaa1111-0", minutes=n) for n in range(4)]
    store.log(_trail_events)
    store.forget(["bbbb1111-0"], by="t", reason="r")
    store.archive_events(at(2))
    info = store.info()
    assert (info.memories, info.forgotten, info.events, info.archived_events, info.repos) == (
        6, 1, 3, 2, 2)
    assert info.kind in {"sqlite", "memory", "postgres", "supabase", "git"}
    assert info.to_dict()["memories"] == 6


def test_event_model_round_trips_its_key() -> None:
    e = TelemetryEvent(EventKind.CREATED, REPO, "m", key="k")
    assert TelemetryEvent.from_dict(e.to_dict()) == e


def test_load_carries_tombstones_but_never_over_a_memory(store: MemoryStore) -> None:
    store.add(mem(id="kept"))
    stone = Tombstone("gone", REPO, Status.INVALID, "alice", at(5), "a secret")
    over = Tombstone("kept", REPO, Status.ACTIVE, "alice", at(5), "elsewhere")
    assert store.load([], [], [stone, over]) == (0, 0, 1)  # a live memory is never undone
    assert store.tombstones(ids=["gone", "kept"]) == [stone]
    assert store.get("kept").id == "kept"
    assert store.load([mem(id="gone")], [], []) == (0, 0, 0)  # a forgotten id stays so
    with pytest.raises(ValidationError, match="twice"):
        store.load([mem(id="x")], [], [replace(stone, id="x")])
    assert store.stats(REPO).forgotten == 1
    with pytest.raises(NotFound):
        store.get("gone")
