"""Judge LLM on an in-process ``vllm.LLM`` (NVIDIA GPU; ``pip install 'offline-eval[vllm]'``).

This module imports without vLLM; constructing :class:`VLLMJudge` without it raises
:class:`~offline_eval.runtime.registry.BackendUnavailable` naming the ``offline-eval[vllm]`` extra.

* **Prompts** are rendered and tokenised here with the model folder's own Hugging Face tokenizer
  (:func:`chat.encode_chat`, the same rule as the transformers backend) and handed to vLLM as token
  ids, so both backends see identical prompts and no BOS is doubled.
* **One engine call per backend call**: every prompt of a call goes into a single ``llm.generate``
  with one ``SamplingParams`` per request; vLLM's continuous batching does the rest, which is why
  ``batch_size`` defaults to 4096.
* **Sampling**: ``temperature``, ``top_p``, ``n``, ``max_tokens`` and (when sampling) ``seed`` pass
  through; a request at temperature 0 is decoded greedily once and its text repeated ``n`` times
  (like the transformers backend); ``max_tokens`` is cut so prompt + completion fit ``max_model_len``.
* **JSON schema** becomes structured outputs: ``SamplingParams(structured_outputs=
  StructuredOutputsParams(json=schema))`` (vLLM >= 0.11), or ``guided_decoding=GuidedDecodingParams(
  json=schema)`` on older releases.
* **Options**: ``max_tokens=1, temperature=0, logprobs=top_logprobs`` (20, vLLM's default
  ``max_logprobs``); the first generated position's top-k log-probs are mapped to the options' tokens
  (:func:`chat.option_token_ids`), summed per option and normalised. An option none of whose tokens
  is in the top-k gets the smallest listed log-prob (an upper bound on its true value); if no option
  is listed the result is uniform.
* **Batch invariance**: vLLM's batch-invariant kernels (``VLLM_BATCH_INVARIANT=1``, vLLM >= 0.11, NVIDIA
  compute capability >= 8.0) are switched on before vLLM is imported, so a request's completion and
  option probabilities do not depend on the requests that share its batch.
  ``batch_invariant=False`` (a manifest option) leaves vLLM's faster default kernels; a
  ``VLLM_BATCH_INVARIANT`` already set in the environment wins either way.
* **Device**: ``"cuda"`` or ``"cuda:N"``. vLLM has no device argument; with ``"cuda:N"`` and
  ``tensor_parallel_size == 1`` the engine is pinned to the N-th visible GPU through
  ``CUDA_VISIBLE_DEVICES`` while it starts (vLLM's engine core runs in a child process that inherits
  it; the variable is restored afterwards). ``"cuda"`` leaves the GPU choice to vLLM.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from offline_eval.engine.requests import Generate, Sampling, ScoreOptions
from offline_eval.runtime import chat
from offline_eval.runtime.base import Backend
from offline_eval.runtime.identity import content_fingerprint
from offline_eval.runtime.registry import BackendUnavailable

INSTALL_HINT = "pip install 'offline-eval[vllm]'"


# --------------------------------------------------------------------------------------------------
# pure helpers (no vLLM needed)


def sampling_kwargs(sampling: Sampling, max_tokens: int | None = None) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for one request (schema excluded).

    Temperature 0 asks for one greedy completion (the caller repeats it ``n`` times) with no seed;
    otherwise ``n`` samples with ``top_p`` and the request's seed. ``max_tokens`` overrides
    ``sampling.max_tokens`` (used to fit ``max_model_len``).
    """
    tokens = sampling.max_tokens if max_tokens is None else max_tokens
    if sampling.temperature <= 0:
        return {"n": 1, "temperature": 0.0, "top_p": 1.0, "max_tokens": tokens}
    return {
        "n": sampling.n,
        "temperature": float(sampling.temperature),
        "top_p": float(sampling.top_p),
        "max_tokens": tokens,
        "seed": int(sampling.seed),
    }


