"""The question of a turn in a conversation, as metrics read it.

A follow-up ("and when was he born?") means nothing on its own: claims extracted from its answer keep
unresolved pronouns, questions regenerated from the answer cannot match it, a chunk cannot be judged
useful for it. So a metric that reads the question of a sample with a history gets, by
``EvalSettings.history``:

* ``tail``: the question with the latest turns before it (at most ``history_words`` words), which every
  prompt shows just before the question (:class:`~offline_eval.prompts.base.QuestionInConversation`);
* ``rewrite``: the judge's rewrite of the question to stand alone, asked once per sample (the request is
  the same for every metric, so the engine computes it once) and read by embeddings too; an answer that
  cannot be read keeps the question as it was;
* ``both``: the rewrite, with the turns before it; ``none``: the question alone.

Samples without a history, and metrics that do not read the question, are untouched.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Generator

from offline_eval.data.schema import Sample, Turn
from offline_eval.judging.asking import ASK_STAGES, JsonAsk, UnreadableAnswer, ask_json
from offline_eval.judging.settings import EvalSettings
from offline_eval.prompts.base import QuestionInConversation
from offline_eval.prompts.ragas import STANDALONE_QUESTION
from offline_eval.text import count_units

ELLIPSIS = "…"


def recent_turns(turns: list[Turn], budget: int, language: str) -> list[Turn]:
    """The latest turns whose words (Chinese: characters) add up to at most ``budget``: whole turns
    from the last back, then the end of the turn that would cross the budget, marked cut."""
    kept: list[Turn] = []
    left = budget
    for turn in reversed(turns):
        size = count_units(turn.content, language)
        if size <= left:
            kept.append(turn)
            left -= size
            continue
        if left > 0:
            kept.append(Turn(turn.role, ELLIPSIS + _last_units(turn.content, left, language)))
        break
    return kept[::-1]


def _last_units(text: str, n: int, language: str) -> str:
    return text[-n:] if language == "zh" else " ".join(text.split()[-n:])


def most_steps(settings: EvalSettings) -> int:
    """The most engine stages :func:`in_conversation` adds before a metric's own."""
    return ASK_STAGES if settings.history in ("rewrite", "both") else 0


def in_conversation(sample: Sample, settings: EvalSettings,
                    language: str) -> Generator[Any, Any, Sample]:
    """``sample`` with its question as a metric reads it in its conversation (see the module
    docstring); the sample itself when it has no history or the setting is ``none``."""
    mode = settings.history
    history = recent_turns(sample.history, settings.history_words, language) if mode != "none" else []
    if not history or not sample.question:
        return sample
        yield  # pragma: no cover  (a generator: the metric's first stage is unchanged)
    question = sample.question
    if mode in ("rewrite", "both"):
        question = yield from standalone_question(question, history, language, settings)
    if mode in ("tail", "both"):
        question = QuestionInConversation(question, history)
    return dataclasses.replace(sample, question=question)


def standalone_question(question: str, history: list[Turn], language: str,
                        settings: EvalSettings) -> Generator[Any, Any, str]:
    """The judge's rewrite of ``question`` to stand alone after ``history``; ``question`` when the
    judge's answer cannot be read or is empty."""
    try:
        answer = yield from ask_json(JsonAsk(STANDALONE_QUESTION, language,
                                             {"question": QuestionInConversation(question, history)}), settings)
    except UnreadableAnswer:
        return question
    return str(answer.value.get("question") or "").strip() or question
