"""The typed records of a run folder (offline_eval.records): what the runner writes reads back and writes
again to the same text, a hand-edited value reads as unscored or empty instead of failing, and the
aggregate is a column computed from the finished scores."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from offline_eval.data.schema import Sample
from offline_eval.engine.models import Models
from offline_eval.judging.settings import EvalSettings
from offline_eval.metrics.aggregate import Aggregate, aggregate_score
from offline_eval.metrics.base import Metric, Score
from offline_eval.records import MetricSummary, ResultRow, RunSummary, StoredScore
from offline_eval.run.runner import run_in_process
from offline_eval.stats import summarize

from tests.report.test_report_fixtures import build_run


class Share(Metric):
    name = "share_of_a"
    requires = ("answer",)

    def score(self, sample, ctx):
        if sample.answer.startswith("-"):
            return Score.unscored("no_claims", "nothing to check", raw=sample.answer)
        return Score(sample.answer.count("a") / len(sample.answer), explanation="a's",
                     metadata={"n": len(sample.answer)})


class Errors(Metric):
    name = "error_share"
    requires = ("answer",)
    higher_is_better = False
    value_range = (0.0, 2.0)

    def score(self, sample, ctx):
        return Score(min(2.0, sample.answer.count("e") / 2))


def _run(tmp_path: Path):
    samples = [Sample(id=f"s{i}", question="q", answer=a, contexts=["c"], row=i + 1)
               for i, a in enumerate(["banana", "apple tree", "-", "éa ü"])]
    return run_in_process(samples, [Share(), Errors()], Models(), EvalSettings(), tmp_path / "run", aggregate=True)


def test_what_the_runner_writes_reads_back_and_writes_again_the_same(tmp_path):
    out = _run(tmp_path)
    lines = (out.output_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.dumps(ResultRow.from_dict(json.loads(line)).to_dict(), ensure_ascii=False) for line in lines] == lines
    text = (out.output_dir / "summary.json").read_text(encoding="utf-8")
    summary = RunSummary.from_dict(json.loads(text))
    assert json.dumps(summary.to_dict(), indent=2, ensure_ascii=False, default=str) == text
    assert out.run_summary.to_dict() == out.summary == json.loads(text)
    assert [row.to_dict() for row in out.result_rows()] == out.results
    for line in (build_run(tmp_path) / "results.jsonl").read_text(encoding="utf-8").splitlines():
        assert json.dumps(ResultRow.from_dict(json.loads(line)).to_dict(), ensure_ascii=False) == line
    entry = {**summarize([0.5, None], [None, "no_claims"]).to_dict(), "higher_is_better": False,
             "value_range": [0.0, 2.0], "calibration": None}
    assert MetricSummary.from_dict(entry).to_dict() == entry
    # each column records the values its metric takes, which the reports' colours read
    assert {n: m.value_range for n, m in summary.metrics.items()} == {
        "share_of_a": (0.0, 1.0), "error_share": (0.0, 2.0), "aggregate": (0.0, 1.0)}
    for bad in ([2, 0], [0, "x"], [1], 3):  # a hand-edited range reads as not recorded
        assert MetricSummary.from_dict({**entry, "value_range": bad}).value_range is None


def test_the_aggregate_is_a_column_made_from_the_finished_scores(tmp_path):
    out = _run(tmp_path)
    metrics = [Share(), Errors()]
    for row in out.result_rows():
        assert list(row.scores) == ["share_of_a", "error_share", "aggregate"]
        expected = aggregate_score({n: row.scores[n] for n in ("share_of_a", "error_share")}, {}, metrics)
        assert row.scores["aggregate"] == StoredScore.of(expected)
    parts = out.results[0]["scores"]["aggregate"]["metadata"]["parts"]
    assert parts == {"share_of_a": pytest.approx(0.5), "error_share": pytest.approx(1.0)}  # no e: its best
    entry = out.run_summary.metrics["aggregate"]
    assert entry.higher_is_better is True and out.run_summary.metrics["error_share"].higher_is_better is False
    values = [r.value("aggregate") for r in out.result_rows()]
    assert entry.mean == pytest.approx(summarize(values).mean)
    assert out.run_summary.run_metrics == ["share_of_a", "error_share", "aggregate"]
    assert Aggregate.asked(["faithfulness", "ragas_score"]) and not Aggregate.asked([Share()])


def test_hand_edited_values_read_as_unscored_or_empty():
    row = ResultRow.from_dict({"id": 3, "row": True, "sample": "text", "scores": {
        "a": {"value": "0.5"}, "b": [1], "c": {"value": math.nan, "reason": ""},
        "d": {"value": 1, "metadata": "m", "explanation": {"k": 1}}, "e": {"value": True, "reason": 7}}})
    assert (row.id, row.row, dict(row.sample)) == ("3", None, {})
    assert row.value("a") is None and row.unscored_reason("a") == "unscored"
    assert row.score("b") is None and row.unscored_reason("b") == "not_run"
    assert row.unscored_reason("c") == "unscored"
    d = row.score("d")
    assert (d.value, dict(d.metadata), d.explanation, d.unscored_reason) == (1.0, {}, '{"k": 1}', None)
    assert row.value("e") is None and row.unscored_reason("e") == "7"
    assert ResultRow.from_dict({"sample": {"id": "x"}}).id == "x"
    assert ResultRow.from_dict({"scores": {}}, index=4).id == "#5"
    with pytest.raises(KeyError):
        ResultRow.from_dict({"scores": {}})
    entry = MetricSummary.from_dict({"mean": "x", "std": math.inf, "ci95": [0, "a"], "n_scored": "many",
                                     "n_unscored": 2.0, "unscored_reasons": {"r": "2", 3: None},
                                     "higher_is_better": "no", "calibration": 3})
    assert (entry.mean, entry.std, entry.ci95, entry.n_scored, entry.n_unscored) == (None, None, None, 0, 2)
    assert dict(entry.unscored_reasons) == {"r": 2, "3": 0}
    assert entry.higher_is_better is None and entry.calibration is None and entry.calibration_checked
    summary = RunSummary.from_dict({"metrics": {"m": "x", "n": {}}, "run": "x", "estimates_error": 5})
    assert list(summary.metrics) == ["n"] and summary.run is None and summary.estimates_error is None
    assert summary.run_metrics == [] and not summary.starter
    assert RunSummary.from_dict({"metrics": [], "run": {"metrics": "m", "starter": 1}}).starter


def test_one_scored_row_gives_a_mean_and_no_interval():
    """A single value has no spread to resample: its summary carries the mean and no 95% interval (it read
    [v, v], a certainty one row does not hold) and no standard deviation (it read 0.000), and the terminal
    table says why there is no interval."""
    from offline_eval.report._run import fmt_interval
    from offline_eval.stats import summarize

    one = summarize([0.286, None], ["missing_field:answer"])
    assert (one.mean, one.ci95, one.std, one.n_scored, one.n_unscored) == (0.286, None, None, 1, 1)
    assert fmt_interval(one.ci95, one.n_scored) == "— (fewer than 6 rows)"


def test_a_mean_of_fewer_than_six_rows_has_no_interval():
    """A percentile interval never reaches past the smallest and largest value, and on n values even that
    range holds the middle of their distribution with probability 1 - 2/2**n only (under 95% below six): two
    rows' "[0.2, 0.6]" claimed a 95% certainty they cannot hold. The terminal table and the page say why
    the interval is absent; from six rows up there is one."""
    from offline_eval.records import RunSummary
    from offline_eval.report.terminal import format_summary
    from offline_eval.stats import summarize
    from offline_eval.thresholds import MIN_PAIRS

    few = summarize([0.2, 0.6, 0.3, 0.9, 0.5])
    assert few.ci95 is None and few.std is not None and MIN_PAIRS == 6
    assert "— (fewer than 6 rows)" in format_summary(RunSummary({"rouge_l": few}))
    enough = summarize([0.2, 0.6, 0.3, 0.9, 0.5, 0.4])
    assert enough.ci95 is not None and enough.ci95[0] < enough.mean < enough.ci95[1]
