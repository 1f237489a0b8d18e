"""`offline-eval agreement` and `offline-eval calibrate`: how well does a metric agree with human labels,
and where should its decision threshold sit for one judge?

    offline-eval agreement --dataset begin.tsv --map question=message,contexts=knowledge \
        --labels begin_label --positive "Fully attributable" --drop Generic --metric faithfulness

Importing this module is cheap (argparse only); the work lives in offline_eval.people.agreement.scoring.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from offline_eval.cli.shared import (
    add_cache_arguments, add_criteria_argument, add_model_arguments, add_settings_arguments, open_cache, positive_int,
    run_config_from_args,
)
from offline_eval.options import HelpFormatter

HELP_ORDER = 80  # where `offline-eval --help` lists this command (offline_eval.cli.command_modules)


def _run(args: argparse.Namespace) -> int:
    from offline_eval.people.agreement.scoring import run_from_args

    return run_from_args(args, run_config_from_args, open_cache)


def _calibrate(args: argparse.Namespace) -> int:
    from offline_eval.people.agreement.scoring import calibrate_from_args

    return calibrate_from_args(args, run_config_from_args, open_cache)


def _add_labelled_data(p: argparse.ArgumentParser, *, from_run: bool = False) -> None:
    data = p.add_argument_group("data and labels")
    if from_run:
        data.add_argument("--run", type=Path, metavar="RUN_FOLDER",
                          help="fit from the values a finished `offline-eval run` stored (no scoring) and a labels "
                               "file (--labels FILE, default RUN_FOLDER/labels.jsonl), instead of --dataset")
    data.add_argument("--dataset", required=not from_run, help="any dataset `run` reads")
    data.add_argument("--map", dest="mapping", metavar="FIELD=PATH,...",
                      help="column mapping, e.g. question=message,contexts=knowledge")
    data.add_argument("--limit", type=positive_int, help="use only the first N rows")
    if from_run:
        data.add_argument("--labels", metavar="FIELD|FILE", help="column holding the human label; with --run, a labels "
                                                                "file (offline_eval.people.labels)")
    else:
        data.add_argument("--labels", required=True, metavar="FIELD", help="column holding the human label")
    data.add_argument("--positive", nargs="+", metavar="VALUE",
                      help="label values that mean 1, whatever their case (other strings mean 0); numeric labels "
                           "need none")
    data.add_argument("--drop", nargs="+", metavar="VALUE",
                      help="label values whose samples are left out, whatever their case")
    from offline_eval.thresholds import MIN_LABELS_PER_CLASS

    data.add_argument("--min-per-class", type=positive_int, metavar="N",
                      help="the fewest yes and the fewest no labels (of scored samples) to "
                           f"{'fit a calibration' if from_run else 'measure agreement'} on (default "
                           f"{MIN_LABELS_PER_CLASS}); fewer is refused, and an N below {MIN_LABELS_PER_CLASS} warns")


def _add_scoring(p: argparse.ArgumentParser, what: argparse._ArgumentGroup) -> None:
    """--metric, the judging settings (as for `run`, but for the aggregate's) and the model flags: a
    calibration is fitted for the settings it was scored with, so every one of them can be given."""
    what.add_argument("--metric", required=True, help="metric name (`offline-eval metrics`)")
    add_criteria_argument(what, one_metric=True)
    add_settings_arguments(p.add_argument_group("judging (as for `run`)"), aggregate=False)
    models = p.add_argument_group("models (as for `run`)")
    add_model_arguments(models)


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``agreement`` and ``calibrate`` subcommands (their ``func`` runs them)."""
    p = subparsers.add_parser(
        "agreement", help="agreement of a metric with human labels (balanced accuracy, AUC, Spearman, pairwise)",
        description="Score a human-labelled dataset with one metric and report agreement with the labels: "
                    "pointwise -- balanced accuracy (metric >= --threshold), ROC AUC and Spearman; "
                    "pairwise -- share of pairs where the metric prefers the human-preferred item "
                    "(ties split at random with a fixed seed). Each with a bootstrap 95% interval. "
                    "Unscored samples are counted by reason and left out, never counted as 0.",
        formatter_class=HelpFormatter)
    _add_labelled_data(p)
    what = p.add_argument_group("agreement")
    what.add_argument("--protocol", choices=["pointwise", "pairwise"], default="pointwise")
    what.add_argument("--pair-field", metavar="FIELD",
                      help="pairwise (required there): field shared by the items to compare (higher label = "
                           "preferred); a group of three or more gives every two of its items with different "
                           "labels as a pair")
    from offline_eval.thresholds import MIN_LABELLED_PAIRS

    what.add_argument("--min-pairs", type=positive_int, metavar="N",
                      help=f"pairwise: the fewest pairs to measure agreement on (default {MIN_LABELLED_PAIRS}); "
                           f"fewer is refused, and an N below {MIN_LABELLED_PAIRS} warns")
    what.add_argument("--threshold", type=float, default=0.5,
                      help="metric value counted as a positive prediction: a finite number within the metric's "
                           "values ([0, 1] for most)")
    what.add_argument("--value", metavar="KEY",
                      help="use the metric's metadata[KEY] instead of its value (e.g. supported_share)")
    what.add_argument("--resamples", type=positive_int, help="bootstrap resamples (default: offline_eval.stats, 2000)")
    what.add_argument("--seed", type=int, help="seed of the bootstrap and of tie splits (default: offline_eval.stats)")
    _add_scoring(p, what)
    out = p.add_argument_group("output")
    out.add_argument("--output", type=Path, help="run folder (default: runs/agreement-<dataset>-<metric>); "
                                                 "agreement.json is written there")
    _add_overwrite(out)
    add_cache_arguments(out)
    out.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_run)

    c = subparsers.add_parser(
        "calibrate", help="fit a metric's decision threshold for one judge on human labels",
        description="Score a human-labelled dataset with one metric and fit, for exactly these models and "
                    "settings, the threshold that maximises balanced accuracy (with its cross-validated "
                    "balanced accuracy) and a Platt map to P(positive). The calibration is written into the "
                    "judge's model folder (offline-eval-calibration.json) unless --to names another file; "
                    "`run` applies it to that metric when the models and settings match, and only then. "
                    "With --run RUN_FOLDER --labels FILE the same fit comes from a finished run's stored values and "
                    "a labels file, without scoring again.",
        formatter_class=HelpFormatter)
    _add_labelled_data(c, from_run=True)
    what = c.add_argument_group("calibration")
    what.add_argument("--folds", type=positive_int, default=5, help="folds of the cross-validated balanced accuracy")
    what.add_argument("--to", type=Path, metavar="FILE",
                      help="calibration file to write (default: offline-eval-calibration.json in the judge's "
                           "folder, else in the folder of the metric's first model)")
    _add_scoring(c, what)
    out = c.add_argument_group("output")
    out.add_argument("--output", type=Path, help="run folder of the scoring (default: runs/calibrate-<dataset>-<metric>)")
    _add_overwrite(out)
    add_cache_arguments(out)
    out.add_argument("--quiet", action="store_true", help="no progress bars")
    c.set_defaults(func=_calibrate)
    return p


def _add_overwrite(group: argparse._ArgumentGroup) -> None:
    group.add_argument("--overwrite", action="store_true",
                       help="when --output holds another run's results, move them into its earlier/ subfolder")
