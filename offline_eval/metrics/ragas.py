"""The Ragas metric family, as staged generators over typed requests."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from offline_eval import reasons
from offline_eval.data.schema import Sample
from offline_eval.judging.asking import (
    ASK_STAGES, EMBED_STAGES, JsonAsk, ask_json, ask_json_many, embed_texts, parallel,
)
from offline_eval.judging.parsing import closed_strings
from offline_eval.judging.settings import EvalSettings
from offline_eval.judging.statements import NOTE_STAGES, STATEMENT_STAGES, Statements, answer_statements, left_out_note
from offline_eval.judging.verdicts import (
    CREDULOUS_PASSAGE, NONSENSE_CONTROL, SELF_SUPPORTED, SUPPORT_STAGES, UNRELATED_PASSAGE, VERDICT_STAGES, YES_NO,
    Verdict, Verdicts, credulity_of, expected_grade, expected_shares, most_likely, option_verdict, refusal_limit,
    refusals, refuses, share_of, support_against_contexts, support_matrix, supported_count,
)
from offline_eval.metrics import register_metric
from offline_eval.metrics.base import Metric, Score, ScoreGenerator
from offline_eval.metrics.evidence import Checks, Columns, Texts
from offline_eval.metrics.relevance import (
    answer_verdicts, context_figures, context_relevance, passage_verdicts, share_on_question,
)
from offline_eval.prompts.ragas import (
    CHUNK_USEFUL, CHUNK_USEFUL_OPTION, DEFAULT_RUBRICS, ENTITIES, QUESTIONS, RELEVANT_SENTENCES, RUBRIC,
    RUBRIC_OPTION,
)
from offline_eval.reasons import failing_with
from offline_eval.text import split_sentences


class SampleMetric(Metric):
    """Runs ``compute`` in the sample's language (the engine has checked the required fields)."""

    def score(self, sample: Sample, settings: EvalSettings) -> ScoreGenerator:
        return (yield from self.compute(sample, settings, settings.language_for(sample)))

    def compute(self, sample: Sample, settings: EvalSettings, lang: str) -> ScoreGenerator:
        raise NotImplementedError
        yield  # pragma: no cover


# --- faithfulness ---------------------------------------------------------------------------------
PROBABILITY = ("probability", "p={:.2f}")  # a verdict's P(yes), shown beside it


@register_metric
class Faithfulness(SampleMetric):
    name = "faithfulness"
    most_steps = STATEMENT_STAGES + SUPPORT_STAGES
    question_for_people = "Is everything the answer states supported by the retrieved contexts?"
    requires = ("answer", "contexts")
    roles = frozenset({"judge", "verifier"})
    description = "share of the answer's claims supported by the retrieved contexts"
    reads_question = True  # claims resolve pronouns with it; a short answer is judged as an answer to it
    evidence = (Checks("claims", text="claim", verdict="supported", yes="supported", no="unsupported", note="reason",
                       context="chunk", figures=(PROBABILITY,)),)
    claims_mode: ClassVar[str | None] = None  # None: EvalSettings.claims

    def compute(self, sample, settings, lang):
        statements = yield from answer_statements(sample.answer, sample.question, lang, settings, self.claims_mode,
                                                  about=sample.contexts)
        if not statements.texts:
            return Score.unscored(reasons.NO_CLAIMS, "the answer makes no factual claim")
        with failing_with(claims=statements.texts):
            verdicts = yield from support_against_contexts(
                sample.contexts, statements.texts, lang, settings,
                question=statements.question_for(sample.question, settings), framing="answer")
        return self.from_verdicts(statements, verdicts, settings)

    def from_verdicts(self, statements: Statements, verdicts: list[Verdict], settings: EvalSettings) -> Score:
        claims = statements.texts
        supported = sum(v.supported for v in verdicts)
        mean_p = float(np.mean([v.probability for v in verdicts]))
        if statements.whole:
            explanation = f"the answer, checked whole, is {'' if supported else 'not '}supported by the contexts"
        else:
            explanation = f"{supported} of {len(claims)} claims supported by the contexts"
        if expected_shares(settings):
            explanation += f" (mean P(supported) {mean_p:.3f})"
        explanation += refusals(verdicts) + left_out_note(statements)
        metadata = {"claims": [{"claim": c, **v.to_dict()} for c, v in zip(claims, verdicts)],
                    "statements": statements.source, "supported_share": supported / len(claims),
                    "mean_probability": mean_p}
        if statements.left_out:
            metadata["left_out"] = statements.left_out
        return Score(share_of(verdicts, settings), explanation=explanation, metadata=metadata)


