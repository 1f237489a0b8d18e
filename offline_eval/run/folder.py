"""A run's output folder: one run at a time, never another run's files overwritten, results kept as written.

    results.jsonl  one line per finished sample, appended window by window, in dataset order at the end
    summary.json   run information and per-metric statistics, written when the run finishes
    run.json       the run's fingerprint and settings, written when it starts: a rerun with the same
                   fingerprint resumes, any other run is refused (or, with ``overwrite``, the earlier
                   run is moved whole into ``earlier/``)
    .lock          held (``flock``) by the run using the folder while it runs; it names that process

The lock is an advisory ``flock`` on ``.lock``: the kernel releases it when its process ends, however
it ends, so a killed run never leaves the folder locked. A run that ends in order removes the file
(while still holding it; a process that locked a removed file sees so and locks the new one).

Each try of a run (the first, and every rerun of the same command) is recorded: run.json and summary.json
carry ``tries``, the earlier tries' start, end, compute seconds and what each scored, so a rerun that
finds the run finished neither hides that it reused it nor loses the first try's compute time.

A write that fails (a full disk, a quota, a read-only or failing disk) raises an ``OSError`` whose
``filename`` names the file, and leaves no partial line or temporary file behind where that is safe:
results.jsonl is cut back to its last full window, a half-written ``.tmp`` is removed. What the folder
held before the failure is kept, so the rerun of the same command resumes.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from offline_eval.engine.locking import flock_exclusive
from offline_eval.records import ResultRow, RunSummary, StoredScore
from offline_eval.runlog import (
    LOCK, REPORT, RESULTS, RUN_INFO, SUMMARY, ResultsAppender, RunLogError, cut_torn_results, is_finished, named_error,
    read_results, result_lines, rewrite_results, run_info, summary_dict, write_atomic,
)

__all__ = ["RESULTS", "SUMMARY", "RUN_INFO", "REPORT", "LOCK", "EARLIER", "RUN_FILES", "RunFolder", "RunFolderError",
           "RunOutput", "default_run_folder", "is_finished", "try_record", "write_atomic"]

EARLIER = "earlier"
# Files a run writes (and ``overwrite`` moves aside); nothing else in the folder is touched.
RUN_FILES = (RESULTS, SUMMARY, RUN_INFO, REPORT, RESULTS + ".tmp")


def default_run_folder(dataset: str | Path, prefix: str = "", suffix: str = "") -> Path:
    """runs/<prefix><dataset name><suffix>: the file's stem, or "dataset" when the stem names no folder of
    its own (a dataset called "...jsonl" must not send a run into the working directory)."""
    stem = Path(str(dataset).rstrip("/\\")).stem.strip(". ")
    return Path("runs") / f"{prefix}{stem or 'dataset'}{suffix}"


class RunFolderError(RuntimeError):
    """The folder cannot take this run (in use, or holding another run); the message says what to do."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _read_or_none(read: Callable[[Path], dict[str, Any] | None], folder: Path) -> dict[str, Any] | None:
    """What ``read`` gives of the folder, or None when its file is damaged: the folder's writer decides
    from it only whether the files there are this run's, and a damaged one is not."""
    try:
        return read(folder)
    except (OSError, RunLogError):
        return None


