"""The `offline-eval` command line.

    offline-eval run --dataset data.jsonl --profile gpu --device cuda:0 --batch-size 10
    offline-eval models check
    offline-eval retrieval --corpus docs/ --queries queries.jsonl
    offline-eval report runs/data
    offline-eval compare runs/before runs/after --fail-on-regression

Every `run` flag can also come from a TOML file (`--config eval.toml`, keys named like the flags with
underscores); flags given on the command line win.
"""

from __future__ import annotations

import argparse
import atexit
import errno
import logging
import os
import signal
import sys
import tomllib
from pathlib import Path
from typing import Any

from offline_eval import __version__
from offline_eval.cli_models import (
    add_cache_arguments, add_calibration_arguments, add_criteria_argument, add_model_arguments,
    add_settings_arguments, apply_threads,
    open_cache, positive_int,
)
from offline_eval.imports import present_modules
from offline_eval.options import HelpFormatter, add_field_arguments, boolean, items
from offline_eval.thresholds import DEFAULT_MAX_UNSCORED, unscored_share

SUBCOMMAND_MODULES = ("offline_eval.runtime.models_cli", "offline_eval.engine.cache_cli", "offline_eval.retrieval.cli",
                      "offline_eval.report.cli", "offline_eval.testset.cli", "offline_eval.people.agreement_cli",
                      "offline_eval.review.cli", "offline_eval.people.estimate_cli")


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


def add_run_parser(subparsers: Any) -> argparse.ArgumentParser:
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
    out.add_argument("--fail-under", metavar="metric=min,...",
                     help="exit 3 when a metric's mean is below its minimum, e.g. faithfulness=0.8, or when more "
                          "than --max-unscored of its rows are unscored")
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


def _merge_config(args: argparse.Namespace, parser: argparse.ArgumentParser) -> argparse.Namespace:
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
    for dest, value in values.items():
        left_out = False if settings[dest].nargs == 0 else None  # not `in (None, False)`: 0 == False
        if getattr(args, dest, None) is left_out:
            setattr(args, dest, value)
    return args


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


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM. Raised where the program is, as Python raises KeyboardInterrupt for
    Ctrl-C, so that a run unwinds the same way whichever ended it: results.jsonl cut back to its last
    full window, the cache's batches committed and its journal folded, the folder's lock released.
    ``detail`` says what the run saved (:func:`cmd_run`); :func:`main` prints it in one line, returns
    128 + ``signum`` (130, 143) and, as the program, ends by the signal."""

    def __init__(self, signum: int = signal.SIGINT, detail: str = "") -> None:
        super().__init__(signum, detail)
        self.signum, self.detail = signum, detail


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
    from offline_eval.data.readers import parse_mapping, read_dataset
    from offline_eval.cli_models import run_config_from_args
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
    run = build_run(run_config_from_args(args))
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


LISTING_WIDTH = 100  # `offline-eval metrics` fits a terminal this wide


def cmd_metrics(args: argparse.Namespace) -> int:
    """``offline-eval metrics``: each metric, marked "(default)" when a run without --metrics scores it,
    with its direction, the models it uses, the sample fields it needs, what it measures and its options."""
    from offline_eval.metrics import DEFAULT_METRICS, Aggregate, metric_classes
    from offline_eval.metrics.criteria import load_criteria

    load_criteria(list(getattr(args, "criteria", None) or []))

    print("(default): scored by a run that names no --metrics")
    for name, cls in sorted(metric_classes().items()):
        print("\n".join(metric_listing(name, cls, default=name in DEFAULT_METRICS)))
    print("\n".join([Aggregate.name, *_wrapped(Aggregate.description)]))
    return 0


def metric_listing(name: str, cls: Any, *, default: bool) -> list[str]:
    """One metric's lines in ``offline-eval metrics``: a title line, then indented, wrapped lines."""
    from offline_eval.metrics.base import need_text, option_flag, option_names

    title = name + (" (default)" if default else "")
    direction = "higher is better" if cls.higher_is_better else "lower is better"
    lines = [f"{title:<36} {direction}; uses {', '.join(sorted(cls.roles)) or 'no model'}"]
    lines += _wrapped(f"needs {', '.join(need_text(n) for n in cls.requires) or '-'}")
    lines += _wrapped(cls.description)
    if cls.reads_question:
        lines += _wrapped("reads the question in its conversation (--history), when the sample has one")
    for public, field in option_names(cls).items():
        lines += _wrapped(f"{option_flag(public, field)} ({field.name}, default {field.default!r}): "
                          f"{field.metadata.get('help', '')}", more="        ")
    return lines


