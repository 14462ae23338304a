"""MemoryService over the GitHub source: the loop works through the API, an outage is
never a verdict, and what a pass spent is reported (HTTP mocked with ``responses``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import responses

from tests.github_payloads import API, FakeGitHub, error
from verified_memory import Decision, EventKind, MemoryService, Status
from verified_memory.models import Scope
from verified_memory.sources.base import git_blob_sha
from verified_memory.sources.github import GitHubSource, RetryPolicy
from verified_memory.store.sqlite import SQLiteStore

TOKEN = "ghp_ServiceTestTokenNeverPrinted0123456789"
APP = "def main():\n    retries = 3\n    return run(retries)\n"


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


def service(tmp_path: Path) -> MemoryService:
    source = GitHubSource("octo/demo", TOKEN, cache_dir=tmp_path / "cache", sleep=lambda s: None,
                          retry=RetryPolicy(attempts=2))
    return MemoryService(SQLiteStore(tmp_path / "gh.db"), source)


def test_store_verify_and_outage_through_github(rsps: responses.RequestsMock,
                                                tmp_path: Path) -> None:
    fake = FakeGitHub("octo/demo")
    fake.commit({"src/app.py": APP, "README.md": "# demo\n"})
    fake.install(rsps)
    with service(tmp_path) as svc:
        memory = svc.store({"repo": "octo/demo", "subject": "Retries", "fact": "three",
                            "citations": [{"path": "src/app.py", "line_start": 1,
                                           "line_end": 3}]}, ref="main")
    fake.commit({"src/app.py": "# header\n\n" + APP, "README.md": "# demo\n"})
    with service(tmp_path) as svc:
        report = svc.verify(repo="octo/demo", ref="main")
        assert report.verifications[0].decision is Decision.REFRESH
        assert str(report.verifications[0].checks[0].location) == "src/app.py:3-5"
        # The ref, the tree, the one changed blob; for the ref rule, the default branch
        # and, once in a memory's life, whether the commit it was stored at is on main.
        assert report.requests == 5
        assert report.scopes["octo/demo"].judges
        event = svc.memories.events(memory_id=memory.id, kinds=[EventKind.VERIFIED_VALID])[0]
        assert event.detail["pass_requests"] == 5
        assert svc.verify(repo="octo/demo", ref="main").requests == 1  # the ref: a 304
        assert TOKEN not in repr(svc.memories.events(repo="octo/demo"))

    # GitHub goes down while the cited file has changed: no verdict, nothing changed.
    new = fake.commit({"src/app.py": "# header\n\n" + APP.replace("3", "5"),
                       "README.md": "# demo\n"})
    rsps.reset()
    changed_blob = git_blob_sha(("# header\n\n" + APP.replace("3", "5")).encode())
    assert new in fake.commits
    for _ in range(4):
        rsps.add(responses.GET, f"{API}/repos/octo/demo/git/blobs/{changed_blob}",
                 **error(502, "Bad Gateway"))
    fake.install(rsps)
    with service(tmp_path) as svc:
        report = svc.verify(repo="octo/demo", ref="main")
        assert report.verifications[0].decision is Decision.UNVERIFIED
        after = svc.memories.get(memory.id)
        assert after.status is Status.ACTIVE
        assert after.verification_count == 2  # the two passes above; none for this one
        assert svc.context("octo/demo", ref="main").memories == ()


def test_cli_reads_github_outside_a_working_copy(rsps: responses.RequestsMock, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from verified_memory.cli import main

    fake = _cli_on_github(rsps, tmp_path, monkeypatch)
    with pytest.raises(SystemExit) as done:
        main(["store", "--repo", "octo/demo", "--ref", "main", "--subject", "Retries",
              "--fact", "three", "--cite", "src/app.py:2", "--json"])
    assert done.value.code == 0
    stored = json.loads(capsys.readouterr().out)
    assert stored["citations"][0]["sha"] == fake.refs["main"]
    with pytest.raises(SystemExit) as done:
        main(["verify", "--repo", "octo/demo", "--ref", "main", "--json"])
    out, err = capsys.readouterr()
    assert done.value.code == 0, err
    assert json.loads(out)["refreshed"] == 1
    assert TOKEN not in out + err


# --------------------------------------------------------------------------- vmem verify


def _vmem(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    """Run ``vmem ARGV --json``; its answer."""
    from verified_memory.cli import main

    with pytest.raises(SystemExit) as done:
        main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert done.value.code == 0, err
    answer: dict[str, Any] = json.loads(out)
    return answer


def _cli_on_github(rsps: responses.RequestsMock, tmp_path: Path,
                   monkeypatch: pytest.MonkeyPatch) -> FakeGitHub:
    """octo/demo on a fake GitHub with src/app.py on main; the CLI run outside any
    working copy, with a token and a SQLite store of its own."""
    fake = FakeGitHub("octo/demo")
    fake.commit({"src/app.py": APP})
    fake.install(rsps)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
    return fake


def _stored_then_moved(rsps: responses.RequestsMock, tmp_path: Path,
                       monkeypatch: pytest.MonkeyPatch,
                       capsys: pytest.CaptureFixture[str]) -> FakeGitHub:
    """A memory stored through the CLI at main's tip; then main moved its code down, so
    a pass reads the changed file and places the memory (compare) before its verdict."""
    fake = _cli_on_github(rsps, tmp_path, monkeypatch)
    _vmem(capsys, "store", "--repo", "octo/demo", "--ref", "main", "--subject", "Retries",
          "--fact", "three", "--cite", "src/app.py:1-3")
    fake.commit({"src/app.py": "# header\n\n" + APP})
    return fake


@pytest.mark.parametrize("ref", ["main", "HEAD", "refs/heads/main"])
def test_a_pass_at_head_costs_what_naming_the_default_branch_costs(
        ref: str, rsps: responses.RequestsMock, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # GitHub's HEAD is its default branch, so a pass at HEAD is at main's tip: it used to
    # resolve main too, to tell, one request more than `--ref main` (QA finding).
    _stored_then_moved(rsps, tmp_path, monkeypatch, capsys)
    # The ref, the default branch, the tree, the changed blob, the compare placing the
    # memory; then the ref and the default branch again, both 304s.
    for expected in (5, 2):
        before = len(rsps.calls)
        report = _vmem(capsys, "verify", "--repo", "octo/demo", "--ref", ref)
        assert len(rsps.calls) - before == expected
        assert report["scopes"]["octo/demo"]["applies_verdicts"], report["scopes"]
        assert report["refreshed"] == 1


def test_at_head_a_configured_main_line_is_still_its_own_tip(
        rsps: responses.RequestsMock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # HEAD names GitHub's default branch, not a main line configured elsewhere: at HEAD
    # past the configured branch's tip, a pass is a view (the ref rule).
    fake = _stored_then_moved(rsps, tmp_path, monkeypatch, capsys)
    fake.refs["release"] = next(iter(fake.commits))  # the commit the memory was stored at
    monkeypatch.setenv("VMEM_TRUTH_REF", "release")
    report = _vmem(capsys, "verify", "--repo", "octo/demo", "--ref", "HEAD")
    assert report["scopes"]["octo/demo"]["scope"] == "view"
    assert "not the tip of release" in report["scopes"]["octo/demo"]["why"]
    assert report["refreshed"] == 0
    assert _vmem(capsys, "verify", "--repo", "octo/demo", "--ref", "release")["refreshed"] == 1


def test_vmem_verify_counts_every_request_it_made(
        rsps: responses.RequestsMock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # The scope line resolves the ref and the main line before the pass, which reuses
    # the answers: the report and the events counted only the pass's own requests (3 of
    # 5, then none of 2; QA finding).
    _stored_then_moved(rsps, tmp_path, monkeypatch, capsys)
    for sent in (5, 2):
        before = len(rsps.calls)
        report = _vmem(capsys, "verify", "--repo", "octo/demo", "--ref", "main")
        assert report["requests"] == len(rsps.calls) - before == sent
    with SQLiteStore(tmp_path / "cli.db") as store:
        events = store.events(repo="octo/demo", kinds=[EventKind.VERIFIED_VALID])
    assert sorted(e.detail["pass_requests"] for e in events) == [2, 5]


def test_a_404_from_compare_judges_nothing_and_the_next_pass_asks_again(
        rsps: responses.RequestsMock, tmp_path: Path) -> None:
    # Whether main contains the commit a memory was stored at is one compare; a 404
    # there (a commit GitHub does not know yet, a deleted fork, no access) cannot tell.
    # The memory is not judged, and the next pass asks again: the 404 was kept as "not
    # contained" and every later pass left the memory unjudged without asking.
    fake = FakeGitHub("octo/demo")
    stored = fake.commit({"src/app.py": APP})
    fake.install(rsps)
    with service(tmp_path) as svc:
        memory = svc.store({"repo": "octo/demo", "subject": "Retries", "fact": "three",
                            "citations": [{"path": "src/app.py", "line_start": 1,
                                           "line_end": 3}]}, ref="main")
    tip = fake.commit({"src/app.py": APP.replace("3", "5")})  # the cited code changed
    compare = f"{API}/repos/octo/demo/compare/{stored}...{tip}"
    rsps.reset()
    for _ in range(2):  # answered in turn before the fake (responses): two passes
        rsps.add(responses.GET, compare, **error(404, "Not Found"))
    fake.install(rsps)
    for asked in (1, 2):
        with service(tmp_path) as svc:
            seen = svc.verify(repo="octo/demo", ref="main").verifications[0]
            assert seen.decision is Decision.INVALIDATE
            assert seen.scope is Scope.UNMERGED  # not judged
            assert seen.change is None
            # Not "stored on a commit main does not contain yet": that could not be told.
            assert seen.reason is not None
            assert seen.reason.endswith(
                f"not judged: GitHub could not compare its commit {stored[:12]} with main "
                "(unknown to GitHub, or not reachable there), so whether main contains it "
                "cannot be told"), seen.reason
            after = svc.memories.get(memory.id)
            assert (after.status, after.verified_ref, after.verification_count) == (
                Status.ACTIVE, None, 0)
        assert sum(call.request.url.startswith(compare) and "per_page=1" in call.request.url
                   for call in rsps.calls) == asked
    # GitHub can compare them now: a verdict.
    with service(tmp_path) as svc:
        assert svc.verify(repo="octo/demo", ref="main").verifications[0].change == "invalidated"
        assert svc.memories.get(memory.id).status is Status.INVALID


def test_two_passes_in_one_time_budget_each_count_their_own_requests(
        rsps: responses.RequestsMock, tmp_path: Path) -> None:
    # The Python API may run two passes inside one time budget (the CLI and MCP open
    # one per command): the second counted from the budget's first request, so its
    # report and its events included the first pass's requests (QA finding).
    from verified_memory.budget import time_budget

    fake = FakeGitHub("octo/demo")
    fake.commit({"src/app.py": APP})
    fake.install(rsps)
    with service(tmp_path) as svc:
        memory = svc.store({"repo": "octo/demo", "subject": "Retries", "fact": "three",
                            "citations": [{"path": "src/app.py", "line_start": 1,
                                           "line_end": 3}]}, ref="main")
        fake.commit({"src/app.py": "# header\n\n" + APP})  # main moved the code down
        sent: list[int] = []
        with time_budget(60):
            for _ in range(2):
                before = len(rsps.calls)
                report = svc.verify([memory.id], ref="main")
                sent.append(len(rsps.calls) - before)
                assert report.requests == sent[-1]
        events = svc.memories.events(memory_id=memory.id, kinds=[EventKind.VERIFIED_VALID])
    assert sent[0] > 0
    assert sorted(e.detail["pass_requests"] for e in events) == sorted(sent)
