"""End-to-end retriever comparison: the judge answers from each retriever's chunks; answers are scored."""

from __future__ import annotations

import json

import pytest

from offline_eval.retrieval.answering import format_answer_table, run_end_to_end
from offline_eval.runtime.scripted import ScriptedJudge
from tests.helpers import claims_rule, models, run_of


def test_answers_are_generated_per_configuration_and_scored(tmp_path):
    answer_dir = tmp_path / "answer"
    answer_dir.mkdir()
    rows = {"good_cs128_k2": ["Paris is the capital of France.", "Lyon is in France."],
            "bad_cs128_k2": ["Berlin is in Germany.", "Rome is in Italy."]}
    for config, contexts in rows.items():
        (answer_dir / f"{config}.jsonl").write_text(json.dumps({
            "id": "q1", "question": "What is the capital of France?", "contexts": contexts,
            "ground_truth": "Paris", "language": "en", "retriever": config.split("_")[0],
            "chunk_size": 128}) + "\n")

    def answer(text: str) -> str:
        return "Paris." if "[1] Paris" in text else "I cannot answer from the documents."

    judge = ScriptedJudge(script={
        "generate": [{"match": "Answer concisely", "response": answer},
                     claims_rule("Answer: Paris.", ["Paris is the capital of France."]),
                     claims_rule("Answer: I cannot", [])],
        "options": [{"match": "[1] Paris", "probs": {"Yes": 0.9, "No": 0.1}}],
        "default_probs": {"Yes": 0.2, "No": 0.8}})
    # Ragas' claims and thresholded shares over all chunks at once, so the script's rules decide every verdict
    # (this judge reads the passage only, so the credulity probes would refuse it: off here).
    run = run_of(models(judge), ["faithfulness"], claims="llm", verdict_score="threshold", context_window=0,
                 credulity_limit=1.0)
    table = run_end_to_end(answer_dir, tmp_path, run)
    by_config = {t["config"]: t for t in table}
    assert by_config["good_cs128_k2"]["faithfulness"] == pytest.approx(1.0)
    assert by_config["bad_cs128_k2"]["faithfulness"] is None  # "cannot answer" has no claims: unscored
    assert judge.calls["generate"] == 2  # one batched answering stage, one claim stage
    assert (tmp_path / "answer_results.csv").exists()
    assert "good_cs128_k2" in format_answer_table(table, ["faithfulness"])
