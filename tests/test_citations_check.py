"""``vmem citations check``: bulk checks of citations made at old commits, end to end.

One JSON line in per citation (``{id, path, line_start, line_end, sha}``), one JSON line
out per input line, in input order: ``{id, status, path, line_start, line_end,
similarity}`` with the code's current place, or ``{id, error}`` for a bad input, which
does not stop the run. ``--repo`` takes a working copy or a bare repository; ``--input``
a file or ``-`` (stdin).
"""

from __future__ import annotations

import gc
import io
import json
import os
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import GitRepo
from verified_memory.anchors.treesitter import DefinitionIndex
from verified_memory.cli import main
from verified_memory.sources.local_git import LocalGitSource
from verified_memory.verify import bulk
from verified_memory.verify.anchored import AnchorLocator
from verified_memory.verify.bulk import check_citations

KEYS = ["id", "status", "path", "line_start", "line_end", "similarity"]


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


RATES = src('''
    """Exchange rates."""

    from decimal import Decimal


    def convert(amount, rate):
        value = Decimal(amount) * Decimal(rate)
        return value.quantize(Decimal("0.01"))


    def invert(rate):
        if not rate:
            raise ZeroDivisionError("rate is zero")
        return Decimal(1) / Decimal(rate)
''')

QUEUE_GO = src('''
    package queue

    type Queue struct {
    \titems []string
    }

    func (q *Queue) Push(item string) {
    \tq.items = append(q.items, item)
    }

    func (q *Queue) Pop() (string, bool) {
    \tif len(q.items) == 0 {
    \t\treturn "", false
    \t}
    \titem := q.items[0]
    \tq.items = q.items[1:]
    \treturn item, true
    }
''')

README = "# ledger\n\nSmall tools for money.\n"


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """Two commits: the citations are made at the first; at the second ``convert``
    moved down (lines inserted above), ``Queue.Pop`` was edited, ``invert`` deleted
    and ``Queue.Push`` moved to a new file."""
    repo = GitRepo(tmp_path / "ledger")
    repo.write("ledger/rates.py", RATES)
    repo.write("queue/queue.go", QUEUE_GO)
    repo.write("README.md", README)
    repo.commit("initial")
    repo.run("tag", "v1")
    rates = RATES.replace("from decimal import Decimal\n",
                          "from decimal import Decimal\n\nPRECISION = 2\nROUNDING = None\n")
    repo.write("ledger/rates.py", rates[:rates.index("\n\ndef invert")] + "\n")
    push = "func (q *Queue) Push(item string) {\n\tq.items = append(q.items, item)\n}\n"
    repo.write("queue/queue.go", QUEUE_GO.replace(push + "\n", "").replace(
        "q.items = q.items[1:]", "q.items = append(q.items[:0], q.items[1:]...)"))
    repo.write("queue/push.go", "package queue\n\n" + push)
    repo.commit("refactor")
    return repo


def first(repo: GitRepo) -> str:
    return repo.run("rev-parse", "v1")


def citations(repo: GitRepo) -> list[dict[str, Any]]:
    sha = first(repo)
    return [
        {"id": "convert", "path": "ledger/rates.py", "line_start": 6, "line_end": 8, "sha": sha},
        {"id": "readme", "path": "README.md", "line_start": 1, "line_end": 3, "sha": sha},
        {"id": "pop", "path": "queue/queue.go", "line_start": 11, "line_end": 18, "sha": sha},
        {"id": "invert", "path": "ledger/rates.py", "line_start": 11, "line_end": 14,
         "sha": sha[:12]},
        {"id": "push", "path": "queue/queue.go", "line_start": 7, "line_end": 9, "sha": "v1"},
    ]


