"""Retriever benchmark: chunk a corpus, index it with BM25 / dense / hybrid / BGE-M3 retrievers, rerank, score.

Modules:

- :mod:`~offline_eval.retrieval.corpus` — documents from a folder (.txt/.md/.html/.pdf/.docx) or a JSONL.
- :mod:`~offline_eval.retrieval.chunking` — token-budget chunks cut at sentence boundaries (en + zh).
- :mod:`~offline_eval.retrieval.bm25`, :mod:`~offline_eval.retrieval.dense`,
  :mod:`~offline_eval.retrieval.hybrid` — the retrievers, each persisting its index.
- :mod:`~offline_eval.retrieval.m3` — BGE-M3's dense, sparse, multi-vector and hybrid retrievers from
  one encoder pass.
- :mod:`~offline_eval.retrieval.rerank` — a cross-encoder second stage over any retriever's top-N.
- :mod:`~offline_eval.retrieval.ir_metrics` — qrels readers and Recall/Precision/Hit/MRR/nDCG/MAP@k.
- :mod:`~offline_eval.retrieval.bench` — the benchmark itself (tables, per-query file, plot, tests); its
  command is :mod:`offline_eval.cli.retrieval`.

Nothing here imports torch at module import time; the dense retriever, BGE-M3 and the reranker load
their models lazily and only when an output is missing from the on-disk caches.
"""

# The retriever names the benchmark knows (kept here, import-free, for the CLI's argument parsing).
RETRIEVERS = ("bm25", "dense", "hybrid", "m3-dense", "m3-sparse", "m3-colbert", "m3-hybrid")
DEFAULT_RETRIEVERS = ("bm25", "dense", "hybrid")
