"""BGE-M3 outputs and scores from FlagEmbedding's ``BGEM3FlagModel``, the reference implementation.

Imported by ``tests/retrieval/test_retrieval_m3.py`` when FlagEmbedding is importable in the test interpreter,
otherwise run as a script with the interpreter of a side virtualenv that has it
(``scripts/flagembedding_venv.sh`` builds one in ``.flagembedding-venv``; FlagEmbedding is not a
dependency of offline-eval): JSON ``{"folder", "queries", "passages", "max_length", "weights"}`` on
stdin, JSON of :func:`reference` on stdout. Imports nothing from offline_eval.
"""

from __future__ import annotations

import json
import sys


def reference(folder: str, queries: list[str], passages: list[str], max_length: int,
              weights: list[float]) -> dict:
    """What FlagEmbedding computes for every (query, passage): its encode outputs and scores."""
    import numpy as np
    from FlagEmbedding import BGEM3FlagModel

    model = BGEM3FlagModel(folder, use_fp16=False, devices="cpu", query_max_length=max_length,
                           passage_max_length=max_length, batch_size=8)
    kinds = dict(return_dense=True, return_sparse=True, return_colbert_vecs=True)
    q = model.encode_queries(queries, **kinds)
    p = model.encode_corpus(passages, **kinds)
    # compute_score pads each side of a batch; one pair per batch keeps every text unpadded, as encode does
    pairs = [(a, b) for a in queries for b in passages]
    joint = model.compute_score(pairs, batch_size=1, max_query_length=max_length, max_passage_length=max_length,
                                weights_for_different_modes=list(weights))
    shape = (len(queries), len(passages))
    return {
        "q_dense": np.asarray(q["dense_vecs"]).tolist(), "p_dense": np.asarray(p["dense_vecs"]).tolist(),
        "q_lexical": [{str(k): float(v) for k, v in lw.items()} for lw in q["lexical_weights"]],
        "p_lexical": [{str(k): float(v) for k, v in lw.items()} for lw in p["lexical_weights"]],
        "q_colbert": [np.asarray(v).tolist() for v in q["colbert_vecs"]],
        "p_colbert": [np.asarray(v).tolist() for v in p["colbert_vecs"]],
        "dense": (np.asarray(q["dense_vecs"]) @ np.asarray(p["dense_vecs"]).T).tolist(),
        "sparse": np.asarray(model.compute_lexical_matching_score(q["lexical_weights"],
                                                                  p["lexical_weights"])).tolist(),
        "colbert": [[float(model.colbert_score(a, b)) for b in p["colbert_vecs"]] for a in q["colbert_vecs"]],
        "compute_score": {k: np.asarray(v, dtype=np.float64).reshape(shape).tolist() for k, v in joint.items()},
    }


if __name__ == "__main__":
    args = json.load(sys.stdin)
    json.dump(reference(args["folder"], args["queries"], args["passages"], args["max_length"], args["weights"]),
              sys.stdout)
