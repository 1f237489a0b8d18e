"""The run folder's format: its files' names, how each is read and written. Every other module reads and
writes a run folder through this one (tests/project/test_runlog.py holds them to it).

    results.jsonl  one result row (:class:`~offline_eval.records.ResultRow`) a line, appended as samples finish
    summary.json   the run's summary (:class:`~offline_eval.records.RunSummary`), written when it finishes
    run.json       the run's fingerprint and settings, written when it starts
    report.html    the HTML report, written on request
    labels.jsonl   people's labels of the run's samples (the line format: :mod:`offline_eval.people.labels`)
    review.json    the seeded order of a review (:mod:`offline_eval.review`)
    .lock          held by the run using the folder (:class:`offline_eval.run.folder.RunFolder`)

A bad line of results.jsonl is read the same way by every reader (the report, ``compare``, the
estimates, the review, the calibration and the runner's resume):

* a blank line is skipped;
* the last line, when it has no line end and is not a whole JSON object, is a write cut short by a
  kill: it is skipped (the runner's resume cuts it off and scores that sample again);
* any other line that is not a JSON object with an id (its own, else its sample's), and a sample id met
  a second time, is an error (:class:`RunLogError`) naming the file and the line: a run never writes
  one, so it was edited or damaged, and skipping it would change every figure read from the file.

summary.json and run.json that are there but are no JSON object are an error naming the file; a
missing one reads as None. Files are written whole or not at all (:func:`write_atomic`); results.jsonl
is appended to by :class:`ResultsAppender`, which leaves no torn line behind a failed write, and put in
dataset order by :func:`rewrite_results`.

This module sits low: it imports only the records, never the runner, the metrics or the report.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from offline_eval.records import ResultRow, RunSummary

RESULTS, SUMMARY, RUN_INFO, REPORT = "results.jsonl", "summary.json", "run.json", "report.html"
LABELS, REVIEW, LOCK = "labels.jsonl", "review.json", ".lock"

__all__ = ["RESULTS", "SUMMARY", "RUN_INFO", "REPORT", "LABELS", "REVIEW", "LOCK", "RunLogError", "ResultLine",
           "result_lines", "read_results", "write_results", "ResultsAppender", "cut_torn_results", "rewrite_results", "read_object", "read_summary", "summary_dict",
           "run_info", "read_review", "is_finished", "rows_short", "read_row", "write_atomic", "write_json", "named_error", "remove_quietly"]


class RunLogError(ValueError):
    """A run folder's file cannot be read as its format says; the message names the file (and line)."""


@dataclass(frozen=True)
class ResultLine:
    """One row of results.jsonl: its line number, the byte offset where it starts, the row as written
    (``data``) and as a record (``row``)."""

    number: int
    offset: int
    data: dict[str, Any]
    row: ResultRow


def result_lines(folder: str | Path) -> Iterator[ResultLine]:
    """The rows of ``folder``'s results.jsonl in file order, read with the module's one tolerance for a
    bad line (see the module's docstring). A missing file raises FileNotFoundError."""
    path = Path(folder) / RESULTS
    first_line: dict[str, int] = {}
    with open(path, "rb") as handle:
        offset = 0
        for number, line in enumerate(handle, start=1):
            start, offset = offset, offset + len(line)
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                row = ResultRow.from_dict(data, len(first_line)) if isinstance(data, dict) else None
            except (ValueError, TypeError, AttributeError):
                data, row = None, None
            if row is None:
                if not line.endswith(b"\n"):  # the last line, cut short by a kill
                    return
                raise RunLogError(f"{path}: line {number}: not a result row (a JSON object with an id)")
            if row.id in first_line:
                raise RunLogError(f"{path}: line {number}: sample id {row.id!r} appears twice "
                                  f"(first on line {first_line[row.id]})")
            first_line[row.id] = number
            yield ResultLine(number, start, data, row)


def read_results(folder: str | Path) -> Iterator[ResultRow]:
    """results.jsonl's rows as records, streamed in file order (see :func:`result_lines`)."""
    for line in result_lines(folder):
        yield line.row


def read_row(folder: str | Path, offset: int) -> dict[str, Any]:
    """The row of results.jsonl that starts at byte ``offset`` (a :attr:`ResultLine.offset`), as written."""
    with open(Path(folder) / RESULTS, "rb") as handle:
        handle.seek(offset)
        return json.loads(handle.readline())


def _json_lines(rows: Any) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def write_results(folder: str | Path, rows: Any) -> None:
    """results.jsonl holding ``rows`` (JSON objects) in this order, written atomically."""
    write_atomic(Path(folder) / RESULTS, _json_lines(rows))


