"""The memory-level decision: refresh, invalidate, or leave unverified."""

from __future__ import annotations

from collections.abc import Sequence

from verified_memory.models import CitationCheck, Decision, Outcome

__all__ = ["decide"]


def decide(checks: Sequence[CitationCheck]) -> tuple[Decision, str | None]:
    """Every citation holds -> refresh; any changed or missing -> invalidate, with a
    reason naming those citations; otherwise (something unreadable) -> no verdict.

    A verdict beats an unreadable citation: code that was read and found changed is
    evidence, whatever else could not be read."""
    broken = [c for c in checks if c.outcome.is_verdict]
    if broken:
        return Decision.INVALIDATE, "; ".join(_describe(c) for c in broken)
    unreadable = [c for c in checks if c.outcome is Outcome.UNVERIFIABLE]
    if unreadable:
        return Decision.UNVERIFIED, "; ".join(_describe(c) for c in unreadable)
    return Decision.REFRESH, None


def _describe(check: CitationCheck) -> str:
    text = f"{check.citation.location} {check.outcome.value}"
    if check.outcome is Outcome.CHANGED and check.similarity is not None:
        text += f" ({check.similarity:.0%} similar at {check.location})"
    elif check.detail:
        text += f" ({check.detail})"
    return text
