"""Self-contained HTML reports: one file per run, with no external reference of any kind.

``write_report(run_dir)`` writes ``run_dir/report.html``: per-metric summary (mean, 95% interval,
scored/unscored counts and reasons), score histograms, the worst samples per metric, the conversations
when samples name one (:mod:`offline_eval.report.conversations`), and a sortable, filterable per-sample
table whose rows expand into the evidence behind each score.
``write_retrieval_report(output_dir)`` does the same job for the retriever benchmark.

All data is untrusted and is HTML-escaped on the way in; the page also carries a
Content-Security-Policy that forbids loading anything, so it opens the same in an air-gapped
browser as anywhere else.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

from offline_eval.records import MetricSummary, ResultRow
from offline_eval.report import assets, svg
from offline_eval.report._run import (
    RunData, Scale, calibration_notes, e, estimate_note, fmt_ci, fmt_interval, fmt_num, kappa_shown, load_run,
    partial_notes, scale_of, str_list, text_of,
)
from offline_eval.report.badges import ci_bar, pill
from offline_eval.report.conversations import (
    Conversation, conversations_of, conversations_section, history_html, place_html, placements,
)
from offline_eval.report.evidence import evidence_html
from offline_eval.report.shares import DEFAULT_LINE, decision_line
from offline_eval.runlog import REPORT, write_atomic
from offline_eval.thresholds import MIN_PAIRS

__all__ = ["write_report", "render_report", "write_retrieval_report", "render_retrieval_report",
           "page", "load_run", "partial_notes", "REPORT_FILE", "RETRIEVAL_REPORT_FILE"]

REPORT_FILE = REPORT
RETRIEVAL_REPORT_FILE = "retrieval_report.html"
WORST_N = 10
_SEARCH_CHARS = 4000


def inline_svg(markup: str) -> str:
    """An SVG from :mod:`svg` made fit to inline into HTML (drops the namespace URL)."""
    return markup.replace(" xmlns='http://www.w3.org/2000/svg'", "", 1)


def page(title: str, body: str, *, scripts: Iterable[str] = ()) -> str:
    """A complete HTML document around ``body`` with the inline stylesheet and ``scripts``."""
    script_html = "".join(f"<script>{s}</script>" for s in (*scripts, assets.READY_JS))
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{assets.CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<meta name='referrer' content='no-referrer'>"
        f"<title>{e(title)}</title><style>{assets.CSS}</style>"
        f"<script>{assets.ERROR_HOOK_JS}</script></head><body>"
        "<div id='js-errors' class='banner error' hidden></div>"
        f"{body}{script_html}</body></html>\n"
    )


def _reasons_html(reasons: Any) -> str:
    if not isinstance(reasons, dict) or not reasons:
        return ""
    items = sorted(reasons.items(), key=lambda kv: (-_as_int(kv[1]), str(kv[0])))
    return "<div class='reasons'>" + ", ".join(
        f"<code>{e(k)}</code>&nbsp;×{_as_int(v)}" for k, v in items) + "</div>"


def _as_int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _fmt_time(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return value


def _seconds_between(start: Any, end: Any) -> float | None:
    try:
        a = datetime.fromisoformat(str(start).replace("Z", "+00:00"))
        b = datetime.fromisoformat(str(end).replace("Z", "+00:00"))
    except ValueError:
        return None
    seconds = (b - a).total_seconds()
    return seconds if seconds >= 0 else None


def _duration(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds < 0:
        return ""
    minutes, sec = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m {sec:02d}s" if hours else f"{minutes}m {sec:02d}s"


def _timing(run: dict[str, Any]) -> list[tuple[str, Any]]:
    """When this try started and what it took, then each earlier try of the same run (``tries``): a
    rerun that found the run finished takes seconds, and the first try's compute time stays in view."""
    meta: list[tuple[str, Any]] = [("started", _fmt_time(run.get("started")))]
    seconds = run.get("seconds")
    if seconds is None:  # summaries written before tries were recorded
        seconds = _seconds_between(run.get("started"), run.get("finished"))
    tries = [t for t in run.get("tries") or [] if isinstance(t, dict)]
    label = "compute time" if not tries else "compute time, this try"
    resumed, n = run.get("resumed_samples"), run.get("n_samples")
    if tries and resumed is not None and n is not None and resumed >= n:
        meta.append((label, f"{_duration(seconds)} (every sample was scored already)"))
    else:
        meta.append((label, _duration(seconds)))
    for number, earlier in enumerate(tries, 1):
        took = earlier.get("seconds")
        if took is None:
            took = _seconds_between(earlier.get("started"), earlier.get("finished") or earlier.get("last_written"))
        how = "finished" if earlier.get("finished") else "interrupted"
        scored = earlier.get("scored_samples")
        what = f", {scored} samples scored" if isinstance(scored, int) else ""
        meta.append((f"try {number}", f"{_duration(took) or 'time unknown'} ({how}{what}; started "
                                      f"{_fmt_time(earlier.get('started'))})"))
    return meta


