"""The Python API: `offline_eval.evaluate(data, metrics)` in a notebook or a script.

    import offline_eval

    models = offline_eval.load_models(profile="cpu")           # loaded on first use, reused by every call
    result = offline_eval.evaluate("data.jsonl", ["faithfulness", "answer_relevancy"], models=models)
    result.to_pandas()                                        # a row per sample, a column per metric
    result.summary["metrics"]["faithfulness"]["mean"]
    result.save("runs/today")                                 # the folder `offline-eval run` writes

It runs exactly what ``offline-eval run`` runs, through the same function
(:func:`offline_eval.run.execute.run_dataset`: same readers and field aliases, same settings, plugins,
engine (in this process or on Ray), cache, calibrations and gates), so the same data gives the same
results through either.
"""

from __future__ import annotations

import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping

from offline_eval.data.schema import DataError, Sample
from offline_eval.engine.models import Models
from offline_eval.records import ResultRow, RunSummary
from offline_eval.run.config import RayOptions, RunConfig, build_run, configure_models
from offline_eval.run.execute import run_dataset
from offline_eval.run.model_choice import ModelChoice

__all__ = ["Models", "EvalResult", "load_models", "evaluate", "compare"]


def load_models(profile: str | None = None, *, roles: Iterable[str] = ("judge", "verifier", "embedder"),
                **choice: Any) -> Models:
    """The models of ``profile`` (gpu, cpu, starter, a manifest path; default: the first provisioned)
    for ``roles``, changed by the CLI's model flags as keywords (``judge``, ``judge_backend``,
    ``judge_model``, ``verifier``, ``hhem``, ``hhem_tokenizer``, ``embedder``, ``models_dir``,
    ``device``, ``batch_size``, ``judge_batch_size``, ``verify``; see
    :class:`~offline_eval.run.model_choice.ModelChoice`). Nothing loads until a metric needs it; raises
    :class:`~offline_eval.run.config.ModelsMissing` when a model folder is not there."""
    return configure_models(ModelChoice(profile=profile, **choice), roles)


