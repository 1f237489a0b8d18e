"""Backends by name, imported only when asked for, with a clear message when an extra is missing."""

from __future__ import annotations

import importlib
from typing import Any

from offline_eval.runtime.base import BackendUnavailable

# role -> backend name -> (module, class, pip extra that provides its dependency or None)
BACKENDS: dict[str, dict[str, tuple[str, str, str | None]]] = {
    "judge": {
        "transformers": ("offline_eval.runtime.transformers_judge", "TransformersJudge", None),
        "vllm": ("offline_eval.runtime.vllm_judge", "VLLMJudge", "vllm"),
        "openai": ("offline_eval.runtime.openai_judge", "OpenAIJudge", None),
        "scripted": ("offline_eval.runtime.scripted", "ScriptedJudge", None),
    },
    "verifier": {
        "hhem": ("offline_eval.runtime.hhem", "HHEMVerifier", None),
        "scripted": ("offline_eval.runtime.scripted", "ScriptedVerifier", None),
    },
    "embedder": {
        "sentence-transformers": ("offline_eval.runtime.embedder", "SentenceTransformerEmbedder", None),
        "hashing": ("offline_eval.runtime.hashing_embedder", "HashingEmbedder", None),
    },
}

# backend name -> revision of its outputs, bumped when the same model and request give a different
# answer than before, so cached answers of the old code are not reused (the revision is part of the
# cache identity; absent means 1). transformers 2: option logits in float32; 3: attention computed
# row by row, the same whatever the batch (issue #20).
REVISIONS: dict[str, int] = {"transformers": 3}


def backend_class(role: str, name: str) -> type:
    try:
        module_name, class_name, extra = BACKENDS[role][name]
    except KeyError:
        known = ", ".join(sorted(BACKENDS.get(role, {})))
        raise ValueError(f"unknown {role} backend '{name}' (known: {known})") from None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if extra:
            raise BackendUnavailable(
                f"the {role} backend '{name}' needs the optional dependency '{exc.name}': "
                f"pip install 'offline-eval[{extra}]'"
            ) from exc
        raise
    return getattr(module, class_name)


def load_backend(role: str, name: str, **kwargs: Any) -> Any:
    return backend_class(role, name)(**kwargs)
