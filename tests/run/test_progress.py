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
    progress.step()
    step = progress("options (judge)", 4)
    step.update(2)
    time.sleep(0.01)
    line = progress.line
    assert "window 1/2 · step 1 of ?: options (judge) 2/4" in line and "step ends in ~" in line
    step.update(2)
    step.close()
    progress.sample()
    progress.sample()
    progress.window(1, 2)  # one window measured: the run's end can be estimated
    assert "samples 2/4 · window 2/2" in progress.line and "run ends in ~" in progress.line
    assert "at the earliest" not in progress.line
    progress.step()
    progress("options (judge)", 4)
    assert "step 1 of 1: options (judge) 0/4" in progress.line
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
        progress.step()
        step = progress("options (judge)", 4)
        step.update(4)
        step.close()
        progress.sample()
    assert stream.getvalue() == "samples 0/4 · window 1/1 · run ends in ~?\n"  # the first line, then none for an hour
    progress.saved(3, 4)
    progress.close()
    progress.close()  # closing twice is closing once
    lines = stream.getvalue().splitlines()
    # one window, between steps: nothing measured bounds what is left of it
    assert lines == ["samples 0/4 · window 1/1 · run ends in ~?", "samples 3/4 · window 1/1 · step 3 of ? · run ends in ~?"]
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
    progress.step()
    step = progress("options (judge)", 100)
    for _ in range(74):  # a request done and a sample finished each second for 74 s: lines at 0, 30 and 60 s
        clock[0] += 1
        step.update(1)
        progress.sample()
    lines = stream.getvalue().splitlines()
    assert [line.split(" · ")[0] for line in lines] == ["samples 0/100", "samples 29/100", "samples 59/100"]
    assert "step 1 of ?: options (judge) 60/100" in lines[-1] and "step ends in ~" in lines[-1]
    step.close()
    progress.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4 and lines[-1].startswith("samples 74/100 · window 1/1 · step 1 of ?")
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
    assert progress[0] == "samples 0/12 · window 1/1: 0/12 scores · run ends in ~?"
    assert progress[-1].startswith("samples 12/12 ·")
    assert all(line.count("samples ") == line.startswith("samples ") for line in lines), lines
    assert lines[-2].startswith("report: ") and lines[-1].startswith("results: ")


# -- issue #55: progress that progresses, and nothing of other libraries beside it -------------------------
def test_the_first_window_says_the_most_steps_it_can_take_and_the_next_ones_step_of_n(monkeypatch):
    """Steps are counted per window: the first cannot know how many it takes, only the most its metrics
    can (``of at most 6``), and its run estimate is a lower bound from what its steps cost a row so far;
    from the second on, ``k of n`` and the run's end from the last window's seconds per row. Scores move
    within a window."""
    clock = [0.0]
    monkeypatch.setattr("offline_eval.progress.time.perf_counter", lambda: clock[0])
    progress = RunProgress(12, stream=io.StringIO(), every=3600)
    progress.window(0, 3, 4, 8, most_steps=6)
    assert progress.line.endswith("window 1/3: 0/8 scores · run ends in ~?")  # nothing measured: no figure
    for kind in ("options (judge)", "embed (embedder)"):
        progress.step()
        step = progress(kind, 10)
        clock[0] += 5  # 10 s a step: 20 s for the window's 4 rows, 5 s a row so far
        step.update(5)
        clock[0] += 5
        step.update(5)
        step.close()
    progress.step()
    step = progress("options (judge)", 10)
    clock[0] += 2
    step.update(2)  # 1 s a request of this kind over all its steps: 8 s to go
    assert "step 3 of at most 6: options (judge) 2/10 · step ends in ~8s" in progress.line
    # a lower bound: the step's 8 s and the 8 later rows at (20 + 2) s / 4 rows
    assert progress.line.endswith("run ends in ~52s at the earliest")
    for _ in range(8):
        progress.score()
    for _ in range(4):
        progress.sample()
    step.update(8)
    step.close()
    clock[0] += 18  # the window took 40 s (its last step included): 10 s a row
    progress.window(1, 3, 4, 8, most_steps=6)
    assert progress.line == "samples 4/12 · window 2/3: 0/8 scores · run ends in ~1m20s"
    progress.step()
    progress("options (judge)", 10)
    progress.score()
    assert "samples 4/12 · window 2/3: 1/8 scores · step 1 of 3: options (judge) 0/10" in progress.line
    for _ in range(3):
        progress.step()  # beyond what the first window took: the most it can take again
    assert "· step 4 of at most 6 ·" in progress.line
    progress.window(2, 3, 4, 8)  # a window whose metrics do not all say: a step beyond 4 has no total
    for _ in range(5):
        progress.step()
    assert "· step 5 of ? ·" in progress.line


