"""The metric registry: the package's own metrics register as a plugin's do, with ``register_metric``
when their module is imported; a plugin cannot take their names."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

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


def test_the_package_s_metric_modules_are_those_that_register_a_metric_where_they_define_it() -> None:
    """Found, not listed: read independently here (a top-level class decorated with register_metric);
    the criteria module, which registers a criteria file's metrics when it reads one, is not one."""
    package = Path(metrics.__file__).parent
    decorated = sorted(f"offline_eval.metrics.{path.stem}" for path in package.glob("*.py")
                       if any(isinstance(node, ast.ClassDef)
                              and "register_metric" in map(ast.unparse, node.decorator_list)
                              for node in ast.parse(path.read_text(encoding="utf-8")).body))
    assert len(decorated) >= 3 and "offline_eval.metrics.criteria" not in decorated
    assert list(metrics.metric_modules()) == decorated


def test_a_new_metric_module_in_the_package_needs_no_list(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "polite.py").write_text(
        "from offline_eval.metrics import register_metric\n"
        "from offline_eval.metrics.base import Metric\n\n\n"
        "@register_metric\n"
        "class Polite(Metric):\n"
        "    name = 'polite_test_metric'\n", encoding="utf-8")
    monkeypatch.setattr(metrics, "__path__", [*metrics.__path__, str(tmp_path)])
    monkeypatch.setattr(metrics, "_BUILTIN", dict(builtin_metric_classes()))
    importlib.invalidate_caches()
    metrics.metric_modules.cache_clear()
    try:
        assert "offline_eval.metrics.polite" in metrics.metric_modules()
        assert builtin_metric_classes()["polite_test_metric"].__module__ == "offline_eval.metrics.polite"
        taken = type("Taken", (Metric,), {"name": "polite_test_metric", "__module__": "my_metrics"})
        with pytest.raises(ValueError, match="taken by offline-eval's own metrics"):
            register_metric(taken)
    finally:
        sys.modules.pop("offline_eval.metrics.polite", None)
        vars(metrics).pop("polite", None)
        metrics.metric_modules.cache_clear()
