"""MemoryService over the GitHub source: the loop works through the API, an outage is
never a verdict, and what a pass spent is reported (HTTP mocked with ``responses``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import responses

from tests.github_payloads import API, FakeGitHub, error
from verified_memory import Decision, EventKind, MemoryService, Status
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
    import json

    from verified_memory.cli import main

    fake = FakeGitHub("octo/demo")
    fake.commit({"src/app.py": APP})
    fake.install(rsps)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.db'}")
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
