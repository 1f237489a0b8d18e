"""Conversations: a sample that is one turn of a chat, read from every format, and MT-RAG's layout."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from offline_eval.data.readers import DataError, read_dataset, samples_from_rows
from offline_eval.data.schema import Sample, Turn

from tests.dataset.test_readers import write_format

SHARED_MTRAG = Path(__file__).resolve().parents[3] / "shared" / "data" / "mtrag_dev.json"

HISTORY = [{"role": "user", "content": "Who wrote Hamlet?"},
           {"role": "assistant", "content": "William Shakespeare wrote it."},
           {"role": "user", "content": "When was he born?"}]
ROWS = [
    {"id": "t1", "conversation": HISTORY[:1], "answer": "Shakespeare.", "contexts": ["Hamlet is by Shakespeare."],
     "conversation_id": "c1"},
    {"id": "t2", "conversation": HISTORY, "answer": "In 1564.", "contexts": ["Shakespeare was born in 1564."],
     "conversation_id": "c1"},
]
EXPECTED = [
    Sample(id="t1", question="Who wrote Hamlet?", answer="Shakespeare.", contexts=["Hamlet is by Shakespeare."],
           conversation=[Turn("user", "Who wrote Hamlet?")], conversation_id="c1", row=1),
    Sample(id="t2", question="When was he born?", answer="In 1564.", contexts=["Shakespeare was born in 1564."],
           conversation=[Turn(t["role"], t["content"]) for t in HISTORY], conversation_id="c1", row=2),
]


@pytest.mark.parametrize("layout", ["jsonl", "json_rows", "csv", "tsv", "parquet", "hf_datasets"])
def test_a_conversation_reads_the_same_from_every_format(tmp_path: Path, layout: str) -> None:
    """JSONL, JSON, CSV/TSV (the history JSON-encoded in its cell), Parquet and a datasets folder."""
    assert read_dataset(write_format(tmp_path, layout, ROWS)) == EXPECTED


def test_the_question_is_the_last_user_turn_and_the_history_what_came_before() -> None:
    sample = read_dataset_rows([{"id": "x", "messages": HISTORY, "answer": "1564."}])[0]
    assert sample.question == "When was he born?"
    assert sample.history == [Turn("user", "Who wrote Hamlet?"), Turn("assistant", "William Shakespeare wrote it.")]
    # a question given apart from the conversation: every turn is history
    apart = read_dataset_rows([{"id": "x", "history": HISTORY[:2], "question": "When?", "answer": "1564."}])[0]
    assert apart.question == "When?" and apart.history == apart.conversation


@pytest.mark.parametrize("turns", [
    [{"speaker": "user", "text": "Hi"}, {"speaker": "agent", "text": "Hello"}],  # MT-RAG
    [{"type": "human", "content": "Hi"}, {"type": "ai", "content": "Hello"}],  # Ragas' messages
    [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"}],  # ShareGPT
])
def test_turn_spellings_and_an_answer_that_ends_the_conversation(turns: list[dict]) -> None:
    """Without an answer, a conversation ending with the assistant's turn gives it; Ragas' multi-turn
    ``user_input`` (a list of messages) is a conversation."""
    for row in ({"id": "x", "conversation": turns}, {"id": "x", "user_input": turns}):
        sample = read_dataset_rows([row])[0]
        assert (sample.question, sample.answer, sample.conversation) == ("Hi", "Hello", [Turn("user", "Hi")])


@pytest.mark.parametrize(("value", "needle"), [
    ([{"content": "no role"}], "turn 1 has no role"),
    ([{"role": "user", "content": "ok"}, {"role": "narrator", "content": "x"}], "turn 2 has the role 'narrator'"),
    ([{"role": "user"}], "turn 1 has no text"),
    ([{"role": "user", "content": ["a list"]}], "turn 1's content is a list"),
    (["just a string"], "turn 1 is a string"),
    ({"role": "user", "content": "an object"}, "expected a list of turns"),
    ('[{"role": "user", "content": "cut', "not valid JSON"),
])
def test_a_malformed_conversation_is_one_line_naming_the_row_and_field(value, needle) -> None:
    with pytest.raises(DataError) as caught:
        read_dataset_rows([{"id": "ok", "question": "q", "answer": "a"},
                           {"id": "bad", "conversation": value, "answer": "a"}])
    message = str(caught.value)
    assert "\n" not in message and "row 2" in message and "field 'conversation'" in message and needle in message


def test_an_empty_conversation_is_a_missing_one() -> None:
    sample = read_dataset_rows([{"id": "x", "conversation": [], "question": "q", "answer": "a"}])[0]
    assert sample.conversation is None and sample.history == []


def test_a_sample_without_a_conversation_is_written_as_before() -> None:
    """No conversation keys in its dict, so its run fingerprint does not move."""
    plain = read_dataset_rows([{"id": "x", "question": "q", "answer": "a"}])[0]
    assert set(plain.to_dict()) == {"id", "question", "answer", "contexts", "ground_truth", "reference_contexts",
                                    "keypoints", "language"}
    chat = read_dataset_rows([ROWS[1]])[0].to_dict()
    assert chat["conversation"] == HISTORY and chat["conversation_id"] == "c1"


def read_dataset_rows(rows: list[dict]) -> list[Sample]:
    return samples_from_rows(list(enumerate(rows, start=1)), "rows")


@pytest.mark.skipif(not SHARED_MTRAG.exists(), reason="../shared/data/mtrag_dev.json is not here")
def test_mtrag_file_is_read_without_a_mapping() -> None:
    samples = read_dataset(SHARED_MTRAG)
    assert len(samples) == 234  # every rated answer
    assert len({s.conversation_id for s in samples}) == 30  # 10 conversations x 3 systems
    follow_up = next(s for s in samples if s.extra["turn"] == 2 and s.extra["system"] == "gpt-4o")
    assert follow_up.history[0].role == "user" and follow_up.history[1].role == "assistant"
    assert follow_up.question == follow_up.conversation[-1].content and follow_up.contexts is not None
    assert set(follow_up.extra["human"]) == {"faithfulness", "completeness", "appropriateness", "naturalness"}
    assert follow_up.id.endswith("::gpt-4o") and follow_up.conversation_id.endswith("::gpt-4o")


# ----------------------------------------------------------------------------- metrics read the history

from offline_eval.engine.executor import Engine, Task  # noqa: E402
from offline_eval.judging.settings import EvalSettings  # noqa: E402
from offline_eval.judging.verdicts import UNRELATED_PASSAGE  # noqa: E402
from offline_eval.metrics import builtin_metric_classes, metric_classes  # noqa: E402
from offline_eval.metrics.base import as_score, start  # noqa: E402
from offline_eval.metrics.conversation import recent_turns  # noqa: E402
from offline_eval.runtime.scripted import ScriptedJudge  # noqa: E402

from tests.helpers import models, score

FOLLOW_UP = Sample(id="f", question="When was he born?", answer="He was born in 1564.",
                   contexts=["William Shakespeare was born in Stratford in 1564."],
                   ground_truth="Shakespeare was born in 1564.",
                   conversation=[Turn("user", "Who wrote Hamlet?"), Turn("assistant", "William Shakespeare."),
                                 Turn("user", "When was he born?")], conversation_id="c")
REWRITE = '{"question": "When was William Shakespeare born?"}'


def judge_for_conversations() -> ScriptedJudge:
    return ScriptedJudge(script={
        "generate": [{"match": "Rewrite the user's last question", "response": REWRITE},
                     {"match": "Break the answer", "response": '{"claims": ["Shakespeare was born in 1564."]}'}],
        "default_probs": {"Yes": 0.7, "No": 0.3}})


def score_all(sample: Sample, settings: EvalSettings, judge: ScriptedJudge) -> dict[str, object]:
    names = sorted(n for n, c in builtin_metric_classes().items() if c.roles)
    engine = Engine(models(judge))
    tasks = engine.run([Task(key=n, generator=start(metric_classes()[n](), sample, settings)) for n in names])
    return {t.key: as_score(t.result) for t in tasks}


@pytest.mark.parametrize("mode", ["tail", "both"])
def test_every_metric_that_reads_the_question_sees_the_conversation(mode: str) -> None:
    judge = judge_for_conversations()
    scores = score_all(FOLLOW_UP, EvalSettings(history=mode, claims="llm"), judge)
    readers = sorted(n for n, c in builtin_metric_classes().items() if c.reads_question)
    assert "faithfulness" in readers and "context_precision" in readers and "completeness" in readers
    probes = [p for p in judge.prompts_seen if UNRELATED_PASSAGE["en"] in p]
    asked = [p for p in judge.prompts_seen if "When was" in p and "Rewrite the user's" not in p and p not in probes]
    assert asked and all("Conversation so far:\nUser: Who wrote Hamlet?\nAssistant: William Shakespeare.\n\n" in p
                         for p in asked)
    # the self-support probes (an unrelated passage) read the question alone (in "both", its rewrite)
    question = "When was William Shakespeare born?" if mode == "both" else "When was he born?"
    assert probes and all("Conversation so far:" not in p for p in probes)
    assert any(f"Question: {question}" in p for p in probes)
    # faithfulness judges a whole statement on its own, as outside a conversation
    assert any(p.endswith("Statement: Shakespeare was born in 1564.\n\nIs the statement fully supported by the "
                          "context? Answer Yes or No.") and "Conversation so far:" not in p for p in judge.prompts_seen)
    if mode == "both":
        assert all("When was William Shakespeare born?" in p for p in asked)
    assert all(s.value is not None or s.reason for s in scores.values())


def test_a_fragment_answer_is_judged_as_the_answer_to_the_question_in_its_conversation() -> None:
    from offline_eval.metrics.ragas import Faithfulness

    judge = judge_for_conversations()
    fragment = dataclasses.replace(FOLLOW_UP, answer="In 1564.")
    score(Faithfulness(), fragment, models(judge), EvalSettings(history="tail"))
    verdicts = [p for p in judge.prompts_seen if "In 1564." in p and UNRELATED_PASSAGE["en"] not in p]
    assert verdicts and all("Conversation so far:\nUser: Who wrote Hamlet?" in p and "When was he born?" in p
                            for p in verdicts)


def test_rewrite_is_asked_once_per_sample_and_shared_by_every_metric() -> None:
    judge = judge_for_conversations()
    score_all(FOLLOW_UP, EvalSettings(history="rewrite"), judge)
    rewrites = [p for p in judge.prompts_seen if "Rewrite the user's last question" in p]
    assert len(rewrites) == 1 and "Conversation so far:" in rewrites[0]
    others = [p for p in judge.prompts_seen if "Rewrite the user's" not in p and "Shakespeare born?" in p]
    assert others and not any("Conversation so far:" in p for p in others)


def test_an_unreadable_rewrite_keeps_the_question() -> None:
    judge = ScriptedJudge(script={"generate": [{"match": "Rewrite the user's", "response": "no json at all"}],
                                  "default_probs": {"Yes": 0.7, "No": 0.3}})
    scores = score_all(FOLLOW_UP, EvalSettings(history="rewrite"), judge)
    assert scores["context_precision"].value is not None
    assert any("Question: When was he born?" in p for p in judge.prompts_seen if "Rewrite" not in p)


def test_none_or_no_history_changes_no_prompt() -> None:
    plain = dataclasses_replace(FOLLOW_UP, conversation=None)
    first, second, third = judge_for_conversations(), judge_for_conversations(), judge_for_conversations()
    a = score_all(plain, EvalSettings(), first)
    b = score_all(FOLLOW_UP, EvalSettings(history="none"), second)
    c = score_all(dataclasses_replace(FOLLOW_UP, conversation=[Turn("user", "When was he born?")]),
                  EvalSettings(history="tail"), third)
    assert first.prompts_seen == second.prompts_seen == third.prompts_seen
    assert {k: v.value for k, v in a.items()} == {k: v.value for k, v in b.items()} == {k: v.value for k, v in c.items()}


def dataclasses_replace(sample: Sample, **changes: object) -> Sample:
    import dataclasses
    return dataclasses.replace(sample, **changes)


def test_recent_turns_keep_the_latest_words_whole_turns_first() -> None:
    turns = [Turn("user", "one two three"), Turn("assistant", "four five six seven"), Turn("user", "eight nine")]
    assert recent_turns(turns, 100, "en") == turns
    assert recent_turns(turns, 6, "en") == turns[1:]
    assert recent_turns(turns, 5, "en") == [Turn("assistant", "…five six seven"), Turn("user", "eight nine")]
    assert recent_turns(turns, 2, "en") == [Turn("user", "eight nine")]
    assert recent_turns([Turn("user", "一二三四五")], 3, "zh") == [Turn("user", "…三四五")]


def test_history_at_its_default_leaves_fingerprints_and_signatures_as_before() -> None:
    from offline_eval.people.calibration import settings_signature

    default = EvalSettings()
    assert "history" not in default.fingerprint() and "history_words" not in settings_signature(default)
    assert default.history == "none" and EvalSettings(history="tail").fingerprint()["history"] == "tail"
    assert settings_signature(EvalSettings(history_words=50))["history_words"] == 50


# ----------------------------------------------------------------------------- per turn and per conversation

import json  # noqa: E402

from offline_eval.cli import main  # noqa: E402
from offline_eval.conversations import conversation_summary  # noqa: E402

THREE_TURNS = [
    {"id": "c1-t1", "conversation_id": "c1", "question": "Who wrote Hamlet?", "answer": "Shakespeare.",
     "contexts": ["Hamlet is a tragedy by William Shakespeare."]},
    {"id": "c1-t2", "conversation_id": "c1",
     "conversation": [{"role": "user", "content": "Who wrote Hamlet?"}, {"role": "assistant", "content": "Shakespeare."},
                      {"role": "user", "content": "When was he born?"}],
     "answer": "He was born in 1564.", "contexts": ["Shakespeare was born in 1564 in Stratford."]},
    {"id": "c1-t3", "conversation_id": "c1",
     "conversation": [{"role": "user", "content": "Who wrote Hamlet?"}, {"role": "assistant", "content": "Shakespeare."},
                      {"role": "user", "content": "When was he born?"}, {"role": "assistant", "content": "In 1564."},
                      {"role": "user", "content": "Where?"}],
     "answer": "In Stratford-upon-Avon.", "contexts": ["Shakespeare was born in 1564 in Stratford."]},
    {"id": "c2-t1", "conversation_id": "c2", "question": "What is the capital of France?", "answer": "Paris.",
     "contexts": ["Paris is the capital of France."]},
    {"id": "alone", "question": "What is 2+2?", "answer": "4.", "contexts": ["2+2=4"]},
]


def test_conversation_summary_by_hand() -> None:
    got = conversation_summary(["a", "a", "b", None], ["t1", "t2", "u1", "x"],
                               {"m": [0.2, 0.8, 1.0, 0.0], "bad": [0.1, None, 0.3, 0.9]},
                               {"m": True, "bad": False})
    assert got["n_conversations"] == 2 and got["n_turns"] == 3 and got["n_outside"] == 1
    a = got["by_conversation"]["a"]
    assert a["turns"] == ["t1", "t2"]
    assert a["metrics"]["m"] == {"mean": pytest.approx(0.5), "worst": 0.2, "worst_turn": "t1", "n_scored": 2}
    assert a["metrics"]["bad"]["worst"] == 0.1 and a["metrics"]["bad"]["n_scored"] == 1  # lower is better: highest
    assert got["metrics"]["m"]["mean"] == pytest.approx((0.5 + 1.0) / 2)  # each conversation once
    assert got["metrics"]["m"]["worst_turn_mean"] == pytest.approx((0.2 + 1.0) / 2)
    assert got["metrics"]["bad"]["worst_turn_mean"] == pytest.approx((0.1 + 0.3) / 2)
    assert conversation_summary([None, None], ["x", "y"], {"m": [1.0, 0.0]}, {"m": True}) is None


def test_a_run_gives_each_metric_per_conversation(tiny_profile: Path, tmp_path: Path, capsys) -> None:
    data = tmp_path / "chat.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in THREE_TURNS), encoding="utf-8")
    out = tmp_path / "run"
    assert main(["run", "--dataset", str(data), "--profile", str(tiny_profile), "--metrics",
                 "faithfulness,context_relevance_embedding", "--no-cache", "--output", str(out), "--no-report"]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    conversations = summary["conversations"]
    assert conversations["n_conversations"] == 2 and conversations["n_turns"] == 4 and conversations["n_outside"] == 1
    assert conversations["by_conversation"]["c1"]["turns"] == ["c1-t1", "c1-t2", "c1-t3"]
    rows = {json.loads(line)["id"]: json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()}
    turns = [rows[i]["scores"]["faithfulness"]["value"] for i in ("c1-t1", "c1-t2", "c1-t3")]
    c1 = conversations["by_conversation"]["c1"]["metrics"]["faithfulness"]
    assert c1["mean"] == pytest.approx(sum(turns) / 3) and c1["worst"] == pytest.approx(min(turns))
    assert rows["c1-t3"]["sample"]["question"] == "Where?" and rows["c1-t3"]["sample"]["conversation_id"] == "c1"
    printed = capsys.readouterr().out
    assert "per conversation (2 conversations, 4 turns" in printed and "mean worst turn" in printed
