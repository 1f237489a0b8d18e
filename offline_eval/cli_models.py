"""The model flags every model-using command shares (`run`, `generate`, `agreement`, `retrieval --answer`).

Only argparse is imported here, so registering a command stays cheap.
"""

from __future__ import annotations

import argparse
from pathlib import Path

JUDGE_BACKENDS = ["vllm", "transformers", "openai", "scripted"]


def add_model_arguments(group: argparse._ArgumentGroup, *, verifier: bool = True, embedder: bool = True) -> None:
    """--profile, --models-dir, the judge flags, and (when asked) the verifier and embedder flags."""
    group.add_argument("--profile", help="gpu, cpu, starter or a manifest path (default: the first provisioned "
                                         "of gpu (with CUDA), cpu, starter)")
    group.add_argument("--models-dir", type=Path, help="root of the profile's model folders")
    group.add_argument("--judge", help="judge model folder (or base URL with --judge-backend openai)")
    group.add_argument("--judge-backend", choices=JUDGE_BACKENDS)
    group.add_argument("--judge-model", help="served model name for --judge-backend openai")
    group.add_argument("--judge-batch-size", type=int, help="judge batch size (default: --batch-size; "
                                                            "vLLM: the whole stage)")
    if verifier:
        group.add_argument("--verifier", choices=["hhem", "judge"], help="who verifies claims against contexts")
        group.add_argument("--hhem", help="HHEM-2.1-Open folder")
        group.add_argument("--hhem-tokenizer", help="flan-t5-base folder (tokenizer + config) for HHEM")
    if embedder:
        group.add_argument("--embedder", help="sentence-transformers model folder")
    group.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's choice; on a "
                                                   "CPU shared with other jobs, 1 is often much faster)")


def apply_threads(args: argparse.Namespace) -> None:
    """Set torch's CPU thread count from ``--threads`` (torch is imported only when it is given)."""
    if getattr(args, "threads", None):
        import torch

        torch.set_num_threads(args.threads)
