"""One run's configuration, and the run built from it (data: executing it is :mod:`offline_eval.run.execute`).

    config = RunConfig(metrics=["faithfulness"], models=ModelChoice(profile="cpu"),
                       options={"verdicts": "generate"})   # the Python API; the commands make theirs from
                                                           # their flags (offline_eval.cli.shared.run_config_from_args)
    run = build_run(config)        # metrics, gates, device, models (configured, not loaded), settings, calibrations
    done = run_dataset(run, samples, "runs/today", cache=cache)   # offline_eval.run.execute: in this process
                                                                 # or sharded over Ray, then the gates

A flag, a TOML key and an API keyword of the same setting share one name: the model flags are the
fields of :class:`~offline_eval.run.model_choice.ModelChoice`, the judging settings the fields of
:class:`~offline_eval.judging.settings.EvalSettings`. Everything that can be wrong with a run (an
unknown metric, a gate on a metric not in the run, a missing CUDA device, a model folder not there) is
raised by :func:`build_run`, before any model loads.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from offline_eval.people.calibration import Calibration, read_calibrations
from offline_eval.data.schema import printable
from offline_eval.engine.models import Models
from offline_eval.judging.settings import EvalSettings, PromptBudget
from offline_eval.metrics import DEFAULT_METRICS, Aggregate, load_plugins, metric_options, resolve_metrics
from offline_eval.metrics.aggregate import weights_problems
from offline_eval.metrics.base import Metric
from offline_eval.metrics.criteria import PREFIX as CRITERION_PREFIX
from offline_eval.metrics.criteria import load_criteria
from offline_eval.options import FlagError
from offline_eval.run.model_choice import ModelChoice

STARTER_NOTE = ("starter profile: these scores only show that the pipeline runs; "
                "use the cpu or gpu profile for real evaluations")


class ModelsMissing(RuntimeError):
    """Model folders a run needs are not there: one line per folder in ``problems``, each with its fix."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def configure_models(choice: ModelChoice, roles: Iterable[str]) -> Models:
    """The models of ``choice`` for a run whose metrics use ``roles``; :class:`ModelsMissing` when a folder
    is not there. Nothing is loaded here."""
    from offline_eval.runtime.loading import check_provisioned

    profile, needed = choice.profile_for(roles)
    problems = check_provisioned(profile, needed)
    if problems:
        raise ModelsMissing(problems)
    for note in profile.swap_notes(needed):  # a limit set for the profile's model is not another model's
        print(f"offline-eval: {note}", file=sys.stderr)
    return choice.models_of(profile, needed)


@dataclass
class RayOptions:
    """``--engine ray``: shard the dataset over model replicas on a Ray cluster."""

    address: str | None = None  # auto or HOST:PORT; None: $RAY_ADDRESS, else a private local cluster
    replicas: int = 2
    gpus_per_replica: float = 0
    node_cache: str | None = None

    @classmethod
    def given(cls, **settings: Any) -> "RayOptions":
        """The settings given (``--engine ray``'s flags, the API's keywords); one left None keeps its
        default."""
        return cls(**{name: value for name, value in settings.items() if value is not None})


@dataclass
class RunConfig:
    """Everything that decides a run, however it was given."""

    metrics: list[str | Metric] | None = None  # names or instances; None: the default five; "aggregate" adds one
    plugins: list[str] = field(default_factory=list)  # modules or .py files whose metrics register themselves
    # criteria files, or tables of criteria (offline_eval.metrics.criteria): each criterion is a metric, and
    # they are all scored unless the metrics name some of them
    criteria: list[Any] = field(default_factory=list)
    models: ModelChoice = field(default_factory=ModelChoice)
    # settings (EvalSettings.option_names) and metric options (metrics.metric_options) by name; None keeps
    # a default
    options: dict[str, Any] = field(default_factory=dict)
    calibration_files: list[Path] = field(default_factory=list)  # besides those in the model folders
    calibrate: bool = True  # apply calibrations that fit the run's metric, models and settings
    fail_under: Mapping[str, float] = field(default_factory=dict)  # metric -> the mean it must reach
    max_unscored: float | None = None  # share of a gated metric's rows that may go unscored (None: the default)
    window: int | None = None  # rows scored together (None: the runner's default)
    per_row: bool = False  # one sample at a time, as the reference tools do (benchmarks)
    overwrite: bool = False  # move another run's results into earlier/ instead of refusing the folder
    ray: RayOptions | None = None  # None: in this process