# ----------------------------------------------------------------------------- run report sections

def _header(data: RunData) -> str:
    run = data.run
    dataset = run.get("dataset") or data.path.name
    samples: Any = data.n_samples if data.n_samples is not None else len(data.results)
    if not data.finished:
        samples = f"{len(data.results)} scored so far (unfinished)"
    elif len(data.results) != samples:
        samples = f"{samples} in the summary, {len(data.results)} rows in the results"
    meta = [("dataset", dataset), ("profile", run.get("profile")), ("samples", samples)]
    threads = run.get("threads") if isinstance(run.get("threads"), dict) else {}
    if threads:
        chosen = threads.get("threads") or f"torch default ({threads.get('cores')})"
        how = f"auto, {threads.get('busy')} other runnable" if threads.get("mode") == "auto" else "fixed"
        meta.append(("threads", f"{chosen} ({how})"))
    skipped = run.get("skipped_rows") if isinstance(run.get("skipped_rows"), list) else []
    if skipped:
        meta.append(("skipped rows", "; ".join(str(b.get("reason", "")) for b in skipped[:5] if isinstance(b, dict))
                     + (f" (and {len(skipped) - 5} more)" if len(skipped) > 5 else "")))
    meta += _timing(run)
    items = "".join(f"<span>{e(k)}: <b>{e(v)}</b></span>" for k, v in meta if v not in (None, ""))
    notes = calibration_notes(data.metric_summaries)
    calibration = ("<div class='meta calibration'>" + "".join(f"<span>calibration: {e(n)}</span>" for n in notes)
                   + "</div>") if notes else ""
    return (f"<header class='top'><h1>Evaluation report — {e(dataset)}</h1>"
            f"<div class='meta'>{items}</div>{_models_meta(run)}{calibration}</header>")


def _models_meta(run: dict[str, Any]) -> str:
    """Each model the run used: its name, dtype, limits (and where each came from), folder and identity;
    a run recorded before model_details had only the identity."""
    identities = run.get("models") if isinstance(run.get("models"), dict) else {}
    details = run.get("model_details") if isinstance(run.get("model_details"), dict) else {}
    spans = []
    for role in dict.fromkeys([*details, *identities]):
        known = details.get(role) if isinstance(details.get(role), dict) else {}
        identity = known.get("identity") or identities.get(role)
        name = known.get("name") or identity
        if not name:
            continue
        facts = [str(known["dtype"])] if known.get("dtype") else []
        limits = known.get("limits") if isinstance(known.get("limits"), dict) else {}
        for key, limit in limits.items():
            if isinstance(limit, dict):
                value = limit.get("value")
                facts.append(f"{key} {'none' if value is None else value} ({limit.get('from')})")
        dropped = known.get("not_carried") if isinstance(known.get("not_carried"), dict) else {}
        if isinstance(dropped.get("options"), dict) and dropped["options"]:
            listed = ", ".join(f"{k}={v}" for k, v in dropped["options"].items())
            facts.append(f"not applied: {listed} (set for {dropped.get('set_for')})")
        facts += [str(where) for where in (known.get("folder") or known.get("server"),) if where]
        if identity and identity != name:
            facts.append(str(identity))
        spans.append(f"<span>{e(role)}: <b>{e(name)}</b> {e(' · '.join(facts))}</span>")
    return f"<div class='meta models'>{''.join(spans)}</div>" if spans else ""


