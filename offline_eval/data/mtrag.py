"""MT-RAG's layout (IBM's multi-turn RAG benchmark, human-evaluation files) read as rows.

One JSON object holds ``tasks`` (a conversation up to one user turn: ``input``, a list of
``{"speaker", "text"}``; the passages shown, ``contexts``, by ``document_id``; the reference answer,
``targets``), ``documents`` (``{"document_id", "text"}``) and ``evaluations`` (one system's answer to a
task, ``model_response``, with each annotator's 1-4 ratings under ``annotations``). Each evaluation
becomes one row:

* ``id``: ``<task_id>::<model_id>``; ``conversation_id``: ``<conversation>::<model_id>`` (the part of
  the task id before ``<::>``), so one system's answers across the turns of a conversation are one
  conversation;
* ``conversation``: the task's turns (the last is the user's question), ``answer``: the system's
  response, ``contexts``: the task's passages' texts in order, ``ground_truth``: the reference answer;
* kept beside them: ``turn``, ``system`` (the model id), ``task_id``, ``collection``, ``answerability``
  and, per human-rated dimension (faithfulness, completeness, appropriateness, naturalness), the
  annotators' ratings (``human_ratings``) and their median (``human``), as MT-RAG aggregates them.

So ``offline-eval run --dataset mtrag.json`` scores MT-RAG's file with no mapping.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from typing import Any

from offline_eval.data.schema import DataError

TASK_SEPARATOR = "<::>"
HUMAN_DIMENSIONS = ("faithfulness", "completeness", "appropriateness", "naturalness")


def looks_like_mtrag(document: Any) -> bool:
    """A JSON object with MT-RAG's three lists: tasks, documents and evaluations."""
    return isinstance(document, dict) and all(isinstance(document.get(k), list)
                                               for k in ("tasks", "documents", "evaluations"))


def mtrag_rows(document: dict[str, Any], source: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(row number, row)`` for each evaluation, in file order (see the module docstring)."""
    documents = {}
    for index, item in enumerate(document["documents"], start=1):
        if not isinstance(item, dict) or not isinstance(item.get("document_id"), str):
            raise DataError(f"documents item {index} has no document_id", source=source)
        documents[item["document_id"]] = str(item.get("text") or "").strip()
    tasks = {t.get("task_id"): t for t in document["tasks"] if isinstance(t, dict)}
    for number, evaluation in enumerate(document["evaluations"], start=1):
        if not isinstance(evaluation, dict):
            raise DataError("an evaluation is not an object", source=source, row=number)
        yield number, _row(evaluation, tasks, documents, source, number)


def _row(evaluation: dict[str, Any], tasks: dict[Any, dict[str, Any]], documents: dict[str, str],
         source: str, number: int) -> dict[str, Any]:
    task_id, model = evaluation.get("task_id"), str(evaluation.get("model_id") or "system")
    task = tasks.get(task_id)
    if task is None:
        raise DataError(f"task {task_id!r} is not among the file's tasks", source=source, row=number,
                        field="task_id")
    passages = []
    for ref in task.get("contexts") or []:
        doc_id = ref.get("document_id") if isinstance(ref, dict) else None
        if doc_id not in documents:
            raise DataError(f"passage {doc_id!r} is not among the file's documents", source=source, row=number,
                            field="contexts")
        passages.append(documents[doc_id])
    targets = [t.get("text") for t in task.get("targets") or [] if isinstance(t, dict) and t.get("text")]
    ratings = _ratings(evaluation.get("annotations"))
    return {
        "id": f"{task_id}::{model}",
        "conversation_id": f"{str(task_id).split(TASK_SEPARATOR)[0]}::{model}",
        "conversation": task.get("input"),
        "answer": evaluation.get("model_response"),
        "contexts": passages,
        "ground_truth": targets[0] if targets else None,
        "turn": _whole(task.get("Turn")),
        "system": model,
        "task_id": task_id,
        "collection": task.get("Collection"),
        "answerability": task.get("Answerability"),
        "human": {k: statistics.median(v) for k, v in ratings.items()},
        "human_ratings": ratings,
    }


def _ratings(annotations: Any) -> dict[str, list[int]]:
    """Per human-rated dimension, the annotators' 1-4 ratings (in the order given)."""
    out: dict[str, list[int]] = {}
    for dimension in HUMAN_DIMENSIONS:
        by_annotator = annotations.get(dimension) if isinstance(annotations, dict) else None
        if not isinstance(by_annotator, dict):
            continue
        values = [_whole(v.get("value")) for v in by_annotator.values() if isinstance(v, dict)]
        if values := [v for v in values if v is not None]:
            out[dimension] = values
    return out


def _whole(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
