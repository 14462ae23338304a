"""Crash safety: ``kill -9`` at any point leaves a sound store, and a re-run completes.

Real ``vmem`` processes are killed (SIGKILL, with their git helpers) at seeded random
moments of ``vmem verify``, ``vmem citations check``, ``vmem db import`` and
``vmem supersede``, spread over the time an uninterrupted run takes. After each kill:

- the SQLite file passes ``PRAGMA integrity_check`` (and the full-text index its own);
- no memory is half-updated: each is exactly as before the command or exactly as the
  uninterrupted run left it, its citations with it, and its telemetry agrees (a
  verification event for each verification counted, a ``relocated`` event for each
  citation moved; a supersede's new memory, old status and events together);
- running the command again completes the work.

``VMEM_CRASH_RUNS`` sets the kills per command (default 3; the README reports a longer
run).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import GitRepo
from verified_memory.models import EventKind, Memory
from verified_memory.service import MemoryService
from verified_memory.sources.local_git import LocalGitSource
from verified_memory.store.sqlite import SQLiteStore

REPO = "acme/crash"
RUNS = int(os.environ.get("VMEM_CRASH_RUNS", "3"))
FILES, PER_FILE = 30, 10


def _module(n: int) -> str:
    return "".join(f"def f{n}_{k}(x):\n    y = x * {k} + {n}\n    return y - {k}\n\n\n"
                   for k in range(PER_FILE))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A repository, a store of 300 memories citing it, and a commit that moves the code
    of most files down and edits some: a pass relocates and invalidates."""
    root = tmp_path_factory.mktemp("crash")
    repo = GitRepo(root / "repo")
    for n in range(FILES):
        repo.write(f"pkg/m{n}.py", _module(n))
    repo.commit("initial")
    repo.run("remote", "add", "origin", "https://github.com/acme/crash.git")
    with MemoryService(SQLiteStore(root / "before.db"), LocalGitSource(repo.path)) as service:
        for n in range(FILES):
            for k in range(PER_FILE):
                service.store({"repo": REPO, "subject": f"f{n}_{k}", "fact": "computes y",
                               "citations": [{"path": f"pkg/m{n}.py", "line_start": 5 * k + 1,
                                              "line_end": 5 * k + 3}]})
    for n in range(FILES):
        text = _module(n)
        if n % 6 == 5:
            text = text.replace(f"y - {n % PER_FILE}", "y + 1")  # an edit: invalidated
        repo.write(f"pkg/m{n}.py", f"# header {n}\n\n" + text if n % 3 else text)
    repo.commit("move and edit")
    return {"root": root, "repo": repo.path, "before": root / "before.db"}


# --------------------------------------------------------------------------- helpers


def _env(db: Path) -> dict[str, str]:
    return {**os.environ, "VMEM_DATABASE_URL": f"sqlite:///{db}", "PYTHONUNBUFFERED": "1"}


def _vmem(args: Sequence[str], *, cwd: Path, db: Path, stdin: str | None = None,
          kill_after: float | None = None) -> tuple[int, str, str]:
    """Run ``vmem``; with ``kill_after``, SIGKILL it (and its git helpers) then."""
    proc = subprocess.Popen([sys.executable, "-m", "verified_memory", *args], cwd=cwd,
                            env=_env(db), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    if kill_after is None:
        out, err = proc.communicate(stdin, timeout=120)
        return proc.returncode, out, err
    try:
        out, err = proc.communicate(stdin, timeout=kill_after)
        return proc.returncode, out, err  # finished before the kill
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):  # it may end just before
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode in (0, -signal.SIGKILL), err
        return proc.returncode, out, err


def _timed(args: Sequence[str], **kw: Any) -> float:
    started = time.monotonic()
    code, _, err = _vmem(args, **kw)
    assert code == 0, err
    return time.monotonic() - started


