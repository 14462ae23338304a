"""What the dashboard shows, read from the store's views (``store/views.py``) and shaped
per repository: the same numbers whatever the store, since every store has the views.

A few queries for the whole store (quality, attention, events and breaks per day over
the window, last use), then four short listings per repository; nothing is read per
event or per memory. Pure reads: a dashboard hands no memory to an agent, so it writes
no telemetry (no ``retrieved``) and never moves a number it shows.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from verified_memory.errors import ValidationError
from verified_memory.models import EventKind, Status, utcnow
from verified_memory.quality import DEFAULT_EXPIRE_DAYS
from verified_memory.store.views import ViewQuery

__all__ = [
    "SOON_DAYS",
    "Dashboard",
    "FileBreaks",
    "Funnel",
    "MemoryList",
    "MemoryRow",
    "Period",
    "ReadView",
    "RepoDashboard",
    "collect",
]

ReadView = Callable[[ViewQuery], list[dict[str, Any]]]

#: "Expiring soon": an active memory that expires (goes unused long enough) within a week.
SOON_DAYS = 7
MAX_DAYS = 3660


@dataclass(frozen=True, slots=True)
class Period:
    """Verdicts over one day or one week (``start`` is its first day)."""

    start: date
    verified_valid: int = 0
    verified_invalid: int = 0
    invalidated: int = 0  # memories invalidated: by a verdict or by a person
    relocated: int = 0  # citations followed to where their code moved

    @property
    def verifications(self) -> int:
        """Verdicts on memories: the number behind the rate."""
        return self.verified_valid + self.verified_invalid

    @property
    def rate(self) -> float | None:
        """Share of verdicts that found a memory broken (None: no verdict)."""
        return self.verified_invalid / self.verifications if self.verifications else None

    def __add__(self, other: Period) -> Period:
        return Period(min(self.start, other.start),
                      self.verified_valid + other.verified_valid,
                      self.verified_invalid + other.verified_invalid,
                      self.invalidated + other.invalidated, self.relocated + other.relocated)

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start.isoformat(), "verified_valid": self.verified_valid,
                "verified_invalid": self.verified_invalid, "invalidated": self.invalidated,
                "relocated": self.relocated, "verifications": self.verifications,
                "invalidation_rate": self.rate}


@dataclass(frozen=True, slots=True)
class Funnel:
    """Events over the window, stage by stage: memories handed to agents, verdicts on
    them, uses, and what feedback said about the uses."""

    retrieved: int = 0
    verified_valid: int = 0
    verified_invalid: int = 0
    applied: int = 0
    successes: int = 0
    failures: int = 0

    def stages(self) -> list[tuple[str, int]]:
        """(label, events) per stage, in funnel order."""
        return [(label, getattr(self, name)) for name, label in _STAGES]

    def to_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name, _ in _STAGES}


_STAGES = (("retrieved", "retrieved"), ("verified_valid", "verified valid"),
           ("verified_invalid", "verified invalid"), ("applied", "applied"),
           ("successes", "feedback: success"), ("failures", "feedback: failure"))


@dataclass(frozen=True, slots=True)
class FileBreaks:
    """A file (or directory) and how many citations of it verdicts found broken."""

    path: str
    breaks: int


@dataclass(frozen=True, slots=True)
class MemoryRow:
    """A memory as a listing shows it (a row of ``agent_memory_summary``)."""

    id: str
    subject: str
    status: str
    category: str | None
    created_at: datetime
    last_used_at: datetime
    applied_count: int
    success_count: int
    failure_count: int
    invalid_reason: str | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> MemoryRow:
        return cls(row["id"], row["subject"], row["status"], row["category"],
                   row["created_at"], row["last_used_at"], row["applied_count"],
                   row["success_count"], row["failure_count"], row["invalid_reason"])

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "created_at": self.created_at.isoformat(),
                "last_used_at": self.last_used_at.isoformat()}


@dataclass(frozen=True, slots=True)
class MemoryList:
    """Memories that need someone's attention: ``total`` of them, the first ``rows``."""

    key: str
    title: str
    note: str
    total: int
    rows: tuple[MemoryRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "note": self.note, "total": self.total,
                "memories": [r.to_dict() for r in self.rows]}


