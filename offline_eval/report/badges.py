"""Score badges of the HTML reports: a score coloured by how good it is, and a mean with its interval as a
tiny inline SVG. The run report, its conversations section and ``compare`` draw scores with these."""

from __future__ import annotations

import math
from typing import Any

from offline_eval.report._run import Scale, e, fmt_num

__all__ = ["pill", "ci_bar"]

_UNIT = Scale()


def pill(value: float | None, reason: str | None = None, *, scale: Scale = _UNIT) -> str:
    """A score badge coloured from red (the worst of the metric's ``scale``) to green (its best), as the
    run records the metric (:func:`~offline_eval.report._run.scale_of`); grey with the reason if unscored."""
    if value is None:
        tip = f" title='{e(reason)}'" if reason else ""
        return f"<span class='pill na'{tip}>n/a</span>"
    hue = round(scale.goodness(value) * 120)
    return (f"<span class='pill' style='background:hsl({hue},62%,86%);color:hsl({hue},70%,22%)'>"
            f"{fmt_num(value)}</span>")


def ci_bar(mean: Any, ci: Any, *, width: int = 140, scale: Scale = _UNIT) -> str:
    """A tiny inline SVG showing the mean and its interval on the metric's range (``scale``)."""
    if not isinstance(mean, (int, float)) or not (isinstance(ci, (list, tuple)) and len(ci) == 2):
        return ""
    try:
        a, b, m = float(ci[0]), float(ci[1]), float(mean)
    except (TypeError, ValueError):
        return ""
    if not all(math.isfinite(x) for x in (a, b, m)):
        return ""
    lo, hi = min(scale.low, a, m), max(scale.high, b, m)

    def sx(v: float) -> float:
        return 4 + (v - lo) / (hi - lo) * (width - 8)

    return (f"<svg class='ci-bar' width='{width}' height='14' viewBox='0 0 {width} 14' aria-hidden='true'>"
            f"<line x1='4' y1='7' x2='{width - 4}' y2='7' stroke='#d9dee5' stroke-width='2'/>"
            f"<line x1='{sx(a):.1f}' y1='7' x2='{sx(b):.1f}' y2='7' stroke='#0b5cad' stroke-width='4' "
            f"stroke-linecap='round' opacity='0.45'/>"
            f"<circle cx='{sx(m):.1f}' cy='7' r='4' fill='#0b5cad'/></svg>")
