#!/usr/bin/env python
"""Are the contexts' windows, and the answers' statements, the same under the code at a git revision and
under the working tree? (issue #56)

    python benchmarks/same_windows.py --against 5ba5717 --out benchmarks/results/same_windows_56_tables

A rule that changes how a chunk is windowed (a conversation or a table set apart from its prose) moves a
score only where it changes a window: the judge is asked about windows, and identical windows ask
identical prompts. So where every context of every shared set (each labelled and relevance set of
``benchmarks/agreement.py``, every row) gets the same windows from both codes, no score can move, and no
judge needs to run to show it. The same holds of a rule that changes what an answer is checked as (a
table read row by row): the answers and references are compared as their sentences, the statements
``answer_statements`` verifies before any judge is asked. ``offline_eval/judging/windows.py`` and
``statements.py`` at ``--against`` are loaded beside today's (they import the rest of the package as it is
now: the check is of those files' rules). Exit status 1 when any context's windows or any answer's
statements differ; the first few are named.
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
from offline_eval.judging import statements as today_statements  # noqa: E402
from offline_eval.judging import windows as today  # noqa: E402
from offline_eval.judging.settings import EvalSettings  # noqa: E402

SIZE = 100  # the default --context-window


def module_at(revision: str, name: str):
    """``offline_eval/judging/<name>.py`` as it was at ``revision``, loaded as a module of its own."""
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{revision}:offline_eval/judging/{name}.py"],
                            check=True, capture_output=True, text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, encoding="utf-8") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(f"{name}_at_{revision}", f.name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass looks its module up there
    spec.loader.exec_module(module)
    os.unlink(f.name)
    return module


def statements_of(module, text: str, language: str) -> list[str]:
    """The sentences ``module``'s ``answer_statements`` verifies for ``text``: no judge is asked for
    them (sentences mode, nothing to leave out)."""
    steps = module.answer_statements(text, None, language, EvalSettings(), "sentences", about=None)
    try:
        next(steps)
    except StopIteration as done:
        return done.value.texts
    raise RuntimeError("answer_statements asked a model for an answer's sentences")


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
    before, before_statements = module_at(args.against, "windows"), module_at(args.against, "statements")
    cells, results, named = [], [], []
    for name, (build, *_) in {**bench.SETS, **bench.RELEVANCE_SETS}.items():
        rows = [s for s, _ in build(None, args.seed)]
        contexts = [(s.id, c, s.language or "en") for s in rows for c in s.contexts or []]
        differing = [(sid, c) for sid, c, lang in contexts
                     if before.context_windows([c], SIZE, lang) != today.context_windows([c], SIZE, lang)]
        answers = [(s.id, t, s.language or "en") for s in rows for t in (s.answer, s.ground_truth) if t]
        moved = [(sid, t) for sid, t, lang in answers
                 if statements_of(before_statements, t, lang) != statements_of(today_statements, t, lang)]
        named += [f"{name} {sid}: {c[:120]!r}" for sid, c in (differing[:3] + moved[:3])]
        cells.append([name, str(len(contexts)), str(len(differing)), str(len(answers)), str(len(moved))])
        results.append({"set": name, "contexts": len(contexts), "differing": len(differing),
                        "answers": len(answers), "statements_differing": len(moved)})
        print(" | ".join(cells[-1]), flush=True)
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.platform()}, {os.cpu_count()} CPUs", "load_average_at_start": load,
            "command": "python benchmarks/same_windows.py " + " ".join(sys.argv[1:]), "code": bench.code_version()}
    notes = [f"windows.py and statements.py at {args.against} against the working tree ({meta['code']}), windows "
             f"of {SIZE} words, every row of each set; answers: each row's answer and reference, as sentences",
             *(f"differs: {x}" for x in named)]
    write_results(args.out, "The contexts' windows and the answers' statements before and after a change", meta,
                  notes, ["set", "contexts", "windows differing", "answers", "statements differing"], cells, results)
    return 1 if any(r["differing"] or r["statements_differing"] for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
