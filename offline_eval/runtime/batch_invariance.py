"""Kernels that give a sequence the same result whatever the sequences batched with it.

A sample's score must not change with the batch it lands in. In a bfloat16 model every intermediate
value is rounded to 8 bits of mantissa, so two computations that differ in the last bit of one sum
drift apart layer after layer: on the bench judge, P(Yes) for a verdict moved in its second decimal
between a batch of 64 and the same prompt alone, enough to flip thresholded verdicts, and greedy
decoding took another word (measured in docs/measurements.md, "Does a score depend on its batch?").
Two kernels were the cause, found on a CPU (torch 2.13, oneDNN):

* **Attention.** PyTorch's fused attention reduces over the key axis in blocks whose boundaries move
  with the number of keys, so a row's result changes with the left padding a batch adds, with the
  masked keys after a query (a prompt split into a shared prefix and a tail sees fewer of them than
  the same prompt in one pass), and with where a sequence starts in the cache. Here each sequence of
  a batch attends on its own: its real keys are cut out of the padded cache (a view when they are
  contiguous, as they are while decoding), queries are grouped per key/value head (no per-head copy
  of the cache for grouped-query models), scores are computed in the model's dtype with a float32
  softmax — what transformers' eager attention does — and the product with the values again in the
  model's dtype. On this path a query's output depends only on the keys before it: keys masked after
  it contribute exact zeros at the end of the reduction, which these products leave bit for bit
  unchanged.
* **A linear layer on one row.** A bfloat16 matrix product gives every row the same bits whatever
  the number of rows, except for a single row, which oneDNN sends to a kernel that sums in another
  order (seen on the 4864-wide input of the MLP's down projection: one decoding step in four). A
  linear layer handed one row computes two copies of it instead.

On a CPU whose oneDNN has no bfloat16 matrix kernels (AVX2 without AVX-512: ``bfloat16_has_kernels``),
a bfloat16 product is emulated and runs several times slower than a float32 one (docs/measurements.md,
"The CPU judge on a CPU without bfloat16 kernels"); on one whose kernels give a row other bits in
another batch (AMX: ``bfloat16_rows_independent``, checked on the model's own shapes when it loads),
the kernels break the guarantee below. There a bfloat16 model's products compute in
float32 and are rounded to bfloat16, as a bfloat16 kernel rounds them: the inputs are bfloat16 values,
exact in float32, and the products are summed in float32 either way. A float32 product picks its
kernel by the number of rows, so the rows are padded to a multiple of :data:`ROW_BLOCK` with zeros
(and the keys of the attention's scores likewise): every product then has a row count the kernels
treat alike, and a row's bits do not depend on how many rows came with it (a single row included).

So a prompt gives the same bits at batch size 1 or 64, in one pass or as a shared prefix and a tail,
and greedy decoding gives the same tokens (``tests/runtime/test_transformers_judge.py`` checks each layout and
the whole judge). The guarantee needs matrix products whose rows do not interact beyond that: float32
products on MKL pick their kernels by shape and stay within about 1e-7, which is why the judge also
recomputes alone any verdict that sits on its decision boundary. The attention is registered under
its own name with SDPA's mask format, so the model builds the same boolean masks as for ``"sdpa"``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

NAME = "offline_eval_row_exact"

# Two options whose probabilities are closer than this are recomputed with the input alone, so a
# verdict cannot fall on the other side of its boundary because of the batch it was computed in
# (float32 matrix products may differ in the last bits from one batch shape to another).
UNSURE_MARGIN = 1e-4

# Rows of a float32 product are padded to a multiple of this (see the module docstring); the tests
# hold a row's bits in any batch at this block.
ROW_BLOCK = 16

# Set on a model's modules whose attention computes its products in float32 blocks too.
FLOAT32_PRODUCTS = "_offline_eval_float32_products"


def on_boundary(probs: Any, margin: float | None = None) -> bool:
    """Whether the two most likely options (a dict option -> probability, or one probability of a
    two-way choice) are within ``margin`` (default :data:`UNSURE_MARGIN`) of each other: a verdict
    the last bits of a computation could turn."""
    margin = UNSURE_MARGIN if margin is None else margin
    values = [probs, 1.0 - probs] if isinstance(probs, float) else list(probs.values())
    top = sorted(values, reverse=True)[:2]
    return len(top) == 2 and top[0] - top[1] < margin


_registered = False

# The per-row layout (which keys are real, which of them each query must not see) is the same in
# every layer of one forward pass: it is computed once per mask object.
_layout_memo: list[Any] = [None, None]


@functools.lru_cache(maxsize=8)
def _causal_hide(q_len: int, k_len: int, device: Any) -> Any:
    """What a causal mask adds to the scores of the last ``q_len`` of ``k_len`` positions: float32,
    -inf where a query must not see a key, 0 elsewhere. Adding 0 leaves a score's bits as they are and
    adding -inf gives what filling it through a boolean mask gives, several times faster."""
    import torch

    return torch.full((q_len, k_len), float("-inf"), device=device).triu(k_len - q_len + 1)


def _row_layouts(mask: Any, batch: int, q_len: int, k_len: int, device: Any) -> list[tuple[Any, Any]]:
    """Per row: the index of its real keys (a slice when they are contiguous) and what to add to its
    ``(q_len, n_keys)`` scores, -inf where a query must not see a key (None when every query sees
    every key; :func:`_causal_hide`).

    A row's real keys are those some query attends to; a padding query that sees nothing is pointed
    at the first key, so no row of the softmax is empty (its output is never read)."""
    import torch

    if mask is None:  # no padding: plain causal attention over every key
        return [(slice(None), _causal_hide(q_len, k_len, device) if q_len > 1 else None)] * batch
    if _layout_memo[0] is mask:
        return _layout_memo[1]
    layouts = []
    for b in range(batch):
        rows = mask[b if mask.shape[0] > 1 else 0, 0]  # (q_len, k_len), True = attend
        at_keys = rows.any(0).nonzero().squeeze(1)
        first, n = int(at_keys[0]) if len(at_keys) else 0, len(at_keys)
        at: Any = slice(first, first + n) if n and int(at_keys[-1]) == first + n - 1 else at_keys
        own = rows[:, at] if isinstance(at, slice) else rows.index_select(1, at)
        if bool(own.all()):
            layouts.append((at, None))
            continue
        own = own.clone()
        own[~own.any(1), 0] = True
        layouts.append((at, torch.zeros(own.shape, device=device).masked_fill_(~own, float("-inf"))))
    _layout_memo[0], _layout_memo[1] = mask, layouts
    return layouts


@dataclass
class PackedRows:
    """Several prompts' tokens run as one sequence (batch size one, no padding): segment ``s`` is
    positions ``spans[s]`` of it and continues ``prefixes[s]``, its own prompt's key/value cache (one
    ``(keys, values)`` pair a layer, batch size one) or None. Handed to the model as the keyword
    ``packed_rows``, which transformers passes down to the attention; each segment then attends to its
    prefix's keys and its own, causally, exactly as its row of a padded batch does. ``layers_seen``
    counts the attention layers that read it, so a caller can tell that the model passed it on."""

    spans: list[tuple[int, int]]
    prefixes: list[Any]
    layers_seen: int = 0
    # The index of a layer computed at each segment's last position only (its keys and values at every
    # position): the last layer, whose other positions nothing reads (:func:`last_layer_at_ends`).
    ends_only_in: int | None = None
    _ends: Any = None
    _hides: dict[tuple[int, int], Any] = field(default_factory=dict)

    def hide(self, q_len: int, k_len: int, device: Any) -> Any:
        """:func:`_causal_hide` for a segment, built once for all the layers of the call."""
        if (q_len, k_len) not in self._hides:
            self._hides[q_len, k_len] = _causal_hide.__wrapped__(q_len, k_len, device)
        return self._hides[q_len, k_len]

    def ends(self, device: Any) -> Any:
        """The segments' last positions, a tensor of indices into the packed sequence."""
        import torch

        if self._ends is None:
            self._ends = torch.tensor([end - 1 for _, end in self.spans], dtype=torch.long, device=device)
        return self._ends


