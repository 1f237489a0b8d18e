"""The data layer: every input format, field aliases, mappings, RAGEval rows and bad input."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from offline_eval.data.readers import (
    RAGEVAL_MAPPING,
    DataError,
    Sample,
    load_rows,
    looks_like_rageval,
    parse_mapping,
    read_dataset,
)

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
LIST_COLUMNS = ("contexts", "reference_contexts", "keypoints")

# The same three rows go through every format. Every row has every column (missing values are
# null) because columnar formats cannot tell an absent key from a null one.
ROWS: list[dict[str, Any]] = [
    {
        "id": "hr-1",
        "question": "How many remote days are allowed?",
        "answer": "Three per week, with approval.",
        "contexts": ["Staff may work remotely three days a week.",
                     'Cells with "quotes", commas,\ttabs\nand newlines survive.'],
        "ground_truth": "Up to three days a week.",
        "reference_contexts": ["Staff may work remotely three days a week."],
        "keypoints": ["Three days per week", "Manager approval"],
        "language": "en",
        "domain": "policy",
    },
    {
        "id": "zh-2",
        "question": "试用期最长多久？",
        "answer": "不得超过二个月。",
        "contexts": ["劳动合同期限一年以上不满三年的，试用期不得超过二个月。"],
        "ground_truth": "二个月。",
        "reference_contexts": None,
        "keypoints": None,
        "language": "zh",
        "domain": "law",
    },
    {
        "id": "3",
        "question": "Which bands does the router support?",
        "answer": "2.4 GHz and 5 GHz.",
        "contexts": ["Dual band: 2.4 GHz and 5 GHz."],
        "ground_truth": None,
        "reference_contexts": None,
        "keypoints": None,
        "language": None,
        "domain": "product",
    },
]

EXPECTED = [
    Sample(id="hr-1", question=ROWS[0]["question"], answer=ROWS[0]["answer"],
           contexts=ROWS[0]["contexts"], ground_truth="Up to three days a week.",
           reference_contexts=ROWS[0]["reference_contexts"], keypoints=ROWS[0]["keypoints"],
           language="en", row=1, extra={"domain": "policy"}),
    Sample(id="zh-2", question="试用期最长多久？", answer="不得超过二个月。",
           contexts=ROWS[1]["contexts"], ground_truth="二个月。", language="zh", row=2,
           extra={"domain": "law"}),
    Sample(id="3", question=ROWS[2]["question"], answer="2.4 GHz and 5 GHz.",
           contexts=["Dual band: 2.4 GHz and 5 GHz."], row=3, extra={"domain": "product"}),
]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows),
                    encoding="utf-8")
    return path


def write_delimited(path: Path, rows: list[dict[str, Any]], delimiter: str) -> Path:
    """CSV/TSV as people write them: list columns JSON-encoded, missing values as empty cells."""
    columns = list(rows[0])
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter=delimiter)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([
                "" if row[name] is None
                else json.dumps(row[name], ensure_ascii=False) if isinstance(row[name], list)
                else row[name]
                for name in columns
            ])
    return path


def write_format(directory: Path, layout: str, rows: list[dict[str, Any]]) -> Path:
    if layout == "jsonl":
        return write_jsonl(directory / "rows.jsonl", rows)
    if layout == "json_rows":
        path = directory / "rows.json"
        path.write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
        return path
    if layout == "json_columns":
        path = directory / "columns.json"
        path.write_text(json.dumps({name: [row[name] for row in rows] for name in rows[0]},
                                   ensure_ascii=False), encoding="utf-8")
        return path
    if layout == "csv":
        return write_delimited(directory / "rows.csv", rows, ",")
    if layout == "tsv":
        return write_delimited(directory / "rows.tsv", rows, "\t")
    if layout == "parquet":
        path = directory / "rows.parquet"
        pq.write_table(pa.Table.from_pylist(rows), path)
        return path
    if layout == "arrow_file":
        path = directory / "rows.arrow"
        table = pa.Table.from_pylist(rows)
        with pa.ipc.new_file(str(path), table.schema) as writer:
            writer.write_table(table)
        return path
    if layout == "hf_datasets":
        datasets = pytest.importorskip("datasets", reason="the datasets package is not installed")
        path = directory / "saved_dataset"
        datasets.Dataset.from_list(rows).save_to_disk(str(path))
        return path
    raise AssertionError(layout)


@pytest.mark.parametrize(
    "layout",
    ["jsonl", "json_rows", "json_columns", "csv", "tsv", "parquet", "arrow_file", "hf_datasets"],
)
def test_every_format_reads_back_the_same_samples(tmp_path: Path, layout: str) -> None:
    path = write_format(tmp_path, layout, ROWS)
    assert read_dataset(path) == EXPECTED


def test_datasetdict_folder_with_one_split_is_read_and_with_two_needs_a_split(
        tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets", reason="the datasets package is not installed")
    one = datasets.Dataset.from_list(ROWS)
    datasets.DatasetDict({"test": one}).save_to_disk(str(tmp_path / "single"))
    assert read_dataset(tmp_path / "single") == EXPECTED

    two = datasets.Dataset.from_list(ROWS[:1])
    datasets.DatasetDict({"train": two, "test": two}).save_to_disk(str(tmp_path / "double"))
    with pytest.raises(DataError, match="splits train, test"):
        read_dataset(tmp_path / "double")
    assert [s.id for s in read_dataset(tmp_path / "double" / "train")] == ["hr-1"]


def test_csv_list_cell_that_is_plain_text_becomes_a_one_element_list(tmp_path: Path) -> None:
    path = tmp_path / "plain.csv"
    path.write_text(
        'question,contexts,reference_contexts\n'
        'Q1,Only one chunk here,"[1] Annual report, page 4"\n'
        'Q2,"[""a"", ""b""]",\n',
        encoding="utf-8",
    )
    first, second = read_dataset(path)
    assert first.contexts == ["Only one chunk here"]
    assert first.reference_contexts == ["[1] Annual report, page 4"]
    assert second.contexts == ["a", "b"]
    assert second.reference_contexts is None
    assert (first.id, second.id) == ("1", "2")


def test_json_file_holding_json_lines_is_read(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "actually_lines.json", ROWS)
    assert read_dataset(path) == EXPECTED


# --------------------------------------------------------------------------- aliases and ids


def test_aliases_map_to_canonical_fields_and_the_rest_goes_to_extra(tmp_path: Path) -> None:
    rows = [
        {"user_input": "q1", "response": "a1", "retrieved_contexts": ["c1"],
         "reference": "gt1", "references": ["r1"], "key_points": ["k1"],
         "meta": {"source": "crm", "tags": [1, 2]}, "score": 0.5},
        {"query": "q2", "prediction": "a2", "retrieved": ["c2"], "gold": "gt2",
         "gold_contexts": ["r2"], "id": 17},
        {"question": "q3", "contexts": ["c3"], "ground_truths": ["only one"]},
        {"question": "q4", "ground_truths": ["first fact", "second fact"], "language": "en"},
    ]
    first, second, third, fourth = read_dataset(write_jsonl(tmp_path / "a.jsonl", rows))

    assert (first.question, first.answer, first.contexts) == ("q1", "a1", ["c1"])
    assert (first.ground_truth, first.reference_contexts, first.keypoints) == ("gt1", ["r1"],
                                                                               ["k1"])
    assert first.extra == {"meta": {"source": "crm", "tags": [1, 2]}, "score": 0.5}
    assert first.id == "1"

    assert (second.question, second.answer, second.contexts) == ("q2", "a2", ["c2"])
    assert (second.ground_truth, second.reference_contexts) == ("gt2", ["r2"])
    assert second.id == "17" and second.extra == {}

    # ground_truths: one element is taken as is, several are joined with a newline.
    assert third.ground_truth == "only one"
    assert fourth.ground_truth == "first fact\nsecond fact"
    assert fourth.language == "en" and fourth.answer is None


def test_canonical_name_wins_over_alias_and_the_unused_alias_is_kept(tmp_path: Path) -> None:
    rows = [{"question": "canonical", "query": "alias", "answer": None, "response": "fallback"}]
    (sample,) = read_dataset(write_jsonl(tmp_path / "both.jsonl", rows))
    assert sample.question == "canonical"
    assert sample.extra == {"query": "alias"}
    # A null canonical value falls through to the next alias and does not land in extra.
    assert sample.answer == "fallback"


def test_missing_optional_fields_are_not_errors(tmp_path: Path) -> None:
    rows = [{"question": "only a question"}, {"answer": "only an answer", "contexts": None}]
    first, second = read_dataset(write_jsonl(tmp_path / "sparse.jsonl", rows))
    assert first.missing(["answer", "contexts", "ground_truth"]) == [
        "answer", "contexts", "ground_truth"]
    assert second.question is None and second.contexts is None and second.answer == "only an answer"


def test_numeric_reference_answer_and_pandas_float_id_become_text(tmp_path: Path) -> None:
    rows = [{"id": 3.0, "question": "How many?", "ground_truth": 42},
            {"id": 4.5, "question": "How much?", "ground_truth": 0.25}]
    first, second = read_dataset(write_jsonl(tmp_path / "numbers.jsonl", rows))
    assert (first.id, first.ground_truth) == ("3", "42")
    assert (second.id, second.ground_truth) == ("4.5", "0.25")


def test_limit_stops_reading_before_later_rows(tmp_path: Path) -> None:
    path = tmp_path / "tail_broken.jsonl"
    path.write_text('{"question": "a"}\n{"question": "b"}\n{not json\n', encoding="utf-8")
    assert [s.question for s in read_dataset(path, limit=2)] == ["a", "b"]
    with pytest.raises(DataError, match="line 3"):
        read_dataset(path)
    assert len(load_rows(path, limit=1)) == 1


# --------------------------------------------------------------------------- mapping


NESTED_ROW = {
    "query": {"query_id": "q-9", "content": "Who signed?", "lang": "en"},
    "answer_block": {"text": "The CFO.", "model": "local-7b"},
    "retrieval": {"hits": [{"text": "Signed by the CFO."}, {"text": "Filed in May."}],
                  "chunks": ["Signed by the CFO.", "Filed in May."]},
    "gold": {"answers": ["The chief financial officer"]},
}


def test_mapping_reads_dotted_paths_and_keeps_the_rest(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "nested.jsonl", [NESTED_ROW])
    mapping = parse_mapping(
        "id=query.query_id, question=query.content, answer=answer_block.text,"
        "contexts=retrieval.chunks, reference=gold.answers, language=query.lang"
    )
    (sample,) = read_dataset(path, mapping)
    assert sample.id == "q-9"
    assert sample.question == "Who signed?"
    assert sample.answer == "The CFO."
    assert sample.contexts == ["Signed by the CFO.", "Filed in May."]
    assert sample.ground_truth == "The chief financial officer"
    assert sample.language == "en"
    assert sample.extra == {
        "model": "local-7b",
        "hits": [{"text": "Signed by the CFO."}, {"text": "Filed in May."}],
    }


def test_mapping_path_can_index_a_list_and_match_a_flattened_column(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "flat.jsonl", [
        {"query.content": "flattened question", "retrieval": NESTED_ROW["retrieval"]},
    ])
    (sample,) = read_dataset(path, {"question": "query.content",
                                    "answer": "retrieval.hits.1.text"})
    assert sample.question == "flattened question"
    assert sample.answer == "Filed in May."


def test_mapped_field_shadowing_a_top_level_key_keeps_that_key_safely(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "shadow.jsonl",
                       [{"question": "old", "q": {"text": "new"}}])
    (sample,) = read_dataset(path, {"question": "q.text"})
    assert sample.question == "new"
    assert sample.extra == {"original_question": "old"}
    assert sample.to_dict()["question"] == "new"


def test_parse_mapping_accepts_aliases_and_trailing_comma() -> None:
    assert parse_mapping(" question = query.content , reference=gold.text,") == {
        "question": "query.content", "ground_truth": "gold.text"}


@pytest.mark.parametrize("spec, needle", [
    ("", "--map is empty"),
    ("question", "'question' is not FIELD=PATH"),
    ("question=", "'question=' is not FIELD=PATH"),
    ("=query.content", "'=query.content' is not FIELD=PATH"),
    ("questoin=query.content", "unknown field 'questoin'"),
    ("question=a..b", "empty segment"),
    ("question=a,query=b", "names field 'question' twice"),
])
def test_parse_mapping_rejects_malformed_specs_with_one_line(spec: str, needle: str) -> None:
    with pytest.raises(DataError) as caught:
        parse_mapping(spec)
    assert needle in str(caught.value)
    assert "\n" not in str(caught.value)


# --------------------------------------------------------------------------- RAGEval layout


RAGEVAL_ROW = {
    "domain": "Finance", "language": "en",
    "query": {"query_id": 7, "query_type": "Factual Question", "content": "When was the CEO hired?"},
    "ground_truth": {"doc_ids": [3], "content": "March 2020",
                     "references": ["The CEO was hired in March 2020."],
                     "keypoints": ["1. The CEO was hired in March 2020."]},
    "prediction": {"content": "In March 2020.",
                   "references": ["The CEO was hired in March 2020.", "Revenue rose."]},
}


def test_rageval_row_is_recognised_without_a_mapping(tmp_path: Path) -> None:
    assert looks_like_rageval(RAGEVAL_ROW)
    (sample,) = read_dataset(write_jsonl(tmp_path / "rageval.jsonl", [RAGEVAL_ROW]))
    assert sample == Sample(
        id="7", question="When was the CEO hired?", answer="In March 2020.",
        contexts=["The CEO was hired in March 2020.", "Revenue rose."],
        ground_truth="March 2020", reference_contexts=["The CEO was hired in March 2020."],
        keypoints=["1. The CEO was hired in March 2020."], language="en", row=1,
        extra={"domain": "Finance", "query_type": "Factual Question", "doc_ids": [3]},
    )


def test_rageval_row_without_prediction_has_no_answer_but_is_no_error(tmp_path: Path) -> None:
    row = {key: value for key, value in RAGEVAL_ROW.items() if key != "prediction"}
    (sample,) = read_dataset(write_jsonl(tmp_path / "gt_only.jsonl", [row]))
    assert sample.answer is None and sample.contexts is None
    assert sample.ground_truth == "March 2020"


def test_user_mapping_overrides_one_rageval_field(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "rageval.jsonl", [RAGEVAL_ROW])
    (sample,) = read_dataset(path, {"contexts": "ground_truth.references"})
    assert sample.contexts == ["The CEO was hired in March 2020."]
    assert sample.answer == "In March 2020."  # the other RAGEval paths still apply


def test_shared_rageval_example_is_read_whole() -> None:
    path = SHARED_DATA / "rageval_example.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} is not available")
    raw_rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip()]
    samples = read_dataset(path)
    assert len(samples) == len(raw_rows) == 350
    for sample, raw in zip(samples, raw_rows):
        for field, dotted in RAGEVAL_MAPPING.items():
            value: Any = raw
            for segment in dotted.split("."):
                value = value[segment]
            expected = str(value) if field == "id" else value
            assert getattr(sample, field) == expected, (sample.row, field)
        assert sample.language == raw["language"]
        assert sample.extra["domain"] == raw["domain"]
        assert sample.extra["query_type"] == raw["query"]["query_type"]


# --------------------------------------------------------------------------- bad input


def _error_for(path: Path, mapping: dict[str, str] | None = None) -> str:
    with pytest.raises(DataError) as caught:
        read_dataset(path, mapping)
    message = str(caught.value)
    assert "\n" not in message, message
    assert path.name in message, message
    return message


@pytest.mark.parametrize("rows, row, field, needle", [
    ([{"question": "q", "contexts": 3}], 1, "contexts", "expected a list of strings, got a number"),
    ([{"question": "ok"}, {"question": ["a", "b"]}], 2, "question", "expected a string, got a list"),
    ([{"question": "q", "contexts": ["fine", 7]}], 1, "contexts", "item 2 of the list is a number"),
    ([{"question": "q", "keypoints": [None]}], 1, "keypoints", "item 1 of the list is null"),
    ([{"question": "q", "retrieved_contexts": 2.5}], 1, "retrieved_contexts",
     "got a number (read as contexts)"),
    ([{"question": "q", "gold": {"text": "x"}}], 1, "gold",
     "got an object; read a value inside it with --map ground_truth=gold.text"),
    ([{"question": "q", "id": [1]}], 1, "id", "expected a string or a number"),
    ([{"question": "q", "language": 1}], 1, "language", "language code"),
    ([{"id": "a", "question": "q"}, {"id": "b"}, {"id": "a", "question": "r"}], 3, "id",
     "duplicate id 'a' (first used in row 1)"),
    ([{"question": "q"}, {"question": "r", "id": "1"}], 2, "id", "duplicate id '1'"),
])
def test_wrong_values_name_file_row_and_field(tmp_path: Path, rows: list[dict[str, Any]],
                                              row: int, field: str, needle: str) -> None:
    message = _error_for(write_jsonl(tmp_path / "bad.jsonl", rows))
    assert f"row {row}" in message and f"field '{field}'" in message, message
    assert needle in message, message


def test_invalid_json_line_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text('{"question": "a"}\n\n{"question": "b",}\n', encoding="utf-8")
    message = _error_for(path)
    assert "invalid JSON on line 3" in message and "row 2" in message, message


def test_mapping_path_missing_from_a_row_names_row_field_and_path(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mapped.jsonl",
                       [NESTED_ROW, {"query": {"query_id": "x"}, "answer_block": {"text": "t"}}])
    message = _error_for(path, {"question": "query.content", "ground_truth": "gold.answers"})
    assert "row 2" in message and "field 'question'" in message, message
    assert "mapping path 'query.content' does not exist" in message
    assert "query has no key 'content'" in message


def test_csv_cell_that_is_a_broken_json_list_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.csv"
    path.write_text('question,contexts\nq1,"[""a""]"\nq2,"[""a"", ""b"""\n', encoding="utf-8")
    message = _error_for(path)
    assert "row 2" in message and "field 'contexts'" in message and "JSON list" in message


