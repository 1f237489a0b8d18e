"""One evaluation run: samples × metrics through the engine, written as they finish, resumable.

Output folder:
  results.jsonl  one line per finished sample (appended as samples finish, sorted by row at the end)
  summary.json   run information and per-metric statistics
  run.json       the run's fingerprint: a rerun with the same fingerprint resumes
The model-work cache (SQLite) makes every finished request free on a rerun, so a run killed at any
point loses nothing but the batch in flight.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from offline_eval.calibration import Calibration, calibrate_rows, find_calibration
from offline_eval.data.schema import Sample
from offline_eval.engine.cache import ResultCache
from offline_eval.engine.executor import Engine, ProgressFactory, Task
from offline_eval.engine.models import ModelSet
from offline_eval.metrics import AGGREGATE
from offline_eval.metrics.base import Metric, Score
from offline_eval.metrics.settings import EvalSettings
from offline_eval.stats import summarize

log = logging.getLogger(__name__)

RESULTS, SUMMARY, FINGERPRINT = "results.jsonl", "summary.json", "run.json"


@dataclass
class RunOutput:
    output_dir: Path
    results: list[dict[str, Any]]
    summary: dict[str, Any]
    stats: dict[str, Any] = field(default_factory=dict)
    resumed: int = 0


def aggregate_score(scores: dict[str, Score], weights: dict[str, float]) -> Score:
    """Weighted harmonic mean of a sample's scored metrics (Ragas' original ragas_score)."""
    parts = {n: s.value for n, s in scores.items()
             if s.value is not None and (not weights or n in weights) and 0.0 <= s.value <= 1.0}
    if not parts:
        return Score.unscored("no_scored_metric", "no metric of the aggregate was scored")
    w = {n: float(weights.get(n, 1.0)) if weights else 1.0 for n in parts}
    if any(v == 0.0 and w[n] > 0 for n, v in parts.items()):
        value = 0.0
    else:
        value = sum(w.values()) / sum(w[n] / v for n, v in parts.items() if w[n] > 0)
    return Score(value, metadata={"parts": parts, "weights": w})


def run_fingerprint(samples: list[Sample], metrics: list[Metric], settings: EvalSettings,
                    identities: dict[str, str], aggregate: bool) -> str:
    payload = {
        "samples": hashlib.sha256(json.dumps([s.to_dict() for s in samples], sort_keys=True,
                                             ensure_ascii=False, default=str).encode()).hexdigest(),
        "metrics": [[m.name, m.config()] for m in metrics],
        "aggregate": aggregate,
        "settings": settings.fingerprint(),
        "models": {r: identities[r] for r in sorted(identities)},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _result_row(sample: Sample, scores: dict[str, Score]) -> dict[str, Any]:
    return {"id": sample.id, "row": sample.row, "sample": sample.to_dict(),
            "scores": {name: score.to_dict() for name, score in scores.items()}}


def evaluate(samples: list[Sample], metrics: list[Metric], models: ModelSet, settings: EvalSettings,
             output_dir: str | Path, *, cache: ResultCache | None = None, aggregate: bool = False,
             per_row: bool = False, progress: ProgressFactory | None = None,
             run_info: dict[str, Any] | None = None,
             on_sample: Callable[[dict[str, Any]], None] | None = None,
             calibrations: list[Calibration] | None = None) -> RunOutput:
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    identities = {role: models.identity(role) for role in sorted({r for m in metrics for r in m.roles})
                  if models.has(role)}
    fingerprint = run_fingerprint(samples, metrics, settings, identities, aggregate)

    results_path = out / RESULTS
    done = open_run(out, fingerprint, identities)

    todo = [s for s in samples if s.id not in done]
    engine = Engine(models, cache, progress=progress)
    finished: dict[str, dict[str, Any]] = dict(done)
    names = [m.name for m in metrics]

    with open(results_path, "a", encoding="utf-8") as sink:
        pending_scores: dict[int, dict[str, Score]] = {}

        def finish(task: Task) -> None:
            index, name = task.key
            result = task.result
            if not isinstance(result, Score):
                result = Score.unscored("error:no_score", f"metric {name} returned {type(result).__name__}")
            pending_scores.setdefault(index, {})[name] = result
            if len(pending_scores[index]) == len(names):
                done_scores = pending_scores.pop(index)
                scores = {n: done_scores[n] for n in names}
                if aggregate:
                    scores[AGGREGATE] = aggregate_score(scores, settings.aggregate_weights)
                row = _result_row(todo[index], scores)
                sink.write(json.dumps(row, ensure_ascii=False) + "\n")
                sink.flush()
                finished[todo[index].id] = row
                if on_sample:
                    on_sample(row)

        def tasks_for(indices) -> list[Task]:
            return [Task(key=(i, m.name), generator=_start(m, todo[i], settings))
                    for i in indices for m in metrics]

        if per_row:
            for i in range(len(todo)):
                engine.run(tasks_for([i]), on_done=finish)
        else:
            engine.run(tasks_for(range(len(todo))), on_done=finish)
        os.fsync(sink.fileno())

    return close_run(out, samples, finished, names + ([AGGREGATE] if aggregate else []), {
        **(run_info or {}), "started": started, "models": identities, "fingerprint": fingerprint,
        "resumed_samples": len(done), "settings": settings.fingerprint(), "engine": engine.stats.to_dict()},
        engine.stats.to_dict(), len(done), applicable_calibrations(metrics, identities, settings, calibrations))


def applicable_calibrations(metrics: list[Metric], identities: dict[str, str], settings: EvalSettings,
                            calibrations: list[Calibration] | None) -> dict[str, Calibration | None]:
    """Model-based metric -> the calibration fitted for exactly its models and settings, or None."""
    return {m.name: find_calibration(calibrations or [], m.name,
                                     {r: identities[r] for r in m.roles if r in identities}, settings)
            for m in metrics if m.roles}


def open_run(out: Path, fingerprint: str, identities: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Start or resume a run folder: the rows an earlier run of this fingerprint finished.

    Results of a run with another fingerprint are set aside (renamed), never mixed in.
    """
    done = _load_finished(out, fingerprint)
    results_path = out / RESULTS
    if not done and results_path.exists():
        results_path.replace(out / f"results.{int(time.time())}.previous.jsonl")
    (out / FINGERPRINT).write_text(json.dumps({"fingerprint": fingerprint, "models": identities}, indent=2))
    return done


