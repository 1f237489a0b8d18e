"""Calibration: the fitting arithmetic, and `calibrate` -> `run` on tiny models, for one judge only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from offline_eval.people.calibration import (
    CALIBRATION_FILE, Calibration, best_threshold, cross_validated_accuracy, find_calibration, fit_calibration,
    fit_platt, read_calibrations, settings_signature, write_calibration,
)
from offline_eval.cli import main
from offline_eval.judging.settings import EvalSettings
from tests import tiny_models


def test_best_threshold_maximises_balanced_accuracy():
    values = [0.10, 0.20, 0.30, 0.32, 0.34, 0.60, 0.70]
    labels = [0, 0, 0, 1, 1, 1, 1]
    t = best_threshold(values, labels)
    assert 0.30 < t < 0.32  # the midpoint between the last negative and the first positive
    assert best_threshold([0.2, 0.4], [1, 1]) is None  # one class only


def test_platt_map_is_monotone_and_fits_the_base_rate():
    rng = np.random.default_rng(0)
    labels = rng.random(400) < 0.3
    values = np.clip(np.where(labels, rng.normal(0.6, 0.15, 400), rng.normal(0.3, 0.15, 400)), 0.01, 0.99)
    a, b = fit_platt(values, labels.astype(float))
    assert a > 0  # a higher score means a more probable positive
    c = Calibration("m", {}, {}, 0.5, (a, b), 400, int(labels.sum()))
    probs = [c.probability(v) for v in values]
    assert abs(np.mean(probs) - labels.mean()) < 0.02  # logistic regression reproduces the base rate
    assert c.probability(0.2) < c.probability(0.5) < c.probability(0.8)


def test_cross_validated_accuracy_is_honest_on_noise():
    rng = np.random.default_rng(1)
    values, labels = rng.random(200), (rng.random(200) < 0.5).astype(float)
    in_sample = fit_calibration("m", {}, EvalSettings(), values, labels).quality["balanced_accuracy_in_sample"]
    cv = cross_validated_accuracy(values, labels, folds=5)
    assert in_sample > cv + 0.03  # a threshold fitted to noise looks better on the data it was fitted on ...
    assert abs(cv - 0.5) < 0.08  # ... and is near chance on held-out folds


def test_calibration_file_round_trip_and_matching(tmp_path):
    settings = EvalSettings()
    c = fit_calibration("faithfulness", {"judge": "j1"}, settings, [0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1],
                        source={"dataset": "x.jsonl"})
    path = write_calibration(tmp_path, c)
    assert path == tmp_path / CALIBRATION_FILE
    write_calibration(path, c)  # refitting the same metric, models and settings replaces the entry
    loaded = read_calibrations(tmp_path)
    assert len(loaded) == 1 and loaded[0].threshold == pytest.approx(c.threshold)
    assert find_calibration(loaded, "faithfulness", {"judge": "j1"}, settings) is not None
    assert find_calibration(loaded, "faithfulness", {"judge": "j2"}, settings) is None  # another judge
    assert find_calibration(loaded, "answer_correctness", {"judge": "j1"}, settings) is None
    assert find_calibration(loaded, "faithfulness", {"judge": "j1"}, EvalSettings(verdict_score="threshold")) is None
    assert settings_signature(settings)["context_window"] == settings.context_window
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="calibrate"):
        read_calibrations(path)


def test_a_metric_s_options_are_part_of_the_signature_and_older_files_still_match(tmp_path):
    from offline_eval.metrics.ragas import AnswerCorrectness

    settings, metric = EvalSettings(), AnswerCorrectness()
    c = fit_calibration(metric.name, {"judge": "j1"}, settings, [0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1],
                        options=metric.config())
    assert c.settings["options"] == {"weights": [0.75, 0.25]}
    assert find_calibration([c], metric.name, {"judge": "j1"}, settings, metric.config()) is c
    other = AnswerCorrectness(weights=(1.0, 0.0))
    assert find_calibration([c], metric.name, {"judge": "j1"}, settings, other.config()) is None
    # written before the weights were answer_correctness' own option: they stood among every metric's settings
    older = {k: v for k, v in c.settings.items() if k != "options"} | {"answer_correctness_weights": [0.75, 0.25]}
    path = tmp_path / CALIBRATION_FILE
    path.write_text(json.dumps({"format": 1, "calibrations": [
        {**c.to_dict(), "settings": older}, {**c.to_dict(), "metric": "faithfulness", "settings": older}]}))
    read = {x.metric: x for x in read_calibrations(path)}
    assert find_calibration([read["answer_correctness"]], metric.name, {"judge": "j1"}, settings,
                            metric.config()) is not None
    assert find_calibration([read["faithfulness"]], "faithfulness", {"judge": "j1"}, settings) is not None


def _labelled(path: Path) -> Path:
    rows = []
    for i in range(12):
        supported = i % 2 == 0
        rows.append({"id": f"r{i}", "question": "What is the capital of France?",
                     "answer": "Paris is the capital of France." if supported else f"Lyon has {i} staff.",
                     "contexts": ["The capital of France is Paris. Water boils at 100 degrees."],
                     "human": "yes" if supported else "no"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_calibrate_writes_into_the_judge_folder_and_run_applies_it_to_that_judge_only(tiny_profile, tmp_path, capsys):
    judge_a = shutil.copytree(Path(_judge_path(tiny_profile)), tmp_path / "judge-a")
    judge_b = tiny_models.build_judge(tmp_path / "judge-b", seed=99)  # another judge: other weights
    data = _labelled(tmp_path / "labelled.jsonl")
    common = ["--profile", str(tiny_profile), "--verifier", "judge", "--cache", str(tmp_path / "cache.sqlite"),
              "--quiet"]
    assert main(["calibrate", "--dataset", str(data), "--labels", "human", "--positive", "yes", "--min-per-class", "6",
                 "--metric", "faithfulness", "--judge", str(judge_a), "--output", str(tmp_path / "cal"), *common]) == 0
    assert "threshold" in capsys.readouterr().out
    written = read_calibrations(judge_a)
    assert len(written) == 1 and written[0].metric == "faithfulness" and written[0].n == 12

    def run(judge: Path, out: str, *extra: str) -> dict:
        assert main(["run", "--dataset", str(data), "--metrics", "faithfulness,rouge_l", "--judge", str(judge),
                     "--output", str(tmp_path / out), "--no-report", *common, *extra]) == 0
        return json.loads((tmp_path / out / "summary.json").read_text())

    capsys.readouterr()
    summary = run(judge_a, "run-a")
    assert "calibration: faithfulness: calibrated threshold" in capsys.readouterr().out
    used = summary["metrics"]["faithfulness"]["calibration"]
    assert used["threshold"] == pytest.approx(written[0].threshold, abs=1e-6)
    assert 0.0 <= used["positive_share"] <= 1.0
    rows = [json.loads(line) for line in (tmp_path / "run-a" / "results.jsonl").read_text().splitlines()]
    calibrated = rows[0]["scores"]["faithfulness"]["metadata"]["calibrated"]
    assert calibrated["positive"] == (rows[0]["scores"]["faithfulness"]["value"] >= written[0].threshold)
    assert "calibration" not in summary["metrics"]["rouge_l"]  # model-free metrics are not calibrated
    from offline_eval.report.html import write_report
    page = write_report(tmp_path / "run-a").read_text(encoding="utf-8")
    assert "calibration: faithfulness: calibrated threshold" in page  # the report names the calibration used

    # The same calibration file beside another judge's weights does not apply to it.
    shutil.copy(judge_a / CALIBRATION_FILE, judge_b / CALIBRATION_FILE)
    assert run(judge_b, "run-b")["metrics"]["faithfulness"]["calibration"] is None
    assert "calibration: none for these models: faithfulness" in capsys.readouterr().out  # and the run says so
    # Nor with other settings, and --no-calibration turns it off.
    assert run(judge_a, "run-c", "--verdict-score", "threshold")["metrics"]["faithfulness"]["calibration"] is None
    assert run(judge_a, "run-d", "--no-calibration")["metrics"]["faithfulness"]["calibration"] is None


def _judge_path(manifest: Path) -> str:
    import tomllib
    return tomllib.loads(manifest.read_text())["judge"]["path"]