def known_options() -> list[str]:
    """Every name a run option goes by: the judging settings, then each metric's own options."""
    return EvalSettings.option_names() + sorted(metric_options())


@dataclass
class Run:
    """A run ready to execute: what :func:`build_run` resolved from a :class:`RunConfig`."""

    config: RunConfig
    metrics: list[Metric]
    aggregate: bool
    models: Models
    settings: EvalSettings
    calibrations: list[Calibration]
    info: dict[str, Any]  # recorded in run.json

    @property
    def starter(self) -> bool:
        return bool(self.info.get("starter"))


def with_criteria(metrics: list[str | Metric] | None, criteria: list[str]) -> list[str | Metric] | None:
    """The run's metrics with its criteria's: every criterion added, unless the metrics name one."""
    if not criteria or any(isinstance(m, str) and m.startswith(CRITERION_PREFIX) for m in metrics or []):
        return metrics
    return list(metrics if metrics is not None else DEFAULT_METRICS) + criteria


def build_run(config: RunConfig, *, models: Models | None = None) -> Run:
    """Resolve ``config`` into a :class:`Run`; ``models`` (from :func:`configure_models`) reuses models
    configured earlier instead of the choice in ``config.models``. Raises, before any model loads, on
    an unknown metric or plugin, an empty metric list, a gate on a metric not in the run, a device that
    is no device or, when a model will run on it, one this machine lacks (ValueError) and a missing
    model folder (:class:`ModelsMissing`)."""
    load_plugins(config.plugins)
    own = metric_options()
    unknown = sorted(k for k in config.options if k not in own and k not in EvalSettings.option_names())
    if unknown:
        raise TypeError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(known_options())}")
    if config.metrics is not None and not Aggregate.without(config.metrics):
        # None is the default five; an empty list is a mistake (`--metrics ""`), not a wish for them
        raise FlagError("--metrics", f"--metrics names no metric ({', '.join(map(str, config.metrics)) or 'an empty list'}); "
                         "see `offline-eval metrics`, or leave it out for the default five")
    metrics, aggregate = resolve_metrics(with_criteria(config.metrics, load_criteria(config.criteria)),
                                         {k: v for k, v in config.options.items() if k in own})
    names = [m.name for m in metrics] + ([Aggregate.name] if aggregate else [])
    unknown = sorted(set(config.fail_under) - set(names))
    if unknown:
        raise FlagError("--fail-under", f"--fail-under names {printable(', '.join(unknown))}, not among this run's metrics "
                         f"({', '.join(names)})")
    _check_weights(config.options, [m.name for m in metrics])
    check_device(config.models.device, used=any(m.roles for m in metrics))
    if models is None:
        models = configure_models(config.models, {r for m in metrics for r in m.roles})
    elif models.profile is None:
        raise ValueError("models= takes what offline_eval.load_models returns (a profile's models), "
                         "not models added by hand")
    profile = models.profile
    settings = EvalSettings.from_options(verifier=profile.claims_checked_by,
                                         verifier_classifies=profile.verifier.declaration.classifies_claims,
                                         **{k: v for k, v in config.options.items() if k not in own})
    settings.prompt_budget = _prompt_budget(profile) if models.has("judge") else None
    # a run of model-free metrics involves none of the profile's models: it is no starter run
    starter = profile.starter and any(m.roles for m in metrics)
    info: dict[str, Any] = {"profile": profile.name, "starter": starter, "device": config.models.device or "cpu",
                            "batch_size": config.models.batch_size, "per_row": config.per_row,
                            "models_verified": config.models.verify,
                            "model_details": _details_of(models, {r for m in metrics for r in m.roles})}
    if starter:
        info["note"] = STARTER_NOTE
    return Run(config, metrics, aggregate, models, settings, _calibrations(config, models), info)


