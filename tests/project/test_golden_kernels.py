"""The stored scores hold with other kernels (issue #33): ``tests/project/test_golden.py``'s default setting rerun
in a fresh process whose torch, oneDNN and MKL are restricted to AVX2, as a CPU without AVX-512 (or an
AMD one, where MKL takes other paths) would run them. On a CPU that has no more than AVX2 this is the
same run as the golden test itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


def test_the_stored_scores_hold_with_the_kernels_restricted_to_avx2(tmp_path):
    env = {**os.environ, **AVX2, "OFFLINE_EVAL_HASHES": str(tmp_path / "memo.sqlite")}
    env.pop("OFFLINE_EVAL_WRITE_GOLDEN", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/project/test_golden.py::test_scores_on_the_example_data_match_the_stored_file[default]",
                           "--basetemp", str(tmp_path / "t")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 passed" in done.stdout
