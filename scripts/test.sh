#!/usr/bin/env bash
# Installs what the tests need (a virtualenv in .venv, the package with its dev extra, Debian's
# chromium for the report test), then runs the whole suite with no network: inside a fresh network
# namespace holding only loopback when the machine allows one (root, `unshare`), so a test that
# reached for the network would fail, and a local Ray cluster binds to 127.0.0.1.
# Safe to rerun: every install step is skipped when already done. Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import offline_eval, pytest, datasets, ranx, ray" 2>/dev/null \
   || [[ pyproject.toml -nt .venv/.installed ]]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev,starter]'
  touch .venv/.installed
fi
if [[ ! -f .flagembedding-venv/.ready ]]; then  # FlagEmbedding, for the BGE-M3 parity test (never a dependency)
  bash scripts/flagembedding_venv.sh >/dev/null 2>&1 \
    || echo "scripts/test.sh: FlagEmbedding could not be installed; the BGE-M3 parity test against it will be skipped" >&2
fi
# the real vllm==0.32.0 on a CPU torch, for the vLLM contract tests (never a dependency): a ~6 GB venv cached
# outside the checkout, built once (~2.5 min); a no-op when built
vllm_log=${TMPDIR:-/tmp}/offline-eval-vllm-venv.log
bash scripts/vllm_venv.sh >"$vllm_log" 2>&1 \
  || echo "scripts/test.sh: the vllm side venv could not be built (log: $vllm_log); the vLLM contract tests will be skipped" >&2
if ! command -v chromium >/dev/null 2>&1 && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "scripts/test.sh: chromium could not be installed; the browser test will be skipped" >&2
fi
if command -v ip >/dev/null 2>&1 && unshare -n true 2>/dev/null; then
  exec unshare -n sh -c 'ip link set lo up 2>/dev/null || true; exec .venv/bin/python -m pytest -q "$@"' sh "$@"
fi
echo "scripts/test.sh: no network namespace available; running with the machine's network" >&2
exec .venv/bin/python -m pytest -q "$@"
