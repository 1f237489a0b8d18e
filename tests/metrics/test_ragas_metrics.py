"""Every Ragas-family formula on hand-built cases, through the engine and a scripted judge."""

from __future__ import annotations

import json

import numpy as np
import pytest

from offline_eval.data.schema import Sample
from offline_eval.judging.settings import EvalSettings
from offline_eval.judging.verdicts import ABSURD_STATEMENT, UNRELATED_PASSAGE
from offline_eval.metrics.ragas import (
    AnswerCorrectness, AnswerRelevancy, AnswerSimilarity, ContextEntityRecall, ContextPrecision,
    ContextRecall, ContextRelevance, ContextRelevanceEmbedding, ContextUtilization, Faithfulness,
    HallucinationRate, NoiseSensitivityIrrelevant, NoiseSensitivityRelevant, RubricsScore, average_precision,
    read_rubrics,
)
from offline_eval.runtime.hashing_embedder import HashingEmbedder
from offline_eval.runtime.scripted import ScriptedJudge, ScriptedVerifier
from tests.helpers import claims_rule, models
from tests.helpers import score as _score


def ragas(**settings) -> EvalSettings:
    """Ragas' own definitions: the judge's claims for every answer, shares of thresholded verdicts, the
    judge's P(Yes) as it is (no baseline correction)."""
    return EvalSettings(**{"claims": "llm", "verdict_score": "threshold", "baseline_weight": 0.0, **settings})


def score(metric, sample, model_set, settings=None):
    return _score(metric, sample, model_set, settings or ragas())

CONTEXTS = ["Paris is the capital of France.", "The Eiffel Tower opened in 1889."]
SAMPLE = Sample(id="1", question="Tell me about Paris.", answer="Paris is the capital of France. It has 9 million people.",
                contexts=CONTEXTS, ground_truth="Paris is the capital of France. The Eiffel Tower opened in 1889.",
                language="en")
CLAIMS = ["Paris is the capital of France.", "Paris has 9 million people."]


def yes_for(*statements: str, label: str = "Statement: "):
    """Option rule: P(Yes)=0.9 when the prompt's statement (after ``label``) is one of ``statements``,
    else 0.1; against the unrelated passage of the self-support probe (judging.UNRELATED_PASSAGE) 0.1,
    as a judge that reads the passage says."""
    def probs(text: str) -> dict[str, float]:
        statement = text.split(label, 1)[1].split("\n", 1)[0] if label in text else ""
        if statement in statements and UNRELATED_PASSAGE["en"] not in text:
            return {"Yes": 0.9, "No": 0.1}
        return {"Yes": 0.1, "No": 0.9}
    return {"match": label, "probs": probs}


def test_faithfulness_with_option_verdicts():
    judge = ScriptedJudge(script={"generate": [claims_rule("Break the answer", CLAIMS)],
                                  "options": [yes_for(CLAIMS[0])]})
    result = score(Faithfulness(), SAMPLE, models(judge))
    assert result.value == pytest.approx(0.5)
    claims = result.metadata["claims"]
    assert [c["supported"] for c in claims] == [True, False]
    assert claims[0]["probability"] == pytest.approx(0.9)
    hallucination = score(HallucinationRate(), SAMPLE, models(judge))
    assert hallucination.value == pytest.approx(0.5)


def test_faithfulness_with_hhem_cites_the_supporting_chunk():
    judge = ScriptedJudge(script={"generate": [claims_rule("Break the answer", CLAIMS)]})
    verifier = ScriptedVerifier(rules=[{"premise": "capital", "hypothesis": "capital", "probability": 0.97}],
                                default=0.02)
    result = score(Faithfulness(), SAMPLE, models(judge, verifier), ragas(verifier="hhem", verifier_classifies=True))
    assert result.value == pytest.approx(0.5)
    assert result.metadata["claims"][0]["chunk"] == 0
    assert result.metadata["claims"][1]["chunk"] is None


def test_faithfulness_with_json_verdicts_and_chunk_numbers():
    verdicts = {"verdicts": [{"statement": CLAIMS[0], "reason": "chunk 1", "supported": True, "chunk": 1},
                             {"statement": CLAIMS[1], "reason": "absent", "supported": False, "chunk": None}]}
    judge = ScriptedJudge(script={"generate": [claims_rule("Break the answer", CLAIMS),
                                               {"match": "Context chunks", "response": json.dumps(verdicts)}]})
    result = score(Faithfulness(), SAMPLE, models(judge), ragas(verdicts="generate"))
    assert result.value == pytest.approx(0.5)
    assert result.metadata["claims"][0]["chunk"] == 0 and result.metadata["claims"][0]["reason"] == "chunk 1"


