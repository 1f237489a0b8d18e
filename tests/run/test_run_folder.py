"""Nothing lost (issue #15, items 2, 3 and 5): one run per folder, another run's results never
overwritten, results streamed window by window."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from offline_eval.cli import main
from offline_eval.judging.settings import EvalSettings
from offline_eval.metrics import resolve_metrics
from offline_eval.run.folder import EARLIER, RunFolder, RunFolderError, default_run_folder
from offline_eval.run.runner import run_in_process
from offline_eval.runtime.hashing_embedder import HashingEmbedder
from offline_eval.runtime.scripted import ScriptedJudge
from tests.helpers import models
from tests.engine.test_engine import SCRIPT, _samples

REPO = Path(__file__).resolve().parents[2]


def _evaluate(samples, out, names=("faithfulness", "answer_similarity"), **kwargs):
    metrics, _ = resolve_metrics(list(names))
    return run_in_process(samples, metrics, models(ScriptedJudge(script=SCRIPT), embedder=HashingEmbedder()),
                          EvalSettings(claims="llm"), out, **kwargs)


def test_a_second_run_into_a_locked_folder_is_refused_naming_the_holder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from offline_eval.run.folder import RunFolder
        with RunFolder({str(out)!r}):
            print("locked", flush=True)
            time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunFolderError, match=rf"in use by another run \(pid {holder.pid} on .*another --output"):
            _evaluate(_samples(3), out)
        assert not (out / "results.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()
    # the kernel released the lock with the process: the folder is usable at once
    assert _evaluate(_samples(3), out).summary["run"]["n_samples"] == 3


def test_another_runs_folder_is_refused_then_kept_whole_with_overwrite(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    first = _evaluate(_samples(4), out, names=("answer_similarity",))
    before = {name: (out / name).read_bytes() for name in ("results.jsonl", "summary.json", "run.json")}
    with pytest.raises(RunFolderError, match=r"holds the results of another run \(.*metrics answer_similarity.*"
                                             r"--overwrite.*another --output"):
        _evaluate(_samples(4), out, names=("faithfulness",))
    assert {name: (out / name).read_bytes() for name in before} == before  # untouched
    second = _evaluate(_samples(4), out, names=("faithfulness",), overwrite=True)
    assert second.summary["run"]["metrics"] == ["faithfulness"]
    [kept] = list((out / EARLIER).iterdir())
    assert {name: (kept / name).read_bytes() for name in before} == before  # the earlier run, whole
    assert first.summary["run"]["fingerprint"][:8] in kept.name
    # a third run with overwrite keeps the second too, in its own folder
    _evaluate(_samples(4), out, names=("answer_similarity",), overwrite=True)
    assert len(list((out / EARLIER).iterdir())) == 2


def test_rerunning_the_same_run_resumes_instead_of_refusing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _evaluate(_samples(5), out)
    again = _evaluate(_samples(5), out)
    assert again.resumed == 5 and again.summary["run"]["n_samples"] == 5


def test_cli_refuses_with_one_line_and_default_output_stays_under_runs(tmp_path: Path, capsys,
                                                                       monkeypatch) -> None:
    assert default_run_folder("...jsonl") == Path("runs") / "dataset"
    assert default_run_folder("data/eval.jsonl") == Path("runs") / "eval"
    assert default_run_folder("../..", "agreement-", "-faithfulness") == Path("runs") / "agreement-dataset-faithfulness"
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "...jsonl"
    data.write_text(json.dumps({"id": "a", "question": "q", "answer": "a b c", "ground_truth": "a b d"}) + "\n")
    args = ["run", "--dataset", str(data), "--profile", "starter", "--quiet", "--no-report", "--no-cache"]
    assert main(args + ["--metrics", "rouge_l"]) == 0
    assert (tmp_path / "runs" / "dataset" / "results.jsonl").exists() and not (tmp_path / "results.jsonl").exists()
    capsys.readouterr()
    assert main(args + ["--metrics", "rouge_l,aggregate"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds the results of another run" in err[0] and "--overwrite" in err[0]
    assert main(args + ["--metrics", "rouge_l,aggregate", "--overwrite"]) == 0


def test_results_are_written_window_by_window_and_a_window_size_changes_no_score(tmp_path: Path) -> None:
    samples = _samples(10)
    sizes = []
    whole = _evaluate(samples, tmp_path / "whole", window=100)

    def seen(_row) -> None:  # how many rows results.jsonl holds when each sample finishes
        path = tmp_path / "w3" / "results.jsonl"
        sizes.append(len(path.read_text().splitlines()) if path.exists() else 0)

    windowed = _evaluate(samples, tmp_path / "w3", window=3, on_sample=seen)
    assert sorted(set(sizes)) == [0, 3, 6, 9]  # earlier windows are on disk before later ones finish
    assert windowed.summary["run"]["window"] == 3
    assert [r["scores"] for r in windowed.results] == [r["scores"] for r in whole.results]
    assert [r["id"] for r in windowed.results] == [s.id for s in samples]


def test_a_killed_windowed_run_keeps_its_finished_windows(tmp_path: Path) -> None:
    out = tmp_path / "run"
    samples = _samples(9)

    class Stop(Exception):
        pass

    def stop_after_six(row) -> None:
        if row.id == samples[6].id:
            raise Stop

    with pytest.raises(Stop):
        _evaluate(samples, out, window=3, on_sample=stop_after_six)
    assert [json.loads(line)["id"] for line in (out / "results.jsonl").read_text().splitlines()] == \
        [s.id for s in samples[:6]]
    with open(out / "results.jsonl", "a") as handle:  # and a kill in the middle of the next write
        handle.write('{"id": "' + samples[6].id + '", "scor')
    done = _evaluate(samples, out, window=3)
    assert done.resumed == 6 and [r["id"] for r in done.results] == [s.id for s in samples]


def test_finish_puts_rows_in_dataset_order_and_skips_cut_lines(tmp_path: Path) -> None:
    with RunFolder(tmp_path) as folder:
        folder.open("fp", {})
        folder.append([{"id": "b", "scores": {"m": {"value": 0.5}}, "sample": {"conversation_id": "c9"}},
                       {"id": "a", "scores": {"m": {"value": 1.0}}}])
        with open(tmp_path / "results.jsonl", "a") as handle:
            handle.write('{"id": "c", "sco')  # a kill in the middle of a line
        summary, n = folder.finish({"a": 0, "b": 1, "c": 2}, ["m"], {},
                                   summarize=lambda v, r, rows: {"values": v, "rows": rows})
    assert n == 2 and summary["values"] == {"m": [1.0, 0.5]}  # in dataset order
    assert summary["rows"] == [("a", None), ("b", "c9")]  # each row's id and conversation, in the same order
    assert [json.loads(x)["id"] for x in (tmp_path / "results.jsonl").read_text().splitlines()] == ["a", "b"]
    assert os.path.exists(tmp_path / "summary.json")


def test_lock_is_released_when_the_holder_is_killed(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", f"from offline_eval.run.folder import RunFolder\n"
                               f"f = RunFolder({str(tmp_path)!r}); f.lock(); print('x', flush=True)\n"
                               "import time; time.sleep(60)"], stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert holder.stdout.readline().strip() == "x"
    with pytest.raises(RunFolderError):
        RunFolder(tmp_path).lock()
    holder.kill()  # SIGKILL: no cleanup code runs
    holder.wait()
    deadline = time.time() + 5
    while True:
        try:
            with RunFolder(tmp_path):
                break
        except RunFolderError:
            assert time.time() < deadline
            time.sleep(0.05)


def test_a_rerun_of_a_finished_run_says_what_it_reused_and_keeps_the_first_tries_compute_time(
        tmp_path: Path, capsys, monkeypatch) -> None:
    """Issue #55: the same command again answered in seconds with no word of what it reused, and the
    report's duration became 0m 00s."""
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"id": f"s{i}", "question": "q", "answer": f"a b c {i}",
                                        "ground_truth": "a b d"}) + "\n" for i in range(3)))
    args = ["run", "--dataset", str(data), "--profile", "starter", "--quiet", "--no-cache", "--metrics", "rouge_l"]
    assert main(args) == 0
    first_err = capsys.readouterr().err
    assert "reused" not in first_err and "found a finished run" not in first_err
    out = tmp_path / "runs" / "data"
    first = json.loads((out / "summary.json").read_text())["run"]
    assert first["tries"] == [] and first["seconds"] >= 0
    assert not (out / ".lock").exists()  # a run that ended leaves no lock file behind

    assert main(args) == 0
    err = capsys.readouterr().err.splitlines()
    [line] = [x for x in err if "found a finished run" in x]
    assert f"found a finished run in {Path('runs') / 'data'} (started {first['started']})" in line
    assert "reused all 3 samples from results.jsonl" in line and "no model was called" in line
    run = json.loads((out / "summary.json").read_text())["run"]
    [earlier] = run["tries"]
    assert earlier["started"] == first["started"] and earlier["seconds"] == first["seconds"]
    assert earlier["scored_samples"] == 3 and run["resumed_samples"] == 3
    assert json.loads((out / "run.json").read_text())["tries"] == [earlier]
    page = (out / "report.html").read_text()
    assert "compute time, this try" in page and "every sample was scored already" in page
    assert "try 1" in page and "finished, 3 samples scored" in page

    assert main(args) == 0  # a third try lists both before it, in order
    run = json.loads((out / "summary.json").read_text())["run"]
    assert [t["scored_samples"] for t in run["tries"]] == [3, 0]


