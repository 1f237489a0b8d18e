"""One progress line for a run (issue #19): samples, window, step and estimates from measured cost."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

from offline_eval.cli import main
from offline_eval.progress import RunProgress

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "sample.jsonl"


def test_the_line_names_window_step_and_estimates():
    stream = io.StringIO()
    progress = RunProgress(4, stream=stream)
    progress.window(0, 2)
    step = progress("options (judge)", 4)
    step.update(2)
    time.sleep(0.01)
    line = progress.bar.desc
    assert "window 1/2 · step 1: options (judge) 2/4" in line and "step ends in ~" in line
    step.update(2)
    step.close()
    progress.sample()
    progress.sample()
    progress.window(1, 2)  # one window measured: the run's end can be estimated
    assert "samples 2/4 · window 2/2" in progress.bar.desc and "run ends in ~" in progress.bar.desc
    assert progress.bar.n == 2
    progress.close()


def test_a_run_shows_one_progress_line(tiny_profile, tmp_path, capsys):
    assert main(["run", "--dataset", str(EXAMPLES), "--profile", str(tiny_profile), "--limit", "3",
                 "--metrics", "faithfulness,answer_similarity", "--max-tokens", "8", "--no-cache", "--no-report",
                 "--window", "2", "--output", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert "samples 3/3 · window 2/2" in err and "step " in err
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["run"]["n_samples"] == 3
