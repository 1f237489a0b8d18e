"""The retriever benchmark end to end: outputs, reuse of indexes, CLI, RAGEval acceptance numbers."""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from offline_eval.retrieval.bench import BenchConfig, format_table, run_benchmark
from offline_eval.cli.retrieval import register

from tests.retrieval.test_retrieval_retrievers import HashingEncoder

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"

DOCS = [
    {"id": "acme", "text": "Acme Corp was founded in 2001 in Boston. In March 2021 Acme acquired Beta "
                           "Bakery for five million dollars. The acquisition doubled its bread output.",
     "company": "Acme"},
    {"id": "zenith", "text": "Zenith Ltd appointed a new chief executive in January 2020. The new CEO "
                             "came from the mining industry. Zenith then closed two of its mines.",
     "company": "Zenith"},
    {"id": "orbit", "text": "Orbit Systems paid a dividend of two dollars per share in 2019. Orbit "
                            "shareholders approved the payout at the annual meeting.",
     "company": "Orbit"},
]
QUERIES = [
    {"id": "q1", "question": "What did Acme acquire in March 2021?",
     "reference_contexts": ["In March 2021 Acme acquired Beta Bakery for five million dollars."],
     "ground_truth": "Beta Bakery", "language": "en"},
    {"id": "q2", "question": "Who did Zenith appoint in January 2020?",
     "reference_contexts": ["Zenith Ltd appointed a new chief executive in January 2020."],
     "ground_truth": "A new chief executive", "language": "en"},
    {"id": "q3", "question": "How much dividend did Orbit pay per share?",
     "reference_contexts": ["Orbit Systems paid a dividend of two dollars per share in 2019."],
     "ground_truth": "Two dollars", "language": "en"},
    {"id": "acme", "question": "Which company was founded in Boston?",
     "reference_contexts": ["Acme Corp was founded in 2001 in Boston."], "language": "en"},
]


def _write(tmp_path: Path) -> tuple[Path, Path, Path]:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(d) for d in DOCS), encoding="utf-8")
    queries = tmp_path / "queries.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in QUERIES), encoding="utf-8")
    qrels = tmp_path / "qrels.txt"
    # query "acme" is answered by document "acme": BEIR would drop that hit, we must not
    qrels.write_text("q1 0 acme 1\nq2 0 zenith 1\nq3 0 orbit 2\nacme 0 acme 1\n", encoding="utf-8")
    return corpus, queries, qrels


