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
from offline_eval.runtime.scripted import ScriptedJudge
from offline_eval.testset import QUESTION_TYPES
from offline_eval.testset.pipeline import GenerateOptions, SourceDoc, generate_testset, plan_slots, window
from offline_eval.testset.verbatim import is_verbatim, locate, normalise_space
from tests.helpers import models

ACME = ("Acme Corp was founded in 2001 in Berlin.\nIn March 2019 Acme acquired Beta Ltd for 120 million euros.\n"
        "In June 2020 Acme opened a factory in Lyon. Acme's revenue in 2020 was 500 million euros.")
ZETA = ("Zeta Inc was founded in 1998 in Oslo.\nIn May 2018 Zeta acquired Gamma AG for 80 million euros.\n"
        "Zeta's revenue in 2020 was 300 million euros.")
DOCS = [SourceDoc("acme", ACME, "en", "finance"), SourceDoc("zeta", ZETA, "en", "finance")]

# type marker in the question prompt -> (question, answer, references the judge "copies")
PLAN = {
    "factual questions:": ("Where was Acme Corp founded?", "Berlin",
                           ["Acme Corp was founded in 2001 in Berlin."]),
    "multi-hop reasoning": ("What did Zeta acquire twenty years after its founding?", "Gamma AG.",
                            ["Zeta Inc was founded in 1998 in Oslo.",
                             "In May 2018 Zeta acquired Gamma AG   for 80 million euros."]),  # whitespace differs
    "summary questions:": ("Summarise Acme's major events.", "Founded 2001, bought Beta, opened Lyon factory.",
                           ["Acme Corp was founded in 2001 in Berlin.",
                            "Acme acquired Delta GmbH in 2015."]),  # second one is fabricated
    "information integration": ("Which companies did Acme and Zeta acquire?", "Beta Ltd and Gamma AG.",
                                ["In March 2019 Acme acquired Beta Ltd for 120 million euros.",
                                 "In May 2018 Zeta acquired Gamma AG for 80 million euros."]),
    "numerical comparison": ("Whose 2020 revenue was larger, Acme's or Zeta's?", "Acme's, 500 vs 300 million euros.",
                             ["Acme's revenue in 2020 was 500 million euros.",
                              "Zeta's revenue in 2020 was 300 million euros."]),
    "time-sequence": ("Which acquisition came first, Beta Ltd or Gamma AG?", "Gamma AG, in May 2018.",
                      ["Zeta acquired Gamma AG"]),  # verbatim but a fragment: kept (long enough)
    "unanswerable questions:": ("What was Acme's revenue in 1990?", "", []),
}
FABRICATED_ONLY = ("How many employees does Zeta have?", "About 900.", ["Zeta employs 900 people."])


def _question(text: str) -> str:
    match = re.search(r"Question: (.*)\n", text)
    return match.group(1).strip() if match else ""


def respond(text: str) -> str:
    """A scripted judge that plays every stage of the pipeline from the prompt it is given."""
    if "Summarise their common schema" in text:
        return json.dumps({"fields": [{"name": "company", "description": "name"},
                                      {"name": "acquisition", "description": "what and when"}]})
    if "Fill in the configuration" in text:
        return json.dumps({"facts": [{"field": "company", "value": "Acme" if "Acme Corp was" in text else "Zeta"}]})
    if "Refine the draft answer" in text:
        return json.dumps({"answer": f"Refined: {_question(text)}"})
    if "list the key points" in text.split("Examples:")[0] or "Standard answer: Refined" in text:
        return json.dumps({"keypoints": ["1. First point.", "2. Second point."]})
    if "Find the references" in text:
        question = _question(text)
        for q, _, refs in list(PLAN.values()) + [FABRICATED_ONLY]:
            if q == question:
                return json.dumps({"references": refs})
        return json.dumps({"references": []})
    for marker, (q, a, _) in PLAN.items():
        if marker in text:
            if marker == "factual questions:" and "Acme Corp was founded" not in text:  # the Zeta slot
                q, a = FABRICATED_ONLY[:2]
            return json.dumps({"questions": [{"question": q, "answer": a}]})
    return "I don't know."


