"""Ctrl-C and SIGTERM (issue #33, item 2): a run interrupted in a real process ends with one line
saying how many samples are saved, keeps every finished window, and the rerun of the same command
resumes. The program ends by the signal, once it has unwound: a shell reports $? 130 (SIGINT) or 143
(SIGTERM), Python's subprocess a return code of -2 or -15, and a shell loop of runs stops at Ctrl-C;
``main(argv)`` called in a process returns 130 or 143."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# A model-free metric slow enough to be interrupted in the middle of a run.
SLOW = '''
import time

from offline_eval.metrics import register_metric
from offline_eval.metrics.base import Metric, Score


@register_metric
class SlowWords(Metric):
    name = "slow_words"
    requires = ("answer",)
    description = "words in the answer, one every few milliseconds"

    def score(self, sample, ctx):
        time.sleep(0.005)
        return Score(float(len(sample.answer.split())))
'''
ROWS, WINDOW = 1000, 20


def _command(tmp_path: Path, quiet: bool) -> list[str]:
    data = tmp_path / "d.jsonl"
    if not data.exists():
        data.write_text("".join(json.dumps({"id": f"s{i}", "question": "q", "answer": "a b " * (i % 5 + 1)}) + "\n"
                                for i in range(ROWS)), encoding="utf-8")
        (tmp_path / "slow.py").write_text(SLOW, encoding="utf-8")
    return [sys.executable, "-m", "offline_eval.cli", "run", "--dataset", str(data), "--plugin",
            str(tmp_path / "slow.py"), "--metrics", "slow_words", "--no-cache", "--no-report", "--window", str(WINDOW),
            "--output", str(tmp_path / "run")] + (["--quiet"] if quiet else [])


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _wait_for_a_window(results: Path, process: subprocess.Popen) -> None:
    """Until a window is certainly saved: the next one has reached the file (a signal during a window's
    own write cuts that window, and the line then says so)."""
    deadline = time.time() + 120
    while not (results.exists() and results.read_bytes().count(b"\n") > WINDOW):
        assert process.poll() is None and time.time() < deadline, process.communicate()
        time.sleep(0.01)


@pytest.mark.parametrize("signum, quiet", [(signal.SIGINT, True), (signal.SIGTERM, True), (signal.SIGINT, False)])
def test_an_interrupted_run_says_what_is_saved_in_one_line_and_the_rerun_resumes(tmp_path: Path, signum: int,
                                                                                 quiet: bool) -> None:
    results = tmp_path / "run" / "results.jsonl"
    run = subprocess.Popen(_command(tmp_path, quiet), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           cwd=tmp_path, env=_env())
    try:
        _wait_for_a_window(results, run)  # a window is saved: the run is scoring
        run.send_signal(signum)
        _, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == -signum, err  # ended by the signal, after the line below
    assert "Traceback" not in err, err
    lines = err.splitlines()
    if not quiet:  # off a terminal the progress lines are whole and the last word has a line of its own
        assert "\r" not in err and all(line.startswith("samples ") for line in lines[:-1]), lines
    else:
        assert len(lines) == 1, lines
    name = signal.Signals(signum).name
    found = re.fullmatch(rf"offline-eval: interrupted \({name}\); (\d+) of {ROWS} samples are saved in "
                         rf"{re.escape(str(tmp_path / 'run'))}; rerun the same command to resume", lines[-1])
    assert found, lines[-1]
    saved = int(found.group(1))
    text = results.read_text()
    assert text.endswith("\n") and len(text.splitlines()) == saved and 0 < saved < ROWS
    assert saved % WINDOW == 0  # whole windows: nothing torn, nothing of the window in flight
    again = subprocess.run(_command(tmp_path, True), capture_output=True, text=True, cwd=tmp_path, env=_env(),
                           timeout=300)
    assert again.returncode == 0, again.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["run"]["resumed_samples"] == saved and summary["run"]["n_samples"] == ROWS
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"s{i}" for i in range(ROWS)]
    assert all(r["scores"]["slow_words"]["value"] == 2 * (i % 5 + 1) for i, r in enumerate(rows))


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_shell_reports_130_or_143(tmp_path: Path, signum: int, status: int) -> None:
    command = " ".join(f"'{part}'" for part in _command(tmp_path, True))
    script = tmp_path / "run.sh"  # job control on: the run in the background still takes Ctrl-C
    script.write_text(f"set -m\n{command} &\necho $! > run.pid\nwait $!\necho \"status $?\"\n")
    shell = subprocess.Popen(["bash", str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=tmp_path, env=_env())
    try:
        _wait_for_a_window(tmp_path / "run" / "results.jsonl", shell)
        os.kill(int((tmp_path / "run.pid").read_text()), signum)
        out, err = shell.communicate(timeout=120)
    finally:
        if shell.poll() is None:
            shell.kill()
    assert out == f"status {status}\n", (out, err)
    ours = [line for line in err.splitlines() if "offline-eval: " in line or "Traceback" in line]
    assert len(ours) == 1 and ours[0].startswith(f"offline-eval: interrupted ({signal.Signals(signum).name}); ")


def test_a_loop_of_runs_in_a_shell_stops_at_ctrl_c(tmp_path: Path) -> None:
    """Ctrl-C reaches the shell and the run alike (one process group); the shell sees the run end by
    SIGINT and ends its loop, where an exit status of 130 would have it start the next run."""
    command = " ".join(f"'{part}'" for part in _command(tmp_path, True))
    script = tmp_path / "loop.sh"
    script.write_text(f"for i in 1 2; do\n  {command}\n  echo \"run $i: $?\"\ndone\necho after the loop\n")
    shell = subprocess.Popen(["bash", str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=tmp_path, env=_env(), start_new_session=True)
    try:
        _wait_for_a_window(tmp_path / "run" / "results.jsonl", shell)
        os.killpg(shell.pid, signal.SIGINT)  # what the terminal does at Ctrl-C
        out, err = shell.communicate(timeout=120)
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
    assert shell.returncode == -signal.SIGINT and out == "", (out, err)  # no second run, nothing after it
    assert err.count("offline-eval: interrupted (SIGINT); ") == 1 and err.count("\n") == 1, err


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_any_command_interrupted_is_one_line(tmp_path: Path, signum: int, code: int) -> None:
    script = ("import signal, sys\n"
              "import offline_eval.cli as cli, offline_eval.cli.metrics as listing\n"
              "def working(args):\n"
              f"    signal.raise_signal({int(signum)})  # a real signal while the command works\n"
              "listing.cmd_metrics = working\n"
              "sys.exit(cli.main(['metrics']))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=_env(),
                          timeout=120)
    assert done.returncode == code and done.stderr == f"offline-eval: interrupted ({signal.Signals(signum).name})\n", \
        done.stderr
