"""The ref rule on real repositories: only a check at the main line's tip (or an explicit
apply on it) changes a memory; a branch, an old tag, a detached HEAD, the worktree and a
dry run are views that change nothing stored.

Every test works in a real clone of a real (bare) ``origin``, so the main line is found
the way it is for users: ``refs/remotes/origin/HEAD``, at its remote-tracking tip.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import GitRepo, git_env
from tests.test_cli import vmem, vmem_json
from verified_memory import (
    Decision,
    DictSource,
    EventKind,
    LocalGitSource,
    MemoryService,
    Status,
    ValidationError,
    WorktreeSource,
)
from verified_memory.models import Scope
from verified_memory.store import open_store
from verified_memory.store.sqlite import SQLiteStore
from verified_memory.verify.scope import pass_scope

REPO = "acme/requests"
SESSIONS = """\
MAX_REDIRECTS = 30
DEFAULT_TIMEOUT = 10


def resolve_redirects(resp, req):
    hist = []
    while resp.is_redirect:
        if len(hist) >= MAX_REDIRECTS:
            raise TooManyRedirects(len(hist))
        hist.append(resp)
        resp = follow(resp, req)
    return resp


def rebuild_auth(prepared, response):
    headers = prepared.headers
    if "Authorization" in headers and changed_host(prepared, response):
        del headers["Authorization"]
    return prepared


def send(request, **kwargs):
    kwargs.setdefault("timeout", DEFAULT_TIMEOUT)
    adapter = get_adapter(request.url)
    return adapter.send(request, **kwargs)


def mount(prefix, adapter):
    adapters[prefix] = adapter
    keys = sorted(adapters, key=len, reverse=True)
    return keys
"""
#: subject -> citation (path:lines) in SESSIONS
CITES = {
    "Redirect limit": "src/sessions.py:1",
    "Authorization is dropped across hosts": "src/sessions.py:15-19",
    "send has a default timeout": "src/sessions.py:22-25",
    "Longest prefix wins": "src/sessions.py:28-31",
}
#: The unmerged branch: edits three of the four cited blocks.
REDIRECTS = (SESSIONS.replace("MAX_REDIRECTS = 30", "MAX_REDIRECTS = 20")
             .replace('    if "Authorization" in headers and changed_host(prepared, response):\n'
                      '        del headers["Authorization"]\n',
                      '    strip_auth(headers, prepared, response)\n')
             .replace('kwargs.setdefault("timeout", DEFAULT_TIMEOUT)',
                      'kwargs.setdefault("timeout", None)'))


# --------------------------------------------------------------------------- repositories


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, env=git_env(),
                          check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode().strip()


@pytest.fixture
def clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    """A developer's clone of ``origin`` (whose default branch is main), with the store
    and the working directory set up as ``vmem`` finds them."""
    origin = GitRepo(tmp_path / "origin.git", bare=True)
    author = GitRepo(tmp_path / "author")
    author.write("src/sessions.py", SESSIONS)
    author.write("README.md", "# requests\n\n```python\nMAX_REDIRECTS = 30\n```\n")
    author.commit("initial")
    author.run("remote", "add", "origin", str(origin.path))
    author.run("push", "-q", "origin", "main")
    git(tmp_path, "clone", "-q", str(origin.path), str(tmp_path / "clone"))
    repo = GitRepo(tmp_path / "clone")
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{tmp_path / 'memory.db'}")
    return repo


def store_all(capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """The four memories, stored through the CLI on main: subject -> id."""
    ids = {}
    for subject, cite in CITES.items():
        memory = vmem_json(capsys, "store", "--repo", REPO, "--subject", subject,
                           "--fact", f"{subject}.", "--cite", cite)
        ids[subject] = memory["id"]
    return ids


def snapshot(db: Path) -> list[dict[str, Any]]:
    """Every memory as stored (status, citations, counters, pins), to compare."""
    with SQLiteStore(db) as store:
        return [m.to_dict() for m in store.recent(REPO, limit=None, status=None)]


def events(db: Path, *kinds: EventKind) -> list[str]:
    with SQLiteStore(db) as store:
        return [e.kind.value for e in store.events(repo=REPO, kinds=list(kinds) or None,
                                                   limit=None)]


def commit_on_branch(repo: GitRepo, branch: str, content: str, path: str = "src/sessions.py",
                     base: str = "main") -> str:
    repo.run("checkout", "-q", "-b", branch, base)
    repo.write(path, content)
    return repo.commit(f"change {path} on {branch}")


def push_main(repo: GitRepo) -> None:
    """Publish main: origin and the clone's remote-tracking main move together."""
    repo.run("push", "-q", "origin", "main")