@dataclass(frozen=True, slots=True)
class RepoDashboard:
    """One repository: its memories now, and its telemetry over the window."""

    repo: str
    statuses: Mapping[str, int]  # every status, in Status order
    quality: Mapping[str, int]  # validated, poor, promoted, never_applied, failing
    daily: tuple[Period, ...]  # every day of the window, oldest first
    weekly: tuple[Period, ...]  # every week (from Monday) the window touches
    funnel: Funnel
    files: tuple[FileBreaks, ...]  # most broken first
    directories: tuple[FileBreaks, ...]
    lists: tuple[MemoryList, ...]

    @property
    def total(self) -> Period:
        """The window's verdicts together."""
        return sum(self.daily[1:], self.daily[0]) if self.daily else Period(date.min)

    @property
    def memories(self) -> int:
        return sum(self.statuses.values())

    def to_dict(self) -> dict[str, Any]:
        total = self.total
        return {
            "repo": self.repo, "memories": self.memories, "by_status": dict(self.statuses),
            "quality": dict(self.quality), "verifications": total.verifications,
            "invalidation_rate": total.rate, "relocated": total.relocated,
            "invalidated": total.invalidated, "funnel": self.funnel.to_dict(),
            "daily": [p.to_dict() for p in self.daily],
            "weekly": [p.to_dict() for p in self.weekly],
            "files": [{"path": f.path, "breaks": f.breaks} for f in self.files],
            "directories": [{"path": d.path, "breaks": d.breaks} for d in self.directories],
            "lists": {m.key: m.to_dict() for m in self.lists},
        }


@dataclass(frozen=True, slots=True)
class Dashboard:
    """Every repository asked for, over the window of ``days`` days ending ``until``."""

    generated_at: datetime
    since: date
    until: date
    expire_days: int
    repos: tuple[RepoDashboard, ...]
    where: str = ""  # the store, as people would recognise it (no secrets)

    @property
    def days(self) -> int:
        return (self.until - self.since).days + 1

    def to_dict(self) -> dict[str, Any]:
        return {"generated_at": self.generated_at.isoformat(), "since": self.since.isoformat(),
                "until": self.until.isoformat(), "days": self.days,
                "expire_days": self.expire_days, "store": self.where,
                "repos": [r.to_dict() for r in self.repos]}


def collect(read: ReadView, *, repos: Sequence[str] | None = None, days: int = 90,
            now: datetime | None = None, expire_days: int = DEFAULT_EXPIRE_DAYS,
            top: int = 10, list_limit: int = 10, where: str = "") -> Dashboard:
    """The dashboard of ``repos`` (None: every repository with memories) over the last
    ``days`` UTC days, read through ``read`` (a store's or service's ``read_view``)."""
    if not 1 <= days <= MAX_DAYS:
        raise ValidationError(f"days must be between 1 and {MAX_DAYS}, got {days}")
    if top < 1 or list_limit < 0:
        raise ValidationError("top must be at least 1 and the list limit at least 0")
    now = (now or utcnow()).astimezone(UTC)
    until = now.date()
    since = until - timedelta(days=days - 1)
    one = repos[0] if repos is not None and len(repos) == 1 else None

    def rows(view: str, *where: Any) -> list[dict[str, Any]]:
        return read(ViewQuery(view, repo=one, where=tuple(where)))

    quality = {r["repo"]: r for r in rows("agent_memory_quality")}
    attention = {r["repo"]: r for r in rows("agent_memory_attention")}
    chosen = sorted(quality) if repos is None else list(dict.fromkeys(repos))
    # The days the charts show, no later ones (a writer's clock ahead, a ``now`` passed):
    # the funnel and the files count what the chart counts.
    window = (("day", ">=", since), ("day", "<=", until))
    events = _by_repo(rows("agent_memory_events_daily", *window))
    breaks = _by_repo(rows("agent_memory_breaks_daily", *window))
    # Expiring soon: last used on or before this day (day granularity, as the view).
    due = until - timedelta(days=expire_days - SOON_DAYS)
    expiring = _by_repo(rows("agent_memory_last_use_daily", ("day", "<=", due))
                        if expire_days > 0 else [])
    built = []
    for repo in chosen:
        q, a = quality.get(repo, {}), attention.get(repo, {})
        daily = _daily(events.get(repo, []), since, until)
        counts = _counts(events.get(repo, []))
        built.append(RepoDashboard(
            repo=repo,
            statuses={s.value: int(q.get(s.value, 0)) for s in Status},
            quality={"validated": int(q.get("validated", 0)), "poor": int(q.get("poor", 0)),
                     "promoted": int(q.get("promoted", 0)),
                     "never_applied": int(a.get("never_applied", 0)),
                     "failing": int(a.get("failing", 0))},
            daily=daily,
            weekly=_weekly(daily),
            funnel=Funnel(counts[EventKind.RETRIEVED][0], counts[EventKind.VERIFIED_VALID][0],
                          counts[EventKind.VERIFIED_INVALID][0], counts[EventKind.APPLIED][0],
                          counts[EventKind.FEEDBACK][1], counts[EventKind.FEEDBACK][2]),
            files=_top(((r["path"], r["breaks"]) for r in breaks.get(repo, [])), top),
            directories=_top(((_directory(r["path"]), r["breaks"])
                              for r in breaks.get(repo, [])), top),
            lists=_lists(read, repo, q, a, expiring.get(repo, []), due, expire_days,
                         list_limit),
        ))
    return Dashboard(generated_at=now, since=since, until=until, expire_days=expire_days,
                     repos=tuple(built), where=where)


