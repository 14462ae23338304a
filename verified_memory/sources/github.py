"""A ``CodeSource`` over the GitHub REST API (PyGithub), for services without a checkout.

Cost model (docs/ARCHITECTURE.md), in requests for one verification pass:

- ``resolve(ref)``: 1 conditional request (``commits/{ref}`` as a bare sha). The ETag
  and the answer are kept on disk, so an unchanged branch answers ``304 Not Modified``,
  which GitHub does not count against the rate limit. A full 40-hex sha costs nothing.
- ``tree(commit)``: 1 request (``git/trees/{commit}?recursive=1``), then never again for
  that commit: a commit's tree is immutable, so the listing is kept in memory and on
  disk (the most recent ``_KEEP_COMMIT_TREES`` commits per repository). When GitHub
  truncates the listing (over 100,000 entries or 7 MB), the tree is completed lazily:
  looking a path up lists only the directories on its way that the truncated answer
  did not already settle (at most one request per directory level, each cached by tree
  sha); iterating the whole tree lists every directory GitHub left out, recursively
  where the sub-tree fits in one answer.
- ``read_blob(sha)``: 0 requests when the blob is in the disk cache (blobs never change,
  so the cache never goes stale), else 1 (``git/blobs/{sha}``, base64, up to 100 MB:
  unlike the contents API this also reads files over 1 MB).
- ``main_line()``: 1 conditional request (``repos/{owner}/{name}``: its
  ``default_branch``), kept on disk with its ETag; none when the branch is configured.
  ``HEAD`` is the default branch, so a pass at ``HEAD`` resolves no other ref.
- ``contained(commits, tip)``: 1 request per commit asked (``compare/{commit}...{tip}``),
  kept on disk (a 404 is not an answer: asked again). The service asks only for
  memories never judged on the main line.
- ``renames(old, new)``: 1 request (``compare/{old}...{new}``), cached; only called when
  a citation has to be searched for in other files. ``changed_paths(old, new)`` answers
  from the same response (which files changed), so a search need not list the old
  tree. GitHub lists at most 300 changed files there; beyond that, both answers are
  completed from the two trees (1 or 2 more tree listings).

So a pass over many memories costs the ref, the tree, and one request per changed cited
file; a repeat pass on an unchanged ref costs one 304 and nothing against the limit.

Errors: only a 404 (or 409/422) for the repository or the ref raises ``NotFound``;
anything else that stops the code from being read (network, timeouts, 5xx, rate
limits beyond ``max_rate_limit_wait``, rejected credentials, a blob GitHub no longer
serves) raises ``SourceUnavailable``, which the verifier turns into ``unverifiable`` and
never into a verdict. Tokens never appear in messages, logs or ``repr``.

PyGithub and tenacity are the ``github`` extra: ``pip install 'verified-memory[github]'``.
"""

from __future__ import annotations

import binascii
import logging
import os
import re
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlparse

from verified_memory import budget as budgets
from verified_memory.errors import MissingDependency, NotFound, SourceUnavailable, ValidationError
from verified_memory.models import validate_repo
from verified_memory.sources._github_http import (
    CLIENT_ANSWERS,
    SECONDARY_LIMIT_WAIT,
    GitHubHttp,
    Reply,
    Retryable,
    RetryPolicy,
)
from verified_memory.sources.base import (
    ClosingSource,
    MainLine,
    Rename,
    Suffixes,
    git_blob_sha,
    has_suffix,
    narrowed,
)
from verified_memory.sources.blob_cache import DiskBlobCache, JsonCache, default_cache_dir

if TYPE_CHECKING:
    from github import Github
    from github.Auth import Auth

    from verified_memory.budget import Budget
    from verified_memory.config import Settings

# The HTTP layer's names that callers writing to the same API (the review bot) share.
__all__ = [
    "CLIENT_ANSWERS",
    "SECONDARY_LIMIT_WAIT",
    "GitHubHttp",
    "GitHubSource",
    "GitHubTree",
    "Reply",
    "RetryPolicy",
    "Retryable",
]

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"
USER_AGENT = "verified-memory (PyGithub)"

#: A full object id. Only these are cache keys: a branch or a short sha can come to
#: mean something else, an object id cannot.
FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

#: Git modes of regular files (GitHub canonicalises to 100644 / 100755).
_REGULAR = ("100644", "100755")

#: GitHub's compare endpoint lists at most this many changed files.
COMPARE_FILE_LIMIT = 300

