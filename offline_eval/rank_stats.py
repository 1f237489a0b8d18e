"""Rank statistics of scores against labels: average ranks, ROC AUC, Spearman's rho, balanced accuracy.

Pure numpy, no scipy/sklearn. They sit below both of their readers: the ``agreement`` command reports
them with bootstrap intervals (:mod:`offline_eval.people.agreement`), and a calibration fits its threshold and
reports its quality with them (:mod:`offline_eval.people.calibration`), which every run reads; so a run never
imports the agreement command for them.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

__all__ = ["rankdata", "roc_auc", "spearman", "balanced_accuracy"]


def rankdata(values: Sequence[float]) -> np.ndarray:
    """1-based ranks with ties given the average of the ranks they span (scipy's "average")."""
    x = np.asarray(values, dtype=float)
    n = x.size
    if n == 0:
        return np.zeros(0)
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    # Boundaries of runs of equal values in the sorted order.
    starts = np.r_[0, np.flatnonzero(sorted_x[1:] != sorted_x[:-1]) + 1]
    ends = np.r_[starts[1:], n]
    avg = (starts + ends + 1) / 2.0  # mean of 1-based ranks start+1 .. end
    ranks = np.empty(n)
    ranks[order] = np.repeat(avg, ends - starts)
    return ranks


def roc_auc(scores: Sequence[float], labels: Sequence[float]) -> float | None:
    """Area under the ROC curve of ``scores`` for binary ``labels`` (1 = positive).

    Computed as the Mann-Whitney U statistic from average ranks, so a tie between a positive and a
    negative counts one half. None when either class is empty.
    """
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=float)
    pos = y == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = rankdata(s)
    u = ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation with average ranks for ties; None when either side is constant
    or there are fewer than two items."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.size != b.size:
        raise ValueError("spearman needs two sequences of the same length")
    if a.size < 2:
        return None
    ra, rb = rankdata(a), rankdata(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = math.sqrt(float((ra * ra).sum()) * float((rb * rb).sum()))
    if denom == 0.0:
        return None
    return float((ra * rb).sum() / denom)


def balanced_accuracy(scores: Sequence[float], labels: Sequence[float], threshold: float = 0.5) -> float | None:
    """Mean of the true-positive and true-negative rates, predicting positive when score >= threshold.

    None when either class is empty.
    """
    s = np.asarray(scores, dtype=float)
    y = np.asarray(labels, dtype=float) == 1
    if y.all() or (~y).all():
        return None
    pred = s >= threshold
    tpr = float(pred[y].mean())
    tnr = float((~pred[~y]).mean())
    return (tpr + tnr) / 2.0