def test_verdict_count_mismatch_is_unscored_after_repair():
    short = {"verdicts": [{"statement": CLAIMS[0], "supported": True}]}  # one verdict for two claims
    judge = ScriptedJudge(script={"generate": [claims_rule("Break the answer", CLAIMS),
                                               {"match": "Context chunks", "response": json.dumps(short)}]})
    result = score(Faithfulness(), SAMPLE, models(judge), ragas(verdicts="generate"))
    assert result.value is None and result.reason == "judge_unparseable"
    assert "fewer than 2" in result.explanation


def test_unparseable_claims_then_repair_succeeds():
    calls = {"n": 0}

    def flaky(text: str) -> str:
        calls["n"] += 1
        return "Sure! Here are the claims:" if "could not be used" not in text else \
            "```json\n{'claims': ['Paris is the capital of France.',]}\n```"
    judge = ScriptedJudge(script={"generate": [{"match": "Break the answer", "response": flaky}],
                                  "options": [yes_for(CLAIMS[0])]})
    result = score(Faithfulness(), SAMPLE, models(judge))
    assert result.value == pytest.approx(1.0)
    assert calls["n"] == 2


def test_unparseable_twice_is_unscored_with_reason_never_nan():
    judge = ScriptedJudge(script={"generate": [{"match": "Break the answer", "response": '{"claims": ["cut off'}]})
    result = score(Faithfulness(), SAMPLE, models(judge))
    assert result.value is None and result.reason == "judge_unparseable"
    assert "cut off" in result.explanation


def test_no_claims_and_missing_fields_are_unscored():
    judge = ScriptedJudge(script={"generate": [claims_rule("Break the answer", [])]})
    assert score(Faithfulness(), SAMPLE, models(judge)).reason == "no_claims"
    no_contexts = Sample(id="2", question="q", answer="a", contexts=[])
    assert score(Faithfulness(), no_contexts, models(judge)).reason == "missing_field:contexts"
    no_answer = Sample(id="3", question="q", contexts=["c"])
    assert score(AnswerRelevancy(), no_answer, models(judge)).reason == "missing_field:answer"
    for blank in (" ", "\n\t"):  # a blank answer is no answer, not one for the judge to grade
        blank_answer = Sample(id="4", question="q", answer=blank, contexts=["c"])
        assert score(AnswerRelevancy(), blank_answer, models(judge)).reason == "missing_field:answer"
        assert score(Faithfulness(), blank_answer, models(judge)).reason == "missing_field:answer"
    # contexts of only blank texts hold no passage: unscored as no contexts are, for every metric that
    # reads them; answer relevance, which reads them as retrieval that found nothing, still scores
    for blanks in ([""], ["", "  \n"]):
        nothing = Sample(id="5", question="q", answer="a", contexts=blanks)
        assert score(Faithfulness(), nothing, models(judge)).reason == "missing_field:contexts"
        assert score(ContextRelevance(), nothing, models(judge)).reason == "missing_field:contexts"
        assert score(AnswerRelevancy(), nothing, models(judge)).reason != "missing_field:contexts"
    assert score(AnswerRelevancy(), Sample(id="5", question="  ", answer="a"), models(judge)).reason == (
        "missing_field:question")


def test_answer_relevancy_mean_cosine_and_noncommittal():
    embedder = HashingEmbedder()
    questions = ["Tell me about Paris.", "What is the capital of France?"]
    judge = ScriptedJudge(script={"generate": [{"match": "questions that the answer", "response": json.dumps(
        {"noncommittal": False, "questions": questions})}]})
    result = score(AnswerRelevancy(mode="ragas"), SAMPLE, models(judge, embedder=embedder))
    q = embedder.vector(SAMPLE.question)
    expected = np.mean([max(0.0, 0) + float(np.dot(q, embedder.vector(x))) for x in questions])
    assert result.value == pytest.approx(expected)
    assert result.metadata["questions"][0]["similarity"] == pytest.approx(1.0)
    evasive = ScriptedJudge(script={"generate": [{"match": "questions that the answer", "response": json.dumps(
        {"noncommittal": True, "questions": questions})}]})
    assert score(AnswerRelevancy(mode="ragas"), SAMPLE, models(evasive)).value == 0.0


