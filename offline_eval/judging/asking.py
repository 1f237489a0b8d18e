"""Asking the judge: a JSON ask and its one repair, embeddings, and running steps side by side.

Each step is a sub-generator (use with ``yield from``) that yields every request it needs at once, so the
engine batches it across the dataset, and returns parsed values only. Nothing here guesses: an answer that
cannot be read after one repair retry raises :class:`UnreadableAnswer` (an
:class:`~offline_eval.reasons.Unscorable`), which leaves the sample unscored, ``judge_unparseable``, with
the judge's raw output.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Generator, Sequence

import numpy as np

from offline_eval import reasons
from offline_eval.engine.requests import Embed, Generate, Sampling, messages
from offline_eval.judging.parsing import parse_output
from offline_eval.judging.settings import EvalSettings
from offline_eval.prompts.base import Prompt
from offline_eval.prompts.ragas import REPAIR
from offline_eval.reasons import Unscorable

# The most engine stages each step takes: a step yields all its requests at once (one stage), a JSON
# ask its repair in one more. A metric's ``most_steps`` adds these along its longest path, and the
# progress line bounds a window's steps with them before one has finished.
ASK_STAGES = 2  # ask_json_many: the asks, then one repair of those that cannot be read
EMBED_STAGES = 1  # embed_texts


@dataclass
class JsonAsk:
    prompt: Prompt
    language: str
    values: dict[str, Any]
    schema: dict[str, Any] | None = None  # overrides prompt.schema (e.g. an exact item count)
    # reads a reply that failed the schema even after its repair, from its raw text: the value it
    # stands for, or None when it cannot be read either
    salvage: Callable[[str], Any] | None = None


@dataclass
class JsonAnswer:
    """A judge's answer that was read: its value fits the schema (or was salvaged)."""

    value: Any
    raw: str  # the output the value was read from
    raws: tuple[str, ...] = ()  # every output the judge gave, the first answer and its repair


class UnreadableAnswer(Unscorable):
    """A judge's answer that could not be read, even after its repair: ``judge_unparseable``, the
    problem as the explanation and the last output as ``raw``. ``raws`` keeps every output the judge
    gave (the test-set pipeline records them with the answers it rejects)."""

    def __init__(self, problem: str, raws: tuple[str, ...]) -> None:
        super().__init__(reasons.JUDGE_UNPARSEABLE, problem, raw=raws[-1])
        self.raws = raws


def after_repair(first: str, then: str) -> str:
    """Why an answer could not be read, asked once and asked to repair it: each problem once (the
    repair of an answer cut off is most often cut off again)."""
    return f"{first}, also after repair" if then == first else f"{first}; after repair: {then}"


def unreadable_verdicts(failure: UnreadableAnswer) -> Unscorable:
    """How a step that judges many items reports a reply it cannot read: the reason, then the problem,
    as the explanation, without the raw output."""
    return Unscorable(reasons.JUDGE_UNPARSEABLE, f"{reasons.JUDGE_UNPARSEABLE}: {failure.explanation}")


def _generate(ask: JsonAsk, settings: EvalSettings, extra: tuple = ()) -> Generate:
    schema = ask.schema or ask.prompt.schema
    return Generate(prompt=ask.prompt.render(ask.language, **ask.values) + extra,
                    schema=json.dumps(schema, sort_keys=True),
                    sampling=Sampling(max_tokens=settings.max_tokens))


