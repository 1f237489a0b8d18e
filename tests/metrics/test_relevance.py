"""answer_relevancy and context_relevance: their verdict mode (option verdicts, the default) on scripted
judges, and their ragas mode (Ragas' definitions) still reachable."""

from __future__ import annotations

import json

import pytest

from offline_eval.data.schema import Sample
from offline_eval.judging.settings import EvalSettings
from offline_eval.metrics.ragas import AnswerRelevancy, ContextRelevance, ragas_questions
from offline_eval.metrics.relevance import joined_questions, question_parts, says_it_cannot_answer
from offline_eval.runtime.scripted import ScriptedJudge
from tests.helpers import models, run_of, score

FOCUSED = ["The Eiffel Tower opened in 1889 for the World's Fair."]
PADDING = ["Sourdough needs a starter fed with flour and water for a week before the first loaf. "
           "Knead the dough, let it rise overnight and bake it hot."]
QUESTION = "When did the Eiffel Tower open?"


def line(text: str, label: str) -> str:
    """What follows ``label`` on its line of a prompt ('' when the prompt has no such line)."""
    return text.split(label, 1)[1].split("\n", 1)[0].strip() if label in text else ""


def judge_of(passage_yes=lambda passage, question: "1889" in passage and bool(question),
             gives=lambda question, answer: "1889" in answer, declines=lambda answer: "cannot" in answer):
    """A judge that says Yes (0.9, else 0.1) to: a passage stating the answer to its question; an answer
    giving what its question asks; an answer that says it cannot answer. Every reply it writes is no JSON."""
    def probs(text: str) -> dict[str, float]:
        question, answer = line(text, "Question:"), line(text, "Answer:")
        if "Does this passage state" in text:
            yes = passage_yes(text.split("Passage:\n", 1)[1].split("\n\nQuestion:", 1)[0], question)
        elif "not available or cannot be given" in text:
            yes = declines(answer)
        else:
            yes = gives(question, answer)
        return {"Yes": 0.9, "No": 0.1} if yes else {"Yes": 0.1, "No": 0.9}
    return ScriptedJudge(script={"options": [{"match": "", "probs": probs}], "default_response": "Sure! {\"questions\": ["})


def test_verdict_mode_asks_no_reply_to_parse_and_scores_every_answer():
    judge = judge_of()
    for answer in ("It opened in 1889.", "It is a tower.", "I cannot answer that from these passages.", "?" * 500):
        result = score(AnswerRelevancy(), Sample(id="1", question=QUESTION, answer=answer, contexts=FOCUSED), models(judge))
        assert result.value is not None and 0.0 <= result.value <= 1.0, result.reason
    result = score(ContextRelevance(), Sample(id="2", question=QUESTION, contexts=FOCUSED + PADDING), models(judge))
    assert result.value is not None
    assert judge.calls["generate"] == 0 and judge.calls["options"] > 0


def test_answer_giving_what_is_asked_scores_above_one_that_does_not():
    judge = judge_of()
    good = score(AnswerRelevancy(), Sample(id="1", question=QUESTION, answer="It opened in 1889."), models(judge))
    off = score(AnswerRelevancy(), Sample(id="2", question=QUESTION, answer="It is made of iron."), models(judge))
    assert good.value > 0.5 > off.value
    assert good.metadata["parts"][0]["addresses"] and not off.metadata["parts"][0]["addresses"]


def test_a_partial_answer_to_a_two_part_question_scores_below_a_complete_one():
    question = "Who built the Eiffel Tower? When did it open?"
    assert question_parts(question, "en") == ["Who built the Eiffel Tower?", "When did it open?"]

    def gives(part, answer):  # each part answered by its own fact; the whole question by either
        return ("Eiffel built" in answer if part.startswith("Who") else "1889" in answer if part.startswith("When")
                else "Eiffel built" in answer or "1889" in answer)
    judge = judge_of(gives=gives)
    complete = score(AnswerRelevancy(), Sample(id="1", question=question, answer="Gustave Eiffel built it; it opened "
                                               "in 1889."), models(judge))
    partial = score(AnswerRelevancy(), Sample(id="2", question=question, answer="Gustave Eiffel built it."),
                    models(judge))
    assert complete.value > 0.5 > partial.value
    assert [p["addresses"] for p in partial.metadata["parts"]] == [True, False]