@register_metric
class SentenceFaithfulness(Faithfulness):
    """Faithfulness whose claims are the answer's sentences: no claim-extraction stage."""

    name = "faithfulness_sentences"
    description = "share of the answer's sentences supported by the retrieved contexts (no claim extraction)"
    claims_mode = "sentences"
    most_steps = NOTE_STAGES + SUPPORT_STAGES


@register_metric
class HallucinationRate(Faithfulness):
    name = "hallucination_rate"
    question_for_people = "Does the answer state anything the retrieved contexts do not support?"
    higher_is_better = False
    description = "share of the answer's claims with no support in the contexts (1 - faithfulness)"

    def from_verdicts(self, statements, verdicts, settings):
        score = super().from_verdicts(statements, verdicts, settings)
        unsupported = len(statements.texts) - sum(v.supported for v in verdicts)
        return Score(1.0 - score.value, explanation=f"{unsupported} of {len(statements.texts)} claims unsupported",
                     metadata=score.metadata)


# --- answer relevancy -----------------------------------------------------------------------------
RelevanceMode = Literal["verdict", "ragas"]
MODE_HELP = ("verdict: option verdicts of the judge, none unreadable (the default); ragas: Ragas' own "
             "definition, {ragas}")


def ragas_questions(raw: str) -> dict[str, Any] | None:
    """The questions of a reply cut off before its JSON closed (a small judge copies the answer into its
    questions until the token cap): those whose text closed, and ``noncommittal`` when it was given."""
    questions = closed_strings(raw, "questions")
    if questions is None:
        return None
    noncommittal = re.search(r'"noncommittal"\s*:\s*(true|false)', raw)
    return {"noncommittal": bool(noncommittal and noncommittal.group(1) == "true"), "questions": questions}


