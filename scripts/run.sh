#!/usr/bin/env bash
# The main job: train configs/default.yaml on the CPU (a byte-level Gated DeltaNet on the Python
# standard library sources, about 10 minutes on 2 cores), then evaluate it, sample from it and
# plot its loss curve. Runs GDN_BIN, else build-run/gdn (`make run`), else build/gdn (`make
# test`, scripts/setup.sh). Extra arguments go to `gdn train` (e.g. --set train.steps=100).
set -euo pipefail
cd "$(dirname "$0")/.."
# Threads sleep rather than spin between parallel regions: far faster on a shared machine.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
gdn=${GDN_BIN:-}
if [ -z "$gdn" ]; then
  gdn=build-run/gdn
  [ -x "$gdn" ] || gdn=build/gdn
fi
[ -x "$gdn" ] || { echo "gdn: $gdn not found: run \`make run\` (or scripts/setup.sh)" >&2; exit 1; }
run_dir=runs/default
config=configs/default.yaml
if [ -f "$run_dir/latest" ]; then
  echo "gdn: continuing $run_dir (delete it to start over)"
  "$gdn" train "$config" --resume "$run_dir" "$@"
else
  # No checkpoint to continue: what a run stopped before its first save left there (metrics
  # lines, config.yaml) cannot be resumed, so start over in place (data/ is kept).
  "$gdn" train "$config" --set train.out_dir="$run_dir" --overwrite "$@"
fi
"$gdn" eval "$run_dir"
"$gdn" plot "$run_dir"
echo "--- a sample (temperature 0.8, top-k 40):"
"$gdn" generate "$run_dir" --prompt "def " --max-tokens 300 --temperature 0.8 --top-k 40 --seed 1
