"""The Ragas metric family (SPEC §2), as staged generators over typed requests."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import numpy as np

from offline_eval.data.schema import Sample
from offline_eval.engine.requests import ScoreOptions
from offline_eval.metrics.base import Metric, Score, ScoreGenerator, missing_fields
from offline_eval.metrics.judging import (
    JsonAsk, Verdict, ask_json, ask_json_many, embed_texts, extract_claims, parallel,
    support_against_contexts, support_matrix,
)
from offline_eval.metrics.settings import EvalSettings
from offline_eval.prompts.ragas import (
    CHUNK_USEFUL, CHUNK_USEFUL_OPTION, DEFAULT_RUBRICS, ENTITIES, QUESTIONS, RELEVANT_SENTENCES, RUBRIC,
    RUBRIC_OPTION,
)
from offline_eval.text import split_sentences


class SampleMetric(Metric):
    """Checks the required fields, then runs ``compute``."""

    def score(self, sample: Sample, ctx: EvalSettings) -> ScoreGenerator:
        missing = missing_fields(sample, self.requires)
        if missing:
            return missing
        return (yield from self.compute(sample, ctx, ctx.language_for(sample)))

    def compute(self, sample: Sample, ctx: EvalSettings, lang: str) -> ScoreGenerator:
        raise NotImplementedError
        yield  # pragma: no cover


# --- faithfulness ---------------------------------------------------------------------------------
class Faithfulness(SampleMetric):
    name = "faithfulness"
    requires = ("question", "answer", "contexts")
    roles = frozenset({"judge", "verifier"})
    description = "share of the answer's claims supported by the retrieved contexts"

    def compute(self, sample, ctx, lang):
        claims = yield from extract_claims(sample.answer, sample.question, lang, ctx)
        if claims.value is None:
            return Score.unscored("judge_unparseable", claims.problem or "", raw=claims.raw)
        if not claims.value:
            return Score.unscored("no_claims", "the answer makes no factual claim")
        verdicts = yield from support_against_contexts(sample.contexts, claims.value, lang, ctx)
        if isinstance(verdicts, str):
            return Score.unscored("judge_unparseable", verdicts, claims=claims.value)
        return self.from_verdicts(claims.value, verdicts)

    def from_verdicts(self, claims: list[str], verdicts: list[Verdict]) -> Score:
        supported = sum(v.supported for v in verdicts)
        value = supported / len(claims)
        return Score(value, explanation=f"{supported} of {len(claims)} claims supported by the contexts",
                     metadata={"claims": [{"claim": c, **v.to_dict()} for c, v in zip(claims, verdicts)],
                               "mean_probability": float(np.mean([v.probability for v in verdicts]))})


class SentenceFaithfulness(Faithfulness):
    """Faithfulness whose claims are the answer's sentences: no claim-extraction stage.

    Measured on BEGIN with a 0.5B judge (benchmarks/results/agreement_begin.md) it agrees better with
    human labels than LLM claims, which a small judge gets wrong (it copies the user's message).
    """

    name = "faithfulness_sentences"
    requires = ("answer", "contexts")
    description = "share of the answer's sentences supported by the retrieved contexts (no claim extraction)"

    def compute(self, sample, ctx, lang):
        claims = list(dict.fromkeys(split_sentences(sample.answer, lang)))
        if not claims:
            return Score.unscored("no_claims", "the answer has no sentence")
        verdicts = yield from support_against_contexts(sample.contexts, claims, lang, ctx)
        if isinstance(verdicts, str):
            return Score.unscored("judge_unparseable", verdicts, claims=claims)
        return self.from_verdicts(claims, verdicts)


class HallucinationRate(Faithfulness):
    name = "hallucination_rate"
    description = "share of the answer's claims with no support in the contexts (1 - faithfulness)"

    def from_verdicts(self, claims, verdicts):
        score = super().from_verdicts(claims, verdicts)
        unsupported = len(claims) - sum(v.supported for v in verdicts)
        return Score(1.0 - score.value, explanation=f"{unsupported} of {len(claims)} claims unsupported",
                     metadata=score.metadata)


# --- answer relevancy -----------------------------------------------------------------------------
class AnswerRelevancy(SampleMetric):
    name = "answer_relevancy"
    requires = ("question", "answer")
    roles = frozenset({"judge", "embedder"})
    description = "mean cosine between the question and questions regenerated from the answer"

    def compute(self, sample, ctx, lang):
        got = yield from ask_json(JsonAsk(QUESTIONS, lang, {"n": ctx.answer_relevancy_n, "answer": sample.answer}),
                                  ctx)
        if got.value is None:
            return Score.unscored("judge_unparseable", got.problem or "", raw=got.raw)
        questions = [q.strip() for q in got.value["questions"] if q.strip()][: ctx.answer_relevancy_n]
        if not questions:
            return Score.unscored("no_questions", "the judge wrote no question for the answer")
        vectors = yield from embed_texts([sample.question] + questions)
        sims = [float(np.dot(vectors[0], v)) for v in vectors[1:]]
        noncommittal = bool(got.value["noncommittal"])
        details = [{"question": q, "noncommittal": noncommittal, "similarity": round(s, 6)}
                   for q, s in zip(questions, sims)]
        if noncommittal:
            return Score(0.0, explanation="the answer is noncommittal", metadata={"questions": details})
        value = max(0.0, float(np.mean(sims)))
        return Score(value, explanation=f"mean similarity of {len(questions)} regenerated questions",
                     metadata={"questions": details})


# --- context relevance ----------------------------------------------------------------------------
def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


class ContextRelevance(SampleMetric):
    name = "context_relevance"
    requires = ("question", "contexts")
    roles = frozenset({"judge"})
    description = "share of context sentences the judge extracts as needed to answer the question"

    def compute(self, sample, ctx, lang):
        sentences = [s for c in sample.contexts for s in split_sentences(c, lang)]
        if not sentences:
            return Score.unscored("empty_contexts", "the contexts hold no sentence")
        got = yield from ask_json(JsonAsk(RELEVANT_SENTENCES, lang, {
            "question": sample.question, "context": "\n".join(sample.contexts)}), ctx)
        if got.value is None:
            return Score.unscored("judge_unparseable", got.problem or "", raw=got.raw)
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
                     metadata={"sentences": kept, "not_in_context": invented, "n_sentences": len(sentences)})


class ContextRelevanceEmbedding(SampleMetric):
    name = "context_relevance_embedding"
    requires = ("question", "contexts")
    roles = frozenset({"embedder"})
    description = "mean cosine between the question and each retrieved context"

    def compute(self, sample, ctx, lang):
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


class ContextPrecision(SampleMetric):
    name = "context_precision"
    requires = ("question", "contexts", "ground_truth")
    roles = frozenset({"judge"})
    description = "are the chunks useful for the reference ranked first (average precision)"
    target_field: ClassVar[str] = "ground_truth"

    def compute(self, sample, ctx, lang):
        target = getattr(sample, self.target_field)
        if ctx.verdicts == "options":
            probs = yield [ScoreOptions(prompt=CHUNK_USEFUL_OPTION.render(
                lang, question=sample.question, answer=target, context=c)) for c in sample.contexts]
            details = [{"chunk": i, "useful": p["Yes"] >= ctx.support_threshold, "probability": round(p["Yes"], 6)}
                       for i, p in enumerate(probs)]
        else:
            answers = yield from ask_json_many([JsonAsk(CHUNK_USEFUL, lang, {
                "question": sample.question, "answer": target, "context": c}) for c in sample.contexts], ctx)
            bad = [a for a in answers if a.value is None]
            if bad:
                return Score.unscored("judge_unparseable", bad[0].problem or "", raw=bad[0].raw)
            details = [{"chunk": i, "useful": bool(a.value["useful"]), "probability": float(bool(a.value["useful"])),
                        "reason": a.value.get("reason", "")} for i, a in enumerate(answers)]
        flags = [d["useful"] for d in details]
        return Score(average_precision(flags), explanation=f"{sum(flags)} of {len(flags)} chunks useful",
                     metadata={"verdicts": details})


class ContextUtilization(ContextPrecision):
    name = "context_utilization"
    requires = ("question", "contexts", "answer")
    description = "context precision with the answer standing in for a reference"
    target_field = "answer"


# --- context recall -------------------------------------------------------------------------------
class ContextRecall(SampleMetric):
    name = "context_recall"
    requires = ("contexts", "ground_truth")
    roles = frozenset({"judge", "verifier"})
    description = "share of the reference's sentences attributable to the contexts"

    def compute(self, sample, ctx, lang):
        sentences = split_sentences(sample.ground_truth, lang)
        if not sentences:
            return Score.unscored("empty_reference", "the reference has no sentence")
        verdicts = yield from support_against_contexts(sample.contexts, sentences, lang, ctx,
                                                       question=sample.question or None)
        if isinstance(verdicts, str):
            return Score.unscored("judge_unparseable", verdicts)
        attributed = sum(v.supported for v in verdicts)
        return Score(attributed / len(sentences),
                     explanation=f"{attributed} of {len(sentences)} reference sentences attributable",
                     metadata={"claims": [{"claim": s, "attributed": v.supported, **v.to_dict()}
                                          for s, v in zip(sentences, verdicts)]})


# --- context entity recall ------------------------------------------------------------------------
class ContextEntityRecall(SampleMetric):
    name = "context_entity_recall"
    requires = ("contexts", "ground_truth")
    roles = frozenset({"judge"})
    description = "share of the reference's entities that occur in the contexts"

    def compute(self, sample, ctx, lang):
        ref, con = yield from ask_json_many([
            JsonAsk(ENTITIES, lang, {"text": sample.ground_truth}),
            JsonAsk(ENTITIES, lang, {"text": "\n".join(sample.contexts)})], ctx)
        for got in (ref, con):
            if got.value is None:
                return Score.unscored("judge_unparseable", got.problem or "", raw=got.raw)
        reference = {_normalise(e): e for e in ref.value["entities"] if _normalise(e)}
        found = {_normalise(e) for e in con.value["entities"]}
        haystack = _normalise(" ".join(sample.contexts))
        if not reference:
            return Score.unscored("no_entities", "the judge found no entity in the reference")
        # An entity counts when the judge listed it for the contexts or it occurs there verbatim.
        hit = [e for k, e in reference.items() if k in found or k in haystack]
        return Score(len(hit) / len(reference), metadata={
            "reference_entities": list(reference.values()), "found": hit})


# --- answer similarity / correctness --------------------------------------------------------------
class AnswerSimilarity(SampleMetric):
    name = "answer_similarity"
    requires = ("answer", "ground_truth")
    roles = frozenset({"embedder"})
    description = "cosine between the answer's and the reference's embeddings"

    def compute(self, sample, ctx, lang):
        vectors = yield from embed_texts([sample.answer, sample.ground_truth])
        return Score(max(0.0, float(np.dot(vectors[0], vectors[1]))))


def answer_and_reference_claims(sample: Sample, lang: str, ctx: EvalSettings):
    """Claims of the answer and of the reference, in one stage; or the unscored Score."""
    answer_claims, reference_claims = yield from parallel(
        extract_claims(sample.answer, sample.question, lang, ctx),
        extract_claims(sample.ground_truth, sample.question, lang, ctx))
    for got in (answer_claims, reference_claims):
        if got.value is None:
            return Score.unscored("judge_unparseable", got.problem or "", raw=got.raw)
    return answer_claims.value, reference_claims.value


def f1_from_counts(tp: int, fp: int, fn: int) -> float:
    return tp / (tp + 0.5 * (fp + fn)) if tp + fp + fn else 0.0


class AnswerCorrectness(SampleMetric):
    name = "answer_correctness"
    requires = ("question", "answer", "ground_truth")
    roles = frozenset({"judge", "verifier", "embedder"})
    description = "weighted claim-level F1 against the reference plus answer similarity"

    def compute(self, sample, ctx, lang):
        claims = yield from answer_and_reference_claims(sample, lang, ctx)
        if isinstance(claims, Score):
            return claims
        a, g = claims
        if not a and not g:
            return Score.unscored("no_claims", "neither the answer nor the reference makes a claim")
        in_reference, in_answer, vectors = yield from parallel(
            support_matrix([sample.ground_truth], a, lang, ctx),
            support_matrix([sample.answer], g, lang, ctx),
            embed_texts([sample.answer, sample.ground_truth]))
        for got in (in_reference, in_answer):
            if isinstance(got, str):
                return Score.unscored("judge_unparseable", got)
        tp = [c for c, v in zip(a, in_reference[0]) if v.supported]
        fp = [c for c, v in zip(a, in_reference[0]) if not v.supported]
        fn = [c for c, v in zip(g, in_answer[0]) if not v.supported]
        f1 = f1_from_counts(len(tp), len(fp), len(fn))
        similarity = max(0.0, float(np.dot(vectors[0], vectors[1])))
        w_f1, w_sim = ctx.answer_correctness_weights
        value = (w_f1 * f1 + w_sim * similarity) / (w_f1 + w_sim)
        return Score(value, explanation=f"F1 {f1:.3f} (TP {len(tp)}, FP {len(fp)}, FN {len(fn)}), "
                                        f"similarity {similarity:.3f}",
                     metadata={"tp": tp, "fp": fp, "fn": fn, "f1": f1, "similarity": similarity})


# --- rubrics --------------------------------------------------------------------------------------
def _rubric_text(rubric: dict[Any, str]) -> str:
    return "\n".join(f"score{int(k)}_description: {v}" for k, v in sorted(rubric.items(), key=lambda kv: int(kv[0])))


class RubricsScore(SampleMetric):
    name = "rubrics_score"
    requires = ("question", "answer")
    roles = frozenset({"judge"})
    description = "1-5 score against a rubric (with the reference when the sample has one)"

    def compute(self, sample, ctx, lang):
        rubrics = ctx.rubrics or DEFAULT_RUBRICS
        kind = "with_reference" if sample.ground_truth else "reference_free"
        rubric = rubrics.get(kind) or DEFAULT_RUBRICS[kind]
        reference_block = (f"Reference: {sample.ground_truth}\n" if lang == "en" else f"参考答案：{sample.ground_truth}\n") \
            if sample.ground_truth else ""
        values = {"rubric": _rubric_text(rubric), "question": sample.question, "answer": sample.answer,
                  "reference_block": reference_block}
        if ctx.verdicts == "options":
            options = ("1", "2", "3", "4", "5")
            probs = yield ScoreOptions(prompt=RUBRIC_OPTION.render(lang, **values), options=options)
            best = max(options, key=lambda o: probs[o])
            expected = sum(int(o) * probs[o] for o in options)
            return Score(float(best), explanation=f"most likely score {best} (expected {expected:.2f})",
                         metadata={"rubric": kind, "probabilities": probs, "expected": expected})
        got = yield from ask_json(JsonAsk(RUBRIC, lang, values), ctx)
        if got.value is None:
            return Score.unscored("judge_unparseable", got.problem or "", raw=got.raw)
        return Score(float(got.value["score"]), explanation=got.value.get("feedback", ""),
                     metadata={"rubric": kind})


# --- noise sensitivity ----------------------------------------------------------------------------
class NoiseSensitivityRelevant(SampleMetric):
    name = "noise_sensitivity_relevant"
    requires = ("question", "answer", "contexts", "ground_truth")
    roles = frozenset({"judge", "verifier"})
    description = ("share of the answer's claims that are wrong (not in the reference) yet supported by a "
                   "relevant retrieved chunk")
    chunk_kind: ClassVar[str] = "relevant"

    def compute(self, sample, ctx, lang):
        claims = yield from answer_and_reference_claims(sample, lang, ctx)
        if isinstance(claims, Score):
            return claims
        a, g = claims
        if not a:
            return Score.unscored("no_claims", "the answer makes no factual claim")
        chunks = list(sample.contexts)
        correct, chunk_ref, chunk_ans = yield from parallel(
            support_matrix([sample.ground_truth], a, lang, ctx),
            support_matrix(chunks, g, lang, ctx),  # chunk -> reference claims
            support_matrix(chunks, a, lang, ctx))  # chunk -> answer claims
        for got in (correct, chunk_ref, chunk_ans):
            if isinstance(got, str):
                return Score.unscored("judge_unparseable", got)
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


class NoiseSensitivityIrrelevant(NoiseSensitivityRelevant):
    name = "noise_sensitivity_irrelevant"
    description = ("share of the answer's claims that are wrong yet supported only by irrelevant retrieved "
                   "chunks")
    chunk_kind = "irrelevant"


METRICS = [Faithfulness, SentenceFaithfulness, HallucinationRate, AnswerRelevancy, ContextRelevance, ContextRelevanceEmbedding,
           ContextPrecision, ContextUtilization, ContextRecall, ContextEntityRecall, AnswerSimilarity,
           AnswerCorrectness, RubricsScore, NoiseSensitivityRelevant, NoiseSensitivityIrrelevant]
