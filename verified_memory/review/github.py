"""The review bot on GitHub: a pull request's diff in, one review out, updated in place.

Reading (retried, counted GETs through the ``GitHubSource``'s ``GitHubHttp``):

- ``pulls/{n}``: head and base commits, whether it merged; a 404 is ``NotFound``;
- ``compare/{base}...{head}``: the merge base, the old side of a pull request's diff
  (only when no local working copy can tell);
- ``pulls/{n}/files``, 100 a page, at most 30 pages: GitHub lists at most 3,000 files of a
  pull request. Each file's ``patch`` gives its hunks; a file without one (binary, or a
  diff too large to show) counts as wholly changed; a renamed file's old side is its
  ``previous_filename``.

Posting (PyGithub objects, built from the JSON already read, so no extra GETs): one
review per pull request, found again by the hidden marker at the start of its body.

- First run with findings: ``create_review`` (event ``COMMENT``) with the summary as its
  body and one inline comment per finding that has a line in the diff (``line`` and
  ``side``: ``RIGHT`` for head lines, ``LEFT`` for removed base lines). If GitHub refuses
  a comment's place (422), the review is posted without inline comments: every finding
  is then written out in the body.
- Later runs: submitted reviews cannot take new comments or be deleted, so the review's
  body is edited in place (``PUT .../reviews/{id}``), and each inline comment, marked
  with its memory id, is edited in place when its line still stands
  (``PATCH .../pulls/comments/{id}``), deleted when its finding is gone or its line moved
  (it is outdated), and a finding with no comment yet gets a new single comment
  (``POST .../pulls/{n}/comments``).
- No findings and no earlier review: nothing is posted. No findings but an earlier
  review: its body says there is nothing left to flag, and its comments are deleted.

Writes are spaced ``write_interval`` seconds apart (GitHub asks for a second between
content-creating requests); rate limits are waited out within ``max_rate_limit_wait``;
edits and deletions (idempotent) are retried on 5xx and connection errors, creations are
not (a retried POST could post twice). Failures are ``SourceUnavailable`` or
``NotFound`` with one clear line; tokens never appear in them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection, Container, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from verified_memory.errors import NotFound, SourceUnavailable, ValidationError
from verified_memory.review.diff import Diff, FileDiff, parse_patch
from verified_memory.review.findings import Finding, ReviewReport
from verified_memory.review.git import merge_base
from verified_memory.review.markdown import render_finding, render_markdown
from verified_memory.sources.github import (
    CLIENT_ANSWERS,
    SECONDARY_LIMIT_WAIT,
    Reply,
    Retryable,
)

if TYPE_CHECKING:
    from verified_memory.sources.github import GitHubSource
    from verified_memory.sources.local_git import LocalGitSource

__all__ = [
    "REVIEW_MARKER", "Posted", "PullRequest", "PullRequests", "check_apply", "comment_marker",
]

T = TypeVar("T")

REVIEW_MARKER = "<!-- verified-memory-review -->"
_COMMENT_MARKER = re.compile(r"<!-- verified-memory-review memory=([A-Za-z0-9_-]{1,64}) -->")

PER_PAGE = 100
MAX_FILE_PAGES = 30  # GitHub lists at most 3,000 files of a pull request
BODY_LIMIT = 60_000  # GitHub takes 65,536 characters; keep a margin


def comment_marker(memory_id: str) -> str:
    return f"<!-- verified-memory-review memory={memory_id} -->"


def _same(a: str | None, b: str) -> bool:
    return (a or "").replace("\r\n", "\n").strip() == b.replace("\r\n", "\n").strip()


@dataclass(frozen=True, slots=True)
class PullRequest:
    """What a review needs of a pull request (``raw`` is GitHub's JSON)."""

    number: int
    head_sha: str
    base_sha: str
    base_ref: str
    head_ref: str
    state: str
    merged: bool
    merge_commit_sha: str | None
    changed_files: int | None
    html_url: str | None
    raw: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Posted:
    """What ``post`` did: ``action`` is ``created``, ``updated`` or ``none``."""

    action: str
    review_id: int | None = None
    url: str | None = None
    created: int = 0  # inline comments created
    updated: int = 0  # edited in place
    kept: int = 0  # already right
    deleted: int = 0  # stale (finding gone, or its line no longer in the diff)
    unplaced: int = 0  # GitHub refused the line: the finding is written out in the body

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "review_id": self.review_id, "url": self.url,
                "comments": {"created": self.created, "updated": self.updated,
                             "kept": self.kept, "deleted": self.deleted,
                             "unplaced": self.unplaced}}


