"""One progress line for a run (issue #19): samples, window, step and estimates from measured cost."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

from offline_eval.cli import main
from offline_eval.progress import RunProgress

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "sample.jsonl"


def test_the_line_names_window_step_and_estimates():
    stream = io.StringIO()
    progress = RunProgress(4, stream=stream)
    progress.window(0, 2)
    step = progress("options (judge)", 4)
    step.update(2)
    time.sleep(0.01)
    line = progress.line
    assert "window 1/2 · step 1: options (judge) 2/4" in line and "step ends in ~" in line
    step.update(2)
    step.close()
    progress.sample()
    progress.sample()
    progress.window(1, 2)  # one window measured: the run's end can be estimated
    assert "samples 2/4 · window 2/2" in progress.line and "run ends in ~" in progress.line
    assert progress.done == 2
    progress.close()


def test_a_run_shows_one_progress_line(tiny_profile, tmp_path, capsys):
    assert main(["run", "--dataset", str(EXAMPLES), "--profile", str(tiny_profile), "--limit", "3",
                 "--metrics", "faithfulness,answer_similarity", "--max-tokens", "8", "--no-cache", "--no-report",
                 "--window", "2", "--output", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert "samples 3/3 · window 2/2" in err and "step " in err
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["run"]["n_samples"] == 3


# -- issue #33, item 3: off a terminal, whole lines; whatever follows starts a line of its own ----------
def test_off_a_terminal_the_line_is_written_whole_now_and_then_and_once_at_the_end():
    stream = io.StringIO()  # no terminal: nothing can be redrawn in place
    progress = RunProgress(4, stream=stream, every=3600)
    progress.window(0, 1)
    for _ in range(3):
        step = progress("options (judge)", 4)
        step.update(4)
        step.close()
        progress.sample()
    assert stream.getvalue() == "samples 0/4 · window 1/1 · step 0\n"  # the first line, then none for an hour
    progress.saved(3, 4)
    progress.close()
    progress.close()  # closing twice is closing once
    assert stream.getvalue().splitlines() == ["samples 0/4 · window 1/1 · step 0",
                                              "samples 3/4 · window 1/1 · step 3"]
    assert "\r" not in stream.getvalue() and stream.getvalue().endswith("\n")
    assert progress.kept == (3, 4)


def test_on_a_terminal_the_line_is_redrawn_and_cleared_at_the_end():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    progress = RunProgress(2, stream=stream)
    progress.window(0, 1)
    progress.sample()
    assert "\rsamples 1/2 · window 1/1" in stream.getvalue()
    progress.close()
    assert stream.getvalue().endswith("\r")  # the cursor back at the start of a cleared line


def test_a_resumed_run_counts_the_samples_an_earlier_try_finished():
    progress = RunProgress(10, stream=io.StringIO())
    progress.saved(6, 10)  # the folder held six when it was opened
    progress.window(0, 1)
    progress.sample()
    assert progress.line.startswith("samples 7/10")


def test_an_error_after_the_progress_line_starts_a_line_of_its_own(tmp_path, capsys):
    """stderr is no terminal here (as in a log or CI): progress lines are whole, and the refusal that
    follows them is a line of its own (it was glued on: `samplesoffline-eval: ...`)."""
    common = ["run", "--dataset", str(EXAMPLES), "--no-cache", "--output", str(tmp_path / "run")]
    assert main(common + ["--metrics", "rouge_l", "--quiet"]) == 0
    capsys.readouterr()
    assert main(common + ["--metrics", "rouge_l,aggregate", "--no-report"]) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines and lines[-1].startswith("offline-eval: ") and "holds the results of another run" in lines[-1], lines
    assert all(line.startswith(("samples ", "offline-eval: ")) for line in lines), lines
    assert "\r" not in err and err.endswith("\n")
    # a run that ends well: whole progress lines, then the report's and the results' lines
    assert main(common + ["--metrics", "rouge_l,aggregate", "--overwrite"]) == 0
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "\r" not in err and lines[0].startswith("offline-eval: the earlier run in ")
    assert lines[-2].startswith("report: ") and lines[-1].startswith("results: ")
    assert all(line.startswith("samples ") for line in lines[1:-2]) and len(lines) > 3, lines


# -- a file or a pipe: a whole line per update, and rarely -------------------------------------------------
def test_off_a_terminal_a_line_is_written_at_start_at_most_every_n_seconds_and_at_the_end(monkeypatch):
    """A log gets a line when the run starts, then at most one per ``every`` seconds however many updates
    come in between, then the last state when it ends: each a whole line, none redrawn."""
    clock = [1000.0]
    monkeypatch.setattr("offline_eval.progress.time.perf_counter", lambda: clock[0])
    stream = io.StringIO()
    progress = RunProgress(100, stream=stream, every=30)
    progress.window(0, 1)
    step = progress("options (judge)", 100)
    for _ in range(74):  # a request done and a sample finished each second for 74 s: lines at 0, 30 and 60 s
        clock[0] += 1
        step.update(1)
        progress.sample()
    lines = stream.getvalue().splitlines()
    assert [line.split(" · ")[0] for line in lines] == ["samples 0/100", "samples 29/100", "samples 59/100"]
    assert "step 1: options (judge) 60/100" in lines[-1] and "step ends in ~" in lines[-1]
    step.close()
    progress.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4 and lines[-1].startswith("samples 74/100 · window 1/1 · step 1")
    assert "\r" not in stream.getvalue() and stream.getvalue().endswith("\n")


def test_a_run_whose_stderr_is_a_file_writes_whole_lines(tmp_path):
    """The real command with stderr sent to a file, as `offline-eval run ... 2> log` or CI does: every
    progress line is whole (it was one line, `samples 0/12 · window 1/1 · step 0samples 1/12 · …`), and
    the lines after it start lines of their own."""
    import os
    import subprocess
    import sys

    log = tmp_path / "stderr.log"
    script = "import sys; from offline_eval.cli import main; sys.exit(main(sys.argv[1:]))"
    env = {**os.environ, "PYTHONPATH": str(EXAMPLES.parents[1])}
    with log.open("w") as err:
        done = subprocess.run([sys.executable, "-c", script, "run", "--dataset", str(EXAMPLES), "--metrics",
                               "rouge_l", "--no-cache", "--output", str(tmp_path / "run")],
                              stdout=subprocess.DEVNULL, stderr=err, env=env, timeout=300)
    assert done.returncode == 0, log.read_text()
    text = log.read_text()
    assert "\r" not in text and text.endswith("\n")
    lines = text.splitlines()
    progress = [line for line in lines if line.startswith("samples ")]
    assert progress[0] == "samples 0/12 · window 1/1 · step 0" and progress[-1].startswith("samples 12/12 ·")
    assert all(line.count("samples ") == line.startswith("samples ") for line in lines), lines
    assert lines[-2].startswith("report: ") and lines[-1].startswith("results: ")