@dataclass
class RunOutput:
    """What a finished run left in its folder: ``run_summary`` is summary.json as a record, ``summary``
    its JSON; ``result_rows()`` streams results.jsonl as records, ``rows()`` as JSON, ``results`` reads
    it whole on first use."""

    output_dir: Path
    run_summary: RunSummary
    stats: dict[str, Any] = field(default_factory=dict)
    resumed: int = 0
    earlier_tries: list[dict[str, Any]] = field(default_factory=list)
    _rows: list[dict[str, Any]] | None = field(default=None, repr=False)

    @cached_property
    def summary(self) -> dict[str, Any]:
        """summary.json as written."""
        return self.run_summary.to_dict()

    def rows(self) -> Iterator[dict[str, Any]]:
        """The result rows, streamed from results.jsonl in dataset order."""
        for line in result_lines(self.output_dir):
            yield line.data

    def result_rows(self) -> Iterator[ResultRow]:
        """The result rows as records, streamed in dataset order."""
        return read_results(self.output_dir)

    @property
    def results(self) -> list[dict[str, Any]]:
        if self._rows is None:
            self._rows = list(self.rows())
        return self._rows

    def reuse_note(self) -> str | None:
        """One line on what this try took from earlier ones: samples from results.jsonl, model answers
        from the cache; None when it reused nothing (a first run with a cold cache)."""
        run = self.run_summary.info
        hits, computed = _model_calls(self.stats or run.get("engine"))
        total = run.get("n_samples", 0)
        calls = ("no model was called" if hits + computed == 0 else
                 f"model calls: {hits} of {hits + computed} answered from the cache, {computed} computed")
        if total and self.resumed >= total:
            first = next((t for t in self.earlier_tries if t.get("started")), {})
            since = f" (started {first['started']})" if first else ""
            return (f"found a finished run in {self.output_dir}{since}: reused all {total} samples from "
                    f"{RESULTS}; {calls}; {SUMMARY} rewritten")
        if self.resumed:
            return f"resumed the run in {self.output_dir}: reused {self.resumed} of {total} samples from {RESULTS}; {calls}"
        return calls if hits else None


