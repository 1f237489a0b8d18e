"""Reading a run directory (``results.jsonl`` + ``summary.json``) written by ``offline-eval run``.

A folder without summary.json holds a run that has not finished (killed, or still running): its record is
then run.json's, written when it started, so its profile (the starter warning among it), dataset and
metrics are still known, and :func:`partial_notes` says how much of it there is.

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
from offline_eval.runlog import RESULTS, SUMMARY, RunLogError, read_results, rows_short, run_info, summary_dict
from offline_eval.thresholds import MIN_PAIRS, too_few_shared_labels


def lower_is_better(metric: str, entry: MetricSummary | Mapping[str, Any] | None = None) -> bool:
    """True for metrics such as ``hallucination_rate`` where a smaller score is the better one: what the
    run's summary entry for the metric records (``higher_is_better``), else what the metric class of that
    name declares (a summary written before the direction was recorded), else False."""
    from offline_eval.metrics import is_higher_better  # the metric classes, only when a report needs them

    return not is_higher_better(metric, entry)


@dataclass(frozen=True)
class Scale:
    """How a report reads a metric's values: the range they lie in and which end is the better one, so
    that a colour or a bar means the same for rubrics_score's 1-5 as for a share in [0, 1]."""

    low: float = 0.0
    high: float = 1.0
    lower_is_better: bool = False

    def goodness(self, value: float) -> float:
        """``value`` in [0, 1], 1 the best (:func:`~offline_eval.metrics.base.goodness_on`)."""
        from offline_eval.metrics.base import goodness_on

        return goodness_on(value, (self.low, self.high), not self.lower_is_better)


def scale_of(metric: str, entry: MetricSummary | Mapping[str, Any] | None = None) -> Scale:
    """The :class:`Scale` of ``metric``: its range and direction as the run's summary entry records them,
    else as the metric class of that name declares them (:func:`lower_is_better`)."""
    from offline_eval.metrics import value_range_of

    low, high = value_range_of(metric, entry)
    return Scale(low, high, lower_is_better(metric, entry))


@dataclass
class RunData:
    """One run directory, loaded: summary.json and results.jsonl as records."""

    path: Path
    summary: RunSummary
    results: list[ResultRow] = field(default_factory=list)
    finished: bool = True  # summary.json was there: the run ended
    results_found: bool = True  # results.jsonl was there (a finished run's may have been removed)

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

    @property
    def n_samples(self) -> int | None:
        """How many samples the run counts (:attr:`RunSummary.n_samples`)."""
        return self.summary.n_samples


def partial_notes(data: RunData) -> list[str]:
    """One plain sentence for each way ``data`` holds less than a finished run's rows: a run that has not
    finished (k samples scored so far), a finished run whose results.jsonl is missing, empty, or holds
    fewer rows than its summary counts. Empty for a whole run."""
    k, n = len(data.results), data.n_samples
    if not data.finished:
        of = f" of {n}" if n is not None and n >= k else ""
        return [f"unfinished run: {k}{of} samples scored so far (no {SUMMARY}: the run was stopped or is still "
                f"running); every figure rests on these {k} samples only; rerun the same `offline-eval run` "
                "command to finish it"]
    if n is None or k >= n:
        return []
    rerun = "rerun the same `offline-eval run` command to score the missing samples again"
    if not data.results_found:
        return [f"{RESULTS} is missing: {SUMMARY} counts {n} scored samples, but none of their rows can be "
                f"shown, and the summary's figures cannot be checked against them; {rerun}"]
    if not k:
        return [f"{RESULTS} is empty: {SUMMARY} counts {n} scored samples, but none of their rows can be shown; "
                f"{rerun}"]
    return [f"{rows_short(k, n)}: the summary's figures rest on all {n}, the sample rows on {k}; {rerun}"]


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
    found = (path / RESULTS).exists()
    results = list(read_results(path)) if found else []
    summary = summary_dict(path)
    finished = summary is not None  # read once: a run that finishes meanwhile is read as it was
    if summary is None:  # not finished: what the run recorded when it started stands in for its record
        try:
            started = run_info(path)
        except RunLogError:  # a damaged run.json leaves the rows readable: the record is only unknown
            started = None
        summary = {"run": started} if started is not None else {}
    data = RunData(path, RunSummary.from_dict(summary), results, finished=finished,
                   results_found=found)
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


def kappa_shown(pair: Mapping[str, Any]) -> str:
    """One pair of annotators' kappa as an ``estimates`` entry records it (``{"kappa", "n"}``): the number
    and its count of shared labels, or, on too few of them, why there is no number, even where the entry
    holds one (a summary.json written before kappa needed them, or edited). An ``n`` that is no count
    counts as none."""
    n = pair.get("n")
    n = n if isinstance(n, int) and not isinstance(n, bool) else 0
    return too_few_shared_labels(n) or f"{fmt_num(pair.get('kappa'), 2)} (n {n})"


def fmt_interval(ci: Any, n: Any, unit: str = "rows") -> str:
    """A mean's 95% interval as :func:`fmt_ci` writes it; where it is absent because the mean rests on
    fewer than ``MIN_PAIRS`` ``unit`` (:func:`offline_eval.stats.bootstrap_ci` gives none), it says so."""
    text = fmt_ci(ci)
    if text == "—" and isinstance(n, int) and not isinstance(n, bool) and 0 < n < MIN_PAIRS:
        return f"— (fewer than {MIN_PAIRS} {unit})"
    return text


def estimate_note(entry: Any) -> str | None:
    """The caveat an estimate of summary.json's ``estimates`` carries on its PPI figures (every label the
    same answer, too few labels: offline_eval.people.estimate), or None; read as untrusted. The reports
    show it beside the estimate, which reads as a sure one without it."""
    ppi = entry.get("ppi") if isinstance(entry, Mapping) else None
    note = ppi.get("note") if isinstance(ppi, Mapping) else None
    return note if isinstance(note, str) and note.strip() else None


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
        # a run before fitted_on was recorded names only the labelled dataset, if any
        dataset = c.get("fitted_on") or (source.get("dataset") if isinstance(source, Mapping) else None) or "?"
        lines.append(f"{name}: calibrated threshold {fmt_num(c.get('threshold'))}"
                     + (f", {share:.0%} of samples at or above it" if share is not None else "")
                     + f" (fitted on {dataset}, n = {c.get('n')}"
                     + (f", cross-validated balanced accuracy {cv:.3f}" if cv is not None else "") + ")")
    if none:
        lines.append(f"none for these models: {', '.join(none)} (fit one with `offline-eval calibrate`)")
    return lines
