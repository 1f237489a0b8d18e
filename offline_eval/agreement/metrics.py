"""Metric variants used to measure agreement with human labels.

``faithfulness_sentences``: faithfulness whose "claims" are the answer's sentences (pysbd for English,
。！？ for Chinese) instead of the judge's claim extraction -- one generation stage fewer, and no
claim step for a small judge to get wrong. Verification is unchanged (judge options or JSON verdicts,
or HHEM), so comparing it with ``faithfulness`` isolates the claim step.

Listed in ``METRICS`` so that ``offline_eval.metrics.METRIC_MODULES`` can take this module in.
"""

from __future__ import annotations

from offline_eval.metrics.base import Score
from offline_eval.metrics.judging import support_against_contexts
from offline_eval.metrics.ragas import Faithfulness
from offline_eval.text import split_sentences


class SentenceFaithfulness(Faithfulness):
    """Share of the answer's sentences supported by the contexts."""

    name = "faithfulness_sentences"
    description = "share of the answer's sentences supported by the retrieved contexts (no claim extraction)"

    def compute(self, sample, ctx, lang):
        claims = list(dict.fromkeys(split_sentences(sample.answer, lang)))
        if not claims:
            return Score.unscored("no_claims", "the answer has no sentence")
        verdicts = yield from support_against_contexts(sample.contexts, claims, lang, ctx)
        if isinstance(verdicts, str):
            return Score.unscored("judge_unparseable", verdicts, claims=claims)
        return self.from_verdicts(claims, verdicts)


METRICS = [SentenceFaithfulness]