def _starter_banner(data: RunData) -> str:
    if not data.starter:
        return ""
    return ("<div class='banner starter' id='starter-banner' role='alert'><b>Starter profile.</b> "
            "These scores come from the small starter models and only show that the pipeline runs "
            "end to end. Do not use them to judge or compare RAG systems; rerun with a full "
            "profile for real scores.</div>")


def _partial_banner(data: RunData) -> str:
    """Said before any figure: the run has not finished, or its rows are missing, so the page is not a whole
    run's report however finished it looks."""
    notes = partial_notes(data)
    if not notes:
        return ""
    return ("<div class='banner error' id='partial-banner' role='alert'>"
            + "".join(f"<p><b>Not a whole run:</b> {e(n)}.</p>" for n in notes) + "</div>")


_NO_SUMMARY = MetricSummary(None, None, None, 0, 0)


def _summary_section(data: RunData, metrics: list[str]) -> str:
    summaries = data.metric_summaries
    rows = []
    for m in metrics:
        s = summaries.get(m, _NO_SUMMARY)
        scale = scale_of(m, summaries.get(m))
        dir_html = " <span class='muted small'>(lower is better)</span>" if scale.lower_is_better else ""
        rows.append(
            f"<tr data-metric='{e(m)}'><td class='metric'>{e(m)}{dir_html}</td>"
            f"<td class='num'>{pill(s.mean, scale=scale)}</td>"
            f"<td class='num'>{e(fmt_interval(s.ci95, s.n_scored))}</td><td>{ci_bar(s.mean, s.ci95, scale=scale)}</td>"
            f"<td class='num'>{e(fmt_num(s.std))}</td>"
            f"<td class='num'>{s.n_scored}</td>"
            f"<td class='num'>{s.n_unscored}</td>"
            f"<td>{_reasons_html(s.unscored_reasons)}</td></tr>")
    return ("<section id='summary'><h2>Summary</h2><table class='summary'><thead><tr>"
            "<th>metric</th><th class='num'>mean</th><th class='num'>95% interval</th><th></th>"
            "<th class='num'>std</th><th class='num'>scored</th><th class='num'>unscored</th>"
            "<th>unscored reasons</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
            "<p class='muted small'>Interval: percentile bootstrap of the mean over scored samples, none "
            f"under {MIN_PAIRS} of them (even their whole range holds the mean less often than 95%). "
            "Unscored samples (missing fields, nothing to score, unparseable judge output) are "
            "excluded from the mean, never counted as zero.</p></section>")