def test_context_relevance_counts_verbatim_sentences_only():
    judge = ScriptedJudge(script={"generate": [{"match": "Copy, unchanged", "response": json.dumps(
        {"sentences": ["Paris is the capital of France.", "Paris is lovely in spring."]})}]})
    result = score(ContextRelevance(mode="ragas"), SAMPLE, models(judge))
    assert result.value == pytest.approx(1 / 2)  # 1 of 2 context sentences; the invented one ignored
    assert result.metadata["not_in_context"] == ["Paris is lovely in spring."]
    insufficient = ScriptedJudge(script={"generate": [{"match": "Copy, unchanged", "response": '{"sentences": []}'}]})
    assert score(ContextRelevance(mode="ragas"), SAMPLE, models(insufficient)).value == 0.0


def test_context_relevance_embedding():
    embedder = HashingEmbedder()
    result = score(ContextRelevanceEmbedding(), SAMPLE, models(embedder=embedder))
    q = embedder.vector(SAMPLE.question)
    expected = np.mean([float(np.dot(q, embedder.vector(c))) for c in CONTEXTS])
    assert result.value == pytest.approx(max(0.0, expected))


def test_average_precision_formula():
    assert average_precision([True, False, True]) == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert average_precision([False, True]) == pytest.approx(0.5)
    assert average_precision([False, False]) == pytest.approx(0.0)
    assert average_precision([]) == 0.0


def test_context_precision_and_utilization():
    useful = {"match": "Context: The Eiffel", "probs": {"Yes": 0.8, "No": 0.2}}
    judge = ScriptedJudge(script={"options": [useful], "default_probs": {"Yes": 0.3, "No": 0.7}})
    result = score(ContextPrecision(), SAMPLE, models(judge))
    assert result.value == pytest.approx(0.5)  # useful chunk at rank 2
    assert [v["useful"] for v in result.metadata["verdicts"]] == [False, True]
    assert "Answer: Paris is the capital of France. The Eiffel" in judge.prompts_seen[0]
    util = score(ContextUtilization(), SAMPLE, models(judge))
    assert util.value == pytest.approx(0.5)
    assert any("It has 9 million" in p for p in judge.prompts_seen)


def test_context_recall_over_reference_sentences():
    judge = ScriptedJudge(script={"options": [
        yes_for("Paris is the capital of France.", label="Sentence of the reference answer: ")]})
    result = score(ContextRecall(), SAMPLE, models(judge))
    assert result.value == pytest.approx(0.5)
    assert [c["attributed"] for c in result.metadata["claims"]] == [True, False]
    # Each sentence is judged as an answer to the question, as in Ragas' prompt.
    assert all("Question: Tell me about Paris." in p for p in judge.prompts_seen if ABSURD_STATEMENT["en"] not in p)


def test_context_recall_reads_a_fragment_reference_as_the_answer_to_the_question():
    sample = Sample(id="2", question="When did the Eiffel Tower open?", answer="In 1889.",
                    contexts=CONTEXTS, ground_truth="1889", language="en")
    rule = {"match": "Question: When did the Eiffel Tower open?\nSentence of the reference answer: 1889",
            "probs": {"Yes": 0.8, "No": 0.2}}
    judge = ScriptedJudge(script={"options": [rule]})
    # this judge answers without reading the passage, so the credulity probes would refuse it: off here
    assert score(ContextRecall(), sample, models(judge), ragas(credulity_limit=1.0)).value == 1.0
    verdicts = {"verdicts": [{"statement": "1889", "reason": "chunk 2", "supported": True, "chunk": 2}]}
    json_judge = ScriptedJudge(script={"generate": [
        {"match": "Question: When did the Eiffel Tower open?\nFor each sentence of the reference answer",
         "response": json.dumps(verdicts)}]})
    result = score(ContextRecall(), sample, models(json_judge), ragas(verifier="judge", verdicts="generate"))
    assert result.value == 1.0 and result.metadata["claims"][0]["chunk"] == 1
    # HHEM takes (premise, hypothesis) pairs only: the sentence itself, against each chunk.
    verifier = ScriptedVerifier(rules=[{"premise": "1889", "hypothesis": "1889", "probability": 0.9}], default=0.1)
    hhem = score(ContextRecall(), sample, models(None, verifier), ragas(verifier="hhem", verifier_classifies=True))
    assert hhem.value == 1.0 and hhem.metadata["claims"][0]["chunk"] == 1


