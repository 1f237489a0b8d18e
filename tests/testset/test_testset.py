"""Test-set generation on two tiny documents, through the engine with a scripted judge."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from offline_eval.cli import main
from offline_eval.data.readers import read_dataset
from offline_eval.engine.cache import ResultCache
from offline_eval.engine.executor import Engine
from offline_eval.prompts.rageval import TS_QUESTION
from offline_eval.runtime.scripted import ScriptedJudge
from offline_eval.testset import QUESTION_TYPES
from offline_eval.testset import evidence
from offline_eval.testset.pipeline import GenerateOptions, SourceDoc, generate_testset, plan_slots, window
from offline_eval.testset.verbatim import locate, normalise_space
from tests.helpers import models

ACME = ("Acme Corp was founded in 2001 in Berlin.\n"
        "In March 2019 Acme acquired Beta Ltd for 120 million euros. The acquisition of Beta Ltd doubled "
        "Acme's production capacity.\n"
        "In June 2020 Acme opened a factory in Lyon. Acme's revenue in 2020 was 500 million euros. "
        "Acme's revenue in 2021 was 650 million euros. In November 2021 Acme issued bonds worth 50 million euros.")
ZETA = ("Zeta Inc was founded in 1998 in Oslo.\nIn May 2018 Zeta acquired Gamma AG for 80 million euros.\n"
        "Zeta's revenue in 2020 was 300 million euros.")
DOCS = [SourceDoc("acme", ACME, "en", "finance", title="Acme Corp"),
        SourceDoc("zeta", ZETA, "en", "finance", title="Zeta Inc")]
JUNK = "Sure! Here you go: {questions: ["

# the first words of each type's task in the question prompt
TASKS = {"Write one factual question": "factual", "Write one multi-hop question": "multi_hop",
         "asks to summarise": "summary", "two different documents": "multi_doc",
         "compares two numbers": "numeric", "order in time": "temporal",
         "does NOT answer": "unanswerable"}


def _last_user(text: str) -> str:
    """The real request of a rendered prompt (the worked example comes before it)."""
    return text.rsplit("\nuser: ", 1)[-1]


def _evidence(request: str) -> list[str]:
    """The sentences shown in a question prompt, without their number and document label."""
    shown = request.split("Sentences:\n", 1)[1].split("\nJSON:", 1)[0]
    return [re.sub(r"^\[\d+\] (\([^)]*\) )?", "", line) for line in shown.splitlines()]


def _question_type(request: str) -> str | None:
    return next((t for marker, t in TASKS.items() if marker in request), None)


def scripted_respond(fail_once: set[str] | None = None):
    """A judge playing every stage from the prompt it is given. The first question of each type in
    ``fail_once`` fails: multi_hop with junk (and junk again when asked to repair it), summary with a
    question that copies its sentence."""
    pending = set(fail_once or ())

    def respond(text: str) -> str:
        if "Summarise their common schema" in text:
            return json.dumps({"fields": [{"name": "company", "description": "name"}]})
        request = _last_user(text)
        if request.startswith("Your reply could not be used"):
            return JUNK
        if "list the key points" in request:
            return json.dumps({"keypoints": ["1. First point.", "2. Second point."]})
        qtype = _question_type(request)
        if qtype is None:
            return "I don't know."
        sentences = _evidence(request)
        if qtype in pending:
            pending.discard(qtype)
            if qtype == "multi_hop":
                return JUNK
            return json.dumps({"answer": sentences[0], "question": sentences[0]})
        if qtype == "unanswerable":
            return json.dumps({"question": "How many employees did the company have in 1990?"})
        first_words = " ".join(sentences[0].split()[:3])
        # the type in the question: types that share their first sentence do not ask the same question
        return json.dumps({"answer": " ".join(sentences),
                           "question": f"What does the document report about {first_words} ({qtype})?"})
    return respond


def judge(fail_once: set[str] | None = None) -> ScriptedJudge:
    return ScriptedJudge(script={"generate": [{"match": "", "response": scripted_respond(fail_once)}]})


def test_verbatim_locate_returns_the_documents_own_span():
    doc = "Line one.\nIn June 2020 Acme opened\na factory.  End."
    assert locate("In June 2020 Acme opened a factory.", doc) == "In June 2020 Acme opened\na factory."
    assert locate("“In June 2020 Acme opened a factory.”", doc) == "In June 2020 Acme opened\na factory."
    assert locate("In June 2021 Acme opened a factory.", doc) is None
    assert locate("   ", doc) is None
    assert locate("opened a  factory", doc) == "opened\na factory" and locate("opened the factory", doc) is None


def test_evidence_sentences_skip_markup_and_fragments():
    judgment = ("**Title: Criminal Judgment**\n\n**Defendant**:\nName: M. Bennett\n"
                "On March 22, 2023, M. Bennett was formally placed under criminal detention.\n---\n"
                "The court fined the defendant 5,000 dollars for the offence.")
    texts = [s.text for s in evidence.sentences(judgment)]
    assert texts == ["On March 22, 2023, M. Bennett was formally placed under criminal detention.",
                     "The court fined the defendant 5,000 dollars for the offence."]
    first, second = evidence.sentences(judgment)
    assert first.has_date and not first.has_amount and second.has_amount
    zh = evidence.sentences("公司概况\n2018年3月，公司完成了对XYZ科技有限公司的资产收购，总价值达到3000万元。")
    assert [s.text for s in zh] == ["2018年3月，公司完成了对XYZ科技有限公司的资产收购，总价值达到3000万元。"]
    assert zh[0].has_date and zh[0].has_amount


def test_evidence_fits_each_type_and_attempts_differ():
    one, two = [ACME], [ACME, ZETA]
    factual = evidence.pick("factual", one, 0, 0, 3)
    assert len(factual) == 1 and factual[0].has_fact
    hop = evidence.pick("multi_hop", one, 0, 0, 3)
    assert len(hop) == 2 and hop[1].index == hop[0].index + 1  # neighbours: an event and what followed
    summary = evidence.pick("summary", one, 0, 0, 3)
    assert len(summary) == 3 and [s.index for s in summary] == list(range(summary[0].index, summary[0].index + 3))
    numeric = evidence.pick("numeric", one, 0, 0, 3)
    assert len(numeric) == 2 and all(s.has_amount for s in numeric)
    temporal = evidence.pick("temporal", one, 0, 0, 3)
    assert len(temporal) == 2 and all(s.has_date for s in temporal) and temporal[0].text != temporal[1].text
    across = evidence.pick("multi_doc", two, 0, 0, 3)
    assert [s.doc for s in across] == [0, 1]
    assert evidence.pick("multi_doc", one, 0, 0, 3) is None  # one document cannot give two
    for qtype in ("factual", "multi_hop", "numeric", "temporal", "multi_doc"):
        texts = two if qtype == "multi_doc" else one
        tries = [tuple(s.text for s in evidence.pick(qtype, texts, 0, a, 3)) for a in range(3)]
        assert len(set(tries)) == 3, qtype  # every attempt sees other sentences
        assert tries[0] == tuple(s.text for s in evidence.pick(qtype, texts, 0, 0, 3))  # deterministic
        for chosen in tries:
            assert all(any(t in doc for doc in texts) for t in chosen)  # spans of the documents
    # a question that repeats its sentence, and one that leaves a sentence out
    assert evidence.copies(hop, hop[0].text.rstrip(".") + "?")
    assert not evidence.copies(hop, "What did Acme buy in March 2019?")
    assert evidence.unused(across, across[0].text, "Acme Corp Zeta Inc") == 1
    assert evidence.unused(across, f"{across[0].text} {across[1].text}", "Acme Corp Zeta Inc") == 0
    # the subjects' names and small numbers match by chance: they do not count as using a sentence
    assert evidence.unused(across, "Acme Corp and Zeta Inc, 2 of them", "Acme Corp Zeta Inc") == 2


def test_question_prompts_put_the_example_in_its_own_turns_answer_first():
    for qtype in QUESTION_TYPES:
        for lang in ("en", "zh"):
            roles = [role for role, _ in TS_QUESTION[qtype].render(lang, subject="S", sentences="[1] x.")]
            assert roles == ["system", "user", "assistant", "user"]
    (_, _), (_, example_in), (_, example_out), (_, request) = TS_QUESTION["numeric"].render(
        "en", subject="Zeta Inc", sentences="[1] Zeta's revenue was 3 million euros.")
    assert list(json.loads(example_out)) == ["answer", "question"]  # the answer first
    assert "Document: Zeta Inc\nSentences:\n[1] Zeta's revenue was 3 million euros." in request
    assert "Document: Acme Corp" in example_in and "Zeta" not in example_in
    (_, _), _, (_, zh_out), (_, zh_request) = TS_QUESTION["temporal"].render("zh", subject="公司", sentences="[1] x。")
    assert "用中文写" in zh_request and "文档：公司" in zh_request and "收购" in json.loads(zh_out)["question"]
    assert list(json.loads(TS_QUESTION["unanswerable"].render("en", subject="S", sentences="x")[2][1])) == ["question"]


def test_plan_spreads_types_and_skips_multi_doc_with_one_document():
    slots, messages = plan_slots(DOCS, GenerateOptions(n=7))
    assert sorted(s.qtype for s in slots) == sorted(QUESTION_TYPES)
    # same kind: numeric and temporal compare the two documents; multi_doc always does
    assert all(len(s.docs) == 2 for s in slots if s.qtype in ("multi_doc", "numeric", "temporal"))
    assert not messages
    mixed = [DOCS[0], SourceDoc("zeta", ZETA, "en", "law")]
    slots, _ = plan_slots(mixed, GenerateOptions(n=7))
    assert [len(s.docs) for s in slots if s.qtype in ("numeric", "temporal")] == [1, 1]
    slots, messages = plan_slots(DOCS[:1], GenerateOptions(n=6))
    assert "multi_doc" not in {s.qtype for s in slots} and "multi_doc" in messages[0]
    assert len(slots) == 6
    many, _ = plan_slots(DOCS, GenerateOptions(n=70))
    assert len(many) == 70
    factual = [s for s in many if s.qtype == "factual"]
    assert sorted((s.docs[0].id, s.number) for s in factual) == sorted(
        [("acme", i) for i in range(5)] + [("zeta", i) for i in range(5)])  # distinct evidence per slot


def test_window_covers_long_documents_in_parts():
    text = "\n".join(f"Sentence number {i} of a long document." for i in range(200))
    first, last = window(text, 0, 3, 1000), window(text, 2, 3, 1000)
    assert len(first) <= 1000 and len(last) <= 1000 and first != last
    assert first in text and last in text
    assert window("short", 0, 1, 1000) == "short"


def test_pipeline_every_type_verbatim_references_and_retries(tmp_path: Path):
    scripted = judge(fail_once={"multi_hop", "summary"})
    engine = Engine(models(scripted), ResultCache(tmp_path / "cache.sqlite"))
    written: list[dict] = []
    # n=8: two factual questions (one per document), one of each other type
    result = generate_testset(DOCS, engine, GenerateOptions(n=8), on_row=written.append)
    rows = result.rows
    assert written == rows and len(rows) == 8
    assert {r["query_type"] for r in rows} == set(QUESTION_TYPES)  # every requested type represented
    # one stage asked every first question: the first 8 prompts are the 8 question prompts
    assert all(_question_type(_last_user(p)) for p in scripted.prompts_seen[:8])
    by_doc = {d.id: d.text for d in DOCS}
    for row in rows:
        for ref in row["reference_contexts"]:
            assert any(ref in by_doc[d] for d in row["doc_ids"])  # stored span is an exact substring
        assert row["keypoints"] and row["id"].startswith(row["query_type"])
        assert row["language"] == "en"
    for row in rows:
        if row["query_type"] != "unanswerable":
            # the answer was written from exactly these sentences
            assert row["ground_truth"] == " ".join(row["reference_contexts"])
            assert row["keypoints"] == ["First point.", "Second point."]
    assert result.drops["reference_not_verbatim"] == 0
    # the failed first attempts were retried on other sentences and recorded with their raw text
    assert result.drops["question_unparseable"] == 1 and result.drops["question_copies_document"] == 1
    assert "question_given_up" not in result.drops
    junk = next(r for r in result.rejected if r["reason"] == "question_unparseable")
    assert junk["query_type"] == "multi_hop" and junk["raw"] == [JUNK, JUNK] and junk["attempt"] == 1
    assert len(junk["evidence"]) == 2 and all(e in ACME or e in ZETA for e in junk["evidence"])
    copied = next(r for r in result.rejected if r["reason"] == "question_copies_document")
    assert copied["query_type"] == "summary" and copied["evidence"][0] in json.loads(copied["raw"][0])["question"]
    hop = next(r for r in rows if r["query_type"] == "multi_hop")
    assert len(hop["reference_contexts"]) == 2 and set(hop["reference_contexts"]) != set(junk["evidence"])
    summary = next(r for r in rows if r["query_type"] == "summary")
    assert len(summary["reference_contexts"]) == 3
    unanswerable = next(r for r in rows if r["query_type"] == "unanswerable")
    assert unanswerable["keypoints"] == ["Unable to answer"] and unanswerable["reference_contexts"] == []
    assert unanswerable["ground_truth"] == "Unable to answer"
    multi = next(r for r in rows if r["query_type"] == "multi_doc")
    assert sorted(multi["doc_ids"]) == ["acme", "zeta"]
    assert multi["reference_contexts"][0] in ACME and multi["reference_contexts"][1] in ZETA
    assert not any("Summarise their common schema" in p for p in scripted.prompts_seen)  # only for synthesis

    # a rerun answers everything from the cache and writes the same rows
    engine.cache.close()
    again = generate_testset(DOCS, Engine(models(judge()), ResultCache(tmp_path / "cache.sqlite")),
                             GenerateOptions(n=8))
    assert again.stats["computed"] == {}
    assert sorted(r["id"] for r in again.rows) == sorted(r["id"] for r in rows)


def test_junk_from_the_judge_never_crashes():
    junk = ScriptedJudge(script={"generate": [{"match": "", "response": JUNK}]})
    result = generate_testset(DOCS, Engine(models(junk)), GenerateOptions(n=7, attempts=2))
    assert result.rows == []
    assert result.drops["question_unparseable"] == 14 and result.drops["question_given_up"] == 7
    assert len(result.rejected) == 14 and all(r["raw"] == [JUNK, JUNK] for r in result.rejected)


def test_unusable_answers_are_rejected_with_their_reason():
    def respond(text: str) -> str:
        request = _last_user(text)
        if "list the key points" in request:
            return "no key points today"  # unreadable: the answer becomes the key point
        if "Write one factual question" in request:
            return json.dumps({"answer": "", "question": "Where was Acme founded?"})
        if "Write one multi-hop question" in request:
            # uses only the first of its two sentences
            return json.dumps({"answer": "Zeta Inc was founded in Oslo.", "question": "Where was Zeta Inc founded?"})
        if "compares two numbers" in request:
            first, second = _evidence(request)
            return json.dumps({"answer": f"{first} {second}", "question": "Which revenue was larger?"})
        return "{}"
    scripted = ScriptedJudge(script={"generate": [{"match": "", "response": respond}]})
    result = generate_testset([DOCS[1]], Engine(models(scripted)),
                              GenerateOptions(n=3, types=("factual", "multi_hop", "numeric")))
    assert result.drops["answer_empty"] == 3 and result.drops["evidence_unused"] >= 1
    assert [r["query_type"] for r in result.rows] == ["numeric"]
    [row] = result.rows
    assert row["keypoints"] == [row["ground_truth"]]
    assert result.drops["keypoints_unparseable_answer_kept_as_keypoint"] == 1
    assert any(r["stage"] == "keypoints" and r["raw"][0] == "no key points today" for r in result.rejected)


def test_an_answer_must_use_its_one_evidence_sentence():
    # about other matters than any sentence: once the factual types had one sentence and went unchecked
    off_topic = ScriptedJudge(script={"generate": [{"match": "", "response": json.dumps(
        {"answer": "Staff are paid in full when the office closes.",
         "question": "What is paid when the office closes?"})}]})
    result = generate_testset(DOCS, Engine(models(off_topic)), GenerateOptions(n=2, types=("factual",)))
    assert result.rows == [] and result.drops["evidence_unused"] == 6 and result.drops["question_given_up"] == 2
    assert all(r["reason"] == "evidence_unused" and len(r["evidence"]) == 1 for r in result.rejected)
    # a fitting answer passes, also on a document's first line, which is its subject when it has no title
    [line] = evidence.sentences("Acme Corp was founded in 2001 in Berlin.")
    assert evidence.unused([line], "Where was Acme Corp founded? In Berlin.", line.text) == 0
    assert evidence.unused([line], "Where is the office? In Paris.", line.text) == 1
    untitled = SourceDoc("acme", ACME, "en")

    def fitting(text: str) -> str:
        request = _last_user(text)
        if "list the key points" in request:
            return json.dumps({"keypoints": ["A point."]})
        words = _evidence(request)[0].split()
        return json.dumps({"answer": " ".join(words[-3:]), "question": f"What is said of {' '.join(words[:4])}?"})
    # seven questions: every factual sentence of the document once, its first line among them
    result = generate_testset([untitled], Engine(models(ScriptedJudge(script={"generate": [
        {"match": "", "response": fitting}]}))), GenerateOptions(n=7, types=("factual",)))
    assert len(result.rows) == 7 and not result.drops
    assert ["Acme Corp was founded in 2001 in Berlin."] in [r["reference_contexts"] for r in result.rows]


THREE = [SourceDoc(f"policy-{i}", f"Policy {i} covers travel claims in {city}. Travel claims filed after 30 days "
                   f"are refused by the {city} office. Meals on trips are paid up to {20 + i} euros a day.",
                   "en", title=f"Policy {i}")
         for i, city in enumerate(("Paris", "Rome", "Oslo"))]


def test_a_question_already_written_is_rejected_and_retried():
    asked = iter(["What happens to late travel claims?", "what happens to LATE travel  claims",
                  "What happens to late travel-claims ?"] * 20)

    def respond(text: str) -> str:
        request = _last_user(text)
        if "list the key points" in request:
            return json.dumps({"keypoints": ["They are refused."]})
        return json.dumps({"answer": " ".join(_evidence(request)), "question": next(asked)})
    result = generate_testset(THREE, Engine(models(ScriptedJudge(script={"generate": [
        {"match": "", "response": respond}]}))), GenerateOptions(n=6, types=("factual", "multi_doc")))
    [row] = result.rows  # case, spacing and punctuation aside, every question is the first one again
    assert result.drops["duplicate_question"] == 15 and result.drops["question_given_up"] == 5
    repeats = [r for r in result.rejected if r["reason"] == "duplicate_question"]
    assert len(repeats) == 15 and {r["attempt"] for r in repeats} == {1, 2, 3}
    assert all(json.loads(r["raw"][0])["question"] for r in repeats)


def test_cli_generate_reports_repeated_questions(tmp_path: Path, capsys: pytest.CaptureFixture):
    docs = tmp_path / "docs3.jsonl"
    docs.write_text("".join(json.dumps({"id": d.id, "text": d.text, "title": d.title}) + "\n" for d in THREE),
                    encoding="utf-8")
    # one answer for every prompt, fitting every sentence that names travel claims
    same = json.dumps({"answer": "Late travel claims are refused.", "question": "What happens to late travel claims?"})
    (tmp_path / "script.json").write_text(json.dumps({"generate": [
        {"match": "list the key points", "response": json.dumps({"keypoints": ["They are refused."]})},
        {"match": "", "response": same}]}), encoding="utf-8")
    out = tmp_path / "gen" / "b.jsonl"
    assert main(["generate", "--docs", str(docs), "--out", str(out), "--n", "6", "--types", "factual,multi_doc",
                 "--judge-backend", "scripted", "--judge", str(tmp_path / "script.json"), "--no-cache",
                 "--quiet"]) == 0
    report = capsys.readouterr().out
    assert "wrote 1 of 6 requested rows" in report and "duplicate_question=" in report
    [row] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert row["question"] == "What happens to late travel claims?"
    rejected = [json.loads(line) for line in (tmp_path / "gen" / "b.rejected.jsonl").read_text().splitlines()]
    assert "duplicate_question" in {r["reason"] for r in rejected}


def test_synthesized_documents_are_used_as_the_corpus():
    doc_text = ("Orion Ltd was founded in 2016 in Porto. In April 2019 Orion bought Vega SA for 45 million euros. "
                "Orion's revenue in 2021 was 210 million euros. ") * 2
    base = scripted_respond()

    def synth(text: str) -> str:
        if "Invent the configuration" in text:
            return json.dumps({"facts": [{"field": "company", "value": "Orion Ltd"}]})
        if "Write a realistic document" in text:
            return doc_text
        if "Write one factual question" in _last_user(text):
            assert "Orion" in _last_user(text)  # asked about the synthetic document
        return base(text)
    scripted = ScriptedJudge(script={"generate": [{"match": "", "response": synth}]})
    result = generate_testset(DOCS, Engine(models(scripted)),
                              GenerateOptions(n=1, types=("factual",), synthesize_docs=True, num_docs=2))
    assert [d.id for d in result.documents] == ["synthetic-1", "synthetic-2"]
    assert [d.facts for d in result.documents][0] == [{"field": "company", "value": "Orion Ltd"}]
    assert len(result.rows) == 1 and result.rows[0]["doc_ids"][0].startswith("synthetic-")
    assert result.rows[0]["reference_contexts"][0] in doc_text
    fixed = [p for p in scripted.prompts_seen if "Invent the configuration" in p]
    assert len(fixed) == 2 and fixed[0] != fixed[1]  # rule-based values differ per document


ZH = ("华夏娱乐有限公司成立于2001年5月，总部位于北京市。\n"
      "2017年2月，公司完成了对草莓文化传媒有限公司的资产收购，总价值1.2亿元。")


def test_chinese_documents_get_chinese_prompts():
    def respond_zh(text: str) -> str:
        request = _last_user(text)
        if "列出一个完整回答必须包含的要点" in request:
            return json.dumps({"keypoints": ["1、收购总价值为1.2亿元。"]}, ensure_ascii=False)
        if "事实类问题" in request and "文档：华夏娱乐有限公司" in request:
            return json.dumps({"answer": "1.2亿元", "question": "华夏娱乐收购草莓文化花了多少钱？"}, ensure_ascii=False)
        return "{}"
    scripted = ScriptedJudge(script={"generate": [{"match": "", "response": respond_zh}]})
    zh = SourceDoc("z1", ZH, "zh", title="华夏娱乐有限公司")
    result = generate_testset([zh], Engine(models(scripted)), GenerateOptions(n=1, types=("factual",)))
    [row] = result.rows
    assert row["language"] == "zh" and row["keypoints"] == ["收购总价值为1.2亿元。"]
    assert row["reference_contexts"][0] in ZH


def test_a_question_in_the_wrong_language_is_rejected():
    english = ScriptedJudge(script={"generate": [{"match": "", "response": json.dumps(
        {"answer": "120 million yuan", "question": "How much did Huaxia pay for the acquisition?"})}]})
    zh = SourceDoc("z1", ZH, "zh")
    result = generate_testset([zh], Engine(models(english)), GenerateOptions(n=1, types=("factual",)))
    assert result.rows == [] and result.drops["wrong_language"] == 2  # both factual sentences tried
    assert result.drops["question_given_up"] == 1


def _write_docs(folder: Path) -> None:
    folder.mkdir()
    (folder / "acme.txt").write_text(ACME, encoding="utf-8")
    (folder / "zeta.md").write_text(ZETA, encoding="utf-8")


def test_cli_generate_writes_rows_and_rejections(tmp_path: Path, capsys: pytest.CaptureFixture):
    _write_docs(tmp_path / "docs")
    script = {"generate": [
        {"match": "list the key points", "response": json.dumps({"keypoints": ["Revenue was 500 million euros."]})},
        # written for the sentence the factual question is first given: "Acme's revenue in 2020 was ..."
        {"match": "Write one factual question", "response": json.dumps(
            {"answer": "500 million euros", "question": "What was the company's revenue in 2020?"})},
        # never usable: the multi-document question is given up after its attempts
        {"match": "two different documents", "response": json.dumps({"answer": "", "question": "Which?"})},
        {"match": "does NOT answer", "response": json.dumps({"question": "What was Acme's revenue in 1990?"})},
    ]}
    (tmp_path / "script.json").write_text(json.dumps(script), encoding="utf-8")
    out = tmp_path / "out" / "testset.jsonl"
    argv = ["generate", "--docs", str(tmp_path / "docs"), "--out", str(out), "--n", "3",
            "--types", "factual,multi_doc,unanswerable", "--judge-backend", "scripted", "--attempts", "2",
            "--judge", str(tmp_path / "script.json"), "--cache", str(tmp_path / "cache.sqlite"), "--quiet"]
    assert main(argv) == 0
    report = capsys.readouterr().out
    assert "wrote 2 of 3 requested rows" in report
    assert "not verbatim in their document: 0" in report
    assert "answer_empty=2" in report and "question_given_up=1" in report
    rejected = [json.loads(line) for line in (tmp_path / "out" / "testset.rejected.jsonl").read_text().splitlines()]
    assert [r["reason"] for r in rejected] == ["answer_empty", "answer_empty"]
    assert all(r["query_type"] == "multi_doc" and r["raw"] for r in rejected)
    samples = read_dataset(out)
    assert {s.extra["query_type"] for s in samples} == {"factual", "unanswerable"}
    factual = next(s for s in samples if s.extra["query_type"] == "factual")
    assert factual.question == "What was the company's revenue in 2020?" and factual.ground_truth == "500 million euros"
    [doc_id] = factual.extra["doc_ids"]
    source = ACME if doc_id == "acme.txt" else ZETA
    assert len(factual.reference_contexts) == 1 and factual.reference_contexts[0] in source
    assert factual.keypoints == ["Revenue was 500 million euros."] and factual.language == "en"
    assert all(normalise_space(r) in normalise_space(source) for r in factual.reference_contexts)
    # a rerun resumes from the cache and writes the same file
    first = out.read_text(encoding="utf-8")
    assert main(argv) == 0
    assert sorted(out.read_text(encoding="utf-8").splitlines()) == sorted(first.splitlines())


def test_cli_rejects_unknown_type(tmp_path: Path):
    with pytest.raises(SystemExit):
        main(["generate", "--docs", str(tmp_path), "--out", str(tmp_path / "o.jsonl"), "--types", "trivia"])


def test_schema_prompts_are_cut_to_the_judges_context():
    options = GenerateOptions(max_tokens=384, context_tokens=2048)
    options.fit_context()
    assert options.schema_doc_chars == (2048 - 384 - 900) // 3
    untouched = GenerateOptions()
    untouched.fit_context()
    assert untouched.schema_doc_chars == 1500