def test_an_interrupted_try_is_recorded_until_its_last_write(tmp_path: Path) -> None:
    out = tmp_path / "run"
    samples = _samples(6)

    class Stop(Exception):
        pass

    def stop_at_four(row) -> None:
        if row.id == samples[4].id:
            raise Stop

    with pytest.raises(Stop):
        _evaluate(samples, out, window=2, on_sample=stop_at_four)
    started = json.loads((out / "run.json").read_text())["started"]
    again = _evaluate(samples, out, window=2)
    [earlier] = again.summary["run"]["tries"]
    assert earlier["started"] == started and earlier["finished"] is None and earlier["last_written"]
    assert again.resumed == 4
    note = again.reuse_note()
    assert note.startswith(f"resumed the run in {out}: reused 4 of 6 samples from results.jsonl; model calls: ")


def test_a_lock_file_removed_by_the_run_that_held_it_is_not_locked_again(tmp_path: Path, monkeypatch) -> None:
    """The run that ends removes .lock while holding it. A process that opened that file before the
    removal and locks it after must see that it holds a removed file and lock the new one, or two runs
    would hold the folder at once."""
    import offline_eval.run.folder as folder_module

    out = tmp_path / "run"
    with RunFolder(out):
        pass
    assert not (out / ".lock").exists()
    real, locked = folder_module.flock_exclusive, []

    def removed_as_we_lock(handle) -> None:
        real(handle)
        locked.append(os.fstat(handle.fileno()).st_ino)
        if len(locked) == 1:  # the holder removed the file we opened, between our open and our lock
            os.unlink(out / ".lock")

    monkeypatch.setattr(folder_module, "flock_exclusive", removed_as_we_lock)
    with RunFolder(out) as run:
        assert len(locked) == 2  # it opened and locked the file again
        assert os.stat(out / ".lock").st_ino == locked[1] == os.fstat(run._lock_handle.fileno()).st_ino