def _estimates_section(data: RunData) -> str:
    """"What your experts would say": summary.json's ``estimates`` (offline_eval.people.estimate), when the run
    folder held expert labels. Every value is untrusted: names escaped, numbers formatted or a dash."""
    estimates = data.summary.estimates
    error = data.summary.estimates_error
    if not isinstance(estimates, dict) or not estimates:
        if isinstance(error, str):
            return ("<section id='estimates'><h2>What your experts would say</h2>"
                    f"<p class='banner error'>The labels were not used: {e(error)}</p></section>")
        return ""
    rows = []
    for name, entry in estimates.items():
        if not isinstance(entry, dict):
            continue
        plain = entry.get("labels_only") if isinstance(entry.get("labels_only"), dict) else {}
        ppi = entry.get("ppi") if isinstance(entry.get("ppi"), dict) else {}
        kappas = entry.get("kappa") if isinstance(entry.get("kappa"), list) else []
        kappa = "; ".join(f"{e(' / '.join(text_of(a) for a in k.get('annotators', [])[:2]))}: {e(kappa_shown(k))}"
                          for k in kappas if isinstance(k, dict) and isinstance(k.get("annotators"), list))
        excluded = entry.get("excluded") if isinstance(entry.get("excluded"), dict) else {}
        lower = " <span class='muted small'>(lower is better)</span>" if entry.get("higher_is_better") is False else ""
        question = f"<div class='muted small'>{e(entry.get('question'))}</div>" if entry.get("question") else ""
        ppi_value = ppi.get("value") if isinstance(ppi.get("value"), (int, float)) else None
        note = estimate_note(entry)
        rows.append(
            f"<tr data-metric='{e(name)}'><td class='metric'>{e(name)}{lower}{question}</td>"
            f"<td class='num'>{_as_int(entry.get('n_labelled'))} / {_as_int(entry.get('n'))}</td>"
            f"<td class='num'>{e(fmt_num(entry.get('judge_mean')))}</td>"
            f"<td class='num'>{e(fmt_num(plain.get('value')))} {e(fmt_ci(plain.get('ci95')))}</td>"
            f"<td class='num'><b>{e(fmt_num(ppi_value))}</b> {e(fmt_ci(ppi.get('ci95')))}"
            + (f"<div class='caveat'>{e(note)}</div>" if note is not None else "") + "</td>"
            f"<td>{ci_bar(ppi_value, ppi.get('ci95'))}</td>"
            f"<td>{kappa or '—'}</td><td>{_reasons_html(excluded)}</td></tr>")
    return ("<section id='estimates'><h2>What your experts would say</h2><table class='summary'><thead><tr>"
            "<th>metric and the question people answered</th><th class='num'>labelled / scored</th>"
            "<th class='num'>judge mean</th><th class='num'>labels only, 95%</th>"
            "<th class='num'>PPI estimate, 95%</th><th></th><th>Cohen's κ</th><th>labels left out</th></tr></thead>"
            "<tbody>" + "".join(rows) + "</tbody></table>"
            "<p class='muted small'>The share of yes the labellers would give to each metric's question over all "
            "scored samples: the labels alone (Wilson interval), and prediction-powered inference (PPI++), which "
            "corrects the judge's scores on every sample with the labels and is valid only when the labelled "
            "samples are a simple random sample of them (<code>offline-eval review</code> draws them so). "
            "κ: agreement of two annotators on the samples both labelled.</p></section>")


def _distributions_section(data: RunData, metrics: list[str]) -> str:
    cards = []
    for i, m in enumerate(metrics):
        values = [r.value(m) for r in data.results]
        scale = scale_of(m, data.metric_summaries.get(m))
        scored = [v for v in values if v is not None]  # a value outside the declared range is still drawn
        chart = svg.histogram(values, bins=10, title=m, x_label="score", width=360, height=190,
                              value_range=(min([scale.low, *scored]), max([scale.high, *scored])),
                              color=svg.PALETTE[i % len(svg.PALETTE)])
        cards.append(f"<div class='card'>{inline_svg(chart)}</div>")
    return "<section id='distributions'><h2>Distributions</h2><div class='grid'>" + "".join(cards) + "</div></section>"


def _worst_section(data: RunData, metrics: list[str], anchors: list[str]) -> str:
    cards = []
    for m in metrics:
        scored = [(r.value(m), i) for i, r in enumerate(data.results)]
        scored = [(v, i) for v, i in scored if v is not None]
        if not scored:
            cards.append(f"<div class='card'><h3>{e(m)}</h3><p class='muted'>no scored samples</p></div>")
            continue
        scale = scale_of(m, data.metric_summaries.get(m))
        scored.sort(key=lambda vi: (-vi[0] if scale.lower_is_better else vi[0], vi[1]))
        items = []
        for v, i in scored[:WORST_N]:
            rec = data.results[i]
            q = text_of(rec.sample.get("question"))
            q = q if len(q) <= 110 else q[:107] + "…"
            items.append(f"<li>{pill(v, scale=scale)} <a href='#{anchors[i]}'>{e(rec.id)}</a> "
                         f"<span class='muted'>{e(q)}</span></li>")
        cards.append(f"<div class='card' data-worst='{e(m)}'><h3>{e(m)}</h3>"
                     f"<ol class='worst'>{''.join(items)}</ol></div>")
    return ("<section id='worst'><h2>Worst samples per metric</h2>"
            "<p class='muted small'>Lowest-scoring samples first (highest first for metrics where "
            "lower is better). Click an id to open its evidence.</p>"
            "<div class='grid'>" + "".join(cards) + "</div></section>")


