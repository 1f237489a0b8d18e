"""How a verdict is computed lives in one place (issue #57): ``judging/verdicts.py`` turns option
probabilities and their probes into a typed verdict, refuses a credulous passage's, and reads verdicts
as a share, a count or a grade; the metrics, criteria included, only call it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from offline_eval.judging.settings import EvalSettings
from offline_eval.judging.verdicts import (
    CREDULOUS_PASSAGE, EMPTY_STATEMENT, Verdict, corrected, expected_counts, expected_grade, most_likely,
    option_verdict, refusal_limit, refused_if_credulous, refuses, share_of, supported_count,
)
from offline_eval.metrics.criteria import criteria_from_tables, criterion_metric

METRICS = Path(__file__).resolve().parents[2] / "offline_eval" / "metrics"


def test_an_option_verdict_takes_its_probes_lean_out_and_is_typed() -> None:
    settings = EvalSettings(baseline_weight=0.5, support_threshold=0.5)
    plain = option_verdict({"Yes": 0.7, "No": 0.3}, (), settings)
    assert (plain.probability, plain.supported, plain.judge, plain.baseline) == (pytest.approx(0.7), True, 0.7, None)
    leaning = option_verdict({"Yes": 0.7, "No": 0.3}, ({"Yes": 0.9, "No": 0.1},), settings)
    assert leaning.probability == pytest.approx(corrected(0.7, 0.9, 0.5))
    assert not leaning.supported and leaning.baseline == 0.9  # the probe's lean outweighs the judge's yes


def test_a_credulous_passages_verdict_is_refused() -> None:
    verdict = Verdict(0.8, True, judge=0.8, baseline=0.4)
    kept = refused_if_credulous(verdict, 0.2, 0.5)
    assert (kept.probability, kept.supported, kept.credulity, kept.refused) == (0.8, True, 0.2, None)
    refused = refused_if_credulous(verdict, 0.7, 0.5)
    assert (refused.probability, refused.supported, refused.refused) == (0.0, False, CREDULOUS_PASSAGE)
    assert (refused.judge, refused.baseline, refused.credulity) == (0.8, 0.4, 0.7)
    assert refuses(0.61, 0.6) and not refuses(0.6, 0.6)
    assert refusal_limit(EvalSettings(credulity_limit=0.6)) == 0.6
    assert refusal_limit(EvalSettings(credulity_limit=0.6, verdicts="generate")) == 1.0  # a 0 or 1 measures no lean


@pytest.mark.parametrize("score", ["probability", "threshold"])
def test_shares_and_counts_read_verdicts_by_one_rule(score: str) -> None:
    settings = EvalSettings(verdict_score=score)
    verdicts = [Verdict(0.9, True), Verdict(0.2, False), Verdict(0.6, True)]
    count = supported_count(verdicts, settings)
    assert count == (pytest.approx(1.7) if score == "probability" else 2)
    assert share_of(verdicts, settings) == pytest.approx(count / 3)
    labels = [{"A": 0.5, "B": 0.5}, {"A": 0.25, "B": 0.75}]
    assert expected_counts(labels, "AB", settings) == ({"A": 0.75, "B": 1.25} if score == "probability" else None)
    assert expected_counts([labels[0], None], "AB", EvalSettings()) is None  # a JSON verdict among them


def test_a_grade_is_expected_from_its_probabilities_and_ties_go_to_the_first_option() -> None:
    probs = {"1": 0.25, "2": 0.25, "3": 0.5}
    assert expected_grade(probs, ("1", "2", "3")) == pytest.approx(2.25)
    assert expected_grade(probs, (1, 2, 3)) == pytest.approx(2.25)
    assert most_likely({"a": 0.4, "b": 0.4, "c": 0.2}, ("b", "a", "c")) == "b"


def test_no_metric_but_judging_reads_a_verdict_rules_setting() -> None:
    """The settings that decide how a verdict is computed are read in the judging steps only, so that a
    change to a rule does not have to be made again in a metric."""
    rules = re.compile(r"settings\.(verdict_score|baseline_weight|support_threshold|credulity_limit)\b|\bcorrected\(")
    readers = sorted(path.name for path in METRICS.glob("*.py") if rules.search(path.read_text("utf-8")))
    assert readers == []


def test_criteria_ask_through_verdicts_and_not_by_their_own_requests() -> None:
    text = (METRICS / "criteria.py").read_text("utf-8")
    assert "ScoreOptions" not in text and "ask_json" not in text and "Verdicts(" in text
    [criterion] = criteria_from_tables({"tone": {"question": "Polite?", "reads": ["question", "answer"],
                                                 "grades": {"1": "rude", "2": "fine"}}}, "test")
    assert criterion.item == "answer" and criterion_metric(criterion).most_steps >= 1
