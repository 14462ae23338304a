"""The dashboard as one HTML page: its own stylesheet and script inline, charts as SVG,
every number in a table too. The same page is served by ``vmem dashboard`` and written
by ``vmem dashboard --out``: nothing is fetched, so it opens offline and in a CI
artifact, and everything but switching charts works with JavaScript off.

Stored text (subjects, facts, reasons, paths, event details) is escaped and its invisible
characters shown (``prompt.sanitize``): a memory is data, never markup. A
Content-Security-Policy allows only this page's own stylesheet and script (by hash).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from html import escape
from importlib import resources
from typing import Any

from verified_memory.dashboard.charts import (
    NONE,
    bars,
    percent,
    rate_chart,
    relocation_chart,
    stacked_bar,
)
from verified_memory.dashboard.data import Dashboard, MemoryList, Period, RepoDashboard
from verified_memory.dashboard.detail import MemoryDetail
from verified_memory.models import TelemetryEvent
from verified_memory.prompt import sanitize, sanitize_line

__all__ = ["anchor", "content_security_policy", "describe", "render_detail_page", "render_page"]

_PLAIN_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
_HEX = re.compile(r"^[0-9a-f]{40}$")


@lru_cache(maxsize=2)
def _asset(name: str) -> str:
    return resources.files("verified_memory.dashboard").joinpath("static", name).read_text(
        encoding="utf-8")


def _hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def content_security_policy() -> str:
    """Nothing but this page's own stylesheet and script: no request leaves the page."""
    return (f"default-src 'none'; style-src '{_hash(_asset('dashboard.css'))}'; "
            f"script-src '{_hash(_asset('dashboard.js'))}'; img-src data:; "
            "base-uri 'none'; form-action 'none'")


def anchor(memory_id: str) -> str:
    """The id of a memory's detail in the page: its own id when that is plain, else a
    hash of it (ids imported from elsewhere may hold any character)."""
    if _PLAIN_ID.match(memory_id):
        return f"memory-{memory_id}"
    return f"memory-{hashlib.sha256(memory_id.encode()).hexdigest()[:24]}"


def _text(value: object) -> str:
    """Stored text on one line, escaped."""
    return escape(sanitize_line(str(value)))


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value else NONE


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{content_security_policy()}">\n'
        '<link rel="icon" href="data:,">\n'
        f"<title>{escape(title)}</title>\n<style>{_asset('dashboard.css')}</style>\n"
        f"</head>\n<body>\n{body}\n<script>{_asset('dashboard.js')}</script>\n</body>\n</html>\n"
    )


def render_page(dashboard: Dashboard, details: Sequence[MemoryDetail]) -> str:
    """The whole dashboard: an overview, a section per repository, and the detail of
    every memory the sections list."""
    meta = (f"Last {dashboard.days} days ({dashboard.since.isoformat()} to "
            f"{dashboard.until.isoformat()}, UTC) · generated {_when(dashboard.generated_at)}")
    if dashboard.where:
        meta += f" · {_text(dashboard.where)}"
    parts = [
        '<header><h1>verified-memory dashboard</h1>',
        f'<p class="meta">{meta}</p></header>',
        "<main>",
        _overview(dashboard),
        *(_repo_section(repo) for repo in dashboard.repos),
        _details_section(details),
        "</main>",
        '<footer><p>Verdicts only: views and dry runs (<code>checked</code> events) are never '
        "counted as verifications. Days are UTC days.</p></footer>",
    ]
    return _page("verified-memory dashboard", "\n".join(parts))


def render_detail_page(detail: MemoryDetail) -> str:
    """One memory's detail on a page of its own (``/memory/ID`` on the live server)."""
    body = (f'<header><h1>{_text(detail.memory.subject)}</h1><p class="meta">'
            f'{_text(detail.memory.repo)} · <a href="/">back to the dashboard</a></p></header>'
            f"<main>{_detail(detail, open_=True)}</main>")
    return _page(f"{sanitize_line(detail.memory.subject)} · verified-memory", body)


# --------------------------------------------------------------------------- sections


