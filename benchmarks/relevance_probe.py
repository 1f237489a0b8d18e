"""Can the judge itself tell a complete answer from a cut one, or a refusal from an answer? (issue #58)

    python benchmarks/relevance_probe.py --threads 1 --out benchmarks/results/relevance_probe

answer_relevancy reads two things of an answer besides whether it addresses the question: whether it
leaves out what the question asks for (the Ragas paper's incomplete answers) and whether it declines
(an honest refusal is relevant where the passages do not hold the answer). Both need the judge to
answer a question about the answer. This asks the bench judge, as option verdicts through the engine
(and its cache), several wordings of each:

- completeness: of ``answer_pairs``' questions (benchmarks/agreement.py, ``--limit`` per source), the
  share where the complete answer gets a higher P(Yes) than the same answer cut to its first sentence,
  each P corrected for the wording's lean (its P(Yes) for an empty answer, weight 0.5, as the metric does);
- refusals: MT-RAG's rated answers that open by declining ("The documents do not ...", "I do not have
  ...", "Sorry ...") and ``answer_pairs``' refusals, against MT-RAG's other answers and ``answer_pairs``'
  complete and cut answers: the ROC AUC of P(Yes) for "it declines" (1.0: every refusal above every
  answer; below 0.5: the judge says Yes more to the answers). The two-option reading asks which of two
  descriptions is true, in both orders, and averages the option naming the refusal.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import agreement as bench  # noqa: E402
from _bench_profile import bench_manifest  # noqa: E402
from _results import write_results  # noqa: E402
from offline_eval.data.schema import Sample  # noqa: E402
from offline_eval.engine.requests import ScoreOptions, messages  # noqa: E402
from offline_eval.judging.verdicts import EMPTY_STATEMENT, YES_NO, corrected  # noqa: E402
from offline_eval.metrics.base import Metric, Score  # noqa: E402
from offline_eval.people.agreement import roc_auc  # noqa: E402
from offline_eval.prompts.ragas import ANSWER_DECLINES_OPTION, ANSWER_GIVES_OPTION  # noqa: E402
from offline_eval.prompts.ragas import YES_NO as YES_NO_SYSTEM  # noqa: E402

SYSTEM = YES_NO_SYSTEM["en"]
COMPLETENESS = {
    "addresses the question (the metric's)": None,
    "gives all the information the question asks for": "Does the answer give all the information the question asks for?",
    "is a complete answer": "Is the answer a complete answer to the question?",
    "gives specific information": "Does the answer give specific information that answers the question?",
    "leaves out part of the question (No is complete)": "Does the answer leave out part of what the question asks?",
}
PASSAGES_WORDING = "Does the answer give all the information in the passages that the question asks for?"
PASSAGE_WORDS = 300
DECLINES = {
    "not available or cannot be given (the metric's)": None,
    "refuses or does not know": "Does the answer refuse to answer or say that it does not know?",
    "admits it cannot answer": "Does the answer admit that it cannot answer the question?",
    "says the information is missing or unknown": "Does the answer say that the information is missing or unknown?",
    "says it has no information instead of answering": ("Instead of answering, does the answer say that it has no "
                                                         "information?"),
}
GIVES = "It gives information that answers the question."
DECLINES_OPTION = "It says it does not have the information asked for."
TWO_OPTIONS_SYSTEM = "You are a meticulous evaluator. Answer with a single letter: A or B."
REFUSAL = re.compile(r"^(The documents? (do|does) not|I do not have|I don't have|Sorry|I'm sorry|There is no "
                     r"information|Unfortunately)", re.I)


def yes_no(question: str, answer: str, wording: str) -> Any:
    return messages(("system", SYSTEM), ("user", f"Question: {question}\nAnswer: {answer}\n\n{wording} Answer Yes or No."))


def two_options(question: str, answer: str, gives_first: bool) -> Any:
    first, second = (GIVES, DECLINES_OPTION) if gives_first else (DECLINES_OPTION, GIVES)
    return messages(("system", TWO_OPTIONS_SYSTEM), ("user", f"Question: {question}\nAnswer: {answer}\n\n"
                                                             f"Which is true of the answer?\nA. {first}\nB. {second}\n"
                                                             "Answer A or B."))


class Readings(Metric):
    """Every wording's P(Yes) for a sample's answer (completeness: also for an empty answer, its lean), in its
    metadata; ``kind``: "completeness" or "refusals"."""

    name = "relevance_readings"
    requires = ("question", "answer")
    roles = frozenset({"judge"})

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def score(self, sample, settings):
        q, a = str(sample.question), sample.answer
        if self.kind == "completeness":
            passages = " ".join(" ".join(sample.contexts).split()[:PASSAGE_WORDS])
            asked = {}
            for tag, text in (("", a), (" lean", EMPTY_STATEMENT)):
                for name, wording in COMPLETENESS.items():
                    asked[name + tag] = (ANSWER_GIVES_OPTION.render("en", question=q, answer=text) if wording is None
                                         else yes_no(q, text, wording))
                asked["passages: " + PASSAGES_WORDING + tag] = messages(("system", SYSTEM), ("user", (
                    f"Passages:\n{passages}\n\nQuestion: {q}\nAnswer: {text}\n\n{PASSAGES_WORDING} "
                    "Answer Yes or No.")))
            probs = yield [ScoreOptions(prompt=p, options=YES_NO) for p in asked.values()]
            return Score(0.0, metadata={k: float(p["Yes"]) for k, p in zip(asked, probs)})
        asked = {name: ANSWER_DECLINES_OPTION.render("en", question=q, answer=a) if wording is None
                 else yes_no(q, a, wording) for name, wording in DECLINES.items()}
        probs = yield ([ScoreOptions(prompt=p, options=YES_NO) for p in asked.values()]
                       + [ScoreOptions(prompt=two_options(q, a, first), options=("A", "B")) for first in (True, False)])
        out = {k: float(p["Yes"]) for k, p in zip(asked, probs)}
        out["two options, both orders"] = (float(probs[-2]["B"]) + float(probs[-1]["A"])) / 2
        return Score(0.0, metadata=out)


def _read(samples: list[Sample], kind: str, args, cache) -> dict[str, dict[str, float]]:
    from offline_eval.people.agreement.scoring import build_setup, score_samples
    from offline_eval.run.model_choice import ModelChoice

    setup = build_setup(Readings(kind), ModelChoice(profile=str(bench_manifest(args.judge)), batch_size=16),
                        verdicts="options", max_tokens=256)
    scores = score_samples(samples, setup, args.runs_dir / kind, cache=cache, overwrite=True)
    return {k: v.get("metadata", {}) for k, v in scores.items()}


def completeness_rows(args, cache) -> list[dict[str, Any]]:
    pairs = [s for s, _ in bench._answer_pairs(args.limit, args.seed) if not s.id.endswith("-declined")]
    got = _read(pairs, "completeness", args, cache)
    names = [*COMPLETENESS, "passages: " + PASSAGES_WORDING]
    out = []
    for name in names:
        wins = []
        for s in pairs:
            if s.id.endswith("-complete"):
                cut = s.id.removesuffix("-complete") + "-first"
                c, f = (corrected(got[i][name], got[i][name + " lean"], 0.5) for i in (s.id, cut))
                wins.append(1.0 if c > f else 0.5 if c == f else 0.0)
        out.append({"reading": "completeness", "wording": name, "n": len(wins),
                    "complete_above_first": round(sum(wins) / len(wins), 3)})
    return out


def refusal_rows(args, cache) -> list[dict[str, Any]]:
    rated = [s for s, _ in bench._mtrag(None, args.seed)]
    refusals = [s for s in rated if REFUSAL.match(s.answer.strip())]
    others = [s for s in rated if not REFUSAL.match(s.answer.strip()) and "not" not in s.answer[:80]]
    random.Random(0).shuffle(others)
    built = [s for s, _ in bench._answer_pairs(args.limit // 2, args.seed)]
    samples = ([Sample(id=f"r{i}", question=str(s.question), answer=s.answer) for i, s in enumerate(refusals)]
               + [Sample(id=f"o{i}", question=str(s.question), answer=s.answer) for i, s in enumerate(others[:30])]
               + [Sample(id=f"p{i}-{s.id.rsplit('-', 1)[1]}", question=str(s.question), answer=s.answer)
                  for i, s in enumerate(built)])
    got = _read(samples, "refusals", args, cache)
    declining = [s.id.startswith("r") or s.id.endswith("declined") for s in samples]
    out = []
    for name in [*DECLINES, "two options, both orders"]:
        values = [got[s.id][name] for s in samples]
        pos = sorted(v for v, d in zip(values, declining) if d)
        neg = sorted(v for v, d in zip(values, declining) if not d)
        out.append({"reading": "refusal", "wording": name, "n": f"{len(pos)} refusals, {len(neg)} answers",
                    "auc": round(roc_auc(values, [float(d) for d in declining]), 3),
                    "median_refusal": round(pos[len(pos) // 2], 3), "median_answer": round(neg[len(neg) // 2], 3)})
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--judge", type=Path, default=bench.JUDGE)
    p.add_argument("--data", type=Path, help="folder of the shared labelled sets (default: ../shared/data)")
    p.add_argument("--limit", type=int, default=40, help="answer_pairs' questions of each source")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--cache", type=Path, default=bench.BENCH_DIR / "agreement-cache.sqlite")
    p.add_argument("--runs-dir", type=Path, default=bench.BENCH_DIR / "relevance-probe-runs")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "relevance_probe")
    args = p.parse_args()
    load = os.getloadavg()[0]
    if not bench.use_shared_data("relevance_probe", args.data, args.judge):
        return 2
    import torch

    from offline_eval.engine.cache import ResultCache

    torch.set_num_threads(args.threads)
    cache = ResultCache(args.cache)
    try:
        rows = completeness_rows(args, cache) + refusal_rows(args, cache)
    finally:
        cache.close()
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.platform()}, {os.cpu_count()} CPUs", "load_average_at_start": load,
            "command": "python benchmarks/relevance_probe.py " + " ".join(sys.argv[1:]), "code": bench.code_version()}
    notes = [f"code: {meta['code']}; judge: {args.judge.name} (bf16, option verdicts, torch threads {args.threads})",
             "completeness: the share of answer_pairs' questions where the complete answer's lean-corrected P(Yes) "
             "is above its first sentence's (for 'leaves out', below: Yes is the incomplete reading); refusal: "
             "ROC AUC of P(it declines), refusals against answers"]
    for r in rows:
        if r["wording"].startswith("leaves out"):
            r["complete_above_first"] = round(1 - r["complete_above_first"], 3)
    header = ["reading", "wording", "n", "complete above its first sentence / refusal AUC", "medians (refusal / answer)"]
    cells = [[r["reading"], r["wording"], r["n"], r.get("complete_above_first", r.get("auc")),
              f"{r['median_refusal']:.3f} / {r['median_answer']:.3f}" if "auc" in r else ""] for r in rows]
    write_results(args.out, "Can the judge tell a cut answer or a refusal from an answer?", meta, notes, header,
                  cells, rows)
    print(args.out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
