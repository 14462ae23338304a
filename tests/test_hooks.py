"""Session hooks (verified_memory/hooks.py, `vmem hook`): the adaptive budget, the prompt
hook's search, the stop hook's reminder over transcripts shaped like Claude Code's and
Codex's, and what each client gets on stdout. Real git repositories, real SQLite."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import GitRepo
from tests.test_docs import NET
from verified_memory import LocalGitSource, MemoryService
from verified_memory.cli import main
from verified_memory.hooks import (
    REMINDER,
    TIERS,
    HookInput,
    edits_since_capture,
    output,
    prompt_context,
    prompt_paths,
    prompt_terms,
    session_context,
    stop_reminder,
    tier_for,
)
from verified_memory.store.sqlite import SQLiteStore

REPO = "acme/app"
# One line per constant: enough distinct places for many memories.
CONSTANTS = "".join(f"NAME_{i} = {i}\n" for i in range(1, 301))


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo.project(tmp_path / "app", {"app/net.py": NET, "app/constants.py": CONSTANTS},
                             origin="https://github.com/acme/app.git")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def service(repo: GitRepo, db: Path) -> Iterator[MemoryService]:
    with MemoryService(SQLiteStore(db), LocalGitSource(repo.path)) as svc:
        yield svc


def remember(service: MemoryService, subject: str, fact: str, path: str, start: int,
             end: int | None = None) -> str:
    return service.store({"repo": REPO, "subject": subject, "fact": fact, "citations": [
        {"path": path, "line_start": start, "line_end": end or start}]}).id


def constants(service: MemoryService, count: int) -> None:
    for i in range(1, count + 1):
        remember(service, f"Constant {i}", f"NAME_{i} is {i}.", "app/constants.py", i)


# --------------------------------------------------------------------------- budgets


def test_tiers_follow_how_many_memories_a_repository_has() -> None:
    assert [tier_for(n).name for n in (0, 9, 10, 49, 50, 199, 200, 10_000)] == [
        "simple", "simple", "medium", "medium", "complex", "complex", "full", "full"]
    assert [t.session_budget for t in TIERS] == [500, 1000, 2000, 3000]  # seed 004
    assert all(t.prompt_budget < t.session_budget for t in TIERS)
    assert all(t.prompt_budget >= 300 for t in TIERS)  # the smallest context there is


@pytest.mark.parametrize(("count", "budget", "limit"), [(3, 500, 10), (12, 1000, 20),
                                                        (60, 2000, 40)])
def test_session_start_budget_adapts(service: MemoryService, count: int, budget: int,
                                     limit: int) -> None:
    constants(service, count)
    context = session_context(service, REPO)
    assert context.rendered is not None
    assert context.rendered.budget == budget
    assert len(context.verifications) == min(count, limit)
    told = session_context(service, REPO, budget=700, limit=2)
    assert told.rendered is not None
    assert (told.rendered.budget, len(told.verifications)) == (700, 2)


# --------------------------------------------------------------------------- prompt


def test_prompt_terms_and_paths() -> None:
    assert prompt_terms("Please fix the retry budget in fetch_all, then run the tests") == [
        "fetch_all", "budget", "retry"]
    assert prompt_terms("can you help me?") == []
    assert prompt_paths("see app/net.py:12-14 and ./README.md, not https://x.io/a.html") == [
        "app/net.py", "README.md"]


def test_the_prompt_hook_finds_verifies_and_ranks(repo: GitRepo,
                                                  service: MemoryService) -> None:
    retry = remember(service, "Retry budget", "HTTP calls retry MAX_RETRIES times.",
                     "app/net.py", 1)
    timeout = remember(service, "Timeout", "Requests time out after TIMEOUT seconds.",
                       "app/net.py", 2)
    constants(service, 3)
    assert prompt_context(service, REPO, "hello, how are you?") is None
    assert prompt_context(service, REPO, "rename the database schema") is None
    context = prompt_context(service, REPO, "raise the retry budget to five")
    assert context is not None
    assert [m.id for m in context.memories] == [retry]
    assert "HTTP calls retry MAX_RETRIES times." in context.markdown  # full by default
    by_file = prompt_context(service, REPO, "what does app/net.py do?")
    assert by_file is not None
    assert {m.id for m in by_file.memories} == {retry, timeout}
    # A memory whose code changed is verified out, not shown.
    repo.write("app/net.py", NET.replace("TIMEOUT = 10", "TIMEOUT = 99"))
    repo.commit("timeout")
    after = prompt_context(service, REPO, "the request timeout")
    assert after is not None
    assert after.memories == ()
    assert [v.memory.id for v in after.left_out] == [timeout]
    assert "Requests time out" not in after.markdown


def test_no_match_means_no_verification_at_all(service: MemoryService) -> None:
    remember(service, "Retry budget", "HTTP calls retry MAX_RETRIES times.", "app/net.py", 1)
    before = service.stats(REPO).events
    assert prompt_context(service, REPO, "unrelated words entirely") is None
    assert service.stats(REPO).events == before


# --------------------------------------------------------------------------- stop


def claude(*entries: dict[str, Any]) -> list[str]:
    """Transcript lines shaped like Claude Code's (one JSON object per line)."""
    return [json.dumps({"type": "assistant", "uuid": f"u{i}", "message": {
        "role": "assistant", "content": [entry]}}) for i, entry in enumerate(entries)]