#: What ``compare/{base}...{head}`` says of two commits' ancestry.
_COMPARED = frozenset({"ahead", "behind", "diverged", "identical"})

_KEEP_COMMIT_TREES = 64  # per repository on disk: recent commits only
_KEEP_SUBTREES = 4096  # directory listings of truncated trees


def _require_pygithub() -> None:
    try:
        import github  # noqa: F401
        import tenacity  # noqa: F401
    except ImportError:
        raise MissingDependency("PyGithub", "github") from None


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


# --------------------------------------------------------------------------- trees


@dataclass(slots=True)
class _Listing:
    """One answer of ``git/trees``: regular files and directories, relative paths."""

    sha: str
    truncated: bool
    files: dict[str, str] = field(default_factory=dict)
    dirs: dict[str, str] = field(default_factory=dict)
    special: dict[str, str] = field(default_factory=dict)  # path -> what it is

    @classmethod
    def parse(cls, data: Any) -> _Listing:
        """Parse GitHub's tree JSON; symlinks (120000) and submodules (commit) are left
        out of the files, since neither holds lines of this repository a citation could
        point at (a link is never followed), and only named in ``special``."""
        if not isinstance(data, dict) or not isinstance(data.get("tree"), list):
            raise SourceUnavailable("GitHub answered a tree request with something else")
        listing = cls(str(data.get("sha", "")), bool(data.get("truncated", False)))
        for entry in data["tree"]:
            if not isinstance(entry, dict):
                continue
            kind, path, sha = entry.get("type"), entry.get("path"), entry.get("sha")
            if not isinstance(path, str) or not isinstance(sha, str):
                continue
            if kind == "blob" and entry.get("mode") in _REGULAR:
                listing.files[path] = sha
            elif kind == "tree":
                listing.dirs[path] = sha
            else:
                listing.special[path] = ("a symbolic link" if entry.get("mode") == "120000"
                                         else "a submodule" if kind == "commit"
                                         else "not a regular file")
        return listing

    def to_json(self) -> dict[str, Any]:
        return {"sha": self.sha, "truncated": self.truncated,
                "files": self.files, "dirs": self.dirs, "special": self.special}

    @classmethod
    def from_json(cls, doc: Any) -> _Listing | None:
        try:
            return cls(str(doc["sha"]), bool(doc["truncated"]),
                       dict(doc["files"]), dict(doc["dirs"]), dict(doc.get("special") or {}))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


