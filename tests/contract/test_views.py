"""The dashboard's views (``store/views.py``), on every store: the same data gives the
numbers worked out by hand below, whatever the store (SQLite's rollups, Postgres' and
Supabase's views over the events, the in-memory fake's SQLite copy)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest

from tests.dashboard_data import NOW, OTHER, REPO, seed
from verified_memory.errors import ValidationError
from verified_memory.store.base import MemoryStore
from verified_memory.store.views import VIEWS, ViewQuery

TODAY = NOW.date()
YESTERDAY = TODAY - timedelta(days=1)


def rows(store: MemoryStore, view: str, **query: Any) -> list[dict[str, Any]]:
    return store.read_view(ViewQuery(view, **query))


def test_an_empty_store_has_every_view_and_no_rows(store: MemoryStore) -> None:
    for name in VIEWS:
        assert rows(store, name) == []


def test_events_per_day_count_every_kind_apart_and_split_feedback(store: MemoryStore) -> None:
    seed(store)
    got = {(r["day"], r["kind"]): (r["events"], r["successes"], r["failures"])
           for r in rows(store, "agent_memory_events_daily", repo=REPO)}
    assert got[(YESTERDAY, "verified_valid")] == (3, 0, 0)
    assert got[(YESTERDAY, "verified_invalid")] == (1, 0, 0)
    assert got[(YESTERDAY, "checked")] == (4, 0, 0)  # views: a kind of their own
    assert got[(YESTERDAY, "relocated")] == (2, 0, 0)
    assert got[(YESTERDAY, "feedback")] == (2, 1, 1)
    assert got[(TODAY, "feedback")] == (2, 2, 0)
    assert got[(TODAY, "retrieved")] == (2, 0, 0)
    assert got[(TODAY - timedelta(days=20), "verified_invalid")] == (1, 0, 0)
    assert sum(r["events"] for r in rows(store, "agent_memory_events_daily")) == \
        len(store.events(limit=None))


def test_the_invalidation_rate_counts_verdicts_only(store: MemoryStore) -> None:
    seed(store)
    got = {r["day"]: r for r in rows(store, "agent_memory_invalidation_daily", repo=REPO)}
    assert set(got) == {YESTERDAY, TODAY, TODAY - timedelta(days=20)}
    assert (got[YESTERDAY]["verified_valid"], got[YESTERDAY]["verified_invalid"],
            got[YESTERDAY]["invalidated"]) == (3, 1, 1)
    assert got[YESTERDAY]["invalidation_rate"] == pytest.approx(0.25)  # the 4 views: not in it
    assert got[TODAY]["invalidation_rate"] == pytest.approx(0.5)


def test_the_outcome_funnel_counts_events_and_distinct_memories(store: MemoryStore) -> None:
    seed(store)
    (yesterday,) = rows(store, "agent_memory_outcome_funnel", repo=REPO,
                        where=(("day", "=", YESTERDAY),))
    assert yesterday == {"repo": REPO, "day": YESTERDAY, "retrieved": 5, "verified_valid": 3,
                         "verified_invalid": 1, "applied": 2, "memories_retrieved": 1,
                         "memories_applied": 1}


def test_breaks_count_changed_and_missing_citations_by_file(store: MemoryStore) -> None:
    seed(store)
    got = {(r["day"], r["path"]): r["breaks"] for r in rows(store, "agent_memory_breaks_daily")}
    # Valid and relocated outcomes, an element that is not an object and a path that is
    # not text are left out.
    assert got == {(YESTERDAY, "src/a.py"): 1, (YESTERDAY, "src/c/d.py"): 1,
                   (TODAY, "src/a.py"): 1, (TODAY - timedelta(days=20), "src/old.py"): 1}


def test_status_quality_and_attention_follow_the_memory_rules(store: MemoryStore) -> None:
    seed(store)
    statuses = {(r["repo"], r["status"]): r["memories"]
                for r in rows(store, "agent_memory_status_counts")}
    assert statuses == {(REPO, "active"): 6, (REPO, "pending"): 1, (REPO, "invalid"): 1,
                        (REPO, "superseded"): 1, (REPO, "expired"): 1, (OTHER, "active"): 2}
    (quality,) = rows(store, "agent_memory_quality", repo=REPO)
    assert quality == {"repo": REPO, "active": 6, "pending": 1, "validated": 2, "poor": 1,
                       "promoted": 1, "expired": 1, "invalid": 1, "superseded": 1}
    stats = store.stats(REPO)
    assert (stats.validated, stats.poor) == (quality["validated"], quality["poor"])
    attention = {r["repo"]: (r["never_applied"], r["failing"])
                 for r in rows(store, "agent_memory_attention")}
    assert attention == {REPO: (2, 2), OTHER: (1, 0)}


def test_forgotten_memories_count_as_forgotten_in_no_other_status(
        store: MemoryStore) -> None:
    seed(store)
    store.forget(["m-poor"], by="admin", reason="asked to")
    statuses = {(r["repo"], r["status"]): r["memories"]
                for r in rows(store, "agent_memory_status_counts", repo=REPO)}
    assert statuses[(REPO, "forgotten")] == 1
    assert statuses[(REPO, "active")] == 5


def test_last_use_counts_active_memories_by_day(store: MemoryStore) -> None:
    seed(store)
    got = {r["day"]: r["memories"] for r in rows(store, "agent_memory_last_use_daily", repo=REPO)}
    assert got == {TODAY - timedelta(days=d): 1 for d in (1, 25, 26, 3)} | {
        TODAY - timedelta(days=2): 2}  # m-poor used, m-fresh stored two days ago


def test_summary_filters_orders_and_limits_in_the_store(store: MemoryStore) -> None:
    seed(store)
    found = rows(store, "agent_memory_summary", repo=REPO,
                 where=(("status", "=", "active"), ("failure_count", ">", 0)),
                 order=("-failure_count",))
    assert [r["id"] for r in found] == ["m-poor", "m-stale"]
    cutoff = NOW - timedelta(days=20)
    old = rows(store, "agent_memory_summary", where=(("last_used_at", "<", cutoff),),
               order=("last_used_at",), limit=2)
    assert [r["id"] for r in old] == ["m-expired", "m-super"]
    row = rows(store, "agent_memory_summary", where=(("id", "=", "m-old"),))[0]
    assert row["last_used_at"] == NOW - timedelta(days=25)
    assert row["created_at"] == NOW - timedelta(days=30)
    assert row["created_at"].tzinfo is not None
    assert (row["applied_count"], row["status"], row["category"]) == (0, "active", None)


def test_day_conditions_and_the_key_order(store: MemoryStore) -> None:
    seed(store)
    ordered = rows(store, "agent_memory_invalidation_daily", where=(("day", ">=", YESTERDAY),))
    # No order asked: the view's key (repository, then day).
    assert [(r["repo"], r["day"]) for r in ordered] == [
        (REPO, YESTERDAY), (REPO, TODAY), (OTHER, TODAY)]
    newest = rows(store, "agent_memory_invalidation_daily", repo=REPO, order=("-day",), limit=1)
    assert [r["day"] for r in newest] == [TODAY]


@pytest.mark.parametrize(("query", "message"), [
    (ViewQuery("agent_memory"), "unknown view"),
    (ViewQuery("agent_memory_summary", where=(("fact", "=", "x"),)), "has no column 'fact'"),
    (ViewQuery("agent_memory_summary", where=(("id", "like", "x"),)), "unknown operator"),
    (ViewQuery("agent_memory_summary", order=("-id; drop table agent_memory",)), "no column"),
    (ViewQuery("agent_memory_summary", limit=-1), "limit"),
])
def test_a_query_names_only_known_views_columns_and_operators(
    store: MemoryStore, query: ViewQuery, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        store.read_view(query)


def test_views_keep_up_with_later_writes(store: MemoryStore) -> None:
    seed(store)
    before = rows(store, "agent_memory_events_daily", repo=OTHER,
                  where=(("day", "=", TODAY), ("kind", "=", "retrieved")))
    from tests.dashboard_data import events

    store.log([e for e in events() if e.repo == OTHER and e.kind.value == "retrieved"])
    after = rows(store, "agent_memory_events_daily", repo=OTHER,
                 where=(("day", "=", TODAY), ("kind", "=", "retrieved")))
    assert [r["events"] for r in before] == [1]
    assert [r["events"] for r in after] == [2]
    assert isinstance(after[0]["day"], date)
