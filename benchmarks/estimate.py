"""What the experts would say, estimated from a few labels: PPI against the labels alone, on every shared
labelled set (issue #27).

    python benchmarks/estimate.py --tag _new         # reads the run folders benchmarks/agreement.py wrote
    python benchmarks/estimate.py --sets begin,rgb_en --draws 200

Each set of benchmarks/agreement.py (its loaders, default row limits and seed) is a run whose human labels
play the experts: N = the rows the set's default metric scored (faithfulness; answer_correctness on
EVOUNA), its per-row values the judge's predictions, the share of human yes over those N rows the truth.
For n in {50, 100, 200} wherever n is at most a quarter of N (a set too small for any of them gets
n = N // 4 instead, marked), ``--draws`` simple random samples of n rows play the labelled rows, and each
draw gives the labels-only rate with its interval and the prediction-powered estimate with its interval
(offline_eval.people.estimate.estimate_rate, the code `offline-eval estimate` runs), for each prediction: the raw
score and the cross-fitted calibrated probability. Measured over the draws: coverage of the truth by each
95% interval, mean widths and their ratio, mean absolute errors of the judge-only mean, the labels-only
rate and PPI; and the issue's acceptance: PPI coverage in [0.93, 0.98], width at most 1.02x the labels-only
width (at most 0.90x where the default metric's AUC is >= 0.85), PPI's error no larger than the labels'.

The per-row scores come from ``<runs-dir>/<set>-default<tag>/results.jsonl`` (benchmarks/agreement.py's run
folders); a set whose folder has no finished run is scored through agreement.py's machinery into that
folder and cache (the bench judge, bf16 option verdicts, as agreement.py's ``default``), unless
``--no-score``. With every run folder present no model is loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import agreement as bench  # noqa: E402  (its loaders, sets, judge and cache)

from _bench_profile import bench_manifest  # noqa: E402
from offline_eval.people.agreement import roc_auc  # noqa: E402
from offline_eval.people.estimate import DEFAULT_PREDICTION, PREDICTIONS, estimate_rate, read_run  # noqa: E402

SIZES = (50, 100, 200)
DRAW_SEED = 20261201
COVERAGE = (0.93, 0.98)
WIDTH_MAX, WIDTH_MAX_INFORMATIVE, INFORMATIVE_AUC = 1.02, 0.90, 0.85


def scores_of(set_name: str, rows: list, args: argparse.Namespace) -> tuple[dict[str, float | None], str]:
    """id -> the default metric's value (None: unscored), and where it came from."""
    run_dir = args.runs_dir / f"{set_name}-default{args.tag}"
    if (run_dir / "summary.json").exists() and (run_dir / "results.jsonl").exists():
        run = read_run(run_dir)
        metric = bench.SETS[set_name][1]
        if metric not in run.values:
            raise SystemExit(f"estimate: {run_dir} holds no {metric} scores")
        return run.values[metric], str(run_dir)
    if args.no_score:
        raise LookupError(f"no finished run in {run_dir} (run benchmarks/agreement.py, or drop --no-score)")
    import torch

    from offline_eval.people.agreement.scoring import build_setup, score_samples
    from offline_eval.engine.cache import ResultCache
    from offline_eval.run.model_choice import ModelChoice

    torch.set_num_threads(args.threads)
    setup = build_setup(bench.SETS[set_name][1], ModelChoice(profile=str(bench_manifest(args.judge)),
                                                            batch_size=args.batch_size),
                        verdicts="options", max_tokens=args.max_tokens)
    cache = ResultCache(args.cache)
    try:
        scores = score_samples([s for s, _ in rows], setup, run_dir, cache=cache, overwrite=True)
    finally:
        cache.close()
    return {k: v.get("value") for k, v in scores.items()}, f"{run_dir} (scored now)"


# name -> (estimate_rate options, what it is); "" is the code's default, the others the alternatives measured
VARIANTS = {"": ({}, "the default"),
            "normal": ({"form": "normal"}, "PPI interval in the normal form (residual variance estimated)"),
            "population": ({"finite": False}, "no finite-population correction (PPI's own interval; Wilson for "
                                               "an unlimited population)")}