def _check_weights(options: Mapping[str, Any], metrics: list[str]) -> None:
    """The aggregate's weights (``--weights``, its TOML key, the API's ``weights=``) checked before any
    model loads (:func:`~offline_eval.metrics.aggregate.weights_problems`): a bad one otherwise shows
    only once every row was scored, as a NaN in run.json, an aggregate unscored on every row, or a run
    that stops and keeps nothing. The flag's own reading refuses most of these already; the API's
    keyword and a metric's name only the run knows are checked here."""
    weights = options.get("weights", options.get("aggregate_weights"))
    if weights is None:
        return
    if not isinstance(weights, Mapping):
        raise FlagError("--weights", f"--weights: expected metric=weight pairs (a mapping), got {printable(repr(weights))}")
    problems = weights_problems(weights, metrics)
    if problems:
        raise FlagError("--weights", "; ".join(problems))


def _details_of(models: Models, roles: set[str]) -> dict[str, Any]:
    """What run.json says of each model the run's metrics use (the judge's when it verifies claims)."""
    if "verifier" in roles and models.profile.verifier_is_judge:
        roles = roles | {"judge"}
    return {role: models.details[role] for role in sorted(roles) if role in models.details}


def _prompt_budget(profile: Any) -> PromptBudget | None:
    """What the judge can read in one prompt, so that no context window makes a prompt it refuses: its
    limit less the position an answer needs, counted with its own tokenizer where its folder holds one
    (else by UTF-8 bytes: :class:`~offline_eval.judging.settings.PromptBudget`); None when no limit is
    known (a judge served over HTTP)."""
    from offline_eval.runtime.loading import judge_prompt_room

    limit, counter = judge_prompt_room(profile)
    return PromptBudget(limit - 1, counter) if limit else None


def _calibrations(config: RunConfig, models: Models) -> list[Calibration]:
    """What the run may apply: the calibration files in the model folders of its roles and those given.
    Each applies only to the metric, models and settings it was fitted for."""
    if not config.calibrate:
        return []
    for path in config.calibration_files:
        if not path.exists():
            raise FlagError("--calibration", f"--calibration {path}: no such file")
    files = list(config.calibration_files) + calibration_files(models.profile, models.roles)
    return [c for path in dict.fromkeys(files) for c in read_calibrations(path)]


def calibration_files(profile: Any, roles: set[str]) -> list[Path]:
    """The calibration files kept in the model folders of ``roles`` (the judge's when it verifies)."""
    from offline_eval.people.calibration import CALIBRATION_FILE

    found = []
    for role in sorted(set(roles) | ({"judge"} if "verifier" in roles else set())):
        folder = profile.role(role).path
        if folder is not None and Path(folder, CALIBRATION_FILE).exists():
            found.append(Path(folder, CALIBRATION_FILE))
    return found


def check_device(device: str | None, *, used: bool = True) -> None:
    """A ``--device`` that is not cpu, cuda or cuda:N, or (when ``used``: a model will run on it) one
    this machine lacks, is a one-line ValueError naming the flag, before any model loads. A run no
    model takes part in (``used`` False) accepts a CUDA device on a machine without one, without
    importing torch to look: nothing runs on it, and one command line then serves a GPU machine and a
    CPU-only one alike."""
    if device is None:
        return
    from offline_eval.runtime.devices import device_problem

    problem = device_problem(device)
    if problem:
        raise FlagError("--device", f"--device: {problem}")
    if not used or device == "cpu":
        return
    import torch

    if not torch.cuda.is_available():
        built = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        raise FlagError("--device", f"--device {device}: no CUDA device here (torch {torch.__version__}, {built}); "
                         "use --device cpu")
    index = device.partition(":")[2]
    if index and (not index.isdigit() or int(index) >= torch.cuda.device_count()):
        raise FlagError("--device", f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")
