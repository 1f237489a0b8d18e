"""Faithfulness vs human attribution labels on BEGIN (WoW dev split), on local CPU judges.

    python benchmarks/agreement_begin.py            # reproduces benchmarks/results/agreement_begin.{json,md}

BEGIN (Dziri et al., 2022) labels knowledge-grounded dialogue responses "Fully attributable" (positive),
"Not fully attributable" (negative) or "Generic" (dropped). Sample: question = message,
answer = response, contexts = [knowledge]. A stratified random subsample (fixed seed, the same number
of positives and negatives) is scored by

  claims:   LLM claim extraction (`faithfulness`) | sentence splitting (`faithfulness_sentences`)
  verdicts: judge JSON verdicts (`--verdicts generate`) | judge option probabilities (`options`)

on each judge, and agreement with the labels is measured by offline_eval.agreement (balanced accuracy at
0.5, ROC AUC, Spearman, bootstrap 95% intervals). With option verdicts the continuous mean P(Yes) over
claims is also reported. Unscored samples are counted by reason and excluded.

Results are written after every configuration, so a killed run keeps what it finished; the model
answers are cached (SQLite) so rerunning the same command resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from offline_eval.agreement.scoring import agreement_report, build_setup, read_labels, score_samples  # noqa: E402
from offline_eval.data.readers import read_dataset  # noqa: E402
from offline_eval.data.schema import Sample  # noqa: E402
from offline_eval.engine.cache import ResultCache  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "begin_dev_wow.tsv"
BENCH_DIR = Path(os.environ.get("OFFLINE_EVAL_BENCH", "~/.cache/offline-eval-bench")).expanduser()
JUDGES = {
    # name -> (profile, judge folder or None for the profile's own)
    "qwen2.5-coder-0.5b": ("starter", str(BENCH_DIR / "qwen2.5-coder-0.5b-instruct")),
    "smollm2-135m (starter)": ("starter", None),
}
CONFIGS = [  # (claims, verdicts), cheapest first
    ("sentences", "options"), ("llm", "options"), ("sentences", "generate"), ("llm", "generate"),
]
METRIC = {"llm": "faithfulness", "sentences": "faithfulness_sentences"}
POSITIVE, NEGATIVE, GENERIC = "Fully attributable", "Not fully attributable", "Generic"


def subsample(samples: list[Sample], n_per_class: int, seed: int, first: int | None = None) -> list[Sample]:
    """``n_per_class`` positives and as many negatives drawn at random (seeded), in file order.

    ``first``: keep only the first ``first`` drawn of each class -- a random subset nested in the
    full draw (the same seed), for the configurations too slow to run on every sampled row.
    """
    rng = np.random.default_rng(seed)
    chosen: list[Sample] = []
    for label in (POSITIVE, NEGATIVE):
        pool = [s for s in samples if s.extra.get("begin_label") == label]
        take = min(n_per_class, len(pool))
        drawn = [pool[i] for i in rng.choice(len(pool), size=take, replace=False)]
        chosen += drawn[:first] if first is not None else drawn
    return sorted(chosen, key=lambda s: s.row)


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def claims_from_question(rows: list[tuple[Sample, float]], scores: dict[str, dict[str, Any]]) -> int:
    """Scored samples with a "claim" copied from the user's message and absent from the answer."""
    count = 0
    for sample, _ in rows:
        score = scores.get(sample.id, {})
        if score.get("value") is None:
            continue
        q, a = _norm(sample.question or ""), _norm(sample.answer or "")
        claims = [_norm(c["claim"]) for c in score.get("metadata", {}).get("claims", [])]
        count += any(c and (c in q or q in c) and c not in a for c in claims)
    return count


