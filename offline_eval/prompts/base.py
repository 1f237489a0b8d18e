"""The Prompt type and its registry."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from offline_eval.engine.requests import Messages, messages

SUPPORTED_LANGUAGES = ("en", "zh")


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
        body = self.template[lang].format(**values)
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


_REGISTRY: dict[str, Prompt] = {}  # every prompt of the modules imported so far, by name


def register(prompt: Prompt) -> Prompt:
    _REGISTRY[prompt.name] = prompt
    return prompt
