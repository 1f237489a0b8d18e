"""The models of one run, by role, loaded on first use and identified without loading."""

from __future__ import annotations

import threading
from typing import Any, Callable


class Models:
    """role ("judge", "verifier", "embedder") -> (identity, loader); what the engine asks for a backend.

    Made from a profile by :func:`offline_eval.run.config.configure_models` (``offline_eval.load_models``
    returns one: reuse it across runs and its models load once), or by hand with :meth:`add` and
    :meth:`add_instance` (tests, benchmarks). ``identity`` never loads a model: a resumed run answers
    from the cache without loading a model whose work is all done. A role without a loader raises a
    clear error when used.
    """

    def __init__(self, profile: Any = None) -> None:
        # the offline_eval.runtime.profiles.Profile these were configured from; None for models added by hand
        self.profile = profile
        self._loaders: dict[str, Callable[[], Any]] = {}
        self._identities: dict[str, str] = {}
        self._loaded: dict[str, Any] = {}
        self._lock = threading.Lock()
        # role -> what run.json says of the model besides its identity (name, folder, dtype, limits)
        self.details: dict[str, dict[str, Any]] = {}

    def add(self, role: str, identity: str, loader: Callable[[], Any],
            details: dict[str, Any] | None = None) -> "Models":
        self._loaders[role], self._identities[role] = loader, identity
        if details is not None:
            self.details[role] = details
        return self

    def add_instance(self, role: str, backend: Any) -> "Models":
        self._loaded[role] = backend
        self._identities[role] = backend.identity
        return self

    @property
    def roles(self) -> set[str]:
        """The roles configured."""
        return set(self._identities)

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
