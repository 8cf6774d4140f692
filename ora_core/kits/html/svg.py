"""Small charts as inline SVG, drawn from the data: no library, no script, no network.

Each builder returns a ``Chart``: a size and a list of shapes (rectangles, lines, texts, each
with a CSS class and an optional hover title). The ``chart`` macro of ``_base_macros.html``
draws any ``Chart``; every label passes through Jinja's autoescaping like any other text, so a
chart never needs ``|safe``. Colours come from the CSS classes (``base.css``), so a chart follows
the page's theme and a status keeps its colour everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Anchor = Literal["start", "middle", "end"]


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    cls: str = ""
    title: str = ""
    href: str = ""  # a link target (an anchor of the page: ``#step-07``)


@dataclass(frozen=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float
    cls: str = "axis"
    title: str = ""


@dataclass(frozen=True)
class Text:
    x: float
    y: float
    text: str
    anchor: Anchor = "start"
    cls: str = "label"
    title: str = ""


@dataclass
class Chart:
    width: float
    height: float
    title: str  # the chart's accessible name (``<title>`` of the ``<svg>``)
    rects: list[Rect] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)  # (css class, label)


def nice_max(value: float) -> float:
    """The axis end above ``value``: 1, 2, 2.5 or 5 times a power of ten."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * power:
            return step * power
    return 10 * power


def axis(maximum: float, ticks: int = 4, *, whole: bool = False) -> tuple[float, float]:
    """(end, step) of an axis from 0 that holds ``maximum`` in about ``ticks`` round steps;
    ``whole``: counts, whose steps are whole numbers (0, 1, 2 rather than 0, 0.25, 0.5)."""
    step = nice_max(maximum / ticks) if maximum > 0 else 1.0
    if whole:
        step = max(1.0, math.ceil(step))
    return step * max(1, math.ceil(maximum / step - 1e-9)), step


def fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.1f}"
    return f"{value:.2g}"


def hbars(rows: Sequence[tuple[str, Sequence[tuple[float, str, str]]]], *, title: str, unit: str = "",
          width: float = 900, label_width: float = 230, bar_h: float = 12, gap: float = 8,
          series: Sequence[tuple[str, str]] = (), markers: Sequence[Sequence[tuple[float, str]]] = ()) -> Chart:
    """Horizontal bars: one row per label, one bar per value in the row (grouped, side by side
    vertically). ``rows``: (label, [(value, css class, hover title), ...]). ``markers``: per row,
    (value, hover title) ticks drawn across the row (a p95 beside a median)."""
    top, axis_h = 4.0, 22.0
    per_row = max((len(values) for _, values in rows), default=1) * bar_h + gap
    plot_w = width - label_width - 50
    biggest = max([v for _, values in rows for v, _, _ in values]
                  + [v for row in markers for v, _ in row] + [0.0])
    end, step = axis(biggest)
    chart = Chart(width=width, height=top + per_row * len(rows) + axis_h, title=title, legend=list(series))
    for i, (label, values) in enumerate(rows):
        y = top + i * per_row
        chart.texts.append(Text(label_width - 6, y + (per_row - gap) / 2 + 4, _clip(label, int(label_width / 6.3)),
                                "end", title=label))
        for j, (value, cls, hover) in enumerate(values):
            w = plot_w * value / end if end else 0.0
            chart.rects.append(Rect(label_width, y + j * bar_h, max(w, 1.0 if value > 0 else 0.0), bar_h - 2,
                                    cls, hover or f"{label}: {fmt(value)}{unit}"))
        if i < len(markers):
            for value, hover in markers[i]:
                x = label_width + plot_w * value / end
                chart.lines.append(Line(x, y - 1, x, y + per_row - gap + 1, "marker", hover))
        total = values[0][0] if len(values) == 1 else None
        if total is not None:
            chart.texts.append(Text(label_width + plot_w * total / end + 4, y + bar_h - 3,
                                    fmt(total) + unit, cls="value"))
    base = top + per_row * len(rows)
    chart.lines.append(Line(label_width, top, label_width, base))
    for k in range(round(end / step) + 1):
        x = label_width + plot_w * k * step / end
        chart.lines.append(Line(x, base, x, base + 4))
        chart.texts.append(Text(x, base + 16, fmt(k * step) + unit, "middle", "tick"))
    return chart