def simulate(f: np.ndarray, y: np.ndarray, n: int, draws: int, seed: int) -> dict[str, Any]:
    """``draws`` simple random samples of ``n`` of the N rows labelled; every estimator on each."""
    rng = np.random.default_rng(seed)
    N, truth = f.size, float(y.mean())
    judge_error = abs(float(f.mean()) - truth)
    kinds = [f"labels_only{'_' + v if v else ''}" for v in ("", "normal", "population")]
    kinds += [f"ppi_{p}{'_' + v if v else ''}" for v in VARIANTS for p in PREDICTIONS]
    hits = {k: 0 for k in kinds}
    widths: dict[str, list[float]] = {k: [] for k in kinds}
    errors: dict[str, list[float]] = {k: [] for k in kinds}
    lambdas: dict[str, list[float]] = {p: [] for p in PREDICTIONS}
    used: dict[str, dict[str, int]] = {p: {} for p in PREDICTIONS}
    for _ in range(draws):
        order = rng.permutation(N)
        lab, unl = order[:n], order[n:]
        results = {}
        for variant, (options, _) in VARIANTS.items():
            for p in PREDICTIONS:
                plain, ppi = estimate_rate(f[lab], y[lab], f[unl], prediction=p, **options)
                results[f"ppi_{p}{'_' + variant if variant else ''}"] = ppi
                if not variant:
                    lambdas[p].append(float(ppi.extra.get("lambda") or 0.0))
                    kind = str(ppi.extra.get("prediction"))
                    used[p][kind] = used[p].get(kind, 0) + 1
                    results["labels_only"] = plain
                elif variant == "population":
                    results["labels_only_population"] = plain
        results["labels_only_normal"] = estimate_rate(f[lab], y[lab], f[unl], prediction="raw", interval="normal")[0]
        for k, est in results.items():
            lo, hi = est.ci95
            hits[k] += lo <= truth <= hi
            widths[k].append(hi - lo)
            errors[k].append(abs(est.value - truth))
    out: dict[str, Any] = {"n": n, "draws": draws, "judge_mae": round(judge_error, 4)}
    for k in kinds:
        out[k] = {"coverage": round(hits[k] / draws, 4), "width": round(float(np.mean(widths[k])), 4),
                  "mae": round(float(np.mean(errors[k])), 4)}
    for k in kinds:
        if k.startswith("ppi_"):
            base = "labels_only_population" if k.endswith("_population") else "labels_only"
            out[k]["width_ratio"] = round(out[k]["width"] / out[base]["width"], 4)
    for p in PREDICTIONS:
        out[f"ppi_{p}"]["lambda_mean"] = round(float(np.mean(lambdas[p])), 4)
        out[f"ppi_{p}"]["prediction_used"] = used[p]
    return out


def acceptance(cell: dict[str, Any], auc: float | None, prediction: str) -> list[str]:
    """What fails the issue's acceptance in one (set, n) cell for one prediction; [] when it passes."""
    ppi, plain = cell[f"ppi_{prediction}"], cell["labels_only"]
    fails = []
    if not COVERAGE[0] <= ppi["coverage"] <= COVERAGE[1]:
        fails.append(f"coverage {ppi['coverage']:.3f}")
    limit = WIDTH_MAX_INFORMATIVE if auc is not None and auc >= INFORMATIVE_AUC else WIDTH_MAX
    if ppi["width_ratio"] > limit:
        fails.append(f"width {ppi['width_ratio']:.3f}x > {limit:.2f}x")
    if ppi["mae"] > plain["mae"]:
        fails.append(f"error {ppi['mae']:.4f} > labels {plain['mae']:.4f}")
    return fails


