"""The persistent result cache: SQLite, keyed on a content hash of model identity + request.

Every finished batch is committed at once, so a run killed at any point keeps all the model work it
completed, and the rerun of the same command makes no model call for it.

The cache checks itself: each stored answer carries a checksum of its key and value. A record whose
checksum, text or JSON is wrong is dropped and recomputed (counted in :attr:`ResultCache.repaired`,
``cache_repaired`` in a run's summary); a file SQLite cannot read raises :class:`CacheDamaged`, whose
one-line message says what to do. ``offline-eval cache check|prune PATH`` inspects and cleans a file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from offline_eval.engine.requests import Request, to_jsonable

log = logging.getLogger(__name__)

_SCHEMA = "CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, kind TEXT, value TEXT, sum TEXT, created REAL)"


def cache_key(model_identity: str, request: Request) -> str:
    return hashlib.sha256(f"{model_identity}\x00{request.key}".encode("utf-8")).hexdigest()


def record_sum(key: str, value: str) -> str:
    """The checksum stored with each answer: it covers the key too, so a value moved to another key fails."""
    return hashlib.sha256(f"{key}\x00{value}".encode("utf-8")).hexdigest()[:16]


class CacheDamaged(RuntimeError):
    """The cache file cannot be read as a database."""


def _damaged(path: Path | None, exc: Exception) -> CacheDamaged:
    where = str(path) if path else "the in-memory cache"
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


class ResultCache:
    """A key -> JSON value store. ``path=None`` keeps it in memory (``--no-cache``)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path else None
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.repaired = 0  # damaged records found, dropped and recomputed
        try:
            self._db = sqlite3.connect(str(self.path) if self.path else ":memory:",
                                       check_same_thread=False, isolation_level=None, timeout=60)
            with self._lock:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute(_SCHEMA)
                self._migrate()
        except sqlite3.DatabaseError as exc:
            raise _damaged(self.path, exc) from None

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

    def _query(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        try:
            return self._db.execute(sql, tuple(params)).fetchall()
        except sqlite3.DatabaseError as exc:
            raise _damaged(self.path, exc) from None

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

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        keys = list(keys)
        found: dict[str, Any] = {}
        bad: list[str] = []
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                marks = ",".join("?" * len(chunk))
                for key, raw, stored in self._query(
                        f"SELECT key, CAST(value AS BLOB), sum FROM results WHERE key IN ({marks})", chunk):
                    valid, value = self._decode(key, raw, stored)
                    if valid:
                        found[key] = value
                    else:
                        bad.append(key)
            if bad:
                self._delete(bad)
        if bad:
            self.repaired += len(bad)
            log.warning("cache %s: %d damaged record(s) dropped; they are recomputed", self.path, len(bad))
        return found

    def put_many(self, kind: str, items: Iterable[tuple[str, Any]]) -> None:
        now = time.time()
        rows = []
        for key, value in items:
            text = json.dumps(to_jsonable(value), ensure_ascii=False)
            rows.append((key, kind, text, record_sum(key, text), now))
        with self._lock:
            try:
                self._db.execute("BEGIN")
                self._db.executemany("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?)", rows)
                self._db.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                raise _damaged(self.path, exc) from None

    def _delete(self, keys: list[str]) -> None:
        try:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                self._db.execute(f"DELETE FROM results WHERE key IN ({','.join('?' * len(chunk))})", chunk)
        except sqlite3.DatabaseError as exc:
            raise _damaged(self.path, exc) from None

    # -- maintenance (offline-eval cache check|prune) ---------------------------------------------
    def _records(self) -> Iterator[tuple[str, str, bool]]:
        """(key, kind, valid) of every record, read in pages."""
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
        with self._lock:
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
        damaged = [key for key, _, valid in self._records() if not valid]
        with self._lock:
            self._delete(damaged)
            removed = {"damaged": len(damaged), "old": 0, "kind": 0}
            if older_than_s is not None:
                cut = time.time() - older_than_s
                removed["old"] = self._db.execute("DELETE FROM results WHERE created < ?", (cut,)).rowcount
            kinds = list(kinds)
            if kinds:
                removed["kind"] = self._db.execute(
                    f"DELETE FROM results WHERE kind IN ({','.join('?' * len(kinds))})", kinds).rowcount
            self._db.execute("VACUUM")
        return removed

    def merge_from(self, source: str | Path) -> int:
        """Copy the records of another cache file that this one lacks; returns how many were added."""
        if self.path is None:
            raise ValueError("cannot merge into an in-memory cache")
        ResultCache(source).close()  # brings an older file to this schema
        with self._lock:
            before = self._query("SELECT COUNT(*) FROM results")[0][0]
            self._db.execute("ATTACH DATABASE ? AS src", (str(source),))
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute("INSERT OR IGNORE INTO results (key, kind, value, sum, created) "
                                 "SELECT key, kind, value, sum, created FROM src.results")
                self._db.execute("COMMIT")
            finally:
                self._db.execute("DETACH DATABASE src")
            return self._query("SELECT COUNT(*) FROM results")[0][0] - before

    def __len__(self) -> int:
        with self._lock:
            return self._query("SELECT COUNT(*) FROM results")[0][0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
