"""Read an evaluation dataset in any supported layout into :class:`Sample` objects.

How a raw row becomes a Sample, field by field:

1. **Mapping first.** ``mapping`` sends a canonical field to a dotted path into the raw row, e.g.
   ``{"question": "query.content"}``. A path segment that is a whole number indexes into a list
   (``answers.text.0``); a top-level key that literally contains the dots (a column named
   ``query.content``, as pandas' ``json_normalize`` writes) is used as is. A user-given path that
   does not exist in a row is an error: it is almost always a typo.
2. **RAGEval rows are recognised automatically** (``query`` is an object with ``content``;
   ``ground_truth`` / ``prediction``, where present, are objects) and read through
   :data:`RAGEVAL_MAPPING`. Those paths are lenient: a RAGEval row without a ``prediction`` simply
   has no answer. A user mapping overrides the RAGEval path for the fields it names.
3. **Aliases otherwise.** A field without a mapping takes the first alias of
   :data:`~offline_eval.data.schema.FIELD_ALIASES` that is present with a non-null value.
4. **Everything else goes to ``Sample.extra`` untouched**, but for a value JSON cannot hold (a
   Parquet timestamp), which becomes its text so the results file can be written. Keys left over
   inside an object that a mapping read from (RAGEval's ``query.query_type``,
   ``ground_truth.doc_ids``) are kept under their own name (``query_type``, ``doc_ids``) unless
   that name is a field name or alias or already taken, in which case the dotted path is the name.
   An unused top-level key that is itself a canonical field name (possible only when a mapping
   overrides it) is kept as ``original_<name>`` so it can never overwrite the real field in the
   output.

Value rules:

* Values are taken as a JSON reader gives them. A row of a pandas DataFrame (``pd.read_parquet``)
  holds numpy arrays where a list is meant and numpy scalars, ``pd.NA`` or ``NaT`` for single
  values: they are turned into lists, Python scalars and None before any rule below applies, so a
  DataFrame is read exactly as the same data in JSON Lines.
* Text fields (question, answer, ground_truth) take strings; numbers are turned into their text
  (``42`` -> ``"42"``, a reference answer is often numeric). Lists, objects and booleans are errors.
* List fields (contexts, reference_contexts, keypoints) take lists of strings. A string holding a
  JSON list (``'["a", "b"]'``, how CSV/TSV store lists) is decoded; any other string becomes a
  one-element list. A string that starts like a JSON list of strings (``["``) but does not parse is
  an error rather than a silent one-element list. Non-string items are errors.
* ``ground_truth`` may be a list of strings (``ground_truths`` in older Ragas data, or a mapped list
  such as SQuAD's ``answers.text``): one element is taken as is; several are joined with a newline.
  Joining rather than keeping the first keeps every reference fact for the claim-based metrics
  (context_recall, answer_correctness); an empty list is a missing reference.
* ``id`` defaults to the 1-based row number as a string; a given id is kept as a string (an
  integral float such as pandas' ``3.0`` becomes ``"3"``). Duplicate ids are an error.
* Null, NaN, an empty string or an empty CSV cell is a *missing* value, never an error: the metrics
  that need the field mark the sample unscored.

Every problem raises :class:`DataError` whose one-line message names the file, the 1-based row and
the field.
"""

from __future__ import annotations

import datetime
import json
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from offline_eval.data.formats import Row, json_type_name, iter_rows, load_rows
from offline_eval.data.schema import FIELD_ALIASES, LIST_FIELDS, ROLES, DataError, Sample, Turn, printable
from offline_eval.text import ACCEPTED_LANGUAGES, counted, language_code

__all__ = [
    "CANONICAL_FIELDS",
    "DataError",
    "RAGEVAL_MAPPING",
    "iter_rows",
    "load_rows",
    "looks_like_rageval",
    "other_languages",
    "parse_mapping",
    "read_dataset",
    "row_to_sample",
    "Sample",
    "validate_mapping",
]

# Every field a Sample reads from a row, and the names each accepts on input.
_ALIASES: dict[str, tuple[str, ...]] = {
    "id": ("id",),
    **FIELD_ALIASES,
    "language": ("language",),
}
CANONICAL_FIELDS: tuple[str, ...] = tuple(_ALIASES)

