"""Benchmark queries: question, id, language and (optionally) reference passages.

Read through the project's dataset reader (:func:`offline_eval.data.readers.read_dataset`) so every
input format and the RAGEval layout work the same as for ``offline-eval run``. BEIR ``queries.jsonl``
(``{"_id", "text"}``) is read here directly, and so is plain JSONL while the shared reader is not
available (a small adapter, swapped out automatically once it is).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offline_eval.data.schema import FIELD_ALIASES, DataError


@dataclass
class Query:
    """One benchmark query."""

    id: str
    question: str
    references: list[str] | None = None  # reference passages (RAGEval ``ground_truth.references``)
    ground_truth: str | None = None
    language: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def load_queries(path: str | Path) -> list[Query]:
    """Queries of a BEIR ``queries.jsonl``, or of any dataset the shared reader understands."""
    src = Path(path)
    if src.is_dir() and (src / "queries.jsonl").exists():
        src = src / "queries.jsonl"
    if not src.exists():
        raise DataError("queries file not found", source=str(src))
    if src.suffix.lower() in (".jsonl", ".ndjson") and _is_beir_queries(src):
        return _read_beir(src)
    try:
        from offline_eval.data.readers import read_dataset  # type: ignore[import-not-found]
    except ImportError:
        return _read_jsonl(src)
    queries = []
    for sample in read_dataset(src):
        if not sample.question:
            raise DataError("query has no question", source=str(src), row=sample.row, field="question")
        queries.append(Query(str(sample.id), sample.question, sample.reference_contexts,
                             sample.ground_truth, sample.language, dict(sample.extra)))
    _check_unique(queries, src)
    return queries


def _check_unique(queries: list[Query], src: Path) -> None:
    seen: set[str] = set()
    for q in queries:
        if q.id in seen:
            raise DataError(f"duplicate query id '{q.id}'", source=str(src))
        seen.add(q.id)


def _is_beir_queries(src: Path) -> bool:
    with src.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    return False
                return isinstance(row, dict) and "_id" in row and "text" in row
    return False


def _read_beir(src: Path) -> list[Query]:
    out = []
    with src.open(encoding="utf-8") as handle:
        for n, line in enumerate(handle, start=1):
            if line.strip():
                row = json.loads(line)
                extra = {k: v for k, v in row.items() if k not in ("_id", "text")}
                out.append(Query(str(row["_id"]), str(row["text"]), extra=extra))
    _check_unique(out, src)
    return out


def _alias(row: dict[str, Any], name: str) -> Any:
    for alias in FIELD_ALIASES[name]:
        if row.get(alias) is not None:
            return row[alias]
    return None


def _read_jsonl(src: Path) -> list[Query]:
    """Fallback JSONL reader: flat rows with the schema's aliases, or the RAGEval layout."""
    out = []
    with src.open(encoding="utf-8") as handle:
        for n, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"invalid JSON ({exc.msg})", source=str(src), row=n) from None
            if isinstance(row.get("query"), dict):  # RAGEval layout
                query, truth = row["query"], row.get("ground_truth") or {}
                qid = query.get("query_id", n)
                question = query.get("content")
                references = truth.get("references")
                ground_truth = truth.get("content")
                extra = {"query_type": query.get("query_type"), "doc_ids": truth.get("doc_ids"),
                         "domain": row.get("domain")}
            else:
                qid = row.get("id", row.get("query_id", n))
                question = _alias(row, "question")
                references = _alias(row, "reference_contexts")
                ground_truth = _alias(row, "ground_truth")
                extra = {k: v for k, v in row.items() if k not in ("id", "question", "language")}
            if not isinstance(question, str) or not question.strip():
                raise DataError("query has no question", source=str(src), row=n, field="question")
            out.append(Query(str(qid), question, references, ground_truth, row.get("language"), extra))
    _check_unique(out, src)
    return out
