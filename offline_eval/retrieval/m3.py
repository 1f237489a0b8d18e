"""BGE-M3 as its users run it: dense, sparse and multi-vector retrieval from one encoder pass.

A BGE-M3 folder is an XLM-RoBERTa checkpoint (``config.json``, weights, tokenizer files) with two head
files beside it, as the published model is laid out and as FlagEmbedding saves one
(``EncoderOnlyEmbedderM3Model.save``):

- ``sparse_linear.pt``: the state dict of ``Linear(hidden, 1)``, one weight per token;
- ``colbert_linear.pt``: the state dict of ``Linear(hidden, colbert_dim)`` (``colbert_dim`` = hidden,
  1024, in the published model; read here from the weight's shape).

Both are read with ``torch.load(weights_only=True)``; the encoder with transformers' ``AutoModel``
from the local folder, never with remote code. From the last hidden state ``H`` of one forward pass
(FlagEmbedding, commit 7ed43d6: ``FlagEmbedding/finetune/embedder/encoder_only/m3/modeling.py`` for
the heads and scores, ``FlagEmbedding/inference/embedder/encoder_only/m3.py`` for what ``encode``
keeps; the M3 paper, §3.2, states the same formulas):

- **dense**: ``normalize(H[0])`` (the ``<s>``/[CLS] state); score = inner product (cosine).
- **sparse** (lexical weights): ``relu(sparse_linear(H[i]))`` for every token; per token id the
  largest weight; weights <= 0 and the ids of the cls, eos, pad and unk tokens dropped; score =
  ``Σ_{t ∈ q ∩ d} w_q(t) · w_d(t)``.
- **multi-vector** (ColBERT): ``normalize(colbert_linear(H[i]))`` for every token after [CLS] up to
  the last real one (the closing ``</s>`` included, padding excluded); score =
  ``(1/N_q) Σ_i max_j E_q[i] · E_d[j]``.
- **hybrid**: ``(w_d·s_dense + w_s·s_sparse + w_c·s_colbert) / (w_d + w_s + w_c)``, the form of
  FlagEmbedding's ``compute_score`` (``colbert+sparse+dense``), default weights 1 : 0.3 : 1 (the
  defaults of its model's ``compute_score``). Dividing by the sum of the weights leaves every
  ranking as the plain weighted sum gives it.

Encoded chunks are cached on disk by model identity (the folder's content hash and the token limit)
and the hash of the texts, like the dense retriever's embeddings, as a folder of ``.npy`` arrays (the
multi-vector matrix is read back memory-mapped); queries are cached the same way, so a rerun on
cached chunks and queries never imports torch.

Search is exact. By default every chunk is scored by every retriever; ``candidates=N`` instead
scores multi-vector only on each query's dense top-N (the M3 paper re-ranks the dense top-200 with
it) and the hybrid on the union of the dense and sparse top-N (the paper's "All"), which keeps the
per-query cost of multi-vector independent of the corpus size.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from offline_eval.retrieval.bm25 import top_k_indices
from offline_eval.retrieval.dense import LazyModel, texts_hash

M3_HEADS = ("sparse_linear.pt", "colbert_linear.pt")
M3_RETRIEVERS = ("m3-dense", "m3-sparse", "m3-colbert", "m3-hybrid")
DEFAULT_WEIGHTS = (1.0, 0.3, 1.0)  # dense, sparse, multi-vector
DEFAULT_MAX_LENGTH = 8192  # BGE-M3's window; clamped to what the checkpoint's positions allow
ARRAYS = ("dense", "sparse_offsets", "sparse_ids", "sparse_weights", "colbert_offsets", "colbert_vectors")
TILE_FLOATS = 1 << 24  # similarity tiles of at most 64 MiB


def is_m3_folder(path: str | Path | None) -> bool:
    """True when ``path`` is a folder holding both BGE-M3 head files."""
    return path is not None and all((Path(path) / name).is_file() for name in M3_HEADS)


def m3_identity(path: str | Path, max_length: int = DEFAULT_MAX_LENGTH) -> str:
    """Cache identity of a BGE-M3 folder: its content hash (:mod:`offline_eval.runtime.identity`,
    head files included) and the token limit, computed without loading anything."""
    from offline_eval.runtime.identity import content_fingerprint

    return f"bge-m3:{content_fingerprint(path)}[max_length={int(max_length)}]"


# ------------------------------------------------------------------------------ the vectors

@dataclass
class M3Vectors:
    """The three outputs for ``n`` texts, ragged parts stored flat with offsets (CSR layout).

    ``dense``: (n, hidden) unit rows. Text ``i``'s lexical weights are ``sparse_ids`` /
    ``sparse_weights`` [``sparse_offsets[i]``:``sparse_offsets[i+1]``] (ids ascending); its
    multi-vector rows are ``colbert_vectors`` [``colbert_offsets[i]``:``colbert_offsets[i+1]``].
    """

    dense: np.ndarray
    sparse_offsets: np.ndarray
    sparse_ids: np.ndarray
    sparse_weights: np.ndarray
    colbert_offsets: np.ndarray
    colbert_vectors: np.ndarray

    def __len__(self) -> int:
        return int(self.dense.shape[0])

    def lexical_weights(self, i: int) -> dict[int, float]:
        """Text ``i``'s {token id: weight}, the shape of FlagEmbedding's ``lexical_weights``."""
        a, b = int(self.sparse_offsets[i]), int(self.sparse_offsets[i + 1])
        return {int(t): float(w) for t, w in zip(self.sparse_ids[a:b], self.sparse_weights[a:b])}

    def colbert(self, i: int) -> np.ndarray:
        """Text ``i``'s multi-vector rows (tokens after [CLS], unit norm)."""
        return np.asarray(self.colbert_vectors[int(self.colbert_offsets[i]):int(self.colbert_offsets[i + 1])])

    def nbytes(self) -> dict[str, int]:
        """Bytes per retriever's part (dense, sparse, colbert) as stored."""
        return {"dense": int(self.dense.nbytes),
                "sparse": int(self.sparse_offsets.nbytes + self.sparse_ids.nbytes + self.sparse_weights.nbytes),
                "colbert": int(self.colbert_offsets.nbytes + self.colbert_vectors.nbytes)}

    @classmethod
    def from_parts(cls, dense: Sequence[np.ndarray], sparse: Sequence[tuple[np.ndarray, np.ndarray]],
                   colbert: Sequence[np.ndarray]) -> "M3Vectors":
        """Assemble per-text outputs: dense rows, (ids, weights) pairs and multi-vector matrices."""
        n = len(dense)
        dim = int(dense[0].shape[-1]) if n else 0
        cdim = int(colbert[0].shape[-1]) if n else 0
        s_len = np.array([len(ids) for ids, _ in sparse], dtype=np.int64)
        c_len = np.array([c.shape[0] for c in colbert], dtype=np.int64)
        return cls(
            dense=np.asarray(np.stack(dense) if n else np.zeros((0, dim)), dtype=np.float32),
            sparse_offsets=np.concatenate([[0], np.cumsum(s_len)]).astype(np.int64),
            sparse_ids=np.concatenate([ids for ids, _ in sparse]).astype(np.int32) if n else np.zeros(0, np.int32),
            sparse_weights=(np.concatenate([w for _, w in sparse]).astype(np.float32) if n
                            else np.zeros(0, np.float32)),
            colbert_offsets=np.concatenate([[0], np.cumsum(c_len)]).astype(np.int64),
            colbert_vectors=(np.concatenate(colbert).astype(np.float32) if n
                             else np.zeros((0, cdim), np.float32)))

    @classmethod
    def concat(cls, parts: Sequence["M3Vectors"]) -> "M3Vectors":
        """The texts of ``parts`` one after the other."""
        parts = [p for p in parts if len(p)] or list(parts[:1])

        def offsets(name: str, values: str) -> np.ndarray:
            out, base = [np.zeros(1, np.int64)], 0
            for p in parts:
                out.append(getattr(p, name)[1:] + base)
                base += getattr(p, values).shape[0]
            return np.concatenate(out).astype(np.int64)

        return cls(dense=np.concatenate([p.dense for p in parts]),
                   sparse_offsets=offsets("sparse_offsets", "sparse_ids"),
                   sparse_ids=np.concatenate([p.sparse_ids for p in parts]),
                   sparse_weights=np.concatenate([p.sparse_weights for p in parts]),
                   colbert_offsets=offsets("colbert_offsets", "colbert_vectors"),
                   colbert_vectors=np.concatenate([p.colbert_vectors for p in parts]))

    def save(self, folder: str | Path) -> None:
        """One ``.npy`` per array in ``folder``, written to a sibling and renamed into place whole."""
        target = Path(folder)
        tmp = target.with_name(target.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for name in ARRAYS:
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(getattr(self, name)), allow_pickle=False)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)

    @classmethod
    def load(cls, folder: str | Path) -> "M3Vectors | None":
        """The arrays saved in ``folder`` (the multi-vector matrix memory-mapped), or None."""
        src = Path(folder)
        try:
            arrays = {name: np.load(src / f"{name}.npy", allow_pickle=False,
                                    mmap_mode="r" if name == "colbert_vectors" else None) for name in ARRAYS}
        except (OSError, ValueError):
            return None
        vectors = cls(**arrays)
        n = len(vectors)
        if vectors.sparse_offsets.shape != (n + 1,) or vectors.colbert_offsets.shape != (n + 1,) \
                or int(vectors.colbert_offsets[-1]) != vectors.colbert_vectors.shape[0] \
                or int(vectors.sparse_offsets[-1]) != vectors.sparse_ids.shape[0]:
            return None
        return vectors


