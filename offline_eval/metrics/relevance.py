"""Answer relevance and context relevance as option verdicts: each a Yes/No question to the judge, read
from its option probabilities, so that no reply is parsed and none can be unreadable. The metrics'
"verdict" mode (:class:`~offline_eval.metrics.ragas.AnswerRelevancy`,
:class:`~offline_eval.metrics.ragas.ContextRelevance`); their "ragas" mode keeps Ragas' own definitions.

An answer's P(Yes) is corrected for the judge's lean as faithfulness corrects a passage's
(:func:`option_verdict`): the same question asked with an empty answer measures how much the judge says
Yes to the question whatever the answer."""

from __future__ import annotations

import math
import re
from functools import cache
from typing import Any, Generator, Sequence

import numpy as np

from offline_eval.engine.requests import ScoreOptions
from offline_eval.judging.asking import embed_texts, parallel
from offline_eval.judging.settings import EvalSettings
from offline_eval.judging.statements import answer_sentences, is_fragment
from offline_eval.judging.verdicts import EMPTY_STATEMENT, UNRELATED_PASSAGE, YES_NO, fits_beside, option_verdict
from offline_eval.judging.windows import context_windows
from offline_eval.prompts.base import QuestionInConversation
from offline_eval.prompts.ragas import (
    ANSWER_DECLINES_OPTION, ANSWER_GIVES_OPTION, DECLINING_WORDS, PASSAGE_ANSWERS_OPTION, QUESTION_JOINS,
)
from offline_eval.text import split_sentences

QUESTION_MARKS = ("?", "？")
# The coverage of the contexts (:func:`context_coverage`) from which an answer counts as complete: chosen
# among 0.4, 0.5 and 0.6 as the one that lowers no labelled set (docs/measurements.md).
COMPLETE_FROM = 0.5


def question_parts(question: str, language: str) -> list[str]:
    """The questions a question asks: its sentences that end in a question mark when there are two or
    more (each keeps the conversation the question was asked in), else the question whole."""
    parts = [s for s in split_sentences(str(question), language) if s.rstrip().endswith(QUESTION_MARKS)]
    if len(parts) < 2:
        return [question]
    history = getattr(question, "history", ())
    return [QuestionInConversation(p, history) if history else p for p in parts]


def joined_questions(question: str, language: str) -> list[str]:
    """The questions one sentence asks when "and" joins a second one to it (:data:`QUESTION_JOINS`: "When
    did A happen, and when did B happen?"); the question whole otherwise. Unlike the sentences of
    :func:`question_parts`, which in a conversation are often a question and its follow-up ("What is a
    FICO score? Is that the same?"), a joined question names its own subject."""
    if language not in QUESTION_JOINS:
        return [str(question)]
    clauses = [c.strip() for c in _joins(language).split(str(question)) if c.strip()]
    return clauses if len(clauses) > 1 else [str(question)]


@cache
def _joins(language: str) -> re.Pattern[str]:
    return re.compile(QUESTION_JOINS[language], re.IGNORECASE)


def _said(answer: str, language: str) -> list[str]:
    """The answer's sentences as the embedder reads them: as faithfulness verifies them
    (:func:`~offline_eval.judging.statements.answer_sentences`: a table's rows named by its header, a line
    without a letter or digit dropped), or the answer whole when it has none."""
    return list(answer_sentences(str(answer), language)) or [str(answer)]


def part_coverage(parts: Sequence[str], answer: str, language: str) -> Generator[Any, Any, list[float]]:
    """How closely the answer speaks to each of the questions a sentence joins: the embedder's best cosine
    between the question and one of the answer's sentences (0 at least). The judge cannot be asked this: a
    small one gives a question the answer leaves out the same P(Yes) as one it answers
    (docs/measurements.md)."""
    sentences = _said(answer, language)
    vectors = yield from embed_texts([*map(str, parts), *sentences])
    similarity = vectors[:len(parts)] @ vectors[len(parts):].T
    return [max(0.0, float(row.max())) for row in similarity]


def balance_of(coverage: Sequence[float]) -> float:
    """How evenly an answer covers the questions a sentence joins: its least-covered question's coverage
    over its best-covered one's (1 when it covers none: nothing is uneven, and the judge's P says it misses
    all)."""
    best = max(coverage)
    return min(coverage) / best if best > 0 else 1.0


@cache
def _declining(language: str) -> re.Pattern[str]:
    return re.compile(DECLINING_WORDS.get(language, DECLINING_WORDS["en"]), re.IGNORECASE)


def says_it_cannot_answer(answer: str, language: str) -> bool:
    """Whether the answer's first sentence says, in words (:data:`DECLINING_WORDS`), that the information
    asked for is not given: "The documents do not provide ...", "I do not have specific information."
    Only the first sentence, since an answer that answers may later note what its sources leave out."""
    sentences = split_sentences(str(answer), language)
    return bool(sentences) and _declining(language).search(sentences[0]) is not None