def test_benchmark_end_to_end_and_reuse(tmp_path: Path) -> None:
    corpus, queries, qrels = _write(tmp_path)
    out = tmp_path / "out"
    config = BenchConfig(corpus=corpus, queries=queries, qrels=qrels, output=out,
                         retrievers=("bm25", "dense", "hybrid"), top_k=(1, 2, 3), chunk_sizes=(12, 40),
                         prefix_fields=("company",), answer=True, show_progress=False)
    encoder = HashingEncoder()
    result = run_benchmark(config, encoder=encoder)

    assert result.metrics == ["rageval_recall", "eir", "recall", "precision", "hit", "mrr", "ndcg", "map"]
    assert len(result.rows) == 3 * 2 * 3
    assert len(result.per_query) == len(QUERIES) * 3 * 2
    bm25_40 = {r["k"]: r for r in result.rows if r["retriever"] == "bm25" and r["chunk_size"] == 40}
    # each document fits one 40-token chunk and each query names its company: BM25 is perfect
    assert bm25_40[1]["recall"] == 1.0 and bm25_40[1]["rageval_recall"] == 1.0
    assert bm25_40[1]["n_recall"] == 4  # the query whose id equals its document id is scored
    for r in ("bm25", "dense", "hybrid"):
        for size in (12, 40):
            rec = [row["rageval_recall"] for row in result.rows
                   if row["retriever"] == r and row["chunk_size"] == size]
            assert rec == sorted(rec)  # recall cannot drop as k grows
    first_q = next(p for p in result.per_query if p["retriever"] == "bm25" and p["chunk_size"] == 12)
    assert first_q["retrieved"][0]["doc_id"] == "acme"
    assert len(first_q["retrieved"]) == 3 and "score" in first_q["retrieved"][0]
    assert {c["metric"] for c in result.comparisons} == {"rageval_recall", "eir", "recall", "ndcg"}
    # four queries: a delta, but no interval or p-value (test_too_few_queries_give_no_interval below)
    assert all(c["n_pairs"] <= 4 and c["p_randomization"] is None for c in result.comparisons)

    files = {k: Path(v) for k, v in result.files.items() if k != "answer"}
    assert all(p.exists() for p in files.values())
    with files["results_csv"].open() as handle:
        assert len(list(csv.DictReader(handle))) == len(result.rows)
    svg = ET.fromstring(files["plot"].read_text(encoding="utf-8"))
    assert svg.tag.endswith("svg")
    assert "bm25 / 12" in files["plot"].read_text(encoding="utf-8")
    assert json.loads(files["results_json"].read_text())["config"]["chunk_sizes"] == [12, 40]
    assert len((out / "per_query.jsonl").read_text().splitlines()) == len(result.per_query)

    # the answer hook writes evaluation samples that the dataset reader accepts
    from offline_eval.data.readers import read_dataset

    answer = out / "answer" / "hybrid_cs40_k3.jsonl"
    samples = read_dataset(answer)
    assert [s.id for s in samples] == [q["id"] for q in QUERIES]
    assert len(samples[0].contexts) == 3 and samples[0].reference_contexts == QUERIES[0]["reference_contexts"]
    assert samples[0].ground_truth == "Beta Bakery"

    # second run with other k: indexes load back, embeddings come from the cache
    seen = encoder.texts_seen
    config2 = BenchConfig(**{**config.__dict__, "top_k": (1, 2), "answer": False})
    again = run_benchmark(config2, encoder=encoder)
    assert encoder.texts_seen == seen
    assert all(t["index_loaded"] for t in again.timings if t["retriever"] != "hybrid")
    old = {(r["retriever"], r["chunk_size"], r["k"]): r for r in result.rows}
    for row in again.rows:
        assert row["ndcg"] == old[(row["retriever"], row["chunk_size"], row["k"])]["ndcg"]
    table = format_table(again, 2)
    assert "rageval_recall" in table and "hybrid" in table and "p perm" in table


def test_too_few_queries_give_no_interval_and_enough_give_one(tmp_path: Path) -> None:
    """Below MIN_PAIRS queries a bootstrap interval is as narrow as the few queries' spread and its p-value
    sits at its floor: a comparison shows its delta, says it is too few, and tells what to do."""
    from offline_eval.thresholds import MIN_PAIRS

    corpus, queries, qrels = _write(tmp_path)
    config = BenchConfig(corpus=corpus, queries=queries, qrels=qrels, output=tmp_path / "few",
                         retrievers=("bm25", "dense"), top_k=(1,), chunk_sizes=(40,), show_progress=False)
    few = run_benchmark(config, encoder=HashingEncoder())
    assert few.comparisons and all(c["n_pairs"] < MIN_PAIRS and c["ci95_low"] is None and c["p_bootstrap"] is None
                                   for c in few.comparisons)
    assert all(c["delta"] == pytest.approx(c["mean_b"] - c["mean_a"]) for c in few.comparisons)
    table = format_table(few, 1)
    assert "too few" in table and f"A comparison on fewer than {MIN_PAIRS} queries (here 4) has no interval" in table

    more = [*QUERIES, *({**q, "id": q["id"] + "-again"} for q in QUERIES)]  # eight queries
    queries.write_text("\n".join(json.dumps(q) for q in more), encoding="utf-8")
    qrels.write_text(qrels.read_text() + "".join(f"{line.split()[0]}-again {' '.join(line.split()[1:])}\n"
                                                 for line in qrels.read_text().splitlines()), encoding="utf-8")
    enough = run_benchmark(BenchConfig(**{**config.__dict__, "output": tmp_path / "enough"}), encoder=HashingEncoder())
    assert enough.comparisons and all(c["n_pairs"] == 8 and c["ci95_low"] <= c["delta"] <= c["ci95_high"]
                                      and 0.0 < c["p_randomization"] <= 1.0 for c in enough.comparisons)
    assert "too few" not in format_table(enough, 1)


