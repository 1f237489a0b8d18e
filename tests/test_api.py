"""The Python API (issue #16): the README's example runs as written, and the same data through the
CLI gives the same scores."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import offline_eval
from offline_eval.cli import main

REPO = Path(__file__).resolve().parents[1]


def _readme_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_example_runs_verbatim_and_matches_the_cli(tiny_profile, tmp_path, monkeypatch):
    pytest.importorskip("pandas")
    monkeypatch.setenv("OFFLINE_EVAL_PROFILE", str(tiny_profile))
    monkeypatch.setenv("OFFLINE_EVAL_CACHE", str(tmp_path / "cache.sqlite"))
    namespace: dict = {}
    exec(compile(_readme_example(), "README.md", "exec"), namespace)
    scores = namespace["scores"]
    assert list(scores["id"]) == ["q1"]
    assert {"faithfulness", "faithfulness_reason", "answer_similarity", "question", "answer"} <= set(scores.columns)
    assert 0.0 <= scores["faithfulness"][0] <= 1.0 and scores["faithfulness_reason"][0] is None

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in namespace["data"].to_dict("records")))
    assert main(["run", "--dataset", str(data), "--metrics", "faithfulness,answer_similarity", "--quiet",
                 "--no-report", "--no-cache", "--output", str(tmp_path / "cli")]) == 0
    cli = [json.loads(line) for line in (tmp_path / "cli" / "results.jsonl").read_text().splitlines()]
    api = namespace["result"].rows
    assert [r["scores"] for r in api] == [r["scores"] for r in cli]


def test_evaluate_takes_rows_saves_a_run_folder_and_compares(tiny_profile, tmp_path):
    models = offline_eval.load_models(str(tiny_profile), roles=["embedder"])
    rows = [{"id": "a", "answer": "Paris is in France.", "ground_truth": "Paris is in France."},
            {"id": "b", "answer": "Rome is in Spain.", "ground_truth": "Madrid is in Spain."}]
    first = offline_eval.evaluate(rows, ["answer_similarity", "rouge_l"], models=models, cache=False)
    assert [r["id"] for r in first.rows] == ["a", "b"] and first.folder is None
    assert first.summary["metrics"]["rouge_l"]["n_scored"] == 2
    saved = first.save(tmp_path / "saved")
    assert (saved / "results.jsonl").exists() and json.loads((saved / "summary.json").read_text())["metrics"]
    assert first.report(tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    second = offline_eval.evaluate(rows, ["answer_similarity", "rouge_l"], models=models, cache=False,
                                   output=tmp_path / "run")
    assert second.folder == tmp_path / "run" and (tmp_path / "run" / "run.json").exists()
    comparison = offline_eval.compare(first, second)
    assert comparison.n_common == 2 and all(m.delta == 0 for m in comparison.metrics)
    with pytest.raises(TypeError, match="unknown option.*no_such_setting"):
        offline_eval.evaluate(rows, ["rouge_l"], models=models, no_such_setting=1)
    with pytest.raises(offline_eval.api.DataError, match="row 1: expected a mapping"):
        offline_eval.evaluate(["not a row"], ["rouge_l"], models=models)
