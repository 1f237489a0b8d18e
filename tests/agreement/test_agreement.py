"""Agreement with human labels: the pure statistics, label reading, the report and the command."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from itertools import product
from pathlib import Path

import numpy as np
import pytest

from offline_eval.people.agreement import (
    agreement_pairwise, agreement_pointwise, balanced_accuracy, rankdata, roc_auc, spearman,
)
from offline_eval.people.agreement.scoring import agreement_report, format_report, label_value, read_labels
from offline_eval.data.schema import DataError, Sample
from offline_eval.judging.settings import EvalSettings
from offline_eval.judging.verdicts import UNRELATED_PASSAGE
from offline_eval.metrics.ragas import SentenceFaithfulness
from offline_eval.runtime.scripted import ScriptedJudge
from tests.helpers import models, score


# --- independent brute-force references -----------------------------------------------------------
def brute_ranks(values):
    """Rank = 1 + number smaller + (number of other equal values) / 2."""
    return [1 + sum(w < v for w in values) + (sum(w == v for w in values) - 1) / 2 for v in values]

# These scripted judges answer by the statement alone; a judge reads the passage, and says No to a
# statement against the unrelated passage of the self-support probe (judging.UNRELATED_PASSAGE).
UNRELATED_NO = {"match": UNRELATED_PASSAGE["en"], "probs": {"Yes": 0.1, "No": 0.9}}


def brute_auc(scores, labels):
    """Share of (positive, negative) pairs ranked right, ties counting one half."""
    pos = [s for s, y in zip(scores, labels) if y == 1]
    neg = [s for s, y in zip(scores, labels) if y == 0]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in product(pos, neg))
    return wins / (len(pos) * len(neg))


def pearson(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    a, b = a - a.mean(), b - b.mean()
    return float((a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum()))


# --- ranks, AUC, Spearman, balanced accuracy -------------------------------------------------------
def test_rankdata_averages_ties():
    assert rankdata([10, 20, 20, 5, 20]).tolist() == [2.0, 4.0, 4.0, 1.0, 4.0]
    assert rankdata([3.0, 1.0, 2.0]).tolist() == [3.0, 1.0, 2.0]
    assert rankdata([]).tolist() == []


def test_roc_auc_hand_computed():
    # the classic example: 3 of the 4 positive/negative pairs are ordered right
    assert roc_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)
    # with a positive/negative tie: (0.5 vs 0.5) counts 1/2, the other three pairs 1 -> 3.5 / 4
    assert roc_auc([0.5, 0.5, 0.2, 0.9], [1, 0, 0, 1]) == pytest.approx(0.875)
    assert roc_auc([0.9, 0.8], [1, 1]) is None  # one class only


def test_roc_auc_and_spearman_match_brute_force_on_tied_data():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(5, 40))
        scores = rng.integers(0, 5, n) / 4.0  # few distinct values: many ties
        labels = rng.integers(0, 2, n)
        if labels.min() == labels.max():
            continue
        assert roc_auc(scores, labels) == pytest.approx(brute_auc(list(scores), list(labels)))
        x, y = rng.integers(0, 4, n).tolist(), rng.integers(0, 3, n).tolist()
        if len(set(x)) > 1 and len(set(y)) > 1:
            assert spearman(x, y) == pytest.approx(pearson(brute_ranks(x), brute_ranks(y)))


def test_spearman_hand_computed():
    # no ties: 1 - 6 * sum(d^2) / (n (n^2 - 1)) = 1 - 6*4/120
    assert spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) == pytest.approx(0.8)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 1], [1, 2, 3]) is None  # constant side
    assert spearman([1], [2]) is None


def test_balanced_accuracy_hand_computed():
    # positives 0.9, 0.6, 0.4 -> 2 of 3 predicted; negatives 0.2, 0.7 -> 1 of 2 rejected
    assert balanced_accuracy([0.9, 0.6, 0.4, 0.2, 0.7], [1, 1, 1, 0, 0]) == pytest.approx((2 / 3 + 1 / 2) / 2)
    # score exactly at the threshold is a positive prediction
    assert balanced_accuracy([0.5, 0.49], [1, 0]) == pytest.approx(1.0)
    assert balanced_accuracy([0.9, 0.1], [1, 0], threshold=0.95) == pytest.approx(0.5)


# --- pointwise and pairwise agreement ---------------------------------------------------------------
def test_agreement_pointwise_values_and_intervals():
    scores = [0.9, 0.6, 0.4, 0.2, 0.7, 0.1, 0.8, 0.3]
    labels = [1, 1, 1, 0, 0, 0, 1, 0]
    got = agreement_pointwise(scores, labels)
    assert got.n == 8 and got.n_positive == 4 and got.n_negative == 4 and got.binary
    assert got.balanced_accuracy.value == pytest.approx(balanced_accuracy(scores, labels))
    assert got.roc_auc.value == pytest.approx(brute_auc(scores, labels))
    assert got.spearman.value == pytest.approx(pearson(brute_ranks(scores), brute_ranks(labels)))
    assert got.confusion == {"tp": 3, "fp": 1, "tn": 3, "fn": 1}
    for stat in (got.balanced_accuracy, got.roc_auc, got.spearman):
        lo, hi = stat.ci95
        assert lo <= stat.value <= hi and lo < hi
    again = agreement_pointwise(scores, labels)
    assert again.to_dict() == got.to_dict()  # fixed seed: same interval every time
    other = agreement_pointwise(scores, labels, seed=1)
    assert other.roc_auc.value == got.roc_auc.value


def test_agreement_pointwise_perfect_and_non_binary():
    perfect = agreement_pointwise([0.9, 0.8, 0.1, 0.2], [1, 1, 0, 0])
    assert perfect.roc_auc.value == 1.0 and perfect.roc_auc.ci95 == (1.0, 1.0)
    assert perfect.balanced_accuracy.value == 1.0
    likert = agreement_pointwise([0.1, 0.5, 0.9, 0.7], [1, 3, 5, 4])
    assert not likert.binary and likert.roc_auc.value is None and likert.balanced_accuracy.value is None
    assert likert.spearman.value == pytest.approx(1.0)
    with pytest.raises(ValueError):
        agreement_pointwise([0.1, float("nan")], [0, 1])


def test_a_figure_that_cannot_be_computed_says_why_instead_of_a_bare_dash():
    likert = agreement_pointwise([0.1, 0.5, 0.9, 0.7], [1, 3, 5, 4]).to_dict()
    assert "scale, not 0/1" in likert["roc_auc"]["undefined"] and "--positive" in likert["roc_auc"]["undefined"]
    assert "undefined" not in likert["spearman"]  # defined: no reason written
    flat = agreement_pointwise([0.5, 0.5, 0.5], [1, 0, 1]).to_dict()
    assert flat["spearman"]["undefined"] == "every score is the same"
    assert agreement_pointwise([0.2, 0.7], [1, 1]).to_dict()["roc_auc"]["undefined"] == "every label is one class"
    report = {"protocol": "pointwise", "n_labelled": 4, "n_scored": 4, "excluded": {}, "n_positive": 0,
              "n_negative": 0, "threshold": 0.5, **{k: likert[k] for k in ("balanced_accuracy", "roc_auc", "spearman")}}
    text = format_report(report)
    assert "ROC AUC            - (the labels are a scale, not 0/1: --positive reads them as yes/no)" in text
    pairwise = {"protocol": "pairwise", "n_labelled": 0, "n_scored": 0, "excluded": {}, "n_pairs": 0, "n_ties": 0,
                "accuracy": agreement_pairwise([]).to_dict()["accuracy"]}
    assert format_report(pairwise).endswith("pairwise accuracy  - (no pair of differently labelled samples)")


def test_agreement_pairwise_counts_ties_with_a_seeded_coin():
    got = agreement_pairwise([(0.9, 0.1), (0.2, 0.8), (0.7, 0.3), (0.6, 0.4)])
    assert got.n_pairs == 4 and got.n_ties == 0 and got.accuracy.value == pytest.approx(0.75)
    lo, hi = got.accuracy.ci95
    assert lo <= 0.75 <= hi
    tied = agreement_pairwise([(0.5, 0.5)] * 400)
    assert tied.n_ties == 400 and 0.4 < tied.accuracy.value < 0.6  # split at random, not all won or lost
    assert agreement_pairwise([(0.5, 0.5)] * 400).to_dict() == tied.to_dict()  # the seed is fixed
    assert agreement_pairwise([]).accuracy.value is None


# --- labels ----------------------------------------------------------------------------------------
def test_label_value():
    assert label_value("Fully attributable", ["Fully attributable"]) == 1.0
    assert label_value("Not fully attributable", ["Fully attributable"]) == 0.0
    assert label_value("Generic", ["Fully attributable"], ["Generic"]) == "drop"
    assert label_value(3) == 3.0 and label_value("0.5") == 0.5 and label_value(True) == 1.0
    assert label_value("yes") == 1.0 and label_value("") is None and label_value(None) is None
    with pytest.raises(DataError):
        label_value("good")  # a word with no --positive


def test_read_labels_counts_what_it_leaves_out():
    samples = [Sample(id=str(i), answer="a", extra={"lab": v} if v is not None else {})
               for i, v in enumerate(["good", "bad", "meh", None, "good"])]
    kept, excluded = read_labels(samples, "lab", positive=["good"], drop=["meh"])
    assert [(s.id, y) for s, y in kept] == [("0", 1.0), ("1", 0.0), ("4", 1.0)]
    assert excluded == Counter({"dropped_label": 1, "no_label": 1})


# --- the report: unscored samples are excluded, never 0 --------------------------------------------
def test_report_excludes_unscored_samples():
    labelled = [(Sample(id=str(i)), float(y)) for i, y in enumerate([1, 1, 0, 0, 1])]
    scores = {"0": {"value": 1.0, "metadata": {"mean_probability": 0.9}},
              "1": {"value": 0.5, "metadata": {"mean_probability": 0.6}},
              "2": {"value": 0.0, "metadata": {"mean_probability": 0.2}},
              "3": {"value": None, "reason": "no_claims"},
              "4": {"value": None, "reason": "judge_unparseable"}}
    report = agreement_report(labelled, scores, excluded=Counter({"no_label": 2}))
    assert report["n_labelled"] == 5 and report["n_scored"] == 3
    assert report["excluded"] == {"no_label": 2, "unscored:judge_unparseable": 1, "unscored:no_claims": 1}
    # were the unscored counted as 0, sample 3 (a negative) would tie the negative at 0.0 and sample
    # 4 (a positive at 0) would pull the AUC down; excluded, the separation is perfect
    assert report["roc_auc"]["value"] == 1.0 and report["n_negative"] == 1
    assert report["mean_score_positive"] == pytest.approx(0.75)
    continuous = agreement_report(labelled, scores, value_key="mean_probability")
    assert continuous["value"] == "mean_probability" and continuous["n_scored"] == 3


def test_report_pairwise_groups_by_pair_field():
    def s(i, q):
        return Sample(id=str(i), question=q, extra={"qid": q})
    labelled = [(s(0, "a"), 1.0), (s(1, "a"), 0.0), (s(2, "b"), 1.0), (s(3, "b"), 0.0),
                (s(4, "c"), 1.0), (s(5, "c"), 0.0), (s(6, "d"), 1.0), (s(7, "d"), 1.0)]
    scores = {"0": {"value": 0.9}, "1": {"value": 0.2},   # right
              "2": {"value": 0.1}, "3": {"value": 0.6},   # wrong
              "4": {"value": 0.8}, "5": {"value": None, "reason": "no_claims"},  # unscored member
              "6": {"value": 0.5}, "7": {"value": 0.5}}   # same label: no pair
    report = agreement_report(labelled, scores, protocol="pairwise", pair_field="qid")
    assert report["n_pairs"] == 2 and report["accuracy"]["value"] == pytest.approx(0.5)
    assert report["pairs_skipped"] == {"same_label": 1, "unscored_member": 1}
    with pytest.raises(ValueError):
        agreement_report(labelled, scores, protocol="pairwise")


# --- the sentence-split faithfulness variant -------------------------------------------------------
def test_sentence_faithfulness_verifies_sentences_without_claim_extraction():
    judge = ScriptedJudge(script={"options": [
        UNRELATED_NO,
        {"match": "Statement: Paris is in France.", "probs": {"Yes": 0.9, "No": 0.1}},
        {"match": "Statement: It has ten million cats.", "probs": {"Yes": 0.2, "No": 0.8}}]})
    sample = Sample(id="1", question="Where is Paris?", answer="Paris is in France. It has ten million cats.",
                    contexts=["Paris is the capital of France."])
    got = score(SentenceFaithfulness(), sample, models(judge), EvalSettings(verdicts="options"))
    assert got.value == pytest.approx(0.55)  # the expected supported share: mean P(Yes)
    assert [c["claim"] for c in got.metadata["claims"]] == ["Paris is in France.", "It has ten million cats."]
    assert got.metadata["supported_share"] == pytest.approx(0.5)
    shares = score(SentenceFaithfulness(), sample, models(judge), EvalSettings(verdict_score="threshold"))
    assert shares.value == pytest.approx(0.5)
    assert judge.calls["generate"] == 0  # no claim-extraction step
    empty = score(SentenceFaithfulness(), Sample(id="2", question="q", answer="   ", contexts=["c"]),
                  models(judge))
    assert empty.value is None and empty.reason == "missing_field:answer"  # white space only: no answer


# --- the command, end to end on a scripted judge -----------------------------------------------------
def test_agreement_command_end_to_end(tmp_path: Path, capsys):
    from offline_eval.cli.agreement import register

    rows = [
        {"id": "p1", "question": "q", "answer": "Alpha is green.", "contexts": ["Alpha is green."], "h": "yes"},
        {"id": "p2", "question": "q", "answer": "Beta is blue.", "contexts": ["Beta is blue."], "h": "yes"},
        {"id": "n1", "question": "q", "answer": "Gamma is red.", "contexts": ["Gamma is pink."], "h": "no"},
        {"id": "n2", "question": "q", "answer": "Delta is gold.", "contexts": ["Delta is grey."], "h": "no"},
        {"id": "n3", "question": "q", "answer": "Eps is tall.", "contexts": ["Eps is short."], "h": "no"},
        {"id": "g1", "question": "q", "answer": "Hello there.", "contexts": ["x"], "h": "generic"},
    ]
    data = tmp_path / "labelled.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    script = {"options": [UNRELATED_NO, {"match": "Statement: Alpha", "probs": {"Yes": 0.9, "No": 0.1}},
                          {"match": "Statement: Beta", "probs": {"Yes": 0.4, "No": 0.6}},
                          {"match": "Statement: Gamma", "probs": {"Yes": 0.3, "No": 0.7}},
                          {"match": "Statement: Delta", "probs": {"Yes": 0.1, "No": 0.9}},
                          {"match": "Statement: Eps", "probs": {"Yes": 0.6, "No": 0.4}}]}
    (tmp_path / "script.json").write_text(json.dumps(script), encoding="utf-8")
    parser = argparse.ArgumentParser(prog="offline-eval")
    register(parser.add_subparsers(dest="command"))
    out = tmp_path / "run"
    args = parser.parse_args([
        "agreement", "--dataset", str(data), "--labels", "h", "--positive", "yes", "--drop", "generic",
        "--metric", "faithfulness_sentences", "--profile", "starter", "--judge-backend", "scripted",
        "--judge", str(tmp_path / "script.json"), "--output", str(out), "--cache", str(tmp_path / "c.sqlite"),
        "--value", "mean_probability", "--quiet", "--min-per-class", "2"])
    assert args.func(args) == 0
    report = json.loads((out / "agreement.json").read_text(encoding="utf-8"))
    assert report["n_labelled"] == 5 and report["excluded"] == {"dropped_label": 1}
    # mean P(Yes): positives 0.9, 0.4; negatives 0.3, 0.1, 0.6 -> AUC (3 + 2) / 6
    assert report["roc_auc"]["value"] == pytest.approx(5 / 6)
    # at 0.5: positives 1 of 2 found, negatives 2 of 3 rejected
    assert report["balanced_accuracy"]["value"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert "ROC AUC" in capsys.readouterr().out
    assert (out / "results.jsonl").exists()


# --- the BEGIN file the benchmark reads -----------------------------------------------------------
def test_begin_labels_read(shared_data: Path):
    from offline_eval.data.readers import read_dataset

    path = shared_data / "begin_dev_wow.tsv"
    if not path.exists():
        pytest.skip("begin_dev_wow.tsv is not present")
    samples = read_dataset(path, {"question": "message", "contexts": "knowledge"})
    kept, excluded = read_labels(samples, "begin_label", positive=["Fully attributable"], drop=["Generic"])
    counts = Counter(y for _, y in kept)
    assert counts[1.0] > 0 and counts[0.0] > 0
    assert len(kept) + sum(excluded.values()) == len(samples)
    first = kept[0][0]
    assert first.answer and first.question and len(first.contexts) == 1


def test_an_unknown_metric_is_echoed_with_its_control_characters_escaped():
    from offline_eval.people.agreement.scoring import resolve_metric

    with pytest.raises(ValueError) as refused:
        resolve_metric("faithfulnes\x1b[2J\n")
    assert str(refused.value).startswith("unknown metric faithfulnes\\x1b[2J\\n; known:")
