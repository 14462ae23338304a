"""How the CLI shows things to people (rich) and to machines (JSON).

Stored text is data: what a writer put in a subject, a fact, a path or a reason reaches
the terminal as plain text (``rich.text.Text``, never markup), so ``[/x]`` cannot crash
a listing, ``app/[slug]/page.tsx`` prints whole and ``[link=...]`` stays text; control
and invisible characters are shown as ``<U+...>`` (``prompt.sanitize``), in JSON too.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from verified_memory.audit import short_ids
from verified_memory.models import CitationCheck, Decision, Memory, Outcome, RepoStats, place
from verified_memory.prompt import reveal, sanitize, sanitize_line

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

__all__ = ["Output"]

_OUTCOME_STYLE = {
    Outcome.VALID: "green",
    Outcome.RELOCATED: "cyan",
    Outcome.CHANGED: "red",
    Outcome.MISSING: "red",
    Outcome.UNVERIFIABLE: "yellow",
}
_DECISION_STYLE = {Decision.REFRESH: "green", Decision.INVALIDATE: "red",
                   Decision.UNVERIFIED: "yellow", Decision.EXPIRE: "dim"}


class Output:
    """Writes results either as JSON (``--json``) or as tables and text for people."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    # rich is imported when something is first printed through it: a command that
    # prints JSON, or nothing, starts without it.
    @cached_property
    def out(self) -> Console:
        from rich.console import Console

        return Console(soft_wrap=True, highlight=False)

    @cached_property
    def err(self) -> Console:
        from rich.console import Console

        return Console(stderr=True, highlight=False, soft_wrap=True)  # a line, unfolded

    def json(self, data: Any) -> None:
        sys.stdout.write(json.dumps(reveal(data), indent=2, ensure_ascii=False, default=str)
                         + "\n")

    def done(self, memory: Memory, message: str) -> None:
        """The memory a command changed, as JSON; or one line saying what was done."""
        if self.as_json:
            self.json(memory.to_dict())
        else:
            self.out.print(_plain(message))

    def note(self, text: str) -> None:
        """A line for people (on stderr when the output is JSON, to keep stdout clean)."""
        (self.err if self.as_json else self.out).print(_plain(text))

    def memories(self, memories: Sequence[Memory], *, title: str,
                 when: Literal["refreshed", "created"] = "refreshed") -> None:
        """A table of memories; ``when`` is the time shown, the one they are listed by
        (a file's memories: newest created first)."""
        if self.as_json:
            self.json([m.to_dict() for m in memories])
            return
        if not memories:
            self.out.print(_plain(f"{title}: none"))
            return
        from rich.table import Table

        table = Table(title=_plain(title), title_justify="left")
        # Ids are copied: never folded; short (any unique start is taken back: audit.py).
        table.add_column("id", no_wrap=True)
        short = short_ids([m.id for m in memories])
        for column in ("subject", "status", "citations", when):
            table.add_column(column, overflow="fold")
        for m in memories:
            at = m.created_at if when == "created" else m.refreshed_at
            table.add_row(_plain(short[m.id]), _plain(m.subject), m.status.value,
                          _plain("\n".join(str(c.location) for c in m.citations)),
                          at.strftime("%Y-%m-%d %H:%M"))
        self.out.print(table)

    def memory(self, m: Memory, *, standing: str | None = None,
               conflicts: Sequence[str] = ()) -> None:
        if self.as_json:
            fields: dict[str, Any] = {"validated": m.validated, "poor": m.poor,
                                      "conflicts": list(conflicts)}
            if standing:
                fields["standing"] = standing
            if m.stale_rule:
                fields["stale_rule"] = m.stale_rule
            self.json({**m.to_dict(), **fields})
            return
        from rich.text import Text

        self.out.print(Text.assemble((sanitize(m.subject), "bold"), f"  ({sanitize(m.id)})"))
        self.out.print(_plain(f"status: {m.status.value}"
                              + (f" - {m.invalid_reason}" if m.invalid_reason else "")))
        self.out.print(_plain(m.fact))
        if m.reason:
            self.out.print(_plain(f"why: {m.reason}"))
        for c in m.citations:
            pin = f" @ {c.sha[:12]}" if c.sha else ""
            anchor = f"  [{c.fingerprint.anchor.name}]" if c.fingerprint.anchor else ""
            self.out.print(_plain(f"  cites {c.location}{pin}{anchor}"))
        extra = [f"repo {m.repo}", f"created {m.created_at:%Y-%m-%d %H:%M} by {m.created_by}",
                 f"verified {m.verification_count}x", f"applied {m.applied_count}x"]
        if m.supersedes:
            extra.append(f"supersedes {m.supersedes}")
        if m.superseded_by:
            extra.append(f"superseded by {m.superseded_by}")
        self.out.print(_plain(", ".join(extra)), style="dim")
        if standing:
            self.out.print(_plain(f"main line: {standing}"))
        quality = [f"category {m.category}" if m.category else "no category"]
        if m.feedback_count:
            quality.append(f"{m.success_count} of {m.feedback_count} uses helped")
        if m.validated:
            quality.append("validated (a promotion candidate)")
        if m.poor:
            quality.append("poor performer (left out of context)")
        if m.stale_rule:
            quality.append(f"promoted into {m.stale_rule}, where its rule is stale now (the "
                           f"memory is {m.status.value}): take the rule out with `vmem "
                           f"promote {m.id[:8]} --remove`")
        elif m.promoted_to:
            quality.append(f"promoted into {m.promoted_to}")
        self.out.print(_plain("quality: " + ", ".join(quality)))
        if conflicts:
            self.out.print(_plain("possible conflict with: " + ", ".join(conflicts)))

    def checks(self, rows: Sequence[tuple[str, str, CitationCheck]], *,
               everything: bool = False) -> None:
        """A pass's citations: the count of each outcome, then one line per citation that
        did not simply hold (moved, changed, missing, unverifiable), or per citation with
        ``everything``.

        Plain aligned columns written straight to the terminal, not a rich table: a
        table lays out every row before printing (about 1 ms a row), so listing 10,000
        unchanged citations took twenty times as long as checking them."""
        counts = Counter(check.outcome for _, _, check in rows)
        found = ", ".join(f"{counts[o]:,} {o.value}" for o in Outcome if counts[o])
        self.out.print(_plain(f"{len(rows):,} citations checked: {found or 'none'}"))
        listed = rows if everything else [r for r in rows if r[2].outcome is not Outcome.VALID]
        if listed:
            self._columns(listed)
        if len(listed) < len(rows):
            self.out.print(_plain(f"{len(rows) - len(listed):,} valid citations not listed "
                                  "(--all lists every citation)"), style="dim")

    def _columns(self, rows: Sequence[tuple[str, str, CitationCheck]]) -> None:
        cells = [(_cell(memory_id[:8]), decision,
                  _cell(place(c.path, c.line_start, c.line_end)), check.outcome,
                  _cell(place(now.path, now.line_start, now.line_end)) if now else "-",
                  _cell(check.detail))
                 for memory_id, decision, check in rows
                 for c, now in ((check.citation, check.location),)]
        header = ("memory", "decision", "citation", "outcome", "now at", "detail")
        widths = [max(len(header[i]), *(len(str(c[i])) for c in cells)) for i in range(5)]
        # The outcome's colour, when the terminal shows colours: padded first, then styled.
        styled = {o: self._styled(o.value.ljust(widths[3]), _OUTCOME_STYLE[o]) for o in Outcome}
        out = self.out.file
        out.write("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=False))
                  + "  " + header[5] + "\n")
        out.write("".join(
            f"{m.ljust(widths[0])}  {d.ljust(widths[1])}  {c.ljust(widths[2])}  "
            f"{styled[o]}  {now.ljust(widths[4])}  {detail}\n"
            for m, d, c, o, now, detail in cells))
        out.flush()

    def _styled(self, text: str, style: str) -> str:
        """``text`` as the console prints it in ``style`` (plain without colours)."""
        if not self.out.is_terminal or self.out.no_color:
            return text
        from rich.text import Text

        with self.out.capture() as captured:
            self.out.print(Text(text, style=style), end="")
        return captured.get()

    def stats(self, s: RepoStats) -> None:
        if self.as_json:
            self.json(s.to_dict())
            return
        from rich.table import Table

        table = Table(title=_plain(f"{s.repo}: {s.total} memories, {s.citations} active "
                                   "citations"), title_justify="left")
        table.add_column("what")
        table.add_column("count", justify="right")
        for status, n in s.by_status.items():
            table.add_row(_plain(f"status {status}"), str(n))
        table.add_row("forgotten (tombstones: in no status)", str(s.forgotten))
        for kind, n in sorted(s.events.items()):
            table.add_row(_plain(f"event {kind}"), str(n))
        table.add_row("active, not judged on the main line yet", str(s.unconfirmed))
        table.add_row("validated (promotion candidates)", str(s.validated))
        table.add_row("poor performers (left out of context)", str(s.poor))
        rate = s.invalidation_rate
        table.add_row("invalidation rate", "-" if rate is None else f"{rate:.1%}")
        self.out.print(table)
        if s.unconfirmed:
            self.out.print(
                f"{s.unconfirmed} active memor{'y was' if s.unconfirmed == 1 else 'ies were'} "
                "stored on a branch (judged once merged), re-cited, or stored since the last "
                "verification at the main line's tip; `vmem show ID` says which.", markup=False)

    @staticmethod
    def decision_style(decision: Decision) -> str:
        return _DECISION_STYLE[decision]


def _cell(text: str) -> str:
    """Stored text as one cell of a line: ``sanitize_line``, skipped for the plain text
    most cells are (printable, single spaces)."""
    if text.isprintable() and "  " not in text and text.strip(" ") == text:
        return text
    return sanitize_line(text)


def _plain(text: str) -> Text:
    """Stored (or partly stored) text for the terminal: never markup, nothing invisible."""
    from rich.text import Text

    return Text(sanitize(text))
