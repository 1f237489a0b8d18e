"""The persistent result cache: SQLite, keyed on a content hash of model identity + request.

Every finished batch is committed at once, so a run killed at any point keeps all the model work it
completed, and the rerun of the same command makes no model call for it.

**Layout.** Answers live in the ``results`` table, indexed by key. A process writes its new answers to
a journal of its own instead (``journal_<id>``: a table appended in insertion order, with no index, so a
commit costs the same whether the file holds a thousand answers or ten million), and finds them again
through an index kept in memory (:class:`_JournalIndex`, 16 bytes an answer). :meth:`ResultCache.close`
folds the journal into ``results`` in key order, one pass. A journal left by a process that was killed
is folded by the next process to open the file. Whether a journal's process is alive is told by an
advisory ``flock`` on ``<cache>.<journal>.lock``, held for the journal's life and released by the
kernel however the process ends. Measured with ``benchmarks/engine_scale.py`` (docs/measurements.md,
"Engine overhead and memory by dataset size"): with one key-indexed table each window's commits grew
slower as the run went on, as random keys landed on ever more index pages; the journal's commits stay
flat.

Another process's journal is not read: two runs sharing a file at once see each other's answers once
the first one ends.

The cache checks itself: each stored answer carries a checksum of its key and value. A record whose
checksum, text or JSON is wrong is dropped and recomputed (counted in :attr:`ResultCache.repaired`,
``cache_repaired`` in a run's summary); a file SQLite cannot read raises :class:`CacheDamaged`, whose
one-line message says what to do. ``offline-eval cache check|prune PATH`` inspects and cleans a file.
A disk that fails the file (full, read-only, an I/O error, no permission) is no damage: it raises
:class:`CacheUnavailable`, an ``OSError``, and the file is left as it was.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import sqlite3
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from offline_eval.engine.locking import try_flock
from offline_eval.engine.requests import Request, to_jsonable

log = logging.getLogger(__name__)

_SCHEMA = "CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, kind TEXT, value TEXT, sum TEXT, created REAL)"
_JOURNAL = "journal_"
_COLUMNS = "key, kind, value, sum, created"
_CHUNK = 500  # keys per IN (...) query


def cache_key(model_identity: str, request: Request) -> str:
    return hashlib.sha256(f"{model_identity}\x00{request.key}".encode("utf-8")).hexdigest()


def record_sum(key: str, value: str) -> str:
    """The checksum stored with each answer: it covers the key too, so a value moved to another key fails."""
    return hashlib.sha256(f"{key}\x00{value}".encode("utf-8")).hexdigest()[:16]


class CacheDamaged(RuntimeError):
    """The cache file cannot be read as a database."""


class CacheUnavailable(OSError):
    """The cache file's disk failed it: full (SQLITE_FULL), an I/O error, read-only, no permission, locked
    by another process past the timeout. Nothing in the file is damaged and every committed answer is
    kept, so the advice is to fix the disk and rerun, never to move the file aside. An ``OSError`` (its
    ``filename`` the cache file, its ``strerror`` SQLite's message), told to the user as any other
    disk failure is (:mod:`offline_eval.cli`)."""


# SQLite's primary result codes (the low byte of an extended code) that tell of the disk or the
# machine, not of the file's contents, and the errno each stands for (None: no single one).
_DISK_CODES = {
    13: errno.ENOSPC,  # SQLITE_FULL: "database or disk is full" (a full disk, or max_page_count)
    10: errno.EIO,     # SQLITE_IOERR: "disk I/O error" (EIO, and EDQUOT, which SQLite reports as IOERR_WRITE)
    8: errno.EROFS,    # SQLITE_READONLY: "attempt to write a readonly database"
    3: errno.EACCES,   # SQLITE_PERM
    14: None,          # SQLITE_CANTOPEN: "unable to open database file" (no folder, no permission)
    5: errno.EBUSY,    # SQLITE_BUSY: "database is locked" past the 60 s timeout
    6: errno.EBUSY,    # SQLITE_LOCKED
    7: errno.ENOMEM,   # SQLITE_NOMEM
    22: None,          # SQLITE_NOLFS
}
_DISK_MESSAGES = {"database or disk is full": errno.ENOSPC, "disk I/O error": errno.EIO}


def _failure(path: Path | None, exc: sqlite3.Error) -> CacheDamaged | CacheUnavailable:
    """What a SQLite error on the cache file means: its disk failed it (:class:`CacheUnavailable`) or
    the file is damaged (:class:`CacheDamaged`), each with its one-line message."""
    where = str(path) if path else "the in-memory cache"
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in _DISK_CODES:
        return CacheUnavailable(_DISK_CODES[code & 0xFF], str(exc), where)
    if code is None and str(exc) in _DISK_MESSAGES:
        return CacheUnavailable(_DISK_MESSAGES[str(exc)], str(exc), where)
    return CacheDamaged(
        f"cache {where} is damaged ({exc}); run `offline-eval cache check {where}`, move the file aside "
        "(a new cache is started and answers are recomputed), or run with --no-cache")


@dataclass
class CacheReport:
    """What :meth:`ResultCache.check` found."""

    records: int
    damaged: int
    integrity: str  # SQLite's integrity_check: "ok" or its first problem
    by_kind: dict[str, int]

    @property
    def ok(self) -> bool:
        return self.damaged == 0 and self.integrity == "ok"


def _key_prefix(key: str) -> int:
    """A key's 64-bit handle in the journal index: its first 16 hex digits (cache keys are sha256 hex),
    else a hash of it. Two keys may share one; the full key is compared when the record is read."""
    try:
        return int(key[:16], 16)
    except ValueError:
        return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")


class _JournalIndex:
    """Key prefix -> journal rowid for what this process wrote, as sorted runs merged like the digits
    of a binary counter (a run is merged into the one before it while that one is no larger than twice
    its size), so adding a batch and finding a stage's keys cost O(log n) numpy passes. Where a prefix
    was added twice the later rowid wins."""

    def __init__(self) -> None:
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []  # oldest first

    def add(self, prefixes: list[int], rowids: list[int]) -> None:
        keys, ids = np.array(prefixes, dtype=np.uint64), np.array(rowids, dtype=np.int64)
        while self._runs and len(self._runs[-1][0]) <= 2 * len(keys):
            older_keys, older_ids = self._runs.pop()
            keys, ids = np.concatenate([older_keys, keys]), np.concatenate([older_ids, ids])
        order = np.argsort(keys, kind="stable")  # equal prefixes keep their order: the later one last
        self._runs.append((keys[order], ids[order]))

    def find(self, prefixes: list[int]) -> np.ndarray:
        """The rowid of each prefix, -1 where none. The prefixes are looked up in sorted order, so each
        binary search starts where the last one ended (a third of the time at 4.9M answers)."""
        wanted = np.array(prefixes, dtype=np.uint64)
        order = np.argsort(wanted)
        wanted = wanted[order]
        found = np.full(len(wanted), -1, dtype=np.int64)
        for keys, ids in self._runs:  # newer runs last, so they overwrite
            at = np.searchsorted(keys, wanted, side="right") - 1
            hit = (at >= 0) & (keys[np.maximum(at, 0)] == wanted)
            found[hit] = ids[at[hit]]
        out = np.empty_like(found)
        out[order] = found
        return out

    def __bool__(self) -> bool:
        return bool(self._runs)


class ResultCache:
    """A key -> JSON value store. ``path=None`` keeps it in memory (``--no-cache``)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path else None
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.repaired = 0  # damaged records found, dropped and recomputed
        self._journal: str | None = None  # this process's journal table, made at its first write
        self._journal_lock: Any = None  # the open, flocked lock file of that journal
        self._index = _JournalIndex()
        self._next_rowid = 1
        try:
            self._db = sqlite3.connect(str(self.path) if self.path else ":memory:",
                                       check_same_thread=False, isolation_level=None, timeout=60)
            with self._lock:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute(_SCHEMA)
                self._migrate()
                self._fold_orphans()
        except sqlite3.Error as exc:
            raise _failure(self.path, exc) from None

    def _migrate(self) -> None:
        """Caches written before checksums: add the columns and sum what is there (trusted once)."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(results)")}
        if "sum" in columns:
            return
        self._db.execute("BEGIN IMMEDIATE")
        self._db.execute("ALTER TABLE results ADD COLUMN sum TEXT")
        self._db.execute("ALTER TABLE results ADD COLUMN created REAL")
        rows = self._db.execute("SELECT key, CAST(value AS BLOB) FROM results").fetchall()
        now = time.time()
        self._db.executemany("UPDATE results SET sum = ?, created = ? WHERE key = ?",
                             [(record_sum(k, v.decode("utf-8", "replace")), now, k) for k, v in rows])
        self._db.execute("COMMIT")
        log.info("cache %s: %d records given checksums", self.path, len(rows))

    # -- journals ---------------------------------------------------------------------------------
    def _lock_path(self, journal: str) -> Path:
        assert self.path is not None
        return self.path.with_name(f"{self.path.name}.{journal}.lock")

    def _journals(self) -> list[str]:
        return [name for (name,) in self._db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ?", (_JOURNAL + "%",))]

    def _fold_orphans(self) -> None:
        """Fold the journals of processes that ended without closing the cache (killed, crashed)."""
        if self.path is None:
            return
        for journal in self._journals():
            handle = try_flock(self._lock_path(journal))
            if handle is None:  # its process is alive and writing
                continue
            try:
                if self._fold(journal):
                    log.info("cache %s: answers of an interrupted run (%s) folded in", self.path, journal)
            finally:
                self._lock_path(journal).unlink(missing_ok=True)
                handle.close()

    def _fold(self, journal: str) -> bool:
        """Move a journal's records into ``results`` (later records of a key win) and drop it, in one
        transaction; False when it was gone already (another process folded it)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            if journal not in self._journals():
                self._db.execute("COMMIT")
                return False
            self._db.execute(f"INSERT OR REPLACE INTO results ({_COLUMNS}) "
                             f"SELECT {_COLUMNS} FROM {journal} ORDER BY key, rowid")
            self._db.execute(f"DROP TABLE {journal}")
            self._db.execute("COMMIT")
            return True
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        """End a transaction that failed or was interrupted (Ctrl-C between BEGIN and COMMIT), so the
        connection can fold its journal at close. SQLite has ended it already after some errors (a full
        disk, an I/O error): then there is nothing to roll back, and the error that ended it is the one
        to report, not "no transaction is active"."""
        if self._db.in_transaction:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def _start_journal(self) -> str:
        """This process's journal: its lock is taken before the table exists, so no other process can
        take the table for an orphan's."""
        journal = f"{_JOURNAL}{uuid.uuid4().hex[:16]}"
        if self.path is not None:
            self._journal_lock = try_flock(self._lock_path(journal))
            if self._journal_lock is None:
                raise RuntimeError(f"cache {self.path}: cannot lock {self._lock_path(journal)}")
        self._db.execute(f"CREATE TABLE {journal} ({_COLUMNS})")
        self._journal = journal
        return journal

    def _end_journal(self) -> None:
        """Fold this process's journal into ``results``; a later write starts a new one."""
        if self._journal is None:
            return
        try:
            self._fold(self._journal)
        except sqlite3.Error as exc:
            raise _failure(self.path, exc) from None
        if self._journal_lock is not None:
            self._lock_path(self._journal).unlink(missing_ok=True)
        self._release_journal()

    def _release_journal(self) -> None:
        """Forget this process's journal and release its lock (its table, if still there, is then an
        orphan that the next opener folds)."""
        if self._journal_lock is not None:
            self._journal_lock.close()
        self._journal, self._journal_lock, self._index, self._next_rowid = None, None, _JournalIndex(), 1

    # -- reading and writing ----------------------------------------------------------------------
    def _query(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        try:
            return self._db.execute(sql, tuple(params)).fetchall()
        except sqlite3.Error as exc:
            raise _failure(self.path, exc) from None

    @staticmethod
    def _decode(key: str, raw: bytes | None, stored_sum: str | None) -> tuple[bool, Any]:
        """(valid, value) of one stored record."""
        if raw is None:
            return False, None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return False, None
        if stored_sum != record_sum(key, text):
            return False, None
        try:
            return True, json.loads(text)
        except ValueError:
            return False, None

    def lookup(self, keys: Iterable[str]) -> dict[str, tuple[str, Any]]:
        """key -> (kind, value) of every valid stored answer among ``keys``: this process's journal
        first, then ``results``; damaged records are dropped (and recomputed by the caller)."""
        keys = list(keys)
        found: dict[str, tuple[str, Any]] = {}
        with self._lock:
            if self._index:
                rowids = self._index.find([_key_prefix(k) for k in keys])
                self._read(self._journal, "rowid", {int(r): k for k, r in zip(keys, rowids) if r >= 0}, found)
            self._read("results", "key", {k: k for k in keys if k not in found}, found)
        return found

    def _read(self, table: str, column: str, wanted: dict[Any, str], found: dict[str, tuple[str, Any]]) -> None:
        """Put the valid records of ``table`` whose ``column`` is among ``wanted`` (its value -> the key
        asked for) in ``found``; delete and count the damaged ones. A journal row whose key is not the one
        asked for (two keys share an index prefix) is passed over."""
        values = list(wanted)
        bad: list[Any] = []
        for start in range(0, len(values), _CHUNK):
            chunk = values[start:start + _CHUNK]
            for ident, key, kind, raw, stored in self._query(
                    f"SELECT {column}, key, kind, CAST(value AS BLOB), sum FROM {table} "
                    f"WHERE {column} IN ({','.join('?' * len(chunk))})", chunk):
                if key != wanted[ident]:
                    continue
                valid, value = self._decode(key, raw, stored)
                if valid:
                    found[key] = (kind, value)
                else:
                    bad.append(ident)
        if bad:
            self._delete(table, column, bad)
            self._note_repaired(len(bad))

    def _note_repaired(self, count: int) -> None:
        self.repaired += count
        log.warning("cache %s: %d damaged record(s) dropped; they are recomputed", self.path, count)

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        return {key: value for key, (_, value) in self.lookup(keys).items()}

    def put_many(self, kind: str, items: Iterable[tuple[str, Any]]) -> None:
        now = time.time()
        rows, prefixes = [], []
        for key, value in items:
            text = json.dumps(to_jsonable(value), ensure_ascii=False)
            rows.append((self._next_rowid + len(rows), key, kind, text, record_sum(key, text), now))
            prefixes.append(_key_prefix(key))
        if not rows:
            return
        with self._lock:
            try:
                journal = self._journal or self._start_journal()
                self._db.execute("BEGIN")
                try:
                    self._db.executemany(f"INSERT INTO {journal} (rowid, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                                         rows)
                    self._db.execute("COMMIT")
                except BaseException:  # the batch is not kept; what was committed before it is
                    self._rollback()
                    raise
            except sqlite3.Error as exc:
                raise _failure(self.path, exc) from None
            self._index.add(prefixes, [row[0] for row in rows])
            self._next_rowid += len(rows)

    def _delete(self, table: str, column: str, values: list[Any]) -> None:
        try:
            for start in range(0, len(values), _CHUNK):
                chunk = values[start:start + _CHUNK]
                self._db.execute(f"DELETE FROM {table} WHERE {column} IN ({','.join('?' * len(chunk))})", chunk)
        except sqlite3.Error as exc:
            raise _failure(self.path, exc) from None

    # -- maintenance (offline-eval cache check|prune) ---------------------------------------------
    def _records(self) -> Iterator[tuple[str, str, bool]]:
        """(key, kind, valid) of every record in ``results``, read in pages."""
        last = ""
        while True:
            with self._lock:
                page = self._query("SELECT key, kind, CAST(value AS BLOB), sum FROM results WHERE key > ? "
                                   "ORDER BY key LIMIT 5000", (last,))
            if not page:
                return
            for key, kind, raw, stored in page:
                yield key, kind, self._decode(key, raw, stored)[0]
            last = page[-1][0]

    def check(self) -> CacheReport:
        """SQLite's integrity check and every record's checksum (this process's journal folded first)."""
        with self._lock:
            self._end_journal()
            integrity = str(self._query("PRAGMA integrity_check")[0][0])
        records = damaged = 0
        by_kind: dict[str, int] = {}
        for _, kind, valid in self._records():
            records += 1
            damaged += not valid
            by_kind[kind] = by_kind.get(kind, 0) + 1
        return CacheReport(records, damaged, integrity, by_kind)

    def prune(self, *, older_than_s: float | None = None, kinds: Iterable[str] = ()) -> dict[str, int]:
        """Delete damaged records, and records older than ``older_than_s`` seconds or of ``kinds``;
        then VACUUM. Returns counts of what was removed."""
        with self._lock:
            self._end_journal()
        damaged = [key for key, _, valid in self._records() if not valid]
        with self._lock:
            self._delete("results", "key", damaged)
            removed = {"damaged": len(damaged), "old": 0, "kind": 0}
            kinds = list(kinds)
            try:
                if older_than_s is not None:
                    cut = time.time() - older_than_s
                    removed["old"] = self._db.execute("DELETE FROM results WHERE created < ?", (cut,)).rowcount
                if kinds:
                    removed["kind"] = self._db.execute(
                        f"DELETE FROM results WHERE kind IN ({','.join('?' * len(kinds))})", kinds).rowcount
                self._db.execute("VACUUM")  # a copy of the file: it needs as much free space again
            except sqlite3.Error as exc:
                raise _failure(self.path, exc) from None
        return removed

    def merge_from(self, source: str | Path) -> int:
        """Copy the records of another cache file that this one lacks; returns how many were added."""
        if self.path is None:
            raise ValueError("cannot merge into an in-memory cache")
        ResultCache(source).close()  # brings an older file to this schema and folds its orphaned journals
        with self._lock:
            self._end_journal()
            before = self._query("SELECT COUNT(*) FROM results")[0][0]
            try:
                self._db.execute("ATTACH DATABASE ? AS src", (str(source),))
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                    try:
                        self._db.execute(f"INSERT OR IGNORE INTO results ({_COLUMNS}) "
                                         f"SELECT {_COLUMNS} FROM src.results")
                        self._db.execute("COMMIT")
                    except BaseException:
                        self._rollback()
                        raise
                finally:
                    self._db.execute("DETACH DATABASE src")
            except sqlite3.Error as exc:
                raise _failure(self.path, exc) from None
            return self._query("SELECT COUNT(*) FROM results")[0][0] - before

    def __len__(self) -> int:
        with self._lock:
            stored = self._query("SELECT COUNT(*) FROM results")[0][0]
            return stored + (self._query(f"SELECT COUNT(*) FROM {self._journal}")[0][0] if self._journal else 0)

    def __enter__(self) -> "ResultCache":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.close(failing=exc_type is not None)

    def close(self, *, failing: bool | None = None) -> None:
        """Fold this process's journal into ``results`` and close the file (an in-memory cache is only
        dropped). A fold that fails (a full disk) leaves the journal to the next process that opens the
        file: the answers are kept, and the run that wrote them has finished. That is a warning, or only
        logged when ``failing``: the cache closes because an error or an interrupt ends the run, and the
        one line the user reads is that error's. None: whether an exception is on its way now (a ``with``
        block or a ``finally`` that closes the cache, through any wrapper)."""
        if failing is None:
            failing = sys.exc_info()[0] is not None
        with self._lock:
            try:
                if self.path is not None:
                    self._end_journal()
            except (CacheDamaged, CacheUnavailable) as exc:
                reason = str(exc) if isinstance(exc, CacheDamaged) else f"cache {exc.filename}: {exc.strerror}"
                log.log(logging.INFO if failing else logging.WARNING,
                        "%s; this run's answers stay in its journal, folded in by the next run on the file",
                        reason)
                self._release_journal()
            finally:
                self._db.close()