def test_context_entity_recall():
    judge = ScriptedJudge(script={"generate": [
        {"match": "Text: Paris is the capital of France. The Eiffel", "response": json.dumps(
            {"entities": ["Paris", "France", "Eiffel Tower", "1889", "Louvre"]})},
        {"match": "named entities", "response": json.dumps({"entities": ["Paris"]})}]})
    result = score(ContextEntityRecall(), SAMPLE, models(judge))
    # Paris (listed), France / Eiffel Tower / 1889 (verbatim in contexts); Louvre missing.
    assert result.value == pytest.approx(4 / 5)


def test_answer_similarity_and_correctness():
    embedder = HashingEmbedder()
    sim = float(np.dot(embedder.vector(SAMPLE.answer), embedder.vector(SAMPLE.ground_truth)))
    assert score(AnswerSimilarity(), SAMPLE, models(embedder=embedder)).value == pytest.approx(max(0.0, sim))
    ref_claims = ["Paris is the capital of France.", "The Eiffel Tower opened in 1889."]
    judge = ScriptedJudge(script={
        "generate": [claims_rule("Answer: Paris is the capital of France. It has", CLAIMS),
                     claims_rule("Answer: Paris is the capital of France. The Eiffel", ref_claims)],
        "options": [yes_for("Paris is the capital of France.")]})
    result = score(AnswerCorrectness(), SAMPLE, models(judge, embedder=embedder))
    # TP = 1 (capital), FP = 1 (9 million), FN = 1 (Eiffel): F1 = 1 / (1 + 1) = 0.5
    assert result.metadata["f1"] == pytest.approx(0.5)
    assert result.metadata["tp"] == [CLAIMS[0]] and result.metadata["fn"] == [ref_claims[1]]
    assert result.value == pytest.approx(0.75 * 0.5 + 0.25 * max(0.0, sim))
    weighted = score(AnswerCorrectness(weights=(1.0, 0.0)), SAMPLE, models(judge, embedder=embedder), ragas())
    assert weighted.value == pytest.approx(0.5)


def test_rubrics_score_options_and_json():
    judge = ScriptedJudge(script={"options": [{"match": "Score (1-5)", "probs": {
        "1": 0.05, "2": 0.05, "3": 0.1, "4": 0.6, "5": 0.2}}]})
    result = score(RubricsScore(), SAMPLE, models(judge))
    assert result.value == 4.0
    assert result.metadata["expected"] == pytest.approx(0.05 + 0.1 + 0.3 + 2.4 + 1.0)
    assert result.metadata["rubric"] == "with_reference"
    judge_json = ScriptedJudge(script={"generate": [{"match": "explain briefly", "response": '{"feedback": "ok", "score": 2}'}]})
    result = score(RubricsScore(), Sample(id="x", question="q", answer="a"), models(judge_json),
                   ragas(verdicts="generate"))
    assert result.value == 2.0 and result.metadata["rubric"] == "reference_free"


def test_rubrics_of_your_own_from_a_file_through_the_flag_and_a_config_file(tmp_path):
    from offline_eval.cli import main

    rubrics = tmp_path / "rubrics.toml"
    rubrics.write_text('[reference_free]\n1 = "Nonsense."\n5 = "Zebra-grade answer."\n', encoding="utf-8")
    assert read_rubrics(rubrics) == {"reference_free": {1: "Nonsense.", 5: "Zebra-grade answer."}}
    judge = ScriptedJudge(script={"options": [{"match": "Zebra-grade answer.", "probs": {
        "1": 0.0, "2": 0.0, "3": 0.0, "4": 0.1, "5": 0.9}}], "default_probs": {"1": 1.0}})
    metric = RubricsScore(rubrics=read_rubrics(rubrics))
    assert score(metric, Sample(id="x", question="q", answer="a"), models(judge)).value == 5.0
    assert metric.config() == {"rubrics": {"reference_free": {1: "Nonsense.", 5: "Zebra-grade answer."}}}
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "x", "question": "q", "answer": "a"}\n', encoding="utf-8")
    config = tmp_path / "eval.toml"
    config.write_text(f"rubrics = {json.dumps(str(rubrics))}\n", encoding="utf-8")
    seen = {}
    for how, extra in (("flag", ["--rubrics", str(rubrics)]), ("config", ["--config", str(config)])):
        out = tmp_path / how
        assert main(["run", "--dataset", str(data), "--profile", "starter", "--judge-backend", "scripted",
                     "--judge", str(_script_file(tmp_path)), "--metrics", "rubrics_score", "--no-cache",
                     "--quiet", "--no-report", "--output", str(out), *extra]) == 0
        seen[how] = json.loads((out / "results.jsonl").read_text())["scores"]["rubrics_score"]["value"]
    assert seen == {"flag": 5.0, "config": 5.0}


