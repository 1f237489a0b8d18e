"""The Prompt type."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from offline_eval.data.schema import Turn
from offline_eval.engine.requests import Messages, messages

SUPPORTED_LANGUAGES = ("en", "zh")

# How the conversation before a question is shown: a heading, then a line per turn.
HISTORY_HEADING = {"en": "Conversation so far:", "zh": "此前的对话："}
SPEAKERS = {"en": {"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool"},
            "zh": {"user": "用户", "assistant": "助手", "system": "系统", "tool": "工具"}}
COLON = {"en": ": ", "zh": "："}


class QuestionInConversation(str):
    """A question asked after a conversation: the text is the question; ``history`` holds the turns
    before it. Wherever a prompt shows the question, :meth:`Prompt.render` shows the conversation just
    before the line that holds it, so every prompt that reads a question reads it in its conversation."""

    history: tuple[Turn, ...]

    def __new__(cls, text: str, history: tuple[Turn, ...] | list[Turn]) -> "QuestionInConversation":
        question = super().__new__(cls, text)
        question.history = tuple(history)
        return question


def history_block(turns: tuple[Turn, ...] | list[Turn], language: str) -> str:
    """The conversation before a question as a prompt shows it, ending with a blank line."""
    speakers, colon = SPEAKERS[language], COLON[language]
    lines = [f"{speakers.get(t.role, t.role)}{colon}{t.content}" for t in turns]
    return HISTORY_HEADING[language] + "\n" + "\n".join(lines) + "\n\n"


def _with_history(template: str, values: dict[str, Any], language: str) -> tuple[str, dict[str, Any]]:
    """The template with the conversation before the line that shows the question, when the question
    carries one (:class:`QuestionInConversation`); unchanged otherwise."""
    question = values.get("question")
    if not isinstance(question, QuestionInConversation) or not question.history or "{question}" not in template:
        return template, values
    at = template.rfind("\n", 0, template.index("{question}")) + 1  # the start of the question's line
    block = history_block(question.history, language)
    if at > 0 and template[at - 2:at] != "\n\n":  # set apart from the line before it
        block = "\n" + block
    return template[:at] + "{_history}" + template[at:], {**values, "_history": block}


@dataclass(frozen=True)
class Prompt:
    name: str
    system: dict[str, str]  # language -> system message
    template: dict[str, str]  # language -> user message with {placeholders}
    schema: dict[str, Any] | None = None  # None: answered by option probabilities or free text
    examples: dict[str, list[tuple[dict[str, Any], Any]]] = field(default_factory=dict)
    example_header: dict[str, str] = field(default_factory=lambda: {
        "en": "Examples:", "zh": "示例："})
    # True: each example is a user turn and the assistant's reply before the real request (small
    # chat models otherwise tend to continue an inline example's pattern instead of answering)
    examples_as_turns: bool = False

    def language_of(self, language: str | None) -> str:
        return language if language in self.template else "en"

    @property
    def schema_json(self) -> str | None:
        return json.dumps(self.schema, sort_keys=True) if self.schema is not None else None

    def render(self, language: str | None = None, **values: Any) -> Messages:
        lang = self.language_of(language)
        template, values = _with_history(self.template[lang], values, lang)
        body = template.format(**values)
        shots = self.examples.get(lang, [])
        if shots and self.examples_as_turns:
            turns: list[tuple[str, str]] = [("system", self.system[lang])]
            for inputs, output in shots:
                turns.append(("user", self.template[lang].format(**inputs)))
                turns.append(("assistant", output if isinstance(output, str)
                              else json.dumps(output, ensure_ascii=False)))
            return messages(*turns, ("user", body))
        if shots:
            blocks = []
            for inputs, output in shots:
                example_in = self.template[lang].format(**inputs)
                example_out = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
                blocks.append(f"{example_in}\n{example_out}")
            body = f"{self.example_header[lang]}\n\n" + "\n\n".join(blocks) + "\n\n---\n\n" + body
        return messages(("system", self.system[lang]), ("user", body))
