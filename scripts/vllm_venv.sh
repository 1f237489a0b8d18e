#!/usr/bin/env bash
# Builds the side venv for the vLLM contract tests (tests/runtime/test_vllm_contract.py runs
# tests/runtime/vllm_side.py in it):
# the real vllm==0.32.0 and the project with its dependencies, on a CPU torch, so vLLM's own classes
# (EngineArgs, SamplingParams, RequestOutput, ...) can check what the backend builds without a GPU.
# The venv is large (~6 GB) and independent of the checkout, so it lives outside it, cached and keyed by the vLLM and
# Python versions: ${OFFLINE_EVAL_VLLM_VENV:-~/.cache/offline-eval/vllm-0.32.0-py3.X}. The side script puts its own
# checkout first on sys.path, so a venv built from one clone tests any other.
# torch is pinned to the CPU build (2.13.0+cpu, what vllm 0.32.0 requires, minus CUDA): pip then never pulls the CUDA
# torch and its nvidia-* libraries. It must be findable by pip: this machine's pip settings carry it in
# find-links; elsewhere set OFFLINE_EVAL_TORCH_INDEX=https://download.pytorch.org/whl/cpu.
# torchvision, torchaudio and torchcodec come along as CUDA builds that cannot load against a CPU torch and break
# `import vllm` (inside transformers); nothing the tests touch needs them, so they are removed.
# Idempotent: returns at once when the venv's .ready marker exists (written last). Prints the venv's path.
# Usage: bash scripts/vllm_venv.sh [--path] [PYTHON]   (default: the interpreter .venv was made from;
# --path: print the venv's path and build nothing, for scripts/test.sh to say whether it is built)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
path_only=false
if [[ ${1:-} == --path ]]; then
  path_only=true
  shift
fi
vllm_version=0.32.0
torch_version=2.13.0+cpu
main_py=${MAIN_PYTHON:-.venv/bin/python}
if [[ $# -ge 1 ]]; then
  py=$1
elif [[ -x $main_py ]]; then
  py=$("$main_py" -c 'import sys; print(sys._base_executable)')
else
  py=python3
fi
pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
venv=${OFFLINE_EVAL_VLLM_VENV:-${HOME}/.cache/offline-eval/vllm-$vllm_version-py$pyver}
if $path_only || [[ -f $venv/.ready && -x $venv/bin/python ]]; then
  echo "$venv"
  exit 0
fi
mkdir -p "$(dirname "$venv")"
[[ -x $venv/bin/python ]] || "$py" -m venv "$venv"
rm -f "$venv/.ready"
index=()
[[ -n ${OFFLINE_EVAL_TORCH_INDEX:-} ]] && index=(--extra-index-url "$OFFLINE_EVAL_TORCH_INDEX")
# One resolve for vLLM and the project's own requirements: a conflict between them fails here, not in a user's install.
# --no-cache-dir: the wheels are ~3 GB, and a second copy of them in pip's cache would be of no use to CI.
"$venv/bin/python" -m pip install -q --no-cache-dir "${index[@]}" \
  "torch==$torch_version" "vllm==$vllm_version" -e "$repo"
"$venv/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec
HF_HUB_OFFLINE=1 "$venv/bin/python" - "$vllm_version" <<'PY'
import importlib.metadata as m
import sys

import torch
import vllm  # noqa: F401  (fails here, not in the tests, if the import breaks)
from vllm import EngineArgs, SamplingParams  # noqa: F401
from vllm.logprobs import FlatLogprobs, Logprob  # noqa: F401
from vllm.outputs import CompletionOutput, RequestOutput  # noqa: F401
from vllm.sampling_params import StructuredOutputsParams  # noqa: F401

import offline_eval.runtime.vllm_judge  # noqa: F401

assert m.version("vllm") == sys.argv[1], m.version("vllm")
assert torch.version.cuda is None, f"a CUDA torch was installed: {torch.__version__}"
cuda = sorted(d.metadata["Name"] for d in m.distributions() if d.metadata["Name"].lower().startswith("nvidia-"))
for p in ("vllm", "torch", "transformers", "tokenizers", "xgrammar"):
    print(p, m.version(p))
print("nvidia-* packages:", ", ".join(cuda) or "none")
PY
touch "$venv/.ready"  # the contract tests use the venv only once this exists
echo "$venv"