@pytest.fixture
def db(clone: GitRepo, tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def service(clone: GitRepo, db: Path) -> Iterator[MemoryService]:
    with MemoryService(SQLiteStore(db), LocalGitSource(clone.path)) as svc:
        yield svc


# --------------------------------------------------------------------------- the main line


def test_the_main_line_is_origins_default_branch_at_its_remote_tracking_tip(
        clone: GitRepo) -> None:
    with LocalGitSource(clone.path) as source:
        main = source.main_line()
        assert main is not None
        assert (main.name, main.ref, main.how) == ("main", "refs/remotes/origin/main",
                                                   "origin/HEAD")
        # A local commit nobody else has is not the main line yet.
        clone.write("notes.txt", "local\n")
        local = clone.commit("unpushed")
        assert source.resolve(main.ref) != local
        assert source.contained([local], main.ref) == frozenset()
        # Checked here, local main is a view, and the notice names the remote's branch.
        scope = pass_scope(source, "refs/heads/main", apply=None)
        assert scope.kind is Scope.VIEW
        assert scope.cause == (f"main ({local[:12]}) is not the tip of origin/main "
                               f"({source.resolve(main.ref)[:12]})")
        push_main(clone)
        assert source.resolve(main.ref) == local


def test_the_main_line_can_be_configured_or_guessed(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "solo")
    repo.write("a.py", "x = 1\n")
    repo.commit("one")
    repo.run("branch", "-m", "trunk")
    with LocalGitSource(repo.path) as source:
        assert source.main_line() is None  # no origin/HEAD, no main, no master
        assert source.main_line("trunk") is not None
    repo.run("config", "vmem.truthRef", "trunk")
    with LocalGitSource(repo.path) as source:
        main = source.main_line()
        assert main is not None
        assert (main.name, main.how) == ("trunk", "git config vmem.truthRef")
    repo.run("config", "vmem.truthRef", "no-such-branch")
    with LocalGitSource(repo.path) as source, pytest.raises(Exception, match="no-such-branch"):
        source.main_line()


def test_an_unknown_main_line_makes_every_check_a_view(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "solo")
    repo.write("a.py", "LIMIT = 1\n")
    repo.commit("one")
    repo.run("branch", "-m", "trunk")
    with MemoryService(SQLiteStore(tmp_path / "m.db"), LocalGitSource(repo.path)) as svc:
        memory = svc.store({"repo": REPO, "subject": "s", "fact": "f",
                            "citations": [{"path": "a.py", "line_start": 1}]})
        repo.write("a.py", "LIMIT = 2\n")
        repo.commit("two")
        report = svc.verify(repo=REPO)
        scope = report.scopes[REPO]
        assert scope.kind is Scope.VIEW
        assert "VMEM_TRUTH_REF" in scope.why
        assert svc.memories.get(memory.id).status is Status.ACTIVE
    with MemoryService(SQLiteStore(tmp_path / "m.db"), LocalGitSource(repo.path),
                       truth_ref="trunk") as svc:
        assert svc.verify(repo=REPO).verifications[0].memory.status is Status.INVALID


def test_an_explicit_apply_where_the_main_line_cannot_be_told_is_a_view(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """No origin, no main, no master: nothing says a commit is on the main line, so an
    explicit apply (``vmem review --apply``, ``verify(apply=True)``) reaches no verdict
    either, and says why in one line."""
    repo = GitRepo(tmp_path / "solo")
    repo.write("src/sessions.py", SESSIONS)
    base = repo.commit("one")
    repo.run("branch", "-m", "trunk")
    db = tmp_path / "m.db"
    with MemoryService(SQLiteStore(db), LocalGitSource(repo.path)) as svc:
        memory = svc.store({"repo": REPO, "subject": "s", "fact": "f",
                            "citations": [{"path": "src/sessions.py", "line_start": 1}]})
        commit_on_branch(repo, "feature", REDIRECTS, base="trunk")
        report = svc.verify([memory.id], ref="feature", apply=True)
        scope = report.scopes[REPO]
        assert scope.kind is Scope.VIEW
        assert scope.why.startswith("not applied at feature (")
        assert "cannot tell which branch is this repository's main line" in scope.why
        assert report.verifications[0].decision is Decision.INVALIDATE
        stored = svc.memories.get(memory.id)
        assert (stored.status, stored.verified_ref) == (Status.ACTIVE, None)
    # The review bot's apply after a merge: the report says nothing changed, and why.
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{db}")
    code, out, err = vmem(capsys, "review", "--repo", REPO, "--base", base, "--head",
                          "feature", "--apply")
    assert code == 0, err
    assert "memories were not changed" in out
    assert "(--apply)" not in out
    (note,) = [line for line in out.splitlines() if "--apply: not applied at" in line]
    assert "cannot tell which branch" in note
    reviewed = vmem_json(capsys, "review", "--repo", REPO, "--base", base, "--head",
                         "feature", "--apply")
    assert reviewed["applied"] is False
    assert vmem_json(capsys, "show", memory.id)["status"] == "active"
    assert events(db, EventKind.INVALIDATED, EventKind.VERIFIED_INVALID) == []


def test_an_explicit_apply_is_a_view_when_the_main_line_cannot_be_read(
        tmp_path: Path) -> None:
    """Through GitHub the main line is the repository's default branch; when GitHub
    fails to say it (a 502, twice), an explicit apply is a view, never a verdict."""
    import responses

    from tests.github_payloads import JSON, FakeGitHub, error_body
    from verified_memory.sources.github import GitHubSource, RetryPolicy

    fake = FakeGitHub("octo/demo")
    fake.commit({"src/sessions.py": SESSIONS})
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake.install(rsps)
        source = GitHubSource("octo/demo", "ghp_RefRuleToken0123456789", sleep=lambda s: None,
                              cache_dir=tmp_path / "cache", retry=RetryPolicy(attempts=2))
        with MemoryService(SQLiteStore(tmp_path / "gh.db"), source) as svc:
            memory = svc.store({"repo": "octo/demo", "subject": "limit", "fact": "30",
                                "citations": [{"path": "src/sessions.py", "line_start": 1}]},
                               ref="main")
            merged = fake.commit({"src/sessions.py": REDIRECTS})
            rsps.replace(responses.GET, fake.pattern(""), status=502,
                         body=error_body("Server Error"), content_type=JSON)
            report = svc.verify([memory.id], ref=merged, apply=True)
            scope = report.scopes["octo/demo"]
            assert scope.kind is Scope.VIEW
            assert scope.why.startswith(f"not applied at {merged[:12]}: the main line could "
                                        "not be told (")
            assert report.verifications[0].change is None
            stored = svc.memories.get(memory.id)
            assert (stored.status, stored.verified_commit) == (Status.ACTIVE, None)


# --------------------------------------------------------------------------- views


def test_a_branch_checkout_then_back_to_main_changes_nothing(
        clone: GitRepo, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = store_all(capsys)
    commit_on_branch(clone, "feature/redirects", REDIRECTS)
    before = snapshot(db)
    # The session-start hook on the branch: three memories do not hold here.
    code, out, err = vmem(capsys, "context", "--repo", REPO, "--hook", "claude-code")
    assert code == 0, err
    assert "feature/redirects" in err
    assert "a view, nothing stored changes" in err
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "3 other memories were left out (3 do not hold here (at feature/redirects" in context
    assert "were not invalidated" in context
    assert ids["Longest prefix wins"] in context  # the one that holds is injected
    for tool in ("verify", "context"):
        code, _, err = vmem(capsys, tool, "--repo", REPO)
        assert code == 0, err
    clone.run("checkout", "-q", "main")
    assert snapshot(db) == before
    stats = vmem_json(capsys, "stats", "--repo", REPO)
    assert stats["by_status"]["active"] == 4
    assert stats["invalidation_rate"] is None
    assert EventKind.VERIFIED_INVALID.value not in stats["events"]
    assert stats["events"]["checked"] >= 12
    # The review bot still finds what the branch breaks, whatever ran on it before.
    review = vmem_json(capsys, "review", "--repo", REPO, "--base", "main",
                       "--head", "feature/redirects")
    assert review["counts"]["breaks"] == 3
    assert snapshot(db) == before


def test_an_old_tag_and_a_detached_head_are_views(
        clone: GitRepo, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clone.run("tag", "v1.0")
    clone.write("src/sessions.py", SESSIONS + "\n\ndef close():\n    return None\n")
    clone.commit("add close")
    push_main(clone)
    memory = vmem_json(capsys, "store", "--repo", REPO, "--subject", "close",
                       "--fact", "close returns None.", "--cite", "src/sessions.py:33-34")
    before = snapshot(db)
    for checkout in ("v1.0", "HEAD~1"):
        clone.run("checkout", "-q", checkout)
        report = vmem_json(capsys, "verify", "--repo", REPO)
        assert report["scopes"][REPO]["scope"] == "view"
        assert report["memories"][0]["decision"] == "invalidate"  # no such code there
        assert report["invalidated"] == 0
        clone.run("checkout", "-q", "main")
        assert snapshot(db) == before
    # Detached at the main line's tip is the tip: a verdict.
    clone.run("checkout", "-q", "--detach", "main")
    report = vmem_json(capsys, "verify", "--repo", REPO)
    assert report["scopes"][REPO]["scope"] == "verdict"
    assert report["refreshed"] == 1
    stored = vmem_json(capsys, "show", memory["id"])
    assert stored["verified_ref"] == "main"
    assert stored["verified_commit"] == clone.head


def test_worktree_edits_are_a_view(clone: GitRepo, db: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    ids = store_all(capsys)
    clone.write("src/sessions.py", REDIRECTS)  # uncommitted
    before = snapshot(db)
    code, out, err = vmem(capsys, "context", "--repo", REPO, "--worktree")
    assert code == 0, err
    assert "the worktree" in err
    assert "3 do not hold here (at the worktree)" in out
    report = vmem_json(capsys, "verify", "--repo", REPO, "--worktree")
    assert report["scopes"][REPO]["applies_verdicts"] is False
    assert report["do_not_hold"] == 3
    assert snapshot(db) == before
    with MemoryService(SQLiteStore(db), WorktreeSource(clone.path)) as svc, \
            pytest.raises(ValidationError, match="worktree"):
        svc.verify([ids["Redirect limit"]], apply=True)


def test_a_local_commit_that_is_not_pushed_is_a_view_until_it_is(
        clone: GitRepo, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = store_all(capsys)
    clone.write("src/sessions.py", REDIRECTS)
    clone.commit("edit on local main")
    report = vmem_json(capsys, "verify", "--repo", REPO)
    assert report["scopes"][REPO]["scope"] == "view"
    push_main(clone)
    report = vmem_json(capsys, "verify", "--repo", REPO)
    assert report["scopes"][REPO]["scope"] == "verdict"
    assert report["invalidated"] == 3
    assert vmem_json(capsys, "show", ids["Redirect limit"])["status"] == "invalid"


def test_dry_runs_leave_the_invalidation_rate_alone(
        clone: GitRepo, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vmem_json(capsys, "store", "--repo", REPO, "--subject", "limit", "--fact", "30",
              "--cite", "src/sessions.py:1")
    for _ in range(3):
        report = vmem_json(capsys, "verify", "--repo", REPO, "--dry-run")
        assert report["scopes"][REPO]["scope"] == "dry_run"
    code, _, err = vmem(capsys, "context", "--repo", REPO, "--dry-run")
    assert code == 0
    assert "dry run" in err
    stats = vmem_json(capsys, "stats", "--repo", REPO)
    assert stats["invalidation_rate"] is None
    assert stats["events"]["checked"] == 4
    assert "verified_valid" not in stats["events"]
    # A verdict then counts, once.
    vmem_json(capsys, "verify", "--repo", REPO)
    stats = vmem_json(capsys, "stats", "--repo", REPO)
    assert stats["invalidation_rate"] == 0.0
    assert stats["events"]["verified_valid"] == 1


# --------------------------------------------------------------------------- branch memories


def test_a_memory_stored_on_a_branch_is_judged_after_the_merge_not_before(
        clone: GitRepo, db: Path, service: MemoryService,
        capsys: pytest.CaptureFixture[str]) -> None:
    retry = "def retry(n):\n    return min(n, MAX_REDIRECTS)\n"
    commit_on_branch(clone, "feature/retry", SESSIONS + "\n\n" + retry)
    memory = vmem_json(capsys, "store", "--repo", REPO, "--subject", "retry is capped",
                       "--fact", "retry caps n at MAX_REDIRECTS.",
                       "--cite", "src/sessions.py:34-35")
    clone.run("checkout", "-q", "main")
    # On main the code is not there yet: not "missing", not judged.
    report = vmem_json(capsys, "verify", "--repo", REPO)
    assert report["scopes"][REPO]["scope"] == "verdict"
    assert report["memories"][0]["scope"] == "unmerged"
    assert report["unmerged"] == 1
    assert report["invalidated"] == 0
    code, out, _ = vmem(capsys, "verify", "--repo", REPO)  # the table: not a decision
    (row,) = [line for line in out.splitlines() if line.startswith(memory["id"][:8])]
    assert row.split()[1] == "unmerged"
    assert "1 not judged (stored on a branch not merged yet)" in out
    shown = vmem(capsys, "show", memory["id"])[1]
    assert "main does not contain yet" in shown
    code, out, _ = vmem(capsys, "context", "--repo", REPO)
    assert code == 0
    assert "1 not merged into the main line yet" in out
    stats = vmem_json(capsys, "stats", "--repo", REPO)
    assert stats["unconfirmed"] == 1
    assert stats["by_status"]["active"] == 1
    # The merge: now it is judged, and holds.
    clone.run("merge", "-q", "--no-ff", "-m", "merge retry", "feature/retry")
    push_main(clone)
    report = vmem_json(capsys, "verify", "--repo", REPO)
    assert report["refreshed"] == 1
    stored = service.memories.get(memory["id"])
    assert (stored.verified_ref, stored.verified_commit) == ("main", clone.head)
    assert vmem_json(capsys, "stats", "--repo", REPO)["unconfirmed"] == 0
    # From now on a change on main that breaks it is a verdict.
    clone.write("src/sessions.py", SESSIONS + "\n\n" + retry.replace("min(n, MAX_REDIRECTS)", "n"))
    clone.commit("uncap retry")
    push_main(clone)
    assert vmem_json(capsys, "verify", "--repo", REPO)["invalidated"] == 1


def test_a_squash_merged_branch_memory_is_adopted_by_the_main_line(
        clone: GitRepo, service: MemoryService) -> None:
    commit_on_branch(clone, "feature/close", SESSIONS + "\n\ndef close():\n    return None\n")
    memory = service.store({"repo": REPO, "subject": "close", "fact": "returns None",
                            "citations": [{"path": "src/sessions.py", "line_start": 33,
                                           "line_end": 34}]}).memory
    branch_commit = clone.head
    clone.run("checkout", "-q", "main")
    clone.run("merge", "-q", "--squash", "feature/close")
    squashed = clone.commit("squash feature/close")
    clone.run("branch", "-q", "-D", "feature/close")
    push_main(clone)
    assert memory.citations[0].sha == branch_commit
    (verification,) = service.verify(repo=REPO).verifications
    assert verification.change == "refreshed"
    stored = service.memories.get(memory.id)
    # Pinned to the main line: the branch commit is no longer needed to judge it.
    assert stored.citations[0].sha == squashed
    assert stored.verified_ref == "main"


# --------------------------------------------------------------------------- revival


def test_revival_after_a_revert(clone: GitRepo, db: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    ids = store_all(capsys)
    limit = ids["Redirect limit"]
    clone.write("src/sessions.py", SESSIONS.replace("= 30", "= 20"))
    clone.commit("lower the redirect limit")
    push_main(clone)
    assert vmem_json(capsys, "verify", "--repo", REPO)["invalidated"] == 1
    clone.run("revert", "--no-edit", "HEAD")
    push_main(clone)
    # Without the flag an invalid memory is checked, not revived; the note says how.
    code, out, err = vmem(capsys, "verify", limit)
    assert code == 0, err
    assert "1 hold" in out
    assert "--include-invalid" in err
    assert vmem_json(capsys, "show", limit)["status"] == "invalid"
    # On a branch, revival is a view too.
    commit_on_branch(clone, "elsewhere", SESSIONS + "# more\n")
    report = vmem_json(capsys, "verify", "--include-invalid", limit)
    assert report["revived"] == 0
    clone.run("checkout", "-q", "main")
    report = vmem_json(capsys, "verify", "--include-invalid", limit)
    assert report["revived"] == 1
    shown = vmem_json(capsys, "show", limit)
    assert shown["status"] == "active"
    assert shown["invalid_reason"] is None
    assert events(db, EventKind.REVIVED) == ["revived"]
    # Repository-wide, with invalid memories included.
    clone.write("src/sessions.py", SESSIONS.replace("= 30", "= 20"))
    clone.commit("lower it again")
    push_main(clone)
    vmem_json(capsys, "verify", "--repo", REPO)
    clone.run("revert", "--no-edit", "HEAD")
    push_main(clone)
    report = vmem_json(capsys, "verify", "--repo", REPO, "--include-invalid")
    assert report["revived"] == 1
    assert report["hold"] == 4


def test_recite_points_an_invalid_memory_at_new_lines_atomically(
        clone: GitRepo, db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = store_all(capsys)
    timeout = ids["send has a default timeout"]
    moved = SESSIONS.replace(
        'def send(request, **kwargs):\n    kwargs.setdefault("timeout", DEFAULT_TIMEOUT)\n',
        'def send(request, **kwargs):\n    apply_defaults(kwargs)\n') + (
        '\n\ndef apply_defaults(kwargs):\n    kwargs.setdefault("timeout", DEFAULT_TIMEOUT)\n')
    clone.write("src/sessions.py", moved)
    clone.commit("extract apply_defaults")
    push_main(clone)
    vmem_json(capsys, "verify", "--repo", REPO)
    assert vmem_json(capsys, "show", timeout)["status"] == "invalid"
    # A bad citation is refused whole: the memory is as it was.
    code, _, err = vmem(capsys, "recite", timeout, "--cite", "src/sessions.py:900")
    assert code == 1
    assert "past the end" in err
    assert vmem_json(capsys, "show", timeout)["status"] == "invalid"
    recited = vmem_json(capsys, "recite", timeout, "--cite", "src/sessions.py:33-34",
                        "--reason", "the default moved to apply_defaults")
    assert recited["status"] == "active"
    assert [c["line_start"] for c in recited["citations"]] == [33]
    assert recited["verified_ref"] == "main"  # re-cited at the main line's tip
    assert events(db, EventKind.RECITED, EventKind.REVIVED) == ["recited", "revived"]
    # Re-cited on a branch: active, but it waits for the merge like a branch memory.
    commit_on_branch(clone, "feature/x", moved + "# x\n")
    again = vmem_json(capsys, "recite", timeout, "--cite", "src/sessions.py:34")
    assert again["verified_ref"] is None
    assert "does not contain yet" in vmem(capsys, "show", timeout)[1]


# --------------------------------------------------------------------------- explicit apply


def test_an_explicit_apply_is_refused_off_the_main_line_and_taken_on_it(
        clone: GitRepo, service: MemoryService) -> None:
    memory = service.store({"repo": REPO, "subject": "limit", "fact": "30",
                            "citations": [{"path": "src/sessions.py", "line_start": 1}]})
    feature = commit_on_branch(clone, "feature", REDIRECTS)
    with pytest.raises(ValidationError, match="not on main"):
        service.verify([memory.id], ref=feature, apply=True)
    clone.run("checkout", "-q", "main")
    clone.run("merge", "-q", "--ff-only", "feature")
    merged = clone.head
    clone.write("README.md", "# requests, later\n")
    clone.commit("later")
    push_main(clone)
    report = service.verify([memory.id], ref=merged, apply=True)
    assert report.scopes[REPO].kind is Scope.VERDICT
    assert "explicit apply" in report.scopes[REPO].why
    stored = service.memories.get(memory.id)
    assert stored.status is Status.INVALID
    assert stored.verified_commit == merged


def test_an_apply_at_an_older_main_line_commit_leaves_a_later_verdict_standing(
        clone: GitRepo, service: MemoryService) -> None:
    """Two pushes to main, each with its apply job; the first push's job runs last (or
    is re-run). The second push restored the code, and the verdict at its commit stands:
    the late apply at the first push's commit judges nothing."""
    memory = service.store({"repo": REPO, "subject": "limit", "fact": "30",
                            "citations": [{"path": "src/sessions.py", "line_start": 1}]})
    clone.write("src/sessions.py", REDIRECTS)
    first = clone.commit("20 redirects")
    push_main(clone)
    clone.write("src/sessions.py", SESSIONS)
    second = clone.commit("back to 30")
    push_main(clone)
    service.verify([memory.id], ref=second, apply=True)  # the later job, first
    assert service.memories.get(memory.id).verified_commit == second
    report = service.verify([memory.id], ref=first, apply=True)  # the earlier one, late
    (verification,) = report.verifications
    assert verification.scope is Scope.BEHIND
    assert (verification.decision, verification.change) == (Decision.INVALIDATE, None)
    assert f"judged at a later commit of main ({second[:12]})" in (verification.reason or "")
    assert report.behind == 1
    stored = service.memories.get(memory.id)
    assert (stored.status, stored.verified_commit) == (Status.ACTIVE, second)
    # Without a later verdict, the same apply judges as before.
    other = service.store({"repo": REPO, "subject": "prefix", "fact": "longest",
                           "citations": [{"path": "src/sessions.py", "line_start": 27,
                                          "line_end": 30}]}, ref=first)
    assert service.verify([other.id], ref=first, apply=True).verifications[0].scope \
        is Scope.VERDICT


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, db: Path) -> str:
    """A store two services open apart, as two processes would: a SQLite file or a
    Postgres database."""
    return f"sqlite:///{db}" if request.param == "sqlite" else str(
        request.getfixturevalue("pg_url"))


def test_a_late_apply_does_not_overwrite_a_verdict_recorded_during_its_pass(
        clone: GitRepo, store_url: str) -> None:
    """A late apply's pass reads the memory (never judged), then checks its code; a pass
    at the tip records its verdict meanwhile. The late apply's verdict is not written
    over it: whether it may stand is checked again where it is written."""
    tip_pass = MemoryService(open_store(store_url), LocalGitSource(clone.path), actor="tip")
    late_pass = MemoryService(open_store(store_url), LocalGitSource(clone.path), actor="late")
    with tip_pass, late_pass:
        memory = late_pass.store({"repo": REPO, "subject": "limit", "fact": "30",
                                  "citations": [{"path": "src/sessions.py",
                                                 "line_start": 1}]})
        clone.write("src/sessions.py", REDIRECTS)
        first = clone.commit("20 redirects")
        clone.write("src/sessions.py", SESSIONS)
        second = clone.commit("back to 30")
        push_main(clone)
        seen: list[Any] = []

        def meanwhile(done: int, total: int) -> None:
            if not seen:  # once the late pass has read the memory
                seen.append(tip_pass.verify([memory.id]))

        report = late_pass.verify([memory.id], ref=first, apply=True, on_progress=meanwhile)
        assert seen[0].verifications[0].change == "refreshed"
        (late,) = report.verifications
        assert (late.decision, late.change) == (Decision.INVALIDATE, None)
        assert late.memory.status is Status.ACTIVE  # reported as it was
        stored = late_pass.memories.get(memory.id)
        assert (stored.status, stored.verified_commit) == (Status.ACTIVE, second)
        assert [e.actor for e in late_pass.memories.events(
            memory_id=memory.id, kinds=[EventKind.VERIFIED_VALID, EventKind.VERIFIED_INVALID,
                                        EventKind.INVALIDATED])] == ["tip"]


def test_a_verdict_on_citations_re_cited_during_its_pass_is_not_written(
        clone: GitRepo, store_url: str) -> None:
    """Two memories stored on a branch, merged: never judged on the main line, judged at
    its tip. The tip's pass reads them; while it checks their code, an agent re-cites
    both on another branch (a view: still never judged, still active). The pass's
    verdicts were reached on the old citations (one changed, one moved) and are not
    written over the new ones."""
    tip_pass = MemoryService(open_store(store_url), LocalGitSource(clone.path), actor="tip")
    agent = MemoryService(open_store(store_url), LocalGitSource(clone.path), actor="agent")
    with tip_pass, agent:
        retry = "def retry(n):\n    return min(n, MAX_REDIRECTS)\n"
        commit_on_branch(clone, "feature/retry", SESSIONS + "\n\n" + retry)
        capped, prefix = (agent.store({"repo": REPO, "subject": subject, "fact": fact,
                                       "citations": [_cite(cite)]}).memory
                          for subject, fact, cite in (
                              ("retry is capped", "at MAX_REDIRECTS", "src/sessions.py:34-35"),
                              ("Longest prefix wins", "sorted by length",
                               "src/sessions.py:28-31")))
        clone.run("checkout", "-q", "main")
        clone.run("merge", "-q", "--no-ff", "-m", "merge retry", "feature/retry")
        # On main: two lines above everything (the prefix moves), and retry uncapped.
        moved = "import os\n\n" + SESSIONS + "\n\n" + retry.replace(
            "min(n, MAX_REDIRECTS)", "n")
        clone.write("src/sessions.py", moved)
        clone.commit("uncap retry")
        push_main(clone)
        elsewhere = commit_on_branch(clone, "elsewhere", moved + "# elsewhere\n")
        clone.run("checkout", "-q", "main")
        recited: list[Any] = []

        def meanwhile(done: int, total: int) -> None:
            if not recited:  # once the tip's pass has read the memories
                recited.extend(agent.recite(m.id, [_cite(cite)], ref=elsewhere,
                                            reason="moved")
                               for m, cite in ((capped, "src/sessions.py:1"),
                                               (prefix, "src/sessions.py:3")))

        report = tip_pass.verify([capped.id, prefix.id], on_progress=meanwhile)
        assert report.scopes[REPO].kind is Scope.VERDICT
        assert all(m.verified_commit is None for m in recited)  # views: not judged
        by_id = {v.memory.id: v for v in report.verifications}
        assert (by_id[capped.id].decision, by_id[capped.id].change) == (
            Decision.INVALIDATE, None)
        assert (by_id[prefix.id].decision, by_id[prefix.id].change) == (
            Decision.REFRESH, None)
        for was in (capped, prefix):  # reported as it was
            assert by_id[was.id].memory.citations == was.citations
        for now in recited:
            stored = tip_pass.memories.get(now.id)
            assert stored.status is Status.ACTIVE
            assert stored.citations == now.citations
            assert (stored.verified_commit, stored.verified_ref) == (None, None)
        assert [e.actor for e in tip_pass.memories.events(
            memory_id=capped.id, kinds=[EventKind.VERIFIED_VALID, EventKind.VERIFIED_INVALID,
                                        EventKind.INVALIDATED, EventKind.RELOCATED,
                                        EventKind.REFRESHED])] == []
        assert [e.actor for e in tip_pass.memories.events(
            memory_id=prefix.id, kinds=[EventKind.VERIFIED_VALID, EventKind.RELOCATED,
                                        EventKind.REFRESHED])] == []


# --------------------------------------------------------------------------- the Python API


def test_the_python_api_follows_the_rule_with_a_fake_source(tmp_path: Path) -> None:
    source = DictSource({"c1": {"a.py": "LIMIT = 1\n"}})
    source.refs["main"] = "c1"
    with MemoryService(SQLiteStore(tmp_path / "m.db"), source) as svc:
        memory = svc.store({"repo": REPO, "subject": "s", "fact": "f",
                            "citations": [{"path": "a.py", "line_start": 1}]})
        source.add_commit("c2", {"a.py": "LIMIT = 2\n"}, refs=["topic", "HEAD"])
        assert svc.scope(REPO).kind is Scope.VIEW
        (view,) = svc.verify([memory.id]).verifications
        assert (view.decision, view.scope, view.change) == (Decision.INVALIDATE, Scope.VIEW,
                                                             None)
        context = svc.context(REPO)
        assert context.memories == ()
        assert context.scope is not None
        assert not context.scope.judges
        assert svc.memories.get(memory.id).status is Status.ACTIVE
        (verdict,) = svc.verify([memory.id], ref="main").verifications
        assert verdict.change == "refreshed"


# --------------------------------------------------------------------------- through MCP


def test_mcp_retrieval_on_a_branch_is_a_view_and_recite_works(
        clone: GitRepo, db: Path, service: MemoryService) -> None:
    from tests.test_mcp_server import call, ok
    from verified_memory.mcp_server import build_server

    ids = {subject: service.store({"repo": REPO, "subject": subject, "fact": f"{subject}.",
                                   "citations": [_cite(cite)]}).id
           for subject, cite in CITES.items()}
    commit_on_branch(clone, "feature/redirects", REDIRECTS)
    before = snapshot(db)
    server = build_server(lambda: MemoryService(SQLiteStore(db), LocalGitSource(clone.path)),
                          default_repo=REPO)
    for tool, arguments in (("memory_get_recent", {}),
                            ("memory_search", {"query": "redirect limit"}),
                            ("memory_search_by_path", {"path": "src/sessions.py"})):
        answer = ok(call(server, tool, **arguments))
        assert answer["scope"]["scope"] == "view", tool
        assert not answer["scope"]["applies_verdicts"]
        for entry in answer["not_verified"]:
            assert (entry["scope"], entry["change"], entry["status"]) == ("view", None,
                                                                          "active")
    answer = ok(call(server, "memory_get_recent"))
    assert {e["id"] for e in answer["not_verified"]} == {
        ids["Redirect limit"], ids["Authorization is dropped across hosts"],
        ids["send has a default timeout"]}
    assert [v["id"] for v in answer["verified"]] == [ids["Longest prefix wins"]]
    assert snapshot(db) == before
    # Back on main and past the change: the verdict, then a recite through MCP.
    clone.run("checkout", "-q", "main")
    clone.run("merge", "-q", "--ff-only", "feature/redirects")
    push_main(clone)
    answer = ok(call(server, "memory_get_recent"))
    assert answer["scope"]["scope"] == "verdict"
    assert {e["change"] for e in answer["not_verified"]} == {"invalidated"}
    recited = ok(call(server, "memory_recite", memory_id=ids["Redirect limit"],
                      citations=[{"path": "src/sessions.py", "line_start": 1}],
                      reason="the limit is 20 now and the fact says the line"))
    assert recited["memory"]["status"] == "active"
    assert recited["memory"]["verified_ref"] == "main"
    assert "last judged on main" in recited["standing"]


def _cite(text: str) -> dict[str, Any]:
    path, _, lines = text.partition(":")
    start, _, end = lines.partition("-")
    return {"path": path, "line_start": int(start), "line_end": int(end or start)}


# --------------------------------------------------------------------------- through GitHub


def test_github_a_branch_that_is_not_the_default_is_a_view(tmp_path: Path) -> None:
    import responses

    from tests.github_payloads import FakeGitHub
    from verified_memory.sources.github import GitHubSource, RetryPolicy

    fake = FakeGitHub("octo/demo")
    fake.commit({"src/sessions.py": SESSIONS})
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        fake.install(rsps)

        def service() -> MemoryService:
            source = GitHubSource("octo/demo", "ghp_RefRuleToken0123456789", sleep=lambda s: None,
                                  cache_dir=tmp_path / "cache", retry=RetryPolicy(attempts=2))
            return MemoryService(SQLiteStore(tmp_path / "gh.db"), source)

        with service() as svc:
            memory = svc.store({"repo": "octo/demo", "subject": "limit", "fact": "30",
                                "citations": [{"path": "src/sessions.py", "line_start": 1}]},
                               ref="main")
        fake.commit({"src/sessions.py": REDIRECTS}, branch="feature")
        added = SESSIONS + "\n\ndef close():\n    return None\n"
        fake.commit({"src/sessions.py": added}, branch="topic")
        with service() as svc:
            # A branch memory, stored on "topic" (GitHub knows it is not on main).
            branch_memory = svc.store({"repo": "octo/demo", "subject": "close", "fact": "None",
                                       "citations": [{"path": "src/sessions.py",
                                                      "line_start": 33, "line_end": 34}]},
                                      ref="topic")
            report = svc.verify(repo="octo/demo", ref="feature")
            assert report.scopes["octo/demo"].kind is Scope.VIEW
            assert "not the tip of main" in report.scopes["octo/demo"].why
            assert report.count(Decision.INVALIDATE) == 2
            assert svc.memories.get(memory.id).status is Status.ACTIVE
            context = svc.context("octo/demo", ref="feature")
            assert context.memories == ()
            assert "do not hold here (at feature" in context.markdown
            # At main's tip: a verdict; the branch memory is not judged there.
            report = svc.verify(repo="octo/demo", ref="main")
            assert report.scopes["octo/demo"].judges
            by_id = {v.memory.id: v for v in report.verifications}
            assert by_id[memory.id].change == "refreshed"
            assert by_id[branch_memory.id].scope is Scope.UNMERGED
            assert svc.memories.get(branch_memory.id).status is Status.ACTIVE
            assert fake.calls["repo"] == 1  # the default branch, asked once per source


def test_a_first_verdict_keeps_the_pins_of_main_line_commits(
        clone: GitRepo, service: MemoryService) -> None:
    # Placing a memory on the main line costs one question, not a rewrite of its rows:
    # citations made on main-line commits keep their pins (step 1 still answers).
    memory = service.store({"repo": REPO, "subject": "limit", "fact": "30",
                            "citations": [{"path": "src/sessions.py", "line_start": 1}]}).memory
    stored_at = memory.citations[0].sha
    clone.write("README.md", "# requests\n\nmore\n")
    clone.commit("docs")
    push_main(clone)
    (verification,) = service.verify(repo=REPO).verifications
    assert verification.change == "refreshed"
    after = service.memories.get(memory.id)
    assert after.citations[0].sha == stored_at
    assert (after.verified_ref, after.verified_commit) == ("main", clone.head)
