"""The `offline-eval` command line: the parser, :func:`main`, and one module per command, with the
flags the commands share in :mod:`.shared`.

A command is a module of this package that defines ``register(subparsers)`` (which adds its parsers):
:func:`command_modules` finds each one, with no list to edit, and ``offline-eval --help`` lists them by
their ``HELP_ORDER`` (a number; a module without one comes last), then by module name.

    offline-eval run --dataset data.jsonl --profile gpu --device cuda:0 --batch-size 10
    offline-eval models check
    offline-eval retrieval --corpus docs/ --queries queries.jsonl
    offline-eval report runs/data
    offline-eval compare runs/before runs/after --fail-on-regression
"""

from __future__ import annotations

import argparse
import atexit
import errno
import importlib
import logging
import math
import os
import pkgutil
import signal
import sys
from types import ModuleType
from typing import Any

from offline_eval import __version__
from offline_eval.cli.run import merge_config
from offline_eval.cli.shared import Interrupted


def command_modules() -> list[ModuleType]:
    """Every module of this package that defines ``register(subparsers)``, imported, in the order of
    ``offline-eval --help``: by ``HELP_ORDER``, then by name. A module whose name starts with ``_``
    (``__main__``, the program) is none; a module left out of an install is not found, and one that
    fails to import raises, as any import does."""
    found = []
    for info in pkgutil.iter_modules(__path__, prefix=f"{__name__}."):
        if info.name.rpartition(".")[2].startswith("_"):
            continue
        module = importlib.import_module(info.name)
        if callable(getattr(module, "register", None)):
            found.append(module)
    return sorted(found, key=lambda module: (getattr(module, "HELP_ORDER", math.inf), module.__name__))


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
    for module in command_modules():
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
            args = merge_config(args, next(a for a in parser._subparsers._group_actions[0].choices.values()
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

