"""Scores on examples/sample.jsonl with the tiny test models, held to a stored file (issue #16).

Refactors of the run setup, the metric contract or the verdict step must not move a single score:
every package metric (and the aggregate) is run through the CLI in three settings, and each sample's
value and unscored reason must equal what ``tests/data/golden_sample.json`` holds.

After a change that is meant to move scores, rewrite the file and say why in the commit:
``OFFLINE_EVAL_WRITE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from offline_eval.cli import main
from offline_eval.metrics import metric_classes

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "sample.jsonl"
GOLDEN = Path(__file__).parent / "data" / "golden_sample.json"
SETTINGS = {
    "default": [],
    "generate": ["--verdicts", "generate", "--claims", "llm"],
    "judge_verifies": ["--verifier", "judge", "--claims", "sentences", "--context-window", "0"],
}
DIGITS = 9  # float noise below this is not a change of score


def _scores(folder: Path) -> dict[str, dict[str, list]]:
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    return {row["id"]: {name: [None if s.get("value") is None else round(s["value"], DIGITS), s.get("reason")]
                        for name, s in sorted(row["scores"].items())} for row in rows}


def _run(tiny_profile: Path, tmp_path: Path, name: str, flags: list[str]) -> dict[str, dict[str, list]]:
    metrics = sorted(n for n, cls in metric_classes().items() if cls.__module__.startswith("offline_eval."))
    out = tmp_path / name
    assert main(["run", "--dataset", str(EXAMPLES), "--profile", str(tiny_profile), "--metrics",
                 ",".join(metrics + ["aggregate"]), "--no-cache", "--quiet", "--no-report", "--no-calibration",
                 "--output", str(out), *flags]) == 0
    return _scores(out)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_scores_on_the_example_data_match_the_stored_file(tiny_profile, tmp_path, name):
    got = _run(tiny_profile, tmp_path, name, SETTINGS[name])
    stored = json.loads(GOLDEN.read_text(encoding="utf-8")) if GOLDEN.exists() else {}
    if os.environ.get("OFFLINE_EVAL_WRITE_GOLDEN"):
        stored[name] = got
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(stored, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    assert name in stored, f"no stored scores for {name}: see this module's docstring"
    assert got.keys() == stored[name].keys()
    changed = [f"{sample}/{metric}: {stored[name][sample].get(metric)} -> {value}"
               for sample, metrics in got.items() for metric, value in metrics.items()
               if stored[name][sample].get(metric) != value]
    missing = [f"{sample}/{metric}" for sample, metrics in stored[name].items() for metric in metrics
               if metric not in got[sample]]
    assert not changed and not missing, "\n".join(changed[:20] + missing[:20])
    assert sum(v[0] is not None for m in got.values() for v in m.values()) > len(got)  # it scored something
