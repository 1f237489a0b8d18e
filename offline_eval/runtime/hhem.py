"""Vectara HHEM-2.1-Open as a :class:`~offline_eval.runtime.base.Verifier`, without remote code.

The published checkpoint (``vectara/hallucination_evaluation_model``) is a custom
``HHEMv2ForSequenceClassification`` whose only module is ``self.t5``: a transformers
``T5ForTokenClassification`` built from the ``google/flan-t5-base`` config with two labels. Its
``predict()`` formats ``(premise, hypothesis)`` with the prompt below, tokenises with the flan-t5-base
tokenizer (right padding), runs the T5 encoder + linear classifier and returns
``softmax(logits[:, 0, :])[:, 1]``: the probability that the hypothesis is consistent with the premise.

Loading that checkpoint normally needs ``trust_remote_code`` and a Hub download of the flan-t5-base
config and tokenizer. Here the same architecture is built from transformers' own T5 classes, the
weights (state-dict keys prefixed ``t5.`` as published, or unprefixed) are loaded strictly from a
local folder, and every ``from_pretrained`` call passes ``local_files_only=True``.

Length: HHEM has no hard input limit (T5 uses relative positions), but accuracy, memory (attention is
quadratic) and speed all degrade with length, and it was fine-tuned on inputs of a few hundred
tokens. Inputs longer than ``max_length`` tokens (default 512) are therefore windowed: the *premise*
is cut into overlapping token windows, each window is scored with the full hypothesis, and the
claim's probability is the maximum over windows (supported if any window supports it).
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from offline_eval.engine.requests import Classify
from offline_eval.runtime.batch_invariance import on_boundary
from offline_eval.runtime.base import Backend
from offline_eval.runtime.identity import content_fingerprint

log = logging.getLogger(__name__)

#: The HHEM-2.1-Open prompt (``HHEMv2Config.prompt``), with its ``{text1}``/``{text2}`` renamed.
HHEM_PROMPT = (
    "<pad> Determine if the hypothesis is true given the premise?\n\n"
    "Premise: {premise}\n\nHypothesis: {hypothesis}"
)

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
TOKENIZER_FILES = ("tokenizer.json", "spiece.model")
DEFAULT_MAX_LENGTH = 512
# Below this many premise tokens per window, windowing is pointless: score the whole input instead.
MIN_WINDOW_TOKENS = 16
_SENTENCE_END = (".", "!", "?", "\n", "。", "！", "？")
# The encoder's input embedding is tied to the shared embedding in T5EncoderModel; a checkpoint may
# carry either name (safetensors drops duplicates of shared tensors).
_TIED = {
    "transformer.encoder.embed_tokens.weight": "transformer.shared.weight",
}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return data


def _is_t5_config(cfg: dict[str, Any]) -> bool:
    if cfg.get("model_type") in ("t5", "mt5", "umt5"):
        return True
    return "foundation" not in cfg and "d_model" in cfg and "num_heads" in cfg


def _has_tokenizer(folder: Path) -> bool:
    return any((folder / name).is_file() for name in TOKENIZER_FILES)


def _resolve_dtype(name: str, checkpoint_dtype: torch.dtype) -> torch.dtype:
    name = Backend.dtype_name(name)
    if name == "auto":
        # T5 activations overflow in float16; a float16 checkpoint runs in float32 unless asked.
        return torch.float32 if checkpoint_dtype == torch.float16 else checkpoint_dtype
    return getattr(torch, name)


@dataclass(frozen=True)
class _Window:
    request: int  # index of the request it belongs to
    text: str  # the formatted model input
    n_tokens: int


class HHEMVerifier(Backend):
    """HHEM-2.1-Open premise/hypothesis consistency scorer on transformers' T5 classes.

    Args:
        path: local folder with HHEM's weights (``model.safetensors`` or ``pytorch_model.bin``) and
            its ``config.json`` (the published HHEMv2 config naming ``foundation: google/flan-t5-base``,
            or a plain T5 config).
        device: torch device ("cpu", "cuda", "cuda:1", ...; "auto" picks cuda when available).
        batch_size: model inputs (premise windows) per forward pass.
        tokenizer_path: local flan-t5-base folder (its ``config.json`` and tokenizer files). When
            absent, the T5 config and tokenizer are looked up in ``path`` itself, then in
            ``path/flan-t5-base`` (or the subfolder named after the config's ``foundation``).
        max_length: token window of one model input (default 512). Longer inputs are windowed over
            the premise; see the module docstring.
        window_overlap: tokens shared by consecutive premise windows.
        dtype: "auto" (the checkpoint's dtype, float16 raised to float32), "float32", "bfloat16"
            or "float16" (T5 may overflow in float16).
    """

    def __init__(
        self,
        path: str,
        device: str = "cpu",
        batch_size: int = 10,
        tokenizer_path: str | None = None,
        max_length: int | None = None,
        window_overlap: int = 64,
        dtype: str = "auto",
    ) -> None:
        from transformers import T5Config, T5ForTokenClassification

        self.set_batch_size(batch_size)
        if window_overlap < 0:
            raise ValueError(f"window_overlap must be non-negative, got {window_overlap}")
        self.path = Path(path).expanduser().resolve()
        if not self.path.is_dir():
            raise FileNotFoundError(f"HHEM model folder {self.path} does not exist")
        self.max_length = int(max_length) if max_length else DEFAULT_MAX_LENGTH
        self.window_overlap = int(window_overlap)
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)

        config_file = self.path / "config.json"
        if not config_file.is_file():
            raise FileNotFoundError(f"HHEM model folder {self.path} has no config.json")
        hhem_cfg = _read_json(config_file)
        weight_file = next((self.path / n for n in WEIGHT_FILES if (self.path / n).is_file()), None)
        if weight_file is None:
            raise FileNotFoundError(
                f"HHEM model folder {self.path} has no weights ({' or '.join(WEIGHT_FILES)})"
            )
        self.weight_file = weight_file
        foundation = self._foundation_folder(hhem_cfg, tokenizer_path)
        if _is_t5_config(hhem_cfg):
            t5_cfg_dict = hhem_cfg
        elif foundation is not None and (foundation / "config.json").is_file():
            t5_cfg_dict = _read_json(foundation / "config.json")
        else:
            where = foundation if foundation is not None else self.path / "flan-t5-base"
            raise FileNotFoundError(
                f"{config_file} is not a T5 config (it names foundation "
                f"'{hhem_cfg.get('foundation', 'google/flan-t5-base')}') and {where} has no config.json: "
                f"pass tokenizer_path=<local flan-t5-base folder> or copy flan-t5-base there"
            )
        prompt = hhem_cfg.get("prompt")
        if isinstance(prompt, str) and "{text1}" in prompt and "{text2}" in prompt:
            self.prompt = prompt.replace("{text1}", "{premise}").replace("{text2}", "{hypothesis}")
        else:
            self.prompt = HHEM_PROMPT

        tok_dir = self._load_tokenizer(foundation, tokenizer_path)

        state = self._read_state_dict(weight_file)
        ckpt_dtype = next((t.dtype for t in state.values() if t.is_floating_point()), torch.float32)
        self.dtype = _resolve_dtype(dtype, ckpt_dtype)

        t5_cfg_dict = {k: v for k, v in t5_cfg_dict.items() if k not in ("id2label", "label2id")}
        config = T5Config.from_dict(t5_cfg_dict)
        config.num_labels = 2
        model = T5ForTokenClassification(config)
        self._load_strict(model, state, weight_file)
        del state
        self.model = model.to(device=self.device, dtype=self.dtype).eval()

        # Windowing and dtype change the scores, so they are part of the model's identity.
        dtype_name = str(self.dtype).removeprefix("torch.")
        folders = {"main": content_fingerprint(self.path)}
        if tok_dir != self.path:
            folders["tokenizer_path"] = content_fingerprint(tok_dir)
        self.identify(folders, {"max_length": self.max_length, "window_overlap": self.window_overlap,
                                "dtype": dtype_name})

    # ----------------------------------------------------------------------------- loading
    def _load_tokenizer(self, foundation: Path | None, tokenizer_path: str | None) -> Path:
        """Load the tokenizer (``tokenizer_path``'s, else HHEM's own folder's when it has one, else the
        foundation's) into ``self.tokenizer``; returns its folder."""
        from transformers import AutoTokenizer

        if tokenizer_path or not _has_tokenizer(self.path):
            tok_dir = foundation if foundation is not None else self.path
        else:
            tok_dir = self.path
        if not _has_tokenizer(tok_dir):
            raise FileNotFoundError(
                f"tokenizer folder {tok_dir} has no tokenizer ({' or '.join(TOKENIZER_FILES)}): "
                f"pass tokenizer_path=<local flan-t5-base folder>"
            )
        self.tokenizer = AutoTokenizer.from_pretrained(str(tok_dir), local_files_only=True)
        self.tokenizer.padding_side = "right"
        # Inputs are windowed here (see ``windows``); silence the tokenizer's own 512-token warning.
        self.tokenizer.model_max_length = sys.maxsize
        if self.tokenizer.pad_token_id is None:
            raise ValueError(f"tokenizer in {tok_dir} has no pad token")
        self.tokenizer_path = tok_dir
        return tok_dir

    def _foundation_folder(self, hhem_cfg: dict[str, Any], tokenizer_path: str | None) -> Path | None:
        """The local flan-t5-base folder: ``tokenizer_path``, else a subfolder of ``path``, else None."""
        if tokenizer_path:
            folder = Path(tokenizer_path).expanduser().resolve()
            if not folder.is_dir():
                raise FileNotFoundError(f"tokenizer_path {folder} does not exist")
            return folder
        foundation = str(hhem_cfg.get("foundation") or "google/flan-t5-base")
        for folder in (self.path / foundation.rstrip("/").split("/")[-1], self.path / "foundation"):
            if folder.is_dir():
                return folder.resolve()
        return None

    @staticmethod
    def _read_state_dict(weight_file: Path) -> dict[str, torch.Tensor]:
        if weight_file.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(weight_file))
        state = torch.load(str(weight_file), map_location="cpu", weights_only=True)
        if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
            state = state["state_dict"]
        if not isinstance(state, dict):
            raise ValueError(f"{weight_file} does not hold a state dict")
        return state

    @staticmethod
    def _load_strict(model: torch.nn.Module, state: dict[str, torch.Tensor], weight_file: Path) -> None:
        """Load HHEM's state dict into ``model``; any missing or unexpected key is an error."""
        if any(k.startswith("t5.") for k in state):
            state = {k.removeprefix("t5."): v for k, v in state.items()}
        for alias, source in _TIED.items():
            if alias not in state and source in state:
                state[alias] = state[source]
            elif source not in state and alias in state:
                state[source] = state[alias]
        expected = set(model.state_dict())
        missing = sorted(expected - set(state))
        unexpected = sorted(set(state) - expected)
        if missing or unexpected:
            parts = []
            for label, keys in (("missing", missing), ("unexpected", unexpected)):
                if keys:
                    more = f" ... ({len(keys)} in all)" if len(keys) > 20 else ""
                    parts.append(f"{label} keys: {', '.join(keys[:20])}{more}")
            raise ValueError(
                f"weights in {weight_file} do not match a T5ForTokenClassification built from its "
                f"config ({'; '.join(parts)})"
            )
        model.load_state_dict(state, strict=True)

    # ----------------------------------------------------------------------------- windowing
    def format(self, premise: str, hypothesis: str) -> str:
        """The exact model input for one premise/hypothesis pair."""
        return self.prompt.format(premise=premise, hypothesis=hypothesis)

    def _n_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=True)["input_ids"])

    def windows(self, premise: str, hypothesis: str) -> list[str]:
        """The formatted model inputs scored for this pair: one, or one per premise window."""
        return [w.text for w in self._windows(0, premise, hypothesis)]

    def _windows(self, index: int, premise: str, hypothesis: str) -> list[_Window]:
        full = self.format(premise, hypothesis)
        n_full = self._n_tokens(full)
        if n_full <= self.max_length:
            return [_Window(index, full, n_full)]
        n_empty = self._n_tokens(self.format("", hypothesis))
        budget = self.max_length - n_empty
        enc = self.tokenizer(premise, add_special_tokens=False, return_offsets_mapping=True)
        offsets: list[tuple[int, int]] = [tuple(o) for o in enc["offset_mapping"]]
        if budget < MIN_WINDOW_TOKENS or len(offsets) <= 1:
            log.warning(
                "HHEM: the hypothesis leaves %d premise tokens in a %d-token window; scoring the "
                "whole %d-token input unwindowed",
                budget,
                self.max_length,
                n_full,
            )
            return [_Window(index, full, n_full)]
        # Tokenisation is not exactly additive; shrink the budget until every window fits.
        for _ in range(8):
            spans = self._premise_spans(premise, offsets, budget)
            out = []
            for start, end in spans:
                text = self.format(premise[start:end].strip(), hypothesis)
                out.append(_Window(index, text, self._n_tokens(text)))
            excess = max(w.n_tokens for w in out) - self.max_length
            if excess <= 0 or budget - excess < MIN_WINDOW_TOKENS:
                return out
            budget -= excess
        return out

    def _premise_spans(
        self, premise: str, offsets: list[tuple[int, int]], budget: int
    ) -> list[tuple[int, int]]:
        """Character spans of overlapping premise windows of at most ``budget`` tokens.

        A window ends at the last sentence end within its second half when there is one; the next
        window starts ``overlap`` tokens before the previous end (overlap capped at half a window).
        """
        n = len(offsets)
        overlap = min(self.window_overlap, budget // 2)
        spans: list[tuple[int, int]] = []
        start = 0
        while True:
            end = min(start + budget, n)
            if end < n:
                floor = start + max(budget // 2, overlap + 1)
                for cut in range(end, floor, -1):
                    token = premise[offsets[cut - 1][0] : offsets[cut - 1][1]]
                    gap = premise[offsets[cut - 1][1] : offsets[cut][0]] if cut < n else ""
                    if token.rstrip().endswith(_SENTENCE_END) or "\n" in gap:
                        end = cut
                        break
            spans.append((offsets[start][0], offsets[end - 1][1]))
            if end >= n:
                return spans
            start = max(end - overlap, start + 1)

    # ----------------------------------------------------------------------------- scoring
    def score_texts(self, texts: Sequence[str]) -> list[float]:
        """P(class 1) for already formatted model inputs, batched and sorted by token length."""
        if not texts:
            return []
        lengths = [self._n_tokens(t) for t in texts]
        return self._score([_Window(i, t, n) for i, (t, n) in enumerate(zip(texts, lengths))])

    def _score(self, windows: Sequence[_Window]) -> list[float]:
        order = sorted(range(len(windows)), key=lambda i: windows[i].n_tokens)
        scores = [0.0] * len(windows)
        with torch.inference_mode():
            for b in range(0, len(order), self.batch_size):
                idx = order[b : b + self.batch_size]
                self._score_batch(windows, idx, scores)
                # A score on the 0.5 boundary is recomputed alone: padding and the batch's shape may
                # move float32 results in their last bits, never a verdict.
                for i in idx if len(idx) > 1 else ():
                    if on_boundary(scores[i]):
                        self._score_batch(windows, [i], scores)
        return scores

    def _score_batch(self, windows: Sequence[_Window], idx: Sequence[int], scores: list[float]) -> None:
        """P(consistent) of the windows ``idx`` (one padded forward pass), into ``scores``."""
        enc = self.tokenizer(
            [windows[i].text for i in idx],
            padding="longest",
            truncation=False,
            return_tensors="pt",
        )
        # The attention mask comes from the tokenizer: the prompt's leading "<pad>" is a real
        # token (id = pad id) and must stay visible.
        logits = self.model(
            input_ids=enc["input_ids"].to(self.device),
            attention_mask=enc["attention_mask"].to(self.device),
        ).logits[:, 0, :]
        probs = torch.softmax(logits.float(), dim=-1)[:, 1].cpu().tolist()
        for i, p in zip(idx, probs):
            scores[i] = float(p)

    def classify(self, requests: Sequence[Classify]) -> list[float]:
        """P(hypothesis supported by premise) per request: the max over its premise windows."""
        windows: list[_Window] = []
        for i, req in enumerate(requests):
            windows.extend(self._windows(i, req.premise, req.hypothesis))
        scores = self._score(windows)
        best = [0.0] * len(requests)
        seen = [False] * len(requests)
        for w, s in zip(windows, scores):
            if not seen[w.request] or s > best[w.request]:
                best[w.request] = s
                seen[w.request] = True
        return best
