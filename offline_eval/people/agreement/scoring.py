"""Score a human-labelled dataset with one metric and measure agreement with the labels.

    labelled, excluded = read_labels(samples, "begin_label", positive=["Fully attributable"])
    setup = build_setup("faithfulness", ModelChoice(profile="starter", judge=folder), verdicts="options")
    scores = score_samples([s for s, _ in labelled], setup, "runs/agreement", cache=cache)
    report = agreement_report(labelled, scores, protocol="pointwise")

Unscored samples are counted by reason and left out, never counted as 0.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import sys
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any, Callable, Sequence

from offline_eval.people.agreement import agreement_pairwise, agreement_pointwise
from offline_eval.data.schema import DataError, Sample, described, printable
from offline_eval.engine.cache import ResultCache
from offline_eval.engine.models import Models
from offline_eval.judging.settings import EvalSettings
from offline_eval.metrics import metric_classes
from offline_eval.metrics.base import Metric
from offline_eval.options import flag_of
from offline_eval.people.calibration import OPTIONS_ADDED, recorded_options
from offline_eval.run.config import Run, RunConfig, build_run
from offline_eval.run.execute import execute
from offline_eval.run.model_choice import ModelChoice
from offline_eval.runtime.registry import JUDGE_VERIFIES, backend_spec
from offline_eval.stats import DEFAULT_RESAMPLES, DEFAULT_SEED
from offline_eval.text import counted

DROP = "drop"

# The agreement and calibrate commands read their flags (an argparse Namespace) here; the command line,
# which sits above this package, gives them what turns those flags into the run's configuration and
# opens the cache they name (offline_eval.cli.shared), so nothing here imports the command line.
ConfigOf = Callable[[Any], RunConfig]
CacheOf = Callable[[Any], Any]


def resolve_metric(name: str) -> Metric:
    classes = metric_classes()
    if name not in classes:
        raise ValueError(f"unknown metric {printable(str(name))}; known: {', '.join(sorted(classes))}")
    return classes[name]()


# --- labels ---------------------------------------------------------------------------------------
def label_value(raw: Any, positive: Sequence[str] = (), drop: Sequence[str] = ()) -> float | str | None:
    """A human label as a number: 1/0 for strings (1 when in ``positive``), numbers as they are.

    Returns ``"drop"`` for a value listed in ``drop``, None for a missing label. ``positive`` and
    ``drop`` match text whatever its case (``--positive yes`` takes "Yes" and "YES", as "yes" is read
    without it). A string that is not in ``positive`` counts 0 when ``positive`` is given; without
    ``positive``, a string must read as a number (``"1"``, ``"0.5"``, ``"true"``/``"false"``) or a
    DataError is raised. A list, an object or an infinite number is a DataError too: none is a label,
    and counting it as "no" (its text is not a positive value) would hide the mistake.
    """
    if raw is None or (isinstance(raw, float) and math.isnan(raw)):
        return None
    if isinstance(raw, bool):
        return 1.0 if raw else 0.0
    if isinstance(raw, (list, tuple, dict)):
        raise DataError(f"expected a label (text, a number, true or false), got {described(raw)}")
    if isinstance(raw, numbers.Real) and not math.isfinite(raw):
        raise DataError(f"label {raw} is not a finite number")
    text = str(raw).strip()
    if text == "":
        return None
    if _folded(text) in {_folded(d) for d in drop}:
        return DROP
    if isinstance(raw, numbers.Real):
        return float(raw)
    if positive:
        return 1.0 if _folded(text) in {_folded(p) for p in positive} else 0.0
    lowered = text.lower()
    if lowered in ("true", "yes"):
        return 1.0
    if lowered in ("false", "no"):
        return 0.0
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"label '{text}' is not a number; name the positive value(s) with --positive") from None
    if not math.isfinite(value):
        raise DataError(f"label '{text}' is not a finite number")
    return value


def _folded(text: Any) -> str:
    return str(text).strip().casefold()


def read_labels(samples: Sequence[Sample], label_field: str, *, positive: Sequence[str] = (), drop: Sequence[str] = (),
                source: str | None = None) -> tuple[list[tuple[Sample, float]], Counter[str]]:
    """Samples with a usable label (``Sample.extra[label_field]``), and counts of the others by reason
    (``no_label``, ``dropped_label``). A bad label is a DataError naming ``source`` (the dataset), the
    row and the field."""
    kept: list[tuple[Sample, float]] = []
    excluded: Counter[str] = Counter()
    for sample in samples:
        raw = sample.extra.get(label_field, getattr(sample, label_field, None)
                               if label_field in Sample.__dataclass_fields__ else None)
        try:
            value = label_value(raw, positive, drop)
        except DataError as exc:
            raise DataError(str(exc), source=source, row=sample.row or None, field=label_field) from None
        if value is None:
            excluded["no_label"] += 1
        elif value == DROP:
            excluded["dropped_label"] += 1
        else:
            kept.append((sample, float(value)))
    return kept, excluded


# --- models -----------------------------------------------------------------------------------------
def build_setup(metric: str | Metric, choice: ModelChoice | None = None, *, models: Models | None = None,
                criteria: Sequence[Any] = (), **options: Any) -> Run:
    """The run of one metric as ``offline-eval run`` builds it: ``choice`` the model flags, ``options``
    the settings and metric options by name; ``models`` reuses models configured earlier (so a benchmark loads each
    judge once). Calibrations are not applied: agreement is measured on the metric's own values.
    Raises :class:`~offline_eval.run.config.ModelsMissing` listing the missing model folders."""
    config = RunConfig(metrics=[metric], models=choice or ModelChoice(), options=options, calibrate=False,
                       criteria=list(criteria))
    return build_run(config, models=models)


def setup_info(setup: Run) -> dict[str, Any]:
    """What an agreement report records of the run that scored it."""
    settings = setup.settings
    return {**setup.info, "metric": setup.metrics[0].name, "verifier": settings.verifier,
            "verdicts": settings.verdicts, "max_tokens": settings.max_tokens,
            "models": setup.models.identities()}


def score_samples(samples: Sequence[Sample], setup: Run, output_dir: str | Path, *,
                  cache: ResultCache | None = None, progress: Any = None,
                  overwrite: bool = False) -> dict[str, dict[str, Any]]:
    """Score ``samples`` with the run's metric; ``{sample id: score dict}``.

    The run folder is resumable like any ``offline-eval run`` folder (and, like one, refuses another
    run's results unless ``overwrite``).
    """
    if overwrite != setup.config.overwrite:
        setup = dataclasses.replace(setup, config=dataclasses.replace(setup.config, overwrite=overwrite))
    result = execute(setup, list(samples), output_dir, cache=cache, progress=progress,
                     run_info={"agreement": True})
    name = setup.metrics[0].name
    return {row["id"]: row["scores"][name] for row in result.rows()}


# --- agreement report -----------------------------------------------------------------------------
def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def numeric_keys(metadata: Any) -> list[str]:
    """The keys of a score's metadata that hold a finite number (what --value can read)."""
    return sorted(str(k) for k, v in metadata.items() if _is_number(v)) if isinstance(metadata, dict) else []


def _score_of(score: dict[str, Any], value_key: str | None, *, sample: Sample | None = None,
              source: str | None = None) -> float | None:
    """The number agreement reads of a score: its value, or (``value_key``) its ``metadata[value_key]``;
    None when unscored or the key is absent. A key holding anything but a finite number is a one-line
    DataError naming the key, the sample and what the key holds: it cannot be ranked against labels."""
    if score.get("value") is None:
        return None
    if value_key:
        metadata = score.get("metadata") or {}
        value = metadata.get(value_key) if isinstance(metadata, dict) else None
        if value is None:
            return None
        if not _is_number(value):
            which = f" of sample {sample.id}" if sample is not None else ""
            raise DataError(f"--value {value_key}: the metric's metadata[{value_key!r}]{which} holds {described(value)}, "
                            f"not a finite number; keys of its score holding numbers: "
                            f"{', '.join(numeric_keys(metadata)) or 'none'}",
                            source=source, row=(sample.row or None) if sample is not None else None)
        return float(value)
    return float(score["value"])


def _pair_key(sample: Sample, pair_field: str) -> Any:
    if pair_field in sample.extra:
        return sample.extra[pair_field]
    if pair_field in Sample.__dataclass_fields__:
        return getattr(sample, pair_field)
    return None


def pair_groups(labelled: Sequence[tuple[Sample, float]], pair_field: str
                ) -> tuple[dict[str, list[tuple[Sample, float]]], Counter[str]]:
    """The pairwise protocol's groups: labelled samples by their ``pair_field`` (key -> [(sample, label)],
    in order), and the samples left out by reason: ``no_pair_key`` (the field is missing or empty),
    ``alone_in_group`` (no other sample shares its key, so it is in no pair)."""
    groups: dict[str, list[tuple[Sample, float]]] = {}
    left_out: Counter[str] = Counter()
    for sample, label in labelled:
        key = _pair_key(sample, pair_field)
        if key is None or (isinstance(key, str) and not key.strip()):
            left_out["no_pair_key"] += 1
            continue
        groups.setdefault(str(key), []).append((sample, label))
    for key in [k for k, members in groups.items() if len(members) == 1]:
        left_out["alone_in_group"] += 1
        del groups[key]
    return groups, left_out


def candidate_pairs(groups: dict[str, list[tuple[Sample, float]]]) -> int:
    """How many pairs the groups give before scoring (every two members with different labels): the
    pairs that can be compared once scored are at most these."""
    return sum(la != lb for members in groups.values() for (_, la), (_, lb) in combinations(members, 2))


def agreement_report(labelled: Sequence[tuple[Sample, float]], scores: dict[str, dict[str, Any]], *,
                     protocol: str = "pointwise", pair_field: str | None = None, threshold: float = 0.5,
                     value_key: str | None = None, excluded: Counter[str] | None = None,
                     resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                     source: str | None = None) -> dict[str, Any]:
    """Agreement of the metric's scores with the labels, as a JSON-ready dict.

    ``value_key``: read the metric's ``metadata[value_key]`` instead of its value (e.g.
    ``mean_probability`` for a continuous faithfulness). Pairwise: samples sharing ``pair_field``
    form a group; every two of a group with different labels make a pair whose preferred item is the
    higher label, so a group of three or more gives several pairs (``groups_with_several_pairs``
    counts those groups); a sample alone in its group is left out (``alone_in_group``). Unscored
    samples are counted by reason (``unscored:<reason>``) and left out. ``source`` (the dataset) is
    named in the error a bad ``value_key`` value gives.
    """
    skipped: Counter[str] = Counter(excluded or {})
    scored: list[tuple[Sample, float, float]] = []
    for sample, label in labelled:
        score = scores.get(sample.id)
        if score is None:
            skipped["unscored:not_run"] += 1
            continue
        value = _score_of(score, value_key, sample=sample, source=source)
        if value is None:
            reason = score.get("reason") or (f"no_{value_key}" if value_key else "unscored")
            skipped[f"unscored:{reason}"] += 1
            continue
        scored.append((sample, label, value))
    out: dict[str, Any] = {"n_labelled": len(labelled), "n_scored": len(scored),
                           "excluded": dict(sorted(skipped.items())), "value": value_key or "value",
                           "seed": seed, "resamples": resamples}
    if protocol == "pointwise":
        agreement = agreement_pointwise([v for _, _, v in scored], [y for _, y, _ in scored],
                                        threshold=threshold, resamples=resamples, seed=seed)
        out.update(agreement.to_dict())
        pos = [v for _, y, v in scored if y == 1]
        neg = [v for _, y, v in scored if y == 0]
        out["mean_score_positive"] = sum(pos) / len(pos) if pos else None
        out["mean_score_negative"] = sum(neg) / len(neg) if neg else None
        return out
    if protocol != "pairwise":
        raise ValueError(f"unknown protocol {protocol!r} (pointwise, pairwise)")
    if not pair_field:
        raise ValueError("the pairwise protocol needs --pair-field (the field shared by the items of a pair)")
    groups, left_out = pair_groups(labelled, pair_field)
    skipped.update(left_out)
    pairs: list[tuple[float, float]] = []
    pair_skips: Counter[str] = Counter()
    several = 0  # groups that gave more than one pair: their items count in several pairs
    for key in sorted(groups):
        members = [(label, _score_of(scores.get(sample.id, {}), value_key, sample=sample, source=source))
                   for sample, label in groups[key]]
        before = len(pairs)
        for (la, sa), (lb, sb) in combinations(members, 2):
            if la == lb:
                pair_skips["same_label"] += 1
            elif sa is None or sb is None:
                pair_skips["unscored_member"] += 1
            else:
                pairs.append((sa, sb) if la > lb else (sb, sa))
        several += len(pairs) - before > 1
    agreement = agreement_pairwise(pairs, resamples=resamples, seed=seed)
    out.update(agreement.to_dict())
    out["n_groups"] = len(groups)
    out["groups_with_several_pairs"] = several
    out["pairs_skipped"] = dict(sorted(pair_skips.items()))
    out["excluded"] = dict(sorted(skipped.items()))
    return out


def check_pairs(what: str, pairs: int, minimum: int | None, *, warn: bool = True,
                left_out: dict[str, int] | None = None) -> None:
    """Refuse (a DataError of one line) ``what`` resting on fewer than ``minimum`` pairs (None:
    MIN_LABELLED_PAIRS); when a lower ``minimum`` lets fewer than the default through, a loud warning on
    stderr (``warn``; the check before scoring leaves it to the one after), as :func:`check_labels_per_class`.
    ``left_out``: what was left out (samples, pairs), by reason, named in the refusal."""
    from offline_eval.thresholds import MIN_LABELLED_PAIRS

    required = MIN_LABELLED_PAIRS if minimum is None else minimum
    if pairs < required:
        gone = ", ".join(f"{k} {v}" for k, v in sorted((left_out or {}).items()) if v)
        raise DataError(f"{what} would rest on {counted(pairs, 'pair')}{f' (left out: {gone})' if gone else ''}; it "
                        f"needs at least {required} (--min-pairs): label more samples of the same groups (two "
                        "samples of a group with different labels make a pair), or pass a lower --min-pairs to "
                        "accept a figure that moves with every pair")
    if warn and pairs < MIN_LABELLED_PAIRS:
        print(f"offline-eval: WARNING: {what} rests on only {counted(pairs, 'pair')}, fewer than "
              f"{MIN_LABELLED_PAIRS} (allowed by --min-pairs {required}): it will move with every pair added",
              file=sys.stderr)


def check_labels_per_class(what: str, yes: int, no: int, minimum: int | None, *, warn: bool = True) -> None:
    """Refuse (a DataError of one line) ``what`` resting on fewer than ``minimum`` labels of either class
    (None: MIN_LABELS_PER_CLASS); when a lower ``minimum`` lets fewer than the default through, a loud
    warning on stderr (``warn``; the check before scoring leaves it to the one after)."""
    from offline_eval.thresholds import MIN_LABELS_PER_CLASS

    required = MIN_LABELS_PER_CLASS if minimum is None else minimum
    if min(yes, no) < required:
        raise DataError(f"{what} would rest on {yes} yes and {no} no labels; it needs at least {required} of each "
                        "(--min-per-class): label more samples (`offline-eval review` draws them at random), or "
                        "pass a lower --min-per-class to accept a figure that moves with every label")
    if warn and min(yes, no) < MIN_LABELS_PER_CLASS:
        print(f"offline-eval: WARNING: {what} rests on only {yes} yes and {no} no labels, fewer than "
              f"{MIN_LABELS_PER_CLASS} of each (allowed by --min-per-class {required}): it will move with every "
              "label added", file=sys.stderr)


def format_report(report: dict[str, Any]) -> str:
    """A few human-readable lines."""
    def fmt(stat: dict[str, Any]) -> str:
        if stat.get("value") is None:
            return f"- ({stat['undefined']})" if stat.get("undefined") else "-"
        ci = stat.get("ci95")
        return f"{stat['value']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{stat['value']:.3f}"

    lines = [f"labelled {report['n_labelled']}, scored {report['n_scored']}"]
    if report["excluded"]:
        lines.append("excluded: " + ", ".join(f"{k} {v}" for k, v in report["excluded"].items()))
    if report["protocol"] == "pointwise":
        lines.append(f"positives {report['n_positive']}, negatives {report['n_negative']}, "
                     f"threshold {report['threshold']}")
        lines.append(f"balanced accuracy  {fmt(report['balanced_accuracy'])}")
        lines.append(f"ROC AUC            {fmt(report['roc_auc'])}")
        lines.append(f"Spearman           {fmt(report['spearman'])}")
    else:
        lines.append(f"pairs {report['n_pairs']} (metric ties split at random: {report['n_ties']})")
        several = report.get("groups_with_several_pairs")
        if several:
            lines.append(f"groups {report['n_groups']}, of which {several} gave more than one pair (a group of "
                         "three or more samples gives every two with different labels as a pair)")
        if report.get("pairs_skipped"):
            lines.append("pairs skipped: " + ", ".join(f"{k} {v}" for k, v in report["pairs_skipped"].items()))
        lines.append(f"pairwise accuracy  {fmt(report['accuracy'])}")
    return "\n".join(lines)


def _score_labelled(args: Any, command: str, config_of: ConfigOf, open_cache: CacheOf
                    ) -> tuple[Run, list[tuple[Sample, float]], Counter[str], dict[str, dict[str, Any]], Path]:
    """What ``agreement`` and ``calibrate`` share: read the labelled data, build the metric's models,
    score every labelled sample (cached and resumable). Returns (setup, labelled, excluded, scores,
    run folder)."""
    from offline_eval.data.readers import parse_mapping, read_dataset
    from offline_eval.progress import StageBars
    from offline_eval.runtime.threads import apply_threads_choice, choose_threads

    pairwise = command == "agreement" and args.protocol == "pairwise"
    # the flags alone: refused before the dataset is even read
    if pairwise and not args.pair_field:
        raise ValueError("agreement --protocol pairwise needs --pair-field FIELD (the field shared by the samples "
                         "to compare)")
    if command == "agreement" and not math.isfinite(args.threshold):  # NaN would go into agreement.json: no JSON
        raise ValueError(f"--threshold {args.threshold}: not a finite number")
    apply_threads_choice(choose_threads(getattr(args, "threads", None)))
    mapping = parse_mapping(args.mapping) if args.mapping else None
    samples = read_dataset(args.dataset, mapping, limit=args.limit)
    labelled, excluded = read_labels(samples, args.labels, positive=args.positive or (),
                                     drop=args.drop or (), source=str(args.dataset))
    if not labelled:
        raise DataError(f"no sample has a usable label in field '{args.labels}'", source=str(args.dataset))
    values = [y for _, y in labelled]
    if not pairwise and all(y in (0.0, 1.0) for y in values):
        _check_labelled(command, values, args, warn=False)  # before scoring: the scored ones can only be fewer
    if pairwise:
        _check_pair_field(args, samples, labelled)
    config = config_of(args)
    setup = build_setup(args.metric, config.models, criteria=config.criteria, **config.options)
    if command == "agreement" and not pairwise:
        check_threshold(args.threshold, setup.metrics[0], args.value)
    if setup.starter:
        print(f"offline-eval: starter profile: its judge is too small to judge; these {command} numbers "
              "only show that the pipeline runs", file=sys.stderr)
    from offline_eval.run.folder import default_run_folder

    output = args.output or default_run_folder(args.dataset, f"{command}-", f"-{setup.metrics[0].name}")
    cache = open_cache(args)
    try:
        scores = score_samples([s for s, _ in labelled], setup, output, cache=cache,
                               progress=None if args.quiet else StageBars(),
                               overwrite=getattr(args, "overwrite", False))
    finally:
        cache.close()
    return setup, labelled, excluded, scores, Path(output)


def _check_pair_field(args: Any, samples: Sequence[Sample], labelled: Sequence[tuple[Sample, float]]) -> None:
    """Before scoring: refuse a --pair-field no labelled sample holds (every sample would be left out),
    and fewer pairs than --min-pairs (the scored pairs can only be fewer)."""
    groups, left_out = pair_groups(labelled, args.pair_field)
    if left_out["no_pair_key"] == len(labelled):
        held = sorted({str(k) for s in samples for k in s.extra})
        raise DataError(f"no labelled sample has a value in field '{args.pair_field}' (--pair-field); fields the "
                        f"rows hold besides the standard ones: {', '.join(held) or 'none'}",
                        source=str(args.dataset))
    check_pairs(f"the pairwise agreement of {args.metric}", candidate_pairs(groups),
                getattr(args, "min_pairs", None), warn=False, left_out=left_out)


def check_threshold(threshold: float, metric: Metric, value_key: str | None = None) -> None:
    """Refuse (ValueError, one line) a --threshold that is not a finite number, or, for the metric's own
    value, one outside the values it can take (``Metric.value_range``): every sample would be one class,
    and the balanced accuracy would say nothing. A ``value_key``'s range is unknown; it must be finite."""
    if not math.isfinite(threshold):
        raise ValueError(f"--threshold {threshold}: not a finite number")
    low, high = metric.value_range
    if value_key is None and not low <= threshold <= high:
        raise ValueError(f"--threshold {threshold}: {metric.name}'s values lie in [{low:g}, {high:g}]; give a "
                         "threshold in that range")


def _check_labelled(command: str, labels: Sequence[float], args: Any, *, warn: bool = True) -> None:
    from offline_eval.people.calibration import labels_per_class

    what = "a calibration" if command == "calibrate" else "the agreement"
    check_labels_per_class(f"{what} of {args.metric}", *labels_per_class(labels), getattr(args, "min_per_class", None),
                           warn=warn)


def run_from_args(args: Any, config_of: ConfigOf, open_cache: CacheOf) -> int:
    """The ``offline-eval agreement`` command (see :mod:`offline_eval.cli.agreement`)."""
    import json

    setup, labelled, excluded, scores, output = _score_labelled(args, "agreement", config_of, open_cache)
    report = agreement_report(labelled, scores, protocol=args.protocol, pair_field=args.pair_field,
                              threshold=args.threshold, value_key=args.value, excluded=excluded,
                              resamples=DEFAULT_RESAMPLES if args.resamples is None else args.resamples,
                              seed=DEFAULT_SEED if args.seed is None else args.seed, source=str(args.dataset))
    if not report["n_scored"]:
        raise DataError(_nothing_scored(setup.metrics[0].name, labelled, scores, args.value, report["excluded"]),
                        source=str(args.dataset))
    if report["protocol"] == "pairwise":
        check_pairs(f"the pairwise agreement of {args.metric}", report["n_pairs"], getattr(args, "min_pairs", None),
                    left_out={**report["excluded"], **report["pairs_skipped"]})
    elif all(y in (0.0, 1.0) for _, y in labelled):  # yes/no labels: counted on the scored samples
        check_labels_per_class(f"the agreement of {args.metric}", report["n_positive"], report["n_negative"],
                               getattr(args, "min_per_class", None))
    report = {"dataset": str(args.dataset), "labels": args.labels, "positive": list(args.positive or []),
              "metric": setup.metrics[0].name, "setup": setup_info(setup), **report}
    Path(output, "agreement.json").write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    print(format_report(report))
    print(f"agreement: {Path(output) / 'agreement.json'}", file=sys.stderr)
    return 0


def _nothing_scored(metric: str, labelled: Sequence[tuple[Sample, float]], scores: dict[str, dict[str, Any]],
                    value_key: str | None, excluded: dict[str, int]) -> str:
    """The one line that refuses an agreement no sample gave a number to: with --value, the key and the
    keys the metric's scores do carry when some were scored; else the reasons they went unscored."""
    scored = [scores[s.id] for s, _ in labelled if scores.get(s.id, {}).get("value") is not None]
    if value_key and scored:
        carried = sorted({str(k) for score in scored if isinstance(score.get("metadata"), dict)
                          for k in score["metadata"]})
        numeric = sorted({k for score in scored for k in numeric_keys(score.get("metadata"))})
        return (f"--value {value_key}: no score of {metric} holds that key (its scores carry "
                f"{', '.join(carried) or 'no metadata'}; of them numbers: {', '.join(numeric) or 'none'}): name one "
                "of those, or leave out --value to use the metric's value")
    reasons = ", ".join(f"{k} {v}" for k, v in excluded.items() if k.startswith("unscored:"))
    return f"no labelled sample was scored by {metric} ({reasons or 'none scored'}): nothing to measure agreement on"


def calibration_home(setup: Run) -> Path | None:
    """Where a calibration of ``setup``'s metric lives by default: the judge's model folder when the
    metric uses the judge, else the folder of its first model that has one."""
    roles = [r for r in ("judge", "verifier", "embedder") if r in setup.metrics[0].roles]
    if "verifier" in roles and setup.models.profile.verifier_is_judge:
        roles = ["judge"] + [r for r in roles if r != "verifier"]
    for role in roles:
        path = setup.models.profile.role(role).path
        if path is not None and Path(path).is_dir():
            return Path(path)
    return None


def stored_calibration_data(run_dir: str | Path, labels_path: str | Path, metric_name: str
                            ) -> tuple[dict[str, Any], list[float], list[float], Counter[str], Counter[str]]:
    """What ``calibrate --run`` fits on, from a finished run folder and a labels file (offline_eval.people.labels):
    (the run's run.json, the metric's stored values and the labels (1 yes, 0 no) of the labelled scored
    rows in the run's order, unscored counts, excluded counts). Several annotators' labels of a row are
    combined as ``offline-eval estimate`` combines them (the majority; an even split left out)."""
    from offline_eval.people.estimate import combine_labels, read_run
    from offline_eval.people.labels import read_labels
    from offline_eval.runlog import RUN_INFO, SUMMARY, RunLogError, is_finished, run_info

    run_dir = Path(run_dir)
    try:
        info = run_info(run_dir)
    except (OSError, RunLogError):
        info = None
    if info is None:
        raise DataError(f"not a run folder of `offline-eval run` (no readable {RUN_INFO})", source=str(run_dir))
    if not is_finished(run_dir):
        raise DataError(f"the run has not finished (no {SUMMARY}); rerun it to finish first", source=str(run_dir))
    run = read_run(run_dir)
    if metric_name not in run.metrics:
        raise DataError(f"the run did not score {metric_name} (its metrics: {', '.join(run.metrics)})",
                        source=str(run_dir))
    combined = combine_labels(read_labels(labels_path)).get(metric_name)
    if combined is None:
        raise DataError(f"no label for {metric_name}", source=str(labels_path))
    values, labels = [], []
    unscored: Counter[str] = Counter()
    excluded: Counter[str] = Counter(combined.counts)
    stored = run.values[metric_name]
    for sample_id, label in combined.rows.items():
        if sample_id not in stored:
            excluded["unknown_id"] += 1
    for sample_id in run.ids:  # the run's (dataset) order, as scoring the labelled rows again would give
        if sample_id not in combined.rows:
            continue
        if stored.get(sample_id) is None:
            unscored["unscored"] += 1
            continue
        values.append(float(stored[sample_id]))
        labels.append(combined.rows[sample_id])
    return info, values, labels, unscored, excluded


def _stored_settings(info: dict[str, Any], run_dir: Path) -> EvalSettings:
    """The settings a run recorded in run.json; one recorded by code without a setting that changes values
    cannot be matched to a calibration."""
    recorded = info.get("settings") if isinstance(info.get("settings"), dict) else {}
    missing = [k for k in EvalSettings.signature_fields(recorded_always=True) if k not in recorded]
    if missing:
        raise DataError(f"run.json records no {', '.join(missing)} (an older offline-eval wrote it); calibrate by "
                        "scoring the labelled set again (--dataset)", source=str(run_dir))
    names = {f.name for f in dataclasses.fields(EvalSettings)} - {"verifier_classifies"}
    verifier = recorded.get("verifier", JUDGE_VERIFIES)
    try:
        classifies = backend_spec("verifier", verifier).classifies_claims
    except ValueError as exc:
        raise DataError(f"run.json records {exc}", source=str(run_dir), field="settings.verifier") from None
    return EvalSettings(**{k: v for k, v in recorded.items() if k in names}, verifier_classifies=classifies)


def _calibrate_from_run(args: Any, config_of: ConfigOf) -> tuple[Metric, dict[str, str], EvalSettings, list[float],
                                                                list[float], dict[str, Any], Path | None]:
    """``calibrate --run``: (the metric with the run's options, the identities of its models and the
    settings the run recorded, the values, the labels, the source, the default home of the file)."""
    from offline_eval.people.labels import LABELS_FILE

    if args.dataset:
        raise ValueError("calibrate: give --dataset (score a labelled set) or --run (a finished run's values), not both")
    if args.positive or args.drop:
        raise ValueError("calibrate --run: --positive and --drop name values of a dataset's label column; a labels "
                         "file says yes or no")
    given = [flag_of(name, f) for name, f in EvalSettings.option_fields().items()
             if getattr(args, name, None) is not None]
    if given:  # they would be ignored: the run was scored with its own
        raise ValueError(f"calibrate --run: the calibration is fitted for the settings the run recorded (run.json); "
                         f"leave out {', '.join(given)}")
    run_dir = Path(args.run)
    labels_path = Path(args.labels) if args.labels else run_dir / LABELS_FILE
    info, values, labels, unscored, excluded = stored_calibration_data(run_dir, labels_path, args.metric)
    if getattr(args, "criteria", None):  # a criterion's metric exists once its file is read
        from offline_eval.metrics.criteria import load_criteria

        load_criteria(list(args.criteria))
    metric = resolve_metric(args.metric)
    stored_models = info.get("models") if isinstance(info.get("models"), dict) else {}
    identities = {role: str(stored_models[role]) for role in sorted(metric.roles) if role in stored_models}
    # the run's options of the metric (its config may hold more, as a criterion's definition: not options)
    fields = {f.name for f in dataclasses.fields(metric.Options)}
    recorded = (info.get("metric_options") or {}).get(metric.name) or {}
    if metric.name in OPTIONS_ADDED:
        recorded = recorded_options(metric.name, recorded)
    options = {k: v for k, v in recorded.items() if k in fields}
    if options:
        metric = metric.with_options(**{k: tuple(v) if isinstance(v, list) else v for k, v in options.items()})
    if metric.config() != (recorded or metric.config()):
        raise ValueError(f"calibrate --run: {metric.name} is not defined as it was in the run (its criteria file "
                         "changed since, or this version of offline-eval reads it anew: its revision?); give the "
                         "definition the run was scored with, or score the run again")
    source = {"run": str(run_dir), "fingerprint": info.get("fingerprint"), "labels": str(labels_path),
              "unscored": dict(unscored), "excluded": dict(sorted(excluded.items()))}
    home = None
    if args.to is None:  # the judge's folder, when the model flags name the models the run was scored with
        config = config_of(args)
        setup = build_setup(args.metric, config.models, criteria=config.criteria, **config.options)
        flagged = {role: setup.models.identity(role) for role in sorted(metric.roles)
                   if setup.models.has(role)}
        if flagged != identities:
            raise ValueError("calibrate --run: the model flags name other models than the run was scored with "
                             "(run.json); give the run's model flags, or name a calibration file with --to")
        home = calibration_home(setup)
    return metric, identities, _stored_settings(info, run_dir), values, labels, source, home


def calibrate_from_args(args: Any, config_of: ConfigOf, open_cache: CacheOf) -> int:
    """The ``offline-eval calibrate`` command (see :mod:`offline_eval.cli.agreement`): score a labelled
    dataset and fit, or (``--run``) fit from a finished run's stored values and a labels file."""
    if getattr(args, "run", None):
        metric, identities, settings, values, labels, source, home = _calibrate_from_run(args, config_of)
        if not values:
            raise DataError(f"no labelled row of the run was scored by {metric.name} ({source['unscored']}, "
                            f"left out: {source['excluded']})", source=str(args.run))
        return _fit_and_write(args, metric, identities, settings, values, labels, source, home)
    if not args.dataset or not args.labels:
        raise ValueError("calibrate: give --dataset and --labels FIELD (or --run RUN_FOLDER)")
    setup, labelled, excluded, scores, _ = _score_labelled(args, "calibrate", config_of, open_cache)
    metric, models = setup.metrics[0], setup.models
    values, labels = [], []
    unscored: Counter[str] = Counter()
    for sample, label in labelled:
        score = scores.get(sample.id, {})
        if score.get("value") is None:
            unscored[score.get("reason") or "unscored"] += 1
            continue
        values.append(float(score["value"]))
        labels.append(label)
    if not values:
        raise DataError(f"no labelled sample was scored by {metric.name} ({dict(unscored)})",
                        source=str(args.dataset))
    identities = {role: models.identity(role) for role in sorted(metric.roles) if models.has(role)}
    source = {"dataset": str(args.dataset), "labels": args.labels, "positive": list(args.positive or []),
              "unscored": dict(unscored), "excluded": dict(excluded)}
    return _fit_and_write(args, metric, identities, setup.settings, values, labels, source,
                          calibration_home(setup) if args.to is None else None)


def _fit_and_write(args: Any, metric: Metric, identities: dict[str, str], settings: Any, values: list[float],
                   labels: list[float], source: dict[str, Any], home: Path | None) -> int:
    """Fit the calibration, write it (--to, else into ``home``) and print its figures."""
    from offline_eval.people.calibration import CALIBRATION_FILE, fit_calibration, write_calibration

    if all(y in (0.0, 1.0) for y in labels):  # else fit_calibration says binary labels are needed
        _check_labelled("calibrate", labels, args)
    target = args.to
    if target is None:
        if home is None:
            raise ValueError("the metric's models have no local folder to keep a calibration in; name a file with --to")
        target = home / CALIBRATION_FILE
    calibration = fit_calibration(metric.name, identities, settings, values, labels, folds=args.folds,
                                  options=metric.config(), source=source)
    try:
        path = write_calibration(target, calibration)
    except OSError as exc:
        raise ValueError(f"cannot write the calibration to {target} ({exc.strerror}); name a writable file with --to") from None
    q = calibration.quality
    cv = q.get("balanced_accuracy_cross_validated")
    print(f"{metric.name}: threshold {calibration.threshold:.4f} on {calibration.n} samples "
          f"({calibration.n_positive} positive); balanced accuracy {q['balanced_accuracy_in_sample']:.3f} "
          f"in sample, {'-' if cv is None else f'{cv:.3f}'} cross-validated ({args.folds} folds), "
          f"{q['balanced_accuracy_at_0_5']:.3f} at 0.5; ROC AUC {q['roc_auc']:.3f}")
    print(f"calibration: {path}", file=sys.stderr)
    return 0
