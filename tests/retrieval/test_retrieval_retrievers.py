"""BM25, dense and hybrid retrievers: ranking, persistence, embedding cache."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from offline_eval.retrieval.bm25 import BM25Retriever, Tokenizer, top_k_indices
from offline_eval.retrieval.dense import (
    DenseRetriever,
    EmbeddingCache,
    LazyEncoder,
    encode_cached,
    starter_embedder_path,
)
from offline_eval.retrieval.hybrid import fuse_runs, reciprocal_rank_fusion

TEXTS = [
    "The company acquired a rival bakery in March to expand production.",
    "Quarterly dividends were distributed to shareholders in January.",
    "The board appointed a new chief executive officer last year.",
    "华夏娱乐有限公司完成了对草莓文化传媒的资产收购。",
    "公司董事会任命了新的首席执行官。",
]


class HashingEncoder:
    """A small deterministic bag-of-words encoder standing in for a neural model in unit tests."""

    identity = "test:hashing-encoder/1"

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.calls = 0
        self.texts_seen = 0

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        self.texts_seen += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)


def test_tokenizer_stems_drops_stopwords_and_cuts_chinese() -> None:
    tok = Tokenizer()
    assert tok("The companies are acquiring rivals") == ["compani", "acquir", "rival"]
    zh = tok("华夏娱乐有限公司的资产收购")
    assert "收购" in zh and "的" not in zh
    assert tok("Q3 收购 report") == ["q3", "收购", "report"]


def test_bm25_ranks_the_matching_chunk_first_in_both_languages() -> None:
    bm25 = BM25Retriever()
    bm25.build(TEXTS, "fp")
    runs = bm25.search(["When did the company acquire the bakery?", "谁被任命为首席执行官？",
                        "zzz unknown"], 3)
    assert runs[0][0][0] == 0
    assert runs[1][0][0] == 4
    assert [s for _, s in runs[2]] == [0.0, 0.0, 0.0]  # no known term: zeros, lowest ids
    assert [i for i, _ in runs[2]] == [0, 1, 2]
    assert all(a[1] >= b[1] for a, b in zip(runs[0], runs[0][1:]))


def test_bm25_index_persists_and_loads_back(tmp_path: Path) -> None:
    bm25 = BM25Retriever()
    bm25.build(TEXTS, "fp-1")
    bm25.save(tmp_path / "bm25")
    loaded = BM25Retriever.load(tmp_path / "bm25", "fp-1")
    assert loaded is not None
    query = "new chief executive appointed"
    assert np.allclose(loaded.scores(query), bm25.scores(query))
    assert BM25Retriever.load(tmp_path / "bm25", "other chunks") is None
    assert BM25Retriever.load(tmp_path / "missing", "fp-1") is None


def test_top_k_indices_breaks_ties_by_index() -> None:
    scores = np.array([1.0, 3.0, 3.0, 2.0, 3.0])
    assert top_k_indices(scores, 2).tolist() == [1, 2]
    assert top_k_indices(scores, 4).tolist() == [1, 2, 4, 3]
    assert top_k_indices(scores, 10).tolist() == [1, 2, 4, 3, 0]


def test_embedding_cache_avoids_reencoding(tmp_path: Path) -> None:
    enc = HashingEncoder()
    cache = EmbeddingCache(tmp_path)
    first, hit1 = encode_cached(enc, TEXTS, cache, batch_size=2)
    assert not hit1 and enc.calls == 3
    second, hit2 = encode_cached(enc, TEXTS, cache)
    assert hit2 and enc.calls == 3
    assert np.array_equal(first, second)
    _, hit3 = encode_cached(enc, TEXTS[:2], cache)  # other texts: another key
    assert not hit3


def test_lazy_encoder_is_not_created_on_a_cache_hit(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    encode_cached(HashingEncoder(), TEXTS, cache)
    created: list[int] = []

    def factory() -> HashingEncoder:
        created.append(1)
        return HashingEncoder()

    lazy = LazyEncoder(factory, HashingEncoder.identity)
    dense = DenseRetriever(lazy, cache)
    dense.build(TEXTS, "fp")
    assert dense.from_cache and not lazy.loaded and not created
    dense.search(["bakery"], 2)  # the query is not cached: now the model is created
    assert created == [1]


def test_dense_search_and_persistence(tmp_path: Path) -> None:
    enc = HashingEncoder()
    dense = DenseRetriever(enc, EmbeddingCache(tmp_path / "cache"))
    dense.build(TEXTS, "fp")
    run = dense.search(["dividends distributed to shareholders"], 2)[0]
    assert run[0][0] == 1 and run[0][1] > run[1][1]
    dense.save(tmp_path / "dense")
    again = DenseRetriever.load(tmp_path / "dense", enc, fingerprint="fp")
    assert again is not None and np.array_equal(again.embeddings, dense.embeddings)
    assert DenseRetriever.load(tmp_path / "dense", enc, fingerprint="other") is None

    class Other(HashingEncoder):
        identity = "test:another-model"

    assert DenseRetriever.load(tmp_path / "dense", Other(), fingerprint="fp") is None


def test_reciprocal_rank_fusion() -> None:
    a = [(1, 9.0), (2, 8.0), (3, 7.0)]
    b = [(3, 0.9), (1, 0.8), (4, 0.7)]
    fused = reciprocal_rank_fusion([a, b], 4)
    expected = {1: 1 / 61 + 1 / 62, 3: 1 / 63 + 1 / 61, 2: 1 / 62, 4: 1 / 63}
    assert [i for i, _ in fused] == [1, 3, 2, 4]
    assert all(s == pytest.approx(expected[i]) for i, s in fused)
    assert fuse_runs([[a], [b]], 2) == [fused[:2]]
    with pytest.raises(ValueError):
        fuse_runs([[a], [a, b]], 2)


@pytest.mark.skipif(starter_embedder_path() is None, reason="starter embedder not installed")
def test_starter_embedder_retrieves_by_meaning(tmp_path: Path) -> None:
    from offline_eval.retrieval.dense import load_embedder

    encoder = load_embedder(starter_embedder_path())
    dense = DenseRetriever(encoder, EmbeddingCache(tmp_path))
    dense.build(TEXTS[:3], "fp")
    assert dense.embeddings.shape == (3, 384)
    assert np.allclose(np.linalg.norm(dense.embeddings, axis=1), 1.0, atol=1e-4)
    run = dense.search(["Who became the new CEO?", "payout to investors"], 1)
    assert run[0][0][0] == 2 and run[1][0][0] == 1


def test_dense_search_streams_large_matrices_exactly() -> None:
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((70_000, 8)).astype(np.float32)  # above one 65,536-row tile
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    queries = emb[[5, 69_999]] + 0.01
    dense = DenseRetriever(HashingEncoder())
    dense.embeddings = emb
    run = dense.search(["a", "b"], 5, query_vectors=queries)
    sims = queries @ emb.T
    for row, ranking in zip(sims, run):
        assert [i for i, _ in ranking] == np.argsort(-row, kind="stable")[:5].tolist()
    assert run[0][0][0] == 5 and run[1][0][0] == 69_999
