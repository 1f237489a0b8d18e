"""End-to-end retriever comparison (``offline-eval retrieval --answer``), as in RAGEval's Table 4.

For every (retriever, chunk size, k) the benchmark wrote an evaluation dataset of the top-k chunks;
here the judge answers each question from those chunks (one batched stage over all configurations)
and the answers are scored by the generation metrics (completeness, hallucination, faithfulness by
default) in one more engine pass, so retrievers are compared on the answers they lead to.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from offline_eval.data.readers import read_dataset
from offline_eval.data.schema import Sample
from offline_eval.engine.cache import ResultCache
from offline_eval.engine.executor import Engine, Task
from offline_eval.engine.models import Models
from offline_eval.engine.requests import Generate, Sampling
from offline_eval.judging.settings import EvalSettings
from offline_eval.judging.verdicts import number_chunks
from offline_eval.prompts.base import Prompt
from offline_eval.run.config import Run
from offline_eval.run.execute import execute

DEFAULT_ANSWER_METRICS = ("completeness", "hallucination", "faithfulness")

ANSWER = Prompt(
    name="rag_answer",
    system={"en": "You answer questions using only the documents you are given.",
            "zh": "你只根据给定的文档回答问题。"},
    template={
        "en": ("Documents:\n{documents}\n\nQuestion: {question}\n"
               "Answer concisely from the documents. If they do not contain the answer, say that you "
               "cannot answer from the documents."),
        "zh": ("文档：\n{documents}\n\n问题：{question}\n"
               "请根据文档简洁作答。如果文档中没有答案，请说明无法根据文档回答。"),
    },
)


def answer_step(sample: Sample, language: str, max_tokens: int):
    """One engine task: the judge's answer to ``sample.question`` from ``sample.contexts``."""
    out = yield Generate(prompt=ANSWER.render(language, documents=number_chunks(sample.contexts or []),
                                              question=sample.question or ""),
                         sampling=Sampling(max_tokens=max_tokens))
    return (out[0] if out else "").strip()


def generate_answers(samples: Sequence[Sample], models: Models, settings: EvalSettings, *,
                     cache: ResultCache | None = None, progress: Any = None) -> list[Sample]:
    """Copies of ``samples`` with ``answer`` written by the judge (all in one batched stage)."""
    engine = Engine(models, cache, progress=progress)
    tasks = engine.run([Task(key=i, generator=answer_step(s, settings.language_for(s), settings.max_tokens))
                        for i, s in enumerate(samples)])
    return [dataclasses.replace(s, answer=t.result if isinstance(t.result, str) else None)
            for s, t in zip(samples, tasks)]


def load_answer_datasets(folder: Path, limit: int | None = None) -> list[Sample]:
    """All per-configuration datasets of ``folder``, ids prefixed by the configuration name."""
    samples: list[Sample] = []
    for path in sorted(folder.glob("*.jsonl")):
        for s in read_dataset(path, limit=limit):
            samples.append(dataclasses.replace(s, id=f"{path.stem}/{s.id}", row=len(samples) + 1,
                                               extra={**s.extra, "config": path.stem}))
    return samples


def run_end_to_end(answer_dir: Path, output: Path, run: Run, *, cache: ResultCache | None = None,
                   limit: int | None = None, progress: Any = None) -> list[dict[str, Any]]:
    """Answer with ``run``'s judge, score with its metrics and tabulate; writes
    ``answer_results.{csv,json}`` in ``output``."""
    samples = load_answer_datasets(answer_dir, limit)
    if not samples:
        raise ValueError(f"no answer datasets in {answer_dir}")
    names = [m.name for m in run.metrics]
    answered = generate_answers(samples, run.models, run.settings, cache=cache, progress=progress)
    scored = execute(run, answered, output / "answer_eval", cache=cache, progress=progress,
                     run_info={"dataset": str(answer_dir), "end_to_end": True})
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in scored.results:
        grouped[row["sample"]["config"]].append(row)
    table = []
    for config, rows in sorted(grouped.items()):
        first = rows[0]["sample"]
        entry: dict[str, Any] = {"config": config, "retriever": first.get("retriever"),
                                 "chunk_size": first.get("chunk_size"), "n": len(rows)}
        for name in names:
            values = [r["scores"][name]["value"] for r in rows if r["scores"][name]["value"] is not None]
            entry[name] = sum(values) / len(values) if values else None
            entry[f"{name}_scored"] = len(values)
        table.append(entry)
    output.mkdir(parents=True, exist_ok=True)
    (output / "answer_results.json").write_text(json.dumps(table, indent=2), encoding="utf-8")
    with open(output / "answer_results.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    return table


def format_answer_table(table: Sequence[dict[str, Any]], names: Sequence[str]) -> str:
    head = f"{'configuration':<24}" + "".join(f"{n:>16}" for n in names)
    lines = [head, "-" * len(head)]
    for entry in table:
        cells = "".join(f"{entry[n]:>16.3f}" if entry.get(n) is not None else f"{'-':>16}" for n in names)
        lines.append(f"{entry['config']:<24}{cells}")
    return "\n".join(lines)
