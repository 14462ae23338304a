"""One GET to the GitHub REST API, retried, counted, and translated into our errors.

``GitHubSource`` builds on this and only ever sees three things: a ``Reply`` (2xx,
304, or a client answer it asked to interpret itself, such as a 404), ``NotFound``
raised by itself, or ``SourceUnavailable`` raised here. PyGithub's ``GithubException``
and ``requests``' exceptions never get past this module.

Why PyGithub's ``Requester`` and not its object model: conditional requests need the
``If-None-Match`` header and the raw status (a 304 has no body for PyGithub to build an
object from), and the blob, tree and commit endpoints are simple enough to read as
JSON. The requester still brings what matters: every ``github.Auth`` class (a token,
a GitHub App installation whose token it refreshes), Enterprise base URLs, connection
reuse, and masked debug logging.

Faults (never a verdict, always ``SourceUnavailable`` in the end):

- connection errors, timeouts, 5xx: retried with exponential backoff;
- secondary rate limits (403/429 with ``Retry-After`` or GitHub's message): retried
  after ``Retry-After`` (or a minute, GitHub's documented floor);
- the primary rate limit (403/429 with ``X-RateLimit-Remaining: 0``): retried at
  ``X-RateLimit-Reset`` when that is within ``max_rate_limit_wait``, else given up at
  once, so a verification pass never hangs for an hour;
- 401 (bad, expired or revoked credentials) and other 4xx: not retried.

The total sleep for one request is bounded by ``max_retry_wait``. Sleeping goes through
an injectable ``sleep`` so that tests never wait.

Within a pass's time budget (``verified_memory.budget``) every request's timeout, retry
sleep and rate-limit wait is also bounded by the time left: a retry that would not fit
is not made, and the rest of the pass fails at once (``BudgetSpent``). A circuit
breaker, shared by every request of this host, fails requests at once while GitHub is
clearly down: after a request failed every retry (``SourceDown``), after rejected
credentials (``CredentialsRejected``), during a rate limit too far from its reset, or
after three failures in a row.

Secrets: no message built here contains a header, and every message is scrubbed of the
configured token as a last line of defence.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from verified_memory import budget as budgets
from verified_memory.budget import CircuitBreaker
from verified_memory.errors import (
    BudgetSpent,
    CredentialsRejected,
    SourceDown,
    SourceUnavailable,
)

if TYPE_CHECKING:
    from github.Requester import Requester
    from tenacity import RetryCallState, Retrying

__all__ = ["GitHubHttp", "Reply", "RetryPolicy", "Retryable"]

log = logging.getLogger("verified_memory.sources.github")

#: Statuses a caller interprets itself (which repository, ref or commit is unknown).
CLIENT_ANSWERS = frozenset({404, 409, 422})

#: GitHub's documented floor for a secondary rate limit without ``Retry-After``.
SECONDARY_LIMIT_WAIT = 60.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard to try before a request counts as unreadable.

    ``attempts`` counts the first try. Backoff doubles from ``backoff`` up to
    ``max_backoff``; a server-requested wait (``Retry-After``, a rate-limit reset) is
    used instead where given. All sleeps for one request together stay within
    ``max_retry_wait``: a retry that would exceed it is not made.
    """

    attempts: int = 5
    backoff: float = 1.0
    max_backoff: float = 16.0
    max_retry_wait: float = 120.0


@dataclass(frozen=True, slots=True)
class Reply:
    """What GitHub answered: status, lower-cased headers, body text."""

    status: int
    headers: Mapping[str, str]
    body: str

    @property
    def not_modified(self) -> bool:
        return self.status == 304

    def json(self) -> Any:
        """The body as JSON; a body that is not JSON means the source cannot be read."""
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise SourceUnavailable(
                f"GitHub answered {self.status} with a body that is not JSON"
            ) from exc

    def message(self) -> str:
        """GitHub's error message (``{"message": ..., "documentation_url": ...}``)."""
        try:
            data = json.loads(self.body) if self.body else None
        except ValueError:  # a proxy's HTML page, a plain-text error
            text = self.body.strip()
            return "" if text.startswith("<") else text[:200]
        if isinstance(data, dict) and isinstance(data.get("message"), str):
            return str(data["message"])
        return ""


