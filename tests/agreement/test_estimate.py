"""What the experts would say (issue #27): the PPI estimator, Cohen's kappa, `offline-eval estimate`, the run's
summary and report with labels, and `calibrate --run` fitting as `calibrate` does by scoring again."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from offline_eval.cli import main
from offline_eval.people.estimate import (
    DEFAULT_PREDICTION, combine_labels, cross_fitted, estimate_rate, estimate_run, ppi_mean,
    stratified_folds, wilson_interval,
)
from offline_eval.people.calibration import fit_platt, read_calibrations
from offline_eval.people.labels import Label, cohen_kappa

from tests.report.test_report_fixtures import EVIL, build_run


# --- the estimator by hand -----------------------------------------------------------------------------
Y = [1, 0, 1, 1]
F_LAB = [0.9, 0.2, 0.6, 0.8]
F_UNL = [0.7, 0.1, 0.5, 0.9, 0.3, 0.4]


def test_ppi_on_a_tiny_example_matches_the_hand_computation():
    # n = 4 labelled, N_U = 6 others. mean(Y) = 0.75, mean_L(f) = 0.625, mean_U(f) = 2.9/6.
    # Cov_L(Y, f) = 0.425/4 = 0.10625; Var(f) over all 10 rows = 3.66/10 - 0.54^2 = 0.0744.
    lam = 0.10625 / ((1 + 4 / 6) * 0.0744)
    assert lam == pytest.approx(0.8568548, abs=1e-6)
    value = lam * 2.9 / 6 + (0.75 - lam * 0.625)
    assert value == pytest.approx(0.6286122, abs=1e-6)
    est = ppi_mean(Y, F_LAB, F_UNL, form="normal")
    assert est.value == pytest.approx(value, abs=1e-12) and est.extra["lambda"] == pytest.approx(lam, abs=1e-12)
    # For the 10 rows themselves: b = lam * 10/6; residuals Y - b f; se^2 = (1 - 4/10) * s^2 / 4 (s^2: n - 1).
    b = lam * 10 / 6
    r = [y - b * f for y, f in zip(Y, F_LAB)]
    s2 = sum((x - sum(r) / 4) ** 2 for x in r) / 3
    z = 1.959963984540054
    half = z * math.sqrt(0.6 * s2 / 4)
    assert est.ci95 == pytest.approx((value - half, value + half), abs=1e-12)
    assert est.ci95 == pytest.approx((0.475244, 0.781980), abs=1e-6)
    # The score form (the default): S^2 = theta (1 - theta) + b^2 Var_L(f) - 2 b Cov_L(Y, f) (n - 1 each),
    # (value - theta)^2 <= z^2 / m * S^2 with m = 4 * 9 / 6 = 6, solved for theta.
    rest = b * b * (0.2875 / 3) - 2 * b * (0.425 / 3)
    k = z * z / 6
    qa, qb, qc = 1 + k, -(2 * value + k), value * value - k * rest
    root = math.sqrt(qb * qb - 4 * qa * qc)
    score = ppi_mean(Y, F_LAB, F_UNL)
    assert score.value == est.value
    assert score.ci95 == pytest.approx(((-qb - root) / (2 * qa), (-qb + root) / (2 * qa)), abs=1e-12)
    assert score.ci95 == pytest.approx((0.468878, 0.687943), abs=1e-6)
    # With lambda = 0 (a judge that says nothing) it is the labels' own Wilson interval.
    assert ppi_mean(Y, [0.5] * 4, [0.5] * 6).ci95 == pytest.approx(wilson_interval(3, 4, population=10), abs=1e-12)
    # PPI's own interval (the population the rows came from): lam^2 Var_U(f)/N_U + Var_L(Y - lam f)/n.
    wide = ppi_mean(Y, F_LAB, F_UNL, finite=False)
    assert wide.value == pytest.approx(value, abs=1e-12)
    assert wide.ci95 == pytest.approx((0.332178, 0.925047), abs=1e-6)


def test_wilson_interval_matches_the_published_values():
    assert wilson_interval(3, 4) == pytest.approx((0.300642, 0.954413), abs=1e-5)  # Newcombe 1998, 3/4
    # For 4 of 10 rows: n counts as 4 * 9 / 6 = 6; every row labelled: the rate is known.
    assert wilson_interval(3, 4, population=10) == pytest.approx((0.364823, 0.940010), abs=1e-5)
    assert wilson_interval(7, 10, population=10) == (0.7, 0.7)
    assert wilson_interval(0, 0) is None


def test_lambda_is_clipped_and_one_answer_gives_the_labels_interval():
    against = ppi_mean([1, 0, 1, 0], [0.1, 0.9, 0.2, 0.8], [0.5] * 6)  # a judge that is backwards
    assert against.extra["lambda"] == 0.0 and against.value == 0.5  # clipped: the labels alone
    plain, ppi = estimate_rate([0.9, 0.8, 0.7], [1, 1, 1], [0.2, 0.4])
    assert ppi.extra["prediction"] == "none" and ppi.ci95 == plain.ci95 and ppi.ci95[0] < 1.0  # never a point


def test_cross_fitting_never_fits_the_map_on_the_rows_it_predicts():
    rng = np.random.default_rng(3)
    y = (rng.random(40) < 0.5).astype(float)
    f = np.clip(0.3 + 0.4 * y + rng.normal(0, 0.2, 40), 0.01, 0.99)
    unl = rng.random(25)
    gl, gu = cross_fitted(f, y, unl, folds=5, seed=0)
    fold = stratified_folds(y, 5, 0)
    expected_unl = np.zeros(25)
    for j in range(5):
        a, b = fit_platt(f[fold != j], y[fold != j])  # fitted on the other folds only
        logit = np.log(np.clip(f[fold == j], 1e-4, 1 - 1e-4) / (1 - np.clip(f[fold == j], 1e-4, 1 - 1e-4)))
        assert gl[fold == j] == pytest.approx(1 / (1 + np.exp(-(a * logit + b))))
        lu = np.log(np.clip(unl, 1e-4, 1 - 1e-4) / (1 - np.clip(unl, 1e-4, 1 - 1e-4)))
        expected_unl += 1 / (1 + np.exp(-(a * lu + b))) / 5
    assert gu == pytest.approx(expected_unl)  # the others: the mean of the five maps


@pytest.mark.parametrize("prediction", ["raw", "calibrated"])
def test_ppi_is_unbiased_and_covers_on_simulated_data(prediction):
    rng = np.random.default_rng(11)
    N, n, draws = 300, 40, 300
    y = (rng.random(N) < 0.6).astype(float)
    f = 1 / (1 + np.exp(-(2.0 * (y - 0.5) + rng.normal(0, 1, N) - 0.8)))  # informative, badly scaled
    truth = y.mean()
    assert abs(f.mean() - truth) > 0.1  # the judge's mean alone is far off
    est, hits, ppi_w, lab_w, ppi_err, lab_err = [], 0, [], [], [], []
    for _ in range(draws):
        order = rng.permutation(N)
        plain, ppi = estimate_rate(f[order[:n]], y[order[:n]], f[order[n:]], prediction=prediction)
        est.append(ppi.value)
        hits += ppi.ci95[0] <= truth <= ppi.ci95[1]
        ppi_w.append(ppi.ci95[1] - ppi.ci95[0])
        lab_w.append(plain.ci95[1] - plain.ci95[0])
        ppi_err.append(abs(ppi.value - truth))
        lab_err.append(abs(plain.value - truth))
    se = np.std(est) / math.sqrt(draws)
    assert abs(np.mean(est) - truth) < 3 * se + 0.003  # unbiased
    assert 0.90 <= hits / draws <= 0.99  # 95% intervals, 300 draws
    assert np.mean(ppi_w) < 0.9 * np.mean(lab_w) and np.mean(ppi_err) < np.mean(lab_err)


def test_an_uninformative_judge_costs_almost_nothing():
    rng = np.random.default_rng(5)
    N, n = 300, 60
    y = (rng.random(N) < 0.4).astype(float)
    f = rng.random(N)  # noise
    ratios = []
    for _ in range(100):
        order = rng.permutation(N)
        plain, ppi = estimate_rate(f[order[:n]], y[order[:n]], f[order[n:]], prediction="raw")
        ratios.append((ppi.ci95[1] - ppi.ci95[0]) / (plain.ci95[1] - plain.ci95[0]))
    assert np.mean(ratios) < 1.05


# --- labels and kappa --------------------------------------------------------------------------------
def test_kappa_and_the_majority_of_annotators_by_hand():
    a = [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    b = [1, 1, 1, 1, 0, 0, 0, 0, 0, 1]
    # p_o = 7/10; p_e = 0.6 * 0.5 + 0.4 * 0.5 = 0.5; kappa = (0.7 - 0.5) / (1 - 0.5)
    assert cohen_kappa({i: bool(x) for i, x in enumerate(a)}, {i: bool(x) for i, x in enumerate(b)}) == pytest.approx(0.4)
    assert cohen_kappa({1: True, 2: True}, {1: True, 2: True}) is None  # chance agreement certain: undefined
    labels = [Label(f"r{i}", "faithfulness", bool(x), annotator="ann") for i, x in enumerate(a)]
    labels += [Label(f"r{i}", "faithfulness", bool(x), annotator="bob") for i, x in enumerate(b)]
    labels += [Label("r4", "faithfulness", True, annotator="cy"),  # breaks the tie on r4 (yes)
               Label("r9", "faithfulness", None, annotator="cy"),  # unsure counts for nothing: r9 a tie
               Label("r0", "faithfulness", False, annotator="bob"),  # bob corrects himself on r0
               Label("u1", "faithfulness", None, annotator="ann")]
    combined = combine_labels(labels)["faithfulness"]
    assert combined.rows["r4"] == 1.0 and "r5" not in combined.rows and "r9" not in combined.rows
    assert "r0" not in combined.rows  # ann yes, bob (corrected) no: a tie
    assert combined.counts == {"tie": 3, "unsure": 1}
    kappas = {tuple(k["annotators"]): k for k in combined.kappas()}
    assert kappas[("ann", "bob")]["n"] == 10
    # with r0 corrected: p_o = 6/10, p_e = 0.6 * 0.4 + 0.4 * 0.6 = 0.48
    assert kappas[("ann", "bob")]["kappa"] == pytest.approx((0.6 - 0.48) / 0.52, abs=1e-6)
    assert ("ann", "cy") in kappas and kappas[("ann", "cy")]["n"] == 1


# --- the command ---------------------------------------------------------------------------------------
def _write_labels(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _run_with_labels(tmp_path: Path) -> tuple[Path, list[dict]]:
    run = build_run(tmp_path)
    records = [json.loads(line) for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    faith = {r["id"]: r["scores"]["faithfulness"]["value"] for r in records}
    labels = [{"id": i, "metric": "faithfulness", "label": v >= 0.5, "annotator": "alice"}
              for i, v in list(faith.items())[:8] if v is not None]
    labels += [{"id": i, "metric": "faithfulness", "label": "yes" if v >= 0.4 else "no", "annotator": EVIL}
               for i, v in list(faith.items())[:6] if v is not None]
    labels += [{"id": "nowhere", "metric": "faithfulness", "label": "yes"},
               {"id": "q01", "metric": "no_such_metric", "label": "no"},
               {"id": "q08", "metric": "faithfulness", "label": "no"}]  # q08 is unscored (empty answer)
    return run, labels


def test_estimate_json_has_the_documented_shape_and_counts_what_it_cannot_use(tmp_path, capsys):
    run, labels = _run_with_labels(tmp_path)
    path = _write_labels(tmp_path / "expert.jsonl", labels)
    assert main(["estimate", str(run), "--labels", str(path), "--json", "--no-write"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)  # exactly one JSON object
    assert list(result) == ["faithfulness"]
    fa = result["faithfulness"]
    assert {"n_labelled", "n", "judge_mean", "labels_only", "ppi", "kappa"} <= set(fa)
    assert set(fa["labels_only"]) >= {"value", "ci95"} and set(fa["ppi"]) >= {"value", "ci95"}
    assert fa["n"] == 11  # the scored rows
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert fa["judge_mean"] == pytest.approx(summary["metrics"]["faithfulness"]["mean"], abs=1e-6)
    # q01-q07 labelled by alice, q01-q06 by EVIL; they split on q05; "nowhere" is no row, q08 is unscored
    assert fa["excluded"] == {"tie": 1, "unknown_id": 1, "unscored": 1}
    assert fa["n_labelled"] == 6 and fa["n_yes"] == 3
    # on q01-q06: p_o = 5/6, p_e = 3/6 * 4/6 + 3/6 * 2/6 = 1/2, kappa 2/3 by the formula, but on 6 shared
    # labels, fewer than MIN_SHARED_LABELS: none given
    assert fa["kappa"] == [{"annotators": sorted(["alice", EVIL]), "n": 6, "kappa": None}]
    lo, hi = fa["ppi"]["ci95"]
    assert 0.0 <= lo <= fa["ppi"]["value"] <= hi <= 1.0
    assert "no_such_metric" in err and "unknown_id 1" in err  # reported, not silently dropped
    assert "estimates" not in summary  # --no-write


def test_estimate_table_and_summary_and_report(tmp_path, capsys):
    run, labels = _run_with_labels(tmp_path)
    _write_labels(run / "labels.jsonl", labels)  # the folder's own labels: the default
    from offline_eval.report.html import write_report
    write_report(run)
    assert main(["estimate", str(run)]) == 0
    out, _ = capsys.readouterr()
    assert "what your experts would say" in out and "faithfulness" in out and "\x1b" not in out
    assert "too few shared labels (n 6, needs 10)" in out  # alice and EVIL share 6 labels: no kappa
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert summary["estimates"]["faithfulness"]["n"] == 11
    assert summary["estimates_source"]["unknown_metrics"] == {"no_such_metric": 1}
    page = (run / "report.html").read_text(encoding="utf-8")  # rewritten with the estimates
    assert "What your experts would say" in page and "id='estimates'" in page
    assert EVIL not in page and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page
    assert "too few shared labels (n 6, needs 10)" in page
    from offline_eval.report.terminal import format_summary
    assert "what your experts would say" in format_summary(summary)


def test_a_kappa_on_too_few_shared_labels_is_not_shown_from_any_summary(tmp_path):
    """Two annotators who gave the same yes and no to 2 samples have kappa 1.0 by the formula: the
    estimate gives none on fewer than MIN_SHARED_LABELS, and the table and the report say why, even
    reading a summary.json that holds such a number."""
    labels = [Label(f"r{i}", "faithfulness", i == 0, annotator=who) for who in ("ann", "bob") for i in range(2)]
    assert combine_labels(labels)["faithfulness"].kappas() == [{"annotators": ["ann", "bob"], "n": 2, "kappa": None}]
    run = build_run(tmp_path)
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    enough = {"annotators": ["ann", "cy"], "n": 10, "kappa": 0.4}
    summary["estimates"] = {"faithfulness": {"n_labelled": 2, "n": 11, "kappa": [
        {"annotators": ["ann", "bob"], "n": 2, "kappa": 1.0}, enough]}}
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    from offline_eval.report.html import write_report
    from offline_eval.report.terminal import format_estimates
    table = "\n".join(format_estimates(summary["estimates"]))
    assert "ann/bob too few shared labels (n 2, needs 10)" in table and "1.00" not in table
    assert "ann/cy 0.40 (n 10)" in table
    page = write_report(run).read_text(encoding="utf-8")
    section = page[page.index("id='estimates'"):page.index("id='distributions'")]
    assert "ann / bob: too few shared labels (n 2, needs 10)" in section and "1.00" not in section
    assert "ann / cy: 0.40 (n 10)" in section


def test_a_report_survives_a_hostile_estimates_section(tmp_path):
    run = build_run(tmp_path)
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    name = EVIL + "\x1b[2J"
    summary["estimates"] = {name: {"n_labelled": EVIL, "n": None, "judge_mean": EVIL, "question": EVIL,
                                   "labels_only": {"value": EVIL, "ci95": [EVIL, 2]}, "ppi": EVIL,
                                   "kappa": [{"annotators": [EVIL, 3], "kappa": EVIL, "n": EVIL}, EVIL],
                                   "excluded": {EVIL: EVIL}, "higher_is_better": EVIL}, "x": EVIL}
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    from offline_eval.report.html import write_report
    from offline_eval.report.terminal import format_summary
    page = write_report(run).read_text(encoding="utf-8")
    section = page[page.index("id='estimates'"):page.index("id='distributions'")]
    assert EVIL not in page and "<script>" not in section and "<img" not in section
    assert section.count("&lt;script&gt;window.__pwned=1&lt;/script&gt;") >= 4  # name, question, kappa, excluded
    text = format_summary(summary)
    assert "\x1b" not in text and "\\x1b[2J" in text  # a control character is shown escaped, never sent


def test_an_estimate_s_caveat_is_shown_beside_it_in_the_table_and_the_report(tmp_path, capsys):
    """One label: the estimate reads 1.000 [0.207, 1.000], and the note that says why it cannot be trusted
    (every label the same answer, only 1 label) stands beside it in the run's terminal table and report,
    not only on `estimate`'s stderr; once, on one line, and escaped."""
    from offline_eval.report.html import write_report
    from offline_eval.report.terminal import format_summary

    run = build_run(tmp_path)
    _write_labels(run / "labels.jsonl", [{"id": "q01", "metric": "faithfulness", "label": "yes"}])
    assert main(["estimate", str(run)]) == 0
    out, err = capsys.readouterr()
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    note = summary["estimates"]["faithfulness"]["ppi"]["note"]
    assert note.startswith("every label is the same answer; only 1 label: ")
    assert out.count(note) == 1 and note not in err  # in the table, not again on stderr
    assert f"  PPI estimate: {note}" in format_summary(summary).splitlines()
    section = write_report(run).read_text(encoding="utf-8").split("id='estimates'")[1].split("</section>")[0]
    assert f"<div class='caveat'>{note}</div>" in section
    summary["estimates"]["faithfulness"]["ppi"]["note"] = EVIL + "\nsecond line"
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    page = write_report(run).read_text(encoding="utf-8")
    assert EVIL not in page and "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page.split("id='estimates'")[1]
    assert "  PPI estimate: <script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">\\nsecond line" \
        in format_summary(summary).splitlines()