def _attend(query: Any, key: Any, value: Any, hide: Any, float32: bool) -> Any:
    """One sequence's attention: ``query`` (1, heads, q_len, dim), already scaled, over ``key`` and
    ``value`` (1, kv heads, keys, dim), ``hide`` -inf where a query must not see a key (or None);
    returns (q_len, heads, dim). The queries of a key/value head's group run as one product (no
    per-head copy of the keys for grouped-query models); scores in the model's dtype, softmax in
    float32, as transformers' eager attention computes them."""
    import torch

    _, heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    groups = heads // kv_heads
    q = query.reshape(1, kv_heads, groups * q_len, dim)  # query head h = kv head h // groups
    scores = _product(q, key.transpose(-1, -2), float32).view(1, kv_heads, groups, q_len, -1).float()
    if hide is not None:
        scores += hide
    probs = torch.softmax(scores, dim=-1).to(value.dtype)
    rows = _blocked_product(probs.view(1, kv_heads, groups * q_len, -1), value, float32)
    return rows.view(heads, q_len, dim).transpose(0, 1)


def row_exact_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                        scaling: float | None = None, dropout: float = 0.0, packed_rows: PackedRows | None = None,
                        **kwargs: Any) -> tuple[Any, None]:
    """``(batch, q_len, heads, head_dim)`` attention output, as transformers' attention functions
    return, each row computed as if it were alone (see the module docstring), or with ``packed_rows``
    each segment of the one packed row."""
    import torch

    batch, heads, q_len, dim = query.shape
    k_len = key.shape[2]
    scale = scaling if scaling is not None else dim ** -0.5
    out = query.new_empty((batch, q_len, heads, dim))
    float32 = getattr(module, FLOAT32_PRODUCTS, False)
    scaled = query * scale  # like eager attention's scaled scores; exact when the scale is a power of 2
    if packed_rows is not None:
        packed_rows.layers_seen += 1
        layer = module.layer_idx
        ends_only = packed_rows.ends_only_in == layer
        if ends_only:  # the other positions' outputs are never read: zeros
            out.zero_()
        for (start, end), prefix in zip(packed_rows.spans, packed_rows.prefixes):
            k, v = key[:, :, start:end], value[:, :, start:end]
            if prefix is not None:
                k, v = torch.cat([prefix[layer][0], k], dim=2), torch.cat([prefix[layer][1], v], dim=2)
            first = end - 1 if ends_only else start  # a segment's last query sees all its keys
            own = end - first
            hide = packed_rows.hide(own, k.shape[2], query.device) if own > 1 else None
            out[0, first:end] = _attend(scaled[:, :, first:end], k, v, hide, float32)
        return out, None
    if attention_mask is not None and attention_mask.dtype != torch.bool:
        raise TypeError(f"{NAME} expects a boolean attention mask, got {attention_mask.dtype}")
    layouts = _row_layouts(attention_mask, batch, q_len, k_len, query.device)
    if q_len == 1 and batch > 1 and query.dtype == torch.bfloat16 and not float32:
        gathered = _one_query_layout(attention_mask, layouts, k_len, query.device)
        if gathered is not None:  # a decoding step: all rows at once, each over its own keys
            return _attend_one_query_each(scaled, key, value, *gathered), None
    for b, (at, hide) in enumerate(layouts):
        k = key[b:b + 1, :, at] if isinstance(at, slice) else key[b:b + 1].index_select(2, at)
        v = value[b:b + 1, :, at] if isinstance(at, slice) else value[b:b + 1].index_select(2, at)
        out[b] = _attend(scaled[b:b + 1], k, v, hide, float32)
    return out, None


