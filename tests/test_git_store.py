"""The repository as the store (``git:.memory``): files are the truth, the SQLite index
is git-ignored and rebuilt from them, telemetry is one log per actor and session."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.contract.test_store import cite, event, mem
from tests.gitrepo import GitRepo, git_env
from tests.store_races import at_once
from verified_memory.cli import main
from verified_memory.gitstore.layout import read_folder
from verified_memory.gitstore.store import GitStore
from verified_memory.models import EventKind, Status, Transition
from verified_memory.store import open_store

REPO = "acme/api"
NET = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(12))


def snapshot(store: GitStore) -> dict[str, Any]:
    """Everything a store answers: memories, events (without the store's numbering),
    tombstones, counts."""
    repos = store.repos()
    return {
        "memories": sorted((m.to_dict() for r in repos
                            for m in store.recent(r, limit=None, status=None)),
                           key=lambda m: m["id"]),
        "events": [{**e.to_dict(), "id": None} for e in store.events(limit=None)],
        "tombstones": [t.to_dict() for t in store.tombstones(limit=None)],
        "stats": [store.stats(r).to_dict() for r in repos],
        "search": [m.id for m in store.search(REPO, "retried")],
    }


def fill(store: GitStore) -> None:
    first, second, third = (mem("the app retries", id="aaaa-1"),
                            mem("timeouts", "requests time out", id="bbbb-2", minutes=1,
                                category="convention", tags=("net",)),
                            mem("secret", "the token is abc123", id="cccc-3", minutes=2))
    for memory in (first, second, third):
        store.add(memory, [event(EventKind.CREATED, memory.id)])
    store.supersede("aaaa-1", mem("the app retries", "calls are retried five times",
                                  id="dddd-4", supersedes="aaaa-1", minutes=3),
                    [event(EventKind.SUPERSEDED, "aaaa-1")])
    store.apply([Transition("bbbb-2", status=Status.INVALID, invalid_reason="gone",
                            citations=(cite(start=20, end=22),),
                            events=(event(EventKind.INVALIDATED, "bbbb-2"),))])
    store.log([event(EventKind.RETRIEVED, "dddd-4", minutes=5)])
    store.forget(["cccc-3"], by="alice", reason="pasted a token")


def test_a_creation_time_later_than_now_is_written_to_the_file_as_stored(
        tmp_path: Path) -> None:
    """The index stores a creation time in the future as now (every store's rule); the
    memory's file says the same, so a rebuilt index (another clone, `vmem git reindex`)
    has the same time, not the file's 2099 taken in at the rebuild's own time."""
    ahead = datetime(2099, 1, 1, tzinfo=UTC)
    with GitStore(tmp_path / ".memory", session="s1") as store:
        store.add(replace(mem(id="aaaa-1"), created_at=ahead))
        assert store.add_unless_duplicate(replace(mem("other", "another fact", id="bbbb-2",
                                                      citations=(cite("b.py"),)),
                                                  created_at=ahead), lambda found: [])
        stored = [store.get(i).created_at for i in ("aaaa-1", "bbbb-2")]
        assert all(t < ahead for t in stored)
        store.reindex()
        assert [store.get(i).created_at for i in ("aaaa-1", "bbbb-2")] == stored


def test_writes_land_in_files_and_the_rebuilt_index_equals_the_original(
        tmp_path: Path) -> None:
    folder = tmp_path / ".memory"
    with GitStore(folder, session="s1") as store:
        fill(store)
        before = snapshot(store)
        assert store.reindex() == (3, 7, 1)
        assert snapshot(store) == before
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert "uncategorized/dddd-4_the-app-retries.md" in files
    assert "convention/bbbb-2_timeouts.md" in files
    assert "_forgotten/cccc-3.md" in files
    assert not any(p.startswith("uncategorized/cccc-3_") for p in files)  # its text is gone
    assert "abc123" not in "".join((folder / p).read_text() for p in files
                                           if not p.startswith("index.sqlite"))
    logs = [p for p in files if p.startswith("_events/")]
    assert logs
    assert all(p.endswith("__s1.jsonl") for p in logs)
    assert "index.sqlite" in files
    assert "invalid" in (folder / "convention/bbbb-2_timeouts.md").read_text()
    # A new process rebuilds nothing when nothing changed, and sees the same store.
    with GitStore(folder, session="s2") as again:
        assert snapshot(again) == before


def test_files_changed_behind_the_index_are_picked_up(tmp_path: Path) -> None:
    folder = tmp_path / ".memory"
    with GitStore(folder) as store:
        store.add(mem("kept", id="aaaa-1"))
        store.add(mem("dropped", id="bbbb-2"))
    next(folder.glob("*/bbbb-2_*.md")).unlink()  # e.g. a pull that removed it
    with GitStore(folder) as store:
        assert [m.id for m in store.recent(REPO, limit=None)] == ["aaaa-1"]


def test_two_sessions_log_to_two_files(tmp_path: Path) -> None:
    folder = tmp_path / ".memory"
    for session in ("alice1", "bob1"):
        with GitStore(folder, session=session) as store:
            store.log([event(EventKind.RETRIEVED, "x")])
    logs = sorted(p.name for p in folder.glob("_events/*/*/*/*.jsonl"))
    assert len(logs) == 2
    assert logs[0].endswith("__alice1.jsonl")
    assert logs[1].endswith("__bob1.jsonl")
    with GitStore(folder) as store:
        assert len(store.events(limit=None)) == 2


def test_the_repository_as_the_store_through_the_cli(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    repo = GitRepo.project(tmp_path / "app", {"app/net.py": NET},
                           origin="https://github.com/acme/app.git")
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("VMEM_DATABASE_URL", "git:.memory")

    def vmem(*args: str) -> Any:
        with pytest.raises(SystemExit) as done:
            main([*args, "--json"])
        out, err = capsys.readouterr()
        assert done.value.code in (0, None), err
        return json.loads(out)

    stored = vmem("store", "--subject", "Adds", "--fact", "f1 adds one.", "--cite",
                  "app/net.py:5-6")
    repo.commit("[memory] one")
    ignored = repo.run("status", "--porcelain", "--ignored").splitlines()
    assert "!! .memory/index.sqlite" in ignored
    assert vmem("where")["kind"] == "git"
    # A teammate's branch adds a memory through the same folder; merged, it is there.
    repo.run("checkout", "-q", "-b", "bob")
    vmem("store", "--subject", "Adds two", "--fact", "f2 adds two.", "--cite",
         "app/net.py:9-10")
    repo.commit("[memory] bob's")
    repo.run("checkout", "-q", "main")
    vmem("store", "--subject", "Adds three", "--fact", "f3 adds three.", "--cite",
         "app/net.py:13-14")
    repo.commit("[memory] alice's")
    repo.run("merge", "-q", "--no-edit", "bob")
    subjects = {m["subject"] for m in vmem("list")}
    assert subjects == {"Adds", "Adds two", "Adds three"}
    assert vmem("git", "reindex")["memories"] == 3
    assert vmem("show", stored["id"])["fact"] == "f1 adds one."
    subprocess.run(["git", "-C", str(repo.path), "status"], check=True, env=git_env(),
                   capture_output=True)


def test_reindex_without_a_folder_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        main(["git", "reindex", "--dir", "nowhere"])
    assert done.value.code == 1
    assert "there is no memory folder at" in capsys.readouterr().err
    assert not (tmp_path / "nowhere").exists()


def test_a_folder_of_code_named_by_mistake_is_refused_and_left_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`--dir app` or `git:app` for a read (a slip for `.memory`): one line, and no index,
    .gitignore or lock file written among the code."""
    repo = GitRepo.project(tmp_path / "work", {"app/net.py": NET})
    monkeypatch.chdir(repo.path)
    for args in (["git", "reindex", "--dir", "app"],
                 ["--db", "git:app", "list", "--repo", REPO]):
        with pytest.raises(SystemExit) as done:
            main(args)
        assert done.value.code == 1
        assert "app is not a memory folder" in capsys.readouterr().err
        assert sorted(p.name for p in (repo.path / "app").iterdir()) == ["net.py"]
    # An empty folder, or one a store made, is a memory folder.
    GitStore(tmp_path / "empty").close()
    with GitStore(tmp_path / "empty", create=False) as store:
        assert store.repos() == []


def test_open_store_names_the_folder(tmp_path: Path) -> None:
    store = open_store(f"git:{tmp_path / 'm'}")
    try:
        assert isinstance(store, GitStore)
        assert store.info().location == str(tmp_path / "m")
    finally:
        store.close()


def test_an_id_that_starts_another_never_touches_its_file(tmp_path: Path) -> None:
    with GitStore(tmp_path / ".memory") as store:
        store.add(mem("one", id="abc"))
        store.add(mem("two", id="abc-def"))
        store.apply([Transition("abc", status=Status.INVALID, invalid_reason="x")])
        store.forget(["abc"], by="t", reason="r")
        assert [m.id for m in store.recent(REPO, limit=None)] == ["abc-def"]
    files = sorted(p.relative_to(tmp_path / ".memory").as_posix()
                   for p in (tmp_path / ".memory").glob("*/*.md"))
    assert files == ["_forgotten/abc.md", "uncategorized/abc-def_two.md"]


def folder_and_index(folder: Path) -> tuple[list[str], list[str]]:
    """The memory ids in the files, and in the index of a store opened afresh."""
    files = sorted(m.id for m in read_folder(folder).memories.values())
    with GitStore(folder) as store:
        return files, sorted(m.id for m in store.recent(REPO, limit=None, status=None))


def test_a_store_held_open_keeps_its_writes_in_the_index_while_others_open_it(
        tmp_path: Path) -> None:
    """The MCP server holds its store for a whole session while hooks and commands open
    the folder too: a memory it stores after one of them opened the folder is in the
    index (it was written to a file only, and the index was trusted without it)."""
    folder = tmp_path / ".memory"
    server = GitStore(folder, session="server")
    try:
        server.add(mem("one", id="aaaa-1"), [event(EventKind.CREATED, "aaaa-1")])
        with GitStore(folder, session="hook") as hook:
            assert [m.id for m in hook.recent(REPO, limit=None)] == ["aaaa-1"]
        server.add(mem("two", id="bbbb-2", minutes=1), [event(EventKind.CREATED, "bbbb-2")])
        assert [m.id for m in server.recent(REPO, limit=None)] == ["bbbb-2", "aaaa-1"]
    finally:
        server.close()
    assert folder_and_index(folder) == (["aaaa-1", "bbbb-2"], ["aaaa-1", "bbbb-2"])
    with GitStore(folder) as store:
        assert len(store.events(limit=None)) == 2


def test_files_pulled_while_a_store_is_open_reach_the_index_at_its_next_write(
        tmp_path: Path) -> None:
    """A pull while the store is open brings a teammate's memory: the open store's next
    write rebuilds the index from the files first, so the memory is not left out of an
    index that is then trusted."""
    folder, theirs = tmp_path / ".memory", tmp_path / "theirs" / ".memory"
    with GitStore(theirs) as teammate:
        teammate.add(mem("theirs", id="cccc-3"))
    with GitStore(folder) as store:
        store.add(mem("one", id="aaaa-1"))
        pulled = next(theirs.glob("*/cccc-3_*.md"))
        (folder / pulled.parent.name / pulled.name).write_text(pulled.read_text())
        store.add(mem("two", id="bbbb-2", minutes=1))
        assert {m.id for m in store.recent(REPO, limit=None)} == {"aaaa-1", "bbbb-2",
                                                                    "cccc-3"}
    assert folder_and_index(folder) == (["aaaa-1", "bbbb-2", "cccc-3"],
                                        ["aaaa-1", "bbbb-2", "cccc-3"])


def test_files_pulled_while_a_store_is_open_are_read_without_a_write(tmp_path: Path) -> None:
    """A store held open for a session (the MCP server) that only reads: a pull brings a
    teammate's memory and drops one of ours, and the next reads answer from the files
    as they are now (they answered from the index of when the store was opened)."""
    folder, theirs = tmp_path / ".memory", tmp_path / "theirs" / ".memory"
    with GitStore(theirs) as teammate:
        teammate.add(mem("theirs", id="cccc-3"))
    with GitStore(folder) as store:
        store.add(mem("one", id="aaaa-1"))
        store.add(mem("two", id="bbbb-2", minutes=1))
    with GitStore(folder) as store:
        assert {m.id for m in store.recent(REPO, limit=None)} == {"aaaa-1", "bbbb-2"}
        pulled = next(theirs.glob("*/cccc-3_*.md"))
        (folder / pulled.parent.name / pulled.name).write_text(pulled.read_text())
        next(folder.glob("*/bbbb-2_*.md")).unlink()
        assert {m.id for m in store.recent(REPO, limit=None)} == {"aaaa-1", "cccc-3"}
        assert [m.id for m in store.search(REPO, "theirs")] == ["cccc-3"]
        assert store.get("cccc-3").fact == mem("theirs", id="cccc-3").fact


def _open_and_store(folder: str, worker: int, barrier: Any, results: Any) -> None:
    """Open the folder the moment the other workers do, and store one memory."""
    try:
        barrier.wait(timeout=60)
        with GitStore(folder, session=f"w{worker}") as store:
            store.add(mem(f"memory {worker}", id=f"w{worker}-m"),
                      [event(EventKind.CREATED, f"w{worker}-m")])
        results.put((worker, "ok"))
    except Exception as exc:  # reported to the parent, whatever it is
        results.put((worker, f"{type(exc).__name__}: {exc}"))


def test_processes_opening_a_changed_folder_at_once_all_store(tmp_path: Path) -> None:
    """After a pull every process that opens the folder finds its index out of date:
    four opening at once each store their memory (they raced to rebuild one index, and
    met a half-built or vanished file), and the index holds what the files hold."""
    folder = tmp_path / ".memory"
    with GitStore(folder) as store:
        for n in range(20):
            store.add(mem(f"seed {n}", id=f"seed-{n}", minutes=n))
    (folder / "index.state").unlink()  # as a pull leaves it: the files changed
    outcomes = at_once(multiprocessing.get_context("spawn"), 4, _open_and_store, str(folder))
    assert outcomes == dict.fromkeys(range(4), "ok")
    files, index = folder_and_index(folder)
    assert len(files) == 24
    assert index == files


def test_a_damaged_index_is_rebuilt_in_full(tmp_path: Path) -> None:
    """The rebuilt index is copied into the index file; a file that is no database
    (damaged) cannot take the copy, so it is replaced whole."""
    folder = tmp_path / ".memory"
    with GitStore(folder) as store:
        store.add(mem("one", id="aaaa-1"))
    for name in ("index.sqlite-wal", "index.sqlite-shm", "index.state"):
        (folder / name).unlink(missing_ok=True)
    (folder / "index.sqlite").write_bytes(b"not a database" * 500)
    assert folder_and_index(folder) == (["aaaa-1"], ["aaaa-1"])
