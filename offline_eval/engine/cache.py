"""The persistent result cache: SQLite, keyed on a content hash of model identity + request.

Every finished batch is committed at once, so a run killed at any point keeps all the model work it
completed, and the rerun of the same command makes no model call for it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable

from offline_eval.engine.requests import Request, to_jsonable


def cache_key(model_identity: str, request: Request) -> str:
    return hashlib.sha256(f"{model_identity}\x00{request.key}".encode("utf-8")).hexdigest()


class ResultCache:
    """A key -> JSON value store. ``path=None`` keeps it in memory (``--no-cache``)."""

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path else None
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path) if self.path else ":memory:",
                                   check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, kind TEXT, value TEXT)")
        self.hits = 0
        self.misses = 0

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        keys = list(keys)
        found: dict[str, Any] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key, value FROM results WHERE key IN ({marks})", chunk).fetchall()
                found.update((k, json.loads(v)) for k, v in rows)
        self.hits += len(found)
        self.misses += len(keys) - len(found)
        return found

    def put_many(self, kind: str, items: Iterable[tuple[str, Any]]) -> None:
        rows = [(k, kind, json.dumps(to_jsonable(v), ensure_ascii=False)) for k, v in items]
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO results VALUES (?, ?, ?)", rows)
            self._db.execute("COMMIT")

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
