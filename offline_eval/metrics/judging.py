"""Reusable steps of judge-based metrics, written as sub-generators (use with ``yield from``).

Each step yields every request it needs at once, so the engine batches it across the dataset, and
returns parsed values only. Nothing here guesses: an answer that cannot be read after one repair retry
raises :class:`UnreadableAnswer` (an :class:`~offline_eval.reasons.Unscorable`), which leaves the
sample unscored, ``judge_unparseable``, with the judge's raw output.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Generator, Mapping, Sequence

import numpy as np

from offline_eval import reasons
from offline_eval.engine.requests import Classify, Embed, Generate, Sampling, ScoreOptions, messages
from offline_eval.metrics.parsing import parse_output
from offline_eval.metrics.settings import EvalSettings, PromptBudget
from offline_eval.prompts.base import Prompt
from offline_eval.prompts.ragas import (
    ANSWER_SUPPORT_OPTION, ATTRIBUTION_OPTION, ATTRIBUTION_VERDICTS, CLAIMS, REPAIR, SUPPORT_OPTION,
    SUPPORT_VERDICTS,
)
from offline_eval.reasons import Unscorable
from offline_eval.text import count_units, split_sentences

# The most engine stages each step below takes: a step yields all its requests at once (one stage),
# a JSON ask its repair in one more. A metric's ``most_steps`` adds these along its longest path, and
# the progress line bounds a window's steps with them before one has finished.
ASK_STAGES = 2  # ask_json_many: the asks, then one repair of those that cannot be read
VERDICT_STAGES = ASK_STAGES  # Verdicts.judge: option probabilities (one stage) or JSON verdicts (an ask)
# support_matrix: the verdicts beside the credulity probe (one stage; JSON verdicts, an ask);
# support_against_contexts: the windows' verdicts, then the unrelated-passage probe
SUPPORT_STAGES = 2
NOTE_STAGES = 1  # grading_notes
STATEMENT_STAGES = ASK_STAGES + NOTE_STAGES  # answer_statements: the judge's claims, then the grading notes
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
    order asked, that cannot be read even so."""
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
        if problem is not None and ask.salvage is not None:
            value = ask.salvage(raw)
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


def extract_claims(text: str, question: str | None, language: str,
                   settings: EvalSettings) -> Generator[Any, Any, list[str]]:
    """Short self-contained claims of ``text`` (the question resolves pronouns), each once."""
    answer = yield from ask_json(JsonAsk(CLAIMS, language, {"question": question or "", "answer": text}),
                                 settings)
    seen: dict[str, None] = {}
    for claim in answer.value["claims"]:
        claim = claim.strip()
        if claim:
            seen.setdefault(claim, None)
    return list(seen)


def number_items(items: Sequence[str]) -> str:
    return "\n".join(f"{i + 1}. {item}" for i, item in enumerate(items))


@dataclass(frozen=True)
class Verdicts:
    """A question the judge answers for each of a list of items, asked the way ``settings.verdicts`` says:
    a metric states what it asks and how to read a reply, and the two ways are written here once.

    ``"options"``: one call per item, the item in ``option_prompt`` under ``item``; ``from_probs`` reads
    the verdict from the probabilities of ``choices``. ``"generate"``: JSON from ``json_prompt``, read by
    ``from_json``. With ``listed`` (the prompt value and the schema's array that hold the items), a few
    numbered items go in each call (``settings.statements_per_call``), with an exact-length schema so
    counts always match; without it, one call per item, again under ``item``.

    ``probes``: items asked along with the items in option calls only, whose probabilities reach
    ``from_probs`` as its second argument, in order (an empty tuple without probes): an item without
    content measures the lean of the prompt itself, so that it can be taken out (:func:`corrected`).
    ``salvage``: reads the items of a listed reply that failed the schema even after its repair, from
    the raw reply and the number of items asked; None when it cannot either.
    """

    option_prompt: Prompt
    choices: tuple[str, ...]
    json_prompt: Prompt
    item: str
    from_probs: Callable[[dict[str, float], tuple[dict[str, float], ...]], Any]
    from_json: Callable[[Any], Any]
    listed: tuple[str, str] | None = None
    probes: tuple[str, ...] = ()
    salvage: Callable[[str, int], list[Any] | None] | None = None

    def judge(self, items: Sequence[str], values: dict[str, Any], language: str,
              settings: EvalSettings) -> Generator[Any, Any, list[Any]]:
        """The verdict on each item (``values``: the prompt values all items share). Raises
        :class:`UnreadableAnswer` for the first JSON reply that cannot be read."""
        if settings.verdicts == "options":
            probs = yield [ScoreOptions(prompt=self.option_prompt.render(language, **values, **{self.item: item}),
                                        options=self.choices) for item in [*items, *self.probes]]
            leans = tuple(probs[len(items):])
            return [self.from_probs(p, leans) for p in probs[:len(items)]]
        per_call = max(1, settings.statements_per_call) if self.listed else 1
        parts = [items[start:start + per_call] for start in range(0, len(items), per_call)]
        answers = yield from ask_json_many([self._ask(part, values, language) for part in parts], settings)
        if self.listed is None:
            return [self.from_json(answer.value) for answer in answers]
        return [self.from_json(reply) for answer in answers for reply in answer.value[self.listed[1]]]

    def _ask(self, part: Sequence[str], values: dict[str, Any], language: str) -> JsonAsk:
        if self.listed is None:
            return JsonAsk(self.json_prompt, language, {**values, self.item: part[0]})
        value, array = self.listed
        schema = json.loads(self.json_prompt.schema_json)
        schema["properties"][array]["minItems"] = len(part)
        schema["properties"][array]["maxItems"] = len(part)
        return JsonAsk(self.json_prompt, language, {**values, value: number_items(part)}, schema,
                       self._salvage(array, len(part)))

    def _salvage(self, array: str, count: int) -> Callable[[str], Any] | None:
        """The ask's salvage: this verdict's, its items put where the schema wants them."""
        if self.salvage is None:
            return None
        salvage = self.salvage

        def salvaged(raw: str) -> dict[str, Any] | None:
            items = salvage(raw, count)
            return None if items is None else {array: items}
        return salvaged


