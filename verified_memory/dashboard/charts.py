"""Charts as inline SVG, drawn on the server: they show with JavaScript off, in a file
opened offline, and in a CI artifact. Each chart names its numbers in ``<title>``
tooltips; the page puts a table of the same numbers beside it.

No style attributes (the page's Content-Security-Policy allows none): colours come from
classes the stylesheet styles, and from nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from verified_memory.dashboard.data import Period

__all__ = ["NONE", "bars", "percent", "rate_chart", "relocation_chart", "stacked_bar"]

#: What a cell shows for "no value" (no verdict, never used).
NONE = "\N{EN DASH}"

WIDTH = 720
LEFT, RIGHT, TOP, BOTTOM = 48, 56, 16, 28


def percent(rate: float | None) -> str:
    """A rate for people: ``12.5 %``, ``0 %``, or an en dash for no verdicts."""
    if rate is None:
        return NONE
    value = rate * 100
    return f"{value:.0f} %" if value in (0, 100) or value >= 10 else f"{value:.1f} %"


def _nice(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^n at or above ``value`` (1 for nothing)."""
    if value <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(value))
    return next(m * magnitude for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * magnitude >= value)


def _svg(chart_id: str, title: str, height: int, body: list[str], kind: str) -> str:
    return (f'<svg class="chart {kind}" id="{chart_id}" viewBox="0 0 {WIDTH} {height}" '
            f'role="img" aria-labelledby="{chart_id}-title" preserveAspectRatio="xMinYMin meet">'
            f'<title id="{chart_id}-title">{escape(title)}</title>{"".join(body)}</svg>')


def _empty(chart_id: str, title: str, message: str) -> str:
    return _svg(chart_id, title, 60, [
        f'<text class="empty" x="{WIDTH / 2:g}" y="34" text-anchor="middle">'
        f"{escape(message)}</text>"], "empty-chart")


def rate_chart(chart_id: str, periods: Sequence[Period], unit: str) -> str:
    """The invalidation rate per period (a line, a dot per period with verdicts) over
    the number of verifications behind it (bars, right-hand axis)."""
    title = f"Invalidation rate per {unit}, with the verifications behind each point"
    if not any(p.verifications for p in periods):
        return _empty(chart_id, title, "No verdicts in this window yet.")
    height = 220
    plot_w, plot_h = WIDTH - LEFT - RIGHT, height - TOP - BOTTOM
    step = plot_w / len(periods)
    top_rate = _nice(max(p.rate or 0.0 for p in periods) * 100) / 100
    top_count = _nice(max(p.verifications for p in periods))
    body = _axes(plot_h, height, [(percent(top_rate * share), share) for share in (0, 0.5, 1)],
                 [(f"{top_count * share:g}", share) for share in (0, 0.5, 1)])
    points = []
    for i, p in enumerate(periods):
        x = LEFT + step * i
        bar = plot_h * p.verifications / top_count
        tip = (f"{p.start.isoformat()}: {percent(p.rate)} invalid of {p.verifications} "
               f"verification{'s' if p.verifications != 1 else ''}")
        if p.verifications:
            body.append(f'<rect class="volume" x="{x + step * 0.15:.1f}" '
                        f'y="{TOP + plot_h - bar:.1f}" width="{max(step * 0.7, 1):.1f}" '
                        f'height="{bar:.1f}"><title>{escape(tip)}</title></rect>')
        if p.rate is not None:
            points.append((x + step / 2, TOP + plot_h - plot_h * p.rate / top_rate, tip))
    if len(points) > 1:
        path = " ".join(f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}"
                        for i, (x, y, _) in enumerate(points))
        body.append(f'<path class="rate-line" d="{path}"/>')
    body += [f'<circle class="rate-dot" cx="{x:.1f}" cy="{y:.1f}" r="3">'
             f"<title>{escape(tip)}</title></circle>" for x, y, tip in points]
    body += _x_labels(periods, step, height)
    return _svg(chart_id, title, height, body, "rate-chart")