def _script_file(folder):
    path = folder / "judge.json"
    path.write_text(json.dumps({"options": [{"match": "Zebra-grade answer.", "probs": {
        "1": 0.0, "2": 0.0, "3": 0.0, "4": 0.1, "5": 0.9}}], "default_probs": {"1": 1.0}}), encoding="utf-8")
    return path


def test_noise_sensitivity_relevant_and_irrelevant():
    sample = Sample(id="n", question="Where is the Eiffel Tower and when did it open?",
                    answer="The Eiffel Tower is in Paris. It opened in 1899.",
                    contexts=["The Eiffel Tower is in Paris.", "A tower opened in 1899 in Blackpool."],
                    ground_truth="The Eiffel Tower is in Paris. It opened in 1889.", language="en")
    a = ["The Eiffel Tower is in Paris.", "The Eiffel Tower opened in 1899."]
    g = ["The Eiffel Tower is in Paris.", "The Eiffel Tower opened in 1889."]
    verifier = ScriptedVerifier(rules=[
        {"premise": "The Eiffel Tower is in Paris.", "hypothesis": "is in Paris", "probability": 0.95},
        {"premise": "Blackpool", "hypothesis": "1899", "probability": 0.8}], default=0.05)
    judge = ScriptedJudge(script={"generate": [claims_rule("Answer: The Eiffel Tower is in Paris. It opened in 1899", a),
                                               claims_rule("Answer: The Eiffel Tower is in Paris. It opened in 1889", g)]})
    settings = ragas(verifier="hhem", verifier_classifies=True)
    relevant = score(NoiseSensitivityRelevant(), sample, models(judge, verifier), settings)
    irrelevant = score(NoiseSensitivityIrrelevant(), sample, models(judge, verifier), settings)
    # Claim 2 is wrong (not in the reference) and supported only by chunk 2, which supports no
    # reference claim: irrelevant noise 1/2, relevant noise 0.
    assert relevant.value == pytest.approx(0.0)
    assert irrelevant.value == pytest.approx(0.5)
    assert relevant.metadata["relevant_chunks"] == [0]


# --- the defaults: statements by answer length, windows, expected shares --------------------------
def test_a_short_answer_is_checked_whole_without_claim_extraction():
    judge = ScriptedJudge(script={"options": [yes_for(SAMPLE.answer)]})
    result = _score(Faithfulness(), SAMPLE, models(judge), EvalSettings(baseline_weight=0.0))  # one statement
    assert judge.calls["generate"] == 0
    assert result.metadata["statements"] == "whole"
    assert [c["claim"] for c in result.metadata["claims"]] == [SAMPLE.answer]
    assert result.value == pytest.approx(0.9)  # P(Yes) itself, not rounded to 1
    assert "checked whole, is supported" in result.explanation


def test_a_longer_answer_is_verified_sentence_by_sentence_or_by_the_judges_claims():
    long = Sample(id="2", question="Tell me about Paris.", contexts=CONTEXTS,
                  answer="Paris is the capital of France. It has 9 million people. The tower opened in 1889.")
    judge = ScriptedJudge(script={"generate": [claims_rule("Break the answer", CLAIMS)],
                                  "options": [yes_for(CLAIMS[0], "The tower opened in 1889.")]})
    result = _score(Faithfulness(), long, models(judge), EvalSettings(baseline_weight=0.0))
    assert judge.calls["generate"] == 0 and result.metadata["statements"] == "sentences"
    assert result.value == pytest.approx((0.9 + 0.1 + 0.9) / 3)  # expected share: mean P(Yes)
    assert result.metadata["supported_share"] == pytest.approx(2 / 3)
    claims = _score(Faithfulness(), long, models(judge), EvalSettings(claims="llm", baseline_weight=0.0))
    assert judge.calls["generate"] == 1 and claims.metadata["statements"] == "llm"
    assert claims.value == pytest.approx((0.9 + 0.1) / 2)