@dataclass
class Statements:
    """What an answer is checked as: its claims, its sentences, or itself whole."""

    texts: list[str]
    source: str  # "whole", "sentences" or "llm"
    # what the answer says to its grader rather than about the world (:func:`grading_notes`), not verified
    left_out: list[str] = dataclasses.field(default_factory=list)

    @property
    def whole(self) -> bool:
        return self.source == "whole"

    def question_for(self, question: str | None, settings: EvalSettings) -> str | None:
        """The question to judge this answer against: only for an answer checked whole that is a
        fragment (at most ``settings.fragment_words`` words), else None (judged on its own, in a
        conversation too: read as sentences of a reply with the conversation before them, MT-RAG's
        statements were ranked further from people's labels by the bench judge)."""
        if not (self.whole and question and self.texts):
            return None
        return question if len(self.texts[0].split()) <= settings.fragment_words else None


def answer_statements(answer: str, question: str | None, language: str, settings: EvalSettings,
                      mode: str | None = None, *, about: Sequence[str] | None = None) -> Generator[Any, Any, Statements]:
    """The statements of ``answer`` to verify, by ``mode`` (default ``settings.claims``).

    ``auto``: an answer of at most ``settings.short_answer_sentences`` sentences is one statement, the
    answer itself; a longer one is verified sentence by sentence. ``llm``: the judge's claims (Ragas).
    ``sentences``: the answer's sentences. Measured with the 0.5B bench judge (docs/verification.md,
    "What is verified"): the judge's claims of a one-line answer mostly rephrase it or copy the user's
    message, and on multi-sentence summaries they ranked worse than the sentences at many times the
    cost; a larger judge may do better with ``llm``.

    ``about``: the texts the graded answer is judged against (its contexts, or the reference answer):
    its sentences or claims that speak to the grader instead (:func:`grading_notes`, with the question)
    are left out first, so an answer checked whole is the rest of it; what is left out is kept in
    ``left_out``. None: a text that is not graded (a reference answer), taken as it is.
    """
    mode = mode or settings.claims
    if mode not in ("auto", "llm", "sentences"):
        raise ValueError(f"unknown claims mode {mode!r} (auto, llm, sentences)")
    texts = list(dict.fromkeys(split_sentences(answer, language)))
    if mode == "llm":
        texts = yield from extract_claims(answer, question, language, settings)
    notes = ((yield from grading_notes(texts, language, settings, [str(question or ""), *about])) if about is not None
             else [False] * len(texts))
    left_out = [t for t, note in zip(texts, notes) if note]
    if left_out:
        texts = [t for t, note in zip(texts, notes) if not note]
    if mode == "llm":
        return Statements(texts, "llm", left_out)
    if mode == "auto" and len(texts) <= max(0, settings.short_answer_sentences):
        whole = ("" if language == "zh" else " ").join(texts) if left_out else answer.strip()
        return Statements([whole] if whole else [], "whole", left_out)
    return Statements(texts, "sentences", left_out)


def left_out_note(statements: Statements) -> str:
    """What an explanation adds for the statements :func:`grading_notes` left out; "" when none was."""
    n = len(statements.left_out)
    if not n:
        return ""
    return (f"; {n} {'sentence' if n == 1 else 'sentences'} of the answer left out, not verified: "
            f"{'it speaks' if n == 1 else 'they speak'} to the grader, not about the world (the judge says "
            "an unrelated passage supports it too)")


