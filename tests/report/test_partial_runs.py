"""Runs that hold less than they seem to: a candidate missing samples the baseline scored, a comparison on
too few pairs for an interval, a run that has not finished, a finished run whose rows are missing. Each
says so; a gate on it fails or refuses rather than passing on what is left."""

from __future__ import annotations

import json
from pathlib import Path

from offline_eval.cli.report import main
from offline_eval.report.compare import compare_runs, format_comparison, gate_lines
from offline_eval.report.html import render_report, write_report
from offline_eval.report._run import load_run
from offline_eval.runlog import RESULTS, RUN_INFO, SUMMARY
from offline_eval.thresholds import MIN_PAIRS

from tests.report.test_report_fixtures import METRICS, build_run


def _keep_rows(run: Path, keep: int, *, cut_last: bool = False) -> None:
    """Keep ``run``'s first ``keep`` result rows and a summary recomputed from them (as a run on
    ``--limit keep`` writes it); with ``cut_last`` the next row follows, cut short as a kill leaves it."""
    lines = (run / RESULTS).read_text(encoding="utf-8").splitlines()
    text = "".join(line + "\n" for line in lines[:keep])
    if cut_last:
        text += lines[keep][: len(lines[keep]) // 2]
    (run / RESULTS).write_text(text, encoding="utf-8")
    summary = json.loads((run / SUMMARY).read_text(encoding="utf-8"))
    summary["metrics"] = {}  # recomputed from the rows by load_run
    summary["run"]["n_samples"] = keep + (1 if cut_last else 0)  # the cut row was whole when summary.json was written
    (run / SUMMARY).write_text(json.dumps(summary), encoding="utf-8")


def _gate(a: Path, b: Path, out: Path, *extra: str) -> int:
    return main(["compare", str(a), str(b), "-o", str(out), "--fail-on-regression", *extra])


# --- a candidate missing samples -----------------------------------------------------------------

def test_a_candidate_missing_samples_the_baseline_scored_fails_the_gate_and_says_how_many(tmp_path, capsys):
    a, b = build_run(tmp_path, name="a"), build_run(tmp_path, name="b")
    _keep_rows(b, 8)  # the same dataset run with --limit 8: q09..q12 are gone
    faith = compare_runs(a, b).metric("faithfulness")
    assert (faith.n_pairs, faith.missing_in_b, faith.n_either) == (7, 4, 11)  # q08 has no answer in either
    assert _gate(a, b, tmp_path / "cmp") == 1
    out, err = capsys.readouterr()
    assert "4 samples only in A (no pair: not in the deltas; --fail-on-regression counts them as missing from B)" in out
    assert "gate: faithfulness: delta +0.000 over 7 pairs of the 11 samples scored in A or B (4 missing from B, " \
           "36%; at most 10% allowed, --max-unscored)" in out
    assert "GATE FAILED: faithfulness: 4 of the 11 samples scored in A or B are not paired (4 missing from B; 36%)" in err
    # the other way round the candidate has rows the baseline lacks (a dataset that grew): new rows, no
    # regression, so they fail no metric (the gate refuses only answer_correctness, on 5 pairs)
    assert _gate(b, a, tmp_path / "cmp") == 2
    out, err = capsys.readouterr()
    assert "4 samples only in B (no pair: not in the deltas)" in out
    assert "faithfulness: delta +0.000 over 7 pairs of the 7 samples scored in A or B (0 unscored in the other, 0%" in out
    assert "GATE FAILED" not in err and "cannot gate: answer_correctness: 5 pairs" in err


def test_a_candidate_whose_results_lost_their_cut_last_line_is_refused(tmp_path, capsys):
    a, b = build_run(tmp_path, name="a"), build_run(tmp_path, name="b")
    _keep_rows(b, 11, cut_last=True)  # 11 whole rows and half of the 12th; summary.json counts 12
    assert _gate(a, b, tmp_path / "cmp") == 2
    out, err = capsys.readouterr()
    assert f"B ({b}): {RESULTS} holds 11 of the 12 samples {SUMMARY} counts" in out
    [line] = err.strip().splitlines()
    assert line.startswith(f"offline-eval compare: cannot gate: run B ({b}): {RESULTS} holds 11 of the 12 samples")
    assert "rerun the same `offline-eval run` command" in line


# --- too few pairs ---------------------------------------------------------------------------------

def test_too_few_pairs_show_no_interval_and_the_gate_refuses_them(tmp_path, capsys):
    a = build_run(tmp_path, name="a")
    b = build_run(tmp_path, name="b", shift={"faithfulness": -0.5})
    for run in (a, b):
        _keep_rows(run, 1)
    comparison = compare_runs(a, b)
    faith = comparison.metric("faithfulness")
    assert faith.n_pairs == 1 and faith.delta < 0 and faith.ci95 is None and faith.p_value is None
    assert not faith.regressed and faith.verdict == f"too few pairs for an interval (n=1, needs at least {MIN_PAIRS})"
    text = format_comparison(comparison)
    assert "<0.001" not in text and "too few pairs for an interval (n=1, needs at least 6)" in text
    assert _gate(a, b, tmp_path / "cmp") == 2
    err = capsys.readouterr().err
    assert "REGRESSION" not in err
    assert f"offline-eval compare: cannot gate: faithfulness: 1 pair of the 1 sample scored in A or B, too few for " \
           f"an interval (needs at least {MIN_PAIRS}" in err


def test_a_p_value_is_never_below_what_an_exact_test_on_its_pairs_allows(tmp_path):
    a = build_run(tmp_path, name="a")
    b = build_run(tmp_path, name="b", shift={"faithfulness": -0.5})
    for run in (a, b):
        _keep_rows(run, MIN_PAIRS)
    faith = compare_runs(a, b).metric("faithfulness")  # every one of the 6 pairs lower in B
    assert faith.n_pairs == MIN_PAIRS and faith.ci95 is not None
    assert faith.p_value == 2.0 ** (1 - MIN_PAIRS) and faith.regressed  # 0.031, not the bootstrap's 0.0005


# --- a run that has not finished, a finished run without its rows ---------------------------------

def _unfinished(tmp_path: Path, *, starter: bool) -> Path:
    """A run killed after its first 5 samples: results.jsonl so far and run.json, no summary.json."""
    run = build_run(tmp_path, name="killed", starter=starter)
    summary = json.loads((run / SUMMARY).read_text(encoding="utf-8"))
    started = {key: value for key, value in summary["run"].items() if key not in ("finished", "n_samples")}
    (run / RUN_INFO).write_text(json.dumps({"fingerprint": "f00d", **started, "tries": []}), encoding="utf-8")
    (run / SUMMARY).unlink()
    lines = (run / RESULTS).read_text(encoding="utf-8").splitlines()
    (run / RESULTS).write_text("".join(line + "\n" for line in lines[:5]), encoding="utf-8")
    return run


def _top(html: str) -> str:
    """The page up to its summary table: what a reader sees first."""
    return html.split("<section id='summary'>", 1)[0]


def test_the_report_of_an_unfinished_run_says_so_and_keeps_the_starter_warning(tmp_path, capsys):
    run = _unfinished(tmp_path, starter=True)
    assert main(["report", str(run)]) == 0
    err = capsys.readouterr().err
    assert "offline-eval report: unfinished run: 5 samples scored so far" in err and "starter profile" in err
    top = _top((run / "report.html").read_text(encoding="utf-8"))
    assert "id='partial-banner'" in top and "unfinished run: 5 samples scored so far" in top
    assert "id='starter-banner'" in top
    assert "samples: <b>5 scored so far (unfinished)</b>" in top and "demo &lt;qa&gt;.jsonl" in top


def test_compare_without_a_gate_says_it_reads_a_partial_run(tmp_path, capsys):
    a, b = build_run(tmp_path, name="a"), _unfinished(tmp_path, starter=True)
    assert main(["compare", str(a), str(b), "-o", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "B has not finished (no summary.json): reading a partial run" in out
    assert "starter profile (B)" in out  # read from run.json, as the run recorded it when it started


def test_the_report_of_a_finished_run_without_its_rows_says_they_are_missing(tmp_path):
    run = build_run(tmp_path)
    (run / RESULTS).write_text("", encoding="utf-8")
    top = _top(render_report(load_run(run)))
    assert f"{RESULTS} is empty: {SUMMARY} counts 12 scored samples" in top
    assert "samples: <b>12 in the summary, 0 rows in the results</b>" in top
    (run / RESULTS).unlink()
    top = _top(write_report(run).read_text(encoding="utf-8"))
    assert "id='partial-banner'" in top and f"{RESULTS} is missing: {SUMMARY} counts 12 scored samples" in top


def test_a_whole_run_has_no_partial_banner(tmp_path):
    run = build_run(tmp_path)
    assert "partial-banner" not in render_report(load_run(run))
    assert not compare_runs(run, run).partial and METRICS[0] in gate_lines(compare_runs(run, run))[0]


def test_an_unfinished_run_s_report_says_how_many_of_its_samples_are_scored(tmp_path, capsys):
    """run.json records the dataset's size when the run starts, so a report of a run stopped after its
    first window says "k of n"."""
    from offline_eval.cli import main as cli

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "question": "Where is Paris?", "answer": "In France.",
                                        "ground_truth": "Paris is in France."}) + "\n" for i in range(5)),
                    encoding="utf-8")
    out = tmp_path / "run"
    assert cli(["run", "--dataset", str(data), "--metrics", "rouge_l", "--profile", "starter", "--no-cache",
                "--quiet", "--no-report", "--window", "2", "--output", str(out)]) == 0
    assert json.loads((out / RUN_INFO).read_text(encoding="utf-8"))["n_samples"] == 5
    (out / SUMMARY).unlink()  # as a run stopped after its first window leaves it, but for its rows
    lines = (out / RESULTS).read_text(encoding="utf-8").splitlines(keepends=True)
    (out / RESULTS).write_text("".join(lines[:2]), encoding="utf-8")
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    assert "unfinished run: 2 of 5 samples scored so far" in capsys.readouterr().err
