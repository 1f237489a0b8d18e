"""Hybrid retrieval by reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009).

``score(d) = Σ_r 1 / (k + rank_r(d))`` over the component rankings that contain ``d`` (ranks are
1-based, ``k`` = 60 as in the paper). Only ranks are used, so BM25 and cosine scores need no
normalisation. Ties are broken by the chunk index, lowest first, so fusion is deterministic.
"""

from __future__ import annotations

from typing import Sequence

RRF_K = 60


def reciprocal_rank_fusion(rankings: Sequence[Sequence[tuple[int, float]]], depth: int,
                           k: int = RRF_K) -> list[tuple[int, float]]:
    """Fuse several best-first rankings of (chunk index, score) into one of length ``depth``."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, (idx, _score) in enumerate(ranking, start=1):
            fused[idx] = fused.get(idx, 0.0) + 1.0 / (k + rank)
    ordered = sorted(fused.items(), key=lambda item: (-item[1], item[0]))
    return ordered[:depth]


def fuse_runs(runs: Sequence[Sequence[Sequence[tuple[int, float]]]], depth: int,
              k: int = RRF_K) -> list[list[tuple[int, float]]]:
    """Per-query RRF of several runs (each a list, one best-first ranking per query)."""
    if not runs:
        return []
    n = len(runs[0])
    if any(len(run) != n for run in runs):
        raise ValueError("runs to fuse must cover the same queries")
    return [reciprocal_rank_fusion([run[q] for run in runs], depth, k) for q in range(n)]
