"""The failure convention: a step raises Unscorable, the engine ends its task, ``as_score`` makes the
unscored Score; every reason is named in offline_eval.reasons."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from offline_eval import reasons
from offline_eval.data.schema import Sample
from offline_eval.engine.executor import Engine, Task
from offline_eval.engine.requests import Embed
from offline_eval.judging.asking import JsonAsk, UnreadableAnswer, after_repair, ask_json_many, embed_texts, parallel
from offline_eval.judging.settings import EvalSettings
from offline_eval.metrics.base import Metric, Score, as_score, start
from offline_eval.metrics.ragas import Faithfulness
from offline_eval.prompts.ragas import CLAIMS
from offline_eval.reasons import Unscorable, failing_with
from offline_eval.runtime.scripted import ScriptedJudge
from tests.helpers import claims_rule, models, score

PACKAGE = Path(__file__).resolve().parents[2] / "offline_eval"
SAMPLE = Sample(id="1", question="Where is Paris?", answer="Paris is in France. It is large.",
                contexts=["Paris is the capital of France."], ground_truth="Paris is in France.", language="en")


def refuses(**metadata):
    """A step that asks for one embedding, then finds it cannot go on."""
    yield Embed(text="anything")
    raise Unscorable(reasons.NO_CLAIMS, "nothing to check", **metadata)


class Refusing(Metric):
    name = "refusing"
    roles = frozenset({"embedder"})

    def score(self, sample, ctx):
        yield from embed_texts(["first"])
        yield from refuses(raw="the judge's words", claims=["a", "b"])
        return Score(1.0)  # pragma: no cover


class Broken(Metric):
    name = "broken"
    roles = frozenset({"embedder"})

    def score(self, sample, ctx):
        yield from embed_texts(["first"])
        raise KeyError("a bug")


class PlainRefusing(Metric):
    """A metric that asks for no model and raises from a plain ``score``."""

    name = "plain_refusing"

    def score(self, sample, ctx):  # type: ignore[override]
        raise Unscorable(reasons.EMPTY_RETRIEVED_TEXT, "nothing retrieved", chunks=0)


def test_a_step_that_raises_leaves_the_sample_unscored_with_its_reason_explanation_and_metadata():
    result = score(Refusing(), SAMPLE, models())
    assert result.value is None and result.reason == "no_claims"
    assert result.explanation == "nothing to check"
    assert result.metadata == {"raw": "the judge's words", "claims": ["a", "b"]}  # no traceback: a verdict


def test_an_unexpected_exception_is_still_an_error_with_its_traceback():
    result = score(Broken(), SAMPLE, models())
    assert result.value is None and result.reason == "error:KeyError"
    assert "a bug" in result.explanation and "KeyError" in result.metadata["traceback"]


def test_a_plain_metric_that_raises_is_unscored_the_same_way():
    result = score(PlainRefusing(), SAMPLE, models())
    assert (result.reason, result.explanation, result.metadata) == ("empty_retrieved_text", "nothing retrieved",
                                                                    {"chunks": 0})
    task = start(PlainRefusing(), SAMPLE, None)  # nothing runs before the engine's first step
    with pytest.raises(Unscorable):
        next(task)


def test_the_failure_reaches_the_run_unscored_not_as_a_crash():
    engine = Engine(models())
    tasks = engine.run([Task(key=i, generator=start(m, SAMPLE, EvalSettings()))
                        for i, m in enumerate([Refusing(), Broken()])])
    assert [as_score(t.result).reason for t in tasks] == ["no_claims", "error:KeyError"]


def test_parallel_runs_every_step_then_raises_the_first_failure_in_the_order_given():
    asked: list[str] = []

    def late(reason):
        yield Embed(text="late-1")
        asked.append("late-2")
        yield Embed(text="late-2")
        raise Unscorable(reason)

    def early(reason):
        yield Embed(text="early")
        raise Unscorable(reason)

    def drive(step):
        wanted = next(step)
        try:
            while True:
                wanted = step.send([[0.0] for _ in wanted])
        except Unscorable as failure:
            return failure.reason

    assert drive(parallel(late("first"), early("second"))) == "first"
    assert asked == ["late-2"]  # the later step still asked for what it needed
    assert drive(parallel(early("first"), late("second"))) == "first"


def test_failing_with_adds_what_the_caller_knows_without_overwriting_the_step():
    with pytest.raises(Unscorable) as raised:
        with failing_with(claims=["x"], raw="caller's"):
            raise Unscorable(reasons.JUDGE_UNPARSEABLE, "unreadable", raw="judge's")
    assert raised.value.metadata == {"raw": "judge's", "claims": ["x"]}


def test_an_unreadable_answer_keeps_every_output_and_reports_the_first_in_the_order_asked():
    asks = [JsonAsk(CLAIMS, "en", {"question": "q", "answer": "fine"}),
            JsonAsk(CLAIMS, "en", {"question": "q", "answer": "broken one"}),
            JsonAsk(CLAIMS, "en", {"question": "q", "answer": "broken two"})]
    step = ask_json_many(asks, EvalSettings())
    next(step)
    repairs = step.send([('{"claims": ["a"]}',), ("nothing one",), ("nothing two",)])
    assert len(repairs) == 2  # one repair for each unreadable answer, in one stage
    with pytest.raises(UnreadableAnswer) as raised:
        step.send([("still one",), ("still two",)])
    failure = raised.value
    assert failure.reason == "judge_unparseable" and failure.raws == ("nothing one", "still one")
    assert failure.metadata == {"raw": "still one"}
    # the repair failed as the answer did: the problem is said once
    assert failure.explanation == "no JSON object found in the output, also after repair"


def test_an_answer_whose_repair_fails_otherwise_names_both_problems_and_the_same_one_once():
    step = ask_json_many([JsonAsk(CLAIMS, "en", {"question": "q", "answer": "a"})], EvalSettings())
    next(step)
    step.send([('{"claims": ["cut',)])
    with pytest.raises(UnreadableAnswer) as raised:
        step.send([("no json at all",)])
    assert raised.value.explanation == ("output cut off before the JSON closed; after repair: "
                                        "no JSON object found in the output")
    assert after_repair("output cut off before the JSON closed", "output cut off before the JSON closed") \
        == "output cut off before the JSON closed, also after repair"


def test_unreadable_verdicts_are_unscored_with_the_claims_being_checked():
    judge = ScriptedJudge(script={"generate": [claims_rule("Break the answer", ["Paris is in France."]),
                                               {"match": "Context chunks", "response": "no JSON here"}]})
    result = score(Faithfulness(), SAMPLE, models(judge), EvalSettings(verdicts="generate", claims="llm"))
    assert result.value is None and result.reason == "judge_unparseable"
    assert result.explanation.startswith("judge_unparseable: no JSON object found")
    assert result.metadata == {"claims": ["Paris is in France."]}


def test_unreadable_claims_are_unscored_with_the_raw_output():
    judge = ScriptedJudge(script={"generate": [{"match": "Break the answer", "response": "no JSON here"}]})
    result = score(Faithfulness(), SAMPLE, models(judge), EvalSettings(claims="llm"))
    assert (result.reason, result.metadata) == ("judge_unparseable", {"raw": "no JSON here"})


def _literals(pattern: str) -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        found += [f"{path.relative_to(PACKAGE)}: {m.group(0)}" for m in re.finditer(pattern, text)]
    return found


def test_every_reason_is_named_in_one_module():
    assert _literals(r'"judge_unparseable"') == ['reasons.py: "judge_unparseable"']
    # an unscored Score or a failure whose reason is written out as a string, not a name of reasons
    assert _literals(r'(?:Score\.unscored|Unscorable|TaskFailed)\(\s*f?["\']') == []


def test_reason_strings_are_the_ones_results_already_hold():
    assert (reasons.missing_field("answer"), reasons.no_tokens("ground_truth"), reasons.raised(KeyError())) == \
        ("missing_field:answer", "no_tokens:ground_truth", "error:KeyError")
    assert json.dumps([reasons.JUDGE_UNPARSEABLE, reasons.REQUEST_FAILED, reasons.NO_RESULT, reasons.NO_SCORE]) == \
        '["judge_unparseable", "request_failed", "error:no_result", "error:no_score"]'
