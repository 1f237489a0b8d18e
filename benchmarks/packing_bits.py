#!/usr/bin/env python
"""Do packed verdicts give the bits of padded ones on the real judge?

Runs the first N rows through the given metrics once with the judge as it loads (verdicts packed where
its load-time check allows), keeping every batch of option verdicts the engine sent and what came back;
then sends each batch again, in the same order and size, with packing turned off (the rows of a forward
call left-padded side by side, as before packing), and each batch of prompts it decoded from. Reports
how many option probabilities differ, the largest difference, and how many completions differ. The
tests check the same on a tiny model; this is the check on the bench judge.

    python benchmarks/packing_bits.py --n 8 --metrics faithfulness,answer_relevancy,context_precision,context_recall,answer_correctness --batch-size 64 --threads 2 --max-tokens 128
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import throughput  # noqa: E402  (the judge benchmarks' shared setup)
from _results import write_results  # noqa: E402
from judge_work import add_run_arguments  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_arguments(p, rows=8)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "packing_bits")
    args = p.parse_args(argv)

    import torch

    load = os.getloadavg()[0]
    samples, metrics, names, settings, models, wrappers = throughput.bench_setup(args)
    judge = wrappers["judge"]._backend
    if not judge.packing:
        print("this judge does not pack its verdicts (its load-time check turned packing off)", file=sys.stderr)
        return 1
    sent: list[tuple[list, list[dict[str, float]]]] = []
    generated: list[tuple[list, list[tuple[str, ...]]]] = []
    packed_scoring, packed_generation = judge.score_options, judge.generate

    def kept(requests):
        got = packed_scoring(requests)
        sent.append((list(requests), got))
        return got

    def kept_generation(requests):
        got = packed_generation(requests)
        generated.append((list(requests), got))
        return got

    judge.score_options, judge.generate = kept, kept_generation
    throughput.run_mode("batched", samples, metrics, models, wrappers, settings,
                        Path(tempfile.mkdtemp(prefix="oe-packing-bits-")))
    judge.score_options, judge.generate = packed_scoring, packed_generation
    judge.packing = False
    judge.prefixes = type(judge.prefixes)(judge.prefixes.limit_bytes)  # no prefix of the packed run serves the replay
    completions = other_completions = 0
    for requests, got in generated:
        for packed, padded in zip(got, judge.generate(requests)):
            completions += 1
            other_completions += packed != padded
    compared = differing = 0
    largest = 0.0
    for requests, got in sent:
        for packed, padded in zip(got, judge.score_options(requests)):
            for option, probability in packed.items():
                difference = abs(probability - padded[option])
                compared += 1
                differing += difference > 0
                largest = max(largest, difference)
    verdicts = sum(len(requests) for requests, _ in sent)
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
                       f"({args.threads} threads), python {platform.python_version()}",
            "load_average_at_start": load,
            "command": " ".join(["python", "benchmarks/packing_bits.py"] + (argv if argv is not None else sys.argv[1:])),
            "judge": f"{args.judge.name} ({args.dtype})", "n": len(samples), "metrics": names}
    row = {"batches": len(sent), "verdicts": verdicts, "probabilities": compared, "differing": differing,
           "largest_difference": largest, "generation_batches": len(generated), "completions": completions,
           "other_completions": other_completions}
    write_results(args.out, "Packed verdicts against padded ones (bench judge)", meta,
                  [f"{len(samples)} rows of `{args.dataset.name}`; metrics {', '.join(names)}; judge {meta['judge']}, "
                   f"batch size {args.batch_size}; each batch of verdicts (and of prompts to decode from) the run "
                   f"sent, sent again with packing off"],
                  ["verdict batches", "verdicts", "option probabilities", "differing", "largest difference",
                   "generation batches", "completions", "other completions"],
                  [[len(sent), verdicts, compared, differing, f"{largest:.3g}", len(generated), completions,
                    other_completions]], [row])
    print(args.out.with_suffix(".md").read_text(encoding="utf-8"))
    return 0 if differing == 0 and other_completions == 0 else 2


if __name__ == "__main__":
    sys.exit(main())
