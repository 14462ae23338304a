"""What the MCP tools answer, as models: each tool's ``outputSchema`` comes from these,
so a client (or an agent framework) knows the shape of ``structuredContent`` before it
calls, and the SDK checks every answer against it.

Every model allows fields it does not name (``extra="allow"``): an answer may grow a
field without breaking a client that validates against an older schema. Needs the
``mcp`` extra (pydantic); only ``mcp_server`` imports it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AppliedOut",
    "CitationOut",
    "CitationReadOut",
    "FeedbackOut",
    "ForgottenOut",
    "MemoryOut",
    "NotVerifiedOut",
    "PendingOut",
    "RecitedOut",
    "ScopeOut",
    "StatsOut",
    "StoredOut",
    "SupersededOut",
    "VerifiedContextOut",
    "VerifiedOut",
    "VerifyCitationsOut",
]


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class CitationOut(_Out):
    path: str = Field(description="File path relative to the repository root.")
    line_start: int = Field(description="First cited line, 1-indexed.")
    line_end: int = Field(description="Last cited line, inclusive.")
    sha: str | None = Field(default=None, description="Commit the lines were read at.")


class MemoryOut(_Out):
    """A memory as stored (its fingerprints are the store's business)."""

    id: str = Field(description="The memory's id (a UUID).")
    repo: str = Field(description="Repository as 'owner/name'.")
    status: str = Field(description="active, pending (waits for approval), invalid, "
                                    "superseded or expired (unused too long).")
    subject: str
    fact: str
    reason: str | None
    category: str | None
    tags: list[str]
    citations: list[CitationOut]
    created_by: str | None
    refreshed_at: str = Field(description="When it was last confirmed (ISO 8601).")
    verification_count: int
    applied_count: int
    supersedes: str | None = Field(description="The memory this one replaced.")
    superseded_by: str | None = Field(description="The memory that replaced this one.")
    invalid_reason: str | None
    verified_ref: str | None = Field(description="Branch it was last judged on (the main "
                                                 "line), or null if never.")
    verified_commit: str | None = Field(description="Commit it was last judged at.")
    success_count: int = Field(default=0, description="Feedback saying applying it helped.")
    failure_count: int = Field(default=0, description="Feedback saying it misled.")
    validated: bool = Field(default=False, description="Applied 3+ times with 90%+ "
                                                       "success: a promotion candidate.")
    poor: bool = Field(default=False, description="Mostly misled (under 50% success after "
                                                  "4 feedbacks): left out of context.")


class StoredOut(MemoryOut):
    """What storing did: the memory stored, or the one it repeats (refreshed instead)."""

    duplicate: bool = Field(description="An active memory already said this about the same "
                                        "code: it is the one returned, refreshed.")
    conflicts: list[str] = Field(description="Active memories citing the same code that say "
                                             "something else: settle them.")
    warnings: list[str] = Field(description="For people, e.g. over the soft limit.")


class PendingOut(_Out):
    repo: str
    pending: list[MemoryOut] = Field(description="Memories waiting for a person's approval.")


class ScopeOut(_Out):
    """Whether the check behind an answer was a verdict (at the main line's tip) or a
    view that changed nothing stored, and why."""

    scope: str = Field(description="verdict, view or dry_run.")
    ref: str
    revision: str
    main_line: str | None
    main_commit: str | None
    applies_verdicts: bool
    why: str = Field(description="One line saying what the check may change, and why.")


class VerifiedOut(_Out):
    id: str
    subject: str
    citations: list[CitationOut] = Field(description="Where the cited code is now.")
    shown_as: str | None = Field(description="Hydration level it was quoted at, or null "
                                             "when the budget left no room for it.")


class NotVerifiedOut(_Out):
    """A memory that did not pass: never to be used here. Its text is not given."""

    id: str
    decision: str = Field(description="invalidate (a citation changed or is missing), "
                                      "unverified (the code could not be read) or expire "
                                      "(unused too long).")
    scope: str = Field(description="verdict: the memory was changed (invalidated); "
                                   "view or dry_run: it does not hold here, nothing changed.")
    change: str | None
    status: str
    reason: str | None
    citations: list[dict[str, Any]] = Field(description="Each citation's outcome.")


class VerifiedContextOut(_Out):
    """Memories verified against the code now: those that hold are quoted in the text
    content; this lists the same split as data."""

    repo: str
    revision: str = Field(description="Commit the memories were verified at.")
    dry_run: bool
    scope: ScopeOut
    verified: list[VerifiedOut] = Field(description="Memories whose citations all hold.")
    not_verified: list[NotVerifiedOut] = Field(description="Memories that must not be used.")
    omitted_for_budget: list[str] = Field(description="Verified memories left out for "
                                                      "lack of room in the budget (ids).")
    tokens: int = Field(description="Estimated tokens of the text content.")
    budget: int


class SupersededOut(_Out):
    superseded: str | None = Field(description=(
        "Id of the memory replaced; null while the correction waits for approval (the "
        "memory it corrects stays active until then)."))
    pending_approval: bool = Field(description=(
        "The correction's category needs a person's approval: it is stored pending and "
        "supersedes the memory it corrects once approved."))
    memory: MemoryOut = Field(description="The corrected memory: active, or pending.")


class RecitedOut(_Out):
    memory: MemoryOut
    standing: str = Field(description="Where it stands on the main line, in one line.")


class AppliedOut(_Out):
    id: str
    applied_count: int
    status: str


class FeedbackOut(_Out):
    memory_id: str
    outcome: str = Field(description="success or failure.")
    note: str | None
    recorded_at: str = Field(description="When it was recorded (ISO 8601).")


class ForgottenOut(_Out):
    id: str
    repo: str
    status: str = Field(description="What the memory was when it was forgotten.")
    forgotten_by: str | None
    forgotten_at: str = Field(description="When (ISO 8601).")
    reason: str


class CitationReadOut(_Out):
    repo: str
    ref: str
    path: str
    line_start: int
    line_end: int
    code: str = Field(description="The cited lines as they are at ref.")


class VerifyCitationsOut(_Out):
    """Outcome of each citation (valid, relocated, changed, missing, unverifiable) and
    the counts; for a memory also its status and the decision a verdict would take."""

    memory_id: str | None = None
    status: str | None = None
    decision: str | None = Field(default=None, description="refresh, invalidate or "
                                                           "unverified (memory_id only).")
    reason: str | None = None
    revision: str = Field(description="Commit the citations were checked at.")
    valid: bool = Field(description="Every citation holds.")
    valid_count: int
    invalid_count: int
    unverifiable_count: int
    citations: list[dict[str, Any]] = Field(description="One entry per citation, in order.")


class StatsOut(_Out):
    repo: str
    total: int
    by_status: dict[str, int]
    events: dict[str, int] = Field(description="Telemetry events by kind.")
    citations: int = Field(description="Citations of active memories.")
    unconfirmed: int = Field(description="Active memories not judged on the main line yet.")
    validated: int = Field(default=0, description="Active promotion candidates.")
    poor: int = Field(default=0, description="Active poor performers (left out of context).")
    forgotten: int = Field(default=0, description=(
        "Memories forgotten on request: tombstones, in no status and not in total."))
    invalidation_rate: float | None
