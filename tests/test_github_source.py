"""GitHubSource against a fake GitHub (``responses``) answering exactly as GitHub does.

What is pinned here: the request counts of the cost model (ref, tree, one per changed
blob; 304s for unchanged refs), the shapes GitHub sends (base64 with line breaks,
truncated trees, symlinks and submodules, compare's ``previous_filename``), every
fault ending in ``SourceUnavailable`` and never in a verdict, and that the token never
leaks. No test sleeps: the source's ``sleep`` is a recorder.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import responses

from tests.github_payloads import (
    API,
    RESET_AT,
    FakeGitHub,
    Submodule,
    Symlink,
    blob_payload,
    error,
    error_body,
    rate_headers,
)
from verified_memory.anchors.fingerprint import fingerprint_lines
from verified_memory.config import Settings
from verified_memory.errors import MissingDependency, NotFound, SourceUnavailable, ValidationError
from verified_memory.models import Citation, Outcome
from verified_memory.sources.base import CodeSource, Rename, git_blob_sha
from verified_memory.sources.blob_cache import DiskBlobCache, JsonCache
from verified_memory.sources.github import GitHubSource, RetryPolicy
from verified_memory.verify.ladder import Verifier

TOKEN = "ghp_Zx9TESTTOKENnever4printA1b2C3d4E5f6"
NOW = 1_899_999_970.0  # the injected clock: 30 s before the fake's X-RateLimit-Reset

FILES: dict[str, bytes | str | Symlink | Submodule] = {
    "README.md": "# demo\n",
    "src/app.py": "def main():\n    return 1\n",
    "src/util/strings.py": "def shout(s):\n    return s.upper()\n",
    "scripts/run.sh": "#!/bin/sh\nexec python -m app\n",
    "empty.txt": b"",
    "docs/link.md": Symlink("../README.md"),
    "vendor/lib": Submodule("0123456789abcdef0123456789abcdef01234567"),
}


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


@pytest.fixture
def fake() -> FakeGitHub:
    """A repository with one commit on ``main``; install it after registering faults
    (``responses`` answers with the first registered match)."""
    fake = FakeGitHub("octo/demo")
    fake.commit(FILES)
    return fake


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def make_source(tmp_path: Path, sleeps: list[float]) -> Iterator[Callable[..., GitHubSource]]:
    made: list[GitHubSource] = []

    def make(**options: Any) -> GitHubSource:
        options.setdefault("cache_dir", tmp_path / "cache")
        options.setdefault("sleep", sleeps.append)
        options.setdefault("clock", lambda: NOW)
        source = GitHubSource(options.pop("repo", "octo/demo"), options.pop("auth", TOKEN),
                              **options)
        made.append(source)
        return source

    yield make
    for source in made:
        source.close()


def _assert_no_token(*texts: str) -> None:
    for text in texts:
        assert TOKEN not in text
        assert TOKEN[8:24] not in text


# --------------------------------------------------------------------------- resolve


def test_is_a_code_source_that_pins_commits(make_source: Callable[..., GitHubSource]) -> None:
    source = make_source()
    assert isinstance(source, CodeSource)
    assert source.pins_commits is True


def test_resolve_branch_is_one_request_and_sends_the_token(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource]
) -> None:
    fake.install(rsps)
    source = make_source()
    assert source.resolve("main") == fake.refs["main"]
    assert source.requests == 1
    request = rsps.calls[0].request
    assert request.headers["Authorization"] == f"token {TOKEN}"
    assert request.headers["Accept"] == "application/vnd.github.sha"
    assert request.url == f"{API}/repos/octo/demo/commits/main"


def test_resolve_full_sha_costs_nothing(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource]
) -> None:
    fake.install(rsps)
    source = make_source()
    sha = fake.refs["main"]
    assert source.resolve(sha.upper()) == sha
    assert source.requests == 0


def test_resolve_short_sha_and_branch_with_slash(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource]
) -> None:
    feature = fake.commit({**FILES, "new.py": "x = 2\n"}, branch="feature/x")
    fake.install(rsps)
    source = make_source()
    assert source.resolve("feature/x") == feature
    assert rsps.calls[-1].request.url.endswith("/commits/feature%2Fx")
    assert source.resolve(feature[:10]) == feature


def test_resolve_unknown_ref_is_not_found_naming_the_ref(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource]
) -> None:
    fake.install(rsps)
    with pytest.raises(NotFound, match=r"ref 'nope' not found in GitHub repository octo/demo"
                       r".*No commit found for SHA: nope") as info:
        make_source().resolve("nope")
    _assert_no_token(str(info.value), repr(info.value))


def test_resolve_unknown_repository_is_not_found_naming_the_repository(
    rsps: responses.RequestsMock, make_source: Callable[..., GitHubSource]
) -> None:
    rsps.add(responses.GET, f"{API}/repos/octo/missing/commits/main",
             **error(404, "Not Found"))
    with pytest.raises(NotFound, match=r"repository octo/missing not found") as info:
        make_source(repo="octo/missing").resolve("main")
    _assert_no_token(str(info.value))


def test_resolve_empty_repository_is_not_found(
    rsps: responses.RequestsMock, make_source: Callable[..., GitHubSource]
) -> None:
    rsps.add(responses.GET, f"{API}/repos/octo/demo/commits/main",
             **error(409, "Git Repository is empty."))
    with pytest.raises(NotFound, match="is empty"):
        make_source().resolve("main")


@pytest.mark.parametrize("ref", ["", "  ", "a b", "main..dev", "x\x00"])
def test_resolve_rejects_impossible_refs_without_a_request(
    ref: str, make_source: Callable[..., GitHubSource]
) -> None:
    source = make_source()
    with pytest.raises(NotFound):
        source.resolve(ref)
    assert source.requests == 0


def test_bad_repo_and_auth_are_validation_errors(make_source: Callable[..., GitHubSource]) -> None:
    with pytest.raises(ValidationError):
        make_source(repo="not-a-repo")
    with pytest.raises(ValidationError, match="auth must be"):
        make_source(auth=12345)


# --------------------------------------------------------------------------- tree


def test_tree_lists_regular_files_only(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource]
) -> None:
    fake.install(rsps)
    source = make_source()
    commit = fake.refs["main"]
    tree = source.tree(commit)
    assert source.requests == 1
    assert rsps.calls[0].request.url == f"{API}/repos/octo/demo/git/trees/{commit}?recursive=1"
    assert sorted(tree) == ["README.md", "empty.txt", "scripts/run.sh", "src/app.py",
                            "src/util/strings.py"]  # no symlink, no submodule, no dirs
    assert tree["empty.txt"] == git_blob_sha(b"")
    assert "docs/link.md" not in tree  # a symlink
    assert "vendor/lib" not in tree  # a submodule
    assert "src" not in tree  # a directory
    assert source.tree(commit) is tree
    assert source.requests == 1  # once per commit


def test_tree_of_unknown_commit_is_not_found(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource]
) -> None:
    fake.install(rsps)
    with pytest.raises(NotFound, match=r"commit 0{40} not found in GitHub repository octo/demo"):
        make_source().tree("0" * 40)


def test_tree_is_kept_on_disk_so_a_new_process_sends_nothing(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource]
) -> None:
    fake.install(rsps)
    commit = fake.refs["main"]
    first = dict(make_source().tree(commit))
    again = make_source()
    assert dict(again.tree(commit)) == first
    assert again.requests == 0


def _big_fake() -> FakeGitHub:
    fake = FakeGitHub("octo/big")
    files: dict[str, bytes | str | Symlink | Submodule] = {}
    for top in ("alpha", "beta", "gamma"):
        for sub in ("one", "two"):
            for i in range(4):
                files[f"{top}/{sub}/f{i}.py"] = f"# {top} {sub} {i}\n"
    files["root.py"] = "print('root')\n"
    fake.commit(files)
    fake.truncate_over = 10  # GitHub truncates past 100,000 entries; same shape
    return fake


def test_truncated_tree_walks_only_the_directories_a_path_needs(
    rsps: responses.RequestsMock, make_source: Callable[..., GitHubSource]
) -> None:
    fake = _big_fake().install(rsps)
    source = make_source(repo="octo/big")
    commit = fake.refs["main"]
    tree = source.tree(commit)
    assert tree.truncated
    assert source.requests == 1
    # alpha/one/* is in the truncated answer: known without a request
    assert tree["alpha/one/f0.py"] == fake.files(commit)["alpha/one/f0.py"].sha
    assert source.requests == 1
    # gamma/two/f3.py is not: list gamma/two (its sha came with the truncated answer?)
    expected = fake.files(commit)["gamma/two/f3.py"].sha
    assert source.blob_sha(commit, "gamma/two/f3.py") == expected
    walked = source.requests - 1
    assert 1 <= walked <= 3  # at most root, gamma, gamma/two: never the whole tree
    for call in rsps.calls[1:]:
        assert "recursive" not in call.request.url  # one level at a time
    assert tree.get("gamma/two/nope.py") is None
    assert tree.get("nowhere/at/all.py") is None
    assert "root.py" in tree


def test_truncated_tree_completes_when_iterated(
    rsps: responses.RequestsMock, make_source: Callable[..., GitHubSource]
) -> None:
    fake = _big_fake().install(rsps)
    source = make_source(repo="octo/big")
    commit = fake.refs["main"]
    tree = source.tree(commit)
    expected = {p: e.sha for p, e in fake.files(commit).items()}
    assert dict(tree) == expected
    assert len(tree) == 25
    spent = source.requests
    assert spent <= 1 + 1 + 3  # the truncated answer, the root, one per top directory
    # a new process gets the truncated root from disk and the directories from disk too
    again = make_source(repo="octo/big")
    assert dict(again.tree(commit)) == expected
    assert again.requests == 0


# --------------------------------------------------------------------------- blobs


def test_read_blob_decodes_base64_with_line_breaks_and_caches_on_disk(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
    tmp_path: Path,
) -> None:
    data = ("line of code number %d\n" * 40 % tuple(range(40))).encode()
    sha = fake.commit({"big.py": data})
    del sha
    fake.install(rsps)
    blob = git_blob_sha(data)
    assert "\n" in blob_payload("octo/demo", data)["content"]  # GitHub's shape
    source = make_source()
    assert source.read_blob(blob) == data
    assert source.requests == 1
    assert rsps.calls[0].request.url == f"{API}/repos/octo/demo/git/blobs/{blob}"
    assert source.read_blob(blob) == data
    assert source.requests == 1  # second read: disk cache, no request
    assert make_source().read_blob(blob) == data  # another process, same cache
    assert fake.calls["blob"] == 1
    assert (tmp_path / "cache" / "blobs" / blob[:2] / blob[2:]).read_bytes() == data


def test_read_empty_blob(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource]
) -> None:
    fake.install(rsps)
    assert make_source().read_blob(git_blob_sha(b"")) == b""


def test_file_over_one_megabyte_is_read_through_the_blobs_api(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource]
) -> None:
    data = b"".join(b"x = %07d  # a long generated line of python\n" % i for i in range(40_000))
    assert len(data) > 1_500_000
    fake.commit({"generated.py": data})
    fake.install(rsps)
    source = make_source()
    commit = fake.refs["main"]
    assert source.read_blob(source.tree(commit)["generated.py"]) == data
    assert fake.calls["blob"] == 1
    assert fake.calls["contents"] == 0


def test_damaged_blob_from_github_is_unavailable_not_cached(
    rsps: responses.RequestsMock, make_source: Callable[..., GitHubSource]
) -> None:
    sha = git_blob_sha(b"real\n")
    payload = blob_payload("octo/demo", b"forged\n") | {"sha": sha}
    rsps.add(responses.GET, f"{API}/repos/octo/demo/git/blobs/{sha}", json=payload,
             headers=rate_headers())
    source = make_source()
    with pytest.raises(SourceUnavailable, match="damaged"):
        source.read_blob(sha)
    assert sha not in source._blobs


def test_blob_404_is_unavailable_not_not_found(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource]
) -> None:
    fake.install(rsps)
    with pytest.raises(SourceUnavailable, match="does not serve blob"):
        make_source().read_blob("f" * 40)


def test_malformed_blob_sha_is_not_found_without_a_request(
    make_source: Callable[..., GitHubSource],
) -> None:
    source = make_source()
    with pytest.raises(NotFound):
        source.read_blob("../../etc/passwd")
    assert source.requests == 0


def test_disk_blob_cache_drops_damaged_entries(tmp_path: Path) -> None:
    cache = DiskBlobCache(tmp_path)
    sha = git_blob_sha(b"hello\n")
    cache.put(sha, b"hello\n")
    assert cache.get(sha) == b"hello\n"
    (tmp_path / sha[:2] / sha[2:]).write_bytes(b"tampered\n")
    assert cache.get(sha) is None
    assert sha not in cache
    cache.put(sha, b"not the bytes of that sha")
    assert sha not in cache
    assert not list(tmp_path.rglob(".tmp-*"))  # atomic writes leave nothing behind


def test_json_cache_prunes_least_recently_used(tmp_path: Path) -> None:
    cache = JsonCache(tmp_path)
    cache.PRUNE_EVERY = 1
    for i in range(5):
        cache.put("ns", f"k{i}", {"i": i}, keep=3)
    kept = sorted(p.stem for p in (tmp_path / "ns").iterdir())
    assert len(kept) == 3
    assert cache.get("ns", "k4") == {"i": 4}
    assert cache.get("ns", "feature/with slash") is None
    cache.put("ns", "feature/with slash", [1])
    assert cache.get("ns", "feature/with slash") == [1]


# --------------------------------------------------------------------------- contained


def test_contained_keeps_real_answers_on_disk(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource]
) -> None:
    old = fake.refs["main"]
    tip = fake.commit({**FILES, "added.py": "x = 1\n"})
    aside = fake.commit({**FILES, "topic.py": "y = 2\n"}, branch="topic")  # diverged
    fake.install(rsps)
    assert make_source().contained([old, aside], tip) == {old}
    again = make_source()  # another process: both answers come from disk
    assert again.contained([old, aside], tip) == {old}
    assert again.requests == 0
    assert fake.calls["compare"] == 2


def test_a_404_from_compare_is_no_answer_and_is_asked_again(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource]
) -> None:
    # GitHub answers 404 for a commit it does not know (yet), a deleted fork, or no
    # access: whether the tip contains the commit could not be told. It was kept on disk
    # as "not contained", so every later pass took that for an answer (QA finding).
    old = fake.refs["main"]
    tip = fake.commit({**FILES, "added.py": "x = 1\n"})
    # Answered once (responses takes the first match, once, while others match), then
    # GitHub can compare them.
    rsps.add(responses.GET, f"{API}/repos/octo/demo/compare/{old}...{tip}",
             **error(404, "Not Found"))
    fake.install(rsps)
    assert make_source().contained([old], tip) == frozenset()  # not placed: not judged
    again = make_source()
    assert again.contained([old], tip) == {old}
    assert again.requests == 1  # asked again, not read from disk


def _edit_listing(change: Callable[[dict[str, Any]], object]) -> Callable[[Path], None]:
    """A hand edit of a cached listing that keeps it valid JSON."""

    def edit(path: Path) -> None:
        head, _, body = path.read_bytes().partition(b"\n")
        doc = json.loads(body or head)  # the value (or, before digests, the whole doc)
        change(doc if body else doc["value"])
        path.write_bytes(head + b"\n" + json.dumps(doc).encode() if body
                         else json.dumps(doc).encode())

    return edit


@pytest.mark.parametrize("damage", [
    pytest.param(lambda p: p.write_bytes(b"\x00\xff not json"), id="garbage"),
    pytest.param(lambda p: p.write_bytes(p.read_bytes()[:40]), id="cut-short"),
    pytest.param(lambda p: p.write_text("[" * 100_000), id="nested-too-deep"),
    pytest.param(_edit_listing(lambda v: v["files"].update(dict.fromkeys(v["files"], 7))),
                 id="blob-ids-edited"),
    pytest.param(_edit_listing(lambda v: v["files"].clear()), id="files-emptied"),
    pytest.param(_edit_listing(lambda v: v.update(truncated=True, files={},
                                                  dirs={"src": "zz"})), id="dirs-edited"),
])
def test_a_damaged_tree_cache_is_dropped_and_rebuilt_never_a_verdict(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: Callable[[Path], None],
) -> None:
    old = fake.refs["main"]
    lines = ["def main():", "    return 1"]
    citation = Citation("src/app.py", 1, 2, old, git_blob_sha(FILES["src/app.py"].encode()),
                        fingerprint_lines(lines, 1, 2))
    new = fake.commit({**FILES, "src/app.py": "# moved down\n" + FILES["src/app.py"]})
    fake.install(rsps)

    def outcome() -> tuple[Outcome, str]:
        [check] = Verifier(make_source()).check([citation], new)
        return check.outcome, check.detail

    assert outcome() == (Outcome.RELOCATED, "moved within the file to src/app.py:2-3")
    listings = sorted((tmp_path / "cache" / "github").rglob("commits/*.json"))
    assert listings
    for path in listings:
        damage(path)
    caplog.set_level(logging.WARNING, logger="verified_memory")
    # Each damaged listing: ignored and asked again, with one line; never a verdict.
    assert outcome() == (Outcome.RELOCATED, "moved within the file to src/app.py:2-3")
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == len(listings), said
    assert all("damaged" in line and "commits" in line for line in said), said
    # Rebuilt: the next pass reads it from the disk, and says nothing.
    caplog.clear()
    source = make_source()
    assert Verifier(source).check([citation], new)[0].outcome is Outcome.RELOCATED
    assert source.requests == 0  # the tree from the disk, the blobs too
    assert caplog.records == []


def test_json_cache_drops_a_damaged_entry_once_and_misses_an_older_one(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cache = JsonCache(tmp_path)
    cache.put("ns", "k", {"files": {"a.py": "b" * 40}})
    [path] = (tmp_path / "ns").iterdir()
    assert cache.get("ns", "k") == {"files": {"a.py": "b" * 40}}
    path.write_bytes(path.read_bytes().replace(b"b" * 40, b"c" * 40))  # valid JSON still
    caplog.set_level(logging.WARNING, logger="verified_memory")
    assert cache.get("ns", "k") is None
    assert [r.getMessage() for r in caplog.records] == [
        f"cache entry {path} is damaged (its contents do not match their digest): "
        "dropped, it is asked for again"]
    assert not path.exists()
    assert cache.get("ns", "k") is None  # gone: said once
    assert len(caplog.records) == 1
    # An entry of an older version (no digest) is a plain miss, and is written anew.
    path.write_text('{"key": "k", "value": {"files": {}}}')
    assert cache.get("ns", "k") is None
    assert len(caplog.records) == 1
    cache.put("ns", "k", [1])
    assert cache.get("ns", "k") == [1]


# --------------------------------------------------------------------------- renames


def test_renames_from_one_compare_call(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource]
) -> None:
    old = fake.refs["main"]
    moved = {k: v for k, v in FILES.items() if k not in ("src/util/strings.py", "README.md")}
    new = fake.commit({**moved, "src/text/strings.py": FILES["src/util/strings.py"]})
    fake.install(rsps)
    source = make_source()
    found = source.renames(old, new)
    assert set(found) == {Rename("src/util/strings.py", "src/text/strings.py", 100),
                          Rename("README.md", None)}
    assert source.requests == 1
    assert rsps.calls[0].request.url == f"{API}/repos/octo/demo/compare/{old}...{new}"
    assert source.renames(old, new) == found
    assert source.renames(new, new) == ()
    assert source.requests == 1
    assert set(source.changed_paths(old, new) or ()) == {"src/text/strings.py"}
    assert source.requests == 1  # the same compare answer
    again = make_source()
    assert again.renames(old, new) == found  # kept on disk: both ends are commits
    assert again.changed_paths(old, new) == ("src/text/strings.py",)
    assert fake.calls["compare"] == 1
    # among the files of some endings only, from the same answer
    assert again.renames(old, new, suffixes=(".py",)) == (
        Rename("src/util/strings.py", "src/text/strings.py", 100),)
    assert again.renames(old, new, suffixes=(".txt",)) == ()
    assert again.renames(old, new, suffixes=(".md",)) == (Rename("README.md", None),)
    assert again.changed_paths(old, new, suffixes=(".md",)) == ()
    assert fake.calls["compare"] == 1


def test_renames_when_github_no_longer_knows_the_old_commit(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource]
) -> None:
    fake.install(rsps)
    source = make_source()
    assert source.renames("e" * 40, fake.refs["main"]) == ()
    assert source.changed_paths("e" * 40, fake.refs["main"]) is None


def test_renames_beyond_githubs_300_file_cap_come_from_the_trees(
    rsps: responses.RequestsMock, make_source: Callable[..., GitHubSource]
) -> None:
    fake = FakeGitHub("octo/demo")
    before: dict[str, bytes | str | Symlink | Submodule] = {
        f"m/f{i}.py": f"v = {i}\n" for i in range(310)}
    before["keep/old_name.py"] = "def kept():\n    pass\n"
    old = fake.commit(before)
    after: dict[str, bytes | str | Symlink | Submodule] = {
        f"m/f{i}.py": f"v = {i} + 1\n" for i in range(310)}
    after["keep/new_name.py"] = before["keep/old_name.py"]
    new = fake.commit(after)
    fake.install(rsps)
    source = make_source()
    found = source.renames(old, new)
    assert Rename("keep/old_name.py", "keep/new_name.py") in found
    changed = source.changed_paths(old, new)
    assert changed is not None
    assert len(changed) == 311  # GitHub listed 300; the trees gave the rest


# --------------------------------------------------------------------------- faults


def test_connection_error_then_success(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
    sleeps: list[float],
) -> None:
    rsps.add(responses.GET, f"{API}/repos/octo/demo/commits/main",
             body=requests.exceptions.ConnectionError("connection reset by peer"))
    fake.install(rsps)
    source = make_source()
    assert source.resolve("main") == fake.refs["main"]
    assert source.requests == 2
    assert source.rate_limited_requests == 1  # the failed attempt got no answer
    assert sleeps == [1.0]


def test_timeout_then_success(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
    sleeps: list[float],
) -> None:
    commit = fake.refs["main"]
    rsps.add(responses.GET, f"{API}/repos/octo/demo/git/trees/{commit}?recursive=1",
             body=requests.exceptions.ReadTimeout("read timed out"))
    fake.install(rsps)
    source = make_source()
    assert "src/app.py" in source.tree(commit)
    assert sleeps == [1.0]


def test_502_then_success(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
    sleeps: list[float],
) -> None:
    blob = git_blob_sha(b"# demo\n")
    rsps.add(responses.GET, f"{API}/repos/octo/demo/git/blobs/{blob}", status=502,
             body="<html><body><h1>502 Bad Gateway</h1></body></html>",
             content_type="text/html")
    fake.install(rsps)
    assert make_source().read_blob(blob) == b"# demo\n"
    assert sleeps == [1.0]


def test_persistent_5xx_gives_up_with_backoff_then_unavailable(
    rsps: responses.RequestsMock, make_source: Callable[..., GitHubSource], sleeps: list[float],
) -> None:
    rsps.add(responses.GET, f"{API}/repos/octo/demo/commits/main",
             **error(503, "Service Unavailable"))
    source = make_source()
    with pytest.raises(SourceUnavailable, match=r"503 Service Unavailable; gave up after "
                       r"5 attempts") as info:
        source.resolve("main")
    assert sleeps == [1.0, 2.0, 4.0, 8.0]
    assert source.requests == 5
    assert info.value.__cause__ is None or "github" not in type(info.value.__cause__).__module__


def test_secondary_rate_limit_honours_retry_after(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
    sleeps: list[float],
) -> None:
    rsps.add(responses.GET, f"{API}/repos/octo/demo/commits/main", **error(
        403, "You have exceeded a secondary rate limit. Please wait a few minutes before "
        "you try again.", retry_after=7))
    fake.install(rsps)
    source = make_source()
    assert source.resolve("main") == fake.refs["main"]
    assert sleeps == [7.0]


def test_secondary_rate_limit_without_retry_after_waits_a_minute(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
    sleeps: list[float],
) -> None:
    rsps.add(responses.GET, f"{API}/repos/octo/demo/commits/main", **error(
        403, "You have exceeded a secondary rate limit and have been temporarily blocked "
        "from content creation. Please retry your request again later."))
    fake.install(rsps)
    make_source().resolve("main")
    assert sleeps == [60.0]


def test_429_with_retry_after(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
    sleeps: list[float],
) -> None:
    rsps.add(responses.GET, f"{API}/repos/octo/demo/commits/main",
             **error(429, "Too Many Requests", retry_after=3))
    fake.install(rsps)
    make_source().resolve("main")
    assert sleeps == [3.0]


def test_primary_rate_limit_within_bound_waits_for_reset_then_succeeds(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
    sleeps: list[float],
) -> None:
    rsps.add(responses.GET, f"{API}/repos/octo/demo/commits/main", **error(
        403, "API rate limit exceeded for user ID 1.", remaining=0, reset=RESET_AT))
    fake.install(rsps)
    source = make_source(max_rate_limit_wait=60)
    assert source.resolve("main") == fake.refs["main"]
    assert sleeps == [RESET_AT - NOW + 1.0]  # until the reset, plus a second of margin


def test_primary_rate_limit_beyond_bound_gives_up_at_once(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
    sleeps: list[float],
) -> None:
    rsps.add(responses.GET, f"{API}/repos/octo/demo/commits/main", **error(
        403, "API rate limit exceeded for user ID 1.", remaining=0, reset=int(NOW) + 3600))
    fake.install(rsps)
    source = make_source(max_rate_limit_wait=60)
    with pytest.raises(SourceUnavailable, match=r"rate limit exhausted .* lifts in 3601 s, "
                       r"longer than max_rate_limit_wait \(60 s\)") as info:
        source.resolve("main")
    assert sleeps == []
    assert source.requests == 1
    _assert_no_token(str(info.value))


def test_total_wait_is_bounded(
    rsps: responses.RequestsMock, make_source: Callable[..., GitHubSource], sleeps: list[float],
) -> None:
    rsps.add(responses.GET, f"{API}/repos/octo/demo/commits/main",
             **error(429, "Too Many Requests", retry_after=50))
    source = make_source(retry=RetryPolicy(attempts=10, max_retry_wait=120))
    with pytest.raises(SourceUnavailable, match="429 secondary rate limit; gave up after 3"):
        source.resolve("main")
    assert sleeps == [50.0, 50.0]  # a third wait would pass 120 s in total


def test_bad_token_is_unavailable_without_retry_or_token_text(
    rsps: responses.RequestsMock, make_source: Callable[..., GitHubSource], sleeps: list[float],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    rsps.add(responses.GET, f"{API}/repos/octo/demo/commits/main", status=401,
             body=error_body("Bad credentials", "https://docs.github.com/rest", status=401),
             content_type="application/json; charset=utf-8")
    source = make_source()
    with pytest.raises(SourceUnavailable, match=r"rejected the credentials \(401 Bad "
                       r"credentials\)") as info:
        source.resolve("main")
    assert source.requests == 1
    assert sleeps == []
    _assert_no_token(str(info.value), repr(info.value), repr(source), str(source),
                     caplog.text, repr(source._http))


def test_forbidden_is_unavailable(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
) -> None:
    commit = fake.refs["main"]
    rsps.add(responses.GET, f"{API}/repos/octo/demo/git/trees/{commit}?recursive=1",
             **error(403, "Resource not accessible by personal access token"))
    with pytest.raises(SourceUnavailable, match="Resource not accessible"):
        make_source().tree(commit)


def test_token_never_appears_in_any_failure(
    rsps: responses.RequestsMock, make_source: Callable[..., GitHubSource],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    rsps.add(responses.GET, f"{API}/repos/octo/demo/commits/a",
             body=requests.exceptions.ConnectionError(f"boom {API}"))
    rsps.add(responses.GET, f"{API}/repos/octo/demo/commits/b", **error(500, "Server Error"))
    rsps.add(responses.GET, f"{API}/repos/octo/demo/commits/c", **error(404, "Not Found"))
    source = make_source(retry=RetryPolicy(attempts=2))
    texts = [repr(source)]
    for ref in ("a", "b", "c"):
        with pytest.raises((SourceUnavailable, NotFound)) as info:
            source.resolve(ref)
        texts += [str(info.value), repr(info.value)]
    _assert_no_token(*texts, caplog.text)


def test_unreadable_source_makes_citations_unverifiable_never_missing(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
) -> None:
    commit = fake.refs["main"]
    text = "def main():\n    return 2\n"  # the cited file changed: its blob must be read
    lines = "def main():\n    return 1\n".splitlines()
    citation = Citation("src/app.py", 1, 2, commit, git_blob_sha(b"old"),
                        fingerprint_lines(lines, 1, 2))
    new = fake.commit({**FILES, "src/app.py": text})
    for _ in range(2):  # each registered answer is served once while the fake also matches
        rsps.add(responses.GET, f"{API}/repos/octo/demo/git/blobs/{git_blob_sha(text.encode())}",
                 **error(503, "Service Unavailable"))
    fake.install(rsps)
    source = make_source(retry=RetryPolicy(attempts=2))
    [check] = Verifier(source).check([citation], new)
    assert check.outcome is Outcome.UNVERIFIABLE
    _assert_no_token(check.detail)


# --------------------------------------------------------------------------- ETags


def test_unchanged_ref_is_a_304_that_costs_no_rate_limit(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
) -> None:
    fake.install(rsps)
    source = make_source()
    commit = source.resolve("main")
    source.tree(commit)
    spent = source.rate_limited_requests
    assert spent == 2
    assert source.resolve("main") == commit
    assert rsps.calls[-1].response.status_code == 304
    assert rsps.calls[-1].request.headers["If-None-Match"]
    assert source.tree(commit) is not None
    assert source.rate_limited_requests == spent
    assert source.requests == 3
    # another process: the ETag and the tree come from disk
    again = make_source()
    assert again.resolve("main") == commit
    again.tree(commit)
    assert again.rate_limited_requests == 0
    assert again.requests == 1
    assert fake.calls["304"] == 2
    assert again.usage() == {"requests": 1, "rate_limited_requests": 0,
                             "rate_limit_remaining": fake.remaining}


def test_moved_branch_is_seen_despite_the_cached_etag(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
) -> None:
    fake.install(rsps)
    source = make_source()
    first = source.resolve("main")
    second = fake.commit({**FILES, "added.py": "y = 1\n"})
    assert source.resolve("main") == second != first
    assert source.rate_limited_requests == 2


def test_a_ref_is_asked_once_per_pass(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
) -> None:
    # `vmem verify` says its scope, then runs the pass: both resolve the ref and the main
    # line within one time limit, which is one pass: one request each, not two.
    from verified_memory.budget import time_budget

    fake.install(rsps)
    source = make_source()
    with time_budget(60):
        commit = source.resolve("main")
        assert source.resolve("main") == commit
        assert source.requests == 1
    moved = fake.commit({**FILES, "added.py": "y = 1\n"})
    with time_budget(60):  # the next pass asks again, and sees the move
        assert source.resolve("main") == moved
        assert source.resolve("main") == moved
    assert source.requests == 2


def test_damaged_etag_cache_is_a_miss_not_a_wrong_answer(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
    tmp_path: Path,
) -> None:
    fake.install(rsps)
    make_source().resolve("main")
    [entry] = (tmp_path / "cache" / "github").rglob("refs/*.json")
    entry.write_text('{"key": "main", "value": {"sha": "not-a-sha", "etag": "W/\\"x\\""}}')
    source = make_source()
    assert source.resolve("main") == fake.refs["main"]
    assert "If-None-Match" not in rsps.calls[-1].request.headers
    assert rsps.calls[-1].response.status_code == 200


# --------------------------------------------------------------------------- wiring


def test_from_settings_uses_the_token_and_an_enterprise_url(
    rsps: responses.RequestsMock, tmp_path: Path, sleeps: list[float],
) -> None:
    fake = FakeGitHub("corp/tool", host="https://ghe.example.com:443/api/v3")
    fake.commit(FILES)
    fake.install(rsps)
    settings = Settings(database_url="sqlite:///:memory:", github_token=TOKEN)
    source = GitHubSource.from_settings(
        "corp/tool", settings, env={"GITHUB_API_URL": "https://ghe.example.com/api/v3"},
        cache_dir=tmp_path, sleep=sleeps.append,
    )
    try:
        assert source.resolve("main") == fake.refs["main"]
        assert rsps.calls[0].request.url.startswith("https://ghe.example.com:443/api/v3/repos/")
        assert rsps.calls[0].request.headers["Authorization"] == f"token {TOKEN}"
        assert "ghe.example.com" in repr(source)
        _assert_no_token(repr(source), repr(settings))
    finally:
        source.close()
        source.close()  # twice is fine


@pytest.mark.parametrize(("url", "said"), [
    ("ghe.example.com/api/v3", "is not http(s)://HOST/..."),
    ("ftp://ghe.example.com/api", "is not http(s)://HOST/..."),
    ("http://[::1", "is not a URL (Invalid IPv6 URL)"),
    ("https://ghe.example.com:99999/api/v3", "is not a URL (Port out of range"),
])
def test_a_malformed_api_url_is_one_clear_error(url: str, said: str) -> None:
    settings = Settings(database_url="sqlite:///:memory:", github_token=TOKEN)
    with pytest.raises(ValidationError) as info:
        GitHubSource.from_settings("corp/tool", settings, env={"GITHUB_API_URL": url})
    assert said in str(info.value)
    assert "GITHUB_API_URL" in str(info.value)
    _assert_no_token(str(info.value))


def test_github_app_installation_auth(
    rsps: responses.RequestsMock, fake: FakeGitHub, make_source: Callable[..., GitHubSource],
) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from github import Auth

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    rsps.add(responses.POST, f"{API}/app/installations/42/access_tokens", status=201,
             json={"token": "ghs_installationtoken", "expires_at": "2099-01-01T00:00:00Z",
                   "permissions": {"contents": "read"}, "repository_selection": "selected"})
    fake.install(rsps)
    auth = Auth.AppAuth(123, pem).get_installation_auth(42)
    source = make_source(auth=auth)
    assert source.resolve("main") == fake.refs["main"]
    assert rsps.calls[-1].request.headers["Authorization"] == "token ghs_installationtoken"
    assert "ghs_installationtoken" not in repr(source)


def test_injected_github_client_is_used_and_not_closed(
    rsps: responses.RequestsMock, fake: FakeGitHub, tmp_path: Path,
) -> None:
    from github import Auth, Github

    fake.install(rsps)
    client = Github(auth=Auth.Token(TOKEN), retry=None, seconds_between_requests=None, lazy=True)
    source = GitHubSource("octo/demo", github=client, cache_dir=tmp_path)
    assert source.resolve("main") == fake.refs["main"]
    source.close()
    assert client.requester is not None
    client.close()


def test_missing_pygithub_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    monkeypatch.setitem(sys.modules, "github", None)
    with pytest.raises(MissingDependency, match=r"verified-memory\[github\]") as info:
        GitHubSource("octo/demo", TOKEN, cache_dir=tmp_path)
    assert info.value.extra == "github"
    assert isinstance(info.value, ImportError)