@pytest.mark.parametrize("question, parts", [
    ("When did Acme appoint a new CEO, and when did the fraud occur?",
     ["When did Acme appoint a new CEO", "when did the fraud occur?"]),
    ("What is the Eiffel Tower made of and how tall is it?", ["What is the Eiffel Tower made of", "how tall is it?"]),
    ("How did the new CEO and the expansion of farmland improve Acme's standing?",
     ["How did the new CEO and the expansion of farmland improve Acme's standing?"]),
    ("Which projects did Acme and Beta fund in 2020?", ["Which projects did Acme and Beta fund in 2020?"]),
])
def test_a_question_is_cut_where_and_joins_a_second_question(question, parts):
    """"and" before a question word joins two questions; "and" between two nouns of one question does not."""
    assert joined_questions(question, "en") == parts
    assert question_parts(question, "en") == [question]  # the judge reads the sentence whole


def test_an_answer_to_one_part_of_a_joined_question_scores_below_an_answer_to_both():
    """A judge that says Yes to every part whatever the answer leaves out (as a small one does): the
    embedder's coverage of each part lowers the answer that covers one part only."""
    question = "When did Acme appoint a new chief executive, and when did Acme open its Berlin factory?"
    judge = judge_of(gives=lambda part, answer: bool(answer))
    both = score(AnswerRelevancy(), Sample(id="1", question=question, answer=(
        "Acme appointed a new chief executive in March 2019. Acme opened its Berlin factory in June 2020.")),
        models(judge))
    one = score(AnswerRelevancy(), Sample(id="2", question=question, answer=(
        "Acme appointed a new chief executive in March 2019.")), models(judge))
    assert one.value < both.value
    assert one.metadata["balance"] < both.metadata["balance"] <= 1.0
    assert [p["addresses"] for p in one.metadata["parts"]] == [True]  # the judge's reading, unchanged
    least = min(one.metadata["joined"], key=lambda q: q["coverage"])
    assert "Berlin" in least["question"] and "Berlin" in one.explanation
    single = score(AnswerRelevancy(), Sample(id="3", question=QUESTION, answer="It opened in 1889."), models(judge))
    assert "balance" not in single.metadata  # a question of one part embeds nothing
    follow_up = score(AnswerRelevancy(), Sample(id="4", question="Who built the tower? How?",
                                                answer="Gustave Eiffel's company built it."), models(judge))
    assert "balance" not in follow_up.metadata  # sentences are asked of the judge one by one instead


def test_an_answer_cut_to_its_first_sentence_scores_below_the_whole():
    """Issue #58 (the Ragas paper's answers "in an incomplete way"): a judge that says Yes to any answer, as
    a small one does to a cut answer, cannot tell the whole from its first sentence; how much of what the
    contexts say on the question the answer carries, read by the embedder, can."""
    question = "What did Acme announce at its 2021 shareholder meeting?"
    contexts = ["At its 2021 shareholder meeting Acme announced a new chief executive, Dana Reyes. "
                "Acme also announced at the meeting that it will open a factory in Berlin in 2022. "
                "The shareholder meeting approved a dividend of two euros a share, Acme announced."]
    whole = ("Acme announced Dana Reyes as its new chief executive. It announced a Berlin factory opening in "
             "2022. It announced a dividend of two euros a share.")
    judge = judge_of(gives=lambda part, answer: bool(answer))
    complete = score(AnswerRelevancy(), Sample(id="1", question=question, answer=whole, contexts=contexts),
                     models(judge))
    cut = score(AnswerRelevancy(), Sample(id="2", question=question, answer=whole.split(". ")[0] + ".",
                                          contexts=contexts), models(judge))
    assert cut.value < complete.value
    assert cut.metadata["coverage"] < complete.metadata["coverage"]
    assert cut.metadata["completeness"] < 1.0 and "of what the contexts say" in cut.explanation
    assert cut.metadata["parts"][0]["probability"] == pytest.approx(complete.metadata["parts"][0]["probability"])
    alone = score(AnswerRelevancy(), Sample(id="3", question=question, answer=whole), models(judge))
    assert "coverage" not in alone.metadata  # no contexts: nothing to be complete against


