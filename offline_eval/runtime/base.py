"""The three model roles and the contracts their backends fulfil.

A backend receives a whole batch (already sorted by length and cut to ``--batch-size`` by the engine)
and returns one result per request, in order. A backend may define ``batch_order(requests) -> list of
indices`` to choose the order instead (the transformers judge puts prompts that share a prefix
together). ``identity`` names the exact model (path and revision or
weight hash) and enters every cache key, so a different model never reuses another model's answers.
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

from offline_eval.engine.requests import Classify, Embed, Generate, ScoreOptions


class BackendUnavailable(RuntimeError):
    """A backend's optional dependency is missing; the message says which extra to install."""


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
