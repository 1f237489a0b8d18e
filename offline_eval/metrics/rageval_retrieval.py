"""Model-free RAGEval metrics: retrieval recall, retrieval precision, EIR and ROUGE-L.

The four functions reproduce the RAGEval reference implementation (OpenBMB/RAGEval,
``rageval/evaluation/metrics/rag_metrics/``) value for value, including its edge cases:

* ``retrieval_recall``: a reference passage is recalled when every one of its sentences is a
  substring of some retrieved chunk; recall = recalled / |references|; no references -> 0.0.
  (A reference with no sentence at all counts as recalled, as in the reference.)
* ``retrieval_precision``: a retrieved chunk is relevant when every one of its sentences is a
  substring of some reference passage; precision = relevant / |retrieved|; nothing retrieved -> 0.0.
  The reference scores only the first ``top_k=5`` chunks; pass ``top_k=None`` to score all.
  RAGEval's *published* precision values (and the parity fixture) come from an earlier, buggy
  revision that is available as ``variant="rageval_v1"``; see :func:`retrieval_precision`.
* ``eir``: a leading ``(...)`` / ``（...）`` metadata prefix is removed from each chunk, the chunks
  are joined with single spaces, and EIR = Σ units of reference sentences that occur verbatim in
  that joined text / units of the joined text (Chinese: characters, English: whitespace words).
  Each occurring sentence counts once per occurrence in the references; no retrieved chunks, no
  references, nothing matched or an empty joined text -> 0.0.
* ``rouge_l``: ROUGE-L F-measure = F of the plain LCS over whitespace tokens (jieba tokens for
  Chinese), with ``rouge_chinese``'s preprocessing and its ``+1e-8`` denominator; an empty side
  -> 0.0. NB: the reference calls pltrdy's ``rouge`` for English, yet its published values (the
  parity fixture, 350/350) are exactly this algorithm, not pltrdy's summary-level union-LCS over
  sentences cut at ``'.'`` (which scores e.g. 0.0417 instead of 0.0125 on the fixture's first
  item). The environment that produced them evidently resolved ``rouge`` to rouge_chinese's copy
  (that project ships a top-level ``rouge`` package); the values, not the import, are matched.

The Metric classes wrap them for the engine. Where the reference yields a number only because a
division has nothing to divide (no references, nothing retrieved, an empty text), the metric is
*unscored* with a reason instead; every other case returns the reference's number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from offline_eval import reasons
from offline_eval.data.schema import Sample
from offline_eval.metrics import register_metric
from offline_eval.metrics.base import Metric, Score
from offline_eval.text import (
    count_units,
    detect_language,
    normalize_language,
    rouge_sentences,
    split_sentences,
)

__all__ = [
    "retrieval_recall",
    "retrieval_precision",
    "eir",
    "rouge_l",
    "strip_metadata_prefix",
    "PRECISION_TOP_K",
    "PrecisionVariant",
    "RetrievalRecall",
    "RetrievalPrecision",
    "EIR",
    "RougeL",
    "METRICS",
]

PRECISION_TOP_K = 5  # the reference's Precision(topk=5)


# --------------------------------------------------------------------------------------------
# Pure functions (reference parity)
# --------------------------------------------------------------------------------------------

def _all_sentences_found(text: str, haystacks: list[str], language: str) -> bool:
    """True when every sentence of ``text`` is a substring of at least one of ``haystacks``.

    Mirrors the reference's ``exist_match``: a text without sentences is vacuously found.
    """
    for sentence in split_sentences(text, language):
        if not any(sentence in hay for hay in haystacks):
            return False
    return True


def retrieval_recall(references: list[str], retrieved: list[str], language: str) -> float:
    """Share of reference passages whose every sentence occurs verbatim in some retrieved chunk.

    Returns 0.0 when there are no references (as the reference does).
    """
    if not references:
        return 0.0
    lang = normalize_language(language, " ".join(references))
    chunks = list(retrieved or [])
    recalled = sum(_all_sentences_found(ref, chunks, lang) for ref in references)
    return recalled / len(references)


PrecisionVariant = Literal["chunk", "rageval_v1"]


def retrieval_precision(references: list[str], retrieved: list[str], language: str,
                        top_k: int | None = PRECISION_TOP_K,
                        variant: PrecisionVariant = "chunk") -> float:
    """Share of retrieved chunks (the first ``top_k``) whose every sentence occurs in a reference.

    Returns 0.0 when nothing is retrieved (as the reference does). ``top_k=None`` scores all
    chunks; the default 5 is the reference's ``Precision(topk=5)``.

    ``variant="chunk"`` (default) is the definition above: the reference's current code (commit
    c321e81, ``exist_match(retrieve, ground_truths)``), except that a leading "(...)" metadata
    header is stripped from each chunk first, as for EIR. ``variant="rageval_v1"`` reproduces the
    earlier code (commit 493e22a) that produced RAGEval's published numbers and the parity
    fixture: it calls ``exist_match(ground_truths, retrieves)`` once per chunk, ignoring the
    chunk, so the value is 1.0 when every sentence of the (space-joined) references occurs in some
    retrieved chunk and 0.0 otherwise -- an all-or-nothing recall, not a precision; with no
    references it is 1.0 (vacuously).
    """
    chunks = list(retrieved or [])
    if top_k is not None:
        chunks = chunks[:top_k]
    if not chunks:
        return 0.0
    refs = list(references or [])
    if variant == "rageval_v1":
        lang = normalize_language(language, " ".join(refs) or " ".join(chunks))
        return 1.0 if _all_sentences_found(" ".join(refs), chunks, lang) else 0.0
    if variant != "chunk":
        raise ValueError(f"unknown retrieval_precision variant {variant!r}")
    lang = normalize_language(language, " ".join(chunks))
    # A leading "(Company Type: ...)" metadata header is not retrieved content: like EIR, judge the
    # chunk without it (the reference's current code keeps it, so no chunk with a header can count).
    relevant = sum(_all_sentences_found(strip_metadata_prefix(chunk), refs, lang) for chunk in chunks)
    return relevant / len(chunks)


def strip_metadata_prefix(chunk: str) -> str:
    """Drop a leading ``(...)`` or ``（...）`` metadata prefix, as the reference EIR does.

    Only a chunk whose very first character is the opening bracket is touched; everything up to and
    including the first matching closing bracket of the same width is removed. Without a closing
    bracket the chunk is kept whole. Nothing else (e.g. whitespace) is stripped.
    """
    if not chunk:
        return chunk
    if chunk[0] == "（":
        end = chunk.find("）")
        return chunk[end + 1:] if end != -1 else chunk
    if chunk[0] == "(":
        end = chunk.find(")")
        return chunk[end + 1:] if end != -1 else chunk
    return chunk


def _eir_parts(references: list[str], retrieved: list[str], language: str) -> tuple[int, int]:
    """(matched units, total units) of the EIR; both 0 when either list is empty."""
    if not retrieved or not references:
        return 0, 0
    combined = " ".join(strip_metadata_prefix(chunk) for chunk in retrieved)
    lang = normalize_language(language, combined)
    matched = 0
    for ref in references:
        for sentence in split_sentences(ref, lang):
            if sentence in combined:
                matched += count_units(sentence, lang)
    return matched, count_units(combined, lang)


def eir(references: list[str], retrieved: list[str], language: str) -> float:
    """Effective information rate: units of reference sentences found verbatim / units retrieved.

    Returns 0.0 when there are no references, nothing retrieved, no match or no retrieved units.
    """
    matched, total = _eir_parts(list(references or []), list(retrieved or []), language)
    if matched == 0 or total == 0:
        return 0.0
    return matched / total


def _lcs_length(x: list[str], y: list[str]) -> int:
    """Length of the longest common subsequence of two token lists (O(len(x)·len(y)) time)."""
    if len(y) > len(x):
        x, y = y, x
    n = len(y)
    prev = [0] * (n + 1)
    for x_tok in x:
        row = [0] * (n + 1)
        for j in range(1, n + 1):
            if x_tok == y[j - 1]:
                row[j] = prev[j - 1] + 1
            else:
                up, left = prev[j], row[j - 1]
                row[j] = up if up > left else left
        prev = row
    return prev[n]


def _rouge_l_f(hyp: list[list[str]], ref: list[list[str]]) -> float:
    """rouge_chinese ``rouge_l_summary_level``: F of the plain LCS over the whole token sequences.

    The ``+ 1e-8`` in the denominator and the operation order are the original's, so values agree
    to the last bit.
    """
    ref_tokens = [w for sent in ref for w in sent]
    hyp_tokens = [w for sent in hyp for w in sent]
    m, n = len(ref_tokens), len(hyp_tokens)
    llcs = _lcs_length(ref_tokens, hyp_tokens)
    r_lcs = llcs / m
    p_lcs = llcs / n
    return 2.0 * ((p_lcs * r_lcs) / (p_lcs + r_lcs + 1e-8))


def rouge_l(prediction: str, reference: str, language: str) -> float:
    """ROUGE-L F-measure of ``prediction`` against ``reference`` exactly as RAGEval computes it.

    Tokens: jieba words for Chinese, whitespace tokens (punctuation attached) for English; the
    score is the F of the plain LCS over the whole token sequences (see :func:`rouge_sentences`).
    Returns 0.0 when either text is empty or whitespace-only (the reference returns 0.0 there for
    Chinese and for empty English strings; for whitespace-only English it raises).
    """
    prediction = prediction or ""
    reference = reference or ""
    lang = normalize_language(language, prediction + reference)
    if not prediction or not reference:
        return 0.0
    hyp = rouge_sentences(prediction, lang)
    ref = rouge_sentences(reference, lang)
    if not hyp or not ref:
        return 0.0
    return _rouge_l_f(hyp, ref)


# --------------------------------------------------------------------------------------------
# Metric classes
# --------------------------------------------------------------------------------------------

def _language(sample: Sample, *texts: str) -> str:
    """The sample's language, or the one detected from ``texts``."""
    if sample.language:
        return normalize_language(sample.language, " ".join(t for t in texts if t))
    return detect_language(" ".join(t for t in texts if t))