def test_a_fragment_is_not_read_as_an_incomplete_answer():
    """"Chicago." to "Which city ...?" is complete; the embedder, reading it without its question, finds it
    far from the sentence of the contexts that states it, so its coverage is not read (as faithfulness
    reads a fragment with its question)."""
    question = "Which city did Acme expand to in 2018?"
    contexts = ["In 2018 Acme expanded to Chicago, opening three offices there. Acme hired two hundred "
                "cleaners that year. Its revenue grew by a tenth."]
    judge = judge_of(gives=lambda part, answer: bool(answer))
    fragment = score(AnswerRelevancy(), Sample(id="1", question=question, answer="Chicago.", contexts=contexts),
                     models(judge))
    assert fragment.metadata["fragment"] and "coverage" not in fragment.metadata
    assert fragment.value == pytest.approx(fragment.metadata["parts"][0]["probability"])
    blank = score(AnswerRelevancy(), Sample(id="3", question=question, answer="Chicago.", contexts=[" "]),
                  models(judge))
    assert "fragment" not in blank.metadata  # nothing retrieved: no coverage to leave unread
    sentence = score(AnswerRelevancy(), Sample(id="2", question=question, answer="Acme hired cleaners in 2018.",
                                               contexts=contexts), models(judge))
    assert "fragment" not in sentence.metadata and "coverage" in sentence.metadata


def test_an_answer_written_as_a_table_is_read_row_by_row_as_faithfulness_reads_it():
    """The embedder reads a table's rows named by their header, as faithfulness verifies them, not its lines
    ("| Acme | 2019 |" names nothing, "|---|---|" says nothing): the table covers the contexts as its named
    rows written out do."""
    question = "When did Acme and Beta appoint their chief executives?"
    contexts = ["Acme appointed its chief executive in 2019. Beta appointed its chief executive in 2021."]
    table = "| Company | Year |\n|---|---|\n| Acme | 2019 |\n| Beta | 2021 |"
    rows = "Company: Acme; Year: 2019\nCompany: Beta; Year: 2021"
    judge = judge_of(gives=lambda part, answer: bool(answer))
    as_table, as_rows = (score(AnswerRelevancy(), Sample(id=str(n), question=question, answer=answer, contexts=contexts),
                               models(judge)) for n, answer in enumerate((table, rows)))
    assert as_table.metadata["coverage"] == pytest.approx(as_rows.metadata["coverage"])


def test_declining_is_relevant_only_when_the_contexts_do_not_hold_the_answer():
    judge = judge_of()
    answer = "I cannot answer that from these passages."
    honest = score(AnswerRelevancy(), Sample(id="1", question=QUESTION, answer=answer, contexts=PADDING), models(judge))
    evasive = score(AnswerRelevancy(), Sample(id="2", question=QUESTION, answer=answer, contexts=FOCUSED), models(judge))
    alone = score(AnswerRelevancy(), Sample(id="3", question=QUESTION, answer=answer), models(judge))
    assert honest.value > 0.5 > evasive.value
    # without contexts a declining answer gives nothing; beside contexts that hold the answer it is also
    # incomplete: it carries nothing of what they say on the question
    assert evasive.value < alone.value and evasive.metadata["completeness"] < 1.0
    assert honest.metadata["held"] < 0.5 < evasive.metadata["held"]


