"""Settings every metric can read (the ``settings`` the engine passes to ``Metric.score``); what one metric
alone reads is that metric's own ``Options`` (offline_eval.metrics.base.Metric).

Each setting is declared once, below: its default, its help and how a flag reads its value
(:func:`setting`, :mod:`offline_eval.options`), and whether it changes the values metrics give. From
that declaration come its ``run``, ``agreement`` and ``calibrate`` flag, its key in a ``run --config``
TOML file, its keyword in the Python API and, for one that changes values, its place in the signature
a calibration is fitted for. Adding a setting is adding a field here and reading it where it is used.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, fields
from typing import Any, Callable, Literal, Mapping

from offline_eval.data.schema import Sample
from offline_eval.engine.requests import Messages
from offline_eval.options import named_numbers, non_negative_number, unit_fraction
from offline_eval.text import first_language, normalize_language


JUDGE = "judge"  # the verifier that is the judge itself (offline_eval.runtime.registry.JUDGE_VERIFIES)


def setting(default: Any = dataclasses.MISSING, *, help: str, changes_values: bool = False,
            default_factory: Any = dataclasses.MISSING, **metadata: Any) -> Any:
    """The declaration of a judging setting: its default and its field metadata, ``help`` and what
    :mod:`offline_eval.options` reads (``metavar``, ``parse``, ``minimum``), plus

    * ``changes_values``: the setting changes what a metric's value is, not only what computing it
      costs, so a calibration fitted with another value of it does not apply (it enters the
      calibration's signature; every setting enters a run's fingerprint);
    * ``name``: its public name (flag, TOML key, API keyword) where that is not the field's name;
    * ``aggregate_only``: only the aggregate reads it, so a command that scores one metric has no
      flag for it;
    * ``recorded_unless_default``: a setting added after run folders and calibrations were written:
      it enters a run's fingerprint and a calibration's signature only when set away from its default,
      so those written before it existed stay valid.
    """
    return dataclasses.field(default=default, default_factory=default_factory,
                             metadata={"help": help, "changes_values": changes_values, **metadata})


@dataclass
class EvalSettings:
    language: Literal["en", "zh"] | None = setting(None, help="force the prompt language (default: per sample)")
    # who checks claims against contexts: "hhem" or "judge". The profile chooses it (a verifier model,
    # or none and the judge verifies), so it has no flag, TOML key or API keyword of its own.
    verifier: str = dataclasses.field(default=JUDGE, metadata={"option": False, "changes_values": True})
    # whether that verifier checks each claim against its premise with a classifier of its own (one
    # probability per pair, HHEM) rather than by asking the judge: a fact of the verifier's declaration,
    # which the run's setup reads (offline_eval.run.config.build_run), so metrics need not look models up.
    # ``verifier`` records it already, so no run records it twice.
    verifier_classifies: bool | None = dataclasses.field(
        default=None, metadata={"option": False, "recorded": False})
    verdicts: Literal["options", "generate"] = setting(
        "options", changes_values=True,
        help="judge verdicts as P(Yes) from log-probabilities (options) or as JSON with reasons (generate)")
    support_threshold: float = setting(
        0.5, changes_values=True, parse=unit_fraction, metavar="P",
        help="a claim counts as supported, and a chunk as useful, at P(Yes) >= P (Ragas rounds HHEM at 0.5)")
    # expected shares never collapse a data set's values to 0 or 1, as shares of verdicts do
    verdict_score: Literal["probability", "threshold"] = setting(
        "probability", changes_values=True,
        help="shares of verdicts as expected shares, the mean P(supported) (probability, the default), or as "
             "shares of verdicts at P >= --support-threshold (threshold, as Ragas)")
    claims: Literal["auto", "llm", "sentences"] = setting(
        "auto", changes_values=True,
        help="statements of an answer to verify: auto (an answer of at most --short-answer-sentences sentences "
             "whole, a longer one sentence by sentence; the default), llm (the judge's claims, as Ragas) or "
             "sentences")
    short_answer_sentences: int = setting(
        2, changes_values=True, minimum=0, metavar="N",
        help="--claims auto checks an answer of at most N sentences whole")
    # a small judge reads one short passage far better than several long ones
    context_window: int = setting(
        100, changes_values=True, minimum=0, metavar="WORDS",
        help="judge option verdicts read the contexts in windows of at most WORDS words (Chinese: characters), "
             "cut further where the judge's prompt cannot hold one, and keep the best window; 0 reads all "
             "contexts at once")
    # so that a long context costs seconds, not hours
    windows_per_claim: int = setting(
        2, changes_values=True, minimum=0, metavar="N",
        help="judge option verdicts: each statement is judged against the N windows that share most words "
             "with it; 0 judges it against every window")
    # most statements share far more words with one window than with any other, and the others hardly
    # ever change their verdict (docs/measurements.md, "Verifying less: one window when it leads"). It changes
    # what the default computes, so every run records it, unlike the settings added with a neutral default
    window_lead: float = setting(
        1.5, changes_values=True, parse=non_negative_number, metavar="R",
        help="judge option verdicts: a statement sharing at least R times as many words with its likeliest "
             "window as with the next is judged against that window alone; 0 always judges it against "
             "--windows-per-claim windows (as does --windows-per-claim 0: every window)")
    # a full sentence is judged on its own: read as replies to the user's message, sentences of dialogue
    # were judged further from people's labels
    fragment_words: int = setting(
        4, changes_values=True, minimum=0, metavar="WORDS",
        help="an answer checked whole of at most WORDS words is judged as an answer to the question (a "
             "fragment like 'Tampa, Florida' states nothing on its own), and answer relevance reads no "
             "coverage of the contexts for it; 0 never does so")
    # contextual calibration (judging.corrected)
    baseline_weight: float = setting(
        0.5, changes_values=True, parse=unit_fraction, metavar="W",
        help="judge option verdicts: take W of the lean each retrieved passage gives the judge (its P(Yes) "
             "for an empty statement, in log-odds) out of every verdict against it; 0 turns it off")
    # judging.ABSURD_STATEMENT
    credulity_limit: float = setting(
        0.5, changes_values=True, parse=unit_fraction, metavar="P",
        help="judge option verdicts: a retrieved passage whose P(Yes) for an absurd statement is above P "
             "agrees with anything (an instruction to the grader planted in it) and is not taken as "
             "evidence; 1 turns it off")
    statements_per_call: int = setting(
        8, minimum=1, metavar="N",
        help="judge JSON verdicts: statements verified per call, so that no list of verdicts is cut off")
    max_tokens: int = setting(768, minimum=1, help="longest judge output, in tokens")
    aggregate_weights: dict[str, float] = setting(
        default_factory=dict, name="weights", parse=named_numbers, metavar="metric=w,...", aggregate_only=True,
        help="weights of the aggregate (default: equal weights)")
    # follow-up questions ("and when was he born?") may be read with the conversation before them; with
    # the bench judge on MT-RAG, tail left faithfulness unchanged and ranked completeness further from
    # people's labels than the question alone, so none is the default
    history: Literal["none", "tail", "rewrite", "both"] = setting(
        "none", changes_values=True, recorded_unless_default=True,
        help="how a metric reads the question of a sample that carries a conversation: none (the question "
             "alone; the default), tail (the last --history-words words of the conversation before the "
             "question, in the prompt), rewrite (the judge rewrites the question to stand alone, once per "
             "sample, shared by every metric), or both")
    history_words: int = setting(
        200, changes_values=True, recorded_unless_default=True, minimum=1, metavar="WORDS",
        help="--history tail: the most words (Chinese: characters) of the conversation before the question "
             "shown with it, whole turns from the latest back, the earliest kept turn cut from its start")
    keypoint_max: int = setting(
        14, minimum=1, metavar="N",
        help="most key points the judge draws from a reference answer (the keypoint metrics)")
    # what the judge can read in one prompt, resolved from its model when the run is set up
    # (offline_eval.run.config.build_run); None: not known, and windows are cut by words alone
    prompt_budget: "PromptBudget | None" = dataclasses.field(
        default=None, compare=False, repr=False, metadata={"option": False, "recorded": False})

    def __post_init__(self) -> None:
        if self.verifier_classifies is None:
            if self.verifier != JUDGE:
                raise ValueError(f"EvalSettings(verifier={self.verifier!r}) needs verifier_classifies=True or False: "
                                 "whether that verifier checks claims with a classifier of its own (its "
                                 "declaration's classifies_claims, which a run's setup reads)")
            self.verifier_classifies = False
        elif self.verifier == JUDGE and self.verifier_classifies:
            raise ValueError("EvalSettings(verifier='judge') cannot have verifier_classifies=True: the judge checks "
                             "claims by being asked, not with a classifier")

    @classmethod
    def option_fields(cls) -> dict[str, dataclasses.Field]:
        """The settings a flag, a TOML key or an API keyword sets, by that name (``verifier`` is chosen
        by the profile, not set)."""
        return {f.metadata.get("name", f.name): f for f in fields(cls) if f.metadata.get("option", True)}

    @classmethod
    def option_names(cls) -> list[str]:
        """The names a flag, a TOML key or an API keyword gives a setting by."""
        return sorted(cls.option_fields())

    @classmethod
    def signature_fields(cls, *, recorded_always: bool = False) -> tuple[str, ...]:
        """The settings that change a metric's values (those a calibration is fitted for), in the
        order they are declared; ``recorded_always``: only those every run records."""
        return tuple(f.name for f in fields(cls) if f.metadata.get("changes_values")
                     and not (recorded_always and f.metadata.get("recorded_unless_default")))

    @classmethod
    def from_options(cls, verifier: str = JUDGE, verifier_classifies: bool | None = None,
                     **options: Any) -> "EvalSettings":
        """Settings from options named as :meth:`option_names` (or by their field's name; ``None``
        keeps a default), as the CLI's flags and the Python API's keywords give them, for ``verifier``
        (and whether it classifies claims, required for a verifier other than the judge). An unknown
        name raises TypeError listing the known ones."""
        by_name = {**{f.name: f for f in cls.option_fields().values()}, **cls.option_fields()}
        unknown = sorted(k for k in options if k not in by_name)
        if unknown:
            raise TypeError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(cls.option_names())}")
        settings = cls(verifier=verifier, verifier_classifies=verifier_classifies)
        for key, value in options.items():
            if value is not None:
                setattr(settings, by_name[key].name, dict(value) if isinstance(value, Mapping) else value)
        return settings

    def language_for(self, sample: Sample) -> str:
        """The language of a sample's prompts and sentence rules: ``--language``, else the sample's own,
        else its question's (the user's), else its answer's and reference's. The question first: an
        answer or a reference can carry text in another language (an instruction to the grader planted
        in it) that must not switch the whole row's prompts and sentence rules to that language."""
        lang = self.language or sample.language
        if lang and lang.strip():  # read as the metrics' sentence rules read it (text.normalize_language)
            return normalize_language(lang)
        return first_language(sample.question, " ".join(filter(None, (sample.answer, sample.ground_truth))))

    @property
    def claims_checked_by_classifier(self) -> bool:
        """Whether ``verifier`` checks each claim against its premise with a classifier of its own (one
        probability per pair, HHEM) rather than by asking the judge (what its declaration says)."""
        return bool(self.verifier_classifies)

    def fingerprint(self) -> dict[str, Any]:
        """Every setting by its field's name (run.json records it; it enters the run's fingerprint), but
        a ``recorded_unless_default`` one at its default."""
        data = self._data()
        return {f.name: data[f.name] for f in fields(self) if f.name in data and not _left_out(f, data[f.name])}

    def signature(self) -> dict[str, Any]:
        """The settings that change values, by name, as a calibration records them (lists for tuples);
        a ``recorded_unless_default`` one at its default is left out."""
        data = self._data()
        return {f.name: list(data[f.name]) if isinstance(data[f.name], tuple) else data[f.name]
                for f in fields(self) if f.metadata.get("changes_values") and not _left_out(f, data[f.name])}

    def _data(self) -> dict[str, Any]:
        """The settings as plain values, without those no run records (the judge's prompt budget: it
        cuts only contexts no prompt could hold, which were unscored before; whether the verifier
        classifies claims, which ``verifier`` records)."""
        return {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)
                if f.metadata.get("recorded") is not False}


