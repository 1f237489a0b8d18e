#!/usr/bin/env python
"""What a judge costs on this machine: prompt tokens/s and decode step time by batch size.

Explains the ceiling of stage batching on a given device. Batching pays where a step's cost hardly
grows with the batch (decoding, which re-reads every weight per step); it cannot pay where the work
is proportional to the tokens (prompt processing on a CPU, which is compute-bound at any batch size).
Only sharing prompt prefixes or sending fewer prompt tokens makes that part cheaper.

    python benchmarks/judge_cost.py --threads 2          # bench judge, batch 1/4/16/64

Random token ids, a fixed prompt length, the judge's own dtype setting; one warm-up pass. Writes
``results/judge_cost.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import throughput as tp  # noqa: E402  (judge location, machine description)


def measure(model, batch: int, prompt_len: int, steps: int) -> dict[str, float]:
    import torch

    ids = torch.randint(100, 20000, (batch, prompt_len))
    with torch.inference_mode():
        t0 = time.perf_counter()
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        prefill = time.perf_counter() - t0
        cache = out.past_key_values
        t0 = time.perf_counter()
        for _ in range(steps):
            out = model(input_ids=torch.randint(100, 20000, (batch, 1)), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
        step = (time.perf_counter() - t0) / steps
    return {"batch": batch, "prefill_s": round(prefill, 3), "prompt_tokens_per_s": round(batch * prompt_len / prefill, 1),
            "decode_step_s": round(step, 4), "decode_tokens_per_s": round(batch / step, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--judge", type=Path, default=tp.DEFAULT_JUDGE)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batches", default="1,4,16,64")
    p.add_argument("--prompt-len", type=int, default=300)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/judge_cost.json")
    p.add_argument("--md", type=Path, default=ROOT / "benchmarks/results/judge_cost.md")
    args = p.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(str(args.judge), local_files_only=True,
                                                 dtype=getattr(torch, args.dtype)).eval()
    measure(model, 1, 32, 2)  # warm-up
    rows = [measure(model, int(b), args.prompt_len, args.steps) for b in args.batches.split(",")]
    for r in rows:
        print(r, flush=True)
    report = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "machine": tp.machine(),
              "command": "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
              "judge": str(args.judge), "dtype": args.dtype, "prompt_len": args.prompt_len, "rows": rows}
    args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    m = report["machine"]
    lines = ["# Judge cost by batch size", "",
             f"- date (UTC): {report['date']}; machine: {m['cpu']}, {m['cpus_visible']} CPUs, torch {m['torch']} "
             f"with {m['torch_threads']} thread(s); load average at start "
             f"{', '.join(f'{x:.1f}' for x in m['loadavg_at_start'])}",
             f"- command: `{report['command']}`",
             f"- judge: `{args.judge}` ({args.dtype}); prompts of {args.prompt_len} random tokens; decode steps "
             f"over that cache", "",
             "| batch | prompt tokens/s | decode step s | decoded tokens/s |", "|---|---|---|---|"]
    lines += [f"| {r['batch']} | {r['prompt_tokens_per_s']:.0f} | {r['decode_step_s']:.3f} | "
              f"{r['decode_tokens_per_s']:.1f} |" for r in rows]
    args.md.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.json} and {args.md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
