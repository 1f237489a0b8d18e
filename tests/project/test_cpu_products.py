"""The int8 products `benchmarks/cpu_products.py` tries for issue #31: exact in a row's own terms, so a row
gets the same bits in any batch, and near the bfloat16 product they stand in for."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from cpu_products import int8_linear  # noqa: E402


def test_int8_rows_give_a_row_the_same_bits_in_any_batch():
    torch.manual_seed(0)
    linear = torch.nn.Linear(96, 80, bias=True).to(torch.bfloat16)
    forward = int8_linear(linear)
    x = torch.randn(3, 13, 96).to(torch.bfloat16)
    whole = forward(x)
    assert whole.shape == (3, 13, 80) and whole.dtype == torch.bfloat16
    rows = x.reshape(-1, 96)
    for count in (1, 2, 5, 16, 17, 39):
        assert torch.equal(forward(rows[:count]), whole.reshape(-1, 80)[:count])


def test_int8_rows_stay_near_the_bfloat16_product():
    torch.manual_seed(1)
    linear = torch.nn.Linear(256, 64, bias=False).to(torch.bfloat16)
    x = torch.randn(32, 256).to(torch.bfloat16)
    exact = linear(x).float()
    error = (int8_linear(linear)(x).float() - exact).abs().mean() / exact.abs().mean()
    assert 0 < error < 0.02  # quantization moves every product a little, none far