def relocation_chart(chart_id: str, periods: Sequence[Period], unit: str) -> str:
    """Citations relocated (code that moved, followed) beside memories invalidated (code
    that changed), per period."""
    title = f"Citations relocated and memories invalidated per {unit}"
    if not any(p.relocated or p.invalidated for p in periods):
        return _empty(chart_id, title, "Nothing relocated or invalidated in this window.")
    height = 200
    plot_w, plot_h = WIDTH - LEFT - RIGHT, height - TOP - BOTTOM
    step = plot_w / len(periods)
    top = _nice(max(max(p.relocated, p.invalidated) for p in periods))
    body = _axes(plot_h, height, [(f"{top * share:g}", share) for share in (0, 0.5, 1)], [])
    for i, p in enumerate(periods):
        for j, (cls, value, what) in enumerate((("relocated", p.relocated, "relocated"),
                                                ("invalidated", p.invalidated, "invalidated"))):
            if not value:
                continue
            h = plot_h * value / top
            x = LEFT + step * i + step * (0.1 + 0.4 * j)
            tip = f"{p.start.isoformat()}: {value} {what}"
            body.append(f'<rect class="{cls}" x="{x:.1f}" y="{TOP + plot_h - h:.1f}" '
                        f'width="{max(step * 0.4, 1):.1f}" height="{h:.1f}">'
                        f"<title>{escape(tip)}</title></rect>")
    body += _x_labels(periods, step, height)
    return _svg(chart_id, title, height, body, "relocation-chart")


def bars(chart_id: str, title: str, items: Sequence[tuple[str, int]], kind: str) -> str:
    """Horizontal bars, one per (label, value), longest scaled to the width."""
    if not any(value for _, value in items):
        return _empty(chart_id, title, "Nothing to show in this window.")
    row, label_w = 26, 220
    height = row * len(items) + 8
    top = max(value for _, value in items)
    body = []
    for i, (label, value) in enumerate(items):
        y = 4 + row * i
        w = (WIDTH - label_w - 70) * value / top
        body.append(f'<text class="label" x="{label_w - 8}" y="{y + 17}" text-anchor="end">'
                    f"{escape(_clip(label, 34))}</text>")
        body.append(f'<rect class="bar" x="{label_w}" y="{y + 4}" width="{max(w, 1):.1f}" '
                    f'height="{row - 8}"><title>{escape(label)}: {value}</title></rect>')
        body.append(f'<text class="value" x="{label_w + w + 6:.1f}" y="{y + 17}">{value}</text>')
    return _svg(chart_id, title, height, body, kind)


def stacked_bar(chart_id: str, title: str, parts: Sequence[tuple[str, int]]) -> str:
    """One bar split into ``parts`` (label, count): memories by status."""
    total = sum(value for _, value in parts)
    if not total:
        return _empty(chart_id, title, "No memories yet.")
    height, x, body = 64, 0.0, []
    legend_x = 0.0
    for label, value in parts:
        w = WIDTH * value / total
        if value:
            body.append(f'<rect class="part {escape(label)}" x="{x:.1f}" y="4" '
                        f'width="{w:.1f}" height="26"><title>{escape(label)}: {value}</title>'
                        "</rect>")
        body.append(f'<rect class="part {escape(label)}" x="{legend_x:.1f}" y="42" '
                    'width="12" height="12"/>')
        body.append(f'<text class="legend" x="{legend_x + 16:.1f}" y="53">'
                    f"{escape(label)} {value}</text>")
        legend_x += 16 + 8.5 * len(f"{label} {value}") + 20
        x += w
    return _svg(chart_id, title, height, body, "status-chart")


def _axes(plot_h: float, height: int, left: list[tuple[str, float]],
          right: list[tuple[str, float]]) -> list[str]:
    body = [f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_h}" x2="{WIDTH - RIGHT}" '
            f'y2="{TOP + plot_h}"/>']
    for text, share in left:
        y = TOP + plot_h * (1 - share)
        body.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" '
                    f'y2="{y:.1f}"/>')
        body.append(f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                    f"{escape(text)}</text>")
    for text, share in right:
        y = TOP + plot_h * (1 - share)
        body.append(f'<text class="tick volume-tick" x="{WIDTH - RIGHT + 6}" y="{y + 4:.1f}">'
                    f"{escape(text)}</text>")
    return body


def _x_labels(periods: Sequence[Period], step: float, height: int) -> list[str]:
    """The first, middle and last period's dates under the axis."""
    picks = sorted({0, len(periods) // 2, len(periods) - 1})
    anchors = {0: "start", len(periods) - 1: "end"}
    return [f'<text class="tick" x="{LEFT + step * i + step / 2:.1f}" y="{height - 8}" '
            f'text-anchor="{anchors.get(i, "middle")}">{periods[i].start.isoformat()}</text>'
            for i in picks]


def _clip(text: str, width: int) -> str:
    """``text`` at most ``width`` characters, cut in the middle (paths keep both ends)."""
    if len(text) <= width:
        return text
    half = (width - 1) // 2
    return f"{text[:half]}…{text[-(width - 1 - half):]}"