def _sound(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        if "agent_memory_fts" in tables:  # killed before the schema was made: none yet
            conn.execute("INSERT INTO agent_memory_fts (agent_memory_fts) "
                         "VALUES ('integrity-check')")
    finally:
        conn.close()


def _state(memory: Memory) -> tuple[Any, ...]:
    """A memory as a pass may change it (the refresh time aside)."""
    return (memory.status, memory.invalid_reason, memory.verification_count,
            memory.verified_commit, memory.superseded_by,
            tuple((c.path, c.line_start, c.line_end, c.sha, c.blob_sha) for c in memory.citations))


def _snapshot(db: Path) -> tuple[dict[str, tuple[Any, ...]], list[Any]]:
    with SQLiteStore(db) as store:
        memories = {m.id: _state(m) for r in store.repos()
                    for m in store.recent(r, limit=None, status=None)}
        events = [(e.kind.value, e.memory_id, json.dumps(dict(e.detail), sort_keys=True))
                  for e in store.events(limit=None)]
    return memories, events


def _kill_points(seed: int, total: float) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(0.05, total * 1.1) for _ in range(RUNS)]


def _telemetry_agrees(db: Path) -> None:
    """Each memory's verification count and its moved citations match its events."""
    with SQLiteStore(db) as store:
        for memory in store.recent(REPO, limit=None, status=None):
            events = store.events(memory_id=memory.id, limit=None)
            kinds = [e.kind for e in events]
            verified = kinds.count(EventKind.VERIFIED_VALID) + kinds.count(
                EventKind.VERIFIED_INVALID)
            assert verified == memory.verification_count, memory.id
            moved = [e for e in events if e.kind is EventKind.RELOCATED]
            if moved:  # the citation rows moved with their event, in one transaction
                assert str(memory.citations[0].location) == moved[-1].detail["new"]


# --------------------------------------------------------------------------- verify


def test_kill_9_during_verify(world: dict[str, Path], tmp_path: Path) -> None:
    reference = tmp_path / "reference.db"
    shutil.copy(world["before"], reference)
    total = _timed(["verify"], cwd=world["repo"], db=reference)
    before, _ = _snapshot(world["before"])
    after, _ = _snapshot(reference)
    assert sum(before[m] != after[m] for m in before) == len(before)  # all change
    for i, point in enumerate(_kill_points(15, total)):
        db = tmp_path / f"killed{i}.db"
        shutil.copy(world["before"], db)
        _vmem(["verify"], cwd=world["repo"], db=db, kill_after=point)
        _sound(db)
        found, _ = _snapshot(db)
        assert set(found) == set(before)  # nothing lost
        for memory_id, state in found.items():
            assert state in (before[memory_id], after[memory_id]), (point, memory_id)
        print(f"verify killed at {point:.2f} s of {total:.2f}: "  # with -s: where kills fell
              f"{sum(found[m] == after[m] for m in found)} of {len(found)} memories done")
        _telemetry_agrees(db)
        code, _, err = _vmem(["verify"], cwd=world["repo"], db=db)
        assert code == 0, err
        _sound(db)
        done, _ = _snapshot(db)
        for memory_id, state in done.items():  # as the clean run left it, counts aside
            assert state[:2] + state[3:] == after[memory_id][:2] + after[memory_id][3:]
        _telemetry_agrees(db)


# --------------------------------------------------------------------------- import


