"""The statistics against references (issue #56): the rank statistics against scipy and scikit-learn, the
Wilson interval against scipy's, the bootstrap and the sign-flip test against scipy's resampling; and
every bootstrap and permutation test in bounded memory, with the numbers of one single draw."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from scipy import stats as scipy_stats

from offline_eval import stats
from offline_eval.people.agreement import agreement_pairwise
from offline_eval.people.estimate import wilson_interval
from offline_eval.rank_stats import balanced_accuracy, rankdata, roc_auc, spearman

RNG = np.random.default_rng(7)
TIED = [(RNG.integers(0, 5, 40).astype(float), RNG.integers(0, 2, 40).astype(float)) for _ in range(5)]


def test_rankdata_matches_scipy_on_ties():
    for scores, _ in TIED:
        np.testing.assert_allclose(rankdata(scores), scipy_stats.rankdata(scores, method="average"))


def test_roc_auc_is_scipys_mann_whitney_u_over_the_pairs():
    for scores, labels in TIED:
        pos, neg = scores[labels == 1], scores[labels == 0]
        u = scipy_stats.mannwhitneyu(pos, neg).statistic
        assert roc_auc(scores, labels) == pytest.approx(u / (pos.size * neg.size), abs=1e-12)


def test_roc_auc_and_balanced_accuracy_match_scikit_learn():
    metrics = pytest.importorskip("sklearn.metrics")
    for scores, labels in TIED:
        assert roc_auc(scores, labels) == pytest.approx(metrics.roc_auc_score(labels, scores), abs=1e-12)
        predicted = (scores >= 2).astype(float)
        assert balanced_accuracy(scores, labels, 2) == pytest.approx(
            metrics.balanced_accuracy_score(labels, predicted), abs=1e-12)


def test_spearman_matches_scipy_on_ties():
    for scores, labels in TIED:
        assert spearman(scores, labels) == pytest.approx(scipy_stats.spearmanr(scores, labels).statistic, abs=1e-12)


@pytest.mark.parametrize("k,n", [(0, 20), (1, 29), (3, 4), (15, 148), (81, 263), (20, 20)])
def test_wilson_interval_matches_scipys(k, n):
    reference = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson_interval(k, n) == pytest.approx((reference.low, reference.high), abs=1e-9)


def test_the_paired_bootstrap_interval_is_scipys_percentile_bootstrap():
    a = RNG.random(300)
    b = a + RNG.normal(0.03, 0.1, 300)
    ours = stats.paired_bootstrap(a, b)
    theirs = scipy_stats.bootstrap((b - a,), np.mean, n_resamples=20_000, method="percentile",
                                   rng=np.random.default_rng(1)).confidence_interval
    width = theirs.high - theirs.low
    assert ours.ci95 == pytest.approx((theirs.low, theirs.high), abs=0.05 * width)  # Monte Carlo both sides


def test_the_randomization_test_is_scipys_exact_sign_flip_test():
    for shift in (0.0, 0.15, 0.4):
        a = RNG.random(12)
        b = a + shift + RNG.normal(0, 0.3, 12)
        exact = scipy_stats.permutation_test((b - a,), np.mean, permutation_type="samples",
                                             n_resamples=np.inf).pvalue  # 2^12 sign patterns, every one
        assert stats.randomization_test(a, b) == pytest.approx(exact, abs=0.03)


def _peak(call):
    tracemalloc.start()
    try:
        out = call()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_bootstraps_and_permutations_draw_in_bounded_blocks_with_the_same_numbers(monkeypatch):
    rows = 20_000  # 200 resamples at once: 32 MB of indices and 32 MB gathered
    a = RNG.random(rows)
    b = a + RNG.normal(0.01, 0.2, rows)
    pairs = list(zip(b, a))
    calls = {"paired_bootstrap": lambda: stats.paired_bootstrap(a, b, resamples=200),
             "randomization_test": lambda: stats.randomization_test(a, b, resamples=200),
             "bootstrap_ci": lambda: stats.bootstrap_ci(b, resamples=200),
             "agreement_pairwise": lambda: agreement_pairwise(pairs, resamples=200)}
    whole = {name: call() for name, call in calls.items()}  # under the default cap: one block each
    monkeypatch.setattr(stats, "_BOOTSTRAP_CELLS", 10 * rows)
    for name, call in calls.items():
        out, peak = _peak(call)
        assert peak < 12 * 2**20, (name, peak)  # 1.6 MB blocks, far below the 64 MB of one draw
        assert out == whole[name], name


def test_the_paired_bootstrap_claims_no_smaller_p_value_than_the_exact_sign_flip_test_allows():
    """Six pairs that all rise put every resampled delta above zero, the bootstrap's share at its floor
    (1/resamples); the exact sign-flip test on six pairs cannot go below 2/2**6, and neither does this."""
    from offline_eval import stats

    six = stats.paired_bootstrap([0.1] * 6, [0.2, 0.3, 0.25, 0.4, 0.35, 0.3])
    assert six.p_value == pytest.approx(2 / 2**6)
    many = stats.paired_bootstrap([0.1] * 40, [0.2 + 0.01 * i for i in range(40)], resamples=2000)
    assert many.p_value == pytest.approx(1 / 2000)  # the resamples' floor, far above 2/2**40