class _Refused(Exception):
    """422: GitHub refused what we sent (e.g. a comment line outside the diff)."""


class PullRequests:
    """The pull requests of the source's repository: read one, post its review."""

    def __init__(self, source: GitHubSource, *, sleep: Callable[[float], None] | None = None,
                 write_interval: float = 1.0) -> None:
        self.source = source
        self.repo = source.repo
        self.http = source.http
        self._api = f"/repos/{self.repo}"
        self._sleep = sleep or time.sleep
        self.write_interval = write_interval
        self.writes = 0

    @property
    def requests(self) -> int:
        """Requests sent for the repository: reads (the source's counter) and writes."""
        return self.source.requests + self.writes

    # ------------------------------------------------------------------ reading

    def get(self, number: int) -> PullRequest:
        reply = self.http.get(f"{self._api}/pulls/{number}",
                              what=f"pull request #{number} of {self.repo}")
        if reply.status in CLIENT_ANSWERS:
            raise NotFound(f"pull request #{number} does not exist in {self.repo} (or the "
                           f"token cannot read it): GitHub answered {reply.status}")
        data = reply.json()
        try:
            return PullRequest(
                number=int(data["number"]), head_sha=str(data["head"]["sha"]),
                base_sha=str(data["base"]["sha"]), base_ref=str(data["base"].get("ref", "")),
                head_ref=str(data["head"].get("ref", "")), state=str(data.get("state", "")),
                merged=bool(data.get("merged")),
                merge_commit_sha=data.get("merge_commit_sha") or None,
                changed_files=data.get("changed_files"), html_url=data.get("html_url"),
                raw=data)
        except (KeyError, TypeError, ValueError) as exc:
            raise SourceUnavailable(f"GitHub answered pull request #{number} of {self.repo} "
                                    "with something other than a pull request") from exc

    def merge_base(self, base: str, head: str) -> str:
        """The merge base of two commits (the old side of a pull request's diff)."""
        reply = self.http.get(f"{self._api}/compare/{base}...{head}", params={"per_page": "1"},
                              what=f"the merge base of {base[:12]} and {head[:12]}")
        data = reply.json() if reply.status not in CLIENT_ANSWERS else None
        sha = (data.get("merge_base_commit") or {}).get("sha") if isinstance(data, dict) else None
        if not isinstance(sha, str) or not sha:
            raise NotFound(f"GitHub cannot compare {base[:12]}...{head[:12]} in {self.repo}: "
                           "the two commits share no history")
        return sha

    def files(self, pull: PullRequest) -> tuple[list[FileDiff], list[str]]:
        """The changed files with their hunks, and notes (a listing GitHub cut short)."""
        entries = self._pages(f"{self._api}/pulls/{pull.number}/files",
                              f"the files of pull request #{pull.number}", MAX_FILE_PAGES)
        files = [f for f in (_file(e) for e in entries) if f is not None]
        notes = []
        if pull.changed_files is not None and pull.changed_files > len(entries):
            notes.append(f"GitHub lists at most 3,000 files of a pull request: "
                         f"{len(entries)} of its {pull.changed_files} changed files were "
                         "reviewed")
        return files, notes

    def diff(self, pull: PullRequest, local: LocalGitSource | None = None) -> Diff:
        """What the pull request changes: its files and hunks, diffed from the merge base
        of its base and head (read from ``local`` when given: no request)."""
        base = merge_base(local.path, pull.base_sha, pull.head_sha) if local else None
        files, notes = self.files(pull)
        return Diff(pull.base_ref or pull.base_sha, pull.head_ref or pull.head_sha,
                    base or self.merge_base(pull.base_sha, pull.head_sha), pull.head_sha,
                    tuple(files), tuple(notes))

    def _pages(self, path: str, what: str, max_pages: int | None = None) -> list[Any]:
        out: list[Any] = []
        page = 1
        while True:
            reply = self.http.get(path, params={"per_page": str(PER_PAGE), "page": str(page)},
                                  what=f"{what} (page {page})")
            if reply.status in CLIENT_ANSWERS:
                raise NotFound(f"GitHub cannot list {what} in {self.repo} ({reply.status} "
                               f"{reply.message()})".rstrip())
            data = reply.json()
            if not isinstance(data, list):
                raise SourceUnavailable(f"GitHub answered {what} with something other than "
                                        "a list")
            out.extend(data)
            link = reply.headers.get("link", "")
            if (len(data) < PER_PAGE or (link and 'rel="next"' not in link)
                    or (max_pages is not None and page >= max_pages)):
                return out
            page += 1

    # ------------------------------------------------------------------ posting

    def post(self, pull: PullRequest, report: ReviewReport) -> Posted:
        """Post the review, or bring the one posted before up to date (see the module).

        Reviews and comments are recognised by their marker; one that carries it but
        that GitHub will not let us edit (someone else wrote it) is left alone: a
        comment is then written anew, a review posted anew."""
        n = pull.number
        reviews = self._pages(f"{self._api}/pulls/{n}/reviews", f"the reviews of #{n}")
        ours = [r for r in reviews
                if isinstance(r, dict) and str(r.get("body") or "").startswith(REVIEW_MARKER)]
        if not report.findings and not ours:
            return Posted("none")
        desired = {f.memory.id: f for f in report.findings if f.comment is not None}
        if not ours:
            return self._create(pull, report, desired)
        previous = ours[-1]
        comments = self._pages(f"{self._api}/pulls/{n}/comments", f"the review comments of #{n}")
        mine: dict[str, list[dict[str, Any]]] = {}
        for c in comments:
            match = _COMMENT_MARKER.match(str(c.get("body") or "")) if isinstance(c, dict) else None
            if match:
                mine.setdefault(match[1], []).append(c)
        from github.PullRequestComment import PullRequestComment
        from github.PullRequestReview import PullRequestReview

        gh = self.source.github
        counts = {"created": 0, "updated": 0, "kept": 0, "deleted": 0, "unplaced": 0}
        placed: set[str] = set()
        for mid, existing in mine.items():
            finding = desired.get(mid)
            for c in existing:
                obj = gh.create_from_raw_data(PullRequestComment, c)
                if finding is not None and mid not in placed and _stands(c, finding):
                    body = _comment_body(finding, report)
                    if _same(c.get("body"), body):
                        counts["kept"] += 1
                        placed.add(mid)
                    elif self._try(f"editing review comment {c.get('id')}",
                                   partial(obj.edit, body)):
                        counts["updated"] += 1
                        placed.add(mid)
                elif self._try(f"deleting review comment {c.get('id')}", obj.delete):
                    counts["deleted"] += 1
        pull_obj = self._pull_object(pull)
        for mid, finding in desired.items():
            if mid in placed:
                continue
            where = finding.comment
            assert where is not None
            try:
                self._write(
                    f"commenting on {where.path} line {where.line}",
                    partial(pull_obj.create_review_comment, _comment_body(finding, report),
                            pull.head_sha, where.path, line=where.line, side=where.side),
                    idempotent=False)
            except _Refused:
                counts["unplaced"] += 1
                continue
            placed.add(mid)
            counts["created"] += 1
        body = _review_body(report, placed)
        if not _same(previous.get("body"), body):
            review = gh.create_from_raw_data(PullRequestReview, previous)
            if not self._try(f"updating review {previous.get('id')}", partial(review.edit, body)):
                # Not ours after all: post our own, whose comments are the ones placed above.
                fresh = self._create(pull, report, {}, placed=placed)
                return Posted("created", fresh.review_id, fresh.url, **counts)
        return Posted("updated", int(previous["id"]), previous.get("html_url"), **counts)

    def _create(self, pull: PullRequest, report: ReviewReport,
                desired: Mapping[str, Finding], placed: Collection[str] = ()) -> Posted:
        from github.Commit import Commit

        commit = self.source.github.create_from_raw_data(
            Commit, {"sha": pull.head_sha,
                     "url": f"{pull.raw.get('url', '')}".rsplit("/pulls/", 1)[0]
                            + f"/commits/{pull.head_sha}"})
        pull_obj = self._pull_object(pull)
        comments = [{"path": f.comment.path, "line": f.comment.line, "side": f.comment.side,
                     "body": _comment_body(f, report)}
                    for f in desired.values() if f.comment is not None]

        def create(body: str, inline: list[dict[str, Any]]) -> Any:
            what = f"posting the review of #{pull.number}"
            try:
                return self._write(
                    what, lambda: pull_obj.create_review(commit=commit, body=body,
                                                         event="COMMENT", comments=inline),
                    idempotent=False)
            except _Refused as exc:
                if inline:  # perhaps a comment's line: try again without comments
                    raise
                # The review itself: e.g. its head was force-pushed away since the pull
                # request was read, or the conversation was locked.
                raise SourceUnavailable(
                    f"GitHub refused {what} ({exc}): nothing was posted; the pull request "
                    "may have changed since it was read (a push), or be locked") from None

        unplaced = 0
        try:
            review = create(_review_body(report, set(desired) | set(placed)), comments)
        except _Refused:
            unplaced = len(comments)
            comments = []
            review = create(_review_body(report, placed), [])
        return Posted("created", int(review.id), getattr(review, "html_url", None),
                      created=len(comments), unplaced=unplaced)

    def _try(self, what: str, call: Callable[[], object]) -> bool:
        """An edit or deletion of something marked as ours; False when GitHub refuses it
        (403/404/422: someone else's, or gone) instead of failing the whole run."""
        try:
            self._write(what, call, idempotent=True, refusable=True)
        except _Refused:
            return False
        return True

    def _pull_object(self, pull: PullRequest) -> Any:
        from github.PullRequest import PullRequest as GithubPullRequest

        return self.source.github.create_from_raw_data(GithubPullRequest, dict(pull.raw))

    def _write(self, what: str, call: Callable[[], T], *, idempotent: bool,
               refusable: bool = False) -> T:
        """One write through PyGithub, spaced, retried where safe, errors translated."""
        import requests
        from github.GithubException import GithubException

        if self.writes and self.write_interval:
            self._sleep(self.write_interval)
        retrying = self.http.retrying(what, sleep=self._sleep)
        try:
            for attempt in retrying:
                with attempt:
                    self.writes += 1
                    try:
                        return call()
                    except GithubException as exc:
                        judged = self._judge(exc, what, idempotent)
                        if refusable and isinstance(judged, SourceUnavailable | NotFound) \
                                and exc.status in (403, 404):
                            raise _Refused(str(judged)) from None
                        raise judged from None
                    except (requests.exceptions.ConnectionError,
                            requests.exceptions.Timeout) as exc:
                        if idempotent:
                            raise Retryable(f"connection failed ({type(exc).__name__})") from None
                        raise SourceUnavailable(
                            f"GitHub could not be reached while {what} "
                            f"({type(exc).__name__}); nothing was retried, to avoid posting "
                            "twice") from None
        except Retryable as exc:
            raise SourceUnavailable(self.http.scrub(
                f"GitHub failed while {what}: {exc.reason}; gave up")) from None
        raise AssertionError("unreachable: tenacity either returns or raises")

    def _judge(self, exc: Any, what: str, idempotent: bool) -> Exception:
        status = int(exc.status or 0)
        message = _message(exc.data)
        headers = {str(k).lower(): str(v) for k, v in (exc.headers or {}).items()}
        said = self.http.scrub(f"{status} {message}".strip())
        if status == 422:
            return _Refused(said)
        if status == 404:
            return NotFound(f"GitHub answered 404 while {what} in {self.repo}: the pull "
                            "request, review or comment is gone, or the token cannot see it")
        if status == 401:
            return SourceUnavailable(f"GitHub rejected the credentials ({said}) while {what}")
        if status in (403, 429):
            # The read path's rule (Retry-After, else the reset of a spent limit, else a
            # minute for a secondary limit), and any refusal that says "rate limit".
            limited = self.http.rate_limit_wait(Reply(status, headers, ""), message) or (
                ("rate limit", SECONDARY_LIMIT_WAIT) if "rate limit" in message.lower()
                else None)
            if limited:
                kind, wait = limited
                if wait <= self.http.max_rate_limit_wait:
                    return Retryable(f"{status} {kind}", wait)
                return SourceUnavailable(f"GitHub {kind} while {what}: it lifts in "
                                         f"{wait:.0f} s ({said})")
            return SourceUnavailable(
                f"GitHub refused {what} ({said}): the token needs the pull-requests: write "
                "permission (a pull request from a fork gets a read-only token)")
        if status >= 500 and idempotent:
            return Retryable(said)
        return SourceUnavailable(f"GitHub failed while {what} ({said})")


