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

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
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


# --------------------------------------------------------------------------- broken quoting (issue #33)

CSV_HEADER = "id,question,answer,ground_truth\n"


@pytest.mark.parametrize("name, body, row, line, needle", [
    # the closing quote after "Z?" is missing: the next quote closes the field and text follows it
    ("unclosed_then_text.csv", '1,"What is Z?,"Z is W.",gt\n2,q2,a2,g2\n', 1, 2,
     "text follows the closing quote of a quoted field on line 2"),
    # a stray quote opening an unquoted cell
    ("stray_open.csv", '1,q1,a1,g1\n2,"Hamlet" is a play,a2,g2\n', 2, 3,
     "text follows the closing quote"),
    ("stray_open.tsv", '1\tq1\ta1\tg1\n2\t"Hamlet" is a play\ta2\tg2\n', 2, 3,
     "text follows the closing quote"),
    # a quote never closed swallows every line after it
    ("runs_to_eof.csv", '1,q1,a1,g1\n2,"What is Z?,a2,g2\n3,q3,a3,g3\n4,q4,a4,g4\n', 2, 3,
     "a quoted field is never closed: it runs from line 3 to the end of the file (line 5)"),
    # ... or the lines up to a later quote that happens to close it cleanly
    ("swallows_lines.csv", '1,"What is Z?,Z is W.,gt1\n2,What is Y?,Y is V.",gt2\n', 1, 2,
     "the record has 3 cells but the header has 4 columns; a quoted field runs from line 2 to line 3"),
    ("too_few_cells.csv", '1,q1,a1,g1\n2,q2,a2\n', 2, 3,
     "the record has 3 cells but the header has 4 columns (is a cell missing?"),
    ("too_many_cells.tsv", '1\tq1\ta1\tg1\tx\n', 1, 2,
     "the record has 5 cells but the header has 4 columns (is the delimiter a tab?"),
])
def test_broken_csv_quoting_is_an_error_naming_the_line_the_record_starts_on(
        tmp_path: Path, name: str, body: str, row: int, line: int, needle: str) -> None:
    path = tmp_path / name
    path.write_text(CSV_HEADER.replace(",", "\t") + body if name.endswith(".tsv")
                    else CSV_HEADER + body, encoding="utf-8")
    message = _error_for(path)
    kind = "TSV" if name.endswith(".tsv") else "CSV"
    assert f"row {row}: malformed {kind} on line {line}: " in message, message
    assert needle in message, message


def test_skip_bad_rows_lists_a_broken_csv_record_and_reads_the_lines_it_swallowed(
        tmp_path: Path) -> None:
    path = tmp_path / "broken.csv"
    path.write_text(CSV_HEADER + '1,q1,a1,g1\n2,q2,a2\n3,"Hamlet" is a play,a3,g3\n4,q4,a4,g4\n'
                    '5,"What is Z?,a5,g5\n6,q6,a6,g6\n7,q7,a7,g7\n', encoding="utf-8")
    skipped: list[dict[str, Any]] = []
    samples = read_dataset(path, skipped=skipped)
    assert [(s.id, s.question, s.ground_truth, s.row) for s in samples] == [
        ("1", "q1", "g1", 1), ("4", "q4", "g4", 4), ("6", "q6", "g6", 6), ("7", "q7", "g7", 7)]
    assert [(bad["source"], bad["row"]) for bad in skipped] == [(str(path), 2), (str(path), 3),
                                                                (str(path), 5)]
    reasons = [bad["reason"] for bad in skipped]
    assert "row 2: malformed CSV on line 3: the record has 3 cells" in reasons[0]
    assert "row 3: malformed CSV on line 4: text follows the closing quote" in reasons[1]
    assert ("row 5: malformed CSV on line 6: a quoted field is never closed: it runs from line 6 "
            "to the end of the file (line 8)") in reasons[2]


