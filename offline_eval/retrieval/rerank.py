"""Second stage: a local cross-encoder rescoring each first-stage retriever's top-N chunks.

``--rerank PATH`` names a cross-encoder folder that sentence-transformers' ``CrossEncoder`` reads
(bge-reranker-v2-m3, the ms-marco MiniLM cross-encoders, …), opened with ``local_files_only`` and
never with remote code. For every query, the first stage's top ``depth`` chunks are scored as
(question, chunk text) pairs — the text the retrievers indexed, header included — and reordered by
that score, ties kept in first-stage order; the chunks below ``depth`` follow in their first-stage
order, so a reranked ranking is as long as the one it came from. Each reranked run is reported as a
retriever of its own, ``<first stage>+rerank``, in the same tables, comparisons and plot.

Scores are the model's raw logits (``activation_fn=Identity``): the sigmoid ``CrossEncoder`` applies
by default to a one-logit model changes no ranking, but in float32 it rounds logits above ~17 to 1.0
and would tie the strongest matches.

Pair scores are cached on disk by model identity and the hash of the (question, text) pair, so a
rerun, another top-k, or a second first-stage retriever that found the same chunk for the same query
scores nothing twice; torch is imported only when a pair is missing from the cache.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from offline_eval.retrieval.dense import LazyModel

DEFAULT_DEPTH = 100
DEFAULT_MAX_LENGTH = 512  # FlagReranker's default for bge-reranker-v2-m3; the ms-marco models' window
SUFFIX = "+rerank"  # a reranked run is reported as "<first stage>+rerank"


def reranker_identity(path: str | Path, max_length: int = DEFAULT_MAX_LENGTH) -> str:
    """Cache identity of a cross-encoder folder: its content hash and the token limit."""
    from offline_eval.runtime.identity import content_fingerprint

    return f"cross-encoder:{content_fingerprint(path)}[max_length={int(max_length)}]"


class CrossEncoderScorer:
    """Relevance logits of (query, passage) pairs from a local one-output cross-encoder."""

    def __init__(self, path: str | Path, device: str = "cpu", batch_size: int = 32,
                 max_length: int = DEFAULT_MAX_LENGTH, show_progress: bool = False) -> None:
        import torch
        from sentence_transformers import CrossEncoder

        self.path = Path(path).expanduser().resolve()
        if not (self.path / "config.json").is_file():
            raise FileNotFoundError(f"{self.path} is not a cross-encoder folder (no config.json)")
        self.batch_size = max(1, int(batch_size))
        self.show_progress = show_progress
        self.model = CrossEncoder(str(self.path), device=device, local_files_only=True, trust_remote_code=False,
                                  max_length=int(max_length))
        if int(self.model.num_labels) != 1:
            raise ValueError(f"{self.path}: a reranker gives one relevance logit per pair; this model has "
                             f"{self.model.num_labels} outputs")
        self._logits = torch.nn.Identity()
        self.identity = reranker_identity(self.path, max_length)

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One float32 logit per pair, in order."""
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        out = self.model.predict([list(p) for p in pairs], batch_size=self.batch_size, activation_fn=self._logits,
                                 show_progress_bar=self.show_progress and sys.stderr.isatty(),  # in a log: \r lines
                                 convert_to_numpy=True)
        return np.asarray(out, dtype=np.float32).reshape(len(pairs))


class LazyScorer(LazyModel):
    """Loads the cross-encoder on first use, so a fully cached rerank never imports torch."""

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        return self.model().score(pairs)


def pair_key(question: str, text: str) -> bytes:
    """16-byte digest of one (question, text) pair."""
    return hashlib.sha256(question.encode("utf-8") + b"\x00" + text.encode("utf-8")).digest()[:16]


class PairScoreCache:
    """Pair scores of one model in ``<folder>/<sha(identity)>/pairs.npz``: keys as an (n, 16) uint8
    array (a bytes dtype would drop a digest's trailing zero bytes) and float32 scores."""

    def __init__(self, folder: str | Path, identity: str) -> None:
        self.path = Path(folder) / hashlib.sha256(identity.encode("utf-8")).hexdigest()[:20] / "pairs.npz"
        self.scores: dict[bytes, float] = {}
        self._dirty = False
        try:
            with np.load(self.path, allow_pickle=False) as data:
                keys, scores = data["keys"], data["scores"]
                if keys.ndim != 2 or keys.shape[1] != 16 or keys.shape[0] != scores.shape[0]:
                    raise ValueError("not a pair score file")
                self.scores = {row.tobytes(): float(v) for row, v in zip(keys, scores.tolist())}
        except (OSError, ValueError, KeyError):
            self.scores = {}

    def update(self, keys: Sequence[bytes], scores: Sequence[float]) -> None:
        self.scores.update(zip(keys, (float(s) for s in scores)))
        self._dirty = bool(keys) or self._dirty

    def save(self) -> None:
        """Write every score to a sibling file and rename it into place."""
        if not self._dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"pairs.tmp{os.getpid()}.npz")
        keys = np.frombuffer(b"".join(self.scores), dtype=np.uint8).reshape(-1, 16)
        np.savez(tmp, keys=keys, scores=np.array(list(self.scores.values()), dtype=np.float32))
        os.replace(tmp, self.path)
        self._dirty = False


def rerank(rankings: Sequence[Sequence[tuple[int, float]]], questions: Sequence[str], texts: Sequence[str],
           scorer: Any, depth: int = DEFAULT_DEPTH, cache: PairScoreCache | None = None
           ) -> tuple[list[list[tuple[int, float]]], dict[str, Any]]:
    """Each query's first-stage ranking with its top ``depth`` reordered by the cross-encoder.

    Returns the reranked rankings (chunk index, cross-encoder logit for the reranked part; the
    first-stage score for the tail below ``depth``) and the stage's figures: pairs needed, pairs the
    model scored (the rest came from the cache) and seconds.
    """
    started = time.perf_counter()
    heads = [list(ranking[:depth]) for ranking in rankings]
    keys = [[pair_key(questions[q], texts[i]) for i, _ in head] for q, head in enumerate(heads)]
    known = cache.scores if cache is not None else {}
    missing: dict[bytes, tuple[str, str]] = {}
    for q, (head, row) in enumerate(zip(heads, keys)):
        for (i, _), key in zip(head, row):
            if key not in known and key not in missing:
                missing[key] = (questions[q], texts[i])
    fresh = dict(zip(missing, scorer.score(list(missing.values())).tolist())) if missing else {}
    if cache is not None and fresh:
        cache.update(list(fresh), list(fresh.values()))
        cache.save()
    out: list[list[tuple[int, float]]] = []
    for ranking, head, row in zip(rankings, heads, keys):
        scored = [(i, float(fresh[k] if k in fresh else known[k]), rank)
                  for rank, ((i, _), k) in enumerate(zip(head, row))]
        scored.sort(key=lambda item: (-item[1], item[2]))
        out.append([(i, s) for i, s, _ in scored] + [(int(i), float(s)) for i, s in ranking[depth:]])
    stats = {"pairs": sum(len(h) for h in heads), "pairs_scored": len(missing),
             "seconds": time.perf_counter() - started}
    return out, stats