@register_metric
class AnswerRelevancy(SampleMetric):
    name = "answer_relevancy"

    @property
    def most_steps(self) -> int:  # type: ignore[override]
        # verdict: the verdicts, then the windows of a declining answer's contexts; ragas: the questions
        # (repaired), then their vectors
        return ASK_STAGES + EMBED_STAGES if self.options.mode == "ragas" else 2
    question_for_people = "Does the answer address the question?"
    requires = ("question", "answer")
    roles = frozenset({"judge", "embedder"})  # both modes: the verdicts embed the questions a sentence joins
    description = ("does the answer address the question (the judge's P(Yes), corrected for its lean, "
                   "times how evenly the answer covers two questions joined in one and how much of what "
                   "the contexts say on the question it carries (a fragment answer aside), both by the "
                   "embedder; "
                   "an answer saying it cannot answer counts when the contexts do not hold the answer or "
                   "nothing was retrieved), or "
                   "Ragas' mean cosine between the question and questions regenerated from the answer")
    evidence = (Checks("parts", text="question", verdict="addresses", yes="addressed", no="not addressed",
                       figures=(PROBABILITY,), caption="What the question asks, addressed or not:"),
                Checks("questions", text="question", verdict="noncommittal", yes="noncommittal", good=(),
                       bad=(True,), figures=(("similarity", "similarity {:.3f}"),),
                       caption="Questions generated back from the answer:"),)

    @dataclass(frozen=True)
    class Options:
        mode: RelevanceMode = field(default="verdict", metadata={"help": MODE_HELP.format(
            ragas="the mean cosine between the question and questions the judge regenerates from the answer")})
        n: int = field(default=3, metadata={"help": "ragas mode: questions regenerated from each answer",
                                            "minimum": 1})

    # the verdict mode's readings: 1 reads how much of its contexts an answer carries, so that an answer
    # cut short scores below the whole
    VERDICT_REVISION = 1

    def configured(self) -> None:
        # Ragas' definition did not change (set both ways: with_options copies the instance)
        self.revision = self.VERDICT_REVISION if self.options.mode == "verdict" else 0  # type: ignore[misc]

    def compute(self, sample, settings, lang):
        if self.options.mode == "ragas":
            return (yield from self.ragas(sample, settings, lang))
        got = yield from answer_verdicts(sample.question, sample.answer, sample.contexts, lang, settings)
        value = got.pop("value")
        if got.get("retrieved_nothing") and value > got["addresses"]:
            how = "in words" if got["declines_in_words"] else f"P {got['declines']:.2f}"
            explanation = f"the answer says it cannot answer ({how}) and nothing was retrieved that could hold it"
        elif "held" in got and value > got["addresses"]:
            explanation = (f"the answer says it cannot answer (P {got['declines']:.2f}) and the contexts do not "
                           f"hold the answer (P {got['held']:.2f})")
        else:
            explanation = f"P(the answer addresses the question) {got['addresses']:.3f}"
            if len(got["parts"]) > 1:
                explanation += f", the least of its {len(got['parts'])} questions"
            if "joined" in got:
                least = min(got["joined"], key=lambda q: q["coverage"])["question"]
                explanation += (f", times {got['balance']:.2f} for how evenly it covers the "
                                f"{len(got['joined'])} questions joined in one (least: {least!r})")
            if got.get("completeness", 1.0) < 1.0:
                explanation += (f", times {got['completeness']:.2f} for carrying {got['coverage']:.2f} of what "
                                "the contexts say on the question")
        return Score(value, explanation=explanation, metadata={"mode": "verdict", **got})

    def ragas(self, sample, settings, lang):
        n = self.options.n
        got = yield from ask_json(JsonAsk(QUESTIONS, lang, {"n": n, "answer": sample.answer},
                                          salvage=ragas_questions), settings)
        questions = [q.strip() for q in got.value["questions"] if q.strip()][:n]
        if not questions:
            return Score.unscored(reasons.NO_QUESTIONS, "the judge wrote no question for the answer")
        vectors = yield from embed_texts([sample.question] + questions)
        sims = [float(np.dot(vectors[0], v)) for v in vectors[1:]]
        noncommittal = bool(got.value["noncommittal"])
        details = [{"question": q, "noncommittal": noncommittal, "similarity": round(s, 6)}
                   for q, s in zip(questions, sims)]
        if noncommittal:
            return Score(0.0, explanation="the answer is noncommittal",
                         metadata={"mode": "ragas", "questions": details})
        value = max(0.0, float(np.mean(sims)))
        return Score(value, explanation=f"mean similarity of {len(questions)} regenerated questions",
                     metadata={"mode": "ragas", "questions": details})


# --- context relevance ----------------------------------------------------------------------------
def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