def test_csv_row_with_too_many_cells_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "shifted.csv"
    path.write_text("question,answer\nq,a\nq,a,extra\n", encoding="utf-8")
    message = _error_for(path)
    assert "row 2" in message and "3 cells" in message


def test_column_dict_with_unequal_columns_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "columns.json"
    path.write_text(json.dumps({"question": ["a", "b"], "answer": ["x"]}), encoding="utf-8")
    message = _error_for(path)
    assert "field 'answer'" in message and "equal-length" in message


@pytest.mark.parametrize("name, content, needle", [
    ("empty.jsonl", "", "empty"),
    ("blank.jsonl", "\n\n", "empty"),
    ("empty.json", "[]", "empty"),
    ("header_only.csv", "question,answer\n", "empty"),
    ("scalar.json", "42", "got a number"),
    ("unrelated.jsonl", '{"foo": 1}\n', "no row has any recognised field"),
    ("rows.txt", "question\n", "unknown file type '.txt'"),
    ("latin1.jsonl", b'{"question": "caf\xe9"}\n', "not UTF-8"),
    ("not_parquet.parquet", "plain text", "not a readable Parquet file"),
])
def test_unusable_files_are_data_errors(tmp_path: Path, name: str, content: str | bytes,
                                        needle: str) -> None:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    assert needle in _error_for(path)


def test_missing_file_and_plain_folder_are_data_errors(tmp_path: Path) -> None:
    assert "file not found" in _error_for(tmp_path / "nowhere.jsonl")
    folder = tmp_path / "just_a_folder"
    folder.mkdir()
    assert "not one saved by Hugging Face datasets" in _error_for(folder)


def test_limit_must_be_positive(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "rows.jsonl", ROWS)
    with pytest.raises(DataError, match="limit"):
        read_dataset(path, limit=0)


# --------------------------------------------------------------------------- shipped example


def test_example_dataset_has_the_promised_mix() -> None:
    samples = read_dataset(REPO / "examples" / "sample.jsonl")
    assert len(samples) == 12
    languages = [sample.language for sample in samples]
    assert languages.count("en") == 8 and languages.count("zh") == 4
    assert all(sample.question and sample.answer for sample in samples)
    assert all(2 <= len(sample.contexts or []) <= 3 for sample in samples)
    assert sum(sample.ground_truth is None for sample in samples) == 1
    assert sum(sample.reference_contexts is not None for sample in samples) >= 3
    assert any("don't know" in (sample.answer or "") for sample in samples)
    assert len({sample.extra["domain"] for sample in samples}) >= 4