# Any accepted name -> its canonical field, so ``--map reference=gold.text`` also works.
_NAME_TO_FIELD: dict[str, str] = {
    alias: name for name, aliases in _ALIASES.items() for alias in aliases
}
_RESERVED_NAMES = frozenset(_NAME_TO_FIELD)

# The RAGEval / DRAGONBall layout: query{query_id, query_type, content},
# ground_truth{doc_ids, content, references, keypoints}, prediction{content, references}.
RAGEVAL_MAPPING: dict[str, str] = {
    "id": "query.query_id",
    "question": "query.content",
    "answer": "prediction.content",
    "contexts": "prediction.references",
    "ground_truth": "ground_truth.content",
    "reference_contexts": "ground_truth.references",
    "keypoints": "ground_truth.keypoints",
}

_ORIGINAL_PREFIX = "original_"


# --------------------------------------------------------------------------- public API


def read_dataset(
    path: str | Path,
    mapping: dict[str, str] | None = None,
    *,
    limit: int | None = None,
    skipped: list[dict[str, Any]] | None = None,
) -> list[Sample]:
    """Read every row (or the first ``limit``) of ``path`` into Samples.

    ``path`` is a .jsonl/.json/.csv/.tsv/.parquet/.arrow file or a Hugging Face ``datasets``
    ``save_to_disk`` folder (see :mod:`offline_eval.data.formats`). ``mapping`` sends canonical
    fields to dotted paths in the raw rows, e.g. ``{"question": "query.content"}``; RAGEval rows
    need none. Raises DataError, one line naming file, row and field, for unreadable files, invalid
    JSON, values of the wrong type, mapping paths missing from a row, duplicate ids, and for a
    dataset with no rows or in which no row has any recognised field.

    ``skipped``: read past bad rows instead (invalid JSON, broken CSV quoting or cell counts, wrong
    types, missing mapped fields, duplicate ids), appending ``{"source", "row", "reason"}`` for
    each to this list.
    """
    source = str(path)
    try:  # the path is recorded in run.json, summary.json and the report, all UTF-8 text
        source.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(source).decode("utf-8", "backslashreplace")
        raise DataError("the file's name is not UTF-8 text; rename it", source=shown) from None
    return samples_from_rows(iter_rows(path, _skipper(skipped, source)), source, mapping, limit=limit,
                             skipped=skipped)


def _skipper(skipped: list[dict[str, Any]] | None, source: str) -> Callable[[DataError], None] | None:
    """With a ``skipped`` list, a callback recording each bad row in it; without, None (stop at it)."""
    if skipped is None:
        return None

    def skip(error: DataError) -> None:
        skipped.append({"source": error.source or source, "row": error.row, "reason": str(error)})

    return skip


def _all_skipped(skipped: list[dict[str, Any]], source: str, shown: int = 2) -> str:
    """Why nothing is left of a dataset whose every row was skipped as bad: how many, and the first
    ``shown`` reasons (each without the file's name, which the message starts with)."""
    reasons = [str(bad["reason"]).removeprefix(f"{source}, ") for bad in skipped[:shown]]
    more = f"; and {len(skipped) - shown} more" if len(skipped) > shown else ""
    rows = "row was" if len(skipped) == 1 else f"{len(skipped)} rows were"
    return (f"{'the only' if len(skipped) == 1 else 'all'} {rows} skipped as bad (--skip-bad-rows), so "
            f"nothing is left to score; fix them: {'; '.join(reasons)}{more}")


