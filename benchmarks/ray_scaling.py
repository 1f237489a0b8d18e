#!/usr/bin/env python
"""Rows/s of `--engine ray` with 1 and 2 replicas (CPU actors) on one private local Ray cluster.

Each measured run is a whole `run_with_ray` call, as `offline-eval run --engine ray` makes it: actor
start, model loading, scoring and writing the output folder (no cache, so nothing is reused). The
Ray cluster itself is started once, before the timed runs, and a single-process `evaluate` of the
same rows is timed as a baseline. Rows are checked identical across all runs.

Without ``--profile`` the tiny random models of the tests are built in a temporary folder (they
measure the engine's overhead and sharding, not a real judge's speed).

    python benchmarks/ray_scaling.py --n 16 --json benchmarks/results/ray_scaling.json \
        --md benchmarks/results/ray_scaling.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

METRICS = ["faithfulness", "context_precision", "answer_similarity", "aggregate"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16, help="rows (the example rows, repeated as variants)")
    parser.add_argument("--profile", help="profile name or manifest (default: tiny random test models)")
    parser.add_argument("--replicas", default="1,2")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--md", type=Path)
    args = parser.parse_args()

    import ray

    from offline_eval.judging.settings import EvalSettings
    from offline_eval.metrics import resolve_metrics
    from offline_eval.run.config import configure_models
    from offline_eval.run.model_choice import ModelChoice
    from offline_eval.run.ray_engine import OBJECT_STORE_BYTES, run_with_ray
    from offline_eval.run.runner import run_in_process
    from tests import tiny_models
    from tests.test_engine import _samples, assert_same_scores

    work = Path(tempfile.mkdtemp(prefix="ray-scaling-"))
    profile = args.profile
    if not profile:
        models = work / "models"
        models.mkdir()
        profile = str(tiny_models.write_manifest(models / "tiny.toml", tiny_models.build_judge(models / "judge"),
                                                 tiny_models.build_hhem(models / "hhem"),
                                                 tiny_models.build_embedder(models / "embedder")))
    samples = _samples(args.n)
    metrics, aggregate = resolve_metrics(METRICS)
    choice = ModelChoice(profile=profile, batch_size=args.batch_size)
    settings = EvalSettings(verifier="hhem", verifier_classifies=True, max_tokens=args.max_tokens)
    replica_counts = [int(x) for x in args.replicas.split(",")]

    t0 = time.perf_counter()
    local_models = configure_models(choice, {r for m in metrics for r in m.roles})
    local = run_in_process(samples, metrics, local_models, settings, work / "local", aggregate=aggregate)
    baseline_s = time.perf_counter() - t0

    cpus = max(replica_counts)
    t0 = time.perf_counter()
    ray.init(num_cpus=cpus, include_dashboard=False, object_store_memory=OBJECT_STORE_BYTES,
             _node_ip_address="127.0.0.1", log_to_driver=False, configure_logging=False)
    ray_start_s = time.perf_counter() - t0
    runs = []
    try:
        for replicas in replica_counts:
            t0 = time.perf_counter()
            out = run_with_ray(samples, metrics, settings, choice, work / f"ray-{replicas}", aggregate=aggregate,
                               replicas=replicas)
            wall = time.perf_counter() - t0
            assert_same_scores([r["scores"] for r in out.results], [r["scores"] for r in local.results])
            runs.append({"replicas": replicas, "wall_s": round(wall, 2), "rows_per_s": round(args.n / wall, 3),
                         "shards": out.summary["run"]["ray"]["shards"],
                         "backend_calls": out.stats["backend_calls"]})
            print(f"replicas={replicas}: {wall:.1f} s, {args.n / wall:.3f} rows/s", file=sys.stderr)
    finally:
        ray.shutdown()

    base = runs[0]["rows_per_s"]
    for run in runs:
        run["speedup_vs_1_replica"] = round(run["rows_per_s"] / base, 2)
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    report = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "python benchmarks/ray_scaling.py " + " ".join(sys.argv[1:]),
        "ray": ray.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
        "load_average_at_end": load, "profile": args.profile or "tiny random test models",
        "rows": args.n, "metrics": METRICS, "batch_size": args.batch_size, "max_tokens": args.max_tokens,
        "single_process": {"wall_s": round(baseline_s, 2), "rows_per_s": round(args.n / baseline_s, 3)},
        "ray_cluster_start_s": round(ray_start_s, 2), "runs": runs, "identical_scores": True,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    if args.md:
        lines = [
            "# `--engine ray` scaling (CPU actors, one machine)", "",
            f"`{report['command']}` — Ray {report['ray']}, {report['cpus']} CPUs (load average at the "
            f"end {load[0]:.1f})" if load else f"`{report['command']}`", "",
            f"{args.n} rows, metrics {', '.join(METRICS)}, {report['profile']}, batch size {args.batch_size}, "
            f"max tokens {args.max_tokens}. Wall time includes actor start and model loading; the Ray "
            f"cluster start ({ray_start_s:.1f} s) does not. Scores identical to the single-process run.", "",
            "| engine | replicas | wall s | rows/s | vs 1 replica |", "|---|---:|---:|---:|---:|",
            f"| single process | - | {baseline_s:.1f} | {args.n / baseline_s:.3f} | - |",
        ]
        lines += [f"| ray | {r['replicas']} | {r['wall_s']:.1f} | {r['rows_per_s']:.3f} | "
                  f"{r['speedup_vs_1_replica']:.2f}× |" for r in runs]
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