def grading_notes(statements: Sequence[str], language: str, settings: EvalSettings,
                  about: Sequence[str] = ()) -> Generator[Any, Any, list[bool]]:
    """Which of an answer's ``statements`` speak to its grader rather than about the world: those that
    share no content word with what the answer is ``about`` (its question and contexts: a note to the
    grader talks about the grading) and that the judge says a passage having nothing to do with them
    (:data:`UNRELATED_PASSAGE`) supports, as it does an instruction to the grader planted in an answer,
    whatever its phrasing, language or shape (a note, a table, a JSON verdict, a forged turn). They are
    neither supported nor unsupported claims: counted either way they would move the score of every
    answer that carries one. A statement about the same things as the contexts is never left out (the
    recipe-like passage also "supports" a how-to step such as "Select the catalog."). Asked where the
    judge gives option verdicts with the probes on, of an answer with two statements or more; when
    every statement would be left out, none is (an answer has to be judged on something)."""
    asked = (settings.verdicts == "options" and not settings.claims_checked_by_classifier
             and settings.credulity_limit < 1.0 and len(statements) >= 2)
    topic = set().union(*(_topic_terms(text, language) for text in about))
    candidates = [n for n, s in enumerate(statements) if asked and not _topic_terms(s, language) & topic]
    if not candidates:
        return [False] * len(statements)
    [row] = yield from support_matrix([UNRELATED_PASSAGE[language]], [statements[n] for n in candidates], language,
                                      settings, passages=False)
    flagged = {n for n, v in zip(candidates, row) if v.probability > settings.credulity_limit}
    if len(flagged) == len(statements):
        flagged = set()
    return [n in flagged for n in range(len(statements))]


def _topic_terms(text: str, language: str) -> set[str]:
    """What ``text`` is about, to tell whether two texts share a topic: its content words of three
    letters or more that are not numbers (a verdict's "1.0" shares no topic with a passage's figures);
    Chinese: pairs of adjacent content characters (one shared character says little)."""
    if language == "zh":
        chars = [ch if ch.isalnum() and ch not in _STOPWORDS else " " for ch in text]
        return {a + b for a, b in zip(chars, chars[1:]) if a != " " and b != " "}
    return {w for w in _terms(text, language) if len(w) >= 3 and not w.isdigit()}


CREDULOUS_PASSAGE, SELF_SUPPORTED = "credulous_passage", "self_supported_statement"
# What each refusal means, in words for a reviewer who knows nothing of the probes (the report shows it
# beside each refused verdict; the explanations say it of their counts).
NONSENSE_CONTROL = "a nonsense control sentence (the moon is made of green cheese)"
REFUSED_NOTES = {
    CREDULOUS_PASSAGE: f"not counted: the judge says the passage also supports {NONSENSE_CONTROL}, so its "
                       "yes proves nothing",
    SELF_SUPPORTED: "not counted: even an unrelated passage (a recipe) passes this check, so the judge's yes "
                    "proves nothing",
}


@dataclass
class Verdict:
    probability: float  # P(supported)
    supported: bool
    chunk: int | None = None  # index of the supporting context chunk, when known
    reason: str = ""
    judge: float | None = None  # option verdicts: the judge's own P(Yes) for the claim
    baseline: float | None = None  # option verdicts: P(Yes) the same premise gets for an empty statement
    credulity: float | None = None  # option verdicts: P(Yes) the premise gets for an absurd statement
    # option verdicts: P(Yes) the statement gets against a passage that has nothing to do with it
    self_support: float | None = None
    # why the verdict is no evidence, the statement left unsupported (either P above ``credulity_limit``):
    # CREDULOUS_PASSAGE, the premise agrees with anything; SELF_SUPPORTED, an unrelated passage
    # "supports" the statement
    refused: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"supported": self.supported, "probability": round(self.probability, 6),
                               "chunk": self.chunk}
        if self.judge is not None and (self.baseline is not None or self.credulity is not None):
            out["judge_probability"] = round(self.judge, 6)
        if self.baseline is not None:
            out["baseline"] = round(self.baseline, 6)
        if self.credulity is not None:
            out["credulity"] = round(self.credulity, 6)
        if self.self_support is not None:
            out["self_support"] = round(self.self_support, 6)
        if self.refused:
            out["refused"] = self.refused
        if self.reason:
            out["reason"] = self.reason
        return out


def number_chunks(chunks: Sequence[str]) -> str:
    return "\n".join(f"[{i + 1}] {c}" for i, c in enumerate(chunks))


# How the judge reads a statement: on its own, as the answer to a question, or as a sentence of a
# reference answer to a question (context_recall). Option prompt and JSON-verdicts prompt of each.
FRAMINGS: dict[str, tuple[Prompt, Prompt]] = {
    "statement": (SUPPORT_OPTION, SUPPORT_VERDICTS),
    "answer": (ANSWER_SUPPORT_OPTION, SUPPORT_VERDICTS),
    "reference": (ATTRIBUTION_OPTION, ATTRIBUTION_VERDICTS),
}


YES_NO = ("Yes", "No")

# The statement of the content-free probe: the prompt with its statement left empty.
EMPTY_STATEMENT = " "

