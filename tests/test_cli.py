"""The ``vmem`` command line: behaviour, JSON output, errors and exit codes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import GitRepo
from verified_memory.cli import main

CODE = """\
MAX_RETRIES = 3


def fetch(url):
    for attempt in range(MAX_RETRIES):
        if get(url):
            return True
    return False
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    repo = GitRepo.project(tmp_path / "work", {"net/fetch.py": CODE},
                           origin="git@github.com:acme/net.git")
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    return repo


def vmem(capsys: pytest.CaptureFixture[str], *args: str, stdin: str | None = None,
         monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[int, str, str]:
    if stdin is not None:
        assert monkeypatch is not None
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def vmem_json(capsys: pytest.CaptureFixture[str], *args: str, **kw: Any) -> Any:
    code, out, err = vmem(capsys, *args, "--json", **kw)
    assert code == 0, err
    return json.loads(out)


def store(capsys: pytest.CaptureFixture[str], cite: str = "net/fetch.py:4-8") -> str:
    memory = vmem_json(capsys, "store", "--subject", "Retries", "--fact",
                       "fetch retries MAX_RETRIES times", "--cite", cite, "--tag", "http")
    return str(memory["id"])


def test_store_with_flags_infers_repo_from_origin(repo: GitRepo,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    memory = vmem_json(capsys, "store", "--subject", "Retries", "--fact", "three tries",
                       "--cite", "net/fetch.py:1", "--cite", "net/fetch.py:4-8",
                       "--reason", "flaky network", "--created-by", "agent-7")
    assert memory["repo"] == "acme/net"
    assert [(c["line_start"], c["line_end"]) for c in memory["citations"]] == [(1, 1), (4, 8)]
    assert memory["citations"][0]["sha"] == repo.head
    assert memory["created_by"] == "agent-7"
    code, _, err = vmem(capsys, "store", "--subject", "s", "--fact", "f", "--cite",
                        "net/fetch.py:2-3@HEAD")
    assert code == 1
    assert "net/fetch.py:2-3 holds only blank lines" in err
    pinned = vmem_json(capsys, "store", "--subject", "s", "--fact", "f", "--cite",
                       f"net/fetch.py:4@{repo.head[:8]}")
    assert pinned["citations"][0]["sha"] == repo.head
    code, out, _ = vmem(capsys, "show", memory["id"])
    assert code == 0
    assert "Retries" in out
    assert "net/fetch.py:4-8" in out


def test_cite_names_a_file_whose_name_holds_an_at_sign(
        repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    """--cite's @SHA is what follows the line range: an '@' before it is the file's
    (img/logo@2x.txt:1 was read as the file img/logo at the commit '2x.txt:1')."""
    repo.write("img/logo@2x.txt", "a logo\n")
    head = repo.commit("a file with an @ in its name")
    for cite in ("img/logo@2x.txt:1", f"img/logo@2x.txt:1@{head[:8]}"):
        memory = vmem_json(capsys, "store", "--subject", "Logo", "--fact", "the logo",
                           "--cite", cite)
        assert [(c["path"], c["line_start"], c["sha"]) for c in memory["citations"]] == [
            ("img/logo@2x.txt", 1, head)]


def test_store_reads_a_json_memory_on_stdin(repo: GitRepo, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    payload = {"repo": "acme/net", "subject": "Retries", "fact": "three",
               "citations": [{"path": "net/fetch.py", "line_start": 1, "line_end": 1}],
               "reason": "why", "created_by": "agent"}
    memory = vmem_json(capsys, "store", stdin=json.dumps(payload), monkeypatch=monkeypatch)
    assert memory["subject"] == "Retries"
    assert memory["reason"] == "why"
    # Beside --subject, stdin is not read (it may be a pipe that never ends): said so.
    code, _, err = vmem(capsys, "store", "--subject", "t", stdin=json.dumps(payload),
                        monkeypatch=monkeypatch)
    assert code == 1
    assert err == ("vmem: error: fact is required and must not be empty (stdin was not "
                   "read, as --subject was given: add --input - to merge a JSON memory "
                   "from it)\n")
    # An empty --subject is an empty subject, not "no memory given".
    code, _, err = vmem(capsys, "store", "--subject", "", "--fact", "f", "--cite",
                        "net/fetch.py:1", stdin="", monkeypatch=monkeypatch)
    assert code == 1
    assert "subject must not be empty" in err
    code, _, err = vmem(capsys, "store", stdin="{not json", monkeypatch=monkeypatch)
    assert code == 1
    assert err.startswith("vmem: error: stdin is not valid JSON")


def test_read_commands(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    memory_id = store(capsys)
    assert [m["id"] for m in vmem_json(capsys, "recent")] == [memory_id]
    assert [m["id"] for m in vmem_json(capsys, "search", "retries")] == [memory_id]
    assert vmem_json(capsys, "search", "nothing") == []
    assert [m["id"] for m in vmem_json(capsys, "search", "--path", "net/fetch.py:5")] == [memory_id]
    assert vmem_json(capsys, "search", "--path", "net/fetch.py:1-2") == []
    assert vmem_json(capsys, "show", memory_id)["id"] == memory_id
    code, out, _ = vmem(capsys, "recent")
    assert code == 0
    assert memory_id[:8] in out  # tables show short ids (any unique start is taken back)
    assert memory_id not in out
    assert "Retries" in out
    stats = vmem_json(capsys, "stats")
    assert stats["by_status"]["active"] == 1
    assert stats["events"]["created"] == 1


def test_verify_context_and_lifecycle(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    moved = store(capsys)
    broken = store(capsys, "net/fetch.py:1")
    repo.write("net/fetch.py", "import get\n\n" + CODE.replace("MAX_RETRIES = 3",
                                                                 "MAX_RETRIES = 5"))
    repo.commit("five retries")
    dry = vmem_json(capsys, "verify", "--dry-run")
    assert {m["memory_id"]: m["decision"] for m in dry["memories"]} == {
        moved: "refresh", broken: "invalidate"}
    assert vmem_json(capsys, "show", broken)["status"] == "active"
    code, out, _ = vmem(capsys, "context")
    assert code == 0
    assert moved in out
    assert broken not in out
    assert vmem_json(capsys, "show", broken)["status"] == "invalid"
    assert vmem_json(capsys, "show", moved)["citations"][0]["line_start"] == 6
    code, out, _ = vmem(capsys, "verify")
    assert code == 0
    assert "1 memories checked" in out
    assert vmem_json(capsys, "applied", moved)["applied_count"] == 1
    assert vmem_json(capsys, "refresh", moved)["id"] == moved
    new = vmem_json(capsys, "supersede", moved, "--subject", "Retries (5)", "--fact", "five",
                    "--cite", "net/fetch.py:3")
    assert [m["id"] for m in vmem_json(capsys, "history", new["id"])] == [moved, new["id"]]
    assert vmem_json(capsys, "invalidate", new["id"], "--reason", "gone")["status"] == "invalid"


def test_verify_lists_what_changed_and_all_on_request(
        repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    held = store(capsys, "net/fetch.py:1")
    moved = store(capsys)
    repo.write("net/fetch.py", CODE.replace("def fetch", "# fetching\n\ndef fetch"))
    repo.commit("a comment above fetch")
    code, out, _ = vmem(capsys, "verify", "--dry-run")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "2 citations checked: 1 valid, 1 relocated"
    assert lines[1].split() == ["memory", "decision", "citation", "outcome", "now", "at",
                                "detail"]
    assert lines[2].split()[:5] == [moved[:8], "view:refresh", "net/fetch.py:4-8", "relocated",
                                    "net/fetch.py:6-10"]
    assert held[:8] not in out
    assert "1 valid citations not listed (--all lists every citation)" in out
    code, out, _ = vmem(capsys, "verify", "--dry-run", "--all")
    assert code == 0
    listed = {line.split()[0]: line.split()[3] for line in out.splitlines()[2:4]}
    assert listed == {held[:8]: "valid", moved[:8]: "relocated"}
    assert "not listed" not in out
    report = vmem_json(capsys, "verify", "--dry-run")  # JSON always has every citation
    assert sorted(c["outcome"] for m in report["memories"] for c in m["citations"]) == [
        "relocated", "valid"]
    code, out, _ = vmem(capsys, "verify")  # at the main line's tip: a verdict, stored
    assert code == 0
    assert out.splitlines()[2].split()[:2] == [moved[:8], "refresh"]


def test_worktree_flag(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    memory_id = store(capsys, "net/fetch.py:1")
    (repo.path / "net/fetch.py").write_text(CODE.replace("= 3", "= 4"))
    report = vmem_json(capsys, "verify", "--worktree", "--dry-run")
    assert report["memories"][0]["decision"] == "invalidate"
    assert report["revisions"] == {"acme/net": "worktree"}
    assert vmem_json(capsys, "verify", memory_id)["memories"][0]["decision"] == "refresh"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["store", "--subject", "s", "--fact", "f", "--cite", "net/fetch.py"],
         "--cite net/fetch.py: expected PATH:START-END"),
        (["store", "--subject", "s", "--fact", "f", "--cite", "net/fetch.py:7-99"],
         "past the end of net/fetch.py"),
        (["store", "--subject", "s", "--fact", "f", "--cite", "net/fetch.py:1", "--ref", "nope"],
         "ref 'nope' does not exist"),
        (["show", "00000000-0000-0000-0000-000000000000"], "00000000-0000-0000-0000-000000000000"),
        (["invalidate", "00000000-0000-0000-0000-000000000000", "--reason", "x"], "not"),
        (["recent", "--repo", "nope"], "repo must be 'owner/name'"),
        (["--db", "mysql://x/y", "recent"], "unsupported database URL scheme: mysql://"),
    ],
)
def test_errors_are_one_clear_line(repo: GitRepo, capsys: pytest.CaptureFixture[str],
                                   args: list[str], message: str) -> None:
    assert vmem(capsys, "db", "migrate")[0] == 0  # a store, empty: the errors are the input's
    code, _out, err = vmem(capsys, *args)
    assert code == 1
    assert err.startswith("vmem: error: ")
    assert message in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


@pytest.mark.parametrize("cite", ["net/fetch.py:7-99", "net/gone.py:1", "net/fetch.py:1@nope"])
def test_a_refused_first_memory_leaves_no_empty_store_behind(
        repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str], cite: str) -> None:
    """Storing creates the store; a memory refused for its citations writes nothing, so
    the store it created is not left behind either (the next command would find an
    empty store where the user has none). A store that was there stays."""
    code, _, err = vmem(capsys, "store", "--subject", "s", "--fact", "f", "--cite", cite)
    assert code == 1
    assert err.startswith("vmem: error: ")
    assert not (tmp_path / "cli.db").exists()
    assert vmem(capsys, "db", "migrate")[0] == 0  # now the store is there, empty
    code, _, _ = vmem(capsys, "store", "--subject", "s", "--fact", "f", "--cite", cite)
    assert code == 1
    assert (tmp_path / "cli.db").exists()


def test_no_repo_outside_a_working_copy(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{tmp_path / 'x.db'}")
    code, _, err = vmem(capsys, "recent")
    assert code == 1
    assert "not inside a git working copy: pass --repo owner/name" in err
    code, _, err = vmem(capsys, "store", "--repo", "a/b", "--subject", "s", "--fact", "f",
                        "--cite", "x.py:1")
    assert code == 1
    assert "cannot read the code of a/b" in err


def test_search_by_path_lists_newest_created_first_and_says_so(
        repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    """The table of a file's memories shows the time they are ordered by (created), not
    the refresh time, which after a refresh runs against that order; a QUERY beside
    --path is refused, not silently dropped."""
    older = store(capsys)
    newer = store(capsys, cite="net/fetch.py:1-2")
    assert vmem(capsys, "refresh", older)[0] == 0
    found = vmem_json(capsys, "search", "--path", "net/fetch.py")
    assert [m["id"] for m in found] == [newer, older]
    code, out, _ = vmem(capsys, "search", "--path", "net/fetch.py")
    assert code == 0
    assert "created" in out
    assert "refreshed" not in out
    assert "refreshed" in vmem(capsys, "recent")[1]
    code, _, err = vmem(capsys, "search", "retries", "--path", "net/fetch.py")
    assert code == 2
    assert "give a QUERY or --path, not both" in err


def test_usage_errors_exit_2(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = vmem(capsys, "verify", "--no-such-flag")
    assert code == 2
    assert "No such option" in err
    code, _, err = vmem(capsys, "search")
    assert code == 2
    assert "give a QUERY or --path" in err
    code, _, err = vmem(capsys, "-C", str(repo.path / "no-such-dir"), "recent")
    assert code == 2
    assert "no-such-dir' does not exist" in err
    for command in (["recent"], ["search", "x"], ["context"], ["pending"], ["list"]):
        code, _, err = vmem(capsys, *command, "--limit", "0")
        assert code == 2, command  # every --limit alike: a usage error
        assert "'--limit': 0 is not in the range 1<=x<=10000" in err


def test_an_empty_store_url_is_refused_not_taken_for_the_default(
        repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    for db in ("", "  "):
        code, _, err = vmem(capsys, "--db", db, "store", "--subject", "s", "--fact", "f",
                            "--cite", "net/fetch.py:1")
        assert code == 2
        assert "'--db': is empty (an unset variable?)" in err
    assert not (tmp_path / "data").exists()  # nothing written to the default store
    assert not (tmp_path / "cli.db").exists()  # nor to VMEM_DATABASE_URL's


def test_real_process_has_no_traceback_and_a_clean_exit_code(repo: GitRepo) -> None:
    proc = subprocess.run([sys.executable, "-m", "verified_memory", "show", "missing-id"],
                          capture_output=True, text=True, cwd=repo.path, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("vmem: error:")
    assert "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "verified_memory", "--version"],
                          capture_output=True, text=True, cwd=repo.path, check=False)
    assert proc.returncode == 0
    assert "version" in proc.stdout


def test_unreadable_input_files_are_one_line(repo: GitRepo, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = vmem(capsys, "citations", "check", "--repo", str(repo.path),
                        "--input", str(tmp_path / "missing.jsonl"))
    assert code == 1
    assert err == f"vmem: error: {tmp_path / 'missing.jsonl'}: No such file or directory\n"
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"fact": "f",\n "subject": "caf\xe9"}')
    code, _, err = vmem(capsys, "store", "--input", str(latin))
    assert code == 1
    # the line and character of the byte (a decoder's offset counts from its last chunk)
    assert err == (f"vmem: error: {latin}: line 2: not UTF-8 text (byte 0xe9 at "
                   "character 17): save the file as UTF-8\n")


def test_a_memory_file_saved_with_a_byte_order_mark_is_read(
        repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A memory written by a Windows editor starts with a byte order mark: no content
    (it was refused as "not valid JSON: Unexpected UTF-8 BOM"), as for ``vmem db
    import`` and ``vmem citations check``."""
    memory = tmp_path / "memory.json"
    memory.write_bytes(b"\xef\xbb\xbf" + json.dumps(
        {"subject": "s", "fact": "caf\u00e9",
         "citations": [{"path": "net/fetch.py", "line_start": 1, "line_end": 1}]}).encode())
    code, out, err = vmem(capsys, "store", "--input", str(memory), "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["fact"] == "caf\u00e9"


def test_the_postgres_pools_own_log_lines_stay_off_stderr(repo: GitRepo) -> None:
    """When the server goes away mid-command, the pool logs each connection it drops
    ("discarding closed connection ...") through logging's last-resort handler; the
    user gets our one line instead."""
    script = ("import logging\n"
              "from verified_memory.cli import main\n"
              "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
              "logging.getLogger('psycopg.pool').warning('discarding closed connection')\n"
              "logging.getLogger('other').warning('other libraries still speak')\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=repo.path, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "other libraries still speak\n"


# --------------------------------------------------------------------------- --path

#: Files whose names hold ':' and '@', and one ending in ':DIGITS' (a line range's look).
ODD_NAMES = {"docs/a:b.md": "one\ntwo\nthree\n", "net/v:2": "VERSION = 2\n",
             "img/logo@2x.txt": "a logo\n"}


@pytest.fixture
def odd_repo(repo: GitRepo) -> GitRepo:
    for path, text in ODD_NAMES.items():
        repo.write(path, text)
    repo.commit("files with odd names")
    return repo


def ids(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    return [m["id"] for m in vmem_json(capsys, *args)]


def usage_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The one error line of a usage error (exit 2, nothing on stdout, no traceback)."""
    code, out, err = vmem(capsys, *args)
    assert (code, out) == (2, ""), err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, err
    return errors[0]


def test_path_names_a_file_whose_name_holds_a_colon(
        odd_repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    """--path docs/a:b.md names that file (it was read as lines 'b.md' and refused); a
    file of the whole name wins over a line range (net/v:2 is the file, not line 2 of
    net/v); a range that parses as one is still one."""
    colon = store(capsys, "docs/a:b.md:1-2")
    digits = store(capsys, "net/v:2:1")
    fetch = store(capsys)
    for command in ("search", "list"):
        assert ids(capsys, command, "--path", "docs/a:b.md") == [colon], command
        assert ids(capsys, command, "--path", "net/v:2") == [digits], command
    assert ids(capsys, "search", "--path", "docs/a:b.md:2") == [colon]
    assert ids(capsys, "search", "--path", "docs/a:b.md:3") == []
    assert ids(capsys, "search", "--path", "net/v:2:1") == [digits]
    assert ids(capsys, "search", "--path", "net/fetch.py:5-6") == [fetch]
    # No such file, and ':b.md' is no line range: the whole value names the file.
    assert ids(capsys, "search", "--path", "docs/gone:b.md") == []
    code, out, _ = vmem(capsys, "search", "--help")
    assert code == 0
    assert "A file of the whole name in the working copy is taken as it is" in " ".join(
        out.split())


def test_path_refuses_a_commit_it_would_drop(
        odd_repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    """--path FILE@COMMIT was searched as a file named so (nothing found) or, after a
    line range, dropped: refused in one line. An '@' in a file's name is no commit."""
    logo = store(capsys, "img/logo@2x.txt:1")
    fetch = store(capsys)
    head = odd_repo.head[:8]
    assert usage_error(capsys, "search", "--path", f"net/fetch.py@{head}") == (
        f"Error: Invalid value for '--path': 'net/fetch.py@{head}' names a commit: memories "
        "are found by the file they cite, at any commit; give net/fetch.py")
    assert f"'net/fetch.py:5@{head}' names a commit" in usage_error(
        capsys, "search", "--path", f"net/fetch.py:5@{head}")
    assert "'net/fetch.py@HEAD' names a commit" in usage_error(
        capsys, "list", "--path", "net/fetch.py@HEAD")
    for command in ("search", "list"):
        assert ids(capsys, command, "--path", "img/logo@2x.txt") == [logo], command
        assert ids(capsys, command, "--path", "net/fetch.py") == [fetch], command
    assert ids(capsys, "search", "--path", "pkg/@scope/mod.py") == []  # a folder's '@'


def test_path_names_a_deleted_file_memories_cite_as_it_is(
        odd_repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    """A file deleted since (gone from the working copy) whose name holds an '@' or ends
    in ':DIGITS' could not be named: its '@2x.txt' was refused as a commit, its ':2' read
    as line 2 of net/v. A whole name memories cite (of any status) is taken as it is;
    one no memory cites is read as before."""
    logo = store(capsys, "img/logo@2x.txt:1")
    digits = store(capsys, "net/v:2:1")
    for path in ("img/logo@2x.txt", "net/v:2"):
        odd_repo.remove(path)
    odd_repo.commit("the odd files deleted")
    assert ids(capsys, "search", "--path", "img/logo@2x.txt") == [logo]
    assert ids(capsys, "search", "--path", "net/v:2") == [digits]
    assert ids(capsys, "search", "--path", "net/v:2:1") == [digits]  # lines of it
    vmem_json(capsys, "verify")  # the files are gone: their memories are invalid now
    assert ids(capsys, "list", "--path", "img/logo@2x.txt", "--status", "invalid") == [logo]
    assert ids(capsys, "list", "--path", "net/v:2") == [digits]
    assert ids(capsys, "search", "--path", "img/logo@2x.txt") == []  # only active ones
    head = odd_repo.head[:8]
    assert f"'net/fetch.py@{head}' names a commit" in usage_error(
        capsys, "search", "--path", f"net/fetch.py@{head}")
    assert "'net/v:3' names lines" in usage_error(capsys, "list", "--path", "net/v:3")


def test_search_by_path_honours_safe(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    """--safe leaves out POISON_PATH and PHANTOM_PATTERN memories from a file's memories
    too (it was ignored beside --path), before the limit, and none is handed out."""
    clean = store(capsys)
    bad = [vmem_json(capsys, "store", "--subject", f"Bad {tag}", "--fact", f"retry {tag}",
                     "--cite", "net/fetch.py:1-2", "--tag", tag)["id"]
           for tag in ("POISON_PATH", "phantom_pattern")]
    assert ids(capsys, "search", "--path", "net/fetch.py", "--safe") == [clean]
    assert ids(capsys, "search", "--path", "net/fetch.py:1", "--safe", "--limit", "1") == []
    assert ids(capsys, "search", "--path", "net/fetch.py", "--safe", "--limit", "1") == [clean]
    for memory_id in bad:
        kinds = [e["kind"] for e in vmem_json(capsys, "log", memory_id, "--reads")]
        assert "retrieved" not in kinds
    assert ids(capsys, "search", "--path", "net/fetch.py") == [*reversed(bad), clean]


def test_path_mistakes_are_usage_errors_naming_the_option(
        repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    """Each was a different label ('--path net/fetch.py:0.line_start', 'path') and exit
    1, or (vmem list) no error at all: now click's usage error naming '--path'."""
    store(capsys)
    said = {
        ("search", "net/fetch.py:0"): "'net/fetch.py:0': line numbers start at 1",
        ("search", "net/fetch.py:5-3"): "'net/fetch.py:5-3': line 3 is before line 5",
        ("search", "../fetch.py"):
            "the file must stay inside the repository ('..' found): '../fetch.py'",
        ("list", "./../fetch.py"):
            "the file must stay inside the repository ('..' found): './../fetch.py'",
        ("list", "net/fetch.py:1-2"): "'net/fetch.py:1-2' names lines, and vmem list lists "
                                      "the memories citing a whole file: give net/fetch.py",
    }
    for (command, value), message in said.items():
        assert usage_error(capsys, command, "--path", value) == (
            f"Error: Invalid value for '--path': {message}"), (command, value)


def test_an_empty_directory_leaves_the_command_where_it_was_started(
        repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    """``-C ""`` runs where vmem was started, as git's ``-C ""`` does: the wired hooks pass
    ``-C "$CLAUDE_PROJECT_DIR"``, which a client may leave unset. It was refused (exit 2,
    "Directory '' does not exist") at every event."""
    memory = store(capsys)
    for args in ((), ("-C", "")):
        here = vmem_json(capsys, *args, "context")
        assert (here["repo"], [m["id"] for m in here["memories"]]) == ("acme/net", [memory])


def test_vmem_truth_ref_wins_over_git_config(repo: GitRepo, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's precedence: when both name the main line, the variable wins."""
    store(capsys)
    branch = repo.run("branch", "--show-current").strip()
    repo.run("config", "vmem.truthRef", "no-such-branch")
    code, _, err = vmem(capsys, "context")
    assert code == 0, err
    assert "the main line could not be told" in err
    assert "no-such-branch" in err
    monkeypatch.setenv("VMEM_TRUTH_REF", branch)
    code, _, err = vmem(capsys, "context")
    assert code == 0, err
    assert f"is the tip of {branch}: verdicts are applied" in err


def test_a_memory_id_is_read_without_the_spaces_around_it(
        repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    """An id pasted with a space or a newline around it was "not found"."""
    memory_id = store(capsys)
    assert vmem_json(capsys, "show", f" {memory_id}\n")["id"] == memory_id
    assert vmem_json(capsys, "refresh", f"  {memory_id[:8]} ")["id"] == memory_id
    assert [m["id"] for m in vmem_json(capsys, "history", f"{memory_id} ")] == [memory_id]


def test_a_bad_time_limit_variable_stops_only_the_passes_that_use_it(
        repo: GitRepo, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Both variables were read by every command, so a bad one stopped all of them, even
    one that --time-limit overrode or the other kind of pass never uses."""
    memory = store(capsys)
    monkeypatch.setenv("VMEM_CONTEXT_TIME_LIMIT", "abc")
    here = vmem_json(capsys, "--time-limit", "3", "context")
    assert [m["id"] for m in here["memories"]] == [memory]
    assert vmem_json(capsys, "verify")["memories"][0]["memory_id"] == memory
    assert vmem_json(capsys, "show", memory)["id"] == memory
    code, out, err = vmem(capsys, "context")  # the one it uses is refused, as before
    assert (code, out) == (1, "")
    assert err == ("vmem: error: VMEM_CONTEXT_TIME_LIMIT must be a number of seconds above "
                   "0 and at most 86400, got 'abc'\n")
    monkeypatch.setenv("VMEM_CONTEXT_TIME_LIMIT", "5")
    monkeypatch.setenv("VMEM_VERIFY_TIME_LIMIT", "-1")
    assert [m["id"] for m in vmem_json(capsys, "context")["memories"]] == [memory]
    code, out, err = vmem(capsys, "verify")
    assert (code, out) == (1, "")
    assert err.startswith("vmem: error: VMEM_VERIFY_TIME_LIMIT must be ")
    assert err.count("\n") == 1, err
