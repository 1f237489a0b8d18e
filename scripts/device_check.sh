#!/usr/bin/env bash
# The GPU check (issue #17), one command, run from the source tree on the machine's own python/torch.
#
#   bash scripts/device_check.sh --prepare                  # here: copy the few pure-Python packages the
#                                                           # device machine lacks into .device-site/
#   bash scripts/device_check.sh OUT_DIR --device cuda:0    # there (carry .device-site); about 8 minutes on an H200
#   bash scripts/device_check.sh OUT_DIR --tiny --device cpu --rows 12   # the rehearsal CI runs
#
# Writes OUT_DIR/device_check.json and OUT_DIR/device_check.md; see scripts/device_check.py for what
# is measured. Environment: PYTHON (default python3).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
site=$root/.device-site
py=${PYTHON:-python3}
if [[ ${1:-} == --prepare ]]; then
  src=${2:-$root/.venv/bin/python}
  mkdir -p "$site"
  for module in pysbd; do  # what a run imports beyond torch, transformers, sentence-transformers,
    # tokenizers, safetensors, numpy, pyarrow, rich and tqdm (all on the device machine)
    dir=$("$src" -c "import $module, os; print(os.path.dirname($module.__file__))")
    rm -rf "${site:?}/$module" && cp -r "$dir" "$site/$module"
  done
  echo "device_check: $(du -sh "$site" | cut -f1) in $site; carry it along: run(..., carry=['.device-site'])"
  exit 0
fi
[[ $# -ge 1 && ${1:-} != -* ]] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
export PYTHONPATH=$root:$site${PYTHONPATH:+:$PYTHONPATH}
exec "$py" "$root/scripts/device_check.py" "$@"