# ----------------------------------------------------------------------------- evidence

def _field(label: str, value: Any) -> str:
    text = text_of(value)
    if not text:
        return ""
    return f"<div class='field'><div class='label'>{e(label)}</div><div class='text'>{e(text)}</div></div>"


def _explained(reason: str | None, explanation: str) -> str:
    """The explanation as shown beside its reason: without the reason again in front of it."""
    if reason and explanation.startswith(f"{reason}: "):
        return explanation[len(reason) + 2:]
    return explanation


def _sample_detail(rec: ResultRow, metrics: list[str], scales: dict[str, Scale],
                   place: tuple[Conversation, int] | None = None, line: float = DEFAULT_LINE) -> str:
    """A sample's evidence; ``place``: its conversation and turn number, when it is a turn of one;
    ``line``: the P(yes) at which the run decided a verdict."""
    sample = rec.sample
    contexts = str_list(sample.get("contexts"))
    left = ((place_html(*place) if place else "") + history_html(sample)
            + _field("question", sample.get("question")) + _field("answer", sample.get("answer"))
            + _field("ground truth", sample.get("ground_truth")))
    keypoints = str_list(sample.get("keypoints"))
    if keypoints:
        left += ("<div class='field'><div class='label'>reference keypoints</div><ol class='chunks'>"
                 + "".join(f"<li>{e(k)}</li>" for k in keypoints) + "</ol></div>")
    known = {"id", "question", "answer", "contexts", "ground_truth", "reference_contexts", "keypoints",
             "language", "conversation"} | ({"conversation_id"} if place else set())
    extra = {k: v for k, v in sample.items() if k not in known}
    if extra:
        left += ("<details><summary class='muted small'>other fields</summary><pre class='json'>"
                 + e(json.dumps(extra, ensure_ascii=False, indent=2, default=str)) + "</pre></details>")
    right = ""
    if contexts:
        right += ("<div class='field'><div class='label'>retrieved contexts</div><ol class='chunks'>"
                  + "".join(f"<li><div class='chunk'>{e(c)}</div></li>" for c in contexts) + "</ol></div>")
    refs = str_list(sample.get("reference_contexts"))
    if refs:
        right += ("<details class='field'><summary class='label'>reference contexts "
                  f"({len(refs)})</summary><ol class='chunks'>"
                  + "".join(f"<li><div class='chunk'>{e(c)}</div></li>" for c in refs) + "</ol></details>")
    evidence = []
    for m in metrics:
        entry = rec.score(m)
        if entry is None:
            continue
        reason = entry.unscored_reason
        head = f"<span class='name'>{e(m)}</span> {pill(entry.value, reason, scale=scales[m])}"
        if reason:
            head += f" <span class='muted small'>unscored: <code>{e(reason)}</code></span>"
        explanation = _explained(reason, entry.explanation)
        body = f"<div class='small'>{e(explanation)}</div>" if explanation else ""
        if entry.metadata:
            body += evidence_html(m, entry.metadata, contexts, value=entry.value, line=line)
        evidence.append(f"<div class='evidence' data-metric='{e(m)}'><div class='head'>{head}</div>{body}</div>")
    return (f"<div class='cols'><div>{left}</div><div>{right}</div></div>" + "".join(evidence))