@register_metric
class ContextRelevance(SampleMetric):
    name = "context_relevance"

    @property
    def most_steps(self) -> int:  # type: ignore[override]
        # verdict: the windows' verdicts beside the sentences' vectors, in one stage
        return ASK_STAGES if self.options.mode == "ragas" else 1
    question_for_people = "Are the retrieved contexts relevant to the question?"
    requires = ("question", "contexts")
    roles = frozenset({"judge", "embedder"})  # the verdict mode reads how much of the contexts is on the question
    description = ("how much of the contexts states the answer to the question: the geometric mean of the "
                   "judge's mean P(Yes) over windows of the contexts and the share of their sentences on the "
                   "question by the embedder (above an unrelated passage), or Ragas' share of context "
                   "sentences the judge extracts as needed")
    evidence = (Checks("windows", text="passage", verdict="relevant", yes="relevant", no="not relevant",
                       context="chunk", figures=(PROBABILITY,),
                       caption="Does each window of the contexts state the answer?"),
                Texts("sentences", caption="Context sentences judged relevant to the question:",
                      empty="No relevant sentences were extracted from the contexts."),
                Texts("not_in_context", caption="Sentences the judge gave that are not in the contexts:", good=False))

    @dataclass(frozen=True)
    class Options:
        mode: RelevanceMode = field(default="verdict", metadata={"help": MODE_HELP.format(
            ragas="the share of context sentences the judge copies out as needed to answer the question")})

    def configured(self) -> None:
        # Ragas' definition embeds nothing (set both ways: with_options copies the instance)
        self.roles = frozenset({"judge"}) if self.options.mode == "ragas" else type(self).roles  # type: ignore[misc]

    def compute(self, sample, settings, lang):
        if self.options.mode == "ragas":
            return (yield from self.ragas(sample, settings, lang))
        windows, on_question = yield from parallel(
            passage_verdicts(sample.question, sample.contexts, lang, settings),
            share_on_question(sample.question, sample.contexts, lang))
        if not windows:
            return Score.unscored(reasons.EMPTY_CONTEXTS, "the contexts hold no text")
        figures = context_figures(windows)
        value = context_relevance(figures["mean_probability"], on_question["share_on_question"])
        stating = sum(w["relevant"] for w in windows)
        return Score(value, explanation=f"{stating} of {len(windows)} windows of the contexts state the answer "
                                        f"(mean P {figures['mean_probability']:.3f}, best "
                                        f"{figures['max_probability']:.3f}); "
                                        f"{on_question['share_on_question']:.3f} of their "
                                        f"{on_question['n_sentences']} sentences on the question",
                     metadata={"mode": "verdict", "windows": windows, **figures,
                               **{k: round(v, 6) for k, v in on_question.items()}})

    def ragas(self, sample, settings, lang):
        sentences = [s for c in sample.contexts for s in split_sentences(c, lang)]
        if not sentences:
            return Score.unscored(reasons.EMPTY_CONTEXTS, "the contexts hold no sentence")
        got = yield from ask_json(JsonAsk(RELEVANT_SENTENCES, lang, {
            "question": sample.question, "context": "\n".join(sample.contexts)}), settings)
        haystack = _normalise(" ".join(sample.contexts))
        kept, invented = [], []
        for sentence in got.value["sentences"]:
            norm = _normalise(sentence)
            if not norm or "insufficient information" in norm:
                continue
            (kept if norm in haystack else invented).append(sentence)
        kept = list(dict.fromkeys(kept))
        value = min(1.0, len(kept) / len(sentences))
        return Score(value, explanation=f"{len(kept)} of {len(sentences)} context sentences needed",
                     metadata={"mode": "ragas", "sentences": kept, "not_in_context": invented,
                               "n_sentences": len(sentences)})


@register_metric
class ContextRelevanceEmbedding(SampleMetric):
    name = "context_relevance_embedding"
    most_steps = EMBED_STAGES
    question_for_people = "Are the retrieved contexts relevant to the question?"
    requires = ("question", "contexts")
    roles = frozenset({"embedder"})
    description = "mean cosine between the question and each retrieved context"

    def compute(self, sample, settings, lang):
        vectors = yield from embed_texts([sample.question] + list(sample.contexts))
        sims = [float(np.dot(vectors[0], v)) for v in vectors[1:]]
        return Score(max(0.0, float(np.mean(sims))), metadata={"similarities": [round(s, 6) for s in sims]})


# --- context precision / utilization --------------------------------------------------------------
def average_precision(verdicts: list[bool]) -> float:
    """Σ_k precision@k · v_k / (Σ_k v_k + 1e-10), as Ragas defines context precision."""
    hits, total = 0, 0.0
    for k, useful in enumerate(verdicts, start=1):
        if useful:
            hits += 1
            total += hits / k
    return total / (hits + 1e-10)


