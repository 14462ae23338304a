"""Faults of one citation stay with that citation, and symbolic links are never followed.

A blob the repository lacks (a shallow or partial clone), a cited file that grew too
large or is no longer UTF-8, a file on disk that cannot be read, a path that became a
submodule, a symbolic link or a directory: each makes its own citation ``unverifiable``
or ``missing`` with a reason, and the rest of the pass goes on. A cited path that is, or
passes through, a symbolic link never reads a file outside the repository: not through
git, not on disk.
A pass's time budget turns what it had no time for into ``unverifiable``, saying so.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from verified_memory import budget as budgets
from verified_memory.budget import time_budget
from verified_memory.cli import main
from verified_memory.errors import BudgetSpent, NotFound, ValidationError
from verified_memory.models import Decision, Outcome, Status
from verified_memory.service import MemoryService
from verified_memory.sources.fake import DictSource
from verified_memory.sources.local_git import LocalGitSource
from verified_memory.sources.worktree import WorktreeSource
from verified_memory.store.sqlite import SQLiteStore
from verified_memory.verify import files as files_module

REPO = "acme/app"
A = "def alpha():\n    return 'a'\n\n\ndef helper():\n    return 1\n"
B = "def beta():\n    return 'b'\n"
SECRET = "TOP SECRET outside the repository\n"


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo.project(tmp_path / "app", {"a.py": A, "b.py": B},
                             origin="https://github.com/acme/app.git")


@pytest.fixture
def service(repo: GitRepo, tmp_path: Path) -> Iterator[MemoryService]:
    with MemoryService(SQLiteStore(tmp_path / "m.db"), LocalGitSource(repo.path)) as svc:
        yield svc


_CLAIMS = itertools.count(1)


def remember(service: MemoryService, path: str, lines: tuple[int, int] = (1, 2)) -> str:
    """A memory of its own each call (a numbered claim: storing the same one twice would
    only refresh the first)."""
    return service.store({"repo": REPO, "subject": f"about {path}",
                          "fact": f"claim {next(_CLAIMS)} holds",
                          "citations": [{"path": path, "line_start": lines[0],
                                         "line_end": lines[1]}]}).id


def outcome(service: MemoryService, memory_id: str) -> tuple[Outcome, str]:
    (verification,) = service.verify([memory_id]).verifications
    (check,) = verification.checks
    return check.outcome, check.detail


# --------------------------------------------------------------------------- per citation


def test_a_missing_blob_makes_one_citation_unverifiable_and_the_pass_goes_on(
        repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.chdir(repo.path)
    for path in ("a.py", "b.py"):
        with pytest.raises(SystemExit) as done:
            main(["--db", db, "store", "--subject", path, "--fact", "f", "--cite",
                  f"{path}:1-2"])
        assert done.value.code == 0
    repo.write("a.py", "# moved down\n" + A)
    repo.write("b.py", "# moved down\n" + B)
    repo.commit("edit both")
    # A partial clone: the new a.py's object is not in the repository.
    blob = repo.blob("a.py")
    (repo.path / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(["--db", db, "verify", "--json"])
    out, err = capsys.readouterr()
    assert done.value.code == 0, err
    report = json.loads(out)
    by_path = {m["citations"][0]["cited"]: m for m in report["memories"]}
    assert by_path["a.py:1-2"]["decision"] == "unverified"
    assert by_path["a.py:1-2"]["status"] == "active"
    assert blob in by_path["a.py:1-2"]["citations"][0]["detail"]
    assert "partial clone" in by_path["a.py:1-2"]["citations"][0]["detail"]
    assert by_path["b.py:1-2"]["decision"] == "refresh"
    assert by_path["b.py:1-2"]["citations"][0]["line_start"] == 2


def test_a_failed_blob_read_is_not_asked_again_within_a_pass(repo: GitRepo,
                                                          service: MemoryService) -> None:
    ids = [remember(service, "a.py") for _ in range(5)]
    repo.write("a.py", "# moved\n" + A)
    repo.commit("edit")
    blob = repo.blob("a.py")
    (repo.path / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    source = service.source_for(REPO)
    asked: list[str] = []
    real = source.read_blob

    def counting(sha: str) -> bytes:
        asked.append(sha)
        return real(sha)

    source.read_blob = counting  # type: ignore[method-assign]
    report = service.verify(ids)
    assert [v.decision for v in report.verifications] == [Decision.UNVERIFIED] * 5
    assert asked.count(blob) == 1


def test_an_oversized_file_is_unverifiable_not_missing(repo: GitRepo, service: MemoryService,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    memory = remember(service, "a.py")
    repo.write("a.py", "# grown\n" + A + "# padding\n" * 200)
    repo.commit("grow")
    monkeypatch.setattr(files_module, "MAX_FILE_BYTES", 1000)
    found, detail = outcome(service, memory)
    assert found is Outcome.UNVERIFIABLE
    assert "larger than the 0 MiB verified-memory reads" in detail
    assert service.memories.get(memory).status is Status.ACTIVE


def test_a_file_no_longer_utf8_is_unverifiable_and_a_binary_one_missing(
        repo: GitRepo, service: MemoryService) -> None:
    first, second = remember(service, "a.py"), remember(service, "b.py")
    repo.write("a.py", ("# caf\u00e9\n" + A).encode("latin-1"))
    repo.write("b.py", b"\x00\x01binary" + B.encode())
    repo.commit("re-encode one, binary the other")
    found, detail = outcome(service, first)
    assert found is Outcome.UNVERIFIABLE
    assert "a.py is not UTF-8 text" in detail
    found, detail = outcome(service, second)
    assert found is Outcome.MISSING
    assert detail == "b.py is binary now"


def test_a_submodule_or_a_directory_in_place_of_the_file_is_named(
        repo: GitRepo, service: MemoryService) -> None:
    first, second = remember(service, "a.py"), remember(service, "b.py")
    repo.run("rm", "-q", "a.py")
    repo.run("update-index", "--add", "--cacheinfo",
             f"160000,{repo.head},a.py")
    repo.run("rm", "-q", "b.py")
    repo.write("b.py/inner.txt", "no code here\n")
    repo.run("add", "b.py/inner.txt")
    repo.commit("submodule and directory", add_all=False)
    found, detail = outcome(service, first)
    assert (found, detail) == (Outcome.MISSING, f"a.py is a submodule at {repo.head[:12]}, "
                                                "not a file")
    found, detail = outcome(service, second)
    assert (found, detail) == (Outcome.MISSING, f"b.py is a directory at {repo.head[:12]}, "
                                                "not a file")


def lfs_pointer(content: bytes) -> str:
    """A Git LFS pointer file, as `git lfs` commits it in place of ``content``."""
    return ("version https://git-lfs.github.com/spec/v1\n"
            f"oid sha256:{hashlib.sha256(content).hexdigest()}\nsize {len(content)}\n")


TABLE = "id,name\n1,alpha\n2,beta\n"
LFS_NOW = ("data/{name} is stored with Git LFS: verification compares LFS pointers, not "
           "the content they point to")
LFS_THEN = ("data/{name} was stored with Git LFS when cited: the citation is of its LFS "
            "pointer, not of the content")


@pytest.mark.parametrize(("before", "after", "found", "said", "hint"), [
    # The object changed: a pointer with another oid and size.
    (lfs_pointer(b"weights v1"), lfs_pointer(b"weights, version 2"), Outcome.MISSING,
     "the cited code is no longer in the file", LFS_NOW),
    # Another oid, the same size: two of the three lines survive.
    (lfs_pointer(b"weights v1"), lfs_pointer(b"weights v2"), Outcome.CHANGED,
     "67% of the cited lines survive at data/{name}:1-3", LFS_NOW),
    # Moved into LFS (git lfs migrate import), and out of it.
    (TABLE, lfs_pointer(TABLE.encode()), Outcome.MISSING,
     "the cited code is no longer in the file", LFS_NOW),
    (lfs_pointer(TABLE.encode()), TABLE + "3,gamma\n", Outcome.MISSING,
     "the cited code is no longer in the file", LFS_THEN),
    # No pointer on either side: no hint.
    (TABLE, "id,name\n1,one\n2,two\n", Outcome.MISSING,
     "the cited code is no longer in the file", None),
], ids=["object-changed", "same-size", "into-lfs", "out-of-lfs", "no-lfs"])
def test_a_citation_of_a_file_stored_with_git_lfs_says_pointers_are_compared(
        repo: GitRepo, service: MemoryService, before: str, after: str, found: Outcome,
        said: str, hint: str | None) -> None:
    name = f"t{next(_CLAIMS)}.csv"
    repo.write(".gitattributes", "*.csv filter=lfs diff=lfs merge=lfs -text\n")
    repo.write(f"data/{name}", before)
    repo.commit("data")
    memory = remember(service, f"data/{name}", (1, 3))
    repo.write(f"data/{name}", after)
    repo.commit("new data")
    outcome_now, detail = outcome(service, memory)
    assert outcome_now is found
    assert detail == said.format(name=name) + (f"; {hint.format(name=name)}" if hint else "")


# --------------------------------------------------------------------------- symbolic links


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the repository holding a copy of the cited code and a secret."""
    place = tmp_path / "outside"
    place.mkdir()
    (place / "a.py").write_text(A)
    (place / "secret.txt").write_text(SECRET)
    return place


