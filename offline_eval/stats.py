"""Summary statistics shared by run summaries, comparisons and the retriever benchmark.

Bootstrap resampling uses a fixed seed so the same scores always give the same interval.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from offline_eval.records import MetricSummary

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20240531
_BOOTSTRAP_CELLS = 8_000_000  # indices drawn at once by bootstrap_ci (64 MB)


def bootstrap_ci(values: Sequence[float], *, resamples: int = DEFAULT_RESAMPLES,
                 seed: int = DEFAULT_SEED, level: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean; None for an empty sample."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return None
    if data.size == 1:
        return (float(data[0]), float(data[0]))
    rng = np.random.default_rng(seed)
    # Resampled in blocks so memory stays bounded (2000 resamples of 100k scores at once would take
    # 1.6 GB); small samples keep the single draw, and so their exact intervals.
    block = max(1, min(resamples, _BOOTSTRAP_CELLS // data.size))
    means = np.concatenate([data[rng.integers(0, data.size, size=(min(block, resamples - start), data.size))]
                            .mean(axis=1) for start in range(0, resamples, block)])
    alpha = (1.0 - level) / 2.0
    return (float(np.quantile(means, alpha)), float(np.quantile(means, 1.0 - alpha)))


def summarize(values: Iterable[float | None], reasons: Iterable[str | None] = ()) -> MetricSummary:
    """Mean, sample standard deviation, bootstrap 95% interval and unscored counts (the statistics of a
    metric's summary.json entry; its direction and calibration are the run's to add)."""
    scored = [float(v) for v in values if v is not None]
    reason_counts = Counter(r for r in reasons if r)
    n_unscored = sum(reason_counts.values())
    if not scored:
        return MetricSummary(None, None, None, 0, n_unscored, dict(reason_counts))
    data = np.asarray(scored)
    std = float(data.std(ddof=1)) if data.size > 1 else 0.0
    return MetricSummary(float(data.mean()), std, bootstrap_ci(scored), len(scored), n_unscored,
                         dict(reason_counts))


@dataclass
class PairedComparison:
    delta: float  # mean(b - a)
    ci95: tuple[float, float]
    p_value: float  # two-sided
    n_pairs: int


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, resamples: int = DEFAULT_RESAMPLES,
                     seed: int = DEFAULT_SEED) -> PairedComparison:
    """Delta of means of paired scores (b - a) with a bootstrap interval and a two-sided p-value.

    The p-value is the share of resampled deltas on the far side of zero (doubled, capped at 1),
    the paired bootstrap test of Koehn (2004) as used in IR and MT evaluation.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError("paired scores need the same length")
    if x.size == 0:
        raise ValueError("no paired scores to compare")
    diff = y - x
    delta = float(diff.mean())
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, diff.size, size=(resamples, diff.size))].mean(axis=1)
    lo, hi = float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))
    if np.all(diff == 0):
        p = 1.0
    else:
        p = 2.0 * min(float(np.mean(means <= 0.0)), float(np.mean(means >= 0.0)))
        p = min(1.0, max(p, 1.0 / resamples))
    return PairedComparison(delta, (lo, hi), p, int(diff.size))


def randomization_test(a: Sequence[float], b: Sequence[float], *, resamples: int = DEFAULT_RESAMPLES,
                       seed: int = DEFAULT_SEED) -> float:
    """Two-sided paired randomisation (sign-flip) test p-value for mean(b - a) != 0."""
    diff = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    if diff.size == 0 or np.all(diff == 0):
        return 1.0
    observed = abs(diff.mean())
    rng = np.random.default_rng(seed)
    signs = rng.choice((-1.0, 1.0), size=(resamples, diff.size))
    extreme = np.sum(np.abs((signs * diff).mean(axis=1)) >= observed - 1e-12)
    return float((extreme + 1) / (resamples + 1))