def samples_from_rows(rows: Iterable[tuple[int, dict[str, Any]]], source: str,
                      mapping: dict[str, str] | None = None, *, limit: int | None = None,
                      skipped: list[dict[str, Any]] | None = None) -> list[Sample]:
    """:func:`read_dataset` on rows already read: ``(row_number, row dict)`` pairs (the Python API
    passes a list of dicts, a DataFrame's records or a ``datasets.Dataset`` this way)."""
    checked_mapping = validate_mapping(mapping) if mapping else {}
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise DataError(f"limit must be a whole number of rows >= 1, got {limit!r}", source=source)

    skip = _skipper(skipped, source)
    samples: list[Sample] = []
    first_row_of_id: dict[str, int] = {}
    for row_number, row in _take(rows, limit):
        try:
            sample = row_to_sample(row, row_number=row_number, source=source, mapping=checked_mapping)
            if sample.id in first_row_of_id:
                raise DataError(
                    f"duplicate id '{sample.id}' (first used in row {first_row_of_id[sample.id]})",
                    source=source, row=row_number, field="id",
                )
        except DataError as error:
            if skip is None:
                raise
            skip(error)
            continue
        first_row_of_id[sample.id] = row_number
        samples.append(sample)

    if not samples and skipped:  # "empty" would hide that every row was read and found bad
        raise DataError(_all_skipped(skipped, source), source=source)
    if not samples:
        raise DataError("the dataset is empty (no rows)", source=source)
    content_fields = ("question", "answer", *LIST_FIELDS, "ground_truth")
    if all(len(sample.missing(content_fields)) == len(content_fields) for sample in samples):
        seen_keys = sorted({str(key) for sample in samples for key in sample.extra})[:12]
        raise DataError(
            "no row has any recognised field (question, answer, contexts, ground_truth, ...); "
            f"keys seen: {', '.join(seen_keys) or 'none'}; name the columns with --map "
            "FIELD=PATH, e.g. question=query.content",
            source=source,
        )
    return samples


