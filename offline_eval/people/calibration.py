"""Calibration of a metric for one set of models, fitted on human labels and picked up by runs.

A small judge's P(Yes) is informative but not calibrated: on one data set the faithful answers sit
around 0.4, on another around 0.8. ``offline-eval calibrate`` scores a labelled data set with one
metric and fits, for exactly these models and settings,

* the decision threshold: the cut of the metric's value that maximises balanced accuracy on the
  labels, and its k-fold cross-validated balanced accuracy (the honest figure);
* a Platt map: P(a person labels the sample positive) = sigmoid(a * logit(value) + b).

Calibrations are stored in a JSON file (``offline-eval-calibration.json``), by default inside the
judge's model folder so they travel with the weights into the air gap. A calibration applies only
where the identity of every model the metric uses (the cache's model identity: backend, model files,
output-changing options) and the metric's settings are the ones it was fitted with; a run reports for
each metric which calibration it used, or that it had none.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from offline_eval.judging.settings import EvalSettings
from offline_eval.rank_stats import balanced_accuracy, roc_auc
from offline_eval.records import ResultRow
from offline_eval.runtime.identity import CALIBRATION_FILE

# CALIBRATION_FILE is left out of a model folder's identity (offline_eval.engine.models).
FORMAT = 1
_EPS = 1e-4


def labels_per_class(labels: Iterable[float]) -> tuple[int, int]:
    """(yes, no): how many labels are 1 and how many 0."""
    values = list(labels)
    return sum(1 for y in values if y == 1), sum(1 for y in values if y == 0)


# Options a metric gained after runs and calibrations recorded it without them, with the value that
# keeps what those measured: answer_relevancy and context_relevance were Ragas' definitions before
# their mode.
OPTIONS_ADDED: dict[str, dict[str, Any]] = {"answer_relevancy": {"mode": "ragas"},
                                            "context_relevance": {"mode": "ragas"}}


def recorded_options(metric: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """A metric's options as a run or a calibration recorded them, with the options it gained since at
    the value they stood for then (:data:`OPTIONS_ADDED`)."""
    return {**OPTIONS_ADDED.get(metric, {}), **(options or {})}


def settings_signature(settings: EvalSettings, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a calibration is fitted for besides its metric and models: the settings that change values
    (declared so in :class:`EvalSettings`), and the metric's own options (``Metric.config()``) when it
    has any."""
    signature = settings.signature()
    if options:
        signature["options"] = dict(options)
    return signature


def _logit(values: np.ndarray) -> np.ndarray:
    v = np.clip(values, _EPS, 1.0 - _EPS)
    return np.log(v / (1.0 - v))


def best_threshold(values: Sequence[float], labels: Sequence[float]) -> float | None:
    """The cut (midway between neighbouring distinct values) with the highest balanced accuracy;
    the lowest such cut on ties. None unless both classes are present."""
    v, y = np.asarray(values, dtype=float), np.asarray(labels, dtype=float)
    if not ((y == 1).any() and (y == 0).any()):
        return None
    distinct = np.unique(v)
    cuts = np.r_[distinct[0] - _EPS, (distinct[1:] + distinct[:-1]) / 2.0, distinct[-1] + _EPS]
    accs = np.array([balanced_accuracy(v, y, float(c)) for c in cuts])
    return float(cuts[int(np.argmax(accs))])


def fit_platt(values: Sequence[float], labels: Sequence[float], iterations: int = 100) -> tuple[float, float]:
    """Logistic regression of the labels on logit(value), by Newton's method with a small ridge term
    (so perfectly separated labels still give finite coefficients)."""
    x = _logit(np.asarray(values, dtype=float))
    y = np.asarray(labels, dtype=float)
    X = np.c_[x, np.ones_like(x)]
    w = np.zeros(2)
    ridge = 1e-3 * np.eye(2)
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(X @ w)))
        grad = X.T @ (p - y) + ridge @ w
        hess = X.T @ (X * (p * (1 - p))[:, None]) + ridge
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return float(w[0]), float(w[1])


