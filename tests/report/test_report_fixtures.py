"""A builder of run directories shaped like ``offline-eval run`` output, for the report tests.

Other report tests import ``build_run`` from here. The checks at the bottom make sure the
fixture itself keeps the documented shape (so the report tests exercise what they claim to).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from offline_eval.stats import summarize

METRICS = ["faithfulness", "answer_relevancy", "context_precision", "answer_correctness",
           "completeness", "hallucination_rate"]

EVIL = "<script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">"

_EN = [
    ("What is the capital of France?", "Paris is the capital of France.", "Paris"),
    ("Who wrote Hamlet?", "Hamlet was written by William Shakespeare around 1600.", "William Shakespeare"),
    ("What is the boiling point of water at sea level?", "Water boils at 100 °C & 212 °F at sea level.", "100 °C"),
    ("When did the Berlin Wall fall?", "The Berlin Wall fell in November 1989.", "9 November 1989"),
    ("What does HTML stand for?", "HTML means HyperText Markup Language; tags look like <b>bold</b>.",
     "HyperText Markup Language"),
    ("Which planet is largest?", "Jupiter is the largest planet. " + EVIL, "Jupiter"),
    ("What is 2 + 2?", "2 + 2 = 4 \"obviously\" & 'trivially'.", "4"),
    ("Who painted the Mona Lisa?", "", "Leonardo da Vinci"),  # empty answer -> unscored
]
_ZH = [
    ("中国的首都是哪里？", "中国的首都是北京。", "北京"),
    ("长城有多长？", "长城全长约两万一千公里。", "约21196公里"),
    ("谁发明了造纸术？", "蔡伦改进了造纸术。<script>alert('x')</script>", "蔡伦"),
    ("水的化学式是什么？", "水的化学式是H₂O。", "H₂O"),
]


def _sample(i: int, question: str, answer: str, truth: str, lang: str) -> dict[str, Any]:
    contexts = [f"{truth} — background passage {i} about the topic.",
                f"Unrelated passage {i} <i>with markup</i> & ampersands.",
                f"A third chunk mentioning {truth} again."]
    return {"question": question, "answer": answer or None, "contexts": contexts,
            "ground_truth": truth, "reference_contexts": [contexts[0]],
            "keypoints": [f"mentions {truth}", "is concise"], "language": lang,
            "source_file": "qa.jsonl"}


def _scores(sample: dict[str, Any], base: float, rng: random.Random) -> dict[str, dict[str, Any]]:
    answer, contexts = sample["answer"], sample["contexts"]
    out: dict[str, dict[str, Any]] = {}
    if not answer:
        for m in METRICS:
            out[m] = {"value": None, "reason": "missing_field:answer"}
        return out

    def jitter(v: float) -> float:
        return round(min(1.0, max(0.0, v + rng.uniform(-0.08, 0.08))), 4)

    faith = jitter(base)
    claims = [{"claim": answer[:80], "supported": faith >= 0.5, "probability": faith,
               "chunk": 0 if faith >= 0.5 else None, "reason": "entailed by context" if faith >= 0.5 else "not found"},
              {"claim": "Extra claim <b>bold</b> & more", "supported": False, "probability": 0.12,
               "chunk": None, "reason": "no support"}]
    out["faithfulness"] = {"value": faith, "explanation": "1 of 2 claims supported",
                           "metadata": {"claims": claims}}
    out["hallucination_rate"] = {"value": round(1 - faith, 4), "metadata": {"claims": claims}}
    out["answer_relevancy"] = {"value": jitter(base + 0.05), "metadata": {"questions": [
        {"question": sample["question"], "noncommittal": False, "similarity": 0.91},
        {"question": "What else? <u>?</u>", "noncommittal": base < 0.3, "similarity": 0.4}]}}
    out["context_precision"] = {"value": jitter(base - 0.1), "metadata": {"verdicts": [
        {"chunk": j, "useful": j != 1, "probability": 0.8 if j != 1 else 0.1} for j in range(len(contexts))]}}
    if base < 0.35:
        out["answer_correctness"] = {"value": None, "reason": "judge_unparseable",
                                     "explanation": "the judge returned <garbage>"}
    else:
        out["answer_correctness"] = {"value": jitter(base), "metadata": {
            "tp": [sample["ground_truth"]], "fp": ["an extra <statement>"], "fn": [], "f1": 0.67,
            "similarity": 0.88}}
    out["completeness"] = {"value": jitter(base), "metadata": {"keypoints": [
        {"keypoint": sample["keypoints"][0], "label": "Relevant", "analysis": "stated"},
        {"keypoint": sample["keypoints"][1], "label": "Irrelevant" if base > 0.5 else "Wrong",
         "analysis": "not addressed <em>at all</em>"}]}}
    return out


def build_run(root: Path, *, name: str = "run", starter: bool = False, shift: dict[str, float] | None = None,
              seed: int = 7, write_summary: bool = True) -> Path:
    """Write a run directory with 12 samples (8 English, 4 Chinese) and return its path.

    ``shift`` moves a metric's score on every scored sample by 0.6x to 1.4x the given amount
    (clamped to [0, 1]), which lets comparison tests build a run that differs on one metric in
    a known direction, with some spread across samples.
    """
    rng = random.Random(seed)
    run_dir = Path(root) / name
    run_dir.mkdir(parents=True, exist_ok=True)
    records = []
    items = [(q, a, t, "en") for q, a, t in _EN] + [(q, a, t, "zh") for q, a, t in _ZH]
    for i, (q, a, t, lang) in enumerate(items):
        sample = _sample(i, q, a, t, lang)
        base = 0.2 + 0.6 * ((i * 7) % 12) / 11
        scores = _scores(sample, base, rng)
        for metric, delta in (shift or {}).items():
            entry = scores.get(metric)
            if entry and entry.get("value") is not None:
                step = delta * (0.6 + 0.2 * (i % 5))
                entry["value"] = round(min(1.0, max(0.0, entry["value"] + step)), 4)
        records.append({"id": f"q{i + 1:02d}" if i != 5 else "q06<&>", "row": i + 1,
                        "sample": sample, "scores": scores})
    with (run_dir / "results.jsonl").open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    metrics_summary = {}
    for m in METRICS:
        values = [r["scores"][m]["value"] for r in records]
        reasons = [r["scores"][m].get("reason") for r in records]
        metrics_summary[m] = summarize(values, reasons).to_dict()
    summary = {
        "run": {"dataset": "demo <qa>.jsonl", "started": "2025-01-02T10:00:00+00:00",
                "finished": "2025-01-02T10:03:21+00:00", "profile": "starter" if starter else "standard",
                "starter": starter,
                "models": {"judge": "qwen2.5-7b-instruct", "verifier": "hhem-2.1", "embedder": "bge-m3"},
                "metrics": METRICS, "n_samples": len(records), "settings": {"batch_size": 32, "seed": 0}},
        "metrics": metrics_summary,
    }
    if write_summary:
        (run_dir / "summary.json").write_text(json.dumps(summary, ensure_ascii=False, indent=2), encoding="utf-8")
    return run_dir


def test_fixture_has_documented_shape(tmp_path: Path) -> None:
    run_dir = build_run(tmp_path)
    lines = (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 12
    recs = [json.loads(line) for line in lines]
    assert {r["sample"]["language"] for r in recs} == {"en", "zh"}
    assert any("<script>" in (r["sample"]["answer"] or "") for r in recs)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["run"]["metrics"] == METRICS
    fa = summary["metrics"]["faithfulness"]
    assert fa["n_scored"] == 11 and fa["n_unscored"] == 1
    assert fa["unscored_reasons"] == {"missing_field:answer": 1}
    assert summary["metrics"]["answer_correctness"]["unscored_reasons"].get("judge_unparseable", 0) >= 1


def test_fixture_shift_lowers_one_metric_only(tmp_path: Path) -> None:
    a = build_run(tmp_path, name="a")
    b = build_run(tmp_path, name="b", shift={"faithfulness": -0.2})
    sa = json.loads((a / "summary.json").read_text(encoding="utf-8"))["metrics"]
    sb = json.loads((b / "summary.json").read_text(encoding="utf-8"))["metrics"]
    assert sb["faithfulness"]["mean"] < sa["faithfulness"]["mean"] - 0.1
    assert sb["answer_relevancy"]["mean"] == sa["answer_relevancy"]["mean"]
