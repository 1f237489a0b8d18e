"""HTML run report, SVG charts and retriever-benchmark report.

The browser test renders the report in headless Chromium (Debian package ``chromium``) and is
skipped when it is not installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from offline_eval.report import svg
from offline_eval.report.html import write_report, write_retrieval_report

from tests.report.test_report_fixtures import EVIL, METRICS, build_run

SVG_NS = "{http://www.w3.org/2000/svg}"


class Collector(HTMLParser):
    """Every start tag with its attributes, plus the raw text of <script> elements."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def parse(html: str) -> Collector:
    c = Collector()
    c.feed(html)
    return c


# ----------------------------------------------------------------------------- SVG

def test_line_chart_is_wellformed_svg_with_one_line_per_series():
    out = svg.line_chart({"bm25 <&>": [(1, 0.4), (5, 0.6), (10, 0.7)], "dense": [(1, 0.5), (10, 0.9)],
                          "empty": []},
                         title="Recall <@k>", x_label="k", y_label="recall")
    root = ET.fromstring(out)  # raises on malformed XML or unescaped text
    assert root.tag == f"{SVG_NS}svg"
    assert len(root.findall(f"{SVG_NS}polyline")) == 2
    assert len(root.findall(f"{SVG_NS}circle")) == 5
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG_NS}text")]
    assert "Recall <@k>" in texts and "bm25 <&>" in texts
    assert "<script" not in out and "href" not in out


def test_line_chart_without_points_says_no_data():
    root = ET.fromstring(svg.line_chart({}, title="t", x_label="x", y_label="y"))
    assert "no data" in ["".join(t.itertext()) for t in root.iter(f"{SVG_NS}text")]


def test_histogram_bins_values_and_ignores_missing():
    out = svg.histogram([0.05, 0.05, 0.15, 0.95, 1.0, None, float("nan")], bins=10, title="h", x_label="score")
    root = ET.fromstring(out)
    bars = [r for r in root.iter(f"{SVG_NS}rect") if r.find(f"{SVG_NS}title") is not None]
    counts = sorted(int(r.find(f"{SVG_NS}title").text.rsplit(": ", 1)[1]) for r in bars)
    assert counts == [1, 2, 2]  # [0,.1): 2, [.1,.2): 1, [.9,1]: 2 (last bin closed)
    heights = {r.find(f"{SVG_NS}title").text: float(r.get("height")) for r in bars}
    assert heights["0.9–1: 2"] == pytest.approx(heights["0–0.1: 2"])
    assert heights["0.1–0.2: 1"] < heights["0–0.1: 2"]


def test_histogram_of_nothing_is_labelled():
    root = ET.fromstring(svg.histogram([None, None], title="h", x_label="x"))
    assert "no scored values" in "".join(root.itertext())


def test_nice_ticks_cover_range():
    ticks = svg.nice_ticks(0.13, 0.87)
    assert ticks[0] <= 0.13 and ticks[-1] >= 0.87 and len(ticks) <= 8


# ----------------------------------------------------------------------------- HTML report (static)

@pytest.fixture()
def report(tmp_path: Path) -> tuple[Path, str]:
    run_dir = build_run(tmp_path, starter=True)
    path = write_report(run_dir)
    return path, path.read_text(encoding="utf-8")


def test_report_written_in_run_dir(report):
    path, html = report
    assert path.name == "report.html" and path.parent.name == "run"
    assert html.startswith("<!DOCTYPE html>")