def test_a_line_without_a_letter_or_digit_is_no_statement():
    """A code fence, a brace, a table's rule or a lone "!" states nothing: it is not verified (counted
    unsupported, such lines pulled down every answer with a code block), and an answer made only of
    them makes no claim."""
    answer = "Open the console.\n```\nls -l\n```\n| a | b |\n|---|---|\nIt lists the files. !"
    sample = Sample(id="c", question="How?", contexts=CONTEXTS, answer=answer, language="en")
    judge = ScriptedJudge(script={"options": [yes_for("Open the console.")]})
    result = _score(Faithfulness(), sample, models(judge), EvalSettings(baseline_weight=0.0))
    claims = [c["claim"] for c in result.metadata["claims"]]
    assert claims and all(any(ch.isalnum() for ch in c) for c in claims) and "Open the console." in claims
    assert not any(c.strip() in ("```", "|---|---|", "!") for c in claims)
    nothing = _score(Faithfulness(), Sample(id="n", question="How?", contexts=CONTEXTS, answer="```\n...\n```",
                                            language="en"), models(judge), EvalSettings(baseline_weight=0.0))
    assert nothing.value is None and nothing.reason == "no_claims"


def test_a_fragment_answer_is_judged_as_the_answer_to_its_question():
    seen: list[str] = []

    def probs(text: str) -> dict[str, float]:
        seen.append(text)
        return {"Yes": 0.8, "No": 0.2}
    judge = ScriptedJudge(script={"options": [{"match": "Context", "probs": probs}]})
    fragment = Sample(id="f", question="When did the Eiffel Tower open?", answer="In 1889.", contexts=CONTEXTS[1:])
    _score(Faithfulness(), fragment, models(judge))
    assert any("Question: When did the Eiffel Tower open?\nAnswer: In 1889." in text for text in seen)
    sentence = Sample(id="s", question="Tell me about the tower.", answer="The Eiffel Tower opened in 1889 in Paris.",
                      contexts=CONTEXTS[1:])
    seen.clear()
    _score(Faithfulness(), sentence, models(judge))  # a whole sentence is judged on its own
    assert not any("Question:" in text for text in seen)
    assert any("Statement: The Eiffel Tower opened in 1889 in Paris." in text for text in seen)


def test_judge_verdicts_read_long_contexts_in_windows_and_keep_the_best():
    from offline_eval.judging.windows import context_windows

    long_chunk = ("The museum opens at nine. Tickets cost ten euros. The shop sells maps. "
                  "The cafe closes at five. The Eiffel Tower opened in 1889.")
    windows = context_windows(["Short chunk.", long_chunk], 8, "en")
    assert windows[0] == (0, "Short chunk.")
    assert all(i == 1 for i, _ in windows[1:]) and len(windows) > 2
    texts = [t for _, t in windows[1:]]
    assert all(len(t.split()) <= 8 for t in texts)
    assert texts[-1].endswith("opened in 1889.") and texts[0].startswith("The museum")
    assert not any(a in b or b in a for a, b in zip(texts, texts[1:]))  # no window inside its neighbour
    assert context_windows(["One two three. Four five. Six seven eight."], 6, "en") == [
        (0, "One two three. Four five."), (0, "Four five. Six seven eight.")]  # neighbours share a sentence

    premises: list[str] = []

    def probs(text: str) -> dict[str, float]:
        premises.append(text.split("Statement:")[0])
        return {"Yes": 0.95, "No": 0.05} if "opened in 1889" in premises[-1] else {"Yes": 0.05, "No": 0.95}
    judge = ScriptedJudge(script={"options": [{"match": "Statement:", "probs": probs}]})
    sample = Sample(id="w", question="When?", answer="The Eiffel Tower opened in 1889 in Paris.",
                    contexts=["Short chunk.", long_chunk])
    # this scripted judge agrees with anything the window with the answer is asked (credulity is
    # tested on its own below)
    result = _score(Faithfulness(), sample, models(judge),
                    EvalSettings(context_window=8, windows_per_claim=0, baseline_weight=0.0, credulity_limit=1.0))
    assert result.value == pytest.approx(0.95) and result.metadata["claims"][0]["chunk"] == 1
    # one verdict per window sharing a content word with the claim (the rest are not about it)
    assert premises == ["system: You are a meticulous evaluator. Answer with a single word: Yes or No.\nuser: Context:\n"
                        "The Eiffel Tower opened in 1889.\n\n"]
    premises.clear()
    likely = _score(Faithfulness(), sample, models(judge),
                    EvalSettings(context_window=8, windows_per_claim=2, baseline_weight=0.0, credulity_limit=1.0))
    assert likely.value == pytest.approx(0.95) and len(premises) == 1  # at most two, of those sharing a word
    assert any("opened in 1889" in p for p in premises)
    joined = _score(Faithfulness(), sample, models(judge),
                    EvalSettings(context_window=0, baseline_weight=0.0, credulity_limit=1.0))
    assert joined.value == pytest.approx(0.95)  # all contexts at once, one verdict
    assert len(premises) == 2 and "[2] The museum" in premises[-1]