class GitHubTree(Mapping[str, str]):
    """Every regular file of one commit, path -> blob sha, completed lazily if truncated.

    When GitHub answered the recursive listing in full (``truncated`` is False) this is
    a plain, complete mapping. Otherwise what GitHub sent is authoritative for the paths
    it names, and the rest is fetched on demand: ``tree[path]``, ``path in tree`` and
    ``tree.get(path)`` list only the directories on the path's way that are not yet
    known (at most one request per level), while ``len()`` and iteration list every
    directory (one request per directory GitHub left out, fewer where a sub-tree fits
    in one recursive answer). Each listing is cached by tree sha.
    """

    def __init__(
        self, commit: str, listing: _Listing, fetch: Callable[[str, bool], _Listing]
    ) -> None:
        self.commit = commit
        self.truncated = listing.truncated
        self._root = listing.sha
        self._files = dict(listing.files)
        self._dirs = dict(listing.dirs)  # directory path -> tree sha
        self._special = dict(listing.special)  # links and submodules: path -> what
        self._fetch = fetch
        self._children: dict[str, list[str]] = {}  # listed directory -> its directories
        self._complete: set[str] = set() if listing.truncated else {""}  # whole sub-trees
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        state = "complete" if "" in self._complete else "truncated"
        return f"GitHubTree({self.commit[:12]}, {len(self._files)} files known, {state})"

    def __getitem__(self, path: str) -> str:
        sha = self._files.get(path)
        if sha is not None:
            return sha
        if not isinstance(path, str) or not path or "" in self._complete:
            raise KeyError(path)
        with self._lock:
            if self._list(_parent(path)):
                sha = self._files.get(path)
        if sha is None:
            raise KeyError(path)
        return sha

    def __iter__(self) -> Iterator[str]:
        self._complete_all()
        return iter(list(self._files))

    def kind(self, path: str) -> str | None:
        """What ``path`` is when it is no file here: 'a symbolic link', 'a submodule',
        'a directory'; None otherwise (on a truncated tree, its directories are listed)."""
        if self.get(path) is not None:
            return None
        return self._special.get(path) or ("a directory" if path in self._dirs else None)

    def __len__(self) -> int:
        self._complete_all()
        return len(self._files)

    def _is_complete(self, directory: str) -> bool:
        """The whole sub-tree under ``directory`` is known."""
        while True:
            if directory in self._complete:
                return True
            if not directory:
                return False
            directory = _parent(directory)

    def _list(self, directory: str) -> bool:
        """Make the children of ``directory`` known; False when it is not a directory."""
        if directory in self._children or self._is_complete(directory):
            return True
        if directory:
            if directory not in self._dirs and (
                not self._list(_parent(directory)) or directory not in self._dirs
            ):
                return False
            sha = self._dirs[directory]
        else:
            sha = self._root
        listing = self._fetch(sha, False)
        prefix = f"{directory}/" if directory else ""
        self._merge(prefix, listing)
        self._children[directory] = [prefix + name for name in listing.dirs]
        return True

    def _merge(self, prefix: str, listing: _Listing) -> None:
        """Make a sub-tree's listing known under ``prefix``."""
        for name, blob in listing.files.items():
            self._files[prefix + name] = blob
        for name, tree in listing.dirs.items():
            self._dirs[prefix + name] = tree
        for name, what in listing.special.items():
            self._special[prefix + name] = what

    def _complete_all(self) -> None:
        if "" in self._complete:
            return
        with self._lock:
            self._walk("", known_truncated=True)

    def _walk(self, directory: str, *, known_truncated: bool = False) -> None:
        """Make the whole sub-tree under ``directory`` known: one recursive listing
        when it fits in one answer, else its children one by one."""
        if self._is_complete(directory):
            return
        if not known_truncated:
            listing = self._fetch(self._dirs[directory], True)
            self._merge(f"{directory}/", listing)
            if not listing.truncated:
                self._complete.add(directory)
                return
        self._list(directory)
        for child in self._children[directory]:
            self._walk(child)
        self._complete.add(directory)


# --------------------------------------------------------------------------- source