def _slug(repo: str) -> str:
    return "repo-" + re.sub(r"[^A-Za-z0-9_-]", "-", repo)


def _overview(dashboard: Dashboard) -> str:
    if not dashboard.repos:
        return ('<section id="overview"><h2>Overview</h2><p class="empty">No memories in this '
                "store yet: <code>vmem store</code> adds one.</p></section>")
    head = ("Repository", "Memories", "Active", "Invalid", "Pending", "Verifications",
            "Invalidation rate", "Applied", "Feedback: success")
    rows = []
    for repo in dashboard.repos:
        total = repo.total
        rows.append([f'<a href="#{_slug(repo.repo)}">{_text(repo.repo)}</a>',
                     repo.memories, repo.statuses["active"], repo.statuses["invalid"],
                     repo.statuses["pending"], total.verifications, percent(total.rate),
                     repo.funnel.applied, _share(repo.funnel.successes,
                                                 repo.funnel.successes + repo.funnel.failures)])
    return ('<section id="overview"><h2>Overview</h2>'
            + _table(head, rows, numeric_from=1, cls="overview") + "</section>")


def _share(part: int, whole: int) -> str:
    return f"{part} of {whole}" if whole else NONE


def _repo_section(repo: RepoDashboard) -> str:
    slug = _slug(repo.repo)
    total = repo.total
    cards = [("Memories", f"{repo.memories}"), ("Active", f"{repo.statuses['active']}"),
             ("Verifications", f"{total.verifications}"),
             ("Invalidation rate", percent(total.rate)),
             ("Applied", f"{repo.funnel.applied}"),
             ("Pending approval", f"{repo.statuses['pending']}")]
    parts = [
        f'<section class="repo" id="{slug}" data-repo="{escape(repo.repo, quote=True)}">',
        f"<h2>{_text(repo.repo)}</h2>",
        '<dl class="cards">' + "".join(
            f'<div class="card" data-key="{escape(k.lower().replace(" ", "-"))}"><dt>{k}</dt>'
            f"<dd>{v}</dd></div>" for k, v in cards) + "</dl>",
        "<h3>Memories by status</h3>",
        stacked_bar(f"{slug}-status", f"Memories of {repo.repo} by status",
                    list(repo.statuses.items())),
        '<div class="row">',
        _table(("Status", "Memories"), [[k, v] for k, v in repo.statuses.items()],
               numeric_from=1, cls="statuses"),
        _table(("Quality", "Memories"),
               [["validated (promotion candidates)", repo.quality["validated"]],
                ["poor performers (left out of context)", repo.quality["poor"]],
                ["promoted into a rules file", repo.quality["promoted"]],
                ["never applied (active)", repo.quality["never_applied"]],
                ["failing feedback (active)", repo.quality["failing"]]],
               numeric_from=1, cls="quality"),
        "</div>",
        "<h3>Invalidation rate</h3>",
        '<p class="note">Share of verdicts at the main line\'s tip that found a memory broken; '
        "bars are the verifications behind each point.</p>",
        _periods(slug, repo.daily, repo.weekly, rate_chart),
        _period_tables(repo),
        "<h3>Outcome funnel</h3>",
        '<p class="note">Events in the window: memories handed to agents, verdicts on them, '
        "uses, and what feedback said about the uses.</p>",
        '<div class="row">',
        bars(f"{slug}-funnel", f"Outcome funnel of {repo.repo}", repo.funnel.stages(), "funnel"),
        _table(("Stage", "Events"), [list(s) for s in repo.funnel.stages()], numeric_from=1,
               cls="funnel"),
        "</div>",
        "<h3>Relocations and invalidations</h3>",
        '<p class="note">Citations followed to code that moved, beside memories invalidated '
        "because their code changed or vanished.</p>",
        _periods(f"{slug}-moves", repo.daily, repo.weekly, relocation_chart),
        "<h3>Files that break memories</h3>",
        '<p class="note">Citations a verdict found changed or missing, by file and by '
        "directory.</p>",
        bars(f"{slug}-files", f"Files of {repo.repo} by broken citations",
             [(f.path, f.breaks) for f in repo.files], "files"),
        '<div class="row">',
        _table(("File", "Broken citations"), [[_text(f.path), f.breaks] for f in repo.files],
               numeric_from=1, cls="files", empty="No citation broke in this window."),
        _table(("Directory", "Broken citations"),
               [[_text(d.path), d.breaks] for d in repo.directories], numeric_from=1,
               cls="directories", empty="No citation broke in this window."),
        "</div>",
        "<h3>Needs attention</h3>",
        *(_memory_list(slug, listing) for listing in repo.lists),
        "</section>",
    ]
    return "\n".join(parts)


