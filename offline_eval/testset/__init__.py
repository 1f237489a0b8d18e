"""RAGEval-style test-set generation: ``offline-eval generate``.

schema (summarised from a few documents) -> configurations (key facts per document) -> optionally
new synthetic documents -> question / answer pairs of seven types -> references copied verbatim from
the documents (checked) -> the answer refined against them -> key points. Every stage runs through
the engine, so it is batched across the test set, cached and resumable.

Import :mod:`offline_eval.testset.pipeline` for the API; this package itself imports nothing heavy.
"""

QUESTION_TYPES = ("factual", "multi_hop", "summary", "multi_doc", "numeric", "temporal", "unanswerable")

__all__ = ["QUESTION_TYPES"]