def close_run(out: Path, samples: list[Sample], finished: dict[str, dict[str, Any]], names: list[str],
              run_info: dict[str, Any], stats: dict[str, Any], resumed: int,
              calibrations: dict[str, Calibration | None] | None = None) -> RunOutput:
    """Rewrite results.jsonl in dataset order and write summary.json.

    ``calibrations``: metric -> the calibration that applies to it (None: none for these models);
    its annotations are added to the rows and the summary."""
    order = {s.id: s.row for s in samples}
    rows = sorted((finished[s.id] for s in samples if s.id in finished), key=lambda r: order[r["id"]])
    summary = build_summary(rows, names)
    if calibrations:
        calibrate_rows(rows, summary, calibrations)
    results_path = out / RESULTS
    tmp = results_path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(results_path)
    summary["run"] = {**run_info, "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      "metrics": names, "n_samples": len(rows)}
    (out / SUMMARY).write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    return RunOutput(out, rows, summary, stats, resumed)


def _start(metric: Metric, sample: Sample, settings: EvalSettings):
    try:
        return metric.score(sample, settings)
    except Exception as exc:  # a metric that fails before its first step
        return Score.unscored(f"error:{type(exc).__name__}", str(exc))


def _load_finished(out: Path, fingerprint: str) -> dict[str, dict[str, Any]]:
    """Samples already written by an earlier run of the same fingerprint."""
    try:
        previous = json.loads((out / FINGERPRINT).read_text())["fingerprint"]
    except (OSError, ValueError, KeyError):
        return {}
    if previous != fingerprint:
        return {}
    done: dict[str, dict[str, Any]] = {}
    try:
        with open(out / RESULTS, encoding="utf-8") as handle:
            for line in handle:
                try:
                    row = json.loads(line)
                except ValueError:  # a line cut short by a kill
                    continue
                done[str(row["id"])] = row
    except OSError:
        return {}
    return done


def build_summary(rows: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    metrics = {}
    for name in names:
        scores = [r["scores"].get(name, {}) for r in rows]
        metrics[name] = summarize([s.get("value") for s in scores],
                                  [s.get("reason") if s.get("value") is None else None for s in scores]).to_dict()
    return {"metrics": metrics}