@register_metric
class ContextPrecision(SampleMetric):
    name = "context_precision"
    most_steps = VERDICT_STAGES  # the probes go beside the verdicts
    question_for_people = "Are the retrieved contexts that help reach the reference answer ranked first?"
    requires = ("question", "contexts", "ground_truth")
    roles = frozenset({"judge"})
    description = "are the chunks useful for the reference ranked first (average precision)"
    evidence = (Checks("verdicts", verdict="useful", yes="useful", no="not useful", context="chunk",
                       figures=(PROBABILITY,)),)
    target_field: ClassVar[str] = "ground_truth"

    def compute(self, sample, settings, lang):
        def from_probs(probs, _leans):  # the chunk's own lean is no lean to take out here
            verdict = option_verdict(probs, (), settings)
            return {"useful": verdict.supported, "probability": round(verdict.probability, 6)}

        usefulness = Verdicts(
            CHUNK_USEFUL_OPTION, YES_NO, CHUNK_USEFUL, "context", from_probs,
            lambda reply: {"useful": bool(reply["useful"]), "probability": float(bool(reply["useful"])),
                           "reason": reply.get("reason", "")})
        values = {"question": sample.question, "answer": getattr(sample, self.target_field)}
        limit = refusal_limit(settings)
        probes = limit < 1.0
        # beside the chunks: each chunk's credulity, and whether an unrelated passage "helps" reach this
        # answer (an answer carrying an instruction to the grader makes every chunk look useful), asked
        # without the conversation before the question (it inclines a small judge to agree with anything)
        alone = {**values, "question": str(sample.question)}
        got, credulity, unrelated = yield from parallel(
            usefulness.judge(sample.contexts, values, lang, settings),
            credulity_of(sample.contexts if probes else [], lang),
            usefulness.judge([UNRELATED_PASSAGE[lang]] if probes else [], alone, lang, settings))
        self_support = unrelated[0]["probability"] if probes else None
        any_helps = self_support is not None and refuses(self_support, limit)  # the target is no answer
        for verdict, agrees in zip(got, credulity):  # a chunk that agrees with anything is no help either
            verdict["credulity"] = round(agrees, 6)
            if refuses(agrees, limit):
                verdict.update(useful=False, refused=CREDULOUS_PASSAGE)
        if any_helps:
            for verdict in got:
                verdict.update(useful=False, refused=verdict.get("refused", SELF_SUPPORTED),
                               self_support=round(self_support, 6))
        details = [{"chunk": i, **verdict} for i, verdict in enumerate(got)]
        flags = [d["useful"] for d in details]
        credulous = sum(d.get("refused") == CREDULOUS_PASSAGE for d in details)
        notes = [f"{credulous} counted as not useful because the judge says they also support {NONSENSE_CONTROL}, "
                 "so its yes proves nothing"] if credulous else []
        if any_helps:
            notes.append(f"an unrelated passage helps reach the {self.target_field.replace('_', ' ')} "
                         f"too (P {self_support:.2f}), so the judge's yes proves nothing: no chunk counted as useful")
        return Score(average_precision(flags), explanation=f"{sum(flags)} of {len(flags)} chunks useful"
                     + "".join(f"; {n}" for n in notes), metadata={"verdicts": details})


@register_metric
class ContextUtilization(ContextPrecision):
    name = "context_utilization"
    question_for_people = "Are the retrieved contexts that help reach the answer ranked first?"
    requires = ("question", "contexts", "answer")
    description = "context precision with the answer standing in for a reference"
    target_field = "answer"


# --- context recall -------------------------------------------------------------------------------
@register_metric
class ContextRecall(SampleMetric):
    name = "context_recall"
    most_steps = SUPPORT_STAGES
    question_for_people = "Can everything the reference answer says be found in the retrieved contexts?"
    requires = ("contexts", "ground_truth")
    roles = frozenset({"judge", "verifier"})
    description = "share of the reference's sentences attributable to the contexts"
    reads_question = True  # a sentence of the reference is judged as an answer to it
    evidence = (Checks("claims", text="claim", verdict="attributed", yes="attributed", no="not attributed",
                       note="reason", context="chunk", figures=(PROBABILITY,)),)

    def compute(self, sample, settings, lang):
        sentences = split_sentences(sample.ground_truth, lang)
        if not sentences:
            return Score.unscored(reasons.EMPTY_REFERENCE, "the reference has no sentence")
        verdicts = yield from support_against_contexts(sample.contexts, sentences, lang, settings,
                                                       question=sample.question or None)
        attributed = sum(v.supported for v in verdicts)
        return Score(share_of(verdicts, settings),
                     explanation=f"{attributed} of {len(sentences)} reference sentences attributable"
                                 + refusals(verdicts),
                     metadata={"claims": [{"claim": s, "attributed": v.supported, **v.to_dict()}
                                          for s, v in zip(sentences, verdicts)]})


