"""How the benchmark's BM25 and dense retrievers scale: build time, query throughput, peak memory.

    python benchmarks/retrieval_scale.py                      # 10k and 100k chunks
    python benchmarks/retrieval_scale.py --sizes 10000,100000,1000000
    python benchmarks/retrieval_scale.py --encode-sample 256  # also time the real embedder

Corpus: synthetic English-like chunks of ~100 words drawn from a Zipf(1.1) vocabulary of 50k made-up
words (seeded, so every run sees the same text); queries are 6 words drawn the same way.

- BM25: the benchmark's own :class:`~offline_eval.retrieval.bm25.BM25Retriever` (tokenise, stem,
  bm25s index), then ``--queries`` queries searched at top-10 one by one, as the benchmark does.
- Dense: the :class:`~offline_eval.retrieval.dense.DenseRetriever` search over *precomputed random
  unit vectors* (384-d float32, the size of all-MiniLM-L6-v2) — encoding 1M chunks with a real model
  on a CPU would take hours, so the encoding cost is measured separately on ``--encode-sample`` real
  chunks with the starter embedder and reported per chunk and extrapolated. "Build" for dense is
  producing and saving the matrix (``np.save``) the way the benchmark persists it.

Each (retriever, size) runs in its own child process so ``ru_maxrss`` is that run's peak resident
memory; the table also shows the growth exponent between successive sizes (time ∝ n^e).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
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
    for kind in ("bm25", "dense"):
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
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.n, args.queries)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rows = []
    for kind in [r.strip() for r in args.retrievers.split(",") if r.strip()]:
        for n in sizes:
            proc = subprocess.run([sys.executable, __file__, "--worker", kind, "--n", str(n),
                                   "--queries", str(args.queries)], capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{kind} at {n}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
                continue
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            r = rows[-1]
            print(f"  measured {kind:5s} n={n:>8d}: build {r['build_s']:.2f}s, "
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
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "encoding": enc}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
