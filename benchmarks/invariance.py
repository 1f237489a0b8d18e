#!/usr/bin/env python
"""Does a sample's score depend on the samples batched with it? (issue #20)

The first N rows of a dataset, the model-based Ragas metrics and the bench judge (transformers, bf16,
verifier = judge, option verdicts), loaded once, scored per row and then in each setting of
``--settings``: ``bN`` = stage batching at batch size N over the whole set, ``bN-wM`` = batch size N in
windows of M rows. Each setting gets a fresh in-memory cache. Every setting is compared with per-row
mode: per metric, how many scores differ (by more than 1e-6), the largest difference, and how many
thresholded decisions differ (each ``supported`` / ``useful`` / ``verdict`` flag in a score's evidence).

    python benchmarks/invariance.py --n 16                   # about 15 minutes on 2 cores
    python benchmarks/invariance.py --n 64 --settings b8,b64,b64-w16,b64-w64   # the issue's table

Target (issue #20): no decision differs, and no continuous score by more than 1e-3.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _results import write_results  # noqa: E402  (benchmarks/ is the script's folder)
from throughput import DEFAULT_DATASET, DEFAULT_JUDGE, MODEL_METRICS, bench_setup  # noqa: E402

DECISION_KEYS = {"supported", "useful", "verdict", "relevant", "attributed", "label"}


def decisions(value: Any, path: str = "") -> dict[str, Any]:
    """Every thresholded decision inside a score's evidence, by its path."""
    found: dict[str, Any] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            if key in DECISION_KEYS and isinstance(item, (bool, str, int)):
                found[f"{path}.{key}"] = item
            else:
                found.update(decisions(item, f"{path}.{key}"))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.update(decisions(item, f"{path}[{i}]"))
    return found


def compare(reference: list[dict], other: list[dict], names: list[str]) -> dict[str, dict[str, Any]]:
    out = {}
    for name in names:
        differing = decided = flipped = 0
        largest = 0.0
        for a, b in zip(reference, other):
            sa, sb = a["scores"][name], b["scores"][name]
            va, vb = sa.get("value"), sb.get("value")
            if (va is None) != (vb is None):
                differing += 1
                largest = float("inf")
            elif va is not None and abs(va - vb) > 1e-6:
                differing += 1
                largest = max(largest, abs(va - vb))
            da, db = decisions(sa.get("metadata")), decisions(sb.get("metadata"))
            decided += len(da)
            flipped += sum(da.get(k) != db.get(k) for k in set(da) | set(db))
        out[name] = {"differing": differing, "rows": len(reference), "largest": largest,
                     "decisions": decided, "decisions_flipped": flipped}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    p.add_argument("--n", type=int, default=16)
    p.add_argument("--settings", default="b8,b64,b64-w16")
    p.add_argument("--judge", type=Path, default=DEFAULT_JUDGE)
    p.add_argument("--embedder", type=Path, default=None)
    p.add_argument("--metrics", default=",".join(MODEL_METRICS + ["answer_similarity"]))
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=8, help="batch size of the per-row mode's calls")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "invariance")
    args = p.parse_args(argv)

    import torch

    from offline_eval.engine.cache import ResultCache
    from offline_eval.run.runner import run_in_process

    samples, metrics, names, settings, models, wrappers = bench_setup(args)
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
                       f"({args.threads} threads), python {platform.python_version()}",
            "load_average_at_start": os.getloadavg()[0], "command": "python " + " ".join(sys.argv),
            "judge": f"{args.judge.name} ({args.dtype})", "n": len(samples), "metrics": names}

    def score(label: str, batch: int, window: int | None, per_row: bool) -> list[dict]:
        for wrapper in wrappers.values():
            wrapper.batch_size = wrapper._backend.batch_size = batch
        t0 = time.perf_counter()
        with __import__("tempfile").TemporaryDirectory() as tmp:
            out = run_in_process(samples, metrics, models, settings, tmp, cache=ResultCache(None), per_row=per_row,
                                 window=window or len(samples))
            rows = out.results
        print(f"[{label}] {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        return rows

    reference = score("per-row", args.batch_size, None, True)
    rows, cells = [], []
    for setting in args.settings.split(","):
        batch_text, _, window_text = setting.partition("-w")
        got = score(setting, int(batch_text.lstrip("b")), int(window_text) if window_text else None, False)
        for name, stat in compare(reference, got, names).items():
            rows.append({"setting": setting, "metric": name, **stat})
            cells.append([setting, name, f"{stat['differing']} / {stat['rows']}",
                          "-" if not stat["differing"] else f"{stat['largest']:.3g}",
                          f"{stat['decisions_flipped']} / {stat['decisions']}"])
    write_results(args.out, "Scores vs per-row mode, by batch setting (bench judge)", meta,
                  [f"{len(samples)} rows of `{args.dataset.name}`; judge {meta['judge']}, verifier = judge, option "
                   f"verdicts, {args.max_tokens} max tokens; each setting compared with per-row mode (batch size "
                   f"{args.batch_size}); a decision is a supported/useful/verdict flag in a score's evidence"],
                  ["setting", "metric", "scores differing", "largest difference", "decisions flipped"], cells, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
