"""Judge prompts: one template per task, in English and Chinese, each with a JSON schema.

A prompt renders to chat messages ((role, content), ...). Few-shot examples sit inside the user
message so every chat template treats them alike and the cache key stays a pure function of input.
"""

from offline_eval.prompts.base import Prompt

__all__ = ["Prompt"]
