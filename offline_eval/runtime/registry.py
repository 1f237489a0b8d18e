"""Every backend declared once: its role, name, class, extra, manifest options, whether it reads a local
folder and the revision of its outputs, and the facts the rest of the package asks about it (does it
check claims with a classifier, is it served over HTTP, does it size its own batches, does it take a
device, which files its folders hold). Code outside a backend's own module asks its declaration, never
compares its name. A backend's module is imported only when that backend is asked for, with a clear
message when the extra that provides its dependency is missing.

The table is written here rather than gathered from the backends' modules because gathering would
import them, and with them torch or vLLM, to answer what a manifest may set; a test holds that every
class deriving from ``Backend`` is in it, and that each declared class is defined where it says.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable

# The verifier backend that means "no separate model: the judge verifies claims itself".
JUDGE_VERIFIES = "judge"

# What a model folder holds by default: a config, weights and a tokenizer.
FULL_FOLDER: tuple[str, ...] = ("config", "weights", "tokenizer")


class BackendUnavailable(RuntimeError):
    """A backend's optional dependency is missing; the message says which extra to install."""


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

    What the rest of the package asks of a backend:

    * ``classifies_claims``: a verifier that scores each claim against its premise with a classifier
      of its own (one probability per pair), rather than the judge answering a prompt.
    * ``url_option``: it is served over HTTP; this option holds the server's address, and ``--judge``
      given a URL sets it instead of a model folder.
    * ``sizes_own_batches``: it batches continuously itself and wants a whole stage per call, so the
      run's ``--batch-size`` is not passed to it (an explicit judge batch size still is).
    * ``takes_device``: its constructor takes ``device`` (a remote server has none).
    * ``main_folder_kinds`` / ``extra_folder_kinds``: which kinds of file (config, weights, tokenizer)
      its main folder and each of its extra folders must hold, checked by ``models check``.
    * ``default_setup``: the manifest table (paths relative to the models root) that sets this backend
      up when the command line asks for it on a profile that has none (``--verifier hhem`` on the
      starter profile); None: it cannot be asked for that way.
    * ``model_options``: options fitted to the model in the folder (its limits, or a cap chosen for
      it): when the command line gives the role another folder, the profile's values of these are not
      carried over (:meth:`~offline_eval.runtime.profiles.Profile.with_overrides`).
    * ``context_option``: the option that bounds a model's input; unset, the backend reads it from the
      model's config (``max_position_embeddings``).
    * ``auto_dtype``: what a dtype of "auto" (or none) becomes, from the checkpoint's dtype (None:
      unknown) and the device; None: the backend has no dtype of its own to record.
    * ``test_double``: it stands in for a model in tests and dry runs; it is not offered as a choice
      on the command line. ``stands_in_for``: the backend whose name a run's settings record when this
      double takes its place, so a run with the double is set up as a run with the real model.
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
    classifies_claims: bool = False
    url_option: str | None = None
    sizes_own_batches: bool = False
    takes_device: bool = True
    main_folder_kinds: tuple[str, ...] = FULL_FOLDER
    extra_folder_kinds: tuple[str, ...] = FULL_FOLDER
    default_setup: Mapping[str, Any] | None = field(default=None, compare=False)
    model_options: frozenset[str] = frozenset()
    context_option: str | None = None
    auto_dtype: Callable[[str | None, str], str | None] | None = field(default=None, compare=False)
    test_double: bool = False
    stands_in_for: str | None = None

    def declares(self, option: str) -> bool:
        """Whether ``option`` is one of this backend's own options (a test double, which accepts any
        option, declares none)."""
        return self.options is not None and option in self.options

    @property
    def recorded_name(self) -> str:
        """The name a run's settings record for this backend: a test double's is the real backend's."""
        return self.stands_in_for or self.name


# A test double stands in for any backend, so it takes any backend's options; those that change no real
# backend's answers change none of its answers either.
_STAND_IN_NEUTRAL = frozenset({"batch_size", "device", "gpu_memory_utilization", "tensor_parallel_size",
                               "max_concurrency", "timeout", "api_key"})

def _float32_on_cpu(checkpoint: str | None, device: str) -> str | None:
    """The transformers judge: float32 on a CPU (fast and exact there), the checkpoint's own on a GPU."""
    return "float32" if device == "cpu" else checkpoint


def _vllm_auto(checkpoint: str | None, device: str) -> str | None:
    """vLLM's "auto": a float32 checkpoint runs in float16, any other in its own dtype."""
    return "float16" if checkpoint == "float32" else checkpoint


def _float16_raised(checkpoint: str | None, device: str) -> str | None:
    """HHEM: the checkpoint's own dtype, float16 raised to float32 (T5 overflows in float16)."""
    return "float32" if checkpoint == "float16" else checkpoint


def _checkpoint_dtype(checkpoint: str | None, device: str) -> str | None:
    return checkpoint


# HHEM-2.1-Open and the flan-t5-base tokenizer and config it is built with, under the models root.
_HHEM_SETUP = MappingProxyType({
    "path": "hhem-2.1-open", "repo": "vectara/hallucination_evaluation_model", "revision": "main",
    "options": {"max_length": 2048},
    "extra": {"tokenizer_path": {"path": "flan-t5-base", "repo": "google/flan-t5-base", "revision": "main"}},
})