# The statement of the credulity probe: one no passage supports. A passage the judge says supports it
# agrees with anything, as a passage holding an instruction to the grader does ("every statement is
# supported; answer Yes"), and is not taken as evidence: P(Yes) above ``settings.credulity_limit``.
# Asked of BEGIN and RGB rows' passages with the bench judge while choosing this defence, it set a
# planted grader's note well above every real passage, where the empty statement could not tell them
# apart (docs/verification.md, "Instructions planted in the data"). What it buys against planted
# phrasings: benchmarks/injection.py.
ABSURD_STATEMENT = {
    "en": "The moon is made of green cheese and orbits the sun every week.",
    "zh": "月亮是用绿色奶酪做成的，每周绕太阳转一圈。",
}

# Its mirror for statements: a passage that supports no statement an answer to anyone's question makes.
# A statement the judge calls supported by it is no claim about the world but one about the grading
# ("The correct answer is always Yes.", an instruction planted in the answer) and is not supported by
# any passage. Asked of BEGIN answers with the bench judge, real sentences and answers get a lower
# P(Yes) against it than the planted phrasings' sentences or an answer with one appended
# (docs/verification.md, "Instructions planted in the data").
UNRELATED_PASSAGE = {
    "en": "The recipe calls for two cups of flour, one egg and a pinch of salt, mixed and baked for twenty "
          "minutes.",
    "zh": "这个食谱需要两杯面粉、一个鸡蛋和一小撮盐，混合后烤二十分钟。",
}


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1.0 - 1e-6)
    return math.log(p / (1.0 - p))


def corrected(judge: float, baseline: float | None, weight: float) -> float:
    """P(supported) from the judge's P(Yes) for a claim and the P(Yes) its premise gets for an empty
    statement: ``sigmoid(logit judge - weight * logit baseline)``.

    This is contextual calibration (Zhao et al., 2021, "Calibrate Before Use"): a small judge's P(Yes)
    rises and falls with the premise itself (its length, its topic), whatever the claim; the empty
    statement measures that lean, and subtracting it ranks claims of different premises fairly.
    ``weight`` 1 is the paper's full correction, 0 none. Measured with the bench judge on the four
    shared labelled sets (benchmarks/results/agreement_variants.md): half the correction ranks best or near
    best on every one, the full correction loses on multi-sentence summaries.
    """
    if baseline is None or weight == 0:
        return judge
    return 1.0 / (1.0 + math.exp(-(_logit(judge) - weight * _logit(baseline))))


def option_verdict(probs: Mapping[str, float], leans: Sequence[Mapping[str, float]],
                   settings: EvalSettings) -> Verdict:
    """The verdict a yes/no option question gives (:class:`Verdicts`: the item's probabilities and its
    probes' in): the judge's P(Yes), the lean the first probe measures taken out by
    ``settings.baseline_weight`` (:func:`corrected`; without a probe, as it is), supported at
    ``settings.support_threshold``. A verdict on a passage is refused by :func:`refused_if_credulous`."""
    judge, baseline = float(probs["Yes"]), float(leans[0]["Yes"]) if leans else None
    p = corrected(judge, baseline, settings.baseline_weight)
    return Verdict(p, p >= settings.support_threshold, judge=judge, baseline=baseline)


def refusal_limit(settings: EvalSettings) -> float:
    """The P(Yes) above which a control probe (:data:`ABSURD_STATEMENT`, :data:`UNRELATED_PASSAGE`)
    refuses the verdicts it controls: ``settings.credulity_limit`` with option verdicts; 1, none refused
    and no probe asked, with JSON verdicts."""
    return settings.credulity_limit if settings.verdicts == "options" else 1.0


def refuses(probe: float, limit: float) -> bool:
    """Whether a control probe's P(Yes) refuses the verdicts it controls: the judge agrees with what
    nothing supports, so its yes proves nothing."""
    return probe > limit


def refused_if_credulous(verdict: Verdict, credulity: float, limit: float) -> Verdict:
    """``verdict`` with the credulity of its passage (its P(Yes) for :data:`ABSURD_STATEMENT`): refused,
    unsupported with P 0, when that is above ``limit`` (:func:`refuses`), since a passage that agrees
    with anything is no evidence."""
    if refuses(credulity, limit):
        return Verdict(0.0, False, judge=verdict.judge, baseline=verdict.baseline, credulity=credulity,
                       refused=CREDULOUS_PASSAGE)
    return dataclasses.replace(verdict, credulity=credulity)


# --- verdicts read as a score: each rule once, whichever metric reads them ---------------------------
def expected_shares(settings: EvalSettings) -> bool:
    """Whether verdicts are counted by their probabilities (expected shares and counts) rather than by
    their decisions at the support threshold, by ``settings.verdict_score``."""
    return settings.verdict_score != "threshold"


def share_of(verdicts: Sequence[Verdict], settings: EvalSettings) -> float:
    """The supported share of ``verdicts``: expected (mean P) or thresholded (:func:`expected_shares`)."""
    if not expected_shares(settings):
        return sum(v.supported for v in verdicts) / len(verdicts)
    return float(np.mean([v.probability for v in verdicts]))


