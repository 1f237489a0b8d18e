"""Judge LLM on plain ``transformers``: any local causal LM folder, CPU or one GPU.

Design points (see also :mod:`offline_eval.runtime.chat` for prompt and option rules):

* **Loading** — ``AutoModelForCausalLM``/``AutoTokenizer`` from a local folder only
  (``local_files_only=True``, never ``trust_remote_code``). A path to a ``.gguf`` file loads that file
  through transformers' GGUF support (dequantised to ``dtype``; needs the ``gguf`` and ``accelerate``
  packages, and the GGUF must carry its tokenizer and chat template, as llama.cpp conversions do).
* **Decoding** — an explicit incremental loop with a KV cache over a left-padded batch. Position ids
  are derived from the attention mask, so padding never changes a row's result: greedy output at
  batch 1 equals greedy output inside any batch. The model's ``generation_config`` (repetition
  penalties, default top-k, ...) is deliberately *not* applied: decoding follows ``Sampling`` alone,
  like the vLLM backend (temperature, top_p; no top-k).
* **Greedy** when ``temperature == 0``; a request with ``n > 1`` at temperature 0 gets ``n`` copies of
  its greedy completion (what vLLM and OpenAI-compatible servers return too).
* **Sampling** when ``temperature > 0``: every completion is one row with its own ``torch.Generator``
  seeded from ``sampling.seed``, the prompt and the sample index (:func:`chat.derive_seed`), so a
  request's samples are reproducible and do not depend on which other requests share its batch.
  Rows with different sampling settings share one batch.
* **Stopping** at any EOS id of the tokenizer or the model's generation config, or at ``max_tokens``;
  the text returned is the decoded completion only, special tokens skipped.
* **JSON schema** — there is no constrained decoding here; the schema is ignored and the engine's
  tolerant parser (with its repair retry) handles the output.
* **Context length** — a prompt longer than ``max_model_len`` (default: the model config's
  ``max_position_embeddings``) raises ``ValueError`` naming the request; nothing is silently truncated.
  A completion is cut so prompt + completion fit in ``max_model_len``.
* **Options** — forward passes with ``logits_to_keep=1`` (only the last position's logits are
  materialised); the option tokens' logits, normalised over the options. The option logits are
  recomputed in float32 from the hidden state the output layer received: a bfloat16 logit near 20 is
  rounded to a multiple of 0.125, which turns P(Yes) into a handful of values (0.27, 0.29, 0.35, ...)
  and ties unrelated verdicts. When the recomputation does not match the model's own logits (an
  architecture that rescales them after the output layer), the model's logits are used.
* **Shared prefixes, no padding** — evaluation prompts repeat themselves: every verdict on a
  sample's claims re-reads the same retrieved contexts, every claim extraction the same instructions
  and example. A batch's prompts are grouped by common token prefix; a group's prefix is run once at
  batch size one and its key/value cache shared by the members (the head all of a batch's groups
  share, such as the system turn, is run once, and each group's prefix continues it). The groups'
  prefixes, and then the rest of each prompt, run together across the groups in forward calls of up
  to :data:`TAIL_POSITIONS` positions, so the matrix products hold enough rows to run near full speed.
  For verdicts, and for the prefixes, the rows of a call are *packed*: laid end to end as one
  sequence, each attending to its own prefix and itself only (:class:`~offline_eval.runtime.
  batch_invariance.PackedRows`), so no position is padding. A prompt to decode from runs in buckets of
  similar length, left-padded, and the pieces' caches are stitched into one left-padded batch for
  decoding. The prefixes' caches outlive their batch (:class:`PrefixStore`): a later prompt continues
  the longest beginning it shares with one of them. On a CPU, where prompt processing is
  compute-bound, this is most of the work saved. With the kernels below, results equal the plain
  computation bit for bit in bfloat16. :meth:`TransformersJudge.batch_order` lets the engine put
  prompts that share a prefix into the same batch. Models whose cache is not plain full attention
  (sliding windows) run each batch as one padded pass, and a model whose attention does not take the
  packed rows (checked once at load: :meth:`TransformersJudge._packing_works`) runs them padded.
* **The same bits whatever the batch** (bfloat16 on a CPU): attention computed sequence by sequence
  over its own keys and linear layers that never run on a single row
  (:mod:`offline_eval.runtime.batch_invariance`), so a verdict or a completion does not depend on the
  requests batched with it, on the shared prefixes found among them, or on the batch size. Two
  options closer than ``batch_invariance.UNSURE_MARGIN`` are recomputed with the prompt alone, which
  settles the float32 case too.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from offline_eval.engine.requests import Generate, ScoreOptions
from offline_eval.json_scan import json_value_closed
from offline_eval.runtime import chat
from offline_eval.runtime.batch_invariance import (PackedRows, float32_matmuls_pay, last_layer_at_ends,
                                                   on_boundary, use_batch_invariant_kernels)
from offline_eval.runtime.base import Backend
from offline_eval.runtime.identity import content_fingerprint
from offline_eval.runtime.registry import BackendUnavailable


# Below this many common tokens a shared-prefix pass costs more (an extra forward call, a cache
# copy) than it saves.
MIN_SHARED_PREFIX = 16

# Positions a forward call over prompt tails may hold (packed: the rows' tokens; padded: rows x the
# longest tail): enough rows for the matrix products to run near the CPU's full speed (a product of a
# few dozen rows runs at a fraction of it: docs/measurements.md, "The default faithfulness at 64 rows
# against the start"), while the prefix caches copied to every padded row stay within what a group of
# the batch's prompts sharing the longest prefix would take.
TAIL_POSITIONS = 1024


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def shared_prefix_len(seqs: Sequence[Sequence[int]]) -> int:
    """Tokens common to every sequence, leaving each at least one token of its own (whose logits
    are the ones wanted)."""
    shared = min(len(s) for s in seqs) - 1
    first = seqs[0]
    for seq in seqs[1:]:
        shared = min(shared, common_prefix_len(first, seq))
    return max(0, shared)


def prefix_groups(seqs: Sequence[Sequence[int]], limit: int, min_shared: int = MIN_SHARED_PREFIX) -> list[list[int]]:
    """Partition sequence indices into groups of at most ``limit`` that share a prefix, saving the
    most prompt tokens.

    In lexicographic order, sequences that share a prefix are adjacent and a run's shared prefix is
    the smallest common prefix of neighbours in it; a group of ``g`` sharing ``L`` tokens saves
    ``(g - 1) * L``. A dynamic programme over the sorted order picks the runs with the largest total
    saving (greedy grouping would let one straggler of a finished group drag the next group's long
    shared context down to the system prompt). Runs sharing under ``min_shared`` tokens save
    nothing; their sequences come back as groups of one.
    """
    order = sorted(range(len(seqs)), key=lambda i: list(seqs[i]))
    n = len(order)
    lcp = [common_prefix_len(seqs[order[k]], seqs[order[k + 1]]) for k in range(n - 1)]
    best = [0] * (n + 1)  # best[j]: largest saving over the first j sorted sequences
    cut = [0] * (n + 1)  # where best[j]'s last group starts
    for j in range(1, n + 1):
        best[j], cut[j] = best[j - 1], j - 1  # sequence j-1 alone
        shared = len(seqs[order[j - 1]]) - 1
        for k in range(j - 2, max(-1, j - 1 - limit), -1):  # group = sorted positions k..j-1
            shared = min(shared, lcp[k], len(seqs[order[k]]) - 1)
            if shared < min_shared:
                break
            saving = best[k] + (j - 1 - k) * shared
            if saving > best[j]:
                best[j], cut[j] = saving, k
    groups: list[list[int]] = []
    j = n
    while j > 0:
        groups.append([order[k] for k in range(cut[j], j)])
        j = cut[j]
    return groups[::-1]


def length_buckets(items: Sequence[int], lengths: Sequence[int], slack: float = 1.25,
                   limit: int | None = None) -> list[list[int]]:
    """Split ``items`` into runs of similar length: sorted by length, a run grows while its padded
    size (members x longest) stays within ``slack`` times its real size and, with ``limit``, within
    ``limit`` positions."""
    order = sorted(range(len(items)), key=lambda k: lengths[k])
    buckets: list[list[int]] = []
    total = 0
    for k in order:
        padded = (len(buckets[-1]) + 1) * lengths[k] if buckets else 0
        if buckets and padded <= slack * (total + lengths[k]) and (limit is None or padded <= limit):
            buckets[-1].append(items[k])
            total += lengths[k]
        else:
            buckets.append([items[k]])
            total = lengths[k]
    return buckets


def packs(lengths: Sequence[int], limit: int) -> list[list[int]]:
    """Consecutive runs of indices whose ``lengths`` add up to at most ``limit`` (a longer one alone):
    the rows one packed forward call holds (:class:`~offline_eval.runtime.batch_invariance.PackedRows`)."""
    runs: list[list[int]] = []
    total = 0
    for i, n in enumerate(lengths):
        if runs and total + n <= limit:
            runs[-1].append(i)
            total += n
        else:
            runs.append([i])
            total = n
    return runs


class PrefixStore:
    """Key/value caches (batch size one, one ``(keys, values)`` pair a layer) of prompt prefixes computed
    in earlier batches, the most recently used kept up to ``limit_bytes``. The engine cuts a dataset's
    verdicts into batches: a passage whose verdicts fall into two batches, and the system turn every
    batch begins with, are then computed once for the run, not once a batch."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self._entries: OrderedDict[tuple[int, ...], tuple[list[tuple[Any, Any]], int]] = OrderedDict()
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def longest(self, seq: Sequence[int], end: int) -> tuple[int, list[tuple[Any, Any]] | None]:
        """The most of ``seq[:end]`` a stored prefix begins with: its length and the cache of those
        positions (the first positions of a longer prefix's cache are theirs), ``(0, None)`` when none."""
        best, found = 0, None
        head = seq[:end]
        for key in self._entries:
            n = common_prefix_len(key, head)
            if n > best:
                best, found = n, key
        if found is None:
            return 0, None
        self._entries.move_to_end(found)
        layers = self._entries[found][0]
        if best < len(found):
            layers = [(k[:, :, :best], v[:, :, :best]) for k, v in layers]
        return best, layers

    def put(self, key: tuple[int, ...], layers: list[tuple[Any, Any]]) -> None:
        size = sum(t.numel() * t.element_size() for pair in layers for t in pair)
        if key in self._entries or size > self.limit_bytes:
            return
        self._entries[key] = (layers, size)
        self.bytes += size
        while self.bytes > self.limit_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= dropped


