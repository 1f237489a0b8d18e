"""Conversations in the HTML report and in ``compare --by conversation``.

The report shows each conversation's turns in order with each turn's scores and its worst turn marked,
and a turn's evidence shows the conversation before its question; every field of a conversation (its
id, its turns' roles and texts) is untrusted and stays text, in a real browser too.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from offline_eval.conversations import conversation_summary
from offline_eval.cli.report import main as report_main
from offline_eval.report.compare import compare_runs, format_comparison, regression_failures, write_comparison_html
from offline_eval.report.html import write_report
from offline_eval.stats import summarize

from tests.report.test_report import CHROMIUM, CHROMIUM_FLAGS, parse
from tests.report.test_report_fixtures import EVIL, build_run

try:
    from playwright.sync_api import sync_playwright
except ImportError:
    sync_playwright = None

METRICS = ["faithfulness", "hallucination_rate", "answer_relevancy"]
LOWER = {"hallucination_rate"}
# the first conversation, by hand: each metric's worst turn is another one
FIRST = {"faithfulness": [0.9, 0.3, 0.6], "hallucination_rate": [0.1, 0.2, 0.8], "answer_relevancy": [0.5, None, 0.7]}
HOSTILE_ID = f"chat {EVIL} &amp; \u202eevil"
QUESTIONS = ["Who wrote Hamlet?", f"When was he born? {EVIL}", "Where?"]
ANSWERS = ["William Shakespeare.", "In 1564 <b>exactly</b>.", f"In Stratford. {EVIL}"]


def _turn_rows(cid: str, prefix: str, questions: list[str], answers: list[str]) -> list[dict[str, Any]]:
    """A conversation's samples as the reader stores them: a follow-up carries every turn up to its question."""
    rows, history = [], []
    for n, (question, answer) in enumerate(zip(questions, answers), start=1):
        sample = {"id": f"{prefix}-t{n}", "question": question, "answer": answer, "contexts": [f"passage {n}"],
                  "ground_truth": None, "reference_contexts": None, "keypoints": None, "language": "en"}
        if history:
            sample["conversation"] = history + [{"role": "user", "content": question}]
        sample["conversation_id"] = cid
        rows.append(sample)
        history = history + [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return rows


def build_chat_run(root: Path, *, name: str = "chat", n_conversations: int = 2, shift: dict[str, float] | None = None,
                   seed: int = 3, write_summary: bool = True, drop: tuple[str, ...] = ()) -> Path:
    """A run folder of ``n_conversations`` conversations and one sample in none, summarised as a run does.

    The first conversation has three turns, a hostile id, hostile questions and answers and the scores of
    FIRST; the others (conversation ids ``c1``, ``c2``, ...) two or three turns of seeded scores. ``shift``
    moves a metric's score on every turn of the others by 0.6x to 1.4x the amount; ``drop`` leaves out
    those conversation ids."""
    rng = random.Random(seed)
    samples = _turn_rows(HOSTILE_ID, "c0", QUESTIONS, [a.replace("<b>", "<b class=x>") for a in ANSWERS])
    scores = [{m: FIRST[m][i] for m in METRICS} for i in range(3)]
    for k in range(1, n_conversations):
        turns = 2 + k % 2
        if f"c{k}" in drop:
            continue
        samples += _turn_rows(f"c{k}", f"c{k}", [f"Question {n} of chat {k}?" for n in range(turns)],
                              [f"Answer {n} of chat {k}." for n in range(turns)])
        for n in range(turns):
            base = 0.3 + 0.4 * rng.random()
            values = {"faithfulness": base, "hallucination_rate": 1 - base, "answer_relevancy": base + 0.1}
            for metric, delta in (shift or {}).items():
                values[metric] += delta * (0.6 + 0.2 * ((k + n) % 5))
            scores.append({m: round(min(1.0, max(0.0, v)), 4) for m, v in values.items()})
    samples.append({"id": "alone", "question": "What is 2+2?", "answer": "4.", "contexts": ["2+2=4"],
                    "language": "en"})
    scores.append({m: 0.5 for m in METRICS})
    return _write_run(Path(root) / name, samples, scores, write_summary)


def _write_run(folder: Path, samples: list[dict], scores: list[dict], write_summary: bool) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "results.jsonl").open("w", encoding="utf-8") as fh:
        for row, (sample, values) in enumerate(zip(samples, scores), start=1):
            entries = {m: {"value": v} if v is not None else {"value": None, "reason": "judge_unparseable"}
                       for m, v in values.items()}
            fh.write(json.dumps({"id": sample["id"], "row": row, "sample": sample, "scores": entries},
                                ensure_ascii=False) + "\n")
    columns = {m: [values[m] for values in scores] for m in METRICS}
    directions = {m: m not in LOWER for m in METRICS}
    summary = {"metrics": {m: {**summarize(columns[m]).to_dict(), "higher_is_better": directions[m]} for m in METRICS},
               "conversations": conversation_summary([s.get("conversation_id") for s in samples],
                                                     [s["id"] for s in samples], columns, directions),
               "run": {"dataset": "chat.jsonl", "metrics": METRICS, "n_samples": len(samples)}}
    if write_summary:
        (folder / "summary.json").write_text(json.dumps(summary, ensure_ascii=False), encoding="utf-8")
    return folder