def test_valid_csv_and_tsv_quoting_reads_as_before(tmp_path: Path) -> None:
    """Quoted delimiters, doubled quotes, multi-line cells, CRLF, blank lines, JSON list cells and
    a quote inside an unquoted cell (real TSV files, such as BEGIN's, hold them) all still read."""
    csv_path = tmp_path / "valid.csv"
    csv_path.write_bytes(
        b'id,question,contexts,ground_truth\r\n'
        b'1,"Commas, and ""quotes""","[""a, b"", ""c\\nd""]","two\r\nlines"\r\n'
        b'\r\n'
        b'2,A 12" pizza?,,\r\n'
        b'3,"multi\nline\n\nwith blank",plain chunk,"ends with a quote"""\r\n')
    first, second, third = read_dataset(csv_path)
    assert (first.question, first.contexts, first.ground_truth) == (
        'Commas, and "quotes"', ["a, b", "c\nd"], "two\r\nlines")
    assert (second.id, second.question, second.contexts, second.ground_truth) == (
        "2", 'A 12" pizza?', None, None)
    assert (third.question, third.contexts, third.ground_truth, third.row) == (
        "multi\nline\n\nwith blank", ["plain chunk"], 'ends with a quote"', 3)
    tsv_path = tmp_path / "begin_like.tsv"
    tsv_path.write_text('knowledge\tresponse\n'
                        'the 2000 film "Bring It On".\tit is mental suffering; torment."\n',
                        encoding="utf-8")
    (row,) = load_rows(tsv_path)
    assert row == (1, {"knowledge": 'the 2000 film "Bring It On".',
                       "response": 'it is mental suffering; torment."'})


# --------------------------------------------------------------------------- JSON positions (issue #33)