@dataclass
class EvalResult:
    """The scores of one evaluation: ``result_rows`` (results.jsonl's rows) and ``run_summary``
    (summary.json) as records (:mod:`offline_eval.records`); ``rows`` and ``summary`` are the same as
    the files' JSON."""

    result_rows: list[ResultRow]
    run_summary: RunSummary
    run: dict[str, Any] = field(default_factory=dict)  # run.json
    folder: Path | None = None  # where it was written, if anywhere
    # fail_under's gates: per gated metric the rows its mean rests on, and one line per failed gate (the
    # command line prints both and exits 3 on a failure); empty without gates
    gate_lines: list[str] = field(default_factory=list)
    gate_failures: list[str] = field(default_factory=list)

    @cached_property
    def rows(self) -> list[dict[str, Any]]:
        """The rows as in results.jsonl."""
        return [row.to_dict() for row in self.result_rows]

    @cached_property
    def summary(self) -> dict[str, Any]:
        """The summary as in summary.json."""
        return self.run_summary.to_dict()

    @property
    def metrics(self) -> list[str]:
        return list(self.run_summary.metrics)

    def to_pandas(self) -> Any:
        """One row per sample: id, the sample's fields, then per metric its value and ``<metric>_reason``
        (why it is unscored, else None)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("EvalResult.to_pandas() needs pandas: pip install pandas") from None
        records = []
        for row in self.result_rows:
            record = {"id": row.id, **{k: v for k, v in row.sample.items() if k != "id"}}
            for name in self.metrics:
                score = row.score(name)
                record[name] = score.value if score else None
                record[f"{name}_reason"] = score.reason if score else None
            records.append(record)
        return pd.DataFrame.from_records(records)

    def save(self, folder: str | Path) -> Path:
        """Write the run folder (results.jsonl, summary.json, run.json), as ``offline-eval run`` does."""
        out = Path(folder)
        if self.folder is None or out.resolve() != self.folder.resolve():
            self._write(out)
            self.folder = out
        return out

    def _write(self, out: Path) -> Path:
        from offline_eval.runlog import RUN_INFO, SUMMARY, write_json, write_results

        out.mkdir(parents=True, exist_ok=True)
        write_results(out, self.rows)
        write_json(out, SUMMARY, self.summary)
        write_json(out, RUN_INFO, self.run)
        return out

    def report(self, path: str | Path | None = None) -> Path:
        """Write the self-contained HTML report (default: report.html in the saved folder)."""
        from offline_eval.report.html import write_report
        from offline_eval.runlog import REPORT

        if self.folder is None:  # written beside a temporary copy of the run, then moved out
            with tempfile.TemporaryDirectory(prefix="offline-eval-") as tmp:
                target = Path(path or REPORT)
                shutil.copyfile(write_report(self._write(Path(tmp))), target)
                return target
        written = write_report(self.folder)
        if path is None:
            return written
        shutil.copyfile(written, path)
        return Path(path)


def _samples(data: Any, mapping: Mapping[str, str] | None, limit: int | None) -> list[Sample]:
    from offline_eval.data.readers import read_dataset, samples_from_rows

    if isinstance(data, (str, Path)):
        return read_dataset(data, dict(mapping) if mapping else None, limit=limit)
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # a pandas DataFrame
        rows, source = data.to_dict("records"), "DataFrame"
    elif hasattr(data, "features") and hasattr(data, "__iter__"):  # a datasets.Dataset
        rows, source = list(data), "Dataset"
    else:
        rows, source = list(data), "data"
    for index, row in enumerate(rows, start=1):
        if not isinstance(row, Mapping):
            raise DataError(f"expected a mapping per row, got {type(row).__name__}", source=source, row=index)
    return samples_from_rows(((i, dict(r)) for i, r in enumerate(rows, start=1)), source,
                             dict(mapping) if mapping else None, limit=limit)


def evaluate(data: Any, metrics: Iterable[Any] | str | None = None, *, models: Models | None = None,
             profile: str | None = None, judge: str | None = None, embedder: str | None = None,
             verifier: str | None = None, device: str | None = None, batch_size: int | None = None,
             output: str | Path | None = None, cache: bool | str | Path = True, overwrite: bool = False,
             mapping: Mapping[str, str] | None = None, limit: int | None = None, calibrations: bool = True,
             window: int | None = None, criteria: Any = None, plugins: Iterable[str] = (),
             fail_under: Mapping[str, float] | str | None = None, max_unscored: float | None = None,
             engine: str = "local", ray_address: str | None = None, replicas: int | None = None,
             gpus_per_replica: float | None = None, ray_node_cache: str | None = None,
             **options: Any) -> EvalResult:
    """Score ``data`` with ``metrics`` (names, or Metric instances, or one string of names separated by
    commas as ``--metrics``; default: the CLI's five; add "aggregate" for a ragas_score). A metric of your own: a Metric subclass, registered by name with
    ``offline_eval.metrics.register_metric`` or passed as an instance, or ``plugins`` (modules or .py
    files, as ``--plugin``) that register theirs.

    ``data``: a dataset path, a list of dicts, a pandas DataFrame or a ``datasets.Dataset``, read
    through the CLI's readers and field aliases (``mapping`` as ``--map``). ``models``: from
    :func:`load_models`, reused across calls; else ``profile``/``judge``/``embedder``/``verifier``/
    ``device``/``batch_size`` choose them for this call. ``output``: a run folder, written and resumed as
    the CLI's (None: nothing is written but the cache). ``cache``: True for the CLI's default file,
    a path, or False for memory only. ``options``: the run's settings by their names (``verdicts``,
    ``max_tokens``, ``claims``, ``verdict_score``, ``context_window``, ``language``, ...: the names of
    ``offline-eval run``'s flags, from ``EvalSettings.option_names()``) and each metric's options
    (``<metric>_<option>``). ``criteria``: criteria of your own (a criteria file, a list of them, or a
    dict of criteria as a file's tables), each scored as a metric ``criterion_<name>``.

    ``fail_under`` (``{"faithfulness": 0.8}`` or ``"faithfulness=0.8"``) and ``max_unscored`` are
    ``--fail-under``'s gates, refused as the flags are (a threshold that is not finite, a share outside
    0 to 1): the result's ``gate_failures`` lists those that failed. ``engine="ray"``
    shards the run over model replicas on a Ray cluster (``ray_address``, ``replicas``,
    ``gpus_per_replica``, ``ray_node_cache`` as the ``--engine ray`` flags).
    """
    from offline_eval.engine.cache import ResultCache
    from offline_eval.engine.cache_location import cache_path
    from offline_eval.runlog import run_info

    fail_under, max_unscored = _gates(fail_under, max_unscored)
    config = RunConfig(metrics=_metric_names(metrics), plugins=[str(p) for p in plugins],
                       criteria=[] if criteria is None else list(criteria) if isinstance(criteria, (list, tuple))
                       else [criteria],
                       models=ModelChoice(profile=profile, judge=judge, embedder=embedder, verifier=verifier,
                                          device=device, batch_size=batch_size),
                       options=options, calibrate=calibrations, fail_under=fail_under,
                       max_unscored=max_unscored, window=window, overwrite=overwrite,
                       ray=_ray(engine, ray_address, replicas, gpus_per_replica, ray_node_cache))
    samples = _samples(data, mapping, limit)  # read first, then built, as `offline-eval run` does
    run = build_run(config, models=models)
    if run.starter:  # what the command line prints before a starter run: a notebook shows a warning
        warnings.warn(run.info["note"], UserWarning, stacklevel=2)
    info = {"dataset": str(data) if isinstance(data, (str, Path)) else type(data).__name__, "api": True}
    with ResultCache(cache_path() if cache is True else Path(cache) if cache else None) as store, \
            tempfile.TemporaryDirectory(prefix="offline-eval-") as tmp:
        folder = Path(output) if output is not None else Path(tmp)
        done = run_dataset(run, samples, folder, cache=store, run_info=info)
        return EvalResult(list(done.output.result_rows()), done.output.run_summary, run_info(folder) or {},
                          Path(output) if output is not None else None, done.gate_lines, done.gate_failures)


def _metric_names(metrics: Iterable[Any] | str | None) -> list[Any] | None:
    """``metrics`` as a list: a string is names separated by commas, as ``--metrics`` reads it."""
    from offline_eval.options import items

    if metrics is None:
        return None
    return items(metrics) if isinstance(metrics, str) else list(metrics)


def _gates(fail_under: Mapping[str, float] | str | None,
           max_unscored: float | None) -> tuple[dict[str, float], float | None]:
    """``fail_under`` as a mapping, from one or from ``--fail-under``'s text, and ``max_unscored``,
    each checked as the command line checks its flag (a finite threshold, a share from 0 to 1)."""
    from offline_eval.thresholds import ThresholdError, check_unscored_share, parse_thresholds

    try:
        gates = parse_thresholds(fail_under) if fail_under or isinstance(fail_under, str) else {}
    except ThresholdError as exc:
        raise ThresholdError(f"fail_under: {exc}") from None
    try:
        return gates, None if max_unscored is None else check_unscored_share(max_unscored)
    except ThresholdError as exc:
        raise ThresholdError(f"max_unscored: {exc}") from None


def _ray(engine: str, address: str | None, replicas: int | None, gpus_per_replica: float | None,
         node_cache: str | None) -> RayOptions | None:
    """``--engine ray``'s settings, with its defaults; None for the local engine, which takes none."""
    if engine not in ("local", "ray"):
        raise ValueError(f"engine={engine!r}: expected 'local' or 'ray'")
    if engine == "local":
        given = [name for name, value in (("ray_address", address), ("replicas", replicas),
                                          ("gpus_per_replica", gpus_per_replica), ("ray_node_cache", node_cache))
                 if value is not None]
        if given:
            raise ValueError(f"{', '.join(given)} only with engine='ray'")
        return None
    return RayOptions.given(address=address, replicas=replicas, gpus_per_replica=gpus_per_replica,
                            node_cache=node_cache)


def compare(a: EvalResult | str | Path, b: EvalResult | str | Path, *, by: str = "sample") -> Any:
    """Run b against run a, sample by sample (``offline-eval compare``), or with ``by="conversation"``
    conversation by conversation: a Comparison whose ``metrics`` hold each metric's paired difference,
    interval, p-value and verdict."""
    from offline_eval.report.compare import compare_runs

    with tempfile.TemporaryDirectory(prefix="offline-eval-compare-") as tmp:
        folders = [Path(run) if not isinstance(run, EvalResult) else
                   run.folder if run.folder is not None else run._write(Path(tmp) / side)
                   for side, run in (("a", a), ("b", b))]
        return compare_runs(folders[0], folders[1], by=by)
