"""Scores that are expected shares say so beside the decisions their evidence counts (issue #55).

With option verdicts a score such as context_recall is the mean of the judge's probabilities, while its
explanation and evidence count decisions at P >= 0.5: "0 of 1 reference sentences attributable" beside
0.484. The report says which number is which, in the same words for every such metric; the reasons a
reviewer reads are plain, and said once. The rows below are shaped as `offline-eval run` writes them
with the starter profile (probabilities of a small judge on both sides of the line).

The browser test opens the report in Debian's chromium (/usr/bin/chromium) through Playwright with that
executable, and is skipped when either is missing.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from offline_eval.judging.verdicts import CREDULOUS_PASSAGE, refusals, Verdict
from offline_eval.metrics.evidence import Checks, Columns
from offline_eval.metrics.keypoints import Completeness
from offline_eval.metrics.ragas import AnswerCorrectness, ContextPrecision, ContextRecall, Faithfulness
from offline_eval.report.evidence import evidence_html
from offline_eval.report.html import write_report
from offline_eval.report.shares import decision_line, share_note
from tests.report.test_report import CHROMIUM_FLAGS

try:
    from playwright.sync_api import sync_playwright
except ImportError:
    sync_playwright = None

CHROMIUM = "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else shutil.which("chromium")

RECALL_META = {"claims": [{"claim": "Paris is the capital of France.", "attributed": False, "supported": False,
                           "probability": 0.484, "chunk": None}]}
FAITH_META = {"claims": [{"claim": "Paris is in France.", "supported": True, "probability": 0.62, "chunk": 0},
                         {"claim": "It has ten million people.", "supported": False, "probability": 0.3,
                          "chunk": None}]}
CORRECT_META = {"tp": [], "fp": ["Paris is the capital."], "fn": ["The capital of France is Paris."],
                "f1": 0.41 / 1.08, "similarity": 0.9, "counts": [0.41, 0.59, 0.75],
                "statements": {"answer": "whole", "reference": "whole"}}
CORRECT_VALUE = 0.75 * 0.41 / 1.08 + 0.25 * 0.9
KEYPOINT_META = {"keypoints": [
    {"keypoint": "names Paris", "label": "Irrelevant", "analysis": "",
     "probabilities": {"Relevant": 0.41, "Wrong": 0.14, "Irrelevant": 0.45}},
    {"keypoint": "says it is the capital", "label": "Relevant", "analysis": "",
     "probabilities": {"Relevant": 0.7, "Wrong": 0.1, "Irrelevant": 0.2}}],
    "keypoints_source": "sample", "counts": {"Relevant": 1, "Wrong": 0, "Irrelevant": 1},
    "expected_counts": {"Relevant": 1.11, "Wrong": 0.24, "Irrelevant": 0.65}}
PRECISION_META = {"verdicts": [{"chunk": 0, "useful": True, "probability": 0.7},
                               {"chunk": 1, "useful": False, "probability": 0.45}]}


def note(metric_cls: type, value: float | None, meta: dict[str, Any], line: float = 0.5) -> str:
    return share_note(value, meta, metric_cls.evidence, line)


# ----------------------------------------------------------------------------- the wording, without a browser

def test_context_recall_says_its_score_is_the_expected_share_beside_the_decision():
    assert note(ContextRecall, 0.484, RECALL_META) == (
        "0 of 1 attributed at the 0.5 line; the score 0.484 is the expected share, the mean of the judge's "
        "probabilities that each is attributed.")


def test_faithfulness_and_its_complement_use_the_same_words():
    assert note(Faithfulness, 0.46, FAITH_META) == (
        "1 of 2 supported at the 0.5 line; the score 0.460 is the expected share, the mean of the judge's "
        "probabilities that each is supported.")
    # hallucination_rate: 1 - the expected share supported, the expected share unsupported
    assert note(Faithfulness, 0.54, FAITH_META) == (
        "1 of 2 unsupported at the 0.5 line; the score 0.540 is the expected share, the mean of the judge's "
        "probabilities that each is unsupported.")


def test_answer_correctness_names_decided_and_expected_counts_in_the_note_and_each_column():
    assert note(AnswerCorrectness, CORRECT_VALUE, CORRECT_META) == (
        f"TP 0, FP 1, FN 1 at the 0.5 line; the score {CORRECT_VALUE:.3f} is computed from expected counts, "
        "the sums of the judge's probabilities (TP 0.41, FP 0.59, FN 0.75).")
    html = evidence_html("answer_correctness", CORRECT_META, [], value=CORRECT_VALUE)
    assert "TP — in answer and reference (0 at the 0.5 line; expected 0.41)" in html
    assert "FN — in reference only (1 at the 0.5 line; expected 0.75)" in html


def test_keypoint_metrics_count_the_most_likely_label():
    assert note(Completeness, 1.11 / 2, KEYPOINT_META) == (
        "1 of 2 relevant by each one's most likely label; the score 0.555 is the expected share, the mean of "
        "the judge's probabilities that each is relevant.")
    assert note(Completeness, 0.24 / 2, KEYPOINT_META).startswith("0 of 2 wrong by each one's most likely label")


def test_a_share_of_decisions_gets_no_note():
    # context_precision's average precision rests on its decisions
    assert note(ContextPrecision, 1.0, PRECISION_META) == ""
    # --verdict-score threshold: the value is the share decided
    assert note(ContextRecall, 0.0, RECALL_META) == ""
    assert note(AnswerCorrectness, 0.5, {**CORRECT_META, "counts": [0, 1, 1]}) == ""
    assert note(Completeness, 0.5, KEYPOINT_META) == ""
    # generated verdicts: probabilities written as 0 and 1 are decisions
    decided = {"claims": [{**RECALL_META["claims"][0], "probability": 0.0}]}
    assert note(ContextRecall, 0.0, decided) == ""
    assert note(ContextRecall, None, RECALL_META) == ""


def test_a_hand_edited_or_malformed_metadata_gets_no_note():
    assert note(ContextRecall, 0.484, {"claims": "not a list"}) == ""
    assert note(ContextRecall, 0.484, {"claims": [{"attributed": "no", "probability": 0.484}]}) == ""
    assert note(ContextRecall, 0.484, {"claims": [{"attributed": False, "probability": "high"}]}) == ""
    assert note(AnswerCorrectness, 0.5, {**CORRECT_META, "counts": [0.41, "x", 0.75]}) == ""
    assert share_note(0.5, {"a": [], "counts": [0.5, 1]}, [Columns((("a", "A", True),))], 0.5) == ""


def test_the_line_is_the_run_s_support_threshold():
    assert decision_line({"settings": {"support_threshold": 0.7}}) == 0.7
    assert decision_line({"settings": {"support_threshold": "x"}}) == decision_line({}) == 0.5
    assert note(ContextRecall, 0.484, RECALL_META, 0.7).startswith("0 of 1 attributed at the 0.7 line;")


def test_an_undeclared_metric_with_probabilities_gets_the_same_note():
    got = share_note(0.484, RECALL_META, [Checks("claims", text="claim", verdict="attributed", yes="yes", no="no")],
                     0.5)
    assert got.startswith("0 of 1 yes at the 0.5 line; the score 0.484 is the expected share")


def test_a_refused_verdict_says_why_in_plain_words():
    meta = {"claims": [{"claim": "北京是首都。", "supported": False, "probability": 0.0, "chunk": None,
                        "judge_probability": 0.8, "credulity": 0.9, "refused": CREDULOUS_PASSAGE}]}
    html = evidence_html("faithfulness", meta, [])
    assert "not counted: the judge says the passage also supports a nonsense control sentence" in html
    explanation = refusals([Verdict(0.0, False, refused=CREDULOUS_PASSAGE)])
    assert "absurd" not in explanation and "taken as no" not in explanation
    assert explanation == ("; of 1, 1 counted as unsupported because the judge says their passages also support a "
                           "nonsense control sentence (the moon is made of green cheese), so its yes proves nothing")


# ----------------------------------------------------------------------------- a run folder

def score(value: float | None, meta: dict[str, Any], explanation: str = "", reason: str | None = None) -> dict:
    out: dict[str, Any] = {"value": value, "metadata": meta}
    if explanation:
        out["explanation"] = explanation
    if reason:
        out["reason"] = reason
    return out


def build_share_run(root: Path) -> Path:
    """One starter-like row whose decisions and expected shares differ on every metric, and one unscored
    by a judge whose answer was cut off twice."""
    run = root / "run"
    run.mkdir()
    sample = {"id": "zh-01", "question": "法国的首都是哪里？", "answer": "巴黎。", "ground_truth": "巴黎是法国的首都。",
              "contexts": ["巴黎是法国的首都。", "里昂在法国。"], "language": "zh"}
    scores = {
        "context_recall": score(0.484, RECALL_META, "0 of 1 reference sentences attributable"),
        "faithfulness": score(0.46, FAITH_META, "1 of 2 claims supported by the contexts (mean P(supported) 0.460)"),
        "answer_correctness": score(CORRECT_VALUE, CORRECT_META, "F1 0.380 (TP 0.41, FP 0.59, FN 0.75), "
                                                                 "similarity 0.900"),
        "completeness": score(0.555, KEYPOINT_META, "1 relevant, 0 wrong, 1 irrelevant of 2 key points "
                                                    "(expected: 1.11 relevant)"),
        "context_precision": score(1.0, PRECISION_META, "1 of 2 chunks useful"),
    }
    other = {**sample, "id": "zh-02"}
    broken = {m: score(None, {}, "judge_unparseable: output cut off before the JSON closed, also after repair",
                       "judge_unparseable") for m in scores}
    rows = [{"id": "zh-01", "row": 1, "sample": sample, "scores": scores},
            {"id": "zh-02", "row": 2, "sample": other, "scores": broken}]
    (run / "results.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                       encoding="utf-8")
    (run / "summary.json").write_text(json.dumps({"run": {
        "dataset": "sample.jsonl", "profile": "starter", "starter": True, "metrics": list(scores),
        "settings": {"support_threshold": 0.5, "verdict_score": "probability"}}, "metrics": {}}), encoding="utf-8")
    return run


EXPECTED = {
    "context_recall": "0 of 1 attributed at the 0.5 line; the score 0.484 is the expected share, the mean of the "
                      "judge's probabilities that each is attributed.",
    "faithfulness": "1 of 2 supported at the 0.5 line; the score 0.460 is the expected share",
    "answer_correctness": "TP 0, FP 1, FN 1 at the 0.5 line; the score",
    "completeness": "1 of 2 relevant by each one's most likely label; the score 0.555 is the expected share",
}


def test_the_report_says_which_number_is_which_and_each_reason_once(tmp_path):
    html = write_report(build_share_run(tmp_path)).read_text(encoding="utf-8")
    for text in EXPECTED.values():
        assert text.replace("'", "&#x27;") in html
    assert html.count("share-note") == len(EXPECTED) + 1  # one per expected share, and the stylesheet's rule
    assert "judge_unparseable: output cut off" not in html  # the reason shown beside it is not repeated
    assert html.count("output cut off before the JSON closed, also after repair") == len(EXPECTED) + 1


CHECK_PAGE = """() => {
  const out = {};
  for (const ev of document.querySelectorAll('#s-0 .evidence')) {
    out[ev.dataset.metric] = ev.innerText;
  }
  out['#unscored'] = document.querySelector('#s-1 .evidence').innerText;
  return out;
}"""


@pytest.mark.skipif(CHROMIUM is None or sync_playwright is None,
                    reason="needs chromium (apt-get install chromium) and playwright")
def test_the_wording_shows_in_chromium(tmp_path):
    """The row opened in Debian's chromium shows each expected share's sentence beside its decision
    count, the column heads of answer_correctness with both counts, and the unscored reason once."""
    url = write_report(build_share_run(tmp_path)).resolve().as_uri()
    flags = [f for f in CHROMIUM_FLAGS if f not in ("--headless", "--enable-logging=stderr", "--v=0")]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=flags)
        try:
            page = browser.new_context().new_page()
            errors: list[str] = []
            page.on("pageerror", lambda err: errors.append(str(err)))
            page.goto(url)
            page.wait_for_selector("body[data-ready='1']")
            page.click("#s-0 tr.srow")
            page.click("#s-1 tr.srow")
            page.wait_for_selector("#s-0 .evidence .share-note", state="visible")
            shown = page.evaluate(CHECK_PAGE)
        finally:
            browser.close()
    assert not errors
    for metric, text in EXPECTED.items():
        assert text in " ".join(shown[metric].split()), (metric, shown[metric])
    recall = " ".join(shown["context_recall"].split())
    # the decision count and the sentence that reconciles it with the score, one after the other
    assert "0 of 1 reference sentences attributable 0 of 1 attributed at the 0.5 line; the score 0.484" in recall
    correct = " ".join(shown["answer_correctness"].split())
    assert "TP — in answer and reference (0 at the 0.5 line; expected 0.41)" in correct
    assert "expected share" not in shown["context_precision"]
    unscored = " ".join(shown["#unscored"].split())
    assert unscored.count("judge_unparseable") == 1 and unscored.count("cut off") == 1
