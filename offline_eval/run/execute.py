"""Executing a built run: the one function ``offline-eval run``, the Python API and the commands that
score along the way (agreement, retrieval --answer) all call.

    run = build_run(config)                                  # offline_eval.run.config: data only
    done = run_dataset(run, samples, "runs/today", cache=cache)
    done.output.summary, done.gate_failures                  # empty: every --fail-under gate passed

It runs in this process (:func:`offline_eval.run.runner.run_in_process`) or sharded over Ray
(:func:`offline_eval.run.ray_engine.run_with_ray`) as the configuration says, then checks the run's gates
(``fail_under``, ``max_unscored``) against the summary it wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from offline_eval.data.schema import Sample
from offline_eval.engine.cache import ResultCache
from offline_eval.engine.executor import ProgressFactory
from offline_eval.records import ResultRow
from offline_eval.run.config import Run
from offline_eval.run.folder import RunOutput

__all__ = ["RunDone", "run_dataset", "execute", "check_gates"]


@dataclass
class RunDone:
    """A finished run: what it left in its folder, and its gates (empty when it has none)."""

    output: RunOutput
    gate_lines: list[str] = field(default_factory=list)  # per gated metric: the rows its mean rests on
    gate_failures: list[str] = field(default_factory=list)  # one line per gate that failed


def run_dataset(run: Run, samples: list[Sample], output: str | Path, *, cache: ResultCache | None = None,
                progress: ProgressFactory | None = None, run_info: Mapping[str, Any] | None = None,
                on_sample: Callable[[ResultRow], None] | None = None,
                on_close: Callable[[RunOutput], None] | None = None) -> RunDone:
    """Score ``samples`` into the run folder ``output`` (:func:`execute`), then check the run's gates
    against its summary (:func:`check_gates`)."""
    result = execute(run, samples, output, cache=cache, progress=progress, run_info=run_info,
                     on_sample=on_sample, on_close=on_close)
    lines, failures = check_gates(run, result.summary)
    return RunDone(result, lines, failures)


def execute(run: Run, samples: list[Sample], output: str | Path, *, cache: ResultCache | None = None,
            progress: ProgressFactory | None = None, run_info: Mapping[str, Any] | None = None,
            on_sample: Callable[[ResultRow], None] | None = None,
            on_close: Callable[[RunOutput], None] | None = None) -> RunOutput:
    """Score ``samples`` into the run folder ``output`` (resumed when it holds this run already), in
    this process or on Ray, as ``run.config.ray`` says. ``run_info`` adds to what run.json records;
    ``on_close`` is called with the output while the run still holds its folder."""
    info = {**run.info, **(run_info or {})}
    config = run.config
    shared = dict(cache=cache, aggregate=run.aggregate, per_row=config.per_row, progress=progress,
                  run_info=info, on_sample=on_sample, calibrations=run.calibrations, overwrite=config.overwrite)
    if config.ray is None:
        from offline_eval.run.runner import DEFAULT_WINDOW, run_in_process

        return run_in_process(samples, run.metrics, run.models, run.settings, output, on_close=on_close,
                              window=config.window or DEFAULT_WINDOW, **shared)
    from offline_eval.run.ray_engine import run_with_ray

    choice, ray = config.models, config.ray
    choice = replace(choice, profile=choice.profile or run.models.profile.name)  # every replica the same
    result = run_with_ray(samples, run.metrics, run.settings, choice, output, roles=run.models.roles,
                          address=ray.address, replicas=ray.replicas, gpus_per_replica=ray.gpus_per_replica,
                          node_cache=ray.node_cache, **shared)
    if on_close:
        on_close(result)
    return result


def check_gates(run: Run, summary: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The run's gates against its summary: one line per gated metric (what its mean rests on) and one
    per failed gate; both empty when the run has no ``fail_under``."""
    gates = dict(run.config.fail_under)
    if not gates:
        return [], []
    from offline_eval.report.gating import check_thresholds, gate_lines
    from offline_eval.thresholds import DEFAULT_MAX_UNSCORED

    limit = DEFAULT_MAX_UNSCORED if run.config.max_unscored is None else run.config.max_unscored
    return (gate_lines(summary, gates, max_unscored=limit),
            check_thresholds(summary, gates, max_unscored=limit))