def _periods(slug: str, daily: Sequence[Period], weekly: Sequence[Period], chart: Any) -> str:
    """The chart per day and per week; the script shows one at a time."""
    return ('<div class="periods">'
            f'<figure class="period" data-label="per day">{chart(f"{slug}-daily", daily, "day")}'
            "<figcaption>per day</figcaption></figure>"
            f'<figure class="period" data-label="per week">'
            f'{chart(f"{slug}-weekly", weekly, "week")}<figcaption>per week</figcaption></figure>'
            "</div>")


def _period_tables(repo: RepoDashboard) -> str:
    head = ("From", "Verifications", "Valid", "Invalid", "Invalidation rate", "Invalidated",
            "Relocated")

    def rows(periods: Iterable[Period]) -> list[list[object]]:
        return [[p.start.isoformat(), p.verifications, p.verified_valid, p.verified_invalid,
                 percent(p.rate), p.invalidated, p.relocated] for p in periods]

    return ('<details class="numbers"><summary>Numbers per week</summary>'
            + _table(head, rows(repo.weekly), numeric_from=1, cls="weekly") + "</details>"
            '<details class="numbers"><summary>Numbers per day</summary>'
            + _table(head, rows(repo.daily), numeric_from=1, cls="daily") + "</details>")


def _memory_list(slug: str, listing: MemoryList) -> str:
    head = ("Memory", "Status", "Category", "Stored", "Last used", "Applied", "Feedback")
    rows = [[f'<a href="#{anchor(m.id)}">{_text(m.subject)}</a>', m.status,
             _text(m.category or NONE), _when(m.created_at), _when(m.last_used_at),
             m.applied_count, f"{m.success_count} ✓ {m.failure_count} ✗"]
            for m in listing.rows]
    shown = (f"showing {len(listing.rows)} of {listing.total}" if listing.total > len(listing.rows)
             else f"{listing.total}")
    return (f'<div class="attention" id="{slug}-{listing.key}" data-total="{listing.total}">'
            f"<h4>{escape(listing.title)} <span class=\"count\">({shown})</span></h4>"
            f'<p class="note">{escape(listing.note)}</p>'
            + _table(head, rows, numeric_from=5, cls="memories", empty="None.") + "</div>")


def _details_section(details: Sequence[MemoryDetail]) -> str:
    if not details:
        return ""
    return ('<section id="memories"><h2>Memories listed above</h2>'
            '<p class="note">Each with its citations, its history (the memories it superseded '
            "or was superseded by) and its audit trail.</p>"
            + "".join(_detail(d) for d in details) + "</section>")