def expected() -> list[dict[str, Any]]:
    return [
        {"id": "convert", "status": "relocated", "path": "ledger/rates.py",
         "line_start": 9, "line_end": 11, "similarity": 1.0},
        {"id": "readme", "status": "valid", "path": "README.md",
         "line_start": 1, "line_end": 3, "similarity": 1.0},
        {"id": "pop", "status": "changed", "path": "queue/queue.go",
         "line_start": 7, "line_end": 14, "similarity": pytest.approx(0.9, abs=0.099)},
        {"id": "invert", "status": "missing", "path": "ledger/rates.py",
         "line_start": None, "line_end": None, "similarity": 0.0},
        {"id": "push", "status": "relocated", "path": "queue/push.go",
         "line_start": 3, "line_end": 5, "similarity": 1.0},
    ]


def jsonl(items: list[Any]) -> str:
    return "".join((item if isinstance(item, str) else json.dumps(item)) + "\n"
                   for item in items)


def run_cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
            *args: str, stdin: str | None = None) -> tuple[int, list[dict[str, Any]], str]:
    """``vmem citations check ...`` in-process: exit code, parsed stdout lines, stderr."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    with pytest.raises(SystemExit) as exit_info:
        main(["citations", "check", *args])
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), [json.loads(line) for line in out.splitlines()], err


def assert_results(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert got == want
    for line in got:
        assert list(line) == (KEYS if "status" in line else ["id", "error"])


# ----------------------------------------------------------------------------- happy path


def test_end_to_end_in_a_subprocess_from_a_file(repo: GitRepo, tmp_path: Path) -> None:
    input_file = tmp_path / "citations.jsonl"
    input_file.write_text(jsonl(citations(repo)), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "verified_memory", "citations", "check", "--repo",
         os.fspath(repo.path), "--ref", "HEAD", "--input", os.fspath(input_file), "--json"],
        capture_output=True, text=True, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert_results([json.loads(line) for line in proc.stdout.splitlines()], expected())


def _until_read(fd: int, timeout: float = 60.0) -> None:
    """Wait until the pipe ``fd`` writes into has been read empty."""
    import fcntl
    import termios
    import time

    deadline = time.monotonic() + timeout
    unread = bytearray(4)
    while time.monotonic() < deadline:
        fcntl.ioctl(fd, termios.FIONREAD, unread)
        if not int.from_bytes(unread, sys.byteorder):
            return
        time.sleep(0.01)
    raise AssertionError("the command did not read its input")


def _run_on_a_terminal(repo: GitRepo, tmp_path: Path, lines: list[str],
                       stdout_on_terminal: bool) -> tuple[str, str]:
    """The command with stderr (and stdout, when asked) on a pseudo-terminal, its input
    written a line at a time with pauses (a run that takes a while); (stdout, stderr)."""
    import pty
    import select
    import time

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "verified_memory", "citations", "check", "--repo",
         os.fspath(repo.path), "--jobs", "1"],
        stdin=subprocess.PIPE, stdout=follower if stdout_on_terminal else subprocess.PIPE,
        stderr=follower, cwd=tmp_path, env={**os.environ, "COLUMNS": "100"})
    os.close(follower)
    assert proc.stdin is not None
    for line in lines:
        proc.stdin.write(line.encode() + b"\n")
        proc.stdin.flush()
        # the line read (on a loaded machine the command may still be starting, and
        # would then read every line at once), then past PROGRESS_AFTER: the bar is
        # drawn after the next answer
        _until_read(proc.stdin.fileno())
        time.sleep(0.5)
    proc.stdin.close()
    terminal = b""
    while True:  # read the terminal until the command is done with it
        ready, _, _ = select.select([leader], [], [], 30)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the command exited: the terminal closed
            break
        if not chunk:
            break
        terminal += chunk
    out = b""
    if proc.stdout is not None:
        out = proc.stdout.read()
        proc.stdout.close()
    assert proc.wait(timeout=30) == 0
    os.close(leader)
    return out.decode(), terminal.decode(errors="replace")


def test_a_long_run_sent_to_a_file_counts_on_the_terminal(repo: GitRepo,
                                                          tmp_path: Path) -> None:
    """stdout to a pipe (a file), stderr on a terminal: a count of the citations checked
    is drawn on stderr, and stdout holds the answers alone."""
    lines = jsonl(citations(repo)).splitlines()[:3]
    out, terminal = _run_on_a_terminal(repo, tmp_path, lines, stdout_on_terminal=False)

    assert [json.loads(line)["id"] for line in out.splitlines()] == [
        json.loads(line)["id"] for line in lines]
    assert "citations checked: 2" in terminal or "citations checked: 3" in terminal, terminal
    assert "{" not in terminal  # no answer went to the terminal


def test_answers_on_a_terminal_are_their_own_progress(repo: GitRepo, tmp_path: Path) -> None:
    lines = jsonl(citations(repo)).splitlines()[:3]
    _, terminal = _run_on_a_terminal(repo, tmp_path, lines, stdout_on_terminal=True)

    assert terminal.count('{"id"') == 3
    assert "citations checked" not in terminal


def test_stdin_input(repo: GitRepo, capsys: pytest.CaptureFixture[str],
                     monkeypatch: pytest.MonkeyPatch) -> None:
    code, got, err = run_cli(capsys, monkeypatch, "--repo", os.fspath(repo.path),
                             "--input", "-", "--json", stdin=jsonl(citations(repo)))
    assert (code, err) == (0, "")
    assert_results(got, expected())


def test_stdin_is_the_default_input_and_head_the_default_ref(
        repo: GitRepo, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    code, got, _ = run_cli(capsys, monkeypatch, "--repo", os.fspath(repo.path),
                           stdin=jsonl(citations(repo)))
    assert code == 0
    assert_results(got, expected())


def test_bare_repository(repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                         monkeypatch: pytest.MonkeyPatch) -> None:
    bare = tmp_path / "ledger.git"
    repo.run("clone", "-q", "--bare", os.fspath(repo.path), os.fspath(bare))
    assert (bare / "HEAD").is_file()
    assert not (bare / ".git").exists()
    input_file = tmp_path / "in.jsonl"
    input_file.write_text(jsonl(citations(repo)), encoding="utf-8")
    code, got, err = run_cli(capsys, monkeypatch, "--repo", os.fspath(bare), "--ref", "main",
                             "--input", os.fspath(input_file), "--json")
    assert (code, err) == (0, "")
    assert_results(got, expected())


def test_the_ref_decides_what_current_means(repo: GitRepo,
                                            capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Checked at the commit they were made at, every citation is valid where it was."""
    code, got, _ = run_cli(capsys, monkeypatch, "--repo", os.fspath(repo.path), "--ref", "v1",
                           "--json", stdin=jsonl(citations(repo)))
    assert code == 0
    assert_results(got, [
        {"id": c["id"], "status": "valid", "path": c["path"], "line_start": c["line_start"],
         "line_end": c["line_end"], "similarity": 1.0} for c in citations(repo)])