def _by_repo(rows: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[row["repo"]].append(row)
    return grouped


def _counts(rows: Iterable[Mapping[str, Any]]) -> Mapping[str, tuple[int, int, int]]:
    """kind -> (events, successes, failures) over the window."""
    totals: dict[str, tuple[int, int, int]] = defaultdict(lambda: (0, 0, 0))
    for r in rows:
        events, successes, failures = totals[r["kind"]]
        totals[r["kind"]] = (events + r["events"], successes + r["successes"],
                             failures + r["failures"])
    return totals


_PERIOD_KINDS = {EventKind.VERIFIED_VALID.value: "verified_valid",
                 EventKind.VERIFIED_INVALID.value: "verified_invalid",
                 EventKind.INVALIDATED.value: "invalidated",
                 EventKind.RELOCATED.value: "relocated"}


def _daily(rows: Iterable[Mapping[str, Any]], since: date, until: date) -> tuple[Period, ...]:
    """Every day from ``since`` to ``until``, a day without verdicts at zero."""
    per_day: dict[date, dict[str, int]] = defaultdict(dict)
    for r in rows:
        field_name = _PERIOD_KINDS.get(r["kind"])
        if field_name is not None:
            per_day[r["day"]][field_name] = r["events"]
    days = (until - since).days + 1
    return tuple(Period(day, **per_day.get(day, {}))
                 for day in (since + timedelta(days=n) for n in range(days)))


def _weekly(daily: Sequence[Period]) -> tuple[Period, ...]:
    """The days summed by week, each week starting on its Monday (the first week of the
    window may start later: its first day is the window's)."""
    weeks: dict[date, Period] = {}
    for day in daily:
        monday = day.start - timedelta(days=day.start.weekday())
        weeks[monday] = weeks[monday] + day if monday in weeks else day
    return tuple(weeks.values())


def _directory(path: str) -> str:
    parent = posixpath.dirname(path)
    return f"{parent}/" if parent else "(top level)"


def _top(pairs: Iterable[tuple[str, int]], top: int) -> tuple[FileBreaks, ...]:
    totals: dict[str, int] = defaultdict(int)
    for path, breaks in pairs:
        totals[path] += breaks
    ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:top]
    return tuple(FileBreaks(path, breaks) for path, breaks in ranked)


def _lists(read: ReadView, repo: str, quality: Mapping[str, Any],
           attention: Mapping[str, Any], expiring: Sequence[Mapping[str, Any]], due: date,
           expire_days: int, limit: int) -> tuple[MemoryList, ...]:
    """The four listings of memories that need someone: each a count (from the views'
    counts) and its first ``limit`` rows (from agent_memory_summary)."""
    active: tuple[Any, ...] = ("status", "=", Status.ACTIVE.value)

    def listing(*where: Any, order: tuple[str, ...]) -> tuple[MemoryRow, ...]:
        if limit == 0:
            return ()
        found = read(ViewQuery("agent_memory_summary", repo=repo, where=(*where,),
                               order=order, limit=limit))
        return tuple(MemoryRow.from_row(r) for r in found)

    lists = [
        MemoryList("never_applied", "Never applied",
                   "Active memories no agent has used yet, oldest first.",
                   int(attention.get("never_applied", 0)),
                   listing(active, ("applied_count", "=", 0), order=("created_at",))),
        MemoryList("failing", "Failing feedback",
                   "Active memories whose use was reported as not helping, most failures "
                   "first.", int(attention.get("failing", 0)),
                   listing(active, ("failure_count", ">", 0),
                           order=("-failure_count", "success_count"))),
        MemoryList("pending", "Pending approval",
                   "Memories of a category that waits for a person's approval "
                   "(vmem approve / vmem reject), oldest first.",
                   int(quality.get("pending", 0)),
                   listing(("status", "=", Status.PENDING.value), order=("created_at",))),
    ]
    if expire_days > 0:
        # Last used before the day after ``due``: the days the count above summed.
        cutoff = datetime.combine(due + timedelta(days=1), time(), tzinfo=UTC)
        lists.append(MemoryList(
            "expiring", "Expiring soon",
            f"Active memories unused for {expire_days} days expire at the next verification; "
            f"these do within {SOON_DAYS} days unless used (least recently used first).",
            sum(int(r["memories"]) for r in expiring),
            listing(active, ("last_used_at", "<", cutoff), order=("last_used_at",))))
    return tuple(lists)