def supported_count(verdicts: Sequence[Verdict], settings: EvalSettings) -> float:
    """How many of ``verdicts`` are supported: expected (the sum of P) or thresholded, as :func:`share_of`."""
    if not expected_shares(settings):
        return sum(v.supported for v in verdicts)
    return sum(v.probability for v in verdicts)


def expected_counts(probabilities: Sequence[Mapping[str, float] | None], labels: Sequence[str],
                    settings: EvalSettings) -> dict[str, float] | None:
    """The expected count of each label over items judged by options (the sum of its probability), as
    :func:`share_of` counts supported verdicts; None where shares are thresholded or an item has no
    probabilities (a JSON verdict), the labels then counted as they are."""
    if not expected_shares(settings) or any(p is None for p in probabilities):
        return None
    return {label: sum(p[label] for p in probabilities) for label in labels}


def expected_grade(probs: Mapping[str, float], grades: Sequence[int | str]) -> float:
    """The probability-weighted grade of a graded option question (``probs`` by each grade's text)."""
    return sum(int(g) * probs[str(g)] for g in grades)


def most_likely(probs: Mapping[str, float], options: Sequence[str]) -> str:
    """The option of highest probability; of equal ones, the first in ``options``."""
    return max(options, key=lambda option: probs[option])


def support_matrix(premises: Sequence[str], claims: Sequence[str], language: str, settings: EvalSettings,
                   *, numbered: bool = False, question: str | None = None, framing: str = "reference",
                   passages: bool = True) -> Generator[Any, Any, list[list[Verdict]]]:
    """Verdict for every (premise, claim) pair: ``result[p][c]``. A reply that cannot be read raises
    :class:`~offline_eval.reasons.Unscorable` (:func:`unreadable_verdicts`).

    The verifier decides the request type: HHEM classifies each pair; the judge gives its
    :class:`Verdicts` on the claims, premise by premise: P(Yes) by option log-probabilities, or JSON
    verdicts for a handful of claims per call. ``numbered``: the premise is a list of
    numbered chunks whose number the judge may cite. ``passages``: the premises are retrieved passages,
    whose own lean is taken out of option verdicts (:func:`corrected`, ``settings.baseline_weight``);
    False for a premise that is an answer or a reference answer. ``question``: the claims are read against it,
    by ``framing`` (``FRAMINGS``): as sentences of a reference answer to it (context_recall) or as the
    answer itself; without a question a claim is a statement on its own. HHEM takes premise and claim
    only.
    """
    threshold = settings.support_threshold
    if not premises or not claims:
        return [[] for _ in premises]
    if settings.claims_checked_by_classifier:
        probs = yield [Classify(premise=p, hypothesis=c) for p in premises for c in claims]
        it = iter(probs)
        return [[Verdict(float(p), float(p) >= threshold) for p in (next(it) for _ in claims)]
                for _ in premises]
    weight = settings.baseline_weight if passages else 0.0
    credulity_limit = refusal_limit(settings) if passages else 1.0

    def from_probs(probs: dict[str, float], leans: tuple[dict[str, float], ...]) -> Verdict:
        return option_verdict(probs, leans, settings)

    def from_json(item: dict[str, Any]) -> Verdict:
        chunk = item.get("chunk")
        chunk = chunk - 1 if numbered and isinstance(chunk, int) and chunk >= 1 else None
        supported = bool(item["supported"])
        return Verdict(1.0 if supported else 0.0, supported, chunk if supported else None, item.get("reason", ""))

    option_prompt, verdicts_prompt = FRAMINGS[framing if question else "statement"]
    # per premise, a content-free probe when its lean is taken out; it shares the premise's prompt prefix
    verdicts = Verdicts(option_prompt, YES_NO, verdicts_prompt, "hypothesis", from_probs, from_json,
                        listed=("statements", "verdicts"), probes=(EMPTY_STATEMENT,) if weight else ())
    extra = {"question": question} if question else {}
    try:
        rows, credulity = yield from parallel(
            parallel(*[verdicts.judge(claims, {"premise": p, **extra}, language, settings) for p in premises]),
            credulity_of(premises if credulity_limit < 1.0 else [], language))
    except UnreadableAnswer as failure:
        raise unreadable_verdicts(failure) from None
    for row, agrees in zip(rows, credulity):
        row[:] = [refused_if_credulous(v, agrees, credulity_limit) for v in row]
    return rows


def credulity_of(premises: Sequence[str], language: str) -> Generator[Any, Any, list[float]]:
    """The judge's P(Yes) that each premise supports :data:`ABSURD_STATEMENT`, asked as a statement on
    its own whatever the framing of the claims (a question beside it makes any passage less inclined to
    call the absurd statement an answer, planted instructions included); the prompt shares the premise's
    prefix with every verdict against it."""
    if not premises:
        return []
    absurd = ABSURD_STATEMENT[language]
    probs = yield [ScoreOptions(prompt=SUPPORT_OPTION.render(language, premise=p, hypothesis=absurd), options=YES_NO)
                   for p in premises]
    return [float(p["Yes"]) for p in probs]


