"""The guarded add over Supabase's REST API (``sql/012_add_unless_changed.sql``).

Each REST call is a transaction of its own, so the Supabase store lists the memories a
new one may repeat, decides in Python, then asks ``agent_memory_add_unless_changed`` to
add it only if those candidates are still the ones its decision saw (listed again in
the database, behind the advisory lock ``PostgresStore`` takes); if not, it decides
again. Tested on the real Postgres: the candidate query against ``repeat_candidates``,
the function under connections racing, the store through ``FakePostgrest`` (separate
connections racing too), and a database migrated before 012.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.contract.test_store import cite, event, mem
from tests.fake_postgrest import SERVICE_KEY, SUPABASE_URL, FakePostgrest
from tests.store_races import RACES, check_stored_once
from tests.store_races import _files as race_files
from tests.store_races import _memory as race_memory
from verified_memory.errors import Conflict, NotFound, StoreError
from verified_memory.models import EventKind, Memory, Status, TelemetryEvent
from verified_memory.service import MemoryService
from verified_memory.sources.fake import DictSource
from verified_memory.store.base import CITING_LIMIT, add_unless_duplicate, repeat_candidates
from verified_memory.store.migrate import load_migrations, migrate, migrations_dir
from verified_memory.store.postgres import ADD_LOCK, ADD_LOCK_SQL, PostgresStore, memory_payload
from verified_memory.store.supabase import SupabaseStore

pytestmark = pytest.mark.postgres

CANDIDATES_SQL = "select id from agent_memory_repeat_candidates(%s, %s)"
ADD_SQL = "select agent_memory_add_unless_changed(%s, '[]'::jsonb, %s, %s)"


def _rest_store(fake: FakePostgrest | Callable[[httpx.Request], httpx.Response]
                ) -> SupabaseStore:
    handler = fake.handle if isinstance(fake, FakePostgrest) else fake
    return SupabaseStore.connect(SUPABASE_URL, SERVICE_KEY, retry=False,
                                 http_client=httpx.Client(transport=httpx.MockTransport(handler)))


@pytest.fixture
def pg(pg_url: str) -> Iterator[PostgresStore]:
    opened = PostgresStore(pg_url)
    yield opened
    opened.close()


@pytest.fixture
def rest(pg_url: str) -> Iterator[SupabaseStore]:
    fake = FakePostgrest(pg_url)
    opened = _rest_store(fake)
    yield opened
    opened.close()
    fake.close()


def _listed(url: str, memory: Memory) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        return [r[0] for r in conn.execute(CANDIDATES_SQL, (Jsonb(memory_payload(memory)),
                                                            CITING_LIMIT))]


# --------------------------------------------------------------------------- the SQL


def test_the_sql_candidates_are_repeat_candidates_in_its_order(
        pg_url: str, pg: PostgresStore) -> None:
    """``agent_memory_repeat_candidates`` selects what ``repeat_candidates`` selects, in
    its order: per citation the active memories citing its lines (at most
    ``CITING_LIMIT``, newest created first), then for a pending memory the pending ones
    citing its files (most recently refreshed first), each memory once."""
    hot = [mem(f"hot {i}", minutes=i % 37, citations=(cite("src/hot.py", 1 + i % 5, 9),))
           for i in range(CITING_LIMIT + 20)]
    crowd = [mem(f"queued {i}", minutes=(i * 13) % 41, status=Status.PENDING,
                 citations=(cite("src/queue.py", 50 + i % 5, 60),))
             for i in range(CITING_LIMIT + 10)]
    mixed = [
        mem("both files", minutes=3, citations=(cite("src/hot.py", 30, 31),
                                                cite("src/queue.py", 1, 2))),
        mem("waiting on hot", minutes=4, status=Status.PENDING,
            citations=(cite("src/hot.py", 200, 210),)),
        mem("retired", status=Status.INVALID, citations=(cite("src/hot.py", 1, 9),)),
        mem("other lines", citations=(cite("src/hot.py", 400, 410),)),
        mem("other repo", repo="acme/web", citations=(cite("src/hot.py", 1, 9),)),
        mem("other repo waiting", repo="acme/web", status=Status.PENDING,
            citations=(cite("src/queue.py", 1, 9),)),
    ]
    for m in (*hot, *crowd, *mixed):
        pg.add(m)
    asked = [
        mem("new", citations=(cite("src/hot.py", 5, 5), cite("src/queue.py", 1, 3),
                              cite("src/hot.py", 30, 40))),
        mem("new", status=Status.PENDING,
            citations=(cite("src/queue.py", 55, 55), cite("src/hot.py", 8, 8),
                       cite("src/queue.py", 1, 1))),
        mem("new", status=Status.PENDING, citations=(cite("src/hot.py", 300, 301),)),
        mem("new", citations=(cite("src/nobody.py", 1, 2),)),
    ]
    sizes = []
    for new in asked:
        expected = [m.id for m in repeat_candidates(pg.by_path, pg.find, new)]
        assert _listed(pg_url, new) == expected, new.citations
        sizes.append(len(expected))
    # The limits apply: 100 of hot.py's crowd, 100 of the queue's.
    assert sizes == [CITING_LIMIT + 1, 2 * CITING_LIMIT + 2, 1, 0]


def test_the_add_lists_again_and_adds_only_over_the_candidates_it_was_told(
        pg_url: str, pg: PostgresStore) -> None:
    first = mem("first")
    pg.add(first)
    new = mem("new")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        payload = Jsonb(memory_payload(new))
        for seen in ([], [first.id, "gone"]):  # one missing, one more than there is
            assert conn.execute(ADD_SQL, (payload, seen, CITING_LIMIT)).fetchone() == (False,)
        with pytest.raises(NotFound):
            pg.get(new.id)
        assert conn.execute(ADD_SQL, (payload, [first.id, first.id], CITING_LIMIT)
                            ).fetchone() == (True,)
    assert pg.get(new.id) == new


def test_connections_adding_the_same_memory_at_once_add_it_once(
        pg_url: str, pg: PostgresStore) -> None:
    """Connections that listed the same candidates (none) call the add at the same
    moment: behind the lock, the first adds and the others find its memory."""
    workers, races = 4, 10
    barrier = threading.Barrier(workers)

    def add(worker: int) -> list[bool]:
        added = []
        with psycopg.connect(pg_url, autocommit=True) as conn:
            for race in range(races):
                new = mem(f"race {race} by {worker}", citations=(cite(f"src/r{race}.py"),))
                barrier.wait(timeout=60)
                row = conn.execute(ADD_SQL, (Jsonb(memory_payload(new)), [], CITING_LIMIT)
                                   ).fetchone()
                added.append(bool(row and row[0]))
        return added

    with ThreadPoolExecutor(max_workers=workers) as pool:
        outcomes = list(pool.map(add, range(workers)))
    for race in range(races):
        assert sorted(o[race] for o in outcomes) == [False] * (workers - 1) + [True]
        assert len(pg.by_path(mem().repo, f"src/r{race}.py")) == 1


def test_the_add_waits_for_a_postgres_stores_guarded_add(
        pg_url: str, pg: PostgresStore) -> None:
    """The lock is ``PostgresStore``'s (``ADD_LOCK``): a Supabase client's add waits
    for a Postgres client's guarded add to commit, then sees its memory."""
    first, second = mem("first"), mem("second")
    holder = psycopg.connect(pg_url)  # a guarded add in flight, as PostgresStore runs one
    try:
        holder.execute(ADD_LOCK_SQL, (ADD_LOCK, first.repo))
        holder.execute("select agent_memory_add(%s, '[]'::jsonb)",
                       (Jsonb(memory_payload(first)),))
        with ThreadPoolExecutor(max_workers=1) as pool, \
                psycopg.connect(pg_url, autocommit=True) as rival:
            waiting = pool.submit(lambda: rival.execute(
                ADD_SQL, (Jsonb(memory_payload(second)), [], CITING_LIMIT)).fetchone())
            _until_one_waits_on_an_advisory_lock(pg_url)
            assert not waiting.done()
            holder.commit()
            assert waiting.result(timeout=30) == (False,)
    finally:
        holder.close()
    assert [m.id for m in pg.by_path(first.repo, "src/app.py")] == [first.id]