class RunFolder:
    """Claim ``path`` for one run: lock it, resume or refuse what is there, append results, finish.

    Use as a context manager; the lock is held until it exits.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock_handle: Any = None
        self._sink: Any = None
        self.earlier_tries: list[dict[str, Any]] = []  # of the run open here (see :meth:`open`)

    # -- claiming -------------------------------------------------------------------------------
    def __enter__(self) -> "RunFolder":
        self.lock()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    def lock(self) -> None:
        """Take the folder's exclusive lock, or raise naming the process that holds it."""
        self.path.mkdir(parents=True, exist_ok=True)
        handle = self._locked_handle()
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": _now(),
                                     "command": " ".join(sys.argv[:1] + sys.argv[1:8])}) + "\n")
            handle.flush()
        except OSError as exc:
            try:
                handle.close()
            except OSError:  # what could not be flushed fails the close too; the lock is released
                pass
            raise named_error(exc, self.path / LOCK)
        self._lock_handle = handle

    def _locked_handle(self) -> Any:
        """``.lock`` opened and locked. A run that ended removed the file it held: a process that opened
        it before the removal holds a file no one else will open, so it opens the new one again."""
        path = self.path / LOCK
        while True:
            handle = open(path, "a+", encoding="utf-8")
            try:
                flock_exclusive(handle)
            except BlockingIOError:
                handle.seek(0)
                holder = _read_holder(handle.read())
                handle.close()
                raise RunFolderError(
                    f"{self.path} is in use by another run ({holder}); wait for it to finish or choose another "
                    "--output") from None
            try:
                if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                    return handle
            except FileNotFoundError:  # removed between our open and our lock
                pass
            handle.close()

    def release(self) -> None:
        if self._sink is not None:
            self._sink.close()
            self._sink = None
        if self._lock_handle is not None:
            try:  # removed while held, so no one locks the old file after us (see _locked_handle)
                (self.path / LOCK).unlink(missing_ok=True)
            except OSError:  # a read-only disk: the file stays, and the lock is released all the same
                pass
            self._lock_handle.close()  # closing the descriptor releases the flock
            self._lock_handle = None

    def open(self, fingerprint: str, info: dict[str, Any], *, overwrite: bool = False) -> set[str]:
        """Start or resume this run here; returns the ids of samples an earlier try already finished.

        A folder holding another run's files is refused, or with ``overwrite`` that run is moved whole
        into ``earlier/<its start>-<its fingerprint>/`` first.
        """
        if self._lock_handle is None:
            raise RuntimeError("RunFolder.open() needs the lock: use it as a context manager")
        previous = _read_or_none(run_info, self.path)
        present = [name for name in RUN_FILES if (self.path / name).exists()]
        self.earlier_tries = []
        if previous is not None and previous.get("fingerprint") == fingerprint:
            cut_torn_results(self.path)
            done = set(self._finished_ids())
            self.earlier_tries = self._tries_before(previous)
        elif present:
            if not overwrite:
                raise RunFolderError(
                    f"{self.path} holds the results of another run ({_describe(previous)}); pass --overwrite to "
                    f"move them into {self.path / EARLIER}/ and start afresh, or choose another --output")
            moved = self.archive(previous)
            print(f"offline-eval: the earlier run in {self.path} was moved to {moved}", file=sys.stderr)
            done = set()
        else:
            done = set()
        write_atomic(self.path / RUN_INFO, json.dumps(
            {"fingerprint": fingerprint, **info, "started": info.get("started") or _now(),
             "tries": self.earlier_tries}, indent=2, ensure_ascii=False, default=str))
        return done

    def _tries_before(self, previous: dict[str, Any]) -> list[dict[str, Any]]:
        """The tries of this run before the one starting now: those run.json already lists, and the last
        one, as its summary.json recorded it when it finished, else (killed, interrupted) from its start
        to the last time results.jsonl was written."""
        tries = [t for t in previous.get("tries") or [] if isinstance(t, dict)]
        last = (_read_or_none(summary_dict, self.path) or {}).get("run")
        if isinstance(last, dict) and last.get("fingerprint") == previous.get("fingerprint") \
                and last.get("started") == previous.get("started") and last.get("finished"):
            return tries + [try_record(last)]
        try:
            ended = datetime.fromtimestamp((self.path / RESULTS).stat().st_mtime, timezone.utc)
            ended_text = ended.isoformat(timespec="seconds")
        except OSError:
            ended_text = None
        return tries + [{"started": previous.get("started"), "finished": None, "last_written": ended_text,
                         "seconds": None, "scored_samples": None}]

    def archive(self, previous: dict[str, Any] | None) -> Path:
        """Move the run files now in the folder into a new subfolder of ``earlier/``."""
        stamp = str((previous or {}).get("started") or _now()).replace(":", "").replace("+0000", "Z")
        base = f"{stamp}-{str((previous or {}).get('fingerprint') or 'unknown')[:8]}"
        root = self.path / EARLIER
        root.mkdir(exist_ok=True)
        for n in range(1000):
            target = root / (base if n == 0 else f"{base}-{n}")
            try:
                target.mkdir()
                break
            except FileExistsError:
                continue
        else:  # pragma: no cover
            raise RunFolderError(f"{root}: cannot make a folder for the earlier run")
        for name in RUN_FILES:
            if (self.path / name).exists():
                (self.path / name).replace(target / name)
        return target

    # -- writing --------------------------------------------------------------------------------
    def append(self, rows: Iterable[dict[str, Any]]) -> None:
        """Append finished rows to results.jsonl and make them durable before returning
        (:class:`offline_eval.runlog.ResultsAppender`: a failed write leaves no torn line)."""
        if self._sink is None:
            self._sink = ResultsAppender(self.path)
        self._sink.append(rows)

    def finish(self, order: dict[str, int], names: list[str], run_info: dict[str, Any],
               annotate: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
               summarize: Callable[[dict[str, list], dict[str, list], list[tuple[str, str | None]]], dict[str, Any]]
               | None = None) -> tuple[dict[str, Any], int]:
        """Rewrite results.jsonl in dataset order (``order``: id -> position) and write summary.json.

        Streams the file twice (statistics, then the rewrite), holding only offsets and score values,
        so memory does not grow with the rows' size. ``summarize(values, reasons, rows)`` builds the
        summary from per-metric values and each row's (id, conversation id), all in dataset order;
        ``annotate(row)`` gives each row as it is to be rewritten (with its calibrations).
        Returns (summary, number of rows).
        """
        if self._sink is not None:
            self._sink.close()
            self._sink = None
        results = self.path / RESULTS
        # (dataset position, byte offset, each metric's (value, reason)): statistics in dataset order
        index: list[tuple[int, int, tuple]] = []
        if results.exists():
            for line in result_lines(self.path):
                key = line.row.id
                if key not in order:
                    continue
                scores = line.data.get("scores", {})
                index.append((order[key], line.offset, tuple(_value_and_reason(scores.get(n)) for n in names),
                              (key, _conversation_of(line.data))))
        index.sort(key=lambda entry: entry[0])
        values = {n: [entry[2][i][0] for entry in index] for i, n in enumerate(names)}
        reasons = {n: [entry[2][i][1] for entry in index] for i, n in enumerate(names)}
        summary = summarize(values, reasons, [entry[3] for entry in index]) if summarize else {"metrics": {}}
        rewrite_results(self.path, [entry[1] for entry in index], annotate)
        summary["run"] = {**run_info, "finished": _now(), "metrics": names, "n_samples": len(index)}
        write_atomic(self.path / SUMMARY, json.dumps(summary, indent=2, ensure_ascii=False, default=str))
        return summary, len(index)

    def _finished_ids(self) -> Iterator[str]:
        try:
            for line in result_lines(self.path):
                yield line.row.id
        except FileNotFoundError:
            return


