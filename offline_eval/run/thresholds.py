"""A run's ``--fail-under`` thresholds, read from ``"faithfulness=0.8,answer_relevancy=0.7"``.

Read where the run is configured (:class:`offline_eval.run.config.RunConfig`), which checks every name
against the run's metrics before anything loads; :mod:`offline_eval.report.gating` checks a finished
run's means against them.
"""

from __future__ import annotations

import math
from typing import Iterable

__all__ = ["parse_thresholds", "ThresholdError"]


class ThresholdError(ValueError):
    """A malformed ``--fail-under`` specification."""


def parse_thresholds(spec: str | Iterable[str]) -> dict[str, float]:
    """Parse ``"name=value,name=value"`` (or a list of such strings, e.g. from a repeated flag)."""
    parts: list[str] = []
    for chunk in ([spec] if isinstance(spec, str) else list(spec)):
        parts.extend(p.strip() for p in str(chunk).split(","))
    out: dict[str, float] = {}
    for part in parts:
        if not part:
            continue
        name, sep, raw = part.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or not name or not raw:
            raise ThresholdError(f"bad threshold {part!r}: expected metric=value, e.g. faithfulness=0.8")
        try:
            value = float(raw)
        except ValueError:
            raise ThresholdError(f"bad threshold {part!r}: {raw!r} is not a number") from None
        if not math.isfinite(value):
            raise ThresholdError(f"bad threshold {part!r}: the value must be finite")
        if name in out:
            raise ThresholdError(f"metric {name!r} is given more than one threshold")
        out[name] = value
    if not out:
        raise ThresholdError("no thresholds given: expected metric=value[,metric=value...]")
    return out
