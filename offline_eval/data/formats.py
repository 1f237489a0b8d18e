"""Raw rows out of every file layout people keep evaluation data in.

This module knows about file formats only: it turns a path into a stream of plain ``dict`` rows,
numbered from 1, and raises :class:`DataError` naming the file (and the row or line where one is
known) for anything it cannot read. What the keys of a row *mean* is the business of
:mod:`offline_eval.data.readers`.

Supported layouts, chosen by extension or folder contents:

* ``.jsonl`` / ``.ndjson`` - one JSON object per line; blank lines are skipped.
* ``.json`` - a list of row objects, or a column dict ``{field: [value, ...], ...}`` whose lists all
  have the same length. A ``.json`` file that is really JSON Lines is read as such. MT-RAG's
  human-evaluation file (tasks, documents, evaluations) is read as one row per rated answer
  (:mod:`offline_eval.data.mtrag`).
* ``.csv`` / ``.tsv`` - a header line, then one row per record. Every cell is a string; empty cells
  become ``None`` (a missing value). Decoding JSON-encoded list cells happens in the readers. Broken
  quoting (text after a closing quote, a quote never closed) and a record whose cell count is not
  the header's are errors naming the line the record starts on, never silently shifted fields.
* ``.parquet`` / ``.pq`` - read with pyarrow.
* ``.arrow`` - a single Arrow IPC stream or file.
* a folder written by Hugging Face ``datasets``' ``save_to_disk``: ``state.json`` lists the
  ``data-*.arrow`` shards, which are Arrow IPC streams, read here with pyarrow alone so the
  ``datasets`` package is not needed at run time. A ``DatasetDict`` folder (``dataset_dict.json``) is
  accepted when it holds exactly one split; otherwise point at the split's own folder.

Row numbers are 1-based positions among the data rows: the CSV header and blank JSONL lines do not
count. Messages about invalid JSON also give the physical line number.
"""

from __future__ import annotations

import csv
import json
import math
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from offline_eval.data.mtrag import looks_like_mtrag, mtrag_rows
from offline_eval.data.schema import DataError

JSONL_SUFFIXES = (".jsonl", ".ndjson")
JSON_SUFFIXES = (".json",)
CSV_SUFFIXES = (".csv",)
TSV_SUFFIXES = (".tsv", ".tab")
PARQUET_SUFFIXES = (".parquet", ".pq")
ARROW_SUFFIXES = (".arrow", ".feather", ".ipc")

# Retrieved contexts easily exceed the csv module's default 128 KiB cell limit.
_CSV_FIELD_LIMIT = 2**31 - 1

# What JSON counts as whitespace (str.strip() would also take characters JSON rejects).
_JSON_WHITESPACE = " \t\r\n"

Row = dict[str, Any]


def detect_format(path: Path) -> str:
    """The layout of ``path``: one of jsonl, json, csv, tsv, parquet, arrow, hf_datasets.

    Raises DataError for a missing path, an unknown extension or a folder that is not a ``datasets``
    folder.
    """
    if not path.exists():
        raise DataError("file not found", source=str(path))
    if path.is_dir():
        if (path / "state.json").is_file() or (path / "dataset_dict.json").is_file():
            return "hf_datasets"
        raise DataError(
            "is a folder but not one saved by Hugging Face datasets' save_to_disk "
            "(no state.json or dataset_dict.json); point at a data file instead",
            source=str(path),
        )
    suffix = path.suffix.lower()
    for name, suffixes in (
        ("jsonl", JSONL_SUFFIXES), ("json", JSON_SUFFIXES), ("csv", CSV_SUFFIXES),
        ("tsv", TSV_SUFFIXES), ("parquet", PARQUET_SUFFIXES), ("arrow", ARROW_SUFFIXES),
    ):
        if suffix in suffixes:
            return name
    raise DataError(
        f"unknown file type '{suffix or '(no extension)'}'; expected .jsonl, .json, .csv, .tsv, "
        ".parquet, .arrow or a Hugging Face datasets folder",
        source=str(path),
    )