def test_truncated_json_line_reports_the_parsers_column(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_text('{"question": "a"}\n{"question": "What is X?", "answer"\n', encoding="utf-8")
    message = _error_for(path)
    assert "row 2: invalid JSON on line 2: Expecting ':' delimiter (column 36)" in message, message


def test_truncated_json_file_reports_the_parsers_line_column_and_character(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_text('[{"question": "a"},\n {"question": "What is X?"\n\n', encoding="utf-8")
    message = _error_for(path)
    assert "invalid JSON on line 2: Expecting ',' delimiter (column 27, character 47)" in message


# --------------------------------------------------------------------------- printable messages (issue #33)

HOSTILE_ID = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202eid\x7f\r\n"


def test_control_characters_from_the_data_are_escaped_in_every_error_message(
        tmp_path: Path) -> None:
    duplicated = _error_for(write_jsonl(tmp_path / "ids.jsonl", [
        {"id": HOSTILE_ID, "question": "q"}, {"id": HOSTILE_ID, "question": "r"}]))
    assert r"duplicate id '\x1b]0;owned\x07\x1b[2J\x9b31m\u202eid\x7f\r\n'" in duplicated
    header = tmp_path / "header.csv"
    header.write_text("question,\x1b[31mred\x1b[0m,\x1b[31mred\x1b[0m\nq,a,b\n", encoding="utf-8")
    assert r"field '\x1b[31mred\x1b[0m': appears twice" in _error_for(header)
    missing = _error_for(write_jsonl(tmp_path / "mapped.jsonl", [{"question": "q"}]),
                         {"answer": "x\x1bz"})
    assert r"mapping path 'x\x1bz' does not exist" in missing
    for message in (duplicated, missing):
        assert not any(ord(ch) < 32 or 127 <= ord(ch) < 160 or ch == "\u202e" for ch in message)


def test_the_cli_prints_a_hostile_id_escaped(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from offline_eval.cli import main

    data = write_jsonl(tmp_path / "ids.jsonl", [
        {"id": HOSTILE_ID, "question": "q", "answer": "a b", "ground_truth": "a b"},
        {"id": HOSTILE_ID, "question": "q", "answer": "a c", "ground_truth": "a c"},
        {"id": "ok", "question": "q", "answer": "a c", "ground_truth": "a c"}])
    args = ["run", "--dataset", str(data), "--profile", "starter", "--metrics", "rouge_l",
            "--quiet", "--no-cache", "--no-report"]
    assert main(args + ["--output", str(tmp_path / "strict")]) == 2
    err = capsys.readouterr().err
    assert r"duplicate id '\x1b]0;owned\x07" in err and "\x1b" not in err and "\x07" not in err
    assert err.count("\n") == 1, err
    assert main(args + ["--output", str(tmp_path / "skip"), "--skip-bad-rows"]) == 0
    captured = capsys.readouterr()
    assert "skipped: " in captured.err and r"\x1b[2J" in captured.err
    assert "\x1b" not in captured.err + captured.out


def test_a_parquet_timestamp_column_is_kept_as_text_so_the_results_can_be_written(
        tmp_path: Path) -> None:
    import datetime

    path = tmp_path / "dated.parquet"
    pq.write_table(pa.Table.from_pylist([{"question": "q", "asked": datetime.datetime(2024, 5, 1, 9, 30),
                                          "meta": {"day": datetime.date(2024, 5, 1)}}]), path)
    (sample,) = read_dataset(path)
    assert sample.extra == {"asked": "2024-05-01T09:30:00", "meta": {"day": "2024-05-01"}}
    assert json.loads(json.dumps(sample.to_dict()))["asked"] == "2024-05-01T09:30:00"


def test_a_dataset_whose_name_is_not_utf8_is_one_line_and_makes_no_folder(tmp_path, capsys):
    import os

    from offline_eval.cli import main

    path = tmp_path / os.fsdecode(b"data\xff.jsonl")
    try:
        path.write_text('{"question": "q", "answer": "a"}\n', encoding="utf-8")
    except (OSError, UnicodeEncodeError):
        pytest.skip("this file system takes only UTF-8 names")
    with pytest.raises(DataError, match=r"data\\xff\.jsonl: the file's name is not UTF-8 text"):
        read_dataset(path)
    out = tmp_path / "out"
    assert main(["run", "--dataset", str(path), "--metrics", "rouge_l", "--output", str(out), "--no-report"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not UTF-8" in err and "codec" not in err, err
    assert not out.exists()  # refused before any folder or lock is made


# -- a row's language is read one way, another kept and said; a blank id is no id; all rows skipped --
@pytest.mark.parametrize("tag", ["klingon", "fr", "zhongwen"])
def test_a_language_the_prompts_do_not_speak_is_read_as_english_and_said(tmp_path: Path, tag: str, capsys) -> None:
    """A French or German dataset is not bad input: its tag is kept, read as English, and the run says so
    in one line naming the tag, how many rows carry it and the tags the prompts speak."""
    from offline_eval.cli import main
    from offline_eval.data.readers import other_languages
    from offline_eval.text import normalize_language

    path = write_jsonl(tmp_path / "d.jsonl", [{"question": "q", "answer": "a", "ground_truth": "a", "language": "en"},
                                               {"question": "q2", "answer": "a", "ground_truth": "a", "language": tag}])
    samples = read_dataset(path)
    assert samples[1].language == tag and normalize_language(samples[1].language) == "en"
    line = other_languages(samples)
    assert line.startswith(f"language '{tag}' (1 row): not a language the prompts speak, read as English")
    assert "en (also english" in line and "zh (also chinese, 中文" in line and "\n" not in line
    assert other_languages(samples[:1]) is None
    out = tmp_path / "out"
    assert main(["run", "--dataset", str(path), "--metrics", "rouge_l", "--output", str(out), "--no-report",
                 "--quiet"]) == 0
    assert f"offline-eval: language '{tag}' (1 row)" in capsys.readouterr().err


def test_a_blank_id_is_missing_as_an_empty_one_is(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [{"question": "q", "id": ""}, {"question": "q", "id": "  "},
                                               {"question": "q", "conversation_id": " ", "id": " x "}])
    samples = read_dataset(path)
    assert [s.id for s in samples] == ["1", "2", " x "]
    assert samples[2].conversation_id is None


def test_skip_bad_rows_with_every_row_bad_says_so_with_the_first_reasons(tmp_path: Path) -> None:
    path = tmp_path / "allbad.jsonl"
    path.write_text('{"id": "a", "answer": true}\nnot json\n{"question": "q", "contexts": 3}\n', encoding="utf-8")
    with pytest.raises(DataError) as error:
        read_dataset(path, skipped=[])
    message = str(error.value)
    assert message.startswith(f"{path}: all 3 rows were skipped as bad (--skip-bad-rows)"), message
    assert "row 1, field 'answer': expected a string" in message and "row 2: invalid JSON" in message
    assert "and 1 more" in message and "empty" not in message
