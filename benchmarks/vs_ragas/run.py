#!/usr/bin/env python
"""offline-eval vs Ragas 0.4 on the same rows, the same local judge and embedder, in one run.

    bash benchmarks/vs_ragas/setup_venv.sh          # once: Ragas in its own git-ignored venv
    python benchmarks/vs_ragas/run.py --n 64 --max-tokens 128 --threads 1 --batch-size 64

Runs with the product's venv python. Both tools score faithfulness, answer_relevancy,
context_precision and context_recall on the first N rows of the dataset (read once, by offline-eval's
reader, and handed to Ragas as plain text), with the same judge folder (transformers, same dtype,
CPU), the same embedder folder (all-MiniLM-L6-v2), the same max new tokens and the same torch thread
count. offline-eval runs first, in this process, with an in-memory cache (``--no-cache``); Ragas then
runs in a subprocess of benchmarks/vs_ragas/.venv with HF_HUB_OFFLINE=1 and RAGAS_DO_NOT_TRACK=true.
Model loading is timed apart from scoring for both. Writes benchmarks/results/vs_ragas.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import throughput as tp  # noqa: E402  (shared helpers: model building, machine info)

METRICS = ["faithfulness", "answer_relevancy", "context_precision", "context_recall"]


def unscored(rows: list[dict], names: list[str]) -> dict[str, int]:
    return {n: sum(1 for r in rows if r.get(n) is None or (isinstance(r[n], float) and math.isnan(r[n])))
            for n in names}


def means(rows: list[dict], names: list[str]) -> dict[str, float | None]:
    out = {}
    for n in names:
        vals = [r[n] for r in rows if r.get(n) is not None and not math.isnan(r[n])]
        out[n] = round(sum(vals) / len(vals), 4) if vals else None
    return out


def write_md(path: Path, rep: dict) -> None:
    m, c = rep["machine"], rep["config"]
    lines = ["# offline-eval vs Ragas", "",
             f"- date (UTC): {rep['date']}",
             f"- machine: {m['cpu']}, {m['cpus_visible']} CPUs visible (shared with other jobs; load "
             f"average {', '.join(f'{x:.1f}' for x in m['loadavg_at_start'])} at start, "
             f"{', '.join(f'{x:.1f}' for x in m.get('loadavg_at_end', ()))} at end)",
             f"- command: `{rep['command']}`",
             f"- data: first {c['n']} rows of `{c['dataset']}`; metrics: {', '.join(METRICS)}",
             f"- judge: `{c['judge']}` ({c['dtype']}, CPU, {c['threads']} torch thread(s) in both tools, "
             f"max new tokens {c['max_tokens']}); embedder: `{c['embedder']}`",
             f"- offline-eval: batched engine, batch size {c['batch_size']}, verifier = judge (option "
             f"log-probabilities), in-memory cache",
             ""]
    if rep.get("ragas"):
        r = rep["ragas"]
        lines.append(f"- Ragas {r['versions']['ragas']} (langchain-core {r['versions']['langchain-core']}, "
                     f"langchain-huggingface {r['versions']['langchain-huggingface']}): "
                     f"LangchainLLMWrapper(ChatHuggingFace(HuggingFacePipeline)), HuggingFaceEmbeddings, "
                     f"RunConfig(max_workers={r['run_config']['max_workers']}, timeout={r['run_config']['timeout']})")
        lines.append("")
    lines += ["| tool | N | wall s (scoring) | CPU s | samples/s (wall) | samples/CPU-s | model calls | "
              + " | ".join(f"{n} mean (unscored)" for n in METRICS) + " |",
              "|---|---|---|---|---|---|---|" + "---|" * len(METRICS)]
    for key in ("offline_eval", "ragas"):
        r = rep.get(key)
        if not r:
            continue
        cells = [f"{'-' if r['means'][n] is None else format(r['means'][n], '.3f')} ({r['unscored'][n]})"
                 for n in METRICS]
        cpu = "-" if r.get("cpu_seconds") is None else f"{r['cpu_seconds']:.1f}"
        pc = "-" if r.get("samples_per_cpu_s") is None else f"{r['samples_per_cpu_s']:.4f}"
        lines.append(f"| {key} | {r['n']} | {r['seconds']:.1f} | {cpu} | {r['samples_per_s']:.4f} | {pc} | {r['calls']} | "
                     + " | ".join(cells) + " |")
    lines.append("")
    if rep.get("ratio") is not None:
        by_cpu = f" (by CPU seconds: {rep['ratio_cpu']:.2f}×)" if rep.get("ratio_cpu") else ""
        lines += [f"**Throughput ratio offline-eval / Ragas: {rep['ratio']:.2f}× by wall time**{by_cpu}; unscored scores: "
                  f"offline-eval {rep['offline_eval']['unscored_total']}, Ragas {rep['ragas']['unscored_total']} "
                  f"(of {rep['offline_eval']['n'] * len(METRICS)}).", ""]
    for note in rep.get("notes", []):
        lines.append(f"- {note}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, default=tp.DEFAULT_DATASET)
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--judge", type=Path, default=tp.DEFAULT_JUDGE)
    p.add_argument("--embedder", type=Path, default=None)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--ragas-python", type=Path, default=HERE / ".venv/bin/python")
    p.add_argument("--ragas-max-workers", type=int, default=16)
    p.add_argument("--ragas-timeout", type=int, default=7200)
    p.add_argument("--skip", choices=["offline-eval", "ragas"], help="run one side only")
    p.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/vs_ragas.json")
    p.add_argument("--md", type=Path, default=ROOT / "benchmarks/results/vs_ragas.md")
    args = p.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    from offline_eval.data.readers import read_dataset
    from offline_eval.judging.settings import EvalSettings
    from offline_eval.metrics import resolve_metrics

    args.embedder = args.embedder or tp.starter_embedder()
    samples = read_dataset(str(args.dataset), None, limit=args.n)
    rep = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "command": " ".join(["python", "benchmarks/vs_ragas/run.py"] + (argv if argv is not None else sys.argv[1:])),
           "machine": tp.machine(),
           "config": {"dataset": str(args.dataset), "n": len(samples), "judge": str(args.judge),
                      "embedder": str(args.embedder), "max_tokens": args.max_tokens, "threads": args.threads,
                      "dtype": args.dtype, "batch_size": args.batch_size},
           "offline_eval": None, "ragas": None, "ratio": None, "ratio_cpu": None, "notes": []}
    args.json.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        rep["machine"]["loadavg_at_end"] = os.getloadavg()
        oe, rg = rep["offline_eval"], rep["ragas"]
        if oe and rg:
            rep["ratio"] = round(oe["samples_per_s"] / rg["samples_per_s"], 3)
            if oe.get("samples_per_cpu_s") and rg.get("samples_per_cpu_s"):
                rep["ratio_cpu"] = round(oe["samples_per_cpu_s"] / rg["samples_per_cpu_s"], 3)
        args.json.write_text(json.dumps(rep, indent=2), encoding="utf-8")
        write_md(args.md, rep)

    if args.skip != "offline-eval":
        metrics, _ = resolve_metrics(METRICS)
        roles = {"judge", "embedder"}
        settings = EvalSettings(verifier="judge", verdicts="options", max_tokens=args.max_tokens)
        t0 = time.perf_counter()
        models, wrappers, _ = tp.build_models(args, roles)
        load_s = time.perf_counter() - t0
        tp.warm_up(wrappers)
        with tempfile.TemporaryDirectory() as work:
            rec = tp.run_mode("batched", samples, metrics, models, wrappers, settings, Path(work))
        rows = [rec["_rows"][s.id] for s in samples]
        rep["offline_eval"] = {"n": rec["n"], "seconds": rec["seconds"], "load_seconds": round(load_s, 2),
                               "samples_per_s": rec["samples_per_s"], "cpu_seconds": rec.get("cpu_seconds"),
                               "samples_per_cpu_s": rec.get("samples_per_cpu_s"),
                               "calls": sum(rec["engine"]["backend_calls"].values()),
                               "engine": rec["engine"], "backends": rec["backends"],
                               "means": means(rows, METRICS), "unscored": unscored(rows, METRICS),
                               "unscored_reasons": {n: rec["scores"][n]["unscored_reasons"] for n in METRICS},
                               "rows": rows}
        rep["offline_eval"]["unscored_total"] = sum(rep["offline_eval"]["unscored"].values())
        del models, wrappers
        save()

    if args.skip != "ragas":
        with tempfile.TemporaryDirectory() as work:
            rows_path, out_path = Path(work) / "rows.json", Path(work) / "ragas.json"
            rows_path.write_text(json.dumps([{"question": s.question, "answer": s.answer, "contexts": s.contexts,
                                              "ground_truth": s.ground_truth} for s in samples]), encoding="utf-8")
            env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", RAGAS_DO_NOT_TRACK="true",
                       HF_DATASETS_OFFLINE="1", OMP_NUM_THREADS=str(args.threads))
            cmd = [str(args.ragas_python), str(HERE / "ragas_side.py"), "--rows", str(rows_path),
                   "--judge", str(args.judge), "--embedder", str(args.embedder),
                   "--max-tokens", str(args.max_tokens), "--threads", str(args.threads), "--dtype", args.dtype,
                   "--max-workers", str(args.ragas_max_workers), "--timeout", str(args.ragas_timeout),
                   "--out", str(out_path)]
            print("[ragas] " + " ".join(cmd), file=sys.stderr, flush=True)
            proc = subprocess.run(cmd, env=env, text=True, capture_output=True)
            if proc.returncode != 0 or not out_path.exists():
                rep["notes"].append(f"Ragas failed (exit {proc.returncode}): {proc.stderr[-3000:]}")
                save()
                print(proc.stderr[-5000:], file=sys.stderr)
                return 1
            r = json.loads(out_path.read_text())
            rep["ragas"] = {**{k: r.get(k) for k in ("n", "seconds", "load_seconds", "samples_per_s", "cpu_seconds",
                                                     "samples_per_cpu_s", "versions", "run_config",
                                                     "torch_threads", "rows")},
                            "calls": r["pipeline_calls"], "means": means(r["rows"], METRICS),
                            "unscored": unscored(r["rows"], METRICS),
                            "stderr_tail": proc.stderr[-2000:]}
            rep["ragas"]["unscored_total"] = sum(rep["ragas"]["unscored"].values())
        save()
    print(json.dumps({k: ({kk: rep[k][kk] for kk in ("n", "seconds", "samples_per_s", "unscored")}
                          if isinstance(rep[k], dict) else rep[k]) for k in ("offline_eval", "ragas", "ratio")},
                     indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
