#!/usr/bin/env bash
# Builds benchmarks/vs_ragas/.venv: the latest Ragas 0.4.x with the same torch / transformers /
# sentence-transformers versions as the product's environment, so both tools run the same kernels.
# Pins: ragas 0.4.3 imports langchain_community.chat_models.vertexai, which langchain-community 0.4
# removed (ModuleNotFoundError at `import ragas`), so the LangChain 0.3 line is pinned.
# Ragas is never a dependency of offline-eval: it lives in this separate, git-ignored venv only.
# Usage: bash benchmarks/vs_ragas/setup_venv.sh [PYTHON]   (default: python3.11 or python3)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${1:-$(command -v python3.11 || command -v python3)}
main_py=${MAIN_PYTHON:-$here/../../.venv/bin/python}
venv=$here/.venv
# Same versions as the product's venv where it has them (fair kernels), else known-good pins.
ver() { "$main_py" -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null || echo "$2"; }
torch_v=$(ver torch 2.13.0+cpu)
tf_v=$(ver transformers 5.19.0)
st_v=$(ver sentence-transformers 6.2.0)
[[ -x $venv/bin/python ]] || "$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q "torch==$torch_v" "transformers==$tf_v" "sentence-transformers==$st_v" \
  "ragas>=0.4,<0.5" "langchain-community<0.4" "langchain-huggingface<1" "langchain-core<1" "langchain<1"
"$venv/bin/python" - <<'PY'
import importlib.metadata as m
for p in ("ragas", "langchain-core", "langchain-huggingface", "langchain-community", "torch", "transformers",
          "sentence-transformers"):
    print(p, m.version(p))
PY
