"""Judge LLM behind an OpenAI-compatible chat-completions server inside the network.

Typically ``vllm serve /models/Qwen2.5-14B-Instruct`` on a GPU box, reached as
``OpenAIJudge("http://gpu-box:8000/v1", "/models/Qwen2.5-14B-Instruct")``. Standard library only
(urllib and a thread pool): no ``openai`` package, no API key demanded — an ``Authorization: Bearer``
header is sent only when ``api_key`` is given.

* Requests of a call run concurrently, at most ``max_concurrency`` at a time; results come back in
  request order.
* ``generate``: one ``POST {base_url}/chat/completions`` per request with ``n``, ``temperature``,
  ``top_p``, ``max_tokens`` and ``seed`` passed through (at temperature 0 one completion is asked for
  and repeated ``n`` times, as the other backends do); a JSON schema becomes
  ``response_format={"type": "json_schema", "json_schema": {"name": "output", "schema": ...}}``
  (vLLM's server decodes under it). A server that returns fewer than ``n`` choices (some ignore
  ``n``) is asked again for the rest, with ``seed + k`` for the k-th completion so the extra
  samples differ.
* ``score_options``: ``max_tokens=1, temperature=0, logprobs=true, top_logprobs=20``; the first
  position's top tokens are matched to the options by :func:`chat.option_probs_from_top_strings`
  (token string, leading whitespace removed, a prefix of exactly one option), options absent from the
  top 20 get the smallest listed log-prob, and the result is normalised over the options.
* Connection errors, timeouts, HTTP 429 and 5xx are retried with exponential backoff, at most
  ``max_retries`` times; other HTTP errors raise at once with the server's message.
* ``identity`` names the base URL and the served model: the server cannot tell us its weights' hash,
  so serve a changed model under a new name (``--served-model-name``) to keep caches apart.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

from offline_eval.engine.requests import Generate, ScoreOptions
from offline_eval.runtime import chat
from offline_eval.runtime.base import Backend

T = TypeVar("T")
R = TypeVar("R")

_RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


class OpenAIServerError(RuntimeError):
    """The server answered with an error, or could not be reached after the retries."""


class OpenAIJudge(Backend):
    """Judge backend on an OpenAI-compatible ``/chat/completions`` endpoint (see module docstring)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        batch_size: int = 32,
        max_concurrency: int = 8,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 4,
        retry_backoff: float = 1.0,
        top_logprobs: int = 20,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.set_batch_size(batch_size)
        base = base_url.rstrip("/")
        if base.endswith("/chat/completions"):
            base = base[: -len("/chat/completions")]
        self.base_url = base
        self.url = base + "/chat/completions"
        self.model = model
        self.max_concurrency = int(max_concurrency)
        self.api_key = api_key
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.retry_backoff = float(retry_backoff)
        self.top_logprobs = int(top_logprobs)
        self.identify({}, {"base_url": self.base_url, "model": model})

    # ------------------------------------------------------------------------------------------
    # HTTP

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST a JSON body, retrying transient failures; the decoded JSON answer."""
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        last: str = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(min(self.retry_backoff * 2 ** (attempt - 1), 30.0))
            request = urllib.request.Request(self.url, data=data, headers=self._headers(), method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as exc:
                detail = _error_text(exc)
                if exc.code in _RETRY_STATUS:
                    last = f"HTTP {exc.code}: {detail}"
                    continue
                raise OpenAIServerError(f"{self.url} answered HTTP {exc.code}: {detail}") from None
            except (urllib.error.URLError, ConnectionError, TimeoutError, socket.timeout) as exc:
                last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
                continue
            except json.JSONDecodeError as exc:
                raise OpenAIServerError(f"{self.url} answered with invalid JSON: {exc}") from None
        raise OpenAIServerError(
            f"{self.url} failed after {self.max_retries + 1} attempts; last error: {last}"
        )

    def _map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        if not items:
            return []
        if len(items) == 1 or self.max_concurrency == 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(items))) as pool:
            return list(pool.map(fn, items))

    # ------------------------------------------------------------------------------------------
    # bodies (pure, tested directly)

    def generate_body(self, request: Generate, n: int | None = None, seed_offset: int = 0) -> dict[str, Any]:
        """The JSON body of one chat completion for ``request`` (``n`` overrides sampling.n)."""
        s = request.sampling
        body: dict[str, Any] = {
            "model": self.model,
            "messages": chat.as_dicts(chat.defuse(request.prompt, chat.COMMON_SPECIAL_TOKENS)),
            "n": s.n if n is None else n,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens,
            "seed": s.seed + seed_offset,
        }
        if request.schema:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": json.loads(request.schema)},
            }
        return body

    def options_body(self, request: ScoreOptions) -> dict[str, Any]:
        """The JSON body that asks for the first position's top log-probs."""
        return {
            "model": self.model,
            "messages": chat.as_dicts(chat.defuse(request.prompt, chat.COMMON_SPECIAL_TOKENS)),
            "n": 1,
            "temperature": 0.0,
            "max_tokens": 1,
            "logprobs": True,
            "top_logprobs": self.top_logprobs,
        }

    # ------------------------------------------------------------------------------------------
    # backend API

    def generate(self, requests: Sequence[Generate]) -> list[tuple[str, ...]]:
        """One tuple of ``request.sampling.n`` completions per request, in request order."""
        return self._map(self._generate_one, list(requests))

    def _generate_one(self, request: Generate) -> tuple[str, ...]:
        if request.sampling.temperature <= 0:  # greedy: ask once, repeat (as the other backends do)
            answer = self._post(self.generate_body(request, n=1))
            choices = answer.get("choices") or []
            if not choices:
                raise OpenAIServerError(f"{self.url} returned no choices: {json.dumps(answer)[:300]}")
            content = (choices[0].get("message") or {}).get("content") or ""
            return (content,) * request.sampling.n
        want = request.sampling.n
        texts: list[str] = []
        while len(texts) < want:
            answer = self._post(self.generate_body(request, n=want - len(texts), seed_offset=len(texts)))
            choices = sorted(answer.get("choices") or [], key=lambda c: c.get("index", 0))
            if not choices:
                raise OpenAIServerError(f"{self.url} returned no choices: {json.dumps(answer)[:300]}")
            for choice in choices[: want - len(texts)]:
                content = (choice.get("message") or {}).get("content")
                texts.append(content or "")
        return tuple(texts)

    def score_options(self, requests: Sequence[ScoreOptions]) -> list[dict[str, float]]:
        """Next-token probability of each option, normalised over the options, in request order."""
        return self._map(self._score_one, list(requests))

    def _score_one(self, request: ScoreOptions) -> dict[str, float]:
        answer = self._post(self.options_body(request))
        try:
            first = answer["choices"][0]["logprobs"]["content"][0]
        except (KeyError, IndexError, TypeError):
            raise OpenAIServerError(
                f"{self.url} returned no logprobs for score_options (does the server support "
                f"'logprobs'/'top_logprobs'?): {json.dumps(answer)[:300]}"
            ) from None
        top = [(t.get("token", ""), float(t["logprob"])) for t in first.get("top_logprobs") or []]
        if not top and "token" in first:
            top = [(first["token"], float(first["logprob"]))]
        return chat.option_probs_from_top_strings(tuple(request.options), top)


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        raw = exc.read().decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - best effort only
        return exc.reason if isinstance(exc.reason, str) else ""
    try:
        payload = json.loads(raw)
        error = payload.get("error", payload)
        if isinstance(error, dict):
            return str(error.get("message", error))
        return str(error)
    except (json.JSONDecodeError, AttributeError):
        return raw[:500]
