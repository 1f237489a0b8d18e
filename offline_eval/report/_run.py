"""Reading a run directory (``results.jsonl`` + ``summary.json``) written by ``offline-eval run``.

Everything in a run directory is treated as untrusted: records may lack fields or carry values of
the wrong type, and the readers here degrade to ``None`` rather than fail on them. A line of
results.jsonl that is no result row is read as :mod:`offline_eval.runlog` reads it, as every reader does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from html import escape
from pathlib import Path
from typing import Any, Mapping

from offline_eval.records import (
    MetricSummary, ResultRow, RunSummary, finite, metric_names, text_of,
)
from offline_eval.runlog import RESULTS, SUMMARY, read_results, summary_dict


def lower_is_better(metric: str, entry: MetricSummary | Mapping[str, Any] | None = None) -> bool:
    """True for metrics such as ``hallucination_rate`` where a smaller score is the better one: what the
    run's summary entry for the metric records (``higher_is_better``), else what the metric class of that
    name declares (a summary written before the direction was recorded), else False."""
    from offline_eval.metrics import is_higher_better  # the metric classes, only when a report needs them

    return not is_higher_better(metric, entry)


@dataclass
class RunData:
    """One run directory, loaded: summary.json and results.jsonl as records."""

    path: Path
    summary: RunSummary
    results: list[ResultRow] = field(default_factory=list)

    @property
    def run(self) -> Mapping[str, Any]:
        return self.summary.info

    @property
    def metric_summaries(self) -> Mapping[str, MetricSummary]:
        return self.summary.metrics

    @property
    def metric_names(self) -> list[str]:
        """Metric names in the run's declared order, then any others seen in summary or results."""
        return metric_names(self.summary, self.results)

    @property
    def starter(self) -> bool:
        return self.summary.starter


def as_run_summary(summary: RunSummary | Mapping[str, Any]) -> RunSummary:
    """A run's summary as a record: summary.json's JSON, or just its ``"metrics"`` mapping, or the record."""
    if isinstance(summary, RunSummary):
        return summary
    return RunSummary.from_dict(summary if isinstance(summary.get("metrics"), Mapping) else {"metrics": summary})


def load_run(run_dir: str | Path) -> RunData:
    """Load ``run_dir``. ``summary.json`` is recomputed from the results when it is missing."""
    path = Path(run_dir)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: not a run directory")
    if not (path / RESULTS).exists() and not (path / SUMMARY).exists():
        raise FileNotFoundError(f"{path}: no {RESULTS} or {SUMMARY}; is this a run directory?")
    results = list(read_results(path)) if (path / RESULTS).exists() else []
    data = RunData(path, RunSummary.from_dict(summary_dict(path) or {}), results)
    if not data.metric_summaries and results:
        metrics = summarize_results(results, data.metric_names)
        data.summary = replace(data.summary, metrics=metrics, conversations=data.summary.conversations
                               or summarize_conversations(results, metrics))
    return data


def summarize_results(results: list[ResultRow], metrics: list[str]) -> dict[str, MetricSummary]:
    """Per-metric summaries (the ``summary.json`` "metrics" entries) computed from result rows."""
    from offline_eval.stats import summarize

    return {metric: summarize([rec.value(metric) for rec in results], [rec.unscored_reason(metric) for rec in results])
            for metric in metrics}


def summarize_conversations(results: list[ResultRow],
                            metrics: Mapping[str, MetricSummary]) -> dict[str, Any] | None:
    """The ``conversations`` section of summary.json (offline_eval.conversations) computed from result rows;
    None when no row's sample names a ``conversation_id``."""
    from offline_eval.conversations import conversation_summary

    conversation_ids = []
    for rec in results:
        cid = rec.sample.get("conversation_id")
        ok = isinstance(cid, (str, int)) and not isinstance(cid, bool)
        conversation_ids.append(str(cid) if ok else None)
    return conversation_summary(conversation_ids, [rec.id for rec in results],
                                {m: [rec.value(m) for rec in results] for m in metrics},
                                {m: not lower_is_better(m, entry) for m, entry in metrics.items()})


def e(value: Any) -> str:
    """HTML-escape any value (None -> "")."""
    return escape(text_of(value), quote=True)


def str_list(value: Any) -> list[str]:
    """A list of display strings from a list-ish untrusted field."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [text_of(v) for v in value]
    return [text_of(value)]


def fmt_num(value: Any, digits: int = 3) -> str:
    """A float with ``digits`` decimals, or an em dash for missing values."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "—"
    return f"{value:.{digits}f}"


def fmt_ci(ci: Any, digits: int = 3) -> str:
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        lo, hi = fmt_num(ci[0], digits), fmt_num(ci[1], digits)
        if lo != "—" and hi != "—":
            return f"[{lo}, {hi}]"
    return "—"


def calibration_notes(metrics: Mapping[str, MetricSummary]) -> list[str]:
    """Lines about the calibrations of a summary's ``metrics``: one per calibrated metric (threshold,
    where it was fitted, its cross-validated balanced accuracy), then one naming the metrics that had
    none for these models. Metrics without a ``calibration`` entry (model-free ones) say nothing."""
    lines, none = [], []
    for name, entry in metrics.items():
        if not entry.calibration_checked:
            continue
        c = entry.calibration
        if not c:
            none.append(name)
            continue
        quality, source = c.get("quality"), c.get("source")
        cv = finite(quality.get("balanced_accuracy_cross_validated")) if isinstance(quality, Mapping) else None
        share = finite(c.get("positive_share"))
        dataset = source.get("dataset", "?") if isinstance(source, Mapping) else "?"
        lines.append(f"{name}: calibrated threshold {fmt_num(c.get('threshold'))}"
                     + (f", {share:.0%} of samples at or above it" if share is not None else "")
                     + f" (fitted on {dataset}, n = {c.get('n')}"
                     + (f", cross-validated balanced accuracy {cv:.3f}" if cv is not None else "") + ")")
    if none:
        lines.append(f"none for these models: {', '.join(none)} (fit one with `offline-eval calibrate`)")
    return lines
