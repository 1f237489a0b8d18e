"""What `agreement`, `calibrate` and `estimate` do with input that cannot be measured: one line naming the
file, row and field (or the flag) and what to do, before anything is scored where the input allows it; and
the figures they do give saying what they rest on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offline_eval.cli import main
from offline_eval.data.schema import DataError, Sample
from offline_eval.people.agreement.scoring import label_value, read_labels

from tests.agreement.test_agreement import UNRELATED_NO
from tests.agreement.test_enough import _scored_run
from tests.report.test_report_fixtures import build_run


def _write(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# --- agreement on a scripted judge --------------------------------------------------------------------
# Each answer's statement gets its own P(Yes), so the scores are known: "Fact k." -> 0.05 + 0.9 * k / n.
def _labelled_set(tmp_path: Path, labels: list, **fields: list) -> tuple[Path, Path]:
    n = len(labels)
    rows = [{"id": f"s{k}", "question": "q", "answer": f"Fact {k} holds.", "contexts": [f"Fact {k} holds."],
             "human": label, **{name: values[k] for name, values in fields.items() if values[k] is not None}}
            for k, label in enumerate(labels)]
    script = {"options": [UNRELATED_NO] + [
        {"match": f"Statement: Fact {k} holds.", "probs": {"Yes": 0.05 + 0.9 * k / n, "No": 0.95 - 0.9 * k / n}}
        for k in range(n)]}
    (tmp_path / "script.json").write_text(json.dumps(script), encoding="utf-8")
    return _write(tmp_path / "labelled.jsonl", rows), tmp_path / "script.json"


def _agreement(tmp_path: Path, data: Path, script: Path, *extra: str, positive: tuple[str, ...] = ()) -> int:
    return main(["agreement", "--dataset", str(data), "--labels", "human", *(["--positive", *positive] if positive
                                                                             else []),
                 "--metric", "faithfulness_sentences", "--profile", "starter", "--judge-backend", "scripted",
                 "--judge", str(script), "--output", str(tmp_path / "out"), "--cache", str(tmp_path / "c.sqlite"),
                 "--quiet", *extra])


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    refusals = [line for line in err if "starter profile" not in line]
    assert len(refusals) == 1, err
    return refusals[0]


@pytest.mark.parametrize("key, held", [("claims", "holds a list of 1, not a finite number"),
                                       ("statements", "holds 'sentences', not a finite number")])
def test_a_value_key_that_holds_no_number_is_one_line_naming_it(tmp_path, capsys, key, held):
    data, script = _labelled_set(tmp_path, ["yes", "no", "yes", "no"])
    assert _agreement(tmp_path, data, script, "--value", key, "--min-per-class", "2", positive=("yes",)) == 2
    line = _one_line(capsys)
    assert f"--value {key}: the metric's metadata['{key}'] of sample s0 {held}" in line
    assert "labelled.jsonl, row 1" in line and "mean_probability, supported_share" in line
    assert not (tmp_path / "out" / "agreement.json").exists()


def test_a_value_key_no_score_holds_is_refused_naming_the_keys_they_carry(tmp_path, capsys):
    data, script = _labelled_set(tmp_path, ["yes", "no", "yes", "no"])
    assert _agreement(tmp_path, data, script, "--value", "nosuchkey", "--min-per-class", "2", positive=("yes",)) == 2
    line = _one_line(capsys)
    assert "--value nosuchkey: no score of faithfulness_sentences holds that key" in line
    assert "claims" in line and "numbers: mean_probability, supported_share" in line
    assert not (tmp_path / "out" / "agreement.json").exists()


def test_a_list_label_is_an_error_naming_the_file_row_and_field_not_a_no(tmp_path, capsys):
    data, script = _labelled_set(tmp_path, ["yes", ["yes"], "no", "no"])
    assert _agreement(tmp_path, data, script, "--min-per-class", "1", positive=("yes",)) == 2
    line = _one_line(capsys)
    assert f"{data}, row 2, field 'human': expected a label (text, a number, true or false), got a list" in line
    assert not (tmp_path / "out").exists()  # nothing scored


def test_an_infinite_label_is_refused_while_reading_naming_the_row(tmp_path, capsys):
    data, script = _labelled_set(tmp_path, [1, float("inf"), 0, 0])  # written as JSON's Infinity
    assert _agreement(tmp_path, data, script, "--min-per-class", "1") == 2
    line = _one_line(capsys)
    assert line == f"offline-eval: bad input: {data}, row 2, field 'human': label inf is not a finite number"
    assert not (tmp_path / "out").exists()  # refused while reading, before scoring
    samples = [Sample(id="a", row=1, extra={"h": 1}), Sample(id="b", row=2, extra={"h": float("-inf")})]
    with pytest.raises(DataError, match="row 2, field 'h': label -inf is not a finite number"):
        read_labels(samples, "h")


def test_positive_matches_whatever_the_case():
    assert [label_value(v, ["yes"]) for v in ("yes", "Yes", "YES", " yes ", "no")] == [1.0, 1.0, 1.0, 1.0, 0.0]
    assert label_value("Generic", ["yes"], ["generic"]) == "drop"


@pytest.mark.parametrize("threshold, says", [("nan", "--threshold nan: not a finite number"),
                                             ("2", "--threshold 2.0: faithfulness_sentences's values lie in [0, 1]")])
def test_a_threshold_outside_the_metric_s_values_is_refused_before_scoring(tmp_path, capsys, threshold, says):
    data, script = _labelled_set(tmp_path, ["yes", "no", "yes", "no"])
    assert _agreement(tmp_path, data, script, "--threshold", threshold, "--min-per-class", "2",
                      positive=("yes",)) == 2
    assert says in _one_line(capsys)
    assert not (tmp_path / "out").exists()


# --- the pairwise protocol ----------------------------------------------------------------------------
def test_pairwise_without_a_pair_field_or_with_one_no_row_has_is_refused_before_scoring(tmp_path, capsys):
    data, script = _labelled_set(tmp_path, [1, 0, 1, 0], pair=["a", "a", "b", "b"])
    assert _agreement(tmp_path, data, script, "--protocol", "pairwise") == 2
    assert "--protocol pairwise needs --pair-field FIELD" in _one_line(capsys)
    assert _agreement(tmp_path, data, script, "--protocol", "pairwise", "--pair-field", "nosuch") == 2
    line = _one_line(capsys)
    assert "no labelled sample has a value in field 'nosuch' (--pair-field)" in line and "human, pair" in line
    assert not (tmp_path / "out").exists()


def test_pairwise_refuses_too_few_pairs_and_says_what_its_figure_rests_on(tmp_path, capsys):
    # groups: a (3 samples, labels 2/1/0: 3 pairs), b (2 samples: 1 pair), c (1 sample: no pair), one without
    pair = ["a", "a", "a", "b", "b", "c", None]
    data, script = _labelled_set(tmp_path, [2, 1, 0, 1, 0, 1, 0], pair=pair)
    assert _agreement(tmp_path, data, script, "--protocol", "pairwise", "--pair-field", "pair") == 2
    line = _one_line(capsys)
    assert "the pairwise agreement of faithfulness_sentences would rest on 4 pairs" in line
    assert "alone_in_group 1, no_pair_key 1" in line and "--min-pairs" in line
    assert not (tmp_path / "out").exists()  # refused before scoring

    assert _agreement(tmp_path, data, script, "--protocol", "pairwise", "--pair-field", "pair", "--min-pairs", "2") == 0
    out, err = capsys.readouterr()
    assert "WARNING: the pairwise agreement of faithfulness_sentences rests on only 4 pairs, fewer than 10" in err
    assert "excluded: alone_in_group 1, no_pair_key 1" in out
    assert "groups 2, of which 1 gave more than one pair" in out
    report = json.loads((tmp_path / "out" / "agreement.json").read_text(encoding="utf-8"))
    assert report["n_pairs"] == 4 and report["groups_with_several_pairs"] == 1
    # the scores rise with k, the labels fall: the metric prefers the other item in every pair
    assert report["accuracy"]["value"] == 0.0


# --- calibrate and estimate ---------------------------------------------------------------------------
@pytest.mark.parametrize("label", [[True], {"v": True}])
def test_a_list_or_object_label_in_a_labels_file_is_one_line(tmp_path, capsys, label):
    run = _scored_run(tmp_path, [])
    labels = _write(tmp_path / "L.jsonl", [{"id": "r0", "metric": "rouge_l", "label": True},
                                           {"id": "r1", "metric": "rouge_l", "label": label}])
    kind = "a list of 1" if isinstance(label, list) else "an object"
    capsys.readouterr()
    for command in (["estimate", str(run), "--labels", str(labels), "--no-write"],
                    ["calibrate", "--run", str(run), "--labels", str(labels), "--metric", "rouge_l",
                     "--to", str(tmp_path / "c.json")]):
        assert main(command) == 2
        assert _one_line(capsys) == (f"offline-eval: bad input: {labels}, row 2, field 'label': expected yes, no, "
                                     f"unsure, true or false, got {kind}")


def test_estimate_refuses_labels_that_name_no_metric_of_the_run(tmp_path, capsys):
    run = build_run(tmp_path)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    assert main(["estimate", str(run), "--labels", str(empty), "--no-write"]) == 2
    line = _one_line(capsys)
    assert f"{empty}: holds no labels" in line and "offline-eval review" in line
    other = _write(tmp_path / "other.jsonl", [{"id": "q01", "metric": "context_recall", "label": True}])
    assert main(["estimate", str(run), "--labels", str(other), "--no-write"]) == 2
    line = _one_line(capsys)
    assert "no label names a metric of this run (the labels are for context_recall; the run scored" in line


def test_estimate_refuses_labels_that_fall_only_on_rows_it_cannot_use(tmp_path, capsys):
    """A label on an unscored row (q08's answer is empty) or on no row of the run estimates nothing: a
    table of "0 / 11 — —" and exit 0 would read as done. Refused in one line saying what was left out
    and what to do, and summary.json is left as it was."""
    run = build_run(tmp_path)
    before = (run / "summary.json").read_bytes()
    unscored = _write(tmp_path / "unscored.jsonl", [{"id": "q08", "metric": "faithfulness", "label": "yes"},
                                                    {"id": "nowhere", "metric": "faithfulness", "label": "no"}])
    assert main(["estimate", str(run), "--labels", str(unscored)]) == 2
    line = _one_line(capsys)
    assert f"{unscored}: no label is a yes or no on a row this run scored" in line
    assert "faithfulness: 2 labelled rows left out (unknown_id 1, unscored 1)" in line
    assert "label the rows it scored with `offline-eval review" in line
    assert (run / "summary.json").read_bytes() == before


def test_estimate_says_one_label_not_one_labels(tmp_path, capsys):
    run = build_run(tmp_path)
    one = _write(tmp_path / "one.jsonl", [{"id": "q01", "metric": "faithfulness", "label": True}])
    assert main(["estimate", str(run), "--labels", str(one), "--no-write"]) == 0
    out = capsys.readouterr().out  # the caveat stands under its estimate in the table
    assert "only 1 label: the interval" in out and "1 labels" not in out


def test_a_run_s_line_says_where_a_calibration_from_a_run_was_fitted_and_on_how_few(tmp_path):
    from offline_eval.judging.settings import EvalSettings
    from offline_eval.people.calibration import calibration_entries, fit_calibration
    from offline_eval.records import RunSummary
    from offline_eval.report._run import calibration_notes

    values, labels = [0.9, 0.8, 0.7, 0.4, 0.3, 0.2], [1, 1, 0, 1, 0, 0]
    source = {"run": "runs/data", "labels": "runs/data/labels.jsonl"}  # what calibrate --run records
    calibration = fit_calibration("faithfulness", {"judge": "j"}, EvalSettings(), values, labels, source=source)
    entries = calibration_entries({"faithfulness": calibration}, {"faithfulness": values})
    summary = RunSummary.from_dict({"metrics": {"faithfulness": {"mean": 0.5, "calibration": entries["faithfulness"]}}})
    [line] = calibration_notes(summary.metrics)
    assert "fitted on ?" not in line
    assert ("(fitted on run runs/data, labels runs/data/labels.jsonl, 3 yes and 3 no, below the default minimum of "
            "10 per class, n = 6") in line
    enough = fit_calibration("faithfulness", {"judge": "j"}, EvalSettings(), values * 4, labels * 4,
                             source={"dataset": "labelled.jsonl"})
    assert enough.fitted_on() == "labelled.jsonl"  # 12 of each: nothing to warn of


def test_the_help_of_agreement_and_calibrate_names_no_flag_they_lack(capsys):
    for command in ("agreement", "calibrate"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "--metrics" not in text and "--criteria FILE.toml" in text
        assert "whatever their case" in text
