"""A run's ``--fail-under`` thresholds, read from ``"faithfulness=0.8,answer_relevancy=0.7"``, and the
least a gated or fitted number must rest on (unscored rows, labels per class).

Read where the run is configured (:class:`offline_eval.run.config.RunConfig`), which checks every name
against the run's metrics before anything loads; :mod:`offline_eval.report.gating` checks a finished
run's means against them. It sits below both (it imports nothing of the package), so the report does
not import the runner's package for it.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

__all__ = ["parse_thresholds", "ThresholdError", "DEFAULT_MAX_UNSCORED", "MIN_LABELS_PER_CLASS", "MIN_PAIRS",
           "MIN_LABELLED_PAIRS", "MIN_SHARED_LABELS", "too_few_shared_labels", "unscored_share",
           "check_unscored_share"]

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
# no interval below it and `--fail-on-regression` refuses to gate on it; a run's mean shows none below it
# either (the same 2/2**n bounds what the range of n values can hold), nor the retriever benchmark's deltas.
MIN_PAIRS = 6
# Pairwise agreement with people (`agreement --protocol pairwise`) is a share of labelled pairs: on fewer
# than this many, one pair more moves it by a tenth or more, and its bootstrap interval over a handful of
# pairs is a point or the whole range. It refuses fewer unless --min-pairs allows them, and warns then.
MIN_LABELLED_PAIRS = 10
# Cohen's kappa between two annotators rests on the samples both labelled yes or no: on fewer than this
# many, one label more moves their observed agreement by a tenth or more, and kappa, which takes out the
# agreement expected by chance, swings further (two matching labels of each answer give 1.0). The review
# page, `estimate` and the report show how many there are and how many it needs instead of a number.
MIN_SHARED_LABELS = 10


def too_few_shared_labels(n: int) -> str | None:
    """Why Cohen's kappa on ``n`` shared labels is not given (fewer than :data:`MIN_SHARED_LABELS`), for
    every place that shows one; None when there are enough."""
    return f"too few shared labels (n {n}, needs {MIN_SHARED_LABELS})" if n < MIN_SHARED_LABELS else None


class ThresholdError(ValueError):
    """A malformed ``--fail-under`` specification."""


def parse_thresholds(spec: str | Iterable[str] | Mapping[str, float]) -> dict[str, float]:
    """Parse ``"name=value,name=value"`` (or a list of such strings, e.g. from a repeated flag), or check
    a mapping of name to value (the Python API's ``fail_under``) as strictly."""
    if isinstance(spec, Mapping):
        pairs = [(f"{name}={value}", str(name).strip(), value) for name, value in spec.items()]
    else:
        pairs = []
        for chunk in ([spec] if isinstance(spec, str) else list(spec)):
            for part in (p.strip() for p in str(chunk).split(",")):
                if part:
                    name, sep, raw = part.partition("=")
                    pairs.append((part, name.strip(), raw.strip() if sep else ""))
    out: dict[str, float] = {}
    for part, name, raw in pairs:
        if not name or raw == "":
            raise ThresholdError(f"bad threshold {part!r}: expected metric=value, e.g. faithfulness=0.8")
        try:
            if isinstance(raw, bool):  # float(True) is 1.0: a slip, not a threshold
                raise TypeError
            value = float(raw)
        except (TypeError, ValueError):
            raise ThresholdError(f"bad threshold {part!r}: {raw!r} is not a number") from None
        if not math.isfinite(value):
            raise ThresholdError(f"bad threshold {part!r}: the value must be finite")
        if name in out:
            raise ThresholdError(f"metric {name!r} is given more than one threshold")
        out[name] = value
    if not out:
        raise ThresholdError("no thresholds given: expected metric=value[,metric=value...]")
    return out


def check_unscored_share(value: str | float) -> float:
    """``--max-unscored``'s value (the flag's text, or the Python API's ``max_unscored``) as a share of
    rows from 0 to 1 (0.1: a tenth); a :class:`ThresholdError` otherwise."""
    try:
        share = math.nan if isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        share = math.nan
    if not 0.0 <= share <= 1.0:
        raise ThresholdError(f"{value!r} is not a share of rows from 0 to 1 (e.g. 0.1 for a tenth)")
    return share


def unscored_share(text: str) -> float:
    """argparse type of ``--max-unscored`` (:func:`check_unscored_share`)."""
    import argparse

    try:
        return check_unscored_share(text)
    except ThresholdError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