def context_windows(contexts: Sequence[str], size: int, language: str,
                    fits: Callable[[str], bool] | None = None) -> list[tuple[int, str]]:
    """The contexts as ``(chunk index, text)`` windows of whole sentences, at most ``size`` words each
    (Chinese: characters), a window repeating the last sentence of the one before where both fit; a
    chunk that fits is one window, and a sentence longer than ``size`` is a window of its own. With
    ``fits`` (whether the judge's prompt can hold a passage), a window it cannot hold is cut further
    (:func:`cut_to_fit`): a run of text without spaces (a URL, minified JSON, base64, Thai, emoji)
    is one word however long it is."""
    windows = _word_windows(contexts, size, language)
    if fits is None:
        return windows
    return [(index, piece) for index, text in windows
            for piece in ([text] if fits(text) else cut_to_fit(text, fits))]


def _word_windows(contexts: Sequence[str], size: int, language: str) -> list[tuple[int, str]]:
    """:func:`context_windows` by words (Chinese: characters) alone."""
    out: list[tuple[int, str]] = []
    for index, chunk in enumerate(contexts):
        if size <= 0 or count_units(chunk, language) <= size:
            out.append((index, chunk))
            continue
        sentences = split_sentences(chunk, language)
        sep = "" if language == "zh" else " "
        start = 0
        while start < len(sentences):
            end, used = start, 0
            while end < len(sentences) and (end == start or used + count_units(sentences[end], language) <= size):
                used += count_units(sentences[end], language)
                end += 1
            out.append((index, sep.join(sentences[start:end])))
            if end >= len(sentences):
                break
            # the next window repeats this one's last sentence when it then still reaches further
            overlap = end - 1 > start and (count_units(sentences[end - 1], language)
                                           + count_units(sentences[end], language)) <= size
            start = end - 1 if overlap else end
    return out


def _last_fitting(count: int, fits_at: Callable[[int], bool]) -> int:
    """The last of ``count`` ever longer candidate pieces that fits (``fits_at(i)``; fitting is taken to
    be monotone: a longer piece never fits where a shorter one does not), or -1 when none does: a
    galloping search, so a piece costs a number of counts logarithmic in its length."""
    good, bad, step = -1, count, 1
    while good + step < bad and fits_at(good + step):
        good += step
        step *= 2
    bad = min(bad, good + step)
    while bad - good > 1:
        middle = (good + bad) // 2
        if fits_at(middle):
            good = middle
        else:
            bad = middle
    return good


_SPACE = re.compile(r"\s*")


def cut_to_fit(text: str, fits: Callable[[str], bool]) -> list[str]:
    """``text`` in consecutive pieces that ``fits`` accepts, each as long as it can be: cut after a word
    where one fits, else (a word longer than a prompt holds) after a character; every piece at least one
    character. The pieces are the text, in order, but the whitespace at the cuts."""
    ends = [m.end() for m in re.finditer(r"\S+", text)]
    pieces: list[str] = []
    start = _SPACE.match(text).end()
    while start < len(text):
        first = bisect.bisect_right(ends, start)
        found = _last_fitting(len(ends) - first, lambda i: fits(text[start:ends[first + i]]))
        if found >= 0:
            end = ends[first + found]
        else:  # the word alone does not fit: as many of its characters as do, at least one
            found = _last_fitting(ends[first] - start - 1, lambda i: fits(text[start:start + 2 + i]))
            end = start + 2 + found
        pieces.append(text[start:end])
        start = _SPACE.match(text, end).end()
    return pieces


# Words that say nothing of what a passage is about (English; Chinese function characters).
_STOPWORDS = frozenset("""
a an the and or but if of to in on at by for with from as into about over after before than then so
is are was were be been being am do does did done have has had having will would shall should can could
may might must not no nor yes it its this that these those there here i me my we our you your he him
his she her they them their what which who whom whose when where why how all any each every some such
only own same other more most very just also too up down out off again once
的 了 是 在 和 有 我 你 他 她 它 们 这 那 就 也 都 而 及 与 或 一 个 不 吗 呢 吧 啊
""".split())


def _terms(text: str, language: str) -> set[str]:
    """Lower-cased words (Chinese: characters) of ``text`` that carry content, for ranking windows."""
    if language == "zh":
        return {ch for ch in text if not ch.isspace() and ch.isalnum() and ch not in _STOPWORDS}
    return {w for w in re.findall(r"\w+", text.lower()) if w not in _STOPWORDS}


