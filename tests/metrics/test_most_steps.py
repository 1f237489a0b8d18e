"""Each metric's ``most_steps`` holds (issue #55): no sample takes more engine stages than its metric
declares, and the declaration is reached, so "step k of at most n" is a bound and not a guess.

The judge here takes every longest path there is: each JSON reply is unreadable the first time and
valid on its repair, and each option verdict is a yes except to the nonsense control, so every verdict
counts as supported and every probe after it is asked. The samples are the shipped examples, in the
judging settings that change a metric's path (option or JSON verdicts, the judge or HHEM verifying, the
judge's claims or the sentences, a conversation's question rewritten or not).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any, Generator, Sequence

import pytest

from offline_eval.data.readers import read_dataset
from offline_eval.engine.executor import Engine, Task
from offline_eval.engine.requests import Generate, ScoreOptions
from offline_eval.judging.settings import EvalSettings
from offline_eval.judging.verdicts import ABSURD_STATEMENT
from offline_eval.metrics import builtin_metric_classes
from offline_eval.metrics.base import most_window_steps, start
from offline_eval.metrics.criteria import criterion_metric, read_criteria
from offline_eval.runtime.scripted import ScriptedJudge, ScriptedVerifier, render_prompt
from tests.helpers import models

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SETTINGS = {
    "options": {"claims": "llm"},
    "json verdicts": {"claims": "llm", "verdicts": "generate"},
    "whole chunks": {"claims": "llm", "context_window": 0},
    "sentences": {"claims": "sentences"},
    "hhem": {"claims": "llm", "verifier": "hhem", "verifier_classifies": True},
    "conversation rewritten": {"claims": "llm", "history": "both"},
}

_NUMBERS = itertools.count(1)


def instance(schema: dict[str, Any]) -> Any:
    """A value that fits ``schema``: every property, two items in an array where it may hold two,
    true for a boolean (a supported verdict: the path that asks the probes after it)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        return {name: instance(part) for name, part in schema.get("properties", {}).items()}
    if kind == "array":
        count = min(max(2, schema.get("minItems", 0)), schema.get("maxItems", 2 ** 31))
        return [instance(schema.get("items", {})) for _ in range(count)]
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return max(1, schema.get("minimum", 1))
    return f"Paris is the capital of France ({next(_NUMBERS)})."  # each text its own: claims are deduplicated


class LongestPaths(ScriptedJudge):
    """The scripted judge (real backend plumbing) answering as described in the module docstring."""

    def generate(self, requests: Sequence[Generate]) -> list[tuple[str, ...]]:
        super().generate(requests)  # its call counts
        return [tuple(json.dumps(instance(json.loads(r.schema))) if any(role == "assistant" for role, _ in r.prompt)
                      else "I cannot say." for _ in range(r.sampling.n)) for r in requests]

    def score_options(self, requests: Sequence[ScoreOptions]) -> list[dict[str, float]]:
        out = []
        for request in requests:
            text = render_prompt(request.prompt)
            if request.options[0] == "Yes":
                yes = 0.1 if any(s in text for s in ABSURD_STATEMENT.values()) else 0.9
                out.append({"Yes": yes, "No": 1.0 - yes})
            else:
                out.append({o: (0.7 if i == 0 else 0.3 / (len(request.options) - 1))
                            for i, o in enumerate(request.options)})
        return out


def counted(task: Generator[Any, Any, Any], stages: Counter, key: Any) -> Generator[Any, Any, Any]:
    """``task`` as it is, counting its stages (yields) in ``stages[key]``."""
    try:
        wanted = next(task)
        while True:
            stages[key] += 1
            wanted = task.send((yield wanted))
    except StopIteration as stop:
        return stop.value


@pytest.fixture(scope="module")
def samples():
    rows = read_dataset(EXAMPLES / "sample.jsonl") + read_dataset(EXAMPLES / "chat.jsonl")
    assert any(s.history for s in rows) and any(s.language == "zh" for s in rows)
    return rows


def metrics():
    [criterion] = read_criteria(EXAMPLES / "criteria" / "tone.toml")[:1]
    return [cls() for _, cls in sorted(builtin_metric_classes().items())] + [criterion_metric(criterion)()]


def test_no_sample_takes_more_stages_than_its_metric_declares_and_each_declaration_is_reached(samples):
    reached: dict[str, int] = {}
    for name, values in SETTINGS.items():
        settings = EvalSettings(**values)
        chosen = metrics()
        stages: Counter = Counter()
        tasks = [Task(key=(i, m.name), generator=counted(start(m, s, settings), stages, (i, m.name)))
                 for i, s in enumerate(samples) for m in chosen]
        engine = Engine(models(LongestPaths(script={}), ScriptedVerifier(default=0.9)))
        engine.run(tasks)
        declared = {m.name: m for m in chosen}
        for (i, metric_name), taken in stages.items():
            metric = declared[metric_name]
            history = bool(samples[i].history) and metric.reads_question and settings.history in ("rewrite", "both")
            most = metric.most_steps + (2 if history else 0)
            assert taken <= most, f"{metric_name} took {taken} stages on {samples[i].id} under {name}; declares {most}"
            if not history:
                reached[metric_name] = max(reached.get(metric_name, 0), taken)
        assert engine.stats.stages <= most_window_steps(chosen, samples, settings), name
    assert {m.name: m.most_steps for m in metrics()} == {m.name: reached.get(m.name, 0) for m in metrics()}
