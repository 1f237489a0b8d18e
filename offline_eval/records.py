"""What a run writes and every reader reads: a result row, a score as stored, a metric's summary and a
run's summary, as typed records.

The runner writes results.jsonl and summary.json through these records, and the API, the report,
``compare``, the gates, the estimates and the review read them back through the same records instead of
each walking the JSON on its own. ``to_dict`` writes exactly the JSON of the files (the same keys in the
same order), so a record read from a file offline-eval wrote and written again gives the same text.

A run folder may have been edited by hand, so ``from_dict`` never fails on a value of the wrong type: a
score that is not a finite number reads as unscored, a count that is not a number as 0, a list or a
mapping that is not one as empty. Only what offline-eval itself wrote round-trips exactly.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from offline_eval import reasons

__all__ = ["StoredScore", "ResultRow", "MetricSummary", "RunSummary", "finite", "text_of", "score_dict",
           "metric_names"]


def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite number (a bool is not one), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def text_of(value: Any) -> str:
    """A display string for an untrusted field (None -> "")."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "\n".join(text_of(v) for v in value)
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else str(value)


def _count(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return 0


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


# --- results.jsonl -------------------------------------------------------------------------------

def score_dict(value: float | None, reason: str | None, explanation: str,
               metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A score as results.jsonl holds it: its value always, its reason, explanation and metadata when
    present."""
    out: dict[str, Any] = {"value": value}
    if reason:
        out["reason"] = reason
    if explanation:
        out["explanation"] = explanation
    if metadata:
        out["metadata"] = metadata
    return out

@dataclass(frozen=True)
class StoredScore:
    """One metric's verdict on one sample as results.jsonl holds it: ``{"value", "reason",
    "explanation", "metadata"}``, the last three only when set (as :meth:`Score.to_dict` writes them).

    A metric returns a :class:`~offline_eval.metrics.base.Score`, which refuses a NaN or an unscored
    value without a reason; this is what a reader gets back from a file, where either may be found."""

    value: float | None
    reason: str | None = None
    explanation: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, score: Any) -> "StoredScore":
        """The record of a metric's Score (anything with ``value``, ``reason``, ``explanation``,
        ``metadata``)."""
        return cls(score.value, score.reason, score.explanation, score.metadata)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "StoredScore":
        reason = data.get("reason")
        return cls(finite(data.get("value")), str(reason) if reason else None, text_of(data.get("explanation")),
                   _mapping(data.get("metadata")))

    def to_dict(self) -> dict[str, Any]:
        return score_dict(self.value, self.reason, self.explanation, self.metadata)

    @property
    def scored(self) -> bool:
        return self.value is not None

    @property
    def unscored_reason(self) -> str | None:
        """Why there is no value (None when there is one); a hand-written entry without a reason gives
        ``unscored``."""
        return None if self.scored else (self.reason or reasons.UNSCORED)

    def with_metadata(self, **entries: Any) -> "StoredScore":
        """A copy whose metadata also holds ``entries`` (an entry already there keeps its place)."""
        return replace(self, metadata={**self.metadata, **entries})


@dataclass(frozen=True)
class ResultRow:
    """One line of results.jsonl: ``{"id", "row", "sample", "scores"}``, a sample and each metric's
    score of it (an aggregate's too, under its own name)."""

    id: str
    row: int | None
    sample: Mapping[str, Any]
    scores: Mapping[str, StoredScore]

    @classmethod
    def of(cls, sample: Any, scores: Mapping[str, Any]) -> "ResultRow":
        """The row of a scored :class:`~offline_eval.data.schema.Sample`; ``scores``: metric -> Score."""
        return cls(sample.id, sample.row, sample.to_dict(), {n: StoredScore.of(s) for n, s in scores.items()})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], index: int | None = None) -> "ResultRow":
        """A row read from a file. Its id: the row's, else its sample's, else ``#<index + 1>``; a row
        with none of the three raises KeyError."""
        sample = _mapping(data.get("sample"))
        key = data.get("id")
        if key is None:
            key = sample.get("id")
        if key is None:
            if index is None:
                raise KeyError("id")
            key = f"#{index + 1}"
        row = data.get("row")
        scores = data.get("scores")
        return cls(str(key), row if isinstance(row, int) and not isinstance(row, bool) else None, sample,
                   {str(n): StoredScore.from_dict(s) for n, s in scores.items() if isinstance(s, Mapping)}
                   if isinstance(scores, Mapping) else {})

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "row": self.row, "sample": self.sample,
                "scores": {name: score.to_dict() for name, score in self.scores.items()}}

    def score(self, metric: str) -> StoredScore | None:
        return self.scores.get(metric)

    def value(self, metric: str) -> float | None:
        """The sample's finite score for ``metric``, or None (unscored, absent or malformed)."""
        score = self.scores.get(metric)
        return None if score is None else score.value

    def unscored_reason(self, metric: str) -> str | None:
        """Why ``metric`` has no score for this sample (``not_run``: the row has no entry for it);
        None when it is scored."""
        score = self.scores.get(metric)
        return reasons.NOT_RUN if score is None else score.unscored_reason

    def with_scores(self, scores: Mapping[str, StoredScore]) -> "ResultRow":
        """A copy with ``scores`` put in place of (or after) the row's own."""
        return replace(self, scores={**self.scores, **scores})


