"""Threshold gates (--fail-under) and the terminal summary."""

from __future__ import annotations

import io
import json

import pytest

from offline_eval.report.gating import ThresholdError, check_thresholds, parse_thresholds
from offline_eval.report.terminal import format_summary, print_summary

from tests.report.test_report_fixtures import METRICS, build_run


def summary_of(metrics: dict) -> dict:
    return {"run": {"starter": False}, "metrics": metrics}


def entry(mean, n_scored=10, n_unscored=0, reasons=None, ci=(0.1, 0.9)):
    return {"mean": mean, "std": 0.1 if mean is not None else None, "ci95": list(ci) if mean is not None else None,
            "n_scored": n_scored, "n_unscored": n_unscored, "unscored_reasons": reasons or {}}


def test_parse_thresholds():
    assert parse_thresholds("faithfulness=0.8,answer_relevancy=0.7") == {"faithfulness": 0.8, "answer_relevancy": 0.7}
    assert parse_thresholds(" faithfulness = 0.8 , ,answer_relevancy=.7,") == {"faithfulness": 0.8, "answer_relevancy": 0.7}
    assert parse_thresholds(["faithfulness=0.8", "context_recall=0.5,completeness=1"]) == {
        "faithfulness": 0.8, "context_recall": 0.5, "completeness": 1.0}
    assert parse_thresholds({"faithfulness": 0.8, "completeness": 1}) == {"faithfulness": 0.8, "completeness": 1.0}


@pytest.mark.parametrize("spec, message", [
    ("faithfulness", "expected metric=value"),
    ("faithfulness=high", "'high' is not a number"),
    ("=0.5", "expected metric=value"),
    ("faithfulness=nan", "finite"),
    ("faithfulness=0.5,faithfulness=0.6", "more than one threshold"),
    ("", "no thresholds"),
    ({"faithfulness": float("nan")}, "finite"),
    ({"faithfulness": "high"}, "'high' is not a number"),
    ({"faithfulness": True}, "not a number"),
])
def test_parse_thresholds_rejects_bad_specs(spec, message):
    with pytest.raises(ThresholdError, match=message):
        parse_thresholds(spec)


def test_check_thresholds_pass_and_fail():
    summary = summary_of({"faithfulness": entry(0.71), "answer_relevancy": entry(0.9)})
    assert check_thresholds(summary, {"answer_relevancy": 0.7}) == []
    assert check_thresholds(summary, {"faithfulness": 0.8, "answer_relevancy": 0.7}) == [
        "faithfulness mean 0.71 < 0.80"]
    assert check_thresholds(summary["metrics"], {"faithfulness": 0.8}) == ["faithfulness mean 0.71 < 0.80"]
    assert check_thresholds(summary, {"faithfulness": 0.71}) == []  # at the threshold passes


def test_close_values_get_enough_digits():
    [line] = check_thresholds(summary_of({"faithfulness": entry(0.7996)}), {"faithfulness": 0.8})
    assert line == "faithfulness mean 0.7996 < 0.8000"


def test_lower_is_better_threshold_is_a_ceiling():
    summary = summary_of({"hallucination_rate": entry(0.31)})
    assert check_thresholds(summary, {"hallucination_rate": 0.2}) == [
        "hallucination_rate mean 0.31 > 0.20 (lower is better)"]
    assert check_thresholds(summary, {"hallucination_rate": 0.4}) == []


def test_metric_without_scored_samples_fails_with_reason():
    summary = summary_of({"context_recall": entry(None, n_scored=0, n_unscored=12,
                                                  reasons={"missing_field:ground_truth": 12})})
    [line] = check_thresholds(summary, {"context_recall": 0.5})
    assert line.startswith("context_recall has no scored samples (12 unscored: missing_field:ground_truth x12)")


def test_unknown_metric_fails_clearly():
    [line] = check_thresholds(summary_of({"faithfulness": entry(0.9)}), {"faithfulnes": 0.5})
    assert line == "faithfulnes: unknown metric, not in this run (run has: faithfulness)"