def section_of(html: str) -> str:
    return html.split("<section id='conversations'>", 1)[1].split("</section>", 1)[0]


def conversation_of(html: str, anchor: str) -> str:
    return html.split(f"<tbody id='{anchor}'", 1)[1].split("</tbody>", 1)[0]


def turn_rows(conversation: str) -> list[str]:
    return re.findall(r"<tr data-turn='\d+'>.*?</tr>", conversation)


# ----------------------------------------------------------------------------- the report, read as text

def test_a_conversation_s_turns_are_in_order_with_each_turn_s_scores(tmp_path: Path) -> None:
    html = write_report(build_chat_run(tmp_path)).read_text(encoding="utf-8")
    first = conversation_of(section_of(html), "c-0")
    rows = turn_rows(first)
    assert [re.search(r"data-turn='(\d+)'", r).group(1) for r in rows] == ["1", "2", "3"]
    assert [re.search(r"href='#(s-\d+)'", r).group(1) for r in rows] == ["s-0", "s-1", "s-2"]  # to their evidence
    for n, row in enumerate(rows):
        cells = re.findall(r"<td class='num[^']*' data-metric='([a-z_]+)'>(.*?)</td>", row)
        assert [m for m, _ in cells] == METRICS
        for metric, cell in cells:
            value = FIRST[metric][n]
            assert (f"{value:.3f}</span>" if value is not None else "title='judge_unparseable'>n/a") in cell
    worst = {metric: [n for n, row in enumerate(rows, start=1) if "class='worst-mark'" in _cell(row, metric)]
             for metric in METRICS}
    assert worst == {"faithfulness": [2], "hallucination_rate": [3], "answer_relevancy": [1]}
    assert "When was he born? &lt;script&gt;window.__pwned=1&lt;/script&gt;" in rows[1]


def _cell(row: str, metric: str) -> str:
    return re.search(rf"<td class='num[^']*' data-metric='{metric}'>.*?</td>", row).group(0)


def test_the_conversation_table_gives_each_metric_over_conversations(tmp_path: Path) -> None:
    folder = build_chat_run(tmp_path, n_conversations=4)
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))["conversations"]
    section = section_of(write_report(folder).read_text(encoding="utf-8"))
    assert "4 conversations, 11 turns; 1 sample in no conversation" in section
    overview = section.split("id='conversation-metrics'", 1)[1].split("</table>", 1)[0]
    for metric in METRICS:
        entry = summary["metrics"][metric]
        row = overview.split(f"<tr data-metric='{metric}'>", 1)[1].split("</tr>", 1)[0]
        assert f"<td class='num'>{entry['n_conversations']}</td>" in row
        assert f"{entry['mean']:.3f}</span>" in row and f"{entry['worst_turn_mean']:.3f}</span>" in row
        assert entry["ci95"] is None and "— (fewer than 6 conversations)" in row  # four: no interval
    assert "(lower is better)" in overview.split("<tr data-metric='hallucination_rate'>", 1)[1].split("</tr>")[0]