def test_where_nothing_was_retrieved_a_refusal_in_words_is_relevant_and_an_invented_answer_is_not():
    """Issue #58: an answer to a question nothing was retrieved for that says it has no information is
    the right answer, even from a judge that never reads it as declining (a small one seldom does)."""
    blind = judge_of(declines=lambda answer: False)
    refusal = "The documents do not provide an answer to the question. Please ask something else."
    honest = score(AnswerRelevancy(), Sample(id="1", question=QUESTION, answer=refusal, contexts=[]), models(blind))
    invented = score(AnswerRelevancy(), Sample(id="2", question=QUESTION, answer="It opened in 1925.", contexts=[]),
                     models(blind))
    assert honest.value == 1.0 and honest.metadata["declines_in_words"] and honest.metadata["retrieved_nothing"]
    assert "nothing was retrieved" in honest.explanation and invented.value < 0.5
    assert "retrieved_nothing" not in invented.metadata
    # blank contexts are nothing retrieved too; no contexts at all (a row without retrieval) reads no refusal
    assert score(AnswerRelevancy(), Sample(id="3", question=QUESTION, answer=refusal, contexts=["  "]),
                 models(blind)).value == 1.0
    assert score(AnswerRelevancy(), Sample(id="4", question=QUESTION, answer=refusal), models(blind)).value < 0.5
    # with passages retrieved the words are not read: whether they hold the answer is the judge's reading
    assert score(AnswerRelevancy(), Sample(id="5", question=QUESTION, answer=refusal, contexts=PADDING),
                 models(blind)).value < 0.5
    # a refusal read in its first sentence only, and in Chinese as in English
    later = "It is a tower in Paris. I do not have specific information on when it opened."
    assert score(AnswerRelevancy(), Sample(id="6", question=QUESTION, answer=later, contexts=[]),
                 models(blind)).value < 0.5
    zh = score(AnswerRelevancy(), Sample(id="7", question="埃菲尔铁塔何时开放？", answer="文档中没有提供相关信息。",
                                         contexts=[], language="zh"), models(blind))
    assert zh.value == 1.0


@pytest.mark.parametrize("sentence, declines", [
    ("The documents do not provide an answer to the question.", True),
    ("I don't have specific information about version 6.16.0.", True),
    ("Sorry, but I have no information regarding when it was developed.", True),
    ("The scheduled launch date has not been provided.", True),
    ("There is no cure for the disease.", False),  # a negation that is an answer
    ("I don't have computer skills but I like game design.", False),
    ("The loan does not cover the tax.", False),
    ("Paris is the capital of France.", False),
])
def test_a_refusal_is_read_in_words_only_where_it_names_the_missing_information(sentence, declines):
    assert says_it_cannot_answer(sentence, "en") is declines


def test_padding_a_focused_context_lowers_context_relevance():
    judge = judge_of()
    focused = score(ContextRelevance(), Sample(id="1", question=QUESTION, contexts=FOCUSED), models(judge))
    padded = score(ContextRelevance(), Sample(id="2", question=QUESTION, contexts=FOCUSED + PADDING), models(judge))
    unrelated = score(ContextRelevance(), Sample(id="3", question=QUESTION, contexts=PADDING), models(judge))
    assert focused.value > padded.value > unrelated.value
    assert [w["relevant"] for w in padded.metadata["windows"]] == [True, False]


def test_padding_lowers_context_relevance_where_the_judge_cannot_tell_it_from_the_answer():
    """A small judge gives a passage retrieved beside the answer about the P it gives the answer; the
    embedder's share of sentences on the question still reads the padding."""
    judge = judge_of(passage_yes=lambda passage, question: True)
    focused = score(ContextRelevance(), Sample(id="1", question=QUESTION, contexts=FOCUSED), models(judge))
    padded = score(ContextRelevance(), Sample(id="2", question=QUESTION, contexts=FOCUSED + PADDING), models(judge))
    assert focused.metadata["mean_probability"] == padded.metadata["mean_probability"] == pytest.approx(0.9)
    assert focused.metadata["n_sentences"] == 1 and padded.metadata["n_sentences"] == 3
    assert padded.metadata["share_on_question"] < focused.metadata["share_on_question"]
    assert padded.value < focused.value
    assert focused.value == pytest.approx((0.9 * focused.metadata["share_on_question"]) ** 0.5, abs=1e-6)
    assert "of their 3 sentences on the question" in padded.explanation