def test_option_verdicts_take_out_the_lean_each_passage_gives_the_judge():
    """Contextual calibration (judging.corrected): each passage is also judged with an empty statement,
    and half of that lean, in log-odds, is taken out of every verdict against it; across windows the
    one the judge itself rates highest is kept. Answers compared with a reference are left as they are."""
    from offline_eval.judging.verdicts import ABSURD_STATEMENT, corrected

    leans = {"Paris is the capital of France.": 0.8, "The Eiffel Tower opened in 1889.": 0.2}

    def probs(text: str) -> dict[str, float]:
        passage = text.split("Context:\n", 1)[1].split("\n\n", 1)[0]
        statement = text.split("Statement: ", 1)[1].split("\n", 1)[0]
        if not statement.strip():  # the probe: EMPTY_STATEMENT
            p = leans[passage]
        elif statement == ABSURD_STATEMENT["en"] or passage == UNRELATED_PASSAGE["en"]:  # the credulity probes
            p = 0.1
        else:
            p = 0.9 if ("1889" in statement) == ("1889" in passage) else 0.3
        return {"Yes": p, "No": 1 - p}
    judge = ScriptedJudge(script={"options": [{"match": "Statement:", "probs": probs}]})
    sample = Sample(id="b", question="", answer="The tower opened in 1889.", contexts=CONTEXTS)
    result = _score(Faithfulness(), sample, models(judge), EvalSettings(windows_per_claim=0))
    [claim] = result.metadata["claims"]
    expected = 1 / (1 + np.exp(-(np.log(0.9 / 0.1) - 0.5 * np.log(0.2 / 0.8))))
    assert claim["judge_probability"] == pytest.approx(0.9) and claim["baseline"] == pytest.approx(0.2)
    assert result.value == pytest.approx(expected) and claim["chunk"] == 1
    assert corrected(0.9, 0.2, 0.5) == pytest.approx(expected) and corrected(0.9, 0.5, 1.0) == pytest.approx(0.9)
    assert corrected(0.9, 0.2, 0.0) == 0.9
    # a passage the judge leans towards pulls its verdicts down: same P(Yes), lower score
    leaned = _score(Faithfulness(), Sample(id="c", question="", answer="The tower is old.", contexts=CONTEXTS[:1]),
                    models(judge), EvalSettings(windows_per_claim=0))
    assert leaned.value == pytest.approx(corrected(0.9, 0.8, 0.5)) and leaned.value < 0.9
    off = _score(Faithfulness(), sample, models(judge), EvalSettings(windows_per_claim=0, baseline_weight=0.0))
    assert off.value == pytest.approx(0.9) and "baseline" not in off.metadata["claims"][0]


def test_answer_correctness_uses_expected_counts_on_whole_short_answers():
    def probs(text: str) -> dict[str, float]:
        return {"Yes": 0.8, "No": 0.2} if "Question: Who wrote Hamlet?" in text else {"Yes": 0.1, "No": 0.9}
    judge = ScriptedJudge(script={"options": [{"match": "Context", "probs": probs}]})
    sample = Sample(id="c", question="Who wrote Hamlet?", answer="Shakespeare", ground_truth="William Shakespeare")
    result = _score(AnswerCorrectness(weights=(1.0, 0.0)), sample, models(judge, embedder=HashingEmbedder()),
                    EvalSettings())
    assert judge.calls["generate"] == 0  # both fragments are checked whole, as answers to the question
    tp, fp, fn = result.metadata["counts"]
    assert (tp, fp, fn) == pytest.approx((0.8, 0.2, 0.2))
    assert result.value == pytest.approx(0.8 / (0.8 + 0.5 * 0.4))
    assert result.metadata["statements"] == {"answer": "whole", "reference": "whole"}
