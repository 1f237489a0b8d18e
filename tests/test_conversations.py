"""Conversations: a sample that is one turn of a chat, read from every format, and MT-RAG's layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from offline_eval.data.readers import DataError, read_dataset, samples_from_rows
from offline_eval.data.schema import Sample, Turn

try:
    from test_readers import write_format
except ImportError:  # tests/ imported as a package
    from tests.test_readers import write_format

SHARED_MTRAG = Path(__file__).resolve().parents[2] / "shared" / "data" / "mtrag_dev.json"

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
