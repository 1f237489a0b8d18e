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