def write_outputs(out: Path, payload: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    meta = payload["meta"]
    lines = [
        "# What the experts would say: PPI vs the labels alone, every shared labelled set",
        "",
        f"- date: {meta['date']}; code: {meta['code']}",
        f"- machine: {meta['machine']}",
        f"- command: `{meta['command']}` ({meta['elapsed_s']} s)",
        f"- per set: N = the rows its default metric scored (bench judge, benchmarks/agreement.py's run folders); "
        f"truth = the share of human yes over those N; {meta['draws']} simple random samples of n rows "
        f"labelled per cell (seed {meta['seed']}); n in {{50, 100, 200}} where n <= N/4 (a set with none: "
        "n = N // 4, marked *)",
        "- labels only: the share of yes among the n labels, Wilson 95% interval for the N rows (finite-population "
        "correction); PPI: PPI++ with power tuning, its interval for the N rows (offline_eval.people.estimate); "
        "raw: the score as the prediction; calibrated: a Platt map cross-fitted on 5 folds of the labels",
        "- coverage: share of draws whose 95% interval holds the truth (1,000 draws: ±0.014 at 95%); width: mean "
        "width; ratio: PPI width / labels-only width; error: mean absolute error. Acceptance (issue #27): PPI "
        "coverage 0.93-0.98, ratio <= 1.02 (<= 0.90 where AUC >= 0.85), PPI error <= labels-only error",
        f"- default prediction of `offline-eval estimate`: **{meta['default_prediction']}**",
        "",
        "| set | N | human rate | judge mean | AUC | n | labels only: coverage / width / error "
        "| PPI raw: coverage / width (ratio) / error | PPI calibrated: coverage / width (ratio) / error "
        "| judge-only error | acceptance raw / calibrated |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in payload["results"]:
        for cell in r["cells"]:
            plain = cell["labels_only"]

            def ppi(p: str) -> str:
                c = cell[f"ppi_{p}"]
                return f"{c['coverage']:.3f} / {c['width']:.3f} ({c['width_ratio']:.2f}x) / {c['mae']:.4f}"

            verdict = " / ".join("pass" if not cell["fails"][p] else "FAIL: " + "; ".join(cell["fails"][p])
                                 for p in ("raw", "calibrated"))  # the columns' order
            auc = "-" if r["auc"] is None else f"{r['auc']:.3f}"
            lines.append(f"| {r['set']} | {r['N']} | {r['human_rate']:.3f} | {r['judge_mean']:.3f} | {auc} | "
                         f"{cell['n']}{'*' if cell.get('extra') else ''} | {plain['coverage']:.3f} / "
                         f"{plain['width']:.3f} / {plain['mae']:.4f} | {ppi('raw')} | {ppi('calibrated')} | "
                         f"{cell['judge_mae']:.4f} | {verdict} |")
    lines += ["", "## The alternatives", "",
              "Coverage / width ratio of the intervals not chosen, on the same draws: labels only with the normal "
              "interval instead of Wilson's (coverage / width); PPI with its interval in the normal form "
              "(the residual variance estimated from the labelled rows) instead of the score form; both "
              "intervals without the finite-population correction (PPI's own, and Wilson's for an unlimited "
              "population; ratio of those two).", "",
              "| set | n | labels only, normal | PPI raw, normal form | PPI calibrated, normal form "
              "| no correction: labels only | PPI raw | PPI calibrated |", "|---|---|---|---|---|---|---|---|"]
    for r in payload["results"]:
        for c in r["cells"]:
            def cw(key: str) -> str:
                return f"{c[key]['coverage']:.3f} / {c[key]['width_ratio']:.2f}x"
            lines.append(f"| {r['set']} | {c['n']}{'*' if c.get('extra') else ''} | "
                         f"{c['labels_only_normal']['coverage']:.3f} / {c['labels_only_normal']['width']:.3f} | "
                         f"{cw('ppi_raw_normal')} | {cw('ppi_calibrated_normal')} | "
                         f"{c['labels_only_population']['coverage']:.3f} / {c['labels_only_population']['width']:.3f} | "
                         f"{cw('ppi_raw_population')} | {cw('ppi_calibrated_population')} |")
    lines.append("")
    if payload.get("summary"):
        lines += ["## Summary", ""] + [f"- {s}" for s in payload["summary"]] + [""]
    if payload.get("skipped"):
        lines += ["## Skipped", ""] + [f"- {s}" for s in payload["skipped"]] + [""]
    out.with_suffix(".md").write_text("\n".join(lines), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sets", default=",".join(bench.SETS), help="comma-separated: " + ", ".join(bench.SETS))
    p.add_argument("--draws", type=int, default=1000)
    p.add_argument("--seed", type=int, default=DRAW_SEED, help="seed of the draws")
    p.add_argument("--data-seed", type=int, default=13, help="agreement.py's --seed (its row subsets)")
    p.add_argument("--limit", action="append", default=[], metavar="SET=N", help="as agreement.py's --limit")
    p.add_argument("--tag", default="", help="suffix of agreement.py's run folders (its --tag)")
    p.add_argument("--runs-dir", type=Path, default=bench.BENCH_DIR / "agreement-runs")
    p.add_argument("--cache", type=Path, default=bench.BENCH_DIR / "agreement-cache.sqlite")
    p.add_argument("--judge", type=Path, default=bench.JUDGE)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--no-score", action="store_true", help="skip a set without a finished run folder")
    p.add_argument("--data", type=Path, help="folder of the shared labelled sets (default: ../shared/data)")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "estimate")
    args = p.parse_args(argv)
    if not bench.use_shared_data("estimate", args.data):
        return 2
    limits = {k: int(v) for k, _, v in (x.partition("=") for x in args.limit)}
    started = time.monotonic()
    raw_argv = argv if argv is not None else sys.argv[1:]
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "code": bench.code_version(),
            "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, python {platform.python_version()}, "
                       f"load average at start {os.getloadavg()[0]:.2f}",
            "command": "python benchmarks/estimate.py" + (" " + shlex.join(raw_argv) if raw_argv else ""),
            "draws": args.draws, "seed": args.seed, "default_prediction": DEFAULT_PREDICTION, "sources": {}}
    payload: dict[str, Any] = {"meta": meta, "results": [], "skipped": [], "summary": []}
    for offset, set_name in enumerate(s for s in args.sets.split(",") if s):
        loader, metric, _, default_limit, what = bench.SETS[set_name]
        limit = limits.get(set_name, default_limit) or None
        rows = loader(limit, args.data_seed)
        try:
            values, source = scores_of(set_name, rows, args)
        except LookupError as exc:
            payload["skipped"].append(f"{set_name}: {exc}")
            print(f"estimate: {set_name} skipped: {exc}", file=sys.stderr)
            continue
        meta["sources"][set_name] = source
        pairs = [(values[s.id], y) for s, y in rows if values.get(s.id) is not None]
        f = np.array([v for v, _ in pairs], dtype=float)
        y = np.array([lab for _, lab in pairs], dtype=float)
        sizes = [n for n in SIZES if n <= f.size / 4] or [f.size // 4]
        auc = roc_auc(f, y)
        result = {"set": set_name, "what": what, "metric": metric, "rows": len(rows), "N": int(f.size),
                  "human_rate": round(float(y.mean()), 4), "judge_mean": round(float(f.mean()), 4),
                  "auc": None if auc is None else round(auc, 4), "cells": []}
        for j, n in enumerate(sizes):
            cell = simulate(f, y, n, args.draws, args.seed + 1000 * offset + j)
            cell["extra"] = n not in SIZES
            cell["fails"] = {p: acceptance(cell, auc, p) for p in PREDICTIONS}
            result["cells"].append(cell)
            print(f"[{time.monotonic() - started:5.0f}s] {set_name} n={n}: labels {cell['labels_only']}, "
                  + ", ".join(f"{p} {cell[f'ppi_{p}']}" for p in PREDICTIONS), file=sys.stderr, flush=True)
        payload["results"].append(result)
    for pred in ("raw", "calibrated"):
        cells = [(r["set"], c) for r in payload["results"] for c in r["cells"] if not c["extra"]]
        failing = [f"{s} n={c['n']} ({'; '.join(c['fails'][pred])})" for s, c in cells if c["fails"][pred]]
        payload["summary"].append(f"{pred}: {len(cells) - len(failing)} of {len(cells)} cells meet the acceptance"
                                  + (f"; failing: {', '.join(failing)}" if failing else ""))
    meta["elapsed_s"] = round(time.monotonic() - started, 1)
    write_outputs(args.out, payload)
    print(args.out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
