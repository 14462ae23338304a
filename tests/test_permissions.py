"""Permission faults, met for real: an unprivileged user (``tests/unprivileged.py``)
runs ``vmem`` against code it may not read and stores it may not write.

The rules under test: a permission failure is never a verdict on a memory (nothing
changes status because a file could not be read); the user gets one line naming the
file and what was wrong, no traceback; nothing is half-written.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.unprivileged import Sandbox, sandbox
from verified_memory import MemoryService
from verified_memory.sources.local_git import LocalGitSource
from verified_memory.store.sqlite import SQLiteStore

REPO = "acme/net"
CODE = "MAX_RETRIES = 3\n\n\ndef fetch(url):\n    return get(url, MAX_RETRIES)\n"


@pytest.fixture
def box() -> Iterator[Sandbox]:
    with sandbox() as made:
        yield made


def one_line(stderr: str) -> str:
    """The error line of a failed command, checked to be its only ``vmem: error``, with
    no traceback."""
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("vmem: error: ")]
    assert len(errors) == 1, stderr
    return errors[0]


def statuses(db: Path) -> dict[str, str]:
    with SQLiteStore(db, create=False) as store:
        return {m.id: m.status.value for m in store.recent(REPO, limit=None)}


@pytest.fixture
def project(box: Sandbox) -> tuple[GitRepo, Path, str]:
    """A working copy whose memory cites net.py at its first commit; the main line has
    moved since (a line added on top), so verifying it must read the file's new blob."""
    repo = GitRepo.project(box.path / "repo", {"net.py": CODE, "other.py": "X = 1\n"},
                           origin="git@github.com:acme/net.git")
    db = box.path / "store" / "m.db"
    with MemoryService(SQLiteStore(db), LocalGitSource(repo.path)) as service:
        memory = service.store({"repo": REPO, "subject": "Retries", "fact": "three tries",
                                "citations": [{"path": "net.py", "line_start": 1,
                                               "line_end": 1}]}).id
        service.store({"repo": REPO, "subject": "Other", "fact": "X is one",
                       "citations": [{"path": "other.py", "line_start": 1, "line_end": 1}]})
    repo.write("net.py", "# the network\n" + CODE)
    repo.commit("a comment on top")
    return repo, db, memory


def loose_object(repo: GitRepo, spec: str) -> Path:
    sha = repo.run("rev-parse", spec)
    return repo.path / ".git" / "objects" / sha[:2] / sha[2:]


# ------------------------------------------------------------------ unreadable code


def test_an_unreadable_git_object_is_no_verdict_and_is_named(
        box: Sandbox, project: tuple[GitRepo, Path, str]) -> None:
    """git calls an object it may not read "missing": that read as a blob the clone
    lacks ("does not exist ... a shallow or partial clone?"). Now the object's file is
    named, with why; the memory is unverifiable and keeps its status."""
    repo, db, memory = project
    first = repo.run("rev-parse", "HEAD~1")
    blob = loose_object(repo, "HEAD:net.py")
    before = statuses(db)
    box.hand_over()
    blob.chmod(0)
    said = f"cannot read {blob}: Permission denied"
    for args in (["verify"], ["context"], ["verify", "--dry-run", "--json"]):
        ran = box.vmem("--db", os.fspath(db), *args, cwd=repo.path)
        assert ran.returncode == 0, ran.stderr  # unreadable code: unverifiable, not an error
        assert "Traceback" not in ran.stderr
        assert said in ran.stderr, ran.stderr
        assert "does not exist" not in ran.stdout + ran.stderr
    line = json.dumps({"id": "c1", "path": "net.py", "line_start": 1, "line_end": 1,
                       "sha": first})
    ran = box.vmem("--db", os.fspath(db), "citations", "check", "--repo",
                   os.fspath(repo.path), input=line + "\n",
                   cwd=repo.path)
    assert ran.returncode == 0, ran.stderr
    (checked,) = [json.loads(out) for out in ran.stdout.splitlines()]
    assert checked["status"] == "unverifiable", checked
    assert ran.stderr.strip() == ("vmem: 1 of 1 citations could not be verified (no "
                                  f"verdict): c1 (could not read the code: git cannot read "
                                  f"blob {blob.parent.name}{blob.name} in {repo.path}: "
                                  f"{said})")
    hook_input = json.dumps({"session_id": "s", "cwd": os.fspath(repo.path),
                             "hook_event_name": "SessionStart"})
    ran = box.vmem("--db", os.fspath(db), "hook", "session-start", input=hook_input,
                   cwd=repo.path)
    assert ran.returncode == 0, ran.stderr
    assert "Traceback" not in ran.stderr
    assert memory not in ran.stdout  # not shown: it could not be checked
    assert statuses(db) == before == dict.fromkeys(before, "active")


