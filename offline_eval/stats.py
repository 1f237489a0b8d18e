"""Summary statistics shared by run summaries, comparisons and the retriever benchmark.

Bootstrap resampling uses a fixed seed so the same scores always give the same interval. Every
bootstrap and permutation test draws its resamples in blocks of at most ``_BOOTSTRAP_CELLS`` draws,
so its memory does not grow with the number of rows times resamples. The blocks come one after the
other from the same generator, and numpy draws ``size=(k, n)`` then ``size=(m, n)`` exactly as it draws
``size=(k + m, n)``: the numbers do not depend on the block size.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from offline_eval.records import MetricSummary
from offline_eval.thresholds import MIN_PAIRS

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20240531
_BOOTSTRAP_CELLS = 8_000_000  # draws held at once by a bootstrap or permutation test (64 MB of int64)


def _blocks(resamples: int, n: int) -> Iterator[int]:
    """The sizes of successive blocks of ``resamples`` resamples of ``n`` rows each, at most
    ``_BOOTSTRAP_CELLS`` draws a block (one resample a block where a single one is larger)."""
    block = max(1, min(resamples, _BOOTSTRAP_CELLS // max(n, 1)))
    for start in range(0, resamples, block):
        yield min(block, resamples - start)


def _blocked(resamples: int, n: int, draw: Callable[[int], np.ndarray]) -> np.ndarray:
    """``draw(k)``, a statistic of each of k resamples, called block by block and concatenated."""
    parts = [draw(k) for k in _blocks(resamples, n)]
    return np.concatenate(parts) if parts else np.zeros(0)


def bootstrap_means(data: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The means of ``resamples`` resamples of ``data`` (rows drawn with replacement), the same as
    ``data[rng.integers(0, n, size=(resamples, n))].mean(axis=1)`` in bounded memory."""
    n = data.size
    return _blocked(resamples, n, lambda k: data[rng.integers(0, n, size=(k, n))].mean(axis=1))


def bootstrap_ci(values: Sequence[float], *, resamples: int = DEFAULT_RESAMPLES,
                 seed: int = DEFAULT_SEED, level: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the mean; None for fewer than ``MIN_PAIRS`` values. A percentile
    interval never reaches past the smallest and largest value, and on n values even that range holds the
    middle of their distribution with probability 1 - 2/2**n only, under 95% below six: a "95%" interval
    from two to five rows would claim what they cannot hold (and one value has no spread at all)."""
    data = np.asarray(values, dtype=float)
    if data.size < MIN_PAIRS:
        return None
    means = bootstrap_means(data, resamples, np.random.default_rng(seed))
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
    std = float(data.std(ddof=1)) if data.size > 1 else None  # one value has no spread to measure
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
    the paired bootstrap test of Koehn (2004) as used in IR and MT evaluation, never below ``2 / 2**n``:
    a few pairs all moving one way put the bootstrap's share at its floor, ``1 / resamples``, though the
    exact sign-flip test on n pairs cannot go below ``2 / 2**n``, and the smaller figure would claim more
    than the pairs hold.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError("paired scores need the same length")
    if x.size == 0:
        raise ValueError("no paired scores to compare")
    diff = y - x
    delta = float(diff.mean())
    means = bootstrap_means(diff, resamples, np.random.default_rng(seed))
    lo, hi = float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))
    if np.all(diff == 0):
        p = 1.0
    else:
        p = 2.0 * min(float(np.mean(means <= 0.0)), float(np.mean(means >= 0.0)))
        p = min(1.0, max(p, 1.0 / resamples, 2.0 ** (1 - diff.size)))
    return PairedComparison(delta, (lo, hi), p, int(diff.size))


def randomization_test(a: Sequence[float], b: Sequence[float], *, resamples: int = DEFAULT_RESAMPLES,
                       seed: int = DEFAULT_SEED) -> float:
    """Two-sided paired randomisation (sign-flip) test p-value for mean(b - a) != 0."""
    diff = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    if diff.size == 0 or np.all(diff == 0):
        return 1.0
    observed = abs(diff.mean())
    rng = np.random.default_rng(seed)
    flipped = _blocked(resamples, diff.size,
                       lambda k: np.abs((rng.choice((-1.0, 1.0), size=(k, diff.size)) * diff).mean(axis=1)))
    extreme = np.sum(flipped >= observed - 1e-12)
    return float((extreme + 1) / (resamples + 1))