def test_the_worst_conversations_come_first(tmp_path: Path) -> None:
    folder = build_chat_run(tmp_path, n_conversations=6)
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))["conversations"]
    means = [entry["metrics"]["faithfulness"]["mean"] for entry in summary["by_conversation"].values()]
    section = section_of(write_report(folder).read_text(encoding="utf-8"))
    order = [int(n) for n in re.findall(r"<tbody id='c-(\d+)'", section)]
    assert order == sorted(range(6), key=lambda i: (means[i], i))
    options = re.findall(r"<option value='(\w+)'>", section)
    assert options == ["m0", "w0", "m1", "w1", "m2", "w2", "pos"]
    # lower is better: the sort key is turned round so that the smallest is the worst in every order
    worst_hall = [entry["metrics"]["hallucination_rate"]["worst"] for entry in summary["by_conversation"].values()]
    keys = dict(re.findall(r"<tbody id='c-(\d+)'[^>]*data-g-w1='([^']*)'", section))
    assert {int(k): float(v) for k, v in keys.items()} == {i: -w for i, w in enumerate(worst_hall)}


def test_a_turn_s_evidence_shows_the_conversation_before_its_question(tmp_path: Path) -> None:
    html = write_report(build_chat_run(tmp_path)).read_text(encoding="utf-8")
    third = html.split("<tbody id='s-2'", 1)[1].split("</tbody>", 1)[0]
    assert "<a href='#c-0'>chat &lt;script&gt;" in third and "turn 3 of 3" in third
    history = third.split("<details class='field history' open>", 1)[1].split("</details>", 1)[0]
    assert "conversation before the question (4 turns)" in history
    turns = re.findall(r"<li class='turn (\w+)'><span class='role'>(\w+)</span><div class='text'>(.*?)</div></li>",
                       history)
    assert turns == [("user", "user", "Who wrote Hamlet?"), ("assistant", "assistant", "William Shakespeare."),
                     ("user", "user", "When was he born? &lt;script&gt;window.__pwned=1&lt;/script&gt;&lt;img src=x "
                                      "onerror=&quot;window.__pwned=2&quot;&gt;"),
                     ("assistant", "assistant", "In 1564 &lt;b class=x&gt;exactly&lt;/b&gt;.")]
    assert third.index("conversation before the question") < third.index("<div class='label'>question</div>")
    assert "Where?" not in history  # the question itself is not history
    first = html.split("<tbody id='s-0'", 1)[1].split("</tbody>", 1)[0]
    assert "turn 1 of 3" in first and "conversation before the question" not in first
    assert "other fields" not in third  # the conversation and its id are shown, not dumped as JSON


def test_every_conversation_field_stays_text(tmp_path: Path) -> None:
    """The hostile conversation id, questions, answers and history: escaped everywhere they appear, no
    script but the page's own, no link but to an anchor of the page."""
    folder = build_chat_run(tmp_path)
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    rows[2]["sample"]["conversation"][1]["role"] = "<i>assistant</i>"  # a hand-edited role
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    html = write_report(folder).read_text(encoding="utf-8")
    assert EVIL not in html and "<b class=x>" not in html and "<i>assistant" not in html
    assert "<li class='turn other'><span class='role'>&lt;i&gt;assistant&lt;/i&gt;</span>" in html
    assert html.count("chat &lt;script&gt;window.__pwned=1&lt;/script&gt;") >= 4  # row, 3 places, search
    doc = parse(html)
    assert len(doc.scripts) == 4 and not any("__pwned" in s for s in doc.scripts)
    assert all(attrs["href"].startswith("#") for _, attrs in doc.tags if "href" in attrs)
    assert not any(tag in {"img", "i"} or attrs.get("class") == "x" for tag, attrs in doc.tags)
    ids = [attrs.get("id") for _, attrs in doc.tags if attrs.get("id")]
    assert len(ids) == len(set(ids)) and not any("script" in i for i in ids)