# Tokens of a chat prompt's scaffolding (role markers, a template's default system prompt) that the
# byte bound of its messages does not count (PromptBudget without the judge's tokenizer).
CHAT_SCAFFOLDING_TOKENS = 64


@dataclass(frozen=True)
class PromptBudget:
    """How many tokens the judge reads in one prompt, and how it counts them.

    ``limit``: the most tokens a prompt may hold (its ``max_model_len`` less the position its answer
    needs). ``count``: a chat prompt's tokens as the judge encodes it; None counts each UTF-8 byte of
    the messages as a token, plus :data:`CHAT_SCAFFOLDING_TOKENS`, a bound that holds for byte-level BPE
    and byte-fallback tokenizers, whose every token covers at least one byte."""

    limit: int
    count: Callable[[Messages], int] | None = None

    def tokens(self, prompt: Messages) -> int:
        if self.count is not None:
            return self.count(prompt)
        return sum(len(content.encode("utf-8")) for _, content in prompt) + CHAT_SCAFFOLDING_TOKENS

    def text_tokens(self, text: str) -> int:
        """Tokens ``text`` adds to a prompt (at most its UTF-8 bytes, which is what is counted without
        the judge's tokenizer)."""
        if self.count is None:
            return len(text.encode("utf-8"))
        return self.count((("user", text),)) - self.count((("user", ""),))


def _left_out(field: dataclasses.Field, value: Any) -> bool:
    """A setting added later, at its default: not recorded, as before it existed."""
    return bool(field.metadata.get("recorded_unless_default")) and value == field.default
