"""Each metric's direction and scale, as the aggregate, the summary, the gates and `offline-eval metrics`
read them (issue #33: noise sensitivity read as higher-is-better, an aggregate that a best value zeroed)."""

from __future__ import annotations

import json

import pytest

from offline_eval.cli import main
from offline_eval.metrics import metric_classes
from offline_eval.metrics.base import Score
from offline_eval.metrics.aggregate import aggregate_score

CLASSES = metric_classes()


def _metrics(*names):
    return [CLASSES[n]() for n in names]


@pytest.mark.parametrize("name", ["noise_sensitivity_relevant", "noise_sensitivity_irrelevant"])
def test_noise_sensitivity_is_lower_is_better(name, capsys):
    assert CLASSES[name].higher_is_better is False
    assert main(["metrics"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(name + " "))
    assert "lower is better" in line


def test_goodness_reads_each_metric_in_its_direction_and_range():
    assert CLASSES["faithfulness"].goodness(0.8) == pytest.approx(0.8)
    assert CLASSES["hallucination_rate"].goodness(0.2) == pytest.approx(0.8)
    assert CLASSES["noise_sensitivity_relevant"].goodness(0.0) == 1.0
    assert CLASSES["rubrics_score"].goodness(1.0) == 0.0  # the worst rubric grade, not a perfect 1.0
    assert CLASSES["rubrics_score"].goodness(4.0) == pytest.approx(0.75)


def test_a_best_value_of_a_lower_is_better_metric_does_not_zero_the_aggregate():
    metrics = _metrics("faithfulness", "answer_correctness", "noise_sensitivity_relevant")
    got = aggregate_score({"faithfulness": Score(0.876), "answer_correctness": Score(0.891),
                           "noise_sensitivity_relevant": Score(0.0)}, {}, metrics)
    assert got.value == pytest.approx(3 / (1 / 0.876 + 1 / 0.891 + 1 / 1.0))
    assert got.metadata["parts"]["noise_sensitivity_relevant"] == 1.0


def test_the_aggregate_puts_rubrics_on_the_common_scale_and_keeps_the_harmonic_mean_zero():
    metrics = _metrics("faithfulness", "rubrics_score")
    scaled = aggregate_score({"faithfulness": Score(0.5), "rubrics_score": Score(3.0)}, {}, metrics)
    assert scaled.value == pytest.approx(0.5)  # rubric 3 of 1-5 is 0.5
    worst = aggregate_score({"faithfulness": Score(0.9), "rubrics_score": Score(1.0)}, {}, metrics)
    assert worst.value == 0.0  # a part at its worst, as Ragas' harmonic mean
    weighted = aggregate_score({"faithfulness": Score(0.9), "rubrics_score": Score(1.0)},
                               {"faithfulness": 1.0}, metrics)
    assert weighted.value == pytest.approx(0.9)  # only the metrics weighted
    assert aggregate_score({"faithfulness": Score(0.9)}, {"faithfulness": 0.0}, metrics).value is None


def test_summary_and_gate_read_noise_sensitivity_as_lower_is_better(tmp_path, tiny_profile, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "a", "question": "Where is Paris?", "answer": "Paris is in France.",
                                "contexts": ["Paris is the capital of France."],
                                "ground_truth": "Paris is in France."}) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    args = ["run", "--dataset", str(data), "--profile", str(tiny_profile), "--metrics", "noise_sensitivity_relevant",
            "--no-cache", "--quiet", "--no-report", "--no-calibration", "--output", str(out)]
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    entry = summary["metrics"]["noise_sensitivity_relevant"]
    assert entry["higher_is_better"] is False
    # a gate on a lower-is-better metric is a ceiling: a mean of at most 1.0 always passes
    assert main(args + ["--fail-under", "noise_sensitivity_relevant=1.0"]) == 0


def test_the_listing_fits_100_columns_and_marks_the_default_metrics(capsys):
    """`offline-eval metrics` wrote lines of up to 262 columns and did not say which metrics a run scores
    when it names none."""
    from offline_eval.metrics import DEFAULT_METRICS

    assert main(["metrics"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    titles = [line.split()[:2] for line in lines if line[:1].isalpha()]
    assert {t[0] for t in titles if t[1:] == ["(default)"]} == set(DEFAULT_METRICS)
    assert {t[0] for t in titles} >= set(CLASSES)
    # a flag is never broken at its hyphens
    assert any(line.startswith("    --answer-correctness-weights (weights, default (0.75, 0.25)):") for line in lines)
