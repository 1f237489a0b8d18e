"""What every model-using command shares (`run`, `generate`, `agreement`, `retrieval --answer`): the
model, judging settings, calibration and cache flags, and the cache they open. The flags become models through
:class:`offline_eval.run.model_choice.ModelChoice` (whose fields are named as the flags' destinations).

Only argparse and the backend declarations (no model library) are imported at module level, so
registering a command stays cheap. :class:`Interrupted` is how any command ends on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from offline_eval.engine.cache_location import DEFAULT_CACHE, cache_path
from offline_eval.options import add_field_arguments, positive_int
from offline_eval.runtime.registry import backend_names

if TYPE_CHECKING:  # the annotations only: the run's modules load when a command runs
    from offline_eval.run.config import RunConfig
    from offline_eval.run.model_choice import ModelChoice


def add_model_arguments(group: argparse._ArgumentGroup, *, verifier: bool = True, embedder: bool = True,
                        device: bool = True) -> None:
    """--profile, --models-dir, the judge flags, and (when asked) the verifier and embedder flags and
    --device / --batch-size (``retrieval`` has its own, for its retrievers). Their destinations are the
    fields of :class:`offline_eval.run.model_choice.ModelChoice`."""
    group.add_argument("--profile", help="gpu, cpu, starter or a manifest path (default: $OFFLINE_EVAL_PROFILE, "
                                         "else the first provisioned of gpu (with CUDA), cpu, starter)")
    group.add_argument("--models-dir", type=Path, help="root of the profile's model folders")
    group.add_argument("--judge", help="judge model folder (or base URL with --judge-backend openai)")
    group.add_argument("--judge-backend", choices=backend_names("judge"))
    group.add_argument("--judge-model", help="served model name for --judge-backend openai")
    group.add_argument("--judge-batch-size", type=positive_int, help="judge batch size (default: --batch-size; "
                                                            "vLLM: the whole stage)")
    if verifier:
        group.add_argument("--verifier", choices=backend_names("verifier", test_doubles=False),
                           help="who verifies claims against contexts")
        group.add_argument("--hhem", help="HHEM-2.1-Open folder")
        group.add_argument("--hhem-tokenizer", help="flan-t5-base folder (tokenizer + config) for HHEM")
    if embedder:
        group.add_argument("--embedder", help="sentence-transformers model folder")
    if device:
        group.add_argument("--device", type=device_name, metavar="cpu|cuda|cuda:N",
                           help="where the models run (default: cpu; the vllm judge: cuda:0); checked before any "
                                "model loads")
        group.add_argument("--batch-size", type=positive_int,
                           help="batch size of each backend call (HHEM, embedder, transformers judge)")
    group.add_argument("--no-verify", action="store_true",
                       help="do not check model files against their manifest's sha256s before loading (the "
                            "manifest's hashes are then trusted as the models' identity; recorded in run.json)")
    # no default (None is auto): a flag left out holds None, so a --config file can set it (cli.run.merge_config)
    group.add_argument("--threads", type=_threads, metavar="N|auto",
                       help="CPU threads for torch. auto: torch's choice on a quiet machine; on a busy one the "
                            "cores left over (at least 1) with sleeping waits (OMP_WAIT_POLICY=PASSIVE). "
                            "The choice is recorded in run.json (default: auto)")


def model_choice_from_args(args: argparse.Namespace) -> ModelChoice:
    """The :class:`~offline_eval.run.model_choice.ModelChoice` of a command's parsed flags; a command
    without some of the model flags (``retrieval`` has no --device) leaves those unset."""
    from dataclasses import fields

    from offline_eval.run.model_choice import ModelChoice

    values = {f.name: getattr(args, f.name) for f in fields(ModelChoice)
              if f.name != "verify" and hasattr(args, f.name)}
    return ModelChoice(**values, verify=not getattr(args, "no_verify", False))


def run_config_from_args(args: argparse.Namespace) -> RunConfig:
    """The :class:`~offline_eval.run.config.RunConfig` of a command's parsed flags (``run``, with its
    --config TOML merged in first, ``agreement``, ``retrieval --answer``): each reads the flags it has;
    the run's configuration never sees the Namespace."""
    from offline_eval.run.config import RayOptions, RunConfig, known_options
    from offline_eval.thresholds import parse_thresholds

    options = {name: getattr(args, name) for name in known_options() if hasattr(args, name)}
    fail_under = getattr(args, "fail_under", None)
    if isinstance(fail_under, str):
        fail_under = parse_thresholds(fail_under)
    ray = None
    if getattr(args, "engine", None) == "ray":
        ray = RayOptions.given(address=args.ray_address, replicas=args.replicas,
                               gpus_per_replica=args.gpus_per_replica, node_cache=args.ray_node_cache)
    metrics = getattr(args, "metrics", None)
    return RunConfig(metrics=[metrics] if isinstance(metrics, str) else metrics,
                     plugins=list(getattr(args, "plugin", None) or []),
                     criteria=list(getattr(args, "criteria", None) or []), models=model_choice_from_args(args),
                     options=options, calibration_files=[Path(p) for p in getattr(args, "calibration", None) or []],
                     calibrate=not getattr(args, "no_calibration", False), fail_under=fail_under or {},
                     max_unscored=getattr(args, "max_unscored", None), window=getattr(args, "window", None),
                     per_row=getattr(args, "per_row", False), overwrite=getattr(args, "overwrite", False), ray=ray)


