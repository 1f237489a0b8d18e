"""A judge that answers from a script: real backend plumbing, fixed answers.

It is a genuine JudgeBackend (the engine batches, caches and routes through it exactly as through
a model), used to test metric formulas on hand-built cases and to dry-run a configuration. A script
is a list of rules; the first rule whose ``match`` substring occurs in the rendered prompt answers.

    {"generate": [{"match": "Break the answer", "response": "{\"claims\": [\"a\", \"b\"]}"}],
     "options":  [{"match": "Statement: a", "probs": {"Yes": 0.9, "No": 0.1}}],
     "default_response": "{}", "default_probs": null}

Rules may also be given in Python with a callable ``response`` taking the prompt text.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

from offline_eval.engine.requests import Generate, Messages, ScoreOptions
from offline_eval.runtime.base import Backend
from offline_eval.runtime.identity import content_fingerprint


def render_prompt(prompt: Messages) -> str:
    return "\n".join(f"{role}: {content}" for role, content in prompt)


class ScriptedJudge(Backend):
    def __init__(self, path: str | Path | None = None, *, script: dict[str, Any] | None = None,
                 batch_size: int = 8, device: str | None = None, keep_prompts: bool = True,
                 **_: Any) -> None:
        if script is None and path:
            script = json.loads(Path(path).read_text(encoding="utf-8"))
            content = content_fingerprint(path)  # a script file is identified as a model folder is
        else:
            script = script or {}
            content = json.dumps(script, sort_keys=True, default=repr)[:64]  # callables have no content
        self.generate_rules: list[dict[str, Any]] = list(script.get("generate", []))
        self.option_rules: list[dict[str, Any]] = list(script.get("options", []))
        self.default_response: str | Callable[[str], str] = script.get("default_response", "{}")
        self.default_probs: dict[str, float] | None = script.get("default_probs")
        self.set_batch_size(batch_size)
        self.identify({"main": content}, {})
        self.calls: Counter[str] = Counter()  # backend calls per kind
        self.batch_sizes: list[tuple[str, int]] = []
        self.prompts_seen: list[str] = []  # for tests; keep_prompts=False for long runs (benchmarks)
        self.keep_prompts = keep_prompts

    def _respond(self, text: str) -> str:
        for rule in self.generate_rules:
            if rule.get("match", "") in text:
                if "error" in rule:  # the backend rejects this prompt, as a real one rejects a too-long one
                    raise ValueError(rule["error"])
                response = rule["response"]
                return response(text) if callable(response) else response
        default = self.default_response
        return default(text) if callable(default) else default

    def generate(self, requests: Sequence[Generate]) -> list[tuple[str, ...]]:
        self.calls["generate"] += 1
        self.batch_sizes.append(("generate", len(requests)))
        out = []
        for request in requests:
            text = render_prompt(request.prompt)
            if self.keep_prompts:
                self.prompts_seen.append(text)
            out.append(tuple(self._respond(text) for _ in range(request.sampling.n)))
        return out

    def score_options(self, requests: Sequence[ScoreOptions]) -> list[dict[str, float]]:
        self.calls["options"] += 1
        self.batch_sizes.append(("options", len(requests)))
        out = []
        for request in requests:
            text = render_prompt(request.prompt)
            if self.keep_prompts:
                self.prompts_seen.append(text)
            probs = None
            for rule in self.option_rules:
                if rule.get("match", "") in text:
                    probs = rule["probs"]
                    probs = probs(text) if callable(probs) else probs
                    break
            if probs is None:
                probs = self.default_probs or {o: 1.0 / len(request.options) for o in request.options}
            total = sum(probs.get(o, 0.0) for o in request.options) or 1.0
            out.append({o: probs.get(o, 0.0) / total for o in request.options})
        return out


class ScriptedVerifier(Backend):
    """A premise/hypothesis classifier from a script: P = the first rule whose substrings match."""

    def __init__(self, rules: list[dict[str, Any]] | None = None, default: float = 0.0,
                 batch_size: int = 8, **_: Any) -> None:
        self.rules = rules or []  # {"premise": substr, "hypothesis": substr, "probability": p}
        self.default = default
        self.set_batch_size(batch_size)
        self.identify({}, {})
        self.calls: Counter[str] = Counter()

    def classify(self, requests: Sequence[Any]) -> list[float]:
        self.calls["classify"] += 1
        out = []
        for request in requests:
            p = self.default
            for rule in self.rules:
                if rule.get("premise", "") in request.premise and rule.get("hypothesis", "") in request.hypothesis:
                    p = rule["probability"]
                    break
            out.append(float(p))
        return out
