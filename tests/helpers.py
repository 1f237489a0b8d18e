"""Test helpers: run metrics through the real engine with scripted (but real) backends."""

from __future__ import annotations

import json
from typing import Any

from offline_eval.data.schema import Sample
from offline_eval.engine.executor import Engine, Task
from offline_eval.engine.models import Models
from offline_eval.judging.settings import EvalSettings
from offline_eval.metrics.base import Metric, Score, as_score, start
from offline_eval.run.config import Run, RunConfig, build_run
from offline_eval.runtime.hashing_embedder import HashingEmbedder
from offline_eval.runtime.profiles import load_profile
from offline_eval.runtime.scripted import ScriptedJudge, ScriptedVerifier


def claims_rule(match: str, claims: list[str]) -> dict[str, Any]:
    return {"match": match, "response": json.dumps({"claims": claims})}


def models(judge: ScriptedJudge | None = None, verifier: ScriptedVerifier | None = None,
           embedder: Any = None) -> Models:
    ms = Models()
    ms.add_instance("judge", judge or ScriptedJudge(script={}))
    ms.add_instance("verifier", verifier or ScriptedVerifier())
    ms.add_instance("embedder", embedder or HashingEmbedder())
    return ms


def score(metric: Metric, sample: Sample, model_set: Models, settings: EvalSettings | None = None) -> Score:
    settings = settings or EvalSettings()
    engine = Engine(model_set)
    [task] = engine.run([Task(key=0, generator=start(metric, sample, settings))])
    return as_score(task.result)


def run_of(model_set: Models, metrics: list[str], **options: Any) -> Run:
    """The Run of ``metrics`` on these models (the starter profile's manifest standing in for a profile:
    the judge verifies), with ``options`` as the API's keywords."""
    model_set.profile = load_profile("starter")
    return build_run(RunConfig(metrics=metrics, options=options, overwrite=True), models=model_set)
