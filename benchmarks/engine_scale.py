#!/usr/bin/env python
"""Engine overhead per row and peak memory at 1k, 10k and 100k rows (issue #15).

Every Ragas metric runs through the real engine and runner (windows, cache, run folder, summary)
with scripted backends that answer instantly, so the wall time is the engine's own cost: task
driving, request dedup, the SQLite cache, results.jsonl and summary.json. Each size runs in a fresh
process (its peak resident memory is that process's ``ru_maxrss``), with a fresh disk cache.

    python benchmarks/engine_scale.py                      # 1k, 10k, 100k rows, default window
    python benchmarks/engine_scale.py --sizes 1000,10000 --window 256

Targets: overhead per row does not grow with the dataset; peak memory at 100k rows under 2 GB.
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

RAGAS_METRICS = ["faithfulness", "answer_relevancy", "context_precision", "context_recall", "answer_correctness",
                 "answer_similarity", "context_entity_recall", "noise_sensitivity_relevant", "context_utilization",
                 "context_relevance", "rouge_l"]
SCRIPT = {
    "generate": [
        {"match": "questions", "response": '{"noncommittal": false, "questions": ["What is row {n} about?"]}'},
        {"match": "entities", "response": '{"entities": ["Paris", "France"]}'},
        {"match": "claims", "response": '{"claims": ["Paris is in France.", "It is large."]}'},
        {"match": "Copy, unchanged", "response": '{"sentences": ["Landmark stands in Paris, France."]}'},
    ],
    "default_response": "{}",
    "default_probs": {"Yes": 0.7, "No": 0.3},
}


def samples(n: int):
    from offline_eval.data.schema import Sample

    for i in range(n):  # every row its own text: nothing is deduplicated away across rows
        yield Sample(id=f"r{i}", row=i + 1, question=f"Where is landmark number {i}?",
                     answer=f"Landmark {i} is in Paris. It was built in {1800 + i % 200}.",
                     contexts=[f"Landmark {i} stands in Paris, France.", f"Its construction ended in {1800 + i % 200}."],
                     ground_truth=f"Landmark {i} is in Paris, built {1800 + i % 200}.")


def child(n: int, window: int | None, workdir: Path) -> dict:
    from offline_eval.engine.cache import ResultCache
    from offline_eval.engine.models import Models
    from offline_eval.judging.settings import EvalSettings
    from offline_eval.metrics import resolve_metrics
    from offline_eval.run.runner import DEFAULT_WINDOW, run_in_process
    from offline_eval.runtime.hashing_embedder import HashingEmbedder
    from offline_eval.runtime.scripted import ScriptedJudge

    from offline_eval.run import folder as run_folder, runner

    spent = {"windows": 0.0, "cache": 0.0, "summary": 0.0}  # seconds by phase

    def timed(phase: str, function):
        def call(*args, **kwargs):
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[phase] += time.perf_counter() - began
        return call

    runner._score_window = timed("windows", runner._score_window)  # every stage of a window, cache included
    ResultCache.get_many = timed("cache", ResultCache.get_many)
    ResultCache.put_many = timed("cache", ResultCache.put_many)
    run_folder.RunFolder.finish = timed("summary", run_folder.RunFolder.finish)  # results in order, summary.json

    data = list(samples(n))
    metrics, _ = resolve_metrics(RAGAS_METRICS)
    models = Models()
    models.add_instance("judge", ScriptedJudge(script=SCRIPT, batch_size=64, keep_prompts=False))
    models.add_instance("embedder", HashingEmbedder(batch_size=256))
    cache = ResultCache(workdir / "cache.sqlite")
    start = time.perf_counter()
    out = run_in_process(data, metrics, models, EvalSettings(verifier="judge", claims="llm"), workdir / "run",
                         cache=cache, window=window or DEFAULT_WINDOW)
    scored = time.perf_counter()
    cache.close()  # folds the run's journal into the cache's results table: part of the cost
    wall = time.perf_counter() - start
    unscored = {m: s["n_unscored"] for m, s in out.summary["metrics"].items() if s["n_unscored"]}
    return {"rows": n, "window": window or DEFAULT_WINDOW, "wall_s": round(wall, 2),
            "close_s": round(start + wall - scored, 2),
            "phase_ms_per_row": {**{k: round(1000 * v / n, 3) for k, v in spent.items()},
                                 "fold": round(1000 * (start + wall - scored) / n, 3)},
            "overhead_ms_per_row": round(1000 * wall / n, 3),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "requests": sum(out.stats["requests"].values()), "backend_calls": sum(out.stats["backend_calls"].values()),
            "results_mb": round((workdir / "run" / "results.jsonl").stat().st_size / 2**20, 1),
            "unscored": unscored, "n_scored_rows": out.summary["run"]["n_samples"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--window", type=int, help="rows per window (default: the runner's)")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "engine_scale")
    p.add_argument("--child", type=int, help=argparse.SUPPRESS)
    p.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.window, args.workdir)))
        return 0

    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    load_at_start = os.getloadavg()[0]
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="engine-scale-") as tmp:
            cmd = [sys.executable, __file__, "--child", str(n), "--workdir", tmp]
            if args.window:
                cmd += ["--window", str(args.window)]
            row = run_child(cmd, REPO)
            rows.append(row)
            print(f"{n:>7} rows: {row['overhead_ms_per_row']:.3f} ms/row, peak {row['peak_rss_mb']:.0f} MB, "
                  f"{row['wall_s']:.0f} s; by phase {row['phase_ms_per_row']}", flush=True)
    meta = {"date": started,
            "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, python {platform.python_version()}",
            "load_average_at_start": load_at_start, "command": "python " + " ".join(sys.argv),
            "metrics": RAGAS_METRICS}
    write_results(args.out, "Engine overhead and memory by dataset size (scripted instant backends)", meta,
                  [f"metrics: {', '.join(RAGAS_METRICS)}; a fresh process and a fresh disk cache per size; wall time "
                   "includes closing the cache (folding the run's journal into its results table)",
                   "by phase, ms/row: windows (every stage, the cache's reads and writes included), of them the "
                   "cache, the summary (results.jsonl in dataset order and summary.json), the fold at close"],
                  ["rows", "window", "wall s", "engine overhead ms/row", "windows", "of them cache", "summary", "fold",
                   "peak RSS MB", "requests", "backend calls", "results.jsonl MB"],
                  [[r["rows"], r["window"], r["wall_s"], r["overhead_ms_per_row"],
                    *(r["phase_ms_per_row"][k] for k in ("windows", "cache", "summary", "fold")), r["peak_rss_mb"],
                    r["requests"], r["backend_calls"], r["results_mb"]] for r in rows], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
