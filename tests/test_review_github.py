"""The review bot on GitHub pull requests: files with patches (paginated, renamed, 300+),
one review created and then updated in place, nothing posted without findings, bad pull
requests and outages as one clear line. HTTP is mocked with ``responses``; the code is
read from a real working copy (as in a GitHub Actions checkout) or through the API."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import responses

from tests.github_payloads import API, FakeGitHub, error, error_body, rate_headers
from tests.gitrepo import GitRepo
from tests.test_cli import vmem
from tests.test_review import FETCH  # lines: 1 MAX_RETRIES, 4-8 fetch, 11-12 close
from verified_memory import LocalGitSource, MemoryService, Status
from verified_memory.review.github import REVIEW_MARKER, comment_marker
from verified_memory.sources.base import git_blob_sha
from verified_memory.sources.github import GitHubSource, RetryPolicy
from verified_memory.store.sqlite import SQLiteStore

TOKEN = "ghp_ReviewBotTokenNeverPrinted0123456789ab"
REPO = "acme/net"
HOST = r"https://api\.github\.com(?::443)?"
WEB_API = "https://api.github.com"
JSON = "application/json; charset=utf-8"
BOT = "github-actions[bot]"  # who the token posts as


Answer = tuple[int, dict[str, str], str]


def diff_lines(patch: str) -> tuple[set[int], set[int]]:
    """The base (LEFT) and head (RIGHT) lines a unified diff shows: what GitHub accepts
    review comments on."""
    left: set[int] = set()
    right: set[int] = set()
    old = new = 0
    for line in patch.split("\n"):
        match = re.match(r"@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@", line)
        if match:
            old, new = int(match[1]), int(match[2])
        elif line.startswith("+"):
            right.add(new)
            new += 1
        elif line.startswith("-"):
            left.add(old)
            old += 1
        elif line.startswith(" "):
            left.add(old)
            right.add(new)
            old += 1
            new += 1
    return left, right


class FakePulls:
    """GitHub's pull request endpoints for one repository, with state: reviews and review
    comments posted are listed on the next run, edited and deleted; a comment whose line
    leaves the diff after a push becomes outdated (``line: null``), as on GitHub."""

    def __init__(self, repo: str = REPO, *, compare: bool = True) -> None:
        self.repo = repo
        self.compare = compare
        self.pulls: dict[int, dict[str, Any]] = {}
        self.files: dict[int, list[dict[str, Any]]] = {}
        self.reviews: dict[int, list[dict[str, Any]]] = {}
        self.comments: dict[int, list[dict[str, Any]]] = {}
        self.merge_bases: dict[tuple[str, str], str] = {}
        self.log: list[tuple[str, str]] = []  # (method, path) of every request
        self.posted: list[dict[str, Any]] = []  # bodies of POST / PUT / PATCH requests
        self.refuse_comments = False  # answer 422 to any inline comment
        self.refuse_writes: int | None = None  # answer this status to every write
        self._ids = itertools.count(9001)

    @property
    def api(self) -> str:
        return f"{WEB_API}/repos/{self.repo}"

    def open(self, number: int, *, base: str, head: str, files: list[dict[str, Any]],
             merge_base: str | None = None, merged: bool = False,
             merge_commit: str | None = None, changed_files: int | None = None) -> None:
        """Open the pull request, or push to it (a new head, new files)."""
        self.pulls[number] = {
            "url": f"{self.api}/pulls/{number}", "id": 100 + number, "number": number,
            "state": "closed" if merged else "open", "merged": merged,
            "merge_commit_sha": merge_commit, "changed_files": changed_files or len(files),
            "html_url": f"https://github.com/{self.repo}/pull/{number}",
            "head": {"sha": head, "ref": "feature"}, "base": {"sha": base, "ref": "main"},
        }
        self.files[number] = files
        self.merge_bases[(base, head)] = merge_base or base
        for comment in self.comments.get(number, []):
            if not self._in_diff(number, comment["path"], comment["side"], comment["line"]):
                comment["line"] = None  # outdated
            else:
                comment["commit_id"] = head

    def _in_diff(self, number: int, path: str, side: str, line: int | None) -> bool:
        entry = next((f for f in self.files[number] if f["filename"] == path), None)
        if entry is None or "patch" not in entry or line is None:
            return False
        left, right = diff_lines(entry["patch"])
        return line in (right if side == "RIGHT" else left)

    def writes(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p in self.log if m != "GET"]

    # ------------------------------------------------------------------ serving

    def install(self, rsps: responses.RequestsMock) -> FakePulls:
        routes: list[tuple[str, str, Callable[..., Answer]]] = [
            ("GET", r"/pulls/(?P<n>\d+)", self._pull),
            ("GET", r"/pulls/(?P<n>\d+)/files", self._files),
            ("GET", r"/pulls/(?P<n>\d+)/reviews", self._list_reviews),
            ("POST", r"/pulls/(?P<n>\d+)/reviews", self._create_review),
            ("PUT", r"/pulls/(?P<n>\d+)/reviews/(?P<id>\d+)", self._edit_review),
            ("GET", r"/pulls/(?P<n>\d+)/comments", self._list_comments),
            ("POST", r"/pulls/(?P<n>\d+)/comments", self._create_comment),
            ("PATCH", r"/pulls/comments/(?P<id>\d+)", self._edit_comment),
            ("DELETE", r"/pulls/comments/(?P<id>\d+)", self._delete_comment),
        ]
        if self.compare:
            routes.append(("GET", r"/compare/(?P<base>[0-9a-f]+)\.\.\.(?P<head>[0-9a-f]+)",
                           self._compare))
        for method, path, handler in routes:
            pattern = re.compile(HOST + re.escape(f"/repos/{self.repo}") + path + r"(\?.*)?$")
            rsps.add_callback(method, pattern, callback=self._serve(pattern, handler),
                              content_type=None)
        return self

    def _serve(self, pattern: re.Pattern[str], handler: Callable[..., Answer]) -> Any:
        def callback(request: Any) -> Answer:
            match = pattern.match(request.url)
            assert match is not None
            self.log.append((request.method, urlparse(request.url).path))
            if request.method != "GET" and self.refuse_writes is not None:
                return (self.refuse_writes, {**rate_headers(), "Content-Type": JSON},
                        error_body("Resource not accessible by integration"))
            body = json.loads(request.body) if request.body else {}
            if request.method != "GET":
                self.posted.append({"method": request.method, **body})
            query = parse_qs(urlparse(request.url).query)
            status, headers, text = handler(body, query, **{k: v for k, v in
                                                           match.groupdict().items() if v})
            return status, {**rate_headers(), "Content-Type": JSON, **headers}, text

        return callback

    @staticmethod
    def _ok(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Answer:
        return status, headers or {}, json.dumps(data)

    @staticmethod
    def _missing() -> Answer:
        return 404, {}, error_body("Not Found", "https://docs.github.com/rest/pulls/pulls")

    def _pull(self, body: Any, query: Any, n: str) -> Answer:
        pull = self.pulls.get(int(n))
        return self._ok(pull) if pull else self._missing()

    def _files(self, body: Any, query: Any, n: str) -> Answer:
        if int(n) not in self.files:
            return self._missing()
        per_page = int(query.get("per_page", ["30"])[0])
        page = int(query.get("page", ["1"])[0])
        everything = self.files[int(n)][:3000]
        last = max(1, -(-len(everything) // per_page))
        chunk = everything[(page - 1) * per_page : page * per_page]
        links = []
        url = f"{self.api}/pulls/{n}/files?per_page={per_page}&page="
        if page < last:
            links += [f'<{url}{page + 1}>; rel="next"', f'<{url}{last}>; rel="last"']
        if page > 1:
            links += [f'<{url}1>; rel="first"', f'<{url}{page - 1}>; rel="prev"']
        return self._ok(chunk, headers={"Link": ", ".join(links)} if links else {})

    def _compare(self, body: Any, query: Any, base: str, head: str) -> Answer:
        merge_base = self.merge_bases.get((base, head))
        if merge_base is None:
            return self._missing()
        return self._ok({"status": "ahead", "merge_base_commit": {"sha": merge_base},
                         "commits": [], "files": []})

    def _review_json(self, n: int, review_id: int, body: str, commit: str) -> dict[str, Any]:
        return {"id": review_id, "node_id": f"PRR_{review_id}", "body": body,
                "state": "COMMENTED", "commit_id": commit,
                "user": {"login": BOT, "type": "Bot"},
                "html_url": f"https://github.com/{self.repo}/pull/{n}#pullrequestreview-"
                            f"{review_id}",
                "pull_request_url": f"{self.api}/pulls/{n}"}

    def _comment_json(self, n: int, review_id: int, c: dict[str, Any],
                      commit: str) -> dict[str, Any]:
        cid = next(self._ids)
        return {"id": cid, "pull_request_review_id": review_id, "body": c["body"],
                "path": c["path"], "line": c["line"], "original_line": c["line"],
                "side": c.get("side", "RIGHT"), "commit_id": commit,
                "url": f"{self.api}/pulls/comments/{cid}",
                "html_url": f"https://github.com/{self.repo}/pull/{n}#discussion_r{cid}",
                "user": {"login": BOT, "type": "Bot"}}

    def _refused(self) -> Answer:
        return 422, {}, json.dumps({"message": "Unprocessable Entity",
                                    "errors": ["Line could not be resolved"]})

    def _create_review(self, body: Any, query: Any, n: str) -> Answer:
        number = int(n)
        head = self.pulls[number]["head"]["sha"]
        assert body["event"] == "COMMENT"
        assert body["commit_id"] == head
        for c in body.get("comments", []):
            if self.refuse_comments or not self._in_diff(number, c["path"], c["side"], c["line"]):
                return self._refused()
        review_id = next(self._ids)
        review = self._review_json(number, review_id, body["body"], head)
        self.reviews.setdefault(number, []).append(review)
        for c in body.get("comments", []):
            self.comments.setdefault(number, []).append(
                self._comment_json(number, review_id, c, head))
        return self._ok(review)

    @staticmethod
    def _not_yours(item: dict[str, Any]) -> Answer | None:
        if item["user"]["login"] == BOT:
            return None
        return 403, {}, error_body("Resource not accessible by integration")

    def _edit_review(self, body: Any, query: Any, n: str, id: str) -> Answer:
        review = next((r for r in self.reviews.get(int(n), []) if r["id"] == int(id)), None)
        if review is None:
            return self._missing()
        if refused := self._not_yours(review):
            return refused
        review["body"] = body["body"]
        return self._ok(review)

    def _list_reviews(self, body: Any, query: Any, n: str) -> Answer:
        return self._ok(self.reviews.get(int(n), []))

    def _list_comments(self, body: Any, query: Any, n: str) -> Answer:
        return self._ok(self.comments.get(int(n), []))

    def _create_comment(self, body: Any, query: Any, n: str) -> Answer:
        number = int(n)
        if self.refuse_comments or not self._in_diff(number, body["path"], body["side"],
                                                     body["line"]):
            return self._refused()
        # A single comment outside a review: GitHub wraps it in a review of its own.
        review_id = next(self._ids)
        comment = self._comment_json(number, review_id, body, body["commit_id"])
        self.comments.setdefault(number, []).append(comment)
        return self._ok(comment, 201)

    def _find_comment(self, cid: int) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
        for comments in self.comments.values():
            for c in comments:
                if c["id"] == cid:
                    return comments, c
        return None

    def _edit_comment(self, body: Any, query: Any, id: str) -> Answer:
        found = self._find_comment(int(id))
        if found is None:
            return self._missing()
        if refused := self._not_yours(found[1]):
            return refused
        found[1]["body"] = body["body"]
        return self._ok(found[1])

    def _delete_comment(self, body: Any, query: Any, id: str) -> Answer:
        found = self._find_comment(int(id))
        if found is None:
            return self._missing()
        if refused := self._not_yours(found[1]):
            return refused
        found[0].remove(found[1])
        return 204, {}, ""


def pull_files(repo: GitRepo, base: str, head: str) -> list[dict[str, Any]]:
    """``pulls/{n}/files`` as GitHub answers it for the change base...head of ``repo``."""
    out = []
    for line in repo.run("diff", "--name-status", "-M", f"{base}...{head}").splitlines():
        code, *paths = line.split("\t")
        entry: dict[str, Any] = {"filename": paths[-1], "sha": "0" * 40}
        if code.startswith("R"):
            entry.update(status="renamed", previous_filename=paths[0])
        else:
            entry["status"] = {"A": "added", "D": "removed", "M": "modified"}[code]
        patch = repo.run("diff", "-M", "-U3", "--no-color", f"{base}...{head}", "--", *paths)
        if "\n@@" in patch:
            entry["patch"] = patch[patch.index("\n@@") + 1 :]
        body = entry.get("patch", "").split("\n")
        entry["additions"] = sum(1 for x in body if x.startswith("+"))
        entry["deletions"] = sum(1 for x in body if x.startswith("-"))
        entry["changes"] = entry["additions"] + entry["deletions"]
        out.append(entry)
    return out


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def rsps() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Retries and the spacing of writes sleep through ``time.sleep``: record, never wait."""
    import time

    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return slept


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sleeps: list[float]) -> GitRepo:
    repo = GitRepo.project(tmp_path / "net", {"net/fetch.py": FETCH},
                           origin=f"https://github.com/{REPO}.git")
    monkeypatch.chdir(repo.path)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{tmp_path / 'gh.db'}")
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    for name in ("GITHUB_API_URL", "GITHUB_SERVER_URL"):
        monkeypatch.delenv(name, raising=False)
    return repo


