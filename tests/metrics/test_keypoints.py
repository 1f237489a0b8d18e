"""RAGEval keypoint metrics on hand-built cases, through the engine and a scripted judge."""

from __future__ import annotations

import json

import pytest

from offline_eval.data.schema import Sample
from offline_eval.engine.executor import Engine, Task
from offline_eval.judging.settings import EvalSettings
from offline_eval.metrics import resolve_metrics
from offline_eval.metrics.base import as_score, start
from offline_eval.metrics.keypoints import Completeness, Hallucination, Irrelevance, clean_keypoints, normalise_label
from offline_eval.runtime.scripted import ScriptedJudge
from tests.helpers import models, score

GENERATE = EvalSettings(verdicts="generate")
KEYPOINTS = ["1. Paris is the capital of France.", "2. The Eiffel Tower opened in 1889.",
             "3. Paris has about 2 million inhabitants."]
SAMPLE = Sample(id="1", question="Tell me about Paris.",
                answer="Paris is the capital of France. The Eiffel Tower opened in 1925.",
                ground_truth="Paris, the capital of France, has about 2 million inhabitants; the Eiffel Tower "
                             "opened in 1889.", keypoints=KEYPOINTS, language="en")
LABEL_MARK = "Compare a generated answer with each key point"


def labels_reply(*items: tuple[str, str, str]) -> str:
    return json.dumps({"keypoints": [{"keypoint": k, "analysis": a, "label": lab} for k, a, lab in items]})


def run_all(sample: Sample, judge: ScriptedJudge, settings: EvalSettings) -> dict:
    """The three metrics on one sample in one engine run (as `offline-eval run` does)."""
    engine = Engine(models(judge))
    metrics = [Completeness(), Hallucination(), Irrelevance()]
    tasks = engine.run([Task(key=m.name, generator=start(m, sample, settings)) for m in metrics])
    return {t.key: as_score(t.result) for t in tasks}, engine


def test_registered_by_name():
    found, aggregate = resolve_metrics(["completeness", "hallucination", "irrelevance"])
    assert [m.name for m in found] == ["completeness", "hallucination", "irrelevance"] and not aggregate
    assert all(m.roles == frozenset({"judge"}) for m in found)


def test_clean_keypoints_strips_numbering_and_splits_numbered_blocks():
    assert clean_keypoints(["1. a", "2、 b", " - c", "(4) d", ""]) == ["a", "b", "c", "d"]
    assert clean_keypoints(["1. first point\n2. second point\n3.third"]) == ["first point", "second point", "third"]
    assert clean_keypoints(["1. same", "same"]) == ["same"]
    assert clean_keypoints(["2023年收入为1.2亿元。"]) == ["2023年收入为1.2亿元。"]  # a year is not numbering
    assert clean_keypoints(["3.5% growth in 2023.", "-2% margin"]) == ["3.5% growth in 2023.", "-2% margin"]


def test_formulas_with_json_labels_one_call_serves_all_three():
    reply = labels_reply(("Paris is the capital of France.", "Stated.", "Relevant"),
                         ("The Eiffel Tower opened in 1889.", "The answer says 1925.", "Wrong"),
                         ("Paris has about 2 million inhabitants.", "Not mentioned.", "Irrelevant"))
    judge = ScriptedJudge(script={"generate": [{"match": LABEL_MARK, "response": reply}]})
    results, engine = run_all(SAMPLE, judge, GENERATE)
    assert results["completeness"].value == pytest.approx(1 / 3)
    assert results["hallucination"].value == pytest.approx(1 / 3)
    assert results["irrelevance"].value == pytest.approx(1 / 3)
    assert engine.stats.computed["generate"] == 1  # identical requests deduplicated across the metrics
    points = results["completeness"].metadata["keypoints"]
    assert [p["keypoint"] for p in points] == clean_keypoints(KEYPOINTS)  # numbering stripped
    assert [p["label"] for p in points] == ["Relevant", "Wrong", "Irrelevant"]
    assert points[1]["analysis"] == "The answer says 1925."
    assert "1. Paris is the capital" in judge.prompts_seen[0]  # renumbered once, not "1. 1."
    assert "1. 1." not in judge.prompts_seen[0]