# --- summary.json --------------------------------------------------------------------------------
@dataclass(frozen=True)
class MetricSummary:
    """One metric's entry in summary.json: mean, sample standard deviation, bootstrap 95% interval,
    scored and unscored counts with the reasons, then ``higher_is_better`` (the direction the run's
    metric declared; None: not recorded, a summary from before it was), ``value_range`` (the values it
    takes, as it declared them; None: not recorded, or not two increasing finite numbers) and
    ``calibration``.

    ``calibration_checked``: the metric uses models, so the run looked for a calibration fitted for
    them; ``calibration`` is the one it used (what :meth:`Calibration.describe` records, with the share
    of samples at or above its threshold), None when none fitted. A metric that uses no model has no
    ``calibration`` key at all."""

    mean: float | None
    std: float | None
    ci95: tuple[float, float] | None
    n_scored: int
    n_unscored: int
    unscored_reasons: Mapping[str, int] = field(default_factory=dict)
    higher_is_better: bool | None = None
    calibration: Mapping[str, Any] | None = None
    calibration_checked: bool = False
    value_range: tuple[float, float] | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "MetricSummary":
        ci = data.get("ci95")
        bounds = [finite(x) for x in ci] if isinstance(ci, (list, tuple)) and len(ci) == 2 else [None]
        span = data.get("value_range")
        ends = [finite(x) for x in span] if isinstance(span, (list, tuple)) and len(span) == 2 else [None]
        direction = data.get("higher_is_better")
        calibration = data.get("calibration")
        return cls(finite(data.get("mean")), finite(data.get("std")),
                   (bounds[0], bounds[1]) if None not in bounds else None,
                   _count(data.get("n_scored")), _count(data.get("n_unscored")),
                   {str(k): _count(v) for k, v in _mapping(data.get("unscored_reasons")).items()},
                   direction if isinstance(direction, bool) else None,
                   dict(calibration) if isinstance(calibration, Mapping) else None, "calibration" in data,
                   (ends[0], ends[1]) if None not in ends and ends[0] < ends[1] else None)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mean": self.mean, "std": self.std, "ci95": list(self.ci95) if self.ci95 else None,
                               "n_scored": self.n_scored, "n_unscored": self.n_unscored,
                               "unscored_reasons": dict(self.unscored_reasons)}
        if self.higher_is_better is not None:
            out["higher_is_better"] = self.higher_is_better
        if self.value_range is not None:
            out["value_range"] = list(self.value_range)
        if self.calibration_checked:
            out["calibration"] = self.calibration
        return out


@dataclass(frozen=True)
class RunSummary:
    """summary.json: each metric's summary, the expert estimates when the folder held labels
    (``estimates`` and ``estimates_source``, or ``estimates_error``; :mod:`offline_eval.people.estimate`), and
    the run's own record (``run``: its fingerprint, settings, models, metrics, counts, engine figures)."""

    metrics: Mapping[str, MetricSummary]
    run: Mapping[str, Any] | None = None
    estimates: Mapping[str, Any] | None = None
    estimates_source: Mapping[str, Any] | None = None
    estimates_error: str | None = None
    # per conversation, when samples name one (offline_eval.conversations)
    conversations: Mapping[str, Any] | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunSummary":
        metrics = _mapping(data.get("metrics"))
        run, error = data.get("run"), data.get("estimates_error")
        return cls({str(k): MetricSummary.from_dict(v) for k, v in metrics.items() if isinstance(v, Mapping)},
                   dict(run) if isinstance(run, Mapping) else None,
                   _mapping(data.get("estimates")) if "estimates" in data else None,
                   _mapping(data.get("estimates_source")) if "estimates_source" in data else None,
                   error if isinstance(error, str) else None,
                   _mapping(data.get("conversations")) if "conversations" in data else None)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"metrics": {name: entry.to_dict() for name, entry in self.metrics.items()}}
        for key in ("conversations", "estimates", "estimates_source", "estimates_error", "run"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    @property
    def info(self) -> Mapping[str, Any]:
        """The run's record (empty when the summary has none)."""
        return self.run or {}

    @property
    def n_samples(self) -> int | None:
        """How many samples the run counts (its record's count of its rows, written when it finished);
        None when the record gives none, as a run that has not finished does not."""
        n = self.info.get("n_samples")
        return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None

    @property
    def run_metrics(self) -> list[str]:
        """The metrics the run declared, in its order (an aggregate among them)."""
        declared = self.info.get("metrics")
        return [str(m) for m in declared] if isinstance(declared, list) else []

    @property
    def starter(self) -> bool:
        return bool(self.info.get("starter"))

    def with_calibrations(self, entries: Mapping[str, Mapping[str, Any] | None]) -> "RunSummary":
        """A copy whose metrics named in ``entries`` record that calibration (None: none fitted)."""
        return replace(self, metrics={name: replace(summary, calibration=entries[name], calibration_checked=True)
                                      if name in entries else summary for name, summary in self.metrics.items()})


def metric_names(summary: RunSummary, rows: Iterable[ResultRow] = ()) -> list[str]:
    """Metric names in the run's declared order, then any others of its summary or its rows."""
    names = summary.run_metrics + list(summary.metrics)
    for row in rows:
        names.extend(row.scores)
    return list(dict.fromkeys(names))
