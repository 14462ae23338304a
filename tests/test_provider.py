"""VerifiedMemoryProvider (verified_memory/provider.py) and the two agent examples in
examples/agents/, run as a user would run them: real git repositories, real SQLite, and
for the MCP one a real `vmem mcp` over stdio."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.test_docs import NET
from verified_memory import (
    EventKind,
    LocalGitSource,
    MemoryService,
    Status,
    ValidationError,
    VerifiedMemoryProvider,
)
from verified_memory.store.sqlite import SQLiteStore

ROOT = Path(__file__).parent.parent


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo.project(tmp_path / "app", {"app/net.py": NET},
                             origin="https://github.com/acme/app.git")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def provider(repo: GitRepo, db: Path) -> Iterator[VerifiedMemoryProvider]:
    with VerifiedMemoryProvider.open(repo.path, db=f"sqlite:///{db}", agent="tester") as p:
        yield p


def events(db: Path, repo: GitRepo, memory_id: str) -> list[EventKind]:
    with MemoryService(SQLiteStore(db), LocalGitSource(repo.path)) as service:
        return [e.kind for e in service.memories.events(memory_id=memory_id)]


def test_remember_context_feedback(provider: VerifiedMemoryProvider, repo: GitRepo,
                                   db: Path) -> None:
    retry = provider.remember("Retry budget", "HTTP calls retry MAX_RETRIES times.",
                              ["app/net.py:1-1", {"path": "app/net.py", "line_start": 5,
                                                  "line_end": 8}], tags=["http"]).memory
    timeout = provider.remember("Timeout", "Requests time out after TIMEOUT seconds.",
                                ["app/net.py:2"]).memory
    assert retry.created_by == "tester"
    assert [(c.path, c.line_start, c.line_end) for c in retry.citations] == [
        ("app/net.py", 1, 1), ("app/net.py", 5, 8)]
    context = provider.context_for("lower the request timeout")
    assert context.ids[0] == timeout.id  # what the task is about comes first
    assert set(context.ids) == {timeout.id, retry.id}  # then the recent ones
    assert str(context) == context.text
    assert "Requests time out after TIMEOUT seconds." in context.text
    provider.feedback(timeout.id, success=False, note="TIMEOUT is read from env now",
                      task="timeout")
    kinds = events(db, repo, timeout.id)
    assert EventKind.APPLIED in kinds
    assert EventKind.FEEDBACK in kinds


def test_only_what_holds_is_shown(provider: VerifiedMemoryProvider, repo: GitRepo,
                                  db: Path) -> None:
    kept = provider.remember("Retry budget", "HTTP calls retry MAX_RETRIES times.",
                             ["app/net.py:1"])
    broken = provider.remember("Timeout", "Requests time out after TIMEOUT seconds.",
                               ["app/net.py:2"])
    repo.write("app/net.py", NET.replace("TIMEOUT = 10", "TIMEOUT = 30"))
    repo.commit("timeout")
    context = provider.context_for("timeout and retries")
    assert context.ids == [kept.id]
    assert [v.memory.id for v in context.left_out] == [broken.id]
    assert "Requests time out" not in context.text
    # On the main line's tip the check is a verdict: the broken memory is retired.
    with MemoryService(SQLiteStore(db), LocalGitSource(repo.path)) as service:
        assert service.memories.get(broken.id).status is Status.INVALID


def test_bad_input_is_refused_and_nothing_is_stored(provider: VerifiedMemoryProvider,
                                                    repo: GitRepo, tmp_path: Path) -> None:
    for citations, message in ((["app/net.py"], "expected 'path:START-END'"),
                               (["app/gone.py:1"], "does not exist"),
                               ([42], "a citation is 'path:START-END' or a mapping"),
                               (["app/net.py:x-2"], "line_start")):
        with pytest.raises(ValidationError, match=message):
            provider.remember("S", "F", citations)  # type: ignore[list-item]
    assert provider.context_for("anything").memories == ()
    with pytest.raises(ValidationError, match="not inside a git working copy"):
        VerifiedMemoryProvider.open(tmp_path)
    repo.run("remote", "remove", "origin")
    with pytest.raises(ValidationError, match="has no origin remote"):
        VerifiedMemoryProvider.open(repo.path, db=f"sqlite:///{tmp_path / 'x.db'}")


def run_example(name: str, repo: GitRepo, db: Path, *args: str) -> str:
    env = dict(os.environ, VMEM_DATABASE_URL=f"sqlite:///{db}",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "agents" / name),
                           str(repo.path), *args], capture_output=True, text=True, env=env,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_python_api_example_runs(repo: GitRepo, db: Path) -> None:
    out = run_example("python_api.py", repo, db)
    stored = out.splitlines()[0].removeprefix("stored ")
    assert "1 verified, 0 left out" in out
    assert f"memory `{stored}` (full)" in out
    assert out.endswith("feedback recorded for 1 memories\n")
    assert {EventKind.CREATED, EventKind.APPLIED, EventKind.FEEDBACK} <= set(
        events(db, repo, stored))


def test_the_mcp_client_example_runs(repo: GitRepo, db: Path) -> None:
    out = run_example("mcp_client.py", repo, db, "--vmem", str(Path(sys.executable).parent
                                                                / "vmem"))
    stored = out.splitlines()[0].removeprefix("stored ")
    assert "1 verified" in out
    assert "Requests time out after TIMEOUT seconds." in out
    assert out.endswith("feedback recorded for 1 memories\n")
    kinds = events(db, repo, stored)
    assert {EventKind.CREATED, EventKind.APPLIED, EventKind.FEEDBACK} <= set(kinds)
    with MemoryService(SQLiteStore(db), LocalGitSource(repo.path)) as service:
        assert service.memories.get(stored).created_by == "mcp-agent"
