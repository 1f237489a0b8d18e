"""Every metric by name. Modules list their metric classes in ``METRICS``."""

from __future__ import annotations

import importlib

from offline_eval.metrics.base import Metric, Score

METRIC_MODULES = ("offline_eval.metrics.ragas", "offline_eval.metrics.rageval_retrieval",
                  "offline_eval.metrics.keypoints")

DEFAULT_METRICS = ("faithfulness", "answer_relevancy", "context_precision", "context_recall",
                   "answer_correctness")
AGGREGATE = "aggregate"


def metric_classes() -> dict[str, type[Metric]]:
    found: dict[str, type[Metric]] = {}
    for module_name in METRIC_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        for cls in getattr(module, "METRICS", []):
            found[cls.name] = cls
    return found


def resolve_metrics(names: list[str] | tuple[str, ...] | None) -> tuple[list[Metric], bool]:
    """Metric instances for ``names`` (default set when None) and whether ``aggregate`` was asked."""
    names = list(names or DEFAULT_METRICS)
    available = metric_classes()
    aggregate = AGGREGATE in names or "ragas_score" in names
    chosen = [n for n in names if n not in (AGGREGATE, "ragas_score")]
    unknown = [n for n in chosen if n not in available]
    if unknown:
        raise ValueError(f"unknown metric(s) {', '.join(unknown)}; known: "
                         f"{', '.join(sorted(available))}, {AGGREGATE}")
    return [available[n]() for n in dict.fromkeys(chosen)], aggregate


__all__ = ["Metric", "Score", "metric_classes", "resolve_metrics", "DEFAULT_METRICS", "AGGREGATE"]