def test_kill_9_during_db_import(world: dict[str, Path], tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    shutil.copy(world["before"], source)
    code, _, err = _vmem(["verify"], cwd=world["repo"], db=source)  # telemetry to move too
    assert code == 0, err
    code, exported, err = _vmem(["db", "export"], cwd=tmp_path, db=source)
    assert code == 0, err
    dump = tmp_path / "export.jsonl"
    dump.write_text(exported)
    total = _timed(["db", "import", str(dump)], cwd=tmp_path, db=tmp_path / "reference.db")
    whole, whole_events = _snapshot(source)
    for i, point in enumerate(_kill_points(16, total)):
        db = tmp_path / f"target{i}.db"
        _vmem(["db", "import", str(dump)], cwd=tmp_path, db=db, kill_after=point)
        if db.exists():
            _sound(db)
            found, _ = _snapshot(db)  # (opening it completes a schema cut short)
            assert found in ({}, whole)  # one transaction: all of it, or none
            print(f"import killed at {point:.2f} s of {total:.2f}: {len(found)} of "
                  f"{len(whole)} memories in")
        code, _, err = _vmem(["db", "import", str(dump)], cwd=tmp_path, db=db)
        assert code == 0, err
        _sound(db)
        found, events = _snapshot(db)
        assert found == whole
        assert sorted(events) == sorted(whole_events)  # completed, nothing twice


# --------------------------------------------------------------------------- supersede


def test_kill_9_during_supersede(world: dict[str, Path], tmp_path: Path) -> None:
    with SQLiteStore(world["before"]) as store:
        old = store.recent(REPO, limit=1)[0]
    args = ["supersede", old.id, "--subject", "corrected", "--fact", "computes y twice",
            "--cite", "pkg/m1.py:3-5"]
    reference = tmp_path / "reference.db"
    shutil.copy(world["before"], reference)
    total = _timed(args, cwd=world["repo"], db=reference)
    for i, point in enumerate(_kill_points(17, total)):
        db = tmp_path / f"killed{i}.db"
        shutil.copy(world["before"], db)
        _vmem(args, cwd=world["repo"], db=db, kill_after=point)
        _sound(db)
        _superseded_whole_or_not_at_all(db, old.id)
        code, _, err = _vmem(args, cwd=world["repo"], db=db)
        assert code == 0 or "superseded" in err, err  # done now, or done before the kill
        _sound(db)
        assert _superseded_whole_or_not_at_all(db, old.id)


def _superseded_whole_or_not_at_all(db: Path, old_id: str) -> bool:
    """Whether the supersede happened; asserts it happened whole, if at all."""
    with SQLiteStore(db) as store:
        old = store.get(old_id)
        successors = [m for m in store.recent(REPO, limit=None, status=None)
                      if m.supersedes == old_id]
        retired = store.events(memory_id=old_id, kinds=[EventKind.SUPERSEDED], limit=None)
        if old.superseded_by is None:
            assert (old.status.value, successors, retired) == ("active", [], [])
            return False
        (new,) = successors
        assert old.status.value == "superseded"
        assert old.superseded_by == new.id
        assert [str(c.location) for c in new.citations] == ["pkg/m1.py:3-5"]
        assert len(retired) == 1
        assert len(store.events(memory_id=new.id, kinds=[EventKind.CREATED], limit=None)) == 1
        return True


# --------------------------------------------------------------------------- citations check


def test_kill_9_during_citations_check(world: dict[str, Path], tmp_path: Path) -> None:
    repo = GitRepo.__new__(GitRepo)
    repo.path = world["repo"]
    first = repo.run("rev-list", "--max-parents=0", "HEAD")
    lines = "".join(json.dumps({"id": f"{n}-{k}", "path": f"pkg/m{n}.py",
                                "line_start": 5 * k + 1, "line_end": 5 * k + 3, "sha": first})
                    + "\n" for n in range(FILES) for k in range(PER_FILE))
    args = ["citations", "check", "--repo", str(world["repo"]), "--jobs", "2"]
    started = time.monotonic()
    code, expected, err = _vmem(args, cwd=tmp_path, db=tmp_path / "unused.db", stdin=lines)
    total = time.monotonic() - started
    assert code == 0, err
    assert len(expected.splitlines()) == FILES * PER_FILE
    for point in _kill_points(18, total)[:1]:
        _vmem(args, cwd=tmp_path, db=tmp_path / "unused.db", stdin=lines, kill_after=point)
        code, again, err = _vmem(args, cwd=tmp_path, db=tmp_path / "unused.db", stdin=lines)
        assert (code, again) == (0, expected), err