def _samples_section(data: RunData, metrics: list[str], anchors: list[str],
                     places: dict[int, tuple[Conversation, int]]) -> str:
    languages = sorted({text_of(r.sample.get("language")) for r in data.results} - {""})
    heads = ["<th class='sortable' data-key='row' data-type='num'>#<span class='arrow'></span></th>",
             "<th class='sortable' data-key='id' data-type='str'>id<span class='arrow'></span></th>"]
    if languages:
        heads.append("<th class='sortable' data-key='lang' data-type='str'>lang<span class='arrow'></span></th>")
    heads.append("<th>question</th>")
    for i, m in enumerate(metrics):
        heads.append(f"<th class='sortable num' data-key='m{i}' data-type='num' data-metric='{e(m)}'>"
                     f"{e(m).replace('_', '_<wbr>')}<span class='arrow'></span></th>")
    scales = {m: scale_of(m, data.metric_summaries.get(m)) for m in metrics}
    line = decision_line(data.run)
    bodies = []
    for idx, rec in enumerate(data.results):
        sample = rec.sample
        sid = rec.id
        row_n = rec.row if rec.row is not None else idx + 1
        lang = text_of(sample.get("language"))
        question = text_of(sample.get("question"))
        unscored = []
        cells = [f"<td class='num'><span class='caret'>▸</span>{row_n}</td>", f"<td>{e(sid)}</td>"]
        if languages:
            cells.append(f"<td>{e(lang)}</td>")
        cells.append(f"<td class='q' title='{e(question[:500])}'>{e(question[:200])}</td>")
        keys = [f"data-k-row='{row_n}'", f"data-k-id='{e(sid)}'", f"data-k-lang='{e(lang)}'"]
        for i, m in enumerate(metrics):
            entry = rec.score(m)
            value = rec.value(m)
            reason = entry.unscored_reason if entry is not None else None
            if value is None and reason:
                unscored.append(m)
            cells.append(f"<td class='num'>{pill(value, reason, scale=scales[m]) if entry is not None else ''}</td>")
            keys.append(f"data-k-m{i}='{'' if value is None else repr(value)}'")
        search = " ".join([sid, question, text_of(sample.get("answer")),
                           text_of(sample.get("conversation_id"))]).lower()[:_SEARCH_CHARS]
        bodies.append(
            f"<tbody id='{anchors[idx]}' {' '.join(keys)} data-lang='{e(lang)}' "
            f"data-unscored='{e(' '.join(unscored))}' data-search='{e(search)}'>"
            f"<tr class='srow' aria-expanded='false'>{''.join(cells)}</tr>"
            f"<tr class='detail' hidden><td colspan='{len(heads)}'>"
            f"{_sample_detail(rec, metrics, scales, places.get(idx), line)}</td></tr>"
            "</tbody>")
    lang_opts = "".join(f"<option value='{e(l)}'>{e(l)}</option>" for l in languages)
    lang_select = (f"<label>language <select id='f-lang'><option value=''>all</option>{lang_opts}</select></label>"
                   if languages else "")
    status_opts = "".join(f"<option value='{e(m)}'>unscored on {e(m)}</option>" for m in metrics)
    controls = (
        "<div class='controls'>"
        "<input type='search' id='f-text' placeholder='Filter by id, question or answer…' aria-label='filter'>"
        f"{lang_select}"
        f"<label>show <select id='f-status'><option value=''>all samples</option>"
        f"<option value='*'>any unscored</option>{status_opts}</select></label>"
        "<button type='button' id='expand-all'>expand all</button>"
        "<button type='button' id='collapse-all'>collapse all</button>"
        f"<span class='muted'><span id='shown-count'>{len(data.results)}</span> of {len(data.results)} shown</span>"
        "</div>")
    return ("<section id='samples-section'><h2>Samples</h2>"
            "<p class='muted small'>Click a column to sort, a row to see the evidence behind its scores.</p>"
            f"{controls}<div class='table-wrap'><table id='samples'><thead><tr>{''.join(heads)}</tr></thead>"
            f"{''.join(bodies)}</table></div></section>")


