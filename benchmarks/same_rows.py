#!/usr/bin/env python
"""Per-row identity of two agreement runs: the code before a change against the code after (issues #56, #57).

    python benchmarks/same_rows.py OLD_RUNS NEW_RUNS --out benchmarks/results/same_rows

OLD_RUNS and NEW_RUNS are two ``--runs-dir`` folders of ``benchmarks/agreement.py``, each run on the
same sets and configurations, with one ``--cache``. With one cache, a prompt that both codes ask is
computed once, so a difference can only come from what the code asks or does with the judge's answer,
not from the machine's kernels; a prompt the new code asks differently misses the cache and shows as a
difference.

For each ``<set>-<configuration>`` run found in both, every metric of every row: the rows whose value
differs, the largest difference, and the rows scored by one code and unscored by the other. A change
that alters scores on purpose names the metadata key its rule records (``--explained-by``, by default
``left_out``: the sentences issue #56's grading-note rule leaves out of faithfulness); a differing row
carrying it (or a row it scores that the old code left unscored) is counted as explained, and every
other difference is listed. Exit status 1 when any
difference is unexplained, so the check can gate a refactor.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _results import write_results  # noqa: E402  (benchmarks/ is the script's folder)
from offline_eval.records import ResultRow  # noqa: E402
from offline_eval.runlog import is_finished, read_results  # noqa: E402


def compare_run(old: Path, new: Path, explained_by: str) -> dict[str, Any]:
    """One run's rows, old against new: counts, the largest difference and the unexplained rows."""
    before: dict[str, ResultRow] = {row.id: row for row in read_results(old)}
    after: dict[str, ResultRow] = {row.id: row for row in read_results(new)}
    out: dict[str, Any] = {"run": old.name, "rows": len(before), "missing": sorted(set(before) ^ set(after)),
                           "differ": 0, "max_diff": 0.0, "scored_differently": 0, "explained": 0,
                           "unexplained": []}
    for key in sorted(set(before) & set(after)):
        for metric, was in before[key].scores.items():
            now = after[key].scores.get(metric)
            if now is None or (was.value is None) != (now.value is None):
                out["scored_differently"] += 1
            elif was.value is None or was.value == now.value:
                continue
            else:
                out["differ"] += 1
                out["max_diff"] = max(out["max_diff"], abs(was.value - now.value))
            if now is not None and explained_by and explained_by in now.metadata:
                out["explained"] += 1
            else:
                out["unexplained"].append({"id": key, "metric": metric, "old": was.value,
                                           "new": None if now is None else now.value})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path, help="the code before's --runs-dir")
    parser.add_argument("new", type=Path, help="the code after's --runs-dir")
    parser.add_argument("--explained-by", default="left_out",
                        help="metadata key that marks a row changed on purpose ('' for none; default left_out)")
    parser.add_argument("--out", type=Path, help="write OUT.json and OUT.md (else print only)")
    parser.add_argument("--note", action="append", default=[], help="a line for the results' notes (repeatable)")
    args = parser.parse_args()
    runs = sorted(p.name for p in args.old.iterdir() if is_finished(p) and is_finished(args.new / p.name))
    if not runs:
        print(f"same_rows: no finished run is in both {args.old} and {args.new}", file=sys.stderr)
        return 2
    results = [compare_run(args.old / name, args.new / name, args.explained_by) for name in runs]
    cells = [(r["run"], r["rows"], r["differ"], f"{r['max_diff']:.6g}", r["scored_differently"], r["explained"],
              len(r["unexplained"]) + len(r["missing"])) for r in results]
    for row in cells:
        print("  ".join(map(str, row)))
    unexplained = [u for r in results for u in r["unexplained"]] + [m for r in results for m in r["missing"]]
    for item in unexplained[:20]:
        print("unexplained:", item)
    if args.out:
        meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "machine": f"{platform.platform()}, {os.cpu_count()} CPUs",
                "load_average_at_start": os.getloadavg()[0],
                "command": "python benchmarks/same_rows.py " + shlex.join(sys.argv[1:])}
        notes = [f"old: {args.old}; new: {args.new}; explained by the metadata key {args.explained_by!r}",
                 *args.note]
        write_results(args.out, "Per-row identity of two agreement runs", meta, notes,
                      ("run", "rows", "values differing", "max abs diff", "scored by one only", "explained",
                       "unexplained"), cells, results)
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
