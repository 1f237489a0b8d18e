"""Agreement of a metric with human labels: are the numbers trustworthy?

Pure functions over scores and labels, no model and no scipy/sklearn:

* :func:`agreement_pointwise` -- balanced accuracy (metric thresholded), ROC AUC (Mann-Whitney, via
  average ranks) and Spearman's rho (Pearson on average ranks, ties handled), each with a stratified
  percentile-bootstrap 95% interval;
* :func:`agreement_pairwise` -- the share of pairs in which the metric prefers the item the human
  preferred (the WikiEval protocol of the Ragas paper), ties split by a seeded coin, with a bootstrap
  interval over pairs.

Every random draw uses a fixed seed, so the same inputs always give the same numbers.
:mod:`offline_eval.people.agreement.scoring` scores a labelled dataset with the engine and feeds these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from offline_eval.rank_stats import balanced_accuracy, rankdata, roc_auc, spearman
from offline_eval.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, bootstrap_means

__all__ = [
    "Interval", "PointwiseAgreement", "PairwiseAgreement", "rankdata", "roc_auc", "spearman",
    "balanced_accuracy", "agreement_pointwise", "agreement_pairwise",
]


@dataclass
class Interval:
    """A statistic with its percentile-bootstrap interval (None where undefined, and then ``undefined``
    says why, so that a report never shows a bare dash)."""

    value: float | None
    ci95: tuple[float, float] | None
    undefined: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value, "ci95": list(self.ci95) if self.ci95 else None}
        if self.value is None and self.undefined:
            out["undefined"] = self.undefined
        return out


@dataclass
class PointwiseAgreement:
    n: int
    n_positive: int
    n_negative: int
    threshold: float
    balanced_accuracy: Interval
    roc_auc: Interval
    spearman: Interval
    binary: bool  # labels are all 0/1 (balanced accuracy and AUC need that)
    confusion: dict[str, int] = field(default_factory=dict)  # tp, fp, tn, fn at the threshold

    def to_dict(self) -> dict[str, Any]:
        return {"protocol": "pointwise", "n": self.n, "n_positive": self.n_positive,
                "n_negative": self.n_negative, "threshold": self.threshold, "binary_labels": self.binary,
                "balanced_accuracy": self.balanced_accuracy.to_dict(), "roc_auc": self.roc_auc.to_dict(),
                "spearman": self.spearman.to_dict(), "confusion": dict(self.confusion)}


@dataclass
class PairwiseAgreement:
    n_pairs: int
    n_ties: int  # pairs the metric scored equal (split by a seeded coin)
    accuracy: Interval  # share of pairs where the metric prefers the human-preferred item

    def to_dict(self) -> dict[str, Any]:
        return {"protocol": "pairwise", "n_pairs": self.n_pairs, "n_ties": self.n_ties,
                "accuracy": self.accuracy.to_dict()}


def _percentile(values: list[float], level: float = 0.95) -> tuple[float, float] | None:
    if not values:
        return None
    alpha = (1.0 - level) / 2.0
    arr = np.asarray(values)
    return (float(np.quantile(arr, alpha)), float(np.quantile(arr, 1.0 - alpha)))


def agreement_pointwise(scores: Sequence[float], labels: Sequence[float], *, threshold: float = 0.5,
                        resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> PointwiseAgreement:
    """Agreement of per-item metric ``scores`` with human ``labels`` (same order, no missing values).

    Binary labels (all 0/1) give balanced accuracy at ``threshold``, ROC AUC and Spearman; other
    numeric labels (e.g. a 1-5 scale) give Spearman only. Intervals: percentile bootstrap with
    ``resamples`` draws from a generator seeded with ``seed``; with binary labels the draw is
    stratified (positives and negatives resampled separately, so every draw has both classes).
    """
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=float)
    if s.shape != y.shape or s.ndim != 1:
        raise ValueError("scores and labels must be two flat sequences of the same length")
    if not (np.isfinite(s).all() and np.isfinite(y).all()):
        raise ValueError("scores and labels must be finite numbers (exclude unscored items first)")
    binary = bool(s.size) and bool(np.isin(y, (0.0, 1.0)).all())
    n_pos = int((y == 1).sum()) if binary else 0
    n_neg = int((y == 0).sum()) if binary else 0

    bacc = balanced_accuracy(s, y, threshold) if binary else None
    auc = roc_auc(s, y) if binary else None
    rho = spearman(s, y) if s.size else None
    confusion: dict[str, int] = {}
    if binary:
        pred = s >= threshold
        pos = y == 1
        confusion = {"tp": int((pred & pos).sum()), "fp": int((pred & ~pos).sum()),
                     "tn": int((~pred & ~pos).sum()), "fn": int((~pred & pos).sum())}

    boot: dict[str, list[float]] = {"bacc": [], "auc": [], "rho": []}
    if s.size >= 2 and resamples > 0:
        rng = np.random.default_rng(seed)
        if binary and n_pos and n_neg:
            pos_idx, neg_idx = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
            draws = (np.concatenate([pos_idx[rng.integers(0, n_pos, n_pos)],
                                     neg_idx[rng.integers(0, n_neg, n_neg)]]) for _ in range(resamples))
        else:
            draws = (rng.integers(0, s.size, s.size) for _ in range(resamples))
        for idx in draws:
            bs, by = s[idx], y[idx]
            if binary:
                for key, fn in (("bacc", lambda: balanced_accuracy(bs, by, threshold)),
                                ("auc", lambda: roc_auc(bs, by))):
                    v = fn()
                    if v is not None:
                        boot[key].append(v)
            v = spearman(bs, by)
            if v is not None:
                boot["rho"].append(v)
    two_class = ("the labels are a scale, not 0/1: --positive reads them as yes/no" if not binary
                 else "every label is one class")
    constant = ("fewer than two scored items" if s.size < 2 else "every label is the same"
                if np.all(y == y[0]) else "every score is the same")
    return PointwiseAgreement(
        n=int(s.size), n_positive=n_pos, n_negative=n_neg, threshold=threshold,
        balanced_accuracy=_interval(bacc, boot["bacc"], two_class),
        roc_auc=_interval(auc, boot["auc"], two_class),
        spearman=_interval(rho, boot["rho"], constant),
        binary=binary, confusion=confusion)


def _interval(value: float | None, draws: list[float], undefined: str) -> Interval:
    if value is None:
        return Interval(None, None, undefined)
    return Interval(value, _percentile(draws))


def agreement_pairwise(pairs: Sequence[tuple[float, float]], *, resamples: int = DEFAULT_RESAMPLES,
                       seed: int = DEFAULT_SEED) -> PairwiseAgreement:
    """Share of pairs ``(score_of_human_preferred, score_of_other)`` where the first is higher.

    A tie is settled by a coin drawn from a generator seeded with ``seed`` (one draw per tied pair,
    in order), as the Ragas paper's WikiEval protocol splits ties at random. The interval is a
    percentile bootstrap over pairs (``resamples`` draws, the same seed).
    """
    arr = np.asarray(pairs, dtype=float).reshape(-1, 2) if len(pairs) else np.zeros((0, 2))
    if not np.isfinite(arr).all():
        raise ValueError("pair scores must be finite numbers (exclude unscored items first)")
    rng = np.random.default_rng(seed)
    ties = arr[:, 0] == arr[:, 1]
    wins = (arr[:, 0] > arr[:, 1]).astype(float)
    n_ties = int(ties.sum())
    if n_ties:
        wins[ties] = (rng.random(n_ties) < 0.5).astype(float)
    n = int(arr.shape[0])
    if n == 0:
        return PairwiseAgreement(0, 0, Interval(None, None, "no pair of differently labelled samples"))
    value = float(wins.mean())
    ci: tuple[float, float] | None = (value, value)
    if n >= 2 and resamples > 0:
        means = bootstrap_means(wins, resamples, rng)  # in blocks: memory bounded whatever n
        ci = _percentile(list(means))
    return PairwiseAgreement(n, n_ties, Interval(value, ci))