def _notes(payload: dict[str, Any]) -> list[str]:
    notes = ["wall s: seconds the configuration took when its model work was computed (kept in the run "
             "folder's timing.json; a rerun answers from the SQLite cache), on 2 CPU cores shared with other "
             "jobs -- a rough cost, not a speed benchmark."]
    seen = set()
    for r in payload["results"]:
        leaked = r.get("samples_with_a_claim_from_the_question")
        key = (r["judge"], r["claims"], r["verdicts"], r.get("subset"))
        if leaked is None or key in seen:
            continue
        seen.add(key)
        notes.append(f"{r['judge']}, llm claims, {r['verdicts']} verdicts: {leaked} of {r['report']['n_scored']} "
                     "scored samples have a \"claim\" copied from the user's message (not in the answer).")
    seen = set()
    for r in payload["results"]:
        key = (r["judge"], r["claims"], r["verdicts"])
        if r.get("unscored_explanations") and key not in seen:
            seen.add(key)
            parts = "; ".join(f"{n} x {text}" for text, n in r["unscored_explanations"].items())
            notes.append(f"unscored, {r['judge']}, {r['claims']} claims, {r['verdicts']} verdicts: {parts}")
    return notes


def _compute_wall(run_dir: Path, wall: float) -> float:
    """Seconds the configuration took when its model work was computed.

    A rerun that answers from the run folder or the cache keeps the first measurement, kept in the
    folder's ``timing.json`` with the run's fingerprint; a run whose settings changed (another
    fingerprint: the run started over) replaces it."""
    path = run_dir / "timing.json"
    try:
        fingerprint = json.loads((run_dir / "run.json").read_text())["fingerprint"]
    except (OSError, ValueError, KeyError):
        fingerprint = None
    try:
        recorded = json.loads(path.read_text())
        if recorded.get("fingerprint") == fingerprint and float(recorded["wall_s"]) >= wall:
            return float(recorded["wall_s"])
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    path.write_text(json.dumps({"wall_s": round(wall, 1), "fingerprint": fingerprint}))
    return wall


def _stat(stat: dict[str, Any]) -> str:
    if not stat or stat.get("value") is None:
        return "-"
    lo, hi = stat["ci95"]
    return f"{stat['value']:.3f} [{lo:.3f}, {hi:.3f}]"


