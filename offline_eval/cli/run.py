"""`offline-eval run`: score a dataset. Its flags become the run's typed configuration here
(:func:`offline_eval.cli.shared.run_config_from_args`), and the run is built and executed below.

Every `run` flag can also come from a TOML file (`--config eval.toml`, keys named like the flags with
underscores); flags given on the command line win (:func:`merge_config`).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tomllib
from pathlib import Path
from typing import Any

from offline_eval.cli.shared import (
    Interrupted, add_cache_arguments, add_calibration_arguments, add_criteria_argument, add_model_arguments,
    add_settings_arguments, apply_threads, open_cache, positive_int, run_config_from_args,
)
from offline_eval.options import FlagError, HelpFormatter, add_field_arguments, boolean, items
from offline_eval.thresholds import DEFAULT_MAX_UNSCORED, unscored_share

HELP_ORDER = 10  # where `offline-eval --help` lists this command (offline_eval.cli.command_modules)


def _metric_names(text: str) -> list[str]:
    """argparse type of --metrics: names separated by commas, at least one (an empty list would
    otherwise read as "the default five")."""
    names = items(text)
    if not names:
        raise argparse.ArgumentTypeError(f"expected metric names separated by commas, got {text!r}")
    return names


def add_metric_option_arguments(parser: argparse.ArgumentParser) -> None:
    """A flag for every option of every metric (``Metric.Options``, :mod:`offline_eval.options`):
    ``--<metric>-<field>``, dest ``<metric>_<field>`` (also its TOML key and API keyword); plugins
    imported before the parser is built (:func:`main`) get theirs too."""
    from offline_eval.metrics import metric_classes
    from offline_eval.metrics.base import option_names

    group = parser.add_argument_group("metric options (each applies when its metric runs)")
    for name, cls in sorted(metric_classes().items()):
        direction = "higher is better" if cls.higher_is_better else "lower is better"
        add_field_arguments(group, cls.Options, option_names(cls), prefix=f"{name} ({direction}): ")


def register(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "run", help="score a dataset with Ragas and RAGEval metrics on local models",
        description="Score every sample of a dataset. Each stage (claim extraction, verification, "
                    "question regeneration, embedding) is batched across a window of rows (--window); each "
                    "window's results are written when it finishes, and rerunning the same command resumes a "
                    "killed run. One run at a time per output folder.",
        formatter_class=HelpFormatter)
    data = p.add_argument_group("data")
    data.add_argument("--dataset", help="JSONL, JSON, CSV/TSV, Parquet or a `datasets` save_to_disk folder")
    data.add_argument("--map", dest="mapping", metavar="FIELD=PATH,...",
                      help="column mapping with dotted paths, e.g. question=query.content,answer=prediction.content")
    data.add_argument("--limit", type=positive_int, help="score only the first N rows")
    data.add_argument("--skip-bad-rows", action="store_true",
                      help="read past malformed rows (invalid JSON, wrong types, duplicate ids) and score the rest; "
                           "each skipped row is listed in summary.json and the report (without it, the first "
                           "bad row stops the run)")
    what = p.add_argument_group("metrics")
    what.add_argument("--metrics", type=_metric_names, metavar="a,b,...",
                      help="metric names (see `offline-eval metrics`); add 'aggregate' for a ragas_score "
                           "(default: faithfulness,answer_relevancy,context_precision,context_recall,answer_correctness)")
    what.add_argument("--plugin", action="append", metavar="MODULE|FILE.py",
                      help="import a module or .py file whose metrics register themselves "
                           "(offline_eval.metrics.register_metric), so --metrics can name them; repeatable")
    add_criteria_argument(what)
    add_calibration_arguments(what)
    add_settings_arguments(p.add_argument_group("judging (every metric reads these)"))
    models = p.add_argument_group("models")
    add_model_arguments(models)
    out = p.add_argument_group("output")
    out.add_argument("--output", type=Path, help="run folder (default: runs/<dataset name>); rerun the same "
                                                 "command to resume")
    out.add_argument("--overwrite", action="store_true",
                     help="when --output holds another run's results, move them into its earlier/ subfolder and "
                          "start afresh (without it such a folder is refused)")
    out.add_argument("--window", type=positive_int, metavar="ROWS",
                     help="rows scored together: every stage is batched across a window, and its results are "
                          "written when it finishes (default 1024)")
    add_cache_arguments(out)
    out.add_argument("--per-row", action="store_true",
                     help="one sample at a time, as the reference tools do (for benchmarks)")
    out.add_argument("--fail-under", metavar="metric=threshold,...",
                     help="exit 3 when a metric's mean misses its threshold in the metric's direction: below it "
                          "for a higher-is-better metric (faithfulness=0.8 needs a mean >= 0.8), above it for a "
                          "lower-is-better one (hallucination_rate=0.2 needs a mean <= 0.2); or when more than "
                          "--max-unscored of its rows are unscored")
    out.add_argument("--max-unscored", type=unscored_share, metavar="SHARE",
                     help="the share of a gated metric's rows that may go unscored before --fail-under fails "
                          f"(default {DEFAULT_MAX_UNSCORED:g})")
    out.add_argument("--no-report", action="store_true", help="skip the HTML report")
    out.add_argument("--quiet", action="store_true", help="no progress bars")
    dist = p.add_argument_group("distributed (pip install 'offline-eval[ray]')")
    dist.add_argument("--engine", choices=["local", "ray"],
                      help="ray: shard the dataset over model replicas on a Ray cluster (default: local)")
    dist.add_argument("--ray-address", help="auto or HOST:PORT of an existing cluster (default: $RAY_ADDRESS, "
                                            "else a private local cluster)")
    dist.add_argument("--replicas", type=positive_int, help="Ray actors, each with its own models (default: 2)")
    dist.add_argument("--gpus-per-replica", type=float,
                      help="GPUs per replica (default 0); above 1, the vLLM judge's tensor_parallel_size")
    dist.add_argument("--ray-node-cache", help="per-node cache path on each node, merged into --cache "
                                               "(default: shared file on the driver's node, per-node elsewhere)")
    add_metric_option_arguments(p)
    p.add_argument("--config", type=Path, help="TOML file with any of these settings")
    p.set_defaults(func=cmd_run)
    return p


def merge_config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> argparse.Namespace:
    """Fill the flags the command line left out from the ``--config`` TOML file (a ``[run]`` table, or
    the file's top level). A key is named like its flag or its destination, with underscores, and its
    value is read as the flag reads its text (:func:`_config_value`), so a file is checked as strictly
    as a command line. A flag was left out when it holds None (False for a switch): every setting
    defaults to that (``--threads``' None is auto; tests/run/test_cli.py checks them all), so a default
    never hides a file's value. An unreadable file, an unknown key or a bad value is a ValueError of
    one line naming the file and the key (exit 2)."""
    if not args.config:
        return args
    try:
        config = tomllib.loads(args.config.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"cannot read config {args.config}: {exc}") from None
    config = config.get("run", config)
    if not isinstance(config, dict):
        raise ValueError(f"{args.config}: run: expected a table of settings")
    settings = {a.dest: a for a in parser._actions if a.option_strings and a.dest not in ("help", "config")}
    names = {o.lstrip("-").replace("-", "_"): a.dest for a in settings.values() for o in a.option_strings}
    from offline_eval.metrics import load_plugins

    def action_of(key: str) -> argparse.Action:
        dest = key.replace("-", "_")
        action = settings.get(names.get(dest, dest))
        if action is None:
            raise ValueError(f"{args.config}: unknown setting '{key}' (`offline-eval run --help` lists them)")
        return action

    values: dict[str, Any] = {}
    for key in [k for k in config if names.get(k.replace("-", "_")) == "plugin"]:  # their metrics' options
        values["plugin"] = _config_value(action_of(key), config[key], f"{args.config}: {key}")
        load_plugins([str(p) for p in values["plugin"]])
        options = argparse.ArgumentParser(add_help=False)  # the flags of the options of the plugins' metrics
        add_metric_option_arguments(options)
        settings.update({a.dest: a for a in options._actions if a.dest not in settings})
        names.update({o.lstrip("-").replace("-", "_"): a.dest for a in options._actions for o in a.option_strings})
    for key, value in config.items():
        action = action_of(key)
        if action.dest == "criteria" and isinstance(value, dict):  # criteria written in the file itself
            values["criteria"] = [value]
        elif action.dest not in values:
            values[action.dest] = _config_value(action, value, f"{args.config}: {key}")
    keys = {names.get(k.replace("-", "_"), k.replace("-", "_")): k for k in config}
    args.config_keys = {}  # dest -> the file's key, for a message about a value only the run can check
    for dest, value in values.items():
        left_out = False if settings[dest].nargs == 0 else None  # not `in (None, False)`: 0 == False
        if getattr(args, dest, None) is left_out:
            setattr(args, dest, value)
            args.config_keys[dest] = keys.get(dest, dest)
    return args


def _from_config(exc: ValueError, args: argparse.Namespace) -> ValueError:
    """A flag's value refused by the run's setup (:class:`~offline_eval.options.FlagError`) names the
    --config file and key instead where the file gave that value: the flag was never typed, and the
    line must say where to fix it."""
    if not isinstance(exc, FlagError):
        return exc
    key = getattr(args, "config_keys", {}).get(exc.flag.lstrip("-").replace("-", "_"))
    return ValueError(f"{args.config}: {key}: {exc}") if key else exc


def _config_value(action: argparse.Action, value: Any, where: str) -> Any:
    """A TOML value as its flag would have it: true/false for a switch; otherwise the text the flag
    would be given (a number as written, a list as comma-separated items, a table as name=value
    items) through the flag's type and choices; for a repeatable flag (``--plugin``, ``--calibration``)
    a list of such values, or one. ``where`` (file: key) starts the ValueError of a bad value."""
    if action.nargs == 0:  # a switch: --no-cache, --quiet, ...
        if not isinstance(value, bool):
            raise ValueError(f"{where}: expected true or false, got {value!r}")
        return value
    if isinstance(action, argparse._AppendAction):
        return [_config_value_one(action, item, where) for item in (value if isinstance(value, list) else [value])]
    return _config_value_one(action, value, where)


def _config_value_one(action: argparse.Action, value: Any, where: str) -> Any:
    if action.type is _metric_names and not (
            isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))):
        # a number read as text would be refused later as an unknown metric "5", naming no file or key
        kind = (str(value).lower() if isinstance(value, bool) else f"the number {value}"
                if isinstance(value, (int, float)) else f"a list with an item that is no string: {value!r}"
                if isinstance(value, list) else "a table" if isinstance(value, dict) else repr(value))
        raise ValueError(f'{where}: expected metric names, a list of strings (["faithfulness", "rouge_l"]) or '
                         f'one string ("faithfulness,rouge_l"), got {kind}')
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        text = ",".join(map(str, value))
    elif isinstance(value, dict) and all(isinstance(v, (str, int, float)) for v in value.values()):
        text = ",".join(f"{k}={v}" for k, v in value.items())
    elif isinstance(value, bool):  # only a true/false option takes one (a path or a size named "True" is a slip)
        if action.type is not boolean:
            raise ValueError(f"{where}: {action.option_strings[0]} takes no true/false, got {str(value).lower()}")
        text = str(value).lower()
    elif isinstance(value, (str, int, float)):
        text = str(value)
    else:
        raise ValueError(f"{where}: expected text or a number, got {value!r}")
    try:
        parsed = action.type(text) if action.type else text
    except argparse.ArgumentTypeError as exc:
        raise ValueError(f"{where}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: invalid value {text!r} ({exc})") from None
    if action.choices is not None and parsed not in action.choices:
        raise ValueError(f"{where}: expected one of {', '.join(map(str, action.choices))}, got {parsed!r}")
    return parsed


def _run_progress(samples: int, engine: str | None, show: bool = True) -> Any:
    """One line for the whole local run (offline_eval.progress; with ``show`` False, --quiet, it draws
    nothing and keeps count of what is saved, for the line of an interrupted run); Ray's driver keeps
    its samples bar."""
    from offline_eval.progress import RunProgress, StageBars

    if engine == "ray":
        return StageBars() if show else None

    return RunProgress(samples, show=show)


def cmd_run(args: argparse.Namespace) -> int:
    """``offline-eval run``: the flags become a RunConfig, the run is built (everything checked before a
    model loads), executed into its folder, summarised, and gated. An interrupt says how many samples
    the folder holds (what the rerun of the same command resumes from)."""
    watch: dict[str, Any] = {}  # the run's folder and progress, once known
    try:
        return _run(args, watch)
    except KeyboardInterrupt as stop:
        kept = getattr(watch.get("progress"), "kept", None)
        detail = f"{kept[0]} of {kept[1]} samples are saved in {watch['output']}; " if kept else ""
        raise Interrupted(getattr(stop, "signum", signal.SIGINT),
                          f"{detail}rerun the same command to resume") from None


def _run(args: argparse.Namespace, watch: dict[str, Any]) -> int:
    from offline_eval.data.readers import other_languages, parse_mapping, read_dataset
    from offline_eval.run.config import build_run
    from offline_eval.run.execute import run_dataset
    from offline_eval.run.folder import default_run_folder

    if not args.dataset:
        raise SystemExit("offline-eval run: --dataset is required (or set dataset in --config)")
    threads = apply_threads(args)
    skipped: list[dict[str, Any]] | None = [] if args.skip_bad_rows else None
    samples = read_dataset(args.dataset, parse_mapping(args.mapping) if args.mapping else None, limit=args.limit,
                           skipped=skipped)
    for bad in skipped or []:
        print(f"offline-eval: skipped: {bad['reason']}", file=sys.stderr)
    others = other_languages(samples)
    if others:
        print(f"offline-eval: {others}", file=sys.stderr)
    try:
        run = build_run(run_config_from_args(args))
    except ValueError as exc:
        raise _from_config(exc, args) from None
    if run.starter:
        print(f"offline-eval: {run.info['note']}", file=sys.stderr)
    info: dict[str, Any] = {"dataset": str(args.dataset), "threads": threads.to_dict()}
    if skipped is not None:
        info["skipped_rows"] = skipped
    progress = _run_progress(len(samples), args.engine, show=not args.quiet)
    watch["output"], watch["progress"] = args.output or default_run_folder(args.dataset), progress

    def write_report(output: Any) -> None:  # while the run still holds its folder
        if args.no_report:
            return
        try:
            from offline_eval.report.html import write_report as write_html
        except ImportError:
            return
        if hasattr(progress, "close"):
            progress.close()  # the scoring is over; the report's line starts a line of its own
        print(f"report: {write_html(output.output_dir)}", file=sys.stderr)

    with open_cache(args) as cache:
        try:
            done = run_dataset(run, samples, watch["output"], cache=cache, progress=progress, run_info=info,
                               on_close=write_report)
        finally:  # however the run ends, the progress line ends before anything else is printed
            if hasattr(progress, "close"):
                progress.close()

    result = done.output
    note = result.reuse_note()
    if note:
        print(f"offline-eval: {note}", file=sys.stderr)
    _print_summary(result.summary)
    from offline_eval.runlog import RESULTS

    print(f"results: {result.output_dir / RESULTS}", file=sys.stderr)
    for line in done.gate_lines:  # what each gate rests on
        print(f"offline-eval: gate: {line}", file=sys.stderr)
    for failure in done.gate_failures:
        print(f"offline-eval: gate failed: {failure}", file=sys.stderr)
    return 3 if done.gate_failures else 0


def _print_summary(summary: dict[str, Any]) -> None:
    try:
        from offline_eval.report.terminal import print_summary
    except ImportError:
        print_summary = None
    if print_summary:
        print_summary(summary)
        return
    print(f"{'metric':<30} {'mean':>8} {'95% CI':>17} {'scored':>7} {'unscored':>9}")
    for name, m in summary["metrics"].items():
        mean = f"{m['mean']:.4f}" if m["mean"] is not None else "-"
        ci = f"[{m['ci95'][0]:.3f}, {m['ci95'][1]:.3f}]" if m["ci95"] else "-"
        print(f"{name:<30} {mean:>8} {ci:>17} {m['n_scored']:>7} {m['n_unscored']:>9}")