def test_a_hand_edited_conversations_section_still_renders(tmp_path: Path) -> None:
    folder = build_chat_run(tmp_path)
    path = folder / "summary.json"
    summary = json.loads(path.read_text(encoding="utf-8"))
    summary["conversations"] = {"n_turns": "many", "metrics": {"faithfulness": {"mean": "x", "ci95": [1]}},
                                "by_conversation": {"a": "not an object", "b": {"turns": "t1", "metrics": []},
                                                    "c": {"turns": ["nowhere", "c0-t1", 7],
                                                          "metrics": {"faithfulness": {"mean": float("nan"),
                                                                                       "worst": None,
                                                                                       "worst_turn": ["x"]}}}}}
    path.write_text(json.dumps(summary), encoding="utf-8")
    section = section_of(write_report(folder).read_text(encoding="utf-8"))
    assert section.count("<tbody id='c-") == 3
    assert len(turn_rows(conversation_of(section, "c-2"))) == 1  # the one turn among the results


def test_without_summary_json_the_conversations_are_summarised_from_the_results(tmp_path: Path) -> None:
    html = write_report(build_chat_run(tmp_path, write_summary=False)).read_text(encoding="utf-8")
    assert [r.count("worst-mark") for r in turn_rows(conversation_of(section_of(html), "c-0"))] == [1, 1, 1]


def test_a_run_without_conversations_has_no_such_section(tmp_path: Path) -> None:
    html = write_report(build_run(tmp_path)).read_text(encoding="utf-8")
    assert "id='conversations'" not in html and "c-order" not in html and len(parse(html).scripts) == 3


# ----------------------------------------------------------------------------- compare --by conversation

def test_compare_by_conversation_pairs_conversation_means(tmp_path: Path) -> None:
    a = build_chat_run(tmp_path, name="a", n_conversations=14)
    b = build_chat_run(tmp_path, name="b", n_conversations=14, shift={"faithfulness": -0.15}, drop=("c5",))
    comparison = compare_runs(a, b, by="conversation")
    assert comparison.unit == "conversation" and comparison.n_common == 13
    assert comparison.only_in_a == ["c5"] and comparison.only_in_b == []
    faith = comparison.metric("faithfulness")
    assert faith.n_pairs == 13 and faith.regressed
    by_a = json.loads((a / "summary.json").read_text(encoding="utf-8"))["conversations"]["by_conversation"]
    by_b = json.loads((b / "summary.json").read_text(encoding="utf-8"))["conversations"]["by_conversation"]
    common = [c for c in by_a if c in by_b]
    assert faith.mean_a == pytest.approx(sum(by_a[c]["metrics"]["faithfulness"]["mean"] for c in common) / 13)
    assert faith.mean_b == pytest.approx(sum(by_b[c]["metrics"]["faithfulness"]["mean"] for c in common) / 13)
    worst = faith.most_regressed[0]
    assert worst.id in by_a and worst.delta == pytest.approx(by_b[worst.id]["metrics"]["faithfulness"]["mean"]
                                                           - by_a[worst.id]["metrics"]["faithfulness"]["mean"])
    assert not comparison.metric("answer_relevancy").regressed
    assert regression_failures(comparison)[0].startswith("faithfulness regressed per conversation: ")
    text = format_comparison(comparison)
    assert "13 conversations paired by conversation id" in text and "1 conversations only in A" in text
    html = write_comparison_html(comparison, tmp_path / "cmp").read_text(encoding="utf-8")
    assert "faithfulness: conversations that got worse most" in html and "Paired bootstrap over conversations" in html
    assert EVIL not in html


