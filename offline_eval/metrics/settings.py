"""Settings every metric can read (the ``ctx`` the engine passes to ``Metric.score``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from offline_eval.data.schema import Sample
from offline_eval.text import detect_language


@dataclass
class EvalSettings:
    language: str | None = None  # force the prompt language ("en"/"zh"); else per sample
    verifier: str = "judge"  # who checks claims against contexts: "hhem" or "judge"
    verdicts: str = "options"  # judge verdicts: "options" (P(Yes) by log-prob) or "generate" (JSON)
    support_threshold: float = 0.5  # a claim counts as supported at P >= this (Ragas rounds HHEM at 0.5)
    answer_relevancy_n: int = 3
    statements_per_call: int = 8  # claims verified per JSON call, so verdict lists are never cut off
    max_tokens: int = 768
    answer_correctness_weights: tuple[float, float] = (0.75, 0.25)  # (F1, similarity)
    aggregate_weights: dict[str, float] = field(default_factory=dict)  # empty: equal weights
    rubrics: dict[str, dict[int, str]] | None = None  # user rubrics; None: the defaults
    keypoint_max: int = 14

    def language_for(self, sample: Sample) -> str:
        lang = self.language or sample.language
        if lang:
            lang = lang.lower()
            return "zh" if lang.startswith("zh") or lang in ("chinese", "cn") else "en"
        return detect_language(" ".join(filter(None, (sample.question, sample.answer, sample.ground_truth))))

    def fingerprint(self) -> dict[str, Any]:
        return asdict(self)