def test_git_never_follows_a_link_to_outside_code(repo: GitRepo, service: MemoryService,
                                                  outside: Path) -> None:
    memory = remember(service, "a.py")
    repo.remove("a.py")
    os.symlink(outside / "a.py", repo.path / "a.py")  # the very same code, outside
    os.symlink(outside, repo.path / "out")
    repo.commit("links")
    found, detail = outcome(service, memory)
    assert found is Outcome.MISSING  # never "valid" on the strength of a file outside
    assert detail == f"a.py is a symbolic link at {repo.head[:12]}, not a file"
    for path in ("out/secret.txt", "out/a.py", "a.py"):
        # refused, and named: the user sees the link on disk
        with pytest.raises(ValidationError, match="symbolic link"):
            remember(service, path, (1, 1))
        with pytest.raises(NotFound, match="symbolic link"):  # read as when stored
            service.read_citation(REPO, path, (1, 1))


def test_the_worktree_never_reads_through_a_link(repo: GitRepo, tmp_path: Path,
                                                 outside: Path) -> None:
    repo.write("pkg/a.py", A)
    repo.commit("package")
    with MemoryService(SQLiteStore(tmp_path / "w.db"), WorktreeSource(repo.path)) as service:
        memory = remember(service, "pkg/a.py")
        source = service.source_for(REPO)
        tree = source.tree("worktree")
        assert "pkg/a.py" in tree
        # The listing is taken; now the tracked directory becomes a link to the outside
        # directory, which holds a file of the same name and the same code.
        os.rename(repo.path / "pkg", tmp_path / "pkg-away")
        os.symlink(outside, repo.path / "pkg")
        assert "pkg/a.py" not in tree
        assert tree.get("pkg/a.py") is None
        assert source.entry_kind("worktree", "pkg/a.py") is None
        assert source.entry_kind("worktree", "pkg") == "a symbolic link"
        found, detail = outcome(service, memory)
        assert (found, detail) == (Outcome.MISSING, "pkg/a.py is behind the symbolic link "
                                                    "pkg at worktree, which is never followed")
        # The cited file itself swapped for a link to the same code outside.
        os.remove(repo.path / "pkg")
        os.rename(tmp_path / "pkg-away", repo.path / "pkg")
        os.remove(repo.path / "pkg" / "a.py")
        os.symlink(outside / "a.py", repo.path / "pkg" / "a.py")
        found, detail = outcome(service, memory)
        assert (found, detail) == (Outcome.MISSING, "pkg/a.py is a symbolic link at worktree, "
                                                    "not a file")
        # Nothing the source hands out ever holds the secret.
        os.symlink(outside / "secret.txt", repo.path / "secret.txt")
        os.symlink(outside, repo.path / "out")
        for path in ("secret.txt", "out/secret.txt"):
            assert tree.get(path) is None
            with pytest.raises(ValidationError):
                remember(service, path, (1, 1))
        assert all(SECRET.encode() not in source.read_blob(tree[p]) for p in tree)


