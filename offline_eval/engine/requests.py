"""Typed units of model work. Metrics yield these; the engine gathers, deduplicates, caches and
dispatches them, one backend call per request type and batch.

Every request is a frozen, hashable value. Its ``key`` (a content hash of the request type and every
field that changes the answer) is what deduplication and the persistent cache use; the model's
identity is added by the engine.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from functools import cached_property
from typing import Any, ClassVar

Messages = tuple[tuple[str, str], ...]  # ((role, content), ...), chat order


def _nested(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def messages(*pairs: tuple[str, str]) -> Messages:
    return tuple((str(role), str(content)) for role, content in pairs)


@dataclass(frozen=True)
class Sampling:
    """Decoding settings. Greedy by default; n>1 with temperature>0 samples with a fixed seed."""

    temperature: float = 0.0
    n: int = 1
    max_tokens: int = 512
    top_p: float = 1.0
    seed: int = 0


@dataclass(frozen=True)
class Request:
    role: ClassVar[str]  # which model serves it: "judge", "verifier" or "embedder"
    kind: ClassVar[str]  # request type (part of the cache key and of the cache's records)
    backend_method: ClassVar[str]  # the method of the role's backend that answers a batch of these

    @cached_property
    def key(self) -> str:
        """Computed once per request (the engine looks it up at every step). The JSON is what
        ``asdict(self)`` gives, built without its deep copies."""
        payload = json.dumps([self.kind, {f.name: getattr(self, f.name) for f in fields(self)}],
                             sort_keys=True, ensure_ascii=False, default=_nested)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    @property
    def size(self) -> int:
        """Length proxy used to sort a stage so batches hold similar lengths."""
        raise NotImplementedError


@dataclass(frozen=True)
class Generate(Request):
    """Free generation from a chat prompt. Result: tuple of ``sampling.n`` completions (str).

    ``schema`` is a JSON schema (as a canonical JSON string) the output must follow; backends that can
    decode under a schema (vLLM) do, the others rely on the tolerant parser and one repair retry.
    """

    role: ClassVar[str] = "judge"
    kind: ClassVar[str] = "generate"
    backend_method: ClassVar[str] = "generate"
    prompt: Messages
    schema: str | None = None
    sampling: Sampling = field(default_factory=Sampling)

    @property
    def size(self) -> int:
        return sum(len(c) for _, c in self.prompt)


@dataclass(frozen=True)
class ScoreOptions(Request):
    """Next-token probabilities of a fixed set of answer options after a chat prompt.

    Result: dict option -> probability, normalised over the options (sums to 1). No decoding, no
    parsing: a graded verdict (e.g. P("Yes") vs P("No")).
    """

    role: ClassVar[str] = "judge"
    kind: ClassVar[str] = "options"
    backend_method: ClassVar[str] = "score_options"
    prompt: Messages
    options: tuple[str, ...] = ("Yes", "No")

    @property
    def size(self) -> int:
        return sum(len(c) for _, c in self.prompt)


@dataclass(frozen=True)
class Classify(Request):
    """Premise/hypothesis consistency (HHEM). Result: float, P(hypothesis is supported by premise)."""

    role: ClassVar[str] = "verifier"
    kind: ClassVar[str] = "classify"
    backend_method: ClassVar[str] = "classify"
    premise: str
    hypothesis: str

    @property
    def size(self) -> int:
        return len(self.premise) + len(self.hypothesis)


@dataclass(frozen=True)
class Embed(Request):
    """One text to embed. Result: a unit-norm vector (list[float])."""

    role: ClassVar[str] = "embedder"
    kind: ClassVar[str] = "embed"
    backend_method: ClassVar[str] = "embed"
    text: str

    @property
    def size(self) -> int:
        return len(self.text)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def to_jsonable(result: Any) -> Any:
    """Results as stored in the cache: tuples become lists, numpy arrays lists of floats."""
    if type(result) in _SCALARS:
        return result
    if hasattr(result, "tolist"):
        return result.tolist()
    if isinstance(result, (tuple, list)):
        if all(type(x) in _SCALARS for x in result):  # a vector or a list of texts: nothing to convert
            return list(result)
        return [to_jsonable(x) for x in result]
    if isinstance(result, dict):
        return {k: to_jsonable(v) for k, v in result.items()}
    return result
