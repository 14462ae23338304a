"""Readers survive what writers store: terminal output, and reads under another's lock.

Stored text is printed as text, never parsed as rich markup: a subject with ``[/x]``
cannot crash ``recent``, ``show`` or ``search``, ``app/[slug]/page.tsx`` prints whole,
``[link=...]`` stays text, and control characters (an ANSI escape) are shown as
``<U+...>``. A read-only command whose ``retrieved`` telemetry cannot be written,
because another process holds the SQLite write lock, still answers and exits 0.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.test_cli import vmem
from verified_memory.store import sqlite as sqlite_module

PAGE = "export default function Page({ params }) {\n  return params.slug;\n}\n"
SUBJECT = "[/x] [link=https://evil.example]click[/link] [bold red]loud\x1b[2J"
FACT = "Pages under [slug] read params.slug; [/] closes nothing here."


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    repo = GitRepo.project(tmp_path / "web", {"app/[slug]/page.tsx": PAGE},
                           origin="git@github.com:acme/web.git")
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{tmp_path / 'm.db'}")
    monkeypatch.setenv("COLUMNS", "300")  # tables wide enough not to fold a cell
    return repo


def stored(capsys: pytest.CaptureFixture[str]) -> str:
    code, out, err = vmem(capsys, "store", "--subject", SUBJECT, "--fact", FACT, "--reason",
                          "[red]why[/red]", "--cite", "app/[slug]/page.tsx:1-3", "--json")
    assert code == 0, err
    memory_id: str = json.loads(out)["id"]
    return memory_id


SHOWN_SUBJECT = "[/x] [link=https://evil.example]click[/link] [bold red]loud<U+001B>[2J"


def test_stored_markup_prints_as_text(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    memory_id = stored(capsys)
    for command in (["recent"], ["show", memory_id], ["search", "params"],
                    ["search", "--path", "app/[slug]/page.tsx"], ["history", memory_id]):
        code, out, err = vmem(capsys, *command)
        assert (code, err) == (0, ""), command
        assert SHOWN_SUBJECT in out, command
        assert "\x1b" not in out
    code, out, _ = vmem(capsys, "show", memory_id)
    assert "app/[slug]/page.tsx:1-3" in out
    assert FACT in out
    assert "why: [red]why[/red]" in out
    code, out, _ = vmem(capsys, "verify", "--all")
    assert code == 0
    assert "app/[slug]/page.tsx:1-3" in out


def test_json_shows_control_characters_too(repo: GitRepo,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    memory_id = stored(capsys)
    code, out, _ = vmem(capsys, "show", memory_id, "--json")
    assert code == 0
    assert json.loads(out)["subject"] == SHOWN_SUBJECT


@pytest.fixture
def locked(repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
           capsys: pytest.CaptureFixture[str]) -> str:
    """A stored memory, then another connection holding the write lock."""
    memory_id = stored(capsys)
    monkeypatch.setattr(sqlite_module, "BUSY_TIMEOUT", 0.2)
    other = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    yield memory_id
    other.execute("ROLLBACK")
    other.close()


def test_reads_answer_while_another_process_holds_the_write_lock(
        locked: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
) -> None:
    for command in (["recent"], ["show", locked], ["search", "params"], ["history", locked],
                    ["stats"], ["recent", "--json"]):
        code, out, err = vmem(capsys, *command)
        assert code == 0, (command, err)
        assert "error" not in err
        assert "loud" in out or "memories" in out or "status active" in out
    assert "retrieved event" in caplog.text  # told, not failed
    # A write still reports the lock: that is an error worth an exit code.
    code, _, err = vmem(capsys, "invalidate", locked, "--reason", "gone")
    assert code == 1
    assert err.startswith("vmem: error: ")
    assert "locked" in err
