"""One store's worth of memories and telemetry whose dashboard numbers are known by hand:
written through the store API (so SQLite's triggers and Postgres' functions run), read
back through the views by every dashboard test.

Times are relative to ``now`` (a test's fixed clock, or the real one for a live page).
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta, timezone
from typing import Any

from verified_memory.models import (
    Anchor,
    Citation,
    EventKind,
    Fingerprint,
    Memory,
    Status,
    TelemetryEvent,
)
from verified_memory.store.base import MemoryStore

REPO, OTHER = "acme/api", "acme/web"
NOW = datetime(2026, 3, 11, 15, 0, tzinfo=UTC)  # a Wednesday


def cite(path: str = "src/a.py", start: int = 10) -> Citation:
    return Citation(path=path, line_start=start, line_end=start + 2, sha="a" * 40,
                    blob_sha="b" * 40,
                    fingerprint=Fingerprint(snippet_hash=f"{start:016x}",
                                            line_hashes=(1, 2, 3),
                                            anchor=Anchor("function_definition", "App.run",
                                                          "c" * 16, 0, "python")))


def memories(now: datetime = NOW) -> list[Memory]:
    """Every status and every list the dashboard shows (ids say which)."""

    def mem(memory_id: str, days_old: float, repo: str = REPO, **fields: Any) -> Memory:
        created = now - timedelta(days=days_old)
        return Memory(id=memory_id, repo=repo, subject=f"subject of {memory_id}",
                      fact=f"fact of {memory_id}", citations=(cite(),), created_at=created,
                      refreshed_at=created, created_by="tester", **fields)

    return [
        # validated: applied 4 times, every feedback a success; supersedes m-super
        mem("m-valid", 40, applied_count=4, success_count=4, used_at=now - timedelta(days=1),
            supersedes="m-super", tags=("http",), category="convention"),
        # a poor performer: failing feedback
        mem("m-poor", 35, applied_count=5, success_count=1, failure_count=4,
            used_at=now - timedelta(days=2)),
        # never applied, stored two days ago: not expiring
        mem("m-fresh", 2),
        # never applied, last used 25 days ago: expires (28 days) within a week
        mem("m-old", 30, used_at=now - timedelta(days=25)),
        # applied once, last used 26 days ago: expiring, not "never applied"
        mem("m-stale", 40, applied_count=1, success_count=0, failure_count=1,
            used_at=now - timedelta(days=26)),
        mem("m-pending", 3, status=Status.PENDING, category="business-rule"),
        mem("m-invalid", 50, status=Status.INVALID, invalid_reason="src/a.py:10-12 missing",
            applied_count=2, used_at=now - timedelta(days=10)),
        mem("m-super", 60, status=Status.SUPERSEDED, superseded_by="m-valid"),
        mem("m-expired", 90, status=Status.EXPIRED),
        mem("m-promoted", 20, applied_count=3, success_count=3, promoted_to="AGENTS.md",
            used_at=now - timedelta(days=3)),
        mem("w-1", 5, repo=OTHER, applied_count=1, used_at=now - timedelta(days=1)),
        mem("w-2", 6, repo=OTHER),
    ]


def events(now: datetime = NOW) -> list[TelemetryEvent]:
    """Telemetry on three days of the last week and one day three weeks ago."""
    today = now.date()

    def on(days_ago: int, hour: int = 10) -> datetime:
        return datetime.combine(today - timedelta(days=days_ago), time(hour), tzinfo=UTC)

    def ev(kind: EventKind, days_ago: int, memory_id: str = "m-valid", repo: str = REPO,
           **detail: Any) -> TelemetryEvent:
        return TelemetryEvent(kind=kind, repo=repo, memory_id=memory_id, actor="tester",
                              at=on(days_ago), detail=detail)

    main = {"ref": "refs/heads/main", "revision": "d" * 40}
    broke_yesterday = [{"cited": "src/a.py:10-12", "outcome": "changed", "path": "src/a.py"},
                       {"cited": "src/b.py:1-3", "outcome": "valid", "path": "src/b.py"},
                       {"cited": "src/c/d.py:4-6", "outcome": "missing", "path": "src/c/d.py"}]
    # Not what a verification writes: skipped, never an error.
    broke_today = [{"cited": "src/a.py:1-2", "outcome": "missing", "path": "src/a.py"},
                   "not an object", {"outcome": "changed", "path": 7},
                   {"outcome": "relocated", "path": "src/e.py"}]
    return [
        *(ev(EventKind.VERIFIED_VALID, 1, **main) for _ in range(3)),
        ev(EventKind.VERIFIED_INVALID, 1, "m-invalid", outcomes=broke_yesterday, **main),
        ev(EventKind.INVALIDATED, 1, "m-invalid", reason="src/a.py:10-12 changed", **main),
        *(ev(EventKind.RELOCATED, 1, old="src/b.py:1-3", new="src/b.py:4-6", **main)
          for _ in range(2)),
        # Views and dry runs: seen, never verdicts.
        *(ev(EventKind.CHECKED, 1, "m-poor", scope="view", decision="invalidate",
             ref="refs/heads/feature", revision="e" * 40) for _ in range(4)),
        *(ev(EventKind.RETRIEVED, 1, via="context") for _ in range(5)),
        *(ev(EventKind.APPLIED, 1) for _ in range(2)),
        ev(EventKind.FEEDBACK, 1, outcome="success", note="helped"),
        ev(EventKind.FEEDBACK, 1, "m-poor", outcome="failure", note=None),
        ev(EventKind.VERIFIED_VALID, 0, **main),
        ev(EventKind.VERIFIED_INVALID, 0, "m-poor", outcomes=broke_today, **main),
        ev(EventKind.INVALIDATED, 0, "m-poor", reason="by hand"),
        *(ev(EventKind.RETRIEVED, 0, via="search") for _ in range(2)),
        *(ev(EventKind.FEEDBACK, 0, outcome="success") for _ in range(2)),
        ev(EventKind.UNVERIFIABLE, 0, "m-stale", reason="network", **main),
        # Three weeks ago: outside a week's window, inside a month's.
        ev(EventKind.VERIFIED_VALID, 20, **main),
        ev(EventKind.VERIFIED_INVALID, 20, "m-invalid", outcomes=[
            {"cited": "src/old.py:1-3", "outcome": "changed", "path": "src/old.py"}], **main),
        ev(EventKind.VERIFIED_VALID, 0, "w-1", OTHER, **main),
        ev(EventKind.RETRIEVED, 0, "w-1", OTHER, via="context"),
    ]


def seed(store: MemoryStore, now: datetime = NOW) -> None:
    """The memories (each with its ``created`` event) and the telemetry above."""
    for memory in memories(now):
        store.add(memory, [TelemetryEvent(kind=EventKind.CREATED, repo=memory.repo,
                                          memory_id=memory.id, actor="tester",
                                          at=memory.created_at)])
    store.log(events(now))



def random_store_data(seed_value: int, *, memory_count: int = 200, event_count: int = 3000,
                      now: datetime = NOW) -> tuple[list[Memory], list[TelemetryEvent]]:
    """Many memories and events at random (reproducibly): every status and kind, outcomes
    of every sort, times in other time zones and a microsecond either side of midnight
    UTC, so that stores that bucket days differently would disagree."""
    import random

    rng = random.Random(seed_value)
    repos = [REPO, OTHER, "beta/svc"]
    statuses = list(Status)
    found: list[Memory] = []
    for n in range(memory_count):
        created = now - timedelta(days=rng.uniform(0, 120))
        applied = rng.choice([0, 0, 1, 3, 4, 6])
        successes = rng.randint(0, applied)
        failures = rng.choice([0, 0, 1, 2, 5])
        found.append(Memory(
            id=f"r{n:04d}", repo=rng.choice(repos), subject=f"subject {n}", fact=f"fact {n}",
            citations=(cite(f"src/m{n % 7}.py"),), status=rng.choice(statuses),
            category=rng.choice([None, "convention"]), created_at=created,
            refreshed_at=created, applied_count=applied, success_count=successes,
            failure_count=failures, promoted_to=rng.choice([None, None, "AGENTS.md"]),
            used_at=rng.choice([None, created + timedelta(days=rng.uniform(0, 5))])))
    zones = [UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-7))]
    outcomes = ["valid", "relocated", "changed", "missing", "unverifiable"]
    found_events: list[TelemetryEvent] = []
    for _ in range(event_count):
        kind = rng.choice(list(EventKind))
        day = now.date() - timedelta(days=rng.randrange(0, 100))
        when = rng.choice([time(0, 0), time(23, 59, 59, 999999), time(rng.randrange(24))])
        at = datetime.combine(day, when, tzinfo=UTC).astimezone(rng.choice(zones))
        detail: dict[str, Any] = {}
        if kind is EventKind.VERIFIED_INVALID:
            detail["outcomes"] = [{"outcome": rng.choice(outcomes),
                                   "path": f"src/{rng.choice('abc')}/f{rng.randrange(4)}.py"}
                                  for _ in range(rng.randint(1, 3))]
        elif kind is EventKind.FEEDBACK:
            detail["outcome"] = rng.choice(["success", "failure", "unknown"])
        memory = rng.choice(found)
        found_events.append(TelemetryEvent(kind=kind, repo=memory.repo, memory_id=memory.id,
                                           actor="tester", at=at, detail=detail))
    return found, found_events
