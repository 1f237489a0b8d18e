#!/usr/bin/env bash
# Installs what the tests need (a virtualenv in .venv, the package with its dev extra, the side venvs of
# the FlagEmbedding and vLLM contract tests, Debian's chromium for the report test), then runs the whole
# suite with no network: inside a fresh network namespace holding only loopback when the machine allows
# one (root, `unshare`), so a test that reached for the network would fail, and a local Ray cluster binds
# to 127.0.0.1.
# Each step says what it sets up, how large it is and how long it takes before it starts: the first run
# spends minutes on gigabytes (docs/measurements.md). Pip's and apt's output goes to a log per step, shown
# by path when the step fails: their deprecation notices would otherwise be all a reader saw for minutes.
# Safe to rerun: every install step is skipped, and says so, when already done.
# Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
steps=5
logs=${TMPDIR:-/tmp}/offline-eval-test-setup
mkdir -p "$logs"

say() {
  echo "scripts/test.sh: $*" >&2
}

# logged LOG COMMAND...: runs COMMAND with its output added to LOG; on failure says where the output is
logged() {
  local log=$1
  shift
  if ! "$@" >>"$log" 2>&1; then
    say "failed: $*; its output: $log"
    return 1
  fi
}

# optional NAME CONSEQUENCE COMMAND...: a step the suite can do without, its output in NAME's log; when it
# fails, says which tests will be skipped and goes on
optional() {
  local log=$logs/$1.log consequence=$2
  shift 2
  : >"$log"
  logged "$log" "$@" || say "$consequence"
}

if [[ -x .venv/bin/python ]] && .venv/bin/python -c "import offline_eval, pytest, datasets, ranx, ray" 2>/dev/null \
   && [[ ! pyproject.toml -nt .venv/.installed ]]; then
  say "step 1 of $steps: .venv holds the package with its dev and starter extras: skipped"
else
  say "step 1 of $steps: installing the package with its dev and starter extras into .venv" \
      "(~2.7 GB: torch, transformers, Ray; ~2 min) ..."
  log=$logs/venv.log
  : >"$log"
  [[ -x .venv/bin/python ]] || logged "$log" "$PY" -m venv .venv
  logged "$log" .venv/bin/python -m pip install -q --upgrade pip
  logged "$log" .venv/bin/python -m pip install -q -e '.[dev,starter]'
  touch .venv/.installed
fi

if [[ -f .flagembedding-venv/.ready ]]; then
  say "step 2 of $steps: .flagembedding-venv (FlagEmbedding, for the BGE-M3 parity test) is built: skipped"
else  # FlagEmbedding is never a dependency
  say "step 2 of $steps: building .flagembedding-venv, FlagEmbedding for the BGE-M3 parity test" \
      "(~45 MB, over .venv's packages; under a minute) ..."
  optional flagembedding "FlagEmbedding could not be installed; the BGE-M3 parity test against it will be skipped" \
    bash scripts/flagembedding_venv.sh
fi

# the real vllm==0.32.0 on a CPU torch, for the vLLM contract tests (never a dependency): a venv cached
# outside the checkout, built once per machine and Python version
vllm_venv=$(bash scripts/vllm_venv.sh --path 2>/dev/null) || vllm_venv=${HOME}/.cache/offline-eval
if [[ -f $vllm_venv/.ready && -x $vllm_venv/bin/python ]]; then
  say "step 3 of $steps: the vLLM contract-test venv $vllm_venv is built: skipped"
else
  say "step 3 of $steps: building the vLLM contract-test venv, the real vLLM on a CPU torch, in $vllm_venv" \
      "(~6 GB, ~2.5 min, once per machine) ..."
  optional vllm "the vllm side venv could not be built; the vLLM contract tests will be skipped" \
    bash scripts/vllm_venv.sh
fi

if command -v chromium >/dev/null 2>&1; then
  say "step 4 of $steps: chromium (for the report's browser test) is installed: skipped"
elif [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
  say "step 4 of $steps: installing Debian's chromium for the report's browser test" \
      "(~150 MB download, ~530 MB installed; ~1-2 min) ..."
  optional chromium "chromium could not be installed; the browser test will be skipped" \
    sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium'
else
  say "step 4 of $steps: chromium is missing and installing it needs root and apt-get: skipped;" \
      "the browser test will be skipped"
fi

say "step 5 of $steps: running the tests (a full run: ~9-20 min on 2 cores) ..."
if command -v ip >/dev/null 2>&1 && unshare -n true 2>/dev/null; then
  exec unshare -n sh -c 'ip link set lo up 2>/dev/null || true; exec .venv/bin/python -m pytest -q "$@"' sh "$@"
fi
say "no network namespace available; running with the machine's network"
exec .venv/bin/python -m pytest -q "$@"