class Retryable(Exception):
    """A failure worth another try, after ``wait`` seconds (None: use backoff)."""

    def __init__(self, reason: str, wait: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait = wait


def _is_secondary_limit(message: str) -> bool:
    lower = message.lower()
    return (
        "secondary rate limit" in lower
        or "abuse" in lower
        or lower.endswith("please retry your request again later.")
        or lower.endswith("please wait a few minutes before you try again.")
    )


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


class GitHubHttp:
    """GETs against one GitHub API host through a PyGithub ``Requester``.

    Counters: ``requests`` (every attempt sent) and ``rate_limited_requests`` (every
    answer that counts against the primary rate limit: all but 304s; a request that got
    no answer is not counted there), and ``requests_before_pass()`` (moved on by
    ``counted()``). ``rate_limit``
    holds the last seen (remaining, limit, reset epoch) when GitHub sent them.
    """

    def __init__(
        self,
        requester: Requester,
        *,
        policy: RetryPolicy,
        max_rate_limit_wait: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        secrets: Iterable[str] = (),
        timeout: float | None = None,
    ) -> None:
        self._requester = requester
        self.policy = policy
        self.max_rate_limit_wait = max_rate_limit_wait
        self._sleep = sleep
        self._clock = clock
        self._secrets = tuple(s for s in secrets if s)
        self.timeout = timeout  # seconds per request (None: the client's own)
        self.breaker = CircuitBreaker(clock=clock)
        self.requests = 0
        self.rate_limited_requests = 0
        self.rate_limit: tuple[int, int, int] | None = None
        self._pass: budgets.Budget | None = None  # the pass of the latest request
        self._pass_began = 0  # ``requests`` before that pass sent its first

    def __repr__(self) -> str:
        return f"GitHubHttp(requests={self.requests})"

    def requests_before_pass(self) -> int:
        """``requests`` before the current pass (time budget) sent its first request;
        outside a pass, or before its first request, ``requests``. What a pass spent is
        counted from there: an entry point's scope line, asked before the pass within
        its budget, is part of it (the pass reuses its answers)."""
        budget = budgets.current()
        return self._pass_began if budget is not None and budget is self._pass else (
            self.requests)

    def counted(self) -> None:
        """A pass counted every request so far: a later pass in the same time budget
        (the Python API may run two) counts from here, its own scope line's included."""
        if budgets.current() is self._pass:
            self._pass_began = self.requests

    def scrub(self, text: str) -> str:
        """``text`` with every configured secret replaced by ``***``."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def retrying(self, what: str, sleep: Callable[[float], None] | None = None) -> Retrying:
        """The retry loop of one call to GitHub: tries again on ``Retryable`` (after its
        ``wait``, else exponential backoff) within the policy's attempts and total wait;
        the last ``Retryable`` is re-raised for the caller to word."""
        from tenacity import Retrying, retry_if_exception_type

        policy = self.policy
        budget = budgets.current()

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            if isinstance(exc, Retryable) and exc.wait is not None:
                return exc.wait
            return float(min(policy.max_backoff, policy.backoff * 2 ** (state.attempt_number - 1)))

        def stop(state: RetryCallState) -> bool:
            if state.attempt_number >= policy.attempts:
                return True
            if state.idle_for + state.upcoming_sleep > policy.max_retry_wait:
                return True
            if budget is not None and not budget.fits(state.upcoming_sleep):
                exc = state.outcome.exception() if state.outcome else None
                reason = exc.reason if isinstance(exc, Retryable) else "error"
                raise budget.give_up(f"GitHub {what}: {reason}", state.upcoming_sleep) from None
            return False

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            reason = exc.reason if isinstance(exc, Retryable) else "error"
            log.info("GitHub %s: %s; retrying in %.1f s", what, reason, state.upcoming_sleep)
            if budget is not None:
                budget.note(f"GitHub {what}: {reason}", state.upcoming_sleep)

        return Retrying(
            sleep=sleep or self._sleep,
            wait=wait,
            stop=stop,
            retry=retry_if_exception_type(Retryable),
            before_sleep=before_sleep,
            reraise=True,
        )

    def get(
        self,
        path: str,
        *,
        what: str,
        params: Mapping[str, str] | None = None,
        accept: str = "application/vnd.github+json",
        etag: str | None = None,
    ) -> Reply:
        """GET ``path`` (relative to the API base), retrying transient failures.

        Returns the reply for 2xx, 304 and the client answers in ``CLIENT_ANSWERS``;
        raises ``SourceUnavailable`` (naming ``what`` was being read) otherwise.
        """
        self.breaker.check()
        budget = budgets.current()
        if budget is not None:
            budget.check()
        if budget is not self._pass:
            self._pass, self._pass_began = budget, self.requests
        retrying = self.retrying(what)
        headers = {"Accept": accept}
        if etag:
            headers["If-None-Match"] = etag
        try:
            reply = self._attempts(retrying, path, params, headers, what)
        except BudgetSpent:
            raise  # the pass ran out of time: no judgement on GitHub
        except SourceUnavailable as exc:
            self.breaker.failure(exc)
            if budget is not None:
                budget.record(exc)
            raise
        self.breaker.success()
        return reply

    def _attempts(self, retrying: Retrying, path: str, params: Mapping[str, str] | None,
                  headers: dict[str, str], what: str) -> Reply:
        try:
            for attempt in retrying:
                with attempt:
                    return self._send(path, params, headers, what)
        except Retryable as exc:
            tries = retrying.statistics.get("attempt_number", self.policy.attempts)
            # Every retry failed: GitHub (or the way to it) is down for now.
            raise SourceDown(self.scrub(
                f"GitHub could not be read ({what}): {exc.reason}; gave up after "
                f"{tries} attempt{'s' if tries != 1 else ''}"
            )) from None
        raise AssertionError("unreachable: tenacity either returns or raises")

    # ------------------------------------------------------------------ one attempt

    def _send(
        self, path: str, params: Mapping[str, str] | None, headers: dict[str, str], what: str
    ) -> Reply:
        import requests
        from github.GithubException import GithubException

        self.requests += 1
        self._bound_timeout()
        try:
            status, raw_headers, body = self._requester.requestJson(
                "GET", path, parameters=dict(params or {}), headers=dict(headers)
            )
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
                requests.exceptions.ChunkedEncodingError) as exc:
            kind = "timed out" if isinstance(exc, requests.exceptions.Timeout) else (
                "connection failed")
            raise Retryable(f"{kind} ({type(exc).__name__})") from None
        except requests.exceptions.RequestException as exc:
            raise SourceUnavailable(
                f"GitHub could not be read ({what}): {type(exc).__name__}"
            ) from None
        except RuntimeError as exc:  # PyGithub refusing a redirect to another host/scheme
            raise SourceUnavailable(self.scrub(
                f"GitHub could not be read ({what}): {exc}"
            )) from None
        except GithubException as exc:
            # Raised from inside the requester, e.g. when a GitHub App installation
            # token could not be refreshed: judge it like any other answer.
            reply = Reply(exc.status, {k.lower(): str(v) for k, v in (exc.headers or {}).items()},
                          json.dumps(exc.data) if exc.data is not None else "")
            self._judge(reply, what)
            raise SourceUnavailable(self.scrub(
                f"GitHub could not be read ({what}): {exc.status} {reply.message()}"
            )) from None
        reply = Reply(status, {k.lower(): str(v) for k, v in raw_headers.items()}, body)
        self._note_rate_limit(reply)
        log.debug("GET %s -> %d (%s)", path, status, what)
        return self._judge(reply, what)

    def _bound_timeout(self) -> None:
        """Give the next request at most the time left in the pass's budget.

        PyGithub sets a timeout per client, not per request; its connection object
        (created on first use, then kept) holds it, so that is where it is changed."""
        try:
            connection = getattr(self._requester, "_Requester__createConnection")()  # noqa: B009
        except (AttributeError, TypeError):  # another PyGithub: its own timeout stays
            log.debug("cannot bound the request timeout of this PyGithub version")
            return
        if self.timeout is None:  # the client's own, remembered before any change
            self.timeout = connection.timeout
        timeout = self.timeout
        budget = budgets.current()
        if budget is not None:
            left = max(budget.remaining(), 0.05)
            timeout = left if timeout is None else min(timeout, left)
        connection.timeout = timeout

    def _note_rate_limit(self, reply: Reply) -> None:
        if reply.status != 304:
            self.rate_limited_requests += 1
        remaining = _number(reply.headers.get("x-ratelimit-remaining"))
        limit = _number(reply.headers.get("x-ratelimit-limit"))
        reset = _number(reply.headers.get("x-ratelimit-reset"))
        if remaining is not None and limit is not None:
            self.rate_limit = (int(remaining), int(limit), int(reset or 0))

    def _judge(self, reply: Reply, what: str) -> Reply:
        """Return the reply, or raise ``Retryable`` / ``SourceUnavailable``."""
        status = reply.status
        if status < 400 or status in CLIENT_ANSWERS:
            return reply
        if status >= 500:
            raise Retryable(f"{status} {reply.message() or 'server error'}".strip())
        message = reply.message()
        if status == 401:
            raise CredentialsRejected(
                f"GitHub rejected the credentials (401 {message or 'Unauthorized'}) while "
                f"reading {what}: the token is missing, invalid, expired or revoked"
            )
        if status in (403, 429):
            self._rate_limit(reply, message, what)
        raise SourceUnavailable(self.scrub(
            f"GitHub refused to let us read {what} ({status} {message})".rstrip()
        ))

    def rate_limit_wait(self, reply: Reply, message: str) -> tuple[str, float] | None:
        """For a 403/429 that is a rate limit: its kind and the seconds until it lifts;
        None for any other refusal. GitHub's documented order: ``Retry-After`` first;
        then, with no requests remaining, the reset time; then, for a secondary limit,
        at least a minute."""
        headers = reply.headers
        retry_after = _number(headers.get("retry-after"))
        remaining = headers.get("x-ratelimit-remaining")
        if retry_after is not None:
            return "secondary rate limit", max(retry_after, 0.0)
        if remaining is not None and remaining.strip() == "0":
            reset = _number(headers.get("x-ratelimit-reset"))
            return "rate limit exhausted", (max(reset - self._clock(), 0.0) + 1.0
                                            if reset is not None else SECONDARY_LIMIT_WAIT)
        if reply.status == 429 or _is_secondary_limit(message):
            return "secondary rate limit", SECONDARY_LIMIT_WAIT
        return None

    def _rate_limit(self, reply: Reply, message: str, what: str) -> None:
        """Raise ``Retryable`` for a rate limit worth waiting for; return if none.

        GitHub's documented order: ``Retry-After`` first; then, with no requests
        remaining, the reset time; then, for a secondary limit, at least a minute.
        """
        limited = self.rate_limit_wait(reply, message)
        if limited is None:
            return
        kind, wait = limited
        bound = self.max_rate_limit_wait
        if wait > bound:
            raise SourceDown(
                f"GitHub {kind} while reading {what}: the limit lifts in {wait:.0f} s, "
                f"longer than max_rate_limit_wait ({bound:g} s)", retry_at=self._clock() + wait,
            )
        budget = budgets.current()
        if budget is not None and not budget.fits(wait):
            raise SourceDown(
                f"GitHub {kind} while reading {what}: the limit lifts in {wait:.0f} s, "
                f"after this pass's {budget.seconds:g} s time limit", retry_at=self._clock() + wait,
            )
        raise Retryable(f"{reply.status} {kind}", wait)
