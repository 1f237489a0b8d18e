"""Reading a judge's JSON: an answer nested deeper than the parsers can follow is unparseable like any
other unreadable answer, never a RecursionError (issue #56)."""

from __future__ import annotations

import pytest

from offline_eval.json_scan import json_value_closed
from offline_eval.judging.parsing import MAX_DEPTH, closed_strings, extract_json, parse_output
from offline_eval.judging.settings import EvalSettings
from offline_eval.metrics.ragas import Faithfulness
from offline_eval.prompts.ragas import CLAIMS
from offline_eval.runtime.scripted import ScriptedJudge
from tests.helpers import models, score
from tests.metrics.test_reasons import SAMPLE


def nested(depth: int) -> dict[str, str]:
    return {"closed": "[" * depth + "]" * depth, "open": "[" * depth,
            "objects": '{"claims": ' * depth + "1" + "}" * depth, "in prose": "Here: " + "[{" * (depth // 2) + " done"}


@pytest.mark.parametrize("depth", [1_000, 60_000])
def test_json_nested_past_the_parsers_is_unparseable(depth):
    for form, text in nested(depth).items():
        value, problem = extract_json(text)
        assert value is None and problem == f"JSON nested more than {MAX_DEPTH} levels deep", form
        assert parse_output(text, CLAIMS.schema) == (None, problem), form


def test_json_as_deep_as_allowed_still_reads():
    value, problem = extract_json("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    depth = 0
    while isinstance(value, list):
        value, depth = (value[0] if value else None), depth + 1
    assert problem is None and depth == MAX_DEPTH


@pytest.mark.parametrize("depth", [1_000, 60_000])
def test_a_judge_answering_deep_brackets_leaves_the_sample_unparseable_not_an_error(depth):
    judge = ScriptedJudge(script={"generate": [{"match": "Break the answer", "response": "[" * depth + "]" * depth}]})
    result = score(Faithfulness(), SAMPLE, models(judge), EvalSettings(claims="llm"))
    assert result.value is None and result.reason == "judge_unparseable"


@pytest.mark.parametrize("depth", [1_000, 60_000])
def test_the_stop_scan_follows_any_depth(depth):
    assert json_value_closed("[" * depth + "]" * depth) and not json_value_closed("[" * depth)


@pytest.mark.parametrize("text, key, strings", [
    # the strings written whole before the cut, escapes read, a string cut short left out
    ('{"keypoints": ["a \\"quoted\\" point", "b, with a comma", "c cut sho', "keypoints",
     ['a "quoted" point', "b, with a comma"]),
    ('{"noncommittal": false, "questions": ["Why?"]}', "questions", ["Why?"]),  # a whole reply reads too
    ('{"questions": ["never closed', "questions", None),
    ('{"other": ["x", "y"]}', "questions", None),  # the list never opens
])
def test_closed_strings_reads_the_strings_of_a_list_written_before_a_cut(text, key, strings):
    assert closed_strings(text, key) == strings
