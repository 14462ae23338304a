"""A review as markdown for people. Memory text is data (``prompt``'s rule): subjects
are inline code and facts fenced blocks that nothing inside can close, so a memory
cannot post markdown, mentions or HTML into a review."""

from __future__ import annotations

from collections.abc import Container

from verified_memory.models import Outcome
from verified_memory.prompt import fence, inline, sanitize
from verified_memory.review.findings import Finding, FindingCitation, FindingKind, ReviewReport

__all__ = ["brief_line", "render_finding", "render_markdown", "summary_line"]


def _short(sha: str) -> str:
    return sha[:12]


def _place(text: str, link: str | None) -> str:
    return f"[{inline(text)}]({link})" if link else inline(text)


def _citation_line(c: FindingCitation) -> str:
    check = c.check
    cited = str(check.citation.location)
    outcome = check.outcome
    now = _place(str(check.location), c.link) if check.location is not None else None
    if outcome is Outcome.VALID and now:
        text = f"{now} holds"
    elif outcome is Outcome.RELOCATED and now:
        text = f"{inline(cited)} moved to {now}"
    elif outcome is Outcome.CHANGED and now:
        share = "part" if check.similarity is None else f"{check.similarity:.0%}"
        text = f"{inline(cited)} **changed**: {share} of the cited lines survive at {now}"
    elif c.rewritten:
        text = f"{_place(cited, c.link)} **rewritten**: none of the cited lines survive"
    elif outcome.is_verdict:
        text = (f"{_place(cited, c.link)} **{'changed' if outcome is Outcome.CHANGED else 'gone'}**"
                f": {inline(check.detail or 'no longer there')}")
    else:
        text = f"{_place(cited, c.link)} could not be read: {inline(check.detail or '?')}"
    if c.touched:
        text += " (touched by this change)"
    return f"- {text}"


def render_finding(finding: Finding, *, applied: bool = False, heading: str = "###") -> str:
    """One finding as markdown: the memory (its text quoted as data), its citations as
    links, and what to do."""
    m = finding.memory
    lines = [
        f"{heading} {finding.kind.label}: {inline(sanitize(m.subject))}".rstrip(),
        "",
        f"Memory {inline(m.id)} ({m.status.value}):",
        "",
        fence(m.fact),
        "",
        *(_citation_line(c) for c in finding.citations),
        "",
        finding.advice(applied),
    ]
    return "\n".join(lines)


def summary_line(report: ReviewReport) -> str:
    if not report.has_memories:
        return f"No active memories for {inline(report.repo)}: nothing to review."
    if not report.findings:
        return ("This change touches no code that a memory cites "
                f"({report.files} changed file{'s' if report.files != 1 else ''} looked at).")
    counts = ", ".join(f"{report.count(kind)} {kind.value}" for kind in FindingKind
                       if report.count(kind))
    n = len(report.findings)
    return (f"This change touches code cited by {n} memor{'y' if n == 1 else 'ies'}: "
            f"{counts}.")


def brief_line(finding: Finding) -> str:
    """One line for a finding written out elsewhere (in its inline review comment)."""
    where = finding.comment
    at = f" (see the comment on {inline(where.path)} line {where.line})" if where else ""
    return (f"- **{finding.kind.label}**: {inline(sanitize(finding.memory.subject))}, "
            f"memory {inline(finding.memory.id)}{at}")


def render_markdown(report: ReviewReport, *, heading: str = "##",
                    brief: Container[str] = ()) -> str:
    """The whole review as markdown for people. Findings whose memory id is in ``brief``
    get one line each (their detail is in an inline comment)."""
    what = (f"pull request #{report.pull_request}" if report.pull_request is not None
            else f"{inline(report.base)}...{inline(report.head)}")
    effect = ("memories were refreshed, relocated or invalidated (--apply)" if report.applied
              else "memories were not changed (telemetry only)")
    parts = [
        f"{heading} verified-memory review of {inline(report.repo)}: {what}",
        "",
        summary_line(report),
        "",
        f"Diff from {inline(_short(report.base_commit))} (merge base) to "
        f"{inline(_short(report.head_commit))}; verified at "
        f"{inline(_short(report.verified_at))}; {effect}.",
    ]
    short = [f for f in report.findings if f.memory.id in brief]
    if short:
        parts += ["", *(brief_line(f) for f in short)]
    for finding in report.findings:
        if finding.memory.id not in brief:
            parts += ["", render_finding(finding, applied=report.applied,
                                         heading=heading + "#")]
    if report.updated:
        parts += ["", f"{report.updated} other memor{'y' if report.updated == 1 else 'ies'} "
                      "citing the changed files were verified and brought up to date."]
    for note in report.notes:
        parts += ["", f"_Note: {sanitize(note)}_"]
    return "\n".join(parts) + "\n"
