"""Gates that rest on enough (issue #56): `--fail-under` on a metric most rows of which are unscored fails
(the limit, --max-unscored, stated in its output), and each gate says how many rows it rests on; `compare
--fail-on-regression` with nothing in common fails instead of printing an empty table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offline_eval.cli import main
from offline_eval.report.gating import DEFAULT_MAX_UNSCORED, check_thresholds, gate_lines

from tests.report.test_gating import entry, summary_of
from tests.report.test_report_fixtures import build_run


def test_a_gate_on_a_metric_mostly_unscored_fails_and_says_on_how_many_rows_it_rests():
    summary = summary_of({"answer_relevancy": entry(0.9, n_scored=4, n_unscored=8, reasons={"empty_answer": 8})})
    [line] = check_thresholds(summary, {"answer_relevancy": 0.5})
    assert "8 of 12 rows unscored" in line and "empty_answer x8" in line and "--max-unscored" in line
    assert f"{DEFAULT_MAX_UNSCORED * 100:g}%" in line and "rests on 4 rows" in line
    assert check_thresholds(summary, {"answer_relevancy": 0.5}, max_unscored=0.7) == []  # told it may
    [shown] = gate_lines(summary, {"answer_relevancy": 0.5})
    assert shown.startswith("answer_relevancy >= 0.5: mean 0.90 over 4 scored rows of 12 (8 unscored, 67%")
    assert "at most 10% allowed, --max-unscored" in shown


def test_a_gate_within_the_limit_passes_and_the_limit_is_inclusive():
    one_in_ten = summary_of({"faithfulness": entry(0.9, n_scored=9, n_unscored=1)})
    assert check_thresholds(one_in_ten, {"faithfulness": 0.8}) == []
    assert len(check_thresholds(one_in_ten, {"faithfulness": 0.8}, max_unscored=0.05)) == 1
    assert gate_lines(summary_of({"hallucination_rate": entry(0.2)}), {"hallucination_rate": 0.3})[0].startswith(
        "hallucination_rate <= 0.3: mean 0.20 over 10 scored rows of 10 (0 unscored, 0%")


def _rows_without_reference(path: Path) -> Path:
    rows = [{"id": f"r{i}", "question": "Where is Paris?", "answer": "Paris is in France.",
             "contexts": ["Paris is the capital of France."],
             **({"ground_truth": "Paris is in France."} if i < 4 else {})} for i in range(12)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_run_fail_under_fails_on_a_metric_most_rows_of_which_are_unscored(tmp_path, capsys):
    data = _rows_without_reference(tmp_path / "d.jsonl")
    args = ["run", "--dataset", str(data), "--metrics", "rouge_l", "--profile", "starter", "--no-cache", "--quiet",
            "--no-report", "--fail-under", "rouge_l=0.5"]
    assert main(args + ["--output", str(tmp_path / "a")]) == 3
    err = capsys.readouterr().err
    assert "gate: rouge_l >= 0.5: mean 1.00 over 4 scored rows of 12 (8 unscored, 67%; at most 10% allowed" in err
    assert "gate failed: rouge_l: 8 of 12 rows unscored" in err
    assert main(args + ["--output", str(tmp_path / "b"), "--max-unscored", "0.7"]) == 0
    assert "over 4 scored rows of 12" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:  # not a share: argparse's usage error
        main(args + ["--output", str(tmp_path / "c"), "--max-unscored", "2"])
    assert stopped.value.code == 2 and "not a share of rows" in capsys.readouterr().err


# --- compare --fail-on-regression ------------------------------------------------------------------
def _compare(*args: str) -> int:
    from offline_eval.cli.report import main as report_main

    return report_main(["compare", *args])


def _rewrite(run: Path, change) -> None:
    """Each row of ``run``'s results.jsonl through ``change``; summary.json recomputed from them."""
    rows = [change(json.loads(line)) for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    summary["metrics"] = {}  # recomputed from the rows by load_run
    summary["run"]["metrics"] = sorted({m for r in rows for m in r["scores"]})
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")


def test_compare_gate_with_no_sample_in_common_fails(tmp_path, capsys):
    a, b = build_run(tmp_path, name="a"), build_run(tmp_path, name="b")
    _rewrite(b, lambda r: {**r, "id": "other-" + r["id"]})
    assert _compare(str(a), str(b), "-o", str(tmp_path / "cmp"), "--fail-on-regression") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["offline-eval compare: cannot gate: the runs share no sample id (12 in A, 12 in B): nothing to "
                   "gate on; compare two runs of the same dataset"]
    assert _compare(str(a), str(b), "-o", str(tmp_path / "cmp")) == 0  # without the gate: the table only


def test_compare_gate_with_no_metric_in_common_fails(tmp_path, capsys):
    a, b = build_run(tmp_path, name="a"), build_run(tmp_path, name="b")
    _rewrite(a, lambda r: {**r, "scores": {"faithfulness": r["scores"]["faithfulness"]}})
    _rewrite(b, lambda r: {**r, "scores": {"rouge_l": r["scores"]["faithfulness"]}})
    assert _compare(str(a), str(b), "-o", str(tmp_path / "cmp"), "--fail-on-regression") == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "share no metric (A: faithfulness; B: rouge_l)" in line and "same metrics" in line


def test_compare_gate_fails_a_metric_the_candidate_stopped_scoring_and_prints_its_pairs(tmp_path, capsys):
    a, b = build_run(tmp_path, name="a"), build_run(tmp_path, name="b")

    def unscore(row: dict) -> dict:
        if int(row["row"]) > 4:  # B scores faithfulness on its first rows only
            row["scores"]["faithfulness"] = {"value": None, "reason": "judge_unparseable"}
        return row
    _rewrite(b, unscore)
    assert _compare(str(a), str(b), "-o", str(tmp_path / "cmp"), "--fail-on-regression") == 1
    out, err = capsys.readouterr()
    assert "gate: faithfulness: delta +0.000 over 4 pairs of the 11 samples scored in A or B (7 unscored in the " \
           "other, 64%; at most 10% allowed, --max-unscored)" in out
    assert "GATE FAILED: faithfulness: 7 of the 11 samples" in err
    # allowed that many unscored, its 4 pairs are still too few to gate on either way
    assert _compare(str(a), str(b), "-o", str(tmp_path / "cmp"), "--fail-on-regression", "--max-unscored", "0.7") == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("offline-eval compare: cannot gate: faithfulness: 4 pairs of the 11 samples scored in A "
                           "or B, too few for an interval (needs at least 6")


def test_compare_gate_refuses_a_run_still_being_written(tmp_path, capsys):
    a, b = build_run(tmp_path, name="a"), build_run(tmp_path, name="b", write_summary=False)
    (b / "summary.json").unlink(missing_ok=True)
    assert _compare(str(a), str(b), "-o", str(tmp_path / "cmp"), "--fail-on-regression") == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "run B" in line and "has not finished" in line and "rerun" in line
    assert _compare(str(a), str(b), "-o", str(tmp_path / "cmp")) == 0
    assert "B has not finished" in capsys.readouterr().out