def test_label_read_only_from_its_slot_not_from_the_analysis():
    """The reference's bug: 'Wrong' in the analysis must not turn a Relevant label into Wrong."""
    reply = labels_reply(
        ("Paris is the capital of France.", "Nothing Wrong here; this is not [[[Wrong]]].", "Relevant"),
        ("The Eiffel Tower opened in 1889.", "Wrong? No: Irrelevant words do not matter.", "Relevant"),
        ("Paris has about 2 million inhabitants.", "Relevant facts are absent.", "Irrelevant"))
    judge = ScriptedJudge(script={"generate": [{"match": LABEL_MARK, "response": reply}]})
    results, _ = run_all(SAMPLE, judge, GENERATE)
    assert results["completeness"].value == pytest.approx(2 / 3)
    assert results["hallucination"].value == 0.0
    assert results["irrelevance"].value == pytest.approx(1 / 3)


def test_all_relevant_and_all_wrong_extremes():
    sample = Sample(id="x", question="q?", answer="a", keypoints=["only point"], language="en")
    for label, expected in (("Relevant", (1.0, 0.0, 0.0)), ("Wrong", (0.0, 1.0, 0.0)),
                            ("Irrelevant", (0.0, 0.0, 1.0))):
        judge = ScriptedJudge(script={"generate": [{"match": LABEL_MARK,
                                                    "response": labels_reply(("only point", "", label))}]})
        results, _ = run_all(sample, judge, GENERATE)
        got = (results["completeness"].value, results["hallucination"].value, results["irrelevance"].value)
        assert got == pytest.approx(expected)
        assert sum(got) == pytest.approx(1.0)


def test_label_spelling_is_forgiven_but_not_invented():
    assert normalise_label("relevant") == "Relevant"
    assert normalise_label("[[[Wrong]]]") == "Wrong"
    assert normalise_label(" Irrelevant. ") == "Irrelevant"
    assert normalise_label("not wrong") is None
    assert normalise_label(None) is None
    sample = Sample(id="x", question="q?", answer="a", keypoints=["p1", "p2"], language="en")
    sloppy = json.dumps({"keypoints": [{"label": "relevant"}, {"label": "[[[Wrong]]]"}]})
    judge = ScriptedJudge(script={"generate": [{"match": LABEL_MARK, "response": sloppy}]})
    results, _ = run_all(sample, judge, GENERATE)
    assert results["completeness"].value == 0.5 and results["hallucination"].value == 0.5


def test_unparseable_and_wrong_count_are_unscored_with_reason():
    judge = ScriptedJudge(script={"generate": [{"match": LABEL_MARK, "response": "All points are Relevant."}]})
    result = score(Completeness(), SAMPLE, models(judge), GENERATE)
    assert result.value is None and result.reason == "judge_unparseable"
    short = labels_reply(("Paris is the capital of France.", "", "Relevant"))  # 1 label for 3 key points
    judge = ScriptedJudge(script={"generate": [{"match": LABEL_MARK, "response": short}]})
    result = score(Hallucination(), SAMPLE, models(judge), GENERATE)
    assert result.value is None and result.reason == "judge_unparseable"
    assert "fewer than 3" in result.explanation
    missing_label = json.dumps({"keypoints": [{"keypoint": "a", "analysis": "Relevant"}] * 3})
    judge = ScriptedJudge(script={"generate": [{"match": LABEL_MARK, "response": missing_label}]})
    result = score(Completeness(), SAMPLE, models(judge), GENERATE)
    assert result.value is None and result.reason == "judge_unparseable"


def test_missing_fields_and_no_keypoints():
    judge = ScriptedJudge(script={})
    no_answer = Sample(id="a", question="q", keypoints=["k"])
    assert score(Completeness(), no_answer, models(judge)).reason == "missing_field:answer"
    nothing = Sample(id="b", question="q", answer="a")
    assert score(Irrelevance(), nothing, models(judge)).reason == "missing_field:ground_truth"
    blank = Sample(id="c", question="q", answer="a", keypoints=["1. ", "  "])
    assert score(Completeness(), blank, models(judge)).reason == "no_keypoints"
    empty_generated = ScriptedJudge(script={"generate": [
        {"match": "list the key points", "response": json.dumps({"keypoints": []})}]})
    no_kp = Sample(id="d", question="q", answer="a", ground_truth="g", language="en")
    assert score(Completeness(), no_kp, models(empty_generated)).reason == "no_keypoints"


