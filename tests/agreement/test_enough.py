"""Never a confident number from too little (issue #56): `estimate` on a run still being written, and
`calibrate` / `agreement` on a handful of labels, refuse in one line that says what is missing and what to do."""

from __future__ import annotations

import json
from pathlib import Path

from offline_eval.cli import main

from tests.report.test_report_fixtures import build_run


def _write_labels(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _unfinished(tmp_path: Path, rows: int = 4) -> Path:
    """A run folder as a run leaves it after its first window: run.json, the first rows, no summary.json."""
    run = build_run(tmp_path, write_summary=False)
    (run / "summary.json").unlink(missing_ok=True)
    lines = (run / "results.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (run / "results.jsonl").write_text("".join(lines[:rows]), encoding="utf-8")
    (run / "run.json").write_text(json.dumps({"fingerprint": "f", "metrics": ["faithfulness"]}), encoding="utf-8")
    return run


def test_estimate_refuses_a_run_still_being_written_unless_told(tmp_path, capsys):
    run = _unfinished(tmp_path)
    labels = [{"id": f"q{i:02d}", "metric": "faithfulness", "label": i % 2 == 0} for i in range(1, 12)]
    path = _write_labels(tmp_path / "labels.jsonl", labels)
    assert main(["estimate", str(run), "--labels", str(path), "--json", "--no-write"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert "has not finished" in err and "--partial" in err and "rerun" in err
    # told: the figures come, with a line saying they are over the rows written so far
    assert main(["estimate", str(run), "--labels", str(path), "--json", "--no-write", "--partial"]) == 0
    out, err = capsys.readouterr()
    fa = json.loads(out)["faithfulness"]
    assert fa["n"] <= 4 and "--partial" in err and "4 rows written so far" in err
    assert not (run / "summary.json").exists()
