"""Scores on examples/sample.jsonl with the tiny test models, held to a stored file (issues #16, #33).

Refactors of the run setup, the metric contract or the verdict step must not move a score: every
package metric (and the aggregate) is run through the CLI in three settings, and each sample's score
(value, unscored reason and metadata: claims, verdicts, chunks cited, the judge's raw output) must
match what ``tests/data/golden_sample.json`` holds.

**What "match" means, and why it holds on any x86-64 CPU.** The tiny models compute in float32, and
torch, MKL and oneDNN pick their kernels by the CPU (SSE, AVX2, AVX-512, AMX; a different summation
order or FMA), so the same model gives values that differ in the last bits. Everything discrete is
compared exactly: unscored reasons, booleans (every supported / useful / attributed decision), integers
(cited chunks, counts) and strings (claims, generated text). Floating-point numbers, the scores and the
probabilities in the metadata, are compared to ``TOLERANCE`` = 1e-5, absolute and relative (a rubric's
expected grade is on a 1-5 scale). The largest difference measured between kernel choices is 3.7e-6, on
such an expected grade; on a probability, 1.0e-6 (rounded to six decimals in the metadata). Measured
on an Intel Xeon (Sapphire Rapids: AVX-512, AMX) against the same machine restricted with
``ATEN_CPU_CAPABILITY``, ``ONEDNN_MAX_CPU_ISA`` and ``MKL_ENABLE_INSTRUCTIONS`` to AVX2, to AVX-512
without AMX, and to SSE4.2 with torch's unvectorised kernels, and on one core instead of two; the
restriction to AVX2 reproduces the difference a fresh AMD EPYC with AVX-512 showed, 0.885466158 ->
0.885466039, digit for digit. float32 carries 24 bits (1.2e-7 relative); the tolerance leaves about
ten times the worst difference seen, and a change meant to move scores moves them by far more (a
prompt's word moves a tiny model's P(Yes) in the second decimal).

A tolerance alone would not make a decision stable: a probability stored within the tolerance of its
threshold could flip on another CPU. The stored file is checked to hold none (``MARGIN``).
``tests/project/test_golden_kernels.py`` reruns one setting with the kernels restricted, in a subprocess, so the
claim above is tested, not only stated.

After a change that is meant to move scores, rewrite the file and say why in the commit:
``OFFLINE_EVAL_WRITE_GOLDEN=1 .venv/bin/python -m pytest tests/project/test_golden.py``. A float that matches
its stored value to the tolerance is kept as stored, so a file rewritten on another CPU changes only
where a score moved.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterator

import pytest

from offline_eval.cli import main
from offline_eval.metrics import builtin_metric_classes

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "sample.jsonl"
GOLDEN = REPO / "tests" / "data" / "golden_sample.json"
SETTINGS = {
    "default": [],
    "generate": ["--verdicts", "generate", "--claims", "llm"],
    "judge_verifies": ["--verifier", "judge", "--claims", "sentences", "--context-window", "0"],
}
TOLERANCE = 1e-5  # floats, absolute and relative; see the module docstring
MARGIN = 1e-4  # no stored probability this close to the support threshold (0.5)
THRESHOLD = 0.5


def scores_of(folder: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Each sample's scores as stored: value, reason and metadata (the explanation is prose made of the
    same numbers, rounded, so it is left out)."""
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    return {row["id"]: {name: {"value": s.get("value"), "reason": s.get("reason"), "metadata": s.get("metadata", {})}
                        for name, s in sorted(row["scores"].items())} for row in rows}


def run_setting(tiny_profile: Path, out: Path, name: str) -> dict[str, dict[str, dict[str, Any]]]:
    metrics = sorted(builtin_metric_classes())
    assert main(["run", "--dataset", str(EXAMPLES), "--profile", str(tiny_profile), "--metrics",
                 ",".join(metrics + ["aggregate"]), "--no-cache", "--quiet", "--no-report", "--no-calibration",
                 "--output", str(out), *SETTINGS[name]]) == 0
    return scores_of(out)


