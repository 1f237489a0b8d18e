"""A sentence-transformers model from a local folder as an :class:`~offline_eval.runtime.base.Embedder`.

Nothing is downloaded: the model is opened with ``local_files_only=True`` and never with remote code.
Vectors are L2-normalised float32, so a dot product is a cosine similarity.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import numpy as np

from offline_eval.engine.requests import Embed
from offline_eval.runtime.base import Backend
from offline_eval.runtime.identity import content_fingerprint

log = logging.getLogger(__name__)

class SentenceTransformerEmbedder(Backend):
    """Unit-norm sentence embeddings from a local sentence-transformers folder.

    Args:
        path: local folder saved by sentence-transformers (``modules.json``) or a plain transformers
            encoder folder (sentence-transformers then adds mean pooling).
        device: torch device ("cpu", "cuda", ...).
        batch_size: texts per forward pass.
        max_seq_length: token limit per text (longer texts are truncated by sentence-transformers);
            default: the model's own setting.
    """

    def __init__(
        self,
        path: str,
        device: str = "cpu",
        batch_size: int = 32,
        max_seq_length: int | None = None,
    ) -> None:
        from sentence_transformers import SentenceTransformer

        self.set_batch_size(batch_size)
        self.path = Path(path).expanduser().resolve()
        if not self.path.is_dir():
            raise FileNotFoundError(f"embedding model folder {self.path} does not exist")
        if not any((self.path / name).is_file() for name in ("modules.json", "config.json")):
            raise FileNotFoundError(
                f"embedding model folder {self.path} has neither modules.json nor config.json"
            )
        self.device = device
        self.model = SentenceTransformer(
            str(self.path), device=device, local_files_only=True, trust_remote_code=False
        )
        if max_seq_length:
            self.model.max_seq_length = int(max_seq_length)
        self.model.eval()
        self.max_seq_length = self.model.max_seq_length
        self.identify({"main": content_fingerprint(self.path)}, {"max_seq_length": self.max_seq_length})

    @property
    def dimension(self) -> int:
        """Length of the vectors."""
        getter = getattr(self.model, "get_embedding_dimension", None) or getattr(
            self.model, "get_sentence_embedding_dimension"
        )
        dim = getter()
        if dim is None:
            dim = int(self.encode_texts(["dimension probe"]).shape[1])
        return int(dim)

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``: a float32 array of shape (len(texts), dim) with unit-norm rows.

        Texts are sorted by length before batching (less padding) and returned in input order.
        """
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        vectors = self.model.encode(
            [texts[i] for i in order],
            batch_size=self.batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        vectors = np.asarray(vectors, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.maximum(norms, 1e-12)
        out = np.empty_like(vectors)
        out[np.asarray(order)] = vectors
        return out

    def embed(self, requests: Sequence[Embed]) -> list[list[float]]:
        """A unit-norm vector per request, in request order."""
        return self.encode_texts([r.text for r in requests]).tolist()