def test_labels_given_on_another_run_are_left_out_and_counted(tmp_path, capsys):
    run = build_run(tmp_path)
    (run / "run.json").write_text(json.dumps({"fingerprint": "this-run", "metrics": ["faithfulness"]}))
    labels = [{"id": f"q0{i}", "metric": "faithfulness", "label": i % 2 == 0, "run": "this-run"} for i in range(1, 6)]
    labels += [{"id": "q09", "metric": "faithfulness", "label": "yes", "run": "an-earlier-run"},
               {"id": "q10", "metric": "faithfulness", "label": "no"}]  # no fingerprint: another tool's label
    path = _write_labels(tmp_path / "labels.jsonl", labels)
    assert main(["estimate", str(run), "--labels", str(path), "--json", "--no-write"]) == 0
    out, err = capsys.readouterr()
    fa = json.loads(out)["faithfulness"]
    assert fa["n_labelled"] == 6 and fa["excluded"] == {"other_run": 1} and "another run" in err
    assert main(["estimate", str(run), "--labels", str(path), "--json", "--no-write", "--any-run"]) == 0
    assert json.loads(capsys.readouterr().out)["faithfulness"]["n_labelled"] == 7


def test_a_bad_labels_line_is_one_line_exit_2(tmp_path, capsys):
    run = build_run(tmp_path)
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "q01", "metric": "faithfulness", "label": "yes"}\n'
                    '{"id": "q02", "metric": "faithfulness", "label": "maybe"}\n'
                    '{"id": "q03", "metric": "faithfulness", "label": "no"}\n', encoding="utf-8")
    assert main(["estimate", str(run), "--labels", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.jsonl" in err and "row 2" in err and "label" in err
    assert main(["estimate", str(tmp_path / "nowhere"), "--json"]) == 2


def test_a_run_without_labels_points_to_review(tmp_path, capsys):
    """Without a labels file the error says how to make one (it said only "no such labels file")."""
    run = build_run(tmp_path)
    assert main(["estimate", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"offline-eval: bad input: {run / 'labels.jsonl'}: no labels yet: make some with "
                   f"`offline-eval review {run}`, or name a labels file with --labels")
    assert main(["estimate", str(run), "--labels", str(tmp_path / "expert.jsonl")]) == 2
    assert f"`offline-eval review {run}` makes labels" in capsys.readouterr().err


def test_a_lower_is_better_metric_keeps_its_direction(tmp_path, capsys):
    run = build_run(tmp_path)
    records = [json.loads(line) for line in (run / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    # People say yes ("does the answer state anything unsupported?") where hallucination_rate is high.
    labels = [{"id": r["id"], "metric": "hallucination_rate", "label": r["scores"]["hallucination_rate"]["value"] > 0.5}
              for r in records if r["scores"]["hallucination_rate"]["value"] is not None][:8]
    _write_labels(run / "labels.jsonl", labels)
    result = estimate_run(run, prediction="raw")
    h = result.estimates["hallucination_rate"]
    yes = sum(lab["label"] for lab in labels) / len(labels)
    assert h["higher_is_better"] is False and h["question"].startswith("Does the answer state anything")
    assert (h["n_labelled"], h["n"]) == (8, 11)
    assert h["labels_only"]["value"] == pytest.approx(yes, abs=1e-6)  # the yes-rate, not 1 - it
    assert h["ppi"]["lambda"] > 0.3  # the metric's value and the yes label point the same way


def test_the_default_prediction_is_one_the_command_offers():
    from offline_eval.people.estimate import PREDICTIONS
    assert DEFAULT_PREDICTION in PREDICTIONS


# --- on a real run: the summary, and calibrate --run ---------------------------------------------------------
def _labelled(path: Path) -> tuple[Path, list[dict]]:
    rows = []
    for i in range(16):
        supported = i % 2 == 0
        rows.append({"id": f"r{i}", "question": "What is the capital of France?",
                     "answer": "Paris is the capital of France." if supported else f"Lyon has {i} staff.",
                     "contexts": ["The capital of France is Paris. Water boils at 100 degrees."],
                     "human": "yes" if supported else "no"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path, rows


def test_a_run_with_labels_reports_them_and_calibrate_from_it_fits_as_scoring_again(tiny_profile, tmp_path, capsys):
    data, rows = _labelled(tmp_path / "labelled.jsonl")
    common = ["--profile", str(tiny_profile), "--verifier", "judge", "--cache", str(tmp_path / "cache.sqlite"),
              "--quiet"]
    few = ["--min-per-class", "8"]  # 8 of each: below the default, allowed (with a warning)
    assert main(["calibrate", "--dataset", str(data), "--labels", "human", "--positive", "yes",
                 "--metric", "faithfulness", "--output", str(tmp_path / "cal"), "--to",
                 str(tmp_path / "scored.json"), *few, *common]) == 0
    scored = read_calibrations(tmp_path / "scored.json")[0]

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _write_labels(run_dir / "labels.jsonl", [{"id": r["id"], "metric": "faithfulness", "label": r["human"] == "yes"}
                                             for r in reversed(rows)])  # the file's order does not matter
    capsys.readouterr()
    assert main(["run", "--dataset", str(data), "--metrics", "faithfulness,rouge_l", "--output", str(run_dir),
                 *common]) == 0
    out = capsys.readouterr().out
    assert "what your experts would say" in out  # the terminal table
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    est = summary["estimates"]["faithfulness"]
    assert est["n_labelled"] == est["n"] == 16 and est["labels_only"]["value"] == 0.5
    assert est["ppi"]["value"] == pytest.approx(0.5) and est["ppi"]["ci95"] == [0.5, 0.5]  # all labelled
    assert "What your experts would say" in (run_dir / "report.html").read_text(encoding="utf-8")

    assert main(["calibrate", "--run", str(run_dir), "--metric", "faithfulness", "--to",
                 str(tmp_path / "stored.json"), *few]) == 0
    stored = read_calibrations(tmp_path / "stored.json")[0]
    assert stored.threshold == scored.threshold and stored.platt == scored.platt
    assert stored.quality == scored.quality and (stored.n, stored.n_positive) == (scored.n, scored.n_positive)
    assert stored.models == scored.models and stored.settings == scored.settings  # `run` applies it alike

    # Without --to, into the judge's folder when the flags name the run's models; other models are refused.
    assert main(["calibrate", "--run", str(run_dir), "--metric", "faithfulness", *few, *common]) == 0
    import tomllib
    judge = Path(tomllib.loads(Path(tiny_profile).read_text())["judge"]["path"])
    assert read_calibrations(judge)[0].threshold == scored.threshold
    (judge / "offline-eval-calibration.json").unlink()
    from tests import tiny_models
    other = tiny_models.build_judge(tmp_path / "other-judge", seed=99)
    assert main(["calibrate", "--run", str(run_dir), "--metric", "faithfulness", "--judge", str(other),
                 *few, *common]) == 2
    assert "other models than the run was scored with" in capsys.readouterr().err
    assert main(["calibrate", "--run", str(run_dir), "--metric", "answer_correctness", "--to",
                 str(tmp_path / "x.json")]) == 2
    assert "did not score answer_correctness" in capsys.readouterr().err
