"""The time limit of a command's verification pass, and what the user is told about it.

Every command that reads code runs under one time budget (``verified_memory.budget``):
``vmem context`` under the context limit (5 s by default), the others under the verify
limit (60 s). While it runs, a long wait (a retry, a rate limit) is announced on stderr;
when it ends, one line on stderr says what could not be verified and why. Rejected
credentials are an error (exit 1), never a context that claims to have been checked.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal

from verified_memory.budget import Budget, time_budget
from verified_memory.errors import CredentialsRejected
from verified_memory.models import Decision
from verified_memory.prompt import sanitize

if TYPE_CHECKING:
    from verified_memory.cli.render import Output
    from verified_memory.models import Verification

__all__ = ["Kind", "bounded", "not_checked_line"]

Kind = Literal["context", "verify"]


@contextmanager
def bounded(out: Output, seconds: float | None) -> Iterator[Budget | None]:
    """Run the block as one pass of at most ``seconds``; raise ``CredentialsRejected``
    after it when the code source refused the credentials (everything in it was then
    left unverified, and saying so in a context would not be enough)."""

    def notice(message: str) -> None:
        out.err.print(f"vmem: {sanitize(message)}", markup=False, highlight=False)

    with time_budget(seconds, notice=notice) as budget:
        yield budget
    if budget is not None and isinstance(budget.down, CredentialsRejected):
        raise budget.down


def not_checked_line(verifications: Sequence[Verification], budget: Budget | None,
                     total: int | None = None) -> str | None:
    """One line on what could not be verified and why (out of ``total`` memories, by
    default as many as given), or None when everything was."""
    unverified = [v for v in verifications if v.decision is Decision.UNVERIFIED]
    if not unverified:
        return None
    why = (budget.reason if budget is not None else None) or unverified[0].reason or "?"
    n, total = len(unverified), len(verifications) if total is None else total
    return (f"vmem: {n} of {total} memor{'y' if total == 1 else 'ies'} could not be "
            f"verified (no verdict: {'it keeps its' if n == 1 else 'they keep their'} "
            f"status): {' '.join(sanitize(why).split())}")
