"""``offline-eval review RUN_FOLDER``: serve the labelling page until Ctrl-C.

Only argparse is imported here; the review is imported when the command runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from offline_eval.options import HelpFormatter

HELP_ORDER = 90  # where `offline-eval --help` lists this command (offline_eval.cli.command_modules)


def _metrics(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected metric names separated by commas, got {text!r}")
    return names


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {text!r}")
    return port


def cmd_review(args: argparse.Namespace) -> int:
    """Read the run folder (refusing one that cannot be reviewed as asked: exit 2), print the page's
    URL and serve it; Ctrl-C or SIGTERM stops the server (exit 0): every label is already on disk."""
    from offline_eval.review.server import ReviewServer
    from offline_eval.review.session import REVIEW_FILE, Review

    review = Review(args.run_folder, args.metrics, seed=args.seed, annotator=args.annotator)
    try:
        server = ReviewServer(review, args.port, quiet=not args.verbose)
    except OSError as exc:
        print(f"offline-eval review: cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"review: {', '.join(review.metrics)}; {len(review.queue)} samples in the order of "
          f"{review.folder / REVIEW_FILE} (seed {review.seed}); labels go to {review.labels_path}", file=sys.stderr)
    print(f"open {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("offline-eval review: stopped; every label given is in " f"{review.labels_path}", file=sys.stderr)
    finally:
        server.server_close()
    return 0


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``review`` subcommand."""
    p = subparsers.add_parser(
        "review", help="label a run's samples in a browser: a page on 127.0.0.1 for domain experts",
        formatter_class=HelpFormatter,
        description="Serve a labelling page for RUN_FOLDER on 127.0.0.1 (a random port and token; open the "
                    "URL printed). It shows one sample at a time, in a seeded random order recorded in "
                    "RUN_FOLDER/review.json, asks each metric's question for people, and appends every answer "
                    "to RUN_FOLDER/labels.jsonl (fsynced) before it moves on. Keys: y yes, n no, u unsure, "
                    "s skip the sample, b back, f forward, v the judge's verdicts. See docs/review.md.")
    p.add_argument("run_folder", metavar="RUN_FOLDER", help="a folder written by a finished `offline-eval run`")
    p.add_argument("--metrics", type=_metrics, metavar="A,B",
                   help="the metrics to ask about (default: the run's metrics that have a question for people)")
    p.add_argument("--annotator", metavar="NAME",
                   help="who labels, recorded in every label (default: asked on the page; ?annotator=NAME in the "
                        "URL also sets it, so one server can take several annotators)")
    p.add_argument("--seed", type=int, help="the seed of the random order of a new review (default 0); a review "
                                            "already begun keeps its own")
    p.add_argument("--port", type=_port, default=0, help="the port on 127.0.0.1 (default: a free one)")
    p.set_defaults(func=cmd_review)
    return p
