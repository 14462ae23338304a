"""``vmem git export`` / ``vmem git import``: memories as markdown files in a real
repository, round trips through SQLite and Postgres, merges, hand edits, deletions."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import GitRepo, git_env
from verified_memory.cli import main
from verified_memory.gitstore import frontmatter
from verified_memory.gitstore.layout import parse_memory, render_memory
from verified_memory.store import open_store
from verified_memory.store.sqlite import SQLiteStore

REPO = "acme/app"
NET = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(12))


def vmem(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def ok(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    code, out, err = vmem(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    """A clone of a bare origin whose main line vmem can tell (so verdicts happen)."""
    origin = GitRepo(tmp_path / "origin.git", bare=True)
    author = GitRepo.project(tmp_path / "author", {"app/net.py": NET})
    author.run("remote", "add", "origin", str(origin.path))
    author.run("push", "-q", "origin", "main")
    subprocess.run(["git", "clone", "-q", str(origin.path), str(tmp_path / "clone")],
                   check=True, env=git_env())
    repo = GitRepo(tmp_path / "clone")
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{tmp_path / 'a.db'}")
    return repo


def store(capsys: pytest.CaptureFixture[str], subject: str, cite: str, *extra: str,
          db: str | None = None) -> str:
    where = ["--db", db] if db else []
    return str(ok(capsys, *where, "store", "--repo", REPO, "--subject", subject, "--fact",
                  f"{subject}: the fact.", "--cite", cite, *extra)["id"])


def on_main(clone: GitRepo, message: str) -> None:
    """Commit what is in the clone and push it: the main line's new tip."""
    clone.commit(message)
    clone.run("push", "-q", "origin", "main")


def exported(clone: GitRepo, capsys: pytest.CaptureFixture[str], subject: str,
             cite: str) -> tuple[str, Path]:
    """A memory stored and exported: its id and its file in the folder."""
    memory = store(capsys, subject, cite)
    ok(capsys, "git", "export", "--repo", REPO)
    (path,) = (clone.path / ".memory" / "uncategorized").glob(f"{memory}_*.md")
    return memory, path


def memories(url: str) -> list[dict[str, Any]]:
    opened = open_store(url, create=False)
    try:
        return sorted((m.to_dict() for m in opened.recent(REPO, limit=None, status=None)),
                      key=lambda m: m["id"])
    finally:
        opened.close()


