"""Advisory file locks that the kernel releases when their process ends, however it ends: the run
folder's ``.lock`` and each cache journal's lock file."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any


def flock_exclusive(handle: Any) -> None:
    """Take an exclusive lock on an open file without waiting; BlockingIOError when another holds it."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: msvcrt locks the first byte instead
        import msvcrt

        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError as exc:
            raise BlockingIOError(str(exc)) from exc
        return
    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def try_flock(path: Path) -> IO[str] | None:
    """``path`` opened (created if missing) and locked, or None when another process holds its lock.
    Closing the handle releases the lock."""
    handle = open(path, "a+", encoding="utf-8")
    try:
        flock_exclusive(handle)
    except BlockingIOError:
        handle.close()
        return None
    return handle