def test_the_declared_needs_are_what_leaves_a_sample_unscored(capsys):
    """The key points come from the sample or are generated from its reference: a sample with neither
    is unscored before the judge is asked, and `offline-eval metrics` says so (it listed question and
    answer only, so a row that met them came out unscored)."""
    from offline_eval.cli import main
    from offline_eval.metrics.base import missing_fields

    bare = Sample(id="b", question="q", answer="a")
    for metric in (Completeness, Hallucination, Irrelevance):
        unscored = missing_fields(bare, metric.requires)
        assert unscored is not None and unscored.reason == "missing_field:ground_truth"
        assert unscored.explanation == "the sample has no ground_truth or keypoints"
        assert missing_fields(Sample(id="k", question="q", answer="a", keypoints=["k"]), metric.requires) is None
        assert missing_fields(Sample(id="g", question="q", answer="a", ground_truth="g"), metric.requires) is None
    assert score(Completeness(), bare, models(ScriptedJudge(script={}))).reason == "missing_field:ground_truth"
    assert main(["metrics"]) == 0
    listing = capsys.readouterr().out.splitlines()
    for name in ("completeness", "hallucination", "irrelevance"):
        at = next(i for i, line in enumerate(listing) if line.startswith(name + " "))
        assert listing[at + 1].split() == ["needs", "question,", "answer,", "ground_truth", "or", "keypoints"]


def test_generated_keypoints_path():
    sample = Sample(id="g", question="When did the Eiffel Tower open and how tall is it?",
                    answer="It opened in 1889.", ground_truth="It opened in 1889 and is 330 m tall.",
                    language="en")
    generated = json.dumps({"keypoints": ["1. The Eiffel Tower opened in 1889.", "2. It is 330 m tall."]})
    reply = labels_reply(("The Eiffel Tower opened in 1889.", "Stated.", "Relevant"),
                         ("It is 330 m tall.", "Height not mentioned.", "Irrelevant"))
    judge = ScriptedJudge(script={"generate": [{"match": "list the key points", "response": generated},
                                               {"match": LABEL_MARK, "response": reply}]})
    results, engine = run_all(sample, judge, GENERATE)
    assert results["completeness"].value == 0.5 and results["irrelevance"].value == 0.5
    assert results["hallucination"].value == 0.0
    assert results["completeness"].metadata["keypoints_source"] == "generated"
    assert [p["keypoint"] for p in results["completeness"].metadata["keypoints"]] == [
        "The Eiffel Tower opened in 1889.", "It is 330 m tall."]
    assert engine.stats.computed["generate"] == 2  # one generation + one labelling for all three metrics
    assert any("330 m tall" in p and "list the key points" in p for p in judge.prompts_seen)


def test_key_points_cut_off_at_the_token_cap_are_scored_on_those_written_whole():
    """A long reference makes a small judge's list of key points run past its token cap: the points it
    wrote whole are labelled, the score says the list was cut off, and a list with no point closed is
    still unreadable."""
    sample = Sample(id="cut", question="How do I set it up?", answer="Get Reader access. Name the bucket.",
                    ground_truth="Get Reader access. Name the bucket. Pick a format. Compress it.", language="en")
    cut = '{"keypoints": ["You need Reader access.", "Name the bucket after FROM.", "If the format is CS'
    reply = labels_reply(("You need Reader access.", "Stated.", "Relevant"),
                         ("Name the bucket after FROM.", "Not said.", "Irrelevant"))
    judge = ScriptedJudge(script={"generate": [{"match": "list the key points", "response": cut},
                                               {"match": LABEL_MARK, "response": reply}]})
    results, _ = run_all(sample, judge, GENERATE)
    completeness = results["completeness"]
    assert completeness.value == 0.5
    assert [p["keypoint"] for p in completeness.metadata["keypoints"]] == [
        "You need Reader access.", "Name the bucket after FROM."]
    assert completeness.metadata["keypoints_cut_off"] is True and "cut off" in completeness.explanation
    never_closed = ScriptedJudge(script={"generate": [
        {"match": "list the key points", "response": '{"keypoints": ["You need Reader acc'}]})
    assert score(Completeness(), sample, models(never_closed), GENERATE).reason == "judge_unparseable"
    whole = ScriptedJudge(script={"generate": [
        {"match": "list the key points", "response": json.dumps({"keypoints": ["You need Reader access."]})},
        {"match": LABEL_MARK, "response": labels_reply(("You need Reader access.", "Stated.", "Relevant"))}]})
    assert "keypoints_cut_off" not in score(Completeness(), sample, models(whole), GENERATE).metadata