def _until_one_waits_on_an_advisory_lock(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(600):
            row = conn.execute("select count(*) from pg_locks "
                               "where locktype = 'advisory' and not granted").fetchone()
            if row and row[0] == 1:
                return
            time.sleep(0.05)
    raise AssertionError("no add waited on the advisory lock")


# --------------------------------------------------------------------------- the store


def test_a_rival_that_lands_between_the_listing_and_the_add_is_seen(
        rest: SupabaseStore, pg: PostgresStore) -> None:
    """The store decides again over the fresh candidates: the rival's memory, which the
    new one repeats, so nothing is added."""
    rival, new = mem("rival"), mem("new")
    asked: list[list[str]] = []

    def decide(found: Sequence[Memory]) -> list[TelemetryEvent] | None:
        asked.append([m.id for m in found])
        if len(asked) == 1:
            pg.add(rival)  # another agent, between this one's listing and its add
        return None if found else [event(EventKind.CREATED, new.id)]

    assert add_unless_duplicate(rest, new, decide) is False
    assert asked == [[], [rival.id]]
    with pytest.raises(NotFound):
        rest.get(new.id)
    assert rest.events(memory_id=new.id) == []


def test_candidates_that_keep_changing_give_up_with_a_conflict(
        rest: SupabaseStore, pg: PostgresStore) -> None:
    """A bounded number of decisions, then one readable line and nothing written."""
    from verified_memory.store.supabase import ADD_ATTEMPTS

    new = mem("new")
    asked: list[int] = []

    def decide(found: Sequence[Memory]) -> list[TelemetryEvent]:
        asked.append(len(found))
        pg.add(mem(f"rival {len(asked)}", fact=f"a claim of its own, number {len(asked)}"))
        return [event(EventKind.CREATED, new.id)]

    with pytest.raises(Conflict) as caught:
        add_unless_duplicate(rest, new, decide)
    assert str(caught.value) == (
        f"could not store the memory in {new.repo}: the memories it may repeat changed "
        f"{ADD_ATTEMPTS} times while it was stored; try again")
    assert asked == list(range(ADD_ATTEMPTS))
    with pytest.raises(NotFound):
        rest.get(new.id)


class _Gate:
    """A transport that holds the first add of each race until every worker has made
    its own: all of them have listed the candidates, none has added yet."""

    def __init__(self, fake: FakePostgrest, barrier: threading.Barrier) -> None:
        self.fake, self.barrier, self.armed = fake, barrier, False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.armed and request.url.path.startswith("/rest/v1/rpc/agent_memory_add"):
            self.armed = False
            self.barrier.wait(timeout=60)
        return self.fake.handle(request)


@pytest.mark.parametrize("category", [None, "business_rule"], ids=["active", "pending"])
def test_agents_storing_the_same_memory_at_once_over_rest_store_it_once(
        pg_url: str, category: str | None) -> None:
    """``MemoryService.store`` in three threads, each with a connection of its own, the
    adds of every race held until all three have decided: one creates the memory, the
    others get it back as a duplicate (for a pending memory, the queue holds it once)."""
    workers = 3
    barrier = threading.Barrier(workers)
    fakes = [FakePostgrest(pg_url) for _ in range(workers)]
    gates = [_Gate(fake, barrier) for fake in fakes]

    def storer(worker: int) -> list[tuple[str, bool] | str]:
        outcomes: list[tuple[str, bool] | str] = []
        with MemoryService(_rest_store(gates[worker]), DictSource({"c1": race_files()}),
                           actor=f"worker-{worker}") as service:
            for race in range(RACES):
                gates[worker].armed = True
                stored = service.store(race_memory(race, category=category))
                outcomes.append((stored.id, stored.duplicate))
        return outcomes

    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            outcomes = dict(enumerate(pool.map(storer, range(workers))))
    finally:
        for fake in fakes:
            fake.close()
    check_stored_once(pg_url, outcomes,
                      status=Status.PENDING if category else Status.ACTIVE)


# --------------------------------------------------------------------------- upgrading


def test_a_database_migrated_before_012_upgrades_by_migrating(
        pg_empty_url: str, tmp_path: Path) -> None:
    """Before 012 the store says to migrate (and writes nothing); ``migrate`` applies
    012 (and what follows it) to the database as it is, memories and all."""
    for m in load_migrations():
        if int(m.version) <= 11:
            shutil.copy(migrations_dir() / f"{m.version}_{m.name}.sql", tmp_path)
    migrate(pg_empty_url, tmp_path)
    old = mem("stored before 012")
    with psycopg.connect(pg_empty_url, autocommit=True) as conn:
        conn.execute("select agent_memory_add(%s, '[]'::jsonb)", (Jsonb(memory_payload(old)),))
    fake = FakePostgrest(pg_empty_url)
    store = _rest_store(fake)
    new = mem("new", citations=(cite("src/app.py", 11, 11),))
    asked: list[list[str]] = []

    def decide(found: Sequence[Memory]) -> list[TelemetryEvent]:
        asked.append([m.id for m in found])
        return [event(EventKind.CREATED, new.id)]

    try:
        with pytest.raises(StoreError, match="vmem db migrate"):
            add_unless_duplicate(store, new, decide)
        assert asked == []
        assert migrate(pg_empty_url) == [m.version for m in load_migrations()
                                         if int(m.version) > 11]
        assert add_unless_duplicate(store, new, decide) is True
        assert asked == [[old.id]]
        assert store.get(new.id) == new
        assert add_unless_duplicate(store, replace(new, id="another"), lambda found: None) is False
    finally:
        store.close()
        fake.close()
