"""IR metrics of the retriever benchmark against ranx, and the qrels readers."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from offline_eval.data.schema import DataError
from offline_eval.retrieval.ir_metrics import dedupe, load_qrels, query_metrics

KS = (1, 3, 5, 10, 20)
RANX_NAMES = {"recall": "recall", "precision": "precision", "hit": "hit_rate", "mrr": "mrr",
              "ndcg": "ndcg", "map": "map"}


def _random_case(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(60)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(40):
        qid = f"q{q}"
        judged = rng.sample(docs, rng.randint(1, 12))
        grades = {d: rng.choice((0, 1, 1, 2, 3)) for d in judged}
        grades[judged[0]] = max(1, grades[judged[0]])  # at least one relevant document
        if q % 5 == 0:
            grades[qid] = 2  # a relevant document whose id equals the query id (BEIR's trap)
        qrels[qid] = grades
        pool = docs + ([qid] if q % 5 == 0 else [])
        retrieved = rng.sample(pool, rng.randint(3, 30))  # sometimes shorter than k
        scores = rng.sample(range(1, 10_000), len(retrieved))  # distinct: no tie ambiguity
        run[qid] = {d: float(s) for d, s in zip(retrieved, scores)}
    return qrels, run


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_metrics_match_ranx_on_random_runs(seed: int) -> None:
    ranx = pytest.importorskip("ranx")
    qrels, run = _random_case(seed)
    ranked = {q: sorted(scores, key=lambda d: -scores[d]) for q, scores in run.items()}
    scored = {q: query_metrics(dedupe(ranking), qrels.get(q, {}), KS) for q, ranking in ranked.items()}
    ours = {q: s for q, s in scored.items() if s is not None}  # as bench.py scores each query
    assert set(ours) == set(qrels)
    names = [f"{RANX_NAMES[m]}@{k}" for m in RANX_NAMES for k in KS]
    ref = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), names, return_mean=False, make_comparable=True)
    qids = list(ranx.Qrels(qrels).keys())
    for metric, ranx_name in RANX_NAMES.items():
        for k in KS:
            values = ref[f"{ranx_name}@{k}"]
            for qid, expected in zip(qids, values):
                assert abs(ours[qid][f"{metric}@{k}"] - float(expected)) < 1e-9, (qid, metric, k)


def test_query_id_equal_to_document_id_is_not_dropped() -> None:
    scores = query_metrics(["q1", "d2"], {"q1": 1}, (1, 2))
    assert scores is not None
    assert scores["hit@1"] == 1.0 and scores["recall@1"] == 1.0 and scores["mrr@2"] == 1.0


def test_hand_computed_values() -> None:
    # relevant: a (grade 2), c (grade 1); ranking a, b, c
    s = query_metrics(["a", "b", "c"], {"a": 2, "c": 1, "b": 0}, (1, 3, 5))
    assert s is not None
    assert s["recall@1"] == 0.5 and s["recall@3"] == 1.0
    assert s["precision@3"] == pytest.approx(2 / 3) and s["precision@5"] == pytest.approx(2 / 5)
    assert s["mrr@3"] == 1.0 and s["hit@1"] == 1.0
    assert s["map@3"] == pytest.approx((1 / 1 + 2 / 3) / 2)
    dcg = 2 / math.log2(2) + 1 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3)
    assert s["ndcg@3"] == pytest.approx(dcg / idcg)
    assert query_metrics(["a"], {"a": 0}, (1,)) is None  # nothing relevant: unscored


def test_dedupe_keeps_first_occurrence() -> None:
    assert dedupe(["d1", "d2", "d1", "d3", "d2"]) == ["d1", "d2", "d3"]


def test_qrels_formats(tmp_path: Path) -> None:
    trec = tmp_path / "qrels.txt"
    trec.write_text("1 0 docA 1\n1 0 docB 0\n2 0 docC 2\n", encoding="utf-8")
    assert load_qrels(trec) == {"1": {"docA": 1, "docB": 0}, "2": {"docC": 2}}
    beir = tmp_path / "beir" / "qrels"
    beir.mkdir(parents=True)
    (beir / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\tdoc 1\t1\n", encoding="utf-8")
    assert load_qrels(tmp_path / "beir") == {"q1": {"doc 1": 1}}
    js = tmp_path / "qrels.json"
    js.write_text(json.dumps({"q": {"d": 1}}), encoding="utf-8")
    assert load_qrels(js) == {"q": {"d": 1}}
    bad = tmp_path / "bad.txt"
    bad.write_text("1 0 docA 1\n1 docA x\n", encoding="utf-8")
    with pytest.raises(DataError, match="row 2"):
        load_qrels(bad)
