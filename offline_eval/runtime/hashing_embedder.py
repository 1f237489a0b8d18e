"""A model-free embedder: hashed bag of words (and of characters for Chinese), unit-normalised.

Deterministic and instant. Used by the tests to check metric formulas and as a last-resort lexical
embedder; it knows no synonyms, so it is no substitute for a trained model in real evaluations.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Sequence

import numpy as np

from offline_eval.runtime.base import Backend

_TOKEN = re.compile(r"[\u4e00-\u9fff]|[A-Za-z0-9]+")


class HashingEmbedder(Backend):
    def __init__(self, dim: int = 256, batch_size: int = 64, path: str | None = None, **_: Any) -> None:
        self.dim = dim
        self.set_batch_size(batch_size)
        self.identify({}, {"dim": dim})
        self.calls = 0

    def vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim)
        for token in _TOKEN.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
            v[h % self.dim] += 1.0 if (h >> 63) == 0 else -1.0
        norm = np.linalg.norm(v)
        return v / norm if norm else v

    def embed(self, requests: Sequence[Any]) -> list[list[float]]:
        self.calls += 1
        return [self.vector(r.text).tolist() for r in requests]