def _screen(args: list[str], tmp_path: Path, *, terminal: bool) -> tuple[int, str]:
    """Run `offline-eval ARGS` in a child with stdout and stderr on a pseudo-terminal (80 columns, as a
    terminal has: with none, tqdm draws nothing) or on a file; what it wrote, as text."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(EXAMPLES.parents[1]), "TERM": "xterm", "COLUMNS": "160"}
    command = [sys.executable, "-c", "import sys; from offline_eval.cli import main; sys.exit(main(sys.argv[1:]))",
               *args]
    if not terminal:
        log = tmp_path / "out.log"
        with log.open("w") as out:
            done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=600)
        return done.returncode, log.read_text(encoding="utf-8")
    import fcntl
    import pty
    import struct
    import termios

    main_fd, child_fd = pty.openpty()
    fcntl.ioctl(child_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=child_fd, stderr=child_fd, env=env)
    os.close(child_fd)
    chunks = []
    try:
        while True:
            try:
                data = os.read(main_fd, 65536)
            except OSError:  # the child closed the terminal (EIO)
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(main_fd)
    return child.wait(timeout=600), b"".join(chunks).decode("utf-8", errors="replace")


THIRD_PARTY = ("it/s]", "Loading weights", "DEBUG", "\x1b[A", "BM25S")


def _tiny_run(tiny_profile: Path, output: Path) -> list[str]:
    return ["run", "--dataset", str(EXAMPLES), "--profile", str(tiny_profile), "--max-tokens", "8", "--no-cache",
            "--no-report", "--window", "4", "--output", str(output)]


def test_on_a_terminal_a_run_moves_says_step_k_of_n_and_estimates_and_nothing_else_draws(tiny_profile, tmp_path):
    """A real run on a pseudo-terminal: what the screen got. The samples count moves before the end (each
    finished window), the step reads "k of at most n" in the first window and "k of n" once a window has
    finished, the run's end is estimated, and
    no line of the weights loader's bar ("Loading weights", `| 0/103 [00:00<?, ?it/s]`) or of a debug
    log reaches it."""
    import re

    code, screen = _screen(_tiny_run(tiny_profile, tmp_path / "run"), tmp_path, terminal=True)
    assert code == 0, screen[-3000:]
    seen = [int(n) for n in re.findall(r"samples (\d+)/12", screen)]
    assert 4 in seen and 8 in seen and seen.index(4) < seen.index(12), seen
    assert re.search(r"step \d of \d: ", screen) and re.search(r"run ends in ~\d+s( |$)", screen)
    assert re.search(r"window 1/3: \d+/20 scores · step \d of at most \d: ", screen)  # before a window has finished
    assert [t for t in THIRD_PARTY if t in screen] == [], screen[:3000]


def test_in_a_log_file_a_run_writes_whole_lines_and_no_other_library_writes(tiny_profile, tmp_path):
    """The same run with stdout and stderr sent to a file: no carriage return (a bar's redraw), and no
    line of another library's bar or debug log."""
    code, text = _screen(_tiny_run(tiny_profile, tmp_path / "run"), tmp_path, terminal=False)
    assert code == 0, text[-3000:]
    assert "\r" not in text and [t for t in THIRD_PARTY if t in text] == [], text[:3000]
    assert any(line.startswith("samples 0/12 · window 1/3") for line in text.splitlines()), text[:3000]


def test_once_every_sample_is_scored_the_line_times_nothing():
    # what is left is writing the summary: an estimate ("run ends in ~?") would be a figure about nothing
    stream = io.StringIO()
    progress = RunProgress(2, stream=stream, every=3600)
    progress.window(0, 1)
    progress.step()
    progress("options (judge)", 2).update(2)
    progress.sample()
    assert "run ends in ~" in progress.line and "every sample scored" not in progress.line
    progress.sample()
    assert progress.line == "samples 2/2 · window 1/1 · step 1 of ?: options (judge) 2/2 · every sample scored"
    progress.close()
    assert stream.getvalue().splitlines()[-1].endswith("every sample scored")
