"""Decode-step attention for grouped-query models without copying the key/value cache.

transformers' SDPA path expands the cached keys and values of a grouped-query model (Qwen2, Llama 3,
Mistral: several query heads per key/value head) to one copy per query head whenever an attention
mask is given, which a padded batch always has. At a decode step that copy is the cache itself, times
the group size, every layer, every token: on a CPU with a batch of 64 it was most of the step's time.

Here a decode step (one query position) multiplies each key/value head with its group of query heads
directly — queries reshaped to ``(batch, kv_heads, group, head_dim)`` — so the cache is read, never
copied. Every other call (prompt processing, models without grouped heads, float masks it was not
written for) goes to transformers' own SDPA function. Registered under its own name with SDPA's mask
format, so the model builds the same boolean masks as for ``"sdpa"``.
"""

from __future__ import annotations

from typing import Any

NAME = "offline_eval_gqa_sdpa"
_registered = False


def grouped_decode_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                             scaling: float | None = None, dropout: float = 0.0, **kwargs: Any) -> tuple[Any, None]:
    """``(batch, q_len, heads, head_dim)`` attention output, as transformers' attention functions return."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = getattr(module, "num_key_value_groups", 1)
    batch, heads, q_len, dim = query.shape
    mask_ok = attention_mask is None or attention_mask.dtype == torch.bool
    if q_len != 1 or groups <= 1 or not mask_ok or dropout or kwargs.get("position_bias") is not None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    kv_heads = key.shape[1]
    scale = scaling if scaling is not None else dim ** -0.5
    grouped = query.reshape(batch, kv_heads, groups, dim)  # query head h = kv head h // groups
    scores = torch.matmul(grouped, key.transpose(-1, -2)).float() * scale  # (batch, kv_heads, groups, T)
    if attention_mask is not None:  # (batch, 1, 1, T), True = attend
        scores = scores.masked_fill(~attention_mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1).to(value.dtype)
    out = torch.matmul(probs, value)  # (batch, kv_heads, groups, dim)
    return out.reshape(batch, heads, 1, dim).transpose(1, 2).contiguous(), None


def use_grouped_decode_attention(model: Any) -> bool:
    """Switch a model that runs on transformers' SDPA to this attention; False (and no change) for
    any other attention implementation."""
    global _registered
    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    if not _registered:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(NAME, grouped_decode_attention)
        AttentionMaskInterface.register(NAME, sdpa_mask)
        _registered = True
    model.set_attn_implementation(NAME)
    return True
