"""From a profile to the run's Models: identities computed from files, backends loaded on first use."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from offline_eval.engine.models import Models
from offline_eval.runtime.identity import content_fingerprint, model_identity
from offline_eval.runtime.model_info import model_details
from offline_eval.runtime.provision.starter import STARTER_MARKER
from offline_eval.runtime.profiles import (
    Folder, ModelNotProvisioned, Profile, RoleSpec, backend_kwargs, missing_folder_message,
)
from offline_eval.runtime.registry import load_backend


def role_identity(spec: RoleSpec, *, verify: bool = True) -> str:
    """What a role's cached answers are keyed on (:func:`~offline_eval.runtime.identity.model_identity`),
    computed without loading the model.

    Each folder is identified by the sha256s of its files (:mod:`offline_eval.runtime.identity`); with
    ``verify``, files a manifest lists are checked against it first (:class:`ModelChanged` on a
    difference), so a changed model is stopped before it loads.
    """
    fingerprints: dict[str, str | Path] = {}
    for key, folder in spec.folders().items():  # each with a path
        label = spec.role if key == "main" else f"{spec.role} {key}"
        fingerprints[key] = (content_fingerprint(folder.path, manifest_hashes(folder), verify=verify, label=label)
                             if folder.path.exists() else folder.path)
    return model_identity(spec.declaration, fingerprints, spec.options)


def manifest_hashes(folder: Folder) -> dict[str, str]:
    """relative name -> sha256 the folder is expected to hold: the profile manifest's, else those
    ``models setup-starter`` recorded in the folder."""
    if folder.files:
        return dict(folder.files)
    marker = folder.path / STARTER_MARKER if folder.path is not None else None
    if marker is not None and marker.is_file():
        try:
            return dict(json.loads(marker.read_text(encoding="utf-8")).get("files", {}))
        except (OSError, ValueError, AttributeError):
            return {}
    return {}


def models_from_profile(profile: Profile, *, device: str | None, batch_size: int | None,
                        judge_batch_size: int | None = None, roles: set[str] | None = None,
                        verify: bool = True) -> Models:
    """Only ``roles`` (default: all three) are configured; none is loaded until it is used.

    Every configured role's identity is computed (and, with ``verify``, checked against its manifest)
    here, before any model loads."""
    models = Models(profile)
    for spec in profile.roles():
        if roles is not None and spec.role not in roles:
            continue
        if spec.role == "verifier" and profile.verifier_is_judge:
            continue
        size = batch_size
        if spec.role == "judge":  # a judge that batches continuously takes whole stages unless told
            size = judge_batch_size or (None if spec.declaration.sizes_own_batches else batch_size)
        kwargs = backend_kwargs(spec, device, size)
        if spec.path is not None:  # file-backed backends (a scripted judge) take their path too
            kwargs.setdefault("path", str(spec.path))

        def load(spec: RoleSpec = spec, kwargs: dict[str, Any] = kwargs) -> Any:
            problem = missing_folder_message(profile, spec)
            if problem:
                raise ModelNotProvisioned(problem)
            return load_backend(spec.role, spec.backend, **kwargs)

        identity = role_identity(spec, verify=verify)
        models.add(spec.role, identity, load, model_details(spec, identity, device=device, profile=profile.name))
    return models


def check_provisioned(profile: Profile, roles: set[str]) -> list[str]:
    """One-line problems for the roles a run needs whose folders are missing."""
    problems = []
    for spec in profile.roles():
        if spec.role in roles and not (spec.role == "verifier" and profile.verifier_is_judge):
            problem = missing_folder_message(profile, spec)
            if problem:
                problems.append(problem)
    return problems


def auto_profile(models_dir: Path | None, roles: set[str] | None = None) -> str:
    """The first built-in profile whose folders for ``roles`` exist: gpu (with CUDA), cpu, starter."""
    from offline_eval.runtime.profiles import load_profile

    candidates = ["cpu", "starter"]
    try:
        import torch
        if torch.cuda.is_available():
            candidates.insert(0, "gpu")
    except ImportError:  # pragma: no cover
        pass
    for name in candidates:
        if not check_provisioned(load_profile(name, models_dir), roles or {"judge", "verifier", "embedder"}):
            return name
    return "starter"


def resolve_profile(name: str | None, models_dir: Path | None, roles: set[str],
                    overrides: Mapping[str, Any] | None = None) -> tuple[Profile, set[str]]:
    """The profile a command runs on, and the roles it loads for ``roles``.

    ``name`` None takes ``$OFFLINE_EVAL_PROFILE``, else the first provisioned profile for ``roles``
    (:func:`auto_profile`);
    ``overrides`` are :meth:`Profile.with_overrides` keywords (the command line's model flags).
    """
    from offline_eval.runtime.profiles import load_profile

    import os

    profile = load_profile(name or os.environ.get("OFFLINE_EVAL_PROFILE") or auto_profile(models_dir, roles),
                           models_dir)
    profile = profile.with_overrides(**(overrides or {}))
    return profile, roles_needed(profile, roles)


def roles_needed(profile: Profile, metric_roles: set[str]) -> set[str]:
    """The model roles a run loads: with no separate verifier, the judge verifies claims itself."""
    roles = set(metric_roles)
    if profile.verifier_is_judge and "verifier" in roles:
        roles = (roles - {"verifier"}) | {"judge"}
    return roles


# Files one of which a folder holds when it holds a Hugging Face tokenizer.
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


class ChatTokenCounter:
    """A chat prompt's length in tokens as a local judge encodes it (:func:`offline_eval.runtime.chat.encode_chat`
    with its own tokenizer). The tokenizer, not the model, is loaded from the judge's folder on first use:
    a run whose contexts all fit never loads it. Pickled as its folder, so a Ray replica loads its own."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    def __call__(self, prompt: Any) -> int:
        from offline_eval.runtime import chat

        return len(chat.encode_chat(self._loaded(), prompt))

    def _loaded(self) -> Any:
        with self._lock:
            if self._tokenizer is None:
                from transformers import AutoTokenizer

                self._tokenizer = AutoTokenizer.from_pretrained(self.folder, local_files_only=True,
                                                                trust_remote_code=False)
            return self._tokenizer

    def __getstate__(self) -> dict[str, Any]:
        return {"folder": self.folder}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["folder"])


def judge_prompt_room(profile: Profile) -> tuple[int | None, ChatTokenCounter | None]:
    """The most tokens a prompt of ``profile``'s judge may hold (its ``max_model_len`` option, else the
    positions its folder's config declares; None when neither says) and, for a judge in a local folder
    that holds its tokenizer, a :class:`ChatTokenCounter` (else None). Reads no more than a config file."""
    spec = profile.judge
    limit = spec.options.get("max_model_len")
    folder = spec.path.expanduser() if spec.path is not None and spec.declaration.needs_folder else None
    if folder is None or not folder.is_dir():
        return (int(limit) if limit else None), None
    if not limit:
        limit = _declared_positions(folder / "config.json")
    counter = ChatTokenCounter(str(folder)) if any((folder / f).is_file() for f in _TOKENIZER_FILES) else None
    return (int(limit) if limit else None), counter


def _declared_positions(config: Path) -> int | None:
    """``max_position_embeddings`` of a model's config.json (or of its text model's); None when absent."""
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for table in (data, data.get("text_config") if isinstance(data, dict) else None):
        if isinstance(table, dict) and isinstance(table.get("max_position_embeddings"), int):
            return table["max_position_embeddings"]
    return None
