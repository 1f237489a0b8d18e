"""Pieces shared by the judge backends: prompt rendering, answer-option tokens, option probabilities
and seeds.

Nothing here imports torch, transformers or vllm; the functions take a tokenizer object (anything with
``encode``/``decode`` and, optionally, ``chat_template``/``apply_chat_template``) so the rules below are
the same for every backend and can be tested without a model.

Rules, stated once:

* **Prompt rendering.** When the tokenizer carries a chat template, the messages are rendered with
  ``apply_chat_template(..., add_generation_prompt=True)``; a template that rejects the ``system`` role
  is retried with the system text prepended to the first user message. ``enable_thinking=False`` is
  passed to the template (Qwen3-style templates then open the answer directly, without a reasoning
  block that would eat ``max_tokens`` and break JSON parsing; other templates ignore it). Without a template the plain
  rendering is ``"{role}: {content}"`` per message, messages separated by a blank line, followed by
  ``"\\n\\nassistant:"`` (see :func:`render_plain`).
* **Option tokens.** An option's tokens are the first token of the option's own tokenisation, and the
  first token of its tokenisation with one leading space (``"Yes"`` and ``" Yes"``), when the two
  differ; a first token that decodes to whitespace only (a bare space piece) is skipped. The option's
  probability is the sum over its distinct tokens. Two options that share a token are ambiguous and
  raise :class:`ValueError`.
* **Normalisation.** Probabilities are normalised over the options (a softmax of the per-option
  log-probabilities), so they sum to 1.
* **Data cannot forge the template.** The text of every message is data (a retrieved chunk, an answer);
  where it spells one of the tokenizer's special tokens (``<|im_start|>``, ``</s>``, ...), which the
  rendered prompt's encoding would read as that token, a zero-width space is put after its first
  character (:func:`defuse`), so it is read as text and a chunk cannot close the user's turn and open a
  system one.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

ChatMessages = Sequence[tuple[str, str]]


# --------------------------------------------------------------------------------------------------
# prompts


def as_dicts(messages: ChatMessages) -> list[dict[str, str]]:
    """``((role, content), ...)`` -> ``[{"role": ..., "content": ...}, ...]`` (OpenAI/HF chat form)."""
    return [{"role": str(role), "content": str(content)} for role, content in messages]


def render_plain(messages: ChatMessages) -> str:
    """The rendering used when a tokenizer has no chat template.

    Each message becomes ``"{role}: {content}"``; messages are separated by a blank line and the text
    ends with ``"\\n\\nassistant:"`` so the model continues as the assistant.
    """
    parts = [f"{role}: {content}" for role, content in messages]
    parts.append("assistant:")
    return "\n\n".join(parts)


def _merge_system(messages: ChatMessages) -> list[tuple[str, str]]:
    """Fold system messages into the first user message (for templates without a system role)."""
    system = "\n\n".join(c for r, c in messages if r == "system")
    rest = [(r, c) for r, c in messages if r != "system"]
    if not system:
        return rest
    for i, (role, content) in enumerate(rest):
        if role == "user":
            rest[i] = (role, f"{system}\n\n{content}")
            return rest
    return [("user", system), *rest]


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


# What a zero-width space defuses when the tokenizer cannot say which strings are special (a server
# behind the OpenAI-compatible API): the control tokens of the common chat templates.
COMMON_SPECIAL_TOKENS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>",
                         "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|system|>", "<|user|>",
                         "<|assistant|>", "<|end|>", "<start_of_turn>", "<end_of_turn>", "[INST]", "[/INST]",
                         "<<SYS>>", "<</SYS>>", "<s>", "</s>")
ZERO_WIDTH_SPACE = "\u200b"


def special_tokens(tokenizer: Any) -> tuple[str, ...]:
    """The strings a tokenizer encodes as special tokens (longest first); none for a plain object."""
    found = set(getattr(tokenizer, "all_special_tokens", None) or ())
    for token in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
        if getattr(token, "special", False):
            found.add(str(token))
    return tuple(sorted((t for t in found if len(t) > 1), key=lambda t: (-len(t), t)))


def defuse(messages: ChatMessages, specials: Iterable[str]) -> list[tuple[str, str]]:
    """``messages`` with every occurrence of a special token's string in their text broken by a
    zero-width space after its first character (text without one is returned unchanged)."""
    specials = tuple(specials)
    out = []
    for role, content in messages:
        content = str(content)
        for token in specials:
            if token in content:
                content = content.replace(token, token[0] + ZERO_WIDTH_SPACE + token[1:])
        out.append((role, content))
    return out


def render_chat(tokenizer: Any, messages: ChatMessages) -> str:
    """Render chat messages to the prompt text the model continues (see the module docstring)."""
    messages = defuse(messages, special_tokens(tokenizer))
    if not has_chat_template(tokenizer):
        return render_plain(messages)
    try:
        text = tokenizer.apply_chat_template(
            as_dicts(messages), tokenize=False, add_generation_prompt=True, enable_thinking=False
        )
    except Exception as exc:  # jinja2 TemplateError or a template's raise_exception(...)
        if not any(role == "system" for role, _ in messages) or "system" not in str(exc).lower():
            raise
        text = tokenizer.apply_chat_template(
            as_dicts(_merge_system(messages)),
            tokenize=False,
            add_generation_prompt=True,
            enable_thinking=False,
        )
    if not isinstance(text, str):  # some versions return a list for a single conversation
        text = text[0]
    return text


def encode_chat(tokenizer: Any, messages: ChatMessages) -> list[int]:
    """Token ids of the rendered prompt.

    A chat template writes its own special tokens (BOS included) into the text, so that text is
    encoded without adding any; the plain rendering gets the tokenizer's usual special tokens.
    """
    text = render_chat(tokenizer, messages)
    ids = tokenizer.encode(text, add_special_tokens=not has_chat_template(tokenizer))
    return [int(i) for i in ids]


def prompt_text(messages: ChatMessages) -> str:
    """A canonical text of the messages, independent of any tokenizer (for seeds and errors)."""
    return "\x1e".join(f"{role}\x1f{content}" for role, content in messages)


def describe(messages: ChatMessages, limit: int = 80) -> str:
    """A short human-readable snippet of a prompt for error messages."""
    last = messages[-1][1] if messages else ""
    last = " ".join(last.split())
    return last if len(last) <= limit else last[: limit - 1] + "…"


# --------------------------------------------------------------------------------------------------
# seeds


def derive_seed(seed: int, text: str, index: int = 0) -> int:
    """A 63-bit seed from the request's seed, its prompt and the sample index.

    Stable across processes and machines (sha256, not Python's salted ``hash``), so a request samples
    the same completions whatever batch it lands in.
    """
    digest = hashlib.sha256(f"{int(seed)}\x00{index}\x00{text}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 63) - 1)


# --------------------------------------------------------------------------------------------------
# options


def _first_token(tokenizer: Any, text: str) -> int | None:
    ids = tokenizer.encode(text, add_special_tokens=False)
    if not ids:
        return None
    first = int(ids[0])
    piece = tokenizer.decode([first])
    if not piece.strip():
        return None  # a bare-space piece says nothing about which option follows
    return first


def option_token_ids(tokenizer: Any, options: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """The token ids that stand for each option as the next token (see the module docstring).

    Raises ValueError for an empty option list, duplicate or empty options, an option without a
    usable first token, or two options sharing a token.
    """
    if not options:
        raise ValueError("score_options needs at least one option")
    if len(set(options)) != len(options):
        raise ValueError(f"duplicate answer options: {list(options)}")
    result: dict[str, tuple[int, ...]] = {}
    owner: dict[int, str] = {}
    for option in options:
        if not option.strip():
            raise ValueError(f"answer option {option!r} is empty")
        ids: list[int] = []
        for variant in (option, " " + option.lstrip()):
            tok = _first_token(tokenizer, variant)
            if tok is not None and tok not in ids:
                ids.append(tok)
        if not ids:
            raise ValueError(f"answer option {option!r} has no usable first token")
        for tok in ids:
            if tok in owner:
                piece = tokenizer.decode([tok])
                raise ValueError(
                    f"answer options {owner[tok]!r} and {option!r} start with the same token "
                    f"{piece!r} (id {tok}); next-token scoring cannot tell them apart — "
                    "choose options whose first tokens differ"
                )
            owner[tok] = option
        result[option] = tuple(ids)
    return result


def logsumexp(values: Iterable[float]) -> float:
    vals = [v for v in values if v != -math.inf]
    if not vals:
        return -math.inf
    top = max(vals)
    return top + math.log(sum(math.exp(v - top) for v in vals))


def normalise_logprobs(logprobs: Mapping[str, float]) -> dict[str, float]:
    """Softmax over per-option log-probabilities: probabilities that sum to 1.

    When every option has log-probability -inf the result is uniform (nothing to prefer).
    """
    if not logprobs:
        return {}
    top = max(logprobs.values())
    if top == -math.inf or math.isnan(top):
        return {k: 1.0 / len(logprobs) for k in logprobs}
    weights = {k: math.exp(v - top) if v != -math.inf else 0.0 for k, v in logprobs.items()}
    total = sum(weights.values())
    return {k: w / total for k, w in weights.items()}


def option_probs_from_token_logprobs(
    option_ids: Mapping[str, Sequence[int]],
    token_logprobs: Mapping[int, float],
    floor: float | None = None,
) -> dict[str, float]:
    """Normalised option probabilities from a (possibly partial, top-k) map token id -> log-prob.

    An option none of whose tokens appear in ``token_logprobs`` gets ``floor``; by default the
    smallest log-prob present, an upper bound on its true value since it ranked below every listed
    token. With no listed token at all every option gets the same value, i.e. a uniform result.
    """
    present = [v for v in token_logprobs.values() if v is not None and not math.isnan(v)]
    if floor is None:
        floor = min(present) if present else 0.0
    per_option: dict[str, float] = {}
    for option, ids in option_ids.items():
        found = [token_logprobs[i] for i in ids if i in token_logprobs]
        per_option[option] = logsumexp(found) if found else floor
    return normalise_logprobs(per_option)


def option_probs_from_top_strings(
    options: Sequence[str],
    top_logprobs: Sequence[tuple[str, float]],
    floor: float | None = None,
) -> dict[str, float]:
    """Normalised option probabilities from top-k *token strings* (the OpenAI ``top_logprobs`` form).

    Token ids are unknown here, so the string rule stands in for the id rule: a listed token, its
    leading whitespace removed, counts for an option when it is non-empty and a prefix of exactly one
    option (``"Yes"``, ``" Yes"`` and ``"Y"`` count for "Yes" unless another option also starts with
    "Y"); an option that is a prefix of another raises ValueError. Distinct listed tokens are summed per option; options missing from the list get ``floor``
    as in :func:`option_probs_from_token_logprobs`.
    """
    if len(set(options)) != len(options):
        raise ValueError(f"duplicate answer options: {list(options)}")
    for a in options:
        for b in options:
            if a != b and b.startswith(a):
                raise ValueError(
                    f"answer option {a!r} is a prefix of {b!r}; token strings cannot tell them apart"
                )
    present = [lp for _, lp in top_logprobs if lp is not None and not math.isnan(lp)]
    if floor is None:
        floor = min(present) if present else 0.0
    found: dict[str, dict[str, float]] = {o: {} for o in options}
    for token, lp in top_logprobs:
        if lp is None:
            continue
        stripped = token.lstrip()
        if not stripped:
            continue
        matches = [o for o in options if o.startswith(stripped)]
        if len(matches) == 1:
            found[matches[0]].setdefault(token, lp)
    per_option = {o: logsumexp(v.values()) if v else floor for o, v in found.items()}
    return normalise_logprobs(per_option)
