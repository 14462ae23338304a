"""Retrieval telemetry written behind the reads: when it is written, and that none is lost."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from tests.contract.test_store import REPO, mem
from tests.gitrepo import GitRepo
from verified_memory import EventKind, MemoryService, StoreError
from verified_memory.models import TelemetryEvent
from verified_memory.sources.local_git import LocalGitSource
from verified_memory.store.base import MemoryStore
from verified_memory.store.postgres import PostgresStore
from verified_memory.store.sqlite import SQLiteStore
from verified_memory.telemetry import TelemetryBuffer


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "mem.db"
    with SQLiteStore(path) as store:
        for minutes in range(3):
            store.add(mem(minutes=minutes))
    return path


@pytest.fixture
def service(db: Path) -> Iterator[MemoryService]:
    with MemoryService(SQLiteStore(db)) as svc:
        yield svc


def retrieved(db: Path) -> int:
    """Retrieved events as another process would see them: through a new connection."""
    with SQLiteStore(db) as store:
        return len(store.events(kinds=[EventKind.RETRIEVED], limit=None))


def test_a_read_queues_its_events_instead_of_writing_them(service: MemoryService,
                                                          db: Path) -> None:
    service.get_recent(REPO)

    assert len(service.telemetry) == 3
    assert retrieved(db) == 0


def test_close_writes_what_is_queued(db: Path) -> None:
    service = MemoryService(SQLiteStore(db))
    service.get_recent(REPO)
    service.close()

    assert retrieved(db) == 3


def test_the_next_write_comes_after_the_reads_before_it(service: MemoryService) -> None:
    [newest, *_] = service.get_recent(REPO)
    service.log_applied(newest.id)

    events = service.memories.events(memory_id=newest.id)
    assert [e.kind for e in events] == [EventKind.RETRIEVED, EventKind.APPLIED]
    assert len(service.telemetry) == 0


def test_stats_count_the_queued_events(service: MemoryService) -> None:
    service.get_recent(REPO)
    service.search_by_path(REPO, "src/app.py")

    assert service.stats(REPO).events[EventKind.RETRIEVED.value] == 6


def test_a_full_buffer_is_written_at_once(db: Path) -> None:
    with SQLiteStore(db) as store:
        buffer = TelemetryBuffer(store, max_events=5, max_age=60)
        service = MemoryService(store)
        service.telemetry = buffer
        service.get_recent(REPO)
        assert retrieved(db) == 0
        service.get_recent(REPO)
        assert retrieved(db) == 6
        assert len(buffer) == 0


def test_queued_events_are_written_within_max_age(db: Path) -> None:
    with SQLiteStore(db) as store:
        buffer = TelemetryBuffer(store, max_age=0.05)
        buffer.add([mem_event(store)])
        deadline = time.monotonic() + 10
        while retrieved(db) == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert retrieved(db) == 1
        assert len(buffer) == 0


def test_a_process_that_forgets_to_close_still_writes_them(db: Path) -> None:
    # An exit hook writes what is queued; the timer thread does not hold the exit up.
    script = (
        "import sys\n"
        "from verified_memory import MemoryService\n"
        "from verified_memory.store.sqlite import SQLiteStore\n"
        "service = MemoryService(SQLiteStore(sys.argv[1]))\n"
        "service.telemetry.max_age = float(sys.argv[3])\n"
        "service.get_recent(sys.argv[2])\n"
    )
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", script, str(db), REPO, "3600"], check=True,
                   timeout=60)

    assert retrieved(db) == 3
    assert time.monotonic() - started < 30  # not the hour the timer would wait


def test_a_locked_store_keeps_the_events_for_the_next_flush(db: Path) -> None:
    with SQLiteStore(db, timeout=0.05) as store:
        buffer = TelemetryBuffer(store, max_age=60)
        buffer.add([mem_event(store), mem_event(store)])
        blocker = sqlite3.connect(db, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreError, match="locked"):
                buffer.flush()
            assert len(buffer) == 2
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        buffer.flush()
        assert retrieved(db) == 2


def test_a_failed_background_write_is_logged_and_kept(db: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    with SQLiteStore(db, timeout=0.05) as store:
        buffer = TelemetryBuffer(store, max_age=0.01)
        blocker = sqlite3.connect(db, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            with caplog.at_level(logging.WARNING, logger="verified_memory.telemetry"):
                buffer.add([mem_event(store)])
                deadline = time.monotonic() + 10
                while "could not write" not in caplog.text and time.monotonic() < deadline:
                    time.sleep(0.02)
            assert "could not write 1 events yet" in caplog.text
            assert len(buffer) == 1
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        buffer.flush()
        assert retrieved(db) == 1


def test_a_closed_store_does_not_stop_the_service_closing(
        db: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = SQLiteStore(db)
    service = MemoryService(store)
    service.get_recent(REPO)
    store.close()

    service.close()  # the read answered already: its retrieved events are not worth a failure
    assert len(service.telemetry) == 0
    assert "retrieved event" in caplog.text
    assert "closed" in caplog.text


def mem_event(store: SQLiteStore) -> TelemetryEvent:
    [memory, *_] = store.recent(REPO)
    return TelemetryEvent(kind=EventKind.RETRIEVED, repo=REPO, memory_id=memory.id,
                          actor="test", detail={"via": "test"})


def test_flush_writes_what_is_queued_and_then_its_own_events(db: Path) -> None:
    with SQLiteStore(db) as store:
        buffer = TelemetryBuffer(store, max_age=60)
        buffer.add([mem_event(store)])
        last = TelemetryEvent(kind=EventKind.FEEDBACK, repo=REPO,
                              memory_id=store.recent(REPO)[0].id, detail={"outcome": "ok"})
        buffer.flush([last])
        assert len(buffer) == 0
        written = store.events(limit=None)
        assert [e.kind for e in written[-2:]] == [EventKind.RETRIEVED, EventKind.FEEDBACK]


def test_a_view_answers_when_the_store_is_locked_and_waits_on_it_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Another process holds the SQLite write lock (a long import, a pass): a dry-run
    context (a session hook's) still answers, warns that its telemetry was not recorded,
    and closing does not wait on the lock a second time."""
    repo = GitRepo.project(tmp_path / "app", {"app.py": "LIMIT = 3\n"},
                           origin="https://github.com/acme/app.git")
    db = tmp_path / "m.db"
    store = SQLiteStore(db, timeout=0.2)
    service = MemoryService(store, LocalGitSource(repo.path))
    service.store({"repo": "acme/app", "subject": "Limit", "fact": "The limit is three.",
                   "citations": [{"path": "app.py", "line_start": 1}]})
    tries: list[int] = []
    log_events = store.log
    store.log = lambda events: (tries.append(len(events)), log_events(events))[1]  # type: ignore[method-assign]
    blocker = sqlite3.connect(db, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        with caplog.at_level(logging.WARNING, logger="verified_memory.telemetry"):
            context = service.context("acme/app", dry_run=True)
            assert "The limit is three." in context.markdown
            assert "events not recorded" in caplog.text
            service.close()
        assert len(tries) == 1  # the pass's flush; close did not try (and wait) again
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


def test_reads_that_count_telemetry_answer_while_the_store_is_locked(
        db: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Events a read queued are written before a read that counts them; another process
    holding the SQLite write lock must not fail that read (in WAL mode reads go on):
    it counts what is stored, and the events wait for the next write."""
    from verified_memory.store.views import ViewQuery

    with MemoryService(SQLiteStore(db, timeout=0.05)) as service:
        [newest, *_] = service.get_recent(REPO)
        blocker = sqlite3.connect(db, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            with caplog.at_level(logging.WARNING, logger="verified_memory.telemetry"):
                assert service.stats(REPO).total == 3
                assert service.audit(newest.id, reads=True) == []  # not written yet
                assert service.info().memories == 3
                assert len(service.read_view(ViewQuery("agent_memory_quality", repo=REPO))) == 1
            assert "3 events not counted yet" in caplog.text
            assert len(service.telemetry) == 3  # kept for the next write
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert service.stats(REPO).events[EventKind.RETRIEVED.value] == 3


@contextmanager
def sqlite_locked(db: Path) -> Iterator[None]:
    """Another process holds the SQLite write lock."""
    blocker = sqlite3.connect(db, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        yield
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


@contextmanager
def postgres_telemetry_locked(url: str) -> Iterator[None]:
    """Another session holds a lock that keeps rows out of the telemetry table (a
    long compaction, a backup's exclusive lock)."""
    import psycopg

    with psycopg.connect(url) as blocker:
        blocker.execute("lock table agent_memory_telemetry in share mode")
        yield
        blocker.rollback()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def lockable(request: pytest.FixtureRequest, tmp_path: Path
             ) -> tuple[Callable[[], MemoryStore], Callable[[], AbstractContextManager[None]]]:
    """A store that gives up on a lock in a fraction of a second, and a way to lock it."""
    if request.param == "sqlite":
        db = tmp_path / "m.db"
        return lambda: SQLiteStore(db, timeout=0.1), lambda: sqlite_locked(db)
    url = request.getfixturevalue("pg_url")
    quick = f"{url}?options=-c%20lock_timeout%3D100"
    return lambda: PostgresStore(quick), lambda: postgres_telemetry_locked(url)


def _app(tmp_path: Path) -> GitRepo:
    return GitRepo.project(tmp_path / "app", {"app.py": "LIMIT = 3\n", "net.py": "RETRIES = 2\n"},
                           origin="https://github.com/acme/app.git")


def _one_holds_one_broken(service: MemoryService, repo: GitRepo) -> tuple[str, str]:
    """Two memories of ``repo``: one that holds, and one made invalid by a commit (the
    next pass only looks at it: ``checked``)."""
    holds, broken = (service.store({
        "repo": "acme/app", "subject": subject, "fact": subject + ".",
        "citations": [{"path": path, "line_start": 1}]}).id
        for subject, path in (("The limit is three", "app.py"), ("Two retries", "net.py")))
    repo.write("net.py", "RETRIES = 5\n")
    repo.commit("more retries")
    service.verify([broken])
    return holds, broken


def test_a_pass_whose_verdicts_failed_to_apply_is_counted_once_when_run_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The events of memories a verdict pass leaves as they are (``checked``) are
    recorded once its verdicts are: written before them, they stayed recorded when
    writing the verdicts failed (the write lock taken between the two), and the pass
    run again counted them twice."""
    repo = _app(tmp_path)
    store = SQLiteStore(tmp_path / "m.db")
    with MemoryService(store, LocalGitSource(repo.path)) as service:
        holds, broken = _one_holds_one_broken(service, repo)
        before = service.stats("acme/app").events
        apply = store.apply
        failures = iter([StoreError("database is locked")])

        def apply_failing_once(transitions: object) -> object:
            for exc in failures:
                raise exc
            return apply(transitions)  # type: ignore[arg-type]

        monkeypatch.setattr(store, "apply", apply_failing_once)
        with pytest.raises(StoreError):
            service.verify([holds, broken])
        assert service.stats("acme/app").events == before  # the failed pass left nothing
        report = service.verify([holds, broken])
        assert [v.decision.value for v in report.verifications] == ["refresh", "invalidate"]
        events = service.stats("acme/app").events
    assert events[EventKind.CHECKED.value] == 1
    assert events[EventKind.VERIFIED_VALID.value] == 1
    assert events[EventKind.VERIFIED_INVALID.value] == 1


def test_a_pass_that_failed_to_record_is_counted_once_when_run_again(
        tmp_path: Path, lockable: tuple[Callable[[], MemoryStore],
                                        Callable[[], AbstractContextManager[None]]]) -> None:
    """A verdict pass whose events the store refused (locked) raised; it must leave none
    of its events queued, or the next write records them beside the retried pass's and
    every figure counts that pass twice."""
    open_store, locked = lockable
    repo = _app(tmp_path)
    with MemoryService(open_store(), LocalGitSource(repo.path)) as service:
        holds, broken = _one_holds_one_broken(service, repo)
        with locked(), pytest.raises(StoreError):
            service.verify([holds, broken])
        report = service.verify([holds, broken])
        assert [v.decision.value for v in report.verifications] == ["refresh", "invalidate"]
        events = service.stats("acme/app").events
    with MemoryService(open_store()) as reopened:
        assert reopened.stats("acme/app").events == events
    assert events[EventKind.CHECKED.value] == 1
    assert events[EventKind.VERIFIED_VALID.value] == 1
    assert events[EventKind.VERIFIED_INVALID.value] == 1
