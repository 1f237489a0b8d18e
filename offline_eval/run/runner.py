"""One evaluation run: samples × metrics through the engine, window by window, resumable.

The dataset is taken in windows of rows (``window``): every stage is batched across a window, and a
window's finished samples are appended to ``results.jsonl`` (and fsynced) before the next starts, so
memory stays flat as the dataset grows and a killed run keeps every finished window. The model-work
cache (SQLite) makes every finished request free on a rerun, so a kill loses at most the batch in
flight. The folder itself (lock, resume, refusing another run's files) is
:class:`~offline_eval.run.folder.RunFolder`.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import time
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from offline_eval import reasons
from offline_eval.people.calibration import Calibration, annotate_row, calibration_entries, find_calibration
from offline_eval.conversations import conversation_summary
from offline_eval.data.schema import Sample
from offline_eval.engine.cache import ResultCache
from offline_eval.engine.executor import Engine, ProgressFactory, Task
from offline_eval.engine.models import Models
from offline_eval.judging.settings import EvalSettings
from offline_eval.metrics.aggregate import Aggregate
from offline_eval.metrics.base import Metric, Score, as_score, most_window_steps, returns
from offline_eval.metrics.base import start as start_metric
from offline_eval.records import ResultRow, RunSummary
from offline_eval.run.folder import RunFolder, RunOutput
from offline_eval.runlog import RESULTS, RUN_INFO, SUMMARY
from offline_eval.stats import summarize

log = logging.getLogger(__name__)

__all__ = ["RUN_INFO", "RESULTS", "SUMMARY", "DEFAULT_WINDOW", "RunOutput", "RunSink", "run_in_process",
           "run_fingerprint", "finish_run"]

# Rows per window: the engine's cost per row stays flat and windows keep the batching gain (measured in
# docs/measurements.md, "Engine overhead and memory by dataset size" and "Windows vs the whole dataset in
# one window").
DEFAULT_WINDOW = 1024
# Allocations between two young-generation collections while a run is scored (Python's default: 700).
GC_THRESHOLD = 50_000


@contextmanager
def fewer_collections(threshold: int = GC_THRESHOLD):
    """The cyclic garbage collector tuned to the engine's pattern for the length of a run.

    A stage creates tens of thousands of requests that live until it ends; with Python's defaults they
    set off a young collection every 700 allocations, survive it, and soon a full collection that walks
    every object alive, the dataset and the models included: a large share of the engine's own time in
    benchmarks/engine_scale.py's scripted run.

    Everything alive when the run starts is frozen out of collection (``gc.freeze``; not when the caller
    froze objects already, whose choice it keeps) and young collections come every ``threshold``
    allocations; both are undone after. What it saves per row: docs/measurements.md, "Engine overhead
    and memory by dataset size".
    """
    old = gc.get_threshold()
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    gc.set_threshold(threshold, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        if freeze:
            gc.unfreeze()


def run_fingerprint(samples: list[Sample], metrics: list[Metric], settings: EvalSettings,
                    identities: dict[str, str], aggregate: bool) -> str:
    digest = hashlib.sha256()  # sample by sample: no dataset-sized string in memory
    for sample in samples:
        digest.update(json.dumps(sample.to_dict(), sort_keys=True, ensure_ascii=False, default=str).encode())
        digest.update(b"\n")
    payload = {
        "samples": digest.hexdigest(),
        "metrics": [[m.name, m.config()] for m in metrics],
        "aggregate": aggregate,
        "settings": settings.fingerprint(),
        "models": {r: identities[r] for r in sorted(identities)},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:20]


class RunSink:
    """Where a run's finished rows go, whoever scores them (this process window by window, or Ray's
    replicas shard by shard): opened with the run's fingerprint on a locked folder (what the folder
    already holds of this run is ``done``; ``todo`` is the rest), fed rows as they finish, and finished
    into summary.json with the calibrations that apply."""

    def __init__(self, folder: RunFolder, samples: list[Sample], metrics: list[Metric], settings: EvalSettings,
                 identities: dict[str, str], aggregate: bool, run_info: dict[str, Any] | None, *,
                 overwrite: bool = False) -> None:
        self.folder, self.samples, self.metrics, self.settings = folder, samples, metrics, settings
        self.identities, self.aggregate = identities, aggregate
        self.fingerprint = run_fingerprint(samples, metrics, settings, identities, aggregate)
        self.info = {**(run_info or {}), "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                     "n_samples": len(samples),  # what "k of n scored so far" reads while the run is unfinished
                     "models": identities, "metrics": [m.name for m in metrics], "settings": settings.fingerprint(),
                     "metric_options": {m.name: m.config() for m in metrics if m.config()}}
        self.done = folder.open(self.fingerprint, self.info, overwrite=overwrite)
        self.todo = [s for s in samples if s.id not in self.done]
        self.clock = time.monotonic()  # this try's compute time, whatever the wall clock does

    def append(self, rows: list[ResultRow]) -> None:
        """Rows reach results.jsonl, fsynced, before they are reported anywhere else."""
        self.folder.append(row.to_dict() for row in rows)

    def finish(self, stats: dict[str, Any], calibrations: list[Calibration] | None,
               **facts: Any) -> RunOutput:
        """results.jsonl in dataset order and summary.json; ``facts`` are recorded in its run section."""
        return finish_run(self.folder, self.samples, self.metrics, self.aggregate,
                          {**self.info, "fingerprint": self.fingerprint, "resumed_samples": len(self.done),
                           "seconds": round(time.monotonic() - self.clock, 3), "tries": self.folder.earlier_tries,
                           "engine": stats, **facts}, stats, len(self.done),
                          applicable_calibrations(self.metrics, self.identities, self.settings, calibrations))


def run_in_process(samples: list[Sample], metrics: list[Metric], models: Models, settings: EvalSettings,
                   output_dir: str | Path, *, cache: ResultCache | None = None, aggregate: bool = False,
                   per_row: bool = False, progress: ProgressFactory | None = None,
                   run_info: dict[str, Any] | None = None,
                   on_sample: Callable[[ResultRow], None] | None = None,
                   calibrations: list[Calibration] | None = None, window: int = DEFAULT_WINDOW,
                   overwrite: bool = False, on_close: Callable[[RunOutput], None] | None = None) -> RunOutput:
    """Score ``samples`` with ``metrics`` into ``output_dir``, resuming an earlier try of the same run.

    ``on_sample(row)`` is called as each sample finishes (its row reaches results.jsonl with the rest of
    its window); ``on_close(output)`` while the folder is still locked (the CLI writes its report
    there). ``overwrite``: see :meth:`RunFolder.open`.
    """
    identities = {role: models.identity(role) for role in sorted({r for m in metrics for r in m.roles})
                  if models.has(role)}
    window = max(1, int(window))
    aggregator = Aggregate(metrics, settings.aggregate_weights) if aggregate else None

    with RunFolder(output_dir) as folder, fewer_collections():
        sink = RunSink(folder, samples, metrics, settings, identities, aggregate, run_info, overwrite=overwrite)
        engine = Engine(models, cache, progress=progress)
        windows = -(-len(sink.todo) // window)
        announce = getattr(progress, "window", None)  # a RunProgress (offline_eval.progress) follows windows
        counted = getattr(progress, "sample", None)
        scored = getattr(progress, "score", None)  # each (sample, metric) score: a window moves before its end
        saved = getattr(progress, "saved", None)  # and what results.jsonl holds (told on an interrupt)
        kept = len(sink.done)
        if saved:
            saved(kept, len(samples))

        def finished(row: ResultRow) -> None:
            if counted:
                counted(row)
            if on_sample:
                on_sample(row)

        for start in range(0, len(sink.todo), window):
            chunk = sink.todo[start:start + window]
            if announce:
                most = most_window_steps(metrics, chunk, settings)  # per_row: one row after another
                announce(start // window, windows, len(chunk), len(chunk) * len(metrics),
                         None if most is None else most * (len(chunk) if per_row else 1))
            rows = _score_window(engine, chunk, metrics, settings, aggregator, per_row,
                                 finished if (counted or on_sample) else None, scored)
            sink.append(rows)
            kept += len(rows)
            del rows  # not kept alive while the next window is scored
            if saved:
                saved(kept, len(samples))
            engine.forget()  # answers of this window stay in the cache, not in memory
        output = sink.finish(engine.stats.to_dict(), calibrations, window=window,
                             cache_repaired=getattr(cache, "repaired", 0))
        if on_close:
            on_close(output)
    return output


def _score_window(engine: Engine, window: list[Sample], metrics: list[Metric], settings: EvalSettings,
                  aggregator: Aggregate | None, per_row: bool,
                  on_sample: Callable[[ResultRow], None] | None = None,
                  on_score: Callable[[Task], None] | None = None) -> list[ResultRow]:
    """Every metric of every sample of ``window``, each stage batched across the window; rows in order,
    each with its aggregate when the run has one. ``on_score(task)`` as each metric of a sample is scored."""
    scores: dict[int, dict[str, Score]] = {}
    rows: dict[int, ResultRow] = {}

    def finish(task: Task) -> None:
        index, name = task.key
        scores.setdefault(index, {})[name] = as_score(task.result)
        if on_score:
            on_score(task)
        if len(scores[index]) == len(metrics):
            row = ResultRow.of(window[index], {m.name: scores[index][m.name] for m in metrics})
            rows[index] = aggregator.apply(row) if aggregator else row
            if on_sample:
                on_sample(rows[index])

    def tasks_for(indices) -> list[Task]:
        return [Task(key=(i, m.name), generator=_start(m, window[i], settings)) for i in indices for m in metrics]

    if per_row:
        for i in range(len(window)):
            engine.run(tasks_for([i]), on_done=finish)
    else:
        engine.run(tasks_for(range(len(window))), on_done=finish)
    return [rows[i] for i in range(len(window))]


def applicable_calibrations(metrics: list[Metric], identities: dict[str, str], settings: EvalSettings,
                            calibrations: list[Calibration] | None) -> dict[str, Calibration | None]:
    """Model-based metric -> the calibration fitted for exactly its models and settings, or None."""
    return {m.name: find_calibration(calibrations or [], m.name,
                                     {r: identities[r] for r in m.roles if r in identities}, settings, m.config())
            for m in metrics if m.roles}


def finish_run(folder: RunFolder, samples: list[Sample], metrics: list[Metric], aggregate: bool,
               run_info: dict[str, Any], stats: dict[str, Any], resumed: int,
               calibrations: dict[str, Calibration | None] | None = None) -> RunOutput:
    """Put results.jsonl in dataset order and write summary.json (streaming; see :meth:`RunFolder.finish`).

    Every column's summary entry records its direction and the values it takes
    (:attr:`Metric.higher_is_better`, :attr:`Metric.value_range`, and the aggregate's). ``calibrations``:
    metric -> the calibration that applies to it (None: none for these models); its annotations are added
    to the rows and the summary. A folder holding expert labels (labels.jsonl, offline_eval.people.labels)
    gets their estimates too (``estimates``, offline_eval.people.estimate)."""
    chosen = calibrations or {}
    directions = {m.name: m.higher_is_better for m in metrics}
    ranges = {m.name: m.value_range for m in metrics}
    if aggregate:
        directions[Aggregate.name] = Aggregate.higher_is_better
        ranges[Aggregate.name] = Aggregate.value_range
    names = list(directions)

    def summary_of(values: dict[str, list], reasons: dict[str, list],
                   rows: list[tuple[str, str | None]]) -> dict[str, Any]:
        summary = RunSummary({n: replace(summarize(values[n], reasons[n]), higher_is_better=directions[n],
                                         value_range=ranges[n]) for n in names},
                             conversations=conversation_summary([c for _, c in rows], [i for i, _ in rows], values,
                                                                directions))
        from offline_eval.people.estimate import summary_section

        # the folder's labels.jsonl, if any: what experts would say
        return replace(summary.with_calibrations(calibration_entries(chosen, values)),
                       **summary_section(folder.path)).to_dict()

    def annotated(row: dict[str, Any]) -> dict[str, Any]:
        return annotate_row(ResultRow.from_dict(row), chosen).to_dict()

    summary, _ = folder.finish({s.id: i for i, s in enumerate(samples)}, names, run_info,
                               annotate=annotated if chosen else None, summarize=summary_of)
    return RunOutput(folder.path, RunSummary.from_dict(summary), stats, resumed, list(folder.earlier_tries))


def _start(metric: Metric, sample: Sample, settings: EvalSettings):
    try:
        return start_metric(metric, sample, settings)
    except Exception as exc:  # a metric that fails before its first step
        return returns(Score.unscored(reasons.raised(exc), str(exc)))
