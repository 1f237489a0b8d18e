#!/usr/bin/env python
"""What the transformers judge saves by keeping prompt prefixes from one batch to the next.

The engine cuts a dataset's option verdicts into batches; the judge shares a prompt prefix within a
batch (a passage and the statements checked against it), and its ``PrefixStore`` keeps the prefixes'
key/value caches for the batches after (a passage whose verdicts two batches share, the system turn
every batch begins with). This runs the first N rows through the metrics once, as ``offline-eval run``
does, recording every call for option verdicts the engine makes (the judge cuts each into batches); then
replays those calls, in order, with the store off (``prefix_store_mb=0``: prefixes shared within a batch only)
and on (the judge's default), in turn ``--repeats`` times in one process. It reports, per setting, the
tokens computed, the positions run (padding included), the forward calls and the replay's seconds
(median), the ratio on/off, and the largest difference between the two settings' probabilities (0: the
same bits).

    python benchmarks/prefix_store.py --n 4 --threads 1   # results/prefix_store.md
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import judge_work  # noqa: E402
import throughput  # noqa: E402  (the judge benchmarks' shared setup)

ROOT = Path(__file__).resolve().parents[1]


def replay(judge: Any, batches: list[list[Any]], store_mb: int) -> dict[str, Any]:
    """The recorded calls through ``judge`` with a fresh store of ``store_mb`` MiB and fresh counters."""
    from offline_eval.runtime.transformers_judge import PrefillWork, PrefixStore

    judge.prefixes = PrefixStore(store_mb << 20)
    judge.work = PrefillWork()
    started = time.perf_counter()
    probs = [p for batch in batches for p in judge.score_options(batch)]
    seconds = time.perf_counter() - started
    work = judge.work
    return {"seconds": seconds, "computed": work.computed_tokens["score_options"],
            "positions": work.padded_tokens["score_options"], "calls": work.forward_calls["score_options"],
            "prompt": work.prompt_tokens["score_options"], "stored": len(judge.prefixes), "probs": probs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    judge_work.add_run_arguments(p, rows=4)
    p.add_argument("--store-mb", type=int, default=256, help="the store's size when on")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--note", action="append", default=[], help="a line for the notes (what else was running)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "prefix_store")
    args = p.parse_args(argv)

    machine = throughput.machine()
    samples, metrics, names, settings, models, wrappers = throughput.bench_setup(args)
    judge = wrappers["judge"]._backend
    throughput.warm_up(wrappers)
    batches: list[list[Any]] = []
    score_options = judge.score_options

    def recording(requests: Any) -> Any:
        batches.append(list(requests))
        return score_options(requests)

    judge.score_options = recording
    throughput.run_mode("batched", samples, metrics, models, wrappers, settings,
                        Path(tempfile.mkdtemp(prefix="oe-prefix-store-")))
    judge.score_options = score_options

    runs: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    for _ in range(args.repeats):
        runs["off"].append(replay(judge, batches, 0))
        runs["on"].append(replay(judge, batches, args.store_mb))
    off, on = runs["off"][0], runs["on"][0]
    differs = max((abs(a[k] - b[k]) for a, b in zip(off["probs"], on["probs"]) for k in a), default=0.0)
    same_on_repeat = all(r["probs"] == runs[s][0]["probs"] for s in runs for r in runs[s])
    summary = {s: {"seconds_median": statistics.median(r["seconds"] for r in runs[s]),
                   "seconds": [round(r["seconds"], 2) for r in runs[s]],
                   **{k: runs[s][0][k] for k in ("prompt", "computed", "positions", "calls", "stored")}}
               for s in runs}
    pairs = [b["seconds"] / a["seconds"] for a, b in zip(runs["off"], runs["on"])]
    report = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "code": judge_work.code_version(),
        "command": " ".join(["python", "benchmarks/prefix_store.py"] + (argv if argv is not None else sys.argv[1:])),
        "machine": {**machine, "torch_threads": args.threads, "loadavg_at_end": os.getloadavg()},
        "config": {"dataset": str(args.dataset), "n": len(samples), "judge": str(args.judge), "metrics": names,
                   "dtype": args.dtype, "batch_size": args.batch_size, "store_mb": args.store_mb,
                   "repeats": args.repeats},
        "batches": len(batches), "requests": sum(len(b) for b in batches),
        "settings": summary, "seconds_ratio_pairs": [round(r, 4) for r in pairs],
        "seconds_ratio_median": statistics.median(pairs), "max_probability_difference": differs,
        "same_bits_on_repeat": same_on_repeat, "notes": args.note,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2, default=dict), encoding="utf-8")
    write_markdown(args.out.with_suffix(".md"), report)
    print(args.out.with_suffix(".md").read_text(encoding="utf-8"))
    return 0


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    cfg, s = report["config"], report["settings"]
    n = cfg["n"]
    lines = judge_work.header("Prompt prefixes kept from one batch to the next", report) + [
        f"- data: first {n} rows of `{cfg['dataset']}`; metrics: {', '.join(cfg['metrics'])}; the engine's "
        f"{report['batches']} calls for option verdicts ({report['requests']} requests, which the judge cuts into "
        f"batches of {cfg['batch_size']}) replayed in order, store off and on in turn, {cfg['repeats']} times each",
        f"- judge: `{cfg['judge']}` ({cfg['dtype']})",
        "",
        "| store | prompt tokens / row | computed / row | positions run / row | forward calls | prefixes kept | "
        "seconds (median) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, label in (("off", "off (0 MiB: within a batch only)"), ("on", f"on ({cfg['store_mb']} MiB)")):
        r = s[name]
        lines.append(f"| {label} | {r['prompt'] / n:.0f} | {r['computed'] / n:.0f} | {r['positions'] / n:.0f} | "
                     f"{r['calls']} | {r['stored']} | {r['seconds_median']:.1f} |")
    lines += [
        "",
        f"On/off: computed tokens **{s['on']['computed'] / s['off']['computed']:.3f}×**, positions run "
        f"{s['on']['positions'] / s['off']['positions']:.3f}×, seconds **{report['seconds_ratio_median']:.3f}×** "
        f"(median of the pairs {', '.join(f'{x:.3f}' for x in report['seconds_ratio_pairs'])}). Largest difference "
        f"in a probability between the settings: {report['max_probability_difference']:.2g}; every repeat the same "
        f"bits: {'yes' if report['same_bits_on_repeat'] else 'no'}.",
        "",
    ]
    judge_work.write_with_notes(path, lines, report)


if __name__ == "__main__":
    sys.exit(main())