def judge() -> ScriptedJudge:
    return ScriptedJudge(script={"generate": [{"match": "", "response": respond}]})


def test_verbatim_locate_returns_the_documents_own_span():
    doc = "Line one.\nIn June 2020 Acme opened\na factory.  End."
    assert locate("In June 2020 Acme opened a factory.", doc) == "In June 2020 Acme opened\na factory."
    assert locate("“In June 2020 Acme opened a factory.”", doc) == "In June 2020 Acme opened\na factory."
    assert locate("In June 2021 Acme opened a factory.", doc) is None
    assert locate("   ", doc) is None
    assert is_verbatim("opened a  factory", doc) and not is_verbatim("opened the factory", doc)


def test_plan_spreads_types_and_skips_multi_doc_with_one_document():
    slots, messages = plan_slots(DOCS, GenerateOptions(n=7))
    assert sorted(s.qtype for s in slots) == sorted(QUESTION_TYPES)
    assert all(len(s.docs) == 2 for s in slots if s.qtype in ("multi_doc", "numeric", "temporal"))
    assert not messages
    slots, messages = plan_slots(DOCS[:1], GenerateOptions(n=6))
    assert "multi_doc" not in {s.qtype for s in slots} and "multi_doc" in messages[0]
    assert sum(s.count for s in slots) == 6
    many, _ = plan_slots(DOCS, GenerateOptions(n=70, questions_per_call=4))
    assert sum(s.count for s in many) == 70 and max(s.count for s in many) <= 4


def test_window_covers_long_documents_in_parts():
    text = "\n".join(f"Sentence number {i} of a long document." for i in range(200))
    first, last = window(text, 0, 3, 1000), window(text, 2, 3, 1000)
    assert len(first) <= 1000 and len(last) <= 1000 and first != last
    assert first in text and last in text
    assert window("short", 0, 1, 1000) == "short"


def test_pipeline_every_type_verbatim_references_and_drops(tmp_path: Path):
    scripted = judge()
    engine = Engine(models(scripted), ResultCache(tmp_path / "cache.sqlite"))
    written: list[dict] = []
    # n=8: two factual questions (one per document), one of each other type
    result = generate_testset(DOCS, engine, GenerateOptions(n=8), on_row=written.append)
    rows = result.rows
    assert written == rows
    assert {r["query_type"] for r in rows} == set(QUESTION_TYPES)  # every requested type represented
    by_doc = {d.id: d.text for d in DOCS}
    for row in rows:
        for ref in row["reference_contexts"]:
            assert any(ref in by_doc[d] for d in row["doc_ids"])  # stored span is an exact substring
        assert row["keypoints"] and row["id"].startswith(row["query_type"])
    # fabricated references: one dropped from the summary row, one question dropped entirely
    summary = next(r for r in rows if r["query_type"] == "summary")
    assert summary["reference_contexts"] == ["Acme Corp was founded in 2001 in Berlin."]
    assert result.drops["reference_not_verbatim"] == 2
    assert result.drops["no_verbatim_reference"] == 1
    assert not any(r["question"] == FABRICATED_ONLY[0] for r in rows)
    hop = next(r for r in rows if r["query_type"] == "multi_hop")
    assert hop["doc_ids"] == ["zeta"]  # the types rotate over the documents
    assert "In May 2018 Zeta acquired Gamma AG for 80 million euros." in hop["reference_contexts"]
    assert hop["ground_truth"] == "Refined: What did Zeta acquire twenty years after its founding?"
    assert hop["keypoints"] == ["First point.", "Second point."]
    unanswerable = next(r for r in rows if r["query_type"] == "unanswerable")
    assert unanswerable["keypoints"] == ["Unable to answer"] and unanswerable["reference_contexts"] == []
    multi = next(r for r in rows if r["query_type"] == "multi_doc")
    assert multi["doc_ids"] == ["acme", "zeta"] or multi["doc_ids"] == ["zeta", "acme"]
    # the schema was asked once for all slots, each document's configuration once
    prompts = scripted.prompts_seen
    assert sum("Summarise their common schema" in p for p in prompts) == 1
    assert sum("Fill in the configuration" in p for p in prompts) == 2

    # a rerun answers everything from the cache and writes the same rows
    again = generate_testset(DOCS, Engine(models(judge()), ResultCache(tmp_path / "cache.sqlite")),
                             GenerateOptions(n=8))
    assert again.stats["computed"] == {}
    assert sorted(r["id"] for r in again.rows) == sorted(r["id"] for r in rows)