def test_export_writes_one_file_per_memory_and_a_rerun_changes_nothing(
        clone: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    first = store(capsys, "Adds one", "app/net.py:1-2", "--category", "convention",
                  "--tag", "math", "--reason", "Callers rely on it.")
    second = store(capsys, "Adds two", "app/net.py:5-6")
    done = ok(capsys, "git", "export", "--repo", REPO)
    assert done["memories"] == 2
    folder = clone.path / ".memory"
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.md"))
    assert f"convention/{first}_adds-one.md" in files
    assert f"uncategorized/{second}_adds-two.md" in files
    text = (folder / f"convention/{first}_adds-one.md").read_text()
    assert text.startswith("---\nid: ")
    assert "\nsubject: Adds one\n" in text
    assert "\nCallers rely on it.\n" in text.split("## Reason", 1)[1]
    assert "  - path: app/net.py\n    line_start: 1\n    line_end: 2\n" in text
    index = (folder / "index.md").read_text()
    assert index.index("## convention") < index.index("## uncategorized")
    assert f"- `{first}` [Adds one](<convention/{first}_adds-one.md>)" in index
    assert "index.sqlite*" in (folder / ".gitignore").read_text()
    clone.commit("[memory] export")
    again = ok(capsys, "git", "export", "--repo", REPO)
    assert again["written"] == []
    assert again["removed"] == []
    assert clone.run("status", "--porcelain") == ""


def test_the_front_matter_is_yaml_and_any_text_round_trips(tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")  # only to check we write YAML; not a dependency
    from tests.contract.test_store import mem

    tricky = mem(subject='no: "plain" # here', fact="  starts with spaces\n## Reason\nx",
                 reason="line\u2028break", tags=("yes", "123", "a: b"), created_by="null")
    text = render_memory(tricky)
    lines, _ = frontmatter.split(text, "f.md")
    loaded = yaml.safe_load("\n".join(lines))
    assert loaded["subject"] == tricky.subject
    assert loaded["tags"] == list(tricky.tags)
    assert loaded["created_by"] == "null"
    assert loaded["citations"][0]["line_start"] == 10
    assert parse_memory(text, "f.md") == tricky


def test_round_trip_through_sqlite_and_back_is_lossless(
        clone: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kept = store(capsys, "Kept", "app/net.py:1-2", "--category", "invariant", "--reason", "R")
    old = store(capsys, "Old", "app/net.py:5-6")
    ok(capsys, "supersede", old, "--subject", "New", "--fact", "New fact.",
       "--cite", "app/net.py:9-10")
    ok(capsys, "applied", kept)
    forgotten = store(capsys, "Secret", "app/net.py:13-14")
    ok(capsys, "forget", forgotten, "--reason", "pasted a token", "--yes")
    ok(capsys, "git", "export", "--repo", REPO)
    clone.commit("[memory] export")
    second = f"sqlite:///{tmp_path / 'b.db'}"
    done = ok(capsys, "--db", second, "git", "import", "--no-verify")
    assert len(done["new"]) == 3
    assert done["tombstones"] == 1
    assert memories(second) == memories(f"sqlite:///{tmp_path / 'a.db'}")
    # Written back from the second store, the folder is byte for byte what it was.
    again = ok(capsys, "--db", second, "git", "export", "--repo", REPO)
    assert again["written"] == []
    assert clone.run("status", "--porcelain") == ""
    # And a re-run adds nothing.
    done = ok(capsys, "--db", second, "git", "import", "--no-verify")
    assert done["new"] == []
    assert done["events"] == 0
    assert done["unchanged"] == 3


@pytest.mark.postgres
def test_round_trip_into_postgres(clone: GitRepo, pg_url: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    store(capsys, "Kept", "app/net.py:1-2", "--tag", "t")
    store(capsys, "Other", "app/net.py:5-6", "--category", "convention")
    ok(capsys, "git", "export", "--repo", REPO)
    clone.commit("[memory] export")
    ok(capsys, "--db", pg_url, "git", "import", "--no-verify")
    assert memories(pg_url) == memories(f"sqlite:///{clone.path.parent / 'a.db'}")
    assert ok(capsys, "--db", pg_url, "git", "export", "--repo", REPO)["written"] == []


def test_new_memories_are_verified_at_the_main_lines_tip(
        clone: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    holds = store(capsys, "Holds", "app/net.py:1-2")
    breaks = store(capsys, "Breaks", "app/net.py:5-6")
    ok(capsys, "git", "export", "--repo", REPO)
    clone.write("app/net.py", NET.replace("return x + 1\n", "return x * 100\n"))
    on_main(clone, "change f1 and export memories")
    second = f"sqlite:///{tmp_path / 'b.db'}"
    done = ok(capsys, "--db", second, "git", "import")
    assert done["scope"] == "verdict"
    assert done["verified"] == {"invalidate": 1, "refresh": 1}
    after = {m["id"]: m for m in memories(second)}
    assert after[holds]["status"] == "active"
    assert after[holds]["verified_ref"] == "main"
    assert after[breaks]["status"] == "invalid"


def test_only_the_active_memories_imported_are_verified_and_counted(
        clone: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An invalid or superseded memory in the folder is imported as it is: a pass over
    it judges nothing, so the summary does not count it as refreshed or invalidated."""
    retired = store(capsys, "Retired", "app/net.py:1-2")
    ok(capsys, "invalidate", retired, "--reason", "no longer true")
    old = store(capsys, "Old", "app/net.py:5-6")
    new = ok(capsys, "supersede", old, "--subject", "New", "--fact", "New fact.",
             "--cite", "app/net.py:9-10")["id"]
    ok(capsys, "git", "export", "--repo", REPO)
    clone.write("app/net.py", NET.replace("return x + 1\n", "return x * 100\n"))
    on_main(clone, "change f1 (what the old memory cites), export memories")
    second = f"sqlite:///{tmp_path / 'b.db'}"
    done = ok(capsys, "--db", second, "git", "import")
    assert sorted(done["new"]) == sorted([retired, old, new])
    assert done["verified"] == {"refresh": 1}
    assert {m["id"]: m["status"] for m in memories(second)} == {
        retired: "invalid", old: "superseded", new: "active"}


def test_an_unknown_ref_is_refused_before_anything_is_imported(
        clone: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store(capsys, "Holds", "app/net.py:1-2")
    ok(capsys, "git", "export", "--repo", REPO)
    second = f"sqlite:///{tmp_path / 'b.db'}"
    code, out, err = vmem(capsys, "--db", second, "git", "import", "--ref", "no-such-ref")
    assert (code, out) == (1, "")
    assert err.startswith("vmem: error: ref 'no-such-ref' does not exist in ")
    assert not (tmp_path / "b.db").exists()  # not imported, and no empty store left
    assert ok(capsys, "--db", second, "git", "import")["verified"] == {"refresh": 1}


def test_on_a_branch_the_check_after_import_is_a_view(
        clone: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    breaks = store(capsys, "Breaks", "app/net.py:5-6")
    ok(capsys, "git", "export", "--repo", REPO)
    clone.run("checkout", "-q", "-b", "topic")
    clone.write("app/net.py", NET.replace("return x + 1\n", "return x * 100\n"))
    clone.commit("change f1 on a branch")
    second = f"sqlite:///{tmp_path / 'b.db'}"
    done = ok(capsys, "--db", second, "git", "import")
    assert done["scope"] == "view"
    assert {m["id"]: m["status"] for m in memories(second)} == {breaks: "active"}


def test_an_event_the_folder_holds_twice_is_read_once(
        clone: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same event can reach the folder twice: in a session's log and in a teammate's
    export of a store that imported it, on two branches merged since; or a line repeated
    in one log. One event (its key), read once, by an import and by the folder as the
    store; a key repeated with other contents is refused, naming both."""
    memory = store(capsys, "Holds", "app/net.py:1-2")
    ok(capsys, "applied", memory)
    ok(capsys, "git", "export", "--repo", REPO)
    (log,) = (clone.path / ".memory" / "_events").rglob("*.jsonl")
    lines = log.read_text().splitlines(keepends=True)
    assert len(lines) == 2
    session = log.with_name("vmem__alice-session.jsonl")
    session.write_text(lines[1])  # as the repository store writes a session's log
    log.write_text("".join(lines + lines[1:]))  # and once more in the export's log
    on_main(clone, "[memory] both branches merged")
    second = f"sqlite:///{tmp_path / 'b.db'}"
    assert ok(capsys, "--db", second, "git", "import", "--no-verify")["events"] == 2
    assert len(ok(capsys, "--db", "git:.memory", "log", memory, "--reads")) == 2
    session.write_text(lines[1].replace('"kind":"applied"', '"kind":"feedback"'))
    code, _, err = vmem(capsys, "--db", second, "git", "import", "--no-verify")
    assert code == 1
    assert re.search(r"vmem__export\.jsonl: line 2: event key \w+ is also on line 1 of "
                     r"\.memory/_events/.*/vmem__alice-session\.jsonl, with other contents",
                     err), err


def test_two_branches_adding_memories_merge_without_conflicts(
        clone: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store(capsys, "Base", "app/net.py:1-2")
    ok(capsys, "git", "export", "--repo", REPO)
    clone.commit("[memory] base")
    added = {}
    for branch, cite in (("alice", "app/net.py:5-6"), ("bob", "app/net.py:9-10")):
        db = f"sqlite:///{tmp_path / f'{branch}.db'}"
        clone.run("checkout", "-q", "-b", branch, "main")
        ok(capsys, "--db", db, "git", "import", "--no-verify")
        added[branch] = store(capsys, f"From {branch}", cite, "--category", "convention",
                              db=db)
        ok(capsys, "--db", db, "git", "export", "--repo", REPO, "--commit")
    clone.run("checkout", "-q", "alice")
    clone.run("merge", "-q", "--no-edit", "bob")  # raises on a conflict
    assert clone.run("status", "--porcelain") == ""
    index = (clone.path / ".memory" / "index.md").read_text()
    assert added["alice"] in index
    assert added["bob"] in index
    merged = f"sqlite:///{tmp_path / 'merged.db'}"
    done = ok(capsys, "--db", merged, "git", "import", "--no-verify")
    assert len(done["new"]) == 3
    assert {m["subject"] for m in memories(merged)} == {"Base", "From alice", "From bob"}


def test_hand_edits_supersede_and_deletions_invalidate(
        clone: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    edited = store(capsys, "Edited", "app/net.py:1-2")
    deleted = store(capsys, "Deleted", "app/net.py:5-6")
    same = store(capsys, "Same", "app/net.py:9-10")
    ok(capsys, "git", "export", "--repo", REPO)
    clone.commit("[memory] export")
    folder = clone.path / ".memory" / "uncategorized"
    (path,) = folder.glob(f"{edited}_*.md")
    text = path.read_text().replace("Edited: the fact.", "Edited: reworded by hand.")
    path.write_text(text.replace("line_start: 1\n    line_end: 2", "line_start: 13\n"
                                                                  "    line_end: 14"))
    next(folder.glob(f"{deleted}_*.md")).unlink()
    on_main(clone, "review: reword a memory, drop another")  # merged: the main line's tip
    done = ok(capsys, "git", "import")
    ((old, new),) = done["superseded"]
    assert old == edited
    assert done["invalidated"] == [deleted]
    assert done["unchanged"] == 1
    shown = ok(capsys, "show", new)
    assert shown["fact"] == "Edited: reworded by hand."
    assert shown["supersedes"] == edited
    assert (shown["citations"][0]["line_start"], shown["citations"][0]["line_end"]) == (13, 14)
    assert ok(capsys, "show", edited)["status"] == "superseded"
    assert ok(capsys, "show", deleted)["status"] == "invalid"
    assert ok(capsys, "show", same)["status"] == "active"
    again = ok(capsys, "git", "import")  # the folder has not been exported since
    assert again["superseded"] == []
    assert again["invalidated"] == []
    assert again["new"] == []
    ok(capsys, "git", "export", "--repo", REPO)  # the store's view, every status kept
    assert "\nstatus: superseded\n" in path.read_text()
    assert "Edited: reworded by hand." in next(folder.glob(f"{new}_*.md")).read_text()
    assert "\nstatus: invalid\n" in next(folder.glob(f"{deleted}_*.md")).read_text()


def exported_pair(clone: GitRepo, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """Two memories stored and exported (not committed): the ids of the one a pull
    request will edit and of the one it will delete."""
    edited = store(capsys, "Edited", "app/net.py:1-2")
    deleted = store(capsys, "Deleted", "app/net.py:5-6")
    ok(capsys, "git", "export", "--repo", REPO)
    return edited, deleted


def reword_one_drop_the_other(clone: GitRepo, edited: str, deleted: str) -> None:
    """A pull request's commit: one memory's fact reworded, the other's file deleted."""
    folder = clone.path / ".memory" / "uncategorized"
    (path,) = folder.glob(f"{edited}_*.md")
    path.write_text(path.read_text().replace("Edited: the fact.", "Edited: reworded."))
    next(folder.glob(f"{deleted}_*.md")).unlink()
    clone.commit("a pull request rewords one memory and drops another")


def test_on_a_branch_hand_edits_and_deletions_are_held_back_until_applied(
        clone: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    edited, deleted = exported_pair(clone, capsys)
    on_main(clone, "[memory] export")
    clone.run("checkout", "-q", "-b", "proposal")
    reword_one_drop_the_other(clone, edited, deleted)
    done = ok(capsys, "git", "import")  # a branch: a proposal, not the main line
    assert (done["superseded"], done["invalidated"]) == ([], [])
    assert sorted(done["held_back"]) == sorted([edited, deleted])
    assert ok(capsys, "show", edited)["status"] == "active"
    assert ok(capsys, "show", deleted)["status"] == "active"
    code, _, err = vmem(capsys, "git", "import")
    assert code == 0
    assert "held back" in err
    clone.run("checkout", "-q", "main")
    clone.run("merge", "-q", "proposal")
    clone.write("app/later.py", "LATER = 1\n")
    on_main(clone, "later work on main")
    clone.run("checkout", "-q", "proposal")  # merged, no longer the tip
    assert ok(capsys, "git", "import")["held_back"]
    applied = ok(capsys, "git", "import", "--apply")  # as vmem review --apply after a merge
    assert [old for old, _ in applied["superseded"]] == [edited]
    assert applied["invalidated"] == [deleted]
    assert ok(capsys, "show", deleted)["status"] == "invalid"


def test_an_apply_where_the_main_line_cannot_be_told_holds_edits_back(
        clone: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    # Without origin and with no main or master, nothing says the commit is on the main
    # line: --apply is refused by the ref rule (before, it superseded and invalidated).
    edited, deleted = exported_pair(clone, capsys)
    clone.commit("[memory] export")
    clone.run("remote", "remove", "origin")
    clone.run("branch", "-m", "main", "trunk")
    reword_one_drop_the_other(clone, edited, deleted)
    code, out, err = vmem(capsys, "git", "import", "--apply", "--json")
    assert code == 0, err
    done = json.loads(out)
    assert (done["superseded"], done["invalidated"]) == ([], [])
    assert sorted(done["held_back"]) == sorted([edited, deleted])
    (why,) = done["held_why"]
    assert why.startswith("not applied at ")
    assert "cannot tell which branch is this repository's main line" in why
    assert ok(capsys, "show", edited)["status"] == "active"
    assert ok(capsys, "show", deleted)["status"] == "active"
    code, _, err = vmem(capsys, "git", "import", "--apply")
    assert code == 0
    (line,) = [line for line in err.splitlines() if "held back" in line]
    assert "cannot tell which branch" in line
    assert "Traceback" not in err


def test_a_range_narrowed_by_hand_is_fingerprinted_again(
        clone: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    memory, path = exported(clone, capsys, "Narrowed", "app/net.py:1-4")
    # Only the range is edited: the file still holds the hashes of four lines.
    path.write_text(path.read_text().replace("line_end: 4\n", "line_end: 2\n"))
    on_main(clone, "narrow a citation")
    ((old, new),) = ok(capsys, "git", "import")["superseded"]
    assert old == memory
    (cited,) = ok(capsys, "show", new)["citations"]
    assert (cited["line_start"], cited["line_end"], len(cited["line_hashes"])) == (1, 2, 2)


def test_a_tombstone_in_the_folder_forgets_the_memory_here_too(
        clone: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Forgotten in one store (a leaked secret): a teammate's import forgets it in theirs,
    and their next export does not write the text back into the repository."""
    theirs = f"sqlite:///{tmp_path / 'b.db'}"
    leaked = store(capsys, "Staging", "app/net.py:1-2")
    ok(capsys, "git", "export", "--repo", REPO)
    on_main(clone, "[memory] export")
    assert ok(capsys, "--db", theirs, "git", "import")["new"] == [leaked]
    ok(capsys, "forget", leaked, "--reason", "a leaked password")
    ok(capsys, "git", "export", "--repo", REPO)
    on_main(clone, "[memory] forget")
    done = ok(capsys, "--db", theirs, "git", "import")
    assert done["erased"] == [leaked]
    code, _, err = vmem(capsys, "--db", theirs, "show", leaked)
    assert code == 1
    assert "was forgotten" in err
    assert "a leaked password (forgotten by" in err
    ok(capsys, "--db", theirs, "git", "export", "--repo", REPO)
    folder = clone.path / ".memory"
    assert not any("Staging: the fact." in p.read_text() for p in folder.rglob("*.md"))
    assert ok(capsys, "--db", theirs, "git", "import")["erased"] == []  # a re-run: nothing


def test_a_pending_memory_whose_file_was_deleted_stays_pending_and_is_named(
        clone: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    rule = store(capsys, "Refunds", "app/net.py:1-2", "--category", "business_rule")
    ok(capsys, "git", "export", "--repo", REPO)
    next((clone.path / ".memory").rglob(f"{rule}_*.md")).unlink()
    on_main(clone, "drop a proposed rule")
    assert ok(capsys, "git", "import")["unreviewed"] == [rule]
    code, _, err = vmem(capsys, "git", "import")
    assert code == 0
    assert "1 pending memory whose file was deleted" in err
    assert rule[:8] in err
    assert ok(capsys, "show", rule)["status"] == "pending"


def test_a_hand_edit_of_an_approved_rule_is_one_correction_waiting_for_approval(
        clone: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    # The edit supersedes the rule only once approved; until then the rule stays active,
    # and importing the folder again does not propose the correction twice.
    rule = store(capsys, "Refunds", "app/net.py:1-2", "--category", "business_rule")
    ok(capsys, "approve", rule, "--by", "bob")
    ok(capsys, "git", "export", "--repo", REPO)
    path = next((clone.path / ".memory").rglob(f"{rule}_*.md"))
    path.write_text(path.read_text().replace("Refunds: the fact.", "Refunds: reworded."))
    on_main(clone, "reword a rule")
    ((old, new),) = ok(capsys, "git", "import")["superseded"]
    assert old == rule
    assert ok(capsys, "show", new)["status"] == "pending"
    assert ok(capsys, "show", rule)["status"] == "active"
    again = ok(capsys, "git", "import")
    assert (again["superseded"], again["unchanged"]) == ([], 1)
    assert [m["id"] for m in ok(capsys, "pending", "--repo", REPO)] == [new]


def test_a_merge_conflict_left_in_a_memory_file_is_refused(
        clone: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    memory, path = exported(clone, capsys, "Conflicted", "app/net.py:1-2")
    text = path.read_text()
    path.write_text(text.replace("Conflicted: the fact.\n", "<<<<<<< HEAD\nours\n=======\n"
                                                            "theirs\n>>>>>>> branch\n"))
    code, _, err = vmem(capsys, "git", "import")
    assert code == 1
    assert "a merge conflict marker (<<<<<<<): resolve the conflict first" in err
    assert ok(capsys, "show", memory)["fact"] == "Conflicted: the fact."


@pytest.mark.parametrize(("change", "said"), [
    (lambda t: t.replace("line_start: 1\n", "line_start: one\n"),
     "citations[0].line_start must be a line number from 1, got 'one'"),
    (lambda t: t.replace("subject: Edited\n", "subject: a: b\n"),
     "line 4: subject: 'a: b' is not a plain YAML string; put it in double quotes"),
    (lambda t: t.replace("status: active\n", "status: alive\n"),
     "status must be one of"),
    (lambda t: t.replace("line_start: 1\n    line_end: 2", "line_start: 900\n"
                                                          "    line_end: 901"),
     "citations[0]: lines 900-901 are past the end of app/net.py"),
    (lambda t: t.replace("---\n", "", 1), "starts with a '---' line"),
    (lambda t: t.replace("repo: acme/app\n", "repo: acme/app\nextra: 1\n"),
     "unknown field(s) in a memory: extra"),
    (lambda t: re.sub(r"\nid: \S+\n", "\nid: zzz\n", t),
     "id zzz is not the one the file is named by"),
])
def test_bad_input_is_one_line_naming_file_and_field_and_nothing_is_written(
        clone: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        change: Any, said: str) -> None:
    edited = store(capsys, "Edited", "app/net.py:1-2")
    new = store(capsys, "Fresh", "app/net.py:5-6", db=f"sqlite:///{tmp_path / 'other.db'}")
    ok(capsys, "--db", f"sqlite:///{tmp_path / 'other.db'}", "git", "export", "--repo", REPO)
    ok(capsys, "git", "export", "--repo", REPO)
    (path,) = (clone.path / ".memory" / "uncategorized").glob(f"{edited}_*.md")
    path.write_text(change(path.read_text()))
    before = memories(f"sqlite:///{tmp_path / 'a.db'}")
    code, out, err = vmem(capsys, "git", "import")
    assert code == 1
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("vmem: error: .memory/uncategorized/")
    assert said in err
    assert memories(f"sqlite:///{tmp_path / 'a.db'}") == before  # the new one not added
    assert new not in {m["id"] for m in before}


def test_a_folder_refused_leaves_no_new_store_behind(
        clone: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, path = exported(clone, capsys, "Odd", "app/net.py:1-2")
    path.write_text(path.read_text().replace("status: active", "status: zombie"))
    code, _, err = vmem(capsys, "--db", f"sqlite:///{tmp_path / 'fresh.db'}", "git", "import")
    assert code == 1
    assert "status must be one of" in err
    assert list(tmp_path.glob("fresh.db*")) == []


def test_a_memory_edited_after_it_was_invalidated_is_refused(
        clone: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    memory, path = exported(clone, capsys, "Gone", "app/net.py:1-2")
    ok(capsys, "invalidate", memory, "--reason", "wrong")
    path.write_text(path.read_text().replace("Gone: the fact.", "Gone: new words."))
    code, _, err = vmem(capsys, "git", "import")
    assert code == 1
    assert f"memory {memory} was edited, but it is invalid" in err


def test_commit_makes_one_memory_commit_and_leaves_other_staged_work_alone(
        clone: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    store(capsys, "One", "app/net.py:1-2")
    clone.write("other.txt", "staged, not a memory\n")
    clone.run("add", "other.txt")
    done = ok(capsys, "git", "export", "--repo", REPO, "--commit")
    assert done["commit"] == clone.head
    assert clone.run("log", "-1", "--format=%s").startswith("[memory] export 1 memories")
    changed = clone.run("show", "--name-only", "--format=", "HEAD").splitlines()
    assert all(p.startswith(".memory/") for p in changed)
    assert len(changed) >= 4
    assert clone.run("diff", "--cached", "--name-only") == "other.txt"
    again = ok(capsys, "git", "export", "--repo", REPO, "--commit")
    assert again["commit"] is None  # nothing changed: no empty commit


def test_a_commit_outside_a_working_copy_is_refused_before_the_folder_is_written(
        clone: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store(capsys, "One", "app/net.py:1-2")
    outside = tmp_path / "elsewhere" / "memories"
    code, out, err = vmem(capsys, "git", "export", "--repo", REPO, "--dir", str(outside),
                          "--commit")
    assert (code, out) == (1, "")
    assert err == f"vmem: error: {outside} is not inside a git working copy: cannot --commit\n"
    assert not outside.exists()


def test_readme_git_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    section = readme.split("\n## Memories in the repository\n", 1)[1].split("\n## ", 1)[0]
    export, repository_store = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    repo = GitRepo.project(tmp_path / "app", {"app/net.py": NET},
                           origin="https://github.com/acme/app.git")
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{tmp_path / 'docs.db'}")
    # The vmem on PATH runs this checkout's package, whichever one is installed.
    root = str(Path(__file__).parent.parent)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))

    def run(script: str) -> str:
        done = subprocess.run(["bash", "-ec", script], capture_output=True, text=True,
                              env=env, check=False)
        assert done.returncode == 0, f"{script}\n{done.stderr}"
        return done.stdout

    run(export)
    assert repo.run("log", "-1", "--format=%s").startswith("[memory] export 1 memories")
    assert repo.run("status", "--porcelain", "--", ".memory") == ""
    with SQLiteStore(tmp_path / "app" / "teammate.db") as teammate:
        assert [m.subject for m in teammate.recent("acme/app")] == ["Retry budget"]
    said = run(repository_store)
    assert "Timeout" in said
    assert "rebuilt the index" in said
    assert list((repo.path / ".memory").glob("uncategorized/*_timeout.md"))
