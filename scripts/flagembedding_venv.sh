#!/usr/bin/env bash
# Builds .flagembedding-venv: FlagEmbedding (BGE-M3's reference implementation) on top of the product's
# own packages, for the BGE-M3 parity test (tests/retrieval/test_retrieval_m3.py runs
# tests/retrieval/flagembedding_side.py with it when FlagEmbedding is not importable in the test
# interpreter itself).
# The venv reads .venv's site-packages through a .pth file, so torch, transformers and tokenizers are the
# very same installs; FlagEmbedding and the two packages its import needs that .venv lacks are installed
# with --no-deps, so pip never pulls another torch. FlagEmbedding is not a dependency of offline-eval.
# Usage: bash scripts/flagembedding_venv.sh [PYTHON]   (default: the interpreter .venv was made from)
set -euo pipefail
cd "$(dirname "$0")/.."
main_py=${MAIN_PYTHON:-.venv/bin/python}
py=${1:-$("$main_py" -c 'import sys; print(sys._base_executable)')}
venv=.flagembedding-venv
site=$("$main_py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
[[ -x $venv/bin/python ]] || "$py" -m venv "$venv"
own=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$site" > "$own/offline_eval_venv.pth"
"$venv/bin/python" -m pip install -q --no-deps "FlagEmbedding==1.4.2" "peft==0.21.2" "sentencepiece==0.2.3" \
  "accelerate==1.15.0" "psutil" "pyyaml"  # transformers.TrainingArguments, which FlagEmbedding imports, needs accelerate
rm -f "$venv/.ready"
HF_HUB_OFFLINE=1 "$venv/bin/python" - <<'PY'
import importlib.metadata as m
import FlagEmbedding, torch, transformers  # noqa: F401  (fails here, not in the test, if the import breaks)
for p in ("FlagEmbedding", "torch", "transformers", "tokenizers", "peft"):
    print(p, m.version(p))
PY
touch "$venv/.ready"  # the parity test uses the venv only once this exists