def passage_verdicts(question: str, contexts: Sequence[str], language: str,
                     settings: EvalSettings) -> Generator[Any, Any, list[dict[str, Any]]]:
    """For each window of the contexts (``settings.context_window`` words, cut further where the prompt
    would not fit the judge), whether it states the answer to ``question``: the judge's P(Yes) as it is.
    Not corrected for the window's lean (its P(Yes) for an empty question): that lean rises with how much
    a passage states, which is part of what is asked."""
    fits = fits_beside([PASSAGE_ANSWERS_OPTION.render(language, passage="", question=question)], settings)
    windows = context_windows(contexts, settings.context_window, language, fits)
    if not windows:
        return []
    probs = yield [ScoreOptions(prompt=PASSAGE_ANSWERS_OPTION.render(language, passage=text, question=question),
                                options=YES_NO) for _, text in windows]
    out = []
    for (chunk, text), asked in zip(windows, probs):
        verdict = option_verdict(asked, (), settings)
        out.append({"chunk": chunk, "passage": text, "relevant": verdict.supported,
                    "probability": round(verdict.probability, 6)})
    return out


def context_figures(windows: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The windows' verdicts read as a context's relevance: the best window's P (the context holds the
    answer) and their mean (how much of the context does)."""
    p = [w["probability"] for w in windows]
    return {"max_probability": max(p), "mean_probability": sum(p) / len(p)}


def sentences_of(contexts: Sequence[str], language: str) -> list[str]:
    """The sentences of the contexts, in order, blank ones left out: what the embedder's readings of the
    contexts (:func:`share_on_question`, :func:`context_coverage`) weigh one by one."""
    return [s for c in contexts for s in split_sentences(str(c), language) if s.strip()]


def _above_lean(cosines: np.ndarray, unrelated: float) -> np.ndarray:
    """How far each cosine with the question lies above the cosine of a passage that has nothing to do with
    any question (:data:`UNRELATED_PASSAGE`, the embedder's lean, as an empty answer is the judge's), over
    the room left up to 1, at least 0. Anchored at that lean, a sentence's weight means about the same
    whatever the embedder's range of cosines."""
    return np.clip((cosines - unrelated) / max(1.0 - unrelated, 1e-6), 0.0, 1.0)


def share_on_question(question: str, contexts: Sequence[str],
                      language: str) -> Generator[Any, Any, dict[str, float]]:
    """How much of the contexts is on the question, read by the embedder: the mean over the contexts'
    sentences of how far each lies above the embedder's lean (:func:`_above_lean`). A small judge barely
    tells a passage that states the answer from one retrieved beside it that does not; the embedder reads
    the padding (docs/measurements.md)."""
    sentences = sentences_of(contexts, language)
    vectors = yield from embed_texts([str(question), UNRELATED_PASSAGE[language], *sentences])
    cosines = vectors[1:] @ vectors[0]
    unrelated = float(cosines[0])
    above = _above_lean(cosines[1:], unrelated)
    return {"share_on_question": float(above.mean()) if len(above) else 0.0, "unrelated_cosine": unrelated,
            "n_sentences": len(above)}


def context_coverage(question: str, answer: str, contexts: Sequence[str],
                     language: str) -> Generator[Any, Any, float | None]:
    """How much of what the contexts say on the question the answer carries, read by the embedder: each
    sentence of the contexts weighs how far it lies above the embedder's lean (:func:`_above_lean`) and
    counts as covered by its best cosine with a sentence of the answer (0 at least); the coverage is their
    weighted mean. None, asking nothing, when there are no contexts or none of their sentences is on the
    question: then it says nothing of the answer. The Ragas paper's answers of low relevance were answers
    "in an incomplete way"; a small judge gives an answer cut to its first sentence a higher P(it addresses
    the question) than the whole (docs/measurements.md)."""
    sentences = sentences_of(contexts, language)
    if not sentences:
        return None
    said = _said(answer, language)
    vectors = yield from embed_texts([str(question), UNRELATED_PASSAGE[language], *sentences, *said])
    context, answer_vectors = vectors[2:2 + len(sentences)], vectors[2 + len(sentences):]
    weights = _above_lean(context @ vectors[0], float(vectors[1] @ vectors[0]))
    if weights.sum() <= 0:
        return None
    covered = np.clip((context @ answer_vectors.T).max(axis=1), 0.0, None)
    return float((weights * covered).sum() / weights.sum())


def completeness_of(coverage: float | None) -> float:
    """The factor an answer's coverage of the contexts (:func:`context_coverage`) puts on its relevance: 1
    from :data:`COMPLETE_FROM` up, in proportion below it, 1 when the coverage is not read. An answer need not
    repeat all the passages say on the question (people rate shorter answers higher on MT-RAG); one that
    carries less than half of it is read as incomplete."""
    return 1.0 if coverage is None else min(1.0, coverage / COMPLETE_FROM)