# --- context entity recall ------------------------------------------------------------------------
@register_metric
class ContextEntityRecall(SampleMetric):
    name = "context_entity_recall"
    most_steps = ASK_STAGES  # both lists of entities in one ask
    requires = ("contexts", "ground_truth")
    roles = frozenset({"judge"})
    description = "share of the reference's entities that occur in the contexts"
    evidence = (Texts("found", caption="Reference entities found in the contexts:"),
                Texts("reference_entities", caption="Entities of the reference:", good=None))

    def compute(self, sample, settings, lang):
        ref, con = yield from ask_json_many([
            JsonAsk(ENTITIES, lang, {"text": sample.ground_truth}),
            JsonAsk(ENTITIES, lang, {"text": "\n".join(sample.contexts)})], settings)
        reference = {_normalise(e): e for e in ref.value["entities"] if _normalise(e)}
        found = {_normalise(e) for e in con.value["entities"]}
        haystack = _normalise(" ".join(sample.contexts))
        if not reference:
            return Score.unscored(reasons.NO_ENTITIES, "the judge found no entity in the reference")
        # An entity counts when the judge listed it for the contexts or it occurs there verbatim.
        hit = [e for k, e in reference.items() if k in found or k in haystack]
        return Score(len(hit) / len(reference), metadata={
            "reference_entities": list(reference.values()), "found": hit})


# --- answer similarity / correctness --------------------------------------------------------------
@register_metric
class AnswerSimilarity(SampleMetric):
    name = "answer_similarity"
    most_steps = EMBED_STAGES
    question_for_people = "Does the answer say the same as the reference answer?"
    requires = ("answer", "ground_truth")
    roles = frozenset({"embedder"})
    description = "cosine between the answer's and the reference's embeddings"

    def compute(self, sample, settings, lang):
        vectors = yield from embed_texts([sample.answer, sample.ground_truth])
        return Score(max(0.0, float(np.dot(vectors[0], vectors[1]))))


def answer_and_reference_claims(sample: Sample, lang: str, settings: EvalSettings):
    """Statements of the answer and of the reference (``answer_statements``), in one stage."""
    answer, reference = yield from parallel(
        answer_statements(sample.answer, sample.question, lang, settings, about=[sample.ground_truth]),
        answer_statements(sample.ground_truth, sample.question, lang, settings))
    return answer, reference


def f1_from_counts(tp: float, fp: float, fn: float) -> float:
    return tp / (tp + 0.5 * (fp + fn)) if tp + fp + fn else 0.0