def _settings_section(data: RunData) -> str:
    settings = data.run.get("settings")
    if not settings:
        return ""
    return ("<section id='settings'><details><summary><b>Run settings</b></summary><pre class='json'>"
            + e(json.dumps(settings, ensure_ascii=False, indent=2, default=str)) + "</pre></details></section>")


def render_report(data: RunData) -> str:
    """The HTML text of a run's report."""
    metrics = data.metric_names
    anchors = [f"s-{i}" for i in range(len(data.results))]
    title = f"offline-eval — {data.run.get('dataset') or data.path.name}"
    conversations = conversations_of(data)
    body = (_header(data) + "<main>" + _partial_banner(data) + _starter_banner(data)
            + _summary_section(data, metrics) + _estimates_section(data) + _distributions_section(data, metrics)
            + _worst_section(data, metrics, anchors) + conversations_section(data, metrics, anchors, conversations)
            + _samples_section(data, metrics, anchors, placements(conversations))
            + _settings_section(data) + "</main>"
            + "<footer>Generated offline by offline-eval. This file loads nothing from the network.</footer>")
    return page(title, body, scripts=[assets.TABLE_JS] + ([assets.CONVERSATIONS_JS] if conversations else []))


def write_report(run_dir: str | Path | RunData, output: str | Path | None = None) -> Path:
    """Write ``run_dir/report.html`` (or ``output``) and return its path; ``run_dir`` may be the run already
    loaded (:func:`offline_eval.report._run.load_run`)."""
    data = run_dir if isinstance(run_dir, RunData) else load_run(run_dir)
    path = Path(output) if output is not None else data.path / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, render_report(data))  # a full disk leaves the earlier report, not half of one
    return path


# ----------------------------------------------------------------------------- retrieval benchmark

_RETRIEVAL_KEYS = ("retriever", "chunk_size", "k")
_RESULT_FILES = ("results.json", "retrieval_results.json", "benchmark.json", "summary.json")