def try_record(run: dict[str, Any]) -> dict[str, Any]:
    """What summary.json's run section says of the try that wrote it, as an entry of ``tries``."""
    n, resumed = run.get("n_samples"), run.get("resumed_samples") or 0
    hits, computed = _model_calls(run.get("engine"))
    return {"started": run.get("started"), "finished": run.get("finished"), "seconds": run.get("seconds"),
            "scored_samples": n - resumed if isinstance(n, int) and isinstance(resumed, int) else None,
            "computed": computed, "cache_hits": hits}


def _model_calls(engine: Any) -> tuple[int, int]:
    """(answered from the cache, computed) over every request kind of a try's engine figures."""
    engine = engine if isinstance(engine, dict) else {}
    return sum((engine.get("cache_hits") or {}).values()), sum((engine.get("computed") or {}).values())


def _conversation_of(row: Any) -> str | None:
    """The conversation a stored row's sample belongs to (``conversation_id``), or None."""
    sample = row.get("sample") if isinstance(row, dict) else None
    conversation = sample.get("conversation_id") if isinstance(sample, dict) else None
    return str(conversation) if isinstance(conversation, (str, int)) and not isinstance(conversation, bool) else None


def _value_and_reason(score: Any) -> tuple[float | None, str | None]:
    """A stored score's value and, when it has none, why; (None, None) for a metric the row lacks."""
    if not isinstance(score, Mapping):
        return None, None
    stored = StoredScore.from_dict(score)
    return stored.value, stored.unscored_reason


def _read_holder(text: str) -> str:
    try:
        holder = json.loads(text.strip().splitlines()[-1])
        return f"pid {holder['pid']} on {holder['host']}, since {holder['since']}"
    except (ValueError, KeyError, IndexError, TypeError):
        return "another process"


def _describe(previous: dict[str, Any] | None) -> str:
    if not previous:
        return "no run.json"
    parts = []
    if previous.get("dataset"):
        parts.append(f"dataset {previous['dataset']}")
    if previous.get("metrics"):
        parts.append("metrics " + ",".join(previous["metrics"]))
    if previous.get("started"):
        parts.append(f"started {previous['started']}")
    parts.append(f"fingerprint {str(previous.get('fingerprint'))[:8]}")
    return ", ".join(parts)
