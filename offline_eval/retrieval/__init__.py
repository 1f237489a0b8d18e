"""Retriever benchmark: chunk a corpus, index it with BM25 / dense / hybrid retrievers, score the runs.

Modules:

- :mod:`~offline_eval.retrieval.corpus` — documents from a folder (.txt/.md/.html/.pdf/.docx) or a JSONL.
- :mod:`~offline_eval.retrieval.chunking` — token-budget chunks cut at sentence boundaries (en + zh).
- :mod:`~offline_eval.retrieval.bm25`, :mod:`~offline_eval.retrieval.dense`,
  :mod:`~offline_eval.retrieval.hybrid` — the retrievers, each persisting its index.
- :mod:`~offline_eval.retrieval.ir_metrics` — qrels readers and Recall/Precision/Hit/MRR/nDCG/MAP@k.
- :mod:`~offline_eval.retrieval.bench` — the benchmark itself (tables, per-query file, plot, tests).
- :mod:`~offline_eval.retrieval.cli` — the ``offline-eval retrieval`` subcommand.

Nothing here imports torch at module import time; the dense retriever loads its embedder lazily and
only when an embedding is missing from the on-disk cache.
"""