def iter_rows(path: str | Path, on_bad: Callable[[DataError], None] | None = None) -> Iterator[tuple[int, Row]]:
    """Yield ``(row_number, row)`` for every data row of ``path``, row numbers starting at 1.

    Streaming formats (JSONL, CSV, TSV, Parquet, Arrow) are read lazily, so a caller that stops
    early (``--limit``) does not pay for the whole file. ``on_bad``: a JSON Lines row that is not
    valid JSON, or a CSV/TSV record whose quoting or cell count is broken, is passed to it as a
    DataError and skipped, instead of stopping the read.
    """
    path = Path(path)
    layout = detect_format(path)
    reader = {
        "jsonl": lambda p: _iter_jsonl(p, on_bad),
        "json": lambda p: _iter_json(p, on_bad),
        "csv": lambda p: _iter_delimited(p, ",", on_bad),
        "tsv": lambda p: _iter_delimited(p, "\t", on_bad),
        "parquet": _iter_parquet,
        "arrow": _iter_arrow_file,
        "hf_datasets": _iter_hf_datasets,
    }[layout]
    try:
        yield from reader(path)
    except DataError:
        raise
    except UnicodeDecodeError as exc:
        raise DataError(f"is not UTF-8 text ({exc.reason} at byte {exc.start})",
                        source=str(path)) from None
    except OSError as exc:
        raise DataError(f"cannot be read: {exc.strerror or exc}", source=str(path)) from None


def load_rows(path: str | Path, *, limit: int | None = None) -> list[tuple[int, Row]]:
    """The first ``limit`` (all when None) ``(row_number, row)`` pairs of ``path``."""
    rows: list[tuple[int, Row]] = []
    if limit is not None and limit <= 0:
        return rows
    for numbered in iter_rows(path):
        rows.append(numbered)
        if limit is not None and len(rows) >= limit:
            break
    return rows


# --------------------------------------------------------------------------- JSON and JSON Lines


def _require_object(value: Any, source: str, row: int, line: int | None = None) -> Row:
    if not isinstance(value, dict):
        where = f" (line {line})" if line is not None else ""
        raise DataError(f"expected a JSON object per row{where}, got {json_type_name(value)}",
                        source=source, row=row)
    return value


def _iter_jsonl(path: Path, on_bad: Callable[[DataError], None] | None = None) -> Iterator[tuple[int, Row]]:
    source = str(path)
    row_number = 0
    with path.open(encoding="utf-8-sig") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            row_number += 1
            try:
                # Without its line break, so the parser's column for a line cut short is where the
                # line ends, not column 1 of a line after it.
                value = json.loads(line.rstrip(_JSON_WHITESPACE))
            except json.JSONDecodeError as exc:
                error = DataError(f"invalid JSON on line {line_number}: {exc.msg} (column {exc.colno})",
                                  source=source, row=row_number)
                if on_bad is None:
                    raise error from None
                on_bad(error)
                continue
            yield row_number, _require_object(value, source, row_number, line_number)


def _iter_json(path: Path, on_bad: Callable[[DataError], None] | None = None) -> Iterator[tuple[int, Row]]:
    source = str(path)
    text = path.read_text(encoding="utf-8-sig")
    try:
        # Trailing whitespace dropped, so a file cut short is reported where its text ends.
        document = json.loads(text.rstrip(_JSON_WHITESPACE))
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":  # several top-level values: JSON Lines under a .json name
            yield from _iter_jsonl(path, on_bad)
            return
        raise DataError(
            f"invalid JSON on line {exc.lineno}: {exc.msg} (column {exc.colno}, "
            f"character {exc.pos + 1})", source=source,
        ) from None
    if isinstance(document, list):
        for index, value in enumerate(document, start=1):
            yield index, _require_object(value, source, index)
        return
    if looks_like_mtrag(document):
        yield from mtrag_rows(document, source)
        return
    if isinstance(document, dict) and document and all(
        isinstance(column, list) for column in document.values()
    ):
        yield from _iter_columns(document, source)
        return
    got = ("an object whose values are not all lists" if isinstance(document, dict) and document
           else json_type_name(document) if not isinstance(document, dict) else "an empty object")
    raise DataError(
        f"expected a JSON list of row objects or a column dict {{field: [values...]}}, got {got}",
        source=source,
    )


def _iter_columns(columns: dict[str, list[Any]], source: str) -> Iterator[tuple[int, Row]]:
    """Rows of a column dict; every column must have the same length."""
    lengths = {name: len(values) for name, values in columns.items()}
    expected = max(lengths.values())
    for name, length in lengths.items():
        if length != expected:
            raise DataError(
                f"column has {length} values but other columns have {expected}; "
                "a column dict needs equal-length lists",
                source=source, row=length + 1, field=name,
            )
    names = list(columns)
    for index in range(expected):
        yield index + 1, {name: columns[name][index] for name in names}


# --------------------------------------------------------------------------- CSV and TSV