def _cache_is_plain(config: Any) -> bool:
    """Whether this model's cache is one plain full-attention layer per layer, whose tensors can be
    cut and stitched (sliding-window or recurrent layers keep state that cannot: those models run
    each batch as one padded pass)."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    try:
        layers = DynamicCache(config=config).layers
    except Exception:  # an unusual config: take the safe path
        return False
    return all(type(layer) is DynamicLayer for layer in layers)


def _cache_tensors(cache: Any) -> list[tuple[Any, Any]]:
    """(keys, values) per layer of a ``DynamicCache`` (batch, heads, positions, head dim)."""
    return [(layer.keys, layer.values) for layer in cache.layers]


def _cache_from_tensors(layers: Sequence[tuple[Any, Any]]) -> Any:
    from transformers import DynamicCache

    return DynamicCache(ddp_cache_data=layers)


def _left_padded(caches: Sequence[Sequence[tuple[Any, Any]]], width: int, pick: Any) -> list[tuple[Any, Any]]:
    """Several per-layer caches (keys and values of shape (rows, heads, positions, head dim)) as one:
    each left-padded with zeros to ``width`` positions, stacked by rows, and the rows ``pick`` taken
    (an index tensor: the stacked rows in the order wanted, a row picked as often as it is wanted)."""
    import torch

    def stacked(parts: list[Any]) -> Any:
        parts = [t if t.shape[-2] == width else torch.nn.functional.pad(t, (0, 0, width - t.shape[-2], 0))
                 for t in parts]
        return (parts[0] if len(parts) == 1 else torch.cat(parts)).index_select(0, pick)

    return [(stacked([cache[layer][0] for cache in caches]), stacked([cache[layer][1] for cache in caches]))
            for layer in range(len(caches[0]))]


def _left_aligned(cache: Any, mask: Any) -> tuple[Any, Any]:
    """The cache and mask with each row's real positions moved to the end, in order.

    A batch stitched from a shared prefix and tails reads ``[padding][prefix][padding][tail]``; once
    the padding is all on the left, each row's keys are one contiguous run, which the attention reads
    in place at every decoding step (:mod:`offline_eval.runtime.batch_invariance`)."""
    import torch

    if bool((mask[:, 1:] >= mask[:, :-1]).all()):
        return cache, mask
    order = torch.sort(mask, dim=1, stable=True).indices  # padding (0) first, real positions in order
    layers = []
    for keys, values in _cache_tensors(cache):
        index = order[:, None, :, None].expand(-1, keys.shape[1], -1, keys.shape[3])
        layers.append((keys.gather(2, index), values.gather(2, index)))
    return _cache_from_tensors(layers), mask.gather(1, order)


class _Prefill(NamedTuple):
    logits: Any  # (B, vocab), last position, model dtype
    hidden: Any  # (B, hidden): what the output layer received at the last position
    cache: Any
    mask: Any
    positions: Any


@dataclass
class PrefillWork:
    """What the judge's prompt processing did, by request kind (``generate`` or ``score_options``):
    the tokens of the prompts it was given, the tokens it ran through the model (a shared prefix once per
    group), the positions it ran (padding included), its forward calls and their seconds; and the tokens
    decoded one step at a time while generating. Read by ``benchmarks/judge_work.py``."""

    prompt_tokens: Counter = field(default_factory=Counter)
    computed_tokens: Counter = field(default_factory=Counter)
    padded_tokens: Counter = field(default_factory=Counter)
    forward_calls: Counter = field(default_factory=Counter)
    seconds: Counter = field(default_factory=Counter)
    decoded_tokens: int = 0  # tokens fed back while generating (one per row and step)
    decode_seconds: float = 0.0

    def shared_share(self, kind: str) -> float:
        """The share of ``kind``'s prompt tokens served from a shared prefix instead of computed."""
        asked = self.prompt_tokens[kind]
        return 1.0 - self.computed_tokens[kind] / asked if asked else 0.0