def test_check_thresholds_on_a_real_run(tmp_path):
    summary = json.loads((build_run(tmp_path) / "summary.json").read_text(encoding="utf-8"))
    mean = summary["metrics"]["faithfulness"]["mean"]
    assert check_thresholds(summary, {"faithfulness": mean - 0.01}) == []
    assert len(check_thresholds(summary, {m: 0.99 for m in METRICS if m != "hallucination_rate"})) == len(METRICS) - 1


def test_print_summary_plain(tmp_path):
    summary = json.loads((build_run(tmp_path, starter=True) / "summary.json").read_text(encoding="utf-8"))
    buf = io.StringIO()
    print_summary(summary, file=buf)
    out = buf.getvalue()
    assert "\x1b[" not in out and out == format_summary(summary)
    lines = out.splitlines()
    assert lines[0].split() == ["metric", "mean", "95%", "CI", "scored", "unscored"]
    for m in METRICS:
        s = summary["metrics"][m]
        row = next(l for l in lines if l.startswith(m + " "))
        assert f"{s['mean']:.3f}" in row and f"[{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}]" in row
        assert f" {s['n_scored']} " in row and f" {s['n_unscored']} (" in row
    assert "judge_unparseable 2" in out
    assert lines[-1].startswith("NOTE: starter profile")


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_print_summary_coloured_on_a_tty(tmp_path, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    summary = json.loads((build_run(tmp_path) / "summary.json").read_text(encoding="utf-8"))
    buf = FakeTTY()
    print_summary(summary, file=buf)
    out = buf.getvalue()
    assert "\x1b[" in out
    for m in METRICS:
        assert m in out
    assert "NOTE" not in out


def test_print_summary_handles_empty_metric():
    out = format_summary(summary_of({"context_recall": entry(None, n_scored=0, n_unscored=3,
                                                             reasons={"missing_field:ground_truth": 3})}))
    row = out.splitlines()[2]
    assert row.split()[:4] == ["context_recall", "—", "—", "0"]
    assert "3 (missing_field:ground_truth 3)" in row


def test_a_metrics_declared_direction_reaches_the_summary_and_the_gate(tmp_path):
    """The direction lives on the metric (Metric.higher_is_better), summary.json records it, and the
    gate reads it from there: a metric from outside the package needs no table anywhere."""
    from offline_eval.data.schema import Sample
    from offline_eval.engine.models import Models
    from offline_eval.judging.settings import EvalSettings
    from offline_eval.metrics.base import Metric, Score
    from offline_eval.report._run import lower_is_better
    from offline_eval.run.runner import run_in_process

    class ErrorShare(Metric):
        name = "error_share"
        higher_is_better = False

        def score(self, sample, ctx):
            return Score(0.3)

    samples = [Sample(id=str(i), question="q", answer="a", contexts=["c"]) for i in range(3)]
    out = run_in_process(samples, [ErrorShare()], Models(), EvalSettings(), tmp_path / "run")
    entry = out.summary["metrics"]["error_share"]
    assert entry["higher_is_better"] is False and lower_is_better("error_share", entry)
    assert check_thresholds(out.summary, {"error_share": 0.5}) == []
    assert check_thresholds(out.summary, {"error_share": 0.2}) == ["error_share mean 0.30 > 0.20 (lower is better)"]
    assert lower_is_better("hallucination_rate") and not lower_is_better("faithfulness")  # older summaries


def test_a_gate_on_an_unknown_name_echoes_it_escaped() -> None:
    """A name from the command line reaches the terminal as what it is, never as an escape sequence."""
    from offline_eval.report.gating import check_thresholds

    [failure] = check_thresholds({"metrics": {"rouge_l": {"mean": 0.5, "n_scored": 3, "n_unscored": 0}}},
                                 {"bad\x1b[2J": 0.5})
    assert failure.startswith("bad\\x1b[2J: unknown metric") and "\x1b" not in failure
