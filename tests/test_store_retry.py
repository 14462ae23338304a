"""The database stores' one retry rule: a transaction the database rolled back is run
again; anything else is an answer."""

from __future__ import annotations

import pytest

from verified_memory.store._retry import RETRIES, retry_rolled_back


class Coded(Exception):
    def __init__(self, code: str | None) -> None:
        super().__init__(code)
        self.code = code


def run(failures: list[str | None]) -> tuple[object, list[float]]:
    """Call something that fails with ``failures`` codes first, then answers 42."""
    waits: list[float] = []
    left = list(failures)

    def call() -> int:
        if left:
            raise Coded(left.pop(0))
        return 42

    return retry_rolled_back(call, lambda exc: getattr(exc, "code", None),
                             sleep=waits.append), waits


def test_a_deadlock_or_serialization_failure_is_run_again() -> None:
    assert run(["40P01", "40001"]) == (42, [0.01, 0.02])


def test_any_other_failure_is_raised_at_once() -> None:
    with pytest.raises(Coded, match="23505"):
        run(["23505"])
    with pytest.raises(Coded):
        run([None])


def test_retries_stop_and_the_last_failure_propagates() -> None:
    with pytest.raises(Coded, match="40001"):
        run(["40001"] * RETRIES)
    assert run(["40001"] * (RETRIES - 1))[0] == 42
