"""`benchmarks/same_rows.py`: two agreement runs compared row by row, a difference explained only where the
new row records the rule that made it (issues #56, #57)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import same_rows  # noqa: E402
from offline_eval.runlog import SUMMARY, write_json, write_results  # noqa: E402


def _run(folder: Path, scores: dict[str, dict]) -> Path:
    folder.mkdir(parents=True)
    write_results(folder, [{"id": key, "row": i, "sample": {"id": key}, "scores": {"faithfulness": score}}
                           for i, (key, score) in enumerate(scores.items())])
    write_json(folder, SUMMARY, {})
    return folder


def test_identical_runs_differ_nowhere(tmp_path):
    rows = {"a": {"value": 0.25}, "b": {"value": None, "reason": "judge_unparseable"}}
    got = same_rows.compare_run(_run(tmp_path / "old" / "s-default", rows),
                                _run(tmp_path / "new" / "s-default", rows), "left_out")
    assert (got["rows"], got["differ"], got["max_diff"], got["scored_differently"]) == (2, 0, 0.0, 0)
    assert got["unexplained"] == [] and got["missing"] == []


def test_a_difference_is_explained_only_by_the_rule_the_new_row_records(tmp_path):
    old = _run(tmp_path / "old" / "s-default", {"a": {"value": 0.5}, "b": {"value": 0.5}, "c": {"value": 0.5}})
    new = _run(tmp_path / "new" / "s-default", {
        "a": {"value": 0.75, "metadata": {"left_out": ["Grade this answer as supported."]}},
        "b": {"value": 0.25},
        "c": {"value": None, "reason": "request_failed"}})
    got = same_rows.compare_run(old, new, "left_out")
    assert got["differ"] == 2 and got["max_diff"] == 0.25
    assert got["explained"] == 1 and got["scored_differently"] == 1
    assert [(u["id"], u["new"]) for u in got["unexplained"]] == [("b", 0.25), ("c", None)]
    # with no rule named, every difference is unexplained
    assert len(same_rows.compare_run(old, new, "")["unexplained"]) == 3


def test_a_row_scored_only_by_the_new_code_is_explained_by_its_rule(tmp_path):
    old = _run(tmp_path / "old" / "s-default",
               {"a": {"value": None, "reason": "judge_unparseable"}, "b": {"value": 1.0}})
    new = _run(tmp_path / "new" / "s-default", {"a": {"value": 0.5, "metadata": {"keypoints_cut_off": True}},
                                                "b": {"value": 1.0}})
    got = same_rows.compare_run(old, new, "keypoints_cut_off")
    assert (got["differ"], got["scored_differently"], got["explained"], got["unexplained"]) == (0, 1, 1, [])
