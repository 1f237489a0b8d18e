"""Every metric by name. A metric registers itself with :func:`register_metric` when its module is
imported: the package's own in the modules of :func:`metric_modules` (the package's plugins, found
in this package and imported when the metrics are first asked for), any other in a plugin
(``offline-eval run --plugin MODULE_OR_FILE`` imports one for the command line)."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
import re
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

from offline_eval.data.schema import printable
from offline_eval.metrics.aggregate import Aggregate
from offline_eval.metrics.base import Metric, Score, option_names
from offline_eval.records import MetricSummary

DEFAULT_METRICS = ("faithfulness", "answer_relevancy", "context_precision", "context_recall",
                   "answer_correctness")


_BUILTIN: dict[str, type[Metric]] = {}  # the package's own, registered by the modules of metric_modules()
_REGISTERED: dict[str, type[Metric]] = {}


@functools.cache
def metric_modules() -> tuple[str, ...]:
    """The package's own metric modules: each module of this package whose source registers a class where
    it defines it (a line ``@register_metric``), in name order. Read, not imported: a registration asks
    while its module is being imported. ``criteria``, which registers the metrics of a criteria file when
    it reads one, holds none of the package's own; a module left out of an install is not found."""
    found = []
    for info in pkgutil.iter_modules(__path__, prefix=f"{__name__}."):
        spec = importlib.util.find_spec(info.name)
        loader: Any = spec.loader if spec else None
        source = loader.get_source(info.name) if hasattr(loader, "get_source") else None
        if source and re.search(r"^@register_metric\b", source, re.MULTILINE):
            found.append(info.name)
    return tuple(found)


def register_metric(cls: type[Metric]) -> type[Metric]:
    """Class decorator: the metric becomes available by its ``name`` to ``run --metrics`` and the Python
    API, with nothing else to edit. A later registration of the same name replaces an earlier one; the
    package's own names cannot be taken."""
    if not (isinstance(cls, type) and issubclass(cls, Metric)) or not isinstance(getattr(cls, "name", None), str):
        raise TypeError("register_metric takes a Metric subclass with a name")
    if cls.__module__ in metric_modules():
        _BUILTIN[cls.name] = cls
        return cls
    if cls.name in builtin_metric_classes() or cls.name in Aggregate.asked_by:
        raise ValueError(f"metric name {cls.name!r} is taken by offline-eval's own metrics; choose another")
    _REGISTERED[cls.name] = cls
    return cls


def load_plugins(specs: Iterable[str]) -> None:
    """Import each plugin: a module name on the Python path, or a ``.py`` file; their metrics register
    themselves. Like an import, a plugin already loaded from the same file is not run again (the CLI
    meets a plugin before its parser is built, in a --config file and in the run's setup). A plugin
    that cannot be imported raises ValueError with one line naming it."""
    for spec in specs:
        try:
            if spec.endswith(".py") or "/" in spec:
                path = Path(spec).expanduser().resolve()
                name = f"offline_eval_plugin_{path.stem}"
                if getattr(sys.modules.get(name), "__file__", None) == str(path):
                    continue
                loader = importlib.util.spec_from_file_location(name, path)
                if loader is None or not path.is_file():
                    raise FileNotFoundError(f"no such file {path}")
                module = importlib.util.module_from_spec(loader)
                sys.modules[name] = module
                try:
                    loader.loader.exec_module(module)  # type: ignore[union-attr]
                except BaseException:
                    del sys.modules[name]  # a plugin that failed is tried again, as a failed import is
                    raise
            else:
                importlib.import_module(spec)
        except Exception as exc:  # one line for the user, whatever the plugin did
            raise ValueError(f"cannot load plugin {spec}: {type(exc).__name__}: {exc}") from None


def builtin_metric_classes() -> dict[str, type[Metric]]:
    """The package's own metrics by name (those the modules of :func:`metric_modules` register), none
    registered by a plugin or a criteria file."""
    for name in metric_modules():  # each registers its metrics as it is imported
        importlib.import_module(name)
    return dict(_BUILTIN)


def metric_classes() -> dict[str, type[Metric]]:
    """Every metric class by name: the package's own, then the registered ones."""
    return {**_REGISTERED, **builtin_metric_classes()}


def is_higher_better(metric: str, summary: MetricSummary | Mapping[str, Any] | None = None) -> bool:
    """The direction of ``metric``: what the run's summary recorded for it, else what the metric class of
    that name declares (a summary written before the direction was recorded), else higher."""
    return _declared(metric, summary, "higher_is_better")


def value_range_of(metric: str, summary: MetricSummary | Mapping[str, Any] | None = None) -> tuple[float, float]:
    """The values ``metric`` takes (:attr:`Metric.value_range`): what the run's summary recorded for it,
    else what the metric class of that name declares (a summary written before the range was recorded),
    else [0, 1]."""
    return _declared(metric, summary, "value_range")


def _declared(metric: str, summary: MetricSummary | Mapping[str, Any] | None, fact: str) -> Any:
    """A fact of ``metric`` that its summary entry records and its class declares: the entry's, else the
    class's, else :class:`Metric`'s default."""
    if isinstance(summary, Mapping):
        summary = MetricSummary.from_dict(summary)
    recorded = getattr(summary, fact) if summary is not None else None
    if recorded is not None:
        return recorded
    return getattr(metric_classes().get(metric, Metric), fact)


def metric_options() -> dict[str, tuple[type[Metric], str]]:
    """Every metric's options by public name (``answer_relevancy_n``) -> (its metric class, the field)."""
    return {public: (cls, f.name) for cls in metric_classes().values() for public, f in option_names(cls).items()}


def resolve_metrics(names: Iterable[str | Metric] | None,
                    options: Mapping[str, Any] | None = None) -> tuple[list[Metric], bool]:
    """Metric instances for ``names`` (default set when None; a Metric instance is taken as it is) and
    whether ``aggregate`` was asked. ``options``: metric options by public name (None keeps a value);
    those of metrics not chosen are ignored."""
    names = list(names or DEFAULT_METRICS)
    available = metric_classes()
    aggregate = Aggregate.asked(names)
    chosen = Aggregate.without(names)
    unknown = [n for n in chosen if not isinstance(n, Metric) and n not in available]
    if unknown:
        raise ValueError(f"unknown metric(s) {', '.join(printable(str(n)) for n in unknown)}; known: "
                         f"{', '.join(sorted(available))}, {Aggregate.name}")
    out: dict[str, Metric] = {}
    for n in chosen:
        metric = n if isinstance(n, Metric) else available[n]()
        own = {f.name: (options or {}).get(public) for public, f in option_names(type(metric)).items()}
        out.setdefault(metric.name, metric.with_options(**own))
    return list(out.values()), aggregate


__all__ = ["Metric", "Score", "metric_classes", "builtin_metric_classes", "metric_options", "resolve_metrics", "register_metric", "load_plugins",
           "DEFAULT_METRICS", "Aggregate"]