class _NumberedLines:
    """The physical lines of a file as the csv reader pulls them, each with its 1-based number.

    ``record`` holds the lines of the record being read, so a bad record is named by the line it
    starts on, and :meth:`read_again_after_first` hands all but its first line to the reader again:
    a stray quote opens a quoted field that swallows the lines after it, which are rows of their own.
    """

    def __init__(self, handle: IO[str]):
        self._handle = handle
        self._count = 0
        self._again: deque[tuple[int, str]] = deque()
        self.record: list[tuple[int, str]] = []

    def __iter__(self) -> _NumberedLines:
        return self

    def __next__(self) -> str:
        if self._again:
            numbered = self._again.popleft()
        else:
            text = next(self._handle)  # StopIteration: the end of the file
            self._count += 1
            numbered = (self._count, text)
        self.record.append(numbered)
        return numbered[1]

    @property
    def first(self) -> int:
        return self.record[0][0] if self.record else self._count + 1

    @property
    def last(self) -> int:
        return self.record[-1][0] if self.record else self._count

    def read_again_after_first(self) -> None:
        self._again.extendleft(reversed(self.record[1:]))


def _quoting_problem(exc: csv.Error, lines: _NumberedLines) -> str:
    """What a strict csv reader's error means, in words, with the lines the bad record spans."""
    first, last = lines.first, lines.last
    text = str(exc)
    if text == "unexpected end of data":
        return (f"a quoted field is never closed: it runs from line {first} to the end of the file "
                f"(line {last}); is a closing quote missing?")
    if text.endswith("expected after '\"'"):
        problem = (f"text follows the closing quote of a quoted field on line {last} (a quote inside "
                   'a field is written twice, "", and the field quoted)')
        if last > first:
            problem += (f"; the quoted field runs from line {first} to line {last}: is a closing quote "
                        "missing?")
        return problem
    return text


def _iter_delimited(path: Path, delimiter: str,
                    on_bad: Callable[[DataError], None] | None = None) -> Iterator[tuple[int, Row]]:
    """Rows of a CSV/TSV file, read with a strict csv reader so broken quoting is an error.

    Broken quoting never shifts or merges fields silently. A record is bad when the reader finds
    text after a closing quote, when a quoted field is still open at the end of the file, or when
    its cell count differs from the header's (a missing or stray quote moves the delimiters). Each
    bad record is a DataError naming the physical line it starts on; with ``on_bad`` it is passed
    there and counted as a row, and when its quoting broke, its other lines are read again as
    records of their own. A quote inside an unquoted field is kept as text, as every csv reader
    (Python's, pandas') does: real TSV files hold them (``the 2000 film "Bring It On"``).
    """
    source = str(path)
    kind = "TSV" if delimiter == "\t" else "CSV"
    csv.field_size_limit(max(csv.field_size_limit(), _CSV_FIELD_LIMIT))
    with path.open(encoding="utf-8-sig", newline="") as handle:
        lines = _NumberedLines(handle)
        reader = csv.reader(lines, delimiter=delimiter, strict=True)
        header: list[str] | None = []
        while header == []:  # blank lines before the header are skipped
            lines.record = []
            try:
                header = next(reader, None)
            except csv.Error as exc:
                raise DataError(f"malformed {kind} header on line {lines.first}: "
                                f"{_quoting_problem(exc, lines)}", source=source) from None
        if header is None:
            return
        header = [name.strip() for name in header]
        seen: set[str] = set()
        for column, name in enumerate(header, start=1):
            if not name:
                raise DataError(f"header column {column} has no name", source=source, row=None)
            if name in seen:
                raise DataError("appears twice in the header", source=source, field=name)
            seen.add(name)
        row_number = 0
        while True:
            lines.record = []
            try:
                cells = next(reader, None)
            except csv.Error as exc:
                problem, read_again = _quoting_problem(exc, lines), True
            else:
                if cells is None:
                    return
                if not cells:
                    continue  # blank line
                if len(cells) != len(header) and len(lines.record) == 1 and not any(
                        cell.strip() for cell in cells):
                    continue  # a line of spaces, or of delimiters only, is blank too
                if len(cells) == len(header):
                    row_number += 1
                    yield row_number, {
                        name: (cell if cell != "" else None) for name, cell in zip(header, cells)
                    }
                    continue
                problem, read_again = _cell_count_problem(cells, header, lines, delimiter), False
            row_number += 1
            error = DataError(f"malformed {kind} on line {lines.first}: {problem}", source=source,
                              row=row_number)
            if on_bad is None:
                raise error
            on_bad(error)
            if read_again:
                lines.read_again_after_first()


