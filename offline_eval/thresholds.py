"""A run's ``--fail-under`` thresholds, read from ``"faithfulness=0.8,answer_relevancy=0.7"``, and the
least a gated or fitted number must rest on (unscored rows, labels per class).

Read where the run is configured (:class:`offline_eval.run.config.RunConfig`), which checks every name
against the run's metrics before anything loads; :mod:`offline_eval.report.gating` checks a finished
run's means against them. It sits below both (it imports nothing of the package), so the report does
not import the runner's package for it.
"""

from __future__ import annotations

import math
from typing import Iterable

__all__ = ["parse_thresholds", "ThresholdError", "DEFAULT_MAX_UNSCORED", "MIN_LABELS_PER_CLASS", "MIN_PAIRS",
           "MIN_LABELLED_PAIRS",
           "unscored_share"]

# A gate fails when more than this share of a gated metric's rows went unscored: its mean would rest on
# the rows the metric could score, which need not be like the others (an empty answer, a missing field).
DEFAULT_MAX_UNSCORED = 0.1
# A threshold and a Platt map fitted on fewer labels of either class move with every label added, and a
# calibration is applied by every later run of these models: `calibrate` (and `agreement`) refuse fewer
# unless --min-per-class allows them, and warn then.
MIN_LABELS_PER_CLASS = 10
# A paired change on fewer pairs has no interval or p-value worth printing: even when every pair moves the
# same way, the exact sign-flip test on n pairs cannot go below 2/2**n (0.0625 at 5 pairs, 0.031 at 6), so
# nothing fewer can tell a change from chance at p < 0.05, while the bootstrap over a handful of pairs gives
# an interval as narrow as their spread (zero width on one pair) and a p-value at its floor. `compare` shows
# no interval below it and `--fail-on-regression` refuses to gate on it.
MIN_PAIRS = 6
# Pairwise agreement with people (`agreement --protocol pairwise`) is a share of labelled pairs: on fewer
# than this many, one pair more moves it by a tenth or more, and its bootstrap interval over a handful of
# pairs is a point or the whole range. It refuses fewer unless --min-pairs allows them, and warns then.
MIN_LABELLED_PAIRS = 10


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


def unscored_share(text: str) -> float:
    """``--max-unscored``'s value: a share of rows from 0 to 1 (0.1: a tenth)."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a share of rows from 0 to 1 (e.g. 0.1 for a tenth)")
    return value
