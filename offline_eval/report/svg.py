"""Self-contained SVG charts (no scripts, no fonts, no external references).

The output of every function here is a standalone ``<svg>`` element that can be written to a
``.svg`` file or inlined into an HTML page. All text is XML-escaped, so series names and titles
coming from untrusted data are safe to embed.
"""

from __future__ import annotations

import math
from html import escape
from typing import Iterable, Sequence

__all__ = ["PALETTE", "line_chart", "histogram", "nice_ticks"]

# Colour-blind friendly palette (Okabe & Ito), darkened yellow for contrast on white.
PALETTE: tuple[str, ...] = (
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8C6D00", "#000000",
)

_FONT = "font-family='system-ui,-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif'"


def _esc(text: object) -> str:
    return escape(str(text), quote=True)


def _fmt(value: float) -> str:
    """Short tick label: integers without decimals, otherwise up to 3 significant decimals."""
    if value == 0:
        return "0"
    if abs(value) >= 1000 or float(value).is_integer():
        return f"{value:.0f}" if float(value).is_integer() else f"{value:.3g}"
    return f"{value:.3g}"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick positions covering [lo, hi] (the "nice numbers" algorithm)."""
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0, 1.0]
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = magnitude
    for mult in (1, 2, 2.5, 5, 10):
        step = mult * magnitude
        if step >= raw:
            break
    start = math.floor(lo / step) * step
    ticks: list[float] = []
    value = start
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    if ticks[-1] < hi - step * 1e-9:
        ticks.append(round(value, 12))
    return ticks


def _finite_points(points: Iterable[Sequence[float]]) -> list[tuple[float, float]]:
    out = []
    for pt in points:
        try:
            x, y = float(pt[0]), float(pt[1])
        except (TypeError, ValueError, IndexError):
            continue
        if math.isfinite(x) and math.isfinite(y):
            out.append((x, y))
    return out


def _open_svg(width: int, height: int, title: str) -> list[str]:
    return [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' role='img' aria-label='{_esc(title)}' {_FONT} font-size='12'>",
        f"<title>{_esc(title)}</title>",
        f"<rect x='0' y='0' width='{width}' height='{height}' fill='#ffffff'/>",
        f"<text x='{width / 2:.1f}' y='20' text-anchor='middle' font-size='14' font-weight='600' "
        f"fill='#222'>{_esc(title)}</text>",
    ]


def _axes(parts: list[str], *, left: float, top: float, right: float, bottom: float,
          xticks: Sequence[float], yticks: Sequence[float], sx, sy, x_label: str, y_label: str,
          width: int, height: int, x_tick_labels: Sequence[str] | None = None) -> None:
    """Grid lines, tick labels, axis lines and axis titles."""
    for yt in yticks:
        y = sy(yt)
        parts.append(f"<line x1='{left:.1f}' y1='{y:.1f}' x2='{right:.1f}' y2='{y:.1f}' "
                     "stroke='#e5e5e5' stroke-width='1'/>")
        parts.append(f"<text x='{left - 6:.1f}' y='{y + 4:.1f}' text-anchor='end' fill='#555'>"
                     f"{_esc(_fmt(yt))}</text>")
    for i, xt in enumerate(xticks):
        x = sx(xt)
        label = x_tick_labels[i] if x_tick_labels is not None else _fmt(xt)
        parts.append(f"<line x1='{x:.1f}' y1='{bottom:.1f}' x2='{x:.1f}' y2='{bottom + 4:.1f}' "
                     "stroke='#888' stroke-width='1'/>")
        parts.append(f"<text x='{x:.1f}' y='{bottom + 17:.1f}' text-anchor='middle' fill='#555'>"
                     f"{_esc(label)}</text>")
    parts.append(f"<line x1='{left:.1f}' y1='{bottom:.1f}' x2='{right:.1f}' y2='{bottom:.1f}' "
                 "stroke='#888' stroke-width='1'/>")
    parts.append(f"<line x1='{left:.1f}' y1='{top:.1f}' x2='{left:.1f}' y2='{bottom:.1f}' "
                 "stroke='#888' stroke-width='1'/>")
    parts.append(f"<text x='{(left + right) / 2:.1f}' y='{height - 8:.1f}' text-anchor='middle' "
                 f"fill='#333'>{_esc(x_label)}</text>")
    cy = (top + bottom) / 2
    parts.append(f"<text x='14' y='{cy:.1f}' text-anchor='middle' fill='#333' "
                 f"transform='rotate(-90 14 {cy:.1f})'>{_esc(y_label)}</text>")


def line_chart(series: dict[str, list[tuple[float, float]]], *, title: str, x_label: str,
               y_label: str, width: int = 640, height: int = 400) -> str:
    """A line chart with one polyline (and point markers) per named series.

    ``series`` maps a legend label to its ``(x, y)`` points; points are drawn in x order and
    non-finite points are dropped. Returns a self-contained ``<svg>`` string. With no
    drawable points the chart shows "no data" rather than failing.
    """
    width, height = max(int(width), 160), max(int(height), 120)
    cleaned = {str(name): sorted(_finite_points(pts)) for name, pts in series.items()}
    legend_rows = len(cleaned)
    legend_h = 16 * legend_rows + 8 if legend_rows else 0
    left, right, top = 58.0, width - 16.0, 34.0
    bottom = height - 40.0 - legend_h
    if bottom - top < 40:
        bottom = top + 40
    parts = _open_svg(width, height, title)
    all_pts = [p for pts in cleaned.values() for p in pts]
    if not all_pts:
        parts.append(f"<text x='{width / 2:.1f}' y='{height / 2:.1f}' text-anchor='middle' "
                     "fill='#888'>no data</text></svg>")
        return "".join(parts)
    xs = [p[0] for p in all_pts]
    ys = [p[1] for p in all_pts]
    xticks = nice_ticks(min(xs), max(xs))
    yticks = nice_ticks(min(ys), max(ys))
    x0, x1 = xticks[0], xticks[-1]
    y0, y1 = yticks[0], yticks[-1]

    def sx(v: float) -> float:
        return left + (v - x0) / (x1 - x0) * (right - left)

    def sy(v: float) -> float:
        return bottom - (v - y0) / (y1 - y0) * (bottom - top)

    _axes(parts, left=left, top=top, right=right, bottom=bottom, xticks=xticks, yticks=yticks,
          sx=sx, sy=sy, x_label=x_label, y_label=y_label, width=width, height=height - legend_h)
    for i, (name, pts) in enumerate(cleaned.items()):
        colour = PALETTE[i % len(PALETTE)]
        if len(pts) > 1:
            coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
            parts.append(f"<polyline points='{coords}' fill='none' stroke='{colour}' "
                         "stroke-width='2' stroke-linejoin='round'/>")
        for x, y in pts:
            parts.append(f"<circle cx='{sx(x):.1f}' cy='{sy(y):.1f}' r='3' fill='{colour}'>"
                         f"<title>{_esc(name)}: ({_esc(_fmt(x))}, {_esc(_fmt(y))})</title></circle>")
    ly = height - legend_h + 4
    for i, name in enumerate(cleaned):
        colour = PALETTE[i % len(PALETTE)]
        y = ly + 16 * i
        parts.append(f"<rect x='{left:.1f}' y='{y:.1f}' width='14' height='10' fill='{colour}'/>")
        parts.append(f"<text x='{left + 20:.1f}' y='{y + 9:.1f}' fill='#333'>{_esc(name)}</text>")
    parts.append("</svg>")
    return "".join(parts)


def histogram(values: Iterable[float | None], *, bins: int = 10, title: str, x_label: str,
              width: int = 360, height: int = 200, value_range: tuple[float, float] | None = None,
              color: str = PALETTE[0]) -> str:
    """A histogram of ``values`` (None and non-finite values are ignored) as a standalone SVG.

    ``value_range`` fixes the binned interval (defaults to [0, 1] when every value lies there,
    which suits metric scores, else to the data's min and max). The last bin is closed.
    """
    width, height = max(int(width), 160), max(int(height), 120)
    bins = max(int(bins), 1)
    data = []
    for v in values:
        if v is None:
            continue
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f):
            data.append(f)
    parts = _open_svg(width, height, title)
    if not data:
        parts.append(f"<text x='{width / 2:.1f}' y='{height / 2:.1f}' text-anchor='middle' "
                     "fill='#888'>no scored values</text></svg>")
        return "".join(parts)
    if value_range is not None:
        lo, hi = float(value_range[0]), float(value_range[1])
    elif min(data) >= 0.0 and max(data) <= 1.0:
        lo, hi = 0.0, 1.0
    else:
        lo, hi = min(data), max(data)
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    counts = [0] * bins
    step = (hi - lo) / bins
    for v in data:
        if v < lo or v > hi:
            continue
        idx = min(int((v - lo) / step), bins - 1)
        counts[idx] += 1
    left, right, top, bottom = 40.0, width - 12.0, 32.0, height - 36.0
    yticks = nice_ticks(0, max(max(counts), 1), count=4)
    yticks = [t for t in yticks if float(t).is_integer()] or [0.0, 1.0]
    ymax = yticks[-1]

    def sx(v: float) -> float:
        return left + (v - lo) / (hi - lo) * (right - left)

    def sy(v: float) -> float:
        return bottom - v / ymax * (bottom - top)

    xticks = nice_ticks(lo, hi, count=5)
    xticks = [t for t in xticks if lo - 1e-9 <= t <= hi + 1e-9]
    _axes(parts, left=left, top=top, right=right, bottom=bottom, xticks=xticks, yticks=yticks,
          sx=sx, sy=sy, x_label=x_label, y_label="samples", width=width, height=height)
    bar_w = (right - left) / bins
    for i, count in enumerate(counts):
        if not count:
            continue
        x = left + i * bar_w
        y = sy(count)
        b_lo, b_hi = lo + i * step, lo + (i + 1) * step
        parts.append(f"<rect x='{x + 1:.1f}' y='{y:.1f}' width='{max(bar_w - 2, 1):.1f}' "
                     f"height='{bottom - y:.1f}' fill='{_esc(color)}' fill-opacity='0.85'>"
                     f"<title>{_esc(_fmt(b_lo))}–{_esc(_fmt(b_hi))}: {count}</title></rect>")
    parts.append("</svg>")
    return "".join(parts)
