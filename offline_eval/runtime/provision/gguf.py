"""A GGUF causal LM as a transformers folder: dequantised weights, the GGUF's chat template kept
(``offline-eval models import-gguf``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["SMOLLM2_CHAT_TEMPLATE", "ensure_chat_template", "import_gguf"]


# SmolLM2's own template (ChatML with a default system prompt), used when a GGUF carries none.
SMOLLM2_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def ensure_chat_template(tokenizer: Any) -> bool:
    """Give a ChatML tokenizer (``<|im_start|>`` in its vocabulary) the SmolLM2 template when it has
    none. Returns whether the tokenizer has a chat template afterwards."""
    if getattr(tokenizer, "chat_template", None):
        return True
    if "<|im_start|>" in tokenizer.get_vocab():
        tokenizer.chat_template = SMOLLM2_CHAT_TEMPLATE
        return True
    return False


def import_gguf(gguf_file: Path | str, dest: Path | str, dtype: str = "bfloat16", overwrite: bool = False) -> Path:
    """Convert a GGUF causal LM into a transformers folder (safetensors, dequantised to ``dtype``).

    The config comes from the GGUF metadata (without a quantization_config), the weights are
    dequantised by transformers' GGUF reader straight into a freshly built model, and the tokenizer is
    saved with the GGUF's chat template (a ChatML one is added when it has none). Works without
    ``accelerate`` (which ``from_pretrained(gguf_file=)`` requires). Peak memory is about twice the
    model in ``dtype``.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    gguf_path = Path(gguf_file).expanduser().absolute()
    out = Path(dest).expanduser().absolute()
    if not gguf_path.is_file():
        raise FileNotFoundError(f"GGUF file {gguf_path} not found")
    if (out / "config.json").exists() and not overwrite:
        raise FileExistsError(f"{out} already holds a model (config.json); choose another folder")
    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise ValueError(f"unknown dtype '{dtype}'")
    folder, name = str(gguf_path.parent), gguf_path.name

    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    tensors = load_gguf_checkpoint(str(gguf_path), return_tensors=True, model_to_load=model, torch_dtype=torch_dtype)[
        "tensors"
    ]
    result = model.load_state_dict(tensors, strict=False)
    tied = {"lm_head.weight"} if getattr(config, "tie_word_embeddings", False) else set()
    missing = set(result.missing_keys) - tied
    if missing or result.unexpected_keys:
        raise RuntimeError(
            f"{gguf_path.name}: weights do not fit the {config.model_type} architecture "
            f"(missing {sorted(missing)[:5]}, unexpected {sorted(result.unexpected_keys)[:5]})"
        )
    if tied:
        model.tie_weights()
    del tensors

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    ensure_chat_template(tokenizer)
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