class ResultsAppender:
    """Appends rows to a folder's results.jsonl, each call's rows durable (fsynced) before it returns.

    A write that fails or is interrupted (a full disk, Ctrl-C) cuts the file back to its length before
    the call, so no torn line is left, and an OSError names the file. Cutting is safe for the one
    process that holds the folder (:class:`offline_eval.run.folder.RunFolder`): the rows cut are those
    of this call, scored again by the rerun."""

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / RESULTS
        self._handle: Any = None

    def append(self, rows: Iterable[dict[str, Any]]) -> None:
        data = _json_lines(rows).encode("utf-8")
        start = None
        try:
            if self._handle is None:
                self._handle = open(self.path, "ab", buffering=0)  # unbuffered: every byte written is accounted
            fd = self._handle.fileno()
            start = os.fstat(fd).st_size
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except BaseException as exc:
            if start is not None:
                try:
                    os.ftruncate(fd, start)
                except OSError:  # a disk gone read-only: the rerun cuts the torn line (cut_torn_results)
                    pass
            if isinstance(exc, OSError):
                raise named_error(exc, self.path)
            raise

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def cut_torn_results(folder: str | Path) -> None:
    """A kill in the middle of a write leaves a line without its end: cut it off before appending."""
    path = Path(folder) / RESULTS
    try:
        with open(path, "rb+") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                return
            handle.seek(size - 1)
            if handle.read(1) == b"\n":
                return
            keep = size
            while keep > 0:  # back to the last complete line
                step = min(keep, 1 << 16)
                handle.seek(keep - step)
                block = handle.read(step)
                cut = block.rfind(b"\n")
                if cut >= 0:
                    keep = keep - step + cut + 1
                    break
                keep -= step
            handle.truncate(keep)
    except FileNotFoundError:
        return


def rewrite_results(folder: str | Path, offsets: list[int],
                    annotate: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
    """results.jsonl rewritten to hold the rows starting at ``offsets`` (:attr:`ResultLine.offset`), in
    that order, each through ``annotate``. Streamed, so memory does not grow with the rows' size; the
    file is whole until the copy is renamed over it, and a failed copy is removed."""
    results = Path(folder) / RESULTS
    with _replaced(results) as tmp, open(tmp, "w", encoding="utf-8") as out:
        if offsets:
            with open(results, "rb") as handle:
                for start in offsets:
                    handle.seek(start)
                    row = json.loads(handle.readline())
                    out.write(json.dumps(annotate(row) if annotate else row, ensure_ascii=False) + "\n")
        out.flush()
        os.fsync(out.fileno())


def read_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when there is no such file; a RunLogError naming the file when
    it holds something else."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise RunLogError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise RunLogError(f"{path}: expected a JSON object")
    return value


def summary_dict(folder: str | Path) -> dict[str, Any] | None:
    """summary.json as written (None when the run has none yet)."""
    return read_object(Path(folder) / SUMMARY)


def read_summary(folder: str | Path) -> RunSummary | None:
    """summary.json as a record (None when the run has none yet)."""
    data = summary_dict(folder)
    return None if data is None else RunSummary.from_dict(data)


def run_info(folder: str | Path) -> dict[str, Any] | None:
    """run.json: the run's fingerprint and settings (None when the folder has none)."""
    return read_object(Path(folder) / RUN_INFO)


def read_review(folder: str | Path) -> dict[str, Any] | None:
    """review.json: a review's seeded order (None when the folder has not been reviewed)."""
    return read_object(Path(folder) / REVIEW)


def is_finished(folder: str | Path) -> bool:
    """Whether the run folder holds a finished run: summary.json is written last, after results.jsonl
    is whole."""
    return (Path(folder) / SUMMARY).is_file()


def rows_short(rows: int, counted: int | None) -> str | None:
    """What a finished run lost when its results.jsonl holds fewer ``rows`` than the samples its
    summary.json ``counted`` (a last line cut short, rows removed); None when it holds them all, or the
    summary counts none."""
    if counted is None or rows >= counted:
        return None
    return (f"{RESULTS} holds {rows} of the {counted} samples {SUMMARY} counts (the others' rows were cut short "
            "or removed)")


def named_error(exc: OSError, path: Path) -> OSError:
    """``exc`` naming the file it failed on: a write or an fsync that fails (ENOSPC, EIO) names none."""
    if exc.filename is not None:
        return exc
    named = OSError(exc.errno, exc.strerror or str(exc), str(path))
    named.__cause__ = exc
    return named


def remove_quietly(path: Path) -> None:
    """Remove a temporary file a failed write left, if it can be (a read-only disk keeps it)."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


@contextmanager
def _replaced(path: Path) -> Iterator[Path]:
    """A temporary file beside ``path`` to write in the block, renamed over ``path`` when the block ends;
    a block that fails removes it (``path`` is left as it was) and an OSError then names ``path``."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        yield tmp
        tmp.replace(path)
    except BaseException as exc:
        remove_quietly(tmp)
        if isinstance(exc, OSError):
            raise named_error(exc, path)
        raise


def write_atomic(path: Path, text: str) -> None:
    """``path`` holds ``text`` whole or is left as it was: written beside it and renamed over it; a
    failed write removes what it wrote and raises an OSError naming ``path``."""
    with _replaced(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(folder: str | Path, name: str, value: Any) -> None:
    """``value`` written atomically as the folder's JSON file ``name`` (SUMMARY, RUN_INFO, REVIEW)."""
    write_atomic(Path(folder) / name, json.dumps(value, indent=2, ensure_ascii=False, default=str))
