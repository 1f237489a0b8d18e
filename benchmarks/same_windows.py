#!/usr/bin/env python
"""Are the contexts' windows the same under the code at a git revision and under the working tree? (issue #56)

    python benchmarks/same_windows.py --against 5ba5717 --out benchmarks/results/same_windows_56_tables

A rule that changes how a chunk is windowed (a conversation or a table set apart from its prose) moves a
score only where it changes a window: the judge is asked about windows, and identical windows ask
identical prompts. So where every context of every shared set (each labelled and relevance set of
``benchmarks/agreement.py``, every row) gets the same windows from both codes, no score can move, and no
judge needs to run to show it. ``offline_eval/judging/windows.py`` at ``--against`` is loaded beside
today's (it imports the rest of the package as it is now: the check is of that file's rules). Exit status
1 when any context's windows differ; the first few are named.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import agreement as bench  # noqa: E402
from _results import write_results  # noqa: E402
from offline_eval.judging import windows as today  # noqa: E402

SIZE = 100  # the default --context-window


def windows_at(revision: str):
    """``offline_eval/judging/windows.py`` as it was at ``revision``, loaded as a module of its own."""
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{revision}:offline_eval/judging/windows.py"],
                            check=True, capture_output=True, text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, encoding="utf-8") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(f"windows_at_{revision}", f.name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    os.unlink(f.name)
    return module


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--against", required=True, help="the git revision whose windows.py to compare with")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "same_windows")
    p.add_argument("--data", type=Path, help="folder of the shared labelled sets (default: ../shared/data)")
    args = p.parse_args()
    if not bench.use_shared_data("same_windows.py", args.data):
        return 0
    load = os.getloadavg()[0]
    before = windows_at(args.against)
    cells, results, named = [], [], []
    for name, (build, *_) in {**bench.SETS, **bench.RELEVANCE_SETS}.items():
        contexts = [(s.id, c, s.language or "en") for s, _ in build(None, args.seed) for c in s.contexts or []]
        differing = [(sid, c) for sid, c, lang in contexts
                     if before.context_windows([c], SIZE, lang) != today.context_windows([c], SIZE, lang)]
        named += [f"{name} {sid}: {c[:120]!r}" for sid, c in differing[:3]]
        cells.append([name, str(len(contexts)), str(len(differing))])
        results.append({"set": name, "contexts": len(contexts), "differing": len(differing)})
        print(" | ".join(cells[-1]), flush=True)
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.platform()}, {os.cpu_count()} CPUs", "load_average_at_start": load,
            "command": "python benchmarks/same_windows.py " + " ".join(sys.argv[1:]), "code": bench.code_version()}
    notes = [f"windows.py at {args.against} against the working tree ({meta['code']}), windows of {SIZE} words, "
             "every row of each set", *(f"differs: {x}" for x in named)]
    write_results(args.out, "The contexts' windows before and after a change", meta, notes,
                  ["set", "contexts", "windows differing"], cells, results)
    return 1 if any(r["differing"] for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
