"""Settings every metric can read (the ``ctx`` the engine passes to ``Metric.score``); what one metric
alone reads is that metric's own ``Options`` (offline_eval.metrics.base.Metric)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from offline_eval.data.schema import Sample
from offline_eval.runtime.registry import backend_spec
from offline_eval.text import detect_language


@dataclass
class EvalSettings:
    language: str | None = None  # force the prompt language ("en"/"zh"); else per sample
    verifier: str = "judge"  # who checks claims against contexts: "hhem" or "judge"
    verdicts: str = "options"  # judge verdicts: "options" (P(Yes) by log-prob) or "generate" (JSON)
    support_threshold: float = 0.5  # a claim counts as supported at P >= this (Ragas rounds HHEM at 0.5)
    # "probability": shares of claims are expected shares, the mean P(supported), so a dataset never
    # collapses to 0 or 1; "threshold": the share of verdicts at P >= support_threshold (Ragas)
    verdict_score: str = "probability"
    # which statements of an answer are verified: "auto" checks an answer of at most
    # short_answer_sentences sentences whole and a longer one sentence by sentence; "llm": the judge's
    # claims (Ragas); "sentences": always the answer's sentences
    claims: str = "auto"
    short_answer_sentences: int = 2
    # judge option verdicts read the contexts in windows of whole sentences of at most this many words
    # (Chinese: characters), and a statement is supported when its best window supports it; 0: all
    # contexts at once
    context_window: int = 100
    windows_per_claim: int = 4  # the windows sharing most words with a statement are judged; 0: all
    # an answer checked whole of at most this many words is judged as an answer to the question: a
    # fragment like "Tampa, Florida" states nothing on its own (a full sentence is judged on its own:
    # on BEGIN, reading dialogue replies as answers to the user's message cost 0.12 AUC); 0: never
    fragment_words: int = 4
    # option verdicts: how much of the P(Yes) a premise gets for an empty statement is taken out of
    # every verdict against it (contextual calibration, judging.corrected); 0: none, 1: all of it
    baseline_weight: float = 0.5
    # option verdicts: a passage whose P(Yes) for an absurd statement is above this agrees with anything
    # (an instruction to the grader planted in it) and is not evidence for any statement (judging.
    # ABSURD_STATEMENT, issue #33); 1: never refused
    credulity_limit: float = 0.5
    statements_per_call: int = 8  # claims verified per JSON call, so verdict lists are never cut off
    max_tokens: int = 768
    aggregate_weights: dict[str, float] = field(default_factory=dict)  # empty: equal weights
    keypoint_max: int = 14

    # option name -> field, where the flag's name is shorter (--weights)
    ALIASES: ClassVar[dict[str, str]] = {"weights": "aggregate_weights"}

    @classmethod
    def option_names(cls) -> list[str]:
        """The names a flag, a TOML key or an API keyword gives a setting by (``verifier`` is chosen by
        the profile, not set)."""
        return sorted(({f.name for f in fields(cls)} - {"verifier"} - set(cls.ALIASES.values()))
                      | set(cls.ALIASES))

    @classmethod
    def from_options(cls, verifier: str = "judge", **options: Any) -> "EvalSettings":
        """Settings from options named as :meth:`option_names` (``None`` keeps a default), as the CLI's
        flags and the Python API's keywords give them. An unknown name raises TypeError listing the
        known ones."""
        names = {f.name for f in fields(cls)} - {"verifier"}
        settings = cls(verifier=verifier)
        unknown = sorted(k for k in options if cls.ALIASES.get(k, k) not in names)
        if unknown:
            raise TypeError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(cls.option_names())}")
        for key, value in options.items():
            if value is None:
                continue
            key = cls.ALIASES.get(key, key)
            if key == "aggregate_weights":
                value = dict(value)
            setattr(settings, key, value)
        return settings

    def language_for(self, sample: Sample) -> str:
        lang = self.language or sample.language
        if lang:
            lang = lang.lower()
            return "zh" if lang.startswith("zh") or lang in ("chinese", "cn") else "en"
        return detect_language(" ".join(filter(None, (sample.question, sample.answer, sample.ground_truth))))

    @property
    def claims_checked_by_classifier(self) -> bool:
        """Whether ``verifier`` checks each claim against its premise with a classifier of its own (one
        probability per pair, HHEM) rather than by asking the judge (what its declaration says)."""
        return backend_spec("verifier", self.verifier).classifies_claims

    def fingerprint(self) -> dict[str, Any]:
        return asdict(self)