def write_outputs(out: Path, payload: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    meta = payload["meta"]
    lines = [
        "# Faithfulness vs human labels: BEGIN (WoW dev), local CPU judges",
        "",
        f"- date: {meta['date']}",
        f"- machine: {meta['machine']}",
        f"- command: `{meta['command']}`",
        f"- data: {meta['data']} ({meta['n_rows']} rows; labels {meta['label_counts']})",
        f"- sample: n = {meta['n']} ({meta['n_per_class']} \"{POSITIVE}\" + {meta['n_per_class']} "
        f"\"{NEGATIVE}\", stratified random, seed {meta['seed']}); \"{GENERIC}\" dropped. "
        f"Only sentences/options ran on all {meta['n']}; every configuration ran on the nested random subset of "
        f"n = {meta['n_costly']} ({meta['n_per_class_costly']} + {meta['n_per_class_costly']}, the first drawn of each "
        f"class), so compare rows within the n = {meta['n_costly']} block",
        f"- settings: max_tokens {meta['max_tokens']}, judge batch size {meta['batch_size']}, torch threads {meta.get('threads')}, greedy decoding, "
        f"support threshold 0.5; balanced accuracy at metric >= 0.5; bootstrap 95% intervals "
        f"({meta['resamples']} stratified resamples, seed {meta['bootstrap_seed']})",
        "- claims: `llm` = the judge's claim extraction (`faithfulness`); `sentences` = pysbd sentences "
        "(`faithfulness_sentences`, offline_eval/metrics/ragas.py)",
        "- verdicts: `generate` = JSON verdicts; `options` = P(Yes) vs P(No); rows marked *mean P(Yes)* "
        "use the continuous mean P(Yes) over claims instead of the supported share",
        "",
        "| judge | claims | verdicts | score | scored / n | excluded | balanced acc. | ROC AUC | Spearman "
        "| mean score + / − | claims / sample | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ordered = sorted(payload["results"], key=lambda r: r.get("subset") != "costly")
    for r in ordered:
        rep = r["report"]
        excluded = ", ".join(f"{k.removeprefix('unscored:')} {v}" for k, v in rep["excluded"].items()) or "-"
        mp, mn = rep.get("mean_score_positive"), rep.get("mean_score_negative")
        means = f"{mp:.3f} / {mn:.3f}" if mp is not None and mn is not None else "-"
        value = "mean P(Yes)" if rep["value"] == "mean_probability" else "faithfulness"
        lines.append(f"| {r['judge']} | {r['claims']} | {r['verdicts']} | {value} | {rep['n_scored']} / "
                     f"{rep['n_labelled']} | {excluded} | {_stat(rep['balanced_accuracy'])} | "
                     f"{_stat(rep['roc_auc'])} | {_stat(rep['spearman'])} | {means} | "
                     f"{r.get('mean_claims_per_scored_sample') or '-'} | {r['wall_s']:.0f} |")
    if payload.get("not_run"):
        lines += ["", "Not run (time budget or missing model): " + "; ".join(payload["not_run"])]
    lines += ["", "Reference (SPEC §5): HHEM-2.1-Open balanced accuracy on RAGTruth 64.4 (summaries) / 74.3 (QA); "
              "Ragas faithfulness with gpt-3.5 agrees with WikiEval pairwise preferences 0.95 "
              "(a different protocol and dataset: not directly comparable).", ""]
    if payload.get("notes"):
        lines += ["## Notes", ""] + [f"- {n}" for n in payload["notes"]] + [""]
    out.with_suffix(".md").write_text("\n".join(lines), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--n-per-class", type=int, default=40)
    p.add_argument("--n-per-class-costly", type=int, default=16,
                   help="per class, for every configuration but sentences:options (a nested random subset)")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--judges", default=",".join(JUDGES), help="comma-separated names of " + ", ".join(JUDGES))
    p.add_argument("--configs", default=",".join(f"{c}:{v}" for c, v in CONFIGS),
                   help="comma-separated claims:verdicts, run in this order")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (1 avoids oversubscription thrash on a CPU shared with other jobs)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--budget-s", type=float, default=40 * 60,
                   help="skip configurations started after this many seconds (results so far are kept)")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "agreement_begin")
    p.add_argument("--runs-dir", type=Path, default=BENCH_DIR / "agreement-begin-runs")
    p.add_argument("--cache-dir", type=Path, default=BENCH_DIR,
                   help="one SQLite cache of model answers per judge here (agreement-begin-cache-<judge>.sqlite)")
    args = p.parse_args(argv)

    if not args.data.exists():
        print(f"agreement_begin: {args.data} not found", file=sys.stderr)
        return 2
    samples = read_dataset(args.data, {"question": "message", "contexts": "knowledge"})
    labels = Counter(s.extra.get("begin_label") for s in samples)
    chosen = subsample(samples, args.n_per_class, args.seed)
    labelled, excluded = read_labels(chosen, "begin_label", positive=[POSITIVE], drop=[GENERIC])
    costly_ids = {s.id for s in subsample(samples, args.n_per_class, args.seed, first=args.n_per_class_costly)}
    costly = [(s, y) for s, y in labelled if s.id in costly_ids]

    import torch
    torch.set_num_threads(args.threads)
    meta = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.platform()}, {platform.processor() or platform.machine()}, "
                   f"{os.cpu_count()} CPUs visible, torch {torch.__version__} ({torch.get_num_threads()} threads), "
                   f"python {platform.python_version()}; CPUs shared with other jobs",
        "command": "python benchmarks/agreement_begin.py" + (" " + shlex.join(argv if argv is not None else sys.argv[1:])
                                                             if (argv if argv is not None else sys.argv[1:]) else ""),
        "data": str(args.data.name), "n_rows": len(samples), "label_counts": dict(labels),
        "n": len(labelled), "n_per_class": args.n_per_class, "n_costly": len(costly),
        "n_per_class_costly": args.n_per_class_costly, "costly_rows": sorted(s.row for s, _ in costly), "seed": args.seed, "max_tokens": args.max_tokens,
        "batch_size": args.batch_size, "threads": args.threads, "resamples": 2000, "bootstrap_seed": 20240531,
        "sample_rows": [s.row for s in chosen],
    }
    payload: dict[str, Any] = {"meta": meta, "results": [], "not_run": [], "notes": []}
    configs = [tuple(c.split(":")) for c in args.configs.split(",") if c]
    started = time.monotonic()
    caches: dict[str, ResultCache] = {}
    try:
        judges = [j for j in args.judges.split(",") if j]
        models: dict[str, Any] = {}
        for judge_name in judges:
            folder = JUDGES[judge_name][1]
            if folder and not Path(folder, "config.json").exists():
                payload["not_run"].append(f"{judge_name}: no model at {folder} (run scripts/bench-judge)")
        judges = [j for j in judges if not (JUDGES[j][1] and not Path(JUDGES[j][1], "config.json").exists())]
        for claims, verdicts in configs:  # configuration-major: every judge gets the cheap ones first
            for judge_name in judges:
                profile, folder = JUDGES[judge_name]
                label = f"{judge_name} {claims}/{verdicts}"
                if time.monotonic() - started > args.budget_s:
                    payload["not_run"].append(f"{label} (over the {args.budget_s:.0f} s budget)")
                    continue
                setup = build_setup(METRIC[claims], profile=profile, judge=folder, verdicts=verdicts,
                                    max_tokens=args.max_tokens, batch_size=args.batch_size,
                                    models=models.get(judge_name))
                models[judge_name] = setup.models
                slug = f"{judge_name.split()[0]}-{claims}-{verdicts}"
                if judge_name not in caches:
                    caches[judge_name] = ResultCache(args.cache_dir / f"agreement-begin-cache-{judge_name.split()[0]}.sqlite")
                rows = labelled if (claims, verdicts) == ("sentences", "options") else costly
                print(f"[{time.monotonic() - started:6.0f}s] {label}: scoring {len(rows)} samples",
                      file=sys.stderr, flush=True)
                t0 = time.monotonic()
                scores = score_samples([s for s, _ in rows], setup, args.runs_dir / slug, cache=caches[judge_name])
                wall = _compute_wall(args.runs_dir / slug, time.monotonic() - t0)
                value_keys = [None] + (["mean_probability"] if verdicts == "options" else [])
                subsets = [("all", rows)] + ([("costly", costly)] if rows is not costly else [])
                for subset, subset_rows in subsets:
                    for key in value_keys:
                        report = agreement_report(subset_rows, scores, value_key=key, excluded=excluded)
                        payload["results"].append({"judge": judge_name, "claims": claims, "verdicts": verdicts,
                                                   "metric": setup.metric.name, "setup": setup.info,
                                                   "subset": "costly" if subset_rows is costly else "all",
                                                   "wall_s": round(wall, 1), "report": report})
                n_claims = [len(s.get("metadata", {}).get("claims", [])) for s in scores.values()
                            if s.get("value") is not None]
                leaked = claims_from_question(rows, scores) if claims == "llm" else None
                why = Counter(re.sub(r"[\d\[\]]+", "N", str(sc.get("explanation", "")).split(";")[0])
                              for sc in scores.values() if sc.get("value") is None)
                for r in payload["results"][-len(value_keys) * len(subsets):]:
                    r["samples_with_a_claim_from_the_question"] = leaked
                    r["unscored_explanations"] = dict(why.most_common())
                    r["mean_claims_per_scored_sample"] = round(float(np.mean(n_claims)), 3) if n_claims else None
                print(f"[{time.monotonic() - started:6.0f}s] {label}: done in {wall:.0f}s; "
                      f"AUC {payload['results'][-len(value_keys) * len(subsets)]['report']['roc_auc']['value']}",
                      file=sys.stderr, flush=True)
                meta["elapsed_s"] = round(time.monotonic() - started, 1)
                write_outputs(args.out, payload)
    finally:
        for c in caches.values():
            c.close()
    meta["elapsed_s"] = round(time.monotonic() - started, 1)
    payload["notes"] = _notes(payload)
    write_outputs(args.out, payload)
    print(args.out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