# ------------------------------------------------------------------------------ the encoder

def _special_ids(tokenizer: Any) -> set[int]:
    """Token ids whose lexical weight FlagEmbedding drops: cls, eos, pad and unk."""
    ids = set()
    for name in ("cls_token", "eos_token", "pad_token", "unk_token"):
        token = getattr(tokenizer, name, None)
        if token is not None:
            ids.add(int(tokenizer.convert_tokens_to_ids(str(token))))
    return ids


def lexical_weights(ids: np.ndarray, weights: np.ndarray, unused: set[int]) -> tuple[np.ndarray, np.ndarray]:
    """One text's token weights reduced as FlagEmbedding's ``_process_token_weights`` does: ids in
    ``unused`` and weights <= 0 dropped, the largest weight kept per id. Returns (ids ascending,
    weights)."""
    keep = weights > 0
    if unused:
        keep &= ~np.isin(ids, np.fromiter(unused, dtype=np.int64))
    ids, weights = ids[keep], weights[keep]
    uniq, inverse = np.unique(ids, return_inverse=True)
    best = np.zeros(uniq.shape[0], dtype=np.float32)
    np.maximum.at(best, inverse, weights.astype(np.float32))
    return uniq.astype(np.int32), best


class M3Encoder:
    """BGE-M3 from a local folder: one forward pass gives dense, lexical and multi-vector outputs.

    Args:
        path: the BGE-M3 folder (XLM-RoBERTa files plus ``sparse_linear.pt`` and ``colbert_linear.pt``).
        device: torch device for the forward passes.
        batch_size: texts per forward pass (texts are sorted by length first, so a batch pads little).
        max_length: token limit per text, clamped to the checkpoint's position embeddings.
    """

    def __init__(self, path: str | Path, device: str = "cpu", batch_size: int = 32,
                 max_length: int = DEFAULT_MAX_LENGTH) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.path = Path(path).expanduser().resolve()
        missing = [name for name in M3_HEADS if not (self.path / name).is_file()]
        if missing:
            raise FileNotFoundError(f"{self.path} is not a BGE-M3 folder: {', '.join(missing)} missing")
        self.device = device
        self.batch_size = max(1, int(batch_size))
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path), local_files_only=True,
                                                       trust_remote_code=False)
        self.model = AutoModel.from_pretrained(str(self.path), local_files_only=True, trust_remote_code=False,
                                               dtype=torch.float32).to(device).eval()
        hidden = int(self.model.config.hidden_size)
        self.sparse_linear = self._head("sparse_linear.pt", hidden, out=1)
        self.colbert_linear = self._head("colbert_linear.pt", hidden)
        self.max_length = self._window(max_length)
        self.unused = _special_ids(self.tokenizer)
        self.identity = m3_identity(self.path, max_length)

    def _head(self, name: str, hidden: int, out: int | None = None) -> Any:
        """A ``Linear`` from a head file's state dict, checked against the encoder's hidden size."""
        import torch

        state = torch.load(self.path / name, map_location="cpu", weights_only=True)
        weight = state.get("weight") if isinstance(state, dict) else None
        if weight is None or weight.ndim != 2 or weight.shape[1] != hidden or (out and weight.shape[0] != out):
            shape = None if weight is None else tuple(weight.shape)
            raise ValueError(f"{self.path / name}: expected the state dict of Linear({hidden}, "
                             f"{out or 'dim'}), found weight {shape}")
        layer = torch.nn.Linear(hidden, int(weight.shape[0]), bias="bias" in state)
        layer.load_state_dict(state)
        return layer.to(self.device).eval()

    def _window(self, max_length: int) -> int:
        """``max_length`` within the tokenizer's limit and the positions XLM-R can embed (its position
        ids start after the padding index)."""
        config = self.model.config
        limit = int(max_length)
        positions = getattr(config, "max_position_embeddings", None)
        if positions:
            limit = min(limit, int(positions) - int(getattr(config, "pad_token_id", 0) or 0) - 1)
        model_max = getattr(self.tokenizer, "model_max_length", None)
        if isinstance(model_max, int) and 0 < model_max < 10**9:
            limit = min(limit, model_max)
        return max(2, limit)

    def encode(self, texts: Sequence[str]) -> M3Vectors:
        """The three outputs for ``texts``, in input order."""
        import torch

        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        dense: list[np.ndarray] = [np.zeros(0)] * len(texts)
        sparse: list[tuple[np.ndarray, np.ndarray]] = [(np.zeros(0), np.zeros(0))] * len(texts)
        colbert: list[np.ndarray] = [np.zeros(0)] * len(texts)
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            batch = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                   max_length=self.max_length, return_tensors="pt")
            batch = {k: v.to(self.device) for k, v in batch.items() if k in ("input_ids", "attention_mask")}
            with torch.inference_mode():
                hidden = self.model(**batch, return_dict=True).last_hidden_state
                d = torch.nn.functional.normalize(hidden[:, 0], dim=-1)
                w = torch.relu(self.sparse_linear(hidden)).squeeze(-1)
                c = self.colbert_linear(hidden[:, 1:]) * batch["attention_mask"][:, 1:, None].to(hidden.dtype)
                c = torch.nn.functional.normalize(c, dim=-1)
            d, w, c = (t.float().cpu().numpy() for t in (d, w, c))
            ids = batch["input_ids"].cpu().numpy()
            lengths = batch["attention_mask"].sum(dim=1).cpu().numpy()
            for row, i in enumerate(idx):
                n_tok = int(lengths[row])
                dense[i] = d[row]
                sparse[i] = lexical_weights(ids[row, :n_tok], w[row, :n_tok], self.unused)
                colbert[i] = c[row, :n_tok - 1]
        return M3Vectors.from_parts(dense, sparse, colbert)