def test_report_is_self_contained(report):
    _, html = report
    assert not re.search(r"https?://|//cdn|ftp://|@import|url\(", html, re.IGNORECASE)
    doc = parse(html)
    for tag, attrs in doc.tags:
        assert tag not in {"link", "img", "iframe", "object", "embed", "base"}, tag
        assert "src" not in attrs, (tag, attrs)
        if "href" in attrs:
            assert attrs["href"].startswith("#"), attrs
    csp = [a for t, a in doc.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in csp[0]["content"]


def test_untrusted_text_is_escaped(report):
    _, html = report
    assert EVIL not in html and "<script>alert" not in html
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    assert "q06&lt;&amp;&gt;" in html  # the sample id with HTML characters
    scripts = parse(html).scripts
    assert len(scripts) == 3  # error hook, table script, ready marker: none from the data
    assert not any("__pwned" in s or "alert(" in s for s in scripts)


def test_report_summary_shows_every_metric_with_counts_and_reasons(tmp_path):
    run_dir = build_run(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    html = write_report(run_dir).read_text(encoding="utf-8")
    section = html.split("<section id='summary'>", 1)[1].split("</section>", 1)[0]
    for m in METRICS:
        s = summary["metrics"][m]
        row = section.split(f"<tr data-metric='{m}'>", 1)[1].split("</tr>", 1)[0]
        assert f"{s['mean']:.3f}" in row
        assert f"[{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}]" in row
        assert f"<td class='num'>{s['n_scored']}</td>" in row
        assert f"<td class='num'>{s['n_unscored']}</td>" in row
    assert "judge_unparseable" in section and "missing_field:answer" in section
    assert "starter-banner" not in html  # not a starter run


def test_starter_banner(report):
    _, html = report
    assert "id='starter-banner'" in html and "pipeline" in html


def test_distributions_have_one_histogram_per_metric(report):
    _, html = report
    section = html.split("<section id='distributions'>", 1)[1].split("</section>", 1)[0]
    assert section.count("<svg ") == len(METRICS)


def test_worst_section_orders_by_badness(tmp_path):
    run_dir = build_run(tmp_path)
    recs = [json.loads(l) for l in (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    html = write_report(run_dir).read_text(encoding="utf-8")
    section = html.split("<section id='worst'>", 1)[1].split("</section>", 1)[0]

    def ids_in(metric: str) -> list[str]:
        card = section.split(f"data-worst='{metric}'", 1)[1].split("</ol>", 1)[0]
        return re.findall(r"href='#s-(\d+)'", card)

    scored = [(r["scores"]["faithfulness"]["value"], i) for i, r in enumerate(recs)
              if r["scores"]["faithfulness"]["value"] is not None]
    expected = [str(i) for _, i in sorted(scored)[:10]]
    assert ids_in("faithfulness") == expected
    hall = [(r["scores"]["hallucination_rate"]["value"], i) for i, r in enumerate(recs)
            if r["scores"]["hallucination_rate"]["value"] is not None]
    assert ids_in("hallucination_rate")[0] == str(max(hall)[1])  # lower is better: highest first


def test_per_sample_rows_and_evidence(report):
    _, html = report
    bodies = re.findall(r"<tbody id='s-(\d+)'", html)
    assert bodies == [str(i) for i in range(12)]
    detail = html.split("<tbody id='s-5'", 1)[1].split("</tbody>", 1)[0]
    faith = detail.split("data-metric='faithfulness'>", 1)[1].split("<div class='evidence'", 1)[0]
    assert "<li class='ok'><span class='verdict'>supported</span>" in faith
    assert "<li class='no'><span class='verdict'>unsupported</span>Extra claim &lt;b&gt;bold&lt;/b&gt;" in faith
    assert "context #1:</span> Jupiter — background passage 5" in faith  # the supporting chunk
    assert "<span class='verdict'>Relevant</span>mentions Jupiter" in detail
    assert "data-kind='tp'><li class='ok'>Jupiter</li>" in detail
    assert "data-kind='fp'><li class='no'>an extra &lt;statement&gt;</li>" in detail
    assert "similarity 0.910" in detail  # answer relevancy's generated question
    assert "<span class='verdict'>not useful</span>context #2" in detail
    unscored = html.split("<tbody id='s-7'", 1)[1].split("</tbody>", 1)[0]
    assert "data-unscored='" + " ".join(METRICS) + "'" in unscored
    assert "unscored: <code>missing_field:answer</code>" in unscored


def test_report_recomputes_summary_when_missing(tmp_path):
    run_dir = build_run(tmp_path, write_summary=False)
    html = write_report(run_dir).read_text(encoding="utf-8")
    for m in METRICS:
        assert f"<tr data-metric='{m}'>" in html
    assert "judge_unparseable" in html


def test_report_rejects_non_run_dir(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_report(tmp_path)
    (tmp_path / "results.jsonl").write_text('{"id": "a"}\nnot json\n', encoding="utf-8")
    with pytest.raises(ValueError, match="line 2"):
        write_report(tmp_path)


# ----------------------------------------------------------------------------- retrieval report

def test_retrieval_report_charts_and_table(tmp_path):
    rows = []
    for retriever in ("bm25", "dense <e5>"):
        for cs in (256, 512):
            for k in (1, 5, 10):
                rows.append({"retriever": retriever, "chunk_size": cs, "k": k,
                             "recall": round(0.3 + 0.05 * k / 10 + (0.1 if retriever == "bm25" else 0), 4),
                             "mrr": 0.4, "ndcg": 0.5, "note": "<b>x</b>"})
    (tmp_path / "results.json").write_text(json.dumps({"rows": rows, "dataset": "docs"}), encoding="utf-8")
    (tmp_path / "per_query.jsonl").write_text("{}\n", encoding="utf-8")
    html = write_retrieval_report(tmp_path).read_text(encoding="utf-8")
    assert (tmp_path / "retrieval_report.html").exists()
    charts = html.split("<section id='charts'>", 1)[1].split("</section>", 1)[0]
    assert charts.count("<svg ") == 3 * 2  # metrics x chunk sizes
    assert "recall by k (chunk size 512)" in charts
    table = html.split("id='retrieval-rows'", 1)[1].split("</table>", 1)[0]
    assert table.count("<tr>") == len(rows) + 1
    assert "dense &lt;e5&gt;" in html and "<b>x</b>" not in html and "per_query.jsonl" in html
    assert not re.search(r"https?://", html)


def test_retrieval_report_without_results_explains(tmp_path):
    html = write_retrieval_report(tmp_path).read_text(encoding="utf-8")
    assert "No benchmark rows found" in html


# ----------------------------------------------------------------------------- in a real browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-logging=stderr", "--v=0"]


def chromium(url: str, tmp: Path, *extra: str) -> tuple[str, str]:
    """Run headless Chromium on ``url``; return (stdout, the page's console lines)."""
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    proc = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, url],
                          capture_output=True, text=True, timeout=120)
    # Only the page's own messages: Chromium's internal pages (chrome://...) log their own, e.g.
    # "Slow network is detected" when the machine has no network at all.
    console = [l for l in proc.stderr.splitlines() if ":CONSOLE" in l and "chrome://" not in l]
    return proc.stdout, "\n".join(console)


def visible_bodies(dom: str) -> list[str]:
    return re.findall(r'<tbody id="(s-\d+)"(?![^>]*\shidden)', dom)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_report_renders_in_headless_chromium(tmp_path):
    run_dir = build_run(tmp_path, starter=True)
    path = write_report(run_dir)
    url = path.resolve().as_uri()

    shot = tmp_path / "report.png"
    _, console = chromium(url, tmp_path, "--window-size=1300,2400", f"--screenshot={shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    assert console == "", console  # no script errors, no CSP violations, nothing logged

    dom, console = chromium(url, tmp_path, "--dump-dom")
    assert console == "", console
    body_tag = re.search(r"<body[^>]*>", dom).group(0)
    assert 'data-ready="1"' in body_tag, "the page script did not run to the end"
    assert "data-js-error" not in body_tag
    assert re.search(r'<div id="js-errors"[^>]*hidden[^>]*></div>', dom), "a script error was recorded"
    assert 'id="starter-banner"' in dom
    for m in METRICS:
        assert f'<tr data-metric="{m}">' in dom
    assert len(re.findall(r'<tbody id="s-\d+"', dom)) == 12
    assert len(visible_bodies(dom)) == 12
    rendered = parse(dom)  # the injected markup stayed text: no new elements, no new scripts
    assert not any(tag == "img" for tag, _ in rendered.tags)
    assert len(rendered.scripts) == 3 and not any("__pwned" in s for s in rendered.scripts)
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in dom

    # The script's URL-driven state: sorting by faithfulness ascending, filtering by language.
    recs = [json.loads(l) for l in (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    order = sorted(range(12), key=lambda i: (recs[i]["scores"]["faithfulness"]["value"] is None,
                                             recs[i]["scores"]["faithfulness"]["value"] or 0, i))
    dom, console = chromium(url + "?sort=m0&dir=asc", tmp_path, "--dump-dom")
    assert console == ""
    assert re.findall(r'<tbody id="(s-\d+)"', dom) == [f"s-{i}" for i in order]
    assert 'data-key="m0" data-type="num" data-metric="faithfulness" aria-sort="ascending"' in dom

    dom, _ = chromium(url + "?lang=zh", tmp_path, "--dump-dom")
    assert visible_bodies(dom) == [f"s-{i}" for i in range(8, 12)]
    assert '<span id="shown-count">4</span>' in dom

    dom, _ = chromium(url + "?q=jupiter&open=all", tmp_path, "--dump-dom")
    assert visible_bodies(dom) == ["s-5"]
    assert '<tr class="srow" aria-expanded="true">' in dom

    # A crafted sort key is looked up, never made into a selector: no error, the rest still applies.
    dom, console = chromium(url + "?sort=%22]x&open=all", tmp_path, "--dump-dom")
    assert console == "", console
    assert 'data-ready="1"' in re.search(r"<body[^>]*>", dom).group(0)
    assert dom.count('aria-expanded="true"') == 12


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_js_error_detector_catches_errors(tmp_path):
    """The detector the browser test relies on really reports a failing script."""
    run_dir = build_run(tmp_path)
    path = write_report(run_dir)
    html = path.read_text(encoding="utf-8")
    path.write_text(html.replace("'use strict';", "'use strict'; noSuchFunction();", 1), encoding="utf-8")
    dom, console = chromium(path.resolve().as_uri(), tmp_path, "--dump-dom")
    assert 'data-js-error="1"' in re.search(r"<body[^>]*>", dom).group(0)
    assert "<p>Script error: Uncaught ReferenceError" in dom
    assert "Uncaught ReferenceError" in console


def test_report_script_never_builds_a_selector_from_text():
    """URL parameters reach the page script; a selector concatenated from them can throw (issue #15)."""
    from offline_eval.report import assets

    script = "\n".join(v for v in vars(assets).values() if isinstance(v, str))
    assert not re.search(r"querySelector(All)?\([^)]*\+", script)


def test_a_metric_the_summary_marks_lower_is_better_is_coloured_that_way(tmp_path):
    """The direction comes from the run's summary.json, so a report of a plugin metric made in a process
    that never imported the plugin still colours a low value green and sorts its worst samples first."""
    from offline_eval.report.html import render_report
    from offline_eval.report._run import load_run

    run = tmp_path / "run"
    run.mkdir()
    rows = [{"id": f"s{i}", "row": i + 1, "sample": {"question": f"q{i}", "answer": "a"},
             "scores": {"error_share": {"value": v}}} for i, v in enumerate([0.0, 1.0])]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (run / "summary.json").write_text(json.dumps({"metrics": {"error_share": {
        "mean": 0.5, "n_scored": 2, "n_unscored": 0, "higher_is_better": False}}}), encoding="utf-8")
    page = render_report(load_run(run))
    pills = re.findall(r"<span class='pill' style='background:hsl\((\d+),[^']*'>([^<]*)</span>", page)
    hues = {value: {int(h) for h, v in pills if v == value} for value in ("0.000", "1.000")}
    assert hues == {"0.000": {120}, "1.000": {0}}  # every badge: 0 is green, 1 is red
    worst = page.split("data-worst='error_share'", 1)[1]
    assert worst.index("1.000") < worst.index("0.000")  # the worst sample first
    assert "(lower is better)" in page


PILL = re.compile(r"<span class='pill' style='background:hsl\((\d+),[^']*'>([^<]*)</span>")


def _graded_run(folder: Path, metric: str, values: list[float], summary: dict | None) -> Path:
    """A run of one metric over two conversations of three turns; ``summary``: the metric's entry in
    summary.json (None: none written, the summary is computed from the rows as for an older run)."""
    folder.mkdir()
    rows = [{"id": f"s{i}", "row": i + 1, "scores": {metric: {"value": v}},
             "sample": {"question": f"q{i}", "answer": "a", "conversation_id": f"c{i // 3}"}}
            for i, v in enumerate(values)]
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    if summary is not None:
        (folder / "summary.json").write_text(json.dumps({"metrics": {metric: summary}}), encoding="utf-8")
    return folder


def test_a_metric_on_a_1_to_5_scale_is_coloured_on_that_scale(tmp_path):
    """rubrics_score grades 1-5: a 1 is the worst colour and a 5 the best, in the report (summary, worst
    samples, samples, conversations) and in compare; a lower-is-better 1-5 metric of a plugin, whose
    range only summary.json records, reads reversed. Before, every value from 1 up was the best green."""
    from offline_eval.report._run import load_run
    from offline_eval.report.compare import compare_runs, render_comparison_html
    from offline_eval.report.html import render_report

    grades = [1.0, 5.0, 3.0, 5.0, 1.0, 3.0]
    plugin = {"mean": 3.0, "ci95": [2.0, 4.0], "n_scored": 6, "n_unscored": 0, "higher_is_better": False,
              "value_range": [1, 5]}
    for metric, best, entry in (("rubrics_score", 5.0, None), ("fault_grade", 1.0, plugin)):  # None: the class's
        run = _graded_run(tmp_path / metric, metric, grades, entry)
        other = _graded_run(tmp_path / f"{metric}-b", metric, [6.0 - g for g in grades], entry)
        pages = {"report": render_report(load_run(run)),  # the compare page shows the samples that got worse
                 "compare": render_comparison_html(compare_runs(run, other))}
        for where, page in pages.items():
            hues: dict[float, set[int]] = {}
            for hue, value in PILL.findall(page):
                hues.setdefault(float(value), set()).add(int(hue))
            # every badge on the 1-5 scale (conversation means and worst turns among them)
            assert all(h == {round((4 - abs(best - v)) / 4 * 120)} for v, h in hues.items()), (where, hues)
            assert hues[best] == {120} and hues[6.0 - best] == {0} and hues[3.0] == {60}, (where, hues)
        summary_row = pages["report"].split("<tr data-metric=", 2)[1]
        assert "<circle cx='70.0'" in summary_row  # the mean 3 in the middle of its interval bar's 1-5

EVIDENCE_PLUGIN = '''''
from offline_eval.metrics import register_metric
from offline_eval.metrics.base import Metric, Score
from offline_eval.metrics.evidence import Checks


@register_metric
class LongWords(Metric):
    name = "long_words_shown"
    requires = ("answer",)
    evidence = (Checks("words", text="word", verdict="long", yes="long", no="short", note="why",
                       figures=(("share", "share {:.2f}"),)),)

    def score(self, sample, ctx):
        words = [{"word": w, "long": len(w) > 5, "why": f"{len(w)} letters", "share": len(w) / len(sample.answer)}
                 for w in sample.answer.split()]
        return Score(sum(w["long"] for w in words) / len(words), metadata={"words": words, "checked": "all"})
'''


def test_a_plugin_metric_s_declared_evidence_appears_in_the_report(tmp_path):
    """The report draws a metric's evidence from what the metric declares of its metadata's shape: a
    plugin's words show as the built-in metrics' do, with no name of it in the report."""
    from offline_eval.cli import main

    plugin = tmp_path / "shown_metrics.py"
    plugin.write_text(EVIDENCE_PLUGIN, encoding="utf-8")
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"id": "a", "question": "Where?", "answer": "Paris <is> beautiful"}) + "\n",
                    encoding="utf-8")
    out = tmp_path / "run"
    assert main(["run", "--dataset", str(data), "--plugin", str(plugin), "--metrics", "long_words_shown",
                 "--no-cache", "--quiet", "--output", str(out)]) == 0
    detail = (out / "report.html").read_text(encoding="utf-8").split("data-metric='long_words_shown'>", 1)[1]
    assert ("<li class='no'><span class='verdict'>short</span>Paris <span class='muted small'>share 0.25</span>"
            "<div class='muted small'>5 letters</div></li>") in detail
    assert "<li class='no'><span class='verdict'>short</span>&lt;is&gt;" in detail  # escaped
    assert "<li class='ok'><span class='verdict'>long</span>beautiful" in detail
    other = detail.split("other evidence", 1)[1].split("</details>", 1)[0]
    assert "checked" in other and "words" not in other  # what it does not declare: as JSON


def test_an_unknown_metric_s_evidence_is_drawn_from_its_shape(tmp_path):
    """A run folder read where its metric is unknown (a plugin never imported here): lists of mappings
    and of texts are drawn from their shape, the rest stays JSON, and every text is escaped."""
    from offline_eval.report._run import load_run
    from offline_eval.report.html import render_report

    run = tmp_path / "run"
    run.mkdir()
    meta = {"spans": [{"span": "Lyon", "found": True, "confidence": 0.875, "why": EVIL},
                      {"span": "France", "found": False, "confidence": 0.25}],
            "notes": ["checked twice", EVIL], "counts": {"found": 1}}
    row = {"id": "s0", "row": 1, "sample": {"question": "q", "answer": "Lyon is in France"},
           "scores": {"error_spans_unknown": {"value": 0.5, "metadata": meta}}}
    (run / "results.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    page = render_report(load_run(run))
    detail = page.split("data-metric='error_spans_unknown'>", 1)[1]
    assert ("<div class='muted small'>spans:</div><ul class='items'><li class='ok'><span class='verdict'>found</span>"
            "Lyon <span class='muted small'>confidence 0.875</span><div class='muted small'>&lt;script&gt;") in detail
    assert "<li class='no'><span class='verdict'>not found</span>France" in detail
    assert "<div class='muted small'>notes:</div><ul class='items'><li class='irr'>checked twice</li>" in detail
    other = detail.split("other evidence", 1)[1].split("</details>", 1)[0]
    assert "counts" in other and "spans" not in other and "notes" not in other
    assert EVIL not in page
