#!/usr/bin/env python
"""A run beside other jobs: the same starter slice timed quiet and beside 1 and 3 busy loops (issue #19).

Each configuration is a fresh `offline-eval run` process (models loaded, nothing cached), timed from
start to exit, with ``--threads auto`` (the default) and with ``--threads 2`` (what torch chose by
itself on a two-core machine before auto existed). The busy loops are plain Python processes spinning
on a core, started a second before the run and killed after it.

    python benchmarks/contention.py                    # about 10 minutes on 2 cores
    python benchmarks/contention.py --loops 0,3 --threads auto

Targets: with auto, the 3-loop time at most 3.5x the quiet time; the quiet time within 5% of
``--threads 2``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _results import write_results  # noqa: E402  (benchmarks/ is the script's folder)

SLICE = ["--dataset", str(REPO / "examples" / "sample.jsonl"), "--limit", "3", "--metrics", "answer_relevancy",
         "--profile", "starter", "--no-cache", "--quiet", "--no-report"]


def timed_run(threads: str, loops: int, workdir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(loops)]
    try:
        time.sleep(1.0 if loops else 0.0)
        out = workdir / f"t{threads}-l{loops}"
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "offline_eval.cli", "run", *SLICE, "--threads", threads,
                               "--output", str(out)], capture_output=True, text=True, env=env, cwd=workdir)
        wall = time.perf_counter() - start
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    if done.returncode:
        raise RuntimeError(f"run failed ({done.returncode}): {done.stderr[-2000:]}")
    chosen = json.loads((out / "run.json").read_text())["threads"]
    return {"threads_flag": threads, "loops": loops, "wall_s": round(wall, 1), "chosen": chosen}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--loops", default="0,1,3", help="busy loops beside the run, comma-separated")
    p.add_argument("--threads", default="auto,2", help="--threads values to compare, comma-separated")
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "contention")
    args = p.parse_args(argv)
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.platform()}, {len(os.sched_getaffinity(0))} usable CPUs, python "
                       f"{platform.python_version()}",
            "load_average_at_start": os.getloadavg()[0], "command": "python " + " ".join(sys.argv),
            "slice": "offline-eval run " + " ".join(SLICE[2:]) + " (examples/sample.jsonl)"}
    rows = []
    with tempfile.TemporaryDirectory(prefix="contention-") as tmp:
        for loops in (int(x) for x in args.loops.split(",")):
            for threads in args.threads.split(","):
                row = timed_run(threads.strip(), loops, Path(tmp))
                rows.append(row)
                print(f"threads {row['threads_flag']:>4}, {loops} loop(s): {row['wall_s']:7.1f} s "
                      f"(chose {row['chosen']['threads']}, wait {row['chosen']['wait_policy']})", flush=True)
    quiet = {r["threads_flag"]: r["wall_s"] for r in rows if r["loops"] == 0}
    for r in rows:
        base = quiet.get(r["threads_flag"])
        r["vs_quiet_same_flag"] = round(r["wall_s"] / base, 2) if base else None
    write_results(args.out, "A run beside busy loops: --threads auto vs --threads 2", meta,
                  [f"slice: `{meta['slice']}`, a fresh process per row, no cache"],
                  ["--threads", "busy loops", "wall s", "× quiet (same flag)", "threads chosen", "wait policy"],
                  [[r["threads_flag"], r["loops"], r["wall_s"], r["vs_quiet_same_flag"],
                    r["chosen"]["threads"] or "torch default", r["chosen"]["wait_policy"] or "default"] for r in rows],
                  rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