def _wrapped(text: str, indent: str = "    ", more: str = "    ") -> list[str]:
    """``text`` in lines of at most LISTING_WIDTH columns, never broken inside a word or a flag."""
    import textwrap

    return textwrap.wrap(text, LISTING_WIDTH, initial_indent=indent, subsequent_indent=more,
                         break_long_words=False, break_on_hyphens=False)


def _plugins_named(argv: list[str]) -> list[str]:
    """The ``--plugin`` values of a command line, read before the parser is built: a plugin's metrics
    then have their option flags, in ``run --help`` too, and ``metrics`` lists them."""
    found = []
    for i, arg in enumerate(argv):
        if arg == "--plugin" and i + 1 < len(argv):
            found.append(argv[i + 1])
        elif arg.startswith("--plugin="):
            found.append(arg.partition("=")[2])
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="offline-eval",
        description="Evaluate RAG systems with local models only: no network, no API keys, no telemetry.")
    parser.add_argument("--version", action="version", version=f"offline-eval {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_run_parser(subparsers)
    metrics = subparsers.add_parser("metrics", help="list the metrics: what each needs and uses, its direction "
                                                    "and its options")
    metrics.add_argument("--plugin", action="append", metavar="MODULE|FILE.py",
                         help="list the metrics this module or file registers too; repeatable")
    metrics.add_argument("--criteria", action="append", metavar="FILE.toml",
                         help="list the metrics of this criteria file too; repeatable")
    metrics.set_defaults(func=cmd_metrics)
    for module in present_modules(SUBCOMMAND_MODULES):
        module.register(subparsers)
    return parser


class _AtLeast(logging.Filter):
    """Drops a library logger's records below ``level``. A filter, not the logger's level: bm25s sets
    its logger to DEBUG when it is imported, which comes after this, and each index build then logged
    `DEBUG bm25s: Building index from tokens` on the terminal; a filter stays."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.level


# Libraries that set their own logger's level when imported (to DEBUG): only their warnings are shown,
# and with -v their information too.
_LOUD_LOGGERS = ("bm25s",)


def _quiet_libraries(verbose: bool, hub_bars: bool = False) -> None:
    """Nothing from other libraries on screen unless -v: transformers' warnings, the debug logs of
    libraries that turn their own on (bm25s), and the hub's and transformers' progress bars ("Loading
    weights"): a command draws its own progress, and a second bar on the terminal breaks that line into
    stale fragments (`| 0/103 [00:00<?, ?it/s]`) or, in a log file, writes carriage returns.
    ``hub_bars``: the command downloads (`models pull`), and the hub's bars are its progress."""
    if not verbose:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    for name in _LOUD_LOGGERS:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, _AtLeast)]:
            logger.removeFilter(old)
        logger.addFilter(_AtLeast(logging.INFO if verbose else logging.WARNING))
    if hub_bars:
        return
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # read when huggingface_hub and transformers load
    for module, switch in (("huggingface_hub", "utils.disable_progress_bars"),
                           ("transformers", "utils.logging.disable_progress_bar")):
        if module in sys.modules:  # already imported: its bars were set on import, switch them off now
            target: Any = sys.modules[module]
            for part in switch.split("."):
                target = getattr(target, part)
            target()


# A disk's failures (errno) and what to do about each; the rerun of a run then resumes where it stopped.
_DISK_FIXES = {
    errno.ENOSPC: "free some space", errno.EDQUOT: "free some space (a disk quota is full)",
    errno.EFBIG: "raise the file size limit (ulimit -f)", errno.EROFS: "make the disk writable",
    errno.EACCES: "give this user write permission", errno.EPERM: "give this user write permission",
    errno.EIO: "check the disk", errno.ENOMEM: "free some memory",
    errno.EBUSY: "wait for the other process using it to finish",
}


