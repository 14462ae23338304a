"""Dashboard benchmark (a script, not a test): how long `vmem dashboard` takes to build
its page over a large store. Prints a markdown table.

    python benchmarks/dashboard_bench.py                       # 100k memories, 1M events
    python benchmarks/dashboard_bench.py --memories 10000 --events 100000   # quicker
    python benchmarks/dashboard_bench.py --db postgresql://... # the same on Postgres
    python benchmarks/dashboard_bench.py --reuse FILE          # time an existing SQLite file

The store is filled through its own API (``add`` per memory, ``log`` in batches of
10,000 events, so SQLite's rollup triggers run as in real use) with memories spread
over ``--repos`` repositories in every status, and telemetry spread evenly over the last
365 days in the proportions of a busy team (retrievals most, then verdicts, checks,
uses, feedback); Postgres is then ANALYZEd, as autovacuum would. Then the page is built
``--runs`` times for the default window (90 days) and for the whole year, and the median
and best times printed, split into the numbers (``collect``: the views), the memories'
details and the HTML.

With ``--write-cost`` it also times SQLite's writes (logging events, adding memories,
recording uses) as migrated, without the rollup triggers and without the dashboard's
indexes of migration 7: what the dashboard's speed costs every write.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from verified_memory import MemoryService, open_store
from verified_memory.dashboard import build, render_page
from verified_memory.dashboard.data import collect
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

NOW = datetime.now(UTC).replace(microsecond=0)
STATUSES = [Status.ACTIVE] * 75 + [Status.INVALID] * 10 + [Status.SUPERSEDED] * 5 + \
    [Status.PENDING] * 5 + [Status.EXPIRED] * 5
# Proportions of a busy team's telemetry: retrievals dominate, every verdict pass writes
# an outcome and a change per memory, uses and feedback are rarer.
KINDS = ([EventKind.RETRIEVED] * 45 + [EventKind.VERIFIED_VALID] * 15
         + [EventKind.REFRESHED] * 15 + [EventKind.CHECKED] * 8 + [EventKind.RELOCATED] * 3
         + [EventKind.VERIFIED_INVALID] * 2 + [EventKind.INVALIDATED] * 2
         + [EventKind.APPLIED] * 5 + [EventKind.FEEDBACK] * 2 + [EventKind.UNVERIFIABLE] * 1
         + [EventKind.CREATED] * 2)
FILES = [f"src/pkg{d}/module{f}.py" for d in range(20) for f in range(25)]


def citation(rng: random.Random) -> Citation:
    start = rng.randrange(1, 400)
    return Citation(path=rng.choice(FILES), line_start=start, line_end=start + 4,
                    sha="a" * 40, blob_sha="b" * 40,
                    fingerprint=Fingerprint(snippet_hash=f"{rng.getrandbits(64):016x}",
                                            line_hashes=tuple(rng.getrandbits(63)
                                                              for _ in range(5)),
                                            anchor=Anchor("function_definition", "f",
                                                          "c" * 16, 0, "python")))


def memories(count: int, repos: int, rng: random.Random) -> Iterator[Memory]:
    for n in range(count):
        created = NOW - timedelta(days=rng.uniform(0, 365))
        status = rng.choice(STATUSES)
        applied = rng.choice([0, 0, 0, 1, 2, 3, 5, 8])
        failures = rng.choice([0, 0, 0, 0, 1, 2])
        yield Memory(
            id=f"m{n:07d}", repo=f"bench/app{n % repos}", subject=f"convention {n}",
            fact=f"calls in module {n % 500} are retried {n % 7} times",
            citations=tuple(citation(rng) for _ in range(rng.choice([1, 1, 2, 3]))),
            status=status, category=rng.choice([None, "convention", "invariant"]),
            created_at=created, refreshed_at=created,
            used_at=created + timedelta(days=rng.uniform(0, (NOW - created).days)),
            applied_count=applied, success_count=applied - min(failures, applied),
            failure_count=min(failures, applied), verification_count=rng.randrange(0, 30),
            invalid_reason="src/app.py:1-5 missing" if status is Status.INVALID else None)


def events(count: int, memory_count: int, repos: int,
           rng: random.Random) -> Iterator[TelemetryEvent]:
    for _ in range(count):
        kind = rng.choice(KINDS)
        n = rng.randrange(memory_count)
        detail: dict[str, object] = {}
        if kind is EventKind.VERIFIED_INVALID:
            detail = {"ref": "refs/heads/main", "revision": "d" * 40, "outcomes": [
                {"cited": "x", "outcome": rng.choice(["missing", "changed"]),
                 "path": rng.choice(FILES)},
                {"cited": "y", "outcome": "valid", "path": rng.choice(FILES)}]}
        elif kind is EventKind.FEEDBACK:
            detail = {"outcome": rng.choice(["success", "success", "failure"])}
        yield TelemetryEvent(kind=kind, repo=f"bench/app{n % repos}", memory_id=f"m{n:07d}",
                             actor="bench", at=NOW - timedelta(seconds=rng.uniform(0, 365 * 86400)),
                             detail=detail)


def fill(store: MemoryStore, memory_count: int, event_count: int, repos: int) -> None:
    rng = random.Random(18)
    started = time.perf_counter()
    for n, memory in enumerate(memories(memory_count, repos, rng), 1):
        store.add(memory)
        if n % 10_000 == 0:
            print(f"  {n:,} memories ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    batch: list[TelemetryEvent] = []
    for n, event in enumerate(events(event_count, memory_count, repos, rng), 1):
        batch.append(event)
        if len(batch) == 10_000:
            store.log(batch)
            batch = []
        if n % 100_000 == 0:
            print(f"  {n:,} events ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    store.log(batch)


def analyze(url: str) -> None:
    """Postgres: gather statistics at once, as autovacuum would after a while (SQLite
    needs none for these queries)."""
    from verified_memory.config import is_postgres_url

    if is_postgres_url(url):
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("analyze")


def timed(action: Callable[[], object], runs: int) -> tuple[float, float]:
    """(median, best) milliseconds of ``runs`` calls."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), min(times)


