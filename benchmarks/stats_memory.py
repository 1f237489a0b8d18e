#!/usr/bin/env python
"""Peak memory of the statistics at 100,000 rows (issue #56): `compare` and `agreement` on synthetic scores.

Every bootstrap and permutation test draws its resamples in blocks (offline_eval/stats.py), so its
memory should not grow with rows × resamples: 2,000 resamples of 100,000 rows drawn at once would
take 1.6 GB of indices and as much again gathered. Each case runs in a fresh process, whose
``ru_maxrss`` is its peak resident memory:

  compare    two run folders of N rows and two metrics each (results.jsonl only, so each run's summary
             and its bootstrap intervals are computed as it is read), compared as `offline-eval compare`
             compares them (paired bootstrap per metric), and the sign-flip randomisation test of the
             retriever benchmark on the same pairs
  agreement  the `agreement` command's statistics: pointwise (balanced accuracy, ROC AUC and Spearman,
             each with its stratified bootstrap) and pairwise (share of pairs won, bootstrap over pairs)

    python benchmarks/stats_memory.py                  # 100,000 rows, 2,000 resamples (several minutes)
    python benchmarks/stats_memory.py --rows 10000

Target: peak memory under 1 GiB at 100,000 rows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _results import run_child, write_results  # noqa: E402  (benchmarks/ is the script's folder)

CASES = ("compare", "agreement")
METRICS = ("faithfulness", "answer_relevancy")


def write_run(folder: Path, rows: int, shift: float, seed: int) -> None:
    """A run folder of ``rows`` result rows (no summary.json: the reader computes it), written a line at
    a time."""
    import numpy as np

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    with open(folder / "results.jsonl", "w", encoding="utf-8") as out:
        for start in range(0, rows, 10_000):
            block = np.clip(rng.beta(5, 2, size=(min(10_000, rows - start), len(METRICS))) + shift, 0, 1)
            for i, values in enumerate(block, start=start):
                out.write(json.dumps({"id": f"s{i}", "row": i, "sample": {"question": f"question {i}"},
                                      "scores": {m: {"value": float(v)} for m, v in zip(METRICS, values)}}) + "\n")


def child(case: str, rows: int, resamples: int, workdir: Path) -> dict:
    import numpy as np

    started = time.perf_counter()
    if case == "compare":
        from offline_eval.report.compare import compare_runs
        from offline_eval.stats import randomization_test

        comparison = compare_runs(workdir / "a", workdir / "b")
        a = np.random.default_rng(1).random(rows)
        p = randomization_test(a, a + np.random.default_rng(2).normal(0.001, 0.1, rows), resamples=resamples)
        detail = {m.name: {"n": m.n_pairs, "delta": m.delta, "ci95": m.ci95} for m in comparison.metrics}
        detail["randomization_p"] = p
    else:
        from offline_eval.people.agreement import agreement_pairwise, agreement_pointwise

        rng = np.random.default_rng(3)
        labels = (rng.random(rows) < 0.6).astype(float)
        scores = np.clip(labels * 0.3 + rng.random(rows) * 0.7, 0, 1)
        point = agreement_pointwise(scores, labels, resamples=resamples)
        pairs = np.column_stack([scores, rng.random(rows)])
        pair = agreement_pairwise(pairs, resamples=resamples)
        detail = {"roc_auc": point.roc_auc.to_dict(), "spearman": point.spearman.to_dict(),
                  "pairwise": pair.accuracy.to_dict()}
    return {"case": case, "rows": rows, "resamples": resamples, "wall_s": round(time.perf_counter() - started, 1),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), "detail": detail}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "stats_memory")
    p.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    p.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.rows, args.resamples, args.workdir)))
        return 0

    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, python {platform.python_version()}",
            "load_average_at_start": os.getloadavg()[0], "command": "python " + " ".join(sys.argv)}
    results = []
    with tempfile.TemporaryDirectory(prefix="stats-memory-") as tmp:
        write_run(Path(tmp) / "a", args.rows, 0.0, 1)
        write_run(Path(tmp) / "b", args.rows, 0.01, 2)
        for case in args.cases.split(","):
            cmd = [sys.executable, __file__, "--child", case, "--rows", str(args.rows), "--resamples",
                   str(args.resamples), "--workdir", tmp]
            row = run_child(cmd, REPO)
            results.append(row)
            print(f"{case:>9}: {row['rows']} rows, {row['resamples']} resamples: peak {row['peak_rss_mib']:.0f} MiB, "
                  f"{row['wall_s']:.0f} s", flush=True)
    write_results(args.out, "Peak memory of compare and agreement by rows (synthetic scores)", meta,
                  ["a fresh process per case; peak = its ru_maxrss (the interpreter, numpy and the rows included)",
                   "compare: two run folders read and summarised (bootstrap intervals), a paired bootstrap per "
                   "metric, a sign-flip test; agreement: pointwise and pairwise, every interval bootstrapped"],
                  ["case", "rows", "resamples", "wall s", "peak RSS MiB"],
                  [[r["case"], r["rows"], r["resamples"], r["wall_s"], r["peak_rss_mib"]] for r in results], results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