@contextmanager
def unreadable(monkeypatch: pytest.MonkeyPatch, path: Path) -> Iterator[None]:
    """``path`` (a file or a directory) made unreadable: mode 000, and where that binds
    no one (root), ``os.open`` of that name refusing as the kernel would for others."""
    mode = path.stat().st_mode
    path.chmod(0)
    if os.geteuid() == 0:
        real_open = os.open

        def refusing(name: str | os.PathLike[str], flags: int, *args: object,
                     **kwargs: object) -> int:
            if os.path.basename(os.fspath(name)) == path.name:
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(name))
            return real_open(name, flags, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "open", refusing)
    try:
        yield
    finally:
        monkeypatch.undo()
        path.chmod(mode)


def test_an_unreadable_file_in_the_worktree_is_unverifiable_not_missing(
        repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo.write("pkg/c.py", "C = 1\nD = 2\n")
    repo.commit("package")
    with MemoryService(SQLiteStore(tmp_path / "w.db"), WorktreeSource(repo.path)) as service:
        in_file, in_directory, readable = (remember(service, "a.py"),
                                           remember(service, "pkg/c.py", (2, 2)),
                                           remember(service, "b.py"))
        for denied, memory in ((repo.path / "a.py", in_file),
                               (repo.path / "pkg", in_directory)):
            with unreadable(monkeypatch, denied):
                report = service.verify([in_file, in_directory, readable])
            checks = {v.memory.id: v.checks[0] for v in report.verifications}
            # Not "does not exist": the file is there, it could not be read.
            assert checks[memory].outcome is Outcome.UNVERIFIABLE
            assert "Permission denied" in checks[memory].detail
            assert checks[readable].outcome is Outcome.VALID  # the pass went on
        assert {m.status for m in service.memories.get_many([in_file, in_directory])} \
            == {Status.ACTIVE}


def test_vmem_verify_on_an_unreadable_worktree_file_says_so_in_one_line(
        repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'w.db'}"
    with pytest.raises(SystemExit) as done:
        main(["--db", db, "-C", str(repo.path), "store", "--subject", "alpha",
              "--fact", "alpha returns a", "--cite", "a.py:1-2"])
    assert done.value.code == 0
    capsys.readouterr()
    with unreadable(monkeypatch, repo.path / "a.py"), pytest.raises(SystemExit) as done:
        main(["--db", db, "-C", str(repo.path), "verify", "--worktree"])
    out, err = capsys.readouterr()
    assert done.value.code == 0, err  # no verdict, and no error either: a view that could not see
    assert "Traceback" not in out + err
    assert "a.py:1-2  unverifiable" in out
    assert "now at  detail" in out  # the column has only "-": its header still ends apart
    assert "cannot read a.py in the working tree" in out


# --------------------------------------------------------------------------- the budget


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SlowSource(DictSource):
    """Every blob read takes a second of the (fake) clock."""

    def __init__(self, clock: Clock, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.clock = clock

    def read_blob(self, blob_sha: str) -> bytes:
        self.clock.now += 1.0
        return super().read_blob(blob_sha)


def test_what_the_budget_left_no_time_for_is_unverifiable_and_says_so(tmp_path: Path) -> None:
    clock = Clock()
    files = {f"m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(6)}
    source = SlowSource(clock, {"c1": files})
    with MemoryService(SQLiteStore(tmp_path / "b.db"), source) as service:
        ids = [remember(service, path) for path in files]
        source.add_commit("c2", {p: "# moved\n" + text for p, text in files.items()})
        source.refs["HEAD"] = "c2"
        clock.now = 0.0
        with time_budget(2.5, clock=clock) as budget:
            report = service.verify(ids)
        assert budget is not None
        assert budgets.current() is None  # the budget ends with its block
    decisions = [v.decision for v in report.verifications]
    checked = decisions.index(Decision.UNVERIFIED)  # a second a read: 2.5 s go quickly
    assert 1 <= checked < len(ids) - 1
    assert decisions == [Decision.REFRESH] * checked + [Decision.UNVERIFIED] * (6 - checked)
    detail = report.verifications[-1].checks[0].detail
    assert "not checked: this pass's 2.5 s time limit ran out" in detail
    assert budget.reason == "not checked: this pass's 2.5 s time limit ran out"
    with pytest.raises(BudgetSpent):
        budget.check()


def test_a_nested_budget_cannot_extend_the_deadline() -> None:
    clock = Clock()
    with time_budget(5, clock=clock) as outer:
        with time_budget(60, clock=clock) as inner:
            assert inner is outer
        with time_budget(1, clock=clock) as stricter:
            assert stricter is not outer
            assert stricter is not None
            assert stricter.seconds == 1
        assert budgets.current() is outer
    with time_budget(None) as none:
        assert none is None