@pytest.fixture
def memories(repo: GitRepo, tmp_path: Path) -> dict[str, str]:
    with MemoryService(SQLiteStore(tmp_path / "gh.db"), LocalGitSource(repo.path)) as svc:
        return {name: svc.store({"repo": REPO, "subject": subject, "fact": f"{subject}.",
                                 "citations": [{"path": "net/fetch.py", "line_start": a,
                                                "line_end": b}]}).id
                for name, subject, a, b in [("const", "Retry budget", 1, 1),
                                            ("fetch", "Fetch loop", 4, 8),
                                            ("close", "Close returns None", 11, 12)]}


def push(repo: GitRepo, content: str, path: str = "net/fetch.py") -> str:
    """Commit ``content`` on the pull request's branch (made from main the first time)."""
    if repo.run("branch", "--list", "feature"):
        repo.run("checkout", "-q", "feature")
    else:
        repo.run("checkout", "-q", "-b", "feature")
    repo.write(path, content)
    sha = repo.commit("push")
    repo.run("checkout", "-q", "main")
    return sha


def review_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = vmem(capsys, "review", *args, "--json")
    assert code == 0, err
    assert TOKEN not in out + err
    data: dict[str, Any] = json.loads(out)
    return data


def snapshot(tmp_path: Path) -> list[dict[str, Any]]:
    with SQLiteStore(tmp_path / "gh.db") as store:
        return [m.to_dict() for m in store.recent(REPO, limit=None, status=None)]


