"""Never a confident number from too little (issue #56): `estimate` on a run still being written, and
`calibrate` / `agreement` on a handful of labels, refuse in one line that says what is missing and what to do."""

from __future__ import annotations

import json
from pathlib import Path

from offline_eval.cli import main

from tests.report.test_report_fixtures import build_run


def _write_labels(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _unfinished(tmp_path: Path, rows: int = 4) -> Path:
    """A run folder as a run leaves it after its first window: run.json, the first rows, no summary.json."""
    run = build_run(tmp_path, write_summary=False)
    (run / "summary.json").unlink(missing_ok=True)
    lines = (run / "results.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (run / "results.jsonl").write_text("".join(lines[:rows]), encoding="utf-8")
    (run / "run.json").write_text(json.dumps({"fingerprint": "f", "metrics": ["faithfulness"]}), encoding="utf-8")
    return run


def test_estimate_refuses_a_run_still_being_written_unless_told(tmp_path, capsys):
    run = _unfinished(tmp_path)
    labels = [{"id": f"q{i:02d}", "metric": "faithfulness", "label": i % 2 == 0} for i in range(1, 12)]
    path = _write_labels(tmp_path / "labels.jsonl", labels)
    assert main(["estimate", str(run), "--labels", str(path), "--json", "--no-write"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert "has not finished" in err and "--partial" in err and "rerun" in err
    # told: the figures come, with a line saying they are over the rows written so far
    assert main(["estimate", str(run), "--labels", str(path), "--json", "--no-write", "--partial"]) == 0
    out, err = capsys.readouterr()
    fa = json.loads(out)["faithfulness"]
    assert fa["n"] <= 4 and "--partial" in err and "4 rows written so far" in err
    assert not (run / "summary.json").exists()


def test_estimate_refuses_a_finished_run_whose_results_lost_rows_unless_told(tmp_path, capsys):
    """A finished run whose results.jsonl holds fewer rows than summary.json counts (its last line cut
    short, rows removed) is read as the rows left only when told: the labels of the missing rows would
    count as unknown ids, and the estimate would look like one over the whole run."""
    run = build_run(tmp_path)
    lines = (run / "results.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    summary["run"]["n_samples"] = len(lines)
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    (run / "results.jsonl").write_text("".join(lines[:-1]) + lines[-1][:20], encoding="utf-8")  # a cut last line
    labels = [{"id": f"q{i:02d}", "metric": "faithfulness", "label": i % 2 == 0} for i in range(1, 12)]
    path = _write_labels(tmp_path / "labels.jsonl", labels)
    assert main(["estimate", str(run), "--labels", str(path), "--json", "--no-write"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert f"results.jsonl holds {len(lines) - 1} of the {len(lines)} samples summary.json counts" in err
    assert "--partial" in err
    assert main(["estimate", str(run), "--labels", str(path), "--json", "--no-write", "--partial"]) == 0
    assert "faithfulness" in json.loads(capsys.readouterr().out)

def _scored_run(tmp_path: Path, labels: list[bool]) -> Path:
    """A finished run of a model-free metric (rouge_l) on 12 rows, with a label for the first len(labels)."""
    rows = [{"id": f"r{i}", "question": "Where is Paris?", "answer": "Paris is in France." if i % 2 else "Lyon.",
             "contexts": ["Paris is the capital of France."], "ground_truth": "Paris is in France."}
            for i in range(12)]
    data = _write_labels(tmp_path / "d.jsonl", rows)
    out = tmp_path / "run"
    assert main(["run", "--dataset", str(data), "--metrics", "rouge_l", "--profile", "starter", "--no-cache",
                 "--quiet", "--no-report", "--output", str(out)]) == 0
    _write_labels(out / "labels.jsonl", [{"id": f"r{i}", "metric": "rouge_l", "label": y} for i, y in enumerate(labels)])
    return out


def test_calibrate_refuses_two_labels_and_warns_when_told_to_fit_on_few(tmp_path, capsys):
    run = _scored_run(tmp_path, [False, True])
    target = tmp_path / "calibration.json"
    args = ["calibrate", "--run", str(run), "--metric", "rouge_l", "--to", str(target)]
    capsys.readouterr()
    assert main(args) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "1 yes and 1 no labels" in line and "at least 10 of each (--min-per-class)" in line
    assert "offline-eval review" in line and not target.exists()  # nothing written for later runs to apply
    assert main(args + ["--min-per-class", "1"]) == 0
    err = capsys.readouterr().err
    assert "WARNING: a calibration of rouge_l rests on only 1 yes and 1 no labels, fewer than 10 of each" in err
    assert target.exists()


def test_calibrate_refuses_six_labels_of_each_class_by_default(tmp_path, capsys):
    run = _scored_run(tmp_path, [i % 2 == 1 for i in range(12)])  # 6 of each: still too few
    assert main(["calibrate", "--run", str(run), "--metric", "rouge_l", "--to", str(tmp_path / "c.json")]) == 2
    assert "6 yes and 6 no labels" in capsys.readouterr().err


def test_the_labels_per_class_check_by_itself(capsys):
    import pytest

    from offline_eval.people.agreement.scoring import check_labels_per_class
    from offline_eval.data.schema import DataError

    check_labels_per_class("x", 10, 12, None)  # enough: silent
    assert capsys.readouterr().err == ""
    with pytest.raises(DataError, match="9 yes and 12 no labels; it needs at least 10 of each"):
        check_labels_per_class("x", 9, 12, None)
    check_labels_per_class("x", 9, 12, 5)
    assert "WARNING: x rests on only 9 yes and 12 no labels" in capsys.readouterr().err


def test_agreement_refuses_a_handful_of_labels_before_scoring(tmp_path, capsys):
    rows = [{"id": f"s{i}", "question": "q", "answer": "a", "contexts": ["c"], "h": "yes" if i < 2 else "no"}
            for i in range(5)]
    data = _write_labels(tmp_path / "labelled.jsonl", rows)
    out = tmp_path / "agreement"
    assert main(["agreement", "--dataset", str(data), "--labels", "h", "--positive", "yes", "--metric", "faithfulness",
                 "--profile", "starter", "--output", str(out), "--no-cache", "--quiet"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "the agreement of faithfulness would rest on 2 yes and 3 no labels" in line and "--min-per-class" in line
    assert not out.exists()  # refused before anything was scored


def test_the_warning_is_given_once_and_the_check_before_scoring_only_refuses(capsys):
    import argparse

    import pytest

    from offline_eval.people.agreement.scoring import _check_labelled
    from offline_eval.data.schema import DataError

    args = argparse.Namespace(metric="faithfulness", min_per_class=2)
    _check_labelled("calibrate", [1, 1, 0, 0, 0], args, warn=False)
    assert capsys.readouterr().err == ""
    with pytest.raises(DataError, match="a calibration of faithfulness would rest on 1 yes and 3 no labels"):
        _check_labelled("calibrate", [1, 0, 0, 0], args, warn=False)
