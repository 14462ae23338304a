"""Faults in bounded time: one time budget per verification pass, and a circuit breaker.

A hook or an MCP call that hangs for minutes is a failure even when no memory is
harmed. So a pass does not get a time limit per request (a request is retried, a rate
limit is waited out, and each memory asks again) but one for the whole pass:

- ``time_budget(seconds)`` opens a pass's budget for the code that runs inside it (a
  context variable: the entry points open one around a pass, 5 s for ``vmem context``
  and the MCP tools, 60 s for ``vmem verify`` and the review bot, see ``config``).
  Inside it the verifier checks the deadline before each citation, and the GitHub
  HTTP layer bounds every request's timeout, retry and rate-limit wait by what is
  left. Once it is spent, reads raise ``BudgetSpent`` at once, which the verifier
  turns into ``unverifiable`` for the rest of the pass: never a verdict.
- ``CircuitBreaker``: once a source is clearly down (a request failed every retry,
  the credentials were rejected, a rate limit is far from its reset; or ``threshold``
  reads in a row failed) every read fails at once with the failure that opened it,
  until ``cooldown`` seconds passed (or the rate limit's reset), when one read is let
  through again. A pass over a thousand memories against a dead GitHub therefore
  costs the few requests of the first failure, not a few per memory.

Each budget remembers why reads were cut (``reason``), for the line that tells the
user what was not checked and why, and passes notices of long waits (a retry, a rate
limit) to ``notice``, for the progress line on stderr.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from verified_memory.errors import BudgetSpent, SourceDown, SourceUnavailable

__all__ = ["Budget", "CircuitBreaker", "current", "monotonic", "time_budget"]

Clock = Callable[[], float]
Notice = Callable[[str], None]

#: Waits shorter than this are not worth a progress line.
NOTICE_AFTER = 1.0

_CURRENT: ContextVar[Budget | None] = ContextVar("verified_memory_budget", default=None)


def monotonic() -> float:
    """The default clock of a budget (looked up when a budget starts, so that a test
    can run a whole command on a clock of its own)."""
    return time.monotonic()


class Budget:
    """The time one verification pass may take, and what went wrong within it."""

    def __init__(self, seconds: float, *, clock: Clock | None = None,
                 notice: Notice | None = None) -> None:
        if not seconds > 0:
            raise ValueError(f"a time budget must be positive, got {seconds!r}")
        self.seconds = float(seconds)
        self._clock = clock or monotonic
        self._notice = notice
        self.started = self._clock()
        #: The first source-wide failure of the pass (``SourceDown``), if any.
        self.down: SourceDown | None = None
        #: The latest trouble met while reading (a failed attempt being retried).
        self.trouble: str | None = None
        self.spent = False  # a read was refused because the time ran out

    def __repr__(self) -> str:
        return f"Budget({self.seconds:g} s, {self.remaining():.1f} s left)"

    def elapsed(self) -> float:
        return self._clock() - self.started

    def remaining(self) -> float:
        return max(0.0, self.seconds - self.elapsed())

    def check(self) -> None:
        """Raise ``BudgetSpent`` when the time is up (or a read gave up for lack of it)."""
        if self.spent or self.remaining() <= 0:
            self.spent = True
            raise BudgetSpent(self._spent_message())

    def fits(self, seconds: float) -> bool:
        """Whether a wait of ``seconds`` ends before the deadline."""
        return seconds < self.remaining()

    def give_up(self, why: str, wait: float) -> BudgetSpent:
        """The error for a read that would have to wait past the deadline (the caller
        raises it); from now on every read of the pass fails at once."""
        self.spent = True
        self.trouble = f"{why}; the next try was {wait:.0f} s away"
        return BudgetSpent(self._spent_message())

    def record(self, exc: SourceUnavailable) -> None:
        """Remember a source-wide failure (the first one is the reason given)."""
        if isinstance(exc, SourceDown) and self.down is None:
            self.down = exc

    def note(self, message: str, wait: float) -> None:
        """A wait of ``wait`` seconds is about to start: tell the user when it is long."""
        self.trouble = message
        if self._notice is not None and wait >= NOTICE_AFTER:
            left = self.remaining()
            self._notice(f"{message}; retrying in {wait:.0f} s ({left:.0f} s of the "
                         f"{self.seconds:g} s time limit left)")

    @property
    def reason(self) -> str | None:
        """Why reads were cut short in this pass, or None when none was."""
        if self.down is not None:
            return str(self.down)
        if self.spent:
            return self._spent_message()
        return None

    def _spent_message(self) -> str:
        said = f" (last trouble: {self.trouble})" if self.trouble else ""
        return f"not checked: this pass's {self.seconds:g} s time limit ran out{said}"


def current() -> Budget | None:
    """The budget of the pass running in this context, if any."""
    return _CURRENT.get()


@contextmanager
def time_budget(seconds: float | None, *, clock: Clock | None = None,
                notice: Notice | None = None) -> Iterator[Budget | None]:
    """Run the block under a budget of ``seconds`` (None: no time limit).

    Inside a budget that leaves less time than ``seconds``, the outer one stays in
    force: a nested pass cannot extend the deadline of the pass around it."""
    outer = current()
    if seconds is None or (outer is not None and outer.remaining() <= seconds):
        yield outer
        return
    budget = Budget(seconds, clock=clock, notice=notice or (outer._notice if outer else None))
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        _CURRENT.reset(token)


class CircuitBreaker:
    """Fails reads at once while a source is down; see the module's docstring.

    ``clock`` is wall time (epoch seconds), because a rate limit's reset is given as
    one. Thread-safe.
    """

    def __init__(self, *, clock: Clock = time.time, threshold: int = 3,
                 cooldown: float = 30.0) -> None:
        self._clock = clock
        self.threshold = threshold
        self.cooldown = cooldown
        self._failures = 0
        self._error: SourceDown | None = None
        self._until = 0.0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"CircuitBreaker({state}, {self._failures} failures in a row)"

    @property
    def is_open(self) -> bool:
        return self._error is not None and self._clock() < self._until

    def check(self) -> None:
        """Raise the failure that opened the breaker while it is open."""
        with self._lock:
            error, until = self._error, self._until
        if error is not None and self._clock() < until:
            raise type(error)(f"{error} (not asked again for {until - self._clock():.0f} s: "
                              "it failed just before)", retry_at=error.retry_at)

    def success(self) -> None:
        with self._lock:
            self._failures = 0
            self._error = None

    def failure(self, exc: SourceUnavailable) -> None:
        """Count a failed read; a ``SourceDown`` opens the breaker at once."""
        with self._lock:
            self._failures += 1
            if isinstance(exc, SourceDown):
                error: SourceDown = exc
            elif self._failures >= self.threshold:
                error = SourceDown(f"{exc} ({self._failures} reads in a row failed)")
            else:
                return
            now = self._clock()
            retry_at = error.retry_at
            self._error = error
            self._until = retry_at if retry_at is not None and retry_at > now else (
                now + self.cooldown)