@dataclass
class _Row:
    """One sequence to decode: a prompt, a token budget and (when sampling) its own seed."""

    request: int
    ids: list[int]
    limit: int
    temperature: float
    top_p: float
    seed: int | None  # None: greedy
    stop_at_json_end: bool = False  # a schema request ends when its JSON value closes


class TransformersJudge(Backend):
    """Judge backend on a local Hugging Face causal LM (see the module docstring)."""

    def __init__(self, path: str, device: str = "cpu", batch_size: int = 8, dtype: str = "auto",
                 max_model_len: int | None = None, max_new_tokens: int | None = None, share_prefixes: bool = True,
                 float32_matmuls: bool | None = None, prefix_store_mb: int = 256) -> None:
        """``max_new_tokens`` caps every request's ``max_tokens`` (for small, slow CPU judges);
        ``share_prefixes=False`` computes every prompt in full (see the module docstring);
        ``prefix_store_mb``: memory for the prompt prefixes kept from one batch to the next
        (:class:`PrefixStore`; 0 keeps none);
        ``float32_matmuls``: a bfloat16 model computes its products in float32 (default: on a CPU without
        bfloat16 kernels, several times faster there; ``batch_invariance``). Its identity says so."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from offline_eval.offline import enforce_offline

        enforce_offline()
        self.set_batch_size(batch_size)
        source = Path(path).expanduser()
        if not source.exists():
            raise FileNotFoundError(f"judge model not found: {source} (a local folder or .gguf file)")
        load_from: Path = source
        extra: dict[str, Any] = {}
        if source.is_file():
            if source.suffix.lower() != ".gguf":
                raise ValueError(f"judge model path {source} is a file but not a .gguf file")
            load_from, extra = source.parent, {"gguf_file": source.name}
            import importlib.util

            missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
            if missing:
                raise BackendUnavailable(
                    f"loading the GGUF judge {source.name} needs the package(s) {', '.join(missing)}: "
                    f"pip install {' '.join(missing)}"
                )

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        self.dtype = self._resolve_dtype(dtype, self.device)

        self.tokenizer = AutoTokenizer.from_pretrained(
            str(load_from), local_files_only=True, trust_remote_code=False, **extra
        )
        self.model = AutoModelForCausalLM.from_pretrained(
            str(load_from),
            local_files_only=True,
            trust_remote_code=False,
            dtype=self.dtype,
            **extra,
        )
        self.model.to(self.device)
        self.model.eval()
        wanted = float32_matmuls_pay(self.model) if float32_matmuls is None else float32_matmuls
        self.float32_matmuls = bool(wanted) and self.model.dtype == torch.bfloat16
        row_exact = use_batch_invariant_kernels(self.model, self.float32_matmuls)
        self._head = self.model.get_output_embeddings()
        self._head_input: Any = None  # set by the hook on every forward pass
        if self._head is not None:
            self._head.register_forward_pre_hook(self._remember_head_input)

        text_config = self.model.config.get_text_config()
        self.max_model_len: int | None = max_model_len or getattr(
            text_config, "max_position_embeddings", None
        )
        self.max_new_tokens = max_new_tokens
        self.share_prefixes = share_prefixes
        self.prefixes = PrefixStore(max(0, int(prefix_store_mb)) << 20)
        self._ragged = _cache_is_plain(self.model.config)
        self.eos_ids = self._eos_ids()
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = min(self.eos_ids) if self.eos_ids else 0
        self.pad_id = int(pad)
        dtype_name = str(self.model.dtype).removeprefix("torch.")
        products = {"matmuls": "float32"} if self.float32_matmuls else {}  # they round otherwise: cached apart
        self.identify({"main": content_fingerprint(source)}, {"dtype": dtype_name, **products})
        self._option_cache: dict[tuple[str, ...], dict[str, tuple[int, ...]]] = {}
        self.work = PrefillWork()
        self._choose_packing(row_exact)

    # ------------------------------------------------------------------------------------------
    # setup helpers

    def _choose_packing(self, row_exact: bool) -> None:
        """Whether rows run packed (:meth:`_packing_works`, checked with the last layer at the rows'
        ends where the model allows it; without it if that fails)."""
        self._layers = self.model.config.get_text_config().num_hidden_layers
        can_pack = self._ragged and row_exact and self._head is not None
        self.last_layer_at_ends = can_pack and last_layer_at_ends(self.model)
        self.packing = can_pack and self._packing_works()
        if self.last_layer_at_ends and not self.packing:
            self.last_layer_at_ends = False
            self.packing = self._packing_works()

    @classmethod
    def _resolve_dtype(cls, dtype: str, device: Any) -> Any:
        """"auto" is float32 on CPU (fast and exact there) and the checkpoint's own dtype on a GPU."""
        import torch

        if not isinstance(dtype, str):
            return dtype
        name = cls.dtype_name(dtype)
        if name == "auto":
            return torch.float32 if device.type == "cpu" else "auto"
        return getattr(torch, name)

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (self.tokenizer.eos_token_id, getattr(self.model.generation_config, "eos_token_id", None)):
            if source is None:
                continue
            if isinstance(source, int):
                ids.add(source)
            else:
                ids.update(int(i) for i in source)
        return ids

    def _remember_head_input(self, module: Any, args: tuple[Any, ...]) -> None:
        self._head_input = args[0]

    def _last_hidden(self) -> Any:
        return None if self._head_input is None else self._head_input[:, -1, :]

    def _option_logits(self, hidden: Any, logits: Any, token_ids: Sequence[int]) -> Any:
        """float32 logits ``(B, len(token_ids))`` of these tokens, from the output layer's input.

        Falls back to the model's (rounded) logits when the two disagree by more than rounding:
        a model that rescales or caps logits after the output layer."""
        import torch

        index = torch.tensor(list(token_ids), dtype=torch.long, device=logits.device)
        coarse = logits.index_select(1, index).float()
        if hidden is None or getattr(self._head, "weight", None) is None:
            return coarse
        weight = self._head.weight.detach().index_select(0, index).float()
        # One dot product per (row, token): a float32 matrix product picks its kernel by its shape,
        # and a row's logits must depend neither on the rows batched with it nor on the other
        # requests' option tokens.
        exact = torch.tensor([[float(torch.dot(row, w)) for w in weight] for row in hidden.detach().float()],
                             dtype=torch.float32, device=weight.device)
        bias = getattr(self._head, "bias", None)
        if bias is not None:
            exact = exact + bias.index_select(0, index).float()
        if not torch.allclose(exact, coarse, rtol=0.02, atol=0.25):
            return coarse
        return exact

    def _options(self, options: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
        if options not in self._option_cache:
            self._option_cache[options] = chat.option_token_ids(self.tokenizer, options)
        return self._option_cache[options]

    def _encode(self, index: int, messages: chat.ChatMessages, room: int) -> list[int]:
        """Prompt ids; ValueError when fewer than ``room`` positions are left after it."""
        ids = chat.encode_chat(self.tokenizer, messages)
        if self.max_model_len is not None and len(ids) + room > self.max_model_len:
            raise ValueError(
                f"request {index}: prompt of {len(ids)} tokens does not fit max_model_len="
                f"{self.max_model_len} (prompt ends: {chat.describe(messages)!r}); "
                "shorten the contexts or raise max_model_len"
            )
        return ids

    def _pad(self, seqs: Sequence[list[int]]) -> tuple[Any, Any, Any]:
        """Left-padded ids, attention mask and mask-derived position ids."""
        import torch

        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, seq in enumerate(seqs):
            if seq:
                ids[i, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
                mask[i, width - len(seq) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        return ids.to(self.device), mask.to(self.device), positions.to(self.device)

    def _prefill(self, seqs: Sequence[list[int]], keep_cache: bool, kind: str) -> _Prefill:
        """Run a batch of prompts; returns the last position's logits ``(B, vocab)`` and hidden state
        and, when ``keep_cache``, the key/value cache, attention mask and position ids to decode from.

        Prompts are grouped by shared prefix (:func:`prefix_groups`); a group's prefix is computed
        once at batch size one, continuing the longest prefix of it computed before (the head all
        groups share, or a prefix of an earlier batch kept in :attr:`prefixes`), and its cache copied
        to each member (:meth:`_sharing_plan`). The tails (the whole prompt for prompts that share
        nothing) of all groups run together in calls of up to :data:`TAIL_POSITIONS` positions, each
        row continuing its own group's prefix. A call's rows are packed into one sequence
        (:meth:`_packed`); with ``keep_cache`` (decoding's prompts) each row's own cache, its prefix and
        its tail, is then left-padded to the longest row's (:meth:`_stitched_prefixes`). A judge that
        cannot pack runs them in buckets of similar length, left-padded (:meth:`_continued`), and the
        pieces' caches are left-padded to one width: each row reads ``[padding][prefix][padding][tail]``
        with the padding masked. Either way positions count real tokens only, so a row's result does
        not depend on the rows beside it.
        The work is counted in :attr:`work` under ``kind``.
        """
        started = time.perf_counter()
        try:
            return self._prefill_pieces(seqs, keep_cache, kind)
        finally:
            self.work.prompt_tokens[kind] += sum(len(seq) for seq in seqs)
            self.work.seconds[kind] += time.perf_counter() - started

    def _forward(self, kind: str, input_ids: Any, computed: int, **kwargs: Any) -> Any:
        """One forward pass of the model over ``input_ids``, of which ``computed`` are real tokens."""
        self.work.forward_calls[kind] += 1
        self.work.computed_tokens[kind] += computed
        self.work.padded_tokens[kind] += int(input_ids.numel())
        return self.model(input_ids=input_ids, **kwargs)

    def _prefill_pieces(self, seqs: Sequence[list[int]], keep_cache: bool, kind: str) -> _Prefill:
        import torch

        if not self._ragged:  # one padded forward pass (see _cache_is_plain)
            ids, mask, positions = self._pad(seqs)
            out = self._forward(kind, ids, sum(len(seq) for seq in seqs), attention_mask=mask,
                                position_ids=positions, use_cache=keep_cache, logits_to_keep=1)
            return _Prefill(out.logits[:, -1, :], self._last_hidden(),
                            out.past_key_values if keep_cache else None, mask, positions)
        # A prompt alone is computed in one pass: that is the computation a verdict on its decision
        # boundary is settled by (score_options), and per-row mode's.
        if self.share_prefixes and len(seqs) > 1:
            plan = self._sharing_plan(kind, seqs)
        else:
            plan = [(list(range(len(seqs))), 0, None)]
        # The groups' prefixes first (together: _prefix_caches); then the tails of all groups, cut by
        # length, not by group, into calls of up to TAIL_POSITIONS positions: a matrix product of a few
        # dozen rows runs at a fraction of the speed of one of several hundred.
        caches = self._prefix_caches(kind, [(seqs[group[0]], shared, known) for group, shared, known in plan])
        prefix_of = [(0, None)] * len(seqs)  # each row's prefix: (length, per-layer cache or None)
        for (group, shared, _), cache in zip(plan, caches):
            for i in group:
                prefix_of[i] = (shared, cache)
        tails = [len(seq) - prefix[0] for seq, prefix in zip(seqs, prefix_of)]
        if self.packing:  # the tails run packed; a cache to decode from is stacked from the rows' own
            outs = [self._packed(kind, [(seqs[i][prefix_of[i][0]:], prefix_of[i]) for i in run], keep_cache)
                    for run in packs(tails, TAIL_POSITIONS)]
            logits = torch.cat([logits for logits, _, _ in outs])
            hidden = torch.cat([hidden for _, hidden, _ in outs])
            if not keep_cache:
                return _Prefill(logits, hidden, None, None, None)
            # each row's own cache left-padded to the longest: its keys one run at the end (_left_aligned)
            owns = [own for _, _, caches in outs for own in caches]
            cache, mask = self._stitched_prefixes([(len(seq), own) for seq, own in zip(seqs, owns)])
            last = torch.tensor([[len(seq) - 1] for seq in seqs], dtype=torch.long, device=self.device)
            return _Prefill(logits, hidden, cache, mask, last)
        pieces: list[tuple[list[int], Any, Any, Any, Any, Any]] = []  # rows, logits, cache, mask, positions, hidden
        for bucket in length_buckets(list(range(len(seqs))), tails, limit=TAIL_POSITIONS):
            out, mask, positions = self._continued(
                kind, [(seqs[i][prefix_of[i][0]:], prefix_of[i]) for i in bucket], keep_cache)
            pieces.append((bucket, out.logits[:, -1, :], out.past_key_values if keep_cache else None,
                           mask, positions[:, -1:], self._last_hidden()))
        rows = [i for piece in pieces for i in piece[0]]
        if len(pieces) == 1 and rows == sorted(rows):
            _, logits, cache, mask, positions, hidden = pieces[0]
            return _Prefill(logits, hidden, cache, mask, positions)
        back = torch.tensor(sorted(range(len(rows)), key=rows.__getitem__), device=self.device)
        logits = torch.cat([p[1] for p in pieces]).index_select(0, back)
        hidden = torch.cat([p[5] for p in pieces]).index_select(0, back)
        if not keep_cache:
            return _Prefill(logits, hidden, None, None, None)
        width = max(p[3].shape[1] for p in pieces)
        layers = _left_padded([_cache_tensors(p[2]) for p in pieces], width, back)
        mask = torch.cat([torch.nn.functional.pad(p[3], (width - p[3].shape[1], 0)) for p in pieces])
        positions = torch.cat([p[4] for p in pieces])
        return _Prefill(logits, hidden, _cache_from_tensors(layers), mask.index_select(0, back),
                        positions.index_select(0, back))

    def _continued(self, kind: str, rows: Sequence[tuple[Sequence[int], tuple[int, Any]]],
                   keep_cache: bool) -> tuple[Any, Any, Any]:
        """One forward call over ``rows`` of ``(tokens, prefix)``, each row's tokens continuing its own
        prefix (length, per-layer cache or None for none): the tokens left-padded to the longest, the
        prefixes too (:meth:`_stitched_prefixes`), the padding masked and positions counting each row's
        real tokens from the end of its prefix. Returns the model's output, the attention mask (prefix
        and tokens) and the tokens' position ids."""
        import torch

        ids, mask, positions = self._pad([tokens for tokens, _ in rows])
        cache = None
        starts = [length for _, (length, _) in rows]
        if max(starts):
            cache, prefix_mask = self._stitched_prefixes([prefix for _, prefix in rows])
            mask = torch.cat([prefix_mask, mask], dim=1)
            positions = positions + torch.tensor(starts, device=self.device)[:, None]
        out = self._forward(kind, ids, sum(len(tokens) for tokens, _ in rows), attention_mask=mask,
                            position_ids=positions, past_key_values=cache, use_cache=keep_cache,
                            logits_to_keep=1)
        return out, mask, positions

    def _packed(self, kind: str, rows: Sequence[tuple[Sequence[int], tuple[int, Any]]],
                keep_cache: bool) -> tuple[Any, Any, list[list[tuple[Any, Any]]] | None]:
        """One forward call over ``rows`` of ``(tokens, prefix)`` packed into a single sequence with no
        padding, each row's tokens continuing its own prefix (length, per-layer cache or None) at the
        positions after it (:class:`PackedRows`). Returns each row's last-position logits and output
        layer input (rows, vocab) and (rows, hidden), and with ``keep_cache`` each row's per-layer
        cache, its prefix's positions followed by its tokens'. The same bits as :meth:`_continued`."""
        import torch

        spans: list[tuple[int, int]] = []
        positions: list[int] = []
        for tokens, (start, _) in rows:
            at = spans[-1][1] if spans else 0
            spans.append((at, at + len(tokens)))
            positions.extend(range(start, start + len(tokens)))
        packed = PackedRows(spans, [cache for _, (_, cache) in rows],
                            ends_only_in=self._layers - 1 if self.last_layer_at_ends else None)
        ids = torch.tensor([[t for tokens, _ in rows for t in tokens]], dtype=torch.long, device=self.device)
        # with the last layer at the rows' ends only, its output is those positions already
        keep = 0 if self.last_layer_at_ends else packed.ends(self.device)
        out = self._forward(kind, ids, ids.shape[1], position_ids=torch.tensor([positions], device=self.device),
                            use_cache=keep_cache, logits_to_keep=keep, packed_rows=packed)
        if packed.layers_seen != self._layers:
            raise RuntimeError(f"the model's attention read the packed rows in {packed.layers_seen} of "
                               f"{self._layers} layers")
        caches = None
        if keep_cache:
            layers = _cache_tensors(out.past_key_values)
            caches = [[(keys[:, :, a:b].clone() if prefix is None else torch.cat([prefix[n][0], keys[:, :, a:b]], 2),
                        values[:, :, a:b].clone() if prefix is None else torch.cat([prefix[n][1], values[:, :, a:b]], 2))
                       for n, (keys, values) in enumerate(layers)]
                      for (a, b), prefix in zip(spans, packed.prefixes)]
        return out.logits[0], self._head_input[0], caches

    def _packing_works(self) -> bool:
        """Whether rows packed into one sequence (:meth:`_packed`) give what the same rows padded side by
        side give (:meth:`_continued`) on this model: its attention must receive the packed rows in
        every layer and its positions come from ``position_ids``. Checked once, on two short prompts
        continuing a shared prefix."""
        import torch

        vocab = self.model.get_input_embeddings().num_embeddings
        head, tails = [1, 2, 3, 4], [[5, 6, 7], [8, 9, 10, 11, 12]]
        if vocab <= max(max(t) for t in tails):
            return False
        with torch.inference_mode():
            try:
                _, _, (prefix,) = self._packed("probe", [(head, (0, None))], keep_cache=True)
                logits, _, _ = self._packed("probe", [(t, (len(head), prefix)) for t in tails], keep_cache=False)
                padded, _, _ = self._continued("probe", [(t, (len(head), prefix)) for t in tails], keep_cache=False)
            except (RuntimeError, TypeError, ValueError, IndexError):
                return False
            finally:
                self.work = PrefillWork()
        return bool(torch.allclose(logits.float(), padded.logits[:, -1, :].float(), rtol=1e-3, atol=1e-3))

    def _stitched_prefixes(self, prefixes: Sequence[tuple[int, Any]]) -> tuple[Any, Any]:
        """The key/value cache a call's rows continue, and the mask of its positions: row ``r`` reads
        ``prefixes[r]`` (length, per-layer cache or None for none), left-padded to the longest of them.
        A cache several rows continue (the head of a batch) is padded once and indexed, not copied
        per row before the index."""
        import torch

        width = max(length for length, _ in prefixes)
        distinct: dict[int, tuple[int, Any]] = {}
        for prefix in prefixes:
            distinct.setdefault(id(prefix[1]), prefix)
        slot = {key: j for j, key in enumerate(distinct)}
        pick = torch.tensor([slot[id(cache)] for _, cache in prefixes], device=self.device)
        mask = torch.zeros((len(prefixes), width), dtype=torch.long, device=self.device)
        for r, (length, _) in enumerate(prefixes):
            mask[r, width - length:] = 1
        like = next(cache for _, cache in distinct.values() if cache is not None)
        none = [(keys[:1, :, :0], values[:1, :, :0]) for keys, values in like]  # no prefix: all padding
        layers = _left_padded([none if cache is None else cache for _, cache in distinct.values()], width, pick)
        return _cache_from_tensors(layers), mask

    def _sharing_plan(self, kind: str, seqs: Sequence[list[int]]) -> list[tuple[list[int], int, Any]]:
        """How a batch's prompts share their prefixes: ``(rows, tokens they share, a known prefix of
        them: (length, cache) or None)`` for each piece. Each group's prefix continues the longest
        prefix already computed, in this batch or an earlier one (:attr:`prefixes`): the head every
        prompt of the batch shares (the system turn) is computed first, so the groups continue it; a
        lone prompt whose passage an earlier batch computed continues that passage; the other lone
        prompts form one piece sharing the head."""
        top = shared_prefix_len(seqs)
        head = (top, self._prefix_layers(kind, seqs[0], top)) if top >= MIN_SHARED_PREFIX else (0, None)
        plan: list[tuple[list[int], int, Any]] = []
        plain: list[int] = []
        for group in prefix_groups(seqs, len(seqs)):
            if len(group) > 1:
                shared = shared_prefix_len([seqs[i] for i in group])
                plan.append((group, max(head[0], shared if shared >= MIN_SHARED_PREFIX else 0), head))
                continue
            stored = self.prefixes.longest(seqs[group[0]], len(seqs[group[0]]) - 1)
            if stored[0] >= head[0] + MIN_SHARED_PREFIX:
                plan.append((group, stored[0], stored))
            else:
                plain.extend(group)
        if plain:
            plan.append((plain, head[0], head))
        return plan

    def _prefix_layers(self, kind: str, seq: Sequence[int], end: int,
                       known: tuple[int, Any] | None = None) -> list[tuple[Any, Any]]:
        """The key/value cache of ``seq[:end]`` (per layer, batch size one); see :meth:`_prefix_caches`."""
        return self._prefix_caches(kind, [(seq, end, known)])[0]

    def _prefix_caches(self, kind: str, wanted: Sequence[tuple[Sequence[int], int, tuple[int, Any] | None]]
                       ) -> list[list[tuple[Any, Any]] | None]:
        """The key/value caches (per layer, batch size one) of ``seq[:end]`` for each ``(seq, end,
        known)``, None where ``end`` is 0. Each is ``known`` (length, cache: a prefix of ``seq`` already
        at hand) when that is all of it, else the longest prefix of it in :attr:`prefixes` or ``known``,
        continued by the tokens after it; those continued run together, in buckets of similar length
        (each row continuing its own cache, as the tails do: :meth:`_continued`), and are stored."""
        caches: list[list[tuple[Any, Any]] | None] = [None] * len(wanted)
        pending: list[tuple[int, int, Any]] = []  # (which, start, cache of seq[:start])
        for which, (seq, end, known) in enumerate(wanted):
            if not end:
                continue
            if known is not None and known[0] == end:
                caches[which] = known[1]
                continue
            start, before = self.prefixes.longest(seq, end)
            if known is not None and start < known[0] <= end:
                start, before = known
            if start == end:
                caches[which] = before
                continue
            pending.append((which, start, before))
        lengths = [wanted[which][1] - start for which, start, _ in pending]
        calls = packs(lengths, TAIL_POSITIONS) if self.packing else length_buckets(
            list(range(len(pending))), lengths, limit=TAIL_POSITIONS)
        for call in calls:
            rows = [pending[j] for j in call]
            pieces = [(wanted[which][0][start:wanted[which][1]], (start, before)) for which, start, before in rows]
            for (which, _, _), own in zip(rows, self._prefix_rows(kind, pieces)):
                seq, end, _ = wanted[which]
                self.prefixes.put(tuple(seq[:end]), own)
                caches[which] = own
        return caches

    def _prefix_rows(self, kind: str, rows: Sequence[tuple[Sequence[int], tuple[int, Any]]]
                     ) -> list[list[tuple[Any, Any]]]:
        """One forward call over ``rows`` of ``(tokens, prefix)`` (packed, or padded where the judge does
        not pack); each row's per-layer cache of its prefix's positions and its tokens', batch size one."""
        if self.packing:
            return self._packed(kind, rows, keep_cache=True)[2]
        out, mask, _ = self._continued(kind, rows, keep_cache=True)
        layers = _cache_tensors(out.past_key_values)
        owns = []
        for r in range(len(rows)):
            real = mask[r].nonzero().squeeze(1)
            owns.append(layers if len(rows) == 1 and len(real) == mask.shape[1] else [
                (keys[r:r + 1].index_select(2, real), values[r:r + 1].index_select(2, real))
                for keys, values in layers])
        return owns

    def batch_order(self, requests: Sequence[Generate | ScoreOptions]) -> list[int]:
        """The order the engine should cut batches in: prompts sharing a prefix side by side (token
        ids sorted lexicographically), so a batch holds whole groups, e.g. all verdicts on one
        sample's contexts."""
        encoded = [chat.encode_chat(self.tokenizer, req.prompt) for req in requests]
        return sorted(range(len(requests)), key=lambda i: encoded[i])

    # ------------------------------------------------------------------------------------------
    # generate

    def generate(self, requests: Sequence[Generate]) -> list[tuple[str, ...]]:
        """One tuple of ``request.sampling.n`` completions per request (schema ignored, see module)."""
        rows: list[_Row] = []
        for index, req in enumerate(requests):
            s = req.sampling
            if s.n < 1:
                raise ValueError(f"request {index}: sampling.n must be >= 1, got {s.n}")
            ids = self._encode(index, req.prompt, room=1 if s.max_tokens > 0 else 0)
            limit = max(0, s.max_tokens)
            if self.max_new_tokens is not None:
                limit = min(limit, self.max_new_tokens)
            if self.max_model_len is not None:
                limit = min(limit, self.max_model_len - len(ids))
            json_stop = req.schema is not None
            if s.temperature <= 0:
                rows.append(_Row(index, ids, limit, 0.0, 1.0, None, json_stop))
            else:
                text = chat.prompt_text(req.prompt)
                for j in range(s.n):
                    seed = chat.derive_seed(s.seed, text, j)
                    rows.append(_Row(index, ids, limit, float(s.temperature), float(s.top_p), seed, json_stop))

        completions: list[list[int]] = []
        for start in range(0, len(rows), self.batch_size):
            completions.extend(self._decode(rows[start : start + self.batch_size]))

        results: list[list[str]] = [[] for _ in requests]
        for row, tokens in zip(rows, completions):
            results[row.request].append(self.tokenizer.decode(tokens, skip_special_tokens=True))
        out: list[tuple[str, ...]] = []
        for req, texts in zip(requests, results):
            if req.sampling.temperature <= 0:
                texts = texts * req.sampling.n
            out.append(tuple(texts))
        return out

    def _decode(self, rows: Sequence[_Row]) -> list[list[int]]:
        """Decode one batch of rows with a KV cache; returns each row's new tokens (EOS excluded)."""
        import torch

        produced: list[list[int]] = [[] for _ in rows]
        active = [i for i, r in enumerate(rows) if r.limit > 0]
        if not active:
            return produced
        steps = max(rows[i].limit for i in active)
        finished = [r.limit <= 0 for r in rows]
        generators = [
            None if r.seed is None else torch.Generator(device=self.device).manual_seed(r.seed)
            for r in rows
        ]
        closers = self._json_closers() if any(r.stop_at_json_end for r in rows) else frozenset()
        with torch.inference_mode():
            logits, _, cache, mask, positions = self._prefill([r.ids for r in rows], keep_cache=True,
                                                              kind="generate")
            if self._ragged:
                cache, mask = _left_aligned(cache, mask)
            alive = list(range(len(rows)))  # batch position -> row; finished rows leave the batch
            for _ in range(steps):
                logits = logits.float()
                chosen = self._choose(logits, [rows[i] for i in alive], [generators[i] for i in alive],
                                      [finished[i] for i in alive])
                keep: list[int] = []  # batch positions still decoding
                for pos, (i, tok) in enumerate(zip(alive, chosen)):
                    if finished[i]:
                        continue
                    if tok in self.eos_ids:
                        finished[i] = True
                        continue
                    produced[i].append(tok)
                    if len(produced[i]) >= rows[i].limit:
                        finished[i] = True
                    elif rows[i].stop_at_json_end and tok in closers and json_value_closed(
                            self.tokenizer.decode(produced[i], skip_special_tokens=True)):
                        finished[i] = True  # what follows a closed JSON value is never read
                    else:
                        keep.append(pos)
                if not keep:
                    break
                if len(keep) < len(alive):
                    # Drop finished rows so the batch shrinks with the work left (no compute spent on
                    # padding rows that wait for the longest answer).
                    index = torch.tensor(keep, dtype=torch.long, device=self.device)
                    cache.batch_select_indices(index)
                    mask, positions = mask[index], positions[index]
                    chosen = [chosen[p] for p in keep]
                    alive = [alive[p] for p in keep]
                feed = torch.tensor([[tok] for tok in chosen], dtype=torch.long, device=self.device)
                mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
                positions = positions[:, -1:] + 1
                started = time.perf_counter()
                out = self.model(
                    input_ids=feed,
                    attention_mask=mask,
                    position_ids=positions,
                    past_key_values=cache,
                    use_cache=True,
                )
                logits, cache = out.logits[:, -1, :], out.past_key_values
                self.work.decoded_tokens += len(chosen)
                self.work.decode_seconds += time.perf_counter() - started
        return produced

    def _json_closers(self) -> frozenset[int]:
        """Ids of the tokens that contain a closing bracket (only those can complete a JSON value)."""
        if not hasattr(self, "_closer_ids"):
            vocab = self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer))))
            self._closer_ids = frozenset(i for i, t in enumerate(vocab) if t and ("}" in t or "]" in t))
        return self._closer_ids

    @staticmethod
    def _choose(logits: Any, rows: Sequence[_Row], generators: Sequence[Any], finished: Sequence[bool]) -> list[int]:
        """Next token per row: argmax for greedy rows, seeded nucleus sampling for the others."""
        import torch

        chosen = logits.argmax(dim=-1).tolist()
        for i, row in enumerate(rows):
            if row.seed is None or finished[i]:
                continue
            probs = torch.softmax(logits[i] / row.temperature, dim=-1)
            if row.top_p < 1.0:
                sorted_p, order = probs.sort(descending=True)
                before = sorted_p.cumsum(0) - sorted_p  # mass strictly above each token
                sorted_p = torch.where(before < row.top_p, sorted_p, torch.zeros_like(sorted_p))
                probs = torch.zeros_like(probs).scatter(0, order, sorted_p)
            chosen[i] = int(torch.multinomial(probs, 1, generator=generators[i]).item())
        return [int(t) for t in chosen]

    # ------------------------------------------------------------------------------------------
    # options

    def score_options(self, requests: Sequence[ScoreOptions]) -> list[dict[str, float]]:
        """P(option) as the next token after the prompt, normalised over the options (see the
        module docstring: option logits in float32; a verdict on its decision boundary is
        recomputed alone)."""
        import torch

        option_ids = [self._options(tuple(req.options)) for req in requests]
        prompts = [self._encode(i, req.prompt, room=0) for i, req in enumerate(requests)]
        order = sorted(range(len(requests)), key=lambda i: prompts[i])  # shared prefixes side by side
        results: list[dict[str, float]] = [{} for _ in requests]

        def score(chunk: list[int]) -> None:
            out = self._prefill([prompts[i] for i in chunk], keep_cache=False, kind="score_options")
            tokens = sorted({t for i in chunk for toks in option_ids[i].values() for t in toks})
            column = {t: c for c, t in enumerate(tokens)}
            rows = self._option_logits(out.hidden, out.logits, tokens).cpu().tolist()
            for i, row in zip(chunk, rows):
                per_option = {option: chat.logsumexp(row[column[t]] for t in toks)
                              for option, toks in option_ids[i].items()}
                results[i] = chat.normalise_logprobs(per_option)

        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start:start + self.batch_size]
                score(chunk)
                for i in chunk if len(chunk) > 1 else ():
                    if on_boundary(results[i]):
                        score([i])
        return results