def context_relevance(mean_probability: float, share: float) -> float:
    """A context's relevance from its two readings: the geometric mean of the judge's (the windows' mean
    P(it states the answer), :func:`context_figures`) and the embedder's (:func:`share_on_question`), so a
    context scores high only when the judge finds the answer in it and little of it is off the
    question."""
    return math.sqrt(mean_probability * share)


def answer_verdicts(question: str, answer: str, contexts: Sequence[str] | None, language: str,
                    settings: EvalSettings) -> Generator[Any, Any, dict[str, Any]]:
    """Whether ``answer`` addresses ``question``: the least P(Yes) over the question's parts
    (:func:`question_parts`), each corrected by its P(Yes) for an empty answer; for a question read whole
    that joins two (:func:`joined_questions`), times how evenly the answer covers them
    (:func:`balance_of`, read by the embedder), so that an answer to one of them scores below an answer
    to both; times how much of what the contexts say on the question the answer carries
    (:func:`completeness_of` its :func:`context_coverage`), so that an incomplete answer scores below a
    complete one; not for a fragment (:func:`~offline_eval.judging.statements.is_fragment`), which answers
    in its question's words. An answer that says the information cannot be given is relevant as far as
    the contexts do not hold it (the best window's P, :func:`passage_verdicts`), when the judge reads it
    as declining.
    Where retrieval gave nothing (``contexts`` an empty list, or only blank ones) no passage holds the
    answer, so a declining answer scores its P(it declines), which is 1 when its first sentence says so in
    words (:func:`says_it_cannot_answer`): a small judge seldom reads a refusal as one. Without contexts at
    all (None: a sample that records no retrieval), the refusal is not read."""
    parts = question_parts(question, language)
    asked = [ScoreOptions(prompt=ANSWER_GIVES_OPTION.render(language, question=part, answer=a), options=YES_NO)
             for part in parts for a in (answer, EMPTY_STATEMENT)]
    declines_prompt = ANSWER_DECLINES_OPTION.render(language, question=question, answer=answer)
    steps = [_asked([*asked, ScoreOptions(prompt=declines_prompt, options=YES_NO)])]
    # A fragment ("Chicago.") is read with its question, as faithfulness reads it; the embedder reads it
    # alone, far from "In 2018 CleanCo expanded to Chicago.", and would take a complete answer for an
    # incomplete one. Not in Chinese, whose words are not counted between spaces.
    fragment = language != "zh" and is_fragment(answer, settings)
    steps.append(context_coverage(question, answer, [] if fragment else contexts or [], language))
    joined = joined_questions(question, language) if len(parts) == 1 else []
    if len(joined) > 1:
        steps.append(part_coverage(joined, answer, language))
    probs, coverage, *covered = yield from parallel(*steps)
    verdicts = [option_verdict(p, (lean,), settings) for p, lean in zip(probs[0:-1:2], probs[1:-1:2])]
    balance = balance_of(covered[0]) if covered else 1.0
    completeness = completeness_of(coverage)
    addresses = min(v.probability for v in verdicts) * balance * completeness
    declined = option_verdict(probs[-1], (), settings)
    retrieved_nothing = contexts is not None and not any(str(c).strip() for c in contexts)
    in_words = retrieved_nothing and says_it_cannot_answer(answer, language)
    declines = 1.0 if in_words else declined.probability
    out: dict[str, Any] = {
        "parts": [{"question": str(part), "addresses": v.supported, "probability": round(v.probability, 6),
                   "judge_probability": round(v.judge, 6), "baseline": round(v.baseline, 6)}
                  for part, v in zip(parts, verdicts)],
        "addresses": addresses, "addresses_judge": min(v.judge for v in verdicts), "declines": declines,
        "value": addresses}
    if covered:
        out.update(joined=[{"question": q, "coverage": round(c, 6)} for q, c in zip(joined, covered[0])],
                   balance=round(balance, 6))
    if coverage is not None:
        out.update(coverage=round(coverage, 6), completeness=round(completeness, 6))
    elif fragment and contexts and not retrieved_nothing:
        out.update(fragment=True)  # its coverage is not read
    if retrieved_nothing and (in_words or declined.supported):
        out.update(held=0.0, retrieved_nothing=True, declines_in_words=in_words, value=max(addresses, declines))
    elif contexts and declined.supported:
        windows = yield from passage_verdicts(question, contexts, language, settings)
        if windows:
            held = context_figures(windows)["max_probability"]
            out.update(held=held, value=max(addresses, declines * (1.0 - held)))
    return out


def _asked(requests: list[ScoreOptions]) -> Generator[Any, Any, list[Any]]:
    """The judge's answers to ``requests``, as a step :func:`parallel` can run beside another."""
    return (yield requests)