#: What migration 7 adds to every write, to take away when timing what it costs.
TRIGGERS = ("agent_memory_events_rollup", "agent_memory_breaks_rollup")
INDEXES = ("agent_memory_health", "agent_memory_failing", "agent_memory_last_use")


def write_cost(events_count: int = 50_000, memory_count: int = 5_000, runs: int = 3) -> None:
    """Best of ``runs``: logging events, adding memories and recording uses on SQLite as
    migrated, without the rollup triggers, and without the dashboard's indexes."""
    import sqlite3

    from verified_memory.models import Transition
    from verified_memory.store.sqlite import SQLiteStore

    rng = random.Random(7)
    batch = list(events(events_count, memory_count, 4, rng))
    added = list(memories(memory_count, 4, rng))
    print("\n| SQLite write | as migrated | without the rollup triggers | without the "
          "dashboard's indexes |\n|---|---|---|---|")
    timings: dict[str, list[float]] = {}
    for variant, dropped in (("as migrated", ()), ("no triggers", TRIGGERS),
                             ("no indexes", INDEXES)):
        best = [float("inf")] * 3
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as scratch:
                path = Path(scratch) / "write.db"
                SQLiteStore(path).close()
                with sqlite3.connect(path) as conn:
                    for name in dropped:
                        kind = "TRIGGER" if name in TRIGGERS else "INDEX"
                        conn.execute(f"DROP {kind} {name}")
                with SQLiteStore(path) as store:
                    steps = (
                        lambda store=store: [store.log(batch[i:i + 1000])
                                             for i in range(0, len(batch), 1000)],
                        lambda store=store: [store.add(m) for m in added],
                        lambda store=store: [store.apply([Transition(
                            m.id, expect=m.status, add_applications=1, used_at=NOW)])
                            for m in added])
                    for n, step in enumerate(steps):
                        started = time.perf_counter()
                        step()
                        best[n] = min(best[n], time.perf_counter() - started)
        timings[variant] = best
    labels = (f"log an event (batches of 1,000; {events_count:,})",
              f"add a memory ({memory_count:,})", f"record a use (apply; {memory_count:,})")
    counts = (events_count, memory_count, memory_count)
    for n, label in enumerate(labels):
        cells = [f"{timings[v][n] / counts[n] * 1e6:.0f} µs"
                 for v in ("as migrated", "no triggers", "no indexes")]
        print(f"| {label} | {' | '.join(cells)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repos", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--db", help="a store URL (default: a new SQLite file)")
    parser.add_argument("--reuse", metavar="FILE", help="an already filled SQLite file")
    parser.add_argument("--keep", metavar="FILE", help="fill this SQLite file and keep it")
    parser.add_argument("--write-cost", action="store_true",
                        help="also time logging with and without SQLite's rollup triggers")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        url = args.reuse or args.db or args.keep or str(Path(scratch) / "bench.db")
        store = open_store(url)
        if not args.reuse:
            started = time.perf_counter()
            fill(store, args.memories, args.events, args.repos)
            print(f"filled {url.split('@')[-1]} in {time.perf_counter() - started:.0f} s",
                  file=sys.stderr)
            analyze(url)
        service = MemoryService(store)
        print("| store | window | numbers (views) | + details | + HTML: the page | "
              "page size |\n|---|---|---|---|---|---|")
        for days in (90, 365):
            numbers = timed(lambda days=days: collect(service.read_view, days=days), args.runs)
            details = timed(lambda days=days: build(service, days=days), args.runs)
            page = timed(lambda days=days: render_page(*build(service, days=days)), args.runs)
            size = len(render_page(*build(service, days=days)).encode())
            print(f"| {type(store).__name__} | {days} days | {numbers[0]:.0f} ms "
                  f"(best {numbers[1]:.0f}) | {details[0]:.0f} ms (best {details[1]:.0f}) | "
                  f"{page[0]:.0f} ms (best {page[1]:.0f}) | {size / 1024:.0f} KiB |")
        service.close()
    if args.write_cost:
        write_cost()


if __name__ == "__main__":
    main()