# --------------------------------------------------------------------------- posting


def test_post_creates_one_review_then_updates_it_in_place(
        repo: GitRepo, memories: dict[str, str], rsps: responses.RequestsMock,
        capsys: pytest.CaptureFixture[str], tmp_path: Path, sleeps: list[float]) -> None:
    fake = FakePulls().install(rsps)
    base = repo.head
    head = push(repo, FETCH.replace("MAX_RETRIES = 3", "MAX_RETRIES = 5")
                .replace("return None", "return 0"))
    fake.open(7, base=base, head=head, files=pull_files(repo, base, head))
    before = snapshot(tmp_path)

    data = review_json(capsys, "--pr", "7", "--post")
    assert {f["kind"] for f in data["findings"]} == {"breaks"}
    assert data["posted"]["action"] == "created"
    assert data["posted"]["comments"]["created"] == 2
    assert fake.writes() == [("POST", f"/repos/{REPO}/pulls/7/reviews")]
    (review,) = fake.reviews[7]
    assert review["body"].startswith(REVIEW_MARKER)
    assert "see the comment on `net/fetch.py`" in review["body"]
    created = fake.posted[0]
    assert created["commit_id"] == head
    places = {(c["path"], c["line"], c["side"]) for c in created["comments"]}
    # the edited constant and the edited close() on their new lines
    assert places == {("net/fetch.py", 1, "RIGHT"), ("net/fetch.py", 12, "RIGHT")}
    bodies = {c["body"].split("\n", 1)[0] for c in fake.comments[7]}
    assert bodies == {comment_marker(memories["const"]), comment_marker(memories["close"])}
    assert snapshot(tmp_path) == before  # a review of unmerged code changes no memory

    # A push: close() is restored, the fetch loop is edited instead.
    head2 = push(repo, FETCH.replace("MAX_RETRIES = 3", "MAX_RETRIES = 5")
                 .replace("range(MAX_RETRIES)", "range(MAX_RETRIES + 1)"))
    fake.open(7, base=base, head=head2, files=pull_files(repo, base, head2))
    const_comment = next(c for c in fake.comments[7]
                         if c["body"].startswith(comment_marker(memories["const"])))
    close_comment = next(c for c in fake.comments[7]
                         if c["body"].startswith(comment_marker(memories["close"])))
    assert close_comment["line"] is None  # outdated by the push
    fake.log.clear()
    data = review_json(capsys, "--pr", "7", "--post")
    assert data["posted"]["action"] == "updated"
    assert data["posted"]["review_id"] == review["id"]
    # the constant's comment is edited in place: it links its line at the new head
    assert data["posted"]["comments"] == {"created": 1, "updated": 1, "kept": 0,
                                          "deleted": 1, "unplaced": 0}
    assert ("POST", f"/repos/{REPO}/pulls/7/reviews") not in fake.log
    assert len(fake.reviews[7]) == 1
    assert sorted(fake.writes()) == sorted([
        ("DELETE", f"/repos/{REPO}/pulls/comments/{close_comment['id']}"),
        ("PATCH", f"/repos/{REPO}/pulls/comments/{const_comment['id']}"),
        ("POST", f"/repos/{REPO}/pulls/7/comments"),
        ("PUT", f"/repos/{REPO}/pulls/7/reviews/{review['id']}"),
    ])
    assert {c["body"].split("\n", 1)[0] for c in fake.comments[7]} == {
        comment_marker(memories["const"]), comment_marker(memories["fetch"])}
    assert const_comment in fake.comments[7]  # the same comment, kept in place
    assert head2[:12] in fake.reviews[7][0]["body"]
    assert len(sleeps) >= 2  # writes are spaced

    # The same head again: everything already stands; nothing is written.
    fake.log.clear()
    data = review_json(capsys, "--pr", "7", "--post")
    assert data["posted"]["comments"]["kept"] == 2
    assert fake.writes() == []


