"""Would the embedder help the relevance verdicts where the bench judge cannot read? (issue #58)

    python benchmarks/agreement.py --threads 1 --sets answer_pairs,compound_pairs,mtrag_appropriateness,\
context_pairs,rgb_context,rageval_context --configs plain,default --limit mtrag_appropriateness=0
    python benchmarks/embedder_readings.py --out benchmarks/results/embedder_readings

Reads the per-row scores of the agreement runs above (their run folders, ``--runs-dir`` and ``--tag`` as
agreement.py names them) and recomputes each set's ROC AUC and pairwise accuracy with the default score
multiplied by a reading of the starter embedder (all-MiniLM-L6-v2), asking the judge nothing:

- answers, each multiplying the judge's reading alone (the least P over the question's parts times a joined
  question's balance, the default before the coverage joined it) where the answer addresses the question,
  the reading of a declining answer left as the metric has it: ``x coverage of the contexts`` (first
  measured), the context sentences weighted by how far their cosine with the question lies above the
  contexts' mean, each covered by its best cosine with a sentence of the answer (how much of what the
  passages say on the question the answer carries: the Ragas paper's incomplete answers), not read where
  there are no contexts; and the coverage the metric now reads (``coverage`` in a score's metadata: the
  weights anchored at the embedder's lean), as it is, as its square root, and as ``min(1, coverage / t)``
  for t = 0.4, 0.5 (adopted, ``COMPLETE_FROM``) and 0.6;
- contexts, ``x mean cosine``: the mean cosine between the question and each sentence of the contexts (how
  much of the contexts is on the question); ``x mean / best cosine``: the same over the best sentence's,
  which does not depend on the embedder's scale.

Each is a reading that was measured and not adopted as it stands (docs/measurements.md says why). Three are
in the metrics, with their figures in agreement.py's tables: a joined question's balance and the anchored
coverage of the contexts up to 0.5 (answer_relevancy), and the mean cosine anchored at the embedder's lean,
so that its scale is not the embedder's (context_relevance, ``share_on_question``). For the contexts the readings multiply the judge's reading alone (the windows' mean
P, ``mean_probability``), which was the default when they were measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import agreement as bench  # noqa: E402
from _results import write_results  # noqa: E402
from offline_eval.data.schema import Sample  # noqa: E402
from offline_eval.judging.verdicts import ABSURD_STATEMENT, UNRELATED_PASSAGE  # noqa: E402
from offline_eval.text import split_sentences  # noqa: E402

ANSWER_SETS = ("answer_pairs", "compound_pairs", "mtrag_appropriateness")
CONTEXT_SETS = ("context_pairs", "rgb_context", "rageval_context")


class Vectors:
    """Unit vectors of the starter embedder, each text embedded once."""

    def __init__(self) -> None:
        from offline_eval.retrieval.dense import starter_embedder_path
        from offline_eval.runtime.embedder import SentenceTransformerEmbedder

        self.model = SentenceTransformerEmbedder(str(starter_embedder_path()))
        self.known: dict[str, np.ndarray] = {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self.known]
        if new:
            self.known.update(zip(new, self.model.encode_texts(new)))
        return np.stack([self.known[t] for t in texts])


def sentences(text: str) -> list[str]:
    return split_sentences(str(text), "en") or [str(text) or " "]


def context_coverage(embed: Vectors, s: Sample) -> float:
    """How much of what the contexts say on the question the answer carries, weighted above the contexts'
    mean (the module's docstring); 1 (not read) without contexts."""
    context = [x for c in s.contexts or [] for x in sentences(c)]
    if not context:
        return 1.0
    vectors = embed(context)
    weight = vectors @ embed([str(s.question)])[0]
    weight = np.maximum(weight - weight.mean(), 0) + 1e-9
    covered = (vectors @ embed(sentences(s.answer or " ")).T).max(1)
    return max(float((weight * covered).sum() / weight.sum()), 0.0)


def judge_alone(score: dict[str, Any]) -> float:
    """answer_relevancy's reading by the judge (and a joined question's balance) without the coverage."""
    meta = score["metadata"]
    return min(p["probability"] for p in meta["parts"]) * meta.get("balance", 1.0)


def answered(score: dict[str, Any], addresses: float) -> float:
    """answer_relevancy's value with ``addresses`` for its reading of an answer that addresses the
    question, its reading of a declining answer as the metric has it."""
    meta = score["metadata"]
    return max(addresses, meta["declines"] * (1.0 - meta["held"])) if "held" in meta else addresses


def coverage(score: dict[str, Any]) -> float | None:
    return score["metadata"].get("coverage")


def completeness(score: dict[str, Any], f: Callable[[float], float]) -> float:
    """The judge's reading times ``f`` of the metric's coverage (1 where it is not read)."""
    c = coverage(score)
    return answered(score, judge_alone(score) * (1.0 if c is None else f(c)))


def on_question(embed: Vectors, s: Sample, texts: list[str] | None = None) -> np.ndarray:
    """The cosine between the question and each sentence of the contexts (or of ``texts``)."""
    texts = s.contexts if texts is None else texts
    return embed([x for c in texts for x in sentences(c)]) @ embed([str(s.question)])[0]


def mean_over_best(cosines: np.ndarray) -> float:
    return max(float(cosines.mean()), 0.0) / max(float(cosines.max()), 1e-6)


def anchored_share(embed: Vectors, s: Sample, anchor: str, texts: list[str] | None = None) -> float:
    """The mean over sentences of how far each one's cosine with the question lies above ``anchor``'s, over
    the room left up to 1, at least 0 (context_relevance's ``share_on_question`` with the recipe)."""
    floor = float(embed([anchor])[0] @ embed([str(s.question)])[0])
    return float(np.clip((on_question(embed, s, texts) - floor) / max(1.0 - floor, 1e-6), 0.0, 1.0).mean())


def _windows(score: dict[str, Any]) -> list[dict[str, Any]]:
    return score["metadata"]["windows"]


RECIPE, ABSURD = UNRELATED_PASSAGE["en"], ABSURD_STATEMENT["en"]
Reading = Callable[[Vectors, Sample, dict[str, Any]], float]
READINGS: dict[str, dict[str, Reading]] = {
    "answers": {
        "the judge alone (before)": lambda e, s, v: answered(v, judge_alone(v)),
        "x coverage of the contexts (above their mean)": lambda e, s, v: answered(
            v, judge_alone(v) * context_coverage(e, s)),
        "x the coverage anchored at the lean": lambda e, s, v: completeness(v, lambda c: c),
        "x its square root": lambda e, s, v: completeness(v, lambda c: c ** 0.5),
        "x min(1, coverage / 0.4)": lambda e, s, v: completeness(v, lambda c: min(1.0, c / 0.4)),
        "x min(1, coverage / 0.5) (adopted)": lambda e, s, v: completeness(v, lambda c: min(1.0, c / 0.5)),
        "x min(1, coverage / 0.6)": lambda e, s, v: completeness(v, lambda c: min(1.0, c / 0.6)),
    },
    "contexts": {
        "x mean cosine": lambda e, s, v: v["value"] * max(float(on_question(e, s).mean()), 0.0),
        "x mean / best cosine": lambda e, s, v: v["value"] * mean_over_best(on_question(e, s)),
        "x share on the question (adopted, its geometric mean)": lambda e, s, v: v["value"] * anchored_share(
            e, s, RECIPE),
        "x the share anchored at the absurd statement": lambda e, s, v: v["value"] * anchored_share(e, s, ABSURD),
        "x the share's square root": lambda e, s, v: v["value"] * anchored_share(e, s, RECIPE) ** 0.5,
        "each window's P x its own share": lambda e, s, v: float(np.mean([
            w["probability"] * anchored_share(e, s, RECIPE, [w["passage"]]) for w in _windows(v)])),
        "the share alone": lambda e, s, v: anchored_share(e, s, RECIPE),
        "best window's P x mean / best cosine": lambda e, s, v: max(w["probability"] for w in _windows(v))
        * mean_over_best(on_question(e, s)),
        "x mean / best over windows": lambda e, s, v: v["value"] * mean_over_best(np.array([
            float(on_question(e, s, [w["passage"]]).mean()) for w in _windows(v)])),
    },
}


def run_scores(runs_dir: Path, set_name: str, config: str, tag: str) -> dict[str, dict[str, Any]]:
    path = runs_dir / f"{set_name}-{config}{tag}" / "results.jsonl"
    if not path.is_file():
        raise SystemExit(f"embedder_readings.py: no agreement run at {path.parent} (run the agreement.py command "
                         "at the top of this file first)")
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            out[row["id"]] = next(iter(row["scores"].values()))
    return out


def figures(rows, scores, set_name: str) -> tuple[str, str]:
    group, grade = bench.PAIRS[set_name]
    m = bench.measure(rows, scores)
    p = bench.pairwise(rows, scores, group, grade, bench.KINDS.get(set_name))
    kinds = "; ".join(f"{k} {v['accuracy']:.3f}" for k, v in p.get("by_kind", {}).items())
    return bench._fmt(m.get("auc")), bench._fmt_pairs(p) + (f"; {kinds}" if kinds else "")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs-dir", type=Path, default=bench.BENCH_DIR / "agreement-runs")
    p.add_argument("--tag", default="", help="the agreement runs' --tag")
    p.add_argument("--limit", action="append", default=[], metavar="SET=N",
                   help="as the agreement runs were drawn (default: each set's own, mtrag_appropriateness=0)")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "embedder_readings")
    p.add_argument("--data", type=Path, help="folder of the shared labelled sets (default: ../shared/data)")
    args = p.parse_args()
    if not bench.use_shared_data("embedder_readings.py", args.data):
        return 0
    limits = {"mtrag_appropriateness": None, **{k: (int(v) or None) for k, v in (x.split("=") for x in args.limit)}}
    load = os.getloadavg()[0]
    embed = Vectors()
    cells, results = [], []
    for kind, names in (("answers", ANSWER_SETS), ("contexts", CONTEXT_SETS)):
        for set_name in names:
            build, _, _, limit, _ = {**bench.SETS, **bench.RELEVANCE_SETS}[set_name]
            rows = build(limits.get(set_name, limit), args.seed)
            default = run_scores(args.runs_dir, set_name, "default", args.tag)
            if kind == "contexts":  # the judge's reading alone, as when these readings were measured
                default = {k: {**v, "value": v.get("metadata", {}).get("mean_probability", v.get("value"))}
                           if v.get("value") is not None else v for k, v in default.items()}
            readings = {"plain prompt": run_scores(args.runs_dir, set_name, "plain", args.tag), "default": default}
            for name, read in READINGS[kind].items():
                readings[("judge " if kind == "answers" and name.startswith("x ") else "default "
                          if name.startswith("x ") else "") + name] = {
                    s.id: {"value": read(embed, s, default[s.id])}
                    for s, _ in rows if default.get(s.id, {}).get("value") is not None}
            for name, scores in readings.items():
                auc, pairs = figures(rows, scores, set_name)
                cells.append([set_name, name, auc, pairs])
                results.append({"set": set_name, "reading": name, "auc": auc, "pairwise": pairs})
                print(" | ".join(cells[-1]), flush=True)
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.platform()}, {os.cpu_count()} CPUs", "load_average_at_start": load,
            "command": "python benchmarks/embedder_readings.py " + " ".join(sys.argv[1:]), "code": bench.code_version()}
    notes = [f"code: {meta['code']}; scores: the agreement runs in {args.runs_dir} (tag '{args.tag}'); embedder: "
             "the starter all-MiniLM-L6-v2", "pairwise: by kind, the share where the better item scores higher "
             "(a tie counting half)", "contexts: 'default' is the judge's reading alone (the windows' mean P, "
             "`mean_probability`), context_relevance's default before the share on the question joined it",
             "answers: 'judge' is answer_relevancy's reading by the judge alone (and a joined question's balance), "
             "its default before the coverage of the contexts joined it; 'default' is the run's score"]
    write_results(args.out, "The relevance verdicts times a reading of the embedder", meta, notes,
                  ["set", "reading", "ROC AUC", "pairwise"], cells, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
