#!/usr/bin/env python
"""A bfloat16 judge's verdicts with its matrix products in bfloat16 kernels and in float32 blocks, on this CPU.

On a CPU without bfloat16 kernels (AVX2, no AVX-512) oneDNN emulates a bfloat16 product, and the judge
computes its products in float32 instead (``offline_eval.runtime.batch_invariance``). This benchmark
loads the bench judge twice, once each way, and asks both the same option verdicts: each of the first
statements of the first rows of a dataset against each of its first context windows, as faithfulness
asks them. It reports, in one process and one after the other, the seconds and computed prompt tokens
of each way at the batch size given, whether each way gives the same bits at batch size 1, how far the
float32 verdicts are from the bfloat16 kernels' (largest and mean difference of P(Yes), decisions at 0.5
that differ), and a plain product of the judge's MLP shapes in each dtype.

    python benchmarks/cpu_products.py                      # results/cpu_products.md (about 6 minutes on AVX2)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import throughput  # noqa: E402  (the judge benchmarks' shared setup)
from judge_work import code_version, matmul_throughput  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def verdict_requests(dataset: Path, rows: int, statements: int, windows: int) -> list[Any]:
    from offline_eval.data.readers import read_dataset
    from offline_eval.engine.requests import ScoreOptions
    from offline_eval.metrics.judging import YES_NO, context_windows
    from offline_eval.prompts.ragas import SUPPORT_OPTION
    from offline_eval.text import split_sentences

    requests = []
    for sample in read_dataset(str(dataset), None, limit=rows):
        texts = [text for _, text in context_windows(sample.contexts, 100, "en")][:windows]
        for statement in split_sentences(sample.answer, "en")[:statements]:
            requests += [ScoreOptions(prompt=SUPPORT_OPTION.render("en", premise=text, hypothesis=statement),
                                      options=YES_NO) for text in texts]
    return requests


def one_way(judge_path: Path, float32: bool, requests: list[Any], batch_size: int, alone: int) -> dict[str, Any]:
    from offline_eval.runtime.transformers_judge import TransformersJudge

    judge = TransformersJudge(str(judge_path), batch_size=batch_size, dtype="bfloat16", float32_matmuls=float32)
    started = time.perf_counter()
    verdicts = judge.score_options(requests)
    seconds = time.perf_counter() - started
    computed = sum(judge.work.computed_tokens.values())
    judge.batch_size = 1
    same_alone = judge.score_options(requests[:alone]) == verdicts[:alone]
    return {"seconds": round(seconds, 2), "computed_tokens": computed,
            "computed_tokens_per_s": round(computed / seconds, 1), "same_bits_at_batch_size_1": same_alone,
            "p_yes": [v["Yes"] for v in verdicts]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, default=throughput.DEFAULT_DATASET)
    p.add_argument("--judge", type=Path, default=throughput.DEFAULT_JUDGE)
    p.add_argument("--rows", type=int, default=2)
    p.add_argument("--statements", type=int, default=4, help="first sentences of each answer")
    p.add_argument("--windows", type=int, default=4, help="first context windows of each row")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--alone", type=int, default=6, help="verdicts recomputed at batch size 1")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--note", action="append", default=[])
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu_products")
    args = p.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    machine = throughput.machine()
    requests = verdict_requests(args.dataset, args.rows, args.statements, args.windows)
    ways = {"bfloat16 kernels": one_way(args.judge, False, requests, args.batch_size, args.alone),
            "float32 blocks": one_way(args.judge, True, requests, args.batch_size, args.alone)}
    native, ours = ways["bfloat16 kernels"].pop("p_yes"), ways["float32 blocks"].pop("p_yes")
    gaps = [abs(a - b) for a, b in zip(native, ours)]
    matmul = {str(dtype).removeprefix("torch."): round(matmul_throughput(896, 4864, 512, dtype) / 1e9, 1)
              for dtype in (torch.bfloat16, torch.float32)}
    report = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "code": code_version(),
        "command": " ".join(["python", "benchmarks/cpu_products.py"] + (argv if argv is not None else sys.argv[1:])),
        "machine": machine, "config": {**{k: str(v) for k, v in vars(args).items() if k != "note"}},
        "requests": len(requests), "ways": ways,
        "difference": {"max_p_yes": round(max(gaps), 6), "mean_p_yes": round(sum(gaps) / len(gaps), 6),
                       "decisions_differing": sum((a >= 0.5) != (b >= 0.5) for a, b in zip(native, ours))},
        "matmul_gflops": matmul, "notes": args.note,
    }
    report["machine"]["loadavg_at_end"] = os.getloadavg()
    m, d = report["machine"], report["difference"]
    lines = [
        "# A bfloat16 judge's products: bfloat16 kernels against float32 blocks",
        "",
        f"- date (UTC): {report['date']}; code: {report['code']}",
        f"- machine: {m['cpu']}{throughput.cpu_products(m)}, {m['cpus_visible']} CPUs visible, torch {m['torch']} "
        f"with {args.threads} threads; load average at start "
        f"{', '.join(f'{x:.1f}' for x in m['loadavg_at_start'])}, at end "
        f"{', '.join(f'{x:.1f}' for x in m['loadavg_at_end'])}",
        f"- command: `{report['command']}`",
        f"- verdicts: {len(requests)} (the first {args.statements} sentences of the answer against the first "
        f"{args.windows} context windows, first {args.rows} rows of `{args.dataset.name}`), batch size "
        f"{args.batch_size}; judge `{args.judge}`",
        "",
        "| products | seconds | computed prompt tokens | tokens/s | same bits at batch size 1 |",
        "|---|---|---|---|---|",
    ]
    for name, way in ways.items():
        lines.append(f"| {name} | {way['seconds']:.1f} | {way['computed_tokens']} | {way['computed_tokens_per_s']:.1f} | "
                     f"{'yes' if way['same_bits_at_batch_size_1'] else 'NO'} |")
    speedup = ways["bfloat16 kernels"]["seconds"] / ways["float32 blocks"]["seconds"]
    lines += [
        "",
        f"float32 blocks take **{1 / speedup:.2f}×** the time of the bfloat16 kernels here. P(Yes) differs by "
        f"{d['max_p_yes']:.4f} at most, {d['mean_p_yes']:.4f} on average; {d['decisions_differing']} of "
        f"{len(requests)} decisions at 0.5 differ.",
        "",
        f"A plain product of the judge's MLP shapes (512 × 896 → 4864 → 896): bfloat16 {matmul['bfloat16']} "
        f"GFLOP/s, float32 {matmul['float32']} GFLOP/s.",
        "",
    ] + [f"- {note}" for note in args.note]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