@register_metric
class AnswerCorrectness(SampleMetric):
    name = "answer_correctness"
    # the claims, then verdicts against one premise: with option verdicts the grading notes and one stage,
    # with JSON verdicts no notes and an ask (the vectors go beside the verdicts)
    most_steps = ASK_STAGES + max(NOTE_STAGES + 1, VERDICT_STAGES)
    question_for_people = "Is the answer correct, given the reference answer?"
    requires = ("question", "answer", "ground_truth")
    roles = frozenset({"judge", "verifier", "embedder"})
    description = "weighted claim-level F1 against the reference plus answer similarity"
    evidence = (Columns((("tp", "TP — in answer and reference", True), ("fp", "FP — in answer only", False),
                         ("fn", "FN — in reference only", False)),
                        figures=(("f1", "f1 {:.3f}"), ("similarity", "similarity {:.3f}"))),)

    @dataclass(frozen=True)
    class Options:
        weights: tuple[float, float] = field(default=(0.75, 0.25), metadata={
            "help": "weights of the factual F1 and of the embedding similarity: finite, >= 0, not both 0",
            "metavar": "F1,SIM", "weights": True})

        def __post_init__(self) -> None:
            # the API's keyword skips the flag's reading: a NaN, a negative or two zero weights would
            # make every row's value NaN or a division by zero, found only once the models had run
            from offline_eval.options import FlagError, weights_problem

            problem = weights_problem(self.weights) if isinstance(self.weights, (tuple, list)) else "expected two numbers"
            if problem is None and len(self.weights) != 2:
                problem = f"expected two numbers (F1,SIM), got {len(self.weights)}"
            if problem:
                raise FlagError("--answer-correctness-weights",
                                f"--answer-correctness-weights (answer_correctness_weights): {problem}")

    def compute(self, sample, settings, lang):
        a, g = yield from answer_and_reference_claims(sample, lang, settings)
        if not a.texts and not g.texts:
            return Score.unscored(reasons.NO_CLAIMS, "neither the answer nor the reference makes a claim")
        # Correctness is relative to the question: an answer or reference checked whole is read as an
        # answer to it, whatever its length (on EVOUNA TriviaQA this ranked better than framing
        # fragments only; faithfulness, which is relative to the contexts, frames fragments only).
        # The premises are answers, not retrieved passages: no baseline correction (on EVOUNA it raised
        # AUC but lowered cross-validated balanced accuracy). Both measured in docs/verification.md.
        in_reference, in_answer, vectors = yield from parallel(
            support_matrix([sample.ground_truth], a.texts, lang, settings,
                           question=sample.question if a.whole else None, framing="answer", passages=False),
            support_matrix([sample.answer], g.texts, lang, settings,
                           question=sample.question if g.whole else None, framing="reference", passages=False),
            embed_texts([sample.answer, sample.ground_truth]))
        tp = [c for c, v in zip(a.texts, in_reference[0]) if v.supported]
        fp = [c for c, v in zip(a.texts, in_reference[0]) if not v.supported]
        fn = [c for c, v in zip(g.texts, in_answer[0]) if not v.supported]
        # expected counts (a claim is a true positive with the probability that it is supported) or
        # thresholded ones (expected_shares)
        in_both = supported_count(in_reference[0], settings)
        counts = (in_both, len(a.texts) - in_both, len(g.texts) - supported_count(in_answer[0], settings))
        f1 = f1_from_counts(*counts)
        similarity = max(0.0, float(np.dot(vectors[0], vectors[1])))
        w_f1, w_sim = self.options.weights
        value = (w_f1 * f1 + w_sim * similarity) / (w_f1 + w_sim)
        metadata = {"tp": tp, "fp": fp, "fn": fn, "f1": f1, "similarity": similarity,
                    "counts": [round(c, 6) for c in counts], "statements": {"answer": a.source, "reference": g.source}}
        if a.left_out:
            metadata["left_out"] = a.left_out
        return Score(value, explanation=f"F1 {f1:.3f} (TP {counts[0]:.2f}, FP {counts[1]:.2f}, FN {counts[2]:.2f}), "
                                        f"similarity {similarity:.3f}" + left_out_note(a), metadata=metadata)


# --- rubrics --------------------------------------------------------------------------------------
RUBRIC_SCORES = ("1", "2", "3", "4", "5")


def _rubric_text(rubric: dict[Any, str]) -> str:
    return "\n".join(f"score{int(k)}_description: {v}" for k, v in sorted(rubric.items(), key=lambda kv: int(kv[0])))