@register_metric
class RetrievalRecall(Metric):
    """RAGEval retrieval recall over ``contexts`` against ``reference_contexts``."""

    name: ClassVar[str] = "retrieval_recall"
    requires: ClassVar[tuple[str, ...]] = ("contexts", "reference_contexts")
    roles: ClassVar[frozenset[str]] = frozenset()
    description: ClassVar[str] = (
        "Share of reference passages whose every sentence occurs verbatim in a retrieved chunk.")

    def score(self, sample: Sample, settings: Any) -> Score:  # type: ignore[override]
        """Recall of this sample; the engine has checked the required fields."""
        refs, chunks = list(sample.reference_contexts or []), list(sample.contexts or [])
        lang = _language(sample, *refs)
        value = retrieval_recall(refs, chunks, lang)
        return Score(value=value, metadata={"language": lang, "references": len(refs),
                                            "recalled": round(value * len(refs))})


@register_metric
class RetrievalPrecision(Metric):
    """RAGEval retrieval precision of the first ``top_k`` ``contexts``."""

    name: ClassVar[str] = "retrieval_precision"
    requires: ClassVar[tuple[str, ...]] = ("contexts", "reference_contexts")
    roles: ClassVar[frozenset[str]] = frozenset()
    description: ClassVar[str] = (
        "Share of retrieved chunks whose every sentence occurs verbatim in a reference passage.")

    variant: ClassVar[PrecisionVariant] = "chunk"

    @dataclass(frozen=True)
    class Options:
        top_k: int | None = field(default=PRECISION_TOP_K, metadata={
            "help": "retrieved chunks scored, from the first (None from the API: all)", "minimum": 1})

    def config(self) -> dict[str, Any]:
        return {**super().config(), "variant": self.variant}

    def score(self, sample: Sample, settings: Any) -> Score:  # type: ignore[override]
        """Precision of this sample; the engine has checked the required fields."""
        refs, chunks = list(sample.reference_contexts or []), list(sample.contexts or [])
        lang = _language(sample, *chunks)
        top_k = self.options.top_k
        value = retrieval_precision(refs, chunks, lang, top_k=top_k, variant=self.variant)
        scored = len(chunks) if top_k is None else min(len(chunks), top_k)
        metadata: dict[str, Any] = {"language": lang, "chunks": scored}
        if self.variant == "chunk":
            metadata["relevant"] = round(value * scored)
        return Score(value=value, metadata=metadata)