def _load_retrieval_rows(output_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any], Path | None]:
    """Find the benchmark's rows: {"rows": [...]} (also accepts a bare list or {"results": [...]})."""
    for name in _RESULT_FILES:
        path = output_dir / name
        if not path.exists():
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            continue
        rows: Any = None
        if isinstance(doc, list):
            rows, doc = doc, {}
        elif isinstance(doc, dict):
            rows = doc.get("rows", doc.get("results"))
        if isinstance(rows, list):
            return [r for r in rows if isinstance(r, dict)], doc if isinstance(doc, dict) else {}, path
    return [], {}, None


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def render_retrieval_report(output_dir: str | Path) -> str:
    """The HTML of the retriever benchmark found in ``output_dir`` (see write_retrieval_report)."""
    out = Path(output_dir)
    rows, doc, source = _load_retrieval_rows(out)
    metric_cols: list[str] = []
    declared = doc.get("metrics") if isinstance(doc.get("metrics"), list) else None
    for r in rows:
        for k, v in r.items():
            if k not in _RETRIEVAL_KEYS and _num(v) is not None and k not in metric_cols:
                metric_cols.append(k)
    if declared:  # the benchmark names its metrics: chart those, show counts and settings as columns
        metric_cols = [m for m in declared if m in metric_cols]
    other_cols: list[str] = []
    for r in rows:
        for k, v in r.items():
            if k not in _RETRIEVAL_KEYS and k not in metric_cols and k not in other_cols and not isinstance(v, (dict, list)):
                other_cols.append(k)
    title = f"Retriever benchmark — {doc.get('dataset') or out.name}"
    parts = [f"<header class='top'><h1>{e(title)}</h1><div class='meta'>"
             f"<span>rows: <b>{len(rows)}</b></span>"
             + (f"<span>source: <b>{e(source.name)}</b></span>" if source else "") + "</div></header><main>"]
    if not rows:
        parts.append("<div class='banner error'>No benchmark rows found: expected results.json with "
                     "{\"rows\": [{\"retriever\", \"chunk_size\", \"k\", metric: value, …}]}.</div>")
    notes = [text_of(n) for n in doc.get("notes") or [] if text_of(n)] if isinstance(doc.get("notes"), list) else []
    if notes:  # what the tables leave out or cannot find: a reader of the figures must see it beside them
        parts.append("<div class='banner error' id='retrieval-notes' role='alert'><b>What these figures rest on."
                     "</b><ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul></div>")
    # Charts: one per (metric, chunk_size), a line per retriever over k.
    charts = []
    chunk_sizes = list(dict.fromkeys(r.get("chunk_size") for r in rows))
    for metric in metric_cols:
        for cs in chunk_sizes:
            series: dict[str, list[tuple[float, float]]] = {}
            for r in rows:
                if r.get("chunk_size") != cs:
                    continue
                k, v = _num(r.get("k")), _num(r.get(metric))
                if k is None or v is None:
                    continue
                series.setdefault(text_of(r.get("retriever")) or "?", []).append((k, v))
            if not any(len(p) for p in series.values()):
                continue
            label = f"{metric} by k" + (f" (chunk size {cs})" if cs is not None else "")
            chart = svg.line_chart(series, title=label, x_label="k", y_label=metric, width=460, height=300)
            charts.append(f"<div class='card'>{inline_svg(chart)}</div>")
    if charts:
        parts.append("<section id='charts'><h2>Charts</h2><div class='grid'>" + "".join(charts) + "</div></section>")
    if rows:
        cols = [c for c in _RETRIEVAL_KEYS if any(c in r for r in rows)] + metric_cols + other_cols
        head = "".join(f"<th class='{'num' if c in metric_cols else ''}'>{e(c)}</th>" for c in cols)
        body_rows = []
        for r in rows:
            cells = []
            for c in cols:
                v = r.get(c)
                n = _num(v)
                if c in metric_cols:
                    cells.append(f"<td class='num' data-v='{'' if n is None else repr(n)}'>{fmt_num(n)}</td>")
                else:
                    cells.append(f"<td>{e(v)}</td>")
            body_rows.append(f"<tr>{''.join(cells)}</tr>")
        parts.append("<section id='rows'><h2>All configurations</h2><p class='muted small'>Click a column to sort."
                     f"</p><table class='sortable-table' id='retrieval-rows'><thead><tr>{head}</tr></thead>"
                     f"<tbody>{''.join(body_rows)}</tbody></table></section>")
    extra = {k: v for k, v in doc.items() if k not in ("rows", "results", "notes")}
    if extra:
        parts.append("<section><details><summary><b>Benchmark settings</b></summary><pre class='json'>"
                     + e(json.dumps(extra, ensure_ascii=False, indent=2, default=str)) + "</pre></details></section>")
    jsonl = sorted(p.name for p in out.glob("*.jsonl")) if out.is_dir() else []
    if jsonl:
        parts.append("<section><h2>Per-query files</h2><ul>" + "".join(f"<li><code>{e(n)}</code></li>" for n in jsonl)
                     + "</ul></section>")
    parts.append("</main><footer>Generated offline by offline-eval. This file loads nothing from the network.</footer>")
    return page(title, "".join(parts), scripts=[assets.SIMPLE_SORT_JS])


def write_retrieval_report(output_dir: str | Path) -> Path:
    """Write ``output_dir/retrieval_report.html`` for the retriever benchmark and return its path.

    Expected input (read defensively): ``output_dir/results.json`` holding
    ``{"rows": [{"retriever": str, "chunk_size": int, "k": int, "recall": float, ...}], ...}``;
    every other numeric field of a row is shown as a metric (column and chart of metric vs k per
    retriever, one chart per chunk size), every other top-level key as settings. A bare list of
    rows, or ``"results"`` instead of ``"rows"``, is accepted too.
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / RETRIEVAL_REPORT_FILE
    path.write_text(render_retrieval_report(out), encoding="utf-8")
    return path