def test_worktree_edits_are_not_what_is_checked(repo: GitRepo,
                                                capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The check reads commits, not the files on disk: uncommitted edits do not count."""
    repo.write("README.md", "# rewritten\n")
    code, got, _ = run_cli(capsys, monkeypatch, "--repo", os.fspath(repo.path), "--json",
                           stdin=jsonl(citations(repo)))
    assert code == 0
    assert_results(got, expected())


# ------------------------------------------------------------------------------ bad input


def test_bad_lines_get_an_error_each_and_do_not_stop_the_run(
        repo: GitRepo, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    sha = first(repo)
    good = citations(repo)
    lines: list[Any] = [
        good[0],
        "{not json",
        {"id": "no-path", "line_start": 1, "line_end": 2, "sha": sha},
        {"id": "no-sha", "path": "README.md", "line_start": 1, "line_end": 1},
        {"id": "unknown-sha", "path": "README.md", "line_start": 1, "line_end": 1,
         "sha": "0" * 40},
        {"id": "no-file", "path": "ledger/missing.py", "line_start": 1, "line_end": 1,
         "sha": sha},
        {"id": "past-end", "path": "README.md", "line_start": 2, "line_end": 40, "sha": sha},
        {"id": "backwards", "path": "README.md", "line_start": 3, "line_end": 2, "sha": sha},
        {"id": "blank-only", "path": "README.md", "line_start": 2, "line_end": 2, "sha": sha},
        {"id": "bad-line", "path": "README.md", "line_start": "first", "line_end": 2,
         "sha": sha},
        "[1, 2, 3]",
        "",
        {"id": None, "path": "README.md", "line_start": 1, "line_end": 1},  # named by line
        good[4],
    ]
    code, got, err = run_cli(capsys, monkeypatch, "--repo", os.fspath(repo.path), "--json",
                             stdin=jsonl(lines))
    assert (code, err) == (0, "")
    assert [line["id"] for line in got] == [
        "convert", "line 2", "no-path", "no-sha", "unknown-sha", "no-file", "past-end",
        "backwards", "blank-only", "bad-line", "line 11", "line 13", "push"]
    assert got[0] == expected()[0]
    assert got[-1] == expected()[4]
    errors = {line["id"]: line["error"] for line in got[1:-1]}
    assert set(errors) == {line["id"] for line in got[1:-1]}  # every bad line: an error
    assert "not valid JSON" in errors["line 2"]
    assert "path is required" in errors["no-path"]
    assert "sha" in errors["no-sha"]
    assert "0" * 40 in errors["unknown-sha"]
    assert "ledger/missing.py does not exist" in errors["no-file"]
    assert "past the end" in errors["past-end"]
    assert "3 lines" in errors["past-end"]
    assert "before line_start" in errors["backwards"]
    assert "blank" in errors["blank-only"]
    assert "line_start" in errors["bad-line"]
    assert "not a JSON object" in errors["line 11"]
    assert "sha" in errors["line 13"]
    assert_results(got, got)  # keys: exactly the result keys, or exactly id + error


def test_a_byte_that_is_not_utf8_is_an_error_of_its_line(
        repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A file saved in Latin-1 by hand: the line with the stray byte gets its error,
    named by line and character, and the other lines their answers."""
    good = citations(repo)
    bad = json.dumps({**good[1], "id": "caf\u00e9"}).encode().replace(b"\\u00e9", b"\xe9")
    input_file = tmp_path / "in.jsonl"
    input_file.write_bytes(b"\xef\xbb\xbf" + jsonl([good[0]]).encode() + bad + b"\n"
                           + jsonl([good[4]]).encode())
    code, got, err = run_cli(capsys, monkeypatch, "--repo", os.fspath(repo.path),
                             "--input", os.fspath(input_file))
    assert (code, err) == (0, "")
    assert got == [expected()[0], {"id": "line 2", "error": "line 2: not UTF-8 text (byte "
                                   "0xe9 at character 12): save the file as UTF-8"},
                   expected()[4]]


def test_unknown_ref_is_one_clear_error_and_exit_1(repo: GitRepo,
                                                   capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    code, got, err = run_cli(capsys, monkeypatch, "--repo", os.fspath(repo.path),
                             "--ref", "no-such-branch", "--json",
                             stdin=jsonl(citations(repo)))
    assert code == 1
    assert got == []
    assert len(err.strip().splitlines()) == 1
    assert "no-such-branch" in err
    assert "does not exist" in err


def test_unknown_ref_fails_even_with_no_input(repo: GitRepo,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    code, got, err = run_cli(capsys, monkeypatch, "--repo", os.fspath(repo.path),
                             "--ref", "no-such-branch", stdin="")
    assert (code, got) == (1, [])
    assert "no-such-branch" in err


def test_unknown_ref_in_a_subprocess(repo: GitRepo, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "verified_memory", "citations", "check", "--repo",
         os.fspath(repo.path), "--ref", "v9", "--input", "-", "--json"],
        input=jsonl(citations(repo)), capture_output=True, text=True, check=False,
        cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    assert "v9" in proc.stderr


def test_a_directory_that_is_not_a_repository(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    code, got, err = run_cli(capsys, monkeypatch, "--repo", os.fspath(plain), stdin="")
    assert (code, got) == (1, [])
    assert "not a git repository" in err


def test_empty_input_gives_empty_output(repo: GitRepo, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_cli(capsys, monkeypatch, "--repo", os.fspath(repo.path), stdin="\n\n") == (
        0, [], "")


def test_many_citations_keep_input_order(repo: GitRepo, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    many = [dict(c, id=f"{c['id']}-{i}") for i in range(40) for c in citations(repo)]
    code, got, _ = run_cli(capsys, monkeypatch, "--repo", os.fspath(repo.path),
                           stdin=jsonl(many))
    assert code == 0
    assert [line["id"] for line in got] == [c["id"] for c in many]
    want = expected()
    for i, line in enumerate(got):
        assert line == dict(want[i % len(want)], id=many[i]["id"])


# ----------------------------------------------------------------------------- cost


def library_check(repo: GitRepo, items: list[dict[str, Any]], locator: AnchorLocator,
                  monkeypatch: pytest.MonkeyPatch | None = None,
                  resolved: list[str] | None = None) -> list[dict[str, Any]]:
    """``check_citations`` itself, with this locator; ``resolved`` collects every ref
    the source was asked to resolve."""
    with LocalGitSource(repo.path) as source:
        if monkeypatch is not None and resolved is not None:
            real = source.resolve
            monkeypatch.setattr(source, "resolve",
                                lambda ref: resolved.append(ref) or real(ref))
        return [r.to_dict() for r in check_citations(source, [(c["id"], c) for c in items],
                                                     "HEAD", locator=locator)]


def test_the_garbage_collector_rests_from_the_first_answer_to_the_last(
        repo: GitRepo) -> None:
    """Paused while the answers are made and taken (a pause per citation would only
    move the collections between them), back on once the last is taken or the
    iterator is closed early; a caller that paused it finds it paused after."""
    items = [(c["id"], c) for c in citations(repo)]
    with LocalGitSource(repo.path) as source:
        assert gc.isenabled()
        seen = [(answer.status, gc.isenabled()) for answer in check_citations(
            source, items, "HEAD")]
        assert [status for status, _ in seen] == [r["status"] for r in expected()]
        assert not any(enabled for _, enabled in seen)
        assert gc.isenabled()

        answers = check_citations(source, items, "HEAD")
        next(answers)
        assert not gc.isenabled()
        answers.close()  # a caller that stops early
        assert gc.isenabled()

        gc.disable()
        try:
            assert len(list(check_citations(source, items, "HEAD"))) == len(items)
            assert not gc.isenabled()
        finally:
            gc.enable()


def test_the_runs_caches_are_freed_before_the_collector_resumes(
        repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    """Everything made while the collector rested is young: the verifier and its caches
    are let go first, so the collection that follows does not walk them all."""
    from verified_memory.verify import bulk

    freed: list[bool] = []  # whether the collector was on when the verifier was freed
    real = bulk.Verifier

    def spy(*args: Any, **kwargs: Any) -> Any:
        made = real(*args, **kwargs)
        weakref.finalize(made, lambda: freed.append(gc.isenabled()))
        return made

    monkeypatch.setattr(bulk, "Verifier", spy)
    items = [(c["id"], c) for c in citations(repo)]
    with LocalGitSource(repo.path) as source:
        answers = [answer.status for answer in check_citations(source, items, "HEAD")]
    assert answers == [r["status"] for r in expected()]
    assert freed == [False]
    assert gc.isenabled()


def test_anchors_are_derived_only_when_a_step_needs_one(repo: GitRepo) -> None:
    """An unchanged file and lines found again by their hashes cost no parse; the
    answers are those of citations fingerprinted with their anchors up front."""
    by_id = {c["id"]: c for c in citations(repo)}
    index = DefinitionIndex()
    cheap = library_check(repo, [by_id["convert"], by_id["readme"]],
                          AnchorLocator(index, derive_anchors=True))
    assert cheap == [r for r in expected() if r["id"] in ("readme", "convert")]
    assert index.parses == 0

    every = citations(repo)
    lazy = library_check(repo, every, AnchorLocator(DefinitionIndex(), derive_anchors=True))
    eager = library_check(repo, every, AnchorLocator(DefinitionIndex()))
    assert lazy == eager == expected()


def test_each_ref_is_resolved_once_per_run(repo: GitRepo,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    many = [dict(c, id=f"{c['id']}-{i}") for i in range(10) for c in citations(repo)]
    resolved: list[str] = []
    got = library_check(repo, many, AnchorLocator(DefinitionIndex(), derive_anchors=True),
                        monkeypatch, resolved)
    assert [r["status"] for r in got] == [r["status"] for r in expected()] * 10
    # once for each ref the citations name (a full sha, a short one, a tag), not once per
    # citation; the source resolves a few more itself (for its trees and renames)
    assert resolved.count("v1") == resolved.count(first(repo)[:12]) == 1
    assert len(resolved) < 10


def test_the_rename_diff_is_started_ahead_and_collected(repo: GitRepo,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit whose cited files changed gets its rename diff started before its
    citations are checked (git works meanwhile), after their files are asked for, one
    per kind of file cited, among the files of that kind (a pathspec of its endings);
    the check collects those processes and the answers do not change."""
    started: list[list[str]] = []
    real = subprocess.Popen

    def spy(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append([str(a) for a in args])
        return real(args, **kwargs)

    every = citations(repo)
    monkeypatch.setattr(subprocess, "Popen", spy)
    # the group's files are asked for before the diffs start: git reads them first, and
    # the first citation's file is not kept waiting behind the diffs' start
    asked = len(started)
    real_read_blobs = LocalGitSource.read_blobs
    monkeypatch.setattr(LocalGitSource, "read_blobs", lambda self, shas: (
        started.append(["read_blobs"]), real_read_blobs(self, shas))[1])
    got = library_check(repo, every, AnchorLocator(DefinitionIndex(), derive_anchors=True))
    assert got == expected()
    order = [args[0] if args == ["read_blobs"] else "diff-tree"
             for args in started[asked:] if args == ["read_blobs"] or "diff-tree" in args]
    assert order[0] == "read_blobs"
    assert "diff-tree" in order
    diffs = [args for args in started if "diff-tree" in args]
    assert sorted(args[args.index("--") + 1:] for args in diffs) == [
        [":(icase)*.go"], [":(icase)*.py", ":(icase)*.pyi"]]
    assert all(first(repo) in args for args in diffs)
    # the unchanged README alone starts none: nothing there can need it
    started.clear()
    readme = [c for c in every if c["id"] == "readme"]
    assert library_check(repo, readme, AnchorLocator(DefinitionIndex(), derive_anchors=True)) \
        == [r for r in expected() if r["id"] == "readme"]
    assert not [args for args in started if "diff-tree" in args]


# ----------------------------------------------------------------------------- workers


def many_files(tmp_path: Path) -> tuple[GitRepo, list[tuple[Any, dict[str, Any] | str]]]:
    """Twelve modules whose functions all moved down, cited 24 times each, with a bad
    line between them: more than ``PARALLEL_MIN``, so ``jobs`` > 1 uses workers."""
    repo = GitRepo(tmp_path / "many")
    for n in range(12):
        repo.write(f"pkg/mod{n}.py", RATES.replace("convert", f"convert{n}"))
    repo.commit("initial")
    sha = repo.run("rev-parse", "HEAD")
    for n in range(12):
        repo.write(f"pkg/mod{n}.py", f"# module {n}\n\n" + RATES.replace("convert", f"convert{n}"))
    repo.commit("headers")
    items: list[tuple[Any, dict[str, Any] | str]] = []
    for i in range(24):
        for n in range(12):
            cite = {"id": f"{n}-{i}", "path": f"pkg/mod{n}.py", "line_start": 6 + i % 3,
                    "line_end": 8 + i % 6, "sha": sha}
            items.append((cite["id"], cite))
        items.append((f"bad-{i}", "line is not valid JSON"))
    return repo, items


def test_workers_give_the_answers_of_one_process_in_input_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, items = many_files(tmp_path)
    started = tmp_path / "workers"
    real_start = bulk._start_worker

    def start_and_record() -> None:  # runs in each forked worker
        with started.open("a") as fh:
            fh.write(f"{os.getpid()}\n")
        real_start()

    monkeypatch.setattr(bulk, "_start_worker", start_and_record)
    with LocalGitSource(repo.path) as source:
        alone = [r.to_dict() for r in check_citations(source, items, "HEAD", jobs=1)]
        assert not started.exists()
        # eight CPUs' worth asked for, but 288 citations are worth two workers
        shared = [r.to_dict() for r in check_citations(source, items, "HEAD", jobs=8)]
    pids = set(started.read_text().split())
    assert len(pids) == 288 // bulk.CITATIONS_PER_WORKER == 2
    assert str(os.getpid()) not in pids
    assert shared == alone
    assert [r["id"] for r in shared] == [item_id for item_id, _ in items]
    moved = [r for r in shared if "status" in r]
    assert len(moved) == 288
    assert {r["status"] for r in moved} == {"relocated"}
    assert all(r["line_start"] == items[i][1]["line_start"] + 2  # type: ignore[index]
               for i, r in enumerate(shared) if "status" in r)
    assert [r["error"] for r in shared if "error" in r] == ["line is not valid JSON"] * 24


def test_small_runs_and_sources_that_cannot_reopen_stay_in_one_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, items = many_files(tmp_path)
    monkeypatch.setattr(bulk, "_check_in_workers", lambda *a: pytest.fail("workers used"))
    with LocalGitSource(repo.path) as source:
        few = [r.to_dict()
               for r in check_citations(source, items[:bulk.PARALLEL_MIN], "HEAD", jobs=2)]
        assert len(few) == bulk.PARALLEL_MIN
        assert "status" in few[0]

        class Plain:  # the same code, through a source without ``reopen``
            pins_commits = True
            resolve, tree, read_blob = source.resolve, source.tree, source.read_blob
            renames, close = source.renames, source.close

        plain = list(check_citations(Plain(), items, "HEAD", jobs=2))
        assert plain == list(check_citations(source, items, "HEAD", jobs=1))


def test_pieces_keep_a_file_together_and_share_the_work_out() -> None:
    items: list[tuple[Any, dict[str, Any] | str]] = [
        (f"{path}-{i}", {"path": path}) for path, n in (("a", 9), ("b", 5), ("c", 4),
                                                          ("d", 3)) for i in range(n)]
    items.append(("oops", "bad line"))
    pieces = bulk._pieces(items, 2)
    assert sorted(index for piece in pieces for index, _, _ in piece) == list(range(22))
    paths = [{data["path"] if isinstance(data, dict) else None for _, _, data in piece}
             for piece in pieces]
    # the largest groups first, each to the lightest piece: a | b, c | d | the bad line
    assert paths == [{"a", "d"}, {"b", "c", None}]
    assert [len(piece) for piece in pieces] == [12, 10]
    assert len(bulk._pieces(items, 8)) == 5  # never more pieces than paths


def test_jobs_must_be_at_least_one(repo: GitRepo, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["citations", "check", "--repo", os.fspath(repo.path), "--jobs", "0"])
    assert exit_info.value.code == 2
    assert "--jobs" in capsys.readouterr().err
    code, got, _ = run_cli(capsys, monkeypatch, "--repo", os.fspath(repo.path), "-j", "1",
                           stdin=jsonl(citations(repo)))
    assert (code, got) == (0, expected())


def test_no_workers_where_forking_is_unsafe(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    repo, items = many_files(tmp_path)
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(bulk, "_check_in_workers", lambda *a: pytest.fail("workers used"))
    with LocalGitSource(repo.path) as source:
        got = [r.to_dict() for r in check_citations(source, items, "HEAD", jobs=2)]
    assert len(got) == len(items)
    assert {r["status"] for r in got if "status" in r} == {"relocated"}
