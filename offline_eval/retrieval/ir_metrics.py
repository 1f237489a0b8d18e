"""Relevance judgements (qrels) and the standard ranking metrics at cut-off k.

Definitions (identical to ``ranx`` / ``trec_eval``; a document is relevant when its grade is >= 1):

- ``recall@k``    = relevant in the top k / all relevant
- ``precision@k`` = relevant in the top k / k (k, not the run length)
- ``hit@k``       = 1 when any relevant document is in the top k
- ``mrr@k``       = 1 / rank of the first relevant document in the top k, else 0
- ``ndcg@k``      = DCG@k / IDCG@k with linear gains (Järvelin & Kekäläinen): Σ grade_i / log2(i + 1)
- ``map@k``       = Σ over relevant ranks i <= k of precision@i, divided by all relevant

Queries whose qrels hold no relevant document are left out (unscored), as trec_eval does. No hit is
ever dropped because its id equals the query id — BEIR's evaluator does that by default, which is wrong
for corpora where a query's own document is a legitimate answer.

Qrels files: TREC (``qid iter docid grade``, or ``qid docid grade``), BEIR TSV with a
``query-id corpus-id score`` header (or a BEIR dataset folder, read from ``qrels/test.tsv``), or JSON
``{qid: {docid: grade}}``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from offline_eval.data.schema import DataError

Qrels = dict[str, dict[str, int]]
METRICS = ("recall", "precision", "hit", "mrr", "ndcg", "map")


def load_qrels(path: str | Path, split: str = "test") -> Qrels:
    """Read qrels in TREC, BEIR (TSV or dataset folder) or JSON layout."""
    src = Path(path)
    if src.is_dir():
        candidates = [src / "qrels" / f"{split}.tsv", src / f"{split}.tsv"]
        found = next((c for c in candidates if c.exists()), None)
        if found is None:
            raise DataError(f"no qrels/{split}.tsv in the BEIR folder", source=str(src))
        src = found
    if not src.exists():
        raise DataError("qrels file not found", source=str(src))
    text = src.read_text(encoding="utf-8")
    if src.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"invalid JSON qrels ({exc.msg})", source=str(src)) from None
        return {str(q): {str(d): int(g) for d, g in docs.items()} for q, docs in data.items()}
    qrels: Qrels = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("\t") if "\t" in line else line.split()
        parts = [p.strip() for p in parts]
        if n == 1 and not _is_int(parts[-1]):
            continue  # BEIR header "query-id corpus-id score"
        if len(parts) == 4:
            qid, _iteration, doc, grade = parts
        elif len(parts) == 3:
            qid, doc, grade = parts
        else:
            raise DataError("expected 'qid iter docid grade' or 'qid docid grade'", source=str(src),
                            row=n)
        if not _is_int(grade):
            raise DataError(f"relevance grade '{grade}' is not an integer", source=str(src), row=n)
        qrels.setdefault(qid, {})[doc] = int(float(grade))
    if not qrels:
        raise DataError("no judgements in the qrels file", source=str(src))
    return qrels


def _is_int(value: str) -> bool:
    try:
        return float(value).is_integer()
    except ValueError:
        return False


def dedupe(ids: Iterable[str]) -> list[str]:
    """``ids`` without repeats, first occurrence kept (chunk ranking -> document ranking)."""
    seen: set[str] = set()
    out = []
    for item in ids:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def query_metrics(ranking: Sequence[str], judgements: Mapping[str, int],
                  ks: Sequence[int]) -> dict[str, float] | None:
    """``{"recall@5": ..., "ndcg@10": ...}`` for one query; None when nothing is relevant.

    ``ranking`` is best-first and should hold no duplicates (see :func:`dedupe`).
    """
    relevant = {doc: grade for doc, grade in judgements.items() if grade >= 1}
    if not relevant:
        return None
    n_rel = len(relevant)
    ideal = sorted(relevant.values(), reverse=True)
    out: dict[str, float] = {}
    for k in ks:
        top = ranking[:k]
        hits = 0
        first = 0
        dcg = 0.0
        ap = 0.0
        for i, doc in enumerate(top, start=1):
            grade = relevant.get(doc)
            if grade is None:
                continue
            hits += 1
            if not first:
                first = i
            dcg += grade / math.log2(i + 1)
            ap += hits / i
        idcg = sum(g / math.log2(i + 1) for i, g in enumerate(ideal[:k], start=1))
        out[f"recall@{k}"] = hits / n_rel
        out[f"precision@{k}"] = hits / k
        out[f"hit@{k}"] = 1.0 if hits else 0.0
        out[f"mrr@{k}"] = 1.0 / first if first else 0.0
        out[f"ndcg@{k}"] = dcg / idcg if idcg > 0 else 0.0
        out[f"map@{k}"] = ap / n_rel
    return out
