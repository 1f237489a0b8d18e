"""Criteria of your own (offline_eval.metrics.criteria): a file of yes/no and graded questions, each a
metric, through the CLI, a TOML config and the API; values from option probabilities; mistakes are one
line before any model loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from offline_eval.api import evaluate
from offline_eval.cli import main
from offline_eval.data.schema import DataError, Sample
from offline_eval.engine.executor import Engine, Task
from offline_eval.judging.settings import EvalSettings
from offline_eval.metrics import metric_classes
from offline_eval.metrics.base import as_score, start
from offline_eval.metrics.criteria import criterion_metric, criterion_prompt, load_criteria, read_criteria
from offline_eval.runtime.scripted import ScriptedJudge

from tests.helpers import models

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "sample.jsonl"
CRITERIA = """
[grounded]
question = "Is every statement of the answer supported by the context?"
reads = ["contexts", "answer"]
lean_correction = false

[polite]
question = "How polite is the answer?"
reads = ["question", "answer"]
grades = { 1 = "rude", 2 = "neutral", 3 = "polite" }

[legal_advice]
question = "Does the answer give legal advice?"
reads = ["answer"]
higher_is_better = false
"""
NAMES = ["criterion_grounded", "criterion_polite", "criterion_legal_advice"]
SAMPLE = Sample(id="s", question="Who wrote Hamlet?", answer="Shakespeare wrote it.",
                contexts=["Hamlet is a play by Shakespeare."], ground_truth="Shakespeare")


@pytest.fixture(autouse=True)
def registry_as_it_was():
    """Each test's criteria are registered for that test only (the registry is the process's)."""
    import offline_eval.metrics as metrics

    before = dict(metrics._REGISTERED)
    yield
    metrics._REGISTERED.clear()
    metrics._REGISTERED.update(before)


def write(tmp_path: Path, text: str = CRITERIA, name: str = "criteria.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def score(metric_name: str, judge: ScriptedJudge, settings: EvalSettings | None = None, sample: Sample = SAMPLE):
    engine = Engine(models(judge))
    [task] = engine.run([Task(key=0, generator=start(metric_classes()[metric_name](), sample,
                                                     settings or EvalSettings()))])
    return as_score(task.result)


# ----------------------------------------------------------------------------- values
def test_a_yes_no_criterion_is_p_yes_and_a_graded_one_the_expected_grade_scaled(tmp_path: Path) -> None:
    load_criteria([write(tmp_path)])
    judge = ScriptedJudge(script={"options": [
        {"match": "Is every statement", "probs": {"Yes": 0.8, "No": 0.2}},
        {"match": "How polite", "probs": {"1": 0.1, "2": 0.2, "3": 0.7}}]})
    assert score("criterion_grounded", judge).value == pytest.approx(0.8)
    graded = score("criterion_polite", judge)
    expected = 1 * 0.1 + 2 * 0.2 + 3 * 0.7
    assert graded.value == pytest.approx((expected - 1) / 2)
    assert graded.metadata["most_likely_grade"] == 3 and graded.metadata["grade_description"] == "polite"
    assert graded.metadata["expected_grade"] == pytest.approx(expected)


def test_generate_verdicts_give_a_reason(tmp_path: Path) -> None:
    load_criteria([write(tmp_path)])
    judge = ScriptedJudge(script={"generate": [
        {"match": "Is every statement", "response": '{"reason": "the context names him", "verdict": "Yes"}'},
        {"match": "How polite", "response": '{"reason": "courteous", "verdict": 2}'}]})
    settings = EvalSettings(verdicts="generate")
    yes = score("criterion_grounded", judge, settings)
    assert yes.value == 1.0 and yes.explanation == "the context names him"
    assert score("criterion_polite", judge, settings).value == pytest.approx(0.5)
    bad = score("criterion_grounded", ScriptedJudge(script={"default_response": "no idea"}), settings)
    assert bad.value is None and bad.reason == "judge_unparseable"  # unscored with its reason, never NaN


def test_the_lean_correction_asks_again_with_the_answer_left_empty(tmp_path: Path) -> None:
    """On by default for a yes/no criterion that reads the contexts and the answer."""
    load_criteria([write(tmp_path, '[g]\nquestion = "Supported?"\nreads = ["contexts", "answer"]\n')])

    def probs(text: str) -> dict[str, float]:
        return {"Yes": 0.6, "No": 0.4} if "Answer:\n \n" in text else {"Yes": 0.8, "No": 0.2}
    got = score("criterion_g", ScriptedJudge(script={"options": [{"match": "", "probs": probs}]}))
    assert got.metadata["judge_probability"] == pytest.approx(0.8) and got.metadata["baseline"] == pytest.approx(0.6)
    assert 0.6 < got.value < 0.8  # half the passage's lean (log-odds) taken out, by default


def test_criteria_of_one_sample_share_their_prompt_prefix(tmp_path: Path) -> None:
    two = read_criteria(write(tmp_path, '[a]\nquestion = "First?"\nreads = ["contexts", "answer"]\n'
                                        '[b]\nquestion = "Second?"\nreads = ["contexts", "answer"]\n'))
    values = {"contexts": "[1] Hamlet is a play by Shakespeare.", "answer": "Shakespeare wrote it."}
    first, second = (criterion_prompt(c, "en").render("en", **values)[-1][1] for c in two)
    shared = first[:first.index("First?")]
    assert second.startswith(shared) and "Shakespeare wrote it." in shared


def test_a_criterion_reading_the_question_sees_the_conversation(tmp_path: Path) -> None:
    from offline_eval.data.schema import Turn

    load_criteria([write(tmp_path)])
    judge = ScriptedJudge(script={"default_probs": {"1": 0.2, "2": 0.3, "3": 0.5}})
    follow_up = Sample(id="f", question="And his birth year?", answer="1564.",
                       conversation=[Turn("user", "Who wrote Hamlet?"), Turn("assistant", "Shakespeare."),
                                     Turn("user", "And his birth year?")])
    score("criterion_polite", judge, EvalSettings(history="tail"), sample=follow_up)
    assert "Conversation so far:\nUser: Who wrote Hamlet?" in judge.prompts_seen[-1]
    score("criterion_polite", judge, sample=follow_up)  # the default reads the question alone
    assert "Conversation so far:" not in judge.prompts_seen[-1]


# ----------------------------------------------------------------------------- CLI, TOML, API
def test_a_criteria_file_runs_through_the_cli_a_config_and_the_api(tiny_profile: Path, tmp_path: Path) -> None:
    criteria = write(tmp_path)
    cli = tmp_path / "cli"
    assert main(["run", "--dataset", str(EXAMPLES), "--profile", str(tiny_profile), "--metrics", "rouge_l",
                 "--criteria", str(criteria), "--no-cache", "--quiet", "--output", str(cli)]) == 0
    summary = json.loads((cli / "summary.json").read_text(encoding="utf-8"))
    assert set(NAMES) <= set(summary["metrics"]) and "rouge_l" in summary["metrics"]
    assert summary["metrics"]["criterion_legal_advice"]["higher_is_better"] is False
    assert all(summary["metrics"][n]["n_scored"] > 0 for n in NAMES)
    report = (cli / "report.html").read_text(encoding="utf-8")
    assert all(n in report for n in NAMES)
    run_info = json.loads((cli / "run.json").read_text(encoding="utf-8"))
    assert run_info["metric_options"]["criterion_polite"]["criterion"]["grades"] == {"1": "rude", "2": "neutral",
                                                                                    "3": "polite"}

    config = tmp_path / "run.toml"  # a file's criteria, named in a config; then written in the config itself
    config.write_text(f'metrics = ["rouge_l"]\ncriteria = "{criteria}"\n', encoding="utf-8")
    by_file = tmp_path / "by-file"
    assert main(["run", "--config", str(config), "--dataset", str(EXAMPLES), "--profile", str(tiny_profile),
                 "--no-cache", "--quiet", "--no-report", "--output", str(by_file)]) == 0
    inline = tmp_path / "inline.toml"
    inline.write_text('metrics = ["criterion_polite"]\n[criteria.polite]\nquestion = "How polite is the answer?"\n'
                      'reads = ["question", "answer"]\ngrades = { 1 = "rude", 2 = "neutral", 3 = "polite" }\n',
                      encoding="utf-8")
    in_config = tmp_path / "in-config"
    assert main(["run", "--config", str(inline), "--dataset", str(EXAMPLES), "--profile", str(tiny_profile),
                 "--no-cache", "--quiet", "--no-report", "--output", str(in_config)]) == 0

    api = evaluate(str(EXAMPLES), ["rouge_l"], profile=str(tiny_profile), criteria=criteria, cache=False)
    values = {n: [json.loads(line)["scores"][n]["value"]
                  for line in (cli / "results.jsonl").read_text(encoding="utf-8").splitlines()] for n in NAMES}
    assert [row.value("criterion_polite") for row in api.result_rows] == pytest.approx(values["criterion_polite"],
                                                                                        abs=1e-6)
    by_file_rows = [json.loads(line) for line in (by_file / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["scores"]["criterion_polite"]["value"] for r in by_file_rows] == pytest.approx(values["criterion_polite"],
                                                                                            abs=1e-6)
    in_config_rows = [json.loads(line) for line in (in_config / "results.jsonl").read_text().splitlines()]
    assert set(in_config_rows[0]["scores"]) == {"criterion_polite"}  # --metrics named it: only it
    assert [r["scores"]["criterion_polite"]["value"] for r in in_config_rows] == pytest.approx(
        values["criterion_polite"], abs=1e-6)


def test_fail_under_reads_a_criterions_direction(tiny_profile: Path, tmp_path: Path, capsys) -> None:
    criteria = write(tmp_path)
    args = ["run", "--dataset", str(EXAMPLES), "--profile", str(tiny_profile), "--criteria", str(criteria),
            "--metrics", "criterion_legal_advice", "--no-cache", "--quiet", "--no-report"]
    assert main(args + ["--output", str(tmp_path / "a"), "--fail-under", "criterion_legal_advice=0.0"]) == 3
    assert "(lower is better)" in capsys.readouterr().err
    assert main(args + ["--output", str(tmp_path / "b"), "--fail-under", "criterion_legal_advice=1.0"]) == 0


def test_calibrate_fits_a_criterion_from_a_run_and_labels(tiny_profile: Path, tmp_path: Path, capsys) -> None:
    criteria = write(tmp_path)
    out = tmp_path / "run"
    assert main(["run", "--dataset", str(EXAMPLES), "--profile", str(tiny_profile), "--criteria", str(criteria),
                 "--metrics", "criterion_grounded", "--no-cache", "--quiet", "--no-report", "--output", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    labels = out / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": r["id"], "metric": "criterion_grounded", "label": i % 2 == 0}) + "\n"
                              for i, r in enumerate(rows)), encoding="utf-8")
    target = tmp_path / "calibration.json"
    assert main(["calibrate", "--run", str(out), "--labels", str(labels), "--metric", "criterion_grounded",
                 "--criteria", str(criteria), "--to", str(target), "--min-per-class", "1"]) == 0
    # the review page and the estimate ask people the criterion's own question
    from offline_eval.review.session import Review

    question = "Is every statement of the answer supported by the context?"
    assert Review(out, None).metrics == ["criterion_grounded"]
    assert Review(out, None).questions["criterion_grounded"] == question
    assert main(["estimate", str(out), "--labels", str(labels), "--json"]) == 0
    estimate = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert estimate["criterion_grounded"]["question"] == question
    [fitted] = json.loads(target.read_text(encoding="utf-8"))["calibrations"]
    assert fitted["metric"] == "criterion_grounded"  # fitted for the criterion as the run defined it
    assert fitted["settings"]["options"]["criterion"]["question"]["en"].startswith("Is every statement")


# ----------------------------------------------------------------------------- mistakes
@pytest.mark.parametrize(("text", "needle"), [
    ('[a]\nquestion = "Q?"\nreads = ["answr"]\n', "criterion 'a': unknown field 'answr' in reads"),
    ('[a]\nquestion = "Q?"\nreads = ["answer"]\ngrades = { 1 = "bad", 2 = "" }\n', "grade 2 has no description"),
    ('[a]\nquestion = "Q?"\nreads = ["answer"]\n[a]\nquestion = "R?"\nreads = ["answer"]\n', "not valid TOML"),
    ('[a]\nquestion = "Q?"\nreads = ["answer"]\nweight = 2\n', "unknown key 'weight'"),
    ('[a]\nreads = ["answer"]\n', "expected the question as text"),
    ('[Bad-Name]\nquestion = "Q?"\nreads = ["answer"]\n', "a name is lower-case letters"),
    ('["abc\\n"]\nquestion = "Q?"\nreads = ["answer"]\n', "a name is lower-case letters"),  # not "$"'s newline
    ('[a]\nquestion = "Q?"\nreads = ["answer"]\n[[a.examples]]\nanswer = "x"\n', "example 1's label"),
])
def test_a_mistake_in_a_criteria_file_is_one_line_before_any_model_loads(tmp_path: Path, capsys, text: str,
                                                                         needle: str) -> None:
    criteria = write(tmp_path, text)
    code = main(["run", "--dataset", str(EXAMPLES), "--profile", str(tmp_path / "no-such-profile.toml"),
                 "--criteria", str(criteria), "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and needle in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()  # refused before anything was made


def test_a_name_defined_in_two_files_is_refused(tmp_path: Path) -> None:
    one = write(tmp_path, '[a]\nquestion = "Q?"\nreads = ["answer"]\n', "one.toml")
    two = write(tmp_path, '[a]\nquestion = "R?"\nreads = ["answer"]\n', "two.toml")
    with pytest.raises(DataError, match="criterion 'a' is defined twice"):
        load_criteria([one, two])


def test_the_worked_examples_read() -> None:
    names = load_criteria(sorted((REPO / "examples" / "criteria").glob("*.toml")))
    assert {"criterion_cites_sources", "criterion_declines_when_unsupported", "criterion_same_language",
            "criterion_tone", "criterion_gives_legal_advice"} <= set(names)
    tone = metric_classes()["criterion_tone"].criterion
    assert [g for g, _ in tone.grades] == [1, 2, 3, 4]
    assert criterion_metric(tone).requires == ("question", "answer")
