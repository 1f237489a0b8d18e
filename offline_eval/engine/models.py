"""The models of one run, loaded on first use, identified without loading."""

from __future__ import annotations

import threading
from typing import Any, Callable


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