def out_of_fold_predictions(values: Sequence[float], labels: Sequence[float], folds: int = 5,
                            seed: int = 0) -> np.ndarray | None:
    """Each item's prediction (value >= threshold) by a threshold fitted on the other folds (stratified
    folds); None when a class has fewer items than ``folds``."""
    v, y = np.asarray(values, dtype=float), np.asarray(labels, dtype=float)
    if min(int((y == 1).sum()), int((y == 0).sum())) < folds:
        return None
    rng = np.random.default_rng(seed)
    fold = np.empty(len(v), dtype=int)
    for label in (0.0, 1.0):
        idx = np.flatnonzero(y == label)
        rng.shuffle(idx)
        fold[idx] = np.arange(len(idx)) % folds
    predicted = np.zeros(len(v), dtype=bool)
    for k in range(folds):
        train = fold != k
        predicted[~train] = v[~train] >= best_threshold(v[train], y[train])
    return predicted


def cross_validated_accuracy(values: Sequence[float], labels: Sequence[float], folds: int = 5,
                             seed: int = 0) -> float | None:
    """Balanced accuracy of the out-of-fold predictions: thresholds fitted on k-1 folds, applied to
    the held-out one."""
    predicted = out_of_fold_predictions(values, labels, folds, seed)
    if predicted is None:
        return None
    return balanced_accuracy(predicted.astype(float), labels, 0.5)


@dataclass
class Calibration:
    metric: str
    models: dict[str, str]  # role -> model identity, for every role the metric uses
    settings: dict[str, Any]  # settings_signature of the run it was fitted on
    threshold: float
    platt: tuple[float, float]
    n: int
    n_positive: int
    quality: dict[str, Any] = field(default_factory=dict)  # balanced accuracy (in-sample, cross-validated), AUC
    source: dict[str, Any] = field(default_factory=dict)  # data set, labels, date

    def probability(self, value: float) -> float:
        a, b = self.platt
        z = a * float(_logit(np.array([value]))[0]) + b
        return 1.0 / (1.0 + math.exp(-z))

    def applies_to(self, metric: str, models: dict[str, str], settings: dict[str, Any]) -> bool:
        return self.metric == metric and self.models == models and self.settings == settings

    def fitted_on(self) -> str:
        """Where the calibration was fitted, as a run's line shows it: the labelled dataset, or the run
        folder and labels file (``calibrate --run``), and, when it rests on fewer labels of a class than
        the default minimum (--min-per-class was lowered), how few."""
        from offline_eval.thresholds import MIN_LABELS_PER_CLASS

        source = self.source
        if source.get("dataset"):
            where = str(source["dataset"])
        elif source.get("run"):
            where = f"run {source['run']}" + (f", labels {source['labels']}" if source.get("labels") else "")
        else:
            where = "labels of unrecorded origin"
        yes, no = self.n_positive, self.n - self.n_positive
        if min(yes, no) < MIN_LABELS_PER_CLASS:
            where += f", {yes} yes and {no} no, below the default minimum of {MIN_LABELS_PER_CLASS} per class"
        return where

    def describe(self) -> dict[str, Any]:
        """What a run records about the calibration it used; ``fitted_on`` is what its line says of it."""
        return {"threshold": round(self.threshold, 6), "platt": [round(x, 6) for x in self.platt], "n": self.n,
                "n_positive": self.n_positive, "quality": self.quality, "source": self.source,
                "fitted_on": self.fitted_on()}

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["platt"] = list(self.platt)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Calibration":
        settings = dict(data["settings"])
        # fitted before answer_correctness' weights became its own option: they stood among every
        # metric's settings
        weights = settings.pop("answer_correctness_weights", None)
        if weights is not None and data["metric"] == "answer_correctness":
            settings.setdefault("options", {"weights": list(weights)})
        if data["metric"] in OPTIONS_ADDED:
            settings["options"] = recorded_options(data["metric"], settings.get("options"))
        return cls(metric=data["metric"], models=dict(data["models"]), settings=settings,
                   threshold=float(data["threshold"]), platt=(float(data["platt"][0]), float(data["platt"][1])),
                   n=int(data["n"]), n_positive=int(data["n_positive"]), quality=dict(data.get("quality", {})),
                   source=dict(data.get("source", {})))


