"""Reading a run directory (``results.jsonl`` + ``summary.json``) written by ``offline-eval run``.

Everything in a run directory is treated as untrusted: records may lack fields or carry values of
the wrong type, and the readers here degrade to ``None`` rather than fail on them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.json"

def lower_is_better(metric: str, entry: Mapping[str, Any] | None = None) -> bool:
    """True for metrics such as ``hallucination_rate`` where a smaller score is the better one: what the
    run's summary entry for the metric records (``higher_is_better``), else what the metric class of that
    name declares (a summary written before the direction was recorded), else False."""
    if entry and isinstance(entry.get("higher_is_better"), bool):
        return not entry["higher_is_better"]
    return _declared_lower(metric)


@lru_cache(maxsize=None)
def _declared_lower(metric: str) -> bool:
    from offline_eval.metrics import metric_classes

    cls = metric_classes().get(metric)
    return cls is not None and not cls.higher_is_better


@dataclass
class RunData:
    """One run directory, loaded."""

    path: Path
    summary: dict[str, Any]
    results: list[dict[str, Any]] = field(default_factory=list)

    @property
    def run(self) -> dict[str, Any]:
        run = self.summary.get("run")
        return run if isinstance(run, dict) else {}

    @property
    def metric_summaries(self) -> dict[str, dict[str, Any]]:
        metrics = self.summary.get("metrics")
        if not isinstance(metrics, dict):
            return {}
        return {str(k): v for k, v in metrics.items() if isinstance(v, dict)}

    @property
    def metric_names(self) -> list[str]:
        """Metric names in the run's declared order, then any others seen in summary or results."""
        names: list[str] = []
        declared = self.run.get("metrics")
        if isinstance(declared, list):
            names.extend(str(m) for m in declared)
        names.extend(self.metric_summaries)
        for rec in self.results:
            scores = rec.get("scores")
            if isinstance(scores, dict):
                names.extend(str(m) for m in scores)
        return list(dict.fromkeys(names))

    @property
    def starter(self) -> bool:
        return bool(self.run.get("starter"))


def _load_results(path: Path) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: line {lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(rec, dict):
                raise ValueError(f"{path}: line {lineno}: expected a JSON object")
            records.append(rec)
    return records


def load_run(run_dir: str | Path) -> RunData:
    """Load ``run_dir``. ``summary.json`` is recomputed from the results when it is missing."""
    path = Path(run_dir)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: not a run directory")
    results_path, summary_path = path / RESULTS_FILE, path / SUMMARY_FILE
    if not results_path.exists() and not summary_path.exists():
        raise FileNotFoundError(f"{path}: no {RESULTS_FILE} or {SUMMARY_FILE}; is this a run directory?")
    results = _load_results(results_path) if results_path.exists() else []
    if summary_path.exists():
        try:
            summary = json.loads(summary_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{summary_path}: not valid JSON ({exc.msg})") from None
        if not isinstance(summary, dict):
            raise ValueError(f"{summary_path}: expected a JSON object")
    else:
        summary = {}
    data = RunData(path, summary, results)
    if not data.metric_summaries and results:
        summary["metrics"] = summarize_results(results, data.metric_names)
    return data


def summarize_results(results: list[dict[str, Any]], metrics: list[str]) -> dict[str, dict[str, Any]]:
    """Per-metric summaries (the ``summary.json`` "metrics" shape) computed from result records."""
    from offline_eval.stats import summarize

    out = {}
    for metric in metrics:
        values = [score_value(rec, metric) for rec in results]
        reasons = [unscored_reason(rec, metric) for rec in results]
        out[metric] = summarize(values, reasons).to_dict()
    return out


def score_entry(record: dict[str, Any], metric: str) -> dict[str, Any] | None:
    scores = record.get("scores")
    if not isinstance(scores, dict):
        return None
    entry = scores.get(metric)
    return entry if isinstance(entry, dict) else None


def score_value(record: dict[str, Any], metric: str) -> float | None:
    """The sample's finite score for ``metric``, or None (unscored, absent or malformed)."""
    entry = score_entry(record, metric)
    if entry is None:
        return None
    value = entry.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def unscored_reason(record: dict[str, Any], metric: str) -> str | None:
    """Why ``metric`` has no score for this sample; None when it is scored."""
    if score_value(record, metric) is not None:
        return None
    entry = score_entry(record, metric)
    if entry is None:
        return "not_run"
    reason = entry.get("reason")
    return str(reason) if reason else "unscored"


def sample_of(record: dict[str, Any]) -> dict[str, Any]:
    sample = record.get("sample")
    return sample if isinstance(sample, dict) else {}


def sample_id(record: dict[str, Any], index: int) -> str:
    rid = record.get("id")
    if rid is None:
        rid = sample_of(record).get("id")
    return str(rid) if rid is not None else f"#{index + 1}"


def text_of(value: Any) -> str:
    """A display string for an untrusted field (None -> "")."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "\n".join(text_of(v) for v in value)
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else str(value)


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


def calibration_notes(metrics: dict[str, Any]) -> list[str]:
    """Lines about the calibrations of a summary's ``metrics``: one per calibrated metric (threshold,
    where it was fitted, its cross-validated balanced accuracy), then one naming the metrics that had
    none for these models. Metrics without a ``calibration`` entry (model-free ones) say nothing."""
    lines, none = [], []
    for name, entry in metrics.items():
        if not isinstance(entry, dict) or "calibration" not in entry:
            continue
        c = entry["calibration"]
        if not c:
            none.append(name)
            continue
        cv = (c.get("quality") or {}).get("balanced_accuracy_cross_validated")
        share = c.get("positive_share")
        lines.append(f"{name}: calibrated threshold {c['threshold']:.3f}"
                     + (f", {share:.0%} of samples at or above it" if share is not None else "")
                     + f" (fitted on {c.get('source', {}).get('dataset', '?')}, n = {c.get('n')}"
                     + (f", cross-validated balanced accuracy {cv:.3f}" if cv is not None else "") + ")")
    if none:
        lines.append(f"none for these models: {', '.join(none)} (fit one with `offline-eval calibrate`)")
    return lines
