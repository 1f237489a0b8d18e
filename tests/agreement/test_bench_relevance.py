"""The relevance sets of `benchmarks/agreement.py` (issue #58): the pairwise view, the RGB passages loader
and the plain Yes/No baselines, on hand-built rows (no shared data, no model)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import agreement as bench  # noqa: E402
from offline_eval.data.schema import Sample  # noqa: E402


def _rows(*items):
    """(id, group, grade) -> rows as the loaders return them, the grade as the label."""
    return [(Sample(id=i, question="q", answer="a", row=g), float(y)) for i, g, y in items]


def _pairwise(rows, values):
    return bench.pairwise(rows, {k: {"value": v} for k, v in values.items()}, lambda s: s.row, lambda s, y: y)


def test_pairs_are_items_of_one_group_with_different_grades_the_better_one_first():
    rows = _rows(("a", 1, 1), ("b", 1, 0), ("c", 1, 0), ("d", 2, 1), ("e", 2, 1), ("f", 3, 0))
    # group 1: a beats b and c (2 pairs); group 2: equal grades, no pair; group 3: one item, no pair
    got = _pairwise(rows, {"a": 0.9, "b": 0.1, "c": 0.95, "d": 0.0, "e": 1.0, "f": 0.5})
    assert got["n_pairs"] == 2 and got["n_ties"] == 0 and got["n_unscored_pairs"] == 0
    assert got["accuracy"]["value"] == pytest.approx(0.5)  # a > b right, a < c wrong


def test_graded_pairs_follow_the_grade_and_unscored_items_are_counted_apart():
    rows = [(Sample(id=i, question="q", answer="a", extra={"task_id": "t", "human": {"appropriateness": r}}), 0.0)
            for i, r in (("x", 4), ("y", 3.5), ("z", 2), ("w", 3))]
    scores = {"x": {"value": 0.8}, "y": {"value": 0.6}, "z": {"value": 0.7}, "w": {"value": None, "reason": "r"}}
    got = bench.pairwise(rows, scores, *bench.PAIRS["mtrag_appropriateness"])
    # x>y right, x>z right, y>z wrong; the three pairs with w are unscored
    assert got["n_pairs"] == 3 and got["n_unscored_pairs"] == 3
    assert got["accuracy"]["value"] == pytest.approx(2 / 3)


def test_tied_scores_are_settled_by_the_seeded_coin_and_counted():
    rows = _rows(*[(f"p{i}", i, 1) for i in range(40)], *[(f"n{i}", i, 0) for i in range(40)])
    first = _pairwise(rows, {s.id: 0.5 for s, _ in rows})
    assert first["n_pairs"] == 40 and first["n_ties"] == 40
    assert 0.0 < first["accuracy"]["value"] < 1.0
    assert _pairwise(rows, {s.id: 0.5 for s, _ in rows}) == first  # the same coin every time


def test_rgb_context_reads_each_passage_of_a_drawn_query_as_one_row(tmp_path, monkeypatch):
    lines = [{"id": str(i), "query": f"query {i}", "positive": [f"pos {i}", "  "],
              "negative": [f"neg {i}a", f"neg {i}b"]} for i in range(5)]
    (tmp_path / "rgb_en_fact.json").write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    monkeypatch.setattr(bench, "DATA", tmp_path)
    every = bench._rgb_context(None, 13)
    assert len(every) == 15  # the blank passage dropped
    first = [(s.question, s.contexts, y) for s, y in every if s.row == 1]
    assert first == [("query 0", ["pos 0"], 1.0), ("query 0", ["neg 0a"], 0.0), ("query 0", ["neg 0b"], 0.0)]
    drawn = bench._rgb_context(2, 13)
    assert len({s.row for s, _ in drawn}) == 2 and len(drawn) == 6  # whole queries
    assert bench._rgb_context(2, 13) == drawn


@pytest.mark.parametrize("cls, sample, asked", [
    (bench.PlainRelevant, Sample(id="1", question="Who wrote it?", answer="Ann did."),
     "Question: Who wrote it?\nAnswer: Ann did.\n\nDoes the answer address the question? Answer Yes or No."),
    (bench.PlainContextRelevant, Sample(id="1", question="Who wrote it?", answer="", contexts=["Ann wrote it."]),
     "Question: Who wrote it?\nPassage: Ann wrote it.\n\n"
     "Does the passage hold information that answers the question? Answer Yes or No."),
])
def test_plain_relevance_baselines_ask_one_yes_no_question(cls, sample, asked):
    steps = cls().score(sample, None)
    request = next(steps)
    assert request.options == ("Yes", "No")
    assert request.prompt == (("system", bench.PLAIN_SYSTEM), ("user", asked))
    with pytest.raises(StopIteration) as done:
        steps.send({"Yes": 0.7, "No": 0.3})
    assert done.value.value.value == pytest.approx(0.7)


def _rageval_line(i, refs, chunks, language="en"):
    return {"language": language, "query": {"query_id": i, "content": f"question {i}"},
            "ground_truth": {"doc_ids": [1], "references": refs}, "prediction": {"references": chunks}}


@pytest.mark.parametrize("chunk, refs, held", [
    # case, spacing and punctuation aside: a chunk cut before the reference's full stop still holds it
    ("(Company)The first sub-event was the appointment\nof a new CEO in January 2021 this new CEO",
     ["The first sub-event was the appointment of a new CEO in January 2021."], True),
    # most of the reference's words, but not the reference: another company's near copy
    ("These initiatives not only enhanced the company's public image but also increased its market "
     "competitiveness, promoting long-term sustainable development.",
     ["These initiatives not only enhanced the company's public image but also improved its market "
      "competitiveness, promoting long-term sustainable development."], False),
    # Chinese, character by character (no spaces to split on)
    ("公司简介。2017年2月，公司完成了对草莓文化传媒有限公司的资产收购，总价值1.2亿元。随后",
     ["2017年2月，公司完成了对草莓文化传媒有限公司的资产收购"], True),
    ("2017年3月，公司完成了对草莓文化传媒有限公司的资产收购。", ["2017年2月，公司完成了对草莓文化传媒有限公司的资产收购"], False),
    # a word inside a longer word does not count
    ("The board appointed Mr. Evanson as chairman in March 2021 after the meeting",
     ["appointed Mr. Evans as chairman in March 2021"], False),
])
def test_rageval_chunk_holds_a_reference_only_when_the_reference_is_there_whole(chunk, refs, held):
    assert bench._holds(chunk, refs) is held


def test_rageval_context_labels_each_chunk_and_drops_queries_that_cannot_be_told_apart(tmp_path, monkeypatch):
    ref = "In March 2021 the company appointed a new chief executive officer."
    zh_ref = "2017年2月，公司完成了对草莓文化传媒有限公司的资产收购"
    lines = [
        _rageval_line(1, [ref], [f"Intro. {ref} More.", "Another event in May 2021.", "  "]),
        _rageval_line(2, [], ["a", "b"]),  # no reference: every chunk 0, nothing to compare
        _rageval_line(3, [ref], [ref, ref]),  # every chunk 1
        # a short reference would match any chunk that names the month: the query is dropped
        _rageval_line(4, ["January 2021"], ["In January 2021 it grew.", "It shrank in January 2021."]),
        _rageval_line(5, [zh_ref], [f"首先，{zh_ref}。", "2019年公司上市。"], "zh"),
        _rageval_line(6, ["2021年1月任命新总裁"], ["2021年1月任命新总裁。", "2022年营收增长。"], "zh"),  # short
    ]
    (tmp_path / "rageval_example.jsonl").write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines),
                                                   encoding="utf-8")
    monkeypatch.setattr(bench, "DATA", tmp_path)
    every = bench._rageval_context(None, 13)
    assert [(s.id, s.question, s.contexts, s.language, s.row, y) for s, y in every] == [
        ("ragc-1-0", "question 1", [f"Intro. {ref} More."], "en", 1, 1.0),
        ("ragc-1-1", "question 1", ["Another event in May 2021."], "en", 1, 0.0),
        ("ragc-5-0", "question 5", [f"首先，{zh_ref}。"], "zh", 5, 1.0),
        ("ragc-5-1", "question 5", ["2019年公司上市。"], "zh", 5, 0.0),
    ]
    drawn = bench._rageval_context(1, 13)
    assert len({s.row for s, _ in drawn}) == 1 and len(drawn) == 2  # a whole query
    assert bench.PAIRS["rageval_context"][0](drawn[0][0]) == drawn[0][0].row


def _write_pair_sources(tmp_path):
    ref = "In March 2021 the company appointed a new chief executive officer."
    answer = "The company changed its leaders. A new CEO came in March. The board also changed in May."
    rag = [
        {**_rageval_line(1, [ref], [f"Intro. {ref} More.", "Another event in May 2021."]),
         "ground_truth": {"doc_ids": [1], "references": [ref], "content": answer}},
        # two sentences only: its first may already say everything, so no answer group
        {**_rageval_line(2, [ref], [ref]), "ground_truth": {"doc_ids": [1], "references": [ref],
                                                            "content": "A new CEO came. In March."}},
        # unanswerable queries have no complete answer to cut; every chunk holds the reference: no padding
        {**_rageval_line(3, [ref], [ref]), "ground_truth": {"doc_ids": [1], "references": [ref], "content": answer},
         "query": {"query_id": 3, "content": "q3", "query_type": "Irrelevant Unsolvable Question"}},
    ]
    for line in rag:
        line["query"].setdefault("query_type", "Summary Question")
    (tmp_path / "rageval_example.jsonl").write_text("\n".join(json.dumps(x) for x in rag), encoding="utf-8")
    rgb = [{"id": "0", "query": "who?", "positive": ["pos"], "negative": ["neg a", "neg b", "neg c"]},
           {"id": "1", "query": "when?", "positive": ["pos"], "negative": ["neg a"]}]  # too few negatives
    (tmp_path / "rgb_en_fact.json").write_text("\n".join(json.dumps(x) for x in rgb), encoding="utf-8")
    (tmp_path / "mtrag_dev.json").write_text("[]", encoding="utf-8")
    return ref, answer


def test_answer_pairs_cut_a_complete_answer_to_its_first_sentence_and_decline_it(tmp_path, monkeypatch):
    ref, answer = _write_pair_sources(tmp_path)
    monkeypatch.setattr(bench, "DATA", tmp_path)
    monkeypatch.setattr(bench, "read_dataset", lambda path: [])
    rows = bench._answer_pairs(None, 13)
    assert [(s.id, s.answer, s.contexts, y) for s, y in rows[:2]] == [
        ("ragans-1-complete", answer, [ref], 1.0), ("ragans-1-first", "The company changed its leaders.", [ref], 0.0)]
    assert rows[2][0].id == "ragans-1-declined" and rows[2][0].answer in bench.DECLINES and rows[2][1] == 0.0
    assert len(rows) == 3  # query 2 too short to cut, query 3 unanswerable
    got = bench.pairwise(rows, {s.id: {"value": v} for (s, _), v in zip(rows, (0.9, 0.5, 0.95))},
                         *bench.PAIRS["answer_pairs"])
    assert got["n_pairs"] == 2 and got["accuracy"]["value"] == pytest.approx(0.5)  # complete > first, < declined


def test_context_pairs_pad_the_focused_passages_with_related_ones(tmp_path, monkeypatch):
    ref, _ = _write_pair_sources(tmp_path)
    monkeypatch.setattr(bench, "DATA", tmp_path)
    rows = bench._context_pairs(None, 13)
    assert [(s.id, s.contexts, y) for s, y in rows] == [
        ("ragctx-1-focused", [ref], 1.0), ("ragctx-1-padded", [ref, "Another event in May 2021."], 0.0),
        ("rgbctx-0-focused", ["pos"], 1.0), ("rgbctx-0-padded", ["pos", "neg a", "neg b"], 0.0)]
    assert bench.PAIRS["context_pairs"][0](rows[0][0]) == bench.PAIRS["context_pairs"][0](rows[1][0])


def test_pairs_of_a_built_set_are_also_counted_by_what_the_worse_item_is():
    rows = [(Sample(id=f"g{g}-{k}", question="q", answer="a"), float(k == "complete"))
            for g in (1, 2) for k in ("complete", "first", "declined")]
    values = {"g1-complete": 0.8, "g1-first": 0.9, "g1-declined": 0.1,
              "g2-complete": 0.5, "g2-first": 0.5, "g2-declined": 0.2}
    got = bench.pairwise(rows, {k: {"value": v} for k, v in values.items()}, *bench.PAIRS["answer_pairs"],
                         kind=bench.KINDS["answer_pairs"])
    assert got["n_pairs"] == 4
    assert got["by_kind"] == {"declined": {"n": 2, "accuracy": 1.0}, "first": {"n": 2, "accuracy": 0.25}}


def test_compound_pairs_join_two_questions_of_a_document_and_answer_one_part_or_both(tmp_path, monkeypatch):
    def factual(qid, doc, question, keypoints, query_type="Factual Question"):
        return {"language": "en", "query": {"query_id": qid, "content": question, "query_type": query_type},
                "ground_truth": {"doc_ids": [doc], "references": [f"ref {qid}"], "keypoints": keypoints}}
    lines = [factual(1, 7, "When was Acme founded?", ["1. Acme was founded in 1990."]),
             factual(2, 7, "Who leads Acme?", ["1. Acme is led by Jane Roe."]),
             factual(3, 7, "Where is Acme based?", ["Oslo"]),  # not a sentence: not an answer to join
             factual(4, 7, "What did Acme sell?", ["1. Acme sold its farm unit.", "2. The sale was in May."]),
             factual(5, 7, "Summarise Acme's year.", ["1. Acme grew in every market."], "Summary Question"),
             factual(6, 8, "When did Beta list?", ["1. Beta listed in 2001."])]  # alone in its document
    (tmp_path / "rageval_example.jsonl").write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    monkeypatch.setattr(bench, "DATA", tmp_path)
    rows = bench._compound_pairs(None, 13)
    assert [(s.id, s.question, s.answer, s.contexts, y) for s, y in rows] == [
        ("compound-1-2-complete", "When was Acme founded, and who leads Acme?",
         "Acme was founded in 1990. Acme is led by Jane Roe.", ["ref 1", "ref 2"], 1.0),
        ("compound-1-2-partial", "When was Acme founded, and who leads Acme?",
         "Acme was founded in 1990.", ["ref 1", "ref 2"], 0.0),
        ("compound-2-4-complete", "Who leads Acme, and what did Acme sell?",
         "Acme is led by Jane Roe. Acme sold its farm unit. The sale was in May.", ["ref 2", "ref 4"], 1.0),
        ("compound-2-4-partial", "Who leads Acme, and what did Acme sell?",
         "Acme sold its farm unit. The sale was in May.", ["ref 2", "ref 4"], 0.0)]  # the parts in turn
    assert bench.KINDS["compound_pairs"](rows[1][0]) == "partial"
    assert len({bench.PAIRS["compound_pairs"][0](s) for s, _ in rows}) == 2


def test_evasive_pairs_decline_and_go_on_with_the_sentences_that_answer_least(tmp_path, monkeypatch):
    """Table 3's evasive answer: a refusal, then background about the same company that shares the fewest
    words with the question; the contexts are the references, which hold the answer."""
    ref = "In March 2021 Acme appointed a new chief executive officer."
    chunks = [ref, "(Company Type: Retail\tName: Acme)In May 2021 Acme appointed a new auditor. Acme sells shoes. "
                   "Acme opened a store in Oslo."]
    lines = [{**_rageval_line(1, [ref], chunks), "ground_truth": {"doc_ids": [1], "references": [ref],
                                                                  "content": "March 2021"}},
             {**_rageval_line(2, [ref], [ref]), "ground_truth": {"doc_ids": [1], "references": [ref],
                                                                 "content": "March 2021"}}]  # no background
    lines[0]["query"].update(content="When did Acme appoint a new chief executive?", query_type="Factual Question")
    lines[1]["query"].update(query_type="Factual Question")
    (tmp_path / "rageval_example.jsonl").write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    monkeypatch.setattr(bench, "DATA", tmp_path)
    rows = bench._evasive_pairs(None, 13)
    assert [(s.id, s.contexts, y) for s, y in rows] == [("evasive-1-complete", [ref], 1.0),
                                                        ("evasive-1-evasive", [ref], 0.0)]
    assert rows[0][0].answer == "March 2021"
    declined, background = rows[1][0].answer.split(". ", 1)
    assert declined + "." in bench.DECLINES
    assert background == "Acme sells shoes. Acme opened a store in Oslo."  # not the auditor, appointed too
    assert bench.KINDS["evasive_pairs"](rows[1][0]) == "evasive"
