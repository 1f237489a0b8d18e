"""The smoke test of a judge folder: it loads with transformers and answers one question through its
chat template."""

from __future__ import annotations

from pathlib import Path

__all__ = ["smoke_generate"]


def smoke_generate(folder: Path, prompt: str = "What is the capital of France? Answer in one sentence.",
                   max_new_tokens: int = 16) -> tuple[str, bool]:
    """Load a judge folder with transformers, greedily answer ``prompt`` through the chat template.

    Returns (generated text, whether the tokenizer has a chat template). Raises if it does not load.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    has_template = bool(getattr(tokenizer, "chat_template", None))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    model.eval()
    if has_template:
        inputs = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
    else:
        inputs = tokenizer(prompt, return_tensors="pt")
    with torch.no_grad():
        output = model.generate(
            **inputs, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id
        )
    text = tokenizer.decode(output[0][inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    return text.strip(), has_template