def test_an_unreadable_object_directory_is_named_not_taken_for_no_repository(
        box: Sandbox, project: tuple[GitRepo, Path, str]) -> None:
    """With ``.git/objects`` unreadable git says "not a git repository": vmem said "not
    inside a git working copy: pass --repo". Now it names the directory and why."""
    repo, db, _ = project
    before = statuses(db)
    box.hand_over()
    objects = repo.path / ".git" / "objects"
    objects.chmod(0)
    hook_input = json.dumps({"session_id": "s", "cwd": os.fspath(repo.path),
                             "hook_event_name": "SessionStart"})
    for args in (["verify"], ["context"], ["verify", "--repo", REPO],
                 ["hook", "session-start"]):
        ran = box.vmem("--db", os.fspath(db), *args, cwd=repo.path, input=hook_input)
        assert ran.returncode == 1
        assert one_line(ran.stderr) == ("vmem: error: git cannot read the repository at "
                                        f"{repo.path}: cannot read {objects}: Permission "
                                        "denied")
    assert statuses(db) == before


def test_an_unreadable_file_in_the_worktree_is_no_verdict(
        box: Sandbox, project: tuple[GitRepo, Path, str]) -> None:
    repo, db, _ = project
    before = statuses(db)
    box.hand_over()
    (repo.path / "net.py").chmod(0)
    ran = box.vmem("--db", os.fspath(db), "verify", "--worktree", cwd=repo.path)
    assert ran.returncode == 0, ran.stderr
    assert (f"cannot read net.py in the working tree {repo.path}: Permission denied"
            in ran.stderr)
    assert statuses(db) == before


# ------------------------------------------------------------------ a read-only store


def read_only(box: Sandbox, db: Path, what: str) -> None:
    """Make the store read-only to the unprivileged user: its file, or its directory
    (where SQLite must create its -wal and -shm files, even to read)."""
    box.hand_over()
    assert not Path(f"{db}-wal").exists()  # closed cleanly: a reader must make its own
    (db if what == "file" else db.parent).chmod(0o444 if what == "file" else 0o555)


