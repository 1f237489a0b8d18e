#!/usr/bin/env python
"""Which sentences of the shared sets' answers would the grading words leave out? (issue #56)

    python benchmarks/grading_words.py --out benchmarks/results/grading_words

``judging.statements.grading_notes`` leaves out of what is verified an answer's sentence that shares no
content word with its question and contexts (for answer correctness: its question and reference) and
names the grading in words (``GRADING_WORDS``, of any language the prompts speak), and first cuts off a
note that runs on from the answer in one sentence, after a colon or from a capital where a full stop is
missing (``_run_on_notes_apart``).
Where no sentence of any shared set's answers is such a one, the words change no request and no score of
those sets, and no judge needs to run to show it.
Every row of each labelled and relevance set of ``benchmarks/agreement.py``; an answer of one sentence is
never read (nothing is left out of it). Also: how many of ``benchmarks/note_probe.py``'s notes, written
for that probe apart from the defence and the injection benchmark's phrasings, name the grading. Exit
status 1 when any shared sentence would be left out or cut; the first few are named.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import agreement as bench  # noqa: E402
import note_probe  # noqa: E402
from _results import write_results  # noqa: E402
from offline_eval.judging.settings import EvalSettings  # noqa: E402
from offline_eval.judging.statements import _run_on_notes_apart, answer_sentences, names_grading  # noqa: E402
from offline_eval.judging.windows import topic_terms  # noqa: E402
from offline_eval.text import split_sentences  # noqa: E402


def _language(note: str) -> str:
    return "zh" if re.search(r"[\u4e00-\u9fff]", note) else "en"


def left_out(sample, language: str) -> list[str]:
    """The sentences of ``sample``'s answer that share no word with what faithfulness or answer correctness
    reads it against and that name the grading."""
    sentences = list(answer_sentences(str(sample.answer or ""), language))
    if len(sentences) < 2:
        return []
    out = []
    for about in ([*(sample.contexts or [])], [sample.ground_truth or ""]):
        topic = set().union(*(topic_terms(t, language) for t in [sample.question or "", *about]))
        out += [s for s in sentences if not topic_terms(s, language) & topic and names_grading(s) and s not in out]
    return out


def cut(sample, language: str) -> list[str]:
    """The sentences of ``sample``'s answer (of any length) cut where a labelled note to the grader runs on
    from the answer (``_run_on_notes_apart``), against what either metric reads it against."""
    sentences = answer_sentences(str(sample.answer or ""), language)
    out: list[str] = []
    for about in ([*(sample.contexts or [])], [sample.ground_truth or ""]):
        apart, _ = _run_on_notes_apart(sentences, language, [sample.question or "", *about])
        out += [s for s in sentences if s not in apart and s not in out]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "grading_words")
    p.add_argument("--data", type=Path, help="folder of the shared labelled sets (default: ../shared/data)")
    args = p.parse_args()
    if not bench.use_shared_data("grading_words.py", args.data):
        return 0
    load, settings = os.getloadavg()[0], EvalSettings()
    cells, results, shown = [], [], []
    for name, (build, *_) in {**bench.SETS, **bench.RELEVANCE_SETS}.items():
        rows = [s for s, _ in build(None, args.seed) if str(s.answer or "").strip()]
        found = [(s.id, t) for s in rows for t in left_out(s, settings.language_for(s))]
        parted = [(s.id, t) for s in rows for t in cut(s, settings.language_for(s))]
        shown += [f"{name} {sid}: {t[:160]!r}" for sid, t in found[:3]]
        shown += [f"cut: {name} {sid}: {t[:160]!r}" for sid, t in parted[:3]]
        cells.append([name, str(len(rows)), str(len(found)), str(len(parted))])
        results.append({"set": name, "answers": len(rows), "left_out": len(found), "cut": len(parted)})
        print(" | ".join(cells[-1]), flush=True)
    notes = list(note_probe.NOTES)
    caught = [n for n in notes if any(names_grading(s) for s in split_sentences(n, _language(n)))]
    meta = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "machine": f"{platform.platform()}, {os.cpu_count()} CPUs", "load_average_at_start": load,
            "command": "python benchmarks/grading_words.py " + " ".join(sys.argv[1:]), "code": bench.code_version(),
            "probe_notes": len(notes), "probe_notes_naming_the_grading": len(caught)}
    lines = ["every row of each set; an answer's sentences as answer_sentences gives them, against its question "
             f"and contexts and against its question and reference",
             f"benchmarks/note_probe.py's notes that name the grading: {len(caught)} of {len(notes)}; not: "
             + "; ".join(repr(n) for n in notes if n not in caught),
             *(f"left out: {x}" for x in shown)]
    write_results(args.out, "Answers' sentences the grading words would leave out", meta, lines,
                  ["set", "answers", "sentences left out", "sentences cut at a labelled note"], cells, results)
    return 1 if any(r["left_out"] or r["cut"] for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