def parse_mapping(spec: str) -> dict[str, str]:
    """Parse the CLI's ``--map`` value, ``"question=query.content,answer=prediction.content"``.

    Entries are comma-separated ``FIELD=PATH`` pairs; spaces around names are ignored and an empty
    entry (a trailing comma) is skipped. FIELD is a canonical field or one of its aliases; PATH is a
    dotted path into the raw row. Raises DataError naming the bad entry for anything else.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise DataError("--map is empty; expected FIELD=PATH[,FIELD=PATH...], "
                        "e.g. question=query.content")
    mapping: dict[str, str] = {}
    for entry in spec.split(","):
        entry = entry.strip()
        if not entry:
            continue
        name, equals, path = entry.partition("=")
        name, path = name.strip(), path.strip()
        if not equals or not name or not path or "=" in path:
            raise DataError(
                f"--map entry '{entry}' is not FIELD=PATH (e.g. question=query.content)"
            )
        field = _canonical_field(name)
        if field in mapping:
            raise DataError(f"--map names field '{field}' twice", field=field)
        mapping[field] = path
    return validate_mapping(mapping)


def validate_mapping(mapping: dict[str, str]) -> dict[str, str]:
    """Check a mapping and return it keyed by canonical field names (aliases are translated).

    Raises DataError for an unknown field, a field given twice (directly and by alias) or a path
    that is not a non-empty dotted path.
    """
    checked: dict[str, str] = {}
    for name, path in mapping.items():
        field = _canonical_field(name)
        if field in checked:
            raise DataError(f"mapping names field '{field}' twice (also as '{name}')", field=field)
        if not isinstance(path, str) or not path.strip():
            raise DataError(f"mapping path must be a non-empty string, got {path!r}", field=field)
        path = path.strip()
        if any(not segment.strip() for segment in path.split(".")):
            raise DataError(f"mapping path '{path}' has an empty segment", field=field)
        checked[field] = path
    return checked


def looks_like_rageval(row: Row) -> bool:
    """True for a row in the RAGEval layout: ``query`` is an object with ``content``, and
    ``ground_truth`` and ``prediction`` are objects wherever present (at least one of them)."""
    query = row.get("query")
    if not isinstance(query, dict) or "content" not in query:
        return False
    containers = [row.get(key) for key in ("ground_truth", "prediction") if key in row]
    return bool(containers) and all(isinstance(value, dict) for value in containers)


def row_to_sample(
    row: Row,
    *,
    row_number: int,
    source: str,
    mapping: dict[str, str] | None = None,
) -> Sample:
    """Turn one raw row into a Sample; ``mapping`` must already be validated (canonical keys).

    ``row_number`` (1-based) and ``source`` only serve error messages, ``Sample.row`` and the
    default id.
    """
    row = _plain_row(row)
    reader = _RowReader(row, row_number=row_number, source=source)
    strict_paths = dict(mapping or {})
    lenient_paths = RAGEVAL_MAPPING if looks_like_rageval(row) else {}

    raw: dict[str, tuple[str, Any]] = {}  # field -> (where it came from, raw value)
    for field in CANONICAL_FIELDS:
        if field in strict_paths:
            raw[field] = (strict_paths[field], reader.take_path(field, strict_paths[field],
                                                                strict=True))
        elif field in lenient_paths:
            raw[field] = (lenient_paths[field], reader.take_path(field, lenient_paths[field],
                                                                 strict=False))
        else:
            raw[field] = reader.take_alias(field)

    def where(field: str) -> str:
        return raw[field][0]

    if raw["conversation"][1] is None and _looks_like_turns(raw["question"][1]):
        raw["conversation"], raw["question"] = raw["question"], (where("question"), None)  # Ragas' multi-turn user_input
    conversation = _as_conversation(raw["conversation"][1], reader.error_for(where("conversation"), "conversation"))
    texts = {
        field: _as_text(raw[field][1], reader.error_for(where(field), field))
        for field in ("question", "answer")
    }
    conversation, texts["question"], texts["answer"] = _turn_of(conversation, texts["question"], texts["answer"])
    lists = {
        field: _as_string_list(raw[field][1], reader.error_for(where(field), field))
        for field in LIST_FIELDS
    }
    ground_truth = _as_ground_truth(raw["ground_truth"][1],
                                    reader.error_for(where("ground_truth"), "ground_truth"))
    sample_id = _as_id(raw["id"][1], reader.error_for(where("id"), "id"))
    conversation_id = _as_id(raw["conversation_id"][1], reader.error_for(where("conversation_id"), "conversation_id"))
    language = _as_language(raw["language"][1], reader.error_for(where("language"), "language"))

    return Sample(
        id=sample_id if sample_id is not None else str(row_number),
        question=texts["question"],
        answer=texts["answer"],
        contexts=lists["contexts"],
        ground_truth=ground_truth,
        reference_contexts=lists["reference_contexts"],
        keypoints=lists["keypoints"],
        language=language,
        conversation=conversation,
        conversation_id=conversation_id,
        row=row_number,
        extra=reader.leftovers(),
    )


# --------------------------------------------------------------------------- reading one row


class _RowReader:
    """Takes fields out of one raw row and remembers what was taken, so the rest becomes extra."""

    def __init__(self, row: Row, *, row_number: int, source: str):
        self.row = row
        self.row_number = row_number
        self.source = source
        self.taken_keys: set[str] = set()
        self.taken_paths: set[tuple[str, ...]] = set()
        # Top-level objects a mapping path looked into; their untaken keys are flattened into extra.
        self.opened_keys: set[str] = set()

    def error_for(self, where: str, field: str) -> _ErrorFactory:
        """A factory of DataErrors about ``field``, read from ``where`` (a key or dotted path)."""
        return _ErrorFactory(self.source, self.row_number, where,
                             target=field if where != field else None)

    def take_alias(self, field: str) -> tuple[str, Any]:
        """The first alias of ``field`` present with a value; null-valued aliases are consumed too."""
        for alias in _ALIASES[field]:
            if alias not in self.row:
                continue
            value = self.row[alias]
            if _is_missing(value):
                self.taken_keys.add(alias)
                continue
            self.taken_keys.add(alias)
            return alias, value
        return field, None

    def take_path(self, field: str, path: str, *, strict: bool) -> Any:
        """The value at dotted ``path``; a missing path is an error when ``strict``, else None."""
        if path in self.row:  # a flattened column literally named "a.b"
            self.taken_keys.add(path)
            return self.row[path]
        segments = tuple(path.split("."))
        if isinstance(self.row.get(segments[0]), dict):
            self.opened_keys.add(segments[0])
        current: Any = self.row
        for depth, segment in enumerate(segments):
            walked = ".".join(segments[:depth]) or "the row"
            if isinstance(current, dict) and segment in current:
                current = current[segment]
            elif isinstance(current, list) and segment.isdigit() and int(segment) < len(current):
                current = current[int(segment)]
            else:
                if not strict:
                    return None
                if isinstance(current, dict):
                    reason = f"{walked} has no key '{segment}'"
                elif isinstance(current, list):
                    reason = f"{walked} is a list of {len(current)} items, no item '{segment}'"
                else:
                    reason = f"{walked} is {json_type_name(current)}, not an object"
                raise DataError(f"mapping path '{path}' does not exist in this row: {reason}",
                                source=self.source, row=self.row_number, field=field)
        self.taken_paths.add(segments)
        return current

    def leftovers(self) -> dict[str, Any]:
        """Everything not taken, for Sample.extra (naming rules in the module docstring)."""
        extra: dict[str, Any] = {}
        for key, value in self.row.items():
            if key in self.taken_keys or (key,) in self.taken_paths:
                continue
            if isinstance(value, dict) and key in self.opened_keys:
                for path, inner in self._untaken_inside(value, (key,)):
                    extra[self._nested_name(path, extra)] = inner
                continue
            name = f"{_ORIGINAL_PREFIX}{key}" if key in CANONICAL_FIELDS else key
            extra[name] = value
        return {name: _jsonable(value) for name, value in extra.items()}

    def _untaken_inside(self, container: dict[str, Any],
                        prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
        for key, value in container.items():
            path = prefix + (key,)
            if path in self.taken_paths:
                continue
            below = [taken for taken in self.taken_paths
                     if len(taken) > len(path) and taken[:len(path)] == path]
            if below and isinstance(value, dict):
                yield from self._untaken_inside(value, path)
            else:
                yield path, value

    def _nested_name(self, path: tuple[str, ...], extra: dict[str, Any]) -> str:
        leaf = path[-1]
        if leaf in _RESERVED_NAMES or leaf in self.row or leaf in extra:
            return ".".join(path)
        return leaf


class _ErrorFactory:
    """Builds the one-line DataError for one field of one row.

    ``field`` is the name as the file spells it (an alias or a dotted path); ``target`` is the
    canonical field it is read as, when that differs, so the message says both.
    """

    def __init__(self, source: str, row: int, field: str, *, target: str | None = None):
        self.source, self.row, self.field, self.target = source, row, field, target

    def __call__(self, message: str) -> DataError:
        if self.target:
            message = f"{message} (read as {self.target})"
        return DataError(message, source=self.source, row=self.row, field=self.field)

    def nested_object(self, value: dict[str, Any], expected: str) -> DataError:
        """The error for an object where a value was expected, suggesting a path into it."""
        inner = next(iter(value), "KEY")
        return self(f"expected {expected}, got an object; read a value inside it with "
                    f"--map {self.target or self.field}={self.field}.{inner}")


# --------------------------------------------------------------------------- value rules


def _is_missing(value: Any) -> bool:
    """Null, NaN and the empty string all mean "this row has no such value"."""
    return (value is None or (isinstance(value, str) and not value)
            or (isinstance(value, float) and math.isnan(value)))


_JSON_SCALARS = (str, int, float, bool)


def _plain_row(row: Row) -> Row:
    """``row`` with its values :func:`_plain`, and a NaN value None (pandas' missing value, as the
    Parquet reader does)."""
    plain: Row = {}
    for key, value in row.items():
        value = _plain(value)
        plain[_plain(key)] = None if isinstance(value, float) and math.isnan(value) else value
    return plain


def _plain(value: Any) -> Any:
    """``value`` as a JSON reader would give it: numpy arrays and scalars become lists and Python
    scalars, pandas' NA and NaT None, pyarrow scalars their Python value, inside lists and objects
    too. Anything else is returned as it is (a value rule then names its type in an error)."""
    kind = type(value)
    if value is None or kind in _JSON_SCALARS:
        return value
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_plain(item) for item in value)
    if isinstance(value, dict):
        return {_plain(key): _plain(item) for key, item in value.items()}
    module = getattr(kind, "__module__", None) or ""
    if module == "numpy" and hasattr(value, "tolist"):  # ndarray, str_, float64, int64, bool_, ...
        return _plain(value.tolist())
    if module.startswith("pandas") and kind.__name__ in ("NAType", "NaTType"):
        return None
    if module.startswith("pyarrow") and hasattr(value, "as_py"):
        return _plain(value.as_py())
    return value


def _jsonable(value: Any) -> Any:
    """``value`` for Sample.extra, which goes to the results file: a value JSON cannot hold (a
    timestamp, a Decimal, bytes) becomes its text, ISO 8601 for dates and times."""
    if value is None or isinstance(value, _JSON_SCALARS):
        return value
    if isinstance(value, list):
        return [_jsonable(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_jsonable(item) for item in value)
    if isinstance(value, dict):
        return {key if key is None or isinstance(key, _JSON_SCALARS) else str(key): _jsonable(item)
                for key, item in value.items()}
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return str(value)


def _as_text(value: Any, error: _ErrorFactory) -> str | None:
    if _is_missing(value):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number_text(value)
    if isinstance(value, dict):
        raise error.nested_object(value, "a string")
    raise error(f"expected a string, got {json_type_name(value)}")


def _as_string_list(value: Any, error: _ErrorFactory) -> list[str] | None:
    if _is_missing(value):
        return None
    if isinstance(value, str):
        value = _decode_list_string(value, error)
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, dict):
        raise error.nested_object(value, "a list of strings")
    if not isinstance(value, list):
        raise error(f"expected a list of strings, got {json_type_name(value)}")
    for index, item in enumerate(value, start=1):
        if not isinstance(item, str):
            raise error(f"item {index} of the list is {json_type_name(item)}, expected a string")
    return value


def _decode_list_string(text: str, error: _ErrorFactory) -> list[Any]:
    """A JSON-encoded list (CSV/TSV cells) decoded; any other string as a one-element list."""
    stripped = text.strip()
    if stripped.startswith("[") and stripped.endswith("]"):
        try:
            decoded = json.loads(stripped)
        except json.JSONDecodeError as exc:
            if stripped.startswith('["') or stripped == "[]":
                raise error(f"looks like a JSON list but is not valid JSON: {exc.msg} "
                            f"(character {exc.pos + 1})") from None
            return [text]  # e.g. "[1] Annual report ..." is a plain chunk
        if isinstance(decoded, list):
            return decoded
    elif stripped.startswith('["'):
        raise error('looks like a JSON list but does not end with "]"')
    return [text]


def _looks_like_turns(value: Any) -> bool:
    """A list of turn objects, or a string holding one (a CSV cell): a question given as a conversation."""
    if isinstance(value, str):
        return value.lstrip().startswith("[{")
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(item, dict) for item in value)


# A turn's speaker and text as datasets name them: {role, content} (chat APIs), {speaker, text} (MT-RAG),
# {type, content} (Ragas' messages), {from, value} (ShareGPT).
_ROLE_KEYS = ("role", "speaker", "type", "from")
_CONTENT_KEYS = ("content", "text", "value")


def _as_conversation(value: Any, error: _ErrorFactory) -> list[Turn] | None:
    """The turns of a conversation: a list (or a JSON-encoded list, as CSV stores it) of objects with a
    role and a text. An empty list is a missing conversation; a turn without a role or text, or with a
    role not in :data:`~offline_eval.data.schema.ROLES`, is an error naming the turn."""
    if _is_missing(value):
        return None
    if isinstance(value, str):
        stripped = value.strip()
        try:
            value = json.loads(stripped) if stripped.startswith("[") else value
        except json.JSONDecodeError as exc:
            raise error(f"looks like a JSON list of turns but is not valid JSON: {exc.msg} "
                        f"(character {exc.pos + 1})") from None
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list):
        raise error(f"expected a list of turns ({{\"role\": ..., \"content\": ...}}), got {json_type_name(value)}")
    turns = []
    for index, item in enumerate(value, start=1):
        if not isinstance(item, dict):
            raise error(f"turn {index} is {json_type_name(item)}, expected an object with a role and a content")
        role_key = next((k for k in _ROLE_KEYS if isinstance(item.get(k), str)), None)
        content_key = next((k for k in _CONTENT_KEYS if k in item), None)
        if role_key is None:
            raise error(f"turn {index} has no role (expected one of the keys {', '.join(_ROLE_KEYS)})")
        role = ROLES.get(item[role_key].strip().lower())
        if role is None:
            raise error(f"turn {index} has the role {item[role_key]!r}; known: {', '.join(sorted(set(ROLES)))}")
        content = _plain(item.get(content_key)) if content_key else None
        if isinstance(content, (int, float)) and not isinstance(content, bool):
            content = _number_text(content)
        if content is not None and not isinstance(content, str):
            raise error(f"turn {index}'s {content_key} is {json_type_name(content)}, expected a string")
        if content is None:
            raise error(f"turn {index} has no text (expected one of the keys {', '.join(_CONTENT_KEYS)})")
        turns.append(Turn(role, content))
    return turns or None


def _turn_of(conversation: list[Turn] | None, question: str | None,
             answer: str | None) -> tuple[list[Turn] | None, str | None, str | None]:
    """The conversation, question and answer of one turn: without an answer, a conversation ending
    with the assistant's turn gives it (the turns before it stay the conversation); without a
    question, the last user turn is the question."""
    if not conversation:
        return conversation, question, answer
    if answer is None and conversation[-1].role == "assistant":
        answer, conversation = conversation[-1].content, conversation[:-1]
    if question is None:
        question = next((t.content for t in reversed(conversation) if t.role == "user"), None)
    return conversation or None, question, answer


def _as_ground_truth(value: Any, error: _ErrorFactory) -> str | None:
    if isinstance(value, str) and value.strip().startswith('["'):
        value = _decode_list_string(value, error)
    if isinstance(value, (list, tuple)):
        items = _as_string_list(list(value), error) or []
        items = [item for item in items if item.strip()]
        if not items:
            return None
        return items[0] if len(items) == 1 else "\n".join(items)
    return _as_text(value, error)


def _as_id(value: Any, error: _ErrorFactory) -> str | None:
    """An id as text; None (the row's number stands in) when missing or blank: an id of spaces names
    no row a person could find, as the empty one names none."""
    if _is_missing(value) or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number_text(value)
    raise error(f"expected a string or a number, got {json_type_name(value)}")


def _as_language(value: Any, error: _ErrorFactory) -> str | None:
    """The tag as written, stripped (a run's fingerprint holds it). A tag of a language the prompts do not
    speak is kept, and read as English (:func:`other_languages` says so): a dataset in French or German is
    not bad input."""
    if _is_missing(value):
        return None
    if isinstance(value, str):
        return value.strip() or None
    raise error(f"expected a language code such as 'en' or 'zh', got {json_type_name(value)}")


def other_languages(samples: Iterable[Sample]) -> str | None:
    """One line naming the ``language`` tags of ``samples`` that name no language the prompts speak, with
    how many rows carry each, read as English; None when there are none."""
    counts = Counter(s.language for s in samples if s.language and language_code(s.language) is None)
    if not counts:
        return None
    tags = ", ".join(f"'{printable(str(tag))}' ({counted(n, 'row')})" for tag, n in counts.most_common())
    return (f"language {tags}: not a language the prompts speak, read as English; write {ACCEPTED_LANGUAGES} "
            "where the rows are in one of them")


def _number_text(value: int | float) -> str:
    """``3`` -> ``"3"``, ``3.0`` -> ``"3"`` (pandas turns int columns with gaps into floats)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _canonical_field(name: str) -> str:
    if name not in _NAME_TO_FIELD:
        raise DataError(
            f"unknown field '{name}' in mapping; fields are {', '.join(CANONICAL_FIELDS)}",
            field=name,
        )
    return _NAME_TO_FIELD[name]


def _take(rows: Iterable[tuple[int, Row]], limit: int | None) -> Iterator[tuple[int, Row]]:
    for count, numbered in enumerate(rows, start=1):
        yield numbered
        if limit is not None and count >= limit:
            return