@pytest.mark.parametrize("what", ["file", "directory"])
def test_a_read_only_store_answers_reads_and_refuses_writes_in_one_line(
        box: Sandbox, project: tuple[GitRepo, Path, str], what: str) -> None:
    """Reads work (a read-only directory used to refuse even ``vmem list``: SQLite could
    not make its journal); a write fails in one line saying the store is read-only
    (it said "cannot read or write"); a verification at the tip shows its view and
    fails (it showed nothing), and a context hook answers with the view (it failed).
    Nothing is written: the file's bytes are as they were."""
    repo, db, memory = project
    before, data = statuses(db), db.read_bytes()
    read_only(box, db, what)
    refused = (f"the memory store {db} is read-only (this user may not write it or its "
               "directory): nothing was written while")

    def vmem(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
        ran = box.vmem("--db", os.fspath(db), *args, cwd=repo.path, input=stdin)
        assert "Traceback" not in ran.stderr, ran.stderr
        return ran.returncode, ran.stdout, ran.stderr

    code, out, _ = vmem("list", "--json")
    assert code == 0
    assert {m["id"] for m in json.loads(out)} == set(before)
    code, out, err = vmem("search", "tries", "--json")
    assert (code, [m["id"] for m in json.loads(out)]) == (0, [memory])
    assert f"retrieved event not recorded: {refused} logging telemetry" in err
    code, out, _ = vmem("dashboard", "--json")
    assert code == 0
    assert json.loads(out)["repos"]
    code, out, err = vmem("context", "--json")
    assert code == 0, err
    assert memory in {m["id"] for m in json.loads(out)["memories"]}
    assert f"{refused} applying transitions; the memories were checked as a view" in err
    hook_input = json.dumps({"session_id": "s", "cwd": os.fspath(repo.path),
                             "hook_event_name": "SessionStart"})
    code, out, err = vmem("hook", "session-start", stdin=hook_input)
    assert code == 0, err
    assert "the memory store is read-only: no verdict is recorded" in out
    code, out, err = vmem("verify")
    assert code == 1
    assert "nothing stored changed (a view)" in out
    assert one_line(err) == f"vmem: error: {refused} applying transitions"
    code, out, err = vmem("store", "--subject", "S", "--fact", "F", "--cite", "other.py:1")
    assert code == 1
    assert one_line(err) == f"vmem: error: {refused} adding a memory"
    # Compaction backs up first: in a read-only directory the backup is refused (the
    # line quoted Python's repr of the error); beside a read-only file, the first change,
    # and the backup made before it is removed (it was left behind).
    code, out, err = vmem("db", "compact", "--older-than", "0", "--apply")
    assert code == 1
    if what == "directory":
        assert re.fullmatch(rf"vmem: error: cannot write the backup {re.escape(str(db))}"
                            r"\.backup-\d{8}T\d{6}Z: Permission denied", one_line(err)), err
    else:
        assert one_line(err) == f"vmem: error: {refused} pruning citations"
    assert db.read_bytes() == data
    assert list(db.parent.glob(f"{db.name}.backup-*")) == []
    assert statuses(db) == before


# ------------------------------------------------------------------ the GitHub disk cache

#: Run as the unprivileged user: GitHub mocked in that process (``responses`` works
#: in-process only), every blob read through a cache directory it may not write.
_READ_THROUGH_CACHE = """
import logging, sys
import responses
from tests.github_payloads import FakeGitHub
from verified_memory.sources.github import GitHubSource

logging.basicConfig(level=logging.WARNING, format="%(message)s")
fake = FakeGitHub("octo/demo")
files = {f"f{i}.py": f"X = {i}\\n" for i in range(5)}
fake.commit(files)
with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
    fake.install(rsps)
    with GitHubSource("octo/demo", "t0ken", cache_dir=sys.argv[1],
                      sleep=lambda seconds: None) as source:
        tree = source.tree(source.resolve("main"))
        for _ in range(2):
            assert [source.read_blob(tree[p]).decode() for p in sorted(files)] == [
                files[p] for p in sorted(files)]
print(fake.calls["blob"])
"""


def test_an_unwritable_github_cache_is_read_past_and_said_once(box: Sandbox) -> None:
    """Every cache write that failed logged a line of its own (a pass writing a hundred
    blobs and listings said so a hundred times); now once per directory that refused,
    and the reads go on uncached."""
    cache = box.path / "cache"
    cache.mkdir()
    box.hand_over()
    cache.chmod(0o555)
    ran = box.python("-c", _READ_THROUGH_CACHE, os.fspath(cache))
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["10"]  # nothing cached: each read asked GitHub again
    assert ran.stderr.splitlines() == [
        f"disk cache {cache} is not writable (Permission denied); reading on without "
        "caching"]
    assert os.listdir(cache) == []


# ------------------------------------------------------------------ a read-only memory folder


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("index", ["built", "absent"])
def test_a_read_only_memory_folder_is_read_and_refuses_writes_in_one_line(
        box: Sandbox, index: str) -> None:
    """``git:.memory`` in a folder this user may not write: with its index built, a
    search failed after answering (telemetry: '.memory/index.state: Permission denied')
    and a write said only that; without one (the index is git-ignored: a fresh
    checkout) nothing could be read at all. Now reads answer (an index without one is
    built in memory), a write fails in one line, and no file changes."""
    from verified_memory.gitstore.store import GitStore

    repo = GitRepo.project(box.path / "repo", {"net.py": CODE},
                           origin="git@github.com:acme/net.git")
    folder = repo.path / ".memory"
    with MemoryService(GitStore(folder), LocalGitSource(repo.path)) as service:
        memory = service.store({"repo": REPO, "subject": "Retries", "fact": "three tries",
                                "citations": [{"path": "net.py", "line_start": 1,
                                               "line_end": 1}]}).id
    if index == "absent":
        for name in ("index.sqlite", "index.state"):
            (folder / name).unlink()
    files = snapshot(folder)
    box.hand_over()
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    refused = f"the memory folder {folder} is read-only (Permission denied): nothing was written"

    def vmem(*args: str) -> tuple[int, str, str]:
        ran = box.vmem("--db", f"git:{folder}", *args, cwd=repo.path)
        assert "Traceback" not in ran.stderr, ran.stderr
        return ran.returncode, ran.stdout, ran.stderr

    code, out, _ = vmem("list", "--json")
    assert (code, [m["id"] for m in json.loads(out)]) == (0, [memory])
    code, out, err = vmem("search", "tries", "--json")
    assert (code, [m["id"] for m in json.loads(out)]) == (0, [memory])
    assert f"retrieved event not recorded: {refused}" in err
    code, out, err = vmem("context", "--json")
    assert code == 0, err
    assert [m["id"] for m in json.loads(out)["memories"]] == [memory]
    for write in (["store", "--subject", "S", "--fact", "F", "--cite", "net.py:1"],
                  ["verify"]):
        code, _, err = vmem(*write)
        assert code == 1
        assert one_line(err) == f"vmem: error: {refused}"
    assert snapshot(folder) == files


# ------------------------------------------------------------------ a client's configuration


def test_vmem_init_names_a_config_file_it_may_not_read_or_write_and_writes_nothing(
        box: Sandbox) -> None:
    """An unreadable settings file was already one line. A directory this user may not
    write failed after the files before it were written (.mcp.json wired, the hooks
    not); now nothing is written."""
    repo = GitRepo.project(box.path / "repo", {"net.py": CODE},
                           origin="git@github.com:acme/net.git")
    settings = repo.path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{}\n")
    box.hand_over()
    before = sorted(p.name for p in repo.path.iterdir())

    def init() -> str:
        ran = box.vmem("init", "claude-code", cwd=repo.path)
        assert ran.returncode == 1
        return one_line(ran.stderr)

    settings.chmod(0)
    assert init() == f"vmem: error: {settings}: Permission denied"
    settings.chmod(0o644)
    settings.parent.chmod(0o555)
    assert init() == (f"vmem: error: {settings}: Permission denied (this user may not write "
                      f"{settings.parent}): nothing was written")
    assert sorted(p.name for p in repo.path.iterdir()) == before
    assert settings.read_text() == "{}\n"


def test_vmem_init_leaves_a_read_only_config_file_alone(box: Sandbox) -> None:
    """A read-only settings file in a directory this user may write was replaced (a
    rename needs only the directory), though its mode said not to change it. Now it is
    refused as a directory this user may not write is: one line, nothing written."""
    repo = GitRepo.project(box.path / "repo", {"net.py": CODE},
                           origin="git@github.com:acme/net.git")
    settings = repo.path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{}\n")
    settings.chmod(0o444)
    box.hand_over()
    before = sorted(p.name for p in repo.path.iterdir())
    ran = box.vmem("init", "claude-code", cwd=repo.path)
    assert ran.returncode == 1
    assert one_line(ran.stderr) == (f"vmem: error: {settings}: Permission denied (this user "
                                    f"may not write {settings}): nothing was written")
    assert sorted(p.name for p in repo.path.iterdir()) == before
    assert settings.read_text() == "{}\n"
    assert settings.stat().st_mode & 0o777 == 0o444


# ------------------------------------------------------------------ rules files


def test_a_rule_in_a_read_only_rules_file_is_not_taken_out(
        box: Sandbox, project: tuple[GitRepo, Path, str]) -> None:
    """``vmem promote ID --remove`` on a rules file this user may not write: one line
    naming it, and nothing changes, neither the file nor the store (the memory is still
    promoted there, with no ``demoted`` event)."""
    from verified_memory.models import EventKind, Transition
    from verified_memory.rules_file import write_rule

    repo, db, memory = project
    rules = repo.path / "AGENTS.md"
    with SQLiteStore(db) as store:
        store.apply([Transition(memory, promoted_to="AGENTS.md")])
        write_rule(rules, store.get(memory), [], "c" * 40)
    text = rules.read_text()
    box.hand_over()
    rules.chmod(0o444)
    ran = box.vmem("--db", os.fspath(db), "promote", memory, "--remove", cwd=repo.path)
    assert ran.returncode == 1
    assert one_line(ran.stderr) == (f"vmem: error: {rules}: Permission denied: nothing was "
                                    "written")
    assert rules.read_text() == text
    with SQLiteStore(db, create=False) as store:
        assert store.get(memory).promoted_to == "AGENTS.md"
        assert store.events(memory_id=memory, kinds=[EventKind.DEMOTED]) == []