def tool_use(name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_01", "name": name, "input": tool_input}


def feedback(text: str) -> str:
    return json.dumps({"type": "user", "message": {"role": "user",
                                                   "content": f"Stop hook feedback:\n{text}"}})


def codex(payload: dict[str, Any]) -> str:
    """A line shaped like a Codex rollout."""
    return json.dumps({"timestamp": "2026-01-01T00:00:00Z", "type": "response_item",
                       "payload": payload})


def test_edits_are_counted_since_the_last_capture_or_reminder() -> None:
    edit = tool_use("Edit", file_path="app/net.py", old_string="3", new_string="5")
    store = tool_use("mcp__verified-memory__memory_store", subject="Retry budget")
    read = tool_use("Read", file_path="app/net.py")
    assert edits_since_capture(claude(read)) == 0
    assert edits_since_capture(claude(read, edit, edit)) == 2
    assert edits_since_capture(claude(edit, store)) == 0
    assert edits_since_capture(claude(edit, store, tool_use("Write", file_path="x"))) == 1
    assert edits_since_capture([*claude(edit), feedback(REMINDER)]) == 0
    assert edits_since_capture([*claude(edit), "not json {", *claude(edit)]) == 2
    patch = codex({"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin"})
    stored = codex({"type": "function_call", "name": "mcp__verified-memory__memory_supersede",
                    "arguments": "{}"})
    assert edits_since_capture([patch, patch]) == 2
    assert edits_since_capture([patch, stored]) == 0


def test_stop_reminds_once_per_stretch_of_work(tmp_path: Path) -> None:
    transcript = tmp_path / "session.jsonl"
    edit = tool_use("MultiEdit", file_path="app/net.py", edits=[])
    transcript.write_text("\n".join(claude(edit)) + "\n")
    assert stop_reminder(HookInput(transcript=transcript)) == REMINDER
    assert stop_reminder(HookInput(transcript=transcript, continuing=True)) is None
    with transcript.open("a") as fh:
        fh.write(feedback(REMINDER) + "\n")
    assert stop_reminder(HookInput(transcript=transcript)) is None
    assert stop_reminder(HookInput(transcript=tmp_path / "gone.jsonl")) is None
    assert stop_reminder(HookInput()) is None


def test_hook_input_of_each_client(tmp_path: Path) -> None:
    claude_stop = HookInput.parse({"session_id": "s", "transcript_path": "/t.jsonl",
                                   "cwd": "/work/app", "hook_event_name": "Stop",
                                   "stop_hook_active": True})
    assert (claude_stop.cwd, claude_stop.transcript, claude_stop.continuing) == (
        Path("/work/app"), Path("/t.jsonl"), True)
    cursor = HookInput.parse({"conversation_id": "c", "workspace_roots": ["/w"],
                              "hook_event_name": "stop", "loop_count": 1})
    assert (cursor.cwd, cursor.continuing) == (Path("/w"), True)
    assert HookInput.parse({"prompt": "hi"}).prompt == "hi"
    assert HookInput.parse(None) == HookInput()
    with pytest.raises(Exception, match="must be a JSON object"):
        HookInput.parse([1])


def test_output_per_client() -> None:
    assert output("claude-code", "session-start", "m") == {"hookSpecificOutput": {
        "hookEventName": "SessionStart", "additionalContext": "m"}}
    assert output("codex", "prompt", "m") == {"hookSpecificOutput": {
        "hookEventName": "UserPromptSubmit", "additionalContext": "m"}}
    assert output("vscode", "session-start", "m")["hookSpecificOutput"]["hookEventName"] == \
        "SessionStart"
    assert output("cursor", "session-start", "m") == {"additional_context": "m"}
    assert output("claude-code", "stop", "r") == {"decision": "block", "reason": "r"}
    with pytest.raises(Exception, match="cursor has no prompt hook"):
        output("cursor", "prompt", "m")


# --------------------------------------------------------------------------- vmem hook


def hook(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
         stdin: dict[str, Any] | str, *args: str) -> tuple[int, str, str]:
    text = stdin if isinstance(stdin, str) else json.dumps(stdin)
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


@pytest.fixture
def cli(repo: GitRepo, db: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    """`vmem` started somewhere else: the hook finds the project in its input's cwd."""
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{db}")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return repo


def test_vmem_hook_for_each_client(cli: GitRepo, service: MemoryService, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    retry = remember(service, "Retry budget", "HTTP calls retry MAX_RETRIES times.",
                     "app/net.py", 1)
    where = str(cli.path)
    code, out, err = hook(capsys, monkeypatch, {"cwd": where, "source": "startup",
                                                "hook_event_name": "SessionStart"},
                          "hook", "session-start")
    assert code == 0, err
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert retry in context
    assert "HTTP calls retry" not in context  # summary at session start
    assert "verdicts are applied" in err  # the ref rule, said on stderr
    code, out, err = hook(capsys, monkeypatch, {"workspace_roots": [where]},
                          "hook", "session-start", "--client", "cursor")
    assert code == 0, err
    assert retry in json.loads(out)["additional_context"]
    code, out, err = hook(capsys, monkeypatch, {"cwd": where, "prompt": "bump MAX_RETRIES"},
                          "hook", "prompt", "--client", "codex")
    assert code == 0, err
    assert "HTTP calls retry" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    code, out, err = hook(capsys, monkeypatch, {"cwd": where, "prompt": "write a haiku"},
                          "hook", "prompt")
    assert (code, out) == (0, "")  # nothing relevant, nothing said
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("\n".join(claude(tool_use("Edit", file_path="app/net.py"))))
    code, out, err = hook(capsys, monkeypatch, {"cwd": where, "transcript_path":
                                                str(transcript), "stop_hook_active": False},
                          "hook", "stop")
    assert code == 0, err
    assert json.loads(out) == {"decision": "block", "reason": REMINDER}
    code, out, _ = hook(capsys, monkeypatch, {"cwd": where, "transcript_path":
                                              str(transcript), "stop_hook_active": True},
                        "hook", "stop")
    assert (code, out) == (0, "")


@pytest.mark.parametrize(("args", "stdin", "message"), [
    (["hook", "prompt", "--client", "cursor"], "{}", "cursor has no prompt hook"),
    (["hook", "stop", "--client", "vscode"], "{}", "vscode has no stop hook"),
    (["hook", "nope"], "{}", "'nope' is not one of"),
    (["hook", "session-start", "--client", "bogus"], "{}", "'bogus' is not one of"),
    (["hook", "prompt", "--no-such-option"], "{}", "No such option '--no-such-option'"),
    (["hook", "prompt", "--budget", "5"], "{}", "5 is not in the range"),
    # the group's own options, which the wired hooks pass before `hook`
    (["--time-limit", "abc", "hook", "prompt"], "{}", "Invalid value for '--time-limit'"),
    (["-C", "no-such-dir", "hook", "prompt"], "{}", "'no-such-dir' does not exist"),
    (["hook", "prompt"], "{not json", "the hook's input on stdin is not valid JSON"),
])
def test_hook_errors_never_block_the_agent(cli: GitRepo, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch, args: list[str],
                                          stdin: str, message: str) -> None:
    """Exit 2 would block the prompt (or the stop) in Claude Code and Codex."""
    code, out, err = hook(capsys, monkeypatch, stdin, *args)
    assert code == 1
    assert out == ""
    assert message in err
    assert "Traceback" not in err
    assert err.count("\n") == 1, err  # one line
    assert err.startswith("vmem: error: ")


@pytest.mark.parametrize("bad", ["/tmp/a\x00b", "/tmp/\ud800"])  # NUL; a lone surrogate
def test_a_path_no_file_system_takes_is_no_path(cli: GitRepo, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch,
                                               bad: str) -> None:
    """JSON can spell paths no file system can take: the hook reads them as absent, as it
    does a path that is not a string, never as a traceback."""
    assert HookInput.parse({"cwd": bad, "transcript_path": bad}) == HookInput()
    code, out, err = hook(capsys, monkeypatch, {"cwd": str(cli.path), "transcript_path": bad},
                          "hook", "stop")
    assert (code, out, err) == (0, "", "")  # no transcript it can read: quiet
    code, out, err = hook(capsys, monkeypatch, {"cwd": bad, "prompt": "MAX_RETRIES"},
                          "hook", "prompt")
    assert (code, out) == (1, "")
    assert err.startswith("vmem: error: ")
    assert err.count("\n") == 1, err
    assert "not inside a git working copy" in err


def test_the_hook_runs_under_the_context_time_limit(cli: GitRepo, service: MemoryService,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    remember(service, "Retry budget", "HTTP calls retry MAX_RETRIES times.", "app/net.py", 1)
    cli.write("app/net.py", "# moved down\n" + NET)  # the file must be read again
    cli.commit("move")
    monkeypatch.setenv("VMEM_CONTEXT_TIME_LIMIT", "0.000001")
    monkeypatch.setenv("VMEM_VERIFY_TIME_LIMIT", "600")  # not this one
    code, out, err = hook(capsys, monkeypatch, {"cwd": str(cli.path)}, "hook", "session-start")
    assert code == 0, err
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "1 more could not be checked" in context
    assert "HTTP calls retry" not in context
    assert "time limit" in err


@pytest.mark.parametrize("seconds", ["nan", "NaN", "0", "-1", "inf", "86401", " "])
def test_a_time_limit_that_is_no_number_of_seconds_is_one_line(
        cli: GitRepo, service: MemoryService, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, seconds: str) -> None:
    """The wired hooks pass the group's options before `hook`: NaN passed the range
    check (every comparison with it is false) and the pass's budget refused it with a
    traceback."""
    remember(service, "Retry budget", "HTTP calls retry MAX_RETRIES times.", "app/net.py", 1)
    code, out, err = hook(capsys, monkeypatch, {"cwd": str(cli.path), "prompt": "MAX_RETRIES"},
                          "--time-limit", seconds, "hook", "prompt")
    assert (code, out) == (1, "")
    assert err.startswith("vmem: error: Invalid value for '--time-limit': "), err
    assert "above 0 and at most 86400" in err
    assert err.count("\n") == 1, err


def test_a_closed_stdin_is_no_input(cli: GitRepo, service: MemoryService,
                                    capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A client (or a shell's `<&-`) may start the hook with stdin closed: Python then
    has no sys.stdin at all, which read as a traceback; now as no input."""
    retry = remember(service, "Retry budget", "HTTP calls retry MAX_RETRIES times.",
                     "app/net.py", 1)
    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(SystemExit) as exit_info:
        main(["-C", str(cli.path), "hook", "session-start"])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 0, err
    assert retry in json.loads(out)["hookSpecificOutput"]["additionalContext"]


def test_a_hook_started_with_stdout_closed_ends_without_a_traceback(
        cli: GitRepo, service: MemoryService) -> None:
    """With stdout closed (`>&-`) Python has no sys.stdout, and printing the answer was a
    traceback; now the answer goes nowhere and the hook ends as it would have. A real
    process, with the stream really closed (stdin too, for the other fix)."""
    retry = remember(service, "Retry budget", "HTTP calls retry MAX_RETRIES times.",
                     "app/net.py", 1)
    for closed in (">&-", "<&-"):
        done = subprocess.run(
            ["bash", "-c", f'"$0" -m verified_memory -C "$1" hook session-start {closed}',
             sys.executable, str(cli.path)],
            capture_output=True, text=True, check=False, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        assert (retry in done.stdout) is (closed == "<&-")


def test_a_transcript_that_is_no_file_is_no_transcript(tmp_path: Path) -> None:
    """The stop hook opened whatever transcript_path named: a FIFO never opened (no
    writer), /dev/zero never ended, and the hook hung until the client killed it. Now
    only a regular file is read; anything else is no transcript (quiet)."""
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    said: list[str | None] = []
    reader = threading.Thread(target=lambda: said.append(
        stop_reminder(HookInput(transcript=fifo))), daemon=True)
    reader.start()
    reader.join(10)  # a guard against a hang, not a measure of speed
    hung = reader.is_alive()
    if hung:  # let the reader go: a writer that opens and closes at once
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join()
    assert not hung
    assert said == [None]
    assert stop_reminder(HookInput(transcript=tmp_path)) is None  # a directory


def test_a_working_copy_with_no_commits_has_nothing_to_show(
        cli: GitRepo, service: MemoryService, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`git init`, nothing committed: the ref could not be resolved, and the session-start
    hook exited 1 at every session start (so did `vmem context`), even with no memory to
    show. There is no code to cite, so nothing to verify: the hook answers as for no
    memories, `vmem context` says why in one line, and nothing stored changes."""
    retry = remember(service, "Retry budget", "HTTP calls retry MAX_RETRIES times.",
                     "app/net.py", 1)
    before = service.get(retry)
    fresh = GitRepo(tmp_path / "fresh")
    fresh.run("remote", "add", "origin", "https://github.com/acme/app.git")
    code, out, err = hook(capsys, monkeypatch, {"cwd": str(fresh.path)}, "hook",
                          "session-start")
    assert (code, out) == (0, ""), err
    assert err.count("\n") == 1, err
    assert "has no commits yet" in err
    for args in ([], ["--json"]):
        code, out, err = hook(capsys, monkeypatch, "", "-C", str(fresh.path), "context", *args)
        assert code == 0, err
        assert err.count("\n") == 1, err
        assert "has no commits yet: there is no code to cite" in err
        assert retry not in out
    assert json.loads(out)["memories"] == []
    assert service.get(retry) == before