def columns(buckets: Sequence[tuple[str, Sequence[tuple[float, str, str]]]], *, title: str,
            series: Sequence[tuple[str, str]], width: float = 1100, height: float = 220) -> Chart:
    """Stacked columns: one per bucket (label, [(value, css class, hover title), ...] bottom up)."""
    left, bottom, top = 44.0, 34.0, 8.0
    plot_w, plot_h = width - left - 8, height - bottom - top
    end, step = axis(max((sum(v for v, _, _ in stack) for _, stack in buckets), default=0.0), whole=True)
    chart = Chart(width=width, height=height, title=title, legend=list(series))
    n = max(len(buckets), 1)
    slot = plot_w / n
    bar_w = max(min(slot * 0.8, 40.0), 1.0)
    label_every = max(1, math.ceil(n / 8))
    for i, (label, stack) in enumerate(buckets):
        x = left + i * slot + (slot - bar_w) / 2
        y = top + plot_h
        for value, cls, hover in stack:
            h = plot_h * value / end
            if h <= 0:
                continue
            y -= h
            chart.rects.append(Rect(x, y, bar_w, h, cls, hover))
        if i % label_every == 0:
            chart.texts.append(Text(x + bar_w / 2, top + plot_h + 14, label, "middle", "tick"))
    chart.lines.append(Line(left, top + plot_h, width - 8, top + plot_h))
    for k in range(round(end / step) + 1):
        y = top + plot_h - plot_h * k * step / end
        chart.lines.append(Line(left - 4, y, left, y))
        chart.texts.append(Text(left - 6, y + 4, fmt(k * step), "end", "tick"))
    return chart


@dataclass(frozen=True)
class Span:
    """One bar of a timeline: a lane, a start and a duration (seconds from the first start)."""

    lane: str
    start: float
    duration: float
    label: str
    cls: str
    title: str
    href: str = ""


def timeline(spans: Sequence[Span], lanes: Sequence[str], *, title: str, width: float = 1100,
             lane_h: float = 26, label_width: float = 90) -> Chart:
    """Bars to scale on a time axis, one row per lane (parallel work side by side); a bar too
    narrow for its label keeps it in its hover title."""
    top, axis_h = 4.0, 24.0
    plot_w = width - label_width - 12
    end, step = axis(max((s.start + s.duration for s in spans), default=0.0), ticks=5)
    chart = Chart(width=width, height=top + lane_h * len(lanes) + axis_h, title=title)
    row = {lane: i for i, lane in enumerate(lanes)}
    for lane, i in row.items():
        chart.texts.append(Text(label_width - 6, top + i * lane_h + lane_h / 2 + 4, _clip(lane, 12), "end"))
        if i:
            chart.lines.append(Line(label_width, top + i * lane_h, width - 12, top + i * lane_h, "grid"))
    for s in spans:
        x = label_width + plot_w * s.start / end
        w = max(plot_w * s.duration / end, 2.0)
        y = top + row[s.lane] * lane_h + 3
        chart.rects.append(Rect(x, y, w, lane_h - 6, s.cls, s.title, s.href))
        room = int(w / 6.5)
        if room >= 4:
            chart.texts.append(Text(x + 3, y + lane_h / 2 + 1, _clip(s.label, room), cls="bar-label", title=s.title))
    base = top + lane_h * len(lanes)
    chart.lines.append(Line(label_width, base, width - 12, base))
    for k in range(round(end / step) + 1):
        x = label_width + plot_w * k * step / end
        chart.lines.append(Line(x, base, x, base + 4))
        chart.texts.append(Text(x, base + 16, fmt(k * step) + " s", "middle", "tick"))
    return chart


def _clip(text: str, room: int) -> str:
    return text if len(text) <= room else text[: max(room - 1, 1)] + "…"