def test_junk_from_the_judge_never_crashes(tmp_path: Path):
    junk = ScriptedJudge(script={"generate": [{"match": "", "response": "Sure! Here you go: {questions: ["}]})
    result = generate_testset(DOCS, Engine(models(junk)), GenerateOptions(n=7))
    assert result.rows == []
    assert result.drops["questions_unparseable"] == 7


def test_synthesized_documents_are_used_as_the_corpus():
    doc_text = ("Orion Ltd was founded in 2016 in Porto. In April 2019 Orion bought Vega SA for 45 million euros. "
                "Orion's revenue in 2021 was 210 million euros. ") * 2

    def synth(text: str) -> str:
        if "Invent the configuration" in text:
            return json.dumps({"facts": [{"field": "company", "value": "Orion Ltd"}]})
        if "Write a realistic document" in text:
            return doc_text
        if "Find the references" in text:
            return json.dumps({"references": ["In April 2019 Orion bought Vega SA for 45 million euros."]})
        if "factual questions:" in text:
            assert "Orion" in text  # asked about the synthetic document
            return json.dumps({"questions": [{"question": "Whom did Orion buy?", "answer": "Vega SA"}]})
        return respond(text)
    scripted = ScriptedJudge(script={"generate": [{"match": "", "response": synth}]})
    result = generate_testset(DOCS, Engine(models(scripted)),
                              GenerateOptions(n=1, types=("factual",), synthesize_docs=True, num_docs=2))
    assert [d.id for d in result.documents] == ["synthetic-1", "synthetic-2"]
    assert [d.facts for d in result.documents][0] == [{"field": "company", "value": "Orion Ltd"}]
    assert len(result.rows) == 1 and result.rows[0]["doc_ids"][0].startswith("synthetic-")
    fixed = [p for p in scripted.prompts_seen if "Invent the configuration" in p]
    assert len(fixed) == 2 and fixed[0] != fixed[1]  # rule-based values differ per document
    assert not any("Fill in the configuration" in p for p in scripted.prompts_seen)  # facts already known


def test_chinese_documents_get_chinese_prompts():
    zh = SourceDoc("z1", "华夏娱乐有限公司成立于2001年5月。2017年2月，公司完成了对草莓文化传媒有限公司的资产收购，总价值1.2亿元。", "zh")

    def respond_zh(text: str) -> str:
        if "总结它们共同的模式" in text:
            return json.dumps({"fields": [{"name": "公司", "description": ""}]})
        if "为下面的文档填写配置" in text:
            return json.dumps({"facts": [{"field": "公司", "value": "华夏娱乐"}]})
        if "在文档中找出该问题的参考片段" in text:
            return json.dumps({"references": ["2017年2月，公司完成了对草莓文化传媒有限公司的资产收购，总价值1.2亿元。"]})
        if "根据参考片段修订草稿答案" in text:
            return json.dumps({"answer": "总价值1.2亿元。"})
        if "列出一个完整回答必须包含的要点" in text:
            return json.dumps({"keypoints": ["1、收购总价值为1.2亿元。"]})
        if "事实类问题" in text:
            return json.dumps({"questions": [{"question": "华夏娱乐收购草莓文化花了多少钱？", "answer": "1.2亿元"}]})
        return "{}"
    scripted = ScriptedJudge(script={"generate": [{"match": "", "response": respond_zh}]})
    result = generate_testset([zh], Engine(models(scripted)), GenerateOptions(n=1, types=("factual",)))
    [row] = result.rows
    assert row["language"] == "zh" and row["keypoints"] == ["收购总价值为1.2亿元。"]
    assert row["reference_contexts"][0] in zh.text


