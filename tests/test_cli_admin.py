"""``vmem list``, ``log``, ``forget`` and ``where``; short ids wherever an id is taken;
flags given with a JSON memory; writes attributed to who made them; commands that only
read never create a store. Real git repositories and SQLite files."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import GitRepo
from verified_memory.cli import main
from verified_memory.store.sqlite import MIGRATIONS, SQLiteStore

CODE = "def a():\n    return 1\n\n\ndef b():\n    return 2\n\n\ndef c():\n    return 3\n"


def vmem(capsys: pytest.CaptureFixture[str], *args: str, stdin: str | None = None,
         monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[int, str, str]:
    if stdin is not None:
        assert monkeypatch is not None
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def ok(capsys: pytest.CaptureFixture[str], *args: str, **kw: Any) -> str:
    code, out, err = vmem(capsys, *args, **kw)
    assert code == 0, err
    return out


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, db: Path) -> GitRepo:
    repo = GitRepo.project(tmp_path / "app", {"src/app.py": CODE, "src/other.py": CODE},
                           origin="https://github.com/acme/app.git")
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{db}")
    return repo


def store(capsys: pytest.CaptureFixture[str], subject: str, cite: str = "src/app.py:1-2",
          *more: str) -> str:
    out = ok(capsys, "store", "--subject", subject, "--fact", f"{subject}, a fact.",
             "--cite", cite, "--json", *more)
    return str(json.loads(out)["id"])


def events(db: Path, memory_id: str) -> list[tuple[str, str | None]]:
    with SQLiteStore(db) as lite:
        return [(e.kind.value, e.actor) for e in lite.events(memory_id=memory_id)]


# --------------------------------------------------------------------------- list


def test_list_shows_every_status_with_short_ids_at_80_columns(
        repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    kept = store(capsys, "Kept memory with a long subject that must fold to stay within eighty "
                         "columns of the terminal")
    gone = store(capsys, "Broken memory", "src/app.py:5-6")
    ok(capsys, "invalidate", gone[:8], "--reason", "the code went away")
    out = ok(capsys, "list")
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert kept[:8] in out
    assert gone[:8] in out
    assert kept not in out  # short ids in tables
    assert "invalid" in out
    assert "active" in out
    assert "…" not in out  # folded, never cut short
    for word in ("eighty", "columns", "terminal"):
        assert word in out
    invalid = json.loads(ok(capsys, "list", "--status", "invalid", "--json"))
    assert [m["id"] for m in invalid] == [gone]
    assert json.loads(ok(capsys, "recent", "--json"))[0]["id"] == kept  # recent: active only


def test_list_filters_narrow_before_the_limit(
        repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    alice = store(capsys, "By alice", "src/app.py:1-2", "--created-by", "alice", "--tag", "api",
                  "--category", "convention")
    bob = store(capsys, "By bob", "src/other.py:5-6", "--created-by", "bob")
    store(capsys, "By bob too", "src/app.py:9-10", "--created-by", "bob")

    def listed(*args: str) -> list[str]:
        return [m["id"] for m in json.loads(ok(capsys, "list", "--json", *args))]

    assert listed("--created-by", "alice") == [alice]
    assert listed("--tag", "api") == [alice]
    assert listed("--category", "convention") == [alice]
    assert listed("--path", "src/other.py") == [bob]
    assert len(listed("--created-by", "bob")) == 2
    assert len(listed("--created-by", "bob", "--limit", "1")) == 1
    assert len(listed("--since", "1d")) == 3
    assert listed("--since", "2999-01-01") == []
    for far in ("99999999d", "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:00-05:00"):
        for command in ("list", "log"):  # one line, not an OverflowError
            code, _, err = vmem(capsys, command, "--since", far)
            assert (code, err) == (1, f"vmem: error: --since {far!r} is out of range\n")
    code, _, err = vmem(capsys, "list", "--since", "last tuesday")
    assert code == 1
    assert "--since 'last tuesday': give a date" in err


# --------------------------------------------------------------------------- short ids


def test_a_unique_prefix_names_a_memory_everywhere(
        repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    memory_id = store(capsys, "Retry budget")
    shown = json.loads(ok(capsys, "show", memory_id[:8], "--json"))
    assert shown["id"] == memory_id
    # As copied from a table in capitals: ids are lower-case hex.
    assert json.loads(ok(capsys, "show", memory_id.upper(), "--json"))["id"] == memory_id
    ok(capsys, "refresh", memory_id[:6])
    ok(capsys, "applied", memory_id[:10])
    assert json.loads(ok(capsys, "history", memory_id[:8], "--json"))[0]["id"] == memory_id
    newer = json.loads(ok(capsys, "supersede", memory_id[:8], "--subject", "Retry budget (5)",
                          "--fact", "Five now.", "--cite", "src/app.py:5-6", "--json"))
    assert newer["supersedes"] == memory_id
    memory_id = newer["id"]
    code, _, err = vmem(capsys, "show", "zzzzzzzz")
    assert code == 1
    assert "memory 'zzzzzzzz' not found: no memory's id is or starts with it" in err
    with SQLiteStore(repo.path.parent / "memory.db") as lite:  # two ids that share a start
        original = lite.get(memory_id)
        from dataclasses import replace
        lite.add(replace(original, id="abcd0001-x"))
        lite.add(replace(original, id="abcd0002-x"))
    code, _, err = vmem(capsys, "show", "abcd")
    assert code == 1
    assert "'abcd' is the start of more than one memory id (abcd0001-x, abcd0002-x)" in err
    assert json.loads(ok(capsys, "show", "abcd0002", "--json"))["id"] == "abcd0002-x"


# --------------------------------------------------------------------------- who acts


def test_every_write_is_attributed_to_who_made_it(
        repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        db: Path) -> None:
    mine = store(capsys, "Mine", "src/app.py:1-2", "--created-by", "alice")
    monkeypatch.setenv("VMEM_ACTOR", "carol")
    hers = store(capsys, "Hers", "src/app.py:5-6")
    ok(capsys, "invalidate", mine[:8], "--reason", "moved")
    assert events(db, mine) == [("created", "alice"), ("invalidated", "carol")]
    assert json.loads(ok(capsys, "show", hers, "--json"))["created_by"] == "carol"
    assert events(db, hers)[0] == ("created", "carol")


def test_flags_given_with_a_json_memory_are_never_dropped(
        repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        db: Path) -> None:
    memory = {"subject": "Timeout", "fact": "Requests time out after 10 s.",
              "citations": [{"path": "src/app.py", "line_start": 1, "line_end": 2}]}
    out = ok(capsys, "store", "--created-by", "me", "--tag", "t", "--reason", "r", "--json",
             stdin=json.dumps(memory), monkeypatch=monkeypatch)
    stored = json.loads(out)
    assert (stored["created_by"], stored["tags"], stored["reason"]) == ("me", ["t"], "r")
    assert events(db, stored["id"]) == [("created", "me")]
    # A flag that says what the JSON says is fine; one that contradicts it is refused.
    agreeing = {**memory, "subject": "Other", "reason": "r"}
    ok(capsys, "store", "--reason", " r ", stdin=json.dumps(agreeing), monkeypatch=monkeypatch)
    for flags, words in ((["--reason", "x"], "--reason says 'x' but the JSON memory's reason "
                                             "is 'r': give it once"),
                         (["--cite", "src/app.py:5-6"], "--cite says src/app.py:5-6 but the JSON "
                                                        "memory's citations is"),
                         (["--repo", "acme/other"], "--repo says 'acme/other'")):
        code, out, err = vmem(capsys, "store", *flags,
                              stdin=json.dumps({**memory, "reason": "r", "repo": "acme/app"}),
                              monkeypatch=monkeypatch)
        assert (code, out) == (1, "")
        assert words in err
        assert err.count("\n") == 1
    assert len(json.loads(ok(capsys, "list", "--json"))) == 2


# --------------------------------------------------------------------------- log


def test_log_is_the_audit_trail_of_a_memory_and_of_the_repository(
        repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    first = store(capsys, "First", "src/app.py:1-2", "--created-by", "alice")
    second = store(capsys, "Second", "src/app.py:9-10")
    ok(capsys, "show", first)  # a read: left out of the trail unless asked
    monkeypatch.setenv("VMEM_ACTOR", "bob")
    ok(capsys, "invalidate", first[:8], "--reason", "the retry loop went away")
    trail = json.loads(ok(capsys, "log", first[:8], "--json"))
    assert [(e["kind"], e["actor"]) for e in trail] == [("invalidated", "bob"),
                                                        ("created", "alice")]
    assert trail[0]["why"] == "the retry loop went away"
    assert trail[1]["what"] == "created 1 citation(s)"
    with_reads = json.loads(ok(capsys, "log", first, "--reads", "--json"))
    assert "retrieved" in [e["kind"] for e in with_reads]
    whole = json.loads(ok(capsys, "log", "--json"))
    assert {e["memory_id"] for e in whole} == {first, second}
    assert [e["kind"] for e in json.loads(ok(capsys, "log", "--kind", "invalidated",
                                                  "--json"))] == ["invalidated"]
    table = ok(capsys, "log")
    assert "bob" in table
    assert first[:8] in table
    assert "invalidated" in table


def test_log_names_the_possible_conflicts_a_memory_was_stored_with(
        repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    first = store(capsys, "Retry count", "src/app.py:1-2")
    out = ok(capsys, "store", "--subject", "Retry count", "--fact", "a() never retries.",
             "--cite", "src/app.py:1-2", "--json")
    second = json.loads(out)
    assert second["conflicts"] == [first]
    (created,) = [e for e in json.loads(ok(capsys, "log", "--json"))
                  if e["memory_id"] == second["id"]]
    assert created["what"] == f"created 1 citation(s), possible conflict with {first}"
    table = ok(capsys, "log", second["id"][:8])  # folded into the column: read unfolded
    assert "possibleconflictwith" in "".join(c for c in table if c.isalnum())


def test_a_repository_log_cut_by_compaction_says_how_to_see_the_archive(
        repo: GitRepo, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _log_cut_by_compaction(capsys, monkeypatch)


@pytest.mark.postgres
def test_a_postgres_log_cut_by_compaction_says_how_to_see_the_archive(
        repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        pg_url: str) -> None:
    monkeypatch.setenv("VMEM_DATABASE_URL", pg_url)
    _log_cut_by_compaction(capsys, monkeypatch)


def _log_cut_by_compaction(capsys: pytest.CaptureFixture[str],
                           monkeypatch: pytest.MonkeyPatch) -> None:
    first = store(capsys, "First", "src/app.py:1-2", "--created-by", "alice")
    monkeypatch.setenv("VMEM_ACTOR", "bob")
    ok(capsys, "invalidate", first[:8], "--reason", "the retry loop went away")
    ok(capsys, "db", "compact", "--older-than", "0", "--apply", "--no-backup")
    later = store(capsys, "Later", "src/app.py:9-10")
    hint = "`vmem log --archived` shows them"
    # The table: the live event, and one line on stderr about the archived ones.
    code, out, err = vmem(capsys, "log")
    assert code == 0, err
    assert later[:8] in out
    assert first[:8] not in out
    assert err.count("\n") == 1
    assert hint in err
    assert "vmem db compact" in err
    # --json: stdout is the list alone, and nothing more is said.
    code, out, err = vmem(capsys, "log", "--json")
    assert (code, err) == (0, "")
    assert [e["memory_id"] for e in json.loads(out)] == [later]
    # A log the archive does not cut (the limit is met by live events) says nothing.
    code, out, err = vmem(capsys, "log", "--limit", "1")
    assert (code, err) == (0, "")
    # Nor does one whose kind the archive does not hold; one it does gets the hint.
    assert vmem(capsys, "log", "--kind", "applied")[2] == ""
    code, out, err = vmem(capsys, "log", "--kind", "invalidated")
    assert "no events" in out
    assert hint in err
    # --archived reads the archive too, newest first, and has nothing to hint at.
    code, out, err = vmem(capsys, "log", "--archived", "--json")
    assert (code, err) == (0, "")
    assert [(e["kind"], e["memory_id"], e["actor"]) for e in json.loads(out)] == [
        ("created", later, "bob"), ("invalidated", first, "bob"), ("created", first, "alice")]
    assert vmem(capsys, "log", "--archived")[2] == ""
    # A memory's own trail always included its archived events.
    assert [e["kind"] for e in json.loads(ok(capsys, "log", first[:8], "--json"))] == [
        "invalidated", "created"]
    assert vmem(capsys, "log", first[:8])[2] == ""


def test_log_shows_the_ref_a_verdict_was_made_at(
        repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    memory_id = store(capsys, "Verified")
    repo.write("src/app.py", "# moved down\n" + CODE)
    repo.commit("move")  # main, with no origin/HEAD: the main line, at its tip
    ok(capsys, "verify")
    trail = json.loads(ok(capsys, "log", memory_id, "--json"))
    relocated = next(e for e in trail if e["kind"] == "relocated")
    assert relocated["what"] == "relocated src/app.py:1-2 -> src/app.py:2-3"
    assert relocated["ref"].startswith("main @ ")
    refreshed = next(e for e in trail if e["kind"] == "refreshed")
    assert refreshed["ref"] == relocated["ref"]  # every change of a verdict names its ref


# --------------------------------------------------------------------------- forget


def test_forget_deletes_the_text_and_keeps_a_tombstone(
        repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        db: Path) -> None:
    secret = store(capsys, "Deploy key", "src/app.py:1-2")
    kept = store(capsys, "Kept", "src/app.py:5-6")
    monkeypatch.setenv("VMEM_ACTOR", "admin")
    out = ok(capsys, "forget", secret[:8], "--reason", "a key pasted into the fact")
    assert out == f"forgot {secret}\n"
    code, _, err = vmem(capsys, "show", secret[:8])
    assert code == 1
    assert f"memory {secret} was forgotten on " in err
    assert "by admin: a key pasted into the fact" in err
    assert [m["id"] for m in json.loads(ok(capsys, "list", "--json"))] == [kept]
    assert json.loads(ok(capsys, "search", "Deploy", "--json")) == []
    stones = json.loads(ok(capsys, "list", "--forgotten", "--json"))
    assert [(s["id"], s["forgotten_by"], s["reason"], s["status"]) for s in stones] == [
        (secret, "admin", "a key pasted into the fact", "active")]
    assert [e["kind"] for e in json.loads(ok(capsys, "log", secret[:8], "--json"))] == [
        "forgotten", "created"]
    stats = json.loads(ok(capsys, "stats", "--json"))
    assert (stats["total"], stats["forgotten"], stats["events"]["created"]) == (1, 1, 2)
    code, _, err = vmem(capsys, "forget", secret, "--reason", "again")
    assert code == 1
    assert "was forgotten on" in err


def test_forget_a_whole_repository_needs_yes(
        repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    for n in range(3):
        store(capsys, f"Memory {n}", f"src/app.py:{1 + 4 * n}-{2 + 4 * n}")
    elsewhere = GitRepo.project(tmp_path / "other", {"src/app.py": "A = 1\nB = 2\n"},
                                origin="https://github.com/acme/other.git")
    other = ok(capsys, "-C", str(elsewhere.path), "store", "--subject", "Elsewhere", "--fact",
               "f", "--cite", "src/app.py:1-2", "--json")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal: no question asked
    code, _, err = vmem(capsys, "forget", "--repo", "acme/app", "--all", "--reason", "gone")
    assert code == 1
    assert "forget all 3 memories of acme/app?" in err
    assert "--yes" in err
    assert len(json.loads(ok(capsys, "list", "--json"))) == 3
    out = ok(capsys, "forget", "--repo", "acme/app", "--all", "--yes", "--reason", "gone")
    assert out == "forgot 3 memories of acme/app\n"
    assert json.loads(ok(capsys, "list", "--json")) == []
    assert len(json.loads(ok(capsys, "list", "--forgotten", "--json"))) == 3
    assert [m["id"] for m in json.loads(ok(capsys, "list", "--repo", "acme/other",
                                           "--json"))] == [json.loads(other)["id"]]
    for args in (["forget", "--reason", "r"], ["forget", "x", "--all", "--reason", "r"],
                 ["forget", "--all", "--reason", "r"]):
        assert vmem(capsys, *args)[0] == 2  # usage errors


# --------------------------------------------------------------------------- stores


@pytest.mark.parametrize("command", [
    ["recent"], ["list"], ["log"], ["stats"], ["search", "retry"], ["show", "abc"],
    ["verify"], ["context"], ["pending"], ["history", "abc"], ["db", "export"],
    ["db", "compact"], ["forget", "abc", "--reason", "r"], ["invalidate", "abc", "--reason", "r"],
])
def test_commands_that_do_not_store_never_create_a_store(
        repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        command: list[str]) -> None:
    missing = tmp_path / "nowhere" / "deeper" / "memory.db"
    code, _out, err = vmem(capsys, "--db", str(missing), *command)
    assert code == 1
    assert f"vmem: error: there is no memory store at {missing}" in err
    assert err.count("\n") == 1
    assert not (tmp_path / "nowhere").exists()


def test_a_hook_with_no_store_yet_says_nothing_and_creates_nothing(
        repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    code, out, err = vmem(capsys, "hook", "session-start", stdin="{}", monkeypatch=monkeypatch)
    assert (code, out, err) == (0, "", "")
    assert not db.exists()


def test_where_names_the_store_its_schema_size_and_counts(
        repo: GitRepo, capsys: pytest.CaptureFixture[str], db: Path, tmp_path: Path) -> None:
    out = ok(capsys, "where")
    assert out == f"sqlite {db} (does not exist yet: the first `vmem store` creates it)\n"
    assert not db.exists()
    memory_id = store(capsys, "One")
    store(capsys, "Two", "src/app.py:5-6")
    ok(capsys, "forget", memory_id, "--reason", "r")
    info = json.loads(ok(capsys, "where", "--json"))
    assert (info["kind"], info["location"], info["schema_version"], info["exists"]) == (
        "sqlite", str(db), str(MIGRATIONS[-1][0]), True)
    assert (info["memories"], info["forgotten"], info["repos"]) == (1, 1, 1)
    assert info["size_bytes"] >= db.stat().st_size
    text = ok(capsys, "where")
    assert text.splitlines()[0] == f"sqlite {db}"
    assert f"schema version {MIGRATIONS[-1][0]}" in text
    assert "1 memories in 1 repositories, 1 forgotten" in text


def test_the_readme_audit_examples_run(repo: GitRepo, capsys: pytest.CaptureFixture[str],
                                       db: Path) -> None:
    import os
    import re
    import subprocess
    import sys

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    section = readme.split("\n## Audit, forgetting and a clean store\n", 1)[1].split("\n## ")[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, flags=re.S)[:1]
    store(capsys, "Retry budget", "src/app.py:1-2", "--created-by", "my-agent")
    gone = store(capsys, "Old convention", "src/app.py:5-6")
    ok(capsys, "invalidate", gone[:8], "--reason", "the code changed")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    said = []
    for line in block.strip().splitlines():
        command = line.split("  #", 1)[0].strip()
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env,
                              check=False)
        assert done.returncode == 0, f"{command}\n{done.stderr}"
        said.append(done.stdout)
    assert gone[:8] in said[0]  # list --status invalid
    assert "invalidated" in said[2]
    assert said[3].startswith(f"sqlite {db}")
    assert "dry run: nothing changed" in said[4]
    assert said[5] == "forgot 2 memories of acme/app\n"
    assert gone[:8] in said[6]  # the tombstones


def test_json_nested_deeper_than_any_memory_is_one_line_everywhere(
        repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    deep: Any = "x"
    for _ in range(70):  # within what the parser takes; deeper than a memory ever is
        deep = [deep]
    memory = {"subject": "s", "fact": "f", "tags": deep,
              "citations": [{"path": "src/app.py", "line_start": 1}]}
    code, out, err = vmem(capsys, "store", stdin=json.dumps(memory), monkeypatch=monkeypatch)
    assert (code, out, err) == (1, "", "vmem: error: stdin is JSON nested more than 64 levels "
                                       "deep\n")
    line = json.dumps({"id": "c1", "path": "src/app.py", "line_start": 1, "sha": "HEAD",
                       "extra": deep})
    checked = tmp_path / "in.jsonl"
    checked.write_text(line + "\n")
    out = ok(capsys, "citations", "check", "--repo", str(repo.path), "--input", str(checked))
    assert json.loads(out) == {"id": "line 1",
                               "error": "line 1 is JSON nested more than 64 levels deep"}
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text(json.dumps({"message": deep}) + "\n" + "[" * 5000 + "]" * 5000 + "\n")
    code, out, err = vmem(capsys, "hook", "stop", stdin=json.dumps(
        {"transcript_path": str(transcript)}), monkeypatch=monkeypatch)
    assert (code, out) == (0, "")  # lines it cannot read are skipped, not a traceback
    assert "Traceback" not in err