def _detail(detail: MemoryDetail, *, open_: bool = False) -> str:
    m = detail.memory
    facts: list[tuple[str, str]] = [
        ("Fact", f'<span class="fact">{escape(sanitize(m.fact))}</span>'),
        ("Repository", _text(m.repo)),
        ("Id", f"<code>{_text(m.id)}</code>"),
        ("Status", f'<span class="status {m.status.value}">{m.status.value}</span>'
         + (f" · {_text(m.invalid_reason)}" if m.invalid_reason else "")),
    ]
    optional = (("Reason", m.reason), ("Category", m.category),
                ("Tags", ", ".join(m.tags) or None), ("Stored by", m.created_by),
                ("Promoted into", m.promoted_to))
    facts += [(k, _text(v)) for k, v in optional if v]
    facts += [
        ("Stored", _when(m.created_at)), ("Refreshed", _when(m.refreshed_at)),
        ("Last used", _when(m.used_at)),
        ("Verified", f"{m.verification_count} times"
         + (f" · last on {_text(m.verified_ref)} at <code>{_text((m.verified_commit or '')[:12])}"
            "</code>" if m.verified_ref else " · never judged on the main line")),
        ("Applied", f"{m.applied_count} times · feedback {m.success_count} ✓ "
                    f"{m.failure_count} ✗"),
    ]
    citations = _table(("File", "Lines", "Commit", "Anchor"), [
        [_text(c.path), f"{c.line_start}-{c.line_end}",
         f"<code>{_text((c.sha or '')[:12])}</code>",
         _text(c.fingerprint.anchor.name) if c.fingerprint.anchor else NONE]
        for c in m.citations], cls="citations")
    history = "".join(
        f'<li><a href="#{anchor(h.id)}">{_text(h.subject)}</a> '
        f'<span class="status {h.status.value}">{h.status.value}</span>'
        f"{' (this memory)' if h.id == m.id else ''}</li>" for h in detail.history)
    notes = (f'<p class="note">{detail.earlier} earlier events not shown.</p>'
             if detail.earlier else "")
    if detail.archived:
        notes += (f'<p class="note">{detail.archived} of these events were archived by '
                  "<code>vmem db compact</code>; they are part of the trail, as in "
                  f"<code>vmem log {_text(m.id)}</code>.</p>")
    trail = _table(("When", "Event", "By", "Detail"), [
        [_when(e.at), f'<span class="event {e.kind.value}">{e.kind.value}</span>',
         _text(e.actor or NONE), _text(describe(e))] for e in detail.trail],
        cls="trail", empty="No events.")
    return (f'<details class="memory" id="{anchor(m.id)}"{" open" if open_ else ""}>'
            f'<summary><span class="status {m.status.value}">{m.status.value}</span> '
            f"{_text(m.subject)}</summary>"
            '<dl class="facts">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
            + "</dl><h4>Citations</h4>" + citations
            + f'<h4>History</h4><ol class="history">{history}</ol>'
            + '<h4>Audit trail</h4><p class="note">Retrievals are counted in the funnel, not '
            "listed here.</p>" + notes + trail + "</details>")


def describe(event: TelemetryEvent) -> str:
    """An event's detail on one line: its outcomes counted, commits shortened, the rest
    as ``key: value``."""
    parts = []
    for key, value in event.detail.items():
        if key == "outcomes" and isinstance(value, list):
            parts.append(_outcomes(value))
        elif key == "pass_requests" or value is None or value == "":
            continue
        elif isinstance(value, str | int | float | bool):
            text = value[:12] if isinstance(value, str) and _HEX.match(value) else value
            parts.append(f"{key}: {text}")
    line = "; ".join(parts)
    return line if len(line) <= 300 else line[:299] + "…"


def _outcomes(outcomes: list[Any]) -> str:
    counted: dict[str, int] = {}
    broken = []
    for o in outcomes:
        if isinstance(o, Mapping):
            kind = str(o.get("outcome"))
            counted[kind] = counted.get(kind, 0) + 1
            if kind in ("changed", "missing") and o.get("cited"):
                broken.append(f"{o['cited']} {kind}")
    summary = ", ".join(f"{n} {kind}" for kind, n in counted.items())
    return f"citations: {summary}" + (f" ({', '.join(broken)})" if broken else "")


def _table(head: Sequence[str], rows: Sequence[Sequence[object]], *, numeric_from: int = 99,
           cls: str = "", empty: str = "Nothing yet.") -> str:
    """A table; cells are trusted markup here (callers escape stored text)."""
    if not rows:
        return f'<p class="empty {cls}">{escape(empty)}</p>'
    th = "".join(f'<th scope="col"{_num(i, numeric_from)}>{escape(h)}</th>'
                 for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f"<td{_num(i, numeric_from)}>{cell}</td>"
                                    for i, cell in enumerate(row)) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _num(index: int, numeric_from: int) -> str:
    return ' class="num"' if index >= numeric_from else ""

