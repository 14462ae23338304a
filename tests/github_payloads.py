"""GitHub-shaped payloads and a fake GitHub repository for ``responses``.

Everything here mirrors what api.github.com sends, because the source under test parses
exactly that: base64 blob content with a line break every 60 characters (and one at the
end), tree entries with mode/type/sha/size/url, ``truncated``, rate-limit headers on
every answer, ETags and ``304 Not Modified``, and error bodies shaped
``{"message": ..., "documentation_url": ...}``. Object ids are real git ids (a tree's
sha is the sha1 of its git tree object), so ``git_blob_sha`` checks hold.

PyGithub builds URLs as ``https://api.github.com:443/...``: ``API`` includes the port.
``FaultyGitHub`` puts a fault in front of a ``FakeGitHub`` and ``SCENARIOS`` names every
fault the suite injects, on a ``FakeClock`` that sleeps and timeouts advance.

Used by ``tests/test_github_source.py``, ``tests/test_github_faults.py`` and the
``benchmarks/github_requests.py`` and ``benchmarks/github_faults.py`` scripts.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

import requests
import responses

API = "https://api.github.com:443"
DOCS = "https://docs.github.com/rest"
RESET_AT = 1_900_000_000  # X-RateLimit-Reset (epoch seconds) the fake reports

JSON = "application/json; charset=utf-8"

Answer = tuple[int, dict[str, str], str]  # what a ``responses`` callback returns


def b64_lines(data: bytes) -> str:
    """Base64 as GitHub sends blob content: a newline every 60 characters and at the end."""
    text = base64.b64encode(data).decode("ascii")
    return "".join(text[i : i + 60] + "\n" for i in range(0, len(text), 60))


def git_sha(kind: str, body: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).hexdigest()


def rate_headers(
    remaining: int = 4999, limit: int = 5000, reset: int = RESET_AT, resource: str = "core"
) -> dict[str, str]:
    return {
        "X-RateLimit-Limit": str(limit),
        "X-RateLimit-Remaining": str(remaining),
        "X-RateLimit-Reset": str(reset),
        "X-RateLimit-Used": str(limit - remaining),
        "X-RateLimit-Resource": resource,
        "X-GitHub-Media-Type": "github.v3; format=json",
        "X-GitHub-Request-Id": "C9EA:1C0C5:109B75FB:5743592C",
    }


def error_body(message: str, documentation_url: str = DOCS, status: int | None = None) -> str:
    """GitHub's error body; recent API versions add the status as a string."""
    body: dict[str, str] = {"message": message, "documentation_url": documentation_url}
    if status is not None:
        body["status"] = str(status)
    return json.dumps(body)


