"""The aggregate: a sample's metrics combined into one score once they are scored.

It is no metric: it asks no model and reads no sample, only the finished scores of a result row and the
direction and scale each metric declares (:meth:`Metric.goodness`). The runner applies it to every
finished row, where it becomes one more column under its own name, and summary.json summarizes that
column as it does a metric's (a gate such as ``--fail-under aggregate=0.6`` names it). This module is
the one place that knows the name it goes by.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable, Mapping

from offline_eval import reasons
from offline_eval.metrics.base import Metric, Score
from offline_eval.records import ResultRow, StoredScore

__all__ = ["Aggregate", "aggregate_score", "weights_problems"]


def weights_problems(weights: Mapping[str, Any], metrics: Iterable[str]) -> list[str]:
    """What is wrong with the aggregate's ``weights`` (metric -> weight) for a run of ``metrics``, one
    line each naming ``--weights`` and the value: a weight that is no finite number >= 0, a metric not
    in the run, every weight 0. Each would leave the aggregate NaN, or unscored on every row with a
    reason that blames the metrics (or, for an infinity, stop the run once every row was scored), so a
    run refuses them before any model loads."""
    from offline_eval.data.schema import printable
    from offline_eval.options import weight_problem, weights_problem

    names = list(metrics)
    problems = []
    for metric, weight in weights.items():
        problem = weight_problem(weight)
        if problem:
            problems.append(f"--weights {printable(str(metric))}={printable(str(weight))}: {problem}")
        elif metric not in names:
            problems.append(f"--weights {printable(str(metric))}={weight:g}: {printable(str(metric))} is not among "
                            f"this run's metrics ({', '.join(names)}); weigh one of them or add it to --metrics")
    every = weights_problem(weights.values()) if not problems else None  # all of them 0
    if every:
        problems.append(f"--weights {printable(','.join(f'{k}={v:g}' for k, v in weights.items()))}: {every}")
    return problems


class Aggregate:
    """Weighted harmonic mean of a sample's scored metrics (Ragas' original ragas_score), each read on
    one scale first: :meth:`Metric.goodness`, 0 the metric's worst value and 1 its best, so that a
    lower-is-better metric (hallucination_rate, noise sensitivity, the keypoints' hallucination) counts
    as 1 - value and rubrics_score's 1-5 as (value - 1) / 4. As in Ragas, a part at its worst (goodness 0)
    makes the aggregate 0. ``weights``: metric -> weight (empty: every metric, weight 1; otherwise only
    the metrics named)."""

    name: ClassVar[str] = "aggregate"
    asked_by: ClassVar[tuple[str, ...]] = ("aggregate", "ragas_score")  # names that add it to a run
    description: ClassVar[str] = "weighted harmonic mean of the other chosen metrics (ragas_score)"
    higher_is_better: ClassVar[bool] = True
    value_range: ClassVar[tuple[float, float]] = (0.0, 1.0)

    def __init__(self, metrics: Iterable[Metric], weights: Mapping[str, float] | None = None) -> None:
        self.goodness = {m.name: m.goodness for m in metrics}
        self.weights = dict(weights or {})

    @classmethod
    def asked(cls, names: Iterable[Any]) -> bool:
        """Whether a list of metric names (or Metric instances) asks for the aggregate."""
        return any(isinstance(n, str) and n in cls.asked_by for n in names)

    @classmethod
    def without(cls, names: Iterable[Any]) -> list[Any]:
        """``names`` less those that ask for the aggregate: the metrics themselves."""
        return [n for n in names if not (isinstance(n, str) and n in cls.asked_by)]

    def score(self, scores: Mapping[str, Any]) -> Score:
        """The aggregate of one sample's ``scores`` (metric -> anything with a ``value``: a Score or a
        stored one); unscored when no metric of positive weight is scored."""
        weights = self.weights
        parts = {n: self.goodness[n](s.value) for n, s in scores.items()
                 if s.value is not None and n in self.goodness and (not weights or n in weights)}
        if not parts:
            return Score.unscored(reasons.NO_SCORED_METRIC, "no metric of the aggregate was scored")
        w = {n: float(weights.get(n, 1.0)) if weights else 1.0 for n in parts}
        if not any(weight > 0 for weight in w.values()):
            return Score.unscored(reasons.NO_SCORED_METRIC, "every scored metric of the aggregate has weight 0")
        if any(v == 0.0 and w[n] > 0 for n, v in parts.items()):
            value = 0.0
        else:
            value = sum(w.values()) / sum(w[n] / v for n, v in parts.items() if w[n] > 0)
        return Score(value, metadata={"parts": parts, "weights": w})

    def apply(self, row: ResultRow) -> ResultRow:
        """``row`` with the aggregate of its scores after them, under :attr:`name`."""
        return row.with_scores({self.name: StoredScore.of(self.score(row.scores))})


def aggregate_score(scores: Mapping[str, Any], weights: Mapping[str, float], metrics: list[Metric]) -> Score:
    """The aggregate of one sample's ``scores`` over ``metrics`` with ``weights`` (see :class:`Aggregate`)."""
    return Aggregate(metrics, weights).score(scores)
