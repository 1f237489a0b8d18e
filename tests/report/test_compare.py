"""Run comparison: pairing by id, paired bootstrap deltas, regression gate, text and HTML output."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

from offline_eval.cli.report import main
from offline_eval.report.compare import (
    compare_runs, format_comparison, print_comparison, regression_failures, write_comparison_html,
)

from tests.report.test_report_fixtures import METRICS, build_run

REPO = Path(__file__).resolve().parents[2]


def test_lower_faithfulness_is_a_significant_regression(tmp_path):
    a = build_run(tmp_path, name="a")
    b = build_run(tmp_path, name="b", shift={"faithfulness": -0.2})
    comp = compare_runs(a, b)
    assert comp.n_common == 12 and not comp.only_in_a and not comp.only_in_b
    assert [m.name for m in comp.metrics] == METRICS
    f = comp.metric("faithfulness")
    assert f.n_pairs == 11  # the sample without an answer is unscored in both runs
    assert f.delta < -0.1 and f.ci95[1] < 0 and f.p_value < 0.05
    assert f.regressed and not f.improved and f.verdict == "regressed"
    assert f.delta == (f.mean_b - f.mean_a) or abs(f.delta - (f.mean_b - f.mean_a)) < 1e-12
    # Most-regressed samples: all got worse, worst first.
    deltas = [s.delta for s in f.most_regressed]
    assert deltas and all(d < 0 for d in deltas) and deltas == sorted(deltas)
    for name in METRICS[1:]:
        m = comp.metric(name)
        assert m.delta == 0 and m.p_value == 1.0 and not m.regressed and not m.most_regressed
    failures = regression_failures(comp)
    assert len(failures) == 1 and failures[0].startswith("faithfulness regressed: ")
    assert "p<0.001" in failures[0] or "p=0.0" in failures[0]


def test_direction_aware_for_lower_is_better_metrics(tmp_path):
    a = build_run(tmp_path, name="a")
    worse = compare_runs(a, build_run(tmp_path, name="worse", shift={"hallucination_rate": 0.2}))
    better = compare_runs(a, build_run(tmp_path, name="better", shift={"hallucination_rate": -0.2}))
    assert worse.metric("hallucination_rate").regressed
    assert "(lower is better)" in regression_failures(worse)[0]
    assert better.metric("hallucination_rate").improved and not regression_failures(better)
    improved = compare_runs(a, build_run(tmp_path, name="up", shift={"faithfulness": 0.2}))
    assert improved.metric("faithfulness").improved and not improved.regressions


def test_identical_runs_have_no_change(tmp_path):
    a = build_run(tmp_path, name="a")
    comp = compare_runs(a, a)
    assert all(m.delta == 0 and not m.significant for m in comp.metrics)
    assert regression_failures(comp) == []


def test_pairs_by_id_not_position(tmp_path):
    a = build_run(tmp_path, name="a")
    b = build_run(tmp_path, name="b", shift={"faithfulness": -0.2})
    lines = (b / "results.jsonl").read_text(encoding="utf-8").splitlines()
    kept = list(reversed(lines[1:]))  # drop q01, shuffle order
    extra = json.loads(lines[0])
    extra["id"] = "only-in-b"
    (b / "results.jsonl").write_text("\n".join(kept + [json.dumps(extra)]) + "\n", encoding="utf-8")
    comp = compare_runs(a, b)
    assert comp.only_in_a == ["q01"] and comp.only_in_b == ["only-in-b"] and comp.n_common == 11
    f = comp.metric("faithfulness")
    assert f.n_pairs == 10 and f.regressed
    # Pairing by id: per-sample deltas are exactly the shift applied to that id.
    ra = {json.loads(l)["id"]: json.loads(l) for l in (a / "results.jsonl").read_text(encoding="utf-8").splitlines()}
    for s in f.most_regressed:
        assert s.a == ra[s.id]["scores"]["faithfulness"]["value"]
    assert "1 samples only in A" in format_comparison(comp)


def test_metric_missing_from_one_run_is_reported(tmp_path):
    a = build_run(tmp_path, name="a")
    b = build_run(tmp_path, name="b")
    summary = json.loads((b / "summary.json").read_text(encoding="utf-8"))
    summary["run"]["metrics"] = METRICS + ["new_metric"]
    (b / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    comp = compare_runs(a, b)
    assert comp.metrics_only_in_b == ["new_metric"]
    assert "metrics only in B: new_metric" in format_comparison(comp)


def test_text_output_is_plain_when_not_a_tty(tmp_path):
    a = build_run(tmp_path, name="a")
    b = build_run(tmp_path, name="b", shift={"faithfulness": -0.2})
    buf = io.StringIO()
    comp = compare_runs(a, b)
    comp_f = comp.metric("faithfulness")
    print_comparison(comp, file=buf)
    out = buf.getvalue()
    assert "\x1b[" not in out
    row = next(l for l in out.splitlines() if l.startswith("faithfulness"))
    assert row.split()[-1] == "regressed"
    assert row.split()[1:3] == [f"{comp_f.mean_a:.3f}", f"{comp_f.mean_b:.3f}"]


def test_html_comparison_beside_run_b_and_escaped(tmp_path):
    a = build_run(tmp_path, name="a")
    b = build_run(tmp_path, name="b<x>", shift={"faithfulness": -0.2})
    path = write_comparison_html(compare_runs(a, b))
    assert path == b / "compare.html"
    html = path.read_text(encoding="utf-8")
    assert "b&lt;x&gt;" in html and "<x>" not in html
    assert not re.search(r"https?://", html)
    assert "<tr data-metric='faithfulness' data-verdict='regressed'>" in html
    assert "<tr data-metric='answer_relevancy' data-verdict='same'>" in html
    assert "id='regressions'" in html
    section = html.split("class='regressed-samples' data-metric='faithfulness'", 1)[1].split("</section>", 1)[0]
    assert section.count("<tr>") >= 5


def test_cli_compare_exit_codes(tmp_path, capsys):
    a = build_run(tmp_path, name="a")
    b = build_run(tmp_path, name="b", shift={"faithfulness": -0.2})
    out_dir = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), "--output", str(out_dir), "--fail-on-regression"]) == 1
    captured = capsys.readouterr()
    assert (out_dir / "compare.html").exists()
    assert "REGRESSION: faithfulness regressed" in captured.err
    assert main(["compare", str(a), str(b)]) == 0  # without the gate: report only
    assert (b / "compare.html").exists()
    assert main(["compare", str(a), str(a), "--fail-on-regression", "-o", str(out_dir)]) == 0
    assert main(["compare", str(a), str(tmp_path / "missing")]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_cli_as_a_process(tmp_path):
    a = build_run(tmp_path, name="a")
    b = build_run(tmp_path, name="b", shift={"faithfulness": -0.3})
    cmd = [sys.executable, "-m", "offline_eval.cli.report"]
    bad = subprocess.run(cmd + ["compare", str(a), str(b), "--fail-on-regression"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1, bad.stderr
    assert bad.stderr.strip().splitlines()[0].startswith("REGRESSION: faithfulness regressed")
    ok = subprocess.run(cmd + ["report", str(a)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and ok.stdout.strip() == str(a / "report.html")


def test_comparing_starter_runs_says_so(tmp_path, capsys):
    a = build_run(tmp_path, name="a", starter=True)
    b = build_run(tmp_path, name="b", shift={"faithfulness": -0.2})
    comparison = compare_runs(a, b)
    assert comparison.starter == ["A"]
    assert main(["compare", str(a), str(b), "--output", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "starter profile (A): these scores only show that the pipeline runs" in out
    html = (tmp_path / "cmp" / "compare.html").read_text(encoding="utf-8")
    assert "starter profile (A)" in html
