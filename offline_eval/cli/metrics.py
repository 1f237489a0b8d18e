"""`offline-eval metrics`: every metric with what it needs and uses, its direction and its options."""

from __future__ import annotations

import argparse
from typing import Any

HELP_ORDER = 20  # where `offline-eval --help` lists this command (offline_eval.cli.command_modules)


def register(subparsers: Any) -> argparse.ArgumentParser:
    metrics = subparsers.add_parser("metrics", help="list the metrics: what each needs and uses, its direction "
                                                    "and its options")
    metrics.add_argument("--plugin", action="append", metavar="MODULE|FILE.py",
                         help="list the metrics this module or file registers too; repeatable")
    metrics.add_argument("--criteria", action="append", metavar="FILE.toml",
                         help="list the metrics of this criteria file too; repeatable")
    metrics.set_defaults(func=cmd_metrics)
    return metrics


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
