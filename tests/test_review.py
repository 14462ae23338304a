"""The review bot on local repositories: real git branches that keep, move, edit and delete
cited code, a real SQLite store, and the ``vmem review`` command."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import GitRepo
from tests.test_cli import CODE, vmem
from verified_memory import LocalGitSource, MemoryService, Status
from verified_memory.errors import NotFound, ValidationError
from verified_memory.models import Location, Scope
from verified_memory.review import (
    FindingKind,
    Links,
    ReviewReport,
    parse_patch,
    render_finding,
    render_markdown,
    review,
    web_url,
)
from verified_memory.review.git import local_diff, parse_diff, remote_web_url
from verified_memory.store.sqlite import SQLiteStore

FETCH = CODE + """

def close():
    return None
"""
# lines: 1 MAX_RETRIES, 4-8 fetch, 11-12 close

OTHER = "def helper():\n    return 42\n"


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    return GitRepo.project(tmp_path / "work", {"net/fetch.py": FETCH, "net/other.py": OTHER},
                             origin="git@github.com:acme/net.git")


@pytest.fixture
def service(repo: GitRepo, tmp_path: Path) -> Iterator[MemoryService]:
    with MemoryService(SQLiteStore(tmp_path / "review.db"), LocalGitSource(repo.path)) as svc:
        yield svc


def remember(service: MemoryService, subject: str, *cites: tuple[str, int, int],
             ref: str = "HEAD") -> str:
    return service.store({
        "repo": "acme/net", "subject": subject, "fact": f"{subject}: a convention",
        "citations": [{"path": p, "line_start": a, "line_end": b} for p, a, b in cites],
    }, ref=ref).id


@pytest.fixture
def memories(service: MemoryService) -> dict[str, str]:
    return {
        "const": remember(service, "Retry budget", ("net/fetch.py", 1, 1)),
        "fetch": remember(service, "Fetch loop", ("net/fetch.py", 4, 8)),
        "close": remember(service, "Close is a no-op", ("net/fetch.py", 11, 12)),
        "other": remember(service, "Helper answers 42", ("net/other.py", 1, 2)),
    }


def branch(repo: GitRepo, name: str, content: str | None, path: str = "net/fetch.py") -> str:
    repo.run("checkout", "-q", "-b", name, "main")
    if content is None:
        repo.remove(path)
    else:
        repo.write(path, content)
    sha = repo.commit(name)
    repo.run("checkout", "-q", "main")
    return sha


def run(service: MemoryService, repo: GitRepo, head: str, base: str = "main",
        **kw: Any) -> ReviewReport:
    return review(service, "acme/net", local_diff(repo.path, base, head),
                  links=Links("acme/net", "https://github.com"), **kw)


def kinds(report: ReviewReport, memories: dict[str, str]) -> dict[str, str]:
    names = {v: k for k, v in memories.items()}
    return {names[f.memory.id]: f.kind.value for f in report.findings}


def snapshot(service: MemoryService) -> list[dict[str, Any]]:
    return [m.to_dict() for m in service.memories.recent("acme/net", limit=None, status=None)]


# --------------------------------------------------------------------------- kinds


def test_keep_reformatted_cited_code_is_a_reminder(repo: GitRepo, service: MemoryService,
                                                    memories: dict[str, str]) -> None:
    head = branch(repo, "keep", FETCH.replace("if get(url):", "if get( url ):"))
    report = run(service, repo, "keep")
    assert kinds(report, memories) == {"fetch": "holds"}
    (finding,) = report.findings
    assert report.head_commit == head
    cited = finding.citations[0]
    assert cited.touched
    assert cited.check.outcome.value == "valid"
    assert cited.link == f"https://github.com/acme/net/blob/{head}/net/fetch.py#L4-L8"
    assert finding.comment is not None
    assert (finding.comment.path, finding.comment.line, finding.comment.side) == (
        "net/fetch.py", 6, "RIGHT")
    assert "keep to the convention" in finding.advice(applied=False)


def test_move_cited_code_is_a_reminder_with_its_new_place(
        repo: GitRepo, service: MemoryService, memories: dict[str, str]) -> None:
    fetch_block = "\n".join(FETCH.splitlines()[3:8]) + "\n"
    repo.run("checkout", "-q", "-b", "move")
    repo.write("net/fetch.py", FETCH.replace(fetch_block + "\n\n", ""))
    repo.write("net/retry.py", "from net.fetch import get\n\n\n" + fetch_block)
    head = repo.commit("move fetch to its own module")
    repo.run("checkout", "-q", "main")
    report = run(service, repo, "move")
    assert kinds(report, memories) == {"fetch": "holds"}
    (finding,) = report.findings
    check = finding.citations[0].check
    assert check.outcome.value == "relocated"
    assert check.location == Location("net/retry.py", 4, 8)
    assert finding.citations[0].link == (
        f"https://github.com/acme/net/blob/{head}/net/retry.py#L4-L8")
    assert finding.comment is not None
    assert (finding.comment.path, finding.comment.line, finding.comment.side) == (
        "net/retry.py", 4, "RIGHT")
    assert "it moved" in finding.advice(applied=False)


def test_edit_cited_code_breaks_the_memories(repo: GitRepo, service: MemoryService,
                                              memories: dict[str, str]) -> None:
    branch(repo, "edit", FETCH.replace("MAX_RETRIES = 3", "MAX_RETRIES = 5")
           .replace("range(MAX_RETRIES)", "range(MAX_RETRIES + 1)"))
    report = run(service, repo, "edit")
    assert kinds(report, memories) == {"const": "breaks", "fetch": "breaks"}
    fetch = next(f for f in report.findings if f.memory.id == memories["fetch"])
    check = fetch.citations[0].check
    assert check.outcome.value == "changed"
    assert check.similarity is not None
    assert 0.5 < check.similarity < 1
    advice = fetch.advice(applied=False)
    assert f"vmem supersede {memories['fetch']}" in advice
    assert f"vmem invalidate {memories['fetch']}" in advice
    const = next(f for f in report.findings if f.memory.id == memories["const"])
    # The constant is still there by name (a declaration is its own anchor) with another
    # value: changed where it stands, not gone.
    assert const.citations[0].check.outcome.value == "changed"
    assert const.citations[0].check.location == Location("net/fetch.py", 1, 1)
    assert not const.citations[0].rewritten
    assert "`net/fetch.py:1` **changed**: 92% of the cited lines survive" in render_finding(const)
    assert const.comment is not None
    assert (const.comment.side, const.comment.line) == ("RIGHT", 1)  # on its new line


def test_delete_cited_code_and_a_whole_file(repo: GitRepo, service: MemoryService,
                                            memories: dict[str, str]) -> None:
    base = repo.head
    without_close = FETCH.replace("\n\ndef close():\n    return None\n", "\n")
    branch(repo, "delete", without_close)
    report = run(service, repo, "delete")
    assert kinds(report, memories) == {"close": "deletes"}
    (finding,) = report.findings
    cited = finding.citations[0]
    assert cited.check.outcome.value == "missing"
    assert not cited.rewritten
    assert cited.link == f"https://github.com/acme/net/blob/{base}/net/fetch.py#L11-L12"
    assert "**gone**" in render_finding(finding)
    assert finding.comment is not None
    assert (finding.comment.side, finding.comment.line) == ("LEFT", 11)

    branch(repo, "drop-file", None, path="net/other.py")
    report = run(service, repo, "drop-file")
    assert kinds(report, memories) == {"other": "deletes"}
    assert report.findings[0].comment is not None
    assert report.findings[0].comment.path == "net/other.py"


def test_changes_beside_cited_code_are_not_findings(repo: GitRepo, service: MemoryService,
                                                    memories: dict[str, str]) -> None:
    branch(repo, "beside", FETCH + "\n\ndef reset():\n    pass\n")
    report = run(service, repo, "beside")
    assert report.findings == ()
    assert report.files == 1
    assert "touches no code that a memory cites" in render_markdown(report)


# --------------------------------------------------------------------------- no changes


def test_a_review_changes_no_memory_and_writes_only_telemetry(
        repo: GitRepo, service: MemoryService, memories: dict[str, str]) -> None:
    branch(repo, "edit", FETCH.replace("MAX_RETRIES = 3", "MAX_RETRIES = 5"))
    before = snapshot(service)
    events_before = len(service.memories.events(repo="acme/net"))
    report = run(service, repo, "edit")
    assert kinds(report, memories) == {"const": "breaks"}
    assert snapshot(service) == before
    new = service.memories.events(repo="acme/net")[events_before:]
    # A review is a view: what it saw is "checked", never a verdict dashboards count.
    assert sorted(e.kind.value for e in new) == ["checked", "retrieved"]
    assert all(e.memory_id == memories["const"] for e in new)
    assert new[0].detail["via"] == "review"


def test_apply_after_the_merge_changes_memories_for_real(
        repo: GitRepo, service: MemoryService, memories: dict[str, str]) -> None:
    edited = (FETCH.replace("MAX_RETRIES = 3", "MAX_RETRIES = 5")
              .replace("def close():\n    return None\n",
                       "def close():\n    return None\n\n\ndef open_():\n    pass\n"))
    # The merge: main moves on; the cited fetch loop shifts down by nothing, close holds.
    old = repo.head
    repo.write("net/fetch.py", "import get\n" + edited)
    merged = repo.commit("merge the edit")
    report = run(service, repo, merged, base=old, apply=True)
    assert report.applied
    assert kinds(report, memories) == {"const": "breaks"}
    assert service.memories.get(memories["const"]).status is Status.INVALID
    # Memories citing the changed file but not touched were brought up to date too.
    assert report.updated == 2
    fetch = service.memories.get(memories["fetch"])
    assert fetch.status is Status.ACTIVE
    assert (fetch.citations[0].line_start, fetch.citations[0].line_end) == (5, 9)
    assert fetch.citations[0].sha == merged
    assert service.memories.get(memories["other"]).verification_count == 0
    assert "was invalidated" in report.findings[0].advice(applied=True)
    # An apply that judged nothing (a later commit's verdict stands) does not say it did.
    not_judged = replace(report.findings[0], verification=replace(
        report.findings[0].verification, memory=fetch, scope=Scope.BEHIND, change=None,
        reason="not judged: it was judged at a later commit of main (abc), whose verdict "
               "stands"))
    assert not_judged.advice(applied=True) == (
        "The memory was not changed: not judged: it was judged at a later commit of main "
        "(abc), whose verdict stands.")


def test_citations_are_located_at_the_base_not_where_they_were_stored(
        repo: GitRepo, service: MemoryService, memories: dict[str, str]) -> None:
    # main moves on without a verification pass: close() now sits at 14-15, and the
    # stored citation (11-12, pinned at the first commit) no longer names it.
    shifted = "import a\nimport b\nimport c\n" + FETCH
    repo.write("net/fetch.py", shifted)
    repo.commit("imports")
    edited = shifted.replace("    return None\n", "    return 0\n")
    branch(repo, "edit-close", edited)
    report = run(service, repo, "edit-close")
    assert kinds(report, memories) == {"close": "breaks"}
    assert report.findings[0].citations[0].base_location == Location("net/fetch.py", 14, 15)
    # and an edit of lines 11-12 as they are now (inside fetch) does not flag close()
    branch(repo, "edit-11", shifted.replace("            return True", "            return 1"))
    report = run(service, repo, "edit-11")
    assert kinds(report, memories) == {"fetch": "breaks"}


def test_memories_already_broken_at_the_base_are_a_note(
        repo: GitRepo, service: MemoryService, memories: dict[str, str]) -> None:
    repo.write("net/other.py", "def helper():\n    return 41\n")
    repo.commit("broken on main already")
    branch(repo, "touch-other", "def helper():\n    return 40\n", path="net/other.py")
    report = run(service, repo, "touch-other")
    assert report.findings == ()
    assert report.stale == (memories["other"],)
    assert any("did not hold even at the base" in n for n in report.notes)


def test_branch_memories_are_not_named_as_broken_at_the_base(
        repo: GitRepo, service: MemoryService, memories: dict[str, str]) -> None:
    # A memory stored on the branch under review (citing lines it adds) and one stored
    # on another unmerged branch: neither is a claim about the main line, so neither
    # "did not hold at the base"; they are named apart, as branch memories.
    broken = "def helper():\n    return 41\n"
    repo.write("net/other.py", broken)
    repo.commit("broken on main already")
    branch(repo, "grow", broken + "\n\ndef twice():\n    return 84\n", path="net/other.py")
    mine = remember(service, "Twice answers 84", ("net/other.py", 5, 6), ref="grow")
    branch(repo, "elsewhere", broken + "\n\ndef thrice():\n    return 126\n",
           path="net/other.py")
    theirs = remember(service, "Thrice answers 126", ("net/other.py", 5, 6), ref="elsewhere")
    report = run(service, repo, "grow")
    assert report.stale == (memories["other"],)
    assert report.branch == tuple(sorted((mine, theirs)))
    (stale,) = [n for n in report.notes if "did not hold even at the base" in n]
    assert memories["other"] in stale
    assert not {mine, theirs} & set(re.findall(r"[0-9a-f-]{36}", stale))
    (on_branch,) = [n for n in report.notes if "stored on a branch" in n]
    assert set(re.findall(r"[0-9a-f-]{36}", on_branch)) == {mine, theirs}
    assert report.to_dict()["branch"] == sorted((mine, theirs))


def test_main_line_memories_newer_than_the_base_are_neither_stale_nor_branch(
        repo: GitRepo, service: MemoryService, memories: dict[str, str]) -> None:
    # The branch is cut, then main moves on: it adds reset() and memories are stored
    # about it there, one judged at main's tip since. Neither holds at the merge base
    # (reset() is not there yet), yet neither is stale (verifying main changes nothing)
    # nor stored on a branch: they are newer than the base, and named so.
    branch(repo, "feature", FETCH.replace("MAX_RETRIES = 3", "MAX_RETRIES = 4")
           + "\n\ndef grow():\n    return 1\n")
    repo.write("net/fetch.py", FETCH + "\n\ndef reset():\n    return 0\n")
    repo.commit("main adds reset")
    unjudged = remember(service, "Reset answers 0", ("net/fetch.py", 15, 16))
    judged = remember(service, "Reset is a function", ("net/fetch.py", 14, 16))
    (check,) = service.verify([judged]).verifications
    assert check.judged
    assert service.memories.get(judged).verified_ref == "main"
    report = run(service, repo, "feature")
    assert kinds(report, memories) == {"const": "breaks"}
    assert report.stale == ()
    assert report.branch == ()
    assert report.newer == tuple(sorted((unjudged, judged)))
    assert report.to_dict()["newer"] == sorted((unjudged, judged))
    (newer,) = [n for n in report.notes if "after the base" in n]
    assert set(re.findall(r"[0-9a-f-]{36}", newer)) == {unjudged, judged}
    assert not any("did not hold even at the base" in n or "stored on a branch" in n
                   for n in report.notes)


def test_one_branch_memory_is_named_in_the_singular(
        repo: GitRepo, service: MemoryService, memories: dict[str, str]) -> None:
    branch(repo, "grow", OTHER + "\n\ndef twice():\n    return 84\n", path="net/other.py")
    mine = remember(service, "Twice answers 84", ("net/other.py", 5, 6), ref="grow")
    report = run(service, repo, "grow")
    assert report.branch == (mine,)
    assert any(n.startswith("1 memory citing changed files was stored on a branch ") and
               "and does not hold at the base" in n for n in report.notes)


# --------------------------------------------------------------------------- bases


def test_a_base_that_moved_on_is_diffed_from_the_merge_base(
        repo: GitRepo, service: MemoryService, memories: dict[str, str]) -> None:
    fork = repo.head
    branch(repo, "feature", FETCH.replace("MAX_RETRIES = 3", "MAX_RETRIES = 4"))
    repo.write("net/other.py", "def helper():\n    return 43\n")  # main moves on
    repo.commit("main moves")
    report = run(service, repo, "feature")
    assert report.base_commit == fork
    assert kinds(report, memories) == {"const": "breaks"}  # not main's own edit of other.py
    assert any("main is not an ancestor of feature" in n and fork[:12] in n
               for n in report.notes)


def test_bases_without_a_change_to_review_are_refused(repo: GitRepo) -> None:
    branch(repo, "feature", FETCH + "# more\n")
    with pytest.raises(ValidationError, match="is already part of --base feature"):
        local_diff(repo.path, "feature", "main")
    repo.run("checkout", "-q", "--orphan", "unrelated")
    repo.write("x.py", "x = 1\n")
    repo.commit("unrelated history")
    with pytest.raises(ValidationError, match="is not an ancestor of --head unrelated, and "
                                              "they share no history"):
        local_diff(repo.path, "main", "unrelated")
    with pytest.raises(NotFound, match="--base 'nope' does not exist"):
        local_diff(repo.path, "nope", "HEAD")
    same = local_diff(repo.path, "main", "main")
    assert same.files == ()
    assert "same commit" in same.notes[0]


def test_uncommitted_edits_of_the_commit_reviewed_are_named_in_a_note(
        repo: GitRepo, service: MemoryService, memories: dict[str, str]) -> None:
    """`vmem review` before a commit: the edit is not in the diff, and the report must
    not pass for a review of it ("touches no code that a memory cites", and no more)."""
    feature = branch(repo, "feature", OTHER + "# more\n", path="net/other.py")
    repo.write("net/fetch.py", FETCH.replace("MAX_RETRIES = 3", "MAX_RETRIES = 4"))
    report = run(service, repo, "HEAD")
    assert report.findings == ()
    assert report.notes == (
        "main and HEAD are the same commit: nothing changed",
        "the working copy has uncommitted changes to 1 file, which this review does not "
        "read (it diffs commits, up to HEAD): commit them to review them")
    # A head that is not the commit checked out: the working copy is not its business.
    assert not any("uncommitted" in n for n in run(service, repo, feature).notes)
    before = repo.head
    repo.commit("four retries")
    committed = run(service, repo, "HEAD", base=before)
    assert kinds(committed, memories) == {"const": "breaks"}
    assert not any("uncommitted" in n for n in committed.notes)


def test_a_repository_without_memories(repo: GitRepo, service: MemoryService) -> None:
    branch(repo, "edit", FETCH.replace("3", "5"))
    report = run(service, repo, "edit")
    assert not report.has_memories
    assert report.findings == ()
    assert "no memories for acme/net: nothing to review" in report.notes[0]
    assert service.memories.events(repo="acme/net") == []
    retired = remember(service, "Old", ("net/fetch.py", 1, 1))
    service.invalidate(retired, "gone")
    report = run(service, repo, "edit")
    assert report.notes[0].startswith("no active memories for acme/net")


# --------------------------------------------------------------------------- diffs


def test_parse_patch_counts_lines_and_is_not_fooled_by_header_like_content() -> None:
    patch = [
        "@@ -1,4 +1,4 @@",
        " keep",
        "--- a/looks-like-a-header",
        "+@@ -9,9 +9,9 @@ not a hunk",
        " keep",
        " keep",
        "@@ -10,0 +11,2 @@ def f():",
        "+new",
        "+new",
        "\\ No newline at end of file",
    ]
    diff = parse_patch(patch, path="a.py", old_path="a.py")
    assert diff.deleted == {2}
    assert diff.added == {2, 11, 12}
    assert diff.inserted_after == {2, 10}
    assert diff.left == {1, 2, 3, 4}
    assert diff.right == {1, 2, 3, 4, 11, 12}
    assert diff.touches(2, 2)
    assert diff.touches(10, 11)  # lines inserted between 10 and 11
    assert not diff.touches(11, 20)
    assert not diff.touches(5, 9)


def test_local_diff_of_renames_binaries_and_odd_paths(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "odd")
    numbers = "".join(f"{i}\n" for i in range(1, 11))
    repo.write("old.py", numbers)
    repo.write("sp ace.py", "one\ntwo\nthree\n")
    repo.write("tab\tné.py", "q\n")
    repo.write("img.bin", b"\x00\x01bin")
    repo.write("gone.py", "a\nb\n")
    base = repo.commit("base")
    repo.move("old.py", "new.py")
    repo.write("new.py", numbers.replace("5\n", "FIVE\n"))
    repo.write("sp ace.py", "one\nthree\n")
    repo.write("tab\tné.py", "Q\n")
    repo.write("img.bin", b"\x00\x02bin")
    repo.remove("gone.py")
    head = repo.commit("change")
    files = {f.path or f.old_path: f for f in local_diff(repo.path, base, head).files}
    assert files["new.py"].old_path == "old.py"
    assert files["new.py"].status == "renamed"
    assert files["new.py"].deleted == {5}
    assert files["sp ace.py"].deleted == {2}
    assert files["tab\tné.py"].deleted == {1}
    assert files["img.bin"].whole
    assert files["gone.py"].path is None
    assert files["gone.py"].touches(1, 1)
    assert parse_diff("") == []


def test_links_and_web_hosts(repo: GitRepo) -> None:
    assert remote_web_url(repo.path, env={}) == "https://github.com"
    repo.run("remote", "set-url", "origin", "https://ghe.example.com/acme/net.git")
    assert remote_web_url(repo.path, env={}) is None
    assert remote_web_url(repo.path, env={"GITHUB_SERVER_URL": "https://ghe.example.com"}) == (
        "https://ghe.example.com")
    assert web_url("https://api.github.com", env={}) == "https://github.com"
    assert web_url("https://ghe.example.com/api/v3", env={}) == "https://ghe.example.com"
    link = Links("acme/net", "https://github.com").blob("abc", Location("a b.py", 3, 3))
    assert link == "https://github.com/acme/net/blob/abc/a%20b.py#L3"
    assert Links("acme/net").blob("abc", Location("a.py", 1, 2)) is None


# --------------------------------------------------------------------------- the command


@pytest.fixture
def cli_repo(repo: GitRepo, service: MemoryService, memories: dict[str, str],
             tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{tmp_path / 'review.db'}")
    return repo


def test_cli_review_markdown_and_json(cli_repo: GitRepo, memories: dict[str, str],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    branch(cli_repo, "edit", FETCH.replace("MAX_RETRIES = 3", "MAX_RETRIES = 5"))
    cli_repo.run("checkout", "-q", "edit")
    code, out, err = vmem(capsys, "review", "--base", "main")
    assert code == 0, err
    assert out.startswith("## verified-memory review of `acme/net`: `main`...`HEAD`")
    assert "### Breaks a convention: `Retry budget`" in out
    assert f"Memory `{memories['const']}` (active)" in out
    assert "https://github.com/acme/net/blob/" in out
    code, out, err = vmem(capsys, "review", "--base", "main", "--head", "edit", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["counts"] == {"breaks": 1, "deletes": 0, "unverifiable": 0, "holds": 0}
    assert data["findings"][0]["memory_id"] == memories["const"]
    assert data["findings"][0]["comment"]["path"] == "net/fetch.py"
    assert data["posted"] is None
    assert data["applied"] is False
    # Verdicts only after the merge: applying an unmerged branch's review is refused.
    code, out, err = vmem(capsys, "review", "--base", "main", "--apply", "--json")
    assert code == 1
    assert "it is not on main" in err
    before = cli_repo.run("rev-parse", "main")
    cli_repo.run("checkout", "-q", "main")
    cli_repo.run("merge", "-q", "--ff-only", "edit")
    code, out, err = vmem(capsys, "review", "--base", before, "--apply", "--json")
    assert code == 0, err
    assert json.loads(out)["findings"][0]["status"] == "invalid"


def test_an_apply_with_nothing_to_verify_says_nothing_was_applied(
        cli_repo: GitRepo, memories: dict[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    """A merge that touches no cited file, reviewed with --apply, reported "applied":
    true and "memories were refreshed, relocated or invalidated", though none was even
    verified."""
    before = cli_repo.head
    cli_repo.write("docs/notes.txt", "nothing any memory cites\n")
    cli_repo.commit("notes")
    code, out, err = vmem(capsys, "review", "--base", before, "--apply", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert (data["applied"], data["findings"], data["updated"]) == (False, [], 0)
    assert data["notes"] == [
        "--apply: no memory cites a changed file, so none was verified or changed"]
    code, out, err = vmem(capsys, "review", "--base", before, "--apply")
    assert code == 0, err
    assert "memories were not changed (telemetry only)" in out
    assert "_Note: --apply: no memory cites a changed file" in out


def test_an_apply_without_memories_says_nothing_was_applied(
        repo: GitRepo, service: MemoryService) -> None:
    old = repo.head
    repo.write("net/fetch.py", FETCH.replace("MAX_RETRIES = 3", "MAX_RETRIES = 5"))
    report = run(service, repo, repo.commit("five"), base=old, apply=True)
    assert not report.applied
    assert report.notes == (
        "no memories for acme/net: nothing to review (store some with `vmem store`)",
        "--apply: no memory cites a changed file, so none was verified or changed")


def test_cli_review_defaults_to_main(cli_repo: GitRepo, capsys: pytest.CaptureFixture[str],
                                     memories: dict[str, str]) -> None:
    branch(cli_repo, "edit", FETCH.replace("return None", "return 0"))
    cli_repo.run("checkout", "-q", "edit")
    data = json.loads(vmem(capsys, "review", "--json")[1])
    assert data["base"] == "main"
    assert [f["kind"] for f in data["findings"]] == [FindingKind.BREAKS.value]


def test_fail_on_breaks_is_a_red_check_after_the_report(cli_repo: GitRepo,
                                                        capsys: pytest.CaptureFixture[str],
                                                        memories: dict[str, str]) -> None:
    branch(cli_repo, "keep", FETCH.replace("if get(url):", "if get( url ):"))
    code, out, err = vmem(capsys, "review", "--base", "main", "--head", "keep",
                          "--fail-on", "breaks")
    assert code == 0, err  # a reminder (holds) is no failure
    assert "Convention to keep" in out
    branch(cli_repo, "edit", FETCH.replace("MAX_RETRIES = 3", "MAX_RETRIES = 5"))
    branch(cli_repo, "drop", FETCH.replace("\n\ndef close():\n    return None\n", "\n"))
    for head, counted in (("edit", "1 breaks"), ("drop", "1 deletes")):
        code, out, err = vmem(capsys, "review", "--base", "main", "--head", head, "--json",
                              "--fail-on", "breaks", "--fail-on", "unverifiable")
        assert code == 3, err
        assert json.loads(out)["findings"]  # the report came first, whole
        assert err.strip() == ("vmem: failing the check (--fail-on breaks unverifiable): "
                               f"{counted}")
    code, _, err = vmem(capsys, "review", "--base", "main", "--head", "edit",
                        "--fail-on", "unverifiable")
    assert code == 0, err
    code, _, err = vmem(capsys, "review", "--fail-on", "nothing")
    assert code == 2
    assert "'nothing' is not one of 'breaks', 'unverifiable'" in err


def pull_request_event(tmp_path: Path, head: str, fork: bool) -> Path:
    """An event payload shaped like the one GitHub writes for ``pull_request``."""
    path = tmp_path / "event.json"
    path.write_text(json.dumps({"action": "synchronize", "number": 7, "pull_request": {
        "number": 7,
        "head": {"ref": "edit", "sha": "0" * 40,
                 "repo": {"full_name": head, "fork": fork, "private": False}},
        "base": {"ref": "main", "sha": "1" * 40,
                 "repo": {"full_name": "acme/net", "fork": False, "private": False}},
    }}))
    return path


def test_in_github_actions_no_store_is_an_error_not_a_green_pass(
        cli_repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, memories: dict[str, str]) -> None:
    branch(cli_repo, "edit", FETCH.replace("MAX_RETRIES = 3", "MAX_RETRIES = 5"))
    monkeypatch.delenv("VMEM_DATABASE_URL")  # the secret is missing or misnamed
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    data_dir = Path(os.environ["XDG_DATA_HOME"])
    for args in (["review", "--base", "main", "--head", "edit"], ["recent"],
                 ["db", "export"]):
        code, out, err = vmem(capsys, *args)
        assert code == 1, args
        assert out == ""
        (line,) = err.splitlines()
        assert line.startswith("vmem: error: running in GitHub Actions without a memory "
                               "store (none of VMEM_DATABASE_URL, SUPABASE_URL and "
                               "SUPABASE_KEY is set)")
    assert not list(data_dir.rglob("*.db"))  # no throwaway store was created
    monkeypatch.setenv("SUPABASE_URL", "https://x.supabase.co")
    code, _, err = vmem(capsys, "recent")
    assert code == 1
    assert "SUPABASE_URL is set but SUPABASE_KEY is empty" in err
    monkeypatch.delenv("SUPABASE_URL")
    code, out, err = vmem(capsys, "--db", f"sqlite:///{tmp_path / 'review.db'}", "review",
                          "--base", "main", "--head", "edit", "--json")
    assert code == 0, err  # a store named by --db is a store
    assert json.loads(out)["counts"]["breaks"] == 1


def test_a_fork_without_secrets_gets_a_warning_and_a_neutral_exit(
        cli_repo: GitRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    branch(cli_repo, "edit", FETCH.replace("MAX_RETRIES = 3", "MAX_RETRIES = 5"))
    monkeypatch.delenv("VMEM_DATABASE_URL")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(pull_request_event(tmp_path, "mallory/net",
                                                                   fork=True)))
    code, out, err = vmem(capsys, "review", "--base", "main", "--head", "edit")
    assert code == 78
    assert out == ("::warning title=verified-memory::no memory store in this run: pull "
                   "requests from forks (mallory/net) get no secrets, so no memory was "
                   "checked (neither a pass nor a failure)\n")
    assert err.startswith("vmem: no memory store in this run")
    # The same repository's own pull request has its secrets: missing, it is an error.
    monkeypatch.setenv("GITHUB_EVENT_PATH", str(pull_request_event(tmp_path, "acme/net",
                                                                   fork=False)))
    code, out, err = vmem(capsys, "review", "--base", "main", "--head", "edit")
    assert code == 1
    assert "vmem: error: running in GitHub Actions without a memory store" in err


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["review", "--base", "nope"], 1, "vmem: error: --base 'nope' does not exist"),
        (["review", "--base", "edit", "--head", "main"], 1, "are --base and --head swapped?"),
        (["review", "--post"], 2, "--post needs --pr N"),
        (["review", "--pr", "3", "--base", "main"], 2, "drop --base and --head"),
        (["review", "--pr", "0"], 2, "0 is not in the range x>=1"),
    ],
)
def test_cli_review_bad_input(cli_repo: GitRepo, capsys: pytest.CaptureFixture[str],
                              args: list[str], code: int, message: str) -> None:
    branch(cli_repo, "edit", FETCH + "# more\n")
    got, _, err = vmem(capsys, *args)
    assert got == code
    assert message in err
    assert "Traceback" not in err
    if code == 1:
        assert err.count("\n") == 1


def test_cli_review_outside_a_working_copy_and_without_memories(
        tmp_path: Path, repo: GitRepo, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{tmp_path / 'empty.db'}")
    monkeypatch.chdir(tmp_path)
    code, _, err = vmem(capsys, "review", "--base", "main")
    assert code == 1
    assert "is not inside a git working copy" in err
    monkeypatch.chdir(repo.path)
    branch(repo, "edit", FETCH.replace("3", "5"))
    code, out, err = vmem(capsys, "review", "--base", "main", "--head", "edit")
    assert code == 1  # a store that does not exist is named, never reviewed as empty
    assert f"there is no memory store at {tmp_path / 'empty.db'}" in err
    assert not (tmp_path / "empty.db").exists()
    assert vmem(capsys, "db", "migrate")[0] == 0  # now it exists, with nothing in it
    code, out, err = vmem(capsys, "review", "--base", "main", "--head", "edit")
    assert code == 0, err
    assert "No active memories for `acme/net`: nothing to review." in out


def test_the_readme_workflow_is_the_example_and_uses_real_options() -> None:
    import shlex
    import tomllib

    import yaml  # PyYAML is installed with responses, a test dependency

    from verified_memory.cli.review import review as review_command

    root = Path(__file__).parent.parent
    example = (root / "examples" / "github-actions" / "vmem-review.yml").read_text()
    section = (root / "README.md").read_text().split("\n## Review bot\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    assert "examples/github-actions/vmem-review.yml" in section
    (block,) = re.findall(r"```yaml\n(.*?)```", section, flags=re.S)
    assert block == example
    workflow = yaml.safe_load(example)
    assert set(workflow[True]) == {"pull_request", "push"}  # YAML 1.1 reads `on` as true
    assert workflow["permissions"] == {}  # every job asks for what it needs
    jobs = workflow["jobs"]
    assert jobs["review"]["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert jobs["apply"]["permissions"] == {"contents": "read"}
    assert "!github.event.pull_request.head.repo.fork" in jobs["review"]["if"]
    # Only pull requests cancel older runs; each push to main has a group of its own.
    concurrency = workflow["concurrency"]
    assert concurrency["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"
    assert concurrency["group"].endswith("${{ github.event.pull_request.number || github.sha }}")
    for job in jobs.values():
        for step in job["steps"]:
            if "uses" in step:  # pinned to a commit, with the tag it was in a comment
                assert re.fullmatch(r"actions/[a-z-]+@[0-9a-f]{40}", step["uses"]), step
                line = next(line for line in example.splitlines() if step["uses"] in line)
                assert re.search(r"# v\d+\.\d+\.\d+$", line), line
                if step["uses"].startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False
    assert {"VMEM_DATABASE_URL", "SUPABASE_URL", "SUPABASE_KEY"} <= set(workflow["env"])
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    checkouts = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
    assert [s["with"]["fetch-depth"] for s in checkouts] == [0, 0]
    runs = [shlex.split(s["run"]) for s in steps if "run" in s]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for words in runs:
        if words[:2] == ["pip", "install"]:
            wanted = re.fullmatch(r"verified-memory\[(.*)\]", words[2])
            assert wanted is not None
            assert set(wanted[1].split(",")) <= set(extras)
    commands = [w for w in runs if w[0] == "vmem"]
    assert {" ".join(w[1:2]) for w in commands} == {"review"}
    options = {opt for param in review_command.params for opt in param.opts}
    for words in commands:
        assert {w for w in words if w.startswith("--")} <= options
    assert any({"--pr", "--post"} <= set(w) for w in commands)
    assert any({"--base", "--head", "--apply"} <= set(w) for w in commands)
    review_job = workflow["jobs"]["review"]
    assert "GITHUB_TOKEN" in next(s for s in review_job["steps"] if "env" in s)["env"]