# --------------------------------------------------------------------------- parts


def _file(entry: Any) -> FileDiff | None:
    """One entry of ``pulls/{n}/files`` as a ``FileDiff``."""
    if not isinstance(entry, dict) or not isinstance(entry.get("filename"), str):
        return None
    name, status = entry["filename"], str(entry.get("status") or "modified")
    previous = entry.get("previous_filename")
    path: str | None = name
    old: str | None = name
    if status == "removed":
        path = None
    elif status in ("added", "copied"):
        old = None
    elif status == "renamed" and isinstance(previous, str) and previous:
        old = previous
    patch = entry.get("patch")
    if not isinstance(patch, str):
        whole = old is not None and (status == "removed" or int(entry.get("changes") or 0) > 0)
        return FileDiff(path=path, old_path=old, status=status, whole=whole)
    return parse_patch(patch.split("\n"), path=path, old_path=old, status=status)


def _stands(comment: Mapping[str, Any], finding: Finding) -> bool:
    """The comment sits where the finding's comment belongs, and is not outdated."""
    where = finding.comment
    return (where is not None and comment.get("line") == where.line
            and comment.get("path") == where.path
            and (comment.get("side") or "RIGHT") == where.side)


def _comment_body(finding: Finding, report: ReviewReport) -> str:
    text = render_finding(finding, applied=report.applied, heading="####")
    return f"{comment_marker(finding.memory.id)}\n{text}\n"[:BODY_LIMIT]


