"""QA findings on ``vmem verify`` and ``vmem citations check`` with real-shaped
repositories: inputs and repositories users actually have (a JSONL file saved with a
byte order mark, a cited symbolic link or submodule, a shallow clone, a repository with
no commits)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import GitRepo, git_env
from verified_memory.cli import main

CODE = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"


def run_check(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
              *args: str, stdin: str) -> tuple[int, list[dict[str, Any]], str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    with pytest.raises(SystemExit) as exit_info:
        main(["citations", "check", *args])
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), [json.loads(line) for line in out.splitlines()], err


def line(id_: str, path: str, sha: str, start: int = 1, end: int = 2) -> str:
    return json.dumps({"id": id_, "path": path, "line_start": start, "line_end": end,
                       "sha": sha})


def test_a_byte_order_mark_on_the_input_is_not_a_bad_first_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows editors and PowerShell save UTF-8 with a BOM: the first citation is read."""
    repo = GitRepo(tmp_path / "r")
    repo.write("a.py", CODE)
    sha = repo.commit("one")
    text = "\ufeff" + line("first", "a.py", sha) + "\r\n" + line("second", "a.py", sha) + "\r\n"
    code, got, err = run_check(capsys, monkeypatch, "--repo", os.fspath(repo.path),
                               stdin=text)
    assert (code, err) == (0, "")
    assert [(g["id"], g.get("status")) for g in got] == [("first", "valid"),
                                                         ("second", "valid")]
    # the same from a file
    path = tmp_path / "in.jsonl"
    path.write_bytes(text.encode("utf-8"))
    code, got, err = run_check(capsys, monkeypatch, "--repo", os.fspath(repo.path),
                               "--input", os.fspath(path), stdin="")
    assert [g.get("status") for g in got] == ["valid", "valid"]


def test_a_cited_symbolic_link_or_submodule_is_named_not_said_missing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``ls link.py`` shows the file, so "does not exist" sends the user looking for a
    typo; the refusal says what the path is."""
    sub = GitRepo(tmp_path / "sub")
    sub.write("lib.py", CODE)
    sub.commit("sub")
    repo = GitRepo(tmp_path / "r")
    repo.write("a.py", CODE)
    os.symlink("a.py", repo.path / "link.py")
    subprocess.run(["git", "-c", "protocol.file.allow=always", "submodule", "add", "-q",
                    os.fspath(sub.path), "vendor"], cwd=repo.path, env=git_env(), check=True,
                   capture_output=True)
    sha = repo.commit("one")
    code, got, _ = run_check(capsys, monkeypatch, "--repo", os.fspath(repo.path), stdin="".join(
        f"{text}\n" for text in (line("link", "link.py", sha), line("sub", "vendor", sha),
                                 line("in-sub", "vendor/lib.py", sha),
                                 line("dir", "vendor2", sha))))
    assert code == 0
    errors = {g["id"]: g["error"] for g in got}
    assert "link.py is a symbolic link" in errors["link"], errors
    assert "vendor is a submodule" in errors["sub"], errors
    assert "vendor/lib.py is in the submodule vendor" in errors["in-sub"], errors
    assert "vendor2 does not exist" in errors["dir"], errors


def test_a_commit_a_shallow_clone_lacks_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """CI checks out one commit (``fetch-depth: 1``): a citation's older commit is not
    there, which is no typo in the sha; the error says what to do."""
    origin = GitRepo(tmp_path / "origin")
    origin.write("a.py", CODE)
    old = origin.commit("one")
    origin.write("a.py", "# header\n" + CODE)
    origin.commit("two")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{origin.path}",
                    os.fspath(clone)], env=git_env(), check=True, capture_output=True)
    code, got, _ = run_check(capsys, monkeypatch, "--repo", os.fspath(clone),
                             stdin=line("old", "a.py", old) + "\n")
    assert code == 0
    assert "shallow clone" in got[0]["error"], got
    assert "--unshallow" in got[0]["error"], got


def test_a_shallow_clone_at_the_tip_says_it_cannot_place_a_memory_not_that_it_is_unmerged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A memory stored at a main-line commit, verified in CI's one-commit checkout: the
    clone cannot tell whether main contains that commit, so it is not judged (no
    verdict from a read it could not make), and it says why: not "stored on a branch
    not merged yet", which sends the user looking for a branch that does not exist."""
    from verified_memory.models import Scope, Status
    from verified_memory.service import MemoryService
    from verified_memory.sources.local_git import LocalGitSource
    from verified_memory.store.sqlite import SQLiteStore

    origin = GitRepo(tmp_path / "origin")
    origin.write("a.py", CODE)
    origin.commit("one")
    db = tmp_path / "m.db"
    with MemoryService(SQLiteStore(db), LocalGitSource(origin.path)) as svc:
        memory = svc.store({"repo": "acme/app", "subject": "b returns two",
                            "fact": "b returns 2.", "citations": [
                                {"path": "a.py", "line_start": 5, "line_end": 6}]})
    origin.write("a.py", "def a():\n    return 1\n")
    origin.commit("two: b is gone")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{origin.path}",
                    os.fspath(clone)], env=git_env(), check=True, capture_output=True)
    with MemoryService(SQLiteStore(db), LocalGitSource(clone)) as svc:
        report = svc.verify(repo="acme/app")
        (seen,) = report.verifications
        assert seen.scope is Scope.UNMERGED  # not judged: still no verdict
        assert seen.reason is not None
        assert "shallow clone" in seen.reason, seen.reason
        assert "does not contain yet" not in seen.reason, seen.reason
        assert svc.memories.get(memory.id).status is Status.ACTIVE
    monkeypatch.chdir(clone)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{db}")
    with pytest.raises(SystemExit):
        main(["verify", "--repo", "acme/app"])
    out, err = capsys.readouterr()
    assert "shallow clone" in out + err
    assert "not merged yet" not in out + err


def test_a_repository_with_no_commits_says_so(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``git init`` and nothing committed: not "ref 'HEAD' does not exist", which reads
    like a typo, but what is missing."""
    empty = tmp_path / "empty"
    subprocess.run(["git", "init", "-q", os.fspath(empty)], check=True, env=git_env())

    code, got, err = run_check(capsys, monkeypatch, "--repo", os.fspath(empty), stdin="")

    assert (code, got) == (1, [])
    assert "no commits yet" in err
    assert err.count("\n") == 1