class LazyM3Encoder(LazyModel):
    """Creates the :class:`M3Encoder` on first use (a fully cached run never imports torch)."""

    def encode(self, texts: Sequence[str]) -> M3Vectors:
        return self.model().encode(texts)


class M3Cache:
    """Encoded texts on disk: ``<folder>/<sha(identity)>/<sha(texts)>/<array>.npy``."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def path(self, identity: str, key: str) -> Path:
        return self.folder / hashlib.sha256(identity.encode("utf-8")).hexdigest()[:20] / key

    def get(self, identity: str, key: str) -> M3Vectors | None:
        return M3Vectors.load(self.path(identity, key))

    def put(self, identity: str, key: str, vectors: M3Vectors) -> Path:
        path = self.path(identity, key)
        vectors.save(path)
        (path.parent / "model.json").write_text(json.dumps({"identity": identity}), encoding="utf-8")
        return path


def encode_cached(encoder: Any, texts: Sequence[str], cache: M3Cache | None, *, batch_size: int = 256,
                  progress: str | None = None) -> tuple[M3Vectors, bool]:
    """The outputs for ``texts`` and whether they came from the cache (encoded in groups of
    ``batch_size`` texts, with a tqdm bar when ``progress`` names the stage)."""
    key = texts_hash(texts)
    if cache is not None:
        hit = cache.get(encoder.identity, key)
        if hit is not None and len(hit) == len(texts):
            return hit, True
    starts: Any = range(0, len(texts), batch_size)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc=progress, unit="batch", leave=False,
                      disable=None)  # on a terminal only: in a log, a bar is lines of carriage returns
    parts = [encoder.encode(list(texts[s:s + batch_size])) for s in starts]
    vectors = M3Vectors.concat(parts) if parts else M3Vectors.from_parts([], [], [])
    if cache is not None:
        cache.put(encoder.identity, key, vectors)
        stored = cache.get(encoder.identity, key)  # searched memory-mapped, as a rerun searches it
        if stored is not None:
            vectors = stored
    return vectors, False


# -------------------------------------------------------------------------------- scoring

def dense_scores(queries: M3Vectors, docs: M3Vectors) -> np.ndarray:
    """(queries × docs) inner products of the unit [CLS] vectors."""
    return queries.dense @ docs.dense.T


class SparseIndex:
    """The chunks' lexical weights as a token × chunk sparse matrix (scipy, a dependency of
    sentence-transformers), for exact ``Σ w_q·w_d`` over shared ids as one sparse product per block
    of queries."""

    def __init__(self, docs: M3Vectors) -> None:
        import scipy.sparse as sp

        self.n = len(docs)
        self.vocab = int(docs.sparse_ids.max()) + 1 if docs.sparse_ids.size else 1
        by_chunk = sp.csr_matrix((np.asarray(docs.sparse_weights, dtype=np.float32), np.asarray(docs.sparse_ids),
                                  np.asarray(docs.sparse_offsets)), shape=(self.n, self.vocab))
        self.by_token = by_chunk.T.tocsr()

    def scores(self, queries: M3Vectors) -> np.ndarray:
        """(queries × docs) lexical matching scores."""
        import scipy.sparse as sp

        m = len(queries)
        rows = np.repeat(np.arange(m), np.diff(queries.sparse_offsets))
        ids = np.asarray(queries.sparse_ids)
        known = ids < self.vocab  # a token no chunk has matches nothing
        q = sp.csr_matrix((np.asarray(queries.sparse_weights, dtype=np.float32)[known], (rows[known], ids[known])),
                          shape=(m, self.vocab))
        return np.asarray((q @ self.by_token).toarray(), dtype=np.float32)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(s, s + l)`` for each (s, l), without a Python loop."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    return np.repeat(np.asarray(starts, dtype=np.int64) - (ends - lengths), lengths) + np.arange(total)


def _late_interaction(sims: np.ndarray, doc_starts: np.ndarray, q_starts: np.ndarray,
                      q_counts: np.ndarray) -> np.ndarray:
    """(queries × docs) ColBERT scores from a (query tokens × doc tokens) similarity tile: the max
    over each document's columns (the contiguous axis), summed over each query's rows, divided by
    its token count."""
    best = np.maximum.reduceat(sims, doc_starts, axis=1)
    return np.add.reduceat(best, q_starts, axis=0) / q_counts[:, None]


def colbert_scores(queries: M3Vectors, docs: M3Vectors, *, tile_floats: int = TILE_FLOATS) -> np.ndarray:
    """(queries × docs) multi-vector scores, every chunk scored exactly; the document matrix is read
    in tiles of whole documents so that a tile's similarities stay under ``tile_floats`` floats."""
    q_vec = np.asarray(queries.colbert_vectors, dtype=np.float32)
    q_off = np.asarray(queries.colbert_offsets)
    q_counts = np.diff(q_off).astype(np.float32)
    d_off = np.asarray(docs.colbert_offsets)
    n, m = len(docs), len(queries)
    out = np.zeros((m, n), dtype=np.float32)
    if not n or not m or not q_vec.shape[0]:
        return out
    if (np.diff(d_off) == 0).any() or (q_counts == 0).any():
        raise ValueError("every text has at least one multi-vector row (its closing </s>)")
    budget = max(1, tile_floats // q_vec.shape[0])
    a = 0
    while a < n:
        b = int(np.searchsorted(d_off, d_off[a] + budget, side="right")) - 1
        b = min(n, max(b, a + 1))
        sims = q_vec @ np.asarray(docs.colbert_vectors[d_off[a]:d_off[b]]).T
        out[:, a:b] = _late_interaction(sims, d_off[a:b] - d_off[a], q_off[:-1], q_counts)
        a = b
    return out


def colbert_scores_for(queries: M3Vectors, q: int, docs: M3Vectors, candidates: np.ndarray) -> np.ndarray:
    """Query ``q``'s multi-vector scores on the chunks ``candidates`` only."""
    d_off = np.asarray(docs.colbert_offsets)
    starts, lens = d_off[candidates], d_off[candidates + 1] - d_off[candidates]
    rows = np.asarray(docs.colbert_vectors[_ranges(starts, lens)])
    q_vec = np.asarray(queries.colbert(q), dtype=np.float32)
    seg = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    return _late_interaction(q_vec @ rows.T, seg, np.zeros(1, np.int64),
                             np.array([q_vec.shape[0]], np.float32))[0]


def hybrid(dense: np.ndarray, sparse: np.ndarray, colbert: np.ndarray,
           weights: Sequence[float] = DEFAULT_WEIGHTS) -> np.ndarray:
    """FlagEmbedding's ``colbert+sparse+dense``: the weighted mean of the three scores."""
    parts = [np.asarray(s, dtype=np.float64) for s in (dense, sparse, colbert)]
    out = np.zeros(np.broadcast_shapes(*(p.shape for p in parts)), dtype=np.float64)
    for w, part in zip(weights, parts):
        if w:  # a weight of 0 leaves its retriever out (it need not even be computed)
            out += float(w) * part
    return (out / sum(float(w) for w in weights)).astype(np.float32)


def _ranked(indices: np.ndarray, scores: np.ndarray, depth: int) -> list[tuple[int, float]]:
    """(chunk index, score) best first among ``indices`` (ties: lower index first)."""
    order = top_k_indices(scores, depth)
    return [(int(indices[j]), float(scores[j])) for j in order]


# ------------------------------------------------------------------------------ the retriever

class M3Retriever:
    """The four BGE-M3 retrievers over one set of encoded chunks."""

    def __init__(self, encoder: Any, cache: M3Cache | None = None) -> None:
        self.encoder = encoder
        self.cache = cache
        self.docs: M3Vectors | None = None
        self.fingerprint: str | None = None
        self.from_cache = False
        self.key = ""  # the cache key of the encoded chunks (hash of their texts)
        self._sparse: SparseIndex | None = None

    def build(self, texts: Sequence[str], fingerprint: str = "", *, show_progress: bool = False) -> None:
        """Encode every chunk text once (or read the outputs back from the cache)."""
        self.docs, self.from_cache = encode_cached(self.encoder, texts, self.cache,
                                                   progress="BGE-M3 chunks" if show_progress else None)
        self.key = texts_hash(texts)
        self.fingerprint = fingerprint
        self._sparse = None

    def save(self, folder: str | Path) -> None:
        """``meta.json`` in ``folder``: what was encoded, by which model, and the size of each part
        (the arrays themselves stay once, in the cache)."""
        if self.docs is None:
            raise RuntimeError("build the index before saving it")
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        meta = {"fingerprint": self.fingerprint, "identity": self.encoder.identity, "n_chunks": len(self.docs),
                "multi_vectors": int(self.docs.colbert_vectors.shape[0]), "bytes": self.docs.nbytes(),
                "arrays": str(self.cache.path(self.encoder.identity, self.key)) if self.cache else None}
        (out / "meta.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")

    def encode_queries(self, questions: Sequence[str], show_progress: bool = False) -> M3Vectors:
        vectors, _ = encode_cached(self.encoder, questions, self.cache,
                                   progress="BGE-M3 queries" if show_progress else None)
        return vectors

    def search(self, queries: M3Vectors, retrievers: Sequence[str], depth: int, *,
               weights: Sequence[float] = DEFAULT_WEIGHTS, candidates: int = 0,
               block: int = 64) -> tuple[dict[str, list[list[tuple[int, float]]]], dict[str, float]]:
        """Rankings ``{retriever: [[(chunk, score), ...] per query]}`` for the ``m3-*`` names asked
        for, and the seconds each would have taken alone (a part the hybrid shares with another
        retriever is computed once and counted in both)."""
        if self.docs is None:
            raise RuntimeError("the BGE-M3 index is not built")
        docs, n = self.docs, len(self.docs)
        depth = min(depth, n)
        pool = min(n, max(candidates, depth)) if candidates else 0
        w_d, w_s, w_c = (float(w) for w in weights)
        wanted = set(retrievers)
        hybrid_on = "m3-hybrid" in wanted
        # which full (queries × chunks) score matrices are needed; with candidates the multi-vector
        # part is scored per query on its candidates only, and the candidates come from dense / sparse
        need = {"dense": "m3-dense" in wanted or (hybrid_on and bool(w_d or pool)) or bool(pool and "m3-colbert" in wanted),
                "sparse": "m3-sparse" in wanted or (hybrid_on and bool(w_s or pool)),
                "colbert": not pool and ("m3-colbert" in wanted or (hybrid_on and bool(w_c)))}
        secs = dict.fromkeys(("dense", "sparse", "colbert", *retrievers), 0.0)
        if need["sparse"] and self._sparse is None:
            t0 = time.perf_counter()
            self._sparse = SparseIndex(docs)
            secs["sparse"] += time.perf_counter() - t0
        runs: dict[str, list[list[tuple[int, float]]]] = {r: [] for r in retrievers}
        everything = np.arange(n)
        empty = np.zeros((0, n), dtype=np.float32)
        for start in range(0, len(queries), block):
            part = _slice(queries, start, min(len(queries), start + block))
            scores = {}
            for kind, fn in (("dense", lambda: dense_scores(part, docs)),
                             ("sparse", lambda: self._sparse.scores(part)),
                             ("colbert", lambda: colbert_scores(part, docs))):
                t0 = time.perf_counter()
                scores[kind] = fn() if need[kind] else empty
                secs[kind] += time.perf_counter() - t0
            for q in range(len(part)):
                for name in retrievers:
                    t0 = time.perf_counter()
                    runs[name].append(self._rank(name, part, q, scores, depth, pool, (w_d, w_s, w_c), everything))
                    secs[name] += time.perf_counter() - t0
        shared = {"m3-dense": ("dense",), "m3-sparse": ("sparse",),
                  "m3-colbert": ("dense",) if pool else ("colbert",),
                  "m3-hybrid": tuple(k for k in ("dense", "sparse", "colbert") if need[k])}
        return runs, {r: secs[r] + sum(secs[k] for k in shared[r]) for r in retrievers}

    def _rank(self, name: str, part: M3Vectors, q: int, scores: dict[str, np.ndarray], depth: int, pool: int,
              weights: tuple[float, float, float], everything: np.ndarray) -> list[tuple[int, float]]:
        if name == "m3-dense":
            return _ranked(everything, scores["dense"][q], depth)
        if name == "m3-sparse":
            return _ranked(everything, scores["sparse"][q], depth)
        if name == "m3-colbert":
            if not pool:
                return _ranked(everything, scores["colbert"][q], depth)
            cand = np.sort(top_k_indices(scores["dense"][q], pool))
            return _ranked(cand, colbert_scores_for(part, q, self.docs, cand), depth)
        if name == "m3-hybrid":
            if not pool:
                parts = [scores[k][q] if w else 0.0 for k, w in zip(("dense", "sparse", "colbert"), weights)]
                return _ranked(everything, hybrid(*parts, weights=weights), depth)
            cand = np.union1d(top_k_indices(scores["dense"][q], pool), top_k_indices(scores["sparse"][q], pool))
            col = colbert_scores_for(part, q, self.docs, cand) if weights[2] else 0.0
            return _ranked(cand, hybrid(scores["dense"][q][cand], scores["sparse"][q][cand], col,
                                        weights=weights), depth)
        raise ValueError(f"unknown BGE-M3 retriever {name!r}")


def _slice(vectors: M3Vectors, a: int, b: int) -> M3Vectors:
    """Texts ``a``..``b-1`` of ``vectors`` (views where possible)."""
    s0, s1 = int(vectors.sparse_offsets[a]), int(vectors.sparse_offsets[b])
    c0, c1 = int(vectors.colbert_offsets[a]), int(vectors.colbert_offsets[b])
    return M3Vectors(dense=vectors.dense[a:b], sparse_offsets=vectors.sparse_offsets[a:b + 1] - s0,
                     sparse_ids=vectors.sparse_ids[s0:s1], sparse_weights=vectors.sparse_weights[s0:s1],
                     colbert_offsets=vectors.colbert_offsets[a:b + 1] - c0,
                     colbert_vectors=vectors.colbert_vectors[c0:c1])