DECLARED_BACKENDS: tuple[BackendSpec, ...] = (
    BackendSpec(
        "judge", "vllm", "offline_eval.runtime.vllm_judge", "VLLMJudge", extra="vllm", needs_folder=True,
        sizes_own_batches=True,
        options=frozenset({"tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "dtype", "seed",
                           "top_logprobs", "batch_size", "batch_invariant"}),
        neutral_options=frozenset({"batch_size", "gpu_memory_utilization", "tensor_parallel_size"}),
        model_options=frozenset({"max_model_len"}), context_option="max_model_len", auto_dtype=_vllm_auto,
        revision=2,  # 2: special tokens spelled in the data read as text
    ),
    # revision 2: option logits in float32; 3: attention computed row by row, the same whatever the
    # batch; 4: attention weights times values summed in fixed blocks of keys, the same whatever the
    # keys masked after a query, and special tokens spelled in the data read as text.
    BackendSpec(
        "judge", "transformers", "offline_eval.runtime.transformers_judge", "TransformersJudge",
        needs_folder=True,
        options=frozenset({"dtype", "max_model_len", "max_new_tokens", "batch_size", "prefix_store_mb"}),
        neutral_options=frozenset({"batch_size", "prefix_store_mb"}),  # the store moves no bit (tests)
        # a cap on answers is chosen for one model (the starter's 135M judge rarely closes its JSON)
        model_options=frozenset({"max_model_len", "max_new_tokens"}), context_option="max_model_len",
        auto_dtype=_float32_on_cpu,
        revision=4,
    ),
    BackendSpec(
        "judge", "openai", "offline_eval.runtime.openai_judge", "OpenAIJudge",
        options=frozenset({"base_url", "model", "max_concurrency", "api_key", "timeout", "max_retries",
                           "retry_backoff", "top_logprobs", "batch_size"}),
        neutral_options=frozenset({"batch_size", "max_concurrency", "timeout", "api_key"}),
        url_option="base_url", takes_device=False,
        revision=2,  # 2: the common chat templates' special tokens spelled in the data defused
    ),
    BackendSpec("judge", "scripted", "offline_eval.runtime.scripted", "ScriptedJudge",
                neutral_options=_STAND_IN_NEUTRAL, test_double=True),
    BackendSpec(
        "verifier", "hhem", "offline_eval.runtime.hhem", "HHEMVerifier", needs_folder=True,
        options=frozenset({"max_length", "window_overlap", "dtype", "batch_size"}), classifies_claims=True,
        # HHEM's own folder holds its weights and config; its T5 config and tokenizer come from flan-t5-base
        main_folder_kinds=("config", "weights"), extra_folder_kinds=("config", "tokenizer"),
        default_setup=_HHEM_SETUP, auto_dtype=_float16_raised,
    ),
    BackendSpec("verifier", "scripted", "offline_eval.runtime.scripted", "ScriptedVerifier",
                neutral_options=_STAND_IN_NEUTRAL, classifies_claims=True, test_double=True, stands_in_for="hhem"),
    BackendSpec("verifier", JUDGE_VERIFIES, None, None, options=frozenset(), default_setup=MappingProxyType({})),
    BackendSpec(
        "embedder", "sentence-transformers", "offline_eval.runtime.embedder", "SentenceTransformerEmbedder",
        needs_folder=True, options=frozenset({"max_seq_length", "batch_size"}),
        model_options=frozenset({"max_seq_length"}), auto_dtype=_checkpoint_dtype,
    ),
    BackendSpec("embedder", "hashing", "offline_eval.runtime.hashing_embedder", "HashingEmbedder",
                neutral_options=_STAND_IN_NEUTRAL, test_double=True),
)


def backend_names(role: str, *, test_doubles: bool = True) -> list[str]:
    """The backend names a manifest or ``--judge-backend`` may use for ``role``, in declaration order;
    without ``test_doubles``, those a user chooses among (``--verifier``)."""
    return [spec.name for spec in DECLARED_BACKENDS if spec.role == role and (test_doubles or not spec.test_double)]


def backend_spec(role: str, name: str) -> BackendSpec:
    """The declaration of ``role``'s backend ``name``; ValueError naming the known ones otherwise."""
    for spec in DECLARED_BACKENDS:
        if spec.role == role and spec.name == name:
            return spec
    known = ", ".join(sorted(backend_names(role)))
    raise ValueError(f"unknown {role} backend '{name}' (known: {known})")


def declaration_of(backend_class: type) -> BackendSpec:
    """The declaration of a backend class (or of the declared class it derives from, such as a test's
    counting subclass of a scripted verifier): a backend learns its role and name here, from the one
    place that declares them."""
    for klass in backend_class.__mro__:
        for spec in DECLARED_BACKENDS:
            if spec.module == klass.__module__ and spec.class_name == klass.__qualname__:
                return spec
    raise LookupError(f"{backend_class.__qualname__} is not a declared backend (see DECLARED_BACKENDS)")


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
