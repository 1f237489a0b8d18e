"""Reusable steps of judge-based metrics, written as sub-generators (use with ``yield from``).

Each step yields every request it needs at once, so the engine batches it across the dataset, and
returns parsed values, or None with a reason. Nothing here guesses: an answer that cannot be read
after one repair retry is reported as such.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Generator, Sequence

import numpy as np

from offline_eval.engine.parsing import parse_output
from offline_eval.engine.requests import Classify, Embed, Generate, Sampling, ScoreOptions, messages
from offline_eval.metrics.settings import EvalSettings
from offline_eval.prompts.base import Prompt
from offline_eval.prompts.ragas import (
    ATTRIBUTION_OPTION, ATTRIBUTION_VERDICTS, CLAIMS, REPAIR, SUPPORT_OPTION, SUPPORT_VERDICTS,
)


@dataclass
class JsonAsk:
    prompt: Prompt
    language: str
    values: dict[str, Any]
    schema: dict[str, Any] | None = None  # overrides prompt.schema (e.g. an exact item count)


@dataclass
class JsonAnswer:
    value: Any  # None when unparseable
    problem: str | None
    raw: str
    raws: tuple[str, ...] = ()  # every output the judge gave, the first answer and its repair


def _generate(ask: JsonAsk, settings: EvalSettings, extra: tuple = ()) -> Generate:
    schema = ask.schema or ask.prompt.schema
    return Generate(prompt=ask.prompt.render(ask.language, **ask.values) + extra,
                    schema=json.dumps(schema, sort_keys=True),
                    sampling=Sampling(max_tokens=settings.max_tokens))


def ask_json_many(asks: Sequence[JsonAsk], settings: EvalSettings) -> Generator[Any, Any, list[JsonAnswer]]:
    """All asks in one stage; the unreadable ones get one repair retry in a second stage."""
    if not asks:
        return []
    first = [_generate(a, settings) for a in asks]
    outputs = yield first
    answers: list[JsonAnswer] = []
    retry: list[int] = []
    for i, (ask, out) in enumerate(zip(asks, outputs)):
        raw = out[0] if out else ""
        value, problem = parse_output(raw, ask.schema or ask.prompt.schema)
        answers.append(JsonAnswer(value, problem, raw, (raw,)))
        if problem:
            retry.append(i)
    if retry:
        repairs = []
        for i in retry:
            ask = asks[i]
            lang = ask.prompt.language_of(ask.language)
            extra = messages(("assistant", answers[i].raw),
                             ("user", REPAIR[lang].format(problem=answers[i].problem)))
            repairs.append(_generate(ask, settings, extra))
        outputs = yield repairs
        for i, out in zip(retry, outputs):
            raw = out[0] if out else ""
            value, problem = parse_output(raw, asks[i].schema or asks[i].prompt.schema)
            raws = answers[i].raws + (raw,)
            if problem is None:
                answers[i] = JsonAnswer(value, None, raw, raws)
            else:
                answers[i] = JsonAnswer(None, f"{answers[i].problem}; after repair: {problem}", raw, raws)
    return answers


def ask_json(ask: JsonAsk, settings: EvalSettings) -> Generator[Any, Any, JsonAnswer]:
    answers = yield from ask_json_many([ask], settings)
    return answers[0]


def extract_claims(text: str, question: str | None, language: str,
                   settings: EvalSettings) -> Generator[Any, Any, JsonAnswer]:
    """Short self-contained claims of ``text`` (the question resolves pronouns)."""
    answer = yield from ask_json(JsonAsk(CLAIMS, language, {"question": question or "", "answer": text}),
                                 settings)
    if answer.value is not None:
        seen: dict[str, None] = {}
        for claim in answer.value["claims"]:
            claim = claim.strip()
            if claim:
                seen.setdefault(claim, None)
        answer.value = list(seen)
    return answer


@dataclass
class Verdict:
    probability: float  # P(supported)
    supported: bool
    chunk: int | None = None  # index of the supporting context chunk, when known
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"supported": self.supported, "probability": round(self.probability, 6),
                               "chunk": self.chunk}
        if self.reason:
            out["reason"] = self.reason
        return out


def number_chunks(chunks: Sequence[str]) -> str:
    return "\n".join(f"[{i + 1}] {c}" for i, c in enumerate(chunks))


def support_matrix(premises: Sequence[str], claims: Sequence[str], language: str, settings: EvalSettings,
                   *, numbered: bool = False,
                   question: str | None = None) -> Generator[Any, Any, list[list[Verdict]] | str]:
    """Verdict for every (premise, claim) pair: ``result[p][c]``; or a reason string on failure.

    The verifier decides the request type: HHEM classifies each pair; the judge answers P(Yes) by
    option log-probabilities, or (``verdicts="generate"``) JSON verdicts for a handful of claims per
    call, with an exact-length schema so counts always match. ``numbered``: the premise is a list of
    numbered chunks whose number the judge may cite. ``question``: the claims are sentences of an
    answer to it, and the judge reads them as such (HHEM takes premise and claim only).
    """
    threshold = settings.support_threshold
    if not premises or not claims:
        return [[] for _ in premises]
    if settings.verifier == "hhem":
        probs = yield [Classify(premise=p, hypothesis=c) for p in premises for c in claims]
        it = iter(probs)
        return [[Verdict(float(p), float(p) >= threshold) for p in (next(it) for _ in claims)]
                for _ in premises]
    extra = {"question": question} if question else {}
    if settings.verdicts == "options":
        option_prompt = ATTRIBUTION_OPTION if question else SUPPORT_OPTION
        requests = [ScoreOptions(prompt=option_prompt.render(language, premise=p, hypothesis=c, **extra),
                                 options=("Yes", "No")) for p in premises for c in claims]
        probs = yield requests
        it = iter(probs)
        return [[Verdict(float(o["Yes"]), float(o["Yes"]) >= threshold) for o in (next(it) for _ in claims)]
                for _ in premises]
    # JSON verdicts, a few statements per call.
    step = max(1, settings.statements_per_call)
    verdicts_prompt = ATTRIBUTION_VERDICTS if question else SUPPORT_VERDICTS
    asks, spans = [], []
    for p_index, premise in enumerate(premises):
        for start in range(0, len(claims), step):
            part = claims[start:start + step]
            schema = json.loads(verdicts_prompt.schema_json)
            schema["properties"]["verdicts"]["minItems"] = len(part)
            schema["properties"]["verdicts"]["maxItems"] = len(part)
            statements = "\n".join(f"{i + 1}. {c}" for i, c in enumerate(part))
            asks.append(JsonAsk(verdicts_prompt, language,
                                {"premise": premise, "statements": statements, **extra}, schema))
            spans.append((p_index, start))
    answers = yield from ask_json_many(asks, settings)
    matrix: list[list[Verdict | None]] = [[None] * len(claims) for _ in premises]
    for (p_index, start), answer in zip(spans, answers):
        if answer.value is None:
            return f"judge_unparseable: {answer.problem}"
        for offset, item in enumerate(answer.value["verdicts"]):
            chunk = item.get("chunk")
            chunk = chunk - 1 if numbered and isinstance(chunk, int) and chunk >= 1 else None
            supported = bool(item["supported"])
            matrix[p_index][start + offset] = Verdict(1.0 if supported else 0.0, supported,
                                                      chunk if supported else None, item.get("reason", ""))
    return matrix  # type: ignore[return-value]


def support_against_contexts(contexts: Sequence[str], claims: Sequence[str], language: str,
                             settings: EvalSettings,
                             question: str | None = None) -> Generator[Any, Any, list[Verdict] | str]:
    """One verdict per claim against a set of retrieved chunks.

    HHEM checks each chunk separately (a claim is supported if any chunk supports it, and that
    chunk is cited); the judge sees all chunks at once, numbered.
    """
    if settings.verifier == "hhem":
        matrix = yield from support_matrix(contexts, claims, language, settings)
        if isinstance(matrix, str):
            return matrix
        out = []
        for c in range(len(claims)):
            best = max(range(len(contexts)), key=lambda p: matrix[p][c].probability)
            v = matrix[best][c]
            out.append(Verdict(v.probability, v.supported, best if v.supported else None))
        return out
    matrix = yield from support_matrix([number_chunks(contexts)], claims, language, settings, numbered=True,
                                       question=question)
    return matrix if isinstance(matrix, str) else matrix[0]


def embed_texts(texts: Sequence[str]) -> Generator[Any, Any, np.ndarray]:
    vectors = yield [Embed(text=t) for t in texts]
    array = np.asarray(vectors, dtype=np.float64).reshape(len(texts), -1)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return array / np.where(norms == 0, 1.0, norms)


def parallel(*steps: Generator[Any, Any, Any]) -> Generator[Any, Any, list[Any]]:
    """Run several sub-generators side by side, so their requests share stages.

    ``a, b = yield from parallel(step_a, step_b)`` costs as many stages as the longer of the two,
    not their sum.
    """
    from offline_eval.engine.requests import Request

    results: list[Any] = [None] * len(steps)
    pending: dict[int, tuple[Generator, Any]] = {}
    for i, step in enumerate(steps):
        try:
            pending[i] = (step, next(step))
        except StopIteration as stop:
            results[i] = stop.value
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
        pending = advanced
    return results