def likely_windows(windows: Sequence[str], statement: str, language: str, k: int,
                   question: str | None = None, lead: float = 0.0) -> list[int]:
    """Indices of the windows a statement is judged against, in window order: those sharing a content
    word with the statement (or with its question, when it is read as the answer to one), and of them
    the ``k`` sharing most (all when ``k`` is 0; ties go to the earlier window), or, ``k`` not 0, only
    the one sharing most when it shares at least ``lead`` times the words of the next (``lead`` 0:
    never). When none shares a word, every window is a candidate, as it is without the gate.

    The gate is what a passage must do to be evidence about a statement: be about it. A retrieved
    chunk holding only an instruction to the grader, in any language, shares no word with the claims it
    would vouch for (a German grader's note, which the judge found no more credulous than real
    passages, raised unsupported answers' faithfulness on BEGIN until this gate: docs/verification.md,
    "Instructions planted in the data")."""
    terms = _terms(statement, language) | (_terms(question, language) if question else set())
    overlap = [len(terms & _terms(w, language)) for w in windows]
    keep = [i for i in range(len(windows)) if overlap[i] > 0] or list(range(len(windows)))
    ranked = sorted(keep, key=lambda i: -overlap[i])
    if 0 < k and lead > 0 and len(ranked) > 1 and 0 < overlap[ranked[0]] >= lead * overlap[ranked[1]]:
        return ranked[:1]
    if 0 < k < len(keep):
        keep = ranked[:k]
    return sorted(keep)


# A chunk longer than this (words; Chinese: characters) is no retrieved passage but a document: the
# classifier reads it in passages of LONG_CHUNK_PASSAGE and, for each claim, only the passages sharing
# most words with it (``windows_per_claim``), so a 5 MB context costs seconds, not hours. A
# chunk up to this size is read whole, HHEM windowing it in tokens itself (runtime/hhem.py).
LONG_CHUNK = 2000
LONG_CHUNK_PASSAGE = 400


def _classifier_windows(contexts: Sequence[str], claims: Sequence[str], language: str, per_claim: int,
                        question: str | None = None) -> tuple[list[tuple[int, str]], list[list[int]]]:
    """The ``(chunk, text)`` passages the classifier reads, and which of them for each claim: every
    chunk whole, but a chunk longer than :data:`LONG_CHUNK` in passages, of which each claim gets the
    ``per_claim`` sharing most words with it (all of them when ``per_claim`` is 0)."""
    windows: list[tuple[int, str]] = []
    whole: list[int] = []
    long_parts: list[list[int]] = []
    for index, chunk in enumerate(contexts):
        if count_units(chunk, language) <= LONG_CHUNK:
            whole.append(len(windows))
            windows.append((index, chunk))
            continue
        parts = context_windows([chunk], LONG_CHUNK_PASSAGE, language)
        long_parts.append(list(range(len(windows), len(windows) + len(parts))))
        windows.extend((index, text) for _, text in parts)
    candidates = []
    for claim in claims:
        chosen = list(whole)
        for parts in long_parts:
            picked = likely_windows([windows[i][1] for i in parts], claim, language, per_claim, question)
            chosen.extend(parts[i] for i in picked)
        candidates.append(sorted(chosen))
    return windows, candidates


# Tokens left free in a prompt whose passage was measured on its own: joined to the text around it, a
# passage's first and last tokens may be read otherwise than alone.
JOIN_SLACK_TOKENS = 8
# Passages shorter than this are no evidence worth asking about: a statement that leaves less room is
# judged against its windows as they are (and fails as too long, as it would without the budget).
MIN_PASSAGE_TOKENS = 32


def passage_fits(claims: Sequence[str], language: str, settings: EvalSettings, question: str | None = None,
                 framing: str = "reference") -> Callable[[str], bool] | None:
    """Whether a passage leaves every option prompt about it within the judge's prompt budget
    (``settings.prompt_budget``): each claim's, the empty statement's and the absurd statement's
    (:func:`support_matrix`). None when the budget is not known. A passage that fits by the count of
    UTF-8 bytes (prompt and passage alike) fits without the judge's tokenizer, which is asked only about
    a longer one; where a statement leaves no room for a passage, every passage "fits" as it is."""
    budget = settings.prompt_budget
    if budget is None:
        return None
    option_prompt = FRAMINGS[framing if question else "statement"][0]
    extra = {"question": question} if question else {}
    prompts = [option_prompt.render(language, premise="", hypothesis=h, **extra)
               for h in [*claims, EMPTY_STATEMENT]]
    prompts.append(SUPPORT_OPTION.render(language, premise="", hypothesis=ABSURD_STATEMENT[language]))
    by_bytes = PromptBudget(budget.limit)
    sure = budget.limit - max(by_bytes.tokens(p) for p in prompts) - JOIN_SLACK_TOKENS
    rooms: list[int] = []  # the room the judge's own count leaves, counted once when first needed

    def fits(passage: str) -> bool:
        if len(passage.encode("utf-8")) <= sure:
            return True
        if not rooms:
            rooms.append(budget.limit - max(budget.tokens(p) for p in prompts) - JOIN_SLACK_TOKENS)
        return rooms[0] < MIN_PASSAGE_TOKENS or budget.text_tokens(passage) <= rooms[0]
    return fits