def _review_body(report: ReviewReport, inline: Container[str]) -> str:
    footer = (f"_Posted by `vmem review` for head `{report.head_commit[:12]}`; this review "
              "is updated in place on every run._")
    body = f"{REVIEW_MARKER}\n{render_markdown(report, brief=inline)}\n{footer}\n"
    if len(body) > BODY_LIMIT:
        every = {f.memory.id for f in report.findings}  # every finding on one line
        body = f"{REVIEW_MARKER}\n{render_markdown(report, brief=every)}\n{footer}\n"
    if len(body) > BODY_LIMIT:
        cut = body[: BODY_LIMIT - 200].rsplit("\n", 1)[0]
        body = f"{cut}\n\n_(cut short: GitHub limits a review's length; run `vmem review` " \
               "for all of it)_\n"
    return body


def _message(data: Any) -> str:
    """GitHub's error message and its ``errors`` details, on one line."""
    if not isinstance(data, dict):
        return ""
    parts = [str(data.get("message") or "")]
    for error in data.get("errors") or ():
        if isinstance(error, dict) and error.get("message"):
            parts.append(str(error["message"]))
        elif isinstance(error, str):
            parts.append(error)
    return "; ".join(p for p in parts if p)[:300]


def check_apply(pull: PullRequest) -> str:
    """The commit a post-merge ``--apply`` verifies at; refused before the merge."""
    if not pull.merged or not pull.merge_commit_sha:
        raise ValidationError(
            f"pull request #{pull.number} is not merged: --apply changes memories only after "
            "the merge (without --apply a review writes telemetry only)")
    return pull.merge_commit_sha