def device_name(text: str) -> str:
    """argparse type of --device (:func:`offline_eval.runtime.devices.device_problem`)."""
    from offline_eval.runtime.devices import device_problem

    problem = device_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def _threads(text: str) -> Any:
    from offline_eval.runtime.threads import parse_threads

    try:
        return parse_threads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--threads: ")) from None


def apply_threads(args: argparse.Namespace) -> Any:
    """Choose and set torch's CPU threads from ``--threads`` (see offline_eval.runtime.threads); torch is
    imported only when a thread count is set. Returns the ThreadChoice."""
    from offline_eval.runtime.threads import apply_threads_choice, choose_threads

    return apply_threads_choice(choose_threads(getattr(args, "threads", None)))


def add_cache_arguments(group: argparse._ArgumentGroup) -> None:
    """--cache PATH and --no-cache."""
    group.add_argument("--cache", type=Path, help=f"SQLite cache of model answers (default: $OFFLINE_EVAL_CACHE "
                                                  f"or {DEFAULT_CACHE})")
    group.add_argument("--no-cache", action="store_true", help="keep model answers in memory only")


def open_cache(args: argparse.Namespace) -> Any:
    """The run's ResultCache: in memory with --no-cache, else --cache, $OFFLINE_EVAL_CACHE or the default.
    A file that is there is opened now (a damaged one stops the command before it starts); one that is
    not is made at the cache's first use (:class:`DeferredCache`)."""
    from offline_eval.engine.cache import ResultCache

    if getattr(args, "no_cache", False):
        return ResultCache(None)
    path = cache_path(getattr(args, "cache", None))
    return ResultCache(path) if path.exists() else DeferredCache(path)


class DeferredCache:
    """A ResultCache whose file does not exist yet, made (with its folder) at the first read or write.
    A run reads the cache only once it has been accepted (its models configured and verified, its
    folder locked and free of another run's results), so a run refused during setup leaves no new
    cache file, journal or lock file behind. Removing the file after a refusal instead could
    remove one that another run sharing the path had just made. Anything but ``path``, ``repaired``,
    ``len`` and ``close`` opens the file and is the ResultCache's."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cache: Any = None

    def opened(self) -> Any:
        """The ResultCache, made now if it was not yet."""
        if self._cache is None:
            from offline_eval.engine.cache import ResultCache

            self._cache = ResultCache(self.path)
        return self._cache

    def __getattr__(self, name: str) -> Any:  # only what this class lacks: get_many, put_many, check, ...
        if name.startswith("__") or name == "_cache":
            raise AttributeError(name)
        return getattr(self.opened(), name)

    @property
    def repaired(self) -> int:
        return self._cache.repaired if self._cache is not None else 0

    def __len__(self) -> int:
        return len(self._cache) if self._cache is not None else 0

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()

    def __enter__(self) -> "DeferredCache":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def add_settings_arguments(group: argparse._ArgumentGroup, *, aggregate: bool = True) -> None:
    """A flag for every judging setting, made from its declaration in
    :class:`~offline_eval.judging.settings.EvalSettings`: ``--<name>``, dest ``<name>`` (also its TOML
    key and API keyword; :func:`run_config_from_args` reads them by that name).
    ``aggregate`` False: a command that scores one metric has none for what only the aggregate reads."""
    from offline_eval.judging.settings import EvalSettings

    add_field_arguments(group, EvalSettings, {name: f for name, f in EvalSettings.option_fields().items()
                                              if aggregate or not f.metadata.get("aggregate_only")})


def add_criteria_argument(group: argparse._ArgumentGroup, *, one_metric: bool = False) -> None:
    """``--criteria FILE``: criteria of your own, each a metric ``criterion_<name>``; ``one_metric`` for a
    command that scores the one ``--metric`` it names (agreement, calibrate), which has no --metrics."""
    which = "that --metric can name" if one_metric else "all of them unless --metrics names some"
    group.add_argument("--criteria", action="append", metavar="FILE.toml",
                       help="criteria of your own (yes/no or graded questions to the judge, docs/criteria.md), "
                            f"each scored as a metric criterion_<name>, {which}; repeatable")


def add_calibration_arguments(group: argparse._ArgumentGroup) -> None:
    """--calibration FILE (repeatable) and --no-calibration."""
    group.add_argument("--calibration", type=Path, action="append", metavar="FILE",
                       help="calibration file from `offline-eval calibrate` (repeatable; default: the "
                            "offline-eval-calibration.json in each model folder)")
    group.add_argument("--no-calibration", action="store_true", help="apply no calibration")


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM. Raised where the program is, as Python raises KeyboardInterrupt for
    Ctrl-C, so that a run unwinds the same way whichever ended it: results.jsonl cut back to its last
    full window, the cache's batches committed and its journal folded, the folder's lock released.
    ``detail`` says what the run saved (:func:`offline_eval.cli.run.cmd_run`); :func:`offline_eval.cli.main` prints it in one line, returns
    128 + ``signum`` (130, 143) and, as the program, ends by the signal."""

    def __init__(self, signum: int = signal.SIGINT, detail: str = "") -> None:
        super().__init__(signum, detail)
        self.signum, self.detail = signum, detail