def options_kwargs(top_logprobs: int = 20) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` that expose the next token's top-k log-probs."""
    return {"n": 1, "temperature": 0.0, "max_tokens": 1, "logprobs": int(top_logprobs)}


def first_position_logprobs(completion: Any) -> dict[int, float]:
    """``{token_id: logprob}`` of the first generated position of a vLLM ``CompletionOutput``.

    Values may be ``Logprob`` objects (``.logprob``) or plain floats; a missing list gives ``{}``.
    """
    positions = getattr(completion, "logprobs", None)
    if not positions:
        return {}
    first = positions[0]
    if not first:
        return {}
    result: dict[int, float] = {}
    for token_id, value in dict(first).items():
        lp = getattr(value, "logprob", value)
        if lp is not None:
            result[int(token_id)] = float(lp)
    return result


def option_probs(option_ids: Mapping[str, Sequence[int]], completion: Any) -> dict[str, float]:
    """Normalised option probabilities from a one-token completion that carries top-k log-probs."""
    return chat.option_probs_from_token_logprobs(option_ids, first_position_logprobs(completion))


def structured_outputs_kwargs(schema: str | None, sampling_params_module: Any) -> dict[str, Any]:
    """The extra ``SamplingParams`` keyword for a JSON schema, in whichever form this vLLM has."""
    if not schema:
        return {}
    parsed = json.loads(schema)
    if hasattr(sampling_params_module, "StructuredOutputsParams"):
        return {"structured_outputs": sampling_params_module.StructuredOutputsParams(json=parsed)}
    if hasattr(sampling_params_module, "GuidedDecodingParams"):
        return {"guided_decoding": sampling_params_module.GuidedDecodingParams(json=parsed)}
    raise BackendUnavailable("this vLLM has no structured-output (JSON schema) support; upgrade vLLM")


def visible_device(device: str, current: str | None) -> str | None:
    """The ``CUDA_VISIBLE_DEVICES`` value that pins a one-GPU engine to ``device`` (None: leave as is).

    ``"cuda"`` leaves the variable alone; ``"cuda:N"`` selects the N-th visible GPU, mapped through an
    existing ``CUDA_VISIBLE_DEVICES`` list when there is one.
    """
    if device == "cuda":
        return None
    if not device.startswith("cuda:"):
        raise ValueError(f"the vllm judge runs on an NVIDIA GPU; device must be 'cuda[:N]', got {device!r}")
    index = int(device.split(":", 1)[1])
    if current is not None and current.strip():
        visible = [d.strip() for d in current.split(",") if d.strip()]
        if index >= len(visible):
            raise ValueError(f"device {device} but CUDA_VISIBLE_DEVICES={current!r}")
        return visible[index]
    return str(index)


@contextmanager
def _env(name: str, value: str | None) -> Iterator[None]:
    if value is None:
        yield
        return
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


# --------------------------------------------------------------------------------------------------
# backend


class VLLMJudge(Backend):
    """Judge backend on an in-process ``vllm.LLM`` (see the module docstring)."""

    def __init__(
        self,
        path: str,
        device: str = "cuda:0",
        batch_size: int = 4096,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.85,
        max_model_len: int | None = None,
        dtype: str = "auto",
        seed: int = 0,
        top_logprobs: int = 20,
        batch_invariant: bool = True,
    ) -> None:
        self.set_batch_size(batch_size)
        if batch_invariant:
            os.environ.setdefault("VLLM_BATCH_INVARIANT", "1")  # read by vLLM when it is imported
        try:
            import vllm
            from vllm import sampling_params as vllm_sampling_params
        except ImportError as exc:
            raise BackendUnavailable(
                f"the judge backend 'vllm' needs the optional dependency '{exc.name or 'vllm'}': "
                f"{INSTALL_HINT} (NVIDIA GPU only)"
            ) from exc
        from transformers import AutoTokenizer

        from offline_eval.offline import enforce_offline

        enforce_offline()
        source = Path(path).expanduser()
        if not source.exists():
            raise FileNotFoundError(f"judge model not found: {source} (a local folder or .gguf file)")
        tokenizer_dir = source.parent if source.is_file() else source
        pin = None
        if tensor_parallel_size == 1:
            pin = visible_device(device, os.environ.get("CUDA_VISIBLE_DEVICES"))
        elif device not in ("cuda", "cuda:0"):
            raise ValueError(
                "device='cuda:N' pins one GPU; with tensor_parallel_size > 1 choose GPUs with "
                "CUDA_VISIBLE_DEVICES and leave device='cuda'"
            )

        self._vllm = vllm
        self._sp_module = vllm_sampling_params
        self.tokenizer = AutoTokenizer.from_pretrained(
            str(tokenizer_dir), local_files_only=True, trust_remote_code=False
        )
        self.top_logprobs = int(top_logprobs)
        engine_args: dict[str, Any] = {
            "model": str(source),
            "tokenizer": str(tokenizer_dir),
            "dtype": dtype,
            "seed": seed,
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            "trust_remote_code": False,
            "max_logprobs": max(20, self.top_logprobs),
        }
        if max_model_len is not None:
            engine_args["max_model_len"] = int(max_model_len)
        with _env("CUDA_VISIBLE_DEVICES", pin):
            self.llm = vllm.LLM(**engine_args)
        self.max_model_len = max_model_len or self._engine_max_len()
        self.batch_invariant = os.environ.get("VLLM_BATCH_INVARIANT", "0") not in ("", "0")
        self.identify({"main": content_fingerprint(source)}, {"dtype": dtype, "batch_invariant": self.batch_invariant})
        self._option_cache: dict[tuple[str, ...], dict[str, tuple[int, ...]]] = {}

    def _engine_max_len(self) -> int | None:
        for chain in (("llm_engine", "model_config", "max_model_len"), ("model_config", "max_model_len")):
            obj: Any = self.llm
            for attr in chain:
                obj = getattr(obj, attr, None)
                if obj is None:
                    break
            if isinstance(obj, int):
                return obj
        return None

    def _encode(self, index: int, messages: chat.ChatMessages, room: int) -> list[int]:
        ids = chat.encode_chat(self.tokenizer, messages)
        if self.max_model_len is not None and len(ids) + room > self.max_model_len:
            raise ValueError(
                f"request {index}: prompt of {len(ids)} tokens does not fit max_model_len="
                f"{self.max_model_len} (prompt ends: {chat.describe(messages)!r})"
            )
        return ids

    def _run(self, prompts: list[list[int]], params: list[Any]) -> list[Any]:
        return self.llm.generate(
            [{"prompt_token_ids": ids} for ids in prompts], params, use_tqdm=False
        )

    def generate(self, requests: Sequence[Generate]) -> list[tuple[str, ...]]:
        """One tuple of ``request.sampling.n`` completions per request; a single engine call."""
        results: list[tuple[str, ...] | None] = [None] * len(requests)
        prompts: list[list[int]] = []
        params: list[Any] = []
        owners: list[int] = []
        for index, req in enumerate(requests):
            s = req.sampling
            if s.max_tokens < 1:
                results[index] = ("",) * s.n
                continue
            ids = self._encode(index, req.prompt, room=1)
            budget = s.max_tokens
            if self.max_model_len is not None:
                budget = min(budget, self.max_model_len - len(ids))
            kwargs = sampling_kwargs(s, budget)
            kwargs.update(structured_outputs_kwargs(req.schema, self._sp_module))
            prompts.append(ids)
            params.append(self._vllm.SamplingParams(**kwargs))
            owners.append(index)
        if prompts:
            for index, output in zip(owners, self._run(prompts, params)):
                texts = [c.text for c in sorted(output.outputs, key=lambda c: getattr(c, "index", 0))]
                if requests[index].sampling.temperature <= 0:
                    texts = texts[:1] * requests[index].sampling.n
                results[index] = tuple(texts)
        return [r if r is not None else () for r in results]

    def score_options(self, requests: Sequence[ScoreOptions]) -> list[dict[str, float]]:
        """Next-token probability of each option from the top-k log-probs, normalised."""
        option_ids = []
        for req in requests:
            key = tuple(req.options)
            if key not in self._option_cache:
                self._option_cache[key] = chat.option_token_ids(self.tokenizer, key)
            option_ids.append(self._option_cache[key])
        prompts = [self._encode(i, req.prompt, room=1) for i, req in enumerate(requests)]
        params = [self._vllm.SamplingParams(**options_kwargs(self.top_logprobs)) for _ in requests]
        outputs = self._run(prompts, params) if prompts else []
        return [option_probs(ids, out.outputs[0]) for ids, out in zip(option_ids, outputs)]
