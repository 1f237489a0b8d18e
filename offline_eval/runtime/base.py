"""The three model roles, the contracts their backends fulfil and the base class they share.

A backend receives a whole batch (already sorted by length and cut to ``--batch-size`` by the engine)
through the method the request class names (``Request.backend_method``) and returns one result per
request, in order. A backend may define ``batch_order(requests) -> list of indices`` to choose the
order instead (the transformers judge puts prompts that share a prefix together). ``identity`` names
the exact model (path and revision or weight hash) and enters every cache key, so a different model
never reuses another model's answers.

The protocols are the engine's contract (a test's stand-in that fulfils one is served like a model);
the package's own backends derive from :class:`Backend`, which writes their shared checks once.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, Sequence, runtime_checkable

from offline_eval.engine.requests import Classify, Embed, Generate, ScoreOptions
from offline_eval.runtime.identity import model_identity
from offline_eval.runtime.registry import BackendSpec, declaration_of

# dtype names a manifest may give a torch backend -> torch's name for it ("auto" is the backend's choice)
DTYPE_NAMES = {"float32": "float32", "fp32": "float32", "float": "float32", "bfloat16": "bfloat16",
               "bf16": "bfloat16", "float16": "float16", "fp16": "float16", "half": "float16"}


class Backend:
    """What every model backend shares: its declaration, its identity and the checks of the
    constructor arguments every backend takes (batch size, dtype).

    A backend learns its role, name, output revision and neutral options from its entry in
    :data:`~offline_eval.runtime.registry.DECLARED_BACKENDS` (found by its class), so its cache identity
    is made from the same declaration the profile's is, and nothing about it is written twice.
    """

    identity: str
    batch_size: int

    @classmethod
    def declaration(cls) -> BackendSpec:
        """This backend's entry in the registry."""
        return declaration_of(cls)

    def identify(self, folders: Mapping[str, str | Path], options: Mapping[str, Any]) -> None:
        """Set ``identity`` (:func:`~offline_eval.runtime.identity.model_identity`) from the content of
        the model's folders and the options that change its answers."""
        self.identity = model_identity(self.declaration(), folders, options)

    def set_batch_size(self, batch_size: int) -> None:
        """How many requests one call carries: at least 1."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = int(batch_size)

    @staticmethod
    def dtype_name(dtype: str) -> str:
        """torch's name of a manifest's ``dtype`` (case and the short names fp32/bf16/fp16 aside), or
        "auto"; ValueError naming the accepted ones otherwise."""
        key = str(dtype).lower()
        if key == "auto":
            return key
        if key not in DTYPE_NAMES:
            raise ValueError(f"unknown dtype {dtype!r} (auto, float32, bfloat16, float16)")
        return DTYPE_NAMES[key]


@runtime_checkable
class JudgeBackend(Protocol):
    identity: str
    # How many requests one call should carry. Engines cut stages into batches of this size;
    # a continuous-batching server (vLLM) wants the whole stage and reports a large number.
    batch_size: int

    def generate(self, requests: Sequence[Generate]) -> list[tuple[str, ...]]:
        """One tuple of ``request.sampling.n`` completions per request."""

    def score_options(self, requests: Sequence[ScoreOptions]) -> list[dict[str, float]]:
        """Next-token probability of each option, normalised over the options."""


@runtime_checkable
class Verifier(Protocol):
    identity: str
    batch_size: int

    def classify(self, requests: Sequence[Classify]) -> list[float]:
        """P(hypothesis supported by premise) per request."""


@runtime_checkable
class Embedder(Protocol):
    identity: str
    batch_size: int

    def embed(self, requests: Sequence[Embed]) -> list[list[float]]:
        """A unit-norm vector per request."""