def _disk_failure(exc: OSError, command: str | None) -> str:
    """One line for an OSError that reached the command line: the file and the cause; for a failure of
    the disk (full, a quota, read-only, no permission, an I/O error; the cache's SQLite reports these
    too, as CacheUnavailable) during a run, what to do and that the rerun resumes with nothing lost."""
    from offline_eval.engine.cache import CacheUnavailable

    cause = exc.strerror or str(exc)
    text = f"{'cache ' if isinstance(exc, CacheUnavailable) else ''}{exc.filename}: {cause}" \
        if exc.filename else cause
    disk = isinstance(exc, CacheUnavailable) or exc.errno in _DISK_FIXES
    if command != "run" or not disk:
        return text
    fix = _DISK_FIXES.get(exc.errno, "check that the file and its folder can be written")
    return f"{text}; nothing already saved is lost: {fix}, then rerun the same command to resume"


def _terminated(signum: int, _frame: Any) -> None:
    raise Interrupted(signum)


_ENDED_BY: list[int] = []  # the signal that interrupted the program, sent again once it has exited


def _end_by_signal() -> None:
    """The program's last act, once the run has unwound and the exit handlers of what the command
    imported have run (registered when :func:`main` starts, before theirs, it runs after them): end by
    the signal that interrupted it, with its default action, as Python does after an unhandled Ctrl-C.
    A shell then sees a death by SIGINT or SIGTERM and reports $? 130 or 143, and a shell loop of runs
    stops at Ctrl-C, where an exit status of 130 would make it go on to the next command."""
    if not _ENDED_BY or os.name != "posix":
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    signal.signal(_ENDED_BY[0], signal.SIG_DFL)
    os.kill(os.getpid(), _ENDED_BY[0])


def main(argv: list[str] | None = None) -> int:
    """The command line (``argv`` None: this process's own, as the ``offline-eval`` program).

    Ctrl-C (SIGINT) and SIGTERM end any command with one line on stderr once the run has unwound
    (:class:`Interrupted`): 128 + the signal is returned (130, 143), and the program itself ends by that
    signal (:func:`_end_by_signal`), which a shell reports as 130 and 143. A failing disk is one line
    naming the file, exit 1; bad input is one line, exit 2; a failed ``--fail-under`` gate exits 3."""
    handlers = {}
    try:  # SIGTERM unwinds as Ctrl-C does, instead of ending the process where it stands
        handlers[signal.SIGINT] = signal.getsignal(signal.SIGINT)
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:  # nor where it was meant to be ignored
            handlers[signal.SIGTERM] = signal.signal(signal.SIGTERM, _terminated)
    except ValueError:  # not the main thread: signals are not ours to handle
        handlers = {}
    if argv is None:
        atexit.register(_end_by_signal)
    try:
        return _main(argv)
    except KeyboardInterrupt as stop:
        for signum in handlers:  # a second Ctrl-C must not break the line below into a traceback
            signal.signal(signum, signal.SIG_IGN)
        signum = getattr(stop, "signum", signal.SIGINT)
        detail = getattr(stop, "detail", "")
        print(f"offline-eval: interrupted ({signal.Signals(signum).name}){'; ' + detail if detail else ''}",
              file=sys.stderr)
        if argv is None:
            _ENDED_BY.append(signum)
        return 128 + signum
    finally:
        for signum, handler in handlers.items() if not _ENDED_BY else ():  # ignored until the program ends
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def _main(argv: list[str] | None) -> int:
    from offline_eval.metrics import load_plugins

    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        load_plugins(_plugins_named(argv))
    except ValueError as exc:
        print(f"offline-eval: {exc}", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    downloads = getattr(args, "models_command", None) == "pull" and not getattr(args, "quiet", False)
    _quiet_libraries(verbose=args.verbose, hub_bars=downloads)
    from offline_eval.data.schema import DataError
    from offline_eval.run.config import ModelsMissing
    try:
        if args.command == "run":  # a bad --config file is bad input as a bad flag is: one line, exit 2
            args = _merge_config(args, next(a for a in parser._subparsers._group_actions[0].choices.values()
                                             if a.prog.endswith(" run")))
        return int(args.func(args) or 0)
    except DataError as exc:
        print(f"offline-eval: bad input: {exc}", file=sys.stderr)
        return 2
    except ModelsMissing as exc:  # one line per missing model folder, each with its fix
        for problem in exc.problems:
            print(f"offline-eval: {problem}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full, read-only or failing disk (or the cache's): not bad input, exit 1
        if args.verbose:
            raise
        print(f"offline-eval: {_disk_failure(exc, args.command)}", file=sys.stderr)
        return 1
    except (ValueError, RuntimeError, LookupError) as exc:
        if args.verbose:
            raise
        print(f"offline-eval: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
