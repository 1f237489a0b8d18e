#!/usr/bin/env bash
# GPU smoke test: one `offline-eval run` over examples/sample.jsonl with the vLLM judge, the HHEM
# verifier and a local embedder on cuda:0, then the summary.
#
# Usage: scripts/gpu_smoke.sh JUDGE_DIR HHEM_DIR FLAN_T5_DIR EMBEDDER_DIR
#   JUDGE_DIR     transformers folder of the judge (e.g. Qwen2.5-7B-Instruct)
#   HHEM_DIR      vectara/hallucination_evaluation_model folder (HHEM-2.1-Open)
#   FLAN_T5_DIR   google/flan-t5-base folder with its config and tokenizer (weights not needed)
#   EMBEDDER_DIR  sentence-transformers folder (e.g. bge-m3)
# Environment: METRICS (default below), OUT (default: a new temporary folder), BATCH_SIZE,
#   OFFLINE_EVAL (the command to run, default: offline-eval, else python -m offline_eval.cli).
# Needs an NVIDIA GPU and `pip install 'offline-eval[vllm]'`.
set -euo pipefail

usage() {
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[[ $# -eq 4 ]] || usage
case $1 in -h|--help) usage ;; esac

judge=$1 hhem=$2 flan=$3 embedder=$4
for dir in "$judge" "$hhem" "$flan" "$embedder"; do
  if [[ ! -d $dir ]]; then
    echo "gpu_smoke: $dir is not a folder" >&2
    usage
  fi
done
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >&2 || true

root=$(cd "$(dirname "$0")/.." && pwd)
dataset=$root/examples/sample.jsonl
[[ -f $dataset ]] || { echo "gpu_smoke: $dataset not found" >&2; exit 1; }
metrics=${METRICS:-faithfulness,answer_relevancy,context_precision,context_recall,answer_correctness}
out=${OUT:-$(mktemp -d -t offline-eval-gpu-smoke.XXXXXX)}

if [[ -n ${OFFLINE_EVAL:-} ]]; then
  read -r -a cmd <<<"$OFFLINE_EVAL"
elif command -v offline-eval >/dev/null; then
  cmd=(offline-eval)
else
  cmd=(python -m offline_eval.cli)
fi

start=$(date +%s)
"${cmd[@]}" run \
  --dataset "$dataset" \
  --metrics "$metrics" \
  --profile gpu \
  --judge "$judge" --judge-backend vllm \
  --verifier hhem --hhem "$hhem" --hhem-tokenizer "$flan" \
  --embedder "$embedder" \
  --device cuda:0 \
  ${BATCH_SIZE:+--batch-size "$BATCH_SIZE"} \
  --output "$out"
echo "gpu_smoke: run took $(( $(date +%s) - start ))s; output in $out" >&2

# The run prints its summary; show the summary file too when it wrote one.
for f in "$out"/summary.json "$out"/summary.md "$out"/summary.txt; do
  if [[ -f $f ]]; then
    echo "== $f"
    cat "$f"
  fi
done
