#!/usr/bin/env python
"""A bfloat16 judge's verdicts with its matrix products computed in other ways, on this CPU.

On a CPU without bfloat16 kernels (AVX2, no AVX-512) oneDNN emulates a bfloat16 product, and the judge
computes its products in float32 instead (``offline_eval.runtime.batch_invariance``). This benchmark
loads the bench judge once for each way of ``--ways`` and asks each the same option verdicts: each of
the first statements of the first rows of a dataset against each of its first context windows, as
faithfulness asks them. It reports, in one process and one after the other, the seconds and computed
prompt tokens of each way at the batch size given, whether each way gives the same bits at batch size
1, how far each way's verdicts are from the bfloat16 kernels' (largest and mean difference of P(Yes),
decisions at 0.5 that differ), and a plain product of the judge's MLP shapes in each dtype.

The ways: ``bfloat16`` (oneDNN's kernels, the reference), ``float32`` (the judge's float32 blocks),
``int8`` and ``int8-no-down`` (issue #31's trial of VNNI: every linear layer but the output layer, or all
but the MLP's down projection, with its weight quantized per output channel and each input row on its
own scale, summed in int32 by ``torch._int_mm``; defined here, not in the product, which did not adopt
it: docs/measurements.md, "Integer products"). Each way is warmed up on a few verdicts first, so the
order of ``--ways`` does not favour the later ones.

    python benchmarks/cpu_products.py                      # results/cpu_products.md (about 6 minutes on AVX2)
    python benchmarks/cpu_products.py --ways bfloat16,int8,int8-no-down --threads 2 --out benchmarks/results/cpu_products_int8
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
    from offline_eval.judging.verdicts import YES_NO
    from offline_eval.judging.windows import context_windows
    from offline_eval.prompts.ragas import SUPPORT_OPTION
    from offline_eval.text import split_sentences

    requests = []
    for sample in read_dataset(str(dataset), None, limit=rows):
        texts = [text for _, text in context_windows(sample.contexts, 100, "en")][:windows]
        for statement in split_sentences(sample.answer, "en")[:statements]:
            requests += [ScoreOptions(prompt=SUPPORT_OPTION.render("en", premise=text, hypothesis=statement),
                                      options=YES_NO) for text in texts]
    return requests


WARM_UP = 8  # verdicts asked once, untimed, before each way's timed run

WAYS = {"bfloat16": "bfloat16 kernels", "float32": "float32 blocks", "int8": "int8 rows",
        "int8-no-down": "int8 rows, down projection in bfloat16"}


def int8_linear(linear: Any) -> Any:
    """A forward for ``linear`` in int8: the weight quantized per output channel (symmetric, 127 levels),
    each input row on its own scale, the product summed in int32 and scaled back in float32. Integer
    sums are exact and a row's scale is its own, so a row's bits do not depend on the rows beside it."""
    import torch

    weight = linear.weight.detach().float()
    col_scale = weight.abs().amax(dim=1).clamp(min=1e-12) / 127.0
    quantized = torch.round(weight / col_scale[:, None]).clamp(-127, 127).to(torch.int8).t().contiguous()
    bias = None if linear.bias is None else linear.bias.detach().float()

    def int8_rows(x: Any) -> Any:
        rows = x.reshape(-1, x.shape[-1]).float()
        row_scale = rows.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 127.0
        out = torch._int_mm(torch.round(rows / row_scale).to(torch.int8), quantized).float()
        out.mul_(row_scale).mul_(col_scale)
        if bias is not None:
            out.add_(bias)
        return out.to(x.dtype).view(*x.shape[:-1], quantized.shape[1])

    return int8_rows


def one_way(judge_path: Path, way: str, requests: list[Any], batch_size: int, alone: int) -> dict[str, Any]:
    import torch

    from offline_eval.runtime.transformers_judge import PrefillWork, PrefixStore, TransformersJudge

    judge = TransformersJudge(str(judge_path), batch_size=batch_size, dtype="bfloat16",
                              float32_matmuls=way == "float32")
    if way.startswith("int8"):
        head = judge.model.get_output_embeddings()
        for name, module in judge.model.named_modules():
            if (isinstance(module, torch.nn.Linear) and module is not head
                    and not (way == "int8-no-down" and name.endswith("down_proj"))):
                module.forward = int8_linear(module)
    # Warm up (the first products of a process pay for allocations and kernel set-up, which would count
    # against whichever way runs first), then forget what the warm-up computed.
    judge.score_options(requests[:WARM_UP])
    judge.prefixes = PrefixStore(judge.prefixes.limit_bytes)
    judge.work = PrefillWork()
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
    p.add_argument("--ways", default="bfloat16,float32", help="comma-separated, the first the reference: "
                   + ", ".join(WAYS))
    p.add_argument("--note", action="append", default=[])
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cpu_products")
    args = p.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    machine = throughput.machine()
    requests = verdict_requests(args.dataset, args.rows, args.statements, args.windows)
    chosen = [w for w in args.ways.split(",") if w]
    unknown = [w for w in chosen if w not in WAYS]
    if unknown or len(chosen) < 2:
        p.error(f"--ways: two or more of {', '.join(WAYS)} (got {args.ways})")
    ways = {WAYS[w]: one_way(args.judge, w, requests, args.batch_size, args.alone) for w in chosen}
    p_yes = {name: way.pop("p_yes") for name, way in ways.items()}
    reference = WAYS[chosen[0]]
    differences = {}
    for name in list(ways)[1:]:
        gaps = [abs(a - b) for a, b in zip(p_yes[reference], p_yes[name])]
        differences[name] = {
            "time_ratio": round(ways[name]["seconds"] / ways[reference]["seconds"], 3),
            "max_p_yes": round(max(gaps), 6), "mean_p_yes": round(sum(gaps) / len(gaps), 6),
            "decisions_differing": sum((a >= 0.5) != (b >= 0.5) for a, b in zip(p_yes[reference], p_yes[name]))}
    matmul = {str(dtype).removeprefix("torch."): round(matmul_throughput(896, 4864, 512, dtype) / 1e9, 1)
              for dtype in (torch.bfloat16, torch.float32)}
    report = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "code": code_version(),
        "command": " ".join(["python", "benchmarks/cpu_products.py"] + (argv if argv is not None else sys.argv[1:])),
        "machine": machine, "config": {**{k: str(v) for k, v in vars(args).items() if k != "note"}},
        "requests": len(requests), "ways": ways, "reference": reference, "differences": differences,
        "matmul_gflops": matmul, "notes": args.note,
    }
    report["machine"]["loadavg_at_end"] = os.getloadavg()
    m = report["machine"]
    lines = [
        f"# A bfloat16 judge's products: {reference} against {', '.join(list(ways)[1:])}",
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
    lines.append("")
    for name, d in differences.items():
        lines.append(f"{name} take **{d['time_ratio']:.2f}×** the time of the {reference} here. P(Yes) differs by "
                     f"{d['max_p_yes']:.4f} at most, {d['mean_p_yes']:.4f} on average; {d['decisions_differing']} "
                     f"of {len(requests)} decisions at 0.5 differ.")
    lines += [
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