def test_compare_by_sample_is_unchanged_by_conversations(tmp_path: Path) -> None:
    a = build_chat_run(tmp_path, name="a", n_conversations=5)
    comparison = compare_runs(a, a)
    assert comparison.unit == "sample" and comparison.n_common == 14  # 13 turns and the one alone


def test_cli_compare_by_conversation_gates_and_refuses_a_run_without_conversations(tmp_path: Path, capsys) -> None:
    a = build_chat_run(tmp_path, name="a", n_conversations=14)
    b = build_chat_run(tmp_path, name="b", n_conversations=14, shift={"faithfulness": -0.15})
    out = str(tmp_path / "cmp")
    assert report_main(["compare", str(a), str(b), "--by", "conversation", "--fail-on-regression", "-o", out]) == 1
    captured = capsys.readouterr()
    assert "REGRESSION: faithfulness regressed per conversation" in captured.err
    assert "14 conversations paired by conversation id" in captured.out
    assert report_main(["compare", str(a), str(a), "--by", "conversation", "--fail-on-regression", "-o", out]) == 0
    plain = build_run(tmp_path, name="plain")
    capsys.readouterr()
    assert report_main(["compare", str(plain), str(b), "--by", "conversation", "-o", out]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "plain: no conversations to compare" in err and "Traceback" not in err


def _thirds_runs(root: Path, *, b_turns: str) -> tuple[Path, Path]:
    """8 conversations of 3 turns: in A every turn scored, the first well and the others badly; in B the
    same scores on the first turn of each, and its other turns unscored (``b_turns="unscored"``) or left
    out (``"missing"``)."""
    samples_a, scores_a, samples_b, scores_b = [], [], [], []
    for k in range(8):
        rows = _turn_rows(f"c{k}", f"c{k}", [f"Question {n} of chat {k}?" for n in range(3)],
                          [f"Answer {n} of chat {k}." for n in range(3)])
        for n, row in enumerate(rows):
            score = {m: round(0.9 - 0.01 * k, 4) if n == 0 else 0.1 for m in METRICS}
            samples_a.append(row)
            scores_a.append(score)
            if n == 0 or b_turns == "unscored":
                samples_b.append(row)
                scores_b.append(score if n == 0 else {m: None for m in METRICS})
    return (_write_run(root / "a", samples_a, scores_a, True), _write_run(root / "b", samples_b, scores_b, True))


@pytest.mark.parametrize("b_turns", ["unscored", "missing"])
def test_compare_by_conversation_pairs_means_over_the_same_turns_and_gates_on_turns(tmp_path: Path, capsys,
                                                                                   b_turns: str) -> None:
    a, b = _thirds_runs(tmp_path, b_turns=b_turns)
    faith = compare_runs(a, b, by="conversation").metric("faithfulness")
    # each conversation's mean in A is over its first turn, the one B scored, not over all three
    assert faith.n_pairs == 8 and faith.delta == pytest.approx(0.0) and faith.mean_a == faith.mean_b
    assert (faith.n_both, faith.n_either) == (8, 24)
    assert (faith.missing_in_b, faith.unscored_in_other) == ((0, 16) if b_turns == "unscored" else (16, 0))
    why = "16 unscored in the other" if b_turns == "unscored" else "16 missing from B"
    out = str(tmp_path / "cmp")
    assert report_main(["compare", str(a), str(b), "--by", "conversation", "--fail-on-regression", "-o", out]) == 1
    captured = capsys.readouterr()
    assert (f"gate: faithfulness: delta +0.000 over 8 conversations paired on 8 turns of the 24 scored in A or B "
            f"({why}, 67%; at most 10% allowed, --max-unscored)") in captured.out
    failed = [line for line in captured.err.splitlines() if line.startswith("GATE FAILED: faithfulness")]
    assert failed == [f"GATE FAILED: faithfulness: 16 of the 24 turns scored in A or B are not paired ({why}; 67%), "
                      "more than the 10% --max-unscored allows: its change rests on 8 conversations paired on 8 "
                      "turns; score the same turns in both runs and see why any went unscored, or pass a higher "
                      "--max-unscored"]
    assert "REGRESSION" not in captured.err and "improved" not in captured.out
    # the other way round the candidate scored turns the baseline left unscored: that fails too, as by
    # sample; turns only the candidate has are new ones (a dataset that grew) and are not counted
    code = report_main(["compare", str(b), str(a), "--by", "conversation", "--fail-on-regression", "-o", out])
    assert code == (1 if b_turns == "unscored" else 0) and "REGRESSION" not in capsys.readouterr().err
    assert report_main(["compare", str(a), str(b), "--by", "conversation", "--fail-on-regression", "-o", out,
                        "--max-unscored", "0.7"]) == 0


def test_compare_by_conversation_on_the_same_turns_rests_on_all_of_them(tmp_path: Path, capsys) -> None:
    a = build_chat_run(tmp_path, name="a", n_conversations=14)
    b = build_chat_run(tmp_path, name="b", n_conversations=14, shift={"answer_relevancy": 0.01})
    comparison = compare_runs(a, b, by="conversation")
    relevancy = comparison.metric("answer_relevancy")  # c0's second turn unscored in both: it is in neither mean
    assert relevancy.n_pairs == 14 and relevancy.n_both == relevancy.n_either == 35
    by_b = json.loads((b / "summary.json").read_text(encoding="utf-8"))["conversations"]["by_conversation"]
    assert relevancy.mean_b == pytest.approx(sum(c["metrics"]["answer_relevancy"]["mean"] for c in by_b.values()) / 14)
    assert report_main(["compare", str(a), str(b), "--by", "conversation", "--fail-on-regression", "-o",
                        str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert (f"gate: answer_relevancy: delta {relevancy.delta:+.3f} over 14 conversations paired on 35 turns of the 35 "
            "scored in A or B (0 unscored in the other, 0%; at most 10% allowed, --max-unscored)") in out


# ----------------------------------------------------------------------------- in a real browser

needs_browser = pytest.mark.skipif(CHROMIUM is None or sync_playwright is None,
                                   reason="needs chromium (apt-get install chromium) and playwright")
# The report test's flags, less those Playwright sets itself (headless) or that would flood its pipe.
FLAGS = [f for f in CHROMIUM_FLAGS if f not in ("--headless", "--enable-logging=stderr", "--v=0")]
BROWSER_ROWS = [
    {"id": "t1", "conversation_id": HOSTILE_ID, "question": QUESTIONS[0], "answer": ANSWERS[0],
     "contexts": ["Hamlet is a tragedy by William Shakespeare."]},
    {"id": "t2<&>", "conversation_id": HOSTILE_ID,
     "conversation": [{"role": "user", "content": QUESTIONS[0]}, {"role": "assistant", "content": ANSWERS[0]},
                      {"role": "user", "content": QUESTIONS[1]}],
     "answer": ANSWERS[1], "contexts": ["Shakespeare was born in 1564 in Stratford."]},
    {"id": "t3", "conversation_id": HOSTILE_ID,
     "conversation": [{"role": "user", "content": QUESTIONS[0]}, {"role": "assistant", "content": ANSWERS[0]},
                      {"role": "user", "content": QUESTIONS[1]}, {"role": "assistant", "content": ANSWERS[1]},
                      {"role": "user", "content": QUESTIONS[2]}],
     "answer": ANSWERS[2], "contexts": ["Shakespeare was born in 1564 in Stratford."]},
    {"id": "u1", "conversation_id": "other", "question": "What is the capital of France?", "answer": "Paris.",
     "contexts": ["Paris is the capital of France."]},
    {"id": "u2", "conversation_id": "other",
     "conversation": [{"speaker": "user", "text": "What is the capital of France?"},
                      {"speaker": "agent", "text": "Paris."}, {"speaker": "user", "text": "And of Italy?"}],
     "answer": "Rome.", "contexts": ["Rome is the capital of Italy."]},
]


@needs_browser
def test_a_three_turn_conversation_in_the_browser(tiny_profile: Path, tmp_path: Path) -> None:
    """A run with the tiny models of a three-turn conversation and a two-turn one: the report opened in
    Chromium shows the turns in order with their scores; turn 3's evidence shows turns 1 and 2 before its
    question; nothing from the data ran or became markup."""
    from offline_eval.cli import main

    data = tmp_path / "chat.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in BROWSER_ROWS), encoding="utf-8")
    out = tmp_path / "run"
    metrics = ["faithfulness", "context_relevance_embedding"]
    assert main(["run", "--dataset", str(data), "--profile", str(tiny_profile), "--metrics", ",".join(metrics),
                 "--no-cache", "--quiet", "--output", str(out)]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            _check_page(browser, (out / "report.html").resolve().as_uri(), rows, metrics)
        finally:
            browser.close()


def _check_page(browser: Any, url: str, rows: list[dict], metrics: list[str]) -> None:
    page = browser.new_context().new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning")
            else None)
    page.on("pageerror", lambda err: problems.append(f"page error: {err}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    page.goto(url + "?corder=pos")
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator("#conversation-list > tbody").count() == 2
    chat = page.locator("#conversation-list > tbody").first
    assert chat.locator("tr.crow td").nth(1).text_content() == HOSTILE_ID
    assert not chat.locator("tr.detail").is_visible()
    chat.locator("tr.crow").click()  # opens into its turns
    turns = chat.locator("table.turns > tbody > tr")
    assert turns.count() == 3
    for n in range(3):
        cells = turns.nth(n).locator("td")
        assert cells.nth(0).text_content() == str(n + 1)
        assert cells.nth(1).text_content() == rows[n]["id"]
        assert cells.nth(2).text_content() == rows[n]["sample"]["question"] == QUESTIONS[n]
        assert cells.nth(3).text_content() == ANSWERS[n]
        for j, metric in enumerate(metrics):
            value = rows[n]["scores"][metric]["value"]
            assert cells.nth(4 + j).locator(".pill").text_content() == f"{value:.3f}"
    assert turns.locator(".worst-mark").count() == len(metrics)
    turns.nth(2).locator("a").click()  # turn 3's evidence
    detail = page.locator("#s-2 tr.detail")
    assert detail.is_visible()
    assert page.locator("#s-2").evaluate("tb => tb.classList.contains('hit')")  # opened from the URL's #id
    history = detail.locator("details.history ol.turns > li")
    assert [history.nth(i).locator(".text").text_content() for i in range(history.count())] == \
        [QUESTIONS[0], ANSWERS[0], QUESTIONS[1], ANSWERS[1]]
    assert detail.locator(".place").text_content() == f"{HOSTILE_ID}, turn 3 of 3"
    detail.locator(".place a").click()  # back to its conversation
    assert page.evaluate("location.hash") == "#c-0"
    conversation = page.locator("#c-0")
    assert conversation.evaluate("tb => tb.classList.contains('hit') && !tb.rows[1].hidden")
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.scripts.length") == 4
    assert page.locator("img, iframe, object, embed, i, b.x").count() == 0
    assert page.evaluate("document.body.getAttribute('data-js-error')") is None
    page.fill("#c-text", "italy")  # the filter finds a conversation by its turns' questions
    assert page.locator("#conversation-list > tbody:not([hidden])").count() == 1
    assert page.locator("#c-shown").text_content() == "1"
    assert problems == [], problems