def test_benchmark_needs_something_to_score(tmp_path: Path) -> None:
    from offline_eval.data.schema import DataError

    corpus, _, _ = _write(tmp_path)
    bare = tmp_path / "bare.jsonl"
    bare.write_text(json.dumps({"id": "x", "question": "anything?"}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="nothing to score"):
        run_benchmark(BenchConfig(corpus=corpus, queries=bare, output=tmp_path / "o",
                                  retrievers=("bm25",), show_progress=False))


def test_qrels_whose_passages_the_corpus_does_not_hold_are_refused_or_said(tmp_path: Path) -> None:
    """An id mismatch between the qrels and the corpus read as "every retriever finds nothing": qrels that
    name no document of the corpus are refused in one line, qrels that name some are said beside the
    figures (terminal, results.json, the report), and qrels with no relevant passage at all are refused."""
    from offline_eval.data.schema import DataError
    from offline_eval.report.html import write_retrieval_report

    corpus, _, qrels = _write(tmp_path)
    queries = tmp_path / "bare_queries.jsonl"  # no reference passages: the qrels are all there is to score
    queries.write_text("\n".join(json.dumps({k: v for k, v in q.items() if k != "reference_contexts"})
                                  for q in QUERIES), encoding="utf-8")
    config = BenchConfig(corpus=corpus, queries=queries, qrels=qrels, output=tmp_path / "o",
                         retrievers=("bm25",), top_k=(1,), chunk_sizes=(40,), show_progress=False)
    prefixed = tmp_path / "prefixed.txt"
    prefixed.write_text("q1 0 docs/acme 1\nq2 0 docs/zenith 1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"none of the 2 relevant passage ids in the qrels is a document id of the "
                                        r"corpus \(e.g. 'docs/acme'; the corpus has 'acme'\)") as info:
        run_benchmark(BenchConfig(**{**config.__dict__, "qrels": prefixed}))
    assert "\n" not in str(info.value)
    unjudged = tmp_path / "zero.txt"
    unjudged.write_text("q1 0 acme 0\nq2 0 zenith 0\n", encoding="utf-8")
    with pytest.raises(DataError, match="no query of the queries file has a relevant passage"):
        run_benchmark(BenchConfig(**{**config.__dict__, "qrels": unjudged}))

    some = tmp_path / "some.txt"
    some.write_text("q1 0 acme 1\nq2 0 zenith 1\nq3 0 docs/orbit 1\n", encoding="utf-8")
    result = run_benchmark(BenchConfig(**{**config.__dict__, "qrels": some}))
    said = [n for n in result.notes if "name no document of the corpus" in n]
    assert said == ["1 of the 3 relevant passages in --qrels name no document of the corpus (e.g. 'docs/orbit'): no "
                    "retriever can find them, so they count as missed in recall and the other IR metrics"]
    assert json.loads((tmp_path / "o" / "results.json").read_text())["notes"] == result.notes
    html = write_retrieval_report(tmp_path / "o").read_text(encoding="utf-8")
    assert "id='retrieval-notes'" in html and "name no document of the corpus (e.g. &#x27;docs/orbit&#x27;)" in html


def test_cli_registers_and_runs_bm25(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus, queries, qrels = _write(tmp_path)
    parser = argparse.ArgumentParser(prog="offline-eval")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["retrieval", "--corpus", str(corpus), "--queries", str(queries),
                              "--qrels", str(qrels), "--retrievers", "bm25", "--top-k", "1,3",
                              "--chunk-size", "40", "--output", str(tmp_path / "o"), "--no-progress"])
    assert args.func(args) == 0
    printed = capsys.readouterr().out
    assert "bm25" in printed and "ndcg" in printed and "recall_at_k.svg" in printed
    with pytest.raises(SystemExit):
        parser.parse_args(["retrieval", "--corpus", "c", "--queries", "q", "--retrievers", "tfidf"])
    bad = parser.parse_args(["retrieval", "--corpus", str(tmp_path / "nope"), "--queries", str(queries),
                             "--retrievers", "bm25", "--no-progress"])
    assert bad.func(bad) == 2


def test_queries_without_reference_passages_are_counted_aloud(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A query without reference passages has no RAGEval recall or EIR: the command says how many were left
    out and why (it dropped them without a word), and likewise for queries that --qrels judges nothing."""
    corpus, _, _ = _write(tmp_path)
    queries = tmp_path / "some_bare.jsonl"
    rows = [QUERIES[0], {k: v for k, v in QUERIES[1].items() if k != "reference_contexts"}, *QUERIES[2:]]
    queries.write_text("\n".join(json.dumps(q) for q in rows), encoding="utf-8")
    qrels = tmp_path / "some.qrels"
    qrels.write_text("q1 0 acme 1\nq2 0 zenith 0\n", encoding="utf-8")
    parser = argparse.ArgumentParser(prog="offline-eval")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["retrieval", "--corpus", str(corpus), "--queries", str(queries), "--retrievers",
                              "bm25", "--top-k", "1", "--chunk-size", "40", "--output", str(tmp_path / "o"),
                              "--qrels", str(qrels), "--no-progress"])
    assert args.func(args) == 0
    err = capsys.readouterr().err.splitlines()
    assert "offline-eval retrieval: 1 of 4 queries have no reference passages (reference_contexts / RAGEval " \
           "ground_truth.references): left out of rageval_recall and eir" in err
    assert any(line.startswith("offline-eval retrieval: 3 of 4 queries have no relevant passage in --qrels: "
                               "left out of recall, ") for line in err)
    row = json.loads((tmp_path / "o" / "results.json").read_text())["results"][0]
    assert row["n_rageval_recall"] == 3 and row["n_recall"] == 1


def test_the_help_examples_read_as_written() -> None:
    """Each example of `retrieval --help` is one command, its continuation lines kept (the third ran two
    lines together: a backslash at a line's end in the source string joined them)."""
    import re
    import shlex

    parser = argparse.ArgumentParser(prog="offline-eval")
    text = register(parser.add_subparsers(dest="command")).format_help()
    examples = re.sub(r" \\\n +", " ", text.split("examples:\n", 1)[1].split("\n\n", 1)[0]).splitlines()
    assert len(examples) == 3
    for example in examples:
        assert example.startswith("  offline-eval retrieval ") and "  " not in example.strip(), example
        parser.parse_args(shlex.split(example)[1:])  # every flag as written exists


def test_importing_the_cli_does_not_import_torch() -> None:
    code = ("import sys, offline_eval.cli.retrieval, offline_eval.retrieval.bench; "
            "assert 'torch' not in sys.modules and 'sentence_transformers' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.skipif(not (SHARED / "dragonball_docs.jsonl").exists()
                    or not (SHARED / "rageval_example.jsonl").exists(), reason="shared data absent")
def test_bm25_on_rageval_finance_matches_the_paper(tmp_path: Path) -> None:
    """RAGEval (finance, en): BM25 recall ≈ 0.672 and EIR ≈ 0.12 at top-5 with small chunks."""
    config = BenchConfig(corpus=SHARED / "dragonball_docs.jsonl", queries=SHARED / "rageval_example.jsonl",
                         output=tmp_path, retrievers=("bm25",), top_k=(5,), chunk_sizes=(96,),
                         corpus_filter={"domain": "Finance", "language": "en"},
                         prefix_fields=("company_name",), show_progress=False)
    row = run_benchmark(config).rows[0]
    assert row["n_rageval_recall"] == 312  # the 38 unanswerable queries have no reference passage
    assert 0.62 <= row["rageval_recall"] <= 0.75
    assert 0.09 <= row["eir"] <= 0.15