def test_a_sentence_no_closer_to_the_question_than_an_unrelated_passage_is_not_on_it():
    """The share is anchored at the embedder's cosine between the question and a passage about nothing
    asked (its lean): the unrelated passage itself scores 0, a context of it scores 0 whatever the judge
    says, and a sentence restating the question scores 1."""
    from offline_eval.judging.verdicts import UNRELATED_PASSAGE

    judge = judge_of(passage_yes=lambda passage, question: True)
    nothing = score(ContextRelevance(), Sample(id="1", question=QUESTION, contexts=[UNRELATED_PASSAGE["en"]]),
                    models(judge))
    assert nothing.metadata["share_on_question"] == 0.0 and nothing.value == 0.0
    assert nothing.metadata["mean_probability"] == pytest.approx(0.9)
    restated = score(ContextRelevance(), Sample(id="2", question=QUESTION, contexts=[QUESTION]), models(judge))
    assert restated.metadata["share_on_question"] == pytest.approx(1.0)


def test_a_question_the_judge_says_yes_to_whatever_the_answer_is_corrected_for_its_lean():
    # the second question gets Yes for any answer, the empty one included: its lean is taken out
    judge = judge_of(gives=lambda question, answer: "1889" in answer or "colour" in question)
    plain = score(AnswerRelevancy(), Sample(id="1", question=QUESTION, answer="It opened in 1889."), models(judge))
    leaning = score(AnswerRelevancy(), Sample(id="2", question="What colour is it?", answer="It is tall."),
                    models(judge))
    assert leaning.metadata["parts"][0]["judge_probability"] == pytest.approx(0.9)
    assert plain.value > leaning.value
    unweighted = score(AnswerRelevancy(), Sample(id="3", question="What colour is it?", answer="It is tall."),
                       models(judge), EvalSettings(baseline_weight=0.0))
    assert unweighted.value == pytest.approx(0.9)


def test_ragas_mode_keeps_ragas_definitions_and_reads_questions_closed_before_a_cut():
    cut = '{"noncommittal": false, "questions": ["When did the Eiffel Tower open?", "When did the tower open to'
    assert ragas_questions(cut) == {"noncommittal": False, "questions": ["When did the Eiffel Tower open?"]}
    assert ragas_questions('{"questions": ["never closed') is None
    judge = ScriptedJudge(script={"generate": [{"match": "questions that the answer", "response": cut},
                                               {"match": "Copy, unchanged", "response": json.dumps(
                                                   {"sentences": FOCUSED})}]})
    sample = Sample(id="1", question=QUESTION, answer="It opened in 1889.", contexts=FOCUSED + PADDING)
    relevancy = score(AnswerRelevancy(mode="ragas"), sample, models(judge))
    assert relevancy.metadata["mode"] == "ragas"
    assert [q["question"] for q in relevancy.metadata["questions"]] == ["When did the Eiffel Tower open?"]
    assert relevancy.value == pytest.approx(1.0, abs=1e-6)  # the same text as the question
    relevance = score(ContextRelevance(mode="ragas"), sample, models(judge))
    assert relevance.metadata["sentences"] == FOCUSED and relevance.value == pytest.approx(1 / 3)


def test_the_mode_is_an_option_of_the_run_and_recorded():
    run = run_of(models(judge_of()), ["answer_relevancy", "context_relevance"], answer_relevancy_mode="ragas")
    modes = {m.name: m.options.mode for m in run.metrics}
    assert modes == {"answer_relevancy": "ragas", "context_relevance": "verdict"}
    assert AnswerRelevancy().options.mode == ContextRelevance().options.mode == "verdict"


def test_a_calibration_fitted_before_the_mode_holds_for_ragas_definitions_only(tmp_path):
    from offline_eval.people.calibration import find_calibration, fit_calibration, read_calibrations
    from offline_eval.runtime.identity import CALIBRATION_FILE

    settings = EvalSettings()
    c = fit_calibration("answer_relevancy", {"judge": "j1"}, settings, [0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1],
                        options={"n": 3})  # as a run recorded answer_relevancy before its mode
    path = tmp_path / CALIBRATION_FILE
    path.write_text(json.dumps({"format": 1, "calibrations": [
        c.to_dict(), {**c.to_dict(), "metric": "context_relevance",
                      "settings": {k: v for k, v in c.settings.items() if k != "options"}}]}))
    read = {x.metric: x for x in read_calibrations(path)}
    for name, metric in (("answer_relevancy", AnswerRelevancy), ("context_relevance", ContextRelevance)):
        assert find_calibration([read[name]], name, {"judge": "j1"}, settings, metric(mode="ragas").config())
        assert find_calibration([read[name]], name, {"judge": "j1"}, settings, metric().config()) is None


