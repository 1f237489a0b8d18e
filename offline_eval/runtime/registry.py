"""Every backend declared once: its role, name, class, extra, manifest options, whether it reads a local
folder and the revision of its outputs. A backend's module is imported only when that backend is asked
for, with a clear message when the extra that provides its dependency is missing.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from offline_eval.runtime.base import BackendUnavailable

# The verifier backend that means "no separate model: the judge verifies claims itself".
JUDGE_VERIFIES = "judge"


@dataclass(frozen=True)
class BackendSpec:
    """One backend of one role.

    ``extra``: the pip extra that provides its dependency. ``options``: the constructor keywords a
    manifest may set besides path/device (``batch_size`` is allowed everywhere as the profile's
    default); None accepts any (test doubles). ``needs_folder``: it reads its weights from local folders
    (the others need no ``path``). ``revision`` is bumped when the same model and request start giving
    a different answer, so cached answers of the old code are not reused. ``neutral_options`` change how
    the model runs, never what it answers, so they stay out of its cache identity. ``module`` None:
    there is nothing to build (:data:`JUDGE_VERIFIES`).
    """

    role: str
    name: str
    module: str | None
    class_name: str | None
    extra: str | None = None
    options: frozenset[str] | None = None
    needs_folder: bool = False
    revision: int = 1
    neutral_options: frozenset[str] = frozenset({"batch_size"})


# A test double stands in for any backend, so it takes any backend's options; those that change no real
# backend's answers change none of its answers either.
_STAND_IN_NEUTRAL = frozenset({"batch_size", "device", "gpu_memory_utilization", "tensor_parallel_size",
                               "max_concurrency", "timeout", "api_key"})

DECLARED_BACKENDS: tuple[BackendSpec, ...] = (
    BackendSpec(
        "judge", "vllm", "offline_eval.runtime.vllm_judge", "VLLMJudge", extra="vllm", needs_folder=True,
        options=frozenset({"tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "dtype", "seed",
                           "top_logprobs", "batch_size", "batch_invariant"}),
        neutral_options=frozenset({"batch_size", "gpu_memory_utilization", "tensor_parallel_size"}),
        revision=2,  # 2: special tokens spelled in the data read as text (issue #33)
    ),
    # revision 2: option logits in float32; 3: attention computed row by row, the same whatever the
    # batch (issue #20); 4: attention weights times values summed in fixed blocks of keys, the same
    # whatever the keys masked after a query, and special tokens spelled in the data read as text
    # (issue #33).
    BackendSpec(
        "judge", "transformers", "offline_eval.runtime.transformers_judge", "TransformersJudge",
        needs_folder=True, options=frozenset({"dtype", "max_model_len", "max_new_tokens", "batch_size"}),
        revision=4,
    ),
    BackendSpec(
        "judge", "openai", "offline_eval.runtime.openai_judge", "OpenAIJudge",
        options=frozenset({"base_url", "model", "max_concurrency", "api_key", "timeout", "max_retries",
                           "retry_backoff", "top_logprobs", "batch_size"}),
        neutral_options=frozenset({"batch_size", "max_concurrency", "timeout", "api_key"}),
        revision=2,  # 2: the common chat templates' special tokens spelled in the data defused (issue #33)
    ),
    BackendSpec("judge", "scripted", "offline_eval.runtime.scripted", "ScriptedJudge",
                neutral_options=_STAND_IN_NEUTRAL),
    BackendSpec(
        "verifier", "hhem", "offline_eval.runtime.hhem", "HHEMVerifier", needs_folder=True,
        options=frozenset({"max_length", "window_overlap", "dtype", "batch_size"}),
    ),
    BackendSpec("verifier", "scripted", "offline_eval.runtime.scripted", "ScriptedVerifier",
                neutral_options=_STAND_IN_NEUTRAL),
    BackendSpec("verifier", JUDGE_VERIFIES, None, None, options=frozenset()),
    BackendSpec(
        "embedder", "sentence-transformers", "offline_eval.runtime.embedder", "SentenceTransformerEmbedder",
        needs_folder=True, options=frozenset({"max_seq_length", "batch_size"}),
    ),
    BackendSpec("embedder", "hashing", "offline_eval.runtime.hashing_embedder", "HashingEmbedder",
                neutral_options=_STAND_IN_NEUTRAL),
)


def backend_names(role: str) -> list[str]:
    """The backend names a manifest or ``--judge-backend`` may use for ``role``, in declaration order."""
    return [spec.name for spec in DECLARED_BACKENDS if spec.role == role]


def backend_spec(role: str, name: str) -> BackendSpec:
    """The declaration of ``role``'s backend ``name``; ValueError naming the known ones otherwise."""
    for spec in DECLARED_BACKENDS:
        if spec.role == role and spec.name == name:
            return spec
    known = ", ".join(sorted(backend_names(role)))
    raise ValueError(f"unknown {role} backend '{name}' (known: {known})")


def backend_class(role: str, name: str) -> type:
    spec = backend_spec(role, name)
    if spec.module is None or spec.class_name is None:
        raise ValueError(f"the {role} backend '{name}' builds no model (the judge answers in its place)")
    try:
        module = importlib.import_module(spec.module)
    except ImportError as exc:
        if spec.extra:
            raise BackendUnavailable(
                f"the {role} backend '{name}' needs the optional dependency '{exc.name}': "
                f"pip install 'offline-eval[{spec.extra}]'"
            ) from exc
        raise
    return getattr(module, spec.class_name)


def load_backend(role: str, name: str, **kwargs: Any) -> Any:
    return backend_class(role, name)(**kwargs)
