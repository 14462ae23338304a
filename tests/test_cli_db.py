"""``vmem db``: migrate, and move memories between SQLite and Postgres as JSONL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from verified_memory.cli import main


def vmem(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    repo = GitRepo.project(tmp_path / "work", {"a.py": "def a():\n    return 1\n"},
                           origin="https://github.com/acme/a.git")
    monkeypatch.chdir(repo.path)
    return repo


def test_sqlite_migrate_export_import_round_trip(repo: GitRepo, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    first, second = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    assert vmem(capsys, "--db", first, "db", "migrate")[1] == "the schema is up to date\n"
    code, out, _ = vmem(capsys, "--db", first, "store", "--subject", "s", "--fact", "f",
                        "--cite", "a.py:1-2", "--json")
    memory_id = json.loads(out)["id"]
    vmem(capsys, "--db", first, "invalidate", memory_id, "--reason", "gone")
    dump = tmp_path / "dump.jsonl"
    code, _, err = vmem(capsys, "--db", first, "db", "export", "-o", str(dump))
    assert code == 0
    assert "exported 1 memories, 2 events and 0 tombstones" in err
    code, out, _ = vmem(capsys, "--db", second, "db", "import", str(dump), "--json")
    assert json.loads(out)["memories"] == 1
    code, out, _ = vmem(capsys, "--db", second, "show", memory_id, "--json")
    moved = json.loads(out)
    assert moved["status"] == "invalid"
    assert moved["invalid_reason"] == "gone"
    # Importing again skips what is there: nothing is duplicated.
    code, out, _ = vmem(capsys, "--db", second, "db", "import", str(dump), "--json")
    assert json.loads(out)["skipped"] == 1
    # A place it cannot write is named as given, not by a temporary file.
    code, _, err = vmem(capsys, "--db", first, "db", "export", "-o",
                        str(tmp_path / "no-such-dir" / "out.jsonl"))
    assert code == 1
    assert err == (f"vmem: error: {tmp_path / 'no-such-dir' / 'out.jsonl'}: "
                   "No such file or directory\n")


def test_an_export_of_a_repository_the_store_has_no_memories_of_says_so(
        repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Before: --repo acme/typo exported nothing, with exit 0 and no word of why.
    url = f"sqlite:///{tmp_path / 'a.db'}"
    vmem(capsys, "--db", url, "store", "--subject", "s", "--fact", "f", "--cite", "a.py:1-2")
    code, out, err = vmem(capsys, "--db", url, "db", "export", "--repo", "acme/typo",
                          "--repo", "acme/a")
    assert code == 0
    assert len(out.splitlines()) == 3  # a header, acme/a's memory and its event
    assert err.splitlines() == [
        "vmem: the store has no memories of acme/typo (it has memories of acme/a)",
        "exported 1 memories, 1 events and 0 tombstones"]


def test_import_of_a_bad_file_names_the_line_and_writes_nothing(
        repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "memory", "id": "x"}\nnot json\n')
    url = f"sqlite:///{tmp_path / 'c.db'}"
    code, _, err = vmem(capsys, "--db", url, "db", "import", str(bad))
    assert code == 1
    assert err.startswith("vmem: error:")
    assert "line" in err
    assert not (tmp_path / "c.db").exists()  # a failed import leaves no empty store behind
    code, _, err = vmem(capsys, "--db", url, "recent", "--json")
    assert code != 0
    assert "c.db" in err


@pytest.mark.postgres
def test_postgres_migrate_is_harmless_to_rerun_and_takes_an_export(
        repo: GitRepo, tmp_path: Path, pg_empty_url: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = vmem(capsys, "--db", pg_empty_url, "db", "migrate", "--json")
    assert code == 0
    assert json.loads(out)["applied"][0].startswith("001")
    code, out, _ = vmem(capsys, "--db", pg_empty_url, "db", "migrate", "--json")
    assert json.loads(out)["applied"] == []
    lite = f"sqlite:///{tmp_path / 'a.db'}"
    code, out, _ = vmem(capsys, "--db", lite, "store", "--subject", "s", "--fact", "f",
                        "--cite", "a.py:1", "--json")
    dump = tmp_path / "dump.jsonl"
    vmem(capsys, "--db", lite, "db", "export", "-o", str(dump))
    code, out, _ = vmem(capsys, "--db", pg_empty_url, "db", "import", str(dump), "--json")
    assert code == 0
    assert json.loads(out)["memories"] == 1
    code, out, _ = vmem(capsys, "--db", pg_empty_url, "recent", "--json")
    assert [m["subject"] for m in json.loads(out)] == ["s"]


def test_import_of_a_hand_edited_file_takes_a_bom_and_names_the_line_of_a_bad_byte(
        repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An export edited by hand: saved with a byte order mark (Windows editors), it is
    read (it was refused as "not JSON"); with a Latin-1 byte typed into a fact far down
    the file, the line is named (the message gave a byte offset counted from wherever
    the decoder's last 8 KB chunk began), and nothing is written."""
    first = f"sqlite:///{tmp_path / 'a.db'}"
    vmem(capsys, "--db", first, "store", "--subject", "s", "--fact", "cafe", "--cite",
         "a.py:1-2")
    dump = tmp_path / "dump.jsonl"
    assert vmem(capsys, "--db", first, "db", "export", "-o", str(dump))[0] == 0
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + dump.read_bytes())
    code, out, err = vmem(capsys, "--db", f"sqlite:///{tmp_path / 'b.db'}", "db", "import",
                          str(bom), "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["memories"] == 1
    header, *rest = dump.read_bytes().splitlines(keepends=True)
    edited = tmp_path / "edited.jsonl"
    edited.write_bytes(header + b"\n" * 10_000
                       + b"".join(rest).replace(b'"fact":"cafe"', b'"fact":"caf\xe9"'))
    code, _, err = vmem(capsys, "--db", f"sqlite:///{tmp_path / 'c.db'}", "db", "import",
                        str(edited))
    assert code == 1
    assert err == ("vmem: error: line 10002: not UTF-8 text (byte 0xe9 at character "
                   f"{rest[0].index(b'cafe') + 4}): save the file as UTF-8\n")
    assert not (tmp_path / "c.db").exists()
