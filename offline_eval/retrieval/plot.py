"""Recall@k chart of the retriever benchmark as a self-contained SVG.

Uses the report module's :func:`offline_eval.report.svg.line_chart` when it is importable and a
minimal built-in line chart otherwise, so the benchmark never needs matplotlib.
"""

from __future__ import annotations

from html import escape

PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8C6D00", "#000000")


def _minimal_line_chart(series: dict[str, list[tuple[float, float]]], *, title: str, x_label: str,
                        y_label: str, width: int = 640, height: int = 400) -> str:
    """A plain SVG line chart: axes, one polyline with markers per series, a legend."""
    pts = [p for values in series.values() for p in values]
    left, right, top, bottom = 56.0, width - 150.0, 30.0, height - 44.0
    xs = [p[0] for p in pts] or [0.0, 1.0]
    x_lo, x_hi = min(xs), max(xs)
    if x_hi == x_lo:
        x_hi = x_lo + 1.0
    y_lo, y_hi = 0.0, max([1.0] + [p[1] for p in pts])

    def sx(x: float) -> float:
        return left + (x - x_lo) / (x_hi - x_lo) * (right - left)

    def sy(y: float) -> float:
        return bottom - (y - y_lo) / (y_hi - y_lo) * (bottom - top)

    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
           f"viewBox='0 0 {width} {height}' font-family='sans-serif' font-size='12'>",
           f"<title>{escape(title)}</title>",
           f"<rect width='{width}' height='{height}' fill='white'/>",
           f"<text x='{width / 2:.0f}' y='18' text-anchor='middle' font-size='14'>{escape(title)}</text>",
           f"<line x1='{left}' y1='{bottom}' x2='{right}' y2='{bottom}' stroke='#333'/>",
           f"<line x1='{left}' y1='{top}' x2='{left}' y2='{bottom}' stroke='#333'/>"]
    for i in range(6):
        y = y_lo + (y_hi - y_lo) * i / 5
        out.append(f"<text x='{left - 6}' y='{sy(y) + 4:.1f}' text-anchor='end'>{y:.2f}</text>")
    for x in sorted(set(xs)):
        out.append(f"<text x='{sx(x):.1f}' y='{bottom + 16}' text-anchor='middle'>{x:g}</text>")
    out.append(f"<text x='{(left + right) / 2:.0f}' y='{height - 8}' text-anchor='middle'>"
               f"{escape(x_label)}</text>")
    out.append(f"<text x='14' y='{(top + bottom) / 2:.0f}' text-anchor='middle' "
               f"transform='rotate(-90 14 {(top + bottom) / 2:.0f})'>{escape(y_label)}</text>")
    for n, (name, values) in enumerate(series.items()):
        colour = PALETTE[n % len(PALETTE)]
        values = sorted(values)
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in values)
        out.append(f"<polyline fill='none' stroke='{colour}' stroke-width='2' points='{path}'/>")
        out.extend(f"<circle cx='{sx(x):.1f}' cy='{sy(y):.1f}' r='3' fill='{colour}'/>"
                   for x, y in values)
        ly = top + 14 + 16 * n
        out.append(f"<line x1='{right + 10}' y1='{ly - 4}' x2='{right + 28}' y2='{ly - 4}' "
                   f"stroke='{colour}' stroke-width='2'/>")
        out.append(f"<text x='{right + 32}' y='{ly}'>{escape(name)}</text>")
    out.append("</svg>")
    return "\n".join(out)


def recall_chart(series: dict[str, list[tuple[float, float]]], *, metric: str) -> str:
    """SVG of ``metric`` against k, one line per "retriever / chunk size" series."""
    try:
        from offline_eval.report.svg import line_chart
    except ImportError:
        line_chart = _minimal_line_chart
    height = max(400, 260 + 18 * len(series))  # room for the legend when there are many series
    return line_chart(series, title=f"{metric} at k per retriever and chunk size", x_label="k (top-k)",
                      y_label=metric, width=720, height=height)