@register_metric
class RubricsScore(SampleMetric):
    name = "rubrics_score"
    most_steps = VERDICT_STAGES
    requires = ("question", "answer")
    roles = frozenset({"judge"})
    description = "1-5 score against a rubric (with the reference when the sample has one)"
    value_range = (1.0, 5.0)

    @dataclass(frozen=True)
    class Options:
        rubrics: dict[str, dict[int, str]] | None = field(default=None, metadata={
            "help": "a TOML/JSON file of rubrics, {reference_free|with_reference: {1..5: text}} (none: the built-in ones)",
            "flag": "--rubrics", "parse": lambda path: read_rubrics(Path(path)), "metavar": "FILE"})

    def compute(self, sample, settings, lang):
        rubrics = self.options.rubrics or DEFAULT_RUBRICS
        kind = "with_reference" if sample.ground_truth else "reference_free"
        rubric = rubrics.get(kind) or DEFAULT_RUBRICS[kind]
        reference_block = (f"Reference: {sample.ground_truth}\n" if lang == "en" else f"参考答案：{sample.ground_truth}\n") \
            if sample.ground_truth else ""
        values = {"rubric": _rubric_text(rubric), "question": sample.question, "reference_block": reference_block}

        def from_probs(probs, _leans):
            best = most_likely(probs, RUBRIC_SCORES)
            expected = expected_grade(probs, RUBRIC_SCORES)
            return Score(float(best), explanation=f"most likely score {best} (expected {expected:.2f})",
                         metadata={"rubric": kind, "probabilities": probs, "expected": expected})

        rubric_score = Verdicts(RUBRIC_OPTION, RUBRIC_SCORES, RUBRIC, "answer", from_probs, lambda reply: Score(
            float(reply["score"]), explanation=reply.get("feedback", ""), metadata={"rubric": kind}))
        [graded] = yield from rubric_score.judge([sample.answer], values, lang, settings)
        return graded


def read_rubrics(path: Path) -> dict[str, dict[int, str]]:
    """A rubrics file, TOML or JSON: ``{reference_free|with_reference: {1..5: text}}``."""
    text = path.read_text(encoding="utf-8")
    data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    return {kind: {int(k): str(v) for k, v in table.items()} for kind, table in data.items()}


# --- noise sensitivity ----------------------------------------------------------------------------
@register_metric
class NoiseSensitivityRelevant(SampleMetric):
    name = "noise_sensitivity_relevant"
    most_steps = AnswerCorrectness.most_steps  # the same steps, against the chunks too
    requires = ("question", "answer", "contexts", "ground_truth")
    roles = frozenset({"judge", "verifier"})
    description = ("share of the answer's claims that are wrong (not in the reference) yet supported by a "
                   "relevant retrieved chunk")
    higher_is_better = False  # a share of wrong claims, as Ragas documents it
    evidence = (Checks("claims", text="claim", verdict="correct", yes="correct", no="wrong"),)
    chunk_kind: ClassVar[str] = "relevant"

    def compute(self, sample, settings, lang):
        answer, reference = yield from answer_and_reference_claims(sample, lang, settings)
        a, g = answer.texts, reference.texts
        if not a:
            return Score.unscored(reasons.NO_CLAIMS, "the answer makes no factual claim")
        chunks = list(sample.contexts)
        correct, chunk_ref, chunk_ans = yield from parallel(
            support_matrix([sample.ground_truth], a, lang, settings, passages=False),
            support_matrix(chunks, g, lang, settings),  # chunk -> reference claims
            support_matrix(chunks, a, lang, settings))  # chunk -> answer claims
        incorrect = [not v.supported for v in correct[0]]
        relevant = [any(v.supported for v in row) for row in chunk_ref]
        rel_faithful = [any(chunk_ans[k][i].supported for k in range(len(chunks)) if relevant[k])
                        for i in range(len(a))]
        irr_faithful = [any(chunk_ans[k][i].supported for k in range(len(chunks)) if not relevant[k])
                        and not rel_faithful[i] for i in range(len(a))]
        faithful = rel_faithful if self.chunk_kind == "relevant" else irr_faithful
        flagged = [c for c, bad, f in zip(a, incorrect, faithful) if bad and f]
        return Score(len(flagged) / len(a),
                     explanation=f"{len(flagged)} of {len(a)} claims are wrong and come from {self.chunk_kind} chunks",
                     metadata={"claims": [{"claim": c, "correct": not bad, "from_relevant_chunk": r,
                                           "from_irrelevant_chunk": ir}
                                          for c, bad, r, ir in zip(a, incorrect, rel_faithful, irr_faithful)],
                               "relevant_chunks": [i for i, r in enumerate(relevant) if r]})


@register_metric
class NoiseSensitivityIrrelevant(NoiseSensitivityRelevant):
    name = "noise_sensitivity_irrelevant"
    description = ("share of the answer's claims that are wrong yet supported only by irrelevant retrieved "
                   "chunks")
    chunk_kind = "irrelevant"