def ask_json_many(asks: Sequence[JsonAsk], settings: EvalSettings) -> Generator[Any, Any, list[JsonAnswer]]:
    """All asks in one stage; the unreadable ones get one repair retry in a second stage, and the ones
    still unreadable their ``salvage``. Raises :class:`UnreadableAnswer` for the first of them, in the
    order asked, that cannot be read even so. A salvage reads the repair's output, else the first
    output (a repair cut off sooner than the first answer)."""
    if not asks:
        return []
    first = [_generate(a, settings) for a in asks]
    outputs = yield first
    answers: list[JsonAnswer | None] = []
    problems: dict[int, tuple[str, str]] = {}  # ask -> (its first output, why it cannot be read)
    for i, (ask, out) in enumerate(zip(asks, outputs)):
        raw = out[0] if out else ""
        value, problem = parse_output(raw, ask.schema or ask.prompt.schema)
        answers.append(None if problem else JsonAnswer(value, raw, (raw,)))
        if problem:
            problems[i] = (raw, problem)
    if not problems:
        return answers
    repairs = []
    for i, (raw, problem) in problems.items():
        lang = asks[i].prompt.language_of(asks[i].language)
        repairs.append(_generate(asks[i], settings, messages(("assistant", raw),
                                                              ("user", REPAIR[lang].format(problem=problem)))))
    outputs = yield repairs
    unreadable: UnreadableAnswer | None = None
    for (i, (first_raw, first_problem)), out in zip(problems.items(), outputs):
        ask, raw = asks[i], out[0] if out else ""
        value, problem = parse_output(raw, ask.schema or ask.prompt.schema)
        if problem is not None and ask.salvage is not None:  # the repair's output, else the first one's
            value, raw = next(((v, r) for r in (raw, first_raw) if (v := ask.salvage(r)) is not None), (None, raw))
            problem = None if value is not None else problem
        if problem is None:
            answers[i] = JsonAnswer(value, raw, (first_raw, raw))
        elif unreadable is None:
            unreadable = UnreadableAnswer(after_repair(first_problem, problem), (first_raw, raw))
    if unreadable is not None:
        raise unreadable
    return answers


def ask_json(ask: JsonAsk, settings: EvalSettings) -> Generator[Any, Any, JsonAnswer]:
    """One ask (:func:`ask_json_many`)."""
    answers = yield from ask_json_many([ask], settings)
    return answers[0]


def embed_texts(texts: Sequence[str]) -> Generator[Any, Any, np.ndarray]:
    vectors = yield [Embed(text=t) for t in texts]
    array = np.asarray(vectors, dtype=np.float64).reshape(len(texts), -1)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms == 0, 1.0, norms)


def parallel(*steps: Generator[Any, Any, Any]) -> Generator[Any, Any, list[Any]]:
    """Run several sub-generators side by side, so their requests share stages.

    ``a, b = yield from parallel(step_a, step_b)`` costs as many stages as the longer of the two,
    not their sum. A step that raises :class:`~offline_eval.reasons.Unscorable` stops; the others run
    to their end, and then the failure of the first such step, in the order given, is raised: the
    same requests are asked, and the same failure reported, whichever step fails first in time.
    """
    from offline_eval.engine.requests import Request

    results: list[Any] = [None] * len(steps)
    failures: dict[int, Unscorable] = {}
    pending: dict[int, tuple[Generator, Any]] = {}
    for i, step in enumerate(steps):
        try:
            pending[i] = (step, next(step))
        except StopIteration as stop:
            results[i] = stop.value
        except Unscorable as failure:
            failures[i] = failure
    while pending:
        batch: list[Any] = []
        spans: dict[int, tuple[int, int, bool]] = {}
        for i, (_, wanted) in pending.items():
            single = isinstance(wanted, Request)
            requests = [wanted] if single else list(wanted)
            spans[i] = (len(batch), len(requests), single)
            batch.extend(requests)
        answers = yield batch
        advanced: dict[int, tuple[Generator, Any]] = {}
        for i, (step, _) in pending.items():
            start, count, single = spans[i]
            part = answers[start:start + count]
            try:
                advanced[i] = (step, step.send(part[0] if single else part))
            except StopIteration as stop:
                results[i] = stop.value
            except Unscorable as failure:
                failures[i] = failure
        pending = advanced
    if failures:
        raise failures[min(failures)]
    return results
