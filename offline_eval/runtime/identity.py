"""A model's identity is its content: the sha256 of every file it is made of.

Cached answers are keyed on a model's identity, so the identity must change whenever the model
does (a fine-tuned checkpoint saved over the old one, one flipped byte) and never otherwise (a move,
a calibration file written beside the weights). Hashing reads every byte of the weights, so each file's
sha256 is computed once and remembered against what ``stat`` says of it (path, size, mtime, ctime,
inode); a later run pays one ``stat`` per file. ``ctime`` cannot be set back by a user (``touch``
sets only mtime), so a rewritten file is always hashed again.

A manifest's sha256s (``models pull``, ``setup-starter``) are checked against the files before any
model loads: a mismatch stops the run with :class:`ModelChanged`, unless verification is turned off,
in which case the manifest's hashes are trusted for the files not already hashed.

:func:`model_identity` is the one place a cache identity is written, from a backend's declaration,
its folders' fingerprints and its options; the Models of a profile and a backend built directly
both go through it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from offline_eval.runtime.registry import BackendSpec

log = logging.getLogger(__name__)

CALIBRATION_FILE = "offline-eval-calibration.json"
"""Written beside the weights by ``offline-eval calibrate``: it describes the model, it is not the model."""

# Files that change nothing the model computes (besides hidden entries such as .cache, .git).
IGNORED_FILES = frozenset({"README.md", ".gitattributes", CALIBRATION_FILE})
DEFAULT_MEMO = Path("~/.cache/offline-eval/file-hashes.sqlite")
_CHUNK = 1 << 20


class ModelChanged(RuntimeError):
    """A model file's content differs from its manifest's sha256."""


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of one file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def hash_folder(folder: Path) -> dict[str, str]:
    """sha256 of every file of ``folder`` (see :func:`list_files` for what is skipped)."""
    return {name: sha256_file(folder / name) for name in list_files(folder)}


def list_files(folder: Path) -> list[str]:
    """Every regular file under ``folder`` as a POSIX relative name, sorted; names with a component
    starting with "." (``.cache/huggingface`` left by downloads, provenance notes) are skipped."""
    out = []
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        out.append(rel.as_posix())
    return sorted(out)


def model_files(folder: Path) -> list[Path]:
    """The files that make a model: :func:`list_files` less :data:`IGNORED_FILES`, in a stable order.
    A single file (a ``.gguf``) is its own model."""
    if folder.is_file():
        return [folder]
    return [folder / name for name in list_files(folder) if Path(name).name not in IGNORED_FILES]


class HashMemo:
    """sha256s remembered per file state, in SQLite (``$OFFLINE_EVAL_HASHES`` or :data:`DEFAULT_MEMO`).

    A memo that cannot be opened (read-only home) is kept in memory for the process: slower, never wrong.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        target = Path(path or os.environ.get("OFFLINE_EVAL_HASHES") or DEFAULT_MEMO).expanduser()
        self._lock = threading.Lock()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(target), check_same_thread=False, isolation_level=None, timeout=30)
            self._db.execute("CREATE TABLE IF NOT EXISTS hashes (path TEXT PRIMARY KEY, state TEXT, sha256 TEXT)")
        except (OSError, sqlite3.Error) as exc:
            log.warning("file-hash memo %s unavailable (%s); hashing in memory for this process", target, exc)
            self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            self._db.execute("CREATE TABLE hashes (path TEXT PRIMARY KEY, state TEXT, sha256 TEXT)")

    @staticmethod
    def _state(stat: os.stat_result) -> str:
        return f"{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ctime_ns}:{stat.st_ino}:{stat.st_dev}"

    @classmethod
    def state_of(cls, path: Path) -> str:
        """What a file's remembered hash is tied to: size, times, inode and device (a write moves ctime)."""
        return cls._state(os.stat(os.path.realpath(path)))

    def remembered(self, path: Path) -> str | None:
        """The file's sha256 if it was hashed in exactly its present state, else None."""
        real = os.path.realpath(path)
        state = self.state_of(path)
        with self._lock:
            row = self._db.execute("SELECT state, sha256 FROM hashes WHERE path = ?", (real,)).fetchone()
        return row[1] if row and row[0] == state else None

    def sha256(self, path: Path) -> str:
        """The file's sha256: remembered, or computed now and remembered."""
        known = self.remembered(path)
        if known:
            return known
        real = os.path.realpath(path)
        before = os.stat(real)
        value = sha256_file(real)
        if self._state(os.stat(real)) == self._state(before):  # not rewritten while we read it
            try:
                with self._lock:
                    self._db.execute("INSERT OR REPLACE INTO hashes VALUES (?, ?, ?)",
                                     (real, self._state(before), value))
            except sqlite3.Error as exc:  # a locked or read-only memo costs speed, not correctness
                log.debug("file-hash memo not updated: %s", exc)
        return value


