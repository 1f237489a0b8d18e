"""What your experts would say: each metric's human rate estimated from the judge's scores on every row
and expert labels on a few of them (docs/estimate.md).

A run gives the judge's score ``f`` on all N scored rows; a labels file (:mod:`offline_eval.people.labels`) gives
what people answered to the metric's question (``Metric.question_for_people``) on n of them. For each metric:

* ``judge_mean``: the mean of ``f`` over the N rows: what the judge says, on its own scale;
* ``labels_only``: the share of yes among the n labelled rows, with its Wilson 95% interval;
* ``ppi``: the prediction-powered estimate of the share of yes the people would give over the N rows
  (PPI++ with power tuning, Angelopoulos, Duchi and Zrnic 2023), with its 95% interval:

      theta = lambda * mean_U(g) + mean_L(Y - lambda * g),
      lambda = Cov_L(Y, g) / ((1 + n / N_U) * Var(g)), clipped to [0, 1],

  L the n labelled rows, U the N_U = N - n others, ``g`` the prediction. By default (``raw``) ``g`` is the
  judge's score itself. ``calibrated``: a Platt map of the score fitted on the labels, cross-fitted: the
  labelled rows are cut into 5 stratified folds, each fold's rows get the map fitted on the other four,
  and each unlabelled row the average of the five maps, so no label is corrected with a map fitted on it
  (cross-prediction-powered inference, Zrnic and Candès 2024) and the estimate stays unbiased.
  ``benchmarks/estimate.py`` measured both on every shared labelled set (docs/estimate.md, "Measured"):
  the calibrated prediction's estimate is closer and its interval narrower, but on RGB, where the judge
  separates the labels almost perfectly, a map fitted on a few dozen labels is too sure of itself and
  its interval covers too little; the raw score's interval kept its coverage everywhere, so it is the
  default.

The intervals are for the rate over the run's N rows (what the experts would say about this data set),
the labelled rows being a simple random sample of them. That is a finite population, so both intervals
carry the finite-population correction: labelling every row leaves no uncertainty, and a quarter of
the rows labelled is not treated as a sample from an endless stream (that would over-cover). Labels
only: Wilson's score interval, because with tens of labels and rates near 0 or 1 (common among the
shared labelled sets: docs/estimate.md, "The estimator") the normal interval undercovers and collapses to a point when every label
agrees. PPI: the same score form (:func:`ppi_mean`): the estimate equals the difference estimator
mean_L(Y - b·g) + b·mean_N(g), b = lambda·N/N_U, whose variance (1 - n/N)·S²/n is written with the 0/1
label's variance theta·(1 - theta) at the rate being tested, and inverted as Wilson's is; with lambda = 0
it is exactly the labels' Wilson interval. When every label is the same answer the judge's errors
cannot be measured and the labels' Wilson interval is given.

Label the samples in the order ``offline-eval review`` draws them, not the ones that look interesting:
PPI is valid only for a simple random sample of the scored rows.

Labels: each annotator's latest label counts (a later line corrects an earlier one); ``unsure`` counts
in no estimate; with several annotators a row's label is the majority of their yes/no answers, and a
row whose annotators split evenly is left out (counted as ``tie``). Cohen's kappa is reported for each
pair of annotators on the rows both answered yes or no (:func:`offline_eval.people.labels.cohen_kappa`, the
review page's). A label whose id is not a scored row of the run, whose metric the run did not score, or
that names another run's fingerprint (an earlier run written into the folder) is counted and
reported, never used.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from offline_eval.people.calibration import fit_platt
from offline_eval.data.schema import DataError
from offline_eval.people.labels import (
    LABELS_FILE, Label, cohen_kappa, latest, questions_for_people, read_labels, shared_labels,
)
from offline_eval.metrics import is_higher_better
from offline_eval.records import RunSummary
from offline_eval.text import counted
from offline_eval.runlog import RESULTS, RunLogError, read_results, run_info, summary_dict

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile
PREDICTIONS = ("raw", "calibrated")
DEFAULT_PREDICTION = "raw"  # its interval keeps its coverage on every shared set; calibrated's not on RGB
FOLDS = 5
FOLD_SEED = 0
UNNAMED = "(unnamed)"  # the annotator of labels that name none
FEW_LABELS = 30  # below this many labels the PPI interval is flagged (benchmarks/estimate.py measures n >= 30)
_EPS = 1e-4


# --- intervals -------------------------------------------------------------------------------------
def wilson_interval(successes: float, n: int, z: float = Z95, *, population: int | None = None
                    ) -> tuple[float, float] | None:
    """Wilson score interval of a proportion ``successes / n``; None when ``n`` is 0. ``population``:
    the n items are a simple random sample of that many, and the interval is for the share among all
    of them (finite-population correction: n counts as n·(N−1)/(N−n); a point when n = N)."""
    if n <= 0:
        return None
    p = successes / n
    if population is not None and n >= population:
        return (p, p)
    m = n if population is None else n * (population - 1) / (population - n)
    denom = 1.0 + z * z / m
    centre = (p + z * z / (2 * m)) / denom
    half = z * math.sqrt(p * (1 - p) / m + z * z / (4 * m * m)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def normal_interval(value: float, se: float, z: float = Z95) -> tuple[float, float]:
    """``value`` ± z·``se``, clipped to [0, 1] (a rate cannot leave it)."""
    return (max(0.0, value - z * se), min(1.0, value + z * se))


# --- the estimators --------------------------------------------------------------------------------
@dataclass(frozen=True)
class RateEstimate:
    """One estimate of a rate with its 95% interval (None where it cannot be computed)."""

    value: float | None
    ci95: tuple[float, float] | None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, digits: int = 6) -> dict[str, Any]:
        def r(x: Any) -> Any:
            return round(float(x), digits) if isinstance(x, (float, np.floating)) else x
        return {"value": r(self.value), "ci95": [r(self.ci95[0]), r(self.ci95[1])] if self.ci95 else None,
                **{k: r(v) for k, v in self.extra.items()}}


def labels_only(y: Sequence[float], population: int | None = None, *, interval: str = "wilson") -> RateEstimate:
    """The share of yes among the labels, with its Wilson interval (``interval="normal"``: the normal
    one) for the share among ``population`` rows the labelled ones are a random sample of (None: of
    an unlimited population)."""
    arr = np.asarray(y, dtype=float)
    if arr.size == 0:
        return RateEstimate(None, None, {"interval": interval})
    p, n = float(arr.mean()), int(arr.size)
    if interval == "wilson":
        return RateEstimate(p, wilson_interval(float(arr.sum()), n, population=population), {"interval": interval})
    if n < 2:
        return RateEstimate(p, None, {"interval": interval})
    fpc = 1.0 - n / population if population else 1.0
    return RateEstimate(p, normal_interval(p, math.sqrt(max(fpc, 0.0) * float(arr.var(ddof=1)) / n)),
                        {"interval": interval})


def ppi_mean(y: Sequence[float], g_labelled: Sequence[float], g_unlabelled: Sequence[float], *,
             clip: bool = True, finite: bool = True, form: str = "score") -> RateEstimate:
    """PPI++ estimate of the mean of Y with power tuning (see the module docstring).

    ``y`` and ``g_labelled`` are the labels and the predictions on the n labelled rows, ``g_unlabelled``
    the predictions on the other N_U rows; lambda = Cov(Y, g) / ((1 + n/N_U)·Var(g)), Var over all
    rows, clipped to [0, 1] (``clip``).

    ``finite`` (the default): the interval is for the mean of Y over the N = n + N_U rows themselves.
    The estimate is the difference estimator mean_L(Y − b·g) + b·mean_N(g) with b = lambda·N/N_U (the
    same number), whose variance under simple random sampling is (1 − n/N)·S²(Y − b·g)/n. ``form``:
    ``normal`` estimates S² from the labelled residuals; ``score`` (the default, for 0/1 labels) uses
    that a 0/1 label's variance is theta·(1 − theta) at the true rate theta, so S² = theta·(1 − theta)
    − 2b·Cov(Y, g) + b²·Var(g), and inverts the test as Wilson's interval does: with lambda = 0 it is
    the labels' own Wilson interval, and it does not collapse on a rate near 0 or 1.
    ``finite=False``: PPI's interval, for the mean of the population the rows were drawn from:
    lambda²·Var_U(g)/N_U + Var_L(Y − lambda·g)/n."""
    y, gl, gu = (np.asarray(a, dtype=float) for a in (y, g_labelled, g_unlabelled))
    n, n_u = int(y.size), int(gu.size)
    if n == 0:
        return RateEstimate(None, None, {"lambda": None})
    if n_u == 0:  # every row is labelled: the labels are the answer
        value = float(y.mean())
        ci = (value, value) if finite else (normal_interval(value, math.sqrt(float(y.var()) / n)) if n > 1 else None)
        return RateEstimate(value, ci, {"lambda": 0.0})
    pooled = np.concatenate([gl, gu])
    var = float(pooled.var())
    cov = float(((y - y.mean()) * (gl - gl.mean())).mean())
    lam = cov / ((1.0 + n / n_u) * var) if var > 0 else 0.0
    if clip:
        lam = min(1.0, max(0.0, lam))
    value = lam * float(gu.mean()) + float((y - lam * gl).mean())
    if n < 2:
        return RateEstimate(value, None, {"lambda": lam})
    if not finite:
        se2 = float((y - lam * gl).var()) / n + lam * lam * float(gu.var()) / n_u
        return RateEstimate(value, normal_interval(value, math.sqrt(se2)), {"lambda": lam})
    N = n + n_u
    b = lam * N / n_u
    if form == "score" and np.isin(y, (0.0, 1.0)).all():
        c = float(((y - y.mean()) * (gl - gl.mean())).sum()) / (n - 1)
        rest = b * b * float(gl.var(ddof=1)) - 2.0 * b * c
        ci = _score_interval(value, rest, n * (N - 1) / (N - n))
        if ci is not None:
            return RateEstimate(value, ci, {"lambda": lam})
    se2 = (1.0 - n / N) * float((y - b * gl).var(ddof=1)) / n
    return RateEstimate(value, normal_interval(value, math.sqrt(se2)), {"lambda": lam})


def _score_interval(value: float, rest: float, m: float, z: float = Z95) -> tuple[float, float] | None:
    """The thetas with (value − theta)² <= z²/m · (theta·(1 − theta) + rest), clipped to [0, 1]; None when
    that set is empty or leaves out ``value`` itself (a judge so sure that the variance it leaves is
    negative near the estimate: the normal interval is used then)."""
    k = z * z / m
    a, bq, c = 1.0 + k, -(2.0 * value + k), value * value - k * rest
    disc = bq * bq - 4.0 * a * c
    if disc <= 0:
        return None
    root = math.sqrt(disc)
    lo, hi = (-bq - root) / (2 * a), (-bq + root) / (2 * a)
    if not lo <= value <= hi:
        return None
    return (max(0.0, lo), min(1.0, hi))


def _logit(values: np.ndarray) -> np.ndarray:
    v = np.clip(values, _EPS, 1.0 - _EPS)
    return np.log(v / (1.0 - v))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def stratified_folds(y: np.ndarray, folds: int, seed: int = FOLD_SEED) -> np.ndarray:
    """A fold number per labelled row: each class dealt round-robin over the folds in a seeded order
    (as :func:`offline_eval.people.calibration.out_of_fold_predictions` cuts them)."""
    rng = np.random.default_rng(seed)
    fold = np.empty(y.size, dtype=int)
    for label in (0.0, 1.0):
        idx = np.flatnonzero(y == label)
        rng.shuffle(idx)
        fold[idx] = np.arange(idx.size) % folds
    return fold


def cross_fitted(f_labelled: Sequence[float], y: Sequence[float], f_unlabelled: Sequence[float], *,
                 folds: int = FOLDS, seed: int = FOLD_SEED) -> tuple[np.ndarray, np.ndarray] | None:
    """Cross-fitted calibrated predictions P(yes | score): each labelled row by the Platt map fitted on
    the other folds, each unlabelled row by the mean of the fold maps. None when a class has fewer than
    two labelled rows (too few to fit a map on every fold's complement)."""
    fl, yy, fu = (np.asarray(a, dtype=float) for a in (f_labelled, y, f_unlabelled))
    k = min(folds, int((yy == 1).sum()), int((yy == 0).sum()))
    if k < 2:
        return None
    fold = stratified_folds(yy, k, seed)
    gl, gu = np.empty(fl.size), np.zeros(fu.size)
    xl, xu = _logit(fl), _logit(fu)
    for j in range(k):
        train = fold != j
        a, b = fit_platt(fl[train], yy[train])
        gl[~train] = _sigmoid(a * xl[~train] + b)
        gu += _sigmoid(a * xu + b) / k
    return gl, gu


def estimate_rate(f_labelled: Sequence[float], y: Sequence[float], f_unlabelled: Sequence[float], *,
                  prediction: str = DEFAULT_PREDICTION, folds: int = FOLDS, seed: int = FOLD_SEED,
                  finite: bool = True, interval: str = "wilson", form: str = "score"
                  ) -> tuple[RateEstimate, RateEstimate]:
    """(labels only, PPI) for labels ``y`` on rows with scores ``f_labelled`` and the scores
    ``f_unlabelled`` of the other rows. ``prediction``: ``calibrated`` (cross-fitted Platt map; the raw
    score where a class has fewer than two labels) or ``raw``. ``finite``: intervals for the rate over
    these rows (else over the population they were drawn from); ``interval``: of the labels alone,
    ``wilson`` or ``normal``; ``form``: of PPI's (:func:`ppi_mean`)."""
    if prediction not in PREDICTIONS:
        raise ValueError(f"unknown prediction {prediction!r} ({', '.join(PREDICTIONS)})")
    yy = np.asarray(y, dtype=float)
    population = yy.size + len(f_unlabelled) if finite else None
    plain = labels_only(yy, population, interval=interval)
    if yy.size and (yy == yy[0]).all():  # one answer only: the judge's errors cannot be measured
        shown = labels_only(yy, population) if interval != "wilson" else plain
        return plain, RateEstimate(shown.value, shown.ci95, {"lambda": 0.0, "prediction": "none",
                                                             "note": "every label is the same answer"})
    used = prediction
    gl, gu = np.asarray(f_labelled, dtype=float), np.asarray(f_unlabelled, dtype=float)
    if prediction == "calibrated":
        fitted = cross_fitted(gl, yy, gu, folds=folds, seed=seed)
        if fitted is None:
            used = "raw"
        else:
            gl, gu = fitted
    ppi = ppi_mean(yy, gl, gu, finite=finite, form=form)
    return plain, RateEstimate(ppi.value, ppi.ci95, {**ppi.extra, "prediction": used})


# --- agreement between annotators ------------------------------------------------------------------
@dataclass
class MetricLabels:
    """One metric's labels, combined per row."""

    rows: dict[str, float] = field(default_factory=dict)  # id -> 1.0 (yes) / 0.0 (no), the majority
    by_annotator: dict[str, dict[str, bool]] = field(default_factory=dict)  # annotator -> id -> yes/no
    counts: Counter[str] = field(default_factory=Counter)  # rows left out: unsure, tie

    def kappas(self) -> list[dict[str, Any]]:
        out = []
        for first, second in combinations(sorted(self.by_annotator), 2):
            a, b = self.by_annotator[first], self.by_annotator[second]
            n = len(shared_labels(a, b))
            if not n:
                continue
            k = cohen_kappa(a, b)  # the review page's kappa (offline_eval.people.labels); None on too few
            out.append({"annotators": [first, second], "n": n, "kappa": None if k is None else round(k, 6)})
        return out


def combine_labels(labels: Iterable[Label]) -> dict[str, MetricLabels]:
    """metric -> its labels per row: each annotator's latest label, unsure left out, the majority of the
    annotators' yes/no (an even split left out, counted as ``tie``; a row with only unsure labels is
    counted as ``unsure``)."""
    votes: dict[str, dict[str, list[bool | None]]] = defaultdict(lambda: defaultdict(list))
    out: dict[str, MetricLabels] = defaultdict(MetricLabels)
    for (metric, sample_id, annotator), label in latest(labels).items():
        votes[metric][sample_id].append(label.value)
        if label.value is not None:
            out[metric].by_annotator.setdefault(annotator or UNNAMED, {})[sample_id] = label.value
    for metric, rows in votes.items():
        combined = out[metric]
        for sample_id, answers in rows.items():
            yes, no = sum(v is True for v in answers), sum(v is False for v in answers)
            if yes == no:
                combined.counts["unsure" if yes == 0 else "tie"] += 1
            else:
                combined.rows[sample_id] = 1.0 if yes > no else 0.0
    return dict(out)


# --- a run folder ----------------------------------------------------------------------------------
@dataclass
class RunValues:
    """What the estimate needs of a run folder: each metric's value per row (None: unscored)."""

    path: Path
    metrics: list[str]
    values: dict[str, dict[str, float | None]]  # metric -> id -> value
    ids: list[str]
    higher_is_better: dict[str, bool]
    fingerprint: str | None = None
    questions: dict[str, str] = field(default_factory=dict)  # metric -> its question for people


def _read_or_empty(read: Any, path: Path) -> dict[str, Any]:
    """run.json or summary.json (``read``) of the folder, {} when it has none; a damaged one is a DataError."""
    try:
        return read(path) or {}
    except RunLogError as exc:
        raise DataError(str(exc)) from None


def read_run(run_dir: str | Path) -> RunValues:
    """Each metric's per-row values from a run folder's results.jsonl (read as :mod:`offline_eval.runlog`
    reads it: a line cut short by a kill is skipped, any other bad line is a DataError naming it), its
    metrics from run.json (else summary.json, else the rows)."""
    path = Path(run_dir)
    if not (path / RESULTS).is_file():
        raise DataError(f"not a run folder (no {RESULTS})", source=str(path))
    fingerprint_info = _read_or_empty(run_info, path)
    summary = RunSummary.from_dict(_read_or_empty(summary_dict, path))
    declared = fingerprint_info.get("metrics") or summary.run_metrics
    metrics = [str(m) for m in declared] if isinstance(declared, list) else []
    values: dict[str, dict[str, float | None]] = defaultdict(dict)
    ids: list[str] = []
    try:
        for row in read_results(path):
            ids.append(row.id)
            for name, score in row.scores.items():
                if name not in metrics:
                    metrics.append(name)
                values[name][row.id] = score.value
    except RunLogError as exc:
        raise DataError(str(exc)) from None
    return RunValues(path, metrics, {m: dict(values.get(m, {})) for m in metrics}, ids,
                     {name: is_higher_better(name, summary.metrics.get(name)) for name in metrics},
                     fingerprint_info.get("fingerprint") or summary.info.get("fingerprint"),
                     questions_for_people(fingerprint_info))


def estimate_metric(metric: str, values: Mapping[str, float | None], combined: MetricLabels, *,
                    higher_is_better: bool = True, prediction: str = DEFAULT_PREDICTION,
                    folds: int = FOLDS, seed: int = FOLD_SEED, question: str | None = None) -> dict[str, Any]:
    """One metric's figures (the shape ``offline-eval estimate --json`` prints for it). ``values``: the
    run's rows (id -> value, None unscored) in the run's order."""
    scored = {k: v for k, v in values.items() if v is not None}
    excluded = Counter(combined.counts)
    for sample_id in combined.rows:
        if sample_id not in values:
            excluded["unknown_id"] += 1
        elif values[sample_id] is None:
            excluded["unscored"] += 1
    labelled = [k for k in scored if k in combined.rows]  # the run's order: the folds do not depend on the file's
    unlabelled = [v for k, v in scored.items() if k not in combined.rows]
    f_lab = [scored[k] for k in labelled]
    y = [combined.rows[k] for k in labelled]
    plain, ppi = estimate_rate(f_lab, y, unlabelled, prediction=prediction, folds=folds, seed=seed)
    judge = float(np.mean(list(scored.values()))) if scored else None
    ppi_figures = ppi.to_dict()
    if 0 < len(labelled) < FEW_LABELS:
        few = (f"only {counted(len(labelled), 'label')}: the interval is a large-sample approximation, measured from 30 labels up "
               "(docs/estimate.md)")
        ppi_figures["note"] = "; ".join(filter(None, [ppi_figures.get("note"), few]))
    return {"n_labelled": len(labelled), "n": len(scored),
            "judge_mean": None if judge is None else round(judge, 6),
            "labels_only": plain.to_dict(), "ppi": ppi_figures,
            "kappa": combined.kappas(), "annotators": sorted(combined.by_annotator),
            "n_yes": int(sum(y)), "excluded": dict(sorted(excluded.items())),
            "question": question, "higher_is_better": higher_is_better}


@dataclass
class RunEstimates:
    estimates: dict[str, dict[str, Any]]  # metric -> estimate_metric's figures
    labels_file: str
    n_lines: int
    unknown_metrics: dict[str, int]  # metric named by labels but not scored by the run -> labels
    other_run: int  # labels that name another run's fingerprint (left out unless any_run)

    def source(self) -> dict[str, Any]:
        return {"labels": self.labels_file, "labels_read": self.n_lines, "unknown_metrics": self.unknown_metrics,
                "labels_of_another_run": self.other_run}


def estimate_run(run_dir: str | Path, labels_path: str | Path | None = None, *,
                 prediction: str = DEFAULT_PREDICTION, folds: int = FOLDS, seed: int = FOLD_SEED,
                 run: RunValues | None = None, any_run: bool = False) -> RunEstimates:
    """Every labelled metric's estimates for a run folder (labels: ``labels_path``, by default the
    folder's labels.jsonl). A bad labels line is a DataError naming the file and the line. A label that
    names another run's fingerprint (``run``: given on an earlier run written into the folder, whose
    samples may differ under the same ids) is left out and counted as ``other_run``, as the review page
    leaves it out, unless ``any_run`` (that run scored the same samples)."""
    run = run or read_run(run_dir)
    path = Path(labels_path) if labels_path is not None else Path(run_dir) / LABELS_FILE
    labels = read_labels(path)
    other: Counter[str] = Counter()
    if not any_run and run.fingerprint:
        for lab in labels:
            if lab.run and lab.run != run.fingerprint:
                other[lab.metric] += 1
        labels = [lab for lab in labels if not (lab.run and lab.run != run.fingerprint)]
    combined = combine_labels(labels)
    unknown = {m: sum(1 for lab in labels if lab.metric == m) for m in sorted(combined) if m not in run.metrics}
    estimates = {}
    for m in run.metrics:
        if m in combined:
            estimates[m] = estimate_metric(m, run.values[m], combined[m], higher_is_better=run.higher_is_better[m],
                                           prediction=prediction, folds=folds, seed=seed,
                                           question=run.questions.get(m))
            if other.get(m):
                estimates[m]["excluded"] = dict(sorted({**estimates[m]["excluded"], "other_run": other[m]}.items()))
    return RunEstimates(estimates, str(path), len(labels) + sum(other.values()), unknown, sum(other.values()))


def summary_section(run_dir: str | Path, **options: Any) -> dict[str, Any]:
    """What summary.json holds of a run folder's labels.jsonl: ``{"estimates": ..., "estimates_source":
    ...}``, or ``{"estimates_error": message}`` when the labels cannot be read (a run is not failed
    for its labels), or nothing when the folder has no labels file."""
    if not (Path(run_dir) / LABELS_FILE).exists():
        return {}
    try:
        result = estimate_run(run_dir, **options)
    except (DataError, ValueError) as exc:
        return {"estimates_error": str(exc)}
    return {"estimates": result.estimates, "estimates_source": result.source()}