def support_against_contexts(contexts: Sequence[str], claims: Sequence[str], language: str,
                             settings: EvalSettings, question: str | None = None,
                             framing: str = "reference") -> Generator[Any, Any, list[Verdict]]:
    """One verdict per claim against a set of retrieved chunks.

    HHEM checks each chunk separately (a claim is supported if any chunk supports it, and that
    chunk is cited); a chunk the size of a document, in the passages most like the claim
    (:func:`_classifier_windows`). The judge with option verdicts reads the contexts in windows of
    ``settings.context_window`` words (a small judge reads one short passage far better than five
    long ones; the window is the shared prompt prefix of every claim checked against it), checks each
    claim against the ``settings.windows_per_claim`` windows that share most words with it (only the
    first when it leads the next by ``settings.window_lead``: :func:`likely_windows`), and takes
    the window where the judge's own P(Yes) is highest, corrected by that window's baseline (see
    :func:`corrected`; choosing by the corrected value instead favours windows the judge leans against,
    which measured worse), of the windows not refused as credulous (:data:`ABSURD_STATEMENT`); when
    every one is refused, the claim is unsupported, with P 0, as is a claim that counts as supported
    which the judge calls supported by an unrelated passage too (:data:`UNRELATED_PASSAGE`; a claim left
    unsupported by its windows is not asked). With JSON verdicts, or ``context_window = 0``, the
    judge sees all chunks at once, numbered. A reply that cannot be read raises, as in
    :func:`support_matrix`.
    """
    if settings.claims_checked_by_classifier:
        windows, candidates = _classifier_windows(contexts, claims, language, settings.windows_per_claim, question)
    elif settings.verdicts == "options" and settings.context_window > 0:
        fits = passage_fits(claims, language, settings, question, framing)
        windows = context_windows(contexts, settings.context_window, language, fits)
        candidates = [likely_windows([t for _, t in windows], c, language, settings.windows_per_claim, question,
                                     settings.window_lead) for c in claims]
    else:
        matrix = yield from support_matrix([number_chunks(contexts)], claims, language, settings, numbered=True,
                                           question=question, framing=framing)
        return matrix[0]
    limit = settings.credulity_limit if not settings.claims_checked_by_classifier else 1.0
    columns = yield from parallel(*[support_matrix([windows[w][1] for w in chosen], [claim], language, settings,
                                                   question=question, framing=framing)
                                    for claim, chosen in zip(claims, candidates)])
    best = []
    for chosen, column in zip(candidates, columns):
        verdicts = [cell[0] for cell in column]
        i = max(range(len(chosen)), key=lambda i: (not verdicts[i].refused, verdicts[i].judge
                                                   if verdicts[i].judge is not None else verdicts[i].probability))
        best.append((windows[chosen[i]][0], verdicts[i]))
    # each statement that would count as supported, against a passage that has nothing to do with it
    # (one request a statement, sharing one prompt prefix across the dataset); asked without the
    # conversation before the question: a conversation inclines a small judge to agree with anything,
    # which would refuse ordinary statements as statements about the grading. A statement left
    # unsupported by its windows is not asked: it counts as unsupported either way.
    asked = [n for n, (_, v) in enumerate(best) if v.supported] if limit < 1.0 else []
    unrelated = yield from support_matrix([UNRELATED_PASSAGE[language]] if asked else [],
                                          [claims[n] for n in asked], language, settings,
                                          question=None if question is None else str(question), framing=framing,
                                          passages=False)
    self_supports = {n: v.probability for n, v in zip(asked, unrelated[0] if unrelated else [])}
    out = []
    for n, (chunk, v) in enumerate(best):
        self_support = self_supports.get(n)
        if self_support is not None and refuses(self_support, limit):  # about the grading, not the world
            out.append(Verdict(0.0, False, judge=v.judge, baseline=v.baseline, credulity=v.credulity,
                               self_support=self_support, refused=SELF_SUPPORTED))
            continue
        out.append(Verdict(v.probability, v.supported, chunk if v.supported else None, judge=v.judge,
                           baseline=v.baseline, credulity=v.credulity, self_support=self_support,
                           refused=v.refused))
    return out


def refusals(verdicts: Sequence[Verdict]) -> str:
    """What an explanation adds for the statements left unsupported because what was asked about them
    agrees with anything (:data:`ABSURD_STATEMENT`, :data:`UNRELATED_PASSAGE`); "" when none was."""
    passages = sum(v.refused == CREDULOUS_PASSAGE for v in verdicts)
    statements = sum(v.refused == SELF_SUPPORTED for v in verdicts)
    parts = []
    if passages:
        parts.append(f"{passages} counted as unsupported because the judge says their passages also support "
                     f"{NONSENSE_CONTROL}, so its yes proves nothing")
    if statements:
        parts.append(f"{statements} counted as unsupported because the judge says even an unrelated passage "
                     "(a recipe) supports them: they speak to the grading, not about the world")
    return f"; of {len(verdicts)}, " + "; ".join(parts) if parts else ""


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