def test_nothing_posted_without_findings_and_an_old_review_is_cleared(
        repo: GitRepo, memories: dict[str, str], rsps: responses.RequestsMock,
        capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakePulls().install(rsps)
    base = repo.head
    beside = push(repo, FETCH + "\n\ndef reset():\n    pass\n")
    fake.open(8, base=base, head=beside, files=pull_files(repo, base, beside))
    code, out, err = vmem(capsys, "review", "--pr", "8", "--post")
    assert code == 0, err
    assert "touches no code that a memory cites" in out
    assert "nothing posted: no findings" in err
    assert fake.writes() == []
    assert 8 not in fake.reviews

    # An earlier review of ours, then a push that no longer touches cited code.
    edit = push(repo, FETCH.replace("return None", "return 0"))
    fake.open(9, base=base, head=edit, files=pull_files(repo, base, edit))
    assert review_json(capsys, "--pr", "9", "--post")["posted"]["action"] == "created"
    assert len(fake.comments[9]) == 1
    restored = push(repo, FETCH + "\n\ndef reset():\n    pass\n")
    fake.open(9, base=base, head=restored, files=pull_files(repo, base, restored))
    data = review_json(capsys, "--pr", "9", "--post")
    assert data["findings"] == []
    assert data["posted"]["action"] == "updated"
    assert data["posted"]["comments"]["deleted"] == 1
    assert fake.comments[9] == []
    (review,) = fake.reviews[9]
    assert review["body"].startswith(REVIEW_MARKER)
    assert "touches no code that a memory cites" in review["body"]


def test_a_refused_comment_line_falls_back_to_the_body(
        repo: GitRepo, memories: dict[str, str], rsps: responses.RequestsMock,
        capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakePulls().install(rsps)
    fake.refuse_comments = True
    base = repo.head
    head = push(repo, FETCH.replace("return None", "return 0"))
    fake.open(7, base=base, head=head, files=pull_files(repo, base, head))
    data = review_json(capsys, "--pr", "7", "--post")
    assert data["posted"]["comments"] == {"created": 0, "updated": 0, "kept": 0,
                                          "deleted": 0, "unplaced": 1}
    assert [m for m, _ in fake.writes()] == ["POST", "POST"]  # refused, then without comments
    (review,) = fake.reviews[7]
    assert "### Breaks a convention: `Close returns None`" in review["body"]
    assert "```text\nClose returns None.\n```" in review["body"]


def _post_refused(repo: GitRepo, rsps: responses.RequestsMock,
                  capsys: pytest.CaptureFixture[str], status: int
                  ) -> tuple[int, str, str, FakePulls]:
    """``vmem review --pr 7 --post`` of a change that breaks a convention, GitHub
    refusing every write with ``status``."""
    fake = FakePulls().install(rsps)
    fake.refuse_writes = status
    base = repo.head
    head = push(repo, FETCH.replace("return None", "return 0"))
    fake.open(7, base=base, head=head, files=pull_files(repo, base, head))
    code, out, err = vmem(capsys, "review", "--pr", "7", "--post")
    assert code == 1
    assert "Breaks a convention" in out  # the report is printed before the error
    assert err.startswith(f"vmem: error: GitHub refused posting the review of #7 ({status} ")
    assert "Traceback" not in err
    assert err.count("\n") == 1
    assert TOKEN not in out + err
    return code, out, err, fake


def test_a_read_only_token_is_one_clear_line_after_the_report(
        repo: GitRepo, memories: dict[str, str], rsps: responses.RequestsMock,
        capsys: pytest.CaptureFixture[str]) -> None:
    _, _, err, _ = _post_refused(repo, rsps, capsys, 403)
    assert "pull-requests: write" in err


def test_markers_written_by_someone_else_are_left_alone(
        repo: GitRepo, memories: dict[str, str], rsps: responses.RequestsMock,
        capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakePulls().install(rsps)
    base = repo.head
    head = push(repo, FETCH.replace("MAX_RETRIES = 3", "MAX_RETRIES = 5"))
    fake.open(7, base=base, head=head, files=pull_files(repo, base, head))
    mallory = {"login": "mallory", "type": "User"}
    spoof = {**fake._review_json(7, 1, f"{REVIEW_MARKER}\nlooks like the bot", head),
             "user": mallory}
    fake.reviews[7] = [spoof]
    fake.comments[7] = [{**fake._comment_json(7, 1, {
        "body": f"{comment_marker(memories['const'])}\nnot the bot", "path": "net/fetch.py",
        "line": 1, "side": "LEFT"}, head), "user": mallory}]
    data = review_json(capsys, "--pr", "7", "--post")
    assert data["posted"]["action"] == "created"
    assert data["posted"]["comments"]["created"] == 1
    assert [r["user"]["login"] for r in fake.reviews[7]] == ["mallory", BOT]
    assert fake.reviews[7][0]["body"].endswith("looks like the bot")
    assert [c["user"]["login"] for c in fake.comments[7]] == ["mallory", BOT]
    assert fake.comments[7][0]["body"].endswith("not the bot")


# --------------------------------------------------------------------------- reading


def test_a_pull_request_with_300_plus_files_is_read_page_by_page(
        repo: GitRepo, memories: dict[str, str], rsps: responses.RequestsMock,
        capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakePulls().install(rsps)
    base = repo.head
    head = push(repo, FETCH.replace("return None", "return 0"))
    generated = [{"filename": f"gen/f{i:03}.py", "status": "added", "additions": 1,
                  "deletions": 0, "changes": 1, "patch": "@@ -0,0 +1 @@\n+x = 1"}
                 for i in range(304)]
    files = generated[:250] + pull_files(repo, base, head) + generated[250:]
    fake.open(7, base=base, head=head, files=files)
    data = review_json(capsys, "--pr", "7")
    assert data["files"] == 305
    assert [f["memory_id"] for f in data["findings"]] == [memories["close"]]
    pages = [p for m, p in fake.log if p.endswith("/pulls/7/files")]
    assert len(pages) == 4  # 100 + 100 + 100 + 5
    assert not any("3,000" in n for n in data["notes"])


def test_github_lists_at_most_3000_files(
        repo: GitRepo, memories: dict[str, str], rsps: responses.RequestsMock,
        capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakePulls().install(rsps)
    base = repo.head
    head = push(repo, FETCH + "# more\n")
    files = [{"filename": f"gen/f{i:04}.py", "status": "added", "changes": 1,
              "patch": "@@ -0,0 +1 @@\n+x = 1"} for i in range(3000)]
    fake.open(7, base=base, head=head, files=files, changed_files=3500)
    data = review_json(capsys, "--pr", "7")
    assert len([p for m, p in fake.log if p.endswith("/files")]) == 30
    assert any("3000 of its 3500 changed files" in n.replace(",", "") for n in data["notes"])


def test_a_renamed_file_is_matched_through_its_previous_name(
        repo: GitRepo, memories: dict[str, str], rsps: responses.RequestsMock,
        capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakePulls().install(rsps)
    base = repo.head
    repo.run("checkout", "-q", "-b", "feature")
    repo.move("net/fetch.py", "net/client.py")
    repo.write("net/client.py", FETCH.replace("MAX_RETRIES = 3", "MAX_RETRIES = 5"))
    head = repo.commit("rename and edit")
    repo.run("checkout", "-q", "main")
    files = pull_files(repo, base, head)
    assert files[0]["status"] == "renamed"
    assert files[0]["previous_filename"] == "net/fetch.py"
    fake.open(7, base=base, head=head, files=files)
    data = review_json(capsys, "--pr", "7", "--post")
    assert [(f["memory_id"], f["kind"]) for f in data["findings"]] == [
        (memories["const"], "breaks")]
    assert data["findings"][0]["comment"] == {"path": "net/client.py", "line": 1,
                                              "side": "RIGHT"}
    assert fake.comments[7][0]["path"] == "net/client.py"


def test_binary_or_oversized_files_without_a_patch_count_as_wholly_changed(
        repo: GitRepo, memories: dict[str, str], rsps: responses.RequestsMock,
        capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakePulls().install(rsps)
    base = repo.head
    head = push(repo, FETCH.replace("return None", "return 0"))
    files = pull_files(repo, base, head)
    del files[0]["patch"]  # "too large to show"
    fake.open(7, base=base, head=head, files=files)
    data = review_json(capsys, "--pr", "7")
    assert {f["memory_id"]: f["kind"] for f in data["findings"]} == {
        memories["const"]: "holds", memories["fetch"]: "holds", memories["close"]: "breaks"}
    assert all(f["comment"] is None for f in data["findings"])  # no line to sit on


# --------------------------------------------------------------------------- bad input


def test_a_pull_request_that_does_not_exist(
        repo: GitRepo, memories: dict[str, str], rsps: responses.RequestsMock,
        capsys: pytest.CaptureFixture[str]) -> None:
    FakePulls().install(rsps)
    code, out, err = vmem(capsys, "review", "--pr", "99")
    assert code == 1
    assert out == ""
    assert err == (f"vmem: error: pull request #99 does not exist in {REPO} (or the token "
                   "cannot read it): GitHub answered 404\n")


def test_an_outage_is_never_a_verdict(
        repo: GitRepo, memories: dict[str, str], rsps: responses.RequestsMock,
        capsys: pytest.CaptureFixture[str], tmp_path: Path, sleeps: list[float]) -> None:
    rsps.add(responses.GET, re.compile(HOST + f"/repos/{REPO}/pulls/7"),
             **error(502, "Server Error"))
    before = snapshot(tmp_path)
    code, out, err = vmem(capsys, "review", "--pr", "7", "--post")
    assert code == 1
    assert out == ""
    assert "GitHub could not be read (pull request #7 of acme/net): 502" in err
    assert sleeps  # retried with backoff first
    assert snapshot(tmp_path) == before


def test_apply_waits_for_the_merge_then_verifies_at_the_merge_commit(
        repo: GitRepo, memories: dict[str, str], rsps: responses.RequestsMock,
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fake = FakePulls().install(rsps)
    base = repo.head
    head = push(repo, FETCH.replace("return None", "return 0"))
    fake.open(7, base=base, head=head, files=pull_files(repo, base, head))
    code, _, err = vmem(capsys, "review", "--pr", "7", "--apply")
    assert code == 1
    assert "pull request #7 is not merged: --apply changes memories only after the merge" in err
    repo.run("merge", "-q", "--no-ff", "-m", "merge #7", "feature")
    merge = repo.head
    fake.open(7, base=base, head=head, files=pull_files(repo, base, head), merged=True,
              merge_commit=merge)
    data = review_json(capsys, "--pr", "7", "--apply")
    assert data["verified_at"] == merge
    assert data["applied"] is True
    with SQLiteStore(tmp_path / "gh.db") as store:
        assert store.get(memories["close"]).status is Status.INVALID
        assert store.get(memories["const"]).status is Status.ACTIVE
        assert store.get(memories["const"]).verified_commit == merge


# --------------------------------------------------------------------------- no checkout


class FakeGitHubWithMergeBase(FakeGitHub):
    """Code served through the API, and ``compare`` telling the merge base."""

    merge_base = ""

    def _compare(self, request: Any, args: dict[str, str], query: Any) -> Any:
        status, headers, body = super()._compare(request, args, query)
        if status == 200:
            data = json.loads(body)
            data["merge_base_commit"] = {"sha": self.merge_base}
            body = json.dumps(data)
        return status, headers, body


def test_without_a_checkout_the_code_is_read_through_the_api(
        tmp_path: Path, rsps: responses.RequestsMock, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, sleeps: list[float]) -> None:
    code_host = FakeGitHubWithMergeBase("octo/demo")
    base = code_host.commit({"src/app.py": FETCH})
    head = code_host.commit({"src/app.py": FETCH.replace("return None", "return 0")},
                            branch="feature")
    code_host.merge_base = base
    code_host.install(rsps)
    fake = FakePulls("octo/demo", compare=False).install(rsps)
    patch = "@@ -9,4 +9,4 @@ def fetch(url):\n \n \n def close():\n-    return None\n+    return 0"
    fake.open(3, base=base, head=head, files=[{"filename": "src/app.py", "status": "modified",
                                               "changes": 2, "patch": patch}])
    db = tmp_path / "api.db"
    source = GitHubSource("octo/demo", TOKEN, cache_dir=tmp_path / "cache",
                          retry=RetryPolicy(attempts=1))
    with MemoryService(SQLiteStore(db), source) as svc:
        memory = svc.store({"repo": "octo/demo", "subject": "Close", "fact": "returns None",
                            "citations": [{"path": "src/app.py", "line_start": 11,
                                           "line_end": 12}]}, ref=base)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VMEM_DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.delenv("GITHUB_SERVER_URL", raising=False)
    data = review_json(capsys, "--repo", "octo/demo", "--pr", "3")
    assert data["base_commit"] == base
    assert [(f["memory_id"], f["kind"]) for f in data["findings"]] == [(memory.id, "breaks")]
    link = data["findings"][0]["citations"][0]["link"]
    assert link == f"https://github.com/octo/demo/blob/{head}/src/app.py#L11-L12"
    assert code_host.calls["compare"] >= 1
    assert data["requests"] >= 4  # the pull request, its files, the merge base, code

    # A push whose code GitHub fails to serve: the finding says so, and is no verdict.
    edited = FETCH.replace("return None", "return 1")
    head2 = code_host.commit({"src/app.py": edited}, branch="feature")
    fake.open(3, base=base, head=head2, files=[{"filename": "src/app.py", "status": "modified",
                                                "changes": 2,
                                                "patch": patch.replace("+    return 0",
                                                                       "+    return 1")}])
    blob = git_blob_sha(edited.encode())
    for _ in range(RetryPolicy().attempts):
        rsps.add(responses.GET, f"{API}/repos/octo/demo/git/blobs/{blob}",
                 **error(502, "Bad Gateway"))
    data = review_json(capsys, "--repo", "octo/demo", "--pr", "3")
    (finding,) = data["findings"]
    assert finding["kind"] == "unverifiable"
    assert finding["decision"] == "unverified"
    assert "no verdict" in finding["advice"]
    assert finding["citations"][0]["outcome"] == "unverifiable"
    with SQLiteStore(db) as store:
        assert store.get(memory.id).status is Status.ACTIVE
        assert store.get(memory.id).verification_count == 0


def test_post_needs_a_token(repo: GitRepo, capsys: pytest.CaptureFixture[str],
                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    code, _, err = vmem(capsys, "review", "--pr", "7", "--post")
    assert code == 1
    assert "--post needs GITHUB_TOKEN" in err


def test_a_review_github_refuses_whole_is_one_clear_line_after_the_report(
        repo: GitRepo, memories: dict[str, str], rsps: responses.RequestsMock,
        capsys: pytest.CaptureFixture[str]) -> None:
    # 422 to the review itself, not only to its comments' lines: what GitHub answers when
    # the head was force-pushed after the pull request was read (the commit is no longer
    # part of it), or the pull request was locked meanwhile.
    _, _, _, fake = _post_refused(repo, rsps, capsys, 422)
    assert [m for m, _ in fake.writes()] == ["POST", "POST"]  # with comments, then without


def test_posting_under_a_primary_rate_limit_far_from_its_reset_gives_up_at_once(
        repo: GitRepo, memories: dict[str, str], rsps: responses.RequestsMock,
        capsys: pytest.CaptureFixture[str], sleeps: list[float]) -> None:
    # The token's hourly limit is spent (403, X-RateLimit-Remaining: 0) and lifts in an
    # hour: no minute-long waits before failing, and the line says when it lifts.
    import time

    reset = int(time.time()) + 3600
    for _ in range(RetryPolicy().attempts):  # (each answer is used once, in turn)
        rsps.add(responses.POST, re.compile(HOST + f"/repos/{REPO}/pulls/7/reviews"),
                 status=403, headers=rate_headers(remaining=0, reset=reset), content_type=JSON,
                 body=error_body("API rate limit exceeded for installation ID 1."))
    fake = FakePulls().install(rsps)
    base = repo.head
    head = push(repo, FETCH.replace("return None", "return 0"))
    fake.open(7, base=base, head=head, files=pull_files(repo, base, head))
    sleeps.clear()
    code, out, err = vmem(capsys, "review", "--pr", "7", "--post")
    assert code == 1
    assert "Breaks a convention" in out
    assert err.startswith("vmem: error: GitHub rate limit exhausted while posting the review")
    assert "lifts in 36" in err
    assert err.count("\n") == 1
    assert all(s < 30 for s in sleeps)  # no minute-long waits for a limit an hour away
