"""`offline-eval estimate`: what the experts would say about a run, from the judge's scores and a few labels.

    offline-eval estimate runs/data                       # labels: runs/data/labels.jsonl
    offline-eval estimate runs/data --labels expert.jsonl --json

Importing this module is cheap (argparse only); the work lives in offline_eval.people.estimate.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from offline_eval.options import HelpFormatter
from offline_eval.text import counted

HELP_ORDER = 100  # where `offline-eval --help` lists this command (offline_eval.cli.command_modules)


def cmd_estimate(args: argparse.Namespace) -> int:
    """Print each labelled metric's estimates and keep them in the run's summary.json (and report)."""
    from offline_eval.data.schema import DataError, printable
    from offline_eval.people.estimate import DEFAULT_PREDICTION, estimate_run, read_run
    from offline_eval.people.labels import LABELS_FILE

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise DataError("no such run folder", source=str(run_dir))
    labels = Path(args.labels) if args.labels else run_dir / LABELS_FILE
    partial = _check_finished(run_dir, args.partial)
    if not labels.is_file():
        review = f"`offline-eval review {shlex.quote(str(run_dir))}`"
        raise DataError(f"no such labels file ({review} makes labels, in {run_dir / LABELS_FILE})" if args.labels
                        else f"no labels yet: make some with {review}, or name a labels file with --labels",
                        source=str(labels))
    run = read_run(run_dir)
    if not args.partial:
        _check_whole(run_dir, len(run.ids))
    result = estimate_run(run_dir, labels, prediction=args.prediction or DEFAULT_PREDICTION, run=run,
                          any_run=args.any_run)
    _check_some_estimate(result, run, labels, run_dir)
    if args.json:
        print(json.dumps(result.estimates, ensure_ascii=False))
    else:
        from offline_eval.report.terminal import format_estimates

        print("\n".join(format_estimates(result.estimates)))
    for metric, count in result.unknown_metrics.items():
        print(f"offline-eval: {counted(count, 'label')} for {printable(metric)}, which this run did not score "
              f"(its metrics: {', '.join(run.metrics)}): not used", file=sys.stderr)
    for metric, figures in result.estimates.items():
        note = (figures.get("ppi") or {}).get("note")
        if note and args.json:  # the table shows it under the estimate
            print(f"offline-eval: {printable(metric)}: {note}", file=sys.stderr)
        excluded = figures.get("excluded") or {}
        if excluded:
            print(f"offline-eval: {printable(metric)}: rows left out: "
                  + ", ".join(f"{k} {v}" for k, v in excluded.items()), file=sys.stderr)
    if result.other_run:
        verb = "names" if result.other_run == 1 else "name"
        print(f"offline-eval: {counted(result.other_run, 'label')} {verb} another run (their 'run' fingerprint is not "
              "this run's): left out; pass --any-run if that run scored the same samples", file=sys.stderr)
    if partial:
        print(f"offline-eval: {printable(str(run_dir))} has not finished (--partial): these estimates are over the "
              f"{len(run.ids)} rows written so far, not the whole run; labels of rows not yet written count as "
              "unknown_id", file=sys.stderr)
    if not args.no_write:
        _keep(run_dir, result)
    return 0


def _check_some_estimate(result: Any, run: Any, labels: Path, run_dir: Path) -> None:
    """A DataError (one line, exit 2) when the labels file gives no scored row of the run a yes or no: an
    empty file, labels only for metrics the run did not score, or only on rows left out (unscored, no
    such row, unsure, tied), estimate nothing, and an exit of 0 with no figure would read as done."""
    from offline_eval.data.schema import DataError, printable

    if any(figures.get("n_labelled") for figures in result.estimates.values()):
        return
    review = f"`offline-eval review {shlex.quote(str(run_dir))}`"
    if result.estimates:  # labels for the run's metrics, every one left out
        left_out = "; ".join(
            f"{printable(metric)}: {counted(sum(figures['excluded'].values()), 'labelled row')} left out ("
            + ", ".join(f"{why} {n}" for why, n in figures["excluded"].items()) + ")"
            for metric, figures in result.estimates.items())
        another = (", or pass --any-run if the run its other_run labels name scored the same samples"
                   if result.other_run else "")
        raise DataError(f"no label is a yes or no on a row this run scored, so nothing can be estimated ({left_out}): "
                        f"label the rows it scored with {review}, which asks only about those{another}",
                        source=str(labels))
    if not result.n_lines:
        raise DataError(f"holds no labels: make some with {review}, or name another labels file with --labels",
                        source=str(labels))
    if not result.unknown_metrics:  # every label was given on another run
        raise DataError(f"every label ({result.other_run}) names another run (its 'run' fingerprint is not "
                        "this run's): pass --any-run if that run scored the same samples, or label this run with "
                        f"{review}", source=str(labels))
    raise DataError(f"no label names a metric of this run (the labels are for {', '.join(result.unknown_metrics)}; "
                    f"the run scored {', '.join(run.metrics)}): label this run's metrics with {review}",
                    source=str(labels))


def _check_finished(run_dir: Path, partial: bool) -> bool:
    """True when the run has not finished and --partial allows reading it anyway; a DataError (one line)
    when it has not finished without --partial: its rows are not all written, and an estimate over the
    first ones would look like one over the whole run."""
    from offline_eval.data.schema import DataError
    from offline_eval.runlog import RESULTS, SUMMARY, is_finished

    if is_finished(run_dir) or not (run_dir / RESULTS).is_file():
        return False  # finished, or no run folder at all (read_run says so)
    if not partial:
        raise DataError(f"the run has not finished (no {SUMMARY}), so its rows are not all written: rerun the "
                        "same `offline-eval run` command to finish it, or pass --partial to estimate over the "
                        "rows written so far", source=str(run_dir))
    return True


def _check_whole(run_dir: Path, rows: int) -> None:
    """A DataError (one line) when a finished run's results.jsonl holds fewer rows than its summary.json
    counts (a last line cut short, rows removed): an estimate over the rows left would look like one over
    the whole run, its labels of the missing rows counted as unknown ids."""
    from offline_eval.data.schema import DataError
    from offline_eval.runlog import read_summary, rows_short

    summary = read_summary(run_dir)
    short = rows_short(rows, summary.n_samples if summary is not None else None)
    if short:
        raise DataError(f"{short}: rerun the same `offline-eval run` command to score them again, or pass "
                        "--partial to estimate over the rows there", source=str(run_dir))


def _keep(run_dir: Path, result: Any) -> None:
    """summary.json's estimates replaced (and report.html rewritten when the folder has one), under the
    folder's lock; a folder in use by a run is left as it is, with a line saying so."""
    from offline_eval.run.folder import RunFolder, RunFolderError
    from offline_eval.runlog import REPORT, SUMMARY, RunLogError, summary_dict, write_json

    summary_path = run_dir / SUMMARY
    if not summary_path.exists():
        return
    try:
        folder = RunFolder(run_dir)
        folder.lock()
    except (RunFolderError, OSError) as exc:
        print(f"offline-eval: {SUMMARY} not updated: {exc}", file=sys.stderr)
        return
    try:
        try:
            summary = summary_dict(run_dir)
        except RunLogError as exc:
            print(f"offline-eval: {exc}; not updated", file=sys.stderr)
            return
        if summary is None:  # removed while the lock was taken
            return
        summary.pop("estimates_error", None)
        summary["estimates"], summary["estimates_source"] = result.estimates, result.source()
        write_json(run_dir, SUMMARY, summary)
        if (run_dir / REPORT).exists():
            from offline_eval.report.html import write_report

            write_report(run_dir)
    finally:
        folder.release()
    print(f"estimates: {summary_path}", file=sys.stderr)


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``estimate`` subcommand."""
    p = subparsers.add_parser(
        "estimate", help="each metric's human rate from the judge's scores and a few expert labels (PPI)",
        description="For each metric with labels: the judge-only mean over the run's N scored rows, the share "
                    "of yes among the n labelled rows with its 95% Wilson interval, and the prediction-powered "
                    "estimate (PPI++) of the share of yes the labellers would give over all N rows, with its "
                    "95% interval, beside Cohen's kappa of every two annotators. The labelled rows must be a "
                    "simple random sample of the scored rows (`offline-eval review` draws them so). The "
                    "figures are also written into the run's summary.json (and report.html).",
        formatter_class=HelpFormatter)
    p.add_argument("run_dir", metavar="RUN_FOLDER", help="folder written by `offline-eval run`")
    p.add_argument("--labels", metavar="FILE",
                   help="labels file (JSON Lines, offline_eval.people.labels; default: RUN_FOLDER/labels.jsonl)")
    p.add_argument("--json", action="store_true", help="print one JSON object: {metric: {n_labelled, n, "
                                                       "judge_mean, labels_only, ppi, ...}}")
    p.add_argument("--prediction", choices=["raw", "calibrated"],
                   help="PPI's prediction: the judge's score itself (raw, the default), or the score through a "
                        "Platt map cross-fitted on the labels (calibrated: narrower, but on one shared set its "
                        "interval covered less than it promises; docs/estimate.md, \"Measured\")")
    p.add_argument("--any-run", action="store_true",
                   help="use labels given on another run too (their 'run' fingerprint differs: another judge or "
                        "settings on the same samples); without it they are left out and counted")
    p.add_argument("--partial", action="store_true",
                   help="estimate a run that has not finished (no summary.json yet), or one whose results.jsonl "
                        "lost rows, over the rows written; without it such a run is refused")
    p.add_argument("--no-write", action="store_true", help="leave summary.json and report.html as they are")
    p.set_defaults(func=cmd_estimate)
    return p
