"""BGE-M3's dense, sparse, multi-vector and hybrid retrievers, and the cross-encoder reranking stage.

Parity is checked twice on a tiny randomly initialised BGE-M3 folder (``tiny_models.build_m3``: an
XLM-RoBERTa with ``sparse_linear.pt`` and ``colbert_linear.pt`` beside it, as BAAI publishes it):

- always, against each formula written out from FlagEmbedding's source (commit 7ed43d6, the
  version installed by ``scripts/flagembedding_venv.sh`` is 1.4.2 with the same code);
- against FlagEmbedding's ``BGEM3FlagModel`` itself when it can be run: importable here, or in the
  side virtualenv ``.flagembedding-venv`` (``OFFLINE_EVAL_FLAGEMBEDDING_PYTHON`` names another
  interpreter); skipped otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from offline_eval.retrieval.m3 import (
    M3Cache,
    M3Encoder,
    M3Retriever,
    M3Vectors,
    LazyM3Encoder,
    SparseIndex,
    colbert_scores,
    colbert_scores_for,
    dense_scores,
    hybrid,
    m3_identity,
)

from tests import tiny_models
from tests.retrieval.test_retrieval_bench import DOCS, QUERIES, _write

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"
TOL = 1e-5
QUESTIONS = ["What did the company acquire in March?", "Who was appointed chief executive?",
             "dividend per share", "x"]
PASSAGES = [d["text"] for d in DOCS] + ["Acme acquired Beta Bakery.", "An unrelated sentence about weather."]
WORDS = sorted({w for t in QUESTIONS + PASSAGES for w in re.findall(r"[A-Za-z]+", t)})


@pytest.fixture(scope="module")
def m3_folder(tmp_path_factory) -> Path:
    return tiny_models.build_m3(tmp_path_factory.mktemp("m3") / "bge-m3-tiny", words=WORDS)


@pytest.fixture(scope="module")
def ce_folder(tmp_path_factory) -> Path:
    return tiny_models.build_cross_encoder(tmp_path_factory.mktemp("ce") / "reranker-tiny", words=WORDS)


@pytest.fixture(scope="module")
def ours(m3_folder: Path) -> dict:
    encoder = M3Encoder(m3_folder, max_length=512, batch_size=3)
    q, p = encoder.encode(QUESTIONS), encoder.encode(PASSAGES)
    scores = {"dense": dense_scores(q, p), "sparse": SparseIndex(p).scores(q), "colbert": colbert_scores(q, p)}
    scores["hybrid"] = hybrid(scores["dense"], scores["sparse"], scores["colbert"], (1.0, 0.3, 1.0))
    return {"q": q, "p": p, "scores": scores}


# ------------------------------------------------------------------------------------ parity

def _reference_from_source(folder: Path, texts: list[str], max_length: int) -> list[dict]:
    """Each text encoded alone, line by line as FlagEmbedding does it (no code of ours involved).

    - ``FlagEmbedding/finetune/embedder/encoder_only/m3/runner.py`` ``get_model``: ``AutoModel`` on the
      folder; ``colbert_linear = Linear(hidden, hidden)`` and ``sparse_linear = Linear(hidden, 1)``, their
      state dicts read from ``colbert_linear.pt`` / ``sparse_linear.pt`` in the folder with
      ``torch.load(..., weights_only=True)``.
    - ``.../m3/modeling.py`` ``_dense_embedding`` (pooling "cls"): ``last_hidden_state[:, 0]``, then
      ``F.normalize`` (``normalize_embeddings=True`` in ``M3Embedder``).
    - ``_sparse_embedding(..., return_embedding=False)``: ``relu(sparse_linear(hidden_state))``; then
      ``inference/embedder/encoder_only/m3.py`` ``_process_token_weights``: skip the ids of
      ``cls_token``, ``eos_token``, ``pad_token``, ``unk_token`` and weights <= 0, keep the max per id.
    - ``_colbert_embedding``: ``colbert_linear(last_hidden_state[:, 1:]) * mask[:, 1:]``, ``F.normalize``;
      ``_process_colbert_vecs`` keeps ``tokens_num - 1`` rows (every real token after [CLS]).
    """
    import torch
    import torch.nn.functional as F
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModel.from_pretrained(str(folder)).eval()
    hidden = model.config.hidden_size
    colbert_linear, sparse_linear = torch.nn.Linear(hidden, hidden), torch.nn.Linear(hidden, 1)
    colbert_linear.load_state_dict(torch.load(folder / "colbert_linear.pt", map_location="cpu", weights_only=True))
    sparse_linear.load_state_dict(torch.load(folder / "sparse_linear.pt", map_location="cpu", weights_only=True))
    unused = {tokenizer.convert_tokens_to_ids(tokenizer.special_tokens_map[t])
              for t in ("cls_token", "eos_token", "pad_token", "unk_token") if t in tokenizer.special_tokens_map}
    out = []
    with torch.no_grad():
        for text in texts:
            inputs = tokenizer([text], truncation=True, max_length=max_length, return_tensors="pt")
            last = model(**inputs, return_dict=True).last_hidden_state
            dense = F.normalize(last[:, 0], dim=-1)[0].numpy()
            weights = torch.relu(sparse_linear(last)).squeeze(-1)[0]
            lexical: dict[int, float] = defaultdict(int)
            for w, idx in zip(weights.tolist(), inputs["input_ids"][0].tolist()):
                if idx not in unused and w > 0 and w > lexical[idx]:
                    lexical[idx] = w
            colbert = colbert_linear(last[:, 1:]) * inputs["attention_mask"][:, 1:][:, :, None].float()
            colbert = F.normalize(colbert, dim=-1)[0][:int(inputs["attention_mask"].sum()) - 1].numpy()
            out.append({"dense": dense, "lexical": dict(lexical), "colbert": colbert})
    return out


def _reference_scores(q: list[dict], p: list[dict], weights: tuple[float, float, float]) -> dict[str, np.ndarray]:
    """Scores as ``inference/embedder/encoder_only/m3.py`` computes them:

    - dense: inner product of the two normalised vectors (``compute_dense_score``: ``q @ p.T``);
    - ``compute_lexical_matching_score``: ``Σ weight * lw2[token]`` over the query's tokens in ``lw2``;
    - ``colbert_score``: ``einsum('in,jn->ij')``, max over the passage's rows, summed, divided by the
      number of query rows;
    - ``compute_score``'s ``colbert+sparse+dense``: ``(colbert*w[2] + sparse*w[1] + dense*w[0]) / sum(w)``.
    """
    dense = np.array([[float(a["dense"] @ b["dense"]) for b in p] for a in q])
    sparse = np.array([[sum(w * b["lexical"][t] for t, w in a["lexical"].items() if t in b["lexical"])
                        for b in p] for a in q])
    colbert = np.array([[float((a["colbert"] @ b["colbert"].T).max(-1).sum() / a["colbert"].shape[0])
                         for b in p] for a in q])
    w = weights
    return {"dense": dense, "sparse": sparse, "colbert": colbert,
            "hybrid": (colbert * w[2] + sparse * w[1] + dense * w[0]) / sum(w)}


def test_outputs_and_scores_match_the_formulas_of_flagembeddings_source(m3_folder: Path, ours: dict) -> None:
    ref_q = _reference_from_source(m3_folder, QUESTIONS, 512)
    ref_p = _reference_from_source(m3_folder, PASSAGES, 512)
    for mine, ref in ((ours["q"], ref_q), (ours["p"], ref_p)):
        for i, r in enumerate(ref):
            assert np.allclose(mine.dense[i], r["dense"], atol=TOL)
            lw = mine.lexical_weights(i)
            assert lw.keys() == r["lexical"].keys()
            assert all(abs(lw[t] - r["lexical"][t]) <= TOL for t in lw)
            assert mine.colbert(i).shape == r["colbert"].shape and np.allclose(mine.colbert(i), r["colbert"], atol=TOL)
    expected = _reference_scores(ref_q, ref_p, (1.0, 0.3, 1.0))
    for kind, matrix in expected.items():
        assert np.abs(ours["scores"][kind] - matrix).max() <= TOL, kind
    # the tiny model must exercise every part: lexical matches, dropped specials, non-trivial scores
    assert (expected["sparse"] > 0).sum() >= 4 and (expected["sparse"] == 0).any()
    assert np.ptp(expected["colbert"]) > 0.01 and np.ptp(expected["dense"]) > 0.01
    tok_ids = {t for i in range(len(PASSAGES)) for t in ours["p"].lexical_weights(i)}
    assert not tok_ids & {0, 1, 2, 3}  # <s>, <pad>, </s>, <unk> never carry a lexical weight


def _flagembedding_python() -> str | None:
    """An interpreter that can import FlagEmbedding: this one, $OFFLINE_EVAL_FLAGEMBEDDING_PYTHON, or
    the side venv's."""
    if importlib.util.find_spec("FlagEmbedding") is not None:
        return sys.executable
    given = os.environ.get("OFFLINE_EVAL_FLAGEMBEDDING_PYTHON")
    if given and Path(given).is_file():
        return given
    side = REPO / ".flagembedding-venv"
    if (side / ".ready").is_file() and (side / "bin" / "python").is_file():  # set up completely
        return str(side / "bin" / "python")
    return None


