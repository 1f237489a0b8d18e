"""The GPU check's CPU rehearsal (issue #17): scripts/device_check.sh on tiny shapes writes the table the
GPU run will write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_device_check_rehearsal_writes_its_table(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "device_check.sh"), str(out), "--tiny", "--device", "cpu", "--rows", "12",
         "--per-row-rows", "6", "--batch-sizes", "4,12", "--max-tokens", "8"],
        capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    payload = json.loads((out / "device_check.json").read_text())
    assert [(r["mode"], r["batch_size"], r["rows"]) for r in payload["results"]] == [
        ("batched", 4, 12), ("batched", 12, 12), ("batched", 4, 6), ("per-row", 4, 6)]
    assert all(r["rows_per_s"] > 0 and 0 <= r["outside_models_share"] <= 1 for r in payload["results"])
    table = (out / "device_check.md").read_text()
    assert "| mode | batch size | rows | wall s | rows/s | peak device GiB | outside model calls |" in table
    assert "Stage batching vs per-row at 6 rows:" in table


def test_device_check_refuses_a_missing_gpu(tmp_path):
    import pytest
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    done = subprocess.run(["bash", str(REPO / "scripts" / "device_check.sh"), str(tmp_path), "--device", "cuda:0"],
                          capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable}, timeout=120)
    assert done.returncode == 2 and "no CUDA device here" in done.stderr


def test_device_check_builds_models_from_every_key_of_the_real_shapes(tmp_path):
    """The real shapes size each model's vocabulary apart from its tokenizer's; the first GPU run (#32)
    broke on that while the tiny rehearsal, which names no shape key, passed. Same keys, small values."""
    sys.path.insert(0, str(REPO / "scripts"))
    import device_check
    from transformers import AutoConfig, AutoTokenizer

    small = {"judge": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                           num_key_value_heads=2, vocab_size=1200, max_position_embeddings=2048,
                           initializer_range=0.02),
             "hhem": dict(d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4, vocab_size=900),
             "embedder": dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
                              vocab_size=1100, max_position_embeddings=514),
             "judge_vocab": 500}
    real = device_check.SHAPES["real"]
    assert {k: set(v) if isinstance(v, dict) else None for k, v in small.items()} == {
        k: set(v) if isinstance(v, dict) else None for k, v in real.items()}
    corpus = device_check.dataset(4, tmp_path / "data.jsonl")
    manifest = device_check.build_models(tmp_path / "models", small, corpus, "cpu")
    assert manifest.is_file()
    judge = tmp_path / "models" / "judge"
    assert AutoConfig.from_pretrained(judge).vocab_size == 1200
    assert len(AutoTokenizer.from_pretrained(judge)) <= 500 + 10  # trained vocabulary plus special tokens
    assert AutoConfig.from_pretrained(tmp_path / "models" / "hhem").vocab_size == 900
