"""The metric registry: the package's own metrics register as a plugin's do, with ``register_metric``
when their module is imported; a plugin cannot take their names."""

from __future__ import annotations

import pytest

from offline_eval import metrics
from offline_eval.metrics import Metric, builtin_metric_classes, metric_classes, register_metric
from offline_eval.metrics.keypoints import Completeness


def test_a_metric_of_the_package_registers_as_a_plugin_does(monkeypatch) -> None:
    """A new metric in one of the package's metric modules needs no list of its own to be edited."""
    monkeypatch.setattr(metrics, "_BUILTIN", dict(builtin_metric_classes()), raising=False)
    monkeypatch.setattr(metrics, "_REGISTERED", {})
    own = type("Concise", (Metric,), {"name": "concise", "__module__": "offline_eval.metrics.keypoints"})
    assert register_metric(own) is own
    assert builtin_metric_classes()["concise"] is own and metric_classes()["concise"] is own
    assert builtin_metric_classes()["completeness"] is Completeness
    plugin = type("Taken", (Metric,), {"name": "concise", "__module__": "my_metrics"})
    with pytest.raises(ValueError, match="taken by offline-eval's own metrics"):
        register_metric(plugin)
