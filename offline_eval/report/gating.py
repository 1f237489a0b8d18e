"""CI gates: fail a run whose metric means miss their thresholds, or a comparison that regressed.

``parse_thresholds("faithfulness=0.8,answer_relevancy=0.7")`` -> ``{"faithfulness": 0.8, ...}``;
``check_thresholds(summary, thresholds)`` -> one line per failing metric (empty list = pass).
For metrics where lower is better (``hallucination_rate``, ``hallucination``, ``irrelevance``)
the threshold is a ceiling: the gate fails when the mean is *above* it. A gate also fails when more than
``max_unscored`` of the metric's rows (default ``DEFAULT_MAX_UNSCORED``, a tenth) went unscored: the mean
would rest on the rows the metric could score. ``gate_lines`` says, for each gated metric, how many rows
its mean rests on.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from offline_eval.data.schema import printable
from offline_eval.records import RunSummary
from offline_eval.report._run import as_run_summary, lower_is_better
from offline_eval.text import counted
from offline_eval.thresholds import DEFAULT_MAX_UNSCORED, ThresholdError, parse_thresholds

__all__ = ["parse_thresholds", "check_thresholds", "gate_lines", "ThresholdError", "DEFAULT_MAX_UNSCORED"]


def _pair(mean: float, threshold: float) -> tuple[str, str]:
    """Format two numbers with enough decimals that they do not print the same."""
    for digits in (2, 3, 4, 6):
        a, b = f"{mean:.{digits}f}", f"{threshold:.{digits}f}"
        if a != b:
            return a, b
    return repr(mean), repr(threshold)


def _reasons(value: Mapping[str, int]) -> str:
    if not value:
        return ""
    items = sorted(value.items(), key=lambda kv: -kv[1])
    return ": " + ", ".join(f"{k} x{v}" for k, v in items)


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def gate_lines(summary: RunSummary | Mapping[str, Any], thresholds: Mapping[str, float], *,
               max_unscored: float = DEFAULT_MAX_UNSCORED) -> list[str]:
    """One line per gated metric of the run: its threshold, its mean and the rows it rests on (scored of
    all, unscored and their share against the limit), whether it passes or not."""
    metrics = as_run_summary(summary).metrics
    lines = []
    for name, threshold in thresholds.items():
        entry = metrics.get(name)
        if entry is None:
            continue
        rows = entry.n_scored + entry.n_unscored
        sign = "<=" if lower_is_better(name, entry) else ">="
        mean = "none" if entry.mean is None else _pair(entry.mean, float(threshold))[0]
        lines.append(f"{name} {sign} {float(threshold):g}: mean {mean} over {counted(entry.n_scored, 'scored row')} of {rows} "
                     f"({entry.n_unscored} unscored, {_share(entry.n_unscored, rows)}; at most "
                     f"{max_unscored * 100:g}% allowed, --max-unscored)")
    return lines


def check_thresholds(summary: RunSummary | Mapping[str, Any], thresholds: Mapping[str, float], *,
                     max_unscored: float = DEFAULT_MAX_UNSCORED) -> list[str]:
    """One-line reasons for each metric whose mean misses its threshold; [] when all pass.

    ``summary`` is a run's ``summary.json`` (or just its ``"metrics"`` mapping, or the record). A metric
    with no scored samples fails ("... has no scored samples"), and so does one with more than
    ``max_unscored`` of its rows unscored, and a threshold naming a metric the run does not have.
    """
    metrics = as_run_summary(summary).metrics
    failures = []
    for name, threshold in thresholds.items():
        entry = metrics.get(name)
        if entry is None:
            known = ", ".join(sorted(metrics)) or "none"
            failures.append(f"{printable(name)}: unknown metric, not in this run (run has: {printable(known)})")
            continue
        mean = entry.mean
        if mean is None:
            failures.append(f"{name} has no scored samples ({entry.n_unscored} unscored"
                            f"{_reasons(entry.unscored_reasons)}); threshold {threshold:g} not met")
            continue
        rows = entry.n_scored + entry.n_unscored
        if entry.n_unscored > max_unscored * rows:
            failures.append(f"{name}: {entry.n_unscored} of {rows} rows unscored ({_share(entry.n_unscored, rows)}"
                            f"{_reasons(entry.unscored_reasons)}), more than the {max_unscored * 100:g}% "
                            f"--max-unscored allows: its mean rests on {counted(entry.n_scored, 'row')}; score them (see "
                            "the reasons) or pass a higher --max-unscored")
            continue
        m, t = _pair(mean, float(threshold))
        if lower_is_better(name, entry):
            if mean > threshold:
                failures.append(f"{name} mean {m} > {t} (lower is better)")
        elif mean < threshold:
            failures.append(f"{name} mean {m} < {t}")
    return failures