def _cell_count_problem(cells: list[str], header: list[str], lines: _NumberedLines,
                        delimiter: str) -> str:
    """A record whose cell count is not the header's: a cell missing or too many, the wrong
    delimiter, or a quote that is missing or stray, so a quoted field took in the lines after it."""
    problem = f"the record has {len(cells)} cells but the header has {len(header)} columns"
    if lines.last > lines.first:
        return (f"{problem}; a quoted field runs from line {lines.first} to line {lines.last}: "
                "is a quote missing or stray?")
    named = "a tab" if delimiter == "\t" else repr(delimiter)
    if len(cells) > len(header):
        return f"{problem} (is the delimiter {named}? is a cell holding {named} not quoted?)"
    return f"{problem} (is a cell missing? is the delimiter {named}?)"


# --------------------------------------------------------------------------- Parquet and Arrow


def _iter_record_batches(batches: Iterator[Any], source: Path,
                         start: int = 1) -> Iterator[tuple[int, Row]]:
    """Rows of Arrow record batches, numbered from ``start``; a corrupt batch is a DataError."""
    import pyarrow as pa

    row_number = start - 1
    while True:
        try:
            batch = next(batches, None)
        except pa.ArrowException as exc:
            raise DataError(f"is corrupt after row {row_number} ({exc})", source=str(source),
                            row=row_number + 1) from None
        if batch is None:
            return
        for row in batch.to_pylist():
            row_number += 1
            yield row_number, {key: _nan_to_none(value) for key, value in row.items()}


def _iter_parquet(path: Path) -> Iterator[tuple[int, Row]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet_file = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(f"is not a readable Parquet file ({exc})", source=str(path)) from None
    yield from _iter_record_batches(parquet_file.iter_batches(batch_size=1024), path)


def _open_arrow_batches(path: Path) -> Iterator[Any]:
    """Record batches of an Arrow IPC file, trying the stream format first, then the file format."""
    import pyarrow as pa

    try:
        reader = pa.ipc.open_stream(pa.memory_map(str(path), "r"))
    except pa.ArrowInvalid:
        try:
            reader = pa.ipc.open_file(pa.memory_map(str(path), "r"))
        except pa.ArrowInvalid as exc:
            raise DataError(f"is not an Arrow IPC stream or file ({exc})",
                            source=str(path)) from None
        return (reader.get_batch(index) for index in range(reader.num_record_batches))
    return iter(reader)


def _iter_arrow_file(path: Path) -> Iterator[tuple[int, Row]]:
    yield from _iter_record_batches(_open_arrow_batches(path), path)


def _hf_dataset_folder(path: Path) -> Path:
    """The folder holding ``state.json``: ``path`` itself, or the only split of a DatasetDict."""
    if (path / "state.json").is_file():
        return path
    try:
        splits = json.loads((path / "dataset_dict.json").read_text(encoding="utf-8"))["splits"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise DataError(f"has an unreadable dataset_dict.json ({exc})", source=str(path)) from None
    if len(splits) != 1:
        raise DataError(
            f"is a DatasetDict with splits {', '.join(map(str, splits))}; "
            f"point at one of them, e.g. {path / str(splits[0])}" if splits
            else "is a DatasetDict with no splits",
            source=str(path),
        )
    return path / str(splits[0])


def _iter_hf_datasets(path: Path) -> Iterator[tuple[int, Row]]:
    folder = _hf_dataset_folder(path)
    state_path = folder / "state.json"
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
        shard_names = [entry["filename"] for entry in state["_data_files"]]
    except FileNotFoundError:
        raise DataError("has no state.json; is it a datasets save_to_disk folder?",
                        source=str(folder)) from None
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise DataError(f"unreadable datasets state file ({exc})", source=str(state_path)) from None
    if state.get("_indices_data_files"):
        raise DataError("holds an indices mapping (a filtered view); save it again after "
                        "flatten_indices()", source=str(folder))
    row_number = 0
    for shard_name in shard_names:
        shard = folder / shard_name
        if not shard.is_file():
            raise DataError("data shard listed in state.json is missing", source=str(shard))
        for row_number, row in _iter_record_batches(_open_arrow_batches(shard), shard,
                                                    start=row_number + 1):
            yield row_number, row


# --------------------------------------------------------------------------- helpers


def _nan_to_none(value: Any) -> Any:
    """pandas-written files use NaN for missing values; a NaN is never a real text or id."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def json_type_name(value: Any) -> str:
    """A readable name for the JSON type of ``value``, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
