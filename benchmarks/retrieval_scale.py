"""How the benchmark's retrievers scale: build time, query throughput, index size, peak memory.

    python benchmarks/retrieval_scale.py                      # BM25 and dense at 10k and 100k chunks
    python benchmarks/retrieval_scale.py --sizes 10000,100000,1000000
    python benchmarks/retrieval_scale.py --encode-sample 256  # also time the real embedder
    python benchmarks/retrieval_scale.py --retrievers m3-dense,m3-sparse,m3-colbert,m3-colbert-c200,m3-hybrid-c200 \
        --m3-cost-sample 16 --out benchmarks/results/retrieval_scale_m3   # BGE-M3 and reranking (issue #18)

Corpus: synthetic English-like chunks of ~100 words drawn from a Zipf(1.1) vocabulary of 50k made-up
words (seeded, so every run sees the same text); queries are 6 words drawn the same way.

- BM25: the benchmark's own :class:`~offline_eval.retrieval.bm25.BM25Retriever` (tokenise, stem,
  bm25s index), then ``--queries`` queries searched at top-10 one by one, as the benchmark does.
- Dense: the :class:`~offline_eval.retrieval.dense.DenseRetriever` search over *precomputed random
  unit vectors* (384-d float32, the size of all-MiniLM-L6-v2) — encoding 1M chunks with a real model
  on a CPU would take hours, so the encoding cost is measured separately on ``--encode-sample`` real
  chunks with the starter embedder and reported per chunk and extrapolated. "Build" for dense is
  producing and saving the matrix (``np.save``) the way the benchmark persists it.
- BGE-M3 (``m3-*``): :class:`~offline_eval.retrieval.m3.M3Retriever` searching random outputs of
  BGE-M3's shapes: dense 1024-d unit vectors; lexical weights for ``--m3-tokens`` tokens per chunk
  (ids Zipf-drawn from its 250,002-token vocabulary, weights in (0, 0.3)); multi-vector rows of
  1024 floats per token (the published ``colbert_linear`` keeps the hidden size). Queries have 16
  tokens. ``m3-colbert`` scores every chunk exactly; ``-cN`` (``m3-colbert-c200``, ``m3-hybrid-c200``)
  is ``--m3-candidates N``: multi-vector only on the dense (and sparse) top-N. "Build" is building
  the search structures from the arrays; "index MB / 1k" is the bytes the arrays take per 1,000
  chunks (as saved: ``np.save`` of each array, measured on disk at 1k chunks). When the multi-vector
  matrix would exceed ``--max-colbert-gb`` (100k chunks: 52 GB) it is not built: a block of 10k
  chunks is searched as if repeated n/10k times, which is the search time the full matrix would take
  where it fits in memory (the peak memory is then the block's, not the index's).
- ``--m3-cost-sample N`` times the model side on a CPU with randomly initialised models of the real
  shapes (XLM-RoBERTa-large, as BGE-M3 and bge-reranker-v2-m3 are): chunks/s of one BGE-M3 pass
  giving all three outputs against sentence-transformers' dense-only pass on the same folder, and
  (query, chunk) pairs/s of a cross-encoder of bge-reranker-v2-m3's size and of one of
  ms-marco-MiniLM-L-6-v2's size, i.e. what reranking the top 100 costs per query.

Each (retriever, size) runs in its own child process so ``ru_maxrss`` is that run's peak resident
memory; the table also shows the growth exponent between successive sizes (time ∝ n^e). ``--out``
writes the figures as JSON and a Markdown table (:mod:`benchmarks._results`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VOCAB = 50_000
WORDS_PER_CHUNK = 100
DIM = 384
M3_DIM = 1024  # BGE-M3's hidden size: dense and multi-vector rows
M3_VOCAB = 250_002
QUERY_TOKENS = 16
BLOCK = 10_000  # chunks of the multi-vector block searched as if repeated, above --max-colbert-gb


def _vocabulary(seed: int = 7) -> list[str]:
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(3, 10, size=VOCAB)
    return ["".join(rng.choice(letters, size=n)) for n in lengths]


def synthetic_texts(n: int, words: int, seed: int) -> list[str]:
    """``n`` texts of ``words`` Zipf-distributed made-up words each, ending with a period."""
    vocab = np.array(_vocabulary())
    rng = np.random.default_rng(seed)
    out: list[str] = []
    block = 20_000
    for start in range(0, n, block):
        m = min(block, n - start)
        ids = (rng.zipf(1.1, size=(m, words)) - 1) % VOCAB
        out.extend(" ".join(row) + "." for row in vocab[ids])
    return out


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def worker(kind: str, n: int, n_queries: int) -> dict:
    """One measurement, run in a child process; returns the figures as a dict."""
    queries = synthetic_texts(n_queries, 6, seed=2)
    t0 = time.perf_counter()
    if kind == "bm25":
        texts = synthetic_texts(n, WORDS_PER_CHUNK, seed=1)
        gen_s = time.perf_counter() - t0
        base_mb = _peak_mb()
        from offline_eval.retrieval.bm25 import BM25Retriever

        retriever = BM25Retriever()
        t1 = time.perf_counter()
        retriever.build(texts, "scale")
        build_s = time.perf_counter() - t1
        with tempfile.TemporaryDirectory() as tmp:
            t2 = time.perf_counter()
            retriever.save(tmp)
            save_s = time.perf_counter() - t2
        del texts
        t3 = time.perf_counter()
        retriever.search(queries, 10)
        search_s = time.perf_counter() - t3
    else:
        rng = np.random.default_rng(1)
        base_mb = _peak_mb()
        t1 = time.perf_counter()
        vectors = np.empty((n, DIM), dtype=np.float32)
        for start in range(0, n, 100_000):
            block = rng.standard_normal((min(100_000, n - start), DIM), dtype=np.float32)
            block /= np.linalg.norm(block, axis=1, keepdims=True)
            vectors[start:start + block.shape[0]] = block
        gen_s = time.perf_counter() - t1
        from offline_eval.retrieval.dense import DenseRetriever

        class _Fixed:
            identity = "random-unit-vectors"

            def encode_texts(self, texts):  # queries only
                q = np.random.default_rng(3).standard_normal((len(texts), DIM)).astype(np.float32)
                return q / np.linalg.norm(q, axis=1, keepdims=True)

        retriever = DenseRetriever(_Fixed())
        retriever.embeddings = vectors
        with tempfile.TemporaryDirectory() as tmp:
            t2 = time.perf_counter()
            retriever.save(tmp)
            save_s = time.perf_counter() - t2
        build_s = 0.0
        qvec = retriever.encoder.encode_texts(queries)
        t3 = time.perf_counter()
        retriever.search(queries, 10, query_vectors=qvec)
        search_s = time.perf_counter() - t3
    return {"retriever": kind, "n_chunks": n, "generate_s": gen_s, "build_s": build_s + save_s,
            "index_only_s": build_s, "save_s": save_s, "search_s": search_s,
            "queries_per_s": n_queries / search_s if search_s else None,
            "peak_mb": _peak_mb(), "base_mb": base_mb}


def _unit(rng: np.random.Generator, rows: int, dim: int) -> np.ndarray:
    """``rows`` random unit vectors (float32), generated in blocks to bound the temporaries."""
    out = np.empty((rows, dim), dtype=np.float32)
    for start in range(0, rows, 200_000):
        block = rng.standard_normal((min(200_000, rows - start), dim), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start:start + block.shape[0]] = block
    return out


class RepeatedRows:
    """A (copies × rows, dim) matrix that is one block of rows seen ``copies`` times: the search reads
    it by slices (tiles of whole chunks) and by row indices (candidates), and both are served from
    the block, so a 100k-chunk multi-vector search runs in the memory of 10k chunks."""

    def __init__(self, block: np.ndarray, copies: int) -> None:
        self.block, self.rows = block, block.shape[0]
        self.shape = (self.rows * copies, block.shape[1])
        self.dtype = block.dtype
        self.nbytes = self.shape[0] * self.shape[1] * block.itemsize

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, _ = key.indices(self.shape[0])
            if start // self.rows == (stop - 1) // self.rows:  # inside one copy: a view
                base = start // self.rows * self.rows
                return self.block[start - base:stop - base]
            key = np.arange(start, stop)
        return self.block[np.asarray(key) % self.rows]


def m3_vectors(n: int, tokens: int, seed: int, *, colbert: bool, dense: bool = True,
               block_chunks: int | None = None):
    """Random BGE-M3 outputs for ``n`` texts of ``tokens`` tokens (after [CLS]); the multi-vector
    matrix is a :class:`RepeatedRows` of ``block_chunks`` chunks when given, absent without ``colbert``."""
    from offline_eval.retrieval.m3 import M3Vectors

    rng = np.random.default_rng(seed)
    # a text's tokens drawn Zipf-like from the vocabulary; as the encoder stores them, each id once per
    # text (repeats merged, about 0.6 distinct ids per token at 128 tokens), ascending
    row = np.repeat(np.arange(n), tokens)
    ids = ((rng.zipf(1.2, size=n * tokens) - 1) % M3_VOCAB).astype(np.int32)
    order = np.lexsort((ids, row))
    row, ids = row[order], ids[order]
    first = np.ones(ids.shape[0], dtype=bool)
    first[1:] = (ids[1:] != ids[:-1]) | (row[1:] != row[:-1])
    row, ids = row[first], ids[first]
    offsets = np.concatenate([[0], np.cumsum(np.bincount(row, minlength=n))]).astype(np.int64)
    weights = rng.uniform(0.0, 0.3, size=ids.shape[0]).astype(np.float32)
    if colbert:
        rows = (block_chunks or n) * tokens
        matrix = _unit(rng, rows, M3_DIM)
        vectors = RepeatedRows(matrix, n // block_chunks) if block_chunks else matrix
    else:
        vectors = np.zeros((0, M3_DIM), dtype=np.float32)
    c_off = (np.arange(n + 1, dtype=np.int64) * tokens) if colbert else np.zeros(n + 1, dtype=np.int64)
    return M3Vectors(dense=_unit(rng, n, M3_DIM) if dense else np.zeros((n, 0), np.float32),
                     sparse_offsets=offsets, sparse_ids=ids, sparse_weights=weights,
                     colbert_offsets=c_off, colbert_vectors=vectors)


def _disk_mb_per_1k(tokens: int, colbert: bool) -> dict[str, float]:
    """Bytes on disk per 1,000 chunks of each part, saved as the benchmark saves them."""
    vectors = m3_vectors(1000, tokens, seed=9, colbert=colbert)
    with tempfile.TemporaryDirectory() as tmp:
        vectors.save(Path(tmp) / "v")
        size = {f.stem: f.stat().st_size for f in (Path(tmp) / "v").iterdir()}
    parts = {"dense": ["dense"], "sparse": ["sparse_offsets", "sparse_ids", "sparse_weights"],
             "colbert": ["colbert_offsets", "colbert_vectors"]}
    return {k: sum(size[f] for f in files) / 1e6 for k, files in parts.items()}


def m3_worker(kind: str, n: int, n_queries: int, tokens: int, max_colbert_gb: float) -> dict:
    """One BGE-M3 measurement (``m3-dense``, ``m3-sparse``, ``m3-colbert``, ``m3-hybrid``; ``-cN`` for
    candidates), in a child process."""
    from offline_eval.retrieval.m3 import M3Retriever, SparseIndex

    match = re.fullmatch(r"(m3-[a-z]+)(?:-c(\d+))?", kind)
    if match is None:
        raise ValueError(f"unknown BGE-M3 kind {kind!r}")
    name, candidates = match.group(1), int(match.group(2) or 0)
    multi = name in ("m3-colbert", "m3-hybrid")
    colbert_bytes = n * tokens * M3_DIM * 4
    block = min(BLOCK, n)
    repeated = multi and colbert_bytes > max_colbert_gb * 1e9 and n % block == 0 and n > block
    base_mb = _peak_mb()
    t0 = time.perf_counter()
    docs = m3_vectors(n, tokens, seed=1, colbert=multi, block_chunks=block if repeated else None)
    gen_s = time.perf_counter() - t0
    queries = m3_vectors(n_queries, QUERY_TOKENS, seed=2, colbert=multi)
    retriever = M3Retriever(encoder=None)
    retriever.docs = docs
    t1 = time.perf_counter()
    if name in ("m3-sparse", "m3-hybrid"):
        retriever._sparse = SparseIndex(docs)
    build_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    retriever.search(queries, [name], 10, candidates=candidates)
    search_s = time.perf_counter() - t2
    sizes = docs.nbytes()
    part = {"m3-dense": ("dense",), "m3-sparse": ("sparse",), "m3-colbert": ("colbert",),
            "m3-hybrid": ("dense", "sparse", "colbert")}[name]
    index_bytes = sum(sizes[p] for p in part) if not repeated else \
        sum(sizes[p] for p in part if p != "colbert") + colbert_bytes + (n + 1) * 8
    return {"retriever": kind, "n_chunks": n, "n_queries": n_queries, "generate_s": gen_s, "build_s": build_s,
            "index_only_s": build_s, "save_s": 0.0, "search_s": search_s,
            "queries_per_s": n_queries / search_s if search_s else None, "peak_mb": _peak_mb(), "base_mb": base_mb,
            "index_mb": index_bytes / 1e6, "index_mb_per_1k": index_bytes / 1e6 / (n / 1000),
            "repeated_block": repeated, "tokens_per_chunk": tokens, "candidates": candidates}


def model_cost(sample: int, tokens: int, threads: int | None = None) -> dict:
    """Chunks/s of one BGE-M3 pass (all three outputs) vs sentence-transformers' dense-only pass, and
    pairs/s of a cross-encoder, on randomly initialised XLM-RoBERTa-large models (CPU)."""
    import torch

    from offline_eval.retrieval.m3 import M3Encoder
    from offline_eval.retrieval.rerank import CrossEncoderScorer
    from tests import tiny_models

    if threads:
        torch.set_num_threads(threads)
    large = dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                 vocab_size=M3_VOCAB, max_position_embeddings=8194, initializer_range=0.02)
    words = _vocabulary()
    texts = synthetic_texts(sample, tokens - 2, seed=5)  # one piece per made-up word, plus <s> and </s>
    question = " ".join(synthetic_texts(1, QUERY_TOKENS - 2, seed=6))
    out: dict = {"sample": sample, "tokens_per_chunk": tokens, "torch_threads": torch.get_num_threads()}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        folder = tiny_models.build_m3(Path(tmp) / "m3", words=words, **large)
        out["build_m3_s"] = time.perf_counter() - t0
        encoder = M3Encoder(folder, batch_size=8, max_length=512)
        out["measured_tokens"] = float(np.mean([len(x) for x in encoder.tokenizer(texts)["input_ids"]]))
        encoder.encode(texts[:2])  # warm-up
        t1 = time.perf_counter()
        encoder.encode(texts)
        out["m3_chunks_per_s"] = sample / (time.perf_counter() - t1)
        del encoder
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
        st.encode(texts[:2], batch_size=8)
        t2 = time.perf_counter()
        st.encode(texts, batch_size=8)
        out["dense_only_chunks_per_s"] = sample / (time.perf_counter() - t2)
        del st
        shutil.rmtree(folder)
        pairs = [(question, t) for t in texts]
        # bge-reranker-v2-m3's shape, then ms-marco-MiniLM-L-6-v2's (a BERT of 6 layers × 384: the same
        # arithmetic in an XLM-R class; its embedding table is the test tokenizer's, a lookup either way)
        minilm = dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
                      max_position_embeddings=514, initializer_range=0.02)  # vocabulary: the tokenizer's
        for label, shape in (("rerank", large), ("rerank_minilm", minilm)):
            ce = tiny_models.build_cross_encoder(Path(tmp) / label, words=words, **shape)
            scorer = CrossEncoderScorer(ce, batch_size=8, max_length=512)
            scorer.score(pairs[:2])
            t3 = time.perf_counter()
            scorer.score(pairs)
            out[f"{label}_pairs_per_s"] = sample / (time.perf_counter() - t3)
            out[f"{label}_100_s_per_query"] = 100 / out[f"{label}_pairs_per_s"]
            del scorer
            shutil.rmtree(ce)
    return out


def encoding_cost(sample: int) -> dict | None:
    """Chunks per second of the starter embedder on ``sample`` real-length synthetic chunks."""
    from offline_eval.retrieval.dense import load_embedder, starter_embedder_path

    path = starter_embedder_path()
    if path is None:
        return None
    encoder = load_embedder(path)
    texts = synthetic_texts(sample, WORDS_PER_CHUNK, seed=5)
    encoder.encode_texts(texts[:8])  # warm-up
    t0 = time.perf_counter()
    encoder.encode_texts(texts)
    secs = time.perf_counter() - t0
    return {"sample": sample, "seconds": secs, "chunks_per_s": sample / secs}


def _growth(rows: list[dict], key: str) -> dict[tuple[str, int], float]:
    out = {}
    for kind in dict.fromkeys(r["retriever"] for r in rows):
        series = [r for r in rows if r["retriever"] == kind]
        for a, b in zip(series, series[1:]):
            if a[key] > 0 and b[key] > 0:
                out[(kind, b["n_chunks"])] = math.log(b[key] / a[key]) / math.log(b["n_chunks"] / a["n_chunks"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="chunk counts (add 1000000 for 1M)")
    parser.add_argument("--queries", type=int, default=1000, help="queries per measurement")
    parser.add_argument("--retrievers", default="bm25,dense")
    parser.add_argument("--encode-sample", type=int, default=0,
                        help="also time the starter embedder on this many chunks (0: skip)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument("--m3-tokens", type=int, default=128, help="BGE-M3 tokens per chunk (default 128)")
    parser.add_argument("--colbert-queries", type=int, default=16,
                        help="queries for the exhaustive m3-colbert / m3-hybrid (default 16: ~0.3 s each at 10k)")
    parser.add_argument("--max-colbert-gb", type=float, default=6.0,
                        help="largest multi-vector matrix actually built; above it a 10k block is repeated")
    parser.add_argument("--m3-cost-sample", type=int, default=0,
                        help="also time XLM-R-large-sized BGE-M3 and cross-encoder passes on this many chunks")
    parser.add_argument("--out", type=Path, default=None,
                        help="write OUT.json and OUT.md (benchmarks/_results.py), e.g. benchmarks/results/x")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.worker.startswith("m3-"):
            print(json.dumps(m3_worker(args.worker, args.n, args.queries, args.m3_tokens, args.max_colbert_gb)))
        else:
            print(json.dumps(worker(args.worker, args.n, args.queries)))
        return 0
    load_at_start = os.getloadavg()[0]
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rows = []
    for kind in [r.strip() for r in args.retrievers.split(",") if r.strip()]:
        exhaustive_multi = kind in ("m3-colbert", "m3-hybrid")
        n_queries = args.colbert_queries if exhaustive_multi else args.queries
        for n in sizes:
            proc = subprocess.run([sys.executable, __file__, "--worker", kind, "--n", str(n),
                                   "--queries", str(n_queries), "--m3-tokens", str(args.m3_tokens),
                                   "--max-colbert-gb", str(args.max_colbert_gb)], capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{kind} at {n}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
                continue
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            r = rows[-1]
            print(f"  measured {kind:15s} n={n:>8d}: build {r['build_s']:.2f}s, "
                  f"{r['queries_per_s']:.0f} q/s, peak {r['peak_mb']:.0f} MB", file=sys.stderr)
    g_build = _growth(rows, "build_s")
    g_search = _growth(rows, "search_s")
    head = ("retriever", "chunks", "build s", "(index s)", "(save s)", "queries/s", "ms/query",
            "peak MB", "data MB", "build ∝ n^", "search ∝ n^")
    print("  ".join(head))
    for r in rows:
        key = (r["retriever"], r["n_chunks"])
        print("  ".join([
            f"{r['retriever']:9s}", f"{r['n_chunks']:>6d}", f"{r['build_s']:7.2f}", f"{r['index_only_s']:9.2f}",
            f"{r['save_s']:8.2f}", f"{r['queries_per_s']:9.0f}", f"{1000 / r['queries_per_s']:8.2f}",
            f"{r['peak_mb']:7.0f}", f"{r['base_mb']:7.0f}",
            f"{g_build[key]:10.2f}" if key in g_build else f"{'-':>10s}",
            f"{g_search[key]:11.2f}" if key in g_search else f"{'-':>11s}"]))
    print("data MB: resident memory after generating the synthetic corpus, before indexing; "
          "dense vectors are random unit vectors (encoding timed separately).")
    enc = encoding_cost(args.encode_sample) if args.encode_sample else None
    if enc:
        print(f"starter embedder (all-MiniLM-L6-v2, CPU): {enc['chunks_per_s']:.1f} chunks/s on "
              f"{enc['sample']} chunks of ~{WORDS_PER_CHUNK} words -> "
              + ", ".join(f"{n:,} chunks ≈ {n / enc['chunks_per_s'] / 3600:.2f} h" for n in sizes))
    disk = _disk_mb_per_1k(args.m3_tokens, colbert=True) if any(r["retriever"].startswith("m3-") for r in rows) \
        else None
    if disk:
        print(f"BGE-M3 arrays on disk per 1k chunks of {args.m3_tokens} tokens: "
              + ", ".join(f"{k} {v:.1f} MB" for k, v in disk.items()))
    cost = model_cost(args.m3_cost_sample, args.m3_tokens) if args.m3_cost_sample else None
    if cost:
        print(f"XLM-R-large-sized models, CPU, {cost['torch_threads']} threads, ~{cost['measured_tokens']:.0f}-token "
              f"chunks: BGE-M3 all three outputs {cost['m3_chunks_per_s']:.2f} chunks/s, dense only "
              f"(sentence-transformers) {cost['dense_only_chunks_per_s']:.2f} chunks/s; cross-encoder "
              f"{cost['rerank_pairs_per_s']:.2f} pairs/s -> {cost['rerank_100_s_per_query']:.0f} s per query at depth 100 "
              f"(MiniLM-L6-sized: {cost['rerank_minilm_pairs_per_s']:.1f} pairs/s, "
              f"{cost['rerank_minilm_100_s_per_query']:.1f} s per query)")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "encoding": enc, "m3_disk_mb_per_1k": disk,
                                         "model_cost": cost}, indent=1), encoding="utf-8")
    if args.out:
        _write_markdown(args, rows, disk, cost, enc, load_at_start)
    return 0


def _write_markdown(args: argparse.Namespace, rows: list[dict], disk: dict | None, cost: dict | None,
                    enc: dict | None, load: float) -> None:
    """The figures as ``args.out``.json and .md, through the benchmarks' shared writer."""
    from _results import write_results  # benchmarks/ is the script's folder

    meta = {"date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), "
            f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB",
            "load_average_at_start": load, "load_average_at_end": os.getloadavg()[0],
            "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
            "m3_disk_mb_per_1k": disk, "model_cost": cost, "encoding": enc}
    notes = [f"load average at end {meta['load_average_at_end']:.2f} (shared machine: times are upper bounds)",
             f"BGE-M3 shapes: dense and multi-vector rows of {M3_DIM} float32, {args.m3_tokens} tokens per chunk, "
             f"{QUERY_TOKENS} per query; top-10; exhaustive multi-vector on {args.colbert_queries} queries, the rest on "
             f"{args.queries}",
             "'repeated': the multi-vector matrix would not fit here; a 10k-chunk block searched as if repeated "
             "(the search time of the full matrix in memory; peak MB is the block's)"]
    if disk:
        notes.append("arrays on disk per 1k chunks: " + ", ".join(f"{k} {v:.1f} MB" for k, v in disk.items()))
    if cost:
        notes.append(f"model side, random XLM-R-large-sized models on this CPU ({cost['torch_threads']} threads, "
                     f"~{cost['measured_tokens']:.0f}-token chunks, {cost['sample']} chunks): BGE-M3 one pass for all "
                     f"three outputs {cost['m3_chunks_per_s']:.2f} chunks/s vs dense only "
                     f"{cost['dense_only_chunks_per_s']:.2f}; cross-encoder of bge-reranker-v2-m3's size "
                     f"{cost['rerank_pairs_per_s']:.2f} pairs/s = {cost['rerank_100_s_per_query']:.0f} s per query to "
                     f"rerank 100, of ms-marco-MiniLM-L-6-v2's size {cost['rerank_minilm_pairs_per_s']:.1f} pairs/s = "
                     f"{cost['rerank_minilm_100_s_per_query']:.1f} s per query")
    header = ["retriever", "chunks", "index MB", "MB / 1k chunks", "build s", "queries", "queries/s", "ms/query",
              "peak MB", "note"]
    cells = [[r["retriever"], f"{r['n_chunks']:,}", f"{r.get('index_mb', float('nan')):,.0f}",
              f"{r.get('index_mb_per_1k', float('nan')):,.1f}", f"{r['build_s']:.2f}", r.get("n_queries", args.queries),
              f"{r['queries_per_s']:,.1f}", f"{1000 / r['queries_per_s']:,.1f}", f"{r['peak_mb']:,.0f}",
              "repeated" if r.get("repeated_block") else ""] for r in rows]
    kinds = ", ".join(dict.fromkeys(r["retriever"] for r in rows))
    write_results(args.out, f"Retriever index scale ({kinds})", meta, notes, header, cells, rows)


if __name__ == "__main__":
    raise SystemExit(main())