def differences(stored: Any, got: Any, where: str = "") -> Iterator[str]:
    """Where ``got`` differs from ``stored``: floats by more than ``TOLERANCE``, anything else at all."""
    if isinstance(stored, float) or isinstance(got, float):
        if (isinstance(stored, (int, float)) and isinstance(got, (int, float))
                and not isinstance(stored, bool) and not isinstance(got, bool)
                and math.isclose(stored, got, rel_tol=TOLERANCE, abs_tol=TOLERANCE)):
            return
        yield f"{where}: {stored!r} -> {got!r}"
    elif isinstance(stored, dict) and isinstance(got, dict):
        for key in sorted(stored.keys() | got.keys()):
            if key not in got or key not in stored:
                yield f"{where}/{key}: {'missing' if key not in got else 'new'}"
            else:
                yield from differences(stored[key], got[key], f"{where}/{key}")
    elif isinstance(stored, list) and isinstance(got, list) and len(stored) == len(got):
        for i, (a, b) in enumerate(zip(stored, got)):
            yield from differences(a, b, f"{where}[{i}]")
    elif stored != got or type(stored) is not type(got):
        yield f"{where}: {json.dumps(stored)[:120]} -> {json.dumps(got)[:120]}"


def near_threshold(value: Any, where: str = "") -> Iterator[str]:
    """Stored probabilities (the ``probability`` of a thresholded verdict) within ``MARGIN`` of it."""
    if isinstance(value, dict):
        p = value.get("probability")
        if isinstance(p, float) and abs(p - THRESHOLD) < MARGIN:
            yield f"{where}: {p}"
        for key, item in value.items():
            yield from near_threshold(item, f"{where}/{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from near_threshold(item, f"{where}[{i}]")


def kept_within_tolerance(stored: Any, got: Any) -> Any:
    """``got`` with each float that matches its stored value to ``TOLERANCE`` left as stored: a file
    rewritten on another CPU then changes only where a score really moved."""
    if isinstance(got, float) and isinstance(stored, (int, float)) and not isinstance(stored, bool):
        return stored if math.isclose(stored, got, rel_tol=TOLERANCE, abs_tol=TOLERANCE) else got
    if isinstance(got, dict) and isinstance(stored, dict):
        return {k: kept_within_tolerance(stored.get(k), v) for k, v in got.items()}
    if isinstance(got, list) and isinstance(stored, list) and len(got) == len(stored):
        return [kept_within_tolerance(a, b) for a, b in zip(stored, got)]
    return got


def stored_setting(name: str) -> dict[str, Any]:
    stored = json.loads(GOLDEN.read_text(encoding="utf-8")) if GOLDEN.exists() else {}
    assert name in stored, f"no stored scores for {name}: see this module's docstring"
    return stored[name]


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_scores_on_the_example_data_match_the_stored_file(tiny_profile, tmp_path, name):
    got = run_setting(tiny_profile, tmp_path / name, name)
    if os.environ.get("OFFLINE_EVAL_WRITE_GOLDEN"):
        stored = json.loads(GOLDEN.read_text(encoding="utf-8")) if GOLDEN.exists() else {}
        stored[name] = kept_within_tolerance(stored.get(name), got)
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(stored, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    stored = stored_setting(name)
    changed = list(differences(stored, got))
    assert not changed, "\n".join(changed[:30])
    assert sum(s["value"] is not None for m in got.values() for s in m.values()) > len(got)  # it scored something


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_the_stored_file_holds_no_decision_on_a_knife_edge(name):
    close = list(near_threshold(stored_setting(name)))
    assert not close, "a stored verdict sits on its threshold; another CPU could flip it:\n" + "\n".join(close)


def test_differences_compares_floats_to_the_tolerance_and_the_rest_exactly():
    stored = {"value": 0.885466158, "metadata": {"supported": True, "chunk": 2, "claim": "x", "p": [0.5, 0.25]}}
    assert not list(differences(stored, {"value": 0.885466039, "metadata": {"supported": True, "chunk": 2,
                                                                          "claim": "x", "p": [0.5, 0.25]}}))
    assert list(differences(stored, {**stored, "value": 0.8855}))  # 3.4e-5 is a change of score
    for change in ({"supported": False}, {"chunk": 1}, {"claim": "y"}, {"p": [0.5]}):
        assert list(differences(stored, {**stored, "metadata": {**stored["metadata"], **change}})), change
    assert list(differences({"value": None}, {"value": 0.0}))  # unscored vs scored
    assert list(differences({"value": 1}, {"value": True}))  # a decision is not a number
