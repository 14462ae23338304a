"""``vmem db compact``: a dry run by default; applied, a backup first (SQLite's online
backup API, an export for Postgres), then prune, archive old telemetry (still counted),
vacuum. On real SQLite files and a real Postgres."""

from __future__ import annotations

import io
import json
import sqlite3
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.contract.test_store import REPO, cite, event, mem
from verified_memory.cli import main
from verified_memory.models import EventKind, TelemetryEvent, utcnow
from verified_memory.service import MemoryService
from verified_memory.store.base import MemoryStore
from verified_memory.store.memory import InMemoryStore
from verified_memory.store.sqlite import SQLiteStore
from verified_memory.store.transfer import import_jsonl

SECRET = "zebracorn4711"


def vmem(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def _fill(store: MemoryStore) -> None:
    """40 memories, one holding a secret; 200 events a year old and 20 from today."""
    old = utcnow() - timedelta(days=365)
    for n in range(40):
        fact = f"the password is {SECRET}" if n == 7 else f"plain fact number {n}"
        store.add(mem(f"memory {n}", fact, id=f"m{n:03d}",
                      citations=(cite(f"src/f{n}.py", 1, 3),)))
    store.log([replace_at(event(EventKind.RETRIEVED, f"m{n % 40:03d}"), old + timedelta(
        minutes=n)) for n in range(200)])
    store.log([replace_at(event(EventKind.APPLIED, f"m{n:03d}"), utcnow()) for n in range(20)])


def replace_at(e: TelemetryEvent, at: datetime) -> TelemetryEvent:
    return replace(e, at=at)


def _bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "memory.db"
    store = SQLiteStore(path)
    _fill(store)
    store.close()
    return path


def test_a_dry_run_says_what_it_would_do_and_changes_nothing(
        db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = vmem(capsys, "--db", str(db), "db", "compact", "--older-than", "30")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"store: sqlite {db} (")
    assert lines[1].startswith(f"1. back up to {db}.backup-")
    assert "(SQLite's online backup API)" in lines[1]
    assert lines[3].startswith("3. archive 200 events older than 30 days")
    assert lines[-1] == "dry run: nothing changed; run again with --apply to do it"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.db"]
    with SQLiteStore(db) as store:
        assert store.info().archived_events == 0
    plan = json.loads(vmem(capsys, "--db", str(db), "db", "compact", "--json")[1])
    assert (plan["applied"], plan["events_to_archive"], plan["orphaned_citations"]) == (
        False, 200, 0)


def test_apply_backs_up_prunes_archives_and_vacuums(
        db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with SQLiteStore(db) as store:
        before = store.stats(REPO)
        kept = store.find(REPO, limit=None)
        store.forget(["m007"], by="admin", reason="a password")
    assert SECRET.encode() in _bytes(db)  # the forgotten words linger in the index
    backup = tmp_path / "before-compaction.db"
    code, out, err = vmem(capsys, "--db", str(db), "db", "compact", "--older-than", "30",
                          "--apply", "--backup", str(backup), "--json")
    assert code == 0, err
    done = json.loads(out)
    assert (done["applied"], done["archived"], done["pruned"]) == (True, 200, 0)
    assert SECRET.encode() not in _bytes(db)  # gone from the file and its log
    with SQLiteStore(backup) as copy:  # the backup is the store as it was, whole
        assert copy.find(REPO, limit=None) == [m for m in kept if m.id != "m007"]
        assert copy.info().events == 221
    with SQLiteStore(db) as store:
        info = store.info()
        assert (info.events, info.archived_events, info.forgotten) == (21, 200, 1)
        after = store.stats(REPO)
        assert after.events == {**before.events, "forgotten": 1}  # archived still count
        assert after.total == before.total - 1
        assert len(store.events(repo=REPO, archived=True, limit=None)) == 200
    assert (backup.stat().st_mode & 0o777) == 0o600
    code, _, err = vmem(capsys, "--db", str(db), "db", "compact", "--apply", "--backup",
                        str(backup))
    assert code == 1
    assert f"the backup {backup} exists already" in err


def test_pruning_removes_citations_a_foreign_key_did_not(
        db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with sqlite3.connect(db) as conn:  # the sqlite3 shell does not enforce foreign keys
        conn.execute("DELETE FROM agent_memory WHERE id = 'm001'")
    code, out, _ = vmem(capsys, "--db", str(db), "db", "compact", "--json")
    assert json.loads(out)["orphaned_citations"] == 1
    code, out, err = vmem(capsys, "--db", str(db), "db", "compact", "--apply", "--no-backup",
                          "--json")
    assert code == 0, err
    assert json.loads(out)["pruned"] == 1
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM agent_memory_citation WHERE memory_id = "
                            "'m001'").fetchone() == (0,)


def test_telemetry_stays_append_only_outside_the_archive(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        for statement in ("DELETE FROM agent_memory_telemetry WHERE id = 1",
                          "UPDATE agent_memory_telemetry SET actor = 'me'"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(statement)
    with SQLiteStore(db) as store:
        store.archive_events(utcnow())
    with sqlite3.connect(db) as conn:
        for statement in ("DELETE FROM agent_memory_telemetry_archive WHERE id = 1",
                          "UPDATE agent_memory_telemetry_archive SET actor = 'me'"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                conn.execute(statement)


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_the_audit_says_when_compaction_cut_a_repository_log(kind: str, tmp_path: Path) -> None:
    store: MemoryStore = (SQLiteStore(tmp_path / "audit.db") if kind == "sqlite"
                          else InMemoryStore())
    _fill(store)  # 200 reads a year old, 20 applications today
    store.archive_events(utcnow() - timedelta(days=30))
    with MemoryService(store) as service:
        live = service.audit(repo=REPO)
        assert [e.kind for e in live] == [EventKind.APPLIED] * 20
        # Only reads were archived: the log of changes is whole, the log of reads is not.
        assert not service.audit_archived(live, repo=REPO)
        reads = service.audit(repo=REPO, reads=True)
        assert service.audit_archived(reads, repo=REPO, reads=True)
        everything = service.audit(repo=REPO, reads=True, archived=True, limit=300)
        assert len(everything) == 220
        assert everything[:20] == reads[:20]  # newest first, the archive after
        # A log the limit fills with live events newer than the archive is not cut.
        assert not service.audit_archived(reads[:20], repo=REPO, reads=True, limit=20)
        assert service.audit_archived([], repo=REPO, kinds=[EventKind.RETRIEVED])


def test_stores_that_cannot_be_compacted_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = vmem(capsys, "--db", ":memory:", "db", "compact")
    assert code == 1
    assert "cannot be compacted: compaction needs a SQLite file or a direct postgresql://" in err


@pytest.mark.postgres
def test_postgres_compaction_backs_up_as_an_export(pg_url: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from verified_memory.store.postgres import PostgresStore

    with PostgresStore(pg_url) as store:
        _fill(store)
        before = store.stats(REPO)
    monkeypatch.chdir(tmp_path)
    code, out, err = vmem(capsys, "--db", pg_url, "db", "compact", "--older-than", "30")
    assert code == 0, err
    assert "(an export of every repository)" in out
    assert "3. archive 200 events older than 30 days" in out
    code, out, err = vmem(capsys, "--db", pg_url, "db", "compact", "--older-than", "30",
                          "--apply", "--json")
    assert code == 0, err
    done = json.loads(out)
    assert done["archived"] == 200
    backup = Path(done["backup"])
    assert backup.name.startswith("vmem-backup-")
    assert backup.suffix == ".jsonl"
    restored = InMemoryStore()
    assert import_jsonl(restored, io.StringIO(backup.read_text())).events == 220
    with PostgresStore(pg_url) as store:
        assert store.stats(REPO) == before
        assert store.info().archived_events == 200
        assert restored.find(REPO, limit=None) == store.find(REPO, limit=None)
    code, out, err = vmem(capsys, "--db", pg_url, "db", "compact", "--apply", "--no-backup",
                          "--json")
    assert code == 0, err
    assert json.loads(out)["backup"] is None