def _write_docs(folder: Path) -> None:
    folder.mkdir()
    (folder / "acme.txt").write_text(ACME, encoding="utf-8")
    (folder / "zeta.md").write_text(ZETA, encoding="utf-8")


def test_cli_generate_writes_rows_readable_by_read_dataset(tmp_path: Path, capsys: pytest.CaptureFixture):
    _write_docs(tmp_path / "docs")
    refine = {"match": "Refine the draft answer", "response": json.dumps({"answer": "Berlin, Germany."})}
    keypoints = {"match": "Standard answer: ", "response": json.dumps({"keypoints": ["Acme was founded in Berlin."]})}
    script = {"generate": [
        {"match": "Summarise their common schema", "response": json.dumps({"fields": [{"name": "company"}]})},
        {"match": "Fill in the configuration", "response": json.dumps({"facts": [{"field": "company", "value": "x"}]})},
        refine, keypoints,
        {"match": "Question: Where was Acme Corp founded?", "response": json.dumps(
            {"references": ["Acme Corp was founded in 2001 in Berlin."]})},
        {"match": "Question: Which companies did Acme and Zeta acquire?", "response": json.dumps(
            {"references": ["Acme acquired Beta Ltd in 1970."]})},  # fabricated: the row is dropped
        {"match": "factual questions:", "response": json.dumps(
            {"questions": [{"question": "Where was Acme Corp founded?", "answer": "Berlin"}]})},
        {"match": "information integration", "response": json.dumps(
            {"questions": [{"question": "Which companies did Acme and Zeta acquire?", "answer": "Beta and Gamma"}]})},
        {"match": "unanswerable questions:", "response": json.dumps(
            {"questions": [{"question": "What was Acme's revenue in 1990?", "answer": ""}]})},
    ]}
    (tmp_path / "script.json").write_text(json.dumps(script), encoding="utf-8")
    out = tmp_path / "out" / "testset.jsonl"
    argv = ["generate", "--docs", str(tmp_path / "docs"), "--out", str(out), "--n", "3",
            "--types", "factual,multi_doc,unanswerable", "--judge-backend", "scripted",
            "--judge", str(tmp_path / "script.json"), "--cache", str(tmp_path / "cache.sqlite"), "--quiet"]
    assert main(argv) == 0
    report = capsys.readouterr().out
    assert "wrote 2 of 3 requested rows" in report
    assert "not verbatim in their document: 1" in report
    samples = read_dataset(out)
    assert {s.extra["query_type"] for s in samples} == {"factual", "unanswerable"}
    factual = next(s for s in samples if s.extra["query_type"] == "factual")
    assert factual.question == "Where was Acme Corp founded?" and factual.ground_truth == "Berlin, Germany."
    assert factual.reference_contexts == ["Acme Corp was founded in 2001 in Berlin."]
    assert factual.keypoints == ["Acme was founded in Berlin."] and factual.language == "en"
    assert factual.extra["doc_ids"] == ["acme.txt"]
    assert all(normalise_space(r) in normalise_space(ACME) for r in factual.reference_contexts)
    # a rerun resumes from the cache and writes the same file
    first = out.read_text(encoding="utf-8")
    assert main(argv) == 0
    assert sorted(out.read_text(encoding="utf-8").splitlines()) == sorted(first.splitlines())


def test_cli_rejects_unknown_type(tmp_path: Path):
    with pytest.raises(SystemExit):
        main(["generate", "--docs", str(tmp_path), "--out", str(tmp_path / "o.jsonl"), "--types", "trivia"])


def test_prompts_are_cut_to_the_judges_context():
    options = GenerateOptions(max_tokens=384, context_tokens=2048)
    options.fit_context()
    assert options.max_doc_chars == 2048 - 384 - 900 and options.schema_doc_chars == (2048 - 384 - 900) // 3
    untouched = GenerateOptions()
    untouched.fit_context()
    assert untouched.max_doc_chars == 4000
