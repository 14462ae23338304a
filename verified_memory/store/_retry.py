"""One retry rule for the database stores (Postgres directly, Supabase over REST).

A serialization failure or a deadlock means the database rolled the whole transaction
back: nothing of it was written, so running it again is safe, and usually succeeds once
the other transaction is done. Anything else is an answer, not a hiccup.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["RETRIES", "ROLLED_BACK", "retry_rolled_back"]

T = TypeVar("T")

#: SQLSTATEs of a transaction the database rolled back: serialization_failure,
#: deadlock_detected.
ROLLED_BACK = frozenset({"40001", "40P01"})
RETRIES = 5


def retry_rolled_back(call: Callable[[], T], sqlstate: Callable[[Exception], str | None],
                      *, sleep: Callable[[float], None] = time.sleep) -> T:
    """``call()``, run again while it fails with a rolled-back transaction (``sqlstate``
    reads an exception's code), at most ``RETRIES`` times, waiting 10 ms, 20 ms, ...
    in between. The last failure, and any other exception, propagates as it is."""
    for attempt in range(RETRIES):
        try:
            return call()
        except Exception as exc:
            if sqlstate(exc) in ROLLED_BACK and attempt + 1 < RETRIES:
                sleep(0.01 * 2**attempt)
                continue
            raise
    raise AssertionError("unreachable")  # pragma: no cover
