"""``offline-eval report`` and ``offline-eval compare`` subcommands.

The main CLI calls :func:`register` with its subparsers; each subcommand sets ``func`` to a
callable taking the parsed arguments and returning the exit status. Only argparse is imported
here; the report machinery is imported when a command runs.

Exit status: 0 success; 1 ``--fail-on-regression`` found a significant regression, or a metric whose
pairs leave out too many of the samples either run scored (``--max-unscored``; a sample one run lacks
counts as one it left unscored); 2 bad input (missing or malformed run directory), or runs a gate cannot
rest on (no metric or no sample in common, a run not finished, a metric on fewer pairs than
:data:`offline_eval.thresholds.MIN_PAIRS`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

HELP_ORDER = 60  # where `offline-eval --help` lists this command (offline_eval.cli.command_modules)

__all__ = ["register", "cmd_report", "cmd_compare", "main"]


def cmd_report(args: argparse.Namespace) -> int:
    """Write the HTML report of a run and print its path; a run that has not finished, or whose rows are
    missing, is said on stderr too, since the page alone may never be opened."""
    from offline_eval.report.html import load_run, partial_notes, write_report
    from offline_eval.report.terminal import STARTER_NOTE

    try:
        data = load_run(args.run_dir)
        path = write_report(data, getattr(args, "output", None))
    except (OSError, ValueError) as exc:
        print(f"offline-eval report: {exc}", file=sys.stderr)
        return 2
    for note in partial_notes(data):
        print(f"offline-eval report: {note}", file=sys.stderr)
    if data.starter:
        print(f"offline-eval report: {STARTER_NOTE}", file=sys.stderr)
    print(path)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Compare two runs, print the table, write compare.html, optionally gate on regressions."""
    from offline_eval.report.compare import compare_runs, print_comparison, write_comparison_html

    try:
        comparison = compare_runs(args.run_a, args.run_b, by=args.by)
        print_comparison(comparison)
        path = write_comparison_html(comparison, args.output)
    except (OSError, ValueError) as exc:
        print(f"offline-eval compare: {exc}", file=sys.stderr)
        return 2
    print(f"\nwrote {path}")
    if args.fail_on_regression:
        return _gate(comparison, args.max_unscored)
    return 0


def _gate(comparison: Any, max_unscored: float | None) -> int:
    """--fail-on-regression: 2 when the runs cannot be gated on (one line each: what is missing), else
    each metric's pairs, then 1 when a metric's pairs leave out too many of the samples either run scored
    (unscored or missing from one run) or it regressed, else 2 when a metric rests on too few pairs for an
    interval (a failure wins: the candidate already does not pass)."""
    from offline_eval.report.compare import (
        gate_failures, gate_lines, gate_refusals, gate_too_few, regression_failures,
    )
    from offline_eval.thresholds import DEFAULT_MAX_UNSCORED

    refusals = gate_refusals(comparison)
    for line in refusals:
        print(f"offline-eval compare: cannot gate: {line}", file=sys.stderr)
    if refusals:
        return 2
    limit = DEFAULT_MAX_UNSCORED if max_unscored is None else max_unscored
    for line in gate_lines(comparison, limit):
        print(f"gate: {line}")
    failures = gate_failures(comparison, limit)
    for line in failures:
        print(f"GATE FAILED: {line}", file=sys.stderr)
    regressions = regression_failures(comparison)
    for line in regressions:
        print(f"REGRESSION: {line}", file=sys.stderr)
    too_few = gate_too_few(comparison, limit)
    for line in too_few:
        print(f"offline-eval compare: cannot gate: {line}", file=sys.stderr)
    return 1 if failures or regressions else 2 if too_few else 0


def register(subparsers: Any) -> None:
    """Add the ``report`` and ``compare`` subcommands to an argparse subparsers object."""
    from offline_eval.thresholds import DEFAULT_MAX_UNSCORED, MIN_PAIRS, unscored_share

    p = subparsers.add_parser("report", help="write a self-contained HTML report of a run",
                              description="Write RUN_DIR/report.html: one self-contained file that "
                                          "opens offline in any browser.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="directory written by `offline-eval run`")
    p.add_argument("--output", "-o", metavar="FILE", default=None,
                   help="where to write the HTML (default: RUN_DIR/report.html)")
    p.set_defaults(func=cmd_report)

    c = subparsers.add_parser("compare", help="compare two runs sample by sample, or conversation by conversation",
                              description="Pair the samples of two runs by id (or, with --by conversation, "
                                          "their conversations by conversation id) and report, per metric, "
                                          "the change B - A with a paired bootstrap interval and p-value.")
    c.add_argument("run_a", metavar="RUN_A", help="baseline run directory")
    c.add_argument("run_b", metavar="RUN_B", help="candidate run directory")
    c.add_argument("--output", "-o", metavar="DIR", default=None,
                   help="directory for compare.html (default: RUN_B)")
    c.add_argument("--by", choices=("sample", "conversation"), default="sample",
                   help="pair samples by id (default), or conversations by conversation_id, comparing each "
                        "metric's conversation means (each over the conversation's turns both runs scored)")
    c.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 when any metric is significantly worse in RUN_B "
                        "(p < 0.05 and the 95%% interval entirely on the bad side of zero), or when a metric's "
                        "pairs leave out too many samples, unscored or missing from one run (--max-unscored); "
                        "exit 2 when the runs share no metric or no sample, one has not finished, or a metric "
                        f"has fewer than {MIN_PAIRS} pairs")
    c.add_argument("--max-unscored", type=unscored_share, metavar="SHARE",
                   help="with --fail-on-regression: the share of the samples (with --by conversation, the "
                        "turns) either run scored that may be unscored in, or missing from, the other before a "
                        "metric's gate fails "
                        f"(default {DEFAULT_MAX_UNSCORED:g})")
    c.set_defaults(func=cmd_compare)


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point (``python -m offline_eval.cli.report``), mainly for tests."""
    parser = argparse.ArgumentParser(prog="offline-eval")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