def test_a_calibration_or_a_run_of_the_earlier_verdict_reading_is_not_taken_for_this_one():
    """The verdict mode's reading changed meaning (the coverage of the contexts): a calibration fitted, or a
    run begun, with the earlier reading (options without a revision) no longer matches; Ragas' definition,
    unchanged, still does."""
    from offline_eval.people.calibration import find_calibration, fit_calibration
    from offline_eval.run.runner import run_fingerprint

    settings = EvalSettings()
    earlier = {"mode": "verdict", "n": 3}
    c = fit_calibration("answer_relevancy", {"judge": "j1"}, settings, [0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1],
                        options=earlier)
    now = AnswerRelevancy()
    assert now.config() == {**earlier, "revision": AnswerRelevancy.VERDICT_REVISION}
    assert find_calibration([c], "answer_relevancy", {"judge": "j1"}, settings, now.config()) is None
    refit = fit_calibration("answer_relevancy", {"judge": "j1"}, settings, [0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1],
                            options=now.config())
    assert find_calibration([refit], "answer_relevancy", {"judge": "j1"}, settings, now.config()) is refit
    ragas = now.with_options(mode="ragas")
    assert "revision" not in ragas.config() and ragas.with_options(mode="verdict").config() == now.config()
    assert ContextRelevance(mode="ragas").with_options(mode="verdict").roles == {"judge", "embedder"}

    class Earlier(AnswerRelevancy):  # the same metric as a run recorded it before the revision
        def config(self):
            return earlier
    samples = [Sample(id="1", question=QUESTION, answer="It opened in 1889.")]
    assert (run_fingerprint(samples, [Earlier()], settings, {}, False)
            != run_fingerprint(samples, [now], settings, {}, False))


def test_both_modes_name_a_missing_embedder(tiny_profile, tmp_path):
    """answer_relevancy's verdicts embed a question's parts and the ragas mode its regenerated questions, so
    each mode needs the embedder, and a run without its folder names the folder before it scores a row;
    so does context_relevance's verdict mode, which embeds the contexts' sentences (Ragas' definition of it
    embeds nothing)."""
    import offline_eval
    from offline_eval.run.config import ModelsMissing

    manifest = tmp_path / "no-embedder.toml"
    text = tiny_profile.read_text(encoding="utf-8")
    embedder_path = text.split('[embedder]', 1)[1].split('path = ', 1)[1].split("\n", 1)[0]
    manifest.write_text(text.replace(embedder_path, json.dumps(str(tmp_path / "gone"))), encoding="utf-8")
    rows = [{"id": "a", "question": QUESTION, "answer": "It opened in 1889.", "contexts": FOCUSED}]
    for mode in ("verdict", "ragas"):
        assert AnswerRelevancy(mode=mode).roles == {"judge", "embedder"}
        with pytest.raises(ModelsMissing, match="gone"):
            offline_eval.evaluate(rows, ["answer_relevancy"], profile=str(manifest), cache=False,
                                  answer_relevancy_mode=mode)
    assert ContextRelevance().roles == {"judge", "embedder"} and ContextRelevance(mode="ragas").roles == {"judge"}
    with pytest.raises(ModelsMissing, match="gone"):
        offline_eval.evaluate(rows, ["context_relevance"], profile=str(manifest), cache=False)
    ragas = offline_eval.evaluate(rows, ["context_relevance"], profile=str(manifest), cache=False,
                                  context_relevance_mode="ragas")
    assert len(ragas.result_rows) == 1  # scored or unscored by the tiny judge, but run: no embedder asked for