def fit_calibration(metric: str, models: dict[str, str], settings: EvalSettings, values: Sequence[float],
                    labels: Sequence[float], *, source: dict[str, Any] | None = None, folds: int = 5,
                    seed: int = 0, options: Mapping[str, Any] | None = None) -> Calibration:
    """Threshold and Platt scaling of ``metric``'s values against binary ``labels``, for these models,
    settings and metric ``options``."""
    v, y = np.asarray(values, dtype=float), np.asarray(labels, dtype=float)
    if not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("calibration needs binary labels (name the positive values with --positive)")
    threshold = best_threshold(v, y)
    if threshold is None:
        raise ValueError("calibration needs both positive and negative labelled samples")
    quality = {"balanced_accuracy_in_sample": balanced_accuracy(v, y, threshold),
               "balanced_accuracy_cross_validated": cross_validated_accuracy(v, y, folds, seed),
               "balanced_accuracy_at_0_5": balanced_accuracy(v, y, 0.5), "roc_auc": roc_auc(v, y),
               "folds": folds}
    return Calibration(metric, dict(models), settings_signature(settings, options), threshold, fit_platt(v, y),
                       int(v.size), int((y == 1).sum()), quality,
                       {**(source or {}), "date": datetime.now(timezone.utc).isoformat(timespec="seconds")})


# --- files ---------------------------------------------------------------------------------------
def read_calibrations(path: str | os.PathLike[str]) -> list[Calibration]:
    """The calibrations in a file; [] when there is none. A damaged file is an error naming it."""
    p = Path(path)
    if p.is_dir():
        p = p / CALIBRATION_FILE
    if not p.exists():
        return []
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        return [Calibration.from_dict(item) for item in data.get("calibrations", [])]
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"{p}: not a readable calibration file ({exc}); refit it with `offline-eval calibrate`") from None


def write_calibration(path: str | os.PathLike[str], calibration: Calibration) -> Path:
    """Add ``calibration`` to the file at ``path`` (a folder: its calibration file), replacing the one
    fitted for the same metric, models and settings."""
    p = Path(path)
    if p.is_dir():
        p = p / CALIBRATION_FILE
    kept = [c for c in read_calibrations(p)
            if not c.applies_to(calibration.metric, calibration.models, calibration.settings)]
    payload = {"format": FORMAT, "calibrations": [c.to_dict() for c in kept + [calibration]]}
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(p)
    return p


def find_calibration(calibrations: Iterable[Calibration], metric: str, models: dict[str, str],
                     settings: EvalSettings, options: Mapping[str, Any] | None = None) -> Calibration | None:
    """The calibration fitted for exactly this metric, these models, settings and metric options."""
    signature = settings_signature(settings, options)
    for c in calibrations:
        if c.applies_to(metric, models, signature):
            return c
    return None


def annotate_row(row: ResultRow, chosen: Mapping[str, Calibration | None]) -> ResultRow:
    """``row`` with each calibrated metric's reading added: a scored value gets
    ``metadata.calibrated = {"probability": ..., "positive": value >= threshold}``."""
    readings = {}
    for name, calibration in chosen.items():
        score = row.score(name)
        if calibration is None or score is None or score.value is None:
            continue
        readings[name] = score.with_metadata(calibrated={
            "probability": round(calibration.probability(score.value), 6),
            "positive": score.value >= calibration.threshold})
    return row.with_scores(readings) if readings else row


def calibration_entries(chosen: Mapping[str, Calibration | None],
                        values: Mapping[str, Sequence[float | None]]) -> dict[str, dict[str, Any] | None]:
    """Each model-based metric's ``calibration`` entry of summary.json: which calibration was used and
    the share of its samples at or above the threshold, or None when it had none for these models."""
    entries: dict[str, dict[str, Any] | None] = {}
    for name, calibration in chosen.items():
        if calibration is None:
            entries[name] = None
            continue
        scored = [v for v in values.get(name, ()) if v is not None]
        positives = sum(v >= calibration.threshold for v in scored)
        entries[name] = {**calibration.describe(), "positive_share": positives / len(scored) if scored else None}
    return entries