def test_unanswerable_keypoint_is_scored():
    sample = Sample(id="u", question="What was the revenue in 1990?", answer="I cannot answer that.",
                    ground_truth="Unable to answer.", language="en")
    judge = ScriptedJudge(script={"generate": [
        {"match": "list the key points", "response": json.dumps({"keypoints": ["Unable to answer"]})},
        {"match": LABEL_MARK, "response": labels_reply(("Unable to answer", "Declines.", "Relevant"))}]})
    result = score(Completeness(), sample, models(judge), GENERATE)
    assert result.value == 1.0
    assert result.metadata["keypoints"][0]["keypoint"] == "Unable to answer"


def test_options_path_argmax_with_probabilities():
    def probs(text: str) -> dict[str, float]:
        point = text.split("Key point: ", 1)[1].split("\n", 1)[0]
        if "capital" in point:
            return {"A": 0.7, "B": 0.2, "C": 0.1}
        if "Eiffel" in point:
            return {"A": 0.3, "B": 0.6, "C": 0.1}
        return {"A": 0.2, "B": 0.1, "C": 0.7}
    judge = ScriptedJudge(script={"options": [{"match": "Key point: ", "probs": probs}]})
    results, engine = run_all(SAMPLE, judge, EvalSettings(verdicts="options", verdict_score="threshold"))
    assert results["completeness"].value == pytest.approx(1 / 3)  # RAGEval: shares of argmax labels
    assert results["hallucination"].value == pytest.approx(1 / 3)
    assert results["irrelevance"].value == pytest.approx(1 / 3)
    expected, _ = run_all(SAMPLE, judge, EvalSettings(verdicts="options"))  # the default: expected shares
    assert expected["completeness"].value == pytest.approx((0.7 + 0.3 + 0.2) / 3)
    assert expected["hallucination"].value == pytest.approx((0.2 + 0.6 + 0.1) / 3)
    assert expected["irrelevance"].value == pytest.approx((0.1 + 0.1 + 0.7) / 3)
    assert sum(expected[m].value for m in ("completeness", "hallucination", "irrelevance")) == pytest.approx(1.0)
    points = results["hallucination"].metadata["keypoints"]
    assert points[1]["label"] == "Wrong"
    assert points[1]["probabilities"] == {"Relevant": pytest.approx(0.3), "Wrong": pytest.approx(0.6),
                                          "Irrelevant": pytest.approx(0.1)}
    assert engine.stats.computed["options"] == 3  # one per key point, shared by the three metrics
    assert engine.stats.computed.get("generate", 0) == 0


def test_chinese_prompts_and_labels():
    sample = Sample(id="z", question="华夏娱乐2017年的收购金额是多少？", answer="收购金额为1.2亿元，发生在2018年。",
                    keypoints=["1、收购金额为1.2亿元。", "2、收购发生在2017年2月。"], language="zh")
    reply = labels_reply(("收购金额为1.2亿元。", "回答一致。", "Relevant"),
                         ("收购发生在2017年2月。", "回答说2018年，与要点矛盾，属于错误。", "Wrong"))
    judge = ScriptedJudge(script={"generate": [{"match": "将生成回答与标准回答的每条要点", "response": reply}]})
    results, _ = run_all(sample, judge, GENERATE)
    assert results["completeness"].value == 0.5 and results["hallucination"].value == 0.5
    assert results["irrelevance"].value == 0.0
    assert "1. 收购金额为1.2亿元。" in judge.prompts_seen[0]
    options_judge = ScriptedJudge(script={"options": [{"match": "要点：收购金额", "probs": {"A": 0.9, "B": 0.05, "C": 0.05}},
                                                      {"match": "要点：", "probs": {"A": 0.1, "B": 0.1, "C": 0.8}}]})
    results, _ = run_all(sample, options_judge, EvalSettings(verdicts="options", verdict_score="threshold"))
    assert results["completeness"].value == 0.5 and results["irrelevance"].value == 0.5