_one_query_memo: list[Any] = [None, None]


def _one_query_layout(mask: Any, layouts: list[tuple[Any, Any]], k_len: int, device: Any) -> tuple[Any, Any] | None:
    """For a decoding step (one query a row, each row's keys one contiguous run of the cache): the index
    that gathers each row's keys to the front of ``width`` slots (``width`` a multiple of
    :data:`KEY_BLOCK`), and what to add to the scores: ``(rows, 1, 1, width)`` float32, -inf at the slots
    that hold none of them (they read the row's first key: finite, weighted 0), 0 elsewhere (adding 0
    leaves a score's bits as they are; cheaper than filling through a mask). None when a row's keys are
    not one run. Built once a forward pass (every layer has the same layout)."""
    import torch

    if mask is not None and _one_query_memo[0] is mask:
        return _one_query_memo[1]
    starts, counts = [], []
    for at, hide in layouts:
        if hide is not None or not isinstance(at, slice):
            return None
        start = at.start or 0
        starts.append(start)
        counts.append((k_len if at.stop is None else at.stop) - start)
    width = -(-max(counts) // KEY_BLOCK) * KEY_BLOCK
    slots = torch.arange(width, device=device)[None, :]
    first = torch.tensor(starts, device=device)[:, None]
    empty = slots >= torch.tensor(counts, device=device)[:, None]
    hide = torch.zeros(empty.shape, dtype=torch.float32, device=device).masked_fill_(empty, float("-inf"))
    gathered = (torch.where(empty, first, (first + slots).clamp(max=k_len - 1)), hide[:, None, None, :])
    if mask is not None:
        _one_query_memo[0], _one_query_memo[1] = mask, gathered
    return gathered


def _attend_one_query_each(scaled: Any, key: Any, value: Any, index: Any, hide: Any) -> Any:
    """A decoding step's attention for all rows in one set of products: ``scaled`` (rows, heads, 1, dim)
    over each row's keys gathered to the front of a whole number of :data:`KEY_BLOCK` slots
    (:func:`_one_query_layout`), the empty slots masked. Each row gets the bits :func:`_attend` gives it
    alone: its scores are the same dot products, the masked slots come after its keys (exact zeros at
    the end of the softmax's sums), and the values are summed in the same blocks counted from its first
    key (a block of empty slots adds exact zeros). Returns (rows, 1, heads, dim)."""
    import torch

    rows, heads, _, dim = scaled.shape
    kv_heads, k_len, width = key.shape[1], key.shape[2], index.shape[1]
    # each (row, head)'s keys are k_len consecutive vectors: take whole vectors, not single numbers
    at = (torch.arange(rows * kv_heads, device=index.device).view(rows, kv_heads, 1) * k_len
          + index[:, None, :]).view(-1)
    keys = key.reshape(-1, dim).index_select(0, at).view(rows, kv_heads, width, dim)
    values = value.reshape(-1, dim).index_select(0, at).view(rows, kv_heads, width, dim)
    q = scaled.reshape(rows, kv_heads, heads // kv_heads, dim)  # query head h = kv head h // groups
    scores = torch.matmul(q, keys.transpose(-1, -2)).float() + hide
    probs = torch.softmax(scores, dim=-1).to(values.dtype)
    return _blocked_product(probs, values).reshape(rows, 1, heads, dim)


# The parts of a pre-norm decoder layer (Llama, Mistral, Qwen2 and their like): the only layers
# :func:`last_layer_at_ends` computes in part.
PRE_NORM_LAYER = frozenset({"self_attn", "mlp", "input_layernorm", "post_attention_layernorm"})


def last_layer_at_ends(model: Any) -> bool:
    """Let a packed forward call (:class:`PackedRows` with ``ends_only_in`` set to the last layer's
    index) compute the model's last decoder layer at each segment's last position only: its keys and
    values at every position (the cache a later row continues), its attention, MLP and residual stream
    at the positions whose output is read. Every other position's work in that layer is wasted on a
    verdict or a prefix: about one layer in the model's depth. A row's result keeps its bits (the rows of
    these products do not interact; the attention of one query over all a segment's keys is the last
    row of the segment's). Only for pre-norm layers made of :data:`PRE_NORM_LAYER`; returns whether the
    last layer takes it."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    layers = getattr(decoder, "layers", None)
    if not layers:
        return False
    last = layers[-1]
    attention = getattr(last, "self_attn", None)
    if {name for name, _ in last.named_children()} != PRE_NORM_LAYER or not hasattr(attention, "layer_idx"):
        return False
    whole = last.forward

    def at_ends(hidden_states: Any, *args: Any, **kwargs: Any) -> Any:
        packed = kwargs.get("packed_rows")
        if args or packed is None or packed.ends_only_in != attention.layer_idx:
            return whole(hidden_states, *args, **kwargs)
        attended, _ = attention(hidden_states=last.input_layernorm(hidden_states), **kwargs)
        ends = packed.ends(hidden_states.device)
        state = hidden_states[:, ends] + attended[:, ends]
        return state + last.mlp(last.post_attention_layernorm(state))

    last.forward = at_ends
    return True


# Keys per block of the product of attention weights and values (see _blocked_product).
KEY_BLOCK = 512


def _padded(x: Any, dim: int) -> Any:
    """``x`` (float32) with zeros appended along ``dim`` (-1 or -2) to a multiple of :data:`ROW_BLOCK`."""
    import torch

    pad = -x.shape[dim] % ROW_BLOCK
    if not pad:
        return x
    return torch.nn.functional.pad(x, (0, pad) if dim == -1 else (0, 0, 0, pad))


def _product(a: Any, b: Any, float32: bool) -> Any:
    """``a @ b`` in their dtype; with ``float32``, computed in float32 with the rows of ``a`` and the
    columns of ``b`` padded to a multiple of :data:`ROW_BLOCK` (a float32 product picks its kernel by
    those counts) and rounded back, as a bfloat16 kernel rounds its float32 sums."""
    import torch

    if not float32:
        return torch.matmul(a, b)
    rows, cols = a.shape[-2], b.shape[-1]
    return torch.matmul(_padded(a.float(), -2), _padded(b.float(), -1))[..., :rows, :cols].to(a.dtype)


def _blocked_product(probs: Any, values: Any, float32: bool = False) -> Any:
    """``probs @ values`` summed over the keys in blocks of :data:`KEY_BLOCK` counted from the
    sequence's first key, each block padded with zeros to its full size, the blocks' products added
    in float32 in order. A matrix product's summation order depends on its inner length: a query
    that sees 200 keys, computed once beside 130 keys masked after it (the prompt in one pass) and once
    with none (its shared prefix run alone), gave other bits (seen on the tiny judge's prompts). With every block the same length, the keys masked after a query are exact zeros in
    blocks of the same shape, and the query's result does not depend on how many follow it."""
    import torch

    n = probs.shape[-1]
    blocks = -(-n // KEY_BLOCK)
    pad = blocks * KEY_BLOCK - n
    if pad:
        probs = torch.nn.functional.pad(probs, (0, pad))
        values = torch.nn.functional.pad(values, (0, 0, 0, pad))
    if blocks == 1:
        return _product(probs, values, float32)
    total = None
    for start in range(0, blocks * KEY_BLOCK, KEY_BLOCK):
        part = _product(probs[..., start:start + KEY_BLOCK], values[..., start:start + KEY_BLOCK, :], float32).float()
        total = part if total is None else total + part
    return total.to(values.dtype)


def _two_row_forward(linear: Any) -> Any:
    import torch

    forward = linear.forward

    def two_rows(x: Any) -> Any:
        if x.numel() != x.shape[-1]:
            return forward(x)
        # One row: compute two copies, so the kernel is the one every batch gets.
        return forward(torch.cat([x.reshape(1, -1)] * 2))[:1].reshape(*x.shape[:-1], -1)

    return two_rows


def bfloat16_has_kernels() -> bool:
    """Whether this CPU's oneDNN has bfloat16 matrix kernels (AVX-512 and later; AMX and AVX512-BF16
    compute them in hardware). Without them a bfloat16 product is emulated."""
    import torch

    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN: leave the model as it is
        return True


def bfloat16_rows_independent(weights: list[Any]) -> bool:
    """Whether this CPU's bfloat16 matrix products give a row the same bits whatever the number of rows
    beside it (two or more: one row is :func:`_one_row`'s), for each shape of ``weights`` (one weight per
    shape). oneDNN's AMX kernels, for one, block the rows by their count, so a row's sums change with
    its batch; the check multiplies the first rows of one random input by each weight at a few row
    counts and compares their bits."""
    import torch

    generator = torch.Generator().manual_seed(0)
    for weight in weights:
        x = torch.randn(33, weight.shape[1], generator=generator).to(torch.bfloat16)
        first = torch.nn.functional.linear(x[:2], weight)
        if any(not torch.equal(torch.nn.functional.linear(x[:rows], weight)[:2], first) for rows in (3, 8, 17, 33)):
            return False
    return True


def float32_matmuls_pay(model: Any) -> bool:
    """Whether a model's linear layers should compute in float32 blocks (:func:`_float32_block_forward`):
    a bfloat16 model on a CPU without bfloat16 kernels, or whose bfloat16 products change a row's bits
    with the rows beside it (the blocks pad the rows, so each row's bits are its own)."""
    import torch

    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    if not (weights and weights[0].dtype == torch.bfloat16 and weights[0].device.type == "cpu"):
        return False
    shapes = {tuple(w.shape): w for w in weights}
    return not bfloat16_has_kernels() or not bfloat16_rows_independent(list(shapes.values()))


def _float32_block_forward(linear: Any, tied: bool) -> Any:
    """A bfloat16 linear layer computed in float32, its rows padded to a multiple of :data:`ROW_BLOCK`,
    the output rounded to bfloat16. Its weight is kept in float32 (twice the memory of that layer); a
    weight shared with another module (tied embeddings) stays as it is beside a float32 copy."""
    import torch

    weight = linear.weight.detach().float()
    if not tied:
        linear.weight = torch.nn.Parameter(weight, requires_grad=False)
    bias = None if linear.bias is None else linear.bias.detach().float()

    def float32_blocks(x: Any) -> Any:
        count = x.numel() // x.shape[-1]
        rows = _padded(x.reshape(count, x.shape[-1]).float(), -2)
        out = torch.matmul(rows.view(-1, ROW_BLOCK, rows.shape[1]), weight.t()).view(-1, weight.shape[0])
        if bias is not None:
            out = out + bias
        return out[:count].to(x.dtype).view(*x.shape[:-1], weight.shape[0])

    return float32_blocks


def use_batch_invariant_kernels(model: Any, float32_matmuls: bool | None = None) -> bool:
    """Switch a model to the attention above and make its linear layers take every single row as two,
    or, with ``float32_matmuls`` (default: :func:`float32_matmuls_pay`), compute in float32 blocks (see
    the module docstring). The attention needs a model running on transformers' SDPA; for any other
    implementation only the linear layers change and False is returned."""
    global _registered
    import torch

    if float32_matmuls is None:
        float32_matmuls = float32_matmuls_pay(model)
    shared = {id(p) for m in model.modules() if not isinstance(m, torch.nn.Linear)
              for p in m.parameters(recurse=False)}
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.forward = (_float32_block_forward(module, id(module.weight) in shared) if float32_matmuls
                              else _two_row_forward(module))
        elif float32_matmuls:
            setattr(module, FLOAT32_PRODUCTS, True)  # read by the attention
    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    if not _registered:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

        AttentionInterface.register(NAME, row_exact_attention)
        AttentionMaskInterface.register(NAME, sdpa_mask)
        _registered = True
    model.set_attn_implementation(NAME)
    return True