class GitHubSource(ClosingSource):
    """The code of one GitHub repository (``owner/name``), read through the REST API.

    ``auth`` is a token string or any ``github.Auth`` instance (``Auth.Token``,
    ``Auth.AppInstallationAuth`` for a GitHub App installation, ...); None reads public
    repositories anonymously (60 requests an hour). ``base_url`` selects GitHub
    Enterprise Server (``https://ghe.example.com/api/v3``). ``github`` injects a
    ready ``Github`` client instead (build it with ``retry=None``: retries are ours).

    Faults: ``retry`` (a ``RetryPolicy``) bounds attempts, backoff and the total wait;
    ``max_rate_limit_wait`` is the longest wait for a rate limit to lift before giving
    up with ``SourceUnavailable``. ``sleep`` and ``clock`` are injectable for tests.

    Counters for telemetry: ``requests`` (sent), ``rate_limited_requests`` (answered and
    counted against the rate limit: all but 304s), ``usage()`` for both and the limit.
    Thread-safe: one lock serialises requests, which is also what GitHub asks of
    clients to stay clear of secondary rate limits.
    """

    pins_commits: bool = True

    def __init__(
        self,
        repo: str,
        auth: str | Auth | None = None,
        *,
        base_url: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        max_rate_limit_wait: float = 60.0,
        retry: RetryPolicy | None = None,
        timeout: int = 30,
        seconds_between_requests: float | None = None,
        github: Github | None = None,
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        _require_pygithub()
        import time

        from github import Auth as auth_module
        from github import Github as github_class

        self.repo = validate_repo(repo)
        secrets: list[str] = []
        if github is None:
            if isinstance(auth, str):
                if not auth.strip():
                    raise ValidationError("the GitHub token is empty")
                secrets.append(auth)
                auth = auth_module.Token(auth)
            elif auth is not None and not isinstance(auth, auth_module.Auth):
                raise ValidationError(
                    f"auth must be a token string or a github.Auth instance, "
                    f"not {type(auth).__name__}"
                )
            if isinstance(auth, auth_module.Token):
                secrets.append(auth.token)
            # Pacing off by default: a pass sends a few dozen serial GETs at most.
            github = github_class(
                auth=auth,
                base_url=_api_url(base_url or DEFAULT_API_URL),
                timeout=int(timeout),
                user_agent=USER_AGENT,
                per_page=100,
                retry=None,
                seconds_between_requests=seconds_between_requests,
                seconds_between_writes=None,
                lazy=True,
            )
            self._owns_github = True
        else:
            self._owns_github = False
        self._github = github
        requester = github.requester
        self.base_url = requester.base_url
        self._http = GitHubHttp(
            requester, policy=retry or RetryPolicy(), max_rate_limit_wait=max_rate_limit_wait,
            sleep=sleep or time.sleep, clock=clock or time.time, secrets=secrets,
            timeout=timeout if self._owns_github else None,
        )
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.cache_dir = root
        self._blobs = DiskBlobCache(root / "blobs")
        owner, name = self.repo.split("/")
        host = re.sub(r"[^A-Za-z0-9.-]+", "_", (urlparse(self.base_url).netloc
                                                + urlparse(self.base_url).path).strip("/"))
        self._meta = JsonCache(root / "github" / host / owner / name)
        self._api = f"/repos/{owner}/{name}"
        self._lock = threading.RLock()
        self._trees: dict[str, GitHubTree] = {}
        self._comparisons: dict[str, _Comparison | None] = {}
        #: Commits whose latest ``contained`` question GitHub did not answer (``lacks``).
        self._uncompared: set[str] = set()
        self._main_line: MainLine | None = None
        self._resolved_in: Budget | None = None  # the pass whose answers ``_resolved`` holds
        self._resolved: dict[str, str] = {}
        self._closed = False

    @classmethod
    def from_settings(
        cls, repo: str, settings: Settings, *, env: Mapping[str, str] | None = None,
        **options: Any,
    ) -> GitHubSource:
        """The source the settings select: ``settings.github_token``, and the API URL
        from ``base_url=``, ``settings.github_api_url`` or ``GITHUB_API_URL`` (set by
        GitHub Actions, also on Enterprise Server), in that order."""
        env = os.environ if env is None else env
        base_url = (options.pop("base_url", None) or getattr(settings, "github_api_url", None)
                    or env.get("GITHUB_API_URL") or None)
        return cls(repo, settings.github_token, base_url=base_url, **options)

    def __repr__(self) -> str:
        return f"GitHubSource({self.repo!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        """Close the HTTP connections (if the client is ours). Safe to call twice."""
        if self._owns_github and not self._closed:
            self._github.close()
        self._closed = True

    # ------------------------------------------------------------------ sharing

    @property
    def github(self) -> Github:
        """The PyGithub client (built with ``retry=None``, no pacing): for callers that
        need more of the API than reading code, such as the review bot, so that one
        client, one connection pool and one set of credentials serve both."""
        return self._github

    @property
    def http(self) -> GitHubHttp:
        """Retried, counted GETs against this API host; reads made through it show up
        in ``requests`` like the source's own."""
        return self._http

    # ------------------------------------------------------------------ counters

    @property
    def requests(self) -> int:
        """Requests sent so far (every attempt, retries included)."""
        return self._http.requests

    @property
    def requests_before_pass(self) -> int:
        """``requests`` before the current pass (time budget) began sending: a pass
        reports what it spent from there (``GitHubHttp.requests_before_pass``)."""
        return self._http.requests_before_pass()

    def counted(self) -> None:
        """The pass counted every request so far (``GitHubHttp.counted``)."""
        self._http.counted()

    @property
    def rate_limited_requests(self) -> int:
        """Requests that counted against the primary rate limit (all answers but 304)."""
        return self._http.rate_limited_requests

    def usage(self) -> dict[str, int | None]:
        """What this source spent, for a verification result and telemetry."""
        limit = self._http.rate_limit
        return {
            "requests": self.requests,
            "rate_limited_requests": self.rate_limited_requests,
            "rate_limit_remaining": limit[0] if limit else None,
        }

    # ------------------------------------------------------------------ the Protocol

    def resolve(self, ref: str) -> str:
        """The commit ``ref`` names now (branch, tag, short or full sha).

        A full sha is returned as is, without a request (a commit that does not exist
        then surfaces as ``NotFound`` from ``tree``). Anything else is one conditional
        request; an unchanged ref answers 304 and costs no rate limit.
        """
        ref = _check_ref(ref, self.repo)
        if FULL_SHA.fullmatch(ref.lower()):
            return ref.lower()
        budget = budgets.current()
        with self._lock:
            # Within one pass (one time budget) a ref is asked once: the scope line of
            # `vmem verify` and the pass itself, the ref and the main line, agree.
            if budget is None or budget is not self._resolved_in:
                self._resolved_in, self._resolved = budget, {}
            elif ref in self._resolved:
                return self._resolved[ref]
            sha = self._resolve(ref)
            if budget is not None:
                self._resolved[ref] = sha
            return sha

    def _resolve(self, ref: str) -> str:
        with self._lock:
            cached = self._meta.get("refs", ref)
            known_sha: str | None = None
            etag: str | None = None
            if (isinstance(cached, dict) and isinstance(cached.get("etag"), str)
                    and isinstance(cached.get("sha"), str) and FULL_SHA.fullmatch(cached["sha"])):
                known_sha, etag = str(cached["sha"]), str(cached["etag"])
            reply = self._get_ref(ref, etag)
            if reply.not_modified and known_sha is not None:
                return known_sha
            if reply.not_modified:  # a 304 we did not ask for: ask plainly
                reply = self._get_ref(ref, None)
            if reply.status in CLIENT_ANSWERS:
                raise NotFound(self._ref_not_found(ref, reply))
            sha = _sha_from_reply(reply)
            if sha is None:
                raise SourceUnavailable(
                    f"GitHub answered ref {ref!r} of {self.repo} with something other "
                    "than a commit sha"
                )
            new_etag = reply.headers.get("etag")
            if new_etag:
                self._meta.put("refs", ref, {"ref": ref, "sha": sha, "etag": new_etag},
                               keep=_KEEP_SUBTREES)
            return sha

    def tree(self, revision: str) -> GitHubTree:
        """Every regular file at ``revision``: path -> blob sha (see ``GitHubTree``).

        One request per commit, ever (cached in memory and on disk); symlinks and
        submodules are left out. An unknown commit raises ``NotFound``.
        """
        commit = self.resolve(revision)
        with self._lock:
            cached = self._trees.get(commit)
            if cached is not None:
                return cached
            listing = _Listing.from_json(self._meta.get("commits", commit))
            if listing is None:
                reply = self._http.get(
                    f"{self._api}/git/trees/{commit}", params={"recursive": "1"},
                    what=f"the tree of {commit[:12]} in {self.repo}",
                )
                if reply.status in CLIENT_ANSWERS:
                    raise NotFound(
                        f"commit {commit} not found in GitHub repository {self.repo} "
                        f"({reply.status} {reply.message()})".rstrip()
                    )
                listing = _Listing.parse(reply.json())
                self._meta.put("commits", commit, listing.to_json(), keep=_KEEP_COMMIT_TREES)
            if listing.truncated:
                log.info("GitHub truncated the tree of %s in %s: listing directories "
                         "on demand", commit[:12], self.repo)
            tree = self._trees[commit] = GitHubTree(commit, listing, self._subtree)
            while len(self._trees) > 16:
                self._trees.pop(next(iter(self._trees)))
            return tree

    def entry_kind(self, revision: str, path: str) -> str | None:
        """What ``path`` is at ``revision`` when it is no file: a symbolic link, a
        submodule or a directory (from the listings; see ``GitHubTree.kind``)."""
        return self.tree(revision).kind(path)

    def blob_sha(self, revision: str, path: str) -> str | None:
        """The blob sha of ``path`` at ``revision``, or None when there is no such file.

        On a truncated tree this lists only the directories on the path's way."""
        return self.tree(revision).get(path)

    def read_blob(self, blob_sha: str) -> bytes:
        """The bytes of a blob: from the disk cache, else one ``git/blobs`` request."""
        sha = blob_sha.lower() if isinstance(blob_sha, str) else ""
        if not FULL_SHA.fullmatch(sha):
            raise NotFound(f"blob {blob_sha!r} does not exist in {self.repo}: "
                           "not a full object id")
        data = self._blobs.get(sha)
        if data is not None:
            return data
        with self._lock:
            data = self._blobs.get(sha)  # another thread may have fetched it meanwhile
            if data is not None:
                return data
            what = f"blob {sha[:12]} in {self.repo}"
            reply = self._http.get(f"{self._api}/git/blobs/{sha}", what=what)
            if reply.status in CLIENT_ANSWERS:
                # The tree listed this blob, so the repository or our access changed.
                raise SourceUnavailable(
                    f"GitHub does not serve {what} ({reply.status} {reply.message()})"
                )
            data = _decode_blob(reply.json(), what)
            if len(sha) == 40 and git_blob_sha(data) != sha:
                raise SourceUnavailable(f"GitHub sent {what} damaged (its bytes hash "
                                        "differently)")
            self._blobs.put(sha, data)
            return data

    def main_line(self, branch: str | None = None) -> MainLine | None:
        """``branch``, else the repository's default branch (one conditional request;
        an unchanged answer is a 304 that costs no rate limit), which ``HEAD`` and
        ``refs/heads/{branch}`` name too (its ``aliases``)."""
        if branch is not None:
            return MainLine(_check_ref(branch, self.repo), branch, "configured")
        with self._lock:
            if self._main_line is not None:  # asked once per source: it rarely changes
                return self._main_line
            cached = self._meta.get("repo", "default_branch")
            known = cached if isinstance(cached, dict) else {}
            etag = known.get("etag") if isinstance(known.get("branch"), str) else None
            reply = self._http.get(self._api, etag=etag if isinstance(etag, str) else None,
                                   what=f"the default branch of {self.repo}")
            if reply.not_modified and isinstance(known.get("branch"), str):
                name = str(known["branch"])
            else:
                if reply.not_modified:
                    reply = self._http.get(self._api, what=f"the default branch of {self.repo}")
                if reply.status in CLIENT_ANSWERS:
                    raise NotFound(self._ref_not_found("the default branch", reply))
                data = reply.json()
                said = data.get("default_branch") if isinstance(data, dict) else None
                if not isinstance(said, str) or not said:
                    raise SourceUnavailable(
                        f"GitHub did not say which branch of {self.repo} is the default")
                name = said
                if reply.headers.get("etag"):
                    self._meta.put("repo", "default_branch",
                                   {"branch": name, "etag": reply.headers["etag"]})
            self._main_line = MainLine(name, name, "GitHub's default branch",
                                       aliases=("HEAD", f"refs/heads/{name}"))
            return self._main_line

    def contained(self, commits: Collection[str], tip: str) -> frozenset[str]:
        """Those of ``commits`` in ``tip``'s history: ``compare/{commit}...{tip}`` says
        ``ahead`` or ``identical``. A commit GitHub cannot compare (404: unknown to it
        yet, a deleted fork, no access) is not contained in this answer, which leaves a
        memory stored on it not judged; that is no answer, so it is asked again (and
        ``lacks`` names it, for the memory's reason)."""
        tip = self.resolve(tip)
        inside: set[str] = set()
        for commit in {c for c in commits if isinstance(c, str) and FULL_SHA.fullmatch(c)}:
            if commit == tip:
                inside.add(commit)
                continue
            key = f"{commit}...{tip}"
            with self._lock:
                answer = self._meta.get("contains", key)
                if not isinstance(answer, bool):
                    reply = self._http.get(
                        f"{self._api}/compare/{key}", params={"per_page": "1"},
                        what=f"whether {tip[:12]} contains {commit[:12]} in {self.repo}")
                    data = reply.json() if reply.status not in CLIENT_ANSWERS else {}
                    status = data.get("status") if isinstance(data, dict) else None
                    answer = status in ("ahead", "identical")
                    if status in _COMPARED:  # an answer: a commit's ancestry never changes
                        self._meta.put("contains", key, answer, keep=_KEEP_SUBTREES)
                        self._uncompared.discard(commit)
                    else:
                        self._uncompared.add(commit)
                        log.info("GitHub cannot compare %s (%d %s): not placed this time",
                                 key, reply.status, reply.message())
            if answer:
                inside.add(commit)
        return frozenset(inside)

    def lacks(self, commits: Collection[str]) -> frozenset[str]:
        """Those of ``commits`` GitHub could not compare when ``contained`` last asked
        (unknown to it, or not reachable there): no request."""
        with self._lock:
            return frozenset(c for c in commits if c in self._uncompared)

    def lacking(self, commits: str, main: str) -> str:
        return (f"GitHub could not compare its commit {commits} with {main} (unknown to "
                f"GitHub, or not reachable there), so whether {main} contains it cannot "
                "be told")

    def renames(self, old_revision: str, new_revision: str, *,
                suffixes: Suffixes = None) -> Sequence[Rename]:
        """Files renamed (``status: renamed``) or deleted (``removed``) between two
        revisions, from one ``compare`` request; cached for good (both ends are commits).
        With ``suffixes``, those of the answer among such files (``narrowed``): GitHub
        pairs renames among all files.

        An old commit GitHub no longer knows (rewritten history) yields no renames, and
        the verifier falls back to searching the tree. GitHub does not report a rename's
        similarity: renames without changes get 100, others 50 (git's threshold).
        """
        comparison = self._compare(old_revision, new_revision)
        return narrowed(comparison.renames, suffixes) if comparison else ()

    def changed_paths(self, old_revision: str, new_revision: str, *,
                      suffixes: Suffixes = None) -> Sequence[str] | None:
        """Paths at ``new_revision`` whose blob differs from ``old_revision`` (added,
        modified or renamed files; of ``suffixes`` only, when given), from the same
        cached ``compare`` answer as ``renames``: no extra request, and no listing of
        the old tree. None when GitHub cannot compare the two, or ``old_revision`` is
        not in ``new_revision``'s history (``compare`` then lists the changes since
        their merge base, not since ``old_revision``): then diff the two trees
        instead."""
        comparison = self._compare(old_revision, new_revision)
        if not comparison or not comparison.direct:
            return None
        return tuple(p for p in comparison.changed if has_suffix(p, suffixes))

    def _compare(self, old_revision: str, new_revision: str) -> _Comparison | None:
        old, new = self.resolve(old_revision), self.resolve(new_revision)
        if old == new:
            return _Comparison((), (), direct=True)
        key = f"{old}...{new}"
        with self._lock:
            if key in self._comparisons:
                return self._comparisons[key]
            found = _Comparison.from_json(self._meta.get("compare", key))
            if found is None:
                reply = self._http.get(
                    f"{self._api}/compare/{key}",
                    what=f"the changes {old[:12]}...{new[:12]} in {self.repo}",
                )
                if reply.status in CLIENT_ANSWERS:
                    log.info("GitHub cannot compare %s: %s", key, reply.message())
                    self._comparisons[key] = None
                    return None
                data = reply.json()
                files = data.get("files") if isinstance(data, dict) else None
                files = files if isinstance(files, list) else []
                found = _Comparison.parse(files, direct=data.get("status") in (
                    "ahead", "identical"))
                if len(files) >= COMPARE_FILE_LIMIT:  # GitHub's cap: complete from trees
                    found = self._compare_trees(old, new, found)
                self._meta.put("compare", key, found.to_json(), keep=_KEEP_SUBTREES)
            self._comparisons[key] = found
            return found

    # ------------------------------------------------------------------ helpers

    def _get_ref(self, ref: str, etag: str | None) -> Reply:
        return self._http.get(
            f"{self._api}/commits/{quote(ref, safe='')}",
            accept="application/vnd.github.sha", etag=etag,
            what=f"ref {ref!r} of {self.repo}",
        )

    def _ref_not_found(self, ref: str, reply: Reply) -> str:
        said = reply.message()
        said = f" (GitHub: {said})" if said else ""
        if reply.status == 404:
            return (f"GitHub repository {self.repo} not found, or it has no ref {ref!r}{said}; "
                    "a private repository that the token cannot read also answers 404")
        if reply.status == 409:
            return f"ref {ref!r} not found: GitHub repository {self.repo} is empty{said}"
        return f"ref {ref!r} not found in GitHub repository {self.repo}{said}"

    def _subtree(self, tree_sha: str, recursive: bool) -> _Listing:
        """One directory's listing (or a whole sub-tree's), cached by tree sha."""
        key = f"{tree_sha}-r" if recursive else tree_sha
        with self._lock:
            listing = _Listing.from_json(self._meta.get("trees", key))
            if listing is not None:
                return listing
            reply = self._http.get(
                f"{self._api}/git/trees/{tree_sha}",
                params={"recursive": "1"} if recursive else None,
                what=f"tree {tree_sha[:12]} in {self.repo}",
            )
            if reply.status in CLIENT_ANSWERS:
                raise SourceUnavailable(
                    f"GitHub does not serve tree {tree_sha[:12]} in {self.repo} "
                    f"({reply.status} {reply.message()})"
                )
            listing = _Listing.parse(reply.json())
            self._meta.put("trees", key, listing.to_json(), keep=_KEEP_SUBTREES)
            return listing

    def _compare_trees(self, old: str, new: str, found: _Comparison) -> _Comparison:
        """What a compare capped at 300 files may have left out, from the two trees:
        every changed path, deletions, and exact (same blob) renames."""
        before, after = self.tree(old), self.tree(new)
        added = {sha: path for path, sha in after.items() if path not in before}
        known = {r.old for r in found.renames}
        renames = found.renames + tuple(
            Rename(path, added.get(sha))
            for path, sha in before.items()
            if path not in known and path not in after
        )
        changed = tuple(path for path, sha in after.items() if before.get(path) != sha)
        return _Comparison(renames, changed, direct=True)  # the trees themselves


# --------------------------------------------------------------------------- parsing


def _check_ref(ref: object, repo: str) -> str:
    if not isinstance(ref, str) or not ref.strip():
        raise NotFound(f"ref {ref!r} does not exist in {repo}: a ref must be a non-empty string")
    if any(ch.isspace() or ch == "\x00" for ch in ref) or ".." in ref:
        raise NotFound(f"ref {ref!r} does not exist in {repo}: not a valid git ref")
    return ref


def _sha_from_reply(reply: Reply) -> str | None:
    """The sha of a ``commits/{ref}`` answer: a bare sha, or a commit object in JSON
    (a proxy or an old Enterprise server may ignore the ``.sha`` media type)."""
    body = reply.body.strip()
    if body.startswith("{"):
        data = reply.json()
        body = str(data.get("sha", "")) if isinstance(data, dict) else ""
    body = body.lower()
    return body if FULL_SHA.fullmatch(body) else None


def _decode_blob(data: Any, what: str) -> bytes:
    """The bytes of a ``git/blobs`` answer (base64 with a line break every 60 chars)."""
    if not isinstance(data, dict) or not isinstance(data.get("content"), str):
        raise SourceUnavailable(f"GitHub answered {what} without content")
    content, encoding = data["content"], data.get("encoding", "base64")
    if encoding == "base64":
        try:
            return binascii.a2b_base64(content)  # ignores the line breaks
        except (binascii.Error, ValueError) as exc:
            raise SourceUnavailable(f"GitHub sent {what} with broken base64") from exc
    if encoding in ("utf-8", "utf8"):
        return str(content).encode("utf-8")
    raise SourceUnavailable(f"GitHub sent {what} in an unknown encoding {encoding!r}")


@dataclass(frozen=True, slots=True)
class _Comparison:
    """What ``compare/{old}...{new}`` says: renames and deletions, and changed paths;
    ``direct`` when those are the changes since ``old`` itself (it is an ancestor of
    ``new``), not since a merge base."""

    renames: tuple[Rename, ...]
    changed: tuple[str, ...]
    direct: bool

    @classmethod
    def parse(cls, files: Sequence[Any], *, direct: bool) -> _Comparison:
        renames: list[Rename] = []
        changed: list[str] = []
        for entry in files:
            if not isinstance(entry, dict) or not isinstance(entry.get("filename"), str):
                continue
            status, path = entry.get("status"), entry["filename"]
            if status == "renamed" and isinstance(entry.get("previous_filename"), str):
                similarity = 100 if not entry.get("changes") else 50
                renames.append(Rename(entry["previous_filename"], path, similarity))
            elif status == "removed":
                renames.append(Rename(path, None))
            if status != "removed":
                changed.append(path)
        return cls(tuple(renames), tuple(changed), direct)

    def to_json(self) -> dict[str, Any]:
        return {"renames": [[r.old, r.new, r.similarity] for r in self.renames],
                "changed": list(self.changed), "direct": self.direct}

    @classmethod
    def from_json(cls, doc: Any) -> _Comparison | None:
        try:
            return cls(
                tuple(Rename(str(o), n if isinstance(n, str) else None, int(s))
                      for o, n, s in doc["renames"]),
                tuple(str(p) for p in doc["changed"]),
                doc["direct"] is True,  # absent (an older cache): asked again
            )
        except (KeyError, TypeError, ValueError):
            return None


def _api_url(url: str) -> str:
    """The API's base URL, checked before PyGithub sees it (it fails on a bad one with
    an AttributeError or an AssertionError): ``http(s)://host[:port][/path]``."""
    try:
        parts = urlparse(url.strip())
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError as exc:
        raise ValidationError(f"the GitHub API URL {url!r} is not a URL ({exc}): give "
                              "https://HOST/api/v3 (GITHUB_API_URL)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(f"the GitHub API URL {url!r} is not http(s)://HOST/...: give "
                              "e.g. https://github.example.com/api/v3 (GITHUB_API_URL)")
    return url.strip().rstrip("/")