@pytest.mark.skipif(_flagembedding_python() is None,
                    reason="FlagEmbedding not installed (bash scripts/flagembedding_venv.sh builds a side venv)")
def test_parity_with_flagembedding_bgem3flagmodel(m3_folder: Path, ours: dict) -> None:
    python = _flagembedding_python()
    request = {"folder": str(m3_folder), "queries": QUESTIONS, "passages": PASSAGES, "max_length": 512,
               "weights": [1.0, 0.3, 1.0]}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([python, str(REPO / "tests" / "retrieval" / "flagembedding_side.py")], input=json.dumps(request),
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ref = json.loads(proc.stdout)
    q, p = ours["q"], ours["p"]
    assert np.abs(q.dense - np.array(ref["q_dense"])).max() <= TOL
    assert np.abs(p.dense - np.array(ref["p_dense"])).max() <= TOL
    for mine, theirs in ((q, ref["q_lexical"]), (p, ref["p_lexical"])):
        for i, lw in enumerate(theirs):
            got = mine.lexical_weights(i)
            assert {str(t) for t in got} == set(lw)
            assert all(abs(got[int(t)] - w) <= TOL for t, w in lw.items())
    for mine, theirs in ((q, ref["q_colbert"]), (p, ref["p_colbert"])):
        for i, rows in enumerate(theirs):
            assert np.abs(mine.colbert(i) - np.array(rows)).max() <= TOL
    scores = ours["scores"]
    for kind in ("dense", "sparse", "colbert"):
        assert np.abs(scores[kind] - np.array(ref[kind])).max() <= TOL, kind  # encode + its score helpers
        assert np.abs(scores[kind] - np.array(ref["compute_score"][kind])).max() <= TOL, kind
    assert np.abs(scores["hybrid"] - np.array(ref["compute_score"]["colbert+sparse+dense"])).max() <= TOL


# ------------------------------------------------------------------------------- search

def _random_vectors(rng: np.random.Generator, n: int, dim: int = 8, vocab: int = 40) -> M3Vectors:
    dense, sparse, colbert = [], [], []
    for _ in range(n):
        d = rng.standard_normal(dim).astype(np.float32)
        dense.append(d / np.linalg.norm(d))
        ids = np.unique(rng.integers(0, vocab, size=rng.integers(0, 6)))
        sparse.append((ids.astype(np.int32), rng.random(ids.shape[0]).astype(np.float32)))
        c = rng.standard_normal((int(rng.integers(1, 9)), dim)).astype(np.float32)
        colbert.append(c / np.linalg.norm(c, axis=1, keepdims=True))
    return M3Vectors.from_parts(dense, sparse, colbert)


def test_exact_search_equals_scoring_every_pair_directly() -> None:
    rng = np.random.default_rng(3)
    docs, queries = _random_vectors(rng, 57), _random_vectors(rng, 9)
    sparse = SparseIndex(docs).scores(queries)
    direct = [[sum(w * d.get(t, 0.0) for t, w in queries.lexical_weights(a).items())
               for d in (docs.lexical_weights(b) for b in range(len(docs)))] for a in range(len(queries))]
    assert np.allclose(sparse, direct, atol=1e-6)
    tiled = colbert_scores(queries, docs, tile_floats=40)  # a handful of documents per tile
    full = colbert_scores(queries, docs)
    pairwise = [[(queries.colbert(a) @ docs.colbert(b).T).max(1).mean() for b in range(len(docs))]
                for a in range(len(queries))]
    assert np.allclose(tiled, pairwise, atol=1e-6) and np.allclose(full, pairwise, atol=1e-6)
    cand = np.array([3, 10, 11, 56])
    assert np.allclose(colbert_scores_for(queries, 2, docs, cand), full[2, cand], atol=1e-6)
    assert np.allclose(hybrid(1.0, 2.0, 4.0, (1, 0.3, 1)), (1 + 0.6 + 4) / 2.3)
    assert np.allclose(hybrid(np.ones(3), np.zeros(3), 0.0, (1, 1, 0)), 0.5)  # a zero weight drops its part

    retriever = M3Retriever(encoder=None)
    retriever.docs = docs
    names = ["m3-dense", "m3-sparse", "m3-colbert", "m3-hybrid"]
    runs, secs = retriever.search(queries, names, 5, weights=(1.0, 0.3, 1.0), block=4)
    matrices = {"m3-dense": dense_scores(queries, docs), "m3-sparse": sparse, "m3-colbert": full,
                "m3-hybrid": hybrid(dense_scores(queries, docs), sparse, full, (1.0, 0.3, 1.0))}
    for name in names:
        assert secs[name] >= 0
        for q, ranking in enumerate(runs[name]):
            expected = np.lexsort((np.arange(len(docs)), -matrices[name][q]))[:5]
            assert [i for i, _ in ranking] == expected.tolist(), name
            assert np.allclose([s for _, s in ranking], matrices[name][q][expected], atol=1e-6)

    # candidates: multi-vector re-ranks the dense top-N; the hybrid scores the dense ∪ sparse top-N
    runs, _ = retriever.search(queries, ["m3-colbert", "m3-hybrid"], 3, candidates=6)
    for q in range(len(queries)):
        top_dense = set(np.lexsort((np.arange(len(docs)), -matrices["m3-dense"][q]))[:6].tolist())
        top_sparse = set(np.lexsort((np.arange(len(docs)), -sparse[q]))[:6].tolist())
        col = runs["m3-colbert"][q]
        assert {i for i, _ in col} <= top_dense
        best = max(top_dense, key=lambda i: (full[q, i], -i))
        assert col[0][0] == best and col[0][1] == pytest.approx(full[q, best], abs=1e-6)
        assert {i for i, _ in runs["m3-hybrid"][q]} <= top_dense | top_sparse


def test_vectors_round_trip_and_the_cache_spares_the_model(tmp_path: Path, m3_folder: Path) -> None:
    rng = np.random.default_rng(0)
    vectors = _random_vectors(rng, 7)
    vectors.save(tmp_path / "v")
    back = M3Vectors.load(tmp_path / "v")
    assert back is not None and isinstance(back.colbert_vectors, np.memmap)
    assert all(np.array_equal(getattr(back, k), getattr(vectors, k)) for k in ("dense", "sparse_ids", "colbert_vectors"))
    assert M3Vectors.load(tmp_path / "nothing") is None
    halves = M3Vectors.concat([vectors, _random_vectors(rng, 3)])
    assert len(halves) == 10 and np.array_equal(halves.colbert(2), vectors.colbert(2))

    made: list[int] = []

    def factory() -> M3Encoder:
        made.append(1)
        return M3Encoder(m3_folder, max_length=64)

    identity = m3_identity(m3_folder, 64)
    assert identity.startswith("bge-m3:") and identity != m3_identity(m3_folder, 128)
    cache = M3Cache(tmp_path / "cache")
    first = M3Retriever(LazyM3Encoder(factory, identity), cache)
    first.build(PASSAGES, "fp")
    q1 = first.encode_queries(QUESTIONS)
    assert not first.from_cache and made == [1]
    first.save(tmp_path / "index")
    meta = json.loads((tmp_path / "index" / "meta.json").read_text())
    assert meta["n_chunks"] == len(PASSAGES) and meta["bytes"]["colbert"] > meta["bytes"]["dense"]
    again = M3Retriever(LazyM3Encoder(factory, identity), cache)
    again.build(PASSAGES, "fp")
    q2 = again.encode_queries(QUESTIONS)
    assert again.from_cache and made == [1] and not again.encoder.loaded  # nothing re-encoded, no model
    assert np.array_equal(q1.colbert_vectors, q2.colbert_vectors)
    names = ["m3-dense", "m3-sparse", "m3-colbert", "m3-hybrid"]
    assert again.search(q2, names, 3)[0] == first.search(q1, names, 3)[0]


def test_heads_are_checked(tmp_path: Path, m3_folder: Path) -> None:
    import shutil

    import torch

    broken = tmp_path / "broken"
    shutil.copytree(m3_folder, broken)
    (broken / "colbert_linear.pt").unlink()
    with pytest.raises(FileNotFoundError, match="colbert_linear.pt"):
        M3Encoder(broken)
    torch.save(torch.nn.Linear(7, 1).state_dict(), broken / "colbert_linear.pt")
    with pytest.raises(ValueError, match="colbert_linear.pt"):
        M3Encoder(broken)


def test_the_folder_as_embedder_gives_m3_dense(m3_folder: Path, ours: dict) -> None:
    from offline_eval.runtime.embedder import SentenceTransformerEmbedder

    vectors = SentenceTransformerEmbedder(str(m3_folder)).encode_texts(PASSAGES)
    assert np.abs(vectors - ours["p"].dense).max() <= TOL


def test_importing_m3_and_rerank_does_not_import_torch() -> None:
    code = ("import sys, offline_eval.retrieval.m3, offline_eval.retrieval.rerank; "
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------------------ reranking

def test_rerank_orders_the_top_n_by_the_cross_encoder(tmp_path: Path, ce_folder: Path) -> None:
    from sentence_transformers import CrossEncoder

    from offline_eval.retrieval.rerank import CrossEncoderScorer, LazyScorer, PairScoreCache, rerank, reranker_identity

    first_stage = [[(i, 10.0 - i) for i in range(len(PASSAGES))] for _ in QUESTIONS]
    scorer = CrossEncoderScorer(ce_folder, max_length=128)
    cache = PairScoreCache(tmp_path, scorer.identity)
    ranked, stats = rerank(first_stage, QUESTIONS, PASSAGES, scorer, depth=4, cache=cache)
    assert stats["pairs"] == 4 * len(QUESTIONS) and stats["pairs_scored"] == 4 * len(QUESTIONS)
    plain = CrossEncoder(str(ce_folder), local_files_only=True, max_length=128)
    for q, ranking in enumerate(ranked):
        logits = plain.predict([(QUESTIONS[q], PASSAGES[i]) for i in range(4)],
                               activation_fn=__import__("torch").nn.Identity())
        assert [i for i, _ in ranking[:4]] == sorted(range(4), key=lambda i: (-logits[i], i))
        assert np.allclose([s for _, s in ranking[:4]], sorted(logits, reverse=True), atol=1e-5)
        assert ranking[4:] == first_stage[q][4:]  # the tail keeps its first-stage order and scores
    assert len({s for r in ranked for _, s in r[:4]}) > 4  # raw logits, not saturated probabilities

    # digests ending in zero bytes survive the file (a numpy bytes dtype would strip them)
    odd = PairScoreCache(tmp_path / "odd", "id")
    odd.update([b"\x01" * 15 + b"\x00", b"\x00" * 16], [1.5, -2.0])
    odd.save()
    assert PairScoreCache(tmp_path / "odd", "id").scores == {b"\x01" * 15 + b"\x00": 1.5, b"\x00" * 16: -2.0}

    lazy = LazyScorer(lambda: CrossEncoderScorer(ce_folder, max_length=128), reranker_identity(ce_folder, 128))
    again, stats2 = rerank(first_stage, QUESTIONS, PASSAGES, lazy, depth=4,
                           cache=PairScoreCache(tmp_path, lazy.identity))
    assert again == ranked and stats2["pairs_scored"] == 0 and not lazy.loaded


# --------------------------------------------------------------------------- the benchmark

def test_benchmark_rows_for_every_m3_retriever_and_reranked_run(tmp_path: Path, m3_folder: Path,
                                                                ce_folder: Path) -> None:
    from offline_eval.retrieval.bench import BenchConfig, format_table, run_benchmark

    corpus, queries, qrels = _write(tmp_path)
    names = ("bm25", "m3-dense", "m3-sparse", "m3-colbert", "m3-hybrid")
    # --m3 is not given: the embedder folder holds both head files, so it is the BGE-M3 folder
    config = BenchConfig(corpus=corpus, queries=queries, qrels=qrels, output=tmp_path / "out", retrievers=names,
                         top_k=(1, 2), chunk_sizes=(12,), embedder=m3_folder, rerank=ce_folder, rerank_depth=3,
                         rerank_retrievers=("bm25", "m3-hybrid"), m3_max_length=64, rerank_max_length=128,
                         show_progress=False)
    result = run_benchmark(config)
    expected = list(names) + ["bm25+rerank", "m3-hybrid+rerank"]
    assert list(dict.fromkeys(r["retriever"] for r in result.rows)) == expected
    assert len(result.per_query) == len(QUERIES) * len(expected)
    pairs = {(c["a"], c["b"]) for c in result.comparisons}
    assert ("bm25", "bm25+rerank") in pairs and ("m3-hybrid", "m3-hybrid+rerank") in pairs
    assert ("bm25+rerank", "m3-hybrid+rerank") in pairs and ("m3-dense", "m3-hybrid") in pairs
    assert ("m3-dense", "bm25+rerank") not in pairs  # a first stage meets only its own reranked run
    svg = Path(result.files["plot"]).read_text(encoding="utf-8")
    assert "m3-colbert / 12" in svg and "bm25+rerank / 12" in svg
    saved = json.loads(Path(result.files["results_json"]).read_text())
    assert saved["config"]["m3"] == str(m3_folder) and saved["config"]["m3_weights"] == [1.0, 0.3, 1.0]
    assert saved["config"]["reranked"] == ["bm25", "m3-hybrid"] and saved["config"]["rerank_depth"] == 3
    by_name = {t["retriever"]: t for t in result.timings}
    assert by_name["m3-colbert"]["index_bytes"] > by_name["m3-dense"]["index_bytes"]
    assert by_name["bm25+rerank"]["pairs"] == 3 * len(QUERIES)
    # the first stage ran 3 deep for the reranker; every run is reported to the deepest k, 2
    assert all(len(p["retrieved"]) == 2 for p in result.per_query)
    table = format_table(result, 2)
    assert "m3-sparse" in table and "rerank 12/12" in table and "built (shared)" in table

    # a second run reads every output back: no BGE-M3 or cross-encoder is loaded, torch is not imported
    saved_config = tmp_path / "config.json"
    saved_config.write_text(json.dumps({k: str(v) if isinstance(v, Path) else v for k, v in config.__dict__.items()}))
    code = ("import json, sys; from pathlib import Path; "
            "from offline_eval.retrieval.bench import BenchConfig, run_benchmark; "
            f"c = json.loads(Path({str(saved_config)!r}).read_text()); "
            "c.update({k: Path(c[k]) for k in ('corpus', 'queries', 'qrels', 'output', 'embedder', 'rerank')}); "
            "rows = run_benchmark(BenchConfig(**c)).rows; "
            "print(json.dumps({'torch': 'torch' in sys.modules, 'mrr': [r['mrr'] for r in rows]}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = json.loads(proc.stdout.strip().splitlines()[-1])
    assert again == {"torch": False, "mrr": [r["mrr"] for r in result.rows]}


def test_cli_flags(tmp_path: Path, m3_folder: Path) -> None:
    from offline_eval.cli.retrieval import register

    corpus, queries, qrels = _write(tmp_path)
    parser = argparse.ArgumentParser(prog="offline-eval")
    register(parser.add_subparsers(dest="command"))
    base = ["retrieval", "--corpus", str(corpus), "--queries", str(queries), "--qrels", str(qrels),
            "--output", str(tmp_path / "o"), "--quiet", "--chunk-size", "40"]
    args = parser.parse_args(base + ["--retrievers", "m3-hybrid", "--m3-weights", "1,0,0"])
    assert args.m3_weights == (1.0, 0.0, 0.0) and args.rerank_depth == 100
    for bad in (["--m3-weights", "1,0.3"], ["--m3-weights", "0,0,0"], ["--retrievers", "m3-splade"]):
        with pytest.raises(SystemExit):
            parser.parse_args(base + bad)
    no_m3 = parser.parse_args(base + ["--retrievers", "m3-dense"])
    assert no_m3.func(no_m3) == 2  # neither --m3 nor an --embedder holding the heads
    stray = parser.parse_args(base + ["--retrievers", "bm25", "--rerank", str(m3_folder),
                                      "--rerank-retrievers", "m3-dense"])
    assert stray.func(stray) == 2
    dense_only = parser.parse_args(base + ["--retrievers", "m3-hybrid", "--m3", str(m3_folder),
                                           "--m3-weights", "1,0,0", "--m3-max-length", "64"])
    assert dense_only.func(dense_only) == 0
    rows = json.loads((tmp_path / "o" / "results.json").read_text())["results"]
    assert {r["retriever"] for r in rows} == {"m3-hybrid"}


@pytest.mark.skipif(not (SHARED / "dragonball_docs.jsonl").exists()
                    or not (SHARED / "rageval_example.jsonl").exists(), reason="shared data absent")
def test_acceptance_dragonball_finance_with_tiny_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's command on the English finance part of DRAGONBall with tiny random models; to stay
    fast on two cores: one chunk size, a reranking depth of 5 (the default is 100; same code path,
    more pairs) and short token limits."""
    docs = [json.loads(line) for line in (SHARED / "dragonball_docs.jsonl").read_text().splitlines() if line]
    text = " ".join(d.get("content", "") for d in docs if d.get("domain") == "Finance" and d.get("language") == "en")
    words = [w for w, _ in Counter(re.findall(r"[A-Za-z]+", text.lower())).most_common(1500)]
    m3 = tiny_models.build_m3(tmp_path / "m3", words=words)
    ce = tiny_models.build_cross_encoder(tmp_path / "ce", words=words)
    out = tmp_path / "out"
    argv = ["--corpus", str(SHARED / "dragonball_docs.jsonl"), "--filter", "domain=Finance",
            "--filter", "language=en", "--queries", str(SHARED / "rageval_example.jsonl"),
            "--retrievers", "bm25,m3-dense,m3-sparse,m3-colbert,m3-hybrid", "--m3", str(m3), "--rerank", str(ce),
            "--rerank-depth", "5", "--top-k", "1,3,5", "--chunk-size", "512", "--prefix-fields", "company_name",
            "--m3-max-length", "128", "--rerank-max-length", "96", "--batch-size", "64", "--output", str(out),
            "--quiet"]
    from offline_eval.cli.retrieval import main

    assert main(argv) == 0
    printed = capsys.readouterr().out
    names = ["bm25", "m3-dense", "m3-sparse", "m3-colbert", "m3-hybrid"]
    expected = names + [n + "+rerank" for n in names]
    import csv

    with (out / "results.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["retriever"] for r in rows if r["k"] == "5"] == expected
    assert all(r["n_rageval_recall"] == "312" for r in rows)
    with (out / "comparisons.csv").open() as handle:
        compared = {(c["a"], c["b"]) for c in csv.DictReader(handle)}
    assert all((n, n + "+rerank") in compared for n in names)
    assert {p["retriever"] for p in map(json.loads, (out / "per_query.jsonl").read_text().splitlines())} == set(expected)
    svg = (out / "recall_at_k.svg").read_text(encoding="utf-8")
    html = (out / "retrieval_report.html").read_text(encoding="utf-8")
    assert all(f"{n} / 512" in svg and n in html for n in expected)
    for n in expected:
        assert n in printed
    bm25 = next(r for r in rows if r["retriever"] == "bm25" and r["k"] == "5")
    assert 0.8 <= float(bm25["rageval_recall"]) <= 0.95  # BM25 is the real thing even with toy models
