#!/usr/bin/env python
"""The GPU check (issue #17): the whole run on randomly initialised models of the real shapes.

Run from the source tree on the machine's own torch (nothing of the project is installed there):

    bash scripts/device_check.sh OUT_DIR                       # on the GPU machine: --device cuda:0
    bash scripts/device_check.sh OUT_DIR --tiny --device cpu   # the rehearsal CI runs

It builds, in a temporary folder, a judge of Qwen2.5-7B-Instruct's shape (Llama architecture, bf16 on a
GPU; its tokenizer is trained here on the data, so prompt lengths are close to a real one's), a T5
classifier of flan-t5-base's shape saved as HHEM-2.1-Open is, and a BERT encoder of XLM-RoBERTa-large's
shape as the embedder (BGE-M3's size). Their verdicts are noise: this measures cost, not quality.

Then, with the models loaded once, it scores ROWS rows (examples/sample.jsonl repeated with variants)
with the model-based Ragas metrics through the real engine at each batch size, and the first
PER_ROW_ROWS rows in stage-batched and per-row mode: rows/s, peak device memory, seconds per request
kind and the share of wall time spent outside model calls. One JSON and one Markdown table go to OUT_DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

METRICS = ["faithfulness", "answer_relevancy", "context_precision", "context_recall", "answer_correctness",
           "answer_similarity"]
# Real shapes (config.json of each published model), and the tiny ones of the CI rehearsal.
SHAPES = {
    "real": {
        "judge": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                      num_key_value_heads=4, vocab_size=152064, max_position_embeddings=32768,
                      initializer_range=0.02),
        "hhem": dict(d_model=768, d_kv=64, d_ff=2048, num_layers=12, num_heads=12, vocab_size=32128),
        "embedder": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                         vocab_size=250002, max_position_embeddings=514),
        "judge_vocab": 8000,
    },
    "tiny": {"judge": {}, "hhem": {}, "embedder": {}, "judge_vocab": 400},
}


def dataset(rows: int, path: Path) -> list[str]:
    """ROWS rows from examples/sample.jsonl, each made distinct; returns their text (tokenizer corpus)."""
    base = [json.loads(line) for line in (REPO / "examples" / "sample.jsonl").read_text().splitlines() if line]
    out, text = [], []
    for i in range(rows):
        row = dict(base[i % len(base)])
        row["id"] = f"{row.get('id', 'row')}-{i}"
        row["answer"] = f"{row.get('answer', '')} (variant {i // len(base)})"
        out.append(row)
        text += [str(row.get(k, "")) for k in ("question", "answer", "ground_truth")] + list(row.get("contexts") or [])
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out), encoding="utf-8")
    return text


def build_models(root: Path, shapes: dict, corpus: list[str], device: str) -> Path:
    import torch

    from tests import tiny_models

    gpu = device.startswith("cuda")
    started = time.perf_counter()
    judge = tiny_models.build_judge(root / "judge", corpus=corpus, tokenizer_vocab=shapes["judge_vocab"],
                                    dtype=torch.bfloat16 if gpu else None, device=device if gpu else "cpu",
                                    **shapes["judge"])
    hhem = tiny_models.build_hhem(root / "hhem", corpus=corpus, **shapes["hhem"])
    words = sorted({w.lower() for t in corpus for w in re.findall(r"\w+", t)})[:20000]
    embedder = tiny_models.build_embedder(root / "embedder", words=words, **shapes["embedder"])
    manifest = tiny_models.write_manifest(root / "device.toml", judge, hhem, embedder)
    manifest.write_text(manifest.read_text().replace('dtype = "float32"', f'dtype = "{"bfloat16" if gpu else "float32"}"'))
    print(f"models built in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return manifest


def measure(manifest: Path, data: Path, device: str, batch_sizes: list[int], rows: int, per_row_rows: int,
            max_tokens: int, workdir: Path, report=lambda results: None, deadline: float | None = None) -> list[dict]:
    """Each measurement is handed to ``report`` as soon as it ends, so a run stopped at its time limit keeps
    what it measured; none starts after ``deadline`` (a ``time.perf_counter()`` value)."""
    import torch

    from throughput import Timed

    from offline_eval.data.readers import read_dataset
    from offline_eval.engine.cache import ResultCache
    from offline_eval.engine.models import Models
    from offline_eval.judging.settings import EvalSettings
    from offline_eval.metrics import resolve_metrics
    from offline_eval.run.runner import run_in_process
    from offline_eval.runtime.loading import models_from_profile
    from offline_eval.runtime.profiles import load_profile

    profile = load_profile(str(manifest))
    metrics, _ = resolve_metrics(METRICS)
    roles = {r for m in metrics for r in m.roles}
    lazy = models_from_profile(profile, device=device, batch_size=batch_sizes[0], roles=roles)
    started = time.perf_counter()
    backends = {role: lazy.get(role) for role in sorted(roles)}
    print(f"models loaded in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    samples = read_dataset(data)
    settings = EvalSettings(verifier="hhem", verifier_classifies=True, max_tokens=max_tokens)
    gpu = device.startswith("cuda")
    plan = [("batched", size, rows) for size in batch_sizes]
    plan += [("batched", batch_sizes[0], per_row_rows), ("per-row", batch_sizes[0], per_row_rows)]
    results = []
    for mode, size, n in plan:
        if deadline is not None and time.perf_counter() > deadline:
            print(f"{mode:>8} batch {size:>4}, {n} rows: skipped, past the deadline", file=sys.stderr, flush=True)
            continue
        timed = Models()
        wrappers = {}
        for role, backend in backends.items():
            backend.batch_size = size
            wrappers[role] = timed_backend = Timed(backend)
            timed.add_instance(role, timed_backend)
        if gpu:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        out = run_in_process(samples[:n], metrics, timed, settings, workdir / f"{mode}-{size}-{n}",
                             cache=ResultCache(None), per_row=(mode == "per-row"))
        if gpu:
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        model_s = sum(sum(w.seconds.values()) for w in wrappers.values())
        seconds = {f"{role}:{kind}": round(v, 2) for role, w in wrappers.items() for kind, v in w.seconds.items()}
        row = {"mode": mode, "batch_size": size, "rows": n, "wall_s": round(wall, 2),
               "rows_per_s": round(n / wall, 3),
               "peak_device_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if gpu else None,
               "seconds_by_kind": seconds, "outside_models_share": round(max(0.0, 1 - model_s / wall), 3),
               "backend_calls": out.stats["backend_calls"],
               "unscored": {m: s["n_unscored"] for m, s in out.summary["metrics"].items() if s["n_unscored"]}}
        results.append(row)
        report(results)
        print(f"{mode:>8} batch {size:>4}, {n} rows: {row['rows_per_s']} rows/s, {wall:.1f} s, outside models "
              f"{row['outside_models_share']:.0%}", file=sys.stderr, flush=True)
    return results


def write(out: Path, meta: dict, results: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "device_check.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    batched = {r["rows"]: r for r in results if r["mode"] == "batched"}
    per_row = next((r for r in results if r["mode"] == "per-row"), None)
    lines = [f"# Device check: {meta['device_name']}", "",
             f"- date: {meta['date']}; shapes: {meta['shapes']}; device: {meta['device']}; torch {meta['torch']}, "
             f"transformers {meta['transformers']}, python {meta['python']}",
             f"- command: `{meta['command']}`; metrics: {', '.join(METRICS)}; max tokens {meta['max_tokens']}", "",
             "| mode | batch size | rows | wall s | rows/s | peak device GiB | outside model calls | seconds by kind |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["seconds_by_kind"].items()))
        lines.append(f"| {r['mode']} | {r['batch_size']} | {r['rows']} | {r['wall_s']} | {r['rows_per_s']} | "
                     f"{r['peak_device_gib'] if r['peak_device_gib'] is not None else '-'} | "
                     f"{r['outside_models_share']:.1%} | {kinds} |")
    if per_row is not None and per_row["rows"] in batched:
        ratio = batched[per_row["rows"]]["rows_per_s"] / per_row["rows_per_s"]
        lines += ["", f"Stage batching vs per-row at {per_row['rows']} rows: **{ratio:.2f}×**."]
    (out / "device_check.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path, help="folder for device_check.json and device_check.md")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--tiny", action="store_true", help="tiny shapes (the CPU rehearsal)")
    # The defaults fit a 15-minute device lease on an H200 (start included): 64 rows took 176 s at batch
    # size 10 there (docs/measurements.md, "The GPU check on an NVIDIA H200").
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--per-row-rows", type=int, default=8)
    p.add_argument("--batch-sizes", default="10,64")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--deadline-s", type=float, default=380,
                   help="start no measurement later than this many seconds after launch (the rest are skipped)")
    args = p.parse_args(argv)

    import torch
    import transformers

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"device_check: --device {args.device}: no CUDA device here", file=sys.stderr)
        return 2
    shapes = SHAPES["tiny" if args.tiny else "real"]
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "device": args.device,
            "device_name": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else platform.processor()
            or platform.machine(), "shapes": "tiny" if args.tiny else "real (Qwen2.5-7B, flan-t5-base, XLM-R-large)",
            "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "max_tokens": args.max_tokens,
            "command": "python scripts/device_check.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    deadline = time.perf_counter() + args.deadline_s
    with tempfile.TemporaryDirectory(prefix="device-check-") as tmp:
        root = Path(tmp)
        os.environ.setdefault("OFFLINE_EVAL_HASHES", str(root / "hashes.sqlite"))
        corpus = dataset(args.rows, root / "data.jsonl")
        manifest = build_models(root, shapes, corpus, args.device)
        results = measure(manifest, root / "data.jsonl", args.device,
                          [int(x) for x in args.batch_sizes.split(",")], args.rows,
                          min(args.per_row_rows, args.rows), args.max_tokens, root / "runs",
                          report=lambda done: write(args.out, meta, done), deadline=deadline)
    write(args.out, meta, results)
    print(f"device_check: wrote {args.out / 'device_check.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