@register_metric
class EIR(Metric):
    """RAGEval effective information rate of ``contexts`` against ``reference_contexts``."""

    name: ClassVar[str] = "eir"
    requires: ClassVar[tuple[str, ...]] = ("contexts", "reference_contexts")
    roles: ClassVar[frozenset[str]] = frozenset()
    description: ClassVar[str] = (
        "Words (zh: characters) of reference sentences found verbatim in the retrieved text, "
        "divided by the words of the retrieved text.")

    def score(self, sample: Sample, settings: Any) -> Score:  # type: ignore[override]
        """EIR of this sample; unscored when the retrieved text is empty (the engine has checked the fields)."""
        refs, chunks = list(sample.reference_contexts or []), list(sample.contexts or [])
        lang = _language(sample, *refs)
        matched, total = _eir_parts(refs, chunks, lang)
        if total == 0:
            return Score.unscored(reasons.EMPTY_RETRIEVED_TEXT,
                                  "the retrieved chunks hold no text once metadata is stripped")
        return Score(value=eir(refs, chunks, lang),
                     metadata={"language": lang, "matched_units": matched, "total_units": total})


@register_metric
class RougeL(Metric):
    """ROUGE-L F-measure of ``answer`` against ``ground_truth`` (RAGEval's tokenisation)."""

    name: ClassVar[str] = "rouge_l"
    requires: ClassVar[tuple[str, ...]] = ("answer", "ground_truth")
    roles: ClassVar[frozenset[str]] = frozenset()
    description: ClassVar[str] = "ROUGE-L F of the answer against the reference answer."

    def score(self, sample: Sample, settings: Any) -> Score:  # type: ignore[override]
        """ROUGE-L of this sample; unscored when a field has no tokens (the engine has checked the fields)."""
        answer, truth = sample.answer or "", sample.ground_truth or ""
        lang = _language(sample, truth, answer)
        for field_name, text in (("answer", answer), ("ground_truth", truth)):
            if not any(tok for sent in rouge_sentences(text, lang) for tok in sent):
                return Score.unscored(reasons.no_tokens(field_name), f"the {field_name} has no token to compare")
        return Score(value=rouge_l(answer, truth, lang), metadata={"language": lang})


@register_metric
class RetrievalPrecisionV1(RetrievalPrecision):
    """RAGEval's earlier precision code (commit 493e22a), kept to reproduce published numbers.

    That code ignores the chunk it loops over: 1.0 when every reference sentence occurs in some
    retrieved chunk, else 0.0. Use ``retrieval_precision`` for the documented definition.
    """

    name: ClassVar[str] = "retrieval_precision_v1"
    description: ClassVar[str] = ("RAGEval's earlier precision code (all references found -> 1.0), for "
                                  "reproducing published numbers")
    variant: ClassVar[PrecisionVariant] = "rageval_v1"
