"""The models of one run, loaded on first use, identified without loading."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import Any, Callable


CALIBRATION_FILE = "offline-eval-calibration.json"  # offline_eval.calibration.CALIBRATION_FILE


def folder_fingerprint(path: str | Path) -> str:
    """A cheap identity for a model folder: names, sizes and the content of small files.

    Weights are identified by name and size (hashing gigabytes at every start would cost minutes);
    config, tokenizer and manifest files are hashed whole, so a revision change is seen.
    """
    root = Path(path)
    digest = hashlib.sha256(str(root.resolve()).encode())
    if root.is_file():
        digest.update(f"{root.name}:{root.stat().st_size}".encode())
        return digest.hexdigest()[:16]
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        if file.name == CALIBRATION_FILE:  # kept beside the weights; it describes the model, it is not the model
            continue
        stat = file.stat()
        digest.update(f"{file.relative_to(root)}:{stat.st_size}".encode())
        if stat.st_size <= 4 * 1024 * 1024 and file.suffix in {".json", ".toml", ".txt", ".model", ".jinja"}:
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


class ModelSet:
    """role -> (identity, loader). A role without a loader raises a clear error when used."""

    def __init__(self) -> None:
        self._loaders: dict[str, Callable[[], Any]] = {}
        self._identities: dict[str, str] = {}
        self._loaded: dict[str, Any] = {}
        self._lock = threading.Lock()

    def add(self, role: str, identity: str, loader: Callable[[], Any]) -> "ModelSet":
        self._loaders[role], self._identities[role] = loader, identity
        return self

    def add_instance(self, role: str, backend: Any) -> "ModelSet":
        self._loaded[role] = backend
        self._identities[role] = backend.identity
        return self

    def has(self, role: str) -> bool:
        return role in self._identities

    def identity(self, role: str) -> str:
        if role not in self._identities:
            raise LookupError(f"no {role} model is configured for this run")
        return self._identities[role]

    def identities(self) -> dict[str, str]:
        return dict(self._identities)

    def get(self, role: str) -> Any:
        with self._lock:
            if role not in self._loaded:
                if role not in self._loaders:
                    raise LookupError(f"no {role} model is configured for this run")
                self._loaded[role] = self._loaders[role]()
            return self._loaded[role]

    def loaded(self) -> dict[str, Any]:
        return dict(self._loaded)