def error(
    status: int, message: str, *, remaining: int = 4990, reset: int = RESET_AT,
    retry_after: int | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``responses.add`` giving a GitHub error answer."""
    headers = rate_headers(remaining=remaining, reset=reset)
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return {"status": status, "body": error_body(message, status=status), "headers": headers,
            "content_type": JSON}


def blob_payload(repo: str, data: bytes, host: str = API) -> dict[str, Any]:
    sha = git_sha("blob", data)
    return {
        "sha": sha,
        "node_id": "B_kwDOAAAB" + sha[:12],
        "size": len(data),
        "url": f"{host.replace(':443', '')}/repos/{repo}/git/blobs/{sha}",
        "content": b64_lines(data),
        "encoding": "base64",
    }


@dataclass(frozen=True, slots=True)
class Symlink:
    target: str


@dataclass(frozen=True, slots=True)
class Submodule:
    commit: str


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a git tree object, as GitHub lists it."""

    name: str
    mode: str  # "100644", "100755", "120000", "160000", "040000"
    type: str  # "blob", "tree", "commit"
    sha: str
    size: int | None = None


def _tree_object(entries: list[Entry]) -> bytes:
    def key(e: Entry) -> bytes:
        return e.name.encode() + (b"/" if e.type == "tree" else b"")

    body = b""
    for e in sorted(entries, key=key):
        mode = "40000" if e.type == "tree" else e.mode
        body += f"{mode} {e.name}".encode() + b"\0" + bytes.fromhex(e.sha)
    return body


class FakeGitHub:
    """A repository served the way GitHub serves it, for ``responses``.

    ``commit(files)`` builds real git objects (blobs, trees, a commit) and moves a
    branch; ``install(rsps)`` answers ``commits/{ref}``, ``git/trees``, ``git/blobs``,
    ``compare`` and ``contents`` with ETags, 304s and a decreasing rate limit.
    ``truncate_over`` makes recursive tree listings with more entries than that come
    back truncated, as GitHub does past 100,000 entries. ``calls`` counts answers by
    endpoint (``ref``, ``tree``, ``blob``, ``compare``, ``contents``, ``304``).
    """

    def __init__(self, repo: str = "octo/demo", *, host: str = API, limit: int = 5000) -> None:
        self.repo = repo
        self.host = host
        self.limit = limit
        self.remaining = limit
        self.blobs: dict[str, bytes] = {}
        self.trees: dict[str, list[Entry]] = {}
        self.commits: dict[str, str] = {}  # commit sha -> root tree sha
        self.refs: dict[str, str] = {}
        self.parents: dict[str, tuple[str, ...]] = {}  # commit sha -> its parents
        self.default_branch = "main"
        self.truncate_over: int | None = None
        self.calls: Counter[str] = Counter()

    # ------------------------------------------------------------------ building

    def commit(
        self, files: Mapping[str, bytes | str | Symlink | Submodule], *, branch: str = "main",
        message: str = "change",
    ) -> str:
        root = self._build_tree(files)
        parent = self.refs.get(branch) or (self.refs.get(self.default_branch)
                                           if branch != self.default_branch else None)
        body = f"tree {root}\n" + (f"parent {parent}\n" if parent else "")
        who = "A <a@example.com> 0 +0000"
        body += f"author {who}\ncommitter {who}\n\n{message}\n"
        sha = git_sha("commit", body.encode())
        self.commits[sha] = root
        self.parents[sha] = (parent,) if parent else ()
        self.refs[branch] = sha
        return sha

    def history(self, commit: str) -> set[str]:
        """``commit`` and every commit before it."""
        seen: set[str] = set()
        todo = [commit]
        while todo:
            sha = todo.pop()
            if sha not in seen:
                seen.add(sha)
                todo.extend(self.parents.get(sha, ()))
        return seen

    def _build_tree(self, files: Mapping[str, bytes | str | Symlink | Submodule]) -> str:
        nested: dict[str, Any] = {}
        for path, content in files.items():
            *dirs, name = path.split("/")
            node = nested
            for d in dirs:
                node = node.setdefault(d, {})
            node[name] = content
        return self._store(nested)

    def _store(self, node: Mapping[str, Any]) -> str:
        entries: list[Entry] = []
        for name, value in node.items():
            if isinstance(value, dict):
                entries.append(Entry(name, "040000", "tree", self._store(value)))
            elif isinstance(value, Symlink):
                data = value.target.encode()
                sha = git_sha("blob", data)
                self.blobs[sha] = data
                entries.append(Entry(name, "120000", "blob", sha, len(data)))
            elif isinstance(value, Submodule):
                entries.append(Entry(name, "160000", "commit", value.commit))
            else:
                data = value.encode() if isinstance(value, str) else value
                sha = git_sha("blob", data)
                self.blobs[sha] = data
                mode = "100755" if name.endswith(".sh") else "100644"
                entries.append(Entry(name, mode, "blob", sha, len(data)))
        sha = git_sha("tree", _tree_object(entries))
        self.trees[sha] = entries
        return sha

    def files(self, commit: str) -> dict[str, Entry]:
        """Every non-tree entry of ``commit`` by full path."""
        out: dict[str, Entry] = {}

        def walk(tree: str, prefix: str) -> None:
            for e in self.trees[tree]:
                if e.type == "tree":
                    walk(e.sha, prefix + e.name + "/")
                else:
                    out[prefix + e.name] = e

        walk(self.commits[commit], "")
        return out

    # ------------------------------------------------------------------ serving

    @property
    def web_api(self) -> str:
        """The repository's API URL as GitHub writes it in payloads (no port)."""
        return f"{self.host.replace(':443', '')}/repos/{self.repo}"

    def url(self, path: str) -> str:
        return f"{self.host}/repos/{self.repo}{path}"

    def pattern(self, path_regex: str) -> re.Pattern[str]:
        return re.compile(re.escape(f"{self.host}/repos/{self.repo}") + path_regex + r"(\?.*)?$")

    def install(self, rsps: responses.RequestsMock) -> FakeGitHub:
        for regex, handler in (
            (r"/commits/(?P<ref>[^?]+)", self._commit),
            (r"/git/trees/(?P<sha>[0-9a-f]+)", self._tree),
            (r"/git/blobs/(?P<sha>[0-9a-f]+)", self._blob),
            (r"/compare/(?P<base>[^.?]+)\.\.\.(?P<head>[^?]+)", self._compare),
            (r"/contents/(?P<path>[^?]+)", self._contents),
            ("", self._repository),
        ):
            rsps.add_callback(responses.GET, self.pattern(regex),
                              callback=self._serve(regex, handler), content_type=None)
        return self

    def _serve(self, regex: str, handler: Any) -> Any:
        compiled = self.pattern(regex)

        def callback(request: Any) -> tuple[int, dict[str, str], str]:
            match = compiled.match(request.url)
            assert match is not None, request.url
            query = parse_qs(urlparse(request.url).query)
            status, headers, body = handler(request, {k: unquote(v) for k, v in
                                                      match.groupdict().items() if v}, query)
            etag = headers.get("ETag")
            if status == 200 and etag and request.headers.get("If-None-Match") == etag:
                self.calls["304"] += 1
                return 304, {**rate_headers(self.remaining, self.limit), "ETag": etag}, ""
            if status != 304:
                self.remaining -= 1
            return status, {**rate_headers(self.remaining, self.limit), **headers}, body

        return callback

    def _not_found(self, url_doc: str) -> Answer:
        return 404, {"Content-Type": JSON}, error_body("Not Found", f"{DOCS}/{url_doc}")

    def _commit(self, request: Any, args: dict[str, str], query: Any) -> Answer:
        self.calls["ref"] += 1
        # As on GitHub: HEAD is the default branch, refs/heads/NAME the branch NAME.
        ref = self.default_branch if args["ref"] == "HEAD" else args["ref"].removeprefix(
            "refs/heads/")
        sha = self.refs.get(ref) or next((c for c in self.commits if c.startswith(ref)), None)
        if sha is None:
            return 422, {"Content-Type": JSON}, error_body(
                f"No commit found for SHA: {ref}", f"{DOCS}/commits/commits#get-a-commit")
        etag = f'"{git_sha("etag", (sha + request.headers.get("Accept", "")).encode())}"'
        if "vnd.github.sha" in request.headers.get("Accept", ""):
            return 200, {"Content-Type": "application/vnd.github.sha; charset=utf-8",
                         "ETag": etag}, sha
        return 200, {"Content-Type": JSON, "ETag": etag}, json.dumps({"sha": sha})

    def _tree(self, request: Any, args: dict[str, str], query: Any) -> Answer:
        self.calls["tree"] += 1
        sha = self.commits.get(args["sha"], args["sha"])
        if sha not in self.trees:
            return self._not_found("git/trees#get-a-tree")
        recursive = "recursive" in query
        listed: list[dict[str, Any]] = []

        def add(tree: str, prefix: str) -> None:
            for e in sorted(self.trees[tree], key=lambda e: e.name):
                item: dict[str, Any] = {"path": prefix + e.name, "mode": e.mode, "type": e.type,
                                        "sha": e.sha}
                if e.type == "blob":
                    item["size"] = e.size
                if e.type != "commit":
                    item["url"] = f"{self.web_api}/git/{e.type}s/{e.sha}"
                listed.append(item)
                if recursive and e.type == "tree":
                    add(e.sha, prefix + e.name + "/")

        add(sha, "")
        truncated = False
        if recursive and self.truncate_over is not None and len(listed) > self.truncate_over:
            listed, truncated = listed[: self.truncate_over], True
        body = {"sha": sha, "url": f"{self.web_api}/git/trees/{sha}", "tree": listed,
                "truncated": truncated}
        etag = f'W/"{git_sha("etag", (sha + str(recursive)).encode())}"'
        return 200, {"Content-Type": JSON, "ETag": etag}, json.dumps(body)

    def _blob(self, request: Any, args: dict[str, str], query: Any) -> Answer:
        self.calls["blob"] += 1
        data = self.blobs.get(args["sha"])
        if data is None:
            return self._not_found("git/blobs#get-a-blob")
        payload = blob_payload(self.repo, data, self.host)
        return 200, {"Content-Type": JSON, "ETag": f'"{payload["sha"]}"'}, json.dumps(payload)

    def _compare(self, request: Any, args: dict[str, str], query: Any) -> Answer:
        self.calls["compare"] += 1
        base = self.refs.get(args["base"], args["base"])
        head = self.refs.get(args["head"], args["head"])
        if base not in self.commits or head not in self.commits:
            return self._not_found("commits/commits#compare-two-commits")
        before, after = self.files(base), self.files(head)
        added = {e.sha: p for p, e in after.items() if p not in before}
        files: list[dict[str, Any]] = []
        for path, e in before.items():
            if path not in after:
                new = added.pop(e.sha, None)
                if new is not None:
                    files.append({"sha": e.sha, "filename": new, "status": "renamed",
                                  "additions": 0, "deletions": 0, "changes": 0,
                                  "previous_filename": path})
                else:
                    files.append({"sha": e.sha, "filename": path, "status": "removed",
                                  "additions": 0, "deletions": 1, "changes": 1})
            elif after[path].sha != e.sha:
                files.append({"sha": after[path].sha, "filename": path, "status": "modified",
                              "additions": 1, "deletions": 1, "changes": 2})
        for sha, path in added.items():
            files.append({"sha": sha, "filename": path, "status": "added",
                          "additions": 1, "deletions": 0, "changes": 1})
        before_head, before_base = self.history(head), self.history(base)
        ahead, behind = len(before_head - before_base), len(before_base - before_head)
        status = ("identical" if base == head else "ahead" if not behind
                  else "behind" if not ahead else "diverged")
        body = {"url": self.url(f"/compare/{base}...{head}"), "status": status,
                "ahead_by": ahead, "behind_by": behind, "total_commits": ahead,
                "commits": [], "files": files[:300]}
        return 200, {"Content-Type": JSON}, json.dumps(body)

    def _repository(self, request: Any, args: dict[str, str], query: Any) -> Answer:
        self.calls["repo"] += 1
        owner, name = self.repo.split("/")
        body = {"id": 1296269, "name": name, "full_name": self.repo, "private": False,
                "owner": {"login": owner, "id": 1, "type": "User"},
                "url": self.web_api, "default_branch": self.default_branch,
                "visibility": "public", "fork": False}
        etag = f'"{git_sha("etag", json.dumps(body).encode())}"'
        return 200, {"Content-Type": JSON, "ETag": etag}, json.dumps(body)

    def _contents(self, request: Any, args: dict[str, str], query: Any) -> Answer:
        self.calls["contents"] += 1
        ref = query.get("ref", ["main"])[0]
        commit = self.refs.get(ref, ref)
        entry = self.files(commit).get(args["path"]) if commit in self.commits else None
        if entry is None or entry.type != "blob":
            return self._not_found("repos/contents#get-repository-content")
        data = self.blobs[entry.sha]
        body = {"type": "file", "encoding": "base64", "size": len(data),
                "name": args["path"].rpartition("/")[2], "path": args["path"],
                "content": b64_lines(data), "sha": entry.sha}
        return 200, {"Content-Type": JSON}, json.dumps(body)


# --------------------------------------------------------------------------- faults

EPOCH = 1_900_000_000.0  # the fake wall clock's start (epoch seconds)


class FakeClock:
    """Time that passes only when the code under test sleeps or a request times out."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return EPOCH + self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)


Fault = Callable[[Any, int], "tuple[int, dict[str, str], str] | Exception | None"]


class FaultyGitHub:
    """The fake GitHub behind a fault: ``fault(request, n)`` answers the n-th request
    (a status, headers, body), raises for it (an exception), or lets it through (None)."""

    def __init__(self, fake: FakeGitHub, clock: FakeClock, fault: Fault | None) -> None:
        self.fake = fake
        self.clock = clock
        self.fault = fault
        self.sent = 0
        self.routes = [
            (fake.pattern(regex), fake._serve(regex, handler)) for regex, handler in (
                (r"/commits/(?P<ref>[^?]+)", fake._commit),
                (r"/git/trees/(?P<sha>[0-9a-f]+)", fake._tree),
                (r"/git/blobs/(?P<sha>[0-9a-f]+)", fake._blob),
                (r"/compare/(?P<base>[^.?]+)\.\.\.(?P<head>[^?]+)", fake._compare),
            )]

    def install(self, rsps: responses.RequestsMock) -> None:
        rsps.add_callback(responses.GET, re.compile(".*"), callback=self._answer,
                          content_type=None)

    def _answer(self, request: Any) -> tuple[int, dict[str, str], str]:
        self.sent += 1
        found = self.fault(request, self.sent) if self.fault else None
        if isinstance(found, requests.exceptions.Timeout):
            self.clock.sleep(float(request.req_kwargs.get("timeout") or 0))  # waited it out
        if isinstance(found, Exception):
            raise found
        if found is not None:
            return found
        for pattern, serve in self.routes:
            if pattern.match(request.url):
                answer: tuple[int, dict[str, str], str] = serve(request)
                return answer
        return 404, {"Content-Type": JSON}, error_body("Not Found")


def fault_error(status: int, message: str, **headers: str) -> tuple[int, dict[str, str], str]:
    return status, {"Content-Type": JSON, **rate_headers(), **headers}, error_body(message)


def fault_share(percent: int, seed: int = 15) -> Fault:
    rng = random.Random(seed)
    return lambda request, n: (fault_error(502, "Bad Gateway") if rng.random() < percent / 100
                               else None)


def _primary(reset_in: float, clock: FakeClock) -> Fault:
    reset = EPOCH + reset_in

    def fault(request: Any, n: int) -> tuple[int, dict[str, str], str] | None:
        if clock.time() < reset:
            return fault_error(403, "API rate limit exceeded for user ID 1.",
                          **{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(reset))})
        return None
    return fault


def _first(count: int, answer: Any) -> Fault:
    return lambda request, n: answer if n <= count else None


SECONDARY = ("You have exceeded a secondary rate limit. Please wait a few minutes before "
             "you try again.")

SCENARIOS: dict[str, Callable[[FakeClock], Fault | None]] = {
    "no fault": lambda clock: None,
    "5xx 10%": lambda clock: fault_share(10),
    "5xx 50%": lambda clock: fault_share(50),
    "5xx 100%": lambda clock: fault_share(100),
    "primary limit, reset in 20 s": lambda clock: _primary(20, clock),
    "primary limit, reset in an hour": lambda clock: _primary(3600, clock),
    "429 with Retry-After": lambda clock: _first(
        2, fault_error(429, "Too many", **{"Retry-After": "3"})),
    "403 secondary with Retry-After": lambda clock: _first(
        3, fault_error(403, SECONDARY, **{"Retry-After": "2"})),
    "403 secondary without Retry-After": lambda clock: _first(1000, fault_error(403, SECONDARY)),
    "429 without Retry-After": lambda clock: _first(1000, fault_error(429, "Too many requests")),
    "timeouts": lambda clock: lambda request, n: requests.exceptions.ReadTimeout("read timed out"),
    "some timeouts": lambda clock: lambda request, n: (
        requests.exceptions.ConnectTimeout("connect timed out") if n % 3 == 1 else None),
    "connection resets": lambda clock: lambda request, n: (
        requests.exceptions.ConnectionError(ConnectionResetError(104, "reset by peer"))
        if n % 2 == 0 else None),
    "network down": lambda clock: lambda request, n: requests.exceptions.ConnectionError(
        "Failed to resolve 'api.github.com'"),
    "revoked token": lambda clock: lambda request, n: fault_error(401, "Bad credentials"),
    "tree answered with garbage": lambda clock: lambda request, n: (
        (200, {"Content-Type": JSON, **rate_headers()}, "<html>proxy error</html>")
        if "/git/trees/" in request.url else None),
    "truncated trees": lambda clock: None,
    "truncated trees and 5xx 50%": lambda clock: fault_share(50, seed=7),
}