_memo: HashMemo | None = None
_memo_path: str | None = None


def default_memo() -> HashMemo:
    """The process-wide memo (reopened when ``$OFFLINE_EVAL_HASHES`` changes, as tests do)."""
    global _memo, _memo_path
    wanted = os.environ.get("OFFLINE_EVAL_HASHES") or str(DEFAULT_MEMO)
    if _memo is None or wanted != _memo_path:
        _memo, _memo_path = HashMemo(wanted), wanted
    return _memo


def file_hashes(folder: str | Path, expected: Mapping[str, str] | None = None, *, verify: bool = True,
                memo: HashMemo | None = None, label: str | None = None) -> dict[str, str]:
    """relative name -> sha256 of every model file of ``folder``.

    ``expected``: the manifest's relative name -> sha256. With ``verify``, every listed file is checked
    and a difference raises :class:`ModelChanged` naming the file. Without it, a listed file is not read:
    its sha256 when it was hashed in exactly its present state, else its state itself
    (``unverified:<size>:<mtime>:<ctime>:<inode>:<device>``), never the manifest's hash unread: a file
    overwritten in place then changes the model's identity, so its old answers are not reused.
    """
    root = Path(folder)
    memo = memo or default_memo()
    expected = {k: v.lower() for k, v in (expected or {}).items()}
    out: dict[str, str] = {}
    files = model_files(root)
    if verify:
        present = {p.name if root.is_file() else p.relative_to(root).as_posix() for p in files}
        absent = sorted(set(expected) - present)
        if absent:
            raise ModelChanged(f"{label or 'model'} {root}: {', '.join(absent)} listed in its manifest but absent; "
                               "re-provision it, or pass --no-verify to use it as it is")
    for path in files:
        name = path.name if root.is_file() else path.relative_to(root).as_posix()
        want = expected.get(name)
        if want and not verify:
            out[name] = memo.remembered(path) or "unverified:" + HashMemo.state_of(path)
            continue
        out[name] = memo.sha256(path)
        if want and out[name] != want:
            raise ModelChanged(
                f"{label or 'model'} {root}: {name} has sha256 {out[name][:12]}…, its manifest says {want[:12]}… "
                "(the file changed after it was provisioned); run `offline-eval models check` for details, "
                "re-provision it, or pass --no-verify to use it as it is")
    return out


def content_fingerprint(folder: str | Path, expected: Mapping[str, str] | None = None, *, verify: bool = True,
                        memo: HashMemo | None = None, label: str | None = None, length: int = 16) -> str:
    """A short hash of a model's content: every model file's relative name and sha256 (the folder's
    location is not part of it, so a moved copy of the same model keeps its cached answers)."""
    digest = hashlib.sha256()
    for name, sha in file_hashes(folder, expected, verify=verify, memo=memo, label=label).items():
        digest.update(f"{name}\0{sha}\n".encode())
    return digest.hexdigest()[:length]


def model_identity(backend: BackendSpec, folders: Mapping[str, str | Path], options: Mapping[str, Any]) -> str:
    """What a model's cached answers are keyed on: role, backend, output revision, content, options.

    ``folders``: folder key (``"main"``, or a constructor keyword such as HHEM's ``tokenizer_path``) ->
    :func:`content_fingerprint`, or the folder's Path while it is not there (its location says which
    folder it is, so it goes unlabelled). Of ``options``, those the declaration calls neutral are left
    out: they change how the model runs, not what it answers.
    """
    parts = [backend.role, backend.name]
    if backend.revision > 1:
        parts.append(f"r{backend.revision}")
    parts += [str(content) if key == "main" or isinstance(content, Path) else f"{key}={content}"
              for key, content in folders.items()]
    changing = {k: v for k, v in options.items() if k not in backend.neutral_options}
    if changing:
        parts.append(json.dumps(changing, sort_keys=True, default=str))
    return ":".join(parts)
